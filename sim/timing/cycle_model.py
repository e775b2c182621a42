"""Tile-level cycle model of the output-stationary Kaleido array (docs/spec.md §3-4).

The timing contract is the RTL's (`hw/top.py`), derived register by register in
docs/architecture.md ("Timing contract"):

- A tile of the reuse tiling occupies ``S_t = max(1, slots_t)`` issue cycles (a tile whose rows
  REUSE every group still issues one bubble slot carrying its ``last`` flag).
- Tiles issue back to back; the last slot of tile t issues at ``L_t = max(L_{t-1} + S_t,
  L_{t-d} + R)`` where d = ``drain_rows_per_cycle`` output ports per column: each tile's R result
  rows leave on one port at one row per cycle, so a port is reused every R cycles at the earliest.
- The last result row leaves the de-skew at cycle ``L_last + R + C + 1`` (cycle 0 is the first
  issue), so an op takes ``L_last + R + C + 2`` cycles (`PIPELINE_CYCLES` = 2: the PE output
  register and the column output-port register).

The model works per tile, O(tiles), never per cycle. Decisions come from `algo.reuse.golden`.
"""

from __future__ import annotations

import numba
import numpy as np

from sim.timing.dispatch import (
    WINDOW_TILES,
    count_slots,
    count_slots_unpaired,
    position_block,
    position_order,
)

#: Register stages between a slot's issue and its result row leaving the array beyond the
#: R + C skew/de-skew path: the PE result register and the column port register (hw/top.py).
PIPELINE_CYCLES = 2


@numba.njit(cache=True)
def _issue(s_seq, rows, ports):
    """Issue cycles of a tile sequence: returns (last issue cycle L, drain-stall cycles)."""
    last = np.full(ports, -(1 << 40), dtype=np.int64)
    prev = -1
    stall = 0
    for t in range(s_seq.shape[0]):
        s = max(1, s_seq[t])
        want = prev + s
        lt = max(want, last[t % ports] + rows)
        stall += lt - want
        last[t % ports] = lt
        prev = lt
    return prev, stall


@numba.njit(cache=True)
def _issue_tiled(seqs, reps, rows, ports):
    """`_issue` of the sequence ``concatenate([tile(seqs[b], reps) for b in batch])`` without building it."""
    last = np.full(ports, -(1 << 40), dtype=np.int64)
    prev = -1
    stall = 0
    t = 0
    for b in range(seqs.shape[0]):
        for _ in range(reps):
            for i in range(seqs.shape[1]):
                s = max(1, seqs[b, i])
                want = prev + s
                lt = max(want, last[t % ports] + rows)
                stall += lt - want
                last[t % ports] = lt
                prev = lt
                t += 1
    return prev, stall


def op_cycles_tiled(seqs: np.ndarray, reps: int, rows: int, cols: int, ports: int) -> tuple[int, int]:
    """`op_cycles` of ``concatenate([np.tile(seqs[b], reps) for b in range(batch)])``: the batch
    elements one after another, each repeating its per-column-block tiles ``reps`` times (the column
    blocks, `reuse_slot_sequence`), without building the sequence.

    Args:
        seqs: int64 ``[batch, tiles]`` slots per tile of one column block.
        reps: column blocks (``ceil(N / C)``), or the tile count of a constant sequence of one tile.
    """
    seqs = np.ascontiguousarray(np.atleast_2d(seqs), dtype=np.int64)
    if seqs.size == 0 or reps <= 0:
        return 0, 0
    last, stall = _issue_tiled(seqs, int(reps), rows, ports)
    return int(last + rows + cols + PIPELINE_CYCLES), int(stall)


def op_cycles(s_seq: np.ndarray, rows: int, cols: int, ports: int) -> tuple[int, int]:
    """Cycles of one op from its per-tile slot counts (issue order): ``(cycles, drain_stall_cycles)``.

    Args:
        s_seq: int64 ``[tiles]`` slots per tile.
        rows, cols: array size R, C.
        ports: ``drain_rows_per_cycle``.
    """
    if s_seq.size == 0:
        return 0, 0
    last, stall = _issue(np.ascontiguousarray(s_seq, dtype=np.int64), rows, ports)
    return int(last + rows + cols + PIPELINE_CYCLES), int(stall)


