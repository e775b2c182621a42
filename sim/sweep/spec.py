"""Sweep files: which design points to simulate (TOML, validated with pydantic before anything runs).

A sweep file names its inputs and its axes::

    trace = "traces/demo.npz"          # the trace every point simulates (path relative to this file)

    [axes]                             # the cartesian product of these lists is the set of points
    config = ["tiny-8x8", "kaleido-16nm-128x128"]   # presets or config TOML files
    vector_lanes = [16, 64]            # any accelerator config key (hw.config.AcceleratorConfig)
                                       # overrides the preset's value
    theta_index = [0, 1]               # decision traces: which stored threshold pair
    tech = ["16nm", "45nm"]            # energy table
    dispatcher = [true, false]         # with / without the data dispatcher
    trace = ["a.npz", "b.npz"]         # traces as an axis: models, resolutions, workloads

    [fixed]                            # (optional) the same value for every point
    dram_gbps = 64.0

    [[points]]                         # (optional) listed points, run after the product's
    config = "tiny-8x8"
    array_rows = 16

Workloads (`kaleido workload ...` files: schedulers, multi-device runs) sweep the same way, each point
timed by `sim.workload.simulate.simulate_workload` as ``kaleido simulate W.npz`` does::

    workload = "ditango-{devices}.npz"  # instead of trace; {devices} is filled in from the point
    [axes]
    devices = [8, 16, 32]              # device count: one workload file per count (generated for it)
    config = ["kaleido-16nm-128x128", "a100"]   # Kaleido chips (preset/TOML + overrides) or A100s
    reuse = ["0.5,0.2", "0.8,0.1"]     # synthetic decisions on Kaleido chips (`--reuse`); none: dense
    seed = [0]                         # their seed

A ``workload`` axis lists workloads (models, resolutions, schedulers); ``trace`` and ``workload``
may both be axes values of different listed points, but one point simulates one of them.
``theta_index`` and ``dispatcher`` apply to trace points, ``devices``, ``reuse`` and ``seed`` to
workload points (setting one on the other kind is an error naming the key).

Every axis or point key is one of `POINT_KEYS` or a config key. `load_sweep` builds every point and
validates it completely (config built and checked by `hw.config.config_from_dict`, trace file present,
energy table loadable, theta index a non-negative integer; a workload file present, a workload, and
generated for the point's device count; synthetic-decision shares valid) and raises `SweepError` naming the key on
the first problem, so a bad sweep file fails before any task is started. Points keep file order:
product first (the last axis varies fastest, axes in file order), then listed points.
"""

from __future__ import annotations

import itertools
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from hw.config import AcceleratorConfig, ConfigError, config_from_dict, load_config

#: Keys of a point that are not config keys: the trace file, preset/TOML config, stored-theta index,
#: energy table, dispatcher on/off; for workload points the workload file, device count, synthetic
#: decisions ('r,p' or 'r,p,HxW,q', as `kaleido simulate --reuse`) and their seed.
POINT_KEYS = ("trace", "config", "theta_index", "tech", "dispatcher", "workload", "devices", "reuse", "seed")
#: Point keys that apply to trace points only / to workload points only.
TRACE_ONLY_KEYS = ("theta_index", "dispatcher")
WORKLOAD_ONLY_KEYS = ("devices", "reuse", "seed")
#: Config keys a sweep may not set: the name is the base config's, the description free text.
FORBIDDEN_CONFIG_KEYS = ("name", "description")
#: Defaults of the point keys (those of `kaleido simulate`).
DEFAULTS = {"config": "kaleido-16nm-128x128", "theta_index": 0, "tech": None, "dispatcher": True,
            "devices": None, "reuse": None, "seed": 0}
#: The workload-file placeholder a ``devices`` axis fills in (``workload = "ditango-{devices}.npz"``).
DEVICES_FIELD = "{devices}"
#: ``config`` value of a workload point on A100s (`sim.workload.device.A100Device`, roofline).
A100 = "a100"

Scalar = StrictBool | StrictInt | StrictFloat | StrictStr


class SweepError(ValueError):
    """A sweep file is unreadable or invalid; the message names the file and the key."""


class _SweepFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trace: StrictStr | None = None
    workload: StrictStr | None = None
    name: StrictStr = ""
    axes: dict[str, list[Scalar]] = {}
    fixed: dict[str, Scalar | list[Scalar]] = {}
    points: list[dict[str, Scalar | list[Scalar]]] = []


