"""The PE alone under Amaranth's simulator, against the golden model.

A PE at row r, column j of the array sees, one slot per cycle, exactly the row lane r and the
column lane j of the dispatcher's stream (`sim.stream`); here the skew is left out and the slots
are fed back to back. After each tile's last slot, the PE's result must equal the golden
``Y[token, n]`` of that tile's row r and column j. The cases mix every mode (COMPUTE on lane a
and b, PARTIAL on a and b, PAIRED, REUSE), every transition between them, and -128 / 127 / 255
operands; the test asserts that coverage.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from algo.golden import apply_decisions
from hw.config import load_config
from hw.pe import PE, PEMode
from sim.stream import build_stream
from tests.rtl.cases import cases_for, make_case

CFG = load_config("tiny-8x8")


def _extreme_case():
    """All operands at the int8 extremes: X in {-128, 127}, W in {-128, 127}."""
    c = make_case("extreme", 11, (4, 1, 8), 12, 8, [4, 4, 4])
    rng = np.random.default_rng(12)
    c.X[:] = np.where(rng.random(c.X.shape) < 0.5, -128, 127).astype(np.int8)
    c.W[:] = np.where(rng.random(c.W.shape) < 0.5, -128, 127).astype(np.int8)
    return c


CASES = [*cases_for(CFG.array_rows, CFG.array_cols), _extreme_case()]


def run_pe(case, r: int, j: int):
    """Feed row lane r / column lane j of the case's stream to one PE; return results and modes seen."""
    stream = build_stream(case.X, case.W, case.grid, case.groups, case.decisions, 4, CFG)
    pe = PE(CFG)
    sim = Simulator(pe)
    sim.add_clock(1e-6)
    results, modes = [], []

    def ext(v):  # the top's operand extension to 9 bits
        return int(v) if case.x_unsigned else int(np.int8(v))

    async def bench(ctx):
        for s in stream.slots:
            ctx.set(pe.i_valid, 1)
            ctx.set(pe.i_x_a, ext(s.x_a[r]))
            ctx.set(pe.i_x_b, ext(s.x_b[r]))
            ctx.set(pe.i_mode, int(s.mode[r]))
            ctx.set(pe.i_sel, int(s.sel[r]))
            ctx.set(pe.i_w_a, int(s.w_a[j]))
            ctx.set(pe.i_w_b, int(s.w_b[j]))
            ctx.set(pe.i_g_a, s.g_a)
            ctx.set(pe.i_g_b, s.g_b)
            ctx.set(pe.i_first_a, int(s.first_a))
            ctx.set(pe.i_first_b, int(s.first_b))
            ctx.set(pe.i_last, int(s.last))
            ctx.set(pe.i_clear, int(s.clear))
            modes.append((int(s.mode[r]), int(s.sel[r])))
            await ctx.tick()
            if s.last:
                assert ctx.get(pe.out_valid) == 1
                results.append(ctx.get(pe.out))
            else:
                assert ctx.get(pe.out_valid) == 0
        ctx.set(pe.i_valid, 0)
        await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    return stream, results, modes


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_pe_results_equal_golden(case):
    Y = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)  # noqa: N806
    seen = set()
    for r, j in ((0, 0), (3, 5), (7, 7)):
        stream, results, modes = run_pe(case, r, j)
        seen.update(modes)
        assert len(results) == len(stream.tiles)
        for tile, got in zip(stream.tiles, results, strict=True):
            if r < len(tile.tokens) and tile.n0 + j < tile.n1:
                assert got == Y[tile.tokens[r], tile.n0 + j], (case.name, r, j, tile.tokens[r])
    if case.name == "complementary":
        # every mode and both operand selects occur in this case
        assert {(PEMode.COMPUTE, 0), (PEMode.COMPUTE, 1), (PEMode.PARTIAL, 0), (PEMode.PARTIAL, 1),
                (PEMode.PAIRED, 0), (PEMode.REUSE, 0)} <= seen, seen


def test_mode_transitions_are_covered():
    """Across the cases, the PE passes through every ordered pair of modes (16 transitions)."""
    pairs = set()
    for case in CASES:
        for r in range(CFG.array_rows):
            stream = build_stream(case.X, case.W, case.grid, case.groups, case.decisions, 4, CFG)
            seq = [int(s.mode[r]) for s in stream.slots]
            pairs.update(zip(seq, seq[1:], strict=False))
    assert pairs == {(a, b) for a in range(4) for b in range(4)}, sorted(pairs)
