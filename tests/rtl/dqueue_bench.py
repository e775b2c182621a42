"""Stimulus for the band-tile queues (`hw.delta_queue.DeltaQueue`, ``kaleido_dqueue``) alone under Amaranth's
simulator (docs/decisions.md D93): write the decision buffer (`hw.delta_accel_host.dec_words`), set the op's
``c_*`` ports (`hw.delta_accel_host.queue_ports`), pulse ``start`` and take every descriptor the cycle it is
valid (``out_ready`` held high), with its cycle (cycle 0 the cycle after ``start``), until ``done``.
"""

from __future__ import annotations


def run_dqueue(cfg, jobs, max_cycles=50000, lanes=None, replay=0, reach=None) -> list[tuple[list[tuple[int, int]], int]]:
    """One `DeltaQueue` (inline macros; ``lanes`` positions a step, default R / B; ``replay`` its descriptor
    buffer's entries, docs/decisions.md D120; ``reach`` its wider scan, D124) through ``jobs`` one after the
    other, each ``(dec, ports)`` (int8 ``[M, G]`` decisions and the `queue_ports` dict): per job ``(descs, done)``,
    ``descs`` the ``(cycle, word)`` of every descriptor taken, ``done`` the cycle ``done`` pulsed."""
    from amaranth.sim import Simulator

    from hw import discard
    from hw.delta_accel import DeltaAccel
    from hw.delta_accel_host import dec_words
    from hw.delta_queue import DeltaQueue

    acc = discard(DeltaAccel(cfg))
    dut = DeltaQueue(acc, lanes=lanes, replay=replay, reach=reach)
    outs = []

    async def bench(ctx):
        for dec, ports in jobs:
            for addr, word in dec_words(acc, dec):
                ctx.set(dut.wr_valid, 1)
                ctx.set(dut.wr_addr, addr)
                ctx.set(dut.wr_data, word)
                await ctx.tick()
            ctx.set(dut.wr_valid, 0)
            for name, value in ports.items():
                ctx.set(getattr(dut, name), value)
            ctx.set(dut.out_ready, 1)
            ctx.set(dut.start, 1)
            await ctx.tick()
            ctx.set(dut.start, 0)
            cycle, descs = 0, []
            while not ctx.get(dut.done):
                assert cycle < max_cycles, "the queues did not finish"
                if ctx.get(dut.out_valid):
                    descs.append((cycle, ctx.get(dut.out_desc)))
                await ctx.tick()
                cycle += 1
            outs.append((descs, cycle))
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return outs
