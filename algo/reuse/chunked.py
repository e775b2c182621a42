"""Golden decisions and outputs of one exact op, one batch index at a time, without holding ``pv``'s P whole.

An exact trace of format version 5 stores no P for ``pv``: the op holds ``qk``'s int8 Q and K
(`algo.trace.OpRecord.scores`) and `algo.trace.OpRecord.p_rows` regenerates any query rows bit for bit
(`algo.reuse.softmax`). Consumers that run the golden model on an exact op (the cycle model's decisions,
the output checksums, the RTL engine's inputs) go through this module:

- `op_decisions`: int8 ``[M, n_groups]`` decisions of batch index ``b`` at the op's theta (the cycle model and
  the RTL engine);
- `decision_chunks`: the same decisions with the similarity SAD of every (token, group), in row chunks
  (`algo.reuse.stats`: fractions and Δ histograms);
- `op_outputs`: the golden ``Y = X_eff @ W`` of batch index ``b`` as int64 row blocks, in row order;
- `frame_operands`: the streamed operand of batch index ``b`` one latent frame at a time (stored X or
  regenerated P), for rules that walk frames themselves (the baselines' policies, `sim.baselines`) and the
  RTL engine's slot records (`sim.engines.verilator.gemm_records`); `operand_rows`: any rows of it.

For a ``pv`` op whose P is derived (X None) and whose every channel group reuses along frames (axis
``"f"``, `algo.reuse.golden.block_groups`: always so for captured ``pv``), P is regenerated a slice of one
latent frame at a time: at most ``n = slice_positions(H*W, L)`` positions (`SLICE_ELEMS` P elements, 2^25:
1,024 positions at 480p, 443 at 720p). A position's decisions depend only on its own rows in the earlier
frames (its effective row of frame f-1, which `algo.reuse.kernels.decide_multi` carries as ``prev``), so
this equals `algo.reuse.golden.decide` on the whole P (tests/test_chunked.py, forced slices of 1, 5 and 64
positions). `op_decisions` walks slice after slice, each through every frame, and carries one slice's rows:
its working set per call is bounded by the slice, not by the frame (``n = min(H*W, 2^25 // L)``):

    n*L (P, uint8) + 2*n*L (the slice's carried int16 rows)
    + 4*min(n, 1024)*L (float32 scores, `algo.reuse.softmax.Numerators`) + 4*d_h*L (K^T as float)
    + M*n_groups (the head's int8 decisions)

-- at most 7 x 2^25 B = 235 MB plus 4*d_h*L (17 MB at 480p, 39 MB at 720p), whatever the grid.
`decision_chunks` and `op_outputs` keep row order (frame after frame, slices within a frame), so they carry
every position's rows (int16 ``[H*W, K]``, 102 MB at 480p, 544 MB at 720p) beside one slice's work;
`decision_chunks` adds the slice's int16 ``|P - prev|`` and its int64 SAD ``[n, n_groups]``. Any other op
uses its stored X (or the whole regenerated P of head b when its groups do not all reuse along frames).

Decisions come from `algo.reuse.kernels.decide_multi` (one theta), outputs from `algo.reuse.golden.decide`
and `algo.reuse.golden.apply_decisions` (whole X) or the carried effective rows (frames); both are the
golden model's integers (tests/test_kernels.py, tests/test_chunked.py).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from algo.reuse.golden import COMPUTE, _gemm_exact, apply_decisions, decide
from algo.reuse.kernels import decide_multi


def by_frames(op) -> bool:
    """True when `op` is a ``pv`` op with derived P (no X) whose groups all reuse along frames."""
    return op.X is None and op.scores is not None and all(g.axis == "f" for g in op.groups)


def streamed_operand(op, b: int) -> np.ndarray:
    """The whole streamed operand of batch index ``b``: ``X[b]`` ``[M, K]``, or head b's regenerated P
    (uint8 ``[M, L]``: 1.07 GB per head at 480p; `op_decisions` and `op_outputs` avoid it).

    Raises:
        algo.trace.TraceError: the op holds neither X nor scores (a decision or shape op).
    """
    if op.X is not None:
        return op.X[b]
    return op.p_rows(heads=slice(b, b + 1))[0]


def frame_operands(op, b: int, grid) -> Iterator[tuple[slice, np.ndarray]]:
    """``(rows, operand rows [H*W, K])`` of batch index ``b``, one latent frame after another: rows of the
    stored ``X[b]`` (int8/uint8, a view), or of head b's P regenerated for those query rows (uint8
    ``[H*W, L]``, `algo.trace.OpRecord.p_rows`; 51 MB at 480p) when the op holds none.

    Raises:
        algo.trace.TraceError: the op holds neither X nor scores (a decision or shape op).
    """
    f_n, h_n, w_n = (int(v) for v in grid)
    hw = h_n * w_n
    for f in range(f_n):
        rows = slice(f * hw, (f + 1) * hw)
        yield rows, operand_rows(op, b, rows)


def operand_rows(op, b: int, rows: slice) -> np.ndarray:
    """Query ``rows`` of batch index ``b``'s streamed operand ``[n, K]``: a view of the stored X, or head b's
    P regenerated for those rows only (uint8, `algo.trace.OpRecord.p_rows`).

    Raises:
        algo.trace.TraceError: the op holds neither X nor scores (a decision or shape op).
    """
    return op.X[b, rows] if op.X is not None else op.p_rows(rows, slice(b, b + 1))[0]


#: P elements (query rows x keys) regenerated at once by the frame walk: a latent frame is decided in
#: slices of ``max(1, SLICE_ELEMS // L)`` positions (project choice, 2^25: 32 MiB of uint8 P, 64 MiB of
#: int16 effective rows and at most 128 MiB of float32 scores per slice; 1,024 positions at 480p, 443 at
#: 720p). Tests lower it to force several slices on small grids.
SLICE_ELEMS = 1 << 25


def slice_positions(hw: int, n_keys: int) -> int:
    """Positions per slice of a frame of ``hw`` positions whose rows hold ``n_keys`` values (`SLICE_ELEMS`)."""
    return max(1, min(hw, SLICE_ELEMS // max(1, n_keys)))


def _frames(op, b: int, grid, theta, b_msb: int, with_sad: bool = False, frames_first: bool = True
            ) -> Iterator[tuple[slice, np.ndarray, np.ndarray, np.ndarray | None]]:
    """``(rows, decisions int8 [n, n_groups], x_eff int16 [n, K], sad)`` of head ``b``, one slice of
    ``n <= slice_positions`` positions of one latent frame at a time; ``sad``: with `with_sad`, int64
    ``[n, n_groups]`` (`algo.reuse.golden.decide`'s ``return_sad``: the sum of |X - X_eff[nb]| over the
    group, -1 on frame 0, which has no neighbour), else None.

    Every group reuses along frames (`by_frames`), so a position's decisions depend only on its own rows
    in the earlier frames: each slice carries its positions' effective rows (``prev``) from frame to
    frame. ``frames_first`` (row order: frame after frame, slices within a frame) carries every
    position's rows, int16 ``[H*W, K]``; otherwise slice after slice, every frame of a slice before the
    next slice, carrying only one slice's rows (``n * K`` int16: the bounded order `op_decisions` uses).
    """
    f_n, h_n, w_n = (int(v) for v in grid)
    hw = h_n * w_n
    s = slice_positions(hw, op.K)
    spans = [(p0, min(hw, p0 + s)) for p0 in range(0, hw, s)]
    walk = ([(f, sp) for f in range(f_n) for sp in spans] if frames_first
            else [(f, sp) for sp in spans for f in range(f_n)])
    gt = [g.as_tuple() for g in op.groups]
    starts = np.array([k0 for k0, _, _ in gt], dtype=np.int64)
    prevs: dict[int, np.ndarray] = {}  # span start -> int16 [1, n, K]: the span's effective rows of the frame before
    for f, (p0, p1) in walk:
        rows = slice(f * hw + p0, f * hw + p1)
        p = operand_rows(op, b, rows)
        sad = None
        if f == 0:  # frame 0 has no neighbour along f: every group computes, X_eff = P
            dec = np.full((p.shape[0], len(gt)), COMPUTE, dtype=np.int8)
            if with_sad:
                sad = np.full(dec.shape, -1, dtype=np.int64)
            prev = prevs[p0] = p.astype(np.int16)[None]
        else:
            prev = prevs[p0]
            if with_sad:  # against the previous frame's effective rows, before decide_multi replaces them
                sad = np.add.reduceat(np.abs(p.astype(np.int16) - prev[0]), starts, axis=1, dtype=np.int64)
            dec = decide_multi(p, (1, 1, p1 - p0), gt, [theta], b_msb, prev=prev)[0]
        if f == f_n - 1:  # the span's last frame: its carried rows are no longer needed
            del prevs[p0]
        yield rows, dec, prev[0], sad


def op_decisions(op, b: int, grid, theta, b_msb: int) -> np.ndarray:
    """Golden decisions of batch index ``b`` of an exact op at ``theta``: int8 ``[M, len(groups)]``,
    equal to ``algo.reuse.golden.decide(X[b], grid, groups, theta, b_msb)[0]``.

    Raises:
        ValueError: as `algo.reuse.golden.decide`. algo.trace.TraceError: not an exact op.
    """
    if by_frames(op):
        out = np.empty((op.M, len(op.groups)), dtype=np.int8)
        for rows, dec, _, _ in _frames(op, b, grid, theta, b_msb, frames_first=False):
            out[rows] = dec
        return out
    return decide_multi(streamed_operand(op, b), grid, [g.as_tuple() for g in op.groups], [theta], b_msb)[0]


def decision_chunks(op, b: int, grid, theta, b_msb: int) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
    """Golden decisions and similarity of batch index ``b`` in row chunks, in row order: ``(rows,
    decisions int8 [n, n_groups], sad int64 [n, n_groups])``; concatenated they equal
    ``algo.reuse.golden.decide(X[b], grid, groups, theta, b_msb, return_sad=True)``'s decisions and SAD
    (one chunk for an op with X, one per latent frame for derived P; tests/test_chunked.py).

    Raises:
        ValueError: as `algo.reuse.golden.decide`. algo.trace.TraceError: not an exact op.
    """
    if by_frames(op):
        for rows, dec, _, sad in _frames(op, b, grid, theta, b_msb, with_sad=True):
            yield rows, dec, sad
        return
    dec, _, sad = decide(streamed_operand(op, b), grid, [g.as_tuple() for g in op.groups], theta, b_msb,
                         return_sad=True)
    yield slice(0, op.M), dec, sad


def op_outputs(op, b: int, grid, theta, b_msb: int) -> Iterator[np.ndarray]:
    """Golden outputs of batch index ``b``: int64 row blocks of ``Y = X_eff @ W[b]`` (``[rows, N]``), in
    row order; concatenated they equal `algo.reuse.golden.apply_decisions` of the whole X with `decide`'s
    decisions (one block for an op with X, one per latent frame for derived P).

    Raises:
        ValueError: as `algo.reuse.golden.decide`. algo.trace.TraceError: not an exact op.
    """
    if by_frames(op):
        for _, _, x_eff, _ in _frames(op, b, grid, theta, b_msb):
            yield _gemm_exact(x_eff, op.W[b])
        return
    groups = [g.as_tuple() for g in op.groups]
    x = streamed_operand(op, b)
    dec = decide(x, grid, groups, theta, b_msb)[0]
    yield apply_decisions(x, op.W[b], grid, groups, dec, b_msb)
