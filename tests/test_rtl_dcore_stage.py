"""The delta controller with its weight stage and its combine stage in one core (`hw.delta_core.DeltaCore` with
``stage=True``, Verilog module ``kaleido_dcore_stage``, docs/decisions.md D119) under Amaranth's simulator: the
host writes the staged controller's words (differences, one weight buffer, the band-tile list with the stage fields,
`hw.delta_accel_host.stage_op_words`) and the decisions with each token's chunk; per op

- every token's ``Y`` row of every column block leaves once, tagged, equal to `algo.reuse.golden.apply_decisions`;
- the controller's drained rows leave at `sim.timing.delta_accel.stage_schedule`'s cycles and its ``done`` too;
- every ``Y`` row's cycle and the core's ``done`` equal `sim.timing.delta_core.core_schedule` fed by
  `stage_schedule`'s row-out cycles in the FIFO's order (`sim.timing.delta_core.fifo_rows`), each descriptor
  counted 2 cycles after its gather;
- every output command equals `tests.rtl.delta_bench.dcombine_program`'s (as tests/test_rtl_dcore.py `check`).
"""

from __future__ import annotations

import numpy as np
import pytest

from hw import discard
from hw.config import AcceleratorConfig
from hw.delta_accel import LANES, DeltaAccel
from hw.delta_core import segment_order
from sim.timing.delta import classes
from sim.timing.delta_core import StageFeed, core_schedule, fifo_rows, row_ways, row_ways_local, tile_segments
from tests.rtl.daccel_bench import StagedOp, staged_op
from tests.rtl.dcore_bench import run_dcore
from tests.test_rtl_dcore import FIFO, check
from tests.test_rtl_delta import SHAPES, delta_cfg
from tests.test_rtl_dstage import EXTRA_SHAPES, MAX_K, model_of


def core_stage_cfg(shape: str, kib: int = 1, diff_kib: int = 64) -> AcceleratorConfig:
    """tests/test_rtl_dstage.py's staged config (a difference-sum buffer, a ``kib`` KiB weight stage) with a 2 KiB
    state SRAM (fused score ops, as tests/test_rtl_dcore.py's). The difference-sum buffer is 64 KiB: it is the core's
    D buffers since D122, and 64 KiB gives them the words a third of psum_sram_kib gave before (the ops' D is
    addressed per op, `hw.delta_core.core_ports`)."""
    c = delta_cfg(*(SHAPES.get(shape) or EXTRA_SHAPES[shape]), state_kib=2)
    return AcceleratorConfig.model_validate(c.model_dump() | {"diff_sram_kib": diff_kib, "wstage_sram_kib": kib})


