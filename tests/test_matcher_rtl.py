"""The hardware matcher (hw/dispatcher/matcher.py) makes the same choices as the reference
matcher (sim.timing.dispatch.tile_schedule): identical slot lists, flags included, on seeded random tiles."""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from hw.config import load_config
from hw.dispatcher.matcher import Matcher, channel_bits
from sim.timing.dispatch import tile_schedule

CFG = load_config("tiny-8x8")


def random_tiles(n: int, seed: int):
    rng = np.random.default_rng(seed)
    R, G = CFG.array_rows, CFG.partial_regs  # noqa: N806
    for _ in range(n):
        ng = int(rng.integers(1, G + 1))
        widths = rng.integers(1, 6, size=ng)
        rows = int(rng.integers(1, R + 1))
        style = rng.integers(0, 3)
        if style == 0:      # scattered
            dec = rng.choice(3, size=(rows, ng), p=[0.3, 0.35, 0.35])
        elif style == 1:    # coherent per group
            dec = np.tile(rng.choice(3, size=(1, ng)), (rows, 1))
        else:               # row-complementary halves
            upper = (np.arange(rows) < rows // 2)[:, None]
            a, b = rng.choice(3, size=(1, ng)), rng.choice(3, size=(1, ng))
            dec = np.where(upper, a, b)
        k = np.concatenate([[0], np.cumsum(widths)])
        groups = [(int(k[i]), int(k[i + 1]), "f") for i in range(ng)]
        yield dec.astype(np.int8), groups


def run_matcher(tiles):
    dut = Matcher(CFG)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    G, cb = CFG.partial_regs, channel_bits(CFG)  # noqa: N806
    out = []

    async def bench(ctx):
        for dec, groups in tiles:
            rows, ng = dec.shape
            packed = 0
            for r in range(rows):
                for g in range(ng):
                    packed |= int(dec[r, g]) << (2 * (r * G + g))
            k0 = sum(g[0] << (i * cb) for i, g in enumerate(groups))
            k1 = sum(g[1] << (i * cb) for i, g in enumerate(groups))
            ctx.set(dut.dec, packed)
            ctx.set(dut.row_mask, (1 << rows) - 1)
            ctx.set(dut.k0, k0)
            ctx.set(dut.k1, k1)
            ctx.set(dut.n_groups, ng)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            slots = []
            for _ in range(200):
                ctx.set(dut.slot_ready, 1)
                if ctx.get(dut.slot_valid):
                    s = (int(ctx.get(dut.a)) if ctx.get(dut.a_valid) else -1,
                         int(ctx.get(dut.b)) if ctx.get(dut.b_valid) else -1,
                         int(ctx.get(dut.g_a)), int(ctx.get(dut.g_b)),
                         bool(ctx.get(dut.first_a)), bool(ctx.get(dut.first_b)), bool(ctx.get(dut.last)))
                    slots.append(s)
                    last = s[-1]
                    await ctx.tick()
                    if last:
                        break
                else:
                    await ctx.tick()
            out.append(slots)

    sim.add_testbench(bench)
    sim.run()
    return out


def expected(dec, groups):
    sched = tile_schedule(dec, groups, 4)
    if not sched:
        return [(-1, -1, 0, 0, False, False, True)]
    return [(s.a, s.b, s.g_a, s.g_b if s.b >= 0 else 0, s.first_a, s.first_b, i == len(sched) - 1)
            for i, s in enumerate(sched)]


def test_hardware_matcher_equals_reference():
    tiles = list(random_tiles(60, seed=5))
    got = run_matcher(tiles)
    n_pairs = 0
    for (dec, groups), slots in zip(tiles, got, strict=True):
        want = expected(dec, groups)
        assert slots == want, (dec.tolist(), groups)
        n_pairs += sum(1 for s in want if s[1] >= 0)
    assert n_pairs > 20  # the random tiles exercise pairing, not just singles
