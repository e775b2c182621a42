"""The op-level controllers with their combine stage, ``kaleido_dcore`` (delta) and ``kaleido_ccore`` (compact), through
the compiled Verilator engine (`sim.engines.verilator_core` on `sim.engines.verilator_stream`, docs/decisions.md
D102), on hw/presets/examples/tiny-8x8-{delta,compact}.toml.

- The seeded cases of tests/test_rtl_dcore.py and test_rtl_ccore.py on 8 x 8 with 2 bands on 2 ports (the TOMLs'
  shape: their ``ENGINE_RUNS``, which moved here, and the first of their ``RUNS``, which stays there too with the
  command and access checks; those files keep their other shapes and the fused cases under Amaranth's simulator)
  and their seeded random ops, back to back on one core (on its d = 2 accumulate ways, docs/decisions.md D108, and
  d = 2 output lanes, D112, D113, on 3 D buffers, D115):
  every (token, column block) Y row once, equal to
  `algo.reuse.golden.apply_decisions`, at the cycle the controller's timing functions give (computed here from
  `sim.engines.band_stimulus.band_op`, apart from the RTL and from the engine's own planning), and ``done``.
- A whole captured trace (tiny Wan2.1, step 49, block 0: qkv, qk and pv per head, o_proj, ffn1, ffn2) through each
  core, cut on the host where an op exceeds the controller (`sim.engines.verilator_core.slices`): the output
  checksum equals the golden model's (`sim.engines.rtl.golden_checksums`), every slice's rows and ``done`` their
  timing functions' cycles.
- A run that never reaches ``done`` is an error within its bound; the host address reaches every token (the bug
  the trace found); the engine's macro rewrite keeps the zeros.
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import apply_decisions
from hw.config import load_config
from sim.engines.band_stimulus import band_op
from sim.engines.verilator_build import RtlEngineError
from sim.engines.verilator_core import CoreEngine, CoreOp, trace_through_core

DELTA_TOML = "hw/presets/examples/tiny-8x8-delta.toml"
COMPACT_TOML = "hw/presets/examples/tiny-8x8-compact.toml"


@pytest.fixture(scope="module", autouse=True)
def _short_runs_build_at_O0():  # noqa: N802
    """The module's six engines are built at g++ -O0 (``KALEIDO_RTL_OPT``, `sim.engines.verilator_build.makeflags`,
    D106): their runs are short, so the C++ build is most of each engine's CPU (a dcore or ccore engine with its
    seeded ops: 30-32 s of CPU at the default levels, 17 s at -O0; the captured block's slices run about 5 s longer
    a core; docs/decisions.md D135). The level changes no output or cycle (D106); the stream driver these engines run stays built at the default
    levels by tests/test_rtl_band_regression.py's combine unit, the lock-step and band drivers by test_rtl_engine.py
    and the band regression."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KALEIDO_RTL_OPT", "-O0")
        yield


@pytest.fixture(scope="module")
def dcore():
    return CoreEngine(load_config(DELTA_TOML))


@pytest.fixture(scope="module")
def ccore():
    return CoreEngine(load_config(COMPACT_TOML))


def _check_rows(run, case, n_cb, C, rows, done):  # noqa: N803
    want = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    assert not run.twice and not run.overflow
    assert np.array_equal(run.y, want)
    assert run.rows == rows and len(rows) == case.X.shape[0] * n_cb
    assert run.done == done


def _seeded_and_random(cfg):
    """tests/test_rtl_dcore.py's engine cases on the TOML's shape and its six random ops: ``(case, fw, s, cm)``."""
    from tests.test_rtl_dcore import ENGINE_RUNS, RUNS, random_ops
    from tests.test_rtl_delta import CASES, QK_CASES

    cases = []
    for shape, ci, cm, fused, _queues in ENGINE_RUNS + RUNS[:1]:  # the TOML's shape, no state SRAM on it
        assert shape == "8x8-B2-d2" and not fused
        case, fw, s = (QK_CASES[ci], 1, 2) if isinstance(ci, str) else CASES[ci]
        cases.append((case, fw, s, cm))
    cases += random_ops()
    cases = [(c, fw or c.grid[0], s, cm) for c, fw, s, cm in cases]
    assert len(cases) == 13  # 7 seeded cases, 6 random ops
    return cases


