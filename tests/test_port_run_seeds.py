"""`sim.timing.compact_accel.port_run`'s loop (`_port_run`, which steps a band's steady slots in runs, sleeps a waiting
band to the cycle it can move and keeps the early choice's least candidate between cycles: docs/decisions.md D128)
against the plain-Python rules it compiles, every key, on many seeded random ops: the staged delta controller
(`sim.timing.delta_accel.stage_run` against `stage_schedule(early=True, defer="behind")`) and compact's weight port
(`port_run` against `port_schedule`, with and without the queues and the segment barrier). The ops mix short and
long band-tiles (1-200 channels: runs of up to 2 B slots between pops), PAIRED ones, 1-4 drain ports per band and
few staging entries, so that bands wait for words, gathers, fills and drain ports."""

from __future__ import annotations

import numpy as np
import pytest

from hw.config import load_config, with_organisation
from sim.timing.compact import band_rows
from sim.timing.compact_accel import gather_rounds, port_fields, port_run, tile_widths
from sim.timing.delta_accel import queue_done, stage_run, stage_schedule
from tests.test_caccel_port import _both, _queue, _random_op
from tests.test_dstage_run import _args, _equal, _random_staged
from tests.test_rtl_compact import compact_cfg
from tests.test_rtl_delta import delta_cfg

#: (rows, cols, bands, drain rows per cycle): 2, 4 and 8 bands on 1, 2 and 4 ports per band, a port for 2 and 4
#: bands (B / d = 2 as the balanced preset, 4), and the balanced preset itself (None)
SHAPES = [(8, 8, 2, 1), (8, 8, 2, 2), (8, 8, 2, 8), (8, 8, 4, 2), (16, 4, 4, 4), (16, 8, 8, 2), (16, 4, 8, 4),
          (16, 8, 8, 16), None]
IDS = ["balanced" if s is None else "{}x{}-B{}-d{}".format(*s) for s in SHAPES]
SEEDS = 40  # per shape and kind


