"""Stimulus for the similarity pass in front of the delta / compact controllers (`hw.delta_front.DeltaFront`,
docs/decisions.md D103) under Amaranth's simulator, and seeded operands with every decision.

`smooth_x` draws X whose neighbours are near along every axis (a random walk with occasional jumps), so a pass
at a small theta gives REUSE, PARTIAL and COMPUTE. `run_front` writes X through the front's write port
(`hw.compact_accel_host.x_words`, the layout the host writes), sets the op ports, pulses ``start`` and records
every word the front writes through its output port with its cycle (from the ``start`` cycle, 0) until ``done``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


def smooth_x(seed: int, grid, K: int, unsigned: bool, jump: float = 0.15) -> np.ndarray:  # noqa: N803
    """int8 or uint8 ``[F H W, K]``: per channel a base, each token its predecessor along the raster order or its
    ``f``/``h`` neighbour plus noise of -2 .. 2, a fraction ``jump`` of (token, channel) values redrawn."""
    rng = np.random.default_rng(seed)
    F, H, W = grid  # noqa: N806
    lo, hi = (0, 256) if unsigned else (-128, 128)
    X = np.zeros((F, H, W, K), dtype=np.int64)  # noqa: N806
    X[0, 0, 0] = rng.integers(lo, hi, size=K)
    for f in range(F):
        for h in range(H):
            for w in range(W):
                if f == h == w == 0:
                    continue
                src = X[f - 1, h, w] if f else (X[f, h - 1, w] if w == 0 else X[f, h, w - 1])
                v = src + rng.integers(-2, 3, size=K)
                redraw = rng.random(K) < jump
                v[redraw] = rng.integers(lo, hi, size=int(redraw.sum()))
                X[f, h, w] = v
    X = np.clip(X, lo, hi - 1).reshape(F * H * W, K)  # noqa: N806
    if unsigned:
        X[0, :2] = [0, 255]
        return X.astype(np.uint8)
    X[0, :2] = [-128, 127]
    return X.astype(np.int8)


@dataclass
class FrontRun:
    """What one pass gave: ``words`` ``{(sel, addr): (cycle, data)}``, ``twice`` the (sel, addr) written more than
    once, ``cycles`` the ``done`` cycle from ``start``, ``overrun`` the flag at ``done``."""

    words: dict = field(default_factory=dict)
    twice: list = field(default_factory=list)
    cycles: int = -1
    overrun: int = 0


def run_front(front, jobs, max_cycles: int = 20000) -> list[FrontRun]:
    """Run ``front`` (inline macros) through the ops of ``jobs`` one after the other, each ``(X, grid, groups,
    theta, x_unsigned)``: X written, ports set, ``start``, the output port recorded to ``done`` (module docstring).
    The output port is always ready (the controller idle)."""
    from amaranth.sim import Simulator

    from hw.compact_accel_host import x_words
    from hw.delta_front import front_ports

    outs = [FrontRun() for _ in jobs]

    async def bench(ctx):
        ctx.set(front.o_ready, 1)
        for (X, grid, groups, theta, xu), out in zip(jobs, outs, strict=True):  # noqa: N806
            for addr, word in x_words(front.acc, X, groups):
                assert ctx.get(front.wr_ready)
                ctx.set(front.wr_valid, 1)
                ctx.set(front.wr_addr, addr)
                ctx.set(front.wr_data, word)
                await ctx.tick()
            ctx.set(front.wr_valid, 0)
            for name, value in (front_ports(front, grid, groups, theta) | {"x_unsigned": int(xu)}).items():
                ctx.set(getattr(front, name), value)
            ctx.set(front.start, 1)
            await ctx.tick()
            ctx.set(front.start, 0)
            cycle = 1
            while not ctx.get(front.done):
                assert cycle < max_cycles, "the front did not finish"
                if ctx.get(front.o_valid):
                    key = (ctx.get(front.o_sel), ctx.get(front.o_addr))
                    if key in out.words:
                        out.twice.append(key)
                    out.words[key] = (cycle, ctx.get(front.o_data))
                await ctx.tick()
                cycle += 1
            out.cycles, out.overrun = cycle, ctx.get(front.overrun)
            await ctx.tick()

    sim = Simulator(front)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return outs
