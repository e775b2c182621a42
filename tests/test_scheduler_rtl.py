"""The hardware scheduler (hw/dispatcher/scheduler.py) makes the same choices as the reference
scheduler (sim.timing.dispatch.schedule_positions): identical position permutations on seeded random
decisions, several grids (partial last window, one frame, identical patterns), under Amaranth's
simulator; plus the emitted Verilog is lint-clean (verilator --lint-only -Wall)."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
from amaranth.sim import Simulator

from hw import discard
from hw.config import load_config
from hw.dispatcher.scheduler import Scheduler
from sim.timing import dispatch

CFG = load_config("tiny-8x8")


def test_window_default_matches_reference():
    """One window for the hardware scheduler and the reference: the config's (default 8 tiles,
    hw.config.WINDOW_TILES, which sim.timing.dispatch takes as its default)."""
    assert dispatch.WINDOW_TILES == CFG.scheduler_window_tiles == 8
    assert discard(Scheduler(CFG)).window == CFG.scheduler_window_tiles * CFG.array_rows
    cfg4 = CFG.model_copy(update={"scheduler_window_tiles": 4})
    assert discard(Scheduler(cfg4)).window == 4 * CFG.array_rows


def run_scheduler(windows, window, max_digits, stall_seed=None):
    """Drive each window's pattern columns (last column first, raster order inside a column);
    return the in-window permutations. With `stall_seed`, d_valid and o_ready drop at random."""
    dut = Scheduler(CFG, window=window, max_digits=max_digits)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    rng = np.random.default_rng(stall_seed)
    out = []

    async def bench(ctx):
        for pattern in windows:  # int8 [n_pos, L]
            n_pos, L = pattern.shape  # noqa: N806
            ctx.set(dut.n_pos, n_pos)
            ctx.set(dut.n_digits, L)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            for c in range(L - 1, -1, -1):
                for p in range(n_pos):
                    while stall_seed is not None and rng.random() < 0.2:
                        ctx.set(dut.d_valid, 0)
                        await ctx.tick()
                    ctx.set(dut.d_valid, 1)
                    ctx.set(dut.d_code, int(pattern[p, c]))
                    while not ctx.get(dut.d_ready):
                        await ctx.tick()
                    await ctx.tick()
            ctx.set(dut.d_valid, 0)
            perm = []
            while True:
                ready = stall_seed is None or rng.random() >= 0.2
                ctx.set(dut.o_ready, int(ready))
                if ctx.get(dut.o_valid) and ready:
                    perm.append(ctx.get(dut.o_pos))
                    last = ctx.get(dut.o_last)
                    await ctx.tick()
                    if last:
                        break
                else:
                    await ctx.tick()
            ctx.set(dut.o_ready, 0)
            assert not ctx.get(dut.busy)
            out.append(np.array(perm, dtype=np.int64))

    sim.add_testbench(bench)
    sim.run()
    return out


def patterns(decisions, grid, window):
    """The per-window pattern matrices, built here from the reference's definition
    (codes over (group, frame), group-major, frame 0 excluded)."""
    F, H, W = grid  # noqa: N806
    hw = H * W
    d = decisions.reshape(F, hw, -1)
    G = d.shape[2]  # noqa: N806
    pat = np.array([[d[f, p, g] for g in range(G) for f in range(1, F)] for p in range(hw)],
                   dtype=np.int8).reshape(hw, G * (F - 1))
    return [pat[w0:min(w0 + window, hw)] for w0 in range(0, hw, window)]


@pytest.mark.parametrize("seed, grid, n_groups, coherent", [
    (1, (3, 5, 30), 2, 0.5),   # 150 positions: windows of 64, 64, 22
    (2, (4, 4, 4), 3, 0.0),    # one full window, every pattern scattered
    (3, (2, 3, 7), 4, 1.0),    # 21 positions, one frame of patterns, coherent groups
    (4, (1, 4, 4), 2, 0.5),    # one frame: empty patterns, identity order
    (5, (3, 2, 36), 1, 0.0),   # 72 positions: a last window of 8
])
def test_same_permutation_as_reference(seed, grid, n_groups, coherent):
    rng = np.random.default_rng(seed)
    F, H, W = grid  # noqa: N806
    M = F * H * W  # noqa: N806
    dec = rng.choice(3, size=(M, n_groups), p=[0.3, 0.3, 0.4]).astype(np.int8)
    # Coherent groups: whole positions share a pattern, so ties (stability) matter.
    for g in range(n_groups):
        if rng.random() < coherent:
            proto = rng.choice(3, size=(F, 1)).astype(np.int8)
            dec.reshape(F, H * W, n_groups)[:, :, g] = proto
    window = dispatch.WINDOW_TILES * CFG.array_rows
    want = dispatch.schedule_positions(dec, grid, CFG.array_rows)
    wins = patterns(dec, grid, window)
    got = run_scheduler(wins, window, CFG.partial_regs * max(1, F - 1))
    perm = np.concatenate([w0 + p for w0, p in zip(range(0, H * W, window), got, strict=True)])
    np.testing.assert_array_equal(perm, want)


def test_handshake_stalls_do_not_change_choices():
    rng = np.random.default_rng(7)
    grid = (3, 2, 10)
    dec = rng.choice(3, size=(60, 2)).astype(np.int8)
    window = 16
    want = dispatch.schedule_positions(dec, grid, CFG.array_rows, window_tiles=2)
    got = run_scheduler(patterns(dec, grid, window), window, 4, stall_seed=11)
    np.testing.assert_array_equal(np.concatenate([w0 + p for w0, p in zip(range(0, 20, 16), got, strict=True)]),
                                  want)


def test_latency_as_documented():
    """L * (2 * n_pos + 1) + n_pos cycles after the start cycle until the last output has been
    presented (module docstring): for n_pos = 5, L = 2, by hand 2 * (5 + 1 + 5) = 22 cycles of
    LOAD, BASES, SCATTER, then outputs on 5 cycles; the last is presented on cycle 1 + 22 + 4."""
    dut = Scheduler(CFG, window=8, max_digits=2)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    cycles = []

    async def bench(ctx):
        ctx.set(dut.n_pos, 5)
        ctx.set(dut.n_digits, 2)
        ctx.set(dut.start, 1)
        ctx.set(dut.d_valid, 1)
        ctx.set(dut.o_ready, 1)
        await ctx.tick()
        ctx.set(dut.start, 0)
        n = 1
        while not (ctx.get(dut.o_valid) and ctx.get(dut.o_last)):
            await ctx.tick()
            n += 1
        cycles.append(n)

    sim.add_testbench(bench)
    sim.run()
    assert cycles == [1 + 2 * (2 * 5 + 1) + 5 - 1]


def test_emitted_scheduler_is_lint_clean(tmp_path):
    from hw.rtl import SCHEDULER_MODULE_NAME, emit
    from sim.engines.rtl import RtlEngineError, verilator_env

    try:
        env = {**os.environ, **verilator_env()}
    except RtlEngineError as err:
        pytest.skip(str(err))
    (path,) = emit(CFG, tmp_path, only=(SCHEDULER_MODULE_NAME,))
    res = subprocess.run(["verilator", "--lint-only", "-Wall", "--top-module", SCHEDULER_MODULE_NAME, str(path)],
                         capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
