"""`hw.sram`: behavioural SRAM macros against a cycle-by-cycle Python model of a compiled macro."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from hw.lint import lint_folder
from hw.sram import Sram, emit_macro, macro_name

DEPTH, WIDTH, LANE = 13, 16, 8  # a depth that is not a power of two; two write-mask lanes


def _reference(kind, ops):
    """rdata after each cycle of `ops` (addr/raddr, waddr, re, we, wmask, wdata) for a macro with
    synchronous read-before-write reads and per-lane writes (hw/sram.py's contract, written
    independently of it). Unwritten words read as 0 (the model's init=[])."""
    mem, rdata, out = [0] * DEPTH, 0, []
    for raddr, waddr, re, we, wmask, wdata in ops:
        if kind == "1rw":
            waddr = raddr
            re = re and not we
        if re:
            rdata = mem[raddr]  # read-before-write: the old word
        if we:
            for lane in range(WIDTH // LANE):
                if wmask >> lane & 1:
                    keep = mem[waddr] & ~(((1 << LANE) - 1) << (LANE * lane))
                    mem[waddr] = keep | (wdata & (((1 << LANE) - 1) << (LANE * lane)))
        out.append(rdata)
    return out


@pytest.mark.parametrize("kind", ["1rw", "1r1w"])
def test_macro_matches_a_compiled_sram_cycle_by_cycle(kind):
    rng = np.random.default_rng(7)
    n = 400
    ops = [(int(rng.integers(DEPTH)), int(rng.integers(DEPTH)), int(rng.integers(2)), int(rng.integers(2)),
            int(rng.integers(4)), int(rng.integers(1 << WIDTH))) for _ in range(n)]
    ops[5] = (3, 3, 1, 1, 3, 0xBEEF)  # same-cycle read and write of one word (1r1w: old word)
    ops[6] = (3, 3, 1, 0, 0, 0)
    want = _reference(kind, ops)
    dut = Sram(kind, DEPTH, WIDTH, LANE)
    got = []
    sim = Simulator(dut)
    sim.add_clock(1e-6)

    async def bench(ctx):
        for raddr, waddr, re, we, wmask, wdata in ops:
            if kind == "1rw":
                ctx.set(dut.addr, raddr)
            else:
                ctx.set(dut.raddr, raddr)
                ctx.set(dut.waddr, waddr)
            ctx.set(dut.re, re)
            ctx.set(dut.we, we)
            ctx.set(dut.wmask, wmask)
            ctx.set(dut.wdata, wdata)
            await ctx.tick()
            got.append(ctx.get(dut.rdata))

    sim.add_testbench(bench)
    sim.run()
    assert got == want


def test_macro_names_and_bad_sizes():
    assert macro_name("1rw", 4096, 64) == "kaleido_sram_1rw_4096x64"
    assert macro_name("1r1w", 8, 72, 9) == "kaleido_sram_1r1w_8x72_l9"
    for args in [("2rw", 8, 8), ("1rw", 0, 8), ("1rw", 8, 0), ("1r1w", 8, 10, 3)]:
        with pytest.raises(ValueError, match="SRAM"):
            Sram(*args)


@pytest.mark.parametrize("kind", ["1rw", "1r1w"])
def test_emitted_macro_is_named_for_swapping_and_lint_clean(kind, tmp_path):
    name = macro_name(kind, DEPTH, WIDTH, LANE)
    text = emit_macro(kind, DEPTH, WIDTH, LANE)
    assert f"module {name}(" in text.replace(" (", "(")
    ports = {"1rw": ["addr"], "1r1w": ["raddr", "waddr"]}[kind] + ["re", "we", "wmask", "wdata", "rdata", "clk"]
    for port in ports:
        assert f" {port}" in text
    (tmp_path / f"{name}.v").write_text(text)
    runs = lint_folder(tmp_path)
    assert [(label, ok) for label, ok, _, _ in runs] == [(f"{name}.v", True)], runs
