"""The similarity unit and the effective-value mux under Amaranth's simulator, against the golden model."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from algo.reuse.golden import decide, theta_bounds
from hw.config import load_config
from hw.similarity import EffectiveValue, SimilarityUnit
from sim.timing.stream import pack_lanes, unpack_lanes

CFG = load_config("tiny-8x8")
LANES = 4


def neighbour(t: int, grid, axis: str) -> int:
    F, H, W = grid  # noqa: N806
    f, h, w = t // (H * W), (t // W) % H, t % W
    if axis == "f":
        return t - H * W if f else -1
    if axis == "h":
        return t - W if h else -1
    return t - 1 if w else -1


def beats(x_row, nb_vals, k0: int, k1: int):
    """Split one token's group into beats of LANES lanes: yields (first, last, n, x lanes, nb lanes)."""
    for s in range(k0, k1, LANES):
        n = min(LANES, k1 - s)
        xs = np.zeros(LANES, np.int64)
        nbs = np.zeros(LANES, np.int64)
        xs[:n] = x_row[s:s + n]
        nbs[:n] = nb_vals[s - k0:s - k0 + n]
        yield s == k0, s + n == k1, n, xs, nbs


def problem(unsigned: bool, seed: int):
    rng = np.random.default_rng(seed)
    grid = (3, 2, 3)
    M, K = 18, 15  # noqa: N806
    lo, hi = (0, 255) if unsigned else (-128, 127)
    base = rng.integers(lo, hi + 1, size=(1, K))
    X = np.clip(base + rng.integers(-5, 6, size=(M, K)), lo, hi)  # noqa: N806
    X[rng.random((M, K)) < 0.1] = lo
    X = X.astype(np.uint8 if unsigned else np.int8)  # noqa: N806
    groups = [(0, 6, "f"), (6, 11, "w"), (11, 15, "h")]  # widths 6, 5, 4: short last beats
    return X, grid, groups


@pytest.mark.parametrize("unsigned", [False, True])
def test_decisions_sad_and_effective_values_equal_golden(unsigned):
    X, grid, groups = problem(unsigned, 3 if unsigned else 4)  # noqa: N806
    theta = (2.0, 4.0)
    dec, x_eff, sad = decide(X, grid, groups, theta, 4, return_sad=True)
    b1, b2 = theta_bounds(theta, [k1 - k0 for k0, k1, _ in groups])
    assert {0, 1, 2} <= set(np.unique(dec).tolist())  # every decision kind occurs
    dut = SimilarityUnit(CFG, lanes=LANES)
    eff = EffectiveValue(LANES)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim_eff = Simulator(eff)
    checked = []

    async def bench(ctx):
        ctx.set(dut.x_unsigned, int(unsigned))
        for t in range(X.shape[0]):
            for gi, (k0, k1, axis) in enumerate(groups):
                nb_t = neighbour(t, grid, axis)
                nb_vals = x_eff[nb_t, k0:k1] if nb_t >= 0 else np.zeros(k1 - k0, np.int16)
                ctx.set(dut.b1, int(b1[gi]))
                ctx.set(dut.b2, int(b2[gi]))
                ctx.set(dut.no_nb, int(nb_t < 0))
                for first, last, n, xs, nbs in beats(X[t], nb_vals, k0, k1):
                    ctx.set(dut.valid, 1)
                    ctx.set(dut.first, int(first))
                    ctx.set(dut.last, int(last))
                    ctx.set(dut.x, pack_lanes(xs, 8))
                    ctx.set(dut.nb, pack_lanes(nbs, 9))
                    ctx.set(dut.mask, (1 << n) - 1)
                    await ctx.tick()
                ctx.set(dut.valid, 0)
                assert ctx.get(dut.dec_valid) == 1
                assert ctx.get(dut.dec) == dec[t, gi], (t, gi)
                if nb_t >= 0:
                    assert ctx.get(dut.sad) == sad[t, gi], (t, gi)
                checked.append((t, gi, int(dec[t, gi]), nb_vals))

    sim.add_testbench(bench)
    sim.run()
    assert len(checked) == X.shape[0] * len(groups)

    async def bench_eff(ctx):
        ctx.set(eff.x_unsigned, int(unsigned))
        for t, gi, d, nb_vals in checked:
            k0, k1, _ = groups[gi]
            for s, (_, _, n, xs, nbs) in zip(range(k0, k1, LANES), beats(X[t], nb_vals, k0, k1), strict=True):
                ctx.set(eff.dec, d)
                ctx.set(eff.x, pack_lanes(xs, 8))
                ctx.set(eff.nb, pack_lanes(nbs, 9))
                got = unpack_lanes(ctx.get(eff.x_eff), LANES, 9)[:n]
                assert np.array_equal(got, x_eff[t, s:s + n]), (t, gi, s)

    sim_eff.add_testbench(bench_eff)
    sim_eff.run()
