"""Stimulus and checks for the compact organisation's RTL (`hw.compact_array.CompactTop`, `hw.combine`) under
Amaranth's simulator.

The band-tiles of a case, their slots, expected drained words and the cycle model's schedule come from
`sim.engines.band_stimulus.band_op` (shared with the compiled band engine, `sim.engines.verilator_band`); the
band each band-tile runs on is the RTL's choice (``b{b}_tile``), compared with `sim.timing.compact.band_schedule`
(the controller that would present the operands is not RTL yet, docs/decisions.md D65).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Slot:
    """One band input cycle's values (`hw.compact_array.ctop_signature`'s ``b{b}_*`` ports, unpacked)."""

    x_a: list
    x_b: list
    mode: list
    w_a: list
    w_b: list
    first: int
    last: int
    rows: int


@dataclass
class BandTileRun:
    """One band-tile of one column block: its group, column block, tokens by row, whether each row is
    PARTIAL, the expected (``out``, ``out_m``) per row and column, and the model's schedule."""

    group: int
    n0: int
    tokens: list
    partial: list
    slots: list[Slot]
    want: np.ndarray  # int64 [rows, C, 2]
    band: int = -1
    first: int = -1
    last: int = -1
    got_last: int = -1
    got_band: int = -1
    port: int = -1
    drained: list = field(default_factory=list)
    drained_at: list = field(default_factory=list)  # per drained row: (cycle, port)


def build_runs(case, cfg, fw: int | None = None, s: int = 1) -> list[BandTileRun]:
    """Band-tiles of ``case`` in issue order with slots, expected words and schedule
    (`sim.engines.band_stimulus.band_op`: the organisation's issue order, ``fw`` frames per chunk, default all;
    ``s`` column blocks per group, delta)."""
    from sim.engines.band_stimulus import band_op

    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s)
    runs = []
    for t, b, f, ll in zip(op.tiles, op.band, op.first, op.last, strict=True):
        slots = [Slot(t.x_a[i].tolist(), t.x_b[i].tolist(), t.mode[i].tolist(), t.w_a[i].tolist(), t.w_b[i].tolist(),
                      int(i == 0), int(i == t.slots - 1), len(t.tokens)) for i in range(t.slots)]
        runs.append(BandTileRun(t.group, t.n0, t.tokens.tolist(), t.partial.tolist(), slots, t.want,
                                int(b), int(f), int(ll)))
    return runs


