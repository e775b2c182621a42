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

Every axis or point key is one of `POINT_KEYS` or a config key. `load_sweep` builds every point and
validates it completely (config built and checked by `hw.config.config_from_dict`, trace file present,
energy table loadable, theta index a non-negative integer) and raises `SweepError` naming the key on
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
#: energy table, dispatcher on/off.
POINT_KEYS = ("trace", "config", "theta_index", "tech", "dispatcher")
#: Config keys a sweep may not set: the name is the base config's, the description free text.
FORBIDDEN_CONFIG_KEYS = ("name", "description")
#: Defaults of the point keys (those of `kaleido simulate`).
DEFAULTS = {"config": "kaleido-16nm-128x128", "theta_index": 0, "tech": None, "dispatcher": True}

Scalar = StrictBool | StrictInt | StrictFloat | StrictStr


class SweepError(ValueError):
    """A sweep file is unreadable or invalid; the message names the file and the key."""


class _SweepFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trace: StrictStr | None = None
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
        trace: absolute trace path.
        config: the validated accelerator config (preset or TOML with the overrides applied).
        theta_index, tech, dispatcher: as `sim.engines.model.simulate_trace` takes them.
    """

    index: int
    values: dict
    trace: str
    config: AcceleratorConfig
    theta_index: int = 0
    tech: str | None = None
    dispatcher: bool = True


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


def _point(path: Path, index: int, where: str, values: dict, default_trace: str | None) -> Point:
    from sim.cost.tech import TechError, load_tech

    merged = DEFAULTS | {"trace": default_trace} | values
    if merged["trace"] is None:
        raise _fail(path, f"{where}trace", "no trace: give `trace = \"FILE.npz\"` or a trace axis")
    trace = _resolve_trace(path, merged["trace"])
    overrides = {k: v for k, v in values.items() if k not in POINT_KEYS}
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
            points.append(_point(path, len(points), "", values, spec.trace))
    for i, pt in enumerate(spec.points):
        points.append(_point(path, len(points), f"points[{i}].", fixed | dict(pt), spec.trace))
    if not points:
        raise _fail(path, "axes", "the product of the axes is empty")
    return Sweep(path=path, name=spec.name or path.stem, columns=columns, points=points)