def stage_job(cfg, sop: StagedOp, fused: bool = False, chunk_major: bool = True):
    """`tests.rtl.dcore_bench.run_dcore`'s job of a staged op: ``(case, op, fused, (segment, sliced), (seg, fw,
    s))``, the walk segment by segment where the issue order is (`segment_order`)."""
    n_cb = -(-sop.case.W.shape[1] // cfg.array_cols)
    return (sop.case, sop.op, fused, (sop.segment, sop.sliced),
            (segment_order(chunk_major, sop.s, n_cb), sop.fw, sop.s))


def stage_model(cfg, sop: StagedOp, ways: int, entries=None, lanes=LANES, max_k=None, local=False):
    """The staged controller's row cycles and ``done`` (`stage_schedule` with the early band choice and the
    deferred read, as `DeltaAccel(stage=True)` builds them; tests/test_rtl_dstage.py `model_of`) and the rows in the
    FIFO's order with their segments, the descriptors (counted 2 cycles after their gather) and, with ``ways`` > 1,
    each row's accumulate way (``local``: from its segment slot, docs/decisions.md D125): `tests.test_rtl_dcore.check`'s
    ``model``."""
    case, op = sop.case, sop.op
    R = cfg.array_rows  # noqa: N806
    r = model_of(cfg, sop, entries or 2 * cfg.compact_bands, lanes, max_k)
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    sgs = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, R, n_cb, sop.fw, sop.s)
    descs = [(int(r["gather"][n]) + 2, sgs[n], int(op.rows[n])) for n in range(len(sgs))]
    of_class = {g: a for a, (_ax, idx) in enumerate(classes(case.groups)) for g in idx}
    if local:
        rw = row_ways_local([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.grid, R,
                            sop.fw or case.grid[0], ways)
    else:
        rw = row_ways([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.X.shape[0], ways)
    cyc, rsg, way = fifo_rows(r["band"], r["last"], op.rows, sgs, cfg, rw)
    rows = np.concatenate(r["out"]) if len(r["out"]) else np.zeros(0, np.int64)
    return rows, r["cycles"], ((cyc, rsg, descs) if ways == 1 else (cyc, rsg, descs, way))


def stage_feed(cfg, sop: StagedOp, ways: int, entries=None, lanes=LANES, max_k=None, local=False,
               ring=0) -> StageFeed:
    """The staged controller with the issue gate (docs/decisions.md D126) for `core_schedule`'s ``gate``:
    `stage_schedule`'s loop (as `model_of` runs it) one cycle at a time, each band-tile's segment and its rows' ways
    (as `stage_model`); ``ring``: the descriptor ring's entries (D134; 0: none)."""
    from hw.delta_accel_host import stage_plan
    from sim.timing.delta_accel import gather_rounds
    from tests.rtl.daccel_bench import host_tiles

    case, op = sop.case, sop.op
    R, S = cfg.array_rows, entries or 2 * cfg.compact_bands  # noqa: N806
    acc = discard(DeltaAccel(cfg, entries=S, lanes=lanes, max_k=max_k, stage=True))
    plan, _nbuf, _size = stage_plan(acc, case.groups, host_tiles(op), sop.segment, sop.sliced)
    widths = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles])
    rounds = gather_rounds([t.tokens for t in op.tiles], R // cfg.compact_bands)
    paired = [bool(t.partial.all()) and t.slots < w for t, w in zip(op.tiles, widths, strict=True)]
    args = (op.s_seq, op.rows, widths, rounds, paired, *([p[k] for p in plan] for k in ("seg", "sbuf", "fcount",
                                                                                          "saddr")), cfg, S, lanes)
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    sgs = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, R, n_cb, sop.fw, sop.s)
    of_class = {g: a for a, (_ax, idx) in enumerate(classes(case.groups)) for g in idx}
    toks, cls = [t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles]
    rw = (row_ways_local(toks, cls, case.grid, R, sop.fw or case.grid[0], ways) if local
          else row_ways(toks, cls, case.X.shape[0], ways))
    return StageFeed(args, {"early": acc.early, "defer": "behind" if acc.defer else "off", "ring": ring}, sgs, rw, cfg)


def stage_row_tiles(cfg, sop: StagedOp, entries=None, lanes=LANES, max_k=None) -> np.ndarray:
    """Each drained row's band-tile in the FIFO's order from the staged controller's model (as `stage_model`):
    `tests.test_rtl_dcore.check`'s ``row_tile`` for the array hold (docs/decisions.md D123)."""
    r = model_of(cfg, sop, entries or 2 * cfg.compact_bands, lanes, max_k)
    rows = sop.op.rows
    tiles = [np.full(int(n), t, dtype=np.int64) for t, n in enumerate(rows)]
    return fifo_rows(r["band"], r["last"], rows, np.zeros(len(rows), dtype=np.int64), cfg, tiles)[2]


def _sliced_blocks():
    """tests/test_combine_timing.py's sliced op (K = 90 in groups of 70 and 20, D88's slices 35 + 35 and 20, on a
    1 KiB stage) over three column blocks (N = 24): the slices of each (chunk, column block) segment issue within it,
    and the core walks segment by segment."""
    from algo.reuse.golden import COMPUTE
    from tests.rtl.cases import make_case

    c = make_case("staged", 119, (2, 2, 4), 90, 24, [70, 20])
    c.decisions[:4] = COMPUTE  # frame 0 has no neighbour along f
    return c


CORE_CASES = {"sliced-3cb": _sliced_blocks()}
MAX_K = {**MAX_K, "sliced-3cb": 96}


def _get(ci):
    from tests.test_rtl_dstage import _get as dstage_case

    return CORE_CASES.get(ci) or dstage_case(ci)


