"""The trace file format: workloads captured from video-DiT runs, read by the simulator.

A trace is a NumPy ``.npz`` archive (uncompressed zip) with

- ``meta``: a uint8 array holding UTF-8 JSON: ``format`` (``"kaleido-trace"``), ``version``
  (`TRACE_VERSION`), ``model``, ``size``, ``weights`` (where the weights came from), ``seed``,
  ``grid`` ``[F, H, W]`` (latent token grid, raster order ``f*(H*W) + h*W + w``), ``b_msb``,
  ``group_size_rule``, ``steps`` (list of ``{"index", "sigma", "timestep"}``) and ``ops`` (list of op
  records, below), plus free-form ``notes``.
- ``op{i:05d}_X``: the streamed operand, ``[batch, M, K]``, int8 (or uint8 when ``x_signed`` is
  false: softmax numerators of ``pv``), symmetric per-tensor quantised (SPEC section 1).
- ``op{i:05d}_W``: the stationary operand, ``[batch, K, N]``, int8.

Each op record: ``name`` (op type: qkv, qk, pv, o_proj, cross_q, cross_qk, cross_pv, cross_o, ffn1,
ffn2), ``block``, ``step``, ``batch`` (heads for per-head ops, else 1), ``M``, ``K``, ``N``,
``x_signed``, ``groups`` (``[[k_start, k_stop, axis, kind], ...]`` partitioning ``0..K``; axis in
f/h/w is the reuse direction, kind in t/h/w/block), ``theta`` ``[theta1, theta2]`` (mean absolute
difference per channel, int8 units), ``x_scale`` and ``w_scale`` (float: real = int * scale).

Writing is atomic (temporary file + rename). Loading checks the format name, version, every key,
shape, dtype and finiteness, and raises `TraceError` with a one-line reason otherwise.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

TRACE_FORMAT = "kaleido-trace"
TRACE_VERSION = 1

OP_TYPES = ("qkv", "qk", "pv", "o_proj", "cross_q", "cross_qk", "cross_pv", "cross_o", "ffn1", "ffn2")
AXES = ("f", "h", "w")
GROUP_KINDS = ("t", "h", "w", "block")


class TraceError(ValueError):
    """A trace file is missing, corrupt, of another version, or inconsistent."""


@dataclass(frozen=True)
class Group:
    """One channel group: channels ``[k_start, k_stop)`` reused along ``axis`` ('f', 'h' or 'w')."""

    k_start: int
    k_stop: int
    axis: str
    kind: str = "block"

    def as_tuple(self) -> tuple[int, int, str]:
        """The ``(k_start, k_stop, axis)`` form `algo.golden` takes."""
        return (self.k_start, self.k_stop, self.axis)


@dataclass
class OpRecord:
    """One GEMM of one block at one denoising step: ``Y[b] = X[b] @ W[b]`` for each batch index b.

    Attributes:
        X: ``[batch, M, K]`` int8 (uint8 when ``x_signed`` is False), raster token order.
        W: ``[batch, K, N]`` int8.
        groups: channel groups partitioning ``0..K`` (shared by every batch index).
        theta: ``(theta1, theta2)``, theta1 <= theta2, mean |difference| per channel in int8 units.
    """

    name: str
    block: int
    step: int
    X: np.ndarray
    W: np.ndarray
    groups: list[Group]
    theta: tuple[float, float]
    x_signed: bool = True
    x_scale: float = 1.0
    w_scale: float = 1.0

    @property
    def batch(self) -> int:
        return int(self.X.shape[0])

    @property
    def M(self) -> int:  # noqa: N802 - GEMM dimension names
        return int(self.X.shape[1])

    @property
    def K(self) -> int:  # noqa: N802
        return int(self.X.shape[2])

    @property
    def N(self) -> int:  # noqa: N802
        return int(self.W.shape[2])

    def meta(self) -> dict:
        return {
            "name": self.name, "block": self.block, "step": self.step, "batch": self.batch,
            "M": self.M, "K": self.K, "N": self.N, "x_signed": self.x_signed,
            "groups": [[g.k_start, g.k_stop, g.axis, g.kind] for g in self.groups],
            "theta": [float(self.theta[0]), float(self.theta[1])],
            "x_scale": float(self.x_scale), "w_scale": float(self.w_scale),
        }


@dataclass
class Trace:
    """A whole trace: metadata plus op records in execution order."""

    grid: tuple[int, int, int]
    ops: list[OpRecord]
    b_msb: int = 4
    model: str = ""
    size: str = ""
    weights: str = ""
    seed: int = 0
    group_size_rule: str = "G = 8*ceil(K/64)"
    steps: list[dict] = field(default_factory=list)
    notes: str = ""

    @property
    def tokens(self) -> int:
        f, h, w = self.grid
        return f * h * w


def validate_groups(groups, K: int, where: str = "") -> None:  # noqa: N803
    """Check that groups partition ``0..K`` in order with valid axes; raises `TraceError`."""
    pos = 0
    for g in groups:
        k0, k1, axis = g[0], g[1], g[2]
        if k0 != pos or k1 <= k0:
            raise TraceError(f"{where}channel groups must partition 0..{K} in order; bad group {list(g)}")
        if axis not in AXES:
            raise TraceError(f"{where}group axis must be one of {AXES}, got {axis!r}")
        pos = k1
    if pos != K:
        raise TraceError(f"{where}channel groups cover 0..{pos}, expected 0..{K}")


def _check_op(op: OpRecord, grid: tuple[int, int, int], where: str) -> None:
    if op.name not in OP_TYPES:
        raise TraceError(f"{where}unknown op type {op.name!r}")
    if op.X.ndim != 3 or op.W.ndim != 3:
        raise TraceError(f"{where}X and W must be 3-D [batch, rows, cols], got {op.X.shape} and {op.W.shape}")
    want_x = np.int8 if op.x_signed else np.uint8
    if op.X.dtype != want_x:
        raise TraceError(f"{where}X must be {np.dtype(want_x).name}, got {op.X.dtype}")
    if op.W.dtype != np.int8:
        raise TraceError(f"{where}W must be int8, got {op.W.dtype}")
    if op.W.shape[0] != op.X.shape[0] or op.W.shape[1] != op.X.shape[2]:
        raise TraceError(f"{where}shape mismatch: X {op.X.shape} vs W {op.W.shape}")
    f, h, w = grid
    if op.M != f * h * w:
        raise TraceError(f"{where}M = {op.M} does not equal the token grid {f}x{h}x{w} = {f * h * w}")
    validate_groups([g.as_tuple() for g in op.groups], op.K, where)
    t1, t2 = op.theta
    if not (math.isfinite(t1) and math.isfinite(t2)) or t1 < 0 or t1 > t2:
        raise TraceError(f"{where}theta must satisfy 0 <= theta1 <= theta2, got {list(op.theta)}")
    for nm in ("x_scale", "w_scale"):
        v = getattr(op, nm)
        if not math.isfinite(v) or v <= 0:
            raise TraceError(f"{where}{nm} must be finite and positive, got {v}")


def save_trace(trace: Trace, path: str | Path) -> None:
    """Write `trace` to `path` atomically (nothing is left behind on failure).

    Raises:
        TraceError: the trace is inconsistent (checked before anything is written).
    """
    path = Path(path)
    for i, op in enumerate(trace.ops):
        _check_op(op, trace.grid, f"op {i}: ")
    meta = {
        "format": TRACE_FORMAT, "version": TRACE_VERSION,
        "model": trace.model, "size": trace.size, "weights": trace.weights, "seed": trace.seed,
        "grid": list(trace.grid), "b_msb": trace.b_msb, "group_size_rule": trace.group_size_rule,
        "steps": trace.steps, "notes": trace.notes, "ops": [op.meta() for op in trace.ops],
    }
    arrays = {"meta": np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)}
    for i, op in enumerate(trace.ops):
        arrays[f"op{i:05d}_X"] = np.ascontiguousarray(op.X)
        arrays[f"op{i:05d}_W"] = np.ascontiguousarray(op.W)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; give the file ordinary permissions
        with os.fdopen(fd, "wb") as fh:
            _write_npz_deterministic(fh, arrays)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _write_npz_deterministic(fh, arrays: dict[str, np.ndarray]) -> None:
    """An .npz with fixed member timestamps, so equal traces are byte-identical files."""
    from numpy.lib import format as npformat

    with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, arr in arrays.items():
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with zf.open(info, "w", force_zip64=True) as member:
                npformat.write_array(member, np.asanyarray(arr), allow_pickle=False)


def load_trace(path: str | Path) -> Trace:
    """Read and validate a trace.

    Raises:
        TraceError: missing file, not a trace, wrong format or version, missing arrays,
            bad shapes or dtypes, non-finite values, inconsistent metadata.
    """
    path = Path(path)
    if not path.is_file():
        raise TraceError(f"trace not found: {path}")
    try:
        with np.load(path, allow_pickle=False) as npz:
            files = set(npz.files)
            if "meta" not in files:
                raise TraceError(f"{path}: not a Kaleido trace (no 'meta' entry)")
            try:
                meta = json.loads(bytes(npz["meta"]).decode())
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                raise TraceError(f"{path}: corrupt trace metadata ({err})") from None
            if not isinstance(meta, dict) or meta.get("format") != TRACE_FORMAT:
                raise TraceError(f"{path}: not a Kaleido trace (format {meta.get('format')!r})")
            if meta.get("version") != TRACE_VERSION:
                raise TraceError(
                    f"{path}: trace format version {meta.get('version')} is not supported "
                    f"(this build reads version {TRACE_VERSION}); re-capture the trace"
                )
            try:
                grid = tuple(int(v) for v in meta["grid"])
                if len(grid) != 3 or min(grid) <= 0:
                    raise TraceError(f"{path}: bad token grid {meta['grid']}")
                ops = []
                for i, om in enumerate(meta["ops"]):
                    where = f"{path}: op {i} ({om.get('name')}, block {om.get('block')}): "
                    kx, kw = f"op{i:05d}_X", f"op{i:05d}_W"
                    if kx not in files or kw not in files:
                        raise TraceError(f"{where}operand arrays missing from the file")
                    X, W = npz[kx], npz[kw]
                    op = OpRecord(
                        name=om["name"], block=int(om["block"]), step=int(om["step"]), X=X, W=W,
                        groups=[Group(int(g[0]), int(g[1]), str(g[2]), str(g[3])) for g in om["groups"]],
                        theta=(float(om["theta"][0]), float(om["theta"][1])),
                        x_signed=bool(om["x_signed"]),
                        x_scale=float(om["x_scale"]), w_scale=float(om["w_scale"]),
                    )
                    _check_op(op, grid, where)
                    if (op.batch, op.M, op.K, op.N) != (om["batch"], om["M"], om["K"], om["N"]):
                        raise TraceError(f"{where}array shapes disagree with the recorded (batch, M, K, N)")
                    ops.append(op)
                b_msb = int(meta["b_msb"])
                if not 1 <= b_msb <= 7:
                    raise TraceError(f"{path}: b_msb must be in 1..7, got {b_msb}")
                return Trace(
                    grid=grid, ops=ops, b_msb=b_msb, model=meta["model"], size=meta["size"],
                    weights=meta["weights"], seed=int(meta["seed"]),
                    group_size_rule=meta["group_size_rule"], steps=list(meta["steps"]),
                    notes=meta.get("notes", ""),
                )
            except (KeyError, TypeError, IndexError) as err:
                raise TraceError(f"{path}: corrupt trace metadata (missing or bad field {err})") from None
    except TraceError:
        raise
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
        raise TraceError(f"{path}: corrupt or truncated trace file ({err})") from None
