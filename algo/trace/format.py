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

Writing is atomic (temporary file in the target folder + rename; `algo.trace.writer.TraceWriter`
streams op arrays into the temporary zip as they are produced, so a large capture never holds the
whole trace in memory). Loading (`algo.trace.reader`) checks the format name, version, kind, every
key, shape, dtype, packed length, decision codes and finiteness (`algo.trace.validate`), and raises
`TraceError` with a one-line reason otherwise.

This module holds the format itself: versions, names, the record types and the decision packing.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field

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
    """A trace file is missing, corrupt, of another version, or inconsistent. The message is one line:
    line breaks (from a file's own strings or a library's message) become spaces."""

    def __init__(self, msg: object = ""):
        super().__init__(one_line(msg))


def one_line(msg: object) -> str:
    """``msg`` as one line: every run of whitespace holding a line break becomes one space."""
    return re.sub(r"\s*[\r\n\v\f\x1c-\x1e\x85\u2028\u2029]+\s*", " ", str(msg)).strip()


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


#: Names that moved to the reader, writer and validation modules, still importable from here.
_MOVED = {
    "validate_groups": "algo.trace.validate",
    "TraceWriter": "algo.trace.writer",
    "save_trace": "algo.trace.writer",
    "TraceReader": "algo.trace.reader",
    "load_trace": "algo.trace.reader",
}


def __getattr__(name: str):
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
