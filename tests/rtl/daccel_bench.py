"""Stimulus and checks for the delta op-level controller (`hw.delta_accel.DeltaAccel`, ``kaleido_daccel``) under
Amaranth's simulator (docs/decisions.md D91).

A case's band-tiles in the model's delta issue order come from `sim.engines.band_stimulus.band_op` (which also
computes, apart from the RTL, each row's expected difference sum from X, X_eff and W); the host words from
`hw.delta_accel_host.op_words`. `run_daccel` writes them through the write port, pulses ``start``, collects every
drained row with its tags (band-tile, row) and its cycle counted from the ``start`` cycle, and counts the cycles
to ``done``. The host writes, the ``start`` pulse, the run to ``done`` and the simulator set-up are shared with
the compact controller's bench (tests/rtl/caccel_bench.py): `write_words`, `start_op`, `collect`, `simulate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class DaccelRun:
    """What one op through the controller gave: ``rows`` ``{(tile, row): (cycle, words int64 [C])}`` (cycle counted
    from the ``start`` cycle), ``cycles`` (``start`` cycle to ``done`` pulse), ``twice`` the tags drained more than
    once, ``tile_mismatch`` the (cycle, band) pairs where the controller's band-tile number differed from
    ``kaleido_dtop``'s ``b{b}_tile``, ``port`` the drain port each tag left on, ``staging_reads`` the staging
    macros' read enables counted every cycle from the cycle after ``start`` to the ``done`` cycle (D105)."""

    rows: dict = field(default_factory=dict)
    cycles: int = -1
    twice: list = field(default_factory=list)
    tile_mismatch: int = 0
    port: dict = field(default_factory=dict)
    staging_reads: int = 0


