"""The cycle model's ``combine_timing = "rtl"`` (docs/decisions.md D104): the combine stage as ``kaleido_dcore`` and
``kaleido_ccore`` are built, in closed form (`sim.timing.delta_core.walk_done`, `sim.timing.compact_accel.core_done`)
checked against the cores' cycle-exact timing functions (`core_schedule`, `core_cycles`, held to the RTL by
tests/test_rtl_dcore.py and tests/test_rtl_ccore.py), and through `sim.engines.model`."""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE, REUSE
from hw.config import config_from_dict, load_config
from sim.timing.compact_accel import core_cycles, core_done, core_ways
from sim.timing.delta_accel import row_out_cycles
from sim.timing.delta_core import blocks_done, commands, core_schedule, walk_done


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


def _op(org: str, timing: str, s: int | None = None, **extra):
    """One op on tiny-8x8 as ``org`` (B = 2 bands, d = 2, no weight stage): grid 2 x 2 x 4, K = 16 in two frame
    groups (one axis class), N = 16 (two column blocks); frame 0 COMPUTEs, frame 1 REUSEs group 0; ``extra``: more
    config fields."""
    from algo.trace import Group, OpRecord, pack_decisions
    from sim.engines.model import simulate_op

    grid, K, N = (2, 2, 4), 16, 16  # noqa: N806
    dec = np.full((16, 2), COMPUTE, dtype=np.int8)
    dec[8:, 0] = REUSE
    op = OpRecord("o_proj", 0, 0, None, None, [Group(0, 8, "f"), Group(8, 16, "f")], (0.0, 0.0),
                  dims=(1, 16, K, N), decisions=pack_decisions(dec)[None, None], thetas=((0.0, 0.0),))
    cfg = config_from_dict(load_config("tiny-8x8").model_dump() | {
        "organisation": org, "psum_sram_kib": 64, "compact_bands": 2, "combine_timing": timing, **extra})
    if s is None:
        return simulate_op(op, grid, 4, cfg), cfg, grid
    from unittest import mock

    from sim.timing import delta as delta_rules

    with mock.patch.object(delta_rules, "plan", lambda *a, **k: (grid[0], s)):  # the model's plan, s forced
        return simulate_op(op, grid, 4, cfg), cfg, grid


def _model_ways(cfg, grid, groups, dec, s_seq_len, n_cb, s, W):  # noqa: N803
    """Each issued row's way on W ways, independently of the model: the band-tiles' tokens by the Python reference
    (`sim.timing.compact_reference.band_tiles`, COMPUTE then PARTIAL), issued in D68's order (each band-tile for
    the ``s`` column blocks of its group in turn), way ``(a M + t) mod W`` (`row_ways`)."""
    from sim.timing.compact import band_rows
    from sim.timing.compact_reference import band_tiles
    from sim.timing.delta import classes, column_groups
    from sim.timing.delta_core import row_ways

    bts = band_tiles(dec, grid, [k1 - k0 for k0, k1, _ in groups], cfg.array_rows, band_rows(cfg), grid[0])
    issued = [b for k in column_groups(n_cb, s) for b in bts for _ in range(k)]
    assert len(issued) == s_seq_len
    of_class = {g: a for a, (_ax, idx) in enumerate(classes(groups)) for g in idx}
    M = grid[0] * grid[1] * grid[2]  # noqa: N806
    return issued, row_ways([list(b.compute) + list(b.partial) for b in issued], [of_class[b.group] for b in issued],
                            M, W)


#: `sim.timing.delta_core.held_done`'s detail keys (its docstring), which `core_schedule` returns too.
DETAIL = ("done", "ahead", "bypass", "held", "fifo_max", "frozen")


