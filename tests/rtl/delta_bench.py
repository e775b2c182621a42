"""Stimulus and checks for the delta combine unit (`hw.delta_combine.DeltaCombine`, docs/decisions.md D73, D79):
the controller's command program for a case's drained rows (addresses, class flags), which is not RTL yet, and a
bench that runs it and counts the macros' and lane register's enables.

Program (`dcombine_program`), per axis class a (`sim.timing.delta.classes`) of ``case.groups``:

- accumulate: the drained rows in the order they left the array (cycle, then port), row (t, group g, column
  block cb) into ``D`` at ``(a M + t) n_cb + cb`` with a the class of g;
- output: per pool P (R raster positions of a frame, `sim.timing.compact` pools), per frame, per column block,
  the pool's tokens in raster order, per token one command per class (``c_first``/``c_last`` on its first and
  last). A token's ``w`` neighbour inside the pool (`sim.cost.compact_actions.in_pool`) is the walk's previous
  token: read from the lane register (``c_reg``), written there by the neighbour (``c_hold``); every other
  neighbour is read from the carried store at its address, written there where
  `sim.cost.compact_actions.delta_successor_reads` and the successor is not in the pool (``c_keep``).
- carried store addresses. Partial-sum state buffer (``fused`` False): ``((a F + f) HW + p) n_cb + cb`` (p the
  position in frame f; every token its own word: a ``w`` class's value at a pool boundary is read by the next
  pool, after the pool's later frames). State SRAM (``fused``: every class there, the model's rule for a fused score op), per column
  bank, the regions of `sim.timing.delta.state_need_bytes`: an ``f`` class ``R`` words per column block (position
  in the pool), a ``w`` class ``F`` (its frame: the pool's last position, read by the next pool's first), an
  ``h`` class ``F W`` (frame and image column: the row above).
"""

from __future__ import annotations

import numpy as np

from algo.reuse.golden import COMPUTE, REUSE
from sim.cost.compact_actions import delta_successor_reads, in_pool
from sim.timing.compact_reference import _neighbour
from sim.timing.delta import classes
from tests.rtl.compact_bench import output_commands, pack


def dcombine_program(case, runs, cfg, fused: bool = False):
    """``(accumulate, output)`` command lists (dicts of ``a_*`` / ``c_*`` ports) of ``case`` (module docstring);
    ``runs``: its band-tiles with their drained rows (`tests.rtl.compact_bench.run_top`)."""
    F, H, W = case.grid  # noqa: N806
    R, C, ab = cfg.array_rows, cfg.array_cols, cfg.acc_bits  # noqa: N806
    M, N = case.X.shape[0], case.W.shape[1]  # noqa: N806
    n_cb, hw = -(-N // C), H * W
    cls = classes(case.groups)
    of_group = {g: a for a, (_ax, idx) in enumerate(cls) for g in idx}
    rows = sorted(((at, port, t, r.group, r.n0 // C, got) for r in runs
                   for (at, port), t, got in zip(r.drained_at, r.tokens, r.drained, strict=True)), key=lambda v: v[:2])
    acc, seen = [], set()
    for _at, _p, t, g, cb, got in rows:
        key = (of_group[g], t, cb)
        acc.append({"a_first": int(key not in seen), "a_addr": (key[0] * M + t) * n_cb + cb,
                    "a_data": pack(got[:, 0], ab)})
        seen.add(key)
    per = []  # per class: (axis, direct, has, reads, keep, hold)
    for axis, idx in cls:
        d = case.decisions[:, idx]
        direct = (d == COMPUTE).all(axis=1)
        near = in_pool(case.grid, axis, R)
        succ = delta_successor_reads(d, case.grid, axis)
        succ_near = np.zeros(M, bool)
        if axis == "w":
            succ_near[:-1] = near[1:]
        per.append((axis, direct, (d != REUSE).any(axis=1), near, succ & ~succ_near, succ & succ_near))

    def store(axis, a, t, cb):
        f, p = divmod(t, hw)
        if not fused:
            return ((a * F + f) * hw + p) * n_cb + cb
        if axis == "f":
            return (p % R) * n_cb + cb
        if axis == "w":
            return (R + f) * n_cb + cb
        return (R + F + f * W + p % W) * n_cb + cb

    out = []
    for pool in range(0, hw, R):
        for f in range(F):
            for cb in range(n_cb):
                for p in range(pool, min(pool + R, hw)):
                    t = f * hw + p
                    for a, (axis, direct, has, near, keep, hold) in enumerate(per):
                        nb = t if direct[t] else _neighbour(t, axis, case.grid)
                        out.append({"c_first": int(a == 0), "c_last": int(a == len(per) - 1),
                                    "c_direct": int(direct[t]), "c_has": int(has[t]),
                                    "c_daddr": (a * M + t) * n_cb + cb, "c_reg": int(near[t] and not direct[t]),
                                    "c_sram": int(fused), "c_raddr": store(axis, a, nb, cb),
                                    "c_waddr": store(axis, a, t, cb), "c_keep": int(keep[t]), "c_hold": int(hold[t]),
                                    "c_cols": min(C, N - cb * C), "_token": t, "_cb": cb})
    return acc, out


def run_dcombine(cfg, acc, out, sel=1):
    """Drive `hw.delta_combine.DeltaCombine` (inline macros): the accumulate commands into D buffer ``sel``, then
    the output commands from it (``c_sel`` flipped, as at a chunk's end). Returns ``(rows, at, counts)``: the
    output rows (int64 ``[n, C]``), per row its cycle counted from the first output command, and the enables
    counted over the output commands: ``st_re``/``st_we`` (state-SRAM column-bank accesses, one per value),
    ``ps_re``/``ps_we`` (partial-sum state-buffer words) and ``lane_we`` (lane-register values written)."""
    from amaranth.sim import Simulator

    from hw.delta_combine import DeltaCombine

    C, ab = cfg.array_cols, cfg.acc_bits  # noqa: N806
    dut = DeltaCombine(cfg)
    cmds = [{k: v for k, v in c.items() if not k.startswith("_")} for c in out]
    counts = dict.fromkeys(("st_re", "st_we", "ps_re", "ps_we", "lane_we"), 0)
    res = {}

    async def bench(ctx):
        ctx.set(dut.c_sel, sel)
        for cmd in acc:
            ctx.set(dut.a_valid, 1)
            for k, v in cmd.items():
                ctx.set(getattr(dut, k), v)
            await ctx.tick()
        ctx.set(dut.a_valid, 0)
        await ctx.tick()  # the last accumulate's write
        ctx.set(dut.c_sel, 1 - sel)
        res["rows"], res["at"] = await output_commands(ctx, dut, cmds, C, ab)

    async def count(ctx):  # every cycle, the enables of the macros and the lane register
        pr = dut.probes
        nb = len(pr["st_re"])
        async for _clk, _rst, *v in ctx.tick().sample(*pr["st_re"], *pr["st_we"], pr["ps_re"], pr["ps_we"],
                                                       pr["lane_we"]):
            counts["st_re"] += sum(v[:nb])
            counts["st_we"] += sum(v[nb:2 * nb])
            counts["ps_re"] += v[2 * nb]
            counts["ps_we"] += v[2 * nb + 1]
            counts["lane_we"] += bin(v[2 * nb + 2]).count("1")

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.add_process(count)
    sim.run()
    return np.array(res["rows"], dtype=np.int64), res["at"], counts
