"""Stimulus for the delta controller with its combine stage (`hw.delta_core.DeltaCore`, ``kaleido_dcore``,
docs/decisions.md D95) under Amaranth's simulator: `run_dcore` writes an op's host words (`hw.delta_accel_host`:
differences, weights, band-tile list, decisions), sets its `hw.delta_core.core_ports`, pulses ``start`` and
collects every ``Y`` row with its tags and cycle (counted from the ``start`` cycle), the controller's drained rows'
cycles, ``done`` and the combine unit's macro and lane-register enables.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

#: The combine unit's output-command ports the bench records.
CMD_PORTS = ("c_first", "c_last", "c_direct", "c_has", "c_daddr", "c_reg", "c_sram", "c_raddr", "c_waddr", "c_keep",
             "c_hold", "c_cols")


def lane_commands(ctx, comb, V: int) -> list[dict]:  # noqa: N803
    """The output commands of one cycle on `hw.delta_combine.DeltaCombine`'s V > 1 lanes (docs/decisions.md D112):
    per valid lane its `CMD_PORTS`, its slice of the per-lane ports, the step's shared ones."""
    valid, out = ctx.get(comb.c_valid), []
    for lane in range(V):
        if valid >> lane & 1:
            cmd = {}
            for k in CMD_PORTS:
                port = getattr(comb, k)
                v, width = ctx.get(port), len(port)
                if k not in ("c_first", "c_last", "c_sram", "c_cols"):
                    width //= V
                    v = v >> lane * width & ((1 << width) - 1)
                cmd[k] = v
            out.append(cmd)
    return out


@dataclass
class DcoreRun:
    """One op: ``rows`` ``{(token, cb): (cycle, int64 [C])}``, ``twice`` tags seen more than once, ``row_cycles``
    the cycles ``kaleido_daccel`` handed out rows (one entry per row), ``accel_done`` its ``done`` cycle,
    ``cycles`` the core's ``done`` cycle, ``overflow``, ``counts`` (as `tests.rtl.delta_bench.run_dcombine`),
    ``held`` the cycles the array hold kept ``kaleido_daccel`` still (``run`` low, docs/decisions.md D123)."""

    rows: dict = field(default_factory=dict)
    twice: list = field(default_factory=list)
    row_cycles: list = field(default_factory=list)
    accel_done: int = -1
    cycles: int = -1
    overflow: int = 0
    held: int = 0
    acc: list = field(default_factory=list)
    cmds: list = field(default_factory=list)
    counts: dict = field(default_factory=lambda: dict.fromkeys(("st_re", "st_we", "ps_re", "ps_we", "lane_we", "fifo_we",
                                                                "fifo_re"), 0))


