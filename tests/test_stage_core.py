"""`sim.timing.delta_core.stage_core` (docs/decisions.md D129): the staged controller and ``kaleido_dcore_stage``'s
core stepped together in one numba pass, the gather's take asked of the issue gate, against the plain-Python
co-simulation the RTL equals (`core_schedule` with ``gate=StageFeed``, D126: tests/test_rtl_dcore_stage.py and
tests/test_rtl_core_engine.py check it against the built cores), every key: on the RTL benches' staged ops built to
hold and on seeded random ops (random controller fields, walk segments, walk lengths and ways)."""

from __future__ import annotations

import numpy as np
import pytest

import sim.timing.delta_core as dc
from hw import discard
from hw.delta_accel import LANES, DeltaAccel
from sim.timing.delta import classes
from sim.timing.delta_core import (
    StageFeed,
    core_schedule,
    row_ways,
    row_ways_local,
    segment_steps,
    stage_core,
    tile_segments,
)
from tests.rtl.daccel_bench import staged_op
from tests.test_dstage_run import _args, _random_staged
from tests.test_port_run_seeds import SHAPES, _cfg, _widen
from tests.test_rtl_dcore_stage import _get, core_stage_cfg
from tests.test_rtl_delta import delta_cfg

#: the co-simulation's keys stage_core returns as well
CORE_KEYS = ("done", "ahead", "bypass", "held", "fifo_max", "frozen", "overflow", "accel_done")


def _compare(cfg, args, sgs, rw, per_seg, ordered, ways, fifo, bound, buffers, where, banks=dc.NB_BANKS,
             out_ways=1, walk=None, local=False, slots=None):
    """`stage_core` against `core_schedule(gate=StageFeed(...))` on the same controller ``args`` (`stage_schedule`'s
    positional arguments through ``lanes``); ``walk``: `core_schedule`'s sizes ``(grid, n_cb, n_classes, R, fw, s)``,
    else the walk's segments are ``per_seg`` long (`segment_steps` replaced by steps of no rows). ``local``:
    segment-local D addresses (D125, D132) in both, on ``slots`` segment slots (D138; default ``buffers``); where the co-simulation refuses the order (a deadlock of the RTL,
    ValueError) `stage_core` must refuse it too: returns None then."""
    feed = StageFeed(args, {"early": True, "defer": "behind"}, sgs, rw, cfg)
    hold = {"fifo": fifo, "ports": cfg.drain_rows_per_cycle} if fifo else {}
    w = walk or ((1, 1, 1), 1, 1, 1, None, None)
    rwc = np.concatenate([np.asarray(rw[t], dtype=np.int64)[:int(args[1][t])] for t in range(len(sgs))])
    try:
        want = core_schedule(None, None, *w[:4], ordered, None, None, *w[4:], ways, None, out_ways=out_ways,
                             buffers=buffers, **hold, gate=feed, bound=bound, banks=banks, local=local, slots=slots)
    except ValueError as err:
        assert local and "deadlock" in str(err), (where, err)
        with pytest.raises(ValueError, match="deadlock"):
            stage_core(*args, sgs, rwc, per_seg, ordered, ways, fifo, bound, buffers, banks, local=local, slots=slots)
        return None
    got = stage_core(*args, sgs, rwc, per_seg, ordered, ways, fifo, bound, buffers, banks, local=local, slots=slots)
    got["gated"] = want["gated"]  # the co-simulation's rows waited at the head (not a stage_core key)
    for key in CORE_KEYS:
        assert got[key] == want[key], (where, key, got[key], want[key])
    for key, v in (("band", feed.band), ("last", feed.last), ("gather", feed.gather)):
        assert np.array_equal(got[key], np.asarray(v)), (where, key)
    return got


#: tests/test_rtl_dcore_stage.py's ISSUE_RUNS (built to hold) and the array hold's shapes: (shape, case, FIFO, bound,
#: ways, out ways, D buffers)
RUNS = [("8x8-B2-d2", "sliced-3cb", 4, 1, 1, 1, 2), ("8x8-B2-d2", 1, 2, 1, 2, 2, 3),
        ("8x8-B4-d2", "three-axes", 4, 2, 1, 1, 2), ("8x8-B2-d2", "qk-int8", None, 1, 2, 2, 2),
        ("8x8-B4-d2", 3, 6, 2, 2, 1, 2), ("8x8-B2-d2", "wide", 4, 4, 2, 2, 3)]