def _check_engine_ops(eng):
    """`_seeded_and_random`'s ops through ``eng``: Y, every row's cycle and ``done`` against `core_schedule` on the
    controller's model (tests/test_rtl_dcore.py `_model`) with the array hold on the engine's FIFO (D123); returns
    the cycles the array was held, summed."""
    from sim.timing.delta import classes
    from sim.timing.delta_core import core_schedule
    from tests.test_rtl_dcore import _job, _model, gate_feed, row_tiles

    cfg = eng.core.cfg
    cases = _seeded_and_random(cfg)
    runs = eng.run([CoreOp(c.X, c.W, c.grid, c.groups, c.decisions, c.x_unsigned, False, (fw, s, cm))
                      for c, fw, s, cm in cases])
    d, held = cfg.drain_rows_per_cycle, 0
    assert eng.core.array_hold
    for (case, fw, s, cm), run in zip(cases, runs, strict=True):
        (_c, op, _f, _p, walk), queue = _job(cfg, case, fw, s, cm, False)
        _rows, done, (cyc, rsg, descs, way) = _model(cfg, case, op, queue, fw, s, d)
        n_cb = -(-case.W.shape[1] // cfg.array_cols)
        # the walk segment by segment where the op issues so (docs/decisions.md D104), rows on d ways (D107), the
        # array held while the FIFO has fewer than d free entries (D116, D123)
        # the controller's takes held while the next descriptor's segment is NB_BANKS or more past the walk (D126):
        # its schedule co-simulated with the core's
        hold = ({"gate": gate_feed(cfg, case, op, queue, fw, s, d), "bound": eng.core.issue_bound}
                if eng.core.issue_hold else {"row_tile": row_tiles(cfg, case, op, queue)})
        sch = core_schedule(cyc, done, case.grid, n_cb, len(classes(case.groups)), cfg.array_rows, walk[0], rsg,
                            descs, fw, s, d, way, out_ways=d, buffers=3, fifo=eng.core.fifo, ports=d, **hold)
        assert sch["fifo_max"] <= eng.core.fifo and not sch["overflow"]
        _check_rows(run, case, n_cb, cfg.array_cols, sch["rows"], sch["done"])
        held += sch["frozen"]
    return held


def test_dcore_engine_seeded_cases_and_random_ops(dcore):
    from hw.delta_core import FIFO_PER_PORT, NB_BANKS

    d = dcore.cfg.drain_rows_per_cycle
    assert dcore.core.ways == d == 2  # the engine's core accumulates on d ways (docs/decisions.md D108)
    assert dcore.core.out_ways == d  # and hands out d Y rows a cycle: V = W, 2 divides R = 8 (D112, D113)
    assert dcore.core.d_buffers == 3 and dcore.core.fifo_bypass  # on 3 D buffers (D115), the FIFO bypassed (D118)
    assert dcore.core.fifo == FIFO_PER_PORT * d  # hw.rtl's FIFO, with the array hold (D123)
    assert dcore.core.issue_hold and dcore.core.issue_bound == NB_BANKS  # and the issue hold (D126)
    _check_engine_ops(dcore)


def test_dcore_engine_array_hold_on_a_small_fifo():
    # the same ops on a core built with a 4-entry FIFO (2 a port): kaleido_daccel on its gated clock (D123) held
    # often, every row and done at core_schedule's cycles with the hold, Y the golden model's, no overflow
    eng = CoreEngine(load_config(DELTA_TOML), fifo=4)
    assert _check_engine_ops(eng) > 100


def test_ccore_engine_seeded_cases_and_random_ops(ccore):
    from sim.timing.compact_accel import block_times, caccel_cycles, caccel_schedule, core_cycles, queue_steps
    from tests.test_rtl_caccel import ALL
    from tests.test_rtl_ccore import ENGINE_RUNS, RUNS, random_jobs

    cfg = ccore.cfg
    jobs = [(ALL[ci][0], ALL[ci][1]) for shape, ci in ENGINE_RUNS + RUNS[:1]]
    jobs += [(case, fw) for case, _op, fw in random_jobs(cfg)]
    assert len(jobs) == 12  # 6 seeded cases, 6 random ops
    runs = ccore.run([CoreOp(c.X, c.W, c.grid, c.groups, c.decisions, c.x_unsigned, False, (fw or c.grid[0], 1, False))
                      for c, fw in jobs])
    C = cfg.array_cols  # noqa: N806
    for (case, fw), run in zip(jobs, runs, strict=True):
        fw = fw or case.grid[0]
        M, N = case.X.shape[0], case.W.shape[1]  # noqa: N806
        n_cb = -(-N // C)
        op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw)
        q = queue_steps(case.decisions, case.grid, cfg, fw, n_cb)
        args = (op, case.groups, cfg, 2 * cfg.compact_bands, 32, q)
        y_at, done = core_cycles(caccel_cycles(*args), M, -(-len(case.groups) // ccore.core.ways),
                                 block_times(op, caccel_schedule(*args), cfg, n_cb))
        _check_rows(run, case, n_cb, C, {(t, cb): int(y_at[cb, t]) for cb in range(n_cb) for t in range(M)}, done)


@pytest.mark.parametrize("which", ["dcore", "ccore", "dstage"])
def test_captured_trace_through_core(which, request, captured_block):
    """Every op of the captured block through the core: the checksum of the Y rows it gives equals the golden
    model's, every slice's rows and ``done`` at their modelled cycles (`sim.engines.verilator_core.CoreEngine.expected`:
    `sim.timing.delta_core` / `sim.timing.compact_accel`). Where an op exceeds the controller it is cut: pv (K = 256)
    and ffn2 (K = 128) by whole groups into K = 64 pieces, every op into output column blocks, and for compact every op
    into image rows (4 x 1 x 8 tokens: its state holds R = 8 positions). docs/decisions.md D102 gives the cycles
    beside the trace model's. ``dstage``: ``kaleido_dcore_stage`` with its issue hold (the default since D129) and
    its D buffers addressed per segment (the default since D132), the block in 52 pieces (247,398 cycles; 110 pieces,
    251,528 cycles with the op's address, D126)."""
    from sim.engines.rtl import golden_checksums

    eng = request.getfixturevalue(which)
    if which == "dstage":
        assert eng.core.issue_hold and eng.core.accel.issue_gate and eng.core.seg_local and eng.core.issue_bound == 3
    res = trace_through_core(captured_block, eng.cfg, eng)
    total, per_op = golden_checksums(captured_block)
    assert [r["name"] for r in res["per_op"]] == ["qkv", "qk", "pv", "o_proj", "ffn1", "ffn2"]
    for r, h in zip(res["per_op"], per_op, strict=True):
        assert not r["errors"], r["errors"][:3]
        assert r["cycles"] == r["timing_cycles"] > 0 and r["outputs_sha256"] == h, r["name"]
    assert res["outputs_sha256"] == total
    by = {r["name"]: r for r in res["per_op"]}
    # the least pieces, by hand: pv's 8 groups of 32 channels make 4 runs of K = 64 per head, ffn2's 8 of 16 make 2;
    # compact cuts each op into its 8 image rows (H W = 64 positions against the state's R = 8)
    assert by["pv"]["slices"] >= 2 * 4 and by["ffn2"]["slices"] >= 2
    if which == "ccore":
        assert all(r["slices"] >= 8 * r["batch"] for r in res["per_op"])


def test_ops_cut_into_fewer_groups_where_one_column_block_does_not_fit(dcore, captured_block, monkeypatch):
    """A controller that holds fewer band-tiles than one column block of an op's whole group run (here
    `hw.delta_accel.MAX_TILES` lowered below o_proj's count) runs the op in fewer groups a slice (`slices` halves the
    run), the pieces' Y added on the host equal to the golden model's and every slice on its modelled cycles; one that
    cannot hold even one group and one column block is one error saying why."""
    import dataclasses

    import hw.delta_accel
    from algo.reuse.golden import decide
    from sim.engines.rtl import golden_checksums
    from sim.engines.verilator_core import Slice, _plan_piece, slices

    trace = dataclasses.replace(captured_block, ops=[op for op in captured_block.ops if op.name == "o_proj"])
    op = trace.ops[0]
    groups = [g.as_tuple() for g in op.groups]
    dec = decide(op.X[0], trace.grid, groups, op.theta, trace.b_msb)[0]
    core_op = CoreOp(op.X[0], op.W[0], tuple(trace.grid), groups, dec, op.X.dtype == np.uint8)
    whole = _plan_piece(dcore, core_op, Slice(np.arange(op.M), tuple(trace.grid), list(range(len(groups))),
                                              (0, dcore.cfg.array_cols)))
    n = len(whole.tiles.tiles)  # one column block of all 8 groups (o_proj's K = 128 is one run)
    monkeypatch.setattr(hw.delta_accel, "MAX_TILES", n - 1)
    pieces = slices(dcore, core_op)
    assert max(len(p.slice.groups) for p in pieces) < len(groups)  # cut by groups
    assert all(len(p.tiles.tiles) < n for p in pieces)
    res = trace_through_core(trace, dcore.cfg, dcore)
    assert not res["per_op"][0]["errors"] and res["outputs_sha256"] == golden_checksums(trace)[0]
    monkeypatch.setattr(hw.delta_accel, "MAX_TILES", 0)  # nothing fits: one line naming the band-tiles
    with pytest.raises(RtlEngineError, match=r"does not fit dcore on tiny-8x8-delta: \d+ band-tiles, more than the "
                                             r"controller's 0$"):
        slices(dcore, core_op)


def test_ccore_slices_of_one_column_block_where_the_replay_buffer_is_short(ccore, captured_block, monkeypatch):
    """D124: ``kaleido_ccore``'s queues read a slice's first column block's band-tiles back for its others from a
    replay buffer of `hw.compact_accel.replay_bound` entries; where one column block makes more (here the buffer
    lowered below qk's count), the host gives the slice one column block (`_plan_piece` refuses more, naming the
    buffer), and Y still equals the golden model's, every slice on its modelled cycles."""
    import dataclasses

    from algo.reuse.golden import decide
    from sim.engines.rtl import golden_checksums
    from sim.engines.verilator_core import Slice, _plan_piece, slices

    trace = dataclasses.replace(captured_block, ops=[op for op in captured_block.ops if op.name == "qk"])
    op = trace.ops[0]
    groups = [g.as_tuple() for g in op.groups]
    dec = decide(op.X[0], trace.grid, groups, op.theta, trace.b_msb)[0]
    core_op = CoreOp(op.X[0], op.W[0], tuple(trace.grid), groups, dec, op.X.dtype == np.uint8)
    C = ccore.cfg.array_cols  # noqa: N806
    assert op.N > C  # several column blocks
    pieces = slices(ccore, core_op)
    assert max(p.slice.cols[1] - p.slice.cols[0] for p in pieces) > C  # as built: several column blocks a slice
    sl = pieces[0].slice
    per = len(_plan_piece(ccore, core_op, Slice(sl.tokens, sl.grid, sl.groups, (0, C))).tiles.tiles)
    monkeypatch.setattr(ccore.core.accel.queue, "replay", per - 1)
    assert _plan_piece(ccore, core_op, Slice(sl.tokens, sl.grid, sl.groups, (0, 2 * C))) == (
        f"{per} band-tiles a column block, more than its queues' replay buffer's {per - 1}")
    short = slices(ccore, core_op)
    assert any(p.slice.cols[1] - p.slice.cols[0] == C for p in short) and len(short) > len(pieces)
    res = trace_through_core(trace, ccore.cfg, ccore)  # the short buffer's slices through the core
    assert not res["per_op"][0]["errors"] and res["outputs_sha256"] == golden_checksums(trace)[0]


def test_unfinished_run_is_an_error(dcore):
    # the host writes of a small case, then idle cycles without ``start``: ``done`` never comes within the wait
    from tests.test_rtl_delta import CASES

    case, fw, s = CASES[3]
    op = CoreOp(case.X, case.W, case.grid, case.groups, case.decisions, plan=(fw or case.grid[0], s, False))
    recs, nw = dcore.records(op)
    idle = np.concatenate([recs[:nw], np.zeros((1, recs.shape[1]), np.uint8)])
    with pytest.raises(RtlEngineError, match="did not finish.*within 50 cycles"):
        dcore.engine.run_segments([[(idle, 50)]], stop="done")


def test_host_address_reaches_every_token():
    # the X buffer: 256 tokens x KW = 16 words (pow2 >= ceil(64 / 32) + 8 groups), banks of token mod R / B: the
    # host address token KW + word needs 12 bits (one bank's 1,024 words alone gave 11: tokens 128 .. 255 overwrote
    # 0 .. 127, the captured trace's first failure)
    from hw import discard
    from hw.compact_accel import CompactAccel
    from hw.delta_accel import DeltaAccel

    assert discard(DeltaAccel(load_config(DELTA_TOML), queues=True)).abits == 12
    assert discard(CompactAccel(load_config(COMPACT_TOML), queues=True)).abits == 12


def test_engine_macro_loop_keeps_the_zeros():
    from hw.sram import emit_macro
    from sim.engines.verilator_stream import engine_macro

    text = emit_macro("1r1w", 4, 8)
    assert text.count("= 8'h00;") == 4  # one zero per word in the emitted macro
    loop = engine_macro("1r1w", 4, 8)
    assert "8'h00" not in loop and "< 4;" in loop and "] = 0;" in loop
    a = text.index("  initial begin\n")
    b = text.index("  end\n", a) + len("  end\n")
    assert text[:a] in loop and text[b:] in loop and len(loop) < len(text) + 200


def test_cli_simulate_rtl_on_a_delta_config(tmp_path):
    """``kaleido simulate T.npz --engine rtl`` with a delta config runs its core (no longer refused): on the TOML, which
    has a weight stage, ``kaleido_dcore_stage`` (docs/decisions.md D119); the outputs' checksum is the golden model's,
    each op's cycles its controller's timing functions'."""
    import json

    from algo.trace import save_trace
    from tests.rtl.cases import engine_trace
    from tests.test_rtl_engine import golden_sha256, kaleido

    trace = tmp_path / "t.npz"
    save_trace(engine_trace(), trace)
    res = kaleido("simulate", str(trace), "-c", DELTA_TOML, "--engine", "rtl", "--json", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    out = json.loads((tmp_path / "r.json").read_text())
    assert out["engine"] == "rtl" and out["core"] == "dcore_stage" and "kaleido_dcore" not in res.stderr
    assert [r["name"] for r in out["per_op"]] == ["qkv", "qk", "pv"]
    assert all(r["cycles"] == r["timing_cycles"] > 0 for r in out["per_op"])
    assert out["cycles"] == sum(r["cycles"] for r in out["per_op"])
    assert out["outputs_sha256"] == golden_sha256(engine_trace())
    bad = kaleido("simulate", str(trace), "-c", DELTA_TOML, "--engine", "rtl", "--waves-from", "0")
    assert bad.returncode == 2 and "lockstep RTL engine only" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def dstage():
    return CoreEngine(load_config(DELTA_TOML), stage=True)


def _model_done(cfg, op: CoreOp) -> int:
    """The cycle model's cycles of one `CoreOp` (`sim.engines.model.simulate_op` with ``combine_timing = "rtl"``, the
    array's cycles plus the combine stall): a one-element batch at its own plan (the op's K, N and groups), the
    decisions as the op carries them."""
    from algo.trace import Group, OpRecord, pack_decisions
    from hw.config import config_from_dict
    from sim.engines.model import simulate_op

    F, H, W = op.grid  # noqa: N806
    K, N = op.W.shape  # noqa: N806
    rec = OpRecord("o_proj", 0, 0, None, None, [Group(k0, k1, ax) for k0, k1, ax in op.groups], (0.0, 0.0),
                   dims=(1, F * H * W, K, N), decisions=pack_decisions(op.decisions)[None, None],
                   thetas=((0.0, 0.0),))
    t = simulate_op(rec, op.grid, 4, config_from_dict(cfg.model_dump() | {"combine_timing": "rtl"}))
    return t.cycles + t.stall_cycles["combine"]


def test_dcore_stage_engine_staged_ops(dstage):
    """``kaleido_dcore_stage`` (the delta core on the staged controller, docs/decisions.md D119) on the compiled engine
    (`CoreEngine(stage=True)`, opt-in) on the TOML's 8 x 8, 2 bands, 2 ports, 1 KiB stage: tests/test_rtl_dcore_stage.py's
    ops of that shape without the state SRAM (a whole-K op in D84's order, 13/14/13-channel groups over five column
    blocks, one group of 64 in two stage buffers, a qk-like op, and D88's slices over three column blocks, which fit
    the controller's 64 channels a group once sliced) back to back on one core: Y against `apply_decisions` on the
    op's own groups, every Y row's cycle and ``done`` against `core_schedule` co-simulating `stage_schedule`'s loop
    with the issue gate (``gate=StageFeed``: the staged core's default since docs/decisions.md D129), computed apart
    from the engine (`tests.test_rtl_dcore_stage.stage_feed`, from `band_op`'s band-tiles), and the engine's own
    `expected` equal to them."""
    from sim.timing.delta import classes
    from sim.timing.delta_core import core_schedule
    from tests.rtl.daccel_bench import staged_op
    from tests.test_rtl_dcore_stage import _get, stage_feed

    eng = dstage
    cfg = eng.cfg
    assert eng.module == "dcore_stage" and eng.core.accel.stage and eng.core.ways == eng.core.out_ways == 2
    assert eng.core.d_buffers == 3 and eng.core.fifo_bypass and eng.core.array_hold  # as hw.rtl (D115, D118, D123)
    assert eng.core.issue_hold and eng.core.accel.issue_gate  # ... and its issue hold (D126, by default since D129)
    # ... its D buffers addressed per segment, the issue hold's bound the D buffers n (D125, D126; the default D132)
    assert eng.core.seg_local and eng.core.issue_bound == 3
    sops = [staged_op(_get(ci), cfg) for ci in (0, "wide", "one-wide", "qk-int8", "sliced-3cb")]
    assert [s.sliced for s in sops] == [False] * 4 + [True]
    ops = [CoreOp(s.orig.X, s.orig.W, s.orig.grid, s.orig.groups, s.orig.decisions, s.orig.x_unsigned, False,
                  (s.fw, s.s, True)) for s in sops]
    runs = eng.run(ops)
    slots = []
    for sop, op, run in zip(sops, ops, runs, strict=True):
        case = sop.case
        n_cb = -(-case.W.shape[1] // cfg.array_cols)
        sl = _slots_by_hand(cfg, case, sop.fw)
        slots.append(sl)
        sch = core_schedule(None, None, case.grid, n_cb, len(classes(case.groups)), cfg.array_rows, True, None,
                            None, sop.fw, sop.s, 2, None, out_ways=2, buffers=3, fifo=eng.core.fifo, ports=2,
                            local=True, gate=stage_feed(cfg, sop, 2, local=True), bound=sl, slots=sl)  # the array
        # hold on hw.rtl's FIFO (D123), the D addresses and ways per segment (D125, D132), the gate's bound the op's
        # segment slots (D126, D138)
        assert sch["fifo_max"] <= eng.core.fifo and not sch["overflow"]
        _check_rows(run, sop.orig, n_cb, cfg.array_cols, sch["rows"], sch["done"])
        want = eng.expected(op)
        assert want["rows"] == sch["rows"] and want["done"] == sch["done"]
        # the cycle model times the staged controller as built (docs/decisions.md D121): its op cycles (array +
        # combine stall, combine_timing = "rtl") are the core's done
        assert _model_done(cfg, op) == run.done
    assert max(slots) > 3  # the ring past the n = 3 D buffers on some op (D138)
    with pytest.raises(RtlEngineError, match="kaleido_dcore_stage needs a delta config with a weight stage"):
        CoreEngine(load_config(COMPACT_TOML), stage=True)


def _run_local_ops(cfg, eng, cases):
    """Run segment-local ``cases`` (``(case, fw, s, cm)``, tests/test_rtl_dcore.py's) through ``eng`` in one piece
    each; check Y against `apply_decisions` and every row's cycle and ``done`` against `core_schedule` (``local``, the
    issue hold on the op's segment slots by hand, D126, D138) co-simulating the gated controller (`gate_feed`), computed
    apart from the engine. Returns the ops."""
    from sim.engines.verilator_core import slices
    from sim.timing.delta import classes
    from sim.timing.delta_core import core_schedule
    from tests.test_rtl_dcore import _job, _model, gate_feed

    d = cfg.drain_rows_per_cycle
    ops = [CoreOp(c.X, c.W, c.grid, c.groups, c.decisions, c.x_unsigned, False, (fw or c.grid[0], s, cm))
           for c, fw, s, cm in cases]
    for op in ops:
        assert len(slices(eng, op)) == 1
    runs = eng.run(ops)
    for (case, fw, s, cm), run in zip(cases, runs, strict=True):
        fw = fw or case.grid[0]
        (_c, op, _f, _p, walk), queue = _job(cfg, case, fw, s, cm, False)
        assert walk[0]  # segment by segment: o_local
        _rows, done, (cyc, rsg, descs, way) = _model(cfg, case, op, queue, fw, s, d, local=True)
        n_cb = -(-case.W.shape[1] // cfg.array_cols)
        sl = _slots_by_hand(cfg, case, fw)
        sch = core_schedule(cyc, done, case.grid, n_cb, len(classes(case.groups)), cfg.array_rows, True, rsg,
                            descs, fw, s, d, way, out_ways=d, buffers=3, fifo=eng.core.fifo, ports=d, local=True,
                            gate=gate_feed(cfg, case, op, queue, fw, s, d, local=True), bound=sl, slots=sl)
        _check_rows(run, case, n_cb, cfg.array_cols, sch["rows"], sch["done"])
    return ops


def _slots_by_hand(cfg, case, fw, buffers: int = 3) -> int:
    """A segment-local op's segment slots (docs/decisions.md D138), by hand: ``min(8, n floor(D buffer words / A fw
    R))`` (the 8 count banks; a D buffer's words `hw.delta_combine.delta_combine_sizes`' ``d_depth``)."""
    from hw.delta_combine import delta_combine_sizes
    from sim.timing.delta import classes

    words = delta_combine_sizes(cfg, cfg.drain_rows_per_cycle, 1, buffers)["d_depth"]
    return min(8, buffers * (words // (len(classes(case.groups)) * (fw or case.grid[0]) * cfg.array_rows)))


def test_dcore_stage_engine_issue_hold():
    """``kaleido_dcore_stage`` with the issue hold (docs/decisions.md D126; `CoreEngine(stage=True, issue_hold=True)`,
    opt-in: ``kaleido_daccel_stage_gate``) on bound 1 and a 4-entry FIFO: `test_dcore_stage_engine_staged_ops`' five
    ops back to back, Y against `apply_decisions`, every Y row's cycle and ``done`` against `core_schedule`
    co-simulating `stage_schedule`'s loop (`tests.test_rtl_dcore_stage.stage_feed`), computed apart from the engine,
    and the engine's own `expected` equal to them; the gate held takes."""
    from sim.timing.delta import classes
    from sim.timing.delta_core import core_schedule
    from tests.rtl.daccel_bench import staged_op
    from tests.test_rtl_dcore_stage import _get, stage_feed

    cfg = load_config(DELTA_TOML)
    eng = CoreEngine(cfg, stage=True, issue_hold=True, issue_bound=1, fifo=4)
    assert eng.core.issue_hold and eng.core.issue_bound == 1 and eng.core.accel.issue_gate and eng.core.array_hold
    sops = [staged_op(_get(ci), cfg) for ci in (0, "wide", "one-wide", "qk-int8", "sliced-3cb")]
    ops = [CoreOp(s.orig.X, s.orig.W, s.orig.grid, s.orig.groups, s.orig.decisions, s.orig.x_unsigned, False,
                  (s.fw, s.s, True)) for s in sops]
    runs = eng.run(ops)
    held = 0
    for sop, op, run in zip(sops, ops, runs, strict=True):
        case = sop.case
        n_cb = -(-case.W.shape[1] // cfg.array_cols)
        sch = core_schedule(None, None, case.grid, n_cb, len(classes(case.groups)), cfg.array_rows, True, None,
                            None, sop.fw, sop.s, 2, None, out_ways=2, buffers=3, fifo=4, ports=2,
                            local=True, gate=stage_feed(cfg, sop, 2, local=True), bound=1, slots=1)  # seg_local
        # (D132), the explicit bound 1 caps the op's slots (D138)
        assert sch["ahead"] < 1 and not sch["overflow"]
        _check_rows(run, sop.orig, n_cb, cfg.array_cols, sch["rows"], sch["done"])
        want = eng.expected(op)
        assert want["rows"] == sch["rows"] and want["done"] == sch["done"]
        held += sch["held"]
    assert held > 0


def test_model_equals_dcore_stage_on_the_captured_block(dstage, captured_block):
    """The captured block (tests/conftest.py) on the example delta TOML's staged core, cut as the engine cuts it
    (`sim.engines.verilator_core.slices`: groups of at most the controller's 64 channels, at most its band-tiles and
    column blocks a piece): on every piece the cycle model's op cycles (`simulate_op`, ``combine_timing = "rtl"``:
    `stage_core`, the gated controller and the core in one numba pass, docs/decisions.md D129) equal
    ``kaleido_dcore_stage``'s ``done`` with its issue hold (the default since D129) as its timing functions give it
    (`CoreEngine.expected`: `core_schedule` co-simulating `stage_schedule`'s loop, ``gate=StageFeed``, which the
    compiled core equals op for op in `test_dcore_stage_engine_staged_ops` and `test_dcore_stage_engine_issue_hold`)."""
    from algo.reuse.golden import decide
    from sim.engines.verilator_core import slices

    cfg, trace = dstage.cfg, captured_block
    pieces = {}
    for op in trace.ops:
        groups = [g.as_tuple() for g in op.groups]
        for b in range(op.batch):
            dec = decide(op.X[b], trace.grid, groups, op.theta, trace.b_msb)[0]
            full = CoreOp(op.X[b], op.W[b], tuple(trace.grid), groups, dec, op.X.dtype == np.uint8)
            for k, p in enumerate(slices(dstage, full)):
                assert _model_done(cfg, p.op) == p.want["done"], (op.name, b, k)
                pieces[op.name] = pieces.get(op.name, 0) + 1
    # with the D buffers addressed per segment (D125, the staged default since D132) a piece's D words are one
    # segment's, so qk, pv and ffn2 are no longer cut for them: D125's pieces on kaleido_dcore with seg_local (qk
    # 64 -> 16, pv 16 -> 8, ffn2 6 -> 4; D119's 110 with the op's address); the rest are cut by the controller's
    # tokens, groups and band-tiles as before
    assert pieces == {"qkv": 12, "qk": 16, "pv": 8, "o_proj": 4, "ffn1": 8, "ffn2": 4}


def test_dcore_stage_cuts_a_wide_group_at_the_stage_slices(dstage):
    """A group wider than the controller's 64 channels (K = 90 in groups of 70 and 20, N = 24: three column blocks;
    tests/test_rtl_dcore_stage.py's sliced op) through the compiled ``kaleido_dcore_stage``: `slices` cuts it at the
    weight stage's slices (docs/decisions.md D88, D121: a 1 KiB stage holds 1024 / 8 / 2 = 64 channels a slice, so
    70 -> 35 + 35, 20 whole) rather than refusing it, then into runs of at most 64 channels (35 | 35 + 20). Y summed
    over the pieces equals `apply_decisions` on the op's own groups; every piece's rows and ``done`` its timing
    functions' (`CoreEngine.expected`), and the cycle model's op cycles on each piece are that ``done``."""
    from sim.engines.verilator_core import slices
    from tests.test_rtl_dcore_stage import _sliced_blocks

    case = _sliced_blocks()
    assert max(k1 - k0 for k0, k1, _ in case.groups) == 70 > dstage.core.accel.max_k == 64
    full = CoreOp(case.X, case.W, case.grid, case.groups, case.decisions, case.x_unsigned)
    pieces = slices(dstage, full)
    assert sorted({tuple(p.slice.groups) for p in pieces}) == [(0,), (1, 2)]  # slices 35 | 35 + 20
    assert [p.op.groups for p in pieces if p.slice.groups == [0]][0] == [(0, 35, "f")]
    runs = dstage.run([p.op for p in pieces], [p.tiles for p in pieces])
    M, N = case.X.shape[0], case.W.shape[1]  # noqa: N806
    y = np.zeros((M, N), np.int64)
    for p, run in zip(pieces, runs, strict=True):
        sl = p.slice
        y[sl.tokens[:, None], np.arange(sl.cols[0], sl.cols[1])[None, :]] += run.y
        assert not run.twice and not run.overflow
        assert run.rows == p.want["rows"] and run.done == p.want["done"]
        assert _model_done(dstage.cfg, p.op) == run.done
    assert np.array_equal(y, apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4))


def test_dcore_engine_segment_local_d_addresses():
    """Segment-local D addresses through the compiled engine (docs/decisions.md D125; ``CoreEngine(seg_local=True)``,
    opt-in): the TOML's config with an 8 KiB difference-sum buffer (3 D buffers of 96 words) runs two ops whose
    whole D does not fit a buffer (tests/test_rtl_dcore.py's wide3, 540 words, segments of 72; qk-int8 in D84's
    order, 120 words, segments of 16) in one piece each: Y golden, every row's cycle and ``done`` against
    `core_schedule(local=True)` on the controller's model with the array hold; a core without it cuts them."""
    from hw import discard
    from hw.config import AcceleratorConfig
    from hw.delta_core import DeltaCore
    from sim.engines.verilator_core import slices
    from tests.test_rtl_dcore import WIDE
    from tests.test_rtl_delta import QK_CASES

    cfg = AcceleratorConfig.model_validate(load_config(DELTA_TOML).model_dump() | {"diff_sram_kib": 8})
    eng = CoreEngine(cfg, seg_local=True)
    cases = [(*WIDE[3][0], False), (QK_CASES["qk-int8"], 1, 2, True)]
    assert eng.core.issue_hold and eng.core.issue_bound == 3  # the issue hold (D126), on the op's slots (D138)
    ops = _run_local_ops(cfg, eng, cases)
    # the op's address (D122's): the same ops cut into more pieces, or refused
    opts = {k: getattr(eng.core, k) for k in ("fifo", "out_ways", "d_buffers", "fifo_bypass", "array_hold",
                                              "issue_hold")}
    eng.core = discard(DeltaCore(cfg, pe="instance", **opts))
    for op in ops:
        try:
            assert len(slices(eng, op)) > 1
        except RtlEngineError as err:
            assert "difference sums" in str(err)


def test_dcore_engine_state_buffer_per_pool():
    """The state buffer per pool through the compiled engine (docs/decisions.md D133; ``CoreEngine(pool_state=True)``,
    opt-in, on D125's segment-local D buffers): the TOML's config with an 8 KiB difference-sum buffer and a 2 KiB
    partial-sum SRAM (a state buffer of 73 words, 36 a position bank) runs tests/test_rtl_dcore.py's wide3 (h, w, f
    classes; 540 words at the op's address, 26 per pool) and fpools (one f class, 3 groups of 2 column blocks, 2
    pools, 2 chunks; 240 words at the op's address, 16 per pool) in one piece each: Y golden, every row's cycle and
    ``done`` against `core_schedule(local=True)` on the op's segment slots (D138; the layout changes no cycle); a core
    without it cuts them into more pieces or refuses them."""
    from hw import discard
    from hw.config import AcceleratorConfig
    from hw.delta_core import DeltaCore
    from sim.engines.verilator_core import slices
    from tests.test_rtl_dcore import _pool_case

    cfg = AcceleratorConfig.model_validate(load_config(DELTA_TOML).model_dump() | {"diff_sram_kib": 8,
                                                                                     "psum_sram_kib": 2})
    eng = CoreEngine(cfg, seg_local=True, pool_state=True)
    cases = [(*_pool_case("wide3"), False), (*_pool_case("fpools"), True)]
    ops = _run_local_ops(cfg, eng, cases)
    opts = {k: getattr(eng.core, k) for k in ("fifo", "out_ways", "d_buffers", "fifo_bypass", "array_hold",
                                              "issue_hold", "seg_local")}
    eng.core = discard(DeltaCore(cfg, pe="instance", **opts))
    for op in ops:  # at the op's address: cut into more pieces (fewer groups, column blocks), or refused
        try:
            assert len(slices(eng, op)) > 1
        except RtlEngineError as err:
            assert "state buffer" in str(err)