def _widen(rng, op, widths):
    """Half the ops' band-tiles on 2-5 times the channels (up to 200: runs of many words), their slots the new
    width (PAIRED: half of it, rounded up; PAIRED stays PAIRED); the stage fields as drawn (both rules take the
    same)."""
    if rng.random() < 0.5:
        return op, widths
    k = int(rng.integers(2, 6))
    wide = widths * k
    op.s_seq = np.where(op.s_seq < widths, (wide + 1) // 2, wide)
    return op, wide


def _id(shape) -> str:
    return IDS[SHAPES.index(shape)]


def _cfg(shape, make, organisation):
    if shape is None:
        return with_organisation(load_config("kaleido-16nm-128x128-balanced"), organisation)
    return make(*shape)


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_stage_run_equals_stage_schedule_many_seeds(shape):
    cfg = _cfg(shape, delta_cfg, "delta")
    waits = {"late": 0, "fill_wait": 0}
    for seed in range(SEEDS):
        rng = np.random.default_rng([128, IDS.index(_id(shape)), seed])
        op, widths, scfg, f = _random_staged(rng, cfg, int(rng.integers(1, 61)), seed % 2 == 1)
        op, widths = _widen(rng, op, widths)
        S, P = int(rng.choice([1, 2, 3, 2 * cfg.compact_bands])), int(rng.choice([2, 8, 32]))  # noqa: N806
        args = _args(op, widths, scfg, f)
        want = stage_schedule(*args, S, P, early=True, defer="behind")
        _equal(stage_run(*args, S, P), want, seed)
        for k in waits:
            waits[k] += want[k] > 0
    assert waits["late"] and waits["fill_wait"]  # the ops wait for words and for fills


@pytest.mark.parametrize("shape", SHAPES, ids=IDS)
def test_port_run_equals_port_schedule_many_seeds(shape):
    cfg = _cfg(shape, compact_cfg, "compact")
    late = 0
    for seed in range(SEEDS):
        rng = np.random.default_rng([117, IDS.index(_id(shape)), seed])
        op, groups = _random_op(rng, cfg, int(rng.integers(1, 40)))
        if rng.random() < 0.5:  # wider groups: longer runs
            k = int(rng.integers(2, 4))
            w = [k1 - k0 for k0, k1, _ in groups]
            groups = [(k * k0, k * k1, a) for k0, k1, a in groups]
            op.s_seq = np.array([(k * w[t.group] + 1) // 2 if s < w[t.group] else k * w[t.group]
                                 for s, t in zip(op.s_seq, op.tiles, strict=True)])
        entries, lanes = int(rng.choice([1, 2, 3, 2 * cfg.compact_bands])), int(rng.choice([2, 8, 32]))
        queue = _queue(rng, len(op.tiles)) if seed % 2 else None
        barrier = ("off", "off", "first", "every" if queue is None else "first")[seed % 4]
        entries = 2 * cfg.compact_bands if barrier != "off" else entries  # B staged at once, or it waits forever
        seg = (rng.random(len(op.tiles)) < 0.2).astype(np.int64)
        seg[0] = 1
        got, want = _both(op, groups, cfg, entries, lanes, queue, barrier, seg)
        for key in ("band", "first", "last", "gather"):
            assert np.array_equal(got[key], want[key]), (seed, key)
        for key in ("late", "reads", "weights", "deferred"):
            assert got[key] == want[key], (seed, key)
        if queue is not None:
            assert got["queue_done"] == queue_done(want["gather"], queue), seed
        late += want["late"] > 0
    assert late  # bands waited for their words


def test_port_run_equals_the_stepped_loop_on_large_ops():
    """Ops of 500-4,000 band-tiles (too long for the Python rules), staged and compact, on the balanced preset and
    two small shapes: `port_run` equals `port_run(stepped=True)` (D121's loop, one cycle an iteration), every key."""
    for i, shape in enumerate([None, (8, 8, 2, 1), (16, 8, 8, 16)]):
        dcfg, ccfg = _cfg(shape, delta_cfg, "delta"), _cfg(shape, compact_cfg, "compact")
        for seed in range(6):
            rng = np.random.default_rng([1280, i, seed])
            n = int(rng.integers(500, 4001))
            op, widths, scfg, f = _random_staged(rng, dcfg, n, seed % 2 == 1)
            op, widths = _widen(rng, op, widths)
            S, P = int(rng.choice([2, 2 * dcfg.compact_bands])), int(rng.choice([8, 32]))  # noqa: N806
            s_seq, rows, w, rounds, paired, seg, sbuf, fcount, saddr, _ = _args(op, widths, scfg, f)
            kw = {"seg": seg, "stage": (sbuf, fcount)}
            got = port_run(s_seq, rows, w, rounds, paired, saddr, scfg, S, P, **kw)
            _equal(got, port_run(s_seq, rows, w, rounds, paired, saddr, scfg, S, P, stepped=True, **kw), seed)
            op, groups = _random_op(rng, ccfg, n // 2)
            paired, saddr = port_fields(op, groups, ccfg)
            rounds = gather_rounds([t.tokens for t in op.tiles], band_rows(ccfg))
            queue = _queue(rng, len(op.tiles)) if seed % 2 else None
            a = (op.s_seq, op.rows, tile_widths(op, groups), rounds, paired, saddr, ccfg, 16, 32, queue)
            got, want = port_run(*a), port_run(*a, stepped=True)
            assert got.keys() == want.keys()
            for key in got:
                assert np.array_equal(got[key], want[key]), (shape, seed, key)


def test_bench_stage_run_on_a_small_grid():
    """`sim.bench.bench_stage_run` (``python -m sim.bench stage-run``) on a 2 x 8 x 16 grid: it takes `stage_run`'s
    arguments from the model's qk op and both loops agree on every key."""
    from sim.bench import bench_stage_run

    r = bench_stage_run(grid=(2, 8, 16), repeats=1)
    assert r["equal"] and r["tiles"] > 0 and r["cycles"] > 0
    assert r["stepped"] >= 0 and r["runs"] >= 0
