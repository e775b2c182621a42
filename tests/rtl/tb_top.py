"""cocotb bench for rtl_out/<preset>/kaleido_top.v: golden values and model cycle counts.

Run through `tests/test_rtl.py` (cocotb_tools.runner + Verilator). For each seeded case it drives
the dispatcher's slot stream (`sim.timing.stream`) cycle by cycle honouring ``in_ready``, collects the
result rows from every output port, and asserts that

- every result equals `algo.reuse.golden.apply_decisions` bit for bit, and
- the number of cycles from the first accepted slot to the last result row equals
  `sim.timing.cycle_model.op_cycles` for the same tiles.
"""

from __future__ import annotations

import os

import cocotb
import numpy as np
from cocotb.clock import Clock
from cocotb.triggers import ReadOnly, RisingEdge

from algo.reuse.golden import apply_decisions
from hw.config import load_config
from sim.timing.cycle_model import op_cycles, reuse_slot_sequence
from sim.timing.stream import OutputCollector, build_stream, port_values
from tests.rtl.cases import acc_width_case, cases_for, spatial_cases, spatial_random_cases

CFG = load_config(os.environ["KALEIDO_PRESET"])


async def reset(dut):
    dut.in_valid.value = 0
    dut.in_last.value = 0
    dut.rst.value = 1
    for _ in range(3):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    await RisingEdge(dut.clk)


def drive(dut, s, x_unsigned):
    for name, value in port_values(s, x_unsigned).items():
        getattr(dut, name).value = value


async def run_case(dut, case):
    R, C, d = CFG.array_rows, CFG.array_cols, CFG.drain_rows_per_cycle  # noqa: N806
    stream = build_stream(case.X, case.W, case.grid, case.groups, case.decisions, 4, CFG)
    expected = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    # The cycle model's own tiling and slot count (sim.timing.cycle_model), not the stream's.
    model_seq = reuse_slot_sequence(case.decisions, case.grid, case.groups, case.W.shape[1], R, C, 4)
    assert model_seq.tolist() == stream.slots_per_tile.tolist(), f"{case.name}: stream and cycle model tile differently"
    want_cycles, _ = op_cycles(model_seq, R, C, d)

    await reset(dut)
    got = np.full(expected.shape, np.iinfo(np.int64).min, dtype=np.int64)
    out = OutputCollector([(tile, got) for tile in stream.tiles], CFG)
    idx, cycle, first_accept, last_output = 0, 0, None, None
    limit = 50 * (len(stream.slots) + R + C + 10)
    while out.tiles_left and cycle < limit:
        if idx < len(stream.slots):
            drive(dut, stream.slots[idx], case.x_unsigned)
        else:
            dut.in_valid.value = 0
            dut.in_last.value = 0
        await ReadOnly()
        accepted = idx < len(stream.slots) and int(dut.in_ready.value) == 1
        ov = dut.out_valid.value.to_unsigned()
        if ov and out.sample(ov, dut.out_data.value.to_unsigned(), dut.out_row.value.to_unsigned()):
            last_output = cycle
        await RisingEdge(dut.clk)
        if accepted:
            if first_accept is None:
                first_accept = cycle
            idx += 1
        cycle += 1
    tiles_left = out.tiles_left
    assert tiles_left == 0, f"{case.name}: {tiles_left} tiles never drained within {limit} cycles"
    mism = np.argwhere(got != expected)
    assert mism.size == 0, (
        f"{case.name}: {len(mism)} outputs differ from the golden model, first at {tuple(mism[0])}: "
        f"RTL {got[tuple(mism[0])]}, golden {expected[tuple(mism[0])]}"
    )
    rtl_cycles = last_output - first_accept + 1
    dut._log.info(f"{case.name}: {len(stream.tiles)} tiles, {len(stream.slots)} slots, "
                  f"RTL {rtl_cycles} cycles, model {want_cycles}")
    assert rtl_cycles == want_cycles, f"{case.name}: RTL took {rtl_cycles} cycles, cycle model says {want_cycles}"


@cocotb.test()
async def golden_and_cycles(dut):
    """Every case: bit-exact against the golden model, cycle-exact against the cycle model."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    for case in cases_for(CFG.array_rows, CFG.array_cols):
        await run_case(dut, case)


@cocotb.test()
async def spatial_link(dut):
    """Cases with w-axis groups (the PE row link, docs/decisions.md D4): bit-exact and cycle-exact."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    cases = spatial_cases(CFG.array_rows, CFG.array_cols)
    if os.environ.get("KALEIDO_SKIP_SLOW") != "1":  # the random ones under Verilator only (Icarus is slow)
        cases += spatial_random_cases(CFG.array_rows, CFG.array_cols)
    for case in cases:
        await run_case(dut, case)


@cocotb.test(skip=os.environ.get("KALEIDO_SKIP_SLOW") == "1")
async def accumulator_width(dut):
    """K = max_k of the preset, X = 255, W = -128: the extreme output fits acc_bits exactly."""
    cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())
    case = acc_width_case(CFG.array_rows, CFG.array_cols, CFG.max_k)
    assert int(case.X.astype(np.int64).sum(axis=1)[0]) * -128 == CFG.max_k * 255 * -128
    assert -(1 << (CFG.acc_bits - 1)) <= CFG.max_k * 255 * -128
    await run_case(dut, case)
