"""`sim.timing.delta_core.issue_core` (docs/decisions.md D137): ``kaleido_daccel_gate``'s list schedule and
``kaleido_dcore``'s core stepped together in one numba pass, each take of the gather asked of the issue gate, against
the plain-Python co-simulation the RTL equals (`core_schedule` with ``gate=IssueFeed``, D126: tests/test_rtl_dcore.py
and tests/test_rtl_core_engine.py check it against the built core), every key: on the RTL benches' ops built to hold
(with the queues and from the host's list) and on seeded random ops (random controller fields, queue emissions, walk
segments, walk lengths, ways, FIFOs and bounds)."""

from __future__ import annotations

import numpy as np
import pytest

import sim.timing.delta_core as dc
from sim.timing.delta import classes
from sim.timing.delta_accel import AccelRun
from sim.timing.delta_core import IssueFeed, core_schedule, issue_core, segment_steps
from tests.test_rtl_delta import SHAPES, delta_cfg

#: the co-simulation's keys issue_core returns as well
CORE_KEYS = ("done", "ahead", "bypass", "held", "fifo_max", "frozen", "overflow", "accel_done")


def _compare(cfg, fields, entries, lanes, queue, sgs, rw, per_seg, ordered, ways, fifo, bound, buffers, where,
             banks=dc.NB_BANKS, out_ways=1, walk=None):
    """`issue_core` against `core_schedule(gate=IssueFeed(...))` on the same controller ``fields`` (``(s_seq, rows,
    widths, rounds)``, `AccelRun`'s); ``walk``: `core_schedule`'s sizes ``(grid, n_cb, n_classes, R, fw, s)``, else
    the walk's segments are ``per_seg`` long (`segment_steps` replaced by steps of no rows)."""
    feed = IssueFeed(AccelRun(*fields, cfg, entries, lanes, queue, gate=True), sgs, rw, cfg)
    hold = {"fifo": fifo, "ports": cfg.drain_rows_per_cycle} if fifo else {}
    w = walk or ((1, 1, 1), 1, 1, 1, None, None)
    want = core_schedule(None, None, *w[:4], ordered, None, None, *w[4:], ways, None, out_ways=out_ways,
                         buffers=buffers, **hold, gate=feed, bound=bound, banks=banks)
    T = len(sgs)  # noqa: N806
    rwc = (np.concatenate([np.asarray(rw[t], dtype=np.int64)[:int(fields[1][t])] for t in range(T)]) if T
           else np.zeros(0, np.int64))
    got = issue_core(*fields, cfg, entries, lanes, sgs, rwc, per_seg, ordered, ways, fifo, bound, buffers, banks,
                     queue)
    for key in CORE_KEYS:
        assert got[key] == want[key], (where, key, got[key], want[key])
    run = feed.run
    for key, v in (("band", run.band), ("first", run.first), ("last", run.last), ("gather", run.gather)):
        assert np.array_equal(got[key], v), (where, key)
    return got


#: tests/test_rtl_dcore.py's ISSUE_RUNS without segment-local D addresses (issue_core does not take them, as
#: `stage_core`): (case, shape, chunk-major, core options, FIFO, bound)
RUNS = [("wide3", "8x8-B2-d2", False, {"ways": 1}, None, 2),
        ("wide3", "8x8-B2-d2", False, {"queues": False, "ways": 2, "out_ways": 2, "d_buffers": 3}, 4, 2),
        ("wide3", "8x8-B2-d2", False, {"ways": 1}, 4, 1),
        (3, "8x8-B2-d4", True, {}, 4, 1),
        (1, "8x8-B4-d2", True, {"queues": False, "ways": 1}, 4, 1)]