#: ``(shape, case, chunk-major, column blocks a group in D68's order, ways (None: d), output lanes, fused)``:
#: tests/test_rtl_dstage.py's cases on the staged core: d = 2 on one way (D95's schedules) and on d ways with one
#: and two output lanes, d = 1 (4 x 8), d = 4 on 4 ways, 4 and 8 bands (bands idle at the start), D88's slices (on
#: one column block and on three, segment by segment), one group of 64 (two stage buffers), groups wider than a
#: stage word over five column blocks, two and three axis classes with the carried values in the state SRAM, and
#: D68's order (two column blocks a group: the walk after the op).
RUNS = [("8x8-B2-d2", 0, True, None, 1, 1, False), ("8x8-B2-d2", 1, True, None, None, 1, False),
        ("8x8-B2-d2", "sliced", True, None, None, 2, False), ("8x8-B2-d2", "sliced-3cb", True, None, None, 2, False),
        ("8x8-B2-d2", "wide", True, None, None, 2, False),
        ("4x8-B2-d1", 2, True, None, None, 1, False), ("8x8-B2-d4", 0, True, None, None, 2, False),
        ("8x8-B4-d2", "three-axes", True, None, None, 2, True), ("8x8-B2-d2", "hand", True, None, None, 2, True),
        ("8x8-B2-d2", "one-wide", True, None, None, 1, False), ("8x8-B8-d2", "few", True, None, None, 2, False),
        ("8x8-B4-d2", "qk-uint8-coherent", False, 2, None, 2, False)]


@pytest.mark.parametrize(("shape", "ci", "cm", "s", "ways", "out_ways", "fused"), RUNS,
                         ids=[f"{r[0]}-{r[1]}{'' if r[2] else '-d68'}-w{r[4] or 'd'}-v{r[5]}{'-sram' if r[6] else ''}"
                              for r in RUNS])
def test_dcore_stage_y_rows_and_cycles(shape, ci, cm, s, ways, out_ways, fused):
    from algo.reuse.golden import apply_decisions

    cfg = core_stage_cfg(shape)
    case = _get(ci)
    sop = staged_op(case, cfg, chunk_major=cm, s=s)
    job = stage_job(cfg, sop, fused, cm)
    w = ways or cfg.drain_rows_per_cycle
    [got] = run_dcore(cfg, [job], fifo=FIFO, queues=False, ways=w, out_ways=out_ways, stage=True, max_k=MAX_K.get(ci))
    check(cfg, job, None, got, ways=w, out_ways=out_ways, model=stage_model(cfg, sop, w, max_k=MAX_K.get(ci)))
    if sop.sliced:  # Y on the slices (the core's groups) is Y on the case's own groups (D88)
        want = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
        c2 = sop.case
        assert np.array_equal(apply_decisions(c2.X, c2.W, c2.grid, c2.groups, c2.decisions, 4), want)


def test_dcore_stage_ops_back_to_back():
    # two ops on one staged core, one after the other (the seen bits the walk clears, the flipped D buffer, the stage's
    # buffers and the early choice's state carry over from op to op): each as the test above
    cfg = core_stage_cfg("8x8-B2-d2")
    sops = [staged_op(_get(ci), cfg) for ci in (3, "qk-int8")]
    jobs = [stage_job(cfg, sop) for sop in sops]
    got = run_dcore(cfg, jobs, fifo=FIFO, queues=False, stage=True)
    for job, sop, g in zip(jobs, sops, got, strict=True):
        check(cfg, job, None, g, ways=2, model=stage_model(cfg, sop, 2))


#: The array hold on the staged core (docs/decisions.md D123): ``(shape, case, chunk-major, D68's s, FIFO entries,
#: core options)``, one or two entries a port, the default core's options (d ways, V = d, 3 D buffers, the bypass).
HOLD_RUNS = [("8x8-B2-d2", 1, True, None, 2, {"out_ways": 2, "d_buffers": 3, "fifo_bypass": True}),
             ("8x8-B2-d2", "sliced-3cb", True, None, 4, {"out_ways": 2, "d_buffers": 3, "fifo_bypass": True}),
             ("8x8-B4-d2", "three-axes", True, None, 4, {"ways": 1})]


