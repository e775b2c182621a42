"""The one rule for ``pv``'s streamed operand P: softmax numerators from ``qk``'s int8 operands.

``P[h, i, j] = round(255 * exp(c * (S[h, i, j] - max_j S[h, i, j])))`` (uint8), with
``S = Q[h] @ Kt[h]`` the exact integer scores of ``qk``'s int8 operands (Q ``[heads, M, d_h]``,
Kt = K^T ``[heads, d_h, L]``) and ``c = q_scale * k_scale / sqrt(d_h)``: what the accelerator's
fused attention sees (the ``qk`` GEMM's int32 output, scaled on the vector unit; docs/decisions.md
"P derived from the int8 scores"). Rounding is half to even (``np.rint``); the row maximum gives 255.

Bit for bit by construction, whatever the chunking: the scores are integers, computed as a float32
GEMM of int8 values, exact because every partial sum is an integer of magnitude at most
``d_h * 128**2 <= 2**24`` (d_h <= 1024; float64 beyond); ``d = rowmax - S`` is an integer in
``0 .. 2 * d_h * 128**2``, and ``P = T[d]`` for the table ``T = rint(255 exp(-c d))`` built once per
op in float64 (`numerator_table`; ``T[d] = 0`` from the first d with ``255 exp(-c d) <= 0.5``).
Capture, `algo.trace` (which regenerates P from the stored Q and K instead of storing it), the
decision path and the golden checks all call `softmax_numerators_int8`.
"""

from __future__ import annotations

import math

import numpy as np
import torch

#: Query rows per chunk (per head): bounds the float32 score buffer to ``rows x L x 4`` bytes
#: (project choice: 1,024 x 32,760 keys x 4 B = 134 MB at 480p).
P_ROWS_CHUNK = 1024


def score_scale(q_scale: float, k_scale: float, d_h: int) -> float:
    """``c = q_scale * k_scale / sqrt(d_h)`` (float64): real score per integer score unit."""
    return float(q_scale) * float(k_scale) / math.sqrt(int(d_h))


def numerator_table(c: float, d_h: int) -> np.ndarray:
    """uint8 ``[n]``: ``T[d] = rint(255 exp(-c d))`` for integer score gaps ``d = 0 .. n-1``.

    ``n`` is the first gap whose value is 0, plus one (so ``T[-1] == 0`` and every larger gap maps
    to 0), capped at the largest possible gap ``2 * d_h * 128**2`` + 1.

    Raises:
        ValueError: ``c`` not finite and positive.
    """
    if not (math.isfinite(c) and c > 0):
        raise ValueError(f"score scale must be finite and positive, got {c}")
    n_max = 2 * int(d_h) * 128 * 128 + 1
    n = min(n_max, int(math.ceil(math.log(510.0) / c)) + 2)
    t = np.rint(255.0 * np.exp(-c * np.arange(n, dtype=np.float64)))
    return t.astype(np.uint8)


def int_scores(q: np.ndarray, k_t: np.ndarray) -> torch.Tensor:
    """Exact integer scores ``q @ k_t`` of int8 operands as a float tensor (values are integers).

    Args:
        q: int8 ``[..., rows, d_h]``; k_t: int8 ``[..., d_h, L]``.

    Returns:
        float32 (float64 when d_h > 1024) tensor ``[..., rows, L]``.
    """
    d_h = q.shape[-1]
    dt = torch.float32 if d_h <= 1024 else torch.float64
    return torch.matmul(torch.from_numpy(np.ascontiguousarray(q)).to(dt),
                        torch.from_numpy(np.ascontiguousarray(k_t)).to(dt))


def softmax_numerators_int8(q: np.ndarray, k_t: np.ndarray, q_scale: float, k_scale: float,
                            rows: slice | None = None, heads: slice | None = None,
                            chunk: int = P_ROWS_CHUNK) -> np.ndarray:
    """P of query ``rows`` (all: None) of ``heads`` (all: None) from ``qk``'s int8 operands.

    Args:
        q: int8 ``[heads, M, d_h]`` (``qk``'s X); k_t: int8 ``[heads, d_h, L]`` (``qk``'s W).
        q_scale, k_scale: their quantisation scales (real = int * scale).
        rows, heads: slices (step 1) of queries and heads.
        chunk: query rows per head computed at once (memory: ``chunk * L * 4`` bytes of scores).

    Returns:
        uint8 ``[n_heads, n_rows, L]``, the same values for any chunking.

    Raises:
        ValueError: operands not int8 or of mismatched shapes; a non-positive scale.
    """
    if q.dtype != np.int8 or k_t.dtype != np.int8:
        raise ValueError(f"P needs int8 Q and K, got {q.dtype} and {k_t.dtype}")
    if q.ndim != 3 or k_t.ndim != 3 or q.shape[0] != k_t.shape[0] or q.shape[2] != k_t.shape[1]:
        raise ValueError(f"P needs Q [heads, M, d_h] and K^T [heads, d_h, L], got {q.shape} and {k_t.shape}")
    d_h = q.shape[2]
    table = numerator_table(score_scale(q_scale, k_scale, d_h), d_h)
    last = table.size - 1
    hs = range(q.shape[0])[heads if heads is not None else slice(None)]
    rs = range(q.shape[1])[rows if rows is not None else slice(None)]
    out = np.empty((len(hs), len(rs), k_t.shape[2]), dtype=np.uint8)
    for oh, h in enumerate(hs):
        for c0 in range(0, len(rs), chunk):
            r = rs[c0:c0 + chunk]
            s = int_scores(q[h, r.start:r.stop:r.step], k_t[h])
            gap = (s.amax(dim=-1, keepdim=True) - s).clamp_(max=last).to(torch.int32).numpy()
            out[oh, c0:c0 + len(r)] = table[gap]
    return out
