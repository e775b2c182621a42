"""Stimulus and checks for the delta op-level controller (`hw.delta_accel.DeltaAccel`, ``kaleido_daccel``) under
Amaranth's simulator (docs/decisions.md D91).

A case's band-tiles in the model's delta issue order come from `sim.engines.band_stimulus.band_op` (which also
computes, apart from the RTL, each row's expected difference sum from X, X_eff and W); the host words from
`hw.delta_accel_host.op_words`. `run_daccel` writes them through the write port, pulses ``start``, collects every
drained row with its tags (band-tile, row) and its cycle counted from the ``start`` cycle, and counts the cycles
to ``done``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class DaccelRun:
    """What one op through the controller gave: ``rows`` ``{(tile, row): (cycle, words int64 [C])}`` (cycle counted
    from the ``start`` cycle), ``cycles`` (``start`` cycle to ``done`` pulse), ``twice`` the tags drained more than
    once, ``tile_mismatch`` the (cycle, band) pairs where the controller's band-tile number differed from
    ``kaleido_dtop``'s ``b{b}_tile``."""

    rows: dict = field(default_factory=dict)
    cycles: int = -1
    twice: list = field(default_factory=list)
    tile_mismatch: int = 0


def host_tiles(op) -> list[tuple]:
    """`hw.delta_accel_host.op_words`' band-tile list of a `sim.engines.band_stimulus.BandOp`."""
    return [(t.group, t.cb, t.tokens.tolist(), int((~t.partial).sum()), t.slots) for t in op.tiles]


async def load_and_start(ctx, dut, accel, case, op, ports, queues: bool, decisions: bool) -> None:
    """Write one op's host words through ``dut``'s write port (``accel``: the `DeltaAccel` whose buffers they fill,
    ``dut`` itself or the core around it), set its op ports and pulse ``start``: the differences and weights, the
    band-tile list (host path) or, with ``decisions``, the decision codes (`hw.delta_accel_host.dec_words`); the
    op ports are ``ports`` (queues) or ``c_tiles``."""
    from hw.delta_accel_host import SEL_DEC, dec_words, op_words
    from sim.timing.delta_reference import differences

    diffs = differences(case.X, case.grid, case.groups, case.decisions).astype(np.int64)
    words = op_words(accel, diffs, case.W.astype(np.int64), case.groups, [] if queues else host_tiles(op))
    if decisions:
        words += [(SEL_DEC, a, w) for a, w in dec_words(accel, case.decisions)]
    for sel, addr, data in words:
        assert ctx.get(dut.wr_ready)
        ctx.set(dut.wr_valid, 1)
        ctx.set(dut.wr_sel, sel)
        ctx.set(dut.wr_addr, addr)
        ctx.set(dut.wr_data, data)
        await ctx.tick()
    ctx.set(dut.wr_valid, 0)
    for name, value in (ports.items() if queues else [("c_tiles", len(op.tiles))]):
        ctx.set(getattr(dut, name), value)
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)


def run_daccel(cfg, jobs, entries=None, lanes=None, max_cycles=20000, queues=False) -> list[DaccelRun]:
    """Drive one `DeltaAccel` (inline top and macros) through the ops of ``jobs`` (``(case, op)`` pairs) one after
    the other, each loaded, started and run to ``done`` (module docstring); one `DaccelRun` per op.

    ``queues``: the controller with its queues (`hw.delta_queue`, D93): jobs are ``(case, op, ports)`` with
    ``ports`` the op's `hw.delta_accel_host.queue_ports`; the host writes the decision buffer
    (`hw.delta_accel_host.dec_words`) instead of the band-tile list."""
    from amaranth.sim import Simulator

    from hw.delta_accel import LANES, DeltaAccel
    from tests.rtl.compact_bench import unpack_signed

    C, ab, d = cfg.array_cols, cfg.acc_bits, cfg.drain_rows_per_cycle  # noqa: N806
    dut = DeltaAccel(cfg, entries=entries, lanes=lanes or LANES, queues=queues)
    rb = max(1, (dut.brows - 1).bit_length())
    outs = [DaccelRun() for _ in jobs]

    async def run_op(ctx, case, op, out, ports=None):
        await load_and_start(ctx, dut, dut, case, op, ports, queues, decisions=queues)
        cycle = 1
        while not ctx.get(dut.done):
            assert cycle < max_cycles, "the controller did not finish"
            for b in range(cfg.compact_bands):
                out.tile_mismatch += ctx.get(dut.band_tile[b]) != ctx.get(getattr(dut.top, f"b{b}_tile"))
            ov = ctx.get(dut.out_valid)
            if ov:
                tiles, rows, data = ctx.get(dut.out_tile), ctx.get(dut.out_row), ctx.get(dut.out_data)
                for p in range(d):
                    if ov >> p & 1:
                        key = ((tiles >> (24 * p)) & ((1 << 24) - 1), (rows >> (rb * p)) & ((1 << rb) - 1))
                        if key in out.rows:
                            out.twice.append(key)
                        out.rows[key] = (cycle, np.array(unpack_signed(data >> (p * C * ab), ab, C), np.int64))
            await ctx.tick()
            cycle += 1
        out.cycles = cycle
        await ctx.tick()  # the done cycle: idle (wr_ready) from the next

    async def bench(ctx):
        for job, out in zip(jobs, outs, strict=True):
            await run_op(ctx, *job[:2], out, *job[2:])

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return outs
