"""The PE alone under Amaranth's simulator, against the golden model.

A PE at row r, column j of the array sees, one slot per cycle, exactly the row lane r and the
column lane j of the dispatcher's stream (`sim.timing.stream`); here the skew is left out and the slots
are fed back to back. After each tile's last slot, the PE's result must equal the golden
``Y[token, n]`` of that tile's row r and column j. The cases mix every mode (COMPUTE on lane a
and b, PARTIAL on a and b, PAIRED, REUSE), every transition between them, and -128 / 127 / 255
operands; the test asserts that coverage.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from amaranth.sim import Simulator

from algo.reuse.golden import apply_decisions, split_msb
from hw.array import Column, row_lane_bits
from hw.config import load_config
from hw.pe import COL_FIELDS, PE, ROW_FIELDS, PEMode, pe_signature
from sim.timing.stream import build_stream
from tests.rtl.cases import cases_for, make_case, spatial_cases

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


# ---- the row link (w-axis reuse, docs/decisions.md D4) ----------------------------------------

def _msbp(x: int, w: int) -> int:
    """msb(x) * w by the golden split (algo.reuse.golden.split_msb, b_msb = 4)."""
    return int(split_msb(np.array([x]), 4)[0][0]) * w


def _lsbp(x: int, w: int) -> int:
    return int(split_msb(np.array([x]), 4)[1][0]) * w


#: (mode, sel, sp_a, sp_b) -> (expected result, expected link (m, l)) as functions of the operands and
#: the link input, hand-derived from the increment rule (hw/pe.py docstring). Every slot is a whole
#: tile (clear, first, last), so a temporal PARTIAL contributes only its lsb product.
LINK_MODES = {
    (PEMode.COMPUTE, 0, 1, 0): lambda xa, xb, wa, wb, m, lk: (xa * wa, (_msbp(xa, wa), _lsbp(xa, wa))),
    (PEMode.PARTIAL, 0, 1, 0): lambda xa, xb, wa, wb, m, lk: (m + _lsbp(xa, wa), (m, _lsbp(xa, wa))),
    (PEMode.REUSE, 0, 1, 0): lambda xa, xb, wa, wb, m, lk: (m + lk, (m, lk)),
    (PEMode.REUSE, 0, 0, 1): lambda xa, xb, wa, wb, m, lk: (m + lk, (m, lk)),
    (PEMode.COMPUTE, 1, 0, 1): lambda xa, xb, wa, wb, m, lk: (xb * wb, (_msbp(xb, wb), _lsbp(xb, wb))),
    (PEMode.COMPUTE, 0, 0, 1): lambda xa, xb, wa, wb, m, lk: (xa * wa + m + lk, (m, lk)),
    (PEMode.COMPUTE, 1, 1, 0): lambda xa, xb, wa, wb, m, lk: (xb * wb + m + lk, (m, lk)),
    (PEMode.PARTIAL, 1, 0, 1): lambda xa, xb, wa, wb, m, lk: (m + _lsbp(xb, wb), (m, _lsbp(xb, wb))),
    (PEMode.PARTIAL, 1, 1, 0): lambda xa, xb, wa, wb, m, lk: (m + lk + _lsbp(xb, wb), (m, lk)),
    (PEMode.PAIRED, 0, 1, 0): lambda xa, xb, wa, wb, m, lk: (m + _lsbp(xa, wa) + _lsbp(xb, wb), (m, _lsbp(xa, wa))),
    (PEMode.PAIRED, 0, 0, 1): lambda xa, xb, wa, wb, m, lk: (_lsbp(xa, wa) + m + _lsbp(xb, wb), (m, _lsbp(xb, wb))),
}


def test_pe_link_modes_extreme_operands():
    """Every link mode on lane a and lane b, x in {-128, 127, 255}, w in {-128, 127}, extreme link
    values: the PE's result and its registered link output equal the hand-derived increments."""
    xs, ws = (-128, 127, 255), (-128, 127)
    links = ((_msbp(-128, -128), _lsbp(127, -128)), (_msbp(127, -128), _lsbp(127, 127)))
    pe = PE(CFG)
    sim = Simulator(pe)
    sim.add_clock(1e-6)
    checked = []

    async def bench(ctx):
        for (mode, sel, spa, spb), rule in LINK_MODES.items():
            for xa, xb, wa, wb in itertools.product(xs, xs, ws, ws):
                for lm, ll in links:
                    for port, v in (("valid", 1), ("x_a", xa), ("x_b", xb), ("w_a", wa), ("w_b", wb),
                                    ("mode", int(mode)), ("sel", sel), ("sp_a", spa), ("sp_b", spb),
                                    ("g_a", 0), ("g_b", 1), ("first_a", 1), ("first_b", 1), ("last", 1),
                                    ("clear", 1), ("lk_m", lm), ("lk_l", ll)):
                        ctx.set(getattr(pe, "i_" + port), v)
                    await ctx.tick()
                    want, (wm, wl) = rule(xa, xb, wa, wb, lm, ll)
                    got = (ctx.get(pe.out), ctx.get(pe.o_lk_m), ctx.get(pe.o_lk_l))
                    assert got == (want, wm, wl), (mode, sel, spa, spb, xa, xb, wa, wb, lm, ll, got)
                    checked.append(mode)
        ctx.set(pe.i_valid, 0)
        await ctx.tick()

    sim.add_testbench(bench)
    sim.run()
    assert len(checked) == len(LINK_MODES) * 36 * 2