def config_keys() -> tuple[str, ...]:
    """Config keys a sweep may vary (every `AcceleratorConfig` field but `FORBIDDEN_CONFIG_KEYS`)."""
    return tuple(k for k in AcceleratorConfig.model_fields if k not in FORBIDDEN_CONFIG_KEYS)


@dataclass(frozen=True)
class Point:
    """One design point, fully resolved.

    Attributes:
        index: position in the sweep (0-based; the table's row order).
        values: the point's axis, fixed and listed values as written in the sweep file (the table's
            key columns), key -> scalar.
        trace: absolute trace path (None for a workload point).
        config: the validated accelerator config (preset or TOML with the overrides applied); None for a
            workload point on A100s (``config = "a100"``).
        theta_index, tech, dispatcher: as `sim.engines.model.simulate_trace` takes them.
        workload, devices, reuse, seed: a workload point (`sim.workload.simulate.simulate_workload` on
            ``devices`` chips, synthetic decisions ``reuse`` seeded by ``seed``): absolute path of the
            workload file, whose device count is ``devices``.
    """

    index: int
    values: dict
    trace: str | None
    config: AcceleratorConfig | None
    theta_index: int = 0
    tech: str | None = None
    dispatcher: bool = True
    workload: str | None = None
    devices: int = 1
    reuse: str | None = None
    seed: int = 0

    @property
    def kind(self) -> str:
        """``"trace"`` (`sim.engines.model.simulate_trace`) or ``"workload"`` (`sim.workload.simulate`)."""
        return "workload" if self.workload is not None else "trace"


@dataclass
class Sweep:
    """A loaded sweep: its source file, key columns (in order) and points."""

    path: Path
    name: str
    columns: list[str]
    points: list[Point] = field(default_factory=list)


def _fail(path: Path, key: str, msg: str) -> SweepError:
    return SweepError(f"sweep file {path}: {key}: {msg}")


def _check_key(path: Path, where: str, key: str) -> None:
    if key in POINT_KEYS or key in config_keys():
        return
    hint = " (the config's name comes from its preset)" if key in FORBIDDEN_CONFIG_KEYS else ""
    raise _fail(path, f"{where}.{key}" if where else key,
                f"unknown axis{hint}; choose one of {', '.join(POINT_KEYS)} or a config key "
                f"({', '.join(config_keys())})")


def _resolve_trace(path: Path, value) -> str:
    if not isinstance(value, str) or not value:
        raise _fail(path, "trace", f"must be a file path, got {value!r}")
    p = Path(value)
    p = p if p.is_absolute() else (path.parent / p)
    if not p.is_file():
        raise _fail(path, "trace", f"trace not found: {p}")
    return str(p.resolve())


def _resolve_config(path: Path, where: str, base, overrides: dict) -> AcceleratorConfig:
    if not isinstance(base, str) or not base:
        raise _fail(path, f"{where}config", f"must be a preset name or a TOML path, got {base!r}")
    cp = Path(base)
    if cp.suffix == ".toml" and not cp.is_absolute():
        cp = path.parent / cp
    try:
        cfg = load_config(cp if cp.suffix == ".toml" else base)
    except ConfigError as err:
        raise _fail(path, f"{where}config", str(err)) from None
    if not overrides:
        return cfg
    data = cfg.model_dump() | overrides
    try:
        return config_from_dict(data, f"{base} with {', '.join(f'{k} = {v!r}' for k, v in overrides.items())}")
    except ConfigError as err:
        raise _fail(path, where + ",".join(overrides), str(err)) from None


def parse_reuse(value):
    """``"r,p"`` or ``"r,p,HxW,q"`` (as ``kaleido simulate --reuse``) -> a checked
    `algo.workloads.synth.SynthField`. Raises `algo.workloads.synth.SynthError` or ValueError."""
    from algo.workloads.synth import SynthError, SynthField, parse_region

    parts = [v.strip() for v in str(value).split(",")] if isinstance(value, str) else []
    if len(parts) not in (2, 4):
        raise SynthError("give 2 or 4 comma-separated fields")
    kw = {"reuse": float(parts[0]), "partial": float(parts[1])}
    if len(parts) == 4:
        kw.update(region=parse_region(parts[2]), persist=float(parts[3]))
    field = SynthField(**kw)
    field.check()
    return field


