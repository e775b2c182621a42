"""Stimulus for the compact op-level controller (`hw.compact_accel.CompactAccel`, ``kaleido_caccel``) under
Amaranth's simulator (docs/decisions.md D97).

A case's band-tiles in compact's issue order come from `sim.engines.band_stimulus.band_op` (which also computes,
apart from the RTL, each row's expected ``out`` / ``out_m`` from X and W); the host words from
`hw.compact_accel_host.op_words`. `run_caccel` writes them through the write port, pulses ``start``, collects every
drained row with its tags (band-tile, row) and its cycle counted from the ``start`` cycle, counts the X buffer's
reads and the cycles to ``done``, with the delta controller's bench's host writes, ``start`` pulse and run loop
(`tests.rtl.daccel_bench.write_words`, `start_op`, `collect`, `simulate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# host_tiles: `hw.compact_accel_host.op_words`' band-tile list is the delta host's
from tests.rtl.daccel_bench import DaccelRun, collect, host_tiles, simulate, start_op, write_words


@dataclass
class CaccelRun(DaccelRun):
    """What one op through the controller gave: `tests.rtl.daccel_bench.DaccelRun`'s fields, ``rows`` ``{(tile,
    row): (cycle, words int64 [C, 2])}`` (``out``, ``out_m``; ``tile_mismatch`` against ``kaleido_ctop``), with
    ``x_reads`` X-buffer bank reads, ``w_reads`` weight-buffer reads (cycles with the weight port's read enable, both
    banks read; D109) and ``descs`` the descriptors the gather took, by band-tile number."""

    x_reads: int = 0
    w_reads: int = 0
    descs: dict = field(default_factory=dict)


def run_caccel(cfg, jobs, entries=None, lanes=None, max_cycles=20000, queues=False) -> list[CaccelRun]:
    """Drive one `CompactAccel` (inline top and macros) through the ops of ``jobs`` one after the other, each
    loaded, started and run to ``done`` (module docstring); one `CaccelRun` per op. A job is ``(case, op)``, or
    ``(case, op, fw)`` with ``queues`` (the controller forms the band-tiles from the decision codes, ``fw`` frames
    per chunk)."""
    from hw.compact_accel import CompactAccel
    from hw.compact_accel_host import SEL_DEC, dec_words, op_words, queue_ports
    from hw.delta_accel import LANES

    dut = CompactAccel(cfg, entries=entries, lanes=lanes or LANES, queues=queues)

    async def run_op(ctx, job, out):
        case, op, fw = (*job, None)[:3]
        words = op_words(dut, case.X, case.W, case.groups, [] if queues else host_tiles(op))
        if queues:
            words += [(SEL_DEC, a, w) for a, w in dec_words(dut, case.decisions)]
        await write_words(ctx, dut, words)
        n_cb = -(-case.W.shape[1] // cfg.array_cols)
        ports = (queue_ports(dut, case.grid, case.groups, fw or case.grid[0], n_cb) if queues
                 else {"c_tiles": len(op.tiles)})
        await start_op(ctx, dut, ports | {"x_unsigned": int(case.x_unsigned)})

        def count(ctx):
            out.x_reads += sum(ctx.get(r) for r in dut.x_re)
            out.w_reads += ctx.get(dut.w_re)
            if ctx.get(dut.desc_valid):
                out.descs[ctx.get(dut.desc_tile)] = ctx.get(dut.desc)

        await collect(ctx, cfg, dut, out, max_cycles, count)

    return simulate(dut, jobs, [CaccelRun() for _ in jobs], run_op)


def desc_fields(acc, word: int) -> dict:
    """A descriptor word's fields (`hw.delta_accel.DeltaAccel.fields`), ``tokens`` as a list of ``R / B``."""
    out, pos = {}, 0
    for name, bits in acc.fields:
        out[name] = (word >> pos) & ((1 << bits) - 1)
        pos += bits
    out["tokens"] = [(out["tokens"] >> (acc.tb * i)) & ((1 << acc.tb) - 1) for i in range(acc.brows)]
    return out