def run_column(case, j: int):
    """Drive one column (R PEs, inline, link included) with column lane j of the case's stream, row
    lanes skewed by one cycle per row as the array does; each tile's last slot is followed by R idle
    cycles so its rows leave port 0 alone. Returns the result rows, tile by tile."""
    stream = build_stream(case.X, case.W, case.grid, case.groups, case.decisions, 4, CFG)
    R = CFG.array_rows  # noqa: N806
    col = Column(CFG, pe="inline")
    shapes = {n: mem.shape for n, mem in pe_signature(CFG).members.items()}
    lb = row_lane_bits(CFG)
    timeline = []  # slot per cycle or None
    for s in stream.slots:
        timeline.append(s)
        if s.last:
            timeline += [None] * R
    timeline += [None] * (R + 3)

    def lane(s, r):
        vals = (s.x_a[r], s.x_b[r], s.mode[r], s.sel[r]) if s is not None else (0, 0, 0, 0)
        out, pos = 0, 0
        for f, v in zip(ROW_FIELDS, vals, strict=True):
            w = shapes["i_" + f].width
            v = int(v) if case.x_unsigned or f not in ("x_a", "x_b") else int(np.int8(v))
            out |= (v & ((1 << w) - 1)) << pos
            pos += w
        return out

    rows_out = []
    sim = Simulator(col)
    sim.add_clock(1e-6)

    async def bench(ctx):
        for t, s in enumerate(timeline):
            ctx.set(col.x_in, sum(lane(timeline[t - i] if t - i >= 0 else None, i) << (i * lb) for i in range(R)))
            for f in COL_FIELDS:
                v = 0 if s is None else {"w_a": s.w_a[j], "w_b": s.w_b[j], "valid": 1, "port": 0}.get(f)
                if v is None:
                    v = getattr(s, f)
                ctx.set(getattr(col, "c_" + f), int(v))
            await ctx.tick()
            if ctx.get(col.out_valid) & 1:
                v = ctx.get(col.out_data) & ((1 << CFG.acc_bits) - 1)
                rows_out.append(v - (1 << CFG.acc_bits) if v >> (CFG.acc_bits - 1) else v)

    sim.add_testbench(bench)
    sim.run()
    assert len(rows_out) == R * len(stream.tiles)
    return stream, [rows_out[t * R:(t + 1) * R] for t in range(len(stream.tiles))]