def _check_reuse(path: Path, where: str, value) -> None:
    from algo.workloads.synth import SynthError

    try:
        parse_reuse(value)
    except ValueError as err:  # SynthError is a ValueError
        msg = str(err) if isinstance(err, SynthError) else "not numbers"
        raise _fail(path, f"{where}reuse", f"must be 'r,p' or 'r,p,HxW,q' (REUSE and PARTIAL shares, region, "
                                            f"persistence; algo.workloads.synth), got {value!r}: {msg}") from None


def _resolve_workload(path: Path, where: str, value, devices) -> tuple[str, int]:
    from algo.workloads.format import WORKLOAD_FORMAT, _read_meta

    if not isinstance(value, str) or not value:
        raise _fail(path, f"{where}workload", f"must be a file path, got {value!r}")
    if devices is not None and (isinstance(devices, bool) or not isinstance(devices, int) or devices < 1):
        raise _fail(path, f"{where}devices", f"must be a positive integer, got {devices!r}")
    if DEVICES_FIELD in value:
        if devices is None:
            raise _fail(path, f"{where}workload", f"{value!r} names {DEVICES_FIELD} but the point sets no devices")
        value = value.replace(DEVICES_FIELD, str(devices))
    p = Path(value)
    p = p if p.is_absolute() else (path.parent / p)
    meta = _read_meta(p) if p.is_file() else None
    if not p.is_file():
        raise _fail(path, f"{where}workload", f"workload not found: {p}")
    if not isinstance(meta, dict) or meta.get("format") != WORKLOAD_FORMAT:
        raise _fail(path, f"{where}workload", f"{p} is not a workload file (`kaleido workload` writes them)")
    own = int(meta.get("devices", 1))
    if devices is not None and devices != own:
        raise _fail(path, f"{where}devices", f"{devices}, but {p.name} was generated for {own} device(s); "
                                              f"name one file per count with {DEVICES_FIELD} in the workload path")
    return str(p.resolve()), own