def run_top(cfg, runs, x_unsigned):
    """Drive `hw.compact_array.CompactTop` (inline PEs; compact or delta by the config): each band runs the
    band-tile its ``b{b}_tile`` names (the RTL's band choice), slot by slot as ``ready`` allows; each drained row
    is appended to its run's ``drained`` (``[C, words]``); returns the cycle of the last drained row."""
    from amaranth.sim import Simulator

    from hw.compact_array import CompactTop, band_geometry, drain_words
    from hw.compact_pe import is_delta
    from hw.pe import X_BITS

    C, ab = cfg.array_cols, cfg.acc_bits  # noqa: N806
    nw, xb = len(drain_words(cfg)), X_BITS if is_delta(cfg) else 8
    geo = band_geometry(cfg)
    brows, d, B = geo["brows"], cfg.drain_rows_per_cycle, cfg.compact_bands  # noqa: N806
    rb = max(1, (cfg.array_rows - 1).bit_length())
    dut = CompactTop(cfg, pe="inline")
    mine = [[s for s, (band, _p, _ph) in enumerate(geo["seqs"]) if band == b] for b in range(B)]
    fifo = collections.defaultdict(collections.deque)  # (port, band) -> band-tiles draining there, in order
    end = []

    async def bench(ctx):
        if not is_delta(cfg):
            ctx.set(dut.x_unsigned, int(x_unsigned))
        pos = [[-1, 0] for _ in range(B)]  # per band: the band-tile it runs (kaleido_ctop's b{b}_tile), slot index
        ended = [0] * B
        left = sum(len(r.tokens) for r in runs)
        cycle = 0
        while left:
            assert cycle < 50 * (sum(len(r.slots) for r in runs) + 10), "the array stopped draining"
            for b in range(B):
                ti = ctx.get(getattr(dut, f"b{b}_tile"))
                if ti != pos[b][0]:
                    pos[b] = [ti, 0]
                si = pos[b][1]
                live = ti < len(runs)
                ctx.set(getattr(dut, f"b{b}_valid"), int(live))
                if live:
                    s = runs[ti].slots[si]
                    for f in ("x_a", "x_b"):
                        ctx.set(getattr(dut, f"b{b}_{f}"), pack(getattr(s, f), xb))
                    ctx.set(getattr(dut, f"b{b}_mode"), pack(s.mode, 2))
                    ctx.set(getattr(dut, f"b{b}_w_a"), pack(s.w_a, 8))
                    ctx.set(getattr(dut, f"b{b}_w_b"), pack(s.w_b, 8))
                    ctx.set(getattr(dut, f"b{b}_first"), s.first)
                    ctx.set(getattr(dut, f"b{b}_last"), s.last)
                    ctx.set(getattr(dut, f"b{b}_rows"), s.rows)
            ov = ctx.get(dut.out_valid)
            if ov:
                rows_word, data = ctx.get(dut.out_row), ctx.get(dut.out_data)
                for p in range(d):
                    if not ov >> p & 1:
                        continue
                    row = (rows_word >> (p * rb)) & ((1 << rb) - 1)
                    band, i = divmod(row, brows)
                    run = fifo[(p, band)][0]
                    assert i == len(run.drained), f"port {p} band {band}: row {i} drained out of order"
                    lanes = unpack_signed(data >> (p * C * nw * ab), ab, nw * C)
                    run.drained.append(np.array(lanes, dtype=np.int64).reshape(C, nw))
                    run.drained_at.append((cycle, p))
                    left -= 1
                    if len(run.drained) == len(run.tokens):
                        fifo[(p, band)].popleft()
                    end.append(cycle)
            for b in range(B):
                ti, si = pos[b]
                if ti < len(runs) and ctx.get(getattr(dut, f"b{b}_ready")):
                    run = runs[ti]
                    if si == len(run.slots) - 1:
                        run.got_last, run.got_band = cycle, b
                        port = geo["seqs"][mine[b][ended[b] % len(mine[b])]][1]
                        fifo[(port, b)].append(run)
                        run.port = port
                        ended[b] += 1
                    pos[b][1] = si + 1
            await ctx.tick()
            cycle += 1

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return end[-1]


def pack(values, bits: int) -> int:
    """Pack signed or unsigned integers into one unsigned word, lane i at bits ``[bits i, bits (i + 1))``."""
    out, mask = 0, (1 << bits) - 1
    for i, v in enumerate(values):
        out |= (int(v) & mask) << (bits * i)
    return out


def unpack_signed(word: int, bits: int, n: int) -> list[int]:
    """``n`` signed ``bits``-bit lanes of ``word`` (lane i at bits ``[bits i, bits (i + 1))``)."""
    out = []
    for i in range(n):
        v = (word >> (bits * i)) & ((1 << bits) - 1)
        out.append(v - (1 << bits) if v >> (bits - 1) else v)
    return out


def combine_program(case, runs, cfg):
    """The partial-sum SRAM writes and the combine commands of ``case`` (`hw.combine.Combine`), per column
    block: ``[(n0, writes, commands)]`` with writes ``(port, addr, word)`` (each drained row at the next
    free address of the staging macro of the port it left on) and commands (dicts of the ``c_*`` ports)
    in raster order, per token its groups in order. State word of (position p, group g): ``p x
    partial_regs + g`` (one pool: the cases' H W <= R); a ``w``/``h`` REUSE run points its successor at
    the chain's last written word (`hw.combine` docstring); ``keep`` = `successor_reads`."""
    from hw.combine import combine_sizes
    from sim.cost.compact_actions import successor_reads

    F, H, W = case.grid  # noqa: N806
    G, P, ab = len(case.groups), cfg.partial_regs, cfg.acc_bits  # noqa: N806
    assert H * W <= cfg.array_rows
    depth = combine_sizes(cfg)["stage_depth"]
    keep = successor_reads(case.decisions, case.grid, case.groups)
    out = []
    for n0 in sorted({r.n0 for r in runs}):
        writes, where, nxt = [], {}, collections.Counter()
        for r in runs:
            if r.n0 != n0:
                continue
            for t, got in zip(r.tokens, r.drained, strict=True):
                assert nxt[r.port] < depth
                writes.append((r.port, nxt[r.port], pack(got.reshape(-1), ab)))
                where[(t, r.group)] = (r.port, nxt[r.port])
                nxt[r.port] += 1
        head = {}  # (token, group) -> state word holding its chain's state
        cmds = []
        for t in range(case.X.shape[0]):
            f, h, w = (int(v) for v in np.unravel_index(t, case.grid))
            p = h * W + w
            for g, (_k0, _k1, ax) in enumerate(case.groups):
                dec = int(case.decisions[t, g])
                own = p * P + g
                nb = {"f": (f - 1, h, w), "h": (f, h - 1, w), "w": (f, h, w - 1)}[ax]
                nbt = int(np.ravel_multi_index(nb, case.grid)) if min(nb) >= 0 else -1
                raddr = head.get((nbt, g), own) if ax != "f" else own
                head[(t, g)] = raddr if dec == 2 else own
                port, saddr = where.get((t, g), (0, 0))
                cmds.append({"c_dec": dec, "c_port": port, "c_saddr": saddr, "c_raddr": raddr, "c_waddr": own,
                             "c_keep": int(keep[t, g]), "c_first": int(g == 0), "c_last": int(g == G - 1)})
        out.append((n0, writes, cmds))
    return out