@pytest.mark.parametrize(("shape", "ci", "cm", "s", "fifo", "opts"), HOLD_RUNS,
                         ids=[f"{r[0]}-{r[1]}-q{r[4]}-{'-'.join(f'{k}{v}' for k, v in r[5].items())}" for r in HOLD_RUNS])
def test_dcore_stage_array_hold(shape, ci, cm, s, fifo, opts):
    # kaleido_dcore_stage with the array hold on a small FIFO: Y rows, the staged controller's rows and done after
    # the holds, the held cycles, every Y row's cycle and done against core_schedule(fifo=..., ports=d) fed by
    # stage_schedule; overflow never rises
    cfg = core_stage_cfg(shape)
    sop = staged_op(_get(ci), cfg, chunk_major=cm, s=s)
    job = stage_job(cfg, sop, False, cm)
    w = opts.get("ways", cfg.drain_rows_per_cycle)
    [got] = run_dcore(cfg, [job], fifo=fifo, queues=False, stage=True, max_k=MAX_K.get(ci), array_hold=True,
                      **opts)
    sch = check(cfg, job, None, got, fifo, ways=w, out_ways=opts.get("out_ways", 1), buffers=opts.get("d_buffers", 2),
                model=stage_model(cfg, sop, w, max_k=MAX_K.get(ci)), hold=True,
                row_tile=stage_row_tiles(cfg, sop, max_k=MAX_K.get(ci)))
    assert got.held > 0 and not got.overflow and sch["fifo_max"] <= fifo


#: The issue hold on the staged core (docs/decisions.md D126): ``(shape, case, chunk-major, s, FIFO entries, core
#: options, bound)``, each built to hold (D84's order; sliced-3cb's D88 slices over three column blocks; one way and
#: the defaults' core; the array hold on 2 and 4 entries; D125's segment-local buffers on their bound n).
ISSUE_RUNS = [("8x8-B2-d2", "sliced-3cb", True, None, 4, {"ways": 1}, 1),
              ("8x8-B2-d2", 1, True, None, 2, {"out_ways": 2, "d_buffers": 3, "fifo_bypass": True}, 1),
              ("8x8-B4-d2", "three-axes", True, None, 4, {"ways": 1}, 2)]


@pytest.mark.parametrize(("shape", "ci", "cm", "s", "fifo", "opts", "bound"), ISSUE_RUNS,
                         ids=[f"{r[0]}-{r[1]}-q{r[4]}-b{r[6]}" for r in ISSUE_RUNS])
