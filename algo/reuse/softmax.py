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
The row maximum, the gap (taken in int64 from the integer-valued floats) and the lookup run in one
compiled pass per chunk (`algo.reuse.kernels.numerators_from_scores`); the GEMM stays torch's.
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


def _score_dtype(d_h: int) -> torch.dtype:
    """float32 while every partial sum of an int8 dot product is exact in it (d_h <= 1024), else float64."""
    return torch.float32 if d_h <= 1024 else torch.float64


def int_scores(q: np.ndarray, k_t: np.ndarray | torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Exact integer scores ``q @ k_t`` of int8 operands as a float tensor (values are integers).

    Args:
        q: int8 ``[..., rows, d_h]``; k_t: int8 ``[..., d_h, L]``, or that array already converted
            to the score dtype (a tensor: one conversion per head instead of one per chunk).
        out: optional contiguous tensor of the result's shape and dtype, written in place (a reused
            buffer: a fresh 134 MB result costs its page faults on every chunk).

    Returns:
        float32 (float64 when d_h > 1024) tensor ``[..., rows, L]``.
    """
    dt = _score_dtype(q.shape[-1])
    if not isinstance(k_t, torch.Tensor):
        k_t = torch.from_numpy(np.ascontiguousarray(k_t)).to(dt)
    q_f = torch.from_numpy(np.ascontiguousarray(q)).to(dt)
    return torch.matmul(q_f, k_t) if out is None else torch.matmul(q_f, k_t, out=out)


class Numerators:
    """P of one op's int8 operands, any query rows of any head, computed a chunk of rows at a time.

    Holds the op's table (`numerator_table`), the current head's K^T in the score dtype (converted
    once per head) and one score buffer of ``chunk x L`` floats reused by every chunk; each chunk is
    one torch GEMM (`int_scores`) and one compiled pass for the row maximum, the gap and the lookup
    (`algo.reuse.kernels.numerators_from_scores`). Memory: ``chunk * L * 4`` bytes of scores (134 MB
    at 480p) plus ``d_h * L * 4`` for the converted K^T.

    Args:
        q: int8 ``[heads, M, d_h]`` (``qk``'s X); k_t: int8 ``[heads, d_h, L]`` (``qk``'s W).
        q_scale, k_scale: their quantisation scales (real = int * scale).
        chunk: query rows per GEMM.

    Raises:
        ValueError: operands not int8 or of mismatched shapes; a non-positive scale; chunk < 1.
    """

    def __init__(self, q: np.ndarray, k_t: np.ndarray, q_scale: float, k_scale: float, chunk: int = P_ROWS_CHUNK):
        if q.dtype != np.int8 or k_t.dtype != np.int8:
            raise ValueError(f"P needs int8 Q and K, got {q.dtype} and {k_t.dtype}")
        if q.ndim != 3 or k_t.ndim != 3 or q.shape[0] != k_t.shape[0] or q.shape[2] != k_t.shape[1]:
            raise ValueError(f"P needs Q [heads, M, d_h] and K^T [heads, d_h, L], got {q.shape} and {k_t.shape}")
        if chunk < 1:
            raise ValueError(f"chunk must be >= 1 query row, got {chunk}")
        self.q, self.k_t, self.chunk = q, k_t, int(chunk)
        self.d_h, self.n_keys = q.shape[2], k_t.shape[2]
        self.table = numerator_table(score_scale(q_scale, k_scale, self.d_h), self.d_h)
        self._dt = _score_dtype(self.d_h)
        self._head, self._k_h, self._buf = -1, None, None

    def rows(self, h: int, rows: range, out: np.ndarray | None = None) -> np.ndarray:
        """uint8 ``[len(rows), L]``: P of query ``rows`` (a range, any step) of head ``h``, written
        into ``out`` (C-contiguous uint8 of that shape) when given."""
        # numba loads with the first P, not with this module
        from algo.reuse.kernels import numerators_from_scores

        if out is None:
            out = np.empty((len(rows), self.n_keys), dtype=np.uint8)
        if h != self._head:
            self._k_h = torch.from_numpy(np.ascontiguousarray(self.k_t[h])).to(self._dt)
            self._head = h
        if self._buf is None:
            self._buf = torch.empty((min(self.chunk, max(1, len(rows))), self.n_keys), dtype=self._dt)
        for c0 in range(0, len(rows), self.chunk):
            r = rows[c0:c0 + self.chunk]
            if len(r) > self._buf.shape[0]:
                self._buf = torch.empty((min(self.chunk, len(r)), self.n_keys), dtype=self._dt)
            s = int_scores(self.q[h, r.start:r.stop:r.step], self._k_h, out=self._buf[:len(r)]).numpy()
            numerators_from_scores(s, self.table, out[c0:c0 + len(r)])
        return out


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
        uint8 ``[n_heads, n_rows, L]``, the same values for any chunking (`Numerators`).

    Raises:
        ValueError: operands not int8 or of mismatched shapes; a non-positive scale.
    """
    num = Numerators(q, k_t, q_scale, k_scale, chunk)
    hs = range(q.shape[0])[heads if heads is not None else slice(None)]
    rs = range(q.shape[1])[rows if rows is not None else slice(None)]
    out = np.empty((len(hs), len(rs), k_t.shape[2]), dtype=np.uint8)
    for oh, h in enumerate(hs):
        num.rows(h, rs, out=out[oh])
    return out