def runs_from_tags(acc, groups, run: CaccelRun) -> list:
    """The drained rows placed from the controller's outputs alone (its tags and the descriptors it showed on
    ``desc``), as `tests.rtl.compact_bench.BandTileRun` objects the combine program takes: per band-tile number its
    group (the descriptor's ``xoff`` among the op's group layout, `hw.compact_accel_host.group_layout`), column
    block (``cb``), row tokens and the rows' words and port."""
    from hw.compact_accel_host import group_layout
    from tests.rtl.compact_bench import BandTileRun

    of_xoff = {xo: g for g, (xo, _, _) in enumerate(group_layout(acc, groups))}
    out = []
    for n in sorted(run.descs):
        f = desc_fields(acc, run.descs[n])
        rows = sorted(i for (t, i) in run.rows if t == n)
        assert rows == list(range(f["nrows"])), n
        ports = {run.port[(n, i)] for i in rows}
        assert len(ports) == 1, n  # a band-tile drains through one port
        r = BandTileRun(of_xoff[f["xoff"]], f["cb"] * acc.cfg.array_cols, f["tokens"][:f["nrows"]],
                        [i >= f["ncomp"] for i in rows], [], None, port=ports.pop())
        r.drained = [run.rows[(n, i)][1] for i in rows]
        out.append(r)
    return out


@dataclass
class CcoreRun:
    """What one op through ``kaleido_ccore`` gave: ``y`` ``{(cb, token): (cycle, values int64 [C])}`` (cycle counted
    from the ``start`` cycle), ``twice`` rows handed out more than once, ``cycles`` to ``done``; the partial-sum
    SRAM's word accesses on the combine's ports (per way): ``staged`` staging writes, ``state_writes`` (a command
    with ``c_keep`` that is not REUSE), ``state_reads`` (every command)."""

    y: dict = field(default_factory=dict)
    twice: list = field(default_factory=list)
    cycles: int = -1
    staged: int = 0
    state_writes: int = 0
    state_reads: int = 0


def run_ccore(cfg, jobs, max_cycles=20000, theta=None, **accel) -> list[CcoreRun]:
    """Drive one `hw.compact_core.CompactCore` (inline) through the ops of ``jobs`` (``(case, op, fw)``) one after
    the other: the host words and decision codes, the queues' and the core's op ports, ``start``; every Y row with
    its tags and cycle until ``done``. ``theta``: the core built with its similarity front (D103): no decision codes
    written (the front decides from the X words), its bounds from ``theta`` (`hw.delta_front.front_ports`)."""
    from hw.compact_accel_host import SEL_DEC, dec_words, op_words, queue_ports
    from hw.compact_core import CompactCore, core_ports
    from hw.delta_front import front_ports
    from hw.pe import REUSE
    from tests.rtl.compact_bench import unpack_signed

    C, ab = cfg.array_cols, cfg.acc_bits  # noqa: N806

    dut = CompactCore(cfg, front=theta is not None, **accel)
    acc = dut.accel

    async def run_op(ctx, job, out):
        case, op, fw = (*job, None)[:3]
        words = op_words(acc, case.X, case.W, case.groups, [])
        if theta is None:
            words += [(SEL_DEC, a, w) for a, w in dec_words(acc, case.decisions)]
        await write_words(ctx, dut, words)
        n_cb = -(-case.W.shape[1] // C)
        ports = queue_ports(acc, case.grid, case.groups, fw or case.grid[0], n_cb)
        per_group = np.bincount([t.group for t in op.tiles], weights=op.rows, minlength=len(case.groups))
        ports |= core_ports(dut, case.grid, case.groups, case.W.shape[1], per_group)
        if theta is not None:
            fp = front_ports(dut.front_unit, case.grid, case.groups, theta)
            ports |= {"c_b1": fp["c_b1"], "c_b2": fp["c_b2"]}
        await start_op(ctx, dut, ports | {"x_unsigned": int(case.x_unsigned)})
        cycle = 1
        while not ctx.get(dut.done):
            assert cycle < max_cycles, "the core did not finish"
            cmb = dut.combine
            out.staged += bin(ctx.get(cmb.st_we)).count("1")
            valid, keep, dec = ctx.get(cmb.c_valid), ctx.get(cmb.c_keep), ctx.get(cmb.c_dec)
            for w in range(dut.ways):  # a command per way
                if valid >> w & 1:
                    out.state_reads += 1
                    out.state_writes += bool(keep >> w & 1) and (dec >> 2 * w) & 3 != REUSE
            if ctx.get(dut.y_valid):
                key = (ctx.get(dut.y_cb), ctx.get(dut.y_token))
                if key in out.y:
                    out.twice.append(key)
                out.y[key] = (cycle, np.array(unpack_signed(ctx.get(dut.y_data), ab, C), np.int64))
            await ctx.tick()
            cycle += 1
        out.cycles = cycle
        await ctx.tick()

    return simulate(dut, jobs, [CcoreRun() for _ in jobs], run_op)