@pytest.mark.parametrize("run", RUNS, ids=[f"{r[0]}-{r[1]}-q{r[2]}-b{r[3]}" for r in RUNS])
def test_stage_core_equals_the_cosimulation_on_the_benches_ops(run):
    from hw.delta_accel_host import stage_plan
    from sim.timing.delta_accel import gather_rounds
    from tests.rtl.daccel_bench import host_tiles
    from tests.test_rtl_dstage import MAX_K

    shape, ci, fifo, bound, ways, out_ways, buffers = run
    cfg = core_stage_cfg(shape)
    sop = staged_op(_get(ci), cfg)
    case, op = sop.case, sop.op
    R, S = cfg.array_rows, 2 * cfg.compact_bands  # noqa: N806
    acc = discard(DeltaAccel(cfg, entries=S, lanes=LANES, max_k=MAX_K.get(ci), stage=True))
    plan, _nbuf, _size = stage_plan(acc, case.groups, host_tiles(op), sop.segment, sop.sliced)
    widths = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles])
    rounds = gather_rounds([t.tokens for t in op.tiles], R // cfg.compact_bands)
    paired = [bool(t.partial.all()) and t.slots < w for t, w in zip(op.tiles, widths, strict=True)]
    args = (op.s_seq, op.rows, widths, rounds, paired, *([p[k] for p in plan] for k in ("seg", "sbuf", "fcount",
                                                                                          "saddr")), cfg, S, LANES)
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    sgs = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, R, n_cb, sop.fw, sop.s)
    of_class = {g: a for a, (_ax, idx) in enumerate(classes(case.groups)) for g in idx}
    rw = row_ways([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.X.shape[0], ways)
    ncl = len(classes(case.groups))
    per_seg = [len(x) for x in segment_steps(case.grid, n_cb, ncl, R, sop.fw, sop.s, out_ways)]
    got = _compare(cfg, args, sgs, rw, per_seg, True, ways, fifo, bound, buffers, run, out_ways=out_ways,
                   walk=(case.grid, n_cb, ncl, R, sop.fw, sop.s))
    assert got["held"] > 0 or run not in RUNS[:3]  # the ops built to hold do
    # segment-local D addresses (D125, as hw.rtl builds kaleido_dcore_stage since D132): the ways from the slots, the
    # bound the D buffers n as built (no row waits for the local rule then), and the run's own bound
    rwl = row_ways_local([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.grid, R,
                         sop.fw or case.grid[0], ways)
    for b in sorted({buffers, bound}):
        got = _compare(cfg, args, sgs, rwl, per_seg, True, ways, fifo, b, buffers, (run, "local", b),
                       out_ways=out_ways, walk=(case.grid, n_cb, ncl, R, sop.fw, sop.s), local=True)
        assert got is not None and (b > buffers or got["gated"] == 0), (run, b)
    # D138's segment-slot ring as built: 2 slots a buffer, the bound at the slots
    got = _compare(cfg, args, sgs, rwl, per_seg, True, ways, fifo, 2 * buffers, buffers, (run, "slots"),
                   out_ways=out_ways, walk=(case.grid, n_cb, ncl, R, sop.fw, sop.s), local=True, slots=2 * buffers)
    assert got is not None, run


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_stage_core_equals_the_cosimulation_many_seeds(shape, monkeypatch):
    """Seeded random staged ops (tests/test_port_run_seeds.py's) with random walk segments (every stage segment cut
    into 1-3), walk lengths (1-40 cycles a segment), ways, D buffers, bounds 1-4 and FIFOs (none, d to 4 d)."""
    monkeypatch.setattr(dc, "segment_steps", lambda *a: STEPS[0])
    cfg = _cfg(shape, delta_cfg, "delta")
    d = cfg.drain_rows_per_cycle
    held = frozen = waited = refused = ring = 0
    for seed in range(12):
        rng = np.random.default_rng([129, SHAPES.index(shape), seed])
        op, widths, scfg, f = _random_staged(rng, cfg, int(rng.integers(1, 81)), seed % 2 == 1)
        op, widths = _widen(rng, op, widths)
        S, P = int(rng.choice([1, 2, 3, 2 * cfg.compact_bands])), int(rng.choice([2, 8, 32]))  # noqa: N806
        args = (*_args(op, widths, scfg, f), S, P)
        T = len(op.rows)  # noqa: N806
        head = np.r_[0, np.asarray(args[5])[1:]] if T else np.zeros(0, np.int64)  # stage segments' heads (seg 1)
        cut = (head > 0) | (rng.random(T) < 0.15)
        cut[:1] = False
        sgs = np.cumsum(cut).astype(np.int64)
        nseg = int(sgs[-1]) + 1 if T else 1
        per_seg = rng.integers(1, 41, nseg)
        STEPS[0] = [[[] for _ in range(int(n))] for n in per_seg]
        ways = int(rng.choice([1, 2, 4]))
        rw = [rng.integers(0, ways, int(v)) for v in op.rows]
        fifo = [None, d, 2 * d, 4 * d][seed % 4]
        bound = int(rng.integers(1, 5))
        buffers = int(rng.choice([2, 3]))
        got = _compare(scfg, args, sgs, rw, per_seg, True, ways, fifo, bound, buffers, seed)
        held += got["held"] > 0
        frozen += got["frozen"] > 0
        # segment-local D addresses (D125, D132) on the same op: the local wait and its refusals where the bound
        # exceeds the D buffers (bound 1-4 against 2-3 buffers)
        got = _compare(scfg, args, sgs, rw, per_seg, True, ways, fifo, bound, buffers, (seed, "local"), local=True)
        refused += got is None
        waited += got is not None and got["gated"] > 0
        # D138's segment-slot ring: 2 slots a buffer, the bound at the slots as built (then only a buffer's walk
        # holds a row: its other slot shares the buffer's ports)
        sl = 2 * buffers
        got = _compare(scfg, args, sgs, rw, per_seg, True, ways, fifo, sl, buffers, (seed, "slots"), local=True,
                       slots=sl)
        assert got is not None, (seed, "slots")  # no row ever waits for the slot's rule: no deadlock forms
        ring += got["gated"] > 0
    assert held and frozen  # the gate held takes, the array was held
    LOCAL[shape] = (waited, refused, ring)


def test_stage_core_local_wait_binds_and_refuses_over_the_seeds():
    """Over `test_stage_core_equals_the_cosimulation_many_seeds`' shapes, `stage_core(local=True)` met ops where a row
    waited for D125's segment-local rule and ops it refused as deadlocks (the bound above the D buffers), equal to the
    co-simulation on both (asserted there)."""
    if len(LOCAL) < len(SHAPES):
        pytest.skip("needs the seeded test's shapes run first (the same session)")
    assert sum(v[0] for v in LOCAL.values()) > 0 and sum(v[1] for v in LOCAL.values()) > 0, LOCAL
    assert sum(v[2] for v in LOCAL.values()) > 0, LOCAL  # D138: rows held by their buffer's walk on the ring


STEPS: list = [None]
#: per shape of the seeded test: (ops where a row waited for the segment-local rule, ops refused as deadlocks, ops
#: where a row waited on D138's ring of 2 slots a buffer)
LOCAL: dict = {}


def test_stage_core_segment_local_wait_by_hand(monkeypatch):
    """D125's segment-local wait in `stage_core` (D132), by hand. 8 x 8, B = 2, d = 2 (q = 1, a port per band), the
    early choice's three band-tiles of tests/test_rtl_dstage.py (3 slots, one row, one fill), walk segments 0, 2, 2
    (segment 1 has no band-tile), walks of 20, 1, 1 cycles, one way, 2 D buffers, 8 count banks, no FIFO hold.

    Controller (core cycle k = controller cycle + 1): the gate's freshness takes band-tile 0 at 1, the others at
    gather + 2: 3, 5; last slots 10, 11, 14 (as the early case, a cycle later for the take, band 1 reading its own
    word at 7); each row leaves at last + 1 + C + 2 = 21, 22, 25, poppable 2 later, accumulated 2 after its pop;
    descriptors counted at gather + 3 (hi = 2 from k = 8).
    - Bound 3, the op's address (the old gate: a row waits while its parity's segment is walked or whole): row 0
      pops 23 (acc 25), row 1 (segment 2) pops at once at 24 (segment 0 not whole yet; acc 26); segment 0 whole at
      26 but row 1 of its parity is in stage 2: walk 27..47. Row 2 waits 27..47 (21 cycles gated), pops 48 (acc 50)
      with segment 1's walk 48..49; segment 2 whole at 51, done 51 + 1 + 4 = 56.
    - Bound 3, segment-local: row 1 waits from 24 until segment 0's walk has ended (2 < w_seg + 2 once w_seg = 1):
      walk 26..46, row 1 pops 47 (acc 49), row 2 48 (acc 50); 23 cycles gated, the walk one cycle earlier, done 56.
    - Bound 2 = n (as hw.rtl builds it): band-tile 1's take is held from its fresh cycle 3 until w_seg = 1 (after
      k = 46): 43 held cycles, gathers 46, 48, first slots 53, 54 (words readable 50, 52; the bands' turns 51, 52),
      last 55, 56, rows out 66, 67 (acc 70, 71); segment 1 whole once band-tile 1's descriptor is counted (49), its
      walk 49..50; segment 2 whole at 72, done 77; no row waits (gated 0), with or without ``local``.
    - D138's ring, 2 slots a buffer (slots 4, bound 4): segment 2 is fewer than 4 past the walk, so row 1 does not
      wait for its slot, only for its buffer's walk (segment 0, the same residue mod 2): at 24 segment 0 is not yet
      whole (row 0 in stage 2), so row 1 pops at once, as with the op's address: start 27, acc 25, 26, 50, 21 cycles
      gated (row 2 waits for segment 0's walk, its buffer's), done 56; the gate holds nothing (segments 0 .. 2)."""
    from tests.test_rtl_dstage import stage_cfg

    cfg = stage_cfg("8x8-B2-d2")
    args = ([3, 3, 3], [1, 1, 1], [3, 3, 3], [1, 1, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0], [2, 2, 2], [0, 0, 0], cfg, 4,
            32)
    per_seg, sgs = [20, 1, 1], [0, 2, 2]
    monkeypatch.setattr(dc, "segment_steps", lambda *a: [[[] for _ in range(n)] for n in per_seg])
    want = {(3, False, None): (27, [25, 26, 50], 21, 56, 0), (3, True, None): (26, [25, 49, 50], 23, 56, 0),
            (2, False, None): (26, [25, 70, 71], 0, 77, 43), (2, True, None): (26, [25, 70, 71], 0, 77, 43),
            (4, True, 4): (27, [25, 26, 50], 21, 56, 0)}
    for (bound, local, slots), (start, acc, gated, done, held) in want.items():
        got = stage_core(*args, sgs, None, per_seg, True, 1, None, bound, 2, dc.NB_BANKS, local=local, slots=slots)
        assert got["gather"].tolist() == ([1, 3, 5] if bound != 2 else [1, 46, 48])
        assert got["last"].tolist() == ([10, 11, 14] if bound != 2 else [10, 55, 56])
        assert (got["done"], got["held"], got["accel_done"]) == (done, held, 26 if bound != 2 else 68), (bound, local)
        feed = StageFeed(args, {"early": True, "defer": "behind"}, sgs, [[0]] * 3, cfg)
        sch = core_schedule(None, None, (1, 1, 1), 1, 1, 1, True, None, None, None, None, 1, None, buffers=2,
                            gate=feed, bound=bound, local=local, slots=slots)
        assert (sch["start"], sch["acc"].tolist(), sch["gated"], sch["done"]) == (start, acc, gated, done), (bound, local)
