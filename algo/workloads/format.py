"""The workload file format: what each device computes and sends at each denoising step.

A workload is a NumPy ``.npz`` archive (uncompressed zip, fixed member timestamps, so equal
workloads are byte-identical files) with one member ``meta``: a uint8 array holding UTF-8 JSON:

- ``format`` ``"kaleido-workload"``, ``version`` (`WORKLOAD_VERSION`), ``generator`` (``"ddit"``,
  ...: which scheduler made it), ``model``, ``size``, ``resolution``, ``grid`` ``[F, H, W]`` (the
  model's token grid at its own patch size), ``devices`` (P >= 1: ranks ``0..P-1``), ``b_msb``,
  ``steps`` (list of ``{"index": int, ...}``, generator-specific fields such as the patch size),
  ``params`` (the generator's parameters), ``sources`` (parameter -> where its default comes from),
  ``notes``;
- ``ops``: the op records (below) in execution order; ``comms``: communication events (below);
- ``reference``: ``{"label", "ops", "comms"}``, the same model run without the scheduler (e.g.
  every step at the base patch size), for the speedup; or null.

Op record (`WorkloadOp`): ``step``, ``rank`` (null: every rank runs it identically), ``block``
(null: outside the transformer blocks, e.g. the patch embedding), ``repeat`` (>= 1 identical
copies run back to back, e.g. every block of a step and both classifier-free-guidance branches),
``name`` (`WORKLOAD_OP_TYPES`: the trace op types plus ``patch_embed`` and ``proj_out``),
``batch``, ``M``, ``K``, ``N`` (GEMM ``[M, K] x [K, N]`` per batch element), ``x_signed``,
``grid`` ``[F, H, W]`` (the token grid of the op's M rows; null when the rows are not a grid) and
``groups`` (``[[k_start, k_stop, axis, kind], ...]`` partitioning ``0..K`` as in traces; may be
empty: no reuse), ``phase`` (free text, e.g. ``"attention"``: what comms overlap with).

Comm event (`CommEvent`): ``step``, ``block``, ``repeat``, ``pattern`` (`COMM_PATTERNS`),
``bytes`` (payload per rank, bytes), ``group`` (ranks taking part), ``overlap`` (the op phase it
may overlap with, or null: fully exposed), ``distance`` (``ring_p2p`` only: every rank sends to
the rank that many positions along the ring, all at once; >= 1; version 1 files: 1).

Loading checks format, version, every field's type and range, group partitions, ``M = F*H*W``
when a grid is given, ranks below ``devices``, and raises `WorkloadError` with a one-line reason.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from algo.trace import GROUP_KINDS, OP_TYPES, TraceError, validate_groups

WORKLOAD_FORMAT = "kaleido-workload"
WORKLOAD_VERSION = 2
READABLE_VERSIONS = (1, 2)  # 2 added CommEvent.distance
GENERATORS = ("ddit", "ditango", "causal-sp")
#: Trace op types plus the per-patch-size embedding GEMMs (DDiT).
WORKLOAD_OP_TYPES = (*OP_TYPES, "patch_embed", "proj_out", "cross_kv")
COMM_PATTERNS = ("ring_p2p", "all_to_all", "all_gather", "all_reduce")


class WorkloadError(ValueError):
    """A workload file is missing, corrupt, of another version, or inconsistent."""


@dataclass(frozen=True)
class WorkloadOp:
    """One GEMM of a workload (module docstring). ``grid``/``groups`` as tuples; ``rank`` None = all ranks."""

    step: int
    name: str
    batch: int
    M: int  # noqa: N815 - GEMM dimension names
    K: int  # noqa: N815
    N: int  # noqa: N815
    block: int | None = None
    rank: int | None = None
    repeat: int = 1
    x_signed: bool = True
    grid: tuple[int, int, int] | None = None
    groups: tuple[tuple[int, int, str, str], ...] = ()
    phase: str = ""

    def meta(self) -> dict:
        return {"step": self.step, "rank": self.rank, "block": self.block, "repeat": self.repeat,
                "name": self.name, "batch": self.batch, "M": self.M, "K": self.K, "N": self.N,
                "x_signed": self.x_signed, "grid": None if self.grid is None else list(self.grid),
                "groups": [list(g) for g in self.groups], "phase": self.phase}

    @property
    def macs(self) -> int:
        """Multiply-accumulates of one copy: ``batch * M * K * N``."""
        return self.batch * self.M * self.K * self.N


@dataclass(frozen=True)
class CommEvent:
    """One collective or point-to-point transfer (module docstring)."""

    step: int
    pattern: str
    bytes: float
    group: int
    block: int | None = None
    repeat: int = 1
    overlap: str | None = None
    distance: int = 1

    def meta(self) -> dict:
        return {"step": self.step, "block": self.block, "repeat": self.repeat, "pattern": self.pattern,
                "bytes": self.bytes, "group": self.group, "overlap": self.overlap, "distance": self.distance}


@dataclass
class Workload:
    """A whole workload: metadata, ops, comms and the reference run (module docstring)."""

    generator: str
    model: str
    size: str
    resolution: str
    grid: tuple[int, int, int]
    ops: list[WorkloadOp]
    devices: int = 1
    b_msb: int = 4
    steps: list[dict] = field(default_factory=list)
    params: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    notes: str = ""
    comms: list[CommEvent] = field(default_factory=list)
    reference: dict | None = None  # {"label": str, "ops": [WorkloadOp], "comms": [CommEvent]}
    version: int = WORKLOAD_VERSION

    def meta(self) -> dict:
        ref = None
        if self.reference is not None:
            ref = {"label": self.reference["label"], "ops": [o.meta() for o in self.reference["ops"]],
                   "comms": [c.meta() for c in self.reference.get("comms", [])]}
        return {"format": WORKLOAD_FORMAT, "version": WORKLOAD_VERSION, "generator": self.generator,
                "model": self.model, "size": self.size, "resolution": self.resolution, "grid": list(self.grid),
                "devices": self.devices, "b_msb": self.b_msb, "steps": self.steps, "params": self.params,
                "sources": self.sources, "notes": self.notes, "ops": [o.meta() for o in self.ops],
                "comms": [c.meta() for c in self.comms], "reference": ref}


def _int(v, what: str, lo: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise WorkloadError(f"{what} must be an integer >= {lo}, got {v!r}")
    return v


def _opt_int(v, what: str, hi: int | None = None) -> int | None:
    if v is None:
        return None
    v = _int(v, what)
    if hi is not None and v >= hi:
        raise WorkloadError(f"{what} must be below {hi}, got {v}")
    return v


def _grid(v, what: str) -> tuple[int, int, int]:
    if not isinstance(v, list | tuple) or len(v) != 3:
        raise WorkloadError(f"{what} must be [F, H, W], got {v!r}")
    return tuple(_int(x, what, 1) for x in v)


def parse_op(om, devices: int, where: str) -> WorkloadOp:
    """One op record from its JSON form, validated. Raises `WorkloadError`."""
    if not isinstance(om, dict):
        raise WorkloadError(f"{where}op record must be an object")
    try:
        name = om["name"]
        if name not in WORKLOAD_OP_TYPES:
            raise WorkloadError(f"{where}unknown op type {name!r} (known: {', '.join(WORKLOAD_OP_TYPES)})")
        where = f"{where}({name}) "
        grid = None if om["grid"] is None else _grid(om["grid"], f"{where}grid")
        dims = [_int(om[k], f"{where}{k}", 1) for k in ("batch", "M", "K", "N")]
        if grid is not None and math.prod(grid) != dims[1]:
            raise WorkloadError(f"{where}M = {dims[1]} but its grid {grid} holds {math.prod(grid)} tokens")
        groups = []
        for g in om["groups"]:
            if not isinstance(g, list) or len(g) != 4 or g[3] not in GROUP_KINDS:
                raise WorkloadError(f"{where}bad channel group {g!r}")
            groups.append((_int(g[0], f"{where}group start"), _int(g[1], f"{where}group stop"), str(g[2]), g[3]))
        if groups:
            try:
                validate_groups(groups, dims[2], where)
            except TraceError as err:
                raise WorkloadError(str(err)) from None
            if grid is None:
                raise WorkloadError(f"{where}reuse groups need a token grid")
        if not isinstance(om["x_signed"], bool) or not isinstance(om["phase"], str):
            raise WorkloadError(f"{where}x_signed must be a boolean and phase a string")
        return WorkloadOp(step=_int(om["step"], f"{where}step"), name=name, batch=dims[0], M=dims[1], K=dims[2],
                          N=dims[3], block=_opt_int(om["block"], f"{where}block"),
                          rank=_opt_int(om["rank"], f"{where}rank", devices), repeat=_int(om["repeat"], f"{where}repeat", 1),
                          x_signed=om["x_signed"], grid=grid, groups=tuple(groups), phase=om["phase"])
    except KeyError as err:
        raise WorkloadError(f"{where}missing field {err}") from None


def parse_comm(cm, devices: int, where: str, version: int = WORKLOAD_VERSION) -> CommEvent:
    """One comm event from its JSON form, validated. Raises `WorkloadError`."""
    if not isinstance(cm, dict):
        raise WorkloadError(f"{where}comm record must be an object")
    try:
        if cm["pattern"] not in COMM_PATTERNS:
            raise WorkloadError(f"{where}unknown pattern {cm['pattern']!r} (known: {', '.join(COMM_PATTERNS)})")
        b = cm["bytes"]
        if isinstance(b, bool) or not isinstance(b, int | float) or not math.isfinite(b) or b < 0:
            raise WorkloadError(f"{where}bytes must be a finite number >= 0, got {b!r}")
        group = _int(cm["group"], f"{where}group", 1)
        if group > devices:
            raise WorkloadError(f"{where}group of {group} ranks > devices = {devices}")
        if cm["overlap"] is not None and not isinstance(cm["overlap"], str):
            raise WorkloadError(f"{where}overlap must be a phase name or null")
        dist = 1 if version < 2 else _int(cm["distance"], f"{where}distance", 1)
        if dist >= max(group, 2):
            raise WorkloadError(f"{where}distance {dist} must be below the group of {group} ranks")
        return CommEvent(step=_int(cm["step"], f"{where}step"), pattern=cm["pattern"], bytes=float(b), group=group,
                         block=_opt_int(cm["block"], f"{where}block"), repeat=_int(cm["repeat"], f"{where}repeat", 1),
                         overlap=cm["overlap"], distance=dist)
    except KeyError as err:
        raise WorkloadError(f"{where}missing field {err}") from None


def _parse(meta: dict, where: str) -> Workload:
    if not isinstance(meta, dict) or meta.get("format") != WORKLOAD_FORMAT:
        fmt = meta.get("format") if isinstance(meta, dict) else None
        raise WorkloadError(f"{where}not a Kaleido workload (format {fmt!r})")
    if meta.get("version") not in READABLE_VERSIONS:
        raise WorkloadError(f"{where}workload format version {meta.get('version')} is not supported (this build "
                            f"reads versions {', '.join(map(str, READABLE_VERSIONS))}); regenerate the workload")
    try:
        if meta["generator"] not in GENERATORS:
            raise WorkloadError(f"{where}unknown generator {meta['generator']!r} (known: {', '.join(GENERATORS)})")
        devices = _int(meta["devices"], f"{where}devices", 1)
        b_msb = _int(meta["b_msb"], f"{where}b_msb", 1)
        if b_msb > 7:
            raise WorkloadError(f"{where}b_msb must be in 1..7, got {b_msb}")
        steps = meta["steps"]
        if not isinstance(steps, list) or not all(isinstance(s, dict) and isinstance(s.get("index"), int)
                                                  for s in steps):
            raise WorkloadError(f"{where}steps must be a list of objects with an integer index")
        step_ids = {s["index"] for s in steps}
        ops = [parse_op(om, devices, f"{where}op {i} ") for i, om in enumerate(meta["ops"])]
        comms = [parse_comm(cm, devices, f"{where}comm {i} ", meta["version"]) for i, cm in enumerate(meta["comms"])]
        for kind, items in (("op", ops), ("comm", comms)):
            bad = sorted({o.step for o in items} - step_ids)
            if bad:
                raise WorkloadError(f"{where}{kind}s at steps {bad[:5]} that the steps list does not hold")
        ref = meta["reference"]
        if ref is not None:
            if not isinstance(ref, dict) or not isinstance(ref.get("label"), str):
                raise WorkloadError(f"{where}reference must be an object with a label")
            ref = {"label": ref["label"],
                   "ops": [parse_op(om, devices, f"{where}reference op {i} ") for i, om in enumerate(ref["ops"])],
                   "comms": [parse_comm(cm, devices, f"{where}reference comm {i} ", meta["version"])
                             for i, cm in enumerate(ref["comms"])]}
        for k in ("model", "size", "resolution", "notes"):
            if not isinstance(meta[k], str):
                raise WorkloadError(f"{where}{k} must be a string")
        if not isinstance(meta["params"], dict) or not isinstance(meta["sources"], dict):
            raise WorkloadError(f"{where}params and sources must be objects")
        return Workload(generator=meta["generator"], model=meta["model"], size=meta["size"],
                        resolution=meta["resolution"], grid=_grid(meta["grid"], f"{where}grid"), ops=ops,
                        devices=devices, b_msb=b_msb, steps=steps, params=meta["params"], sources=meta["sources"],
                        notes=meta["notes"], comms=comms, reference=ref, version=meta["version"])
    except KeyError as err:
        raise WorkloadError(f"{where}corrupt workload metadata (missing field {err})") from None
    except TypeError as err:
        raise WorkloadError(f"{where}corrupt workload metadata ({err})") from None


def check_workload(wl: Workload) -> None:
    """Validate an in-memory workload as `load_workload` validates a file. Raises `WorkloadError`."""
    _parse(json.loads(json.dumps(wl.meta())), "")


def save_workload(wl: Workload, path: str | Path) -> Path:
    """Validate and write `wl` atomically (`algo.fileio.atomic_write_bytes`); byte-identical for equal input.

    Raises:
        WorkloadError: an inconsistent workload (nothing is written).
        algo.fileio.OutputPathError: ``path`` is a folder or a parent is a file.
    """
    from numpy.lib import format as npformat

    from algo.fileio import atomic_write_bytes

    check_workload(wl)
    payload = np.frombuffer(json.dumps(wl.meta(), sort_keys=True).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        with zf.open(zipfile.ZipInfo("meta.npy", date_time=(1980, 1, 1, 0, 0, 0)), "w") as member:
            npformat.write_array(member, payload, allow_pickle=False)
    return atomic_write_bytes(path, buf.getvalue())


def _read_meta(path: Path) -> dict | None:
    """The JSON ``meta`` of an ``.npz`` (None when the file is not a zip or has no meta)."""
    try:
        if not zipfile.is_zipfile(path):
            return None
        with np.load(path, allow_pickle=False) as npz:
            if "meta" not in npz.files:
                return None
            return json.loads(bytes(npz["meta"]).decode())
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, UnicodeDecodeError):
        return None


def is_workload_file(path: str | Path) -> bool:
    """True when ``path`` is an ``.npz`` whose meta names the workload format (any version)."""
    path = Path(path)
    meta = _read_meta(path) if path.is_file() else None
    return isinstance(meta, dict) and meta.get("format") == WORKLOAD_FORMAT


def load_workload(path: str | Path) -> Workload:
    """Read and validate a workload file.

    Raises:
        WorkloadError: missing file, not a workload, another version, a corrupt or inconsistent record.
    """
    path = Path(path)
    if not path.is_file():
        raise WorkloadError(f"workload not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as npz:
            if "meta" not in npz.files:
                raise WorkloadError(f"{path}: not a Kaleido workload (no 'meta' entry)")
            try:
                meta = json.loads(bytes(npz["meta"]).decode())
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                raise WorkloadError(f"{path}: corrupt workload metadata ({err})") from None
    except WorkloadError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as err:
        raise WorkloadError(f"{path}: not a Kaleido workload (not a valid .npz archive: {err})") from None
    return _parse(meta, f"{path}: ")
