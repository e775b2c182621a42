"""Validation of trace records: every check `algo.trace.writer` runs before writing an op and
`algo.trace.reader` runs after reading one (shapes, dtypes, groups, thresholds, scales, packed
decisions and their edge rule, attention states, derived-P operands). Each failure is a `TraceError`
with a one-line reason prefixed by ``where``.
"""

from __future__ import annotations

import math

import numpy as np

from algo.trace.format import AXES, OP_TYPES, OpRecord, TraceError, packed_length


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


def check_op(op: OpRecord, grid: tuple[int, int, int], where: str, shapes_ok: bool = False) -> None:
    """Check one op against the token grid; ``shapes_ok``: a shape-only op is allowed (shape traces)."""
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
