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
from sim.timing.delta_core import blocks_done, commands, core_schedule, fifo_rows, walk_done


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
    done = max(int(rng.integers(0, 80)), int(rows.max()) + 1 if len(rows) else 0)  # done follows the last row
    want = core_schedule(rows, done, grid, n_cb, a, R)["done"]
    assert walk_done(rows, done, len(commands(grid, n_cb, a, R))) == want


def test_block_walk_by_hand():
    """Segment by segment (``seg``), grid 1 x 1 x 2 (M = 2), one class, two column blocks (one chunk: a segment
    each), R = 8. Block 0's two rows leave at 5 (ports 0, 1), block 1's one at 8; descriptors at 3 (block 0, 2 rows)
    and 6 (block 1, 1 row), counted 2 cycles later; the controller's done at 10. Pops at 7, 8, 10 (a row pops 2
    cycles after it leaves), accumulates at 9, 10, 12, counted the cycle after: block 0 whole at 11 (its 2 rows
    counted, block 1's descriptor seen at 8), its walk reads
    at 12, 13, rows at 15, 16; block 1 whole at 13, but the walk is free at 14: reads 15, 16, rows 18, 19; done 20.
    The whole-op walk: starts at max(10, 10 + 3) = 13, 4 commands back to back: done 21."""
    kw = {"seg": True, "row_seg": [0, 0, 1], "descs": [(3, 0, 2), (6, 1, 1)]}
    sch = core_schedule([5, 5, 8], 10, (1, 1, 2), 2, 1, 8, **kw)
    assert sch["rows"] == {(0, 0): 15, (1, 0): 16, (0, 1): 18, (1, 1): 19} and sch["done"] == 20
    assert list(sch["acc"]) == [9, 10, 12] and sch["gated"] == 0 and not sch["overflow"]
    assert blocks_done([5, 5, 8], [0, 0, 1], 10, 2, [3, 6], [3, 6]) == 20
    assert core_schedule([5, 5, 8], 10, (1, 1, 2), 2, 1, 8)["done"] == 21 == walk_done([5, 5, 8], 10, 4)


