"""The staged controller's descriptor ring (`hw.delta_accel.DeltaAccel` with ``ring``, docs/decisions.md D134; D130
item 4) under Amaranth's simulator, against the model's drained gate (`sim.timing.delta_accel.stage_schedule` /
`stage_run` and `sim.timing.delta_core.stage_core` with ``ring``), on rings of 2-8 entries, where the gate binds:

- ``kaleido_daccel_stage`` (and with D126's issue gate, its read-ahead) on ops of 24 and 58 band-tiles, each
  wrapping its ring of 4 6 and 14 times: every row once, its words `sim.engines.band_stimulus.band_op`'s, Y from the tags equal to
  `algo.reuse.golden.apply_decisions`, every row's cycle and ``done`` equal to `stage_schedule`'s with the ring, the
  gate seen holding takes; `stage_run` (numba) equal to `stage_schedule` key for key;
- a host behind the gather (a descriptor every 7 cycles): the values still right (the read-ahead's repeated
  read), later than the model's (which assumes the list ahead);
- ``kaleido_dcore_stage`` with the ring (the core's tile table a ring too): every Y row and its cycle against
  `core_schedule` fed by `stage_schedule` with the ring; `stage_core` equal to that co-simulation with the ring;
- the gate's cycle by hand, the host protocol and the refusals.
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import apply_decisions
from hw import discard
from hw.config import AcceleratorConfig
from hw.delta_accel import LANES, DeltaAccel
from hw.delta_accel_host import SEL_DESC, SEL_W, SEL_X, ring_split, stage_op_words
from sim.timing.compact_accel import ring_free
from sim.timing.delta_accel import stage_run, stage_schedule
from tests.rtl.combine_rules import delta_y
from tests.rtl.daccel_bench import run_staged, staged_op
from tests.test_rtl_dstage import _get, model_of, stage_cfg

#: (shape, case, ring, issue gate): 24 band-tiles on a ring of 4, 58 on 4 with the issue gate's read-ahead
RUNS = [("8x8-B2-d2", 0, 4, False), ("8x8-B4-d2", 1, 4, True)]


def _stage_args(cfg, job):
    """`stage_schedule`'s positional arguments through ``lanes`` for a `StagedOp` (tests/test_rtl_dstage.py's)."""
    from hw.delta_accel_host import stage_plan
    from sim.timing.delta_accel import gather_rounds
    from tests.rtl.daccel_bench import host_tiles

    S = 2 * cfg.compact_bands  # noqa: N806
    acc = discard(DeltaAccel(cfg, entries=S, stage=True))
    plan, _nbuf, _size = stage_plan(acc, job.case.groups, host_tiles(job.op), job.segment, job.sliced)
    widths = np.array([job.case.groups[t.group][1] - job.case.groups[t.group][0] for t in job.op.tiles])
    rounds = gather_rounds([t.tokens for t in job.op.tiles], cfg.array_rows // cfg.compact_bands)
    paired = [bool(t.partial.all()) and t.slots < w for t, w in zip(job.op.tiles, widths, strict=True)]
    return (job.op.s_seq, job.op.rows, widths, rounds, paired,
            *([p[k] for p in plan] for k in ("seg", "sbuf", "fcount", "saddr")), cfg, S, LANES)


@pytest.mark.parametrize(("shape", "ci", "ring", "gate"), RUNS, ids=[f"{r[0]}-{r[1]}-ring{r[2]}{'-gate' * r[3]}"
                                                                    for r in RUNS])
def test_ring_rows_cycles_and_values(shape, ci, ring, gate):
    cfg = stage_cfg(shape)
    case = _get(ci)
    job = staged_op(case, cfg)
    op = job.op
    assert len(op.tiles) >= 6 * ring  # the op wraps the ring several times
    [got] = run_staged(cfg, [job], ring=ring, issue_gate=gate)
    m = model_of(cfg, job, 2 * cfg.compact_bands, LANES, ring=ring)
    want = {(n, i): (int(m["out"][n][i]), t.want[i, :, 0]) for n, t in enumerate(op.tiles) for i in range(len(t.tokens))}
    assert not got.twice and sorted(got.rows) == sorted(want)
    for key, (cycle, words) in got.rows.items():
        assert np.array_equal(words, want[key][1]), key
        assert cycle == want[key][0], key
    assert got.cycles == m["cycles"] and got.tile_mismatch == 0
    assert (got.stage_reads, got.fill_reads, got.deferred) == (m["reads"], m["fill_reads"], m["deferred"])
    rows = ((int(op.tiles[n].tokens[i]), op.tiles[n].group, op.tiles[n].n0, w[:, None])
            for (n, i), (_c, w) in got.rows.items())
    y = delta_y(job.case.decisions, job.case.grid, job.case.groups, case.W.shape[1], rows)
    assert np.array_equal(y, apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4))
    # the gate binds here: takes held on the RTL, the op later than without the ring
    assert got.ring_waits > 0 and m["cycles"] > model_of(cfg, job, 2 * cfg.compact_bands, LANES)["cycles"]
    # no take before band-tile n - ring's last row has left (+1): the rule itself, on the model's schedule
    B, d, C = cfg.compact_bands, cfg.drain_rows_per_cycle, cfg.array_cols  # noqa: N806
    for n in range(ring, len(op.tiles)):
        t = n - ring
        last_out = max(int(c) for c in m["out"][t]) - 1  # row_out_cycles count from start: the model's cycle + 1
        assert m["gather"][n] >= last_out + 1 == ring_free(m["last"][t], m["band"][t], op.rows[t], B, d, C + 2)
    # the compiled loop equals the reference with the ring, key for key
    args = _stage_args(cfg, job)
    ref = stage_schedule(*args, early=True, defer="behind", ring=ring)
    fast = stage_run(*args, ring=ring)
    for key in ("band", "first", "last", "gather", "fills"):
        assert np.array_equal(np.asarray(ref[key]), np.asarray(fast[key])), key
    for key in ("late", "reads", "weights", "fill_reads", "fill_wait", "deferred"):
        assert ref[key] == fast[key], key


@pytest.mark.parametrize("every", [7])
def test_ring_host_behind_the_gather(every):
    # the host offers a descriptor only every few cycles: the gather waits for it (the read-ahead reads the entry
    # again once written); every row once with its words, the op later than the model's (the list ahead)
    cfg = stage_cfg("8x8-B2-d2")
    job = staged_op(_get(0), cfg)
    [got] = run_staged(cfg, [job], ring=4, issue_gate=True, host_every=every)
    m = model_of(cfg, job, 4, LANES, ring=4)
    want = {(n, i): t.want[i, :, 0] for n, t in enumerate(job.op.tiles) for i in range(len(t.tokens))}
    assert not got.twice and sorted(got.rows) == sorted(want)
    assert all(np.array_equal(got.rows[k][1], want[k]) for k in want)
    assert got.cycles > m["cycles"]


def test_ring_free_by_hand():
    # C = 8: lag C + 2 = 10. B = 2, d = 2 (q = 1): last slot at 10, 3 rows read at 11, 12, 13, the last leaves at
    # 13 + C + 1 = 22 (row_out_cycles), its count reaches 0 at the end of 22: free from 23
    assert ring_free(10, 0, 3, 2, 2, 10) == 23
    # B = 4, d = 2 (q = 2): band 3 reads on odd cycles (turn 3 // 2 = 1): rows at 11 and 13, out at 22, free from 23;
    # band 1 (turn 0): rows at 12 and 14, out at 23, free from 24
    assert ring_free(10, 3, 2, 4, 2, 10) == 23
    assert ring_free(10, 1, 2, 4, 2, 10) == 24
    # one row on B = 8, d = 2 (q = 4), band 5 (turn 2): the first cycle after 10 that is 2 mod 4 is 14: free from 24
    assert ring_free(10, 5, 1, 8, 2, 10) == 24
    # sim.report.streaming.ring_slack on 8 x 8, B = 2, d = 2 (C + 2 = 10): with a ring of 2, band-tile 0 (last slot 3,
    # 2 rows) frees band-tile 2 from 3 + 1 + 1 + 10 = 15, band-tile 1 (last 8, 1 row) band-tile 3 from 19: takes at
    # 30 and 40 leave 15 and 21 cycles; a take at 14 would be 1 early; no band-tile past the ring: no bound
    from sim.report.streaming import ring_slack

    cfg = stage_cfg("8x8-B2-d2")
    assert ring_slack([0, 5, 30, 40], [3, 8, 20, 25], [0, 1, 0, 1], [2, 1, 1, 1], cfg, 2) == 15
    assert ring_slack([0, 5, 14, 40], [3, 8, 20, 25], [0, 1, 0, 1], [2, 1, 1, 1], cfg, 2) == -1
    assert ring_slack([0, 5], [3, 8], [0, 1], [2, 1], cfg, 2) == 1 << 40


def test_ring_host_protocol_and_refusals():
    cfg = stage_cfg("8x8-B2-d2")
    job = staged_op(_get(0), cfg)
    from sim.timing.delta_reference import differences
    from tests.rtl.daccel_bench import host_tiles

    acc = discard(DeltaAccel(cfg, stage=True, ring=4))
    assert acc.max_tiles == 4 and acc.geometry["desc"] == ("1r1w", 4, acc.desc_bits, 1)
    diffs = differences(job.case.X, job.case.grid, job.case.groups, job.case.decisions).astype(np.int64)
    words = stage_op_words(acc, diffs, job.case.W.astype(np.int64), job.case.groups, host_tiles(job.op), job.segment,
                           job.sliced)  # 24 band-tiles: more than the ring, accepted
    before, during = ring_split(acc, words)
    descs = [w for w in words if w[0] == SEL_DESC]
    assert len(descs) == 24 and before[-4:] == descs[:4] and during == descs[4:]
    assert {w[0] for w in before[:-4]} == {SEL_X, SEL_W}
    plain = discard(DeltaAccel(cfg, stage=True))
    assert plain.ring == 0 and ring_split(plain, words) == (words, [])
    for bad in ({"ring": 3}, {"ring": 1}, {"ring": 4, "stage": False}):
        with pytest.raises(ValueError, match="ring"):
            DeltaAccel(cfg, **({"stage": True} | bad))
    # the config's field: 0 or a power of two >= 2; the unstaged controller ignores it
    with pytest.raises(ValueError, match="power of two"):
        AcceleratorConfig.model_validate(cfg.model_dump() | {"accel_tile_ring": 6})
    rc = AcceleratorConfig.model_validate(cfg.model_dump() | {"accel_tile_ring": 8})
    assert discard(DeltaAccel(rc, stage=True)).ring == 8 and discard(DeltaAccel(rc, queues=True)).ring == 0


def test_dcore_stage_ring():
    # kaleido_dcore_stage with its issue hold and array hold on a ring of 4 (52 band-tiles): every Y row and its
    # cycle, done, the held cycles against core_schedule co-simulating stage_schedule's loop with the ring
    from tests.rtl.dcore_bench import run_dcore
    from tests.test_rtl_dcore import check
    from tests.test_rtl_dcore_stage import MAX_K, core_stage_cfg, stage_feed, stage_job
    from tests.test_rtl_dcore_stage import _get as core_get

    cfg = core_stage_cfg("8x8-B4-d2")
    sop = staged_op(core_get("three-axes"), cfg)
    job = stage_job(cfg, sop, False, True)
    [got] = run_dcore(cfg, [job], fifo=4, queues=False, stage=True, max_k=MAX_K.get("three-axes"), array_hold=True,
                      issue_hold=True, issue_bound=2, ring=4, ways=1)
    assert len(sop.op.tiles) >= 6 * 4 and got.accel_done
    check(cfg, job, None, got, 4, ways=1, hold=True, bound=2, feed=stage_feed(cfg, sop, 1, ring=4))
    S = 2 * cfg.compact_bands  # noqa: N806  # the ring binds (the controller's model without the core's holds)
    assert model_of(cfg, sop, S, LANES, ring=4)["cycles"] > model_of(cfg, sop, S, LANES)["cycles"]


@pytest.mark.parametrize("ring", [2, 4])
def test_stage_core_ring_equals_the_cosimulation(ring):
    # sim.timing.delta_core.stage_core with the ring against core_schedule(gate=StageFeed(..., ring)), every key
    # (tests/test_stage_core.py's `_compare`), on that file's first three bench ops (built to hold)
    import tests.test_stage_core as tsc
    from sim.timing.delta import classes
    from sim.timing.delta_core import StageFeed, row_ways, segment_steps, stage_core, tile_segments
    from tests.test_rtl_dcore_stage import _get as core_get
    from tests.test_rtl_dcore_stage import core_stage_cfg

    class Feed(StageFeed):
        def __init__(self, args, kw, *a, **k):
            super().__init__(args, {**kw, "ring": ring}, *a, **k)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tsc, "StageFeed", Feed)
        mp.setattr(tsc, "stage_core", lambda *a, **k: stage_core(*a, **k, ring=ring))
        for run in tsc.RUNS[:3]:
            shape, ci, fifo, bound, ways, out_ways, buffers = run
            cfg = core_stage_cfg(shape)
            sop = staged_op(core_get(ci), cfg)
            case, op, R = sop.case, sop.op, cfg.array_rows  # noqa: N806
            n_cb = -(-case.W.shape[1] // cfg.array_cols)
            sgs = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, R, n_cb, sop.fw, sop.s)
            of_class = {g: a for a, (_ax, idx) in enumerate(classes(case.groups)) for g in idx}
            rw = row_ways([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.X.shape[0], ways)
            ncl = len(classes(case.groups))
            per_seg = [len(x) for x in segment_steps(case.grid, n_cb, ncl, R, sop.fw, sop.s, out_ways)]
            got = tsc._compare(cfg, _stage_args(cfg, sop), sgs, rw, per_seg, True, ways, fifo, bound, buffers, run,
                               out_ways=out_ways, walk=(case.grid, n_cb, ncl, R, sop.fw, sop.s))
            plain = stage_core(*_stage_args(cfg, sop), sgs, np.concatenate(
                [np.asarray(rw[t], dtype=np.int64)[:int(op.rows[t])] for t in range(len(sgs))]), per_seg, True, ways,
                fifo, bound, buffers)
            assert got["done"] > plain["done"]  # the ring binds


def test_core_engine_refuses_a_ring_config():
    """The compiled engine writes an op's whole descriptor list before ``start`` (D134's ring needs it streamed while
    running, D130 step 5): a config with ``accel_tile_ring`` is refused with one message before anything is built."""
    from hw.config import load_config
    from sim.engines.verilator_build import RtlEngineError
    from sim.engines.verilator_core import CoreEngine

    cfg = load_config("hw/presets/examples/tiny-8x8-delta.toml")
    rc = AcceleratorConfig.model_validate(cfg.model_dump() | {"accel_tile_ring": 8})
    with pytest.raises(RtlEngineError, match="accel_tile_ring = 8"):
        CoreEngine(rc, stage=True)