def test_dcore_stage_issue_hold(shape, ci, cm, s, fifo, opts, bound):
    # kaleido_dcore_stage with the issue hold: Y rows, the staged controller's rows and done after the holds, the
    # held cycles, every Y row's cycle and done against core_schedule co-simulating stage_schedule's loop
    # (gate=StageFeed); no overflow, no descriptor counted the bound ahead, the gate held takes; built to hold
    cfg = core_stage_cfg(shape)
    sop = staged_op(_get(ci), cfg, chunk_major=cm, s=s)
    job = stage_job(cfg, sop, False, cm)
    w = opts.get("ways", cfg.drain_rows_per_cycle)
    [got] = run_dcore(cfg, [job], fifo=fifo, queues=False, stage=True, max_k=MAX_K.get(ci), array_hold=True,
                      issue_hold=True, issue_bound=bound, **opts)
    sch = check(cfg, job, None, got, fifo, ways=w, out_ways=opts.get("out_ways", 1), buffers=opts.get("d_buffers", 2),
                hold=True, bound=bound, feed=stage_feed(cfg, sop, w, max_k=MAX_K.get(ci)))
    assert sch["held"] > 0 and sch["ahead"] < bound and not got.overflow and got.held == sch["frozen"]
    rows, done, (cyc, rsg, descs, *way) = stage_model(cfg, sop, w, max_k=MAX_K.get(ci))
    n_cb = -(-sop.case.W.shape[1] // cfg.array_cols)
    free = core_schedule(cyc, done, sop.case.grid, n_cb, len(classes(sop.case.groups)), cfg.array_rows, job[4][0],
                         rsg, descs, sop.fw, sop.s, w, way[0] if way else None, opts.get("out_ways", 1),
                         opts.get("d_buffers", 2), banks=16)
    assert job[4][0] and free["ahead"] >= bound


#: Segment-local D addresses on the staged core (docs/decisions.md D125) with the default core's options and the
#: array hold: ``(shape, case, FIFO entries, diff_sram_kib)``; 2 KiB: 24 words a D buffer (3 buffers), below each
#: op's whole D (sliced-3cb: 16 tokens x 3 column blocks = 48 words; three-axes: 3 classes x 24 tokens x 2 = 144),
#: above a segment's A fw R.
#: The last: with the issue hold on its bound n = 3 (D126), as hw.rtl builds kaleido_dcore_stage since D132 (the
#: compiled engine runs sliced-3cb so, tests/test_rtl_core_engine.py).
LOCAL_RUNS = [("8x8-B2-d2", "sliced-3cb", 4, 2, False), ("8x8-B4-d2", "three-axes", 64, 2, False),
              ("8x8-B4-d2", "three-axes", 4, 2, True)]


@pytest.mark.parametrize(("shape", "ci", "fifo", "kib", "gate"), LOCAL_RUNS,
                         ids=[f"{r[0]}-{r[1]}-q{r[2]}" + ("-gated" if r[4] else "") for r in LOCAL_RUNS])
def test_dcore_stage_segment_local(shape, ci, fifo, kib, gate):
    # every Y row against the golden model, its cycle and done against core_schedule(local=True, the hold) fed by
    # stage_schedule (with the issue hold: co-simulating its loop, gate=StageFeed, bound n), the commands' D
    # addresses the tokens' segment slots; the op's own address would not fit
    from hw.delta_core import DeltaCore, core_ports

    cfg = core_stage_cfg(shape, diff_kib=kib)
    case = _get(ci)
    sop = staged_op(case, cfg)
    fused = ci == "three-axes"
    job = stage_job(cfg, sop, fused)
    opts = {"out_ways": cfg.drain_rows_per_cycle, "d_buffers": 3, "fifo_bypass": True}
    cores = [discard(DeltaCore(cfg, fifo=fifo, queues=False, stage=True, max_k=MAX_K.get(ci), seg_local=lo, **opts))
             for lo in (False, True)]
    with pytest.raises(ValueError, match="difference sums"):
        core_ports(cores[0], sop.case.grid, sop.case.groups, sop.case.W.shape[1], fused, *job[4])
    assert core_ports(cores[1], sop.case.grid, sop.case.groups, sop.case.W.shape[1], fused, *job[4])["o_local"] == 1
    w = cfg.drain_rows_per_cycle
    [got] = run_dcore(cfg, [job], fifo=fifo, queues=False, stage=True, max_k=MAX_K.get(ci), array_hold=True,
                      seg_local=True, **({"issue_hold": True} if gate else {}), **opts)
    if gate:  # the bound n = 3 by default with seg_local (D126): no row waits for D125's rule
        assert cores[1].issue_bound is None and discard(DeltaCore(cfg, fifo=fifo, queues=False, stage=True, max_k=MAX_K.get(
            ci), seg_local=True, issue_hold=True, **opts)).issue_bound == 3
        sch = check(cfg, job, None, got, fifo, ways=w, out_ways=w, buffers=3, hold=True, local=True, bound=3,
                    feed=stage_feed(cfg, sop, w, max_k=MAX_K.get(ci), local=True))
        assert sch["gated"] == 0 and sch["ahead"] < 3
    else:
        check(cfg, job, None, got, fifo, ways=w, out_ways=w, buffers=3, model=stage_model(cfg, sop, w,
              max_k=MAX_K.get(ci), local=True), hold=True, row_tile=stage_row_tiles(cfg, sop, max_k=MAX_K.get(ci)),
              local=True)
    assert not got.overflow


def test_dcore_stage_segment_slots():
    # D138: the segment-slot ring on the staged core with the issue hold, slots > n: the "hand" score op (two axis
    # classes, carried values in the state SRAM, 4 segments) on 16 KiB of difference sums: 3 D buffers of 194 words,
    # a segment A fw R = 2 x 2 x 8 = 32 words, so 6 a buffer: slots min(8, 3 x 6) = 8, sub-slots ceil(8 / 3) = 3 a
    # buffer (segment 3: buffer 0, sub-slot 1). Every Y row golden, its cycle and done against core_schedule(local,
    # slots 8, gate=StageFeed, bound 8), every output command's D address the token's segment slot plus its
    # sub-slot's A fw R words; the gate lets segment 3 go while 0 is walked (ahead 3), where on bound n = 3 it waited
    # (the same model with slots 3: more cycles, the gate held)
    from hw.delta_combine import delta_combine_sizes
    from hw.delta_core import DeltaCore, core_ports

    shape, ci, fifo = "8x8-B2-d2", "hand", 4
    cfg = core_stage_cfg(shape, diff_kib=16)
    sop = staged_op(_get(ci), cfg)
    job = stage_job(cfg, sop, True)
    w = cfg.drain_rows_per_cycle
    opts = {"out_ways": w, "d_buffers": 3, "fifo_bypass": True}
    A, fw = len(classes(sop.case.groups)), sop.fw or sop.case.grid[0]  # noqa: N806
    words = delta_combine_sizes(cfg, w, w, 3)["d_depth"]
    slots = min(8, 3 * (words // (A * fw * cfg.array_rows)))
    assert (words, A * fw * cfg.array_rows, slots) == (194, 32, 8)
    core = discard(DeltaCore(cfg, fifo=fifo, queues=False, stage=True, max_k=MAX_K.get(ci), seg_local=True,
                             issue_hold=True, **opts))
    assert core_ports(core, sop.case.grid, sop.case.groups, sop.case.W.shape[1], True, *job[4])["o_slots"] == slots
    [got] = run_dcore(cfg, [job], fifo=fifo, queues=False, stage=True, max_k=MAX_K.get(ci), array_hold=True,
                      seg_local=True, issue_hold=True, **opts)
    sch = check(cfg, job, None, got, fifo, ways=w, out_ways=w, buffers=3, hold=True, local=True, bound=slots,
                feed=stage_feed(cfg, sop, w, max_k=MAX_K.get(ci), local=True), slots=slots)
    assert sch["ahead"] == 3 and not got.overflow
    n_cb = -(-sop.case.W.shape[1] // cfg.array_cols)
    on_n = core_schedule(None, None, sop.case.grid, n_cb, A, cfg.array_rows, True, None, None, fw, job[4][2], w, None,
                         w, 3, fifo=fifo, ports=w, local=True, gate=stage_feed(cfg, sop, w, max_k=MAX_K.get(ci),
                                                                                local=True), bound=3)
    assert on_n["ahead"] == 2 and on_n["held"] > 0 and on_n["done"] > got.cycles


def test_dcore_stage_refusals():
    from hw.delta_core import DeltaCore

    cfg = core_stage_cfg("8x8-B2-d2")
    core = discard(DeltaCore(cfg, stage=True))  # the host's list by default with the stage
    assert not core.queues and core.accel.stage
    for kw in ({"queues": True}, {"front": True}, {"queues": True, "front": True}):
        with pytest.raises(ValueError, match="weight stage .* neither the queues nor the similarity front"):
            DeltaCore(cfg, stage=True, **kw)
    with pytest.raises(ValueError, match="the weight stage needs the host's band-tile list.*wstage_sram_kib"):
        DeltaCore(delta_cfg(*SHAPES["8x8-B2-d2"]), stage=True)  # no weight stage on the config


def test_dcore_stage_emits_reproducibly_and_lints_clean(tmp_path):
    # kaleido_dcore_stage and everything below it (kaleido_daccel_stage_gate, its issue hold by default since D129,
    # on kaleido_dtop_ext and their modules, kaleido_dcombine_w2_v2: d = 2 ways and lanes by default, D108, D113,
    # every macro) on an 8 x 8 delta config with a weight stage, as `hw.rtl` emits it: only on such a config, the
    # same bytes twice, no paths, each of its own macros instantiated by name, Verilator -Wall clean per file and
    # over the whole hierarchy.
    import re
    from pathlib import Path

    from hw.delta_core import DCORE_STAGE_MODULE_NAME, DeltaCore
    from hw.lint import lint_folder
    from hw.rtl import emit, plan
    from hw.sram import macro_name

    cfg = core_stage_cfg("8x8-B2-d2")
    assert DCORE_STAGE_MODULE_NAME in [name for name, _, _ in plan(cfg)]
    assert DCORE_STAGE_MODULE_NAME not in [name for name, _, _ in plan(delta_cfg(*SHAPES["8x8-B2-d2"]))]
    core_macros = [macro_name(*mc) for mc in discard(DeltaCore(cfg, pe="instance", stage=True, out_ways=2, d_buffers=3,
                                                               fifo_bypass=True, seg_local=True,
                                                               issue_hold=True)).macros()]
    # the token chunks with seg_local's first tokens (D125) and the issue gate's copy without them (D126): two shapes
    # (256 tokens: 8 chunk bits, 8 + tb = 16 with the first tokens; the decision copies are 128 deep on 2 lanes)
    assert [mc for mc in core_macros if mc.startswith("kaleido_sram_1r1w_256x")] == [
        macro_name("1r1w", 256, 16, None), macro_name("1r1w", 256, 8, None)]
    roles = ("dcore_stage", "dstage_gate", "dcombine_lanes", "org_pe", "org_column", "org_top_ext", "top", "column",
             "pe")
    names = [n for n, spec, _ in plan(cfg) if spec[0] in ("macro", "clkgate") or spec[1] in roles]
    a = emit(cfg, tmp_path / "a", only=tuple(names))
    assert f"{DCORE_STAGE_MODULE_NAME}.v" in {p.name for p in a}
    b = emit(cfg, tmp_path / "b", only=(DCORE_STAGE_MODULE_NAME,))
    assert (tmp_path / "a" / b[0].name).read_bytes() == b[0].read_bytes()
    text = b[0].read_text()
    assert str(Path.cwd()) not in text and str(tmp_path) not in text
    assert re.search(r"^\s*kaleido_daccel_stage_gate \S+\s+\(", text, re.M)  # the issue hold (D126, D129)
    assert not re.search(r"^\s*kaleido_daccel_stage \S+\s+\(", text, re.M)
    assert re.search(r"^\s*kaleido_dcombine_w2_v2_b3 \S+\s+\(", text, re.M)  # 3 D buffers (D115)
    assert not re.search(r"^\s*kaleido_daccel \S+\s+\(", text, re.M)  # not the queues' controller
    assert re.search(r"^\s*kaleido_clkgate \S+\s+\(", text, re.M)  # the array hold (D123)
    assert "fifo_bank" in text and "o_local" in text  # segment-local D addresses (D125; the default D132)
    for name in core_macros:
        assert re.search(rf"^\s*{name} \S+\s+\(", text, re.M), name
    runs = lint_folder(tmp_path / "a", full=True, jobs=2, tops=(DCORE_STAGE_MODULE_NAME,))
    assert all(ok for _, ok, _, _ in runs), [(label, out[:600]) for label, ok, _, out in runs if not ok]
    assert f"{DCORE_STAGE_MODULE_NAME}.v whole hierarchy" in {label for label, *_ in runs}


def test_dcore_stage_without_issue_hold_emits_reproducibly_and_lints_clean(tmp_path):
    # the staged core without the issue hold (opt-out since D129: hw.rtl builds it gated) on kaleido_daccel_stage
    # (the host's list read at the take), beside the 8 x 8 hierarchy hw.rtl emits: the same bytes twice, Verilator
    # -Wall clean per file and over the whole hierarchy
    import re

    from amaranth.back import verilog

    from hw.delta_accel import DSTAGE_MODULE_NAME
    from hw.delta_core import DCORE_STAGE_MODULE_NAME, DeltaCore
    from hw.lint import lint_folder
    from hw.rtl import emit, plan, render
    from hw.sram import emit_macro, macro_name

    cfg = core_stage_cfg("8x8-B2-d2")
    roles = ("dcombine_lanes", "org_pe", "org_column", "org_top_ext", "top", "column", "pe")
    emit(cfg, tmp_path, only=tuple(n for n, spec, _ in plan(cfg) if spec[0] in ("macro", "clkgate") or spec[1] in roles))
    opts = {"out_ways": 2, "d_buffers": 3, "fifo_bypass": True, "array_hold": True}

    def texts():
        core = DeltaCore(cfg, pe="instance", stage=True, **opts)
        acc = DeltaAccel(cfg, pe="instance", stage=True)
        return (verilog.convert(core, name=DCORE_STAGE_MODULE_NAME, emit_src=False),
                verilog.convert(acc, name=DSTAGE_MODULE_NAME, emit_src=False), core.macros() + acc.macros())

    a, b = texts(), texts()
    assert a[:2] == b[:2]
    assert re.search(rf"^\s*{DSTAGE_MODULE_NAME} \S+\s+\(", a[0], re.M)
    assert "gate_tok" not in a[0]  # no issue gate
    (tmp_path / f"{DCORE_STAGE_MODULE_NAME}.v").write_text(render(cfg, DCORE_STAGE_MODULE_NAME, ("module", "dcore_stage"),
                                                                  "dcore_stage", a[0]))
    (tmp_path / f"{DSTAGE_MODULE_NAME}.v").write_text(render(cfg, DSTAGE_MODULE_NAME, ("module", "dstage"), "dstage", a[1]))
    for mc in a[2]:
        (tmp_path / f"{macro_name(*mc)}.v").write_text(emit_macro(*mc))
    runs = lint_folder(tmp_path, full=True, jobs=2, tops=(DCORE_STAGE_MODULE_NAME,))
    assert all(ok for _, ok, _, _ in runs), [(label, out[:600]) for label, ok, _, out in runs if not ok]
    assert f"{DCORE_STAGE_MODULE_NAME}.v whole hierarchy" in {label for label, *_ in runs}


def test_dcore_stage_state_buffer_per_pool():
    # the state buffer per pool (docs/decisions.md D133) on the staged core, on LOCAL_RUNS' segment-local D buffers:
    # sliced-3cb (grid 2 x 2 x 4: one pool of R = 8 positions over 2 frames, D88's slices, 3 column blocks in one
    # group) with a 1 KiB partial-sum SRAM, a state buffer of 1,024 x 8 / (8 x 28) = 36 words (18 a position bank on
    # 2 lanes): at the op's address its carried values take 2 frames x 8 positions x 3 column blocks = 48 words
    # (refused), per pool 8 x 3 = 24; every Y row golden, its cycle and done core_schedule's, the commands'
    # carried-store addresses the per-pool layout's (`tests.test_rtl_dcore.pool_store`)
    from hw.delta_combine import pool_state_words
    from hw.delta_core import DeltaCore, core_ports

    shape, ci, fifo = "8x8-B2-d2", "sliced-3cb", 4
    cfg = AcceleratorConfig.model_validate(core_stage_cfg(shape, diff_kib=2).model_dump() | {"psum_sram_kib": 1})
    case = _get(ci)
    sop = staged_op(case, cfg)
    job = stage_job(cfg, sop)
    w = cfg.drain_rows_per_cycle
    opts = {"out_ways": w, "d_buffers": 3, "fifo_bypass": True, "seg_local": True}
    plain = discard(DeltaCore(cfg, fifo=fifo, queues=False, stage=True, max_k=MAX_K.get(ci), **opts))
    with pytest.raises(ValueError, match="state buffer: the op needs 48 words.*holds 36"):
        core_ports(plain, sop.case.grid, sop.case.groups, sop.case.W.shape[1], False, *job[4])
    assert sop.s == 3 and pool_state_words(cfg, sop.case.grid, ["f"], sop.s, w) == 24
    [got] = run_dcore(cfg, [job], fifo=fifo, queues=False, stage=True, max_k=MAX_K.get(ci), array_hold=True,
                      pool_state=True, **opts)
    check(cfg, job, None, got, fifo, ways=w, out_ways=w, buffers=3, model=stage_model(cfg, sop, w,
          max_k=MAX_K.get(ci), local=True), hold=True, row_tile=stage_row_tiles(cfg, sop, max_k=MAX_K.get(ci)),
          local=True, pool=True)
    assert not got.overflow