@pytest.mark.parametrize("seed", range(10))
def test_blocks_done_equals_core_schedule(seed):
    """On random ops issued segment by segment (one pool, one chunk: a segment a column block) where no row waits
    for its buffer: rows leave in block order with some overlap at the boundaries, descriptors a few cycles ahead
    of their rows."""
    rng = np.random.default_rng(seed)
    n_cb, a, grid, R = int(rng.integers(1, 5)), int(rng.integers(1, 3)), (2, 2, 3), 8  # noqa: N806
    cyc, cbs, descs, t = [], [], [], 2
    for b in range(n_cb):
        n = int(rng.integers(0, 12))
        for _ in range(int(rng.integers(1, 3)) if n else 0):
            descs.append((t, b, 0))
        rows = np.sort(t + 2 + rng.integers(0, 3 * n + 1, size=n))
        cyc += rows.tolist()
        cbs += [b] * n
        t += int(rng.integers(1, 2 * n + 2))
    # the descriptors' rows: the block's rows split over its descriptors
    per = {b: [i for i, d in enumerate(descs) if d[1] == b] for b in range(n_cb)}
    for b, idx in per.items():
        k = cbs.count(b)
        for j, i in enumerate(idx):
            descs[i] = (descs[i][0], b, k // len(idx) + (j < k % len(idx)))
    order = np.argsort(np.asarray(cyc), kind="stable")
    cyc, cbs = np.asarray(cyc, dtype=np.int64)[order], np.asarray(cbs, dtype=np.int64)[order]
    done = int(max(cyc.max() + 1 if len(cyc) else 0, t))
    sch = core_schedule(cyc, done, grid, n_cb, a, R, True, cbs, descs)
    first = [min((d[0] for d in descs if d[1] == b), default=-1) for b in range(n_cb)]
    last = [max((d[0] for d in descs if d[1] == b), default=-1) for b in range(n_cb)]
    if sch["gated"] == 0:
        assert blocks_done(cyc, cbs, done, 12 * a, first, last) == sch["done"]


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


def _op(org: str, timing: str, s: int | None = None):
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
    if s is None:
        return simulate_op(op, grid, 4, cfg), cfg, grid
    from unittest import mock

    from sim.timing import delta as delta_rules

    with mock.patch.object(delta_rules, "plan", lambda *a, **k: (grid[0], s)):  # the model's plan, s forced
        return simulate_op(op, grid, 4, cfg), cfg, grid


def test_model_times_the_delta_core_as_built():
    """``combine_timing = "rtl"`` on delta: the combine stall is `core_schedule`'s ``done`` over the model's band
    schedule (rows out per `row_out_cycles`, the controller's done taken as the array's last row) less the array's
    cycles; 16 tokens x 2 column blocks x 1 class = 32 walk commands; the default is the model's combine unit."""
    t, cfg, grid = _op("delta", "rtl")
    c = t.compact
    band, first, last = band_schedule(c["s_seq"], c["rows"], cfg)
    rows = np.concatenate(row_out_cycles(band, last, c["rows"], cfg))
    assert rows.max() == c["cycles"]  # the last row leaves at the array's end
    assert int(c["rows"].sum()) == len(rows) == 2 * (16 + 8)  # per column block 16 + 8 rows (frame 1's group 0 REUSEs)
    whole_op = core_schedule(rows, c["cycles"], grid, 2, 1, cfg.array_rows)
    assert len(whole_op["rows"]) == 32
    # both groups share a column-block group (s = 2: D68's order interleaves the blocks), so the walk waits for the
    # whole op
    assert c["col_blocks"] == 2
    assert t.stall_cycles["combine"] == whole_op["done"] - c["cycles"] >= 32 + 4
    # on one column block a group (s = 1) the blocks come outer: block 0 is walked while block 1 drains
    t1, cfg1, _ = _op("delta", "rtl", s=1)
    c1 = t1.compact
    assert c1["col_blocks"] == 1
    band, first, last = band_schedule(c1["s_seq"], c1["rows"], cfg1)
    n = len(c1["s_seq"]) // 2
    cyc, cbs = fifo_rows(band, last, c1["rows"], [0] * n + [1] * n, cfg1)
    descs = [(int(f) - 2, i // n, int(r)) for i, (f, r) in enumerate(zip(first, c1["rows"], strict=True))]
    sch = core_schedule(cyc, c1["cycles"], grid, 2, 1, cfg1.array_rows, True, cbs, descs)
    assert sch["gated"] == 0
    assert t1.stall_cycles["combine"] == sch["done"] - c1["cycles"]
    assert sch["done"] < core_schedule(cyc, c1["cycles"], grid, 2, 1, cfg1.array_rows)["done"]
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


@pytest.mark.parametrize(("ci", "cm"), [(0, True), (1, True), (1, False), (3, True)])
def test_model_segments_are_the_cores(ci, cm):
    """The cycle model's segment ordinals of the issued band-tiles (`sim.engines.model._dcore_segments`, from the
    band-tiles' chunks) equal the ones `sim.timing.delta_core.tile_segments` gives the RTL benches' band-tiles
    (`band_op`, their column block and first token) on tests/test_rtl_delta.py's cases (both issue orders where
    the op goes segment by segment: D84's, or D68's with s = 1), and the segments' commands add up to M n_cb A."""
    from sim.engines.band_stimulus import band_op
    from sim.engines.model import _dcore_segments
    from sim.timing.compact import compact_tiles
    from sim.timing.delta_core import tile_segments
    from tests.test_rtl_delta import CASES, SHAPES, delta_cfg

    case, fw, s = CASES[ci]
    cfg = delta_cfg(*SHAPES["8x8-B2-d2"], state_kib=2)
    fw = fw or case.grid[0]
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s, chunk_major=cm)
    want = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, cfg.array_rows, n_cb, fw, s)
    _t, chunk = compact_tiles(case.decisions, case.grid, case.groups, cfg, fw, 4, chunks=True)
    got, seg_len, nseg = _dcore_segments([chunk], case.grid, cfg, fw, s, n_cb, 1, cm, True)
    assert got is not None and got.tolist() == want
    assert int(seg_len.sum()) == case.X.shape[0] * n_cb and len(seg_len) == nseg
