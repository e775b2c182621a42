"""The one-walk tiling of `sim.engines.model.simulate_op` (D55) against the separate
functions it replaces: the scheduler's packed sort against a lexsort of the unpacked patterns, and every
timing field of `simulate_op` against `reuse_slot_sequence` + `op_cycles` (cycle model), `tile_stats`
(actions) and `decision_counts`, computed apart."""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.stats import decision_counts
from algo.trace import Group, OpRecord, pack_decisions
from hw.config import load_config
from sim.cost.actions import scheduler_window
from sim.cost.tiling import dispatcher_stats, group_code_counts, tile_pass, tile_stats
from sim.engines.model import simulate_op
from sim.timing.cycle_model import dense_slot_sequence, op_cycles, reuse_slot_sequence
from sim.timing.dispatch import schedule_positions
from tests.test_actions import _random_case


def _lexsort_reference(dec, grid, rows, window_tiles):
    """The scheduler as first written: per window, np.lexsort over every (group, frame >= 1) column."""
    F, H, W = grid  # noqa: N806
    hw = H * W
    pattern = dec.reshape(F, hw, -1)[1:].transpose(1, 2, 0).reshape(hw, -1)
    order = np.arange(hw)
    if pattern.shape[1] == 0:
        return order
    win = window_tiles * rows
    for w0 in range(0, hw, win):
        blk = pattern[w0:w0 + win]
        order[w0:w0 + win] = w0 + np.lexsort([blk[:, c] for c in range(blk.shape[1] - 1, -1, -1)])
    return order


@pytest.mark.parametrize("grid,widths,rows,window", [
    ((2, 3, 4), [2, 2], 4, 1),          # 2 codes per position
    ((6, 5, 8), [4] * 8, 8, 2),         # 40 codes: two words, the second part-filled
    ((17, 4, 6), [3, 3], 4, 3),         # 32 codes: exactly one word
    ((1, 4, 4), [2, 2], 4, 2),          # one frame: raster order
])
def test_packed_scheduler_sort_equals_lexsort(grid, widths, rows, window):
    rng = np.random.default_rng(sum(grid))
    dec, _ = _random_case(rng, grid, widths, (0.2, 0.3, 0.5))
    got = schedule_positions(dec, grid, rows, window)
    assert got.tolist() == _lexsort_reference(dec, grid, rows, window).tolist()


def test_group_code_counts():
    dec = np.array([[0, 2], [1, 2], [0, 0]], dtype=np.int8)
    assert group_code_counts(dec).tolist() == [[2, 1], [1, 0], [0, 2]]
    with pytest.raises(ValueError, match="must be 0"):
        group_code_counts(np.array([[3]], dtype=np.int8))


OP_CASES = [  # grid, group widths (axes), N, batch, b_msb, tile_like
    ((3, 4, 5), [(4, "f"), (4, "f"), (4, "f")], 21, 2, 4, None),
    ((4, 3, 6), [(2, "w"), (3, "f"), (3, "f")], 17, 2, 4, None),          # w-axis group: row tiles, raster
    ((2, 5, 6), [(5, "f"), (5, "f")], 8, 3, 3, None),                       # b_msb < 4
    ((3, 2, 8), [(6, "f"), (6, "f")], 19, 2, 4, [(0, 2, "w"), (2, 4, "f")]),  # follows a w-tiled op
]


@pytest.mark.parametrize("case", range(len(OP_CASES)))
@pytest.mark.parametrize("dispatcher", [True, False])
def test_simulate_op_equals_the_separate_functions(case, dispatcher):
    grid, gspec, N, batch, b_msb, tile_like = OP_CASES[case]  # noqa: N806
    cfg = load_config("tiny-8x8")
    R, C, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    rng = np.random.default_rng(case)
    decs, groups = [], None
    for _ in range(batch):
        dec, groups = _random_case(rng, grid, [w for w, _ in gspec], (0.3, 0.3, 0.4), [a for _, a in gspec])
        if gspec[0][1] == "w":
            dec.reshape(grid[0], grid[1], grid[2], -1)[:, :, 0, 0] = 0  # w = 0 has no neighbour
        decs.append(dec)
    M, K = int(np.prod(grid)), groups[-1][1]  # noqa: N806
    op = OpRecord("qkv", 0, 0, None, None, [Group(*g) for g in groups], (4.0, 12.0), dims=(batch, M, K, N),
                  decisions=np.stack([pack_decisions(x) for x in decs])[None], thetas=((4.0, 12.0),))
    got = simulate_op(op, grid, b_msb, cfg, dispatcher=dispatcher, tile_like=tile_like)

    window = scheduler_window(cfg, K, grid, groups)
    seq = np.concatenate([reuse_slot_sequence(x, grid, groups, N, R, C, b_msb, dispatcher, window, tile_like)
                          for x in decs])
    nd = np.concatenate([reuse_slot_sequence(x, grid, groups, N, R, C, b_msb, False, tile_like=tile_like)
                         for x in decs])
    dense = np.tile(dense_slot_sequence(M, K, N, R, C), batch)
    assert (got.cycles, got.stall_cycles["drain"]) == op_cycles(seq, R, C, d)
    assert got.no_dispatcher_cycles == op_cycles(nd, R, C, d)[0]
    assert (got.dense_cycles, got.dense_stall_cycles["drain"]) == op_cycles(dense, R, C, d)
    assert (got.tiles, got.slots) == (seq.size, int(np.maximum(seq, 1).sum()))
    stats = [tile_stats(x, grid, groups, R, b_msb, dispatcher, tile_like, window) for x in decs]
    assert [t.stats for t in got.tiled] == stats
    assert got.dispatcher_stats == dispatcher_stats(stats, -(-N // C))
    widths = np.array([w for w, _ in gspec])
    counts = sum(decision_counts(x, widths) for x in decs)
    assert got.counts.tolist() == counts.tolist()
    for x in decs:  # one column block of the cycle model's sequence from the same walk
        one = tile_pass(x, grid, groups, R, b_msb, dispatcher, tile_like, window)[1]
        assert one.tolist() == reuse_slot_sequence(x, grid, groups, C, R, C, b_msb, dispatcher, window,
                                                   tile_like).tolist()