@numba.njit(cache=True)
def _reuse_slots(dec, F, hw, rows, k0, k1, b_msb, order, paired):
    """Slots per (position block, frame) for one GEMM: int64 ``[n_pos_blocks, F]``.

    ``rows``: positions per tile (`sim.timing.dispatch.position_block`). ``O(rows * G^2)`` per tile:
    `sim.timing.dispatch.count_slots` counts the matcher's slots by runs.
    """
    npb = (hw + rows - 1) // rows
    out = np.zeros((npb, F), dtype=np.int64)
    K = k1[k1.shape[0] - 1]
    sa = np.empty(K, dtype=np.int64)
    sb = np.empty(K, dtype=np.int64)
    tile = np.empty((rows, dec.shape[1]), dtype=np.int8)
    for pb in range(npb):
        p0 = pb * rows
        p1 = min(p0 + rows, hw)
        for f in range(F):
            for r in range(p1 - p0):
                tile[r] = dec[f * hw + order[p0 + r]]
            if paired:
                out[pb, f] = count_slots(tile[:p1 - p0], k0, k1, b_msb, sa, sb)
            else:
                out[pb, f] = count_slots_unpaired(tile[:p1 - p0], k0, k1)
    return out


def reuse_slot_sequence(
    decisions: np.ndarray, grid: tuple[int, int, int], groups, N: int, rows: int, cols: int, b_msb: int,  # noqa: N803
    dispatcher: bool = True, window_tiles: int = WINDOW_TILES, tile_like=None,
) -> np.ndarray:
    """Per-tile slot counts of one GEMM under the reuse tiling, in issue order (scheduler windows of
    ``window_tiles`` tiles, `hw.config.WINDOW_TILES` by default).

    Issue order (sim.timing.dispatch.reuse_tiles): column block, then position block, then frame. With
    ``dispatcher`` the scheduler's position order (`sim.timing.dispatch.schedule_positions`) and the
    matcher's pairing apply; without, raster order and one slot per channel of every needed group.
    An op with a ``w``-axis group tiles whole image rows in raster order (`sim.timing.dispatch.position_block`).

    Args:
        decisions: int8 ``[M, G]``.
        tile_like: groups whose tiling (position block, order) the op follows instead of its own: a
            fused ``pv`` takes its ``qk``'s query tiles (sim/timing/attention.py); None = its own groups.
    Returns:
        int64 ``[tiles]``.

    Raises:
        ValueError: a ``w``-axis group with ``W > rows`` (`sim.timing.dispatch.position_block`).
    """
    F, H, W = grid  # noqa: N806
    k0 = np.array([g[0] for g in groups], dtype=np.int64)
    k1 = np.array([g[1] for g in groups], dtype=np.int64)
    dec = np.ascontiguousarray(decisions, dtype=np.int8)
    tiling = groups if tile_like is None else tile_like
    block = position_block(grid, tiling, rows)
    order = position_order(dec, grid, tiling, rows, dispatcher, window_tiles)
    per_pos = _reuse_slots(dec, F, H * W, block, k0, k1, b_msb, order, dispatcher)
    n_col_blocks = -(-N // cols)
    return np.tile(per_pos.reshape(-1), n_col_blocks)


def dense_slot_sequence(M: int, K: int, N: int, rows: int, cols: int) -> np.ndarray:  # noqa: N803
    """Per-tile slot counts of a dense GEMM under raster tiling: ``ceil(M/R)*ceil(N/C)`` tiles of K."""
    return np.full(-(-M // rows) * -(-N // cols), K, dtype=np.int64)


def dense_cycles_formula(M: int, K: int, N: int, rows: int, cols: int, ports: int) -> int:  # noqa: N803
    """Closed form of the dense op time when ``K >= R/d`` (no drain stall): ``T*K + R + C + 1``.

    Used by tests as a hand derivation; `op_cycles` is the general model.
    """
    tiles = -(-M // rows) * -(-N // cols)
    if K * ports < rows:
        raise ValueError("closed form holds only when K >= R / drain_rows_per_cycle")
    return tiles * K - 1 + rows + cols + PIPELINE_CYCLES