def _gated(cfg, grid, groups, dec, c, n_cb, s, W, sgs):  # noqa: N803
    """``kaleido_daccel_gate`` on the model's op (docs/decisions.md D126, D137), independently of the model: an
    `IssueFeed` over `AccelRun` (2 B staging entries and 32 lanes as `hw.rtl` builds it, with its queues: `queue_steps`
    in D68's order, no difference-sum buffer on this config) of the
    issued band-tiles (`_model_ways`' reference band-tiles: their slots, rows, group widths and gather rounds over the
    difference buffer's R / B banks), each band-tile's segment ``sgs``, its rows' ways on W ways."""
    from sim.timing.delta_accel import AccelRun, gather_rounds, queue_steps
    from sim.timing.delta_core import IssueFeed

    issued, rw = _model_ways(cfg, grid, groups, dec, len(c["s_seq"]), n_cb, s, W)
    toks = [list(b.compute) + list(b.partial) for b in issued]
    widths = [groups[b.group][1] - groups[b.group][0] for b in issued]
    rounds = gather_rounds(toks, cfg.array_rows // cfg.compact_bands)
    assert [len(x) for x in toks] == c["rows"].tolist()
    queue = queue_steps(dec, grid, cfg.array_rows, cfg.array_rows // cfg.compact_bands, grid[0], n_cb, s, False)
    run = AccelRun(c["s_seq"], c["rows"], widths, rounds, cfg, 2 * cfg.compact_bands, 32, queue, gate=True)
    return IssueFeed(run, sgs, rw, cfg)


def test_model_times_the_delta_core_as_built():
    """``combine_timing = "rtl"`` on delta: the op is timed as ``kaleido_dcore`` on ``kaleido_daccel_gate`` runs it
    (docs/decisions.md D137): the core's ``done`` is `core_schedule`'s co-simulating the gated controller
    (``gate=IssueFeed``, `_gated`), the array's cycles the gated controller's last row out, the combine stall the
    difference; on the core's d = 2 accumulate ways (D108; each row's way from its token, here t mod 2: one axis
    class), its 2 output lanes (D113: V = W = 2 divides R = 8) and 3 D buffers (D115); 16 tokens x 2 column blocks x
    1 class = 32 Y rows; the default is the model's combine unit. The op's ``core`` (the detail the model publishes:
    done, ahead, bypass, held, fifo_max, frozen) is `core_schedule`'s, with and without the holds."""
    from sim.timing.compact import band_cycles
    from sim.timing.delta_core import core_d_buffers, core_out_ways, core_ways

    t, cfg, grid = _op("delta", "rtl")
    c = t.compact
    assert core_ways(cfg) == 2 and cfg.dcore_out_ways is None and core_out_ways(cfg) == 2
    assert cfg.dcore_d_buffers is None and core_d_buffers(cfg) == 3
    assert int(c["rows"].sum()) == 2 * (16 + 8)  # per column block 16 + 8 rows (frame 1's group 0 REUSEs)
    groups = [(0, 8, "f"), (8, 16, "f")]
    dec = np.full((16, 2), COMPUTE, dtype=np.int8)
    dec[8:, 0] = REUSE
    _issued, rw = _model_ways(cfg, grid, groups, dec, len(c["s_seq"]), 2, 2, 2)
    assert [int(x) for x in np.concatenate(rw)[:8]] == [0, 1] * 4  # the first band-tiles: tokens 0 .. 7 of group 0 (4 rows a band)
    # the row FIFO's 8 entries a port (d = 2) and the 8 count banks, D116
    assert (cfg.dcore_fifo_per_port, cfg.dcore_count_banks) == (8, 8)
    T = len(c["s_seq"])  # noqa: N806
    # both groups share a column-block group (s = 2: D68's order interleaves the blocks), so the walk waits for the
    # whole op (the gate only waits for the read-ahead's freshness)
    assert c["col_blocks"] == 2
    feed = _gated(cfg, grid, groups, dec, c, 2, 2, 2, [0] * T)
    whole_op = core_schedule(None, None, grid, 2, 1, cfg.array_rows, ways=2, out_ways=2, buffers=3, fifo=16, ports=2,
                             gate=feed, bound=8)
    assert len(whole_op["rows"]) == 32 and whole_op["fifo_max"] <= 16
    # the array's cycles: the gated controller's last row out (`row_out_cycles`, counted from start)
    assert c["cycles"] == max(int(o.max()) for o in row_out_cycles(feed.run.band, feed.run.last, c["rows"], cfg))
    # the core's per-op detail the model publishes (OpTiming.core, the results' per-op "core") is the reference's
    assert t.core == {k: whole_op[k] for k in DETAIL} and c["core"] == t.core and c["fifo_bypass"] == t.core["bypass"]
    assert t.stall_cycles["combine"] == whole_op["done"] - c["cycles"] >= 32 // 2 + 4
    unheld, _, _ = _op("delta", "rtl", dcore_fifo_per_port=0, dcore_count_banks=0)  # the what-if before D116
    feed = _gated(cfg, grid, groups, dec, c, 2, 2, 2, [0] * T)
    free = core_schedule(None, None, grid, 2, 1, cfg.array_rows, ways=2, out_ways=2, buffers=3, gate=feed, bound=1)
    assert unheld.stall_cycles["combine"] == free["done"] - c["cycles"]
    assert unheld.core == {k: free[k] for k in ("done", "ahead", "bypass")}  # no holds: ways_done's keys
    feed = _gated(cfg, grid, groups, dec, c, 2, 2, 1, [0] * T)
    one_way = core_schedule(None, None, grid, 2, 1, cfg.array_rows, fifo=16, ports=2, gate=feed, bound=8)["done"]
    assert whole_op["done"] <= one_way
    # on one column block a group (s = 1) the blocks come outer: block 0 is walked while block 1 drains
    t1, cfg1, _ = _op("delta", "rtl", s=1)
    c1 = t1.compact
    assert c1["col_blocks"] == 1
    n = len(c1["s_seq"]) // 2
    feed = _gated(cfg1, grid, groups, dec, c1, 2, 1, 2, [0] * n + [1] * n)
    sch = core_schedule(None, None, grid, 2, 1, cfg1.array_rows, True, ways=2, out_ways=2, buffers=3, fifo=16,
                        ports=2, gate=feed, bound=8)
    assert c1["cycles"] == max(int(o.max()) for o in row_out_cycles(feed.run.band, feed.run.last, c1["rows"], cfg1))
    assert t1.stall_cycles["combine"] == sch["done"] - c1["cycles"]
    assert t1.core == {k: sch[k] for k in DETAIL}  # segment by segment, the issue gate on
    one_lane, _, _ = _op("delta", "rtl", s=1, dcore_out_ways=1)  # D108's walk, one Y row a cycle
    feed = _gated(cfg1, grid, groups, dec, c1, 2, 1, 2, [0] * n + [1] * n)
    assert one_lane.stall_cycles["combine"] == core_schedule(None, None, grid, 2, 1, cfg1.array_rows, True, ways=2,
                                                             buffers=3, fifo=16, ports=2, gate=feed,
                                                             bound=8)["done"] - c1["cycles"]
    # a bound of one segment (a count bank's what-if): the gate holds block 1's first take while block 0 is walked
    bound1, _, _ = _op("delta", "rtl", s=1, dcore_count_banks=1)
    feed = _gated(cfg1, grid, groups, dec, c1, 2, 1, 2, [0] * n + [1] * n)
    held = core_schedule(None, None, grid, 2, 1, cfg1.array_rows, True, ways=2, out_ways=2, buffers=3, fifo=16,
                         ports=2, gate=feed, bound=1, banks=1)
    assert bound1.core == {k: held[k] for k in DETAIL} and held["held"] > 0 and held["ahead"] == 0
    # the model's combine unit times the array by `band_schedule` (no controller)
    model, _, _ = _op("delta", "model")
    assert model.compact["cycles"] == band_cycles(model.compact["s_seq"], model.compact["rows"], cfg)[0]
    assert model.stall_cycles["combine"] < t.stall_cycles["combine"]
    assert model.core is None and model.compact["core"] is None
    assert load_config("kaleido-16nm-128x128-balanced").combine_timing == "model"


def test_model_times_the_compact_core_as_built():
    """``combine_timing = "rtl"`` on compact: `core_cycles` over the model's schedule, one block per column block
    (half the band-tiles each, issued column block outer), a block's first descriptor 2 cycles before its first
    slot; 2 groups on W = 2 ways: one command a token."""
    from sim.timing.compact_accel import op_port

    t, cfg, grid = _op("compact", "rtl")
    c = t.compact
    assert core_ways(cfg) == 2
    # the band-tiles as kaleido_caccel runs them (D117): its list schedule with the queues, gather and weight port
    dec = np.full((16, 2), COMPUTE, dtype=np.int8)
    dec[8:, 0] = REUSE
    port = op_port([dec], c["band_tiles"], grid, [(0, 8, "f"), (8, 16, "f")], cfg, c["chunk_frames"], 2)
    band, first, last = port["band"], port["first"], port["last"]
    outs = row_out_cycles(band, last, c["rows"], cfg)
    n = len(outs) // 2
    blocks = ([max(int(o.max()) for o in outs[:n]), max(int(o.max()) for o in outs[n:])],
              [int(first[0]) - 2, int(first[n]) - 2])
    _y, done = core_cycles(c["cycles"], 16, 1, blocks)
    assert t.stall_cycles["combine"] == done - c["cycles"] >= 16 + 3
    assert t.core is None  # the per-op core detail is the delta core's only


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
    the op goes segment by segment: D84's, or D68's with s = 1), and the segments' commands add up to M n_cb A (one
    output lane, ``dcore_out_ways`` = 1: a segment's walk cycles are its commands)."""
    from sim.engines.band_stimulus import band_op
    from sim.engines.model import _dcore_segments
    from sim.timing.compact import compact_tiles
    from sim.timing.delta_core import tile_segments
    from tests.test_rtl_delta import CASES, SHAPES, delta_cfg

    case, fw, s = CASES[ci]
    cfg = delta_cfg(*SHAPES["8x8-B2-d2"], state_kib=2).model_copy(update={"dcore_out_ways": 1})
    fw = fw or case.grid[0]
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s, chunk_major=cm)
    want = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, cfg.array_rows, n_cb, fw, s)
    _t, chunk = compact_tiles(case.decisions, case.grid, case.groups, cfg, fw, 4, chunks=True)
    got, seg_len, nseg = _dcore_segments([chunk], case.grid, cfg, fw, s, n_cb, 1, cm)
    assert got is not None and got.tolist() == want
    assert int(seg_len.sum()) == case.X.shape[0] * n_cb and len(seg_len) == nseg


