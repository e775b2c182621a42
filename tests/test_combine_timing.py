"""The cycle model's ``combine_timing = "rtl"`` (docs/decisions.md D104): the combine stage as ``kaleido_dcore`` and
``kaleido_ccore`` are built, in closed form (`sim.timing.delta_core.walk_done`, `sim.timing.compact_accel.core_done`)
checked against the cores' cycle-exact timing functions (`core_schedule`, `core_cycles`, held to the RTL by
tests/test_rtl_dcore.py and tests/test_rtl_ccore.py), and through `sim.engines.model`."""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE, REUSE
from hw.config import config_from_dict, load_config
from sim.timing.compact import band_schedule
from sim.timing.compact_accel import core_cycles, core_done, core_ways
from sim.timing.delta_accel import row_out_cycles
from sim.timing.delta_core import commands, core_schedule, walk_done


def test_walk_done_by_hand():
    """Rows leaving at 10, 10, 11 (the FIFO pops at 12, 13, 14, the last accumulate at 16), the controller's done at
    12: the walk starts at max(12, 14 + 3) = 17, 5 commands, done at 17 + 5 + 4 = 26. No rows: the walk starts at
    done."""
    assert walk_done([11, 10, 10], 12, 5) == 26
    assert walk_done([], 12, 5) == 12 + 5 + 4
    assert walk_done([10], 40, 2) == 40 + 2 + 4  # the controller's done binds


@pytest.mark.parametrize("seed", range(6))
def test_walk_done_equals_core_schedule(seed):
    rng = np.random.default_rng(seed)
    grid, n_cb, a, R = (2, 3, 2), int(rng.integers(1, 3)), int(rng.integers(1, 4)), 4  # noqa: N806
    rows = rng.integers(0, 60, size=int(rng.integers(0, 40)))
    done = int(rng.integers(0, 80))
    want = core_schedule(rows, done, grid, n_cb, a, R)["done"]
    assert walk_done(rows, done, len(commands(grid, n_cb, a, R))) == want


def test_core_done_by_hand():
    """Two blocks of M = 3 tokens, 2 commands a token, T = 30: block 0's last row at 10, block 1's first descriptor
    at 5 -> block 0 whole at max(12, min(6, 31)) = 12, walked 12 .. 17; block 1's last row at 29 -> whole at 31,
    walked from max(31, 18) = 31; done 31 + 6 + 3 = 40."""
    assert core_done(30, 3, 2, ([10, 29], [1, 5])) == 40
    assert core_cycles(30, 3, 2, ([10, 29], [1, 5]))[1] == 40


@pytest.mark.parametrize("seed", range(8))
def test_core_done_equals_core_cycles(seed):
    rng = np.random.default_rng(seed)
    n_cb, M, n = int(rng.integers(1, 6)), int(rng.integers(1, 20)), int(rng.integers(1, 4))  # noqa: N806
    last_row = np.sort(rng.integers(0, 200, size=n_cb))
    first_desc = np.sort(rng.integers(0, 150, size=n_cb))
    empty = rng.random(n_cb) < 0.3
    last_row[empty], first_desc[empty] = -1, -1
    T = int(max(last_row.max(), 0) + rng.integers(1, 20))  # noqa: N806
    assert core_done(T, M, n, (last_row, first_desc)) == core_cycles(T, M, n, (last_row, first_desc))[1]


def _op(org: str, timing: str):
    """One op on tiny-8x8 as ``org`` (B = 2 bands, d = 2, no weight stage): grid 2 x 2 x 4, K = 16 in two frame
    groups (one axis class), N = 16 (two column blocks); frame 0 COMPUTEs, frame 1 REUSEs group 0."""
    from algo.trace import Group, OpRecord, pack_decisions
    from sim.engines.model import simulate_op

    grid, K, N = (2, 2, 4), 16, 16  # noqa: N806
    dec = np.full((16, 2), COMPUTE, dtype=np.int8)
    dec[8:, 0] = REUSE
    op = OpRecord("o_proj", 0, 0, None, None, [Group(0, 8, "f"), Group(8, 16, "f")], (0.0, 0.0),
                  dims=(1, 16, K, N), decisions=pack_decisions(dec)[None, None], thetas=((0.0, 0.0),))
    cfg = config_from_dict(load_config("tiny-8x8").model_dump() | {
        "organisation": org, "psum_sram_kib": 64, "compact_bands": 2, "combine_timing": timing})
    return simulate_op(op, grid, 4, cfg), cfg, grid


def test_model_times_the_delta_core_as_built():
    """``combine_timing = "rtl"`` on delta: the combine stall is `core_schedule`'s ``done`` over the model's band
    schedule (rows out per `row_out_cycles`, the controller's done taken as the array's last row) less the array's
    cycles; 16 tokens x 2 column blocks x 1 class = 32 walk commands; the default is the model's combine unit."""
    t, cfg, grid = _op("delta", "rtl")
    c = t.compact
    band, _first, last = band_schedule(c["s_seq"], c["rows"], cfg)
    rows = np.concatenate(row_out_cycles(band, last, c["rows"], cfg))
    assert rows.max() == c["cycles"]  # the last row leaves at the array's end
    assert int(c["rows"].sum()) == len(rows) == 2 * (16 + 8)  # per column block 16 + 8 rows (frame 1's group 0 REUSEs)
    sched = core_schedule(rows, c["cycles"], grid, 2, 1, cfg.array_rows)
    assert len(sched["rows"]) == 32
    assert t.stall_cycles["combine"] == sched["done"] - c["cycles"] >= 32 + 4
    model, _, _ = _op("delta", "model")
    assert model.cycles == t.cycles and model.stall_cycles["combine"] < t.stall_cycles["combine"]
    assert load_config("kaleido-16nm-128x128-balanced").combine_timing == "model"


def test_model_times_the_compact_core_as_built():
    """``combine_timing = "rtl"`` on compact: `core_cycles` over the model's schedule, one block per column block
    (half the band-tiles each, issued column block outer), a block's first descriptor 2 cycles before its first
    slot; 2 groups on W = 2 ways: one command a token."""
    t, cfg, _grid = _op("compact", "rtl")
    c = t.compact
    assert core_ways(cfg) == 2
    band, first, last = band_schedule(c["s_seq"], c["rows"], cfg)
    outs = row_out_cycles(band, last, c["rows"], cfg)
    n = len(outs) // 2
    blocks = ([max(int(o.max()) for o in outs[:n]), max(int(o.max()) for o in outs[n:])],
              [int(first[0]) - 2, int(first[n]) - 2])
    _y, done = core_cycles(c["cycles"], 16, 1, blocks)
    assert t.stall_cycles["combine"] == done - c["cycles"] >= 16 + 3


def test_unknown_combine_timing_refused():
    with pytest.raises(ValueError, match="unknown combine timing 'fast'"):
        config_from_dict(load_config("tiny-8x8").model_dump() | {"combine_timing": "fast"})


@pytest.mark.parametrize("preset", ["tiny-8x8", "kaleido-16nm-128x128-balanced"])
def test_core_ways_are_the_cores(preset):
    """The model's ways (`core_ways`, plain Python) are ``kaleido_ccore``'s (`hw.compact_core.default_ways`): d = 2
    on tiny-8x8, d = 4 on the balanced preset (both ``partial_regs`` divisible)."""
    from hw.compact_core import default_ways

    cfg = load_config(preset)
    assert core_ways(cfg) == default_ways(cfg) == cfg.drain_rows_per_cycle
