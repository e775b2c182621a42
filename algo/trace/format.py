"""The trace file format: workloads captured from video-DiT runs, read by the simulator.

A trace is a NumPy ``.npz`` archive (uncompressed zip) with

- ``meta``: a uint8 array holding UTF-8 JSON: ``format`` (``"kaleido-trace"``), ``version``
  (the lowest version describing the file: 4 when a decision op holds attention states, else 3;
  versions 1 and 2 are still read), ``kind`` (``"exact"``,
  ``"decisions"`` or, from version 3, ``"shapes"``; absent in version 1, which is always exact),
  ``model``, ``size``, ``weights``
  (where the weights came from), ``seed``, ``grid`` ``[F, H, W]`` (latent token grid, raster order
  ``f*(H*W) + h*W + w``), ``b_msb``, ``group_size_rule``, ``steps`` (list of
  ``{"index", "sigma", "timestep"}``) and ``ops`` (list of op records, below), plus free-form
  ``notes``. From version 2 on, ``meta`` is the *last* zip member (ops are streamed in first).
- exact traces, per op i:

  - ``op{i:05d}_X``: the streamed operand, ``[batch, M, K]``, int8 (or uint8 when ``x_signed`` is
    false: softmax numerators of ``pv``), symmetric per-tensor quantised (docs/spec.md §1).
  - ``op{i:05d}_W``: the stationary operand, ``[batch, K, N]``, int8.

- decision traces (large sizes, docs/spec.md §1 "large traces"), per op i:

  - ``op{i:05d}_D``: uint8 ``[n_thetas, batch, ceil(M * G / 4)]``: the reuse decisions of every
    (token, group), G = number of channel groups, for each threshold pair of ``thetas``, flattened
    token-major (group fastest, ``index = m * G + g``) and packed 2 bits each, 4 per byte, first
    decision in the high bits as `np.packbits` orders bits (`pack_decisions`); codes 0 COMPUTE,
    1 PARTIAL, 2 REUSE (`algo.reuse.golden`); code 3 and non-zero padding are invalid.

- shape traces (version 3, ``kind: "shapes"``; `algo.capture.write_shape_trace`): no arrays, only
  the op records (shapes, groups, theta; scales 1.0 as placeholders): full-size workloads without
  a forward pass.
- attention states (self-attention ``pv`` ops whose record has ``attn_states: true``; exact
  traces from version 3, decision traces from version 4, never on derived ops):
  ``op{i:05d}_O`` float32 ``[heads, M, d_h]``, the attention output
  ``softmax(s) V`` per head of the video-token queries, and ``op{i:05d}_L`` float32 ``[heads, M]``,
  the log-sum-exp ``log sum_j exp(s_ij)`` of each query row, with ``s = Q K^T / sqrt(d_h)`` over
  every key (text keys too for joint attention), computed in float32 from the float (not
  quantised) Q, K and V: what the DiTango workload generator needs to merge partial attention.

Each op record: ``name`` (op type: qkv, qk, pv, o_proj, cross_q, cross_qk, cross_pv, cross_o, ffn1,
ffn2), ``block``, ``step``, ``batch`` (heads for per-head ops, else 1), ``M``, ``K``, ``N``,
``x_signed``, ``groups`` (``[[k_start, k_stop, axis, kind], ...]`` partitioning ``0..K``; axis in
f/h/w is the reuse direction, kind in t/h/w/block), ``theta`` ``[theta1, theta2]`` (mean absolute
difference per channel, int8 units; for decision ops ``thetas[0]``), ``x_scale`` and ``w_scale``
(float: real = int * scale); decision ops also carry ``thetas`` (list of pairs, one per row of D)
and, when derived rather than captured (`algo.trace.derive`), ``derived_from`` ``[step, block]``.

Writing is atomic (temporary file in the target folder + rename; `TraceWriter` streams op arrays
into the temporary zip as they are produced, so a large capture never holds the whole trace in
memory). Loading checks the format name, version, kind, every key, shape, dtype, packed length,
decision codes and finiteness, and raises `TraceError` with a one-line reason otherwise.
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
#: Newest version. 1: exact traces only (meta first); 2: adds ``kind`` and decision traces;
#: 3: adds shape traces and attention states (output and log-sum-exp) on exact ``pv`` ops;
#: 4: attention states on decision ``pv`` ops too (docs/decisions.md D28). A file is written with
#: the lowest version that describes it (`STATES_ON_DECISIONS_VERSION` only when a decision op
#: holds states), so a version-3 reader, which would drop such states silently, refuses exactly
#: the files that have them and still reads every other file.
#: 5: exact ``pv`` ops may hold no P: it is regenerated from ``qk``'s int8 Q and K
#: (`algo.reuse.softmax`; record field ``p_from``), written as version 5 only when an op does so.
TRACE_VERSION = 5
#: Version of every file without attention states on decision ops (readable by version-3 builds).
BASE_WRITE_VERSION = 3
STATES_ON_DECISIONS_VERSION = 4
DERIVED_P_VERSION = 5
READABLE_VERSIONS = (1, 2, 3, 4, 5)
TRACE_KINDS = ("exact", "decisions", "shapes")

OP_TYPES = ("qkv", "qk", "pv", "o_proj", "cross_q", "cross_qk", "cross_pv", "cross_o", "ffn1", "ffn2")
AXES = ("f", "h", "w")
GROUP_KINDS = ("t", "h", "w", "block")


class TraceError(ValueError):
    """A trace file is missing, corrupt, of another version, or inconsistent."""


def packed_length(n: int) -> int:
    """Bytes holding ``n`` 2-bit decisions: ``ceil(n / 4)``."""
    return (int(n) + 3) // 4


def pack_decisions(dec: np.ndarray) -> np.ndarray:
    """Pack decision codes 0..2 (any shape, flattened in C order) 2 bits each, 4 per byte.

    Byte j holds decisions ``4j .. 4j+3`` in bits 7-6, 5-4, 3-2, 1-0 (first in the high bits, as
    `np.packbits` orders bits); the last byte is zero-padded.

    Returns:
        uint8 ``[ceil(n / 4)]``.

    Raises:
        TraceError: a value outside 0..2.
    """
    d = np.asarray(dec).reshape(-1)
    if d.size and (d.min() < 0 or d.max() > 2):
        raise TraceError("decisions must be 0 (COMPUTE), 1 (PARTIAL) or 2 (REUSE)")
    pad = np.zeros(packed_length(d.size) * 4, dtype=np.uint8)
    pad[: d.size] = d
    q = pad.reshape(-1, 4)
    return ((q[:, 0] << 6) | (q[:, 1] << 4) | (q[:, 2] << 2) | q[:, 3]).astype(np.uint8)


def unpack_decisions(packed: np.ndarray, n: int) -> np.ndarray:
    """Inverse of `pack_decisions`: int8 ``[n]`` codes from uint8 ``[ceil(n / 4)]``.

    Raises:
        TraceError: wrong packed length, a code 3, or non-zero padding.
    """
    packed = np.asarray(packed)
    if packed.dtype != np.uint8 or packed.shape != (packed_length(n),):
        raise TraceError(f"packed decisions must be uint8 [{packed_length(n)}] for {n} decisions, "
                         f"got {packed.dtype} {list(packed.shape)}")
    out = np.empty((packed.size, 4), dtype=np.int8)
    for j in range(4):
        out[:, j] = (packed >> (6 - 2 * j)) & 3
    flat = out.reshape(-1)
    if (flat == 3).any():
        raise TraceError("packed decisions hold the invalid code 3")
    if flat[n:].any():
        raise TraceError("packed decisions have non-zero padding bits")
    return flat[:n]


@dataclass(frozen=True)
class Group:
    """One channel group: channels ``[k_start, k_stop)`` reused along ``axis`` ('f', 'h' or 'w')."""

    k_start: int
    k_stop: int
    axis: str
    kind: str = "block"

    def as_tuple(self) -> tuple[int, int, str]:
        """The ``(k_start, k_stop, axis)`` form `algo.reuse.golden` takes."""
        return (self.k_start, self.k_stop, self.axis)


@dataclass
class OpRecord:
    """One GEMM of one block at one denoising step: ``Y[b] = X[b] @ W[b]`` for each batch index b.

    Three kinds (`kind`): ``"exact"`` (X and W given), ``"decisions"`` (X and W None; `dims` and
    packed `decisions` for each pair of `thetas`) and ``"shape"`` (only `dims`: a shape plan, never
    written to a file).

    Attributes:
        X: ``[batch, M, K]`` int8 (uint8 when ``x_signed`` is False), raster token order; or None.
        W: ``[batch, K, N]`` int8; or None.
        groups: channel groups partitioning ``0..K`` (shared by every batch index).
        theta: ``(theta1, theta2)``, theta1 <= theta2, mean |difference| per channel in int8 units
            (for decision ops, ``thetas[0]``).
        dims: ``(batch, M, K, N)`` when X is None.
        decisions: uint8 ``[len(thetas), batch, packed_length(M * G)]`` (`pack_decisions`), or None.
        thetas: the threshold pairs the rows of `decisions` were decided with.
        attn_out: self-attention ``pv`` ops only (exact or captured decision ops; else None):
            float32 ``[batch, M, N]``, the attention output per head (``softmax(s) V``, float).
        lse: with `attn_out`: float32 ``[batch, M]``, log-sum-exp of each query's scaled scores.
        derived_from: ``(step, block)`` of the captured op whose decisions this op copies
            (`algo.trace.derive`); None for a captured op.
        scores: exact ``pv`` ops whose P is derived: ``(Q, Kt, q_scale, k_scale)``, ``qk``'s int8
            operands ``[batch, M, d_h]`` and ``[batch, d_h, L]`` and their scales; P =
            `algo.reuse.softmax.softmax_numerators_int8` of them (`p_rows`). X may then be None
            (P never held whole) or the materialised P. None: P, if any, is X itself.
    """

    name: str
    block: int
    step: int
    X: np.ndarray | None
    W: np.ndarray | None
    groups: list[Group]
    theta: tuple[float, float]
    x_signed: bool = True
    x_scale: float = 1.0
    w_scale: float = 1.0
    dims: tuple[int, int, int, int] | None = None
    decisions: np.ndarray | None = None
    thetas: tuple[tuple[float, float], ...] = ()
    attn_out: np.ndarray | None = None
    lse: np.ndarray | None = None
    derived_from: tuple[int, int] | None = None
    scores: tuple[np.ndarray, np.ndarray, float, float] | None = None

    @property
    def kind(self) -> str:
        if self.X is not None or self.scores is not None:
            return "exact"
        return "decisions" if self.decisions is not None else "shape"

    def _dim(self, i: int) -> int:
        if self.X is not None and self.W is not None:
            return int(self.X.shape[i] if i < 3 else self.W.shape[2])
        if self.scores is not None and self.W is not None:
            q, k_t = self.scores[0], self.scores[1]
            return int((q.shape[0], q.shape[1], k_t.shape[2], self.W.shape[2])[i])
        if self.dims is None:
            raise TraceError(f"op {self.name} (block {self.block}) has neither operands nor dims")
        return int(self.dims[i])

    @property
    def batch(self) -> int:
        return self._dim(0)

    @property
    def M(self) -> int:  # noqa: N802 - GEMM dimension names
        return self._dim(1)

    @property
    def K(self) -> int:  # noqa: N802
        return self._dim(2)

    @property
    def N(self) -> int:  # noqa: N802
        return self._dim(3)

    def p_rows(self, rows: slice | None = None, heads: slice | None = None) -> np.ndarray:
        """The streamed operand of query ``rows`` of batch indices ``heads`` (None: all), uint8
        ``[n_heads, n_rows, K]``: regenerated from `scores` when the op holds them (bit for bit the
        P capture made), else a slice of X. Holds only the rows asked for (plus one chunk of scores).

        Raises:
            TraceError: not an exact pv-like op (no X and no scores).
        """
        rs = slice(None) if rows is None else rows
        hs = slice(None) if heads is None else heads
        if self.scores is not None:
            from algo.reuse.softmax import softmax_numerators_int8

            q, k_t, qs, ks = self.scores
            return softmax_numerators_int8(q, k_t, qs, ks, rows=rs, heads=hs)
        if self.X is None:
            raise TraceError(f"op {self.name} (block {self.block}) holds no streamed operand")
        return self.X[hs, rs]

    def decisions_for(self, theta_index: int = 0) -> np.ndarray:
        """Unpacked decisions for ``thetas[theta_index]``: int8 ``[batch, M, len(groups)]``.

        Raises:
            TraceError: not a decision op, or theta_index out of range.
        """
        if self.decisions is None:
            what = "operands" if self.X is not None else "only its shape (a shape trace cannot be simulated)"
            raise TraceError(f"op {self.name} (block {self.block}) holds {what}, not decisions")
        if not 0 <= theta_index < len(self.thetas):
            raise TraceError(f"theta index {theta_index} out of range: op {self.name} (block {self.block}) "
                             f"has {len(self.thetas)} thresholds {[list(t) for t in self.thetas]}")
        n = self.M * len(self.groups)
        return np.stack([unpack_decisions(self.decisions[theta_index, b], n).reshape(self.M, len(self.groups))
                         for b in range(self.batch)])

    def meta(self) -> dict:
        out = {
            "name": self.name, "block": self.block, "step": self.step, "batch": self.batch,
            "M": self.M, "K": self.K, "N": self.N, "x_signed": self.x_signed,
            "groups": [[g.k_start, g.k_stop, g.axis, g.kind] for g in self.groups],
            "theta": [float(self.theta[0]), float(self.theta[1])],
            "x_scale": float(self.x_scale), "w_scale": float(self.w_scale),
        }
        if self.kind == "decisions":
            out["thetas"] = [[float(a), float(b)] for a, b in self.thetas]
        if self.attn_out is not None:
            out["attn_states"] = True
        if self.derived_from is not None:
            out["derived_from"] = [int(v) for v in self.derived_from]
        if self.scores is not None:
            out["p_from"] = {"q_scale": float(self.scores[2]), "k_scale": float(self.scores[3])}
        return out


@dataclass
class Trace:
    """A whole trace: metadata plus op records in execution order.

    ``version`` is the format version the trace was read from (`TRACE_VERSION` for new traces, which
    are written as the lowest version describing them: 3, or 4 with states on decision ops);
    ``timing`` holds capture timings in seconds (not stored in the file).
    """

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
    version: int = TRACE_VERSION
    timing: dict = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        f, h, w = self.grid
        return f * h * w

    @property
    def kind(self) -> str:
        """``"exact"``, ``"decisions"`` or ``"shapes"`` (``"exact"`` for a trace without ops)."""
        kinds = {"shapes" if op.kind == "shape" else op.kind for op in self.ops}
        return kinds.pop() if len(kinds) == 1 else ("exact" if not kinds else "mixed")


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


def _check_pair(t, where: str, what: str) -> None:
    t1, t2 = t
    if not (math.isfinite(t1) and math.isfinite(t2)) or t1 < 0 or t1 > t2:
        raise TraceError(f"{where}{what} must satisfy 0 <= theta1 <= theta2, got {list(t)}")


def _first_without_neighbour(grid: tuple[int, int, int], axis: str) -> np.ndarray:
    """bool ``[M]``: tokens with no neighbour along ``axis`` (index 0 on that axis)."""
    f, h, w = grid
    idx = np.indices((f, h, w))["fhw".index(axis)].reshape(-1)
    return idx == 0


def _check_decisions(op: OpRecord, grid: tuple[int, int, int], where: str) -> None:
    d = op.decisions
    n_groups = len(op.groups)
    want = (len(op.thetas), op.batch, packed_length(op.M * n_groups))
    if not isinstance(d, np.ndarray) or d.dtype != np.uint8:
        raise TraceError(f"{where}packed decisions must be uint8, got {getattr(d, 'dtype', type(d))}")
    if d.shape != want:
        raise TraceError(f"{where}packed decisions have shape {list(d.shape)}, expected {list(want)} "
                         f"(thetas, batch, ceil(M*G/4) with M = {op.M}, G = {n_groups})")
    if not op.thetas:
        raise TraceError(f"{where}a decision op needs at least one theta pair")
    for t in op.thetas:
        _check_pair(t, where, "every pair of thetas")
    edge = [_first_without_neighbour(grid, g.axis) for g in op.groups]
    for ti in range(len(op.thetas)):
        try:
            dec = op.decisions_for(ti)  # [batch, M, G]; raises on code 3 or padding
        except TraceError as err:
            raise TraceError(f"{where}{err}") from None
        for gi, e in enumerate(edge):
            if dec[:, e, gi].any():
                raise TraceError(f"{where}a token without a neighbour in group {gi} is not COMPUTE "
                                 f"(theta index {ti})")


def _check_states(op: OpRecord, where: str) -> None:
    """Attention states: both or neither; only on captured exact or decision ``pv`` ops; float32,
    ``[batch, M, N]`` and ``[batch, M]``, finite."""
    if (op.attn_out is None) != (op.lse is None):
        raise TraceError(f"{where}attention output and log-sum-exp must be stored together")
    if op.attn_out is None:
        return
    if op.kind not in ("exact", "decisions") or op.name != "pv":
        raise TraceError(f"{where}attention states belong to exact or decision pv ops only")
    if op.derived_from is not None:
        raise TraceError(f"{where}a derived op cannot hold attention states (they would be those of "
                         f"step {op.derived_from[0]}, block {op.derived_from[1]})")
    for nm, arr, shape in (("attention output", op.attn_out, (op.batch, op.M, op.N)),
                           ("log-sum-exp", op.lse, (op.batch, op.M))):
        if not isinstance(arr, np.ndarray) or arr.dtype != np.float32:
            raise TraceError(f"{where}{nm} must be float32, got {getattr(arr, 'dtype', type(arr))}")
        if arr.shape != shape:
            raise TraceError(f"{where}{nm} has shape {list(arr.shape)}, expected {list(shape)}")
        if not np.isfinite(arr).all():
            raise TraceError(f"{where}{nm} holds NaN or infinity")


def _check_scores(op: OpRecord, where: str) -> None:
    """A pv op with derived P: int8 Q [b, M, d_h], Kt [b, d_h, L], W = V int8 [b, L, N], scales > 0;
    a materialised X, if present, of shape [b, M, L] uint8."""
    q, k_t, qs, ks = op.scores
    if op.name not in ("pv", "cross_pv") or op.x_signed:
        raise TraceError(f"{where}only pv ops (unsigned P) can derive P from scores")
    for nm, a in (("Q", q), ("K^T", k_t), ("V", op.W)):
        if not isinstance(a, np.ndarray) or a.dtype != np.int8 or a.ndim != 3:
            raise TraceError(f"{where}{nm} must be a 3-D int8 array, got {getattr(a, 'dtype', type(a))} "
                             f"{list(getattr(a, 'shape', []))}")
    if not (q.shape[0] == k_t.shape[0] == op.W.shape[0] and q.shape[2] == k_t.shape[1]
            and k_t.shape[2] == op.W.shape[1]):
        raise TraceError(f"{where}shape mismatch: Q {list(q.shape)}, K^T {list(k_t.shape)}, V {list(op.W.shape)}")
    for nm, v in (("q_scale", qs), ("k_scale", ks)):
        if not math.isfinite(v) or v <= 0:
            raise TraceError(f"{where}{nm} must be finite and positive, got {v}")
    if op.X is not None and (op.X.dtype != np.uint8 or op.X.shape != (q.shape[0], q.shape[1], k_t.shape[2])):
        raise TraceError(f"{where}materialised P must be uint8 {[q.shape[0], q.shape[1], k_t.shape[2]]}")


def _check_op(op: OpRecord, grid: tuple[int, int, int], where: str, shapes_ok: bool = False) -> None:
    if op.name not in OP_TYPES:
        raise TraceError(f"{where}unknown op type {op.name!r}")
    kind = op.kind
    if kind == "exact" and op.scores is not None:
        _check_scores(op, where)
    elif kind == "exact":
        if op.W is None or op.X.ndim != 3 or op.W.ndim != 3:
            raise TraceError(f"{where}X and W must be 3-D [batch, rows, cols], got "
                             f"{op.X.shape} and {None if op.W is None else op.W.shape}")
        want_x = np.int8 if op.x_signed else np.uint8
        if op.X.dtype != want_x:
            raise TraceError(f"{where}X must be {np.dtype(want_x).name}, got {op.X.dtype}")
        if op.W.dtype != np.int8:
            raise TraceError(f"{where}W must be int8, got {op.W.dtype}")
        if op.W.shape[0] != op.X.shape[0] or op.W.shape[1] != op.X.shape[2]:
            raise TraceError(f"{where}shape mismatch: X {op.X.shape} vs W {op.W.shape}")
    elif kind == "decisions":
        if op.W is not None:
            raise TraceError(f"{where}a decision op holds no operands")
        if op.dims is None or len(op.dims) != 4 or min(int(v) for v in op.dims) <= 0:
            raise TraceError(f"{where}dims (batch, M, K, N) must be 4 positive integers, got {op.dims}")
    elif not shapes_ok:
        raise TraceError(f"{where}op holds neither operands nor decisions (a shape plan can only be saved "
                         "in a shape trace)")
    elif op.dims is None or len(op.dims) != 4 or min(int(v) for v in op.dims) <= 0:
        raise TraceError(f"{where}dims (batch, M, K, N) must be 4 positive integers, got {op.dims}")
    f, h, w = grid
    if op.M != f * h * w:
        raise TraceError(f"{where}M = {op.M} does not equal the token grid {f}x{h}x{w} = {f * h * w}")
    validate_groups([g.as_tuple() for g in op.groups], op.K, where)
    _check_pair(op.theta, where, "theta")
    for nm in ("x_scale", "w_scale"):
        v = getattr(op, nm)
        if not math.isfinite(v) or v <= 0:
            raise TraceError(f"{where}{nm} must be finite and positive, got {v}")
    if kind == "decisions":
        _check_decisions(op, grid, where)
    _check_states(op, where)


class TraceWriter:
    """Write a trace op by op into a temporary zip next to `path`; rename into place on `commit`.

    Use as a context manager: leaving the block normally commits, an exception aborts (the
    temporary file is removed, `path` is untouched). Each `add` validates the op and writes its
    arrays at once, so only the current op lives in memory. Member timestamps are fixed, so equal
    traces are byte-identical files.

    Args:
        path: destination ``.npz``.
        grid: token grid ``(F, H, W)``.
        kind: ``"exact"``, ``"decisions"`` or ``"shapes"``; every added op must be of this kind
            (``"shape"`` ops in a ``"shapes"`` trace).
        **meta: the other `Trace` fields (``b_msb``, ``model``, ``size``, ``weights``, ``seed``,
            ``group_size_rule``, ``steps``, ``notes``); ``steps`` and ``notes`` may also be set as
            attributes before `commit`.

    Raises:
        TraceError: an inconsistent op (the trace is aborted by the context manager).
        algo.fileio.OutputPathError: ``path`` is an existing folder or a parent is a file.
    """

    def __init__(self, path: str | Path, grid: tuple[int, int, int], kind: str = "exact", **meta):
        if kind not in TRACE_KINDS:
            raise TraceError(f"trace kind must be one of {TRACE_KINDS}, got {kind!r}")
        self.path = Path(path)
        self.grid = tuple(int(v) for v in grid)
        self.kind = kind
        self.b_msb = int(meta.pop("b_msb", 4))
        if not 1 <= self.b_msb <= 7:
            raise TraceError(f"b_msb must be in 1..7, got {self.b_msb}")
        self.model = meta.pop("model", "")
        self.size = meta.pop("size", "")
        self.weights = meta.pop("weights", "")
        self.seed = int(meta.pop("seed", 0))
        self.group_size_rule = meta.pop("group_size_rule", "G = 8*ceil(K/64)")
        self.steps = list(meta.pop("steps", []))
        self.notes = meta.pop("notes", "")
        if meta:
            raise TypeError(f"unknown trace fields {sorted(meta)}")
        self.op_meta: list[dict] = []
        self._qk_at: dict[tuple[int, int, str], tuple[int, np.ndarray, np.ndarray, float, float]] = {}
        self.bytes_written = 0
        self.version = BASE_WRITE_VERSION  # raised by `add` (`STATES_ON_DECISIONS_VERSION`); see TRACE_VERSION
        self._done = False
        from algo.fileio import check_output_file, new_file_mode

        check_output_file(self.path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, self._tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".tmp", dir=self.path.parent)
        os.fchmod(fd, new_file_mode())  # mkstemp makes 0600; give the file ordinary permissions
        self._fh = os.fdopen(fd, "wb")
        self._zf = zipfile.ZipFile(self._fh, "w", compression=zipfile.ZIP_STORED)

    def _write(self, name: str, arr: np.ndarray) -> None:
        from numpy.lib import format as npformat

        info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
        with self._zf.open(info, "w", force_zip64=True) as member:
            npformat.write_array(member, np.ascontiguousarray(arr), allow_pickle=False)
        self.bytes_written = self._fh.tell()

    def add(self, op: OpRecord) -> None:
        """Validate `op` and append its arrays to the file."""
        i = len(self.op_meta)
        _check_op(op, self.grid, f"op {i} ({op.name}, block {op.block}): ", shapes_ok=self.kind == "shapes")
        if ("shapes" if op.kind == "shape" else op.kind) != self.kind:
            raise TraceError(f"op {i} ({op.name}) is a {op.kind} op in a {self.kind} trace")
        meta = op.meta()
        if self.kind == "exact":
            if op.name in ("qk", "cross_qk"):
                self._qk_at[(op.step, op.block, op.name)] = (i, op.X, op.W, op.x_scale, op.w_scale)
            if op.scores is None:
                self._write(f"op{i:05d}_X", op.X)
            else:  # P derived: reference the qk op holding the same Q and K, else store them here
                q, k_t, qs, ks = op.scores
                src = self._qk_at.get((op.step, op.block, "qk" if op.name == "pv" else "cross_qk"))
                if (src is not None and src[3] == qs and src[4] == ks and src[1].shape == q.shape
                        and src[2].shape == k_t.shape and np.array_equal(src[1], q) and np.array_equal(src[2], k_t)):
                    meta["p_from"]["qk"] = src[0]
                else:
                    self._write(f"op{i:05d}_Q", q)
                    self._write(f"op{i:05d}_Kt", k_t)
                self.version = max(self.version, DERIVED_P_VERSION)
            self._write(f"op{i:05d}_W", op.W)
            if op.attn_out is not None:
                self._write(f"op{i:05d}_O", op.attn_out)
                self._write(f"op{i:05d}_L", op.lse)
        elif self.kind == "decisions":
            self._write(f"op{i:05d}_D", op.decisions)
            if op.attn_out is not None:
                self._write(f"op{i:05d}_O", op.attn_out)
                self._write(f"op{i:05d}_L", op.lse)
                self.version = STATES_ON_DECISIONS_VERSION
        self.op_meta.append(meta)

    def commit(self) -> None:
        """Write the metadata and rename the file into place."""
        meta = {
            "format": TRACE_FORMAT, "version": self.version, "kind": self.kind,
            "model": self.model, "size": self.size, "weights": self.weights, "seed": self.seed,
            "grid": list(self.grid), "b_msb": self.b_msb, "group_size_rule": self.group_size_rule,
            "steps": self.steps, "notes": self.notes, "ops": self.op_meta,
        }
        self._write("meta", np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8))
        self._zf.close()
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self._fh.close()
        os.replace(self._tmp, self.path)
        self._done = True

    def abort(self) -> None:
        """Drop the temporary file; `path` is left as it was."""
        if self._done:
            return
        self._done = True
        try:
            self._zf.close()
        except (OSError, ValueError, zipfile.BadZipFile):
            pass
        self._fh.close()
        Path(self._tmp).unlink(missing_ok=True)

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None and not self._done:
            try:
                self.commit()
            except BaseException:
                self.abort()
                raise
        else:
            self.abort()


def save_trace(trace: Trace, path: str | Path) -> None:
    """Write `trace` to `path` atomically (nothing is left behind on failure), format version 3 (4 when a
    decision op holds attention states).

    Raises:
        TraceError: the trace is inconsistent (checked before anything is written) or mixes kinds.
    """
    kind = trace.kind
    if kind not in TRACE_KINDS:
        raise TraceError(f"a trace must hold only exact or only decision ops, got {kind}")
    for i, op in enumerate(trace.ops):
        _check_op(op, trace.grid, f"op {i}: ", shapes_ok=kind == "shapes")
    with TraceWriter(path, trace.grid, kind, b_msb=trace.b_msb, model=trace.model, size=trace.size,
                     weights=trace.weights, seed=trace.seed, group_size_rule=trace.group_size_rule,
                     steps=trace.steps, notes=trace.notes) as wr:
        for op in trace.ops:
            wr.add(op)


def _as_pair(t) -> tuple[float, float]:
    if len(t) != 2:
        raise TypeError(f"theta pair {t!r}")
    return (float(t[0]), float(t[1]))


def _states(npz, files, om: dict, i: int, where: str) -> dict:
    """``attn_out``/``lse`` keyword arguments of op i when its record says ``attn_states`` (else {})."""
    if not om.get("attn_states"):
        return {}
    ko, kl = f"op{i:05d}_O", f"op{i:05d}_L"
    if ko not in files or kl not in files:
        raise TraceError(f"{where}attention state arrays missing from the file")
    return dict(attn_out=npz[ko], lse=npz[kl])


def load_trace(path: str | Path, derive_p: bool = True) -> Trace:
    """Read and validate a trace (format version 1 to 5; exact, decisions or shapes).

    ``derive_p``: as `TraceReader` (True: every exact pv op's P regenerated whole into X).

    Raises:
        TraceError: missing file, not a trace, wrong format, version or kind, missing arrays,
            bad shapes or dtypes, wrong packed length, invalid decision codes, non-finite values,
            inconsistent metadata, a truncated or corrupted (CRC) file.
    """
    with TraceReader(path, derive_p=derive_p) as rd:
        return rd.trace(rd.load_ops(range(rd.n_ops)))


class TraceReader:
    """A trace file opened for reading op by op: the metadata at once, each op's arrays on demand.

    `load_trace` reads every op through it; a simulator that splits a large trace (a whole video's
    decisions, gigabytes) by (step, block) loads only the ops it needs (`load_ops`), so no process
    holds more than those ops' arrays. Use as a context manager (closes the file).

    Attributes:
        path: the file. kind: ``"exact"``, ``"decisions"`` or ``"shapes"``. version: format version.
        grid: ``(F, H, W)``. n_ops: number of ops. op_meta: the ops' records (list of dicts, as stored).
        derive_p: (argument) exact pv ops whose P is derived (version 5) get X = the whole regenerated
            P (True; small grids) or X None with `OpRecord.scores` set, for `OpRecord.p_rows` chunks
            (False; full sizes: P at 480p is 12.9 GB per block).

    Raises:
        TraceError: (on opening) missing file, not a trace, wrong format, version or kind, bad grid,
            corrupt metadata; (`load_ops`) as `load_trace` for the ops read.
    """

    def __init__(self, path: str | Path, derive_p: bool = True):
        self.derive_p = bool(derive_p)
        self.path = path = Path(path)
        if not path.is_file():
            raise TraceError(f"trace not found: {path}")
        try:
            is_zip = zipfile.is_zipfile(path)
        except OSError as err:
            raise TraceError(f"{path}: cannot read the trace file ({err})") from None
        if not is_zip:  # np.load would try a pickle and talk about allow_pickle
            raise TraceError(f"{path}: not a Kaleido trace (not a valid .npz archive: another kind of file, "
                             "or a corrupt or truncated trace)")
        try:
            self._npz = np.load(path, allow_pickle=False)
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
            raise TraceError(f"{path}: corrupt or truncated trace file ({err})") from None
        try:
            self._read_meta()
        except BaseException:
            self.close()
            raise

    def _guard(self, fn):
        try:
            return fn()
        except TraceError:
            raise
        except (KeyError, TypeError, IndexError) as err:
            raise TraceError(f"{self.path}: corrupt trace metadata (missing or bad field {err})") from None
        except (zipfile.BadZipFile, OSError, ValueError, EOFError) as err:
            raise TraceError(f"{self.path}: corrupt or truncated trace file ({err})") from None

    def _read_meta(self) -> None:
        path, npz = self.path, self._npz

        def read():
            self.files = set(npz.files)
            if "meta" not in self.files:
                raise TraceError(f"{path}: not a Kaleido trace (no 'meta' entry)")
            try:
                meta = json.loads(bytes(npz["meta"]).decode())
            except (UnicodeDecodeError, json.JSONDecodeError) as err:
                raise TraceError(f"{path}: corrupt trace metadata ({err})") from None
            if not isinstance(meta, dict) or meta.get("format") != TRACE_FORMAT:
                fmt = meta.get("format") if isinstance(meta, dict) else None
                raise TraceError(f"{path}: not a Kaleido trace (format {fmt!r})")
            version = meta.get("version")
            if version not in READABLE_VERSIONS:
                raise TraceError(
                    f"{path}: trace format version {version} is not supported "
                    f"(this build reads versions {', '.join(map(str, READABLE_VERSIONS))}); re-capture the trace"
                )
            kind = meta.get("kind", "exact") if version >= 2 else "exact"
            if kind == "shapes" and version < 3:
                raise TraceError(f"{path}: shape traces exist from format version 3 on, file says {version}")
            if kind not in TRACE_KINDS:
                raise TraceError(f"{path}: unknown trace kind {kind!r} (expected one of {TRACE_KINDS})")
            grid = tuple(int(v) for v in meta["grid"])
            if len(grid) != 3 or min(grid) <= 0:
                raise TraceError(f"{path}: bad token grid {meta['grid']}")
            b_msb = int(meta["b_msb"])
            if not 1 <= b_msb <= 7:
                raise TraceError(f"{path}: b_msb must be in 1..7, got {b_msb}")
            self.meta, self.version, self.kind, self.grid, self.b_msb = meta, int(version), kind, grid, b_msb
            self.op_meta = list(meta["ops"])
            self.n_ops = len(self.op_meta)
            self._fields = dict(model=meta["model"], size=meta["size"], weights=meta["weights"],
                                seed=int(meta["seed"]), group_size_rule=meta["group_size_rule"],
                                steps=list(meta["steps"]), notes=meta.get("notes", ""))

        self._guard(read)

    def _common(self, i: int) -> tuple[dict, tuple[int, int, int, int]]:
        om = self.op_meta[i]
        common = dict(
            name=om["name"], block=int(om["block"]), step=int(om["step"]),
            groups=[Group(int(g[0]), int(g[1]), str(g[2]), str(g[3])) for g in om["groups"]],
            theta=_as_pair(om["theta"]), x_signed=bool(om["x_signed"]),
            x_scale=float(om["x_scale"]), w_scale=float(om["w_scale"]),
        )
        return common, (int(om["batch"]), int(om["M"]), int(om["K"]), int(om["N"]))

    def _load_op(self, i: int) -> OpRecord:
        npz, files, om, kind, path = self._npz, self.files, self.op_meta[i], self.kind, self.path
        where = f"{path}: op {i} ({om.get('name')}, block {om.get('block')}): "
        common, dims = self._common(i)
        if kind == "exact" and "p_from" in om:
            op = OpRecord(X=None, W=self._array(f"op{i:05d}_W", where), scores=self._scores(i, where),
                          **common, **_states(npz, files, om, i, where))
            if self.derive_p:
                _check_op(op, self.grid, where)
                op.X = op.p_rows()
        elif kind == "exact":
            kx, kw = f"op{i:05d}_X", f"op{i:05d}_W"
            if kx not in files or kw not in files:
                raise TraceError(f"{where}operand arrays missing from the file")
            op = OpRecord(X=npz[kx], W=npz[kw], **common, **_states(npz, files, om, i, where))
        elif kind == "shapes":
            op = OpRecord(X=None, W=None, dims=dims, **common)
        else:
            kd = f"op{i:05d}_D"
            if kd not in files:
                raise TraceError(f"{where}decision array missing from the file")
            src = om.get("derived_from")
            if om.get("attn_states") and self.version < STATES_ON_DECISIONS_VERSION:
                raise TraceError(f"{where}attention states on a decision op need format version "
                                 f"{STATES_ON_DECISIONS_VERSION}, file says {self.version}")
            op = OpRecord(X=None, W=None, dims=dims, decisions=npz[kd], **_states(npz, files, om, i, where),
                          thetas=tuple(_as_pair(t) for t in om["thetas"]),
                          derived_from=None if src is None else (int(src[0]), int(src[1])), **common)
        _check_op(op, self.grid, where, shapes_ok=kind == "shapes")
        if (op.batch, op.M, op.K, op.N) != dims:
            raise TraceError(f"{where}array shapes disagree with the recorded (batch, M, K, N)")
        return op

    def _array(self, key: str, where: str) -> np.ndarray:
        if key not in self.files:
            raise TraceError(f"{where}array {key} missing from the file")
        return self._npz[key]

    def _scores(self, i: int, where: str) -> tuple[np.ndarray, np.ndarray, float, float]:
        """``(Q, Kt, q_scale, k_scale)`` of a pv op with derived P: its own ``_Q``/``_Kt`` arrays or
        those of the qk op its ``p_from`` names (same step and block, recorded earlier)."""
        if self.version < DERIVED_P_VERSION:
            raise TraceError(f"{where}derived P needs format version {DERIVED_P_VERSION}, file says {self.version}")
        om, src = self.op_meta[i], self.op_meta[i]["p_from"]
        qs, ks = float(src["q_scale"]), float(src["k_scale"])
        if "qk" not in src:
            return self._array(f"op{i:05d}_Q", where), self._array(f"op{i:05d}_Kt", where), qs, ks
        j = int(src["qk"])
        if not 0 <= j < i:
            raise TraceError(f"{where}p_from names op {j}, not an earlier op")
        qm = self.op_meta[j]
        if (qm["name"] != ("qk" if om["name"] == "pv" else "cross_qk") or int(qm["step"]) != int(om["step"])
                or int(qm["block"]) != int(om["block"]) or float(qm["x_scale"]) != qs or float(qm["w_scale"]) != ks):
            raise TraceError(f"{where}p_from names op {j} ({qm['name']}, block {qm['block']}), not the qk op "
                             "of the same step and block with the same scales")
        return self._array(f"op{j:05d}_X", where), self._array(f"op{j:05d}_W", where), qs, ks

    def load_ops(self, indices) -> list[OpRecord]:
        """The ops at ``indices`` (0-based, file order), arrays read and validated as `load_trace` does."""
        return self._guard(lambda: [self._load_op(int(i)) for i in indices])

    def shape_ops(self) -> list[OpRecord]:
        """Every op without its arrays: shapes, groups, theta, thetas (decision ops) and ``derived_from``;
        ``dims`` set, X, W and decisions None (what shape and compatibility checks need)."""
        def build():
            out = []
            for i, om in enumerate(self.op_meta):
                common, dims = self._common(i)
                thetas = tuple(_as_pair(t) for t in om.get("thetas", ()))
                src = om.get("derived_from")
                out.append(OpRecord(X=None, W=None, dims=dims, thetas=thetas,
                                    derived_from=None if src is None else (int(src[0]), int(src[1])), **common))
            return out

        return self._guard(build)

    def trace(self, ops: list[OpRecord]) -> Trace:
        """A `Trace` of this file's metadata holding ``ops``."""
        return Trace(grid=self.grid, ops=ops, b_msb=self.b_msb, version=self.version, **self._fields)

    def close(self) -> None:
        self._npz.close()

    def __enter__(self) -> TraceReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