def test_ways_done_by_hand():
    """`ways_done` on tests/test_rtl_dcore.py's hand schedule (grid 1 x 1 x 3, 2 classes, R = 2: segments of 4 and 2
    commands, the walk after the op): one way done 22; two ways with the rows' ways 0, 1, 1 (leaving at 6, 5, 5;
    1, 1, 0 in the FIFO's order: the first two share way 1) the pipeline is empty at 11, done 11 + 6 + 4 = 21; with
    every row in way 0 the ways change nothing (22)."""
    from sim.timing.delta_core import ways_done

    assert ways_done([6, 5, 5], None, None, 9, False, [4, 2], None, 1) == 22
    assert ways_done([6, 5, 5], None, [0, 1, 1], 9, False, [4, 2], None, 2) == 21
    assert ways_done([6, 5, 5], None, [0, 0, 0], 9, False, [4, 2], None, 2) == 22
    assert ways_done([], None, [], 4, False, [1], None, 4) == 4 + 1 + 4  # no rows: the walk starts at done


@pytest.mark.parametrize("seed", range(12))
def test_ways_done_equals_core_schedule(seed):
    """`ways_done` (the model's numba loop) against `core_schedule` on seeded ops of 1-4 column blocks (a segment
    each), 1-3 classes, on 1, 2 and 4 ways with random row ways, segment by segment (descriptors a few cycles ahead
    of their rows; rows that wait for their D buffer included) and after the whole op."""
    from sim.timing.delta_core import segment_step_counts, segments, ways_done

    gated, local = 0, [0, 0]  # D125: ops whose local wait held a row, ops refused (a deadlocking order)
    for sub in range(20):
        rng = np.random.default_rng(1000 * seed + sub)
        n_cb, a, grid, R = int(rng.integers(1, 5)), int(rng.integers(1, 4)), (2, 2, 3), 8  # noqa: N806
        W = int(rng.choice([1, 2, 4]))  # noqa: N806
        cyc, cbs, descs, t = [], [], [], 2
        for b in range(n_cb):
            n = int(rng.integers(0, 16))
            for _ in range(int(rng.integers(1, 3)) if n else 0):
                descs.append((t, b, 0))
            cyc += np.sort(t + 2 + rng.integers(0, 2 * n + 1, size=n)).tolist()
            cbs += [b] * n
            t += int(rng.integers(1, 2 * n + 2))
        for b in range(n_cb):  # the descriptors' rows: the block's rows split over its descriptors
            idx = [i for i, d in enumerate(descs) if d[1] == b]
            k = cbs.count(b)
            for j, i in enumerate(idx):
                descs[i] = (descs[i][0], b, k // len(idx) + (j < k % len(idx)))
        order = np.argsort(np.asarray(cyc), kind="stable")
        cyc, cbs = np.asarray(cyc, dtype=np.int64)[order], np.asarray(cbs, dtype=np.int64)[order]
        way = rng.integers(0, W, size=len(cyc))
        done = int(max(cyc.max() + 1 if len(cyc) else 0, t))
        lens = [len(sg) for sg in segments(grid, n_cb, a, R)]
        dz = tuple(np.array(x) for x in zip(*descs, strict=True)) if descs else None
        V, nbuf = int(rng.choice([v for v in (1, 2, 4) if v <= W])), int(rng.integers(2, 5))  # noqa: N806
        vlens = segment_step_counts(grid, n_cb, a, R, out_ways=V)
        for seg in (True, False):
            sch = core_schedule(cyc, done, grid, n_cb, a, R, seg, cbs if seg else None, descs if seg else None,
                                ways=W, row_way=way)
            assert ways_done(cyc, cbs, way, done, seg, lens, dz, W) == sch["done"], (sub, seg, W)
            # the cycle model's count banks, one per segment: the same where the RTL's 8 do not overflow (here never)
            assert not sch["overflow"] and ways_done(cyc, cbs, way, done, seg, lens, dz, W, len(lens)) == sch["done"]
            gated += sch["gated"] > 0
            # D111's output ways and more D buffers (the model's what-if): the same rule in both
            sv = core_schedule(cyc, done, grid, n_cb, a, R, seg, cbs if seg else None, descs if seg else None,
                               ways=W, row_way=way, out_ways=V, buffers=nbuf)
            got = ways_done(cyc, cbs, way, done, seg, vlens, dz if seg else None, W, len(lens), nbuf, detail=True)
            assert got == {"done": sv["done"], "ahead": sv["ahead"], "bypass": sv["bypass"]}, (sub, seg, V)
            if seg:  # D125's segment-local D buffers: the same rule in both, or both refuse a deadlocking order
                try:
                    sl = core_schedule(cyc, done, grid, n_cb, a, R, True, cbs, descs, ways=W, row_way=way,
                                       out_ways=V, buffers=nbuf, local=True)
                except ValueError:
                    with pytest.raises(ValueError, match="deadlock"):
                        ways_done(cyc, cbs, way, done, True, vlens, dz, W, len(lens), nbuf, local=True)
                    local[1] += 1
                else:
                    got = ways_done(cyc, cbs, way, done, True, vlens, dz, W, len(lens), nbuf, detail=True, local=True)
                    assert got == {"done": sl["done"], "ahead": sl["ahead"], "bypass": sl["bypass"]}, (sub, V)
                    local[0] += sl["gated"] > 0
    assert gated > 0  # the gate is exercised


def test_band_tile_tokens_are_the_reference_band_tiles():
    """`sim.timing.compact.band_tile_tokens` (numba, the model's rows' tokens) equals the Python reference's band-tiles
    (`sim.timing.compact_reference.band_tiles`: COMPUTE tokens, then PARTIAL) on seeded decisions: random grids,
    1-3 groups, pools of 4 and 8, band rows 1, 2, 4, any chunk frames (flushes that split a band-tile included)."""
    from sim.timing.compact import band_tile_sequence, band_tile_tokens
    from sim.timing.compact_reference import band_tiles

    rng = np.random.default_rng(108)
    for _ in range(120):
        F, H, W = (int(x) for x in rng.integers(1, 6, size=3))  # noqa: N806
        G, R, brows = int(rng.integers(1, 4)), int(rng.choice([4, 8])), int(rng.choice([1, 2, 4]))  # noqa: N806
        fw = int(rng.integers(1, F + 1))
        dec = rng.integers(0, 3, size=(F * H * W, G)).astype(np.int8)
        widths = rng.integers(1, 9, size=G).astype(np.int64)
        ref = band_tiles(dec, (F, H, W), list(widths), R, brows, fw)
        tok, off = band_tile_tokens(dec, F, H * W, R, brows, fw)
        assert len(off) - 1 == len(ref) == len(band_tile_sequence(dec, F, H * W, R, brows, fw, widths, True)[0])
        assert [tok[off[i]:off[i + 1]].tolist() for i in range(len(ref))] == [
            list(b.compute) + list(b.partial) for b in ref]


@pytest.mark.parametrize("name", ["kaleido-16nm-128x128-balanced", "hw/presets/examples/tiny-8x8-delta.toml"])
def test_dcore_ways_are_the_cores(name):
    """The model's ways (`sim.timing.delta_core.core_ways`, plain Python) are ``kaleido_dcore``'s
    (`hw.delta_combine.default_ways`, `hw.delta_core.DeltaCore`'s default): d = 4 on the balanced preset, 2 on the
    tiny delta example (docs/decisions.md D108)."""
    from hw import discard
    from hw.delta_combine import default_ways
    from hw.delta_core import DeltaCore
    from sim.timing.delta_core import core_ways

    cfg = load_config(name)
    assert core_ways(cfg) == default_ways(cfg) == discard(DeltaCore(cfg)).ways == cfg.drain_rows_per_cycle


def test_output_ways_steps_by_hand():
    """`segment_steps` (docs/decisions.md D111): grid 2 x 1 x 5 (hw = 5), R = 4, one column block, 2 classes, V = 2:
    segment 0 is pool 0 (positions 0-3) over both frames: per frame the runs (0, 1), (2, 3), per run class 0 then 1:
    2 x 2 x 2 = 8 steps; segment 1, pool 1 (position 4 alone): 2 frames x 1 run x 2 classes = 4 steps; each
    segment's commands those of `segments`. V = 1 is `segments`, one command a step."""
    from sim.timing.delta_core import segment_step_counts, segment_steps, segments

    st = segment_steps((2, 1, 5), 1, 2, 4, out_ways=2)
    assert [len(x) for x in st] == [8, 4] == segment_step_counts((2, 1, 5), 1, 2, 4, out_ways=2).tolist()
    assert st[0][0] == ((0, 0, 0), (1, 0, 0)) and st[0][3] == ((2, 0, 1), (3, 0, 1))
    assert st[0][4] == ((5, 0, 0), (6, 0, 0))  # frame 1: token 5 + position
    assert st[1] == [((4, 0, 0),), ((4, 0, 1),), ((9, 0, 0),), ((9, 0, 1),)]
    # the same commands per segment, a run's classes after its tokens
    assert [sorted(c for step in sg for c in step) for sg in st] == [sorted(x) for x in segments((2, 1, 5), 1, 2, 4)]
    one = segment_steps((2, 1, 5), 1, 2, 4)
    assert [[c[0] for c in sg] for sg in one] == segments((2, 1, 5), 1, 2, 4) and all(len(c) == 1 for sg in one
                                                                                          for c in sg)


def test_output_ways_schedule_by_hand():
    """`core_schedule` with V = 2 output ways on tests/test_rtl_dcore.py's hand op (grid 1 x 1 x 3, 2 classes,
    R = 2, rows leaving at 6, 5, 5 in ways 0, 1, 1 on 2 accumulate ways; the walk after the op, from 11): segment 0
    (tokens 0, 1) is 2 steps, read at 12, 13, both Y rows at 11 + 4 + 1 = 16; segment 1 (token 2) starts at 13,
    its Y row at 13 + 4 + 1 = 18; done 13 + 2 + 4 = 19, against one command a cycle's 21 (rows 16, 18, 20).
    `ways_done` on the step counts [2, 2] agrees; V above the accumulate ways and fewer than 2 buffers are refused."""
    from sim.timing.delta_core import ways_done

    one = core_schedule([6, 5, 5], 9, (1, 1, 3), 1, 2, 2, ways=2, row_way=[0, 1, 1])
    assert one["done"] == 21 and one["rows"] == {(0, 0): 16, (1, 0): 18, (2, 0): 20}
    two = core_schedule([6, 5, 5], 9, (1, 1, 3), 1, 2, 2, ways=2, row_way=[0, 1, 1], out_ways=2)
    assert two["done"] == 19 and two["rows"] == {(0, 0): 16, (1, 0): 16, (2, 0): 18}
    assert ways_done([6, 5, 5], None, [0, 1, 1], 9, False, [2, 2], None, 2) == 19
    # in the FIFO's order the rows leave at 5, 5, 6 (ways 1, 1, 0) and pop at 7, 8, 8: the second waits behind the
    # first (way 1), the first and third pop the cycle after their write (a bypass would skip their write and read)
    assert two["bypass"] == 2 and list(two["acc"]) == [9, 10, 10]
    with pytest.raises(ValueError, match="out_ways = 4: a power of two, at most ways = 2"):
        core_schedule([6, 5, 5], 9, (1, 1, 3), 1, 2, 2, ways=2, row_way=[0, 1, 1], out_ways=4)
    with pytest.raises(ValueError, match="buffers = 1"):
        core_schedule([6, 5, 5], 9, (1, 1, 3), 1, 2, 2, buffers=1)


def test_model_times_output_ways_and_buffers():
    """``dcore_out_ways`` = 2 and ``dcore_d_buffers`` = 3 (D111's what-if) through `simulate_op`: the combine stall
    is `core_schedule`'s with ``out_ways`` = 2 and ``buffers`` = 3 co-simulating the gated controller (as
    `test_model_times_the_delta_core_as_built`, s = 1: segment by segment), and less than one lane's (V = 1);
    ``dcore_out_ways`` above the core's 2 accumulate ways is refused, and a config's ``dcore_out_ways`` must be a
    power of two."""
    from sim.engines.model import SimError

    groups = [(0, 8, "f"), (8, 16, "f")]
    dec = np.full((16, 2), COMPUTE, dtype=np.int8)
    dec[8:, 0] = REUSE
    built, _, _ = _op("delta", "rtl", s=1, dcore_out_ways=1)
    t, cfg, grid = _op("delta", "rtl", s=1, dcore_out_ways=2, dcore_d_buffers=3)
    c = t.compact
    n = len(c["s_seq"]) // 2
    feed = _gated(cfg, grid, groups, dec, c, 2, 1, 2, [0] * n + [1] * n)
    sch = core_schedule(None, None, grid, 2, 1, cfg.array_rows, True, ways=2, out_ways=2, buffers=3, fifo=16, ports=2,
                        gate=feed, bound=8)
    assert t.stall_cycles["combine"] == sch["done"] - c["cycles"] < built.stall_cycles["combine"]
    with pytest.raises(SimError, match="dcore_out_ways = 4 exceeds kaleido_dcore's 2 accumulate ways"):
        _op("delta", "rtl", dcore_out_ways=4)
    with pytest.raises(ValueError, match="must be a power of two, got 3"):
        config_from_dict(load_config("tiny-8x8").model_dump() | {"dcore_out_ways": 3})


@pytest.mark.parametrize(("K", "N", "sizes"), [(16, 16, [8, 8]), (90, 24, [70, 20])])  # noqa: N803
def test_model_times_the_staged_core_as_built(K, N, sizes):  # noqa: N803
    """A delta config with a weight stage (8 x 8, B = 2, d = 2, a 1 KiB stage: 128 B a column bank;
    ``kaleido_dcore_stage``, docs/decisions.md D119, D121): the model's array is the staged controller's schedule
    (with ``combine_timing = "rtl"`` the gated one, `stage_core`, D129; on these ops no take is held and the first
    take's freshness cycle is hidden, so it is `stage_run`'s), so its cycles are the controller's ``done`` less the
    start cycle, and its cycles plus the combine stall are ``kaleido_dcore_stage``'s ``done``: `core_schedule` fed by the
    plain-Python `stage_schedule` on the RTL bench's staged op with the host's stage fields
    (`tests.test_rtl_dcore_stage.stage_model`, which tests/test_rtl_dcore_stage.py checks against the RTL cycle for
    cycle), every (chunk, column block) segment walked once whole, on d = 2 ways, V = 2 lanes and 3 D buffers.
    K = 16 in two groups, N = 16: the stage holds the whole K; K = 90 (70 + 20), N = 24: two column blocks' 90 B do
    not fit a bank, so D88's slices (35 + 35, 20), which the staged core also walks segment by segment (593 cycles:
    D119's RTL figure)."""
    from algo.trace import Group, OpRecord, pack_decisions
    from sim.engines.model import simulate_op
    from sim.timing.delta_accel import staged_tiles
    from tests.rtl.cases import make_case
    from tests.rtl.daccel_bench import staged_op
    from tests.test_rtl_dcore_stage import stage_model

    grid = (2, 2, 4)
    case = make_case("staged", 119, grid, K, N, sizes)
    case.decisions[:4] = COMPUTE  # frame 0 has no neighbour along f
    cfg = config_from_dict(load_config("tiny-8x8").model_dump() | {
        "organisation": "delta", "psum_sram_kib": 64, "compact_bands": 2, "combine_timing": "rtl",
        "diff_sram_kib": 8, "wstage_sram_kib": 1})
    op = OpRecord("o_proj", 0, 0, None, None, [Group(k0, k1, "f") for k0, k1, _ in case.groups], (0.0, 0.0),
                  dims=(1, 16, K, N), decisions=pack_decisions(case.decisions)[None, None], thetas=((0.0, 0.0),))
    t = simulate_op(op, grid, 4, cfg)
    c = t.compact
    assert c["staged"] and (c["slices"] is not None) == (K == 90)
    sop = staged_op(case, cfg)
    st = staged_tiles(case.decisions, grid, case.groups, cfg, K, N)
    assert sop.sliced == (K == 90) and sop.op.s_seq.tolist() == c["s_seq"].tolist() == st["s_seq"].tolist()
    # the staged core's D buffers addressed per segment (D125, the default since D132): the ways from the slots
    _rows, done, (cyc, rsg, descs, way) = stage_model(cfg, sop, 2, local=True)
    assert c["cycles"] == done - 1  # the controller's done, counted from its start cycle
    n_cb = -(-N // cfg.array_cols)
    sch = core_schedule(cyc, done, grid, n_cb, 1, cfg.array_rows, True, rsg, descs, sop.fw, sop.s, ways=2,
                        row_way=way, out_ways=2, buffers=3, local=True)
    assert t.cycles + t.stall_cycles["combine"] == sch["done"] == {16: 107, 90: 593}[K]
    after = core_schedule(cyc, done, grid, n_cb, 1, cfg.array_rows, ways=2, row_way=way, out_ways=2, buffers=3)
    assert sch["done"] < after["done"]  # the walk after the op (the model's for sliced ops before D119)


def test_back_pressure_by_hand():
    """docs/decisions.md D116's issue rule on two hand ops (cycles counted by hand).

    Array hold: grid 1 x 1 x 2, one class, R = 2 (one segment of 2 commands), the walk after the op (``done`` 8);
    band-tile 0 (desc 2) drains rows at 5, 5, band-tile 1 (desc 3) at 6, 6; a FIFO of 2 entries, 2 rows a cycle
    (the array runs a cycle only with the FIFO empty). Rows 5, 5 are written at 6 and popped at 7, 8 (one way): the
    FIFO holds 2, 2, 1 rows at 6, 7, 8, so the array is held then and its cycle 6 runs at 9 (rows out at 9, 9,
    written 10, popped 11, 12; held again at 10, 11, 12); its cycles 7, 8 run at 13, 14: ``done`` at 14 (6 cycles
    held). The walk starts at max(14, 12 + 3) = 15, ``done`` 15 + 2 + 4 = 21 (19 without the rule: pops 7-10, the
    walk at 13).

    Banks: grid 1 x 1 x 9, R = 1 (nine one-command segments), segment by segment; band-tile 0 (segment 0, desc 2,
    its row at 20), band-tile 1 (segment 8 = 0 + NB_BANKS, desc 3, row at 4). Held at 3: the walk needs segment 0,
    whose row is counted at 24 (written 21, popped 22); it goes at 25 (the held descriptor is "a later segment's"),
    its command at 26, ``sg`` 1 from 27, when band-tile 1 issues (H = 24, its row at 28); segments 1-7 (empty) go at
    27, 29, ..., 39; segment 8 is whole at 21 + 24 = 45 (the array's done moved), ``done`` 45 + 1 + 4 = 50. Without
    the rule the descriptor is counted 8 segments ahead: ``overflow``."""
    sch = core_schedule([5, 5, 6, 6], 8, (1, 1, 2), 1, 1, 2, descs=[(2, 0, 2), (3, 0, 2)], fifo=2, ports=2,
                        row_tile=[0, 0, 1, 1])
    assert (sch["frozen"], sch["held"], list(sch["issue"]), list(sch["out"])) == (6, 0, [2, 3], [5, 5, 9, 9])
    assert (list(sch["acc"] - 2), sch["start"], sch["done"], sch["fifo_max"]) == ([7, 8, 11, 12], 15, 21, 2)
    assert core_schedule([5, 5, 6, 6], 8, (1, 1, 2), 1, 1, 2)["done"] == 19
    held = core_schedule([20, 4], 21, (1, 1, 9), 1, 1, 1, True, [0, 8], [(2, 0, 1), (3, 8, 1)], hold=True,
                         row_tile=[0, 1])
    assert (held["held"], list(held["issue"]), list(held["out"]), held["start"], held["done"]) == \
        (24, [2, 27], [20, 28], 25, 50)
    assert not held["overflow"] and held["ahead"] == 7
    assert core_schedule([4, 20], 21, (1, 1, 9), 1, 1, 1, True, [8, 0], [(2, 0, 1), (3, 8, 1)])["overflow"]
    from sim.timing.delta_core import held_done
    assert held_done([20, 4], [0, 8], None, 21, True, [1] * 9, ([2, 3], [0, 8], [1, 1]), 1, None, True) == 50
    assert held_done([5, 5, 6, 6], None, None, 8, False, [2], ([2, 3], [0, 0], [2, 2]), 1, 2, False, ports=2) == 21
    with pytest.raises(ValueError, match="fewer entries than the 2 rows a cycle can write"):
        held_done([5, 5, 6, 6], None, None, 8, False, [2], ([2, 3], [0, 0], [2, 2]), 1, 1, False, ports=2)


@pytest.mark.parametrize("seed", range(12))
def test_held_done_equals_core_schedule(seed):
    """`held_done` (the model's numba loop with back-pressure, D116) against `core_schedule` on 20 seeded ops each:
    band-tiles of 0-6 rows over the segments (some empty), random FIFO depths and rows a cycle (the array hold) or
    none, with and without the issue hold, 1-4 ways, V output ways, 2-3 D buffers, both walk modes; the FIFO never holds
    more than its entries and, with the bank rule, no descriptor is counted `NB_BANKS` ahead; without either rule
    `held_done` is `ways_done`."""
    from sim.timing.delta_core import held_done, segment_step_counts, ways_done

    held = 0
    for sub in range(20):
        rng = np.random.default_rng(1000 * seed + sub)
        n_cb, a, grid, R = int(rng.integers(1, 5)), int(rng.integers(1, 4)), (2, 2, 3), 8  # noqa: N806
        nseg = len(segment_step_counts(grid, n_cb, a, R))
        W = int(rng.choice([1, 2, 4]))  # noqa: N806
        cyc, sgs, descs, t, sg = [], [], [], 2, 0
        while sg < nseg:
            for _ in range(int(rng.integers(0, 4))):
                v = int(rng.integers(0, 7))
                descs.append((t, sg, v))
                cyc += (t + 1 + rng.integers(0, 12, size=v)).tolist()
                sgs += [sg] * v
                t += int(rng.integers(0, 4))
            sg += int(rng.integers(1, 4))
        cyc, sgs = np.asarray(cyc, dtype=np.int64), np.asarray(sgs, dtype=np.int64)
        way = rng.integers(0, W, size=len(cyc))
        tile = np.repeat(np.arange(len(descs)), [d[2] for d in descs]).astype(np.int64)
        done = int(max(cyc.max() + 1 if len(cyc) else 0, t))
        V, nbuf = int(rng.choice([v for v in (1, 2, 4) if v <= W])), int(rng.integers(2, 4))  # noqa: N806
        lens = segment_step_counts(grid, n_cb, a, R, out_ways=V)
        ports = int(rng.integers(1, 4))
        fifo = None if rng.integers(0, 4) == 0 else int(rng.integers(ports, ports + 8))
        hold, nbk = bool(rng.integers(0, 2)), int(rng.integers(1, 5))  # few banks: the op has 2-8 segments
        order = np.argsort(cyc, kind="stable")  # the FIFO's order unheld: by cycle, a cycle's rows by band-tile
        dz = tuple(np.array(x, dtype=np.int64) for x in zip(*descs, strict=True)) if descs else \
            (np.zeros(0, np.int64),) * 3
        for seg in (True, False):
            sch = core_schedule(cyc[order], done, grid, n_cb, a, R, seg, sgs[order] if seg else None, descs, ways=W,
                                row_way=way[order], out_ways=V, buffers=nbuf, fifo=fifo, hold=hold, ports=ports,
                                row_tile=tile[order], row_tie=order, banks=nbk)
            got = held_done(cyc, sgs, way, done, seg, lens, dz, W, fifo, hold, nbuf, detail=True, ports=ports,
                            banks=nbk)
            assert got == {kk: sch[kk] for kk in ("done", "ahead", "bypass", "held", "fifo_max", "frozen")}, (sub, seg)
            # the FIFO holds no more than its entries where no cycle writes more than ``ports`` rows
            burst = int(np.bincount(sch["out"] - sch["out"].min()).max()) if len(cyc) else 0
            assert fifo is None or sch["fifo_max"] <= fifo - ports + max(ports, burst)
            assert not (hold and seg) or (not sch["overflow"] and sch["ahead"] < nbk)
            held += (sch["held"] > 0) + 100 * (sch["frozen"] > 0)
            if fifo is None and not (hold and seg):
                assert got["done"] == ways_done(cyc[order], sgs[order], way[order], done, seg, lens,
                                                dz if seg else None, W, nbk, nbuf)
            if seg:  # D125's segment-local D buffers: the same rule in both, or both refuse a deadlocking order
                try:
                    sl = core_schedule(cyc[order], done, grid, n_cb, a, R, True, sgs[order], descs, ways=W,
                                       row_way=way[order], out_ways=V, buffers=nbuf, fifo=fifo, hold=hold,
                                       ports=ports, row_tile=tile[order], row_tie=order, banks=nbk, local=True)
                except ValueError:
                    with pytest.raises(ValueError, match="deadlock"):
                        held_done(cyc, sgs, way, done, True, lens, dz, W, fifo, hold, nbuf, ports=ports, banks=nbk,
                                  local=True)
                else:
                    got = held_done(cyc, sgs, way, done, True, lens, dz, W, fifo, hold, nbuf, detail=True,
                                    ports=ports, banks=nbk, local=True)
                    assert got == {kk: sl[kk] for kk in ("done", "ahead", "bypass", "held", "fifo_max", "frozen")}
    assert held % 100 > 0 and held >= 100  # both holds are exercised