@pytest.mark.parametrize("case", spatial_cases(CFG.array_rows, CFG.array_cols), ids=lambda c: c.name)
def test_column_link_equals_golden(case):
    """A whole column with the row link, on cases with w-axis groups (chains along w, spatial lane a
    and b, paired slots): every valid row equals the golden model."""
    Y = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)  # noqa: N806
    for j in (0,):  # column 0 carries W's -128 (tests/rtl/cases.make_case)
        stream, tiles = run_column(case, j)
        for tile, rows in zip(stream.tiles, tiles, strict=True):
            if tile.n0 + j >= tile.n1:
                continue
            for r, tok in enumerate(tile.tokens):
                assert rows[r] == Y[tok, tile.n0 + j], (case.name, j, r, int(tok))


def test_spatial_cases_cover_the_link_modes():
    """The cases drive every (mode, sel) with the spatial lane on a and on b."""
    seen = set()
    for case in spatial_cases(CFG.array_rows, CFG.array_cols):
        for s in build_stream(case.X, case.W, case.grid, case.groups, case.decisions, 4, CFG).slots:
            seen.update((int(s.mode[r]), int(s.sel[r]), int(s.sp_a), int(s.sp_b)) for r in range(CFG.array_rows))
    assert set(LINK_MODES) <= seen, sorted(set(LINK_MODES) - seen)


def test_decision_codes_equal_golden():
    import algo.reuse.golden as golden
    import hw.pe as pe

    assert (pe.COMPUTE, pe.PARTIAL, pe.REUSE) == (golden.COMPUTE, golden.PARTIAL, golden.REUSE) == (0, 1, 2)


def test_cost_widths_are_the_pe_signals():
    """The widths `sim.cost` charges (hw.pe.OPERAND_MUX_BITS, LINK_BITS, SPLIT_MULT_FRACTION) are those of
    the signals the elaborated PE declares, and equal the hand count of docs/spec.md §3's split multiplier:
    operand selects x 9 + w 8 + lo_x 4 + lo_w 8 + hi_x 5 + hi_w 8 = 42 bits; link 17 + 13 = 30 bits;
    partial products (5x8 + 4x8) / (8x8) = 1.125."""
    from amaranth.hdl import Fragment, Value

    import hw.pe as pe

    dut = PE(CFG)
    Fragment.get(dut, None)  # elaborate: records dut.operand_selects
    widths = {name: Value.cast(v).shape().width for name, v in dut.operand_selects.items()}
    assert widths == dict(pe.OPERAND_SELECTS) == {"x_sel": 9, "w_sel": 8, "lo_x": 4, "lo_w": 8, "hi_x": 5, "hi_w": 8}
    assert pe.OPERAND_MUX_BITS == 42
    assert pe.LINK_BITS == len(dut.o_lk_m) + len(dut.o_lk_l) == 30
    assert pe.SPLIT_MULT_FRACTION == 1.125


def test_mode_of_follows_the_rule():
    """`hw.pe.MODE_OF`, the one decision -> PE-mode table, against docs/spec.md §3's rule stated case by
    case: a slot carries one channel, or two whose demands (COMPUTE 2 half slots, PARTIAL 1, REUSE 0) fit
    one slot; a REUSE channel costs nothing, so the other one's decision sets the mode on its own lane
    (``sel`` = 1 for lane b); two PARTIAL channels share the multiplier (PAIRED); no work is REUSE."""
    from hw.pe import COMPUTE, MODE_OF, PARTIAL, REUSE

    demand = {COMPUTE: 2, PARTIAL: 1, REUSE: 0}
    codes = (COMPUTE, PARTIAL, REUSE)
    slots = {(a, None) for a in codes} | {(a, b) for a in codes for b in codes if demand[a] + demand[b] <= 2}
    assert set(MODE_OF) == slots
    for (a, b), (mode, sel) in MODE_OF.items():
        lanes = [a] if b is None else [a, b]
        work = [(i, d) for i, d in enumerate(lanes) if d != REUSE]
        if not work:
            assert (mode, sel) == (PEMode.REUSE, 0), (a, b)
        elif len(work) == 2:
            assert (a, b) == (PARTIAL, PARTIAL) and (mode, sel) == (PEMode.PAIRED, 0), (a, b)
        else:
            i, d = work[0]
            assert (mode, sel) == ({COMPUTE: PEMode.COMPUTE, PARTIAL: PEMode.PARTIAL}[d], i), (a, b)