def _point(path: Path, index: int, where: str, values: dict, default_trace: str | None,
           default_workload: str | None = None) -> Point:
    from sim.cost.tech import TechError, load_tech

    merged = DEFAULTS | {"trace": default_trace, "workload": default_workload} | values
    if "trace" in values and "workload" not in values:
        merged["workload"] = None  # a trace axis or listed trace overrides a default workload
    if "workload" in values and "trace" not in values:
        merged["trace"] = None
    if merged["trace"] is not None and merged["workload"] is not None:
        raise _fail(path, f"{where}workload", "a point simulates a trace or a workload, not both")
    if merged["trace"] is None and merged["workload"] is None:
        raise _fail(path, f"{where}trace", "no trace: give `trace = \"FILE.npz\"`, `workload = \"W.npz\"` or an axis")
    is_wl = merged["workload"] is not None
    for k in (TRACE_ONLY_KEYS if is_wl else WORKLOAD_ONLY_KEYS):
        if k in values:
            raise _fail(path, f"{where}{k}", f"applies to {'trace' if is_wl else 'workload'} points only")
    overrides = {k: v for k, v in values.items() if k not in POINT_KEYS}
    if is_wl:
        trace = None
        workload, devices = _resolve_workload(path, where, merged["workload"], merged["devices"])
        if merged["reuse"] is not None:
            _check_reuse(path, where, merged["reuse"])
        seed = merged["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise _fail(path, f"{where}seed", f"must be a non-negative integer, got {seed!r}")
        if merged["config"] == A100:
            if overrides:
                raise _fail(path, where + ",".join(overrides), "config overrides apply to Kaleido chips, not the A100")
            if merged["reuse"] is not None:
                raise _fail(path, f"{where}reuse", "applies to Kaleido chips; the A100 roofline has no reuse")
            cfg = None
        else:
            cfg = _resolve_config(path, where, merged["config"], overrides)
    else:
        trace = _resolve_trace(path, merged["trace"])
        cfg = _resolve_config(path, where, merged["config"], overrides)
    ti = merged["theta_index"]
    if isinstance(ti, bool) or not isinstance(ti, int) or ti < 0:
        raise _fail(path, f"{where}theta_index", f"must be a non-negative integer, got {ti!r}")
    if not isinstance(merged["dispatcher"], bool):
        raise _fail(path, f"{where}dispatcher", f"must be true or false, got {merged['dispatcher']!r}")
    tech = merged["tech"]
    if tech is not None:
        tech = str(tech)
        tp = Path(tech)
        if tp.suffix == ".toml" and not tp.is_absolute():
            tech = str((path.parent / tp).resolve())
        try:
            load_tech(tech)
        except TechError as err:
            raise _fail(path, f"{where}tech", str(err)) from None
    if is_wl:
        if cfg is None and tech is not None:
            raise _fail(path, f"{where}tech", "applies to Kaleido chips; the A100 roofline has no energy table")
        return Point(index, dict(values), None, cfg, 0, tech, True, workload, devices, merged["reuse"], merged["seed"])
    return Point(index, dict(values), trace, cfg, ti, tech, merged["dispatcher"])


def load_sweep(path: str | Path) -> Sweep:
    """Read, validate and expand a sweep file (module docstring) into its points.

    Raises:
        SweepError: unreadable file, malformed TOML, a key of the wrong type, an unknown axis, an empty
            axis or empty product, a config override the config type rejects, a missing trace or energy
            table, a bad theta index; the message names the key.
    """
    path = Path(path)
    if not path.is_file():
        raise SweepError(f"sweep file not found: {path}")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise SweepError(f"sweep file {path}: malformed TOML: {err}") from None
    try:
        spec = _SweepFile.model_validate(data)
    except ValidationError as err:
        e = err.errors()[0]
        key = ".".join(str(p) for p in e["loc"] if not str(p).startswith(("function-", "str", "int", "float",
                                                                          "bool", "list[")))
        msg = "unknown key" if e["type"] == "extra_forbidden" else e["msg"]
        raise _fail(path, key or "<file>", msg) from None
    for k in spec.axes:
        _check_key(path, "axes", k)
    for k in spec.fixed:
        _check_key(path, "fixed", k)
        if k in spec.axes:
            raise _fail(path, f"fixed.{k}", "is also an axis")
    for i, pt in enumerate(spec.points):
        for k in pt:
            _check_key(path, f"points[{i}]", k)
    for k, vals in spec.axes.items():
        if not vals:
            raise _fail(path, f"axes.{k}", "empty list: the product of the axes has no point")
        if len(set(map(repr, vals))) != len(vals):
            raise _fail(path, f"axes.{k}", f"repeats a value: {vals}")
    if spec.trace is not None and spec.workload is not None:
        raise _fail(path, "workload", "the sweep file gives both `trace` and `workload`: a point simulates one")
    if not spec.axes and not spec.points:
        raise _fail(path, "axes", "no axes and no points: the sweep has no point")
    fixed = dict(spec.fixed)
    columns = list(spec.axes) + [k for k in fixed if k not in spec.axes]
    for pt in spec.points:
        columns += [k for k in pt if k not in columns]
    points: list[Point] = []
    names = list(spec.axes)
    if spec.axes:
        for combo in itertools.product(*(spec.axes[k] for k in names)):
            values = fixed | dict(zip(names, combo, strict=True))
            points.append(_point(path, len(points), "", values, spec.trace, spec.workload))
    for i, pt in enumerate(spec.points):
        points.append(_point(path, len(points), f"points[{i}].", fixed | dict(pt), spec.trace, spec.workload))
    if not points:
        raise _fail(path, "axes", "the product of the axes is empty")
    return Sweep(path=path, name=spec.name or path.stem, columns=columns, points=points)


def unbuilt_notes(sw: Sweep) -> list[str]:
    """One line per key column that takes more than one value while some points' array organisation does not
    build that buffer (`hw.config.UNBUILT_KEYS`): those points repeat one result whatever the value."""
    from hw.config import UNBUILT_KEYS

    out = []
    for k in sw.columns:
        if len({repr(p.values.get(k)) for p in sw.points}) < 2:
            continue
        idle = [p for p in sw.points if p.config is not None and k in UNBUILT_KEYS.get(p.config.organisation, ())]
        if idle:
            orgs = ", ".join(sorted({p.config.organisation for p in idle}))
            out.append(f"{k} varies, but {len(idle)} of {len(sw.points)} points run an organisation that does not "
                       f"build that buffer ({orgs}): their results repeat whatever its value")
    return out