@pytest.mark.parametrize("run", RUNS, ids=[f"{r[0]}-{r[1]}-q{r[4]}-b{r[5]}" for r in RUNS])
def test_issue_core_equals_the_cosimulation_on_the_benches_ops(run):
    from sim.timing.delta_accel import gather_rounds
    from sim.timing.delta_core import row_ways, tile_segments
    from tests.test_rtl_dcore import _job, _named_case

    ci, shape, chunk_major, opts, fifo, bound = run
    case, fw, s, chunk_major = _named_case(ci, chunk_major)
    cfg = delta_cfg(*SHAPES[shape], state_kib=2)
    d, opts = cfg.drain_rows_per_cycle, dict(opts)
    job, queue = _job(cfg, case, fw, s, chunk_major, False, opts.pop("queues", True))
    _case, op, _fused, _ports, (seg, fw, s) = job
    ways, V, nbuf = opts.get("ways", d), opts.get("out_ways", 1), opts.get("d_buffers", 2)  # noqa: N806
    R, B = cfg.array_rows, cfg.compact_bands  # noqa: N806
    widths = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles], dtype=np.int64)
    rounds = gather_rounds([t.tokens for t in op.tiles], R // B)
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    sgs = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, R, n_cb, fw, s)
    of_class = {g: a for a, (_ax, idx) in enumerate(classes(case.groups)) for g in idx}
    rw = row_ways([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.X.shape[0], ways)
    ncl = len(classes(case.groups))
    per_seg = [len(x) for x in segment_steps(case.grid, n_cb, ncl, R, fw, s, V)]
    got = _compare(cfg, (op.s_seq, op.rows, widths, rounds), 2 * B, 32, queue, sgs, rw, per_seg, seg, ways, fifo,
                   bound, nbuf, run, out_ways=V, walk=(case.grid, n_cb, ncl, R, fw, s))
    assert seg and got["held"] > 0 and got["ahead"] < bound and not got["overflow"]  # built to hold


def _random_queue(rng, T: int) -> tuple:  # noqa: N803
    """A random `queue_steps` result for ``T`` descriptors: emissions of 1-3 descriptors each on increasing steps
    (gaps of 0-5 idle steps), 1-6 steps after the last."""
    reps = []
    while sum(reps) < T:
        reps.append(int(min(rng.integers(1, 4), T - sum(reps))))
    step = np.cumsum(rng.integers(1, 7, len(reps))) - 1
    steps = int(step[-1]) + int(rng.integers(1, 7)) if len(step) else int(rng.integers(0, 4))
    return np.asarray(step, dtype=np.int64), np.asarray(reps, dtype=np.int64), steps


#: (rows, cols, bands B, drain rows d): the bands above, below and equal to the ports
RANDOM_SHAPES = [(8, 8, 2, 2), (8, 8, 4, 2), (8, 8, 2, 4), (16, 8, 4, 4), (16, 8, 8, 2)]


@pytest.mark.parametrize("shape", RANDOM_SHAPES, ids=[str(s) for s in RANDOM_SHAPES])
def test_issue_core_equals_the_cosimulation_many_seeds(shape, monkeypatch):
    """Seeded random ops: 0-60 band-tiles of random slots (0-12), rows (1 to R / B ... R), widths (1-70 channels),
    gather rounds (1-3), staging entries and lanes, from the host's list or random queue emissions; random walk
    segments (runs of 1-6 band-tiles, some empty segments skipped), walk lengths (1-30 cycles a segment), ways, D
    buffers, bounds 1-4 and FIFOs (none, d to 4 d); half the ops in segment order, half walked whole."""
    monkeypatch.setattr(dc, "segment_steps", lambda *a: STEPS[0])
    R, C, B, d = shape  # noqa: N806
    cfg = delta_cfg(R, C, B, d)
    held = frozen = queued = 0
    for seed in range(16):
        rng = np.random.default_rng([137, RANDOM_SHAPES.index(shape), seed])
        T = int(rng.integers(0, 61)) if seed else 0  # noqa: N806  (seed 0: an empty op)
        s_seq = rng.integers(0, 13, T)
        rows = rng.integers(1, R + 1, T)
        widths = rng.integers(1, 71, T)
        rounds = rng.integers(1, 4, T)
        entries, lanes = int(rng.choice([1, 2, 3, 2 * B])), int(rng.choice([4, 8, 32]))
        queue = _random_queue(rng, T) if seed % 3 or seed == 0 else None  # seed 0: an empty op's queues
        cut = rng.random(T) < 0.3
        cut[:1] = False
        sgs = np.cumsum(cut + cut * (rng.random(T) < 0.2)).astype(np.int64)  # some segments have no band-tile
        nseg = int(sgs[-1]) + 1 if T else 1
        per_seg = rng.integers(1, 31, nseg)
        STEPS[0] = [[[] for _ in range(int(n))] for n in per_seg]
        ways = int(rng.choice([1, 2, 4]))
        rw = [rng.integers(0, ways, int(v)) for v in rows]
        fifo = [None, d, 2 * d, 4 * d][seed % 4]
        bound = int(rng.integers(1, 5))
        ordered = seed % 2 == 0 or seed % 5 == 1
        got = _compare(cfg, (s_seq, rows, widths, rounds), entries, lanes, queue, sgs, rw, per_seg, ordered, ways,
                       fifo, bound, int(rng.choice([2, 3])), seed, banks=int(rng.choice([bound, 8])))
        held += got["held"] > 0
        frozen += got["frozen"] > 0
        queued += queue is not None
    assert held and frozen and queued  # the gate held takes, the array was held, the queues were modelled


STEPS: list = [None]


def test_issue_core_refusals():
    cfg = delta_cfg(*SHAPES["8x8-B2-d2"])
    one = ([1], [2], [4], [1])
    with pytest.raises(ValueError, match="entries"):
        issue_core([1, 2], [2], [4], [1], cfg, 4, 32, [0], None, [3], True, 1, None, 2)
    with pytest.raises(ValueError, match="row_way"):
        issue_core(*one, cfg, 4, 32, [0], [0, 0, 0], [3], True, 1, None, 2)
    with pytest.raises(ValueError, match="fifo"):
        issue_core(*one, cfg, 4, 32, [0], None, [3], True, 1, 1, 2)


#: tests/test_rtl_core_engine.py's delta example TOML; the model's unstaged core needs no weight stage
DELTA_TOML = "hw/presets/examples/tiny-8x8-delta.toml"


@pytest.mark.parametrize("extra", [{}, {"dcore_count_banks": 1, "dcore_fifo_per_port": 1}],
                         ids=["as-built", "bound1-fifo-d"])
def test_model_equals_the_cosimulation_on_the_captured_block(captured_block, extra):
    """The cycle model (`sim.engines.model.simulate_op`, ``combine_timing = "rtl"``) on the captured block's pv, o_proj
    and ffn2 (batch element 0, whole ops) on the example delta TOML without its weight stage (``kaleido_dcore``, D84's
    order on its difference-sum buffer): its op cycles (array + combine stall) and its per-op core detail equal
    `core_schedule` co-simulating ``kaleido_daccel_gate`` with its queues (``gate=IssueFeed``, `queue_steps` in
    Python) on the band-tiles the RTL benches and the compiled engine feed (`sim.engines.band_stimulus.band_op`), at the
    plan the engine takes (`sim.timing.delta.plan`): what `CoreEngine.expected` computes, apart from the model; as built (8 entries a port, 8 count banks) and with a
    bound of one segment and a FIFO of d entries, where the gate and the array hold."""
    from algo.reuse.golden import decide
    from algo.trace import Group, OpRecord, pack_decisions
    from hw.config import config_from_dict, load_config
    from hw.delta_accel import LANES
    from hw.delta_core import segment_order
    from sim.engines.band_stimulus import band_op
    from sim.engines.model import simulate_op
    from sim.timing import delta as rules
    from sim.timing.delta_accel import gather_rounds, queue_steps
    from sim.timing.delta_core import core_d_buffers, core_out_ways, core_ways, row_ways, tile_segments

    cfg = config_from_dict(load_config(DELTA_TOML).model_dump() | {"wstage_sram_kib": 0, "combine_timing": "rtl"}
                           | extra)
    R, B, C, d = cfg.array_rows, cfg.compact_bands, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    grid = tuple(captured_block.grid)
    held = frozen = 0
    for op in captured_block.ops:
        if op.name not in ("pv", "o_proj", "ffn2"):
            continue
        groups = [g.as_tuple() for g in op.groups]
        X, Wt = op.X[0], op.W[0]  # noqa: N806
        dec = decide(X, grid, groups, op.theta, captured_block.b_msb)[0]
        K, N = Wt.shape  # noqa: N806
        rec = OpRecord("o_proj", 0, 0, None, None, [Group(*g) for g in groups], (0.0, 0.0),
                       dims=(1, X.shape[0], K, N), decisions=pack_decisions(dec)[None, None], thetas=((0.0, 0.0),))
        t = simulate_op(rec, grid, 4, cfg)
        fw, s = rules.plan(cfg, grid[0], K, N, False, "op", groups)  # the compiled engine's (`CoreEngine.plan`)
        n_cb = -(-N // C)
        bop = band_op(X, Wt, grid, groups, dec, cfg, fw, s, chunk_major=True)
        widths = np.array([groups[x.group][1] - groups[x.group][0] for x in bop.tiles], dtype=np.int64)
        rounds = gather_rounds([x.tokens for x in bop.tiles], R // B)
        sgs = tile_segments([(x.cb, int(x.tokens[0])) for x in bop.tiles], grid, R, n_cb, fw, s)
        cls = classes(groups)
        of_class = {g: a for a, (_ax, idx) in enumerate(cls) for g in idx}
        W = core_ways(cfg)  # noqa: N806
        rw = row_ways([x.tokens for x in bop.tiles], [of_class[x.group] for x in bop.tiles], X.shape[0], W)
        queue = queue_steps(dec, grid, R, R // B, fw, n_cb, s, True)  # the engine's (`CoreEngine.expected`)
        feed = IssueFeed(AccelRun(bop.s_seq, bop.rows, widths, rounds, cfg, 2 * B, LANES, queue, gate=True), sgs, rw,
                         cfg)
        nb = cfg.dcore_count_banks
        sch = core_schedule(None, None, grid, n_cb, len(cls), R, segment_order(True, s, n_cb), None, None, fw, s, W,
                            None, out_ways=core_out_ways(cfg), buffers=core_d_buffers(cfg),
                            fifo=cfg.dcore_fifo_per_port * d, ports=d, gate=feed, bound=nb, banks=nb)
        assert (t.compact["chunk_frames"], t.compact["col_blocks"]) == (fw, s)
        assert t.cycles + t.stall_cycles["combine"] == sch["done"], op.name
        assert t.core == {k: sch[k] for k in ("done", "ahead", "bypass", "held", "fifo_max", "frozen")}, op.name
        held += sch["held"]
        frozen += sch["frozen"]
    assert (held > 0 and frozen > 0) == bool(extra)


def test_queue_scan_is_queue_steps():
    """`queue_scan` (numba, the cycle model's) equals `sim.timing.delta_accel.queue_steps` (D93's rule in Python, which
    tests/test_rtl_dqueue.py holds to ``kaleido_dqueue``) on 120 seeded random decision grids: 1-5 frames, rows and
    columns, 1-4 groups, R 4-16 in 1-4 bands, chunks, column blocks, s, both orders, lanes R / B and half that."""
    from sim.timing.delta_accel import queue_steps
    from sim.timing.delta_core import queue_scan

    rng = np.random.default_rng(137)
    for it in range(120):
        F, H, W = (int(x) for x in rng.integers(1, 6, 3))  # noqa: N806
        G = int(rng.integers(1, 5))  # noqa: N806
        dec = rng.choice(3, size=(F * H * W, G), p=rng.dirichlet([1, 1, 1])).astype(np.int8)
        R, B = int(rng.choice([4, 8, 16])), int(rng.choice([1, 2, 4]))  # noqa: N806
        fw, n_cb = int(rng.integers(1, F + 1)), int(rng.integers(1, 6))
        s, cm = int(rng.integers(1, n_cb + 1)), bool(rng.integers(0, 2))
        lanes = int(rng.choice([R // B, max(1, R // B // 2)]))
        want = queue_steps(dec, (F, H, W), R, R // B, fw, n_cb, s, cm, lanes)
        got = queue_scan(dec, (F, H, W), R, R // B, fw, n_cb, s, cm, lanes)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]) and got[2] == want[2], it