def check_emission(cfg, folder):
    """Emit the banded organisation's files of `hw.rtl.emit` for ``cfg`` (compact or delta; ``kaleido_top.v``
    brings ``kaleido_delay``) into ``folder / "a"``, then assert: the same bytes a second time, Verilator -Wall
    clean per file and over the whole hierarchy from the array top and the combine unit."""
    from hw import discard
    from hw.combine import COMBINE_MODULE_NAME, Combine
    from hw.compact_array import column_module_name, top_module_name
    from hw.compact_pe import is_delta, pe_module_name
    from hw.delta_combine import DCOMBINE_MODULE_NAME, DeltaCombine
    from hw.lint import lint_folder
    from hw.rtl import emit
    from hw.sram import macro_name

    comb, unit = (DCOMBINE_MODULE_NAME, DeltaCombine) if is_delta(cfg) else (COMBINE_MODULE_NAME, Combine)
    names = (pe_module_name(cfg), column_module_name(cfg), top_module_name(cfg), comb, "kaleido_top",
             "kaleido_column", "kaleido_pe", *(macro_name(*mc) for mc in discard(unit(cfg)).macros()))
    paths = emit(cfg, folder / "a", only=names)
    assert sorted(p.name for p in paths) == sorted(f"{n}.v" for n in names)
    for q in emit(cfg, folder / "b", only=names[:4]):
        assert q.read_bytes() == (folder / "a" / q.name).read_bytes(), q.name
    runs = lint_folder(folder / "a", full=True, jobs=2, tops=(top_module_name(cfg), comb))
    assert all(ok for _, ok, _, _ in runs), [(label, out[:400]) for label, ok, _, out in runs if not ok]
    assert {f"{top_module_name(cfg)}.v whole hierarchy", f"{comb}.v whole hierarchy"} <= {label for label, *_ in runs}


async def output_commands(ctx, dut, cmds, C: int, ab: int):  # noqa: N803
    """Testbench step shared by the combine units (`hw.combine`, `hw.delta_combine`): one command of ``cmds``
    (dicts of ``c_*`` ports) per cycle with ``c_valid``, then 3 idle cycles; returns the ``y_data`` rows
    (``C`` signed ``ab``-bit values each) and, per row, its cycle counted from the first command."""
    rows, at = [], []
    for cycle in range(len(cmds) + 3):
        ctx.set(dut.c_valid, int(cycle < len(cmds)))
        if cycle < len(cmds):
            for k, v in cmds[cycle].items():
                ctx.set(getattr(dut, k), v)
        if ctx.get(dut.y_valid):
            rows.append(unpack_signed(ctx.get(dut.y_data), ab, C))
            at.append(cycle)
        await ctx.tick()
    return rows, at


def simulate_combine(dut, load, cmds, C: int, ab: int):  # noqa: N803
    """Run a combine unit ``dut`` under Amaranth's simulator: the async ``load(ctx)`` (what precedes the output
    commands), then `output_commands`; returns the rows (int64 ``[n, C]``) and their cycles."""
    from amaranth.sim import Simulator

    out = {}

    async def bench(ctx):
        await load(ctx)
        out["rows"], out["at"] = await output_commands(ctx, dut, cmds, C, ab)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return np.array(out["rows"], dtype=np.int64), out["at"]