def staging_words(case, op, lanes: int) -> int:
    """The staging reads D105's rule gives one op, counted from its band-tiles apart from the RTL: each band-tile
    row's ``ceil(|g| / lanes)`` words read once (its group's width ``|g|``, ``case.groups``)."""
    return sum(len(t.tokens) * -(-(case.groups[t.group][1] - case.groups[t.group][0]) // lanes) for t in op.tiles)


def host_tiles(op) -> list[tuple]:
    """`hw.delta_accel_host.op_words`' band-tile list of a `sim.engines.band_stimulus.BandOp`."""
    return [(t.group, t.cb, t.tokens.tolist(), int((~t.partial).sum()), t.slots) for t in op.tiles]


async def write_words(ctx, dut, words) -> None:
    """Write ``(sel, addr, data)`` words through ``dut``'s write port, one a cycle (``dut`` idle: ``wr_ready``)."""
    for sel, addr, data in words:
        assert ctx.get(dut.wr_ready)
        ctx.set(dut.wr_valid, 1)
        ctx.set(dut.wr_sel, sel)
        ctx.set(dut.wr_addr, addr)
        ctx.set(dut.wr_data, data)
        await ctx.tick()
    ctx.set(dut.wr_valid, 0)


async def start_op(ctx, dut, ports: dict) -> None:
    """Set ``dut``'s op ports (``{port name: value}``) and pulse ``start`` for one cycle."""
    for name, value in ports.items():
        ctx.set(getattr(dut, name), value)
    ctx.set(dut.start, 1)
    await ctx.tick()
    ctx.set(dut.start, 0)


async def collect(ctx, cfg, dut, out: DaccelRun, max_cycles: int, per_cycle=None) -> None:
    """Run ``dut`` (a `DeltaAccel` or `hw.compact_accel.CompactAccel`, just started) to ``done``: each cycle
    ``per_cycle(ctx)`` (a bench's counts), the band-tile numbers compared with the top's, every drained row into
    ``out.rows`` with its cycle (from the ``start`` cycle) and ``out.port``. A row's words: C signed ``acc_bits``
    words per drain port (int64 ``[C]``), or the top's words per column (compact: ``out`` and ``out_m``, int64
    ``[C, 2]``), as ``out_data``'s width says."""
    from tests.rtl.compact_bench import unpack_signed

    C, ab, d = cfg.array_cols, cfg.acc_bits, cfg.drain_rows_per_cycle  # noqa: N806
    nw = len(dut.out_data) // (d * C * ab)  # words per column
    rb = max(1, (dut.brows - 1).bit_length())
    cycle = 1
    while True:
        out.staging_reads += sum(ctx.get(p.re) for p in dut.staging_ports)
        if ctx.get(dut.done):
            break
        assert cycle < max_cycles, "the controller did not finish"
        if per_cycle is not None:
            per_cycle(ctx)
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
                    words = np.array(unpack_signed(data >> (p * C * nw * ab), ab, nw * C), np.int64)
                    out.rows[key] = (cycle, words if nw == 1 else words.reshape(C, nw))
                    out.port[key] = p
        await ctx.tick()
        cycle += 1
    out.cycles = cycle
    await ctx.tick()  # the done cycle: idle (wr_ready) from the next


def simulate(dut, jobs, outs, run_op) -> list:
    """Run ``await run_op(ctx, job, out)`` for each job and its out, one after the other, on ``dut`` under
    Amaranth's simulator (a 1 MHz clock); returns ``outs``."""
    from amaranth.sim import Simulator

    async def bench(ctx):
        for job, out in zip(jobs, outs, strict=True):
            await run_op(ctx, job, out)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return outs


async def load_and_start(ctx, dut, accel, case, op, ports, queues: bool, decisions: bool, dec_high=None,
                         stage=None) -> list:
    """Write one op's host words through ``dut``'s write port (``accel``: the `DeltaAccel` whose buffers they fill,
    ``dut`` itself or the core around it), set its op ports and pulse ``start``: the differences and weights, the
    band-tile list (host path) or, with ``decisions``, the decision codes (`hw.delta_accel_host.dec_words`); the
    op ports are ``ports`` (queues) or ``c_tiles``. ``dec_high``: per token a value written above its decision
    codes (bit 2 G up; ``kaleido_dcore``'s token chunks, D104). ``stage``: ``(segment, sliced)`` of a `StagedOp`
    (a controller built with ``stage=True``, D96): the host words are `hw.delta_accel_host.stage_op_words`'. Returns
    the descriptors left to write while the op runs (a controller with a descriptor ring, D134:
    `hw.delta_accel_host.ring_split`; else none)."""
    from hw.delta_accel_host import SEL_DEC, dec_words, op_words, ring_split, stage_op_words
    from sim.timing.delta_reference import differences

    diffs = differences(case.X, case.grid, case.groups, case.decisions).astype(np.int64)
    if stage is not None:
        words = stage_op_words(accel, diffs, case.W.astype(np.int64), case.groups, host_tiles(op), *stage)
    else:
        words = op_words(accel, diffs, case.W.astype(np.int64), case.groups, [] if queues else host_tiles(op))
    if decisions:
        hi = 2 * accel.cfg.partial_regs
        words += [(SEL_DEC, a, w | (int(dec_high[a]) << hi if dec_high is not None else 0))
                  for a, w in dec_words(accel, case.decisions)]
    words, during = ring_split(accel, words)
    await write_words(ctx, dut, words)
    await start_op(ctx, dut, ports if queues else {"c_tiles": len(op.tiles)})
    return during


def run_daccel(cfg, jobs, entries=None, lanes=None, max_cycles=20000, queues=False) -> list[DaccelRun]:
    """Drive one `DeltaAccel` (inline top and macros) through the ops of ``jobs`` (``(case, op)`` pairs) one after
    the other, each loaded, started and run to ``done`` (module docstring); one `DaccelRun` per op.

    ``queues``: the controller with its queues (`hw.delta_queue`, D93): jobs are ``(case, op, ports)`` with
    ``ports`` the op's `hw.delta_accel_host.queue_ports`; the host writes the decision buffer
    (`hw.delta_accel_host.dec_words`) instead of the band-tile list."""
    from hw.delta_accel import LANES, DeltaAccel

    dut = DeltaAccel(cfg, entries=entries, lanes=lanes or LANES, queues=queues)

    async def run_op(ctx, job, out):
        case, op, *ports = job
        await load_and_start(ctx, dut, dut, case, op, ports[0] if ports else None, queues, decisions=queues)
        await collect(ctx, cfg, dut, out, max_cycles)

    return simulate(dut, jobs, [DaccelRun() for _ in jobs], run_op)


@dataclass
class StagedOp:
    """One op as the staged controller runs it (docs/decisions.md D96): ``case`` with its groups (D88's slices
    when ``sliced``; decisions of each slice's group), ``op`` its band-tiles in the model's staged issue order
    (D84's chunk-major order, slice by slice within a segment), ``segment`` int64 ``[T]``, ``fw`` and ``s`` the
    model's plan, ``orig`` the case as given (for Y)."""

    case: object
    op: object
    segment: np.ndarray
    sliced: bool
    fw: int
    s: int
    orig: object


def staged_op(case, cfg, chunk_major: bool = True, s: int | None = None) -> StagedOp:
    """`StagedOp` of a `tests.rtl.cases.Case` on a delta config with a weight stage: the plan, slices, order and
    segments of `sim.timing.delta_accel.staged_tiles` (checked equal to it in the tests), the band-tiles from
    `sim.engines.band_stimulus.band_op` (values computed apart from the RTL). ``chunk_major=False`` (D68's order,
    which the model never stages) with ``s`` column blocks per group: a stress case, a segment per run of one chunk
    and column block (and slice) in that order."""
    from dataclasses import replace

    from sim.engines.band_stimulus import BandOp, band_op, issue_order
    from sim.timing import delta as rules
    from sim.timing.compact import compact_tiles

    K, N = case.W.shape  # noqa: N806
    n_cb = -(-N // cfg.array_cols)
    fw, s_plan = rules.plan(cfg, case.grid[0], K, N, False, "op", case.groups)
    s = s or s_plan
    c2, sliced = case, False
    if not rules.stages(cfg, K, case.groups):
        slices, cols, _held = rules.stage_slices(cfg, case.groups)
        c2, sliced = replace(case, groups=slices, decisions=np.ascontiguousarray(case.decisions[:, cols])), True
    op = band_op(c2.X, c2.W, c2.grid, c2.groups, c2.decisions, cfg, fw, s, chunk_major=chunk_major)
    _t, chunk = compact_tiles(np.ascontiguousarray(c2.decisions, dtype=np.int8), c2.grid, c2.groups, cfg, fw, 4,
                              chunks=True)
    keys = [(int(chunk[t]), cb) for t, cb in issue_order(chunk, n_cb, cfg, s, chunk_major)]
    seg = np.cumsum([i == 0 or keys[i] != keys[i - 1] for i in range(len(keys))]) - 1
    tiles = op.tiles
    if sliced:
        grp = np.array([t.group for t in tiles], dtype=np.int64)
        idx = np.lexsort((grp, seg)) if chunk_major else np.arange(len(tiles))  # D88: slice by slice (`slice_order`)
        tiles = [tiles[i] for i in idx]
        g2, s2 = grp[idx], seg[idx]
        seg = np.cumsum(np.r_[True, (np.diff(s2) != 0) | (np.diff(g2) != 0)]) - 1 if len(idx) else s2
        op = BandOp(tiles, op.band, op.first, op.last, op.cycles)
    return StagedOp(c2, op, np.asarray(seg, dtype=np.int64), sliced, fw, s, case)


@dataclass
class StagedRun(DaccelRun):
    """A `DaccelRun` with the stage's counts: ``stage_reads`` (cycles the stage's macros read a word),
    ``fill_reads`` (weight-buffer reads), ``fill_writes`` (stage half-word writes), ``deferred`` (reads the
    deferred stage read skipped, D100)."""

    stage_reads: int = 0
    fill_reads: int = 0
    fill_writes: int = 0
    deferred: int = 0
    ring_waits: int = 0
    pending: bool = False


def run_staged(cfg, jobs, entries=None, lanes=None, max_k=None, max_cycles=40000, early=True,
               defer=None, ring=None, issue_gate=False, host_every=1) -> list[StagedRun]:
    """`run_daccel` for the controller built with ``stage=True`` (``max_k`` its channel capacity; ``early`` its
    early band choice, D99, else ``kaleido_dtop``'s own, D96; ``defer`` its deferred stage read, D100, default
    ``early``; ``ring`` its descriptor ring's entries, D134, default the config's): ``jobs`` are
    `StagedOp`; the host writes `hw.delta_accel_host.stage_op_words` (with a ring: the first ``ring`` descriptors
    before ``start``, the rest while it runs, one a cycle whenever ``wr_ready``, `hw.delta_accel_host.ring_split`);
    the stage's reads and the fills are counted each cycle from ``start`` to ``done``, and with a ring the cycles
    the drained gate held a take (``ring_waits``: the gather idle, its staging entry free, the descriptor written,
    band-tile n - ring not drained). ``issue_gate``: the controller built with D126's issue gate (its read-ahead),
    ``issue_ok`` held at 1 (no core holds a take); ``host_every``: with a ring the host offers a descriptor only every
    that many cycles (a host behind the gather: the read-ahead's repeated read, D134)."""
    from hw.delta_accel import LANES, DeltaAccel
    from hw.delta_accel_host import SEL_DESC, ring_split, stage_op_words
    from sim.timing.delta_reference import differences

    dut = DeltaAccel(cfg, entries=entries, lanes=lanes or LANES, max_k=max_k, stage=True, early=early,
                     defer=defer, ring=ring, issue_gate=issue_gate)

    async def run_op(ctx, job, out):
        case = job.case
        diffs = differences(case.X, case.grid, case.groups, case.decisions).astype(np.int64)
        before, during = ring_split(dut, stage_op_words(dut, diffs, case.W.astype(np.int64), case.groups,
                                                        host_tiles(job.op), job.segment, job.sliced))
        await write_words(ctx, dut, before)
        await start_op(ctx, dut, {"c_tiles": len(job.op.tiles), **({"issue_ok": 1} if issue_gate else {})})
        left = list(during)
        tick = [0]

        def count(ctx):
            out.stage_reads += ctx.get(dut.stage_re)
            out.fill_reads += ctx.get(dut.fill_re)
            out.fill_writes += ctx.get(dut.fill_we)
            if dut.defer:
                out.deferred += ctx.get(dut.stage_defer)
            if dut.ring:  # the host keeps the ring filled; a write set now is taken at the tick if wr_ready
                if left and out.pending:
                    left.pop(0)
                out.pending = False
                tick[0] += 1
                if left and tick[0] % host_every == 0:
                    ctx.set(dut.wr_valid, 1)
                    ctx.set(dut.wr_sel, SEL_DESC)
                    ctx.set(dut.wr_data, left[0][2])
                    out.pending = bool(ctx.get(dut.wr_ready))
                else:
                    ctx.set(dut.wr_valid, 0)
                out.ring_waits += ctx.get(dut.ring_wait)

        await collect(ctx, cfg, dut, out, max_cycles, count)

    return simulate(dut, jobs, [StagedRun() for _ in jobs], run_op)
