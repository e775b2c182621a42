"""Compiled kernels for capture at real size: reuse decisions for several thetas in one pass, int8 quantisation.

`algo.reuse.golden.decide` is the reference: NumPy, one theta per call, about ten array passes per
reuse step (int16/int32 temporaries, ``where`` chains). At 480p (32,760 tokens) it took 15 s of a
Wan2.1-1.3B block's capture hooks for five ops and three thetas (docs/capture.md). These kernels
compute the same integers (tests/test_kernels.py compares them with `decide` and with the NumPy
quantiser on seeded inputs, every axis, int8 and uint8, carried state):

- `decide_multi`: per channel group, one walk along the group's reuse axis per line of tokens
  (numba ``prange`` over lines: every line is independent), each token's channels read once for
  all thetas, with one effective-neighbour vector per theta;
- `quantize_int8_fast`: ``max|x|`` and ``clip(rint(x / scale), -128, 127)`` in float64 per
  element (the division, not a multiplication by ``1 / scale``, so the rounding is NumPy's),
  in parallel chunks;
- `numerators_from_scores`: `algo.reuse.softmax`'s P from a chunk of integer scores, the row
  maximum and the table lookup ``T[min(rowmax - S, n - 1)]`` in one pass per row (numba ``prange``
  over rows), instead of four torch/NumPy passes over the float32 scores and an int32 gap array.

Codes as in `algo.reuse.golden` (COMPUTE 0, PARTIAL 1, REUSE 2; docs/spec.md §2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from algo.reuse.golden import AXIS_INDEX, COMPUTE, PARTIAL, REUSE, GroupSpec, _check, theta_bounds


@numba.njit(cache=True, parallel=True)
def _decide_group(x, n_f, n_h, n_w, k0, k1, ax, b1, b2, lsb_mask, dec, g, prev, has_prev):  # pragma: no cover - compiled
    # x [M, K] int8/uint8; b1, b2 int64 [T]; dec int8 [T, M, G]; prev int16 [T, H*W, K] (ax 0 only)
    n = k1 - k0
    n_t = b1.shape[0]
    if ax == 0:
        length, stride, n_lines = n_f, n_h * n_w, n_h * n_w
    elif ax == 1:
        length, stride, n_lines = n_h, n_w, n_f * n_w
    else:
        length, stride, n_lines = n_w, 1, n_f * n_h
    hi_mask = ~lsb_mask
    for line_u in numba.prange(n_lines):
        line = np.int64(line_u)  # prange's index may be unsigned; int64 keeps index arithmetic integral
        if ax == 0:
            base = line
        elif ax == 1:
            base = (line // n_w) * n_h * n_w + line % n_w
        else:
            base = line * n_w
        nb = np.empty((n_t, n), dtype=np.int64)
        start = 0
        if has_prev:
            for t in range(n_t):
                for c in range(n):
                    nb[t, c] = prev[t, line, k0 + c]
        else:  # the first token along the axis has no neighbour: COMPUTE, X_eff = X
            for t in range(n_t):
                dec[t, base, g] = COMPUTE
                for c in range(n):
                    nb[t, c] = x[base, k0 + c]
            start = 1
        for i in range(start, length):
            row = base + i * stride
            for t in range(n_t):
                sad = 0
                for c in range(n):
                    sad += abs(np.int64(x[row, k0 + c]) - nb[t, c])
                if sad < b1[t]:
                    dec[t, row, g] = REUSE  # X_eff = the neighbour's: nb unchanged
                elif sad < b2[t]:
                    dec[t, row, g] = PARTIAL
                    for c in range(n):
                        nb[t, c] = (nb[t, c] & hi_mask) + (np.int64(x[row, k0 + c]) & lsb_mask)
                else:
                    dec[t, row, g] = COMPUTE
                    for c in range(n):
                        nb[t, c] = x[row, k0 + c]
        if has_prev:
            for t in range(n_t):
                for c in range(n):
                    prev[t, line, k0 + c] = nb[t, c]


def decide_multi(
    X: np.ndarray,  # noqa: N803
    grid: tuple[int, int, int],
    groups: Sequence[GroupSpec],
    thetas: Sequence[tuple[float, float]],
    b_msb: int = 4,
    prev: np.ndarray | None = None,
) -> np.ndarray:
    """Decisions of `algo.reuse.golden.decide` for several thetas at once.

    Args:
        X: ``[M, K]`` int8 or uint8, raster token order (``M = F*H*W``).
        grid: ``(F, H, W)``.
        groups: ``(k_start, k_stop, axis)`` partitioning ``0..K``.
        thetas: T pairs ``(theta1, theta2)`` (`algo.reuse.golden.theta_bounds`).
        b_msb: reused high bits for PARTIAL, 1..7.
        prev: optional int16 ``[T, H*W, K]``: the effective operand of the frame before X's first
            frame, per theta (every group must reuse along frames, axis ``"f"``). X's frame 0 is
            then compared with it instead of always computing, and `prev` is overwritten with the
            effective operand of X's last frame, so a long grid can be decided frame chunk by
            frame chunk (`algo.capture.pv_decisions`). Start a chain with ``X[:H*W]`` as int16.

    Returns:
        int8 ``[T, M, len(groups)]``; ``[i]`` equals ``decide(X, grid, groups, thetas[i], b_msb)[0]``
        (with `prev`: equals the rows of `decide` on the grid extended by the previous frame).

    Raises:
        ValueError: bad shapes, dtypes, groups, thresholds or `prev`, as `algo.reuse.golden.decide`.
    """
    n_f, n_h, n_w = _check(X, grid, groups)
    if not 1 <= b_msb <= 7:
        raise ValueError(f"b_msb must be in 1..7, got {b_msb}")
    sizes = [k1 - k0 for k0, k1, _ in groups]
    bounds = [theta_bounds(th, sizes) for th in thetas]
    m, k = X.shape
    n_t = len(bounds)
    if prev is not None:
        if any(axis != "f" for _, _, axis in groups):
            raise ValueError("prev (carried frame state) needs every group to reuse along frames (axis 'f')")
        if prev.shape != (n_t, n_h * n_w, k) or prev.dtype != np.int16:
            raise ValueError(f"prev must be int16 [{n_t}, {n_h * n_w}, {k}], got {prev.dtype} {prev.shape}")
    state = prev if prev is not None else np.zeros((n_t, 0, 0), dtype=np.int16)
    dec = np.empty((n_t, m, len(groups)), dtype=np.int8)
    lsb_mask = (1 << (8 - b_msb)) - 1
    x = np.ascontiguousarray(X)
    for gi, (k0, k1, axis) in enumerate(groups):
        b1 = np.array([b[0][gi] for b in bounds], dtype=np.int64)
        b2 = np.array([b[1][gi] for b in bounds], dtype=np.int64)
        _decide_group(x, n_f, n_h, n_w, k0, k1, AXIS_INDEX[axis], b1, b2, lsb_mask, dec, gi, state,
                      prev is not None)
    return dec


#: Elements per parallel chunk of `quantize_int8_fast` (project choice: 1 Mi float32 = 4 MB, a
#: few per core keeps both cores busy on the smallest captured tensors).
_CHUNK = 1 << 20


@numba.njit(cache=True, parallel=True)
def _absmax(flat, chunk):  # pragma: no cover - compiled
    n_chunks = (flat.size + chunk - 1) // chunk
    part = np.zeros(n_chunks, dtype=np.float64)
    bad = np.zeros(n_chunks, dtype=np.bool_)
    for ci_u in numba.prange(n_chunks):
        ci = np.int64(ci_u)
        m = 0.0
        for i in range(ci * chunk, min(flat.size, (ci + 1) * chunk)):
            v = np.float64(flat[i])
            if not math.isfinite(v):
                bad[ci] = True
            elif abs(v) > m:
                m = abs(v)
        part[ci] = m
    return part.max() if n_chunks else 0.0, bad.any()


@numba.njit(cache=True, parallel=True)
def _quantize(flat, scale, out, chunk):  # pragma: no cover - compiled
    n_chunks = (flat.size + chunk - 1) // chunk
    for ci_u in numba.prange(n_chunks):
        ci = np.int64(ci_u)
        for i in range(ci * chunk, min(flat.size, (ci + 1) * chunk)):
            q = np.rint(np.float64(flat[i]) / scale)
            out[i] = np.int8(min(127.0, max(-128.0, q)))


def quantize_int8_fast(x: np.ndarray) -> tuple[np.ndarray, float] | None:
    """`algo.capture.quantize_int8` of a float32 or float64 array: ``(q, scale)``, or None if x is not finite.

    ``scale = max|x| / 127`` (1.0 for an all-zero tensor); ``q = clip(rint(x / scale), -128, 127)`` in
    float64, round half to even: the same integers as the NumPy form.
    """
    flat = np.ascontiguousarray(x).reshape(-1)
    amax, bad = _absmax(flat, _CHUNK)
    if bad:
        return None
    scale = amax / 127.0 if amax > 0 else 1.0
    q = np.empty(flat.shape, dtype=np.int8)
    _quantize(flat, scale, q, _CHUNK)
    return q.reshape(x.shape), scale


@numba.njit(cache=True, parallel=True)
def _numerators(s, table, out):  # pragma: no cover - compiled
    # s float32/float64 [rows, L] holding integers; table uint8 [n]; out uint8 [rows, L]
    last = np.int64(table.size - 1)
    n_l = s.shape[1]
    n_rows = s.shape[0] if n_l > 0 else 0
    for i_u in numba.prange(n_rows):
        i = np.int64(i_u)
        mx = s[i, 0]
        for j in range(1, n_l):
            if s[i, j] > mx:
                mx = s[i, j]
        m = np.int64(mx)
        for j in range(n_l):
            out[i, j] = table[min(m - np.int64(s[i, j]), last)]


def numerators_from_scores(s: np.ndarray, table: np.ndarray, out: np.ndarray) -> None:
    """Fill ``out`` with `algo.reuse.softmax`'s P of a chunk of integer scores: ``out[i, j] =
    table[min(max_j s[i] - s[i, j], table.size - 1)]``.

    Args:
        s: float32 or float64 ``[rows, L]``, C-contiguous, every value an integer (`int_scores`).
        table: uint8 ``[n]``, n >= 1 (`algo.reuse.softmax.numerator_table`).
        out: uint8 ``[rows, L]``, written in place (a C-contiguous view is fine).

    The gap is taken in int64 from the integer-valued floats, so it is exact for any score
    magnitude a float represents exactly (float32 below 2^24: d_h <= 1024).

    Raises:
        ValueError: shapes or dtypes other than these.
    """
    if s.ndim != 2 or out.shape != s.shape or out.dtype != np.uint8 or table.dtype != np.uint8 or table.size < 1:
        raise ValueError(f"numerators need s [rows, L], out uint8 of its shape and a uint8 table, got "
                         f"{s.dtype} {s.shape}, {out.dtype} {out.shape}, {table.dtype} {table.shape}")
    if s.dtype not in (np.float32, np.float64) or not s.flags.c_contiguous or not out.flags.c_contiguous:
        raise ValueError(f"numerators need C-contiguous float32/float64 scores and output, got {s.dtype}")
    _numerators(s, table, out)