def run_dcore(cfg, jobs, fifo=None, queues=True, max_cycles=20000, load=None, front=False, **accel) -> list[DcoreRun]:
    """Drive one `DeltaCore` (inline) through ``jobs`` (``(case, op, fused, ports, (seg, fw, s))``: a
    `tests.test_rtl_delta` case, its `sim.engines.band_stimulus.band_op`, carried values in the state SRAM, with
    ``queues`` the queues' ports, `hw.delta_accel_host.queue_ports`, and the walk's segments,
    `hw.delta_core.core_ports`) one after the other; without ``queues`` the host writes the band-tile list.
    ``load``: ``await load(ctx, dut, case, op, ports, chunks)`` writes the op's words (each token's chunk,
    `sim.timing.delta_core.token_chunks`, among them) and pulses ``start`` instead of
    `tests.rtl.daccel_bench.load_and_start` (the core built with ``front``: raw X, tests/test_rtl_dfront.py).
    A core built with the weight stage (``stage=True`` among ``accel``, docs/decisions.md D119): ``ports`` is the
    op's ``(segment, sliced)`` (`tests.rtl.daccel_bench.StagedOp`), the host writes the staged controller's words
    (`hw.delta_accel_host.stage_op_words`) and the decisions with the chunks; with its descriptor ring (``ring``,
    D134) the descriptors past the ring's while the core runs, one a cycle whenever ``wr_ready``."""
    from amaranth.sim import Simulator

    from hw.delta_core import DeltaCore, chunk_words, core_ports
    from tests.rtl.compact_bench import unpack_signed
    from tests.rtl.daccel_bench import load_and_start

    C, ab = cfg.array_cols, cfg.acc_bits  # noqa: N806
    dut = DeltaCore(cfg, fifo=fifo, queues=queues, front=front, **accel)
    outs = [DcoreRun() for _ in jobs]
    cur = {}

    async def bench(ctx):
        for (case, op, fused, ports, (seg, fw, s)), out in zip(jobs, outs, strict=True):
            cur["out"] = None
            for name, value in core_ports(dut, case.grid, case.groups, case.W.shape[1], fused, seg, fw, s).items():
                ctx.set(getattr(dut, name), value)
            # the core's output walk reads the decisions, so they are written on the host-list path too; each
            # token's chunk with them (the walk's segments, D104)
            chunks = chunk_words(dut, case.grid, fw)
            if load is None:
                staged = dut.accel.stage
                during = await load_and_start(ctx, dut, dut.accel, case, op, None if staged else ports, queues,
                                              decisions=True, dec_high=chunks, stage=ports if staged else None)
            else:
                during = []
                await load(ctx, dut, case, op, ports, chunks)
            cur["out"] = out
            cycle = 1
            while not ctx.get(dut.done):
                assert cycle < max_cycles, "the core did not finish"
                if during:  # the descriptor ring (D134): the rest of the list, one a cycle whenever wr_ready
                    ctx.set(dut.wr_valid, 1)
                    ctx.set(dut.wr_sel, during[0][0])
                    ctx.set(dut.wr_data, during[0][2])
                    if ctx.get(dut.wr_ready):
                        during.pop(0)
                else:
                    ctx.set(dut.wr_valid, 0)
                if ctx.get(dut.combine.a_valid):
                    out.acc.append((ctx.get(dut.combine.a_first), ctx.get(dut.combine.a_addr)))
                if dut.out_ways == 1 and ctx.get(dut.combine.c_valid):
                    out.cmds.append({k: ctx.get(getattr(dut.combine, k)) for k in CMD_PORTS})
                elif dut.out_ways > 1:  # one command per valid lane, in lane order (D112)
                    out.cmds += lane_commands(ctx, dut.combine, dut.out_ways)
                run = ctx.get(dut.run) if dut.array_hold else 1  # a held cycle: nothing leaves (D123)
                ov = ctx.get(dut.accel.out_valid) if run else 0
                out.row_cycles += [cycle] * bin(ov).count("1")
                if run and ctx.get(dut.accel.done):
                    out.accel_done = cycle
                out.held += not run
                yv = ctx.get(dut.y_valid)
                for lane in range(dut.out_ways):  # lane l: token y_token + l (D112)
                    if yv >> lane & 1:
                        key = (ctx.get(dut.y_token) + lane, ctx.get(dut.y_cb))
                        if key in out.rows:
                            out.twice.append(key)
                        word = ctx.get(dut.y_data) >> lane * C * ab
                        out.rows[key] = (cycle, np.array(unpack_signed(word, ab, C), np.int64))
                await ctx.tick()
                cycle += 1
            out.cycles = cycle
            out.overflow = ctx.get(dut.overflow)
            cur["out"] = None
            await ctx.tick()

    async def count(ctx):
        pr = dut.combine.probes
        nb = len(pr["st_re"])
        async for _clk, _rst, *v in ctx.tick().sample(*pr["st_re"], *pr["st_we"], pr["ps_re"], pr["ps_we"],
                                                       pr["lane_we"], dut.probes["fifo_we"], dut.probes["fifo_re"]):
            out = cur.get("out")
            if out is None:
                continue
            out.counts["fifo_we"] += bin(v[-2]).count("1")  # the row FIFO's bank writes and reads (D118)
            out.counts["fifo_re"] += bin(v[-1]).count("1")
            out.counts["st_re"] += sum(bin(x).count("1") for x in v[:nb])  # a bit per position bank (D112)
            out.counts["st_we"] += sum(bin(x).count("1") for x in v[nb:2 * nb])
            out.counts["ps_re"] += bin(v[2 * nb]).count("1")  # one bit per position bank with lanes (D112)
            out.counts["ps_we"] += bin(v[2 * nb + 1]).count("1")
            out.counts["lane_we"] += bin(v[2 * nb + 2]).count("1")

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_process(count)
    sim.run()
    return outs
