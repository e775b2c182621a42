"""The compute core with the hardware dispatcher (hw/core.py) under Amaranth's simulator, on a
4x4 array (a tiny-8x8 variant, to keep the Python simulation short): the slots the two banks'
matchers and the slot former hand to the array equal `sim.timing.stream.build_stream`'s, slot for slot
(operands, modes, selects, groups, flags); the result rows equal `algo.reuse.golden.apply_decisions` bit
for bit; and the cycle of every tile's last slot and of the last result row equal
`sim.timing.core_timing`'s prediction, and, when one beat holds a tile, `sim.timing.cycle_model`'s plus the
one-beat prologue."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from algo.reuse.golden import apply_decisions
from hw.config import AcceleratorConfig, load_config
from hw.core import TileCore
from sim.timing.core_timing import core_timeline, load_beats
from sim.timing.cycle_model import PIPELINE_CYCLES, op_cycles
from sim.timing.stream import OutputCollector, build_stream, port_values
from tests.rtl.cases import complementary_case, core_load_beats, make_case, spatial_cases

BASE = load_config("tiny-8x8")
CFG = AcceleratorConfig.model_validate({**BASE.model_dump(), "name": "core-4x4", "array_rows": 4,
                                        "array_cols": 4, "partial_regs": 8})
TOP_PORTS = ("in_valid", "in_x_a", "in_x_b", "in_mode", "in_sel", "in_w_a", "in_w_b", "in_g_a", "in_g_b",
             "in_first_a", "in_first_b", "in_sp_a", "in_sp_b", "in_last", "in_clear", "x_unsigned")


def run_core(case, P):  # noqa: N803
    """Drive the core with a loader that presents a beat every cycle it can; returns the issued
    slots, the expected slots, results, golden results, undrained tiles, the cycles of each tile's
    last slot, the cycle of the last result row and the stream."""
    stream = build_stream(case.X, case.W, case.grid, case.groups, case.decisions, 4, CFG)
    expected = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    K = case.X.shape[1]  # noqa: N806
    nb = -(-K // P)
    dut = TileCore(CFG, pe="inline", max_k=K, load_channels=P)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    got = np.full(expected.shape, np.iinfo(np.int64).min, dtype=np.int64)
    out = OutputCollector([(t, got) for t in stream.tiles], CFG)
    issued, last_slots, end = [], [], []

    async def loader(ctx):
        ctx.set(dut.x_unsigned, int(case.x_unsigned))
        for beat in core_load_beats(case, stream, CFG, P):
            ctx.set(dut.ld_valid, 1)
            for name, value in beat.items():
                ctx.set(getattr(dut, name), value)
            while not ctx.get(dut.ld_ready):
                await ctx.tick()
            await ctx.tick()
        ctx.set(dut.ld_valid, 0)

    async def monitor(ctx):
        top = dut.top
        for cycle in range(40 * (len(stream.slots) + len(stream.tiles) * (nb + 4) + 20)):
            if ctx.get(top.in_valid) and ctx.get(top.in_ready):
                issued.append({p: int(ctx.get(getattr(top, p))) for p in TOP_PORTS})
                if ctx.get(top.in_last):
                    last_slots.append(cycle)
            ov = ctx.get(dut.out_valid)
            if ov:
                out.sample(ov, ctx.get(dut.out_data), ctx.get(dut.out_row))
            if not out.tiles_left:
                end.append(cycle)
                return
            await ctx.tick()

    sim.add_testbench(loader, background=True)
    sim.add_testbench(monitor)
    sim.run()
    want = [port_values(s, case.x_unsigned) for s in stream.slots]
    return issued, want, got, expected, out.tiles_left, last_slots, end[0] if end else None, stream


CASES = {
    # uint8 operands, K = 10 (not a multiple of R = 4), M = 18 and 6 positions (a partial
    # position block), N = 6 (a partial column block), scattered and coherent groups.
    "mixed_uint8": lambda: make_case("mixed_uint8", 11, (3, 1, 6), 10, 6, [3, 3, 4], x_unsigned=True),
    # row-complementary int8 groups: cross-group pairs, lane-b selects, PAIRED.
    "complementary": lambda: complementary_case(12, CFG.array_rows, CFG.array_cols),
    # w-axis groups over the PE row link (t_wgroups; whole image rows per tile): a spatial lane
    # paired with a temporal one on lane a and on lane b; 1.5 tiles of whole rows per frame.
    "spatial_pairs": lambda: spatial_cases(CFG.array_rows, CFG.array_cols)[2],
    "spatial_rows": lambda: spatial_cases(CFG.array_rows, CFG.array_cols)[1],
}


@pytest.mark.parametrize(("name", "P"), [("mixed_uint8", 2), ("complementary", None), ("mixed_uint8", None),
                                         ("spatial_pairs", None), ("spatial_rows", 2)])
def test_core_issues_the_reference_stream_with_golden_results_and_predicted_cycles(name, P):  # noqa: N803
    """P = None: the smallest power of two >= K, so one beat holds a tile."""
    case = CASES[name]()
    K = case.X.shape[1]  # noqa: N806
    P = P or 1 << (K - 1).bit_length()  # noqa: N806
    issued, want, got, expected, left, last_slots, end, stream = run_core(case, P)
    assert left == 0, f"{name}: {left} tiles never drained"
    assert len(issued) == len(want), (name, len(issued), len(want))
    for i, (a, b) in enumerate(zip(issued, want, strict=True)):
        assert a == b, (name, i, {k: (a[k], b[k]) for k in a if a[k] != b[k]})
    np.testing.assert_array_equal(got, expected, err_msg=name)

    R, C, d = CFG.array_rows, CFG.array_cols, CFG.drain_rows_per_cycle  # noqa: N806
    beats = load_beats(len(stream.tiles), K, P)
    pred = core_timeline(stream.slots_per_tile, beats, R, C, d)
    assert last_slots == pred.last_slot.tolist(), name
    assert end + 1 == pred.cycles, name  # the last row leaves in the core's last cycle
    model_cycles, _ = op_cycles(stream.slots_per_tile, R, C, d)
    if P >= K:  # one beat per tile: the loader keeps up, the array timeline is the cycle model's
        assert pred.keeps_up and end + 1 == model_cycles + 1, (name, end, model_cycles)
    elif name == "mixed_uint8":  # two-channel beats stall on this case's reuse-heavy tiles
        assert not pred.keeps_up and end + 1 > model_cycles + beats[0]
    if pred.keeps_up:  # then the cycle model's timeline shifted by the first tile's load
        assert end + 1 == model_cycles + beats[0], (name, end, model_cycles)


def test_core_timeline_hand_example():
    # R = C = 4, d = 2, three tiles of 2 slots, 3 beats each (derived by hand from the recurrence
    # in sim/timing/core_timing.py): beats 0-2, 3-5, 6-8 (bank 0 is free again at L_0 + 1 = 5 <= 6);
    # slots 3-4, 6-7 (after the descriptor beat 5), 9-10 (after beat 8; drain bound L_0 + 4 = 8).
    t = core_timeline(np.array([2, 2, 2]), np.array([3, 3, 3]), 4, 4, 2)
    assert t.last_beat.tolist() == [2, 5, 8] and t.last_slot.tolist() == [4, 7, 10]
    assert t.cycles == 10 + 4 + 4 + PIPELINE_CYCLES and t.load_stall == 2 and not t.keeps_up
    # One beat per tile keeps up: the cycle model's timeline shifted by the one-beat prologue.
    for s in ([1, 1, 1, 5, 1], [3, 1, 2, 2]):
        t = core_timeline(np.array(s), np.ones(len(s), np.int64), 4, 4, 2)
        assert t.keeps_up and t.cycles == op_cycles(np.array(s), 4, 4, 2)[0] + 1


def test_bad_parameters_raise():
    with pytest.raises(ValueError, match="power of two"):
        TileCore(CFG, load_channels=3)
    with pytest.raises(ValueError, match="equal-length"):
        core_timeline(np.array([1, 2]), np.array([1]), 4, 4, 2)
    with pytest.raises(ValueError, match="at least one load beat"):
        core_timeline(np.array([1]), np.array([0]), 4, 4, 2)
    with pytest.raises(ValueError, match="must be >= 1"):
        load_beats(3, 0, 2)


def test_rejected_components_leave_no_unused_warning():
    """A core or controller whose constructor rejects its parameters warns nothing when collected.

    Amaranth's `UnusedElaboratable` is silent until the first elaboration of a process
    (amaranth/hdl/_ir.py), so the check turns it on the way a test session does after elaborating.
    """
    import gc
    import warnings

    from amaranth.hdl import UnusedElaboratable

    from hw.accel import Accel
    from hw.compact_array import CompactTop

    was = UnusedElaboratable.__dict__.get("_MustUse__silence", False)
    UnusedElaboratable._MustUse__silence = False
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for cls in (TileCore, Accel):
                with pytest.raises(ValueError, match="power of two"):
                    cls(CFG, load_channels=3)
            with pytest.raises(ValueError, match="pe must be"):
                CompactTop(CFG, pe="bogus")
            with pytest.raises(ValueError, match="choice must be"):
                CompactTop(CFG, choice="ahead")
            gc.collect()
    finally:
        UnusedElaboratable._MustUse__silence = was
    assert [w.category for w in seen if issubclass(w.category, UnusedElaboratable)] == []
