"""Simulate a trace on an accelerator configuration: decisions, tiles, cycles, utilization.

For every op of the trace (and every batch index: heads of ``qk``/``pv``), the decisions come from
the golden model (`algo.reuse.golden.decide`, with the op's theta and the trace's b_msb) for exact traces,
or from the trace itself for decision traces (``thetas[theta_index]``; `algo.trace`), the dispatcher
(`sim.timing.dispatch`) turns each tile's decisions into cycle slots, and the cycle model
(`sim.timing.cycle_model`) times the tile sequence. The dense baseline is the same array with reuse off
and raster tiling (``ceil(M/R) * ceil(N/C)`` tiles of K slots), under the same overlap rules.

Ops run one after another, each from an empty pipeline (no overlap between ops in this version).
PE utilization (docs/spec.md §4) = useful MAC-equivalents / (R * C * cycles), where a COMPUTE
channel counts 1, a PARTIAL channel 1/2 and a REUSE channel 0, for each of the N outputs.
Every result also carries ``no_dispatcher_cycles`` and ``no_dispatcher_pe_utilization``: the same
decisions without the dispatcher (raster position order, no channel pairing; `sim.timing.dispatch`), the
paper's "with vs without the data dispatcher" comparison.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import replace

import numpy as np

from algo.reuse.chunked import op_decisions
from algo.reuse.golden import COMPUTE, PARTIAL
from algo.trace import OpRecord, Trace, TraceError, packed_length, validate_groups
from hw.config import AcceleratorConfig
from sim.cost.actions import FUSED_PAIRS
from sim.cost.energy import EnergyModel
from sim.cost.tiling import (
    DISPATCHER_STAT_KEYS,
    TiledDecisions,
    dispatcher_stats,
    group_code_counts,
    tile_pass,
)
from sim.plan import OpPlan, plan_op
from sim.results import RESULTS_FORMAT, RESULTS_VERSION, OpActions, OpMemory, OpResult, OpTiming
from sim.timing import delta as delta_rules
from sim.timing.attention import fused_memory, fused_pairs
from sim.timing.compact import (
    CompactError,
    band_cycles,
    band_rows,
    band_schedule,
    band_tile_tokens,
    chunk_frames,
    combine_adds,
    combine_stall,
    compact_tiles,
    paired_tiles,
)
from sim.timing.compact_accel import _tile_rounds, op_port
from sim.timing.cycle_model import op_cycles_tiled
from sim.timing.delta_core import core_out_ways, core_seg_local, queue_scan
from sim.timing.delta_core import core_ways as dcore_ways
from sim.timing.dispatch import position_order
from sim.timing.memory import fold_bytes, fold_shortfall, op_memory


class SimError(ValueError):
    """The trace cannot run on this configuration (unsupported b_msb, too many tokens, ...)."""


#: Shape relations between the ops of one (step, block) that every attention and FFN obeys:
#: (op a, dim of a, op b, dim of b, what the dimension is).
_PAIRED_DIMS = (
    ("qk", "N", "pv", "K", "keys"), ("qk", "K", "pv", "N", "head channels d_h"), ("qk", "batch", "pv", "batch", "heads"),
    ("cross_qk", "N", "cross_pv", "K", "text tokens"), ("cross_qk", "batch", "cross_pv", "batch", "heads"),
    ("ffn1", "N", "ffn2", "K", "FFN channels d_ffn"),
)


def check_consistent(trace: Trace) -> None:
    """Reject a trace that contradicts itself, naming both values. Raises `SimError`.

    Checks every op's M against the grid's F*H*W, exact operands ``X [batch, M, K]`` against
    ``W [batch, K, N]``, packed decisions against ``(thetas, batch, ceil(M*G/4))``, the channel
    groups against K, and, within one (step, block), the dimensions attention and FFN ops share
    (`_PAIRED_DIMS`: qk's N = pv's K keys, qk's K = pv's N = d_h, equal heads; cross_qk's N =
    cross_pv's K text tokens; ffn1's N = ffn2's K). `algo.trace.load_trace` checks most of the
    per-op rules on files; this also covers traces built in memory.
    """
    f, h, w = trace.grid
    by_block: dict[tuple[int, int], dict[str, OpRecord]] = {}
    for i, op in enumerate(trace.ops):
        where = f"op {i} ({op.name}, block {op.block}, step {op.step})"
        if op.X is not None:
            xs, ws = tuple(op.X.shape), tuple(op.W.shape) if op.W is not None else None
            if ws is None or len(xs) != 3 or len(ws) != 3:
                raise SimError(f"{where}: X and W must be 3-D [batch, rows, cols], got X {list(xs)} and W "
                               f"{None if ws is None else list(ws)}")
            if xs[0] != ws[0] or xs[2] != ws[1]:
                raise SimError(f"{where}: operand shapes disagree: X {list(xs)} (batch, M, K) vs W {list(ws)} "
                               f"(batch, K, N)")
        elif op.decisions is not None:
            want = (len(op.thetas), op.batch, packed_length(op.M * len(op.groups)))
            if tuple(op.decisions.shape) != want:
                raise SimError(f"{where}: packed decisions have shape {list(op.decisions.shape)} but the op's "
                               f"(thetas, batch, ceil(M*G/4)) is {list(want)}")
        if op.M != f * h * w:
            raise SimError(f"{where}: M = {op.M} tokens but the grid {f}x{h}x{w} holds {f * h * w}")
        try:
            validate_groups([g.as_tuple() for g in op.groups], op.K, f"{where}: ")
        except TraceError as err:
            raise SimError(str(err)) from None
        by_block.setdefault((op.step, op.block), {}).setdefault(op.name, op)
    for (step, block), ops in by_block.items():
        for a, da, b, db, what in _PAIRED_DIMS:
            if a in ops and b in ops:
                va, vb = getattr(ops[a], da), getattr(ops[b], db)
                if va != vb:
                    raise SimError(f"trace contradicts itself in block {block} step {step}: {a} has {da} = {va} "
                                   f"but {b} has {db} = {vb} (both are the {what})")


def check_compatible(trace: Trace, cfg: AcceleratorConfig) -> None:
    """Reject a trace the hardware cannot run, naming the parameter. Raises `SimError`.

    Also runs `check_consistent`, and rejects a config whose input, weight or output SRAM cannot
    hold one fold of an op (`sim.timing.memory.fold_shortfall`), naming the required bytes and the SRAM size.
    """
    check_consistent(trace)
    for op in trace.ops:
        short = fold_shortfall(cfg, op.K)
        if short is not None:
            buf, need, kib = short
            fb = fold_bytes(cfg, op.K)
            raise SimError(
                f"config {cfg.name!r}: the {buf} SRAM ({kib} KiB = {kib * 1024:,} bytes) cannot hold one fold of op "
                f"{op.name} (block {op.block}), which needs {need:,} bytes (fold = {cfg.array_rows} tokens x "
                f"{cfg.array_cols} outputs over {min(op.K, cfg.array_rows)} of K = {op.K} channels: input "
                f"{fb['input']:,}, weight {fb['weight']:,}, output {fb['output']:,} bytes)")
    if trace.b_msb not in cfg.msb_splits:
        raise SimError(
            f"trace b_msb = {trace.b_msb} is not supported by config {cfg.name!r} "
            f"(msb_splits = {list(cfg.msb_splits)})"
        )
    if trace.tokens > cfg.max_tokens:
        raise SimError(f"trace has {trace.tokens} tokens, config {cfg.name!r} max_tokens = {cfg.max_tokens}")
    for op in trace.ops:
        if any(g.axis == "w" for g in op.groups) and trace.grid[2] > cfg.array_rows:
            raise SimError(
                f"op {op.name} (block {op.block}) reuses along w, which needs whole image rows in a tile: "
                f"W = {trace.grid[2]} positions > array_rows = {cfg.array_rows} (docs/decisions.md D4)")
        if op.K > cfg.max_k:
            raise SimError(f"op {op.name} (block {op.block}) has K = {op.K} > max_k = {cfg.max_k}")
        if len(op.groups) > cfg.partial_regs:
            raise SimError(
                f"op {op.name} (block {op.block}) has {len(op.groups)} channel groups > "
                f"partial_regs = {cfg.partial_regs} (spilling to the partial buffer is not modelled yet)"
            )


#: Stall causes in the results (`sim.timing.cycle_model`: drain; `sim.timing.memory`: dram, vector, similarity).
STALL_CAUSES = ("drain", "combine", "dram", "vector", "similarity")
_ROLLUP_SUMS = ("cycles", "dense_cycles", "no_dispatcher_cycles", "total_cycles", "dense_total_cycles",
                "useful_macs", "dense_macs")


def rollup(per_op: list[dict], key: str | None, cfg: AcceleratorConfig) -> dict[str, dict]:
    """Per-op results summed by ``key`` (``"block"`` or ``"step"``; None: all ops under ``"all"``):
    `_ROLLUP_SUMS`, ``stall_cycles`` by cause, ``speedup`` and ``pe_utilization``; keyed by the block
    or step index as a string."""
    out: dict[str, dict] = {}
    for r in per_op:
        g = out.setdefault(str(r[key]) if key else "all", {k: 0 for k in _ROLLUP_SUMS} | {"stall_cycles": {}})
        for k in _ROLLUP_SUMS:
            g[k] += r[k]
        for c, v in r["stall_cycles"].items():
            g["stall_cycles"][c] = g["stall_cycles"].get(c, 0) + v
    rc = cfg.array_rows * cfg.array_cols
    for g in out.values():
        g["speedup"] = g["dense_cycles"] / g["cycles"] if g["cycles"] else 0.0
        g["pe_utilization"] = g["useful_macs"] / (rc * g["cycles"]) if g["cycles"] else 0.0
    return out


def _fractions(counts: np.ndarray) -> dict[str, float]:
    total = counts.sum()
    names = ("compute", "partial", "reuse")
    return {n: (float(counts[i] / total) if total else 0.0) for i, n in enumerate(names)}


def _compact_timing(decs: list[np.ndarray], op: OpRecord, grid, groups, b_msb: int, cfg: AcceleratorConfig,
                    fused: bool) -> dict:
    """The compact organisation's array timing of one op (`sim.timing.compact`): band-tile slots and valid rows
    in issue order over the batch and column blocks, cycles, drain stall, combine stall (``cfg.combine_timing``:
    the model's combine unit or the RTL cores', `_rtl_combine`) and the tiles' counts. The compact organisation's
    band-tiles are timed as its controller runs them (docs/decisions.md D117: `sim.timing.compact_accel.op_port`,
    the list schedule with the queues, the gather and the weight port, `caccel_cycles` less the start cycle; its
    stall counts the word waits with the drain's), the delta organisation's by `band_schedule` (under ``"rtl"`` as
    ``kaleido_daccel_gate`` runs them, its gather and issue gate stepped together with ``kaleido_dcore``'s core, D137:
    `_issued_run`, `sim.timing.delta_core.issue_core`), or with the weight
    stage (a difference-sum buffer and a stage: D85, D88) as ``kaleido_daccel_stage`` runs them (docs/decisions.md
    D121: `_staged_run`, its gather, serial fills, word registers, early band choice and deferred read; cycles the
    controller's ``done`` less the start cycle, as compact's), in every ``combine_timing``; under ``"rtl"`` with its
    issue gate, stepped together with ``kaleido_dcore_stage``'s core (D129: `sim.timing.delta_core.stage_core`).
    ``"core"``: delta under ``combine_timing = "rtl"``, ``kaleido_dcore``'s per-op detail (`issue_core`'s; a staged
    op's from `stage_core`), else None.

    Raises:
        SimError: the partial-sum SRAM cannot hold one frame of the op's partial sums."""
    # the delta organisation's form (sim.timing.delta): one carried value per axis class on every op
    delta = cfg.organisation == "delta"
    score_op = fused and op.name in FUSED_PAIRS
    n_cb = -(-op.N // cfg.array_cols)
    try:
        # a fused score op's scores must be complete per query tile (the softmax follows): one frame per chunk
        if delta:
            fw, s = delta_rules.plan(cfg, grid[0], op.K, op.N, score_op, op.name, groups,  # the chunk's X too (D131)
                                    min(cfg.array_rows, grid[1] * grid[2]), fused and not score_op)
        else:
            fw, s = chunk_frames(cfg, grid[0], op.K, op.N, groups, score_op, op.name), 1
    except CompactError as err:
        raise SimError(str(err)) from None
    seqs, valid, tiles, chunks, segs, adds = [], [], [], [], [], 0
    # kaleido_dcore's accumulate ways (D107, D108): each issued row's way, where the model times the core as built
    ways = dcore_ways(cfg) if delta and cfg.combine_timing == "rtl" else 1
    if delta and cfg.combine_timing == "rtl" and out_ways(cfg) > ways:  # D111: the walk's reads in distinct ways
        raise SimError(f"{cfg.name}: dcore_out_ways = {out_ways(cfg)} exceeds kaleido_dcore's {ways} "
                       "accumulate ways")
    rways = []
    # the RTL walk's commands per token and column block with one way: axis classes (delta), groups (compact)
    n_groups = len(delta_rules.classes(groups)) if delta else len(groups)
    # per issued band-tile of a staged op (`_staged_run`): its group (or slice) and whether it is PAIRED, its gather
    # rounds
    grps, pairs, rnds = [], [], []
    scans = []  # per batch element of an unstaged op under the RTL combine: its queues' steps (D137)
    staged = delta and bool(cfg.diff_sram_kib) and delta_rules.stages(cfg, op.K, groups)  # the weight stage (D85)
    sliced = delta_rules.stage_slices(cfg, groups) if delta and not staged else None  # ... in slices (D88)
    cols = None
    if sliced is not None:
        groups, cols, width = sliced
        staged = True
    # kaleido_dcore_stage's D buffers addressed per segment as built (D125, D132): its rows' ways from the slots
    local = staged and cfg.combine_timing == "rtl" and core_seg_local(cfg)
    for dec in decs:
        dec = dec if cols is None else dec[:, cols]
        t, chunk = compact_tiles(dec, grid, groups, cfg, fw, b_msb, chunks=True)
        chunks.append(chunk)
        if delta and cfg.diff_sram_kib:  # per chunk, its band-tiles for each column block in turn (D84)
            order, seg = delta_rules.chunk_major(chunk, n_cb, s)
            if cols is not None:  # ... and within it slice by slice (D88)
                order, seg = delta_rules.slice_order(order, seg, t[1])
            seqs.append(t[0][order])
            valid.append((t[2] + t[3])[order])
            issued = order
            if staged:  # segments numbered across the batch, in issue order
                segs.append(seg + (segs[-1][-1] + 1 if segs and len(segs[-1]) else 0))
                grps.append(t[1][order])
                pairs.append(paired_tiles(t, groups)[order])
                # each band-tile's gather rounds: its tokens over the difference buffer's R / B banks (D91)
                toks, offs = band_tile_tokens(np.ascontiguousarray(dec, dtype=np.int8), grid[0], grid[1] * grid[2],
                                              cfg.array_rows, band_rows(cfg), fw)
                rnds.append(_tile_rounds(toks, offs, band_rows(cfg))[order])
        elif delta:  # each band-tile issues for the s column blocks of its group in turn (D68)
            seqs.append(delta_rules.issue_order(t[0], n_cb, s))
            valid.append(delta_rules.issue_order(t[2] + t[3], n_cb, s))
            issued = delta_rules.issue_order(np.arange(len(t[0]), dtype=np.int64), n_cb, s)
        if delta and cfg.combine_timing == "rtl":
            rways.append(_row_ways(dec, t[1], issued, grid, groups, cfg, fw, ways, local))
            if not staged:  # kaleido_daccel_gate's gather (D137): each issued band-tile's rounds and channels
                toks, offs = band_tile_tokens(np.ascontiguousarray(dec, dtype=np.int8), grid[0], grid[1] * grid[2],
                                              cfg.array_rows, band_rows(cfg), fw)
                rnds.append(_tile_rounds(toks, offs, band_rows(cfg))[issued])
                grps.append(t[1][issued])
                # ... and its queues' scan (kaleido_dqueue, D93): the steps that emit the band-tiles
                scans.append(queue_scan(dec, grid, cfg.array_rows, band_rows(cfg), fw, n_cb, s,
                                        bool(cfg.diff_sram_kib)))
        if not delta:
            seqs.append(np.tile(t[0], n_cb))
            valid.append(np.tile(t[2] + t[3], n_cb))
        if cfg.combine_timing != "rtl":  # the model's combine unit's work (`combine_stall`; the cost counts its own)
            adds += delta_rules.combine_adds_delta(dec, op.N, groups) if delta else combine_adds(dec, op.N)
        tiles.append(t)
    s_seq = np.concatenate(seqs)
    # a stage buffer holds one slice (D88; the widest slice's half-words) or one column block, group-aligned (D85, D96)
    held, hgroups = (width, None) if cols is not None else (op.K, groups)
    segment = np.concatenate(segs) if staged else None
    stage = ((segment, delta_rules.stage_fill_cycles(cfg, held, hgroups),
              delta_rules.stage_buffers(cfg, held, hgroups)) if staged else (None, 0, 2))
    rows = np.concatenate(valid)
    # compact: kaleido_caccel's schedule, its gather and weight port cycle by cycle (D109), which the RTL equals; its
    # weight buffer's reads are counted on it (`sim.timing.compact_accel.op_port`, D117)
    port = None if delta else op_port(decs, tiles, grid, groups, cfg, fw, n_cb)
    # delta with the stage: kaleido_daccel_stage's schedule, its gather, fills and word registers cycle by cycle
    # (`sim.timing.delta_accel.stage_run`, D121), which the RTL equals; the batch's elements as one run; with the
    # RTL combine gated and with the core (`stage_core`, D129)
    rtl = cfg.combine_timing == "rtl"
    # D88's sliced ops too: kaleido_dcore_stage walks them segment by segment (their slices issue within a (chunk,
    # column block) segment, D119)
    walk = _dcore_segments(chunks, grid, cfg, fw, s, n_cb, n_groups, bool(cfg.diff_sram_kib)) if delta and rtl \
        else None
    if staged:  # with the RTL combine: the controller with its issue gate and the core in one pass (D129)
        port = _staged_run(s_seq, rows, segment, np.concatenate(grps), np.concatenate(pairs),
                           np.concatenate(rnds), groups, cfg, cols is not None,
                           core=(walk, ways, np.concatenate(rways), local, n_groups, fw) if rtl else None)
    elif delta and rtl:  # kaleido_daccel_gate and kaleido_dcore's core in one pass (D137)
        steps = np.cumsum([0] + [q[2] for q in scans])  # the batch's elements' scans one after the other
        queue = (np.concatenate([q[0] + o for q, o in zip(scans, steps, strict=False)]),
                 np.concatenate([q[1] for q in scans]), int(steps[-1]))
        port = _issued_run(s_seq, rows, np.concatenate(grps), np.concatenate(rnds), groups, cfg,
                           (walk, ways, np.concatenate(rways)), queue)
    sched = band_schedule(s_seq, rows, cfg, *stage) if port is None else (port["band"], port["first"], port["last"])
    cycles, stall = band_cycles(s_seq, rows, cfg, *stage, schedule=sched)
    if port is not None and "queue_done" in port:  # `caccel_cycles`: done no earlier than 2 after the queues'
        cycles = max(cycles, port["queue_done"] + 1)
    pools = len(decs) * n_cb * -(-(grid[1] * grid[2]) // cfg.array_rows) * grid[0]
    if rtl:  # the combine stage as the RTL cores are built (D104)
        if delta:  # timed with the controller (D129, D137): kaleido_dcore(_stage)'s done on the array's clock; the
            # back-pressure's keys where it is modelled, as `held_done`'s detail (else `ways_done`'s)
            bp = cfg.dcore_fifo_per_port or cfg.dcore_count_banks
            core = {k: int(port["core"][k]) for k in ("done", "ahead", "bypass")
                    + (("held", "fifo_max", "frozen") if bp else ())}
            comb = max(0, core["done"] - int(cycles))
        else:
            comb, core = _rtl_combine(cfg, sched, rows, cycles, [len(t[0]) for t in tiles], op.M, n_cb,
                                      n_groups), None
    else:
        comb, core = combine_stall(adds, pools, cycles, cfg), None
    return {"s_seq": s_seq, "rows": rows, "cycles": cycles, "drain": stall, "combine": comb,
            "fifo_bypass": None if core is None else core["bypass"], "core": core,
            "chunk_frames": fw, "band_tiles": tiles, "delta": delta, "col_blocks": s,
            "chunks": chunks, "staged": staged, "slices": None if cols is None else (groups, cols),
            "port_weights": None if port is None or delta else port["weights"],
            "port_reads": None if port is None or delta else port["reads"],
            # what the cost charges of kaleido_daccel_stage's run (`sim.cost.compact_actions`, D127)
            "stage_run": {k: port[k] for k in ("reads", "fill_reads")}
            if staged else None,
            # the cycles kaleido_dqueue runs (its banks are read on each, D127): compact's, from the start cycle to
            # its done; the delta controller's queues (on the staged one standing for its host list) for the op
            "queue_cycles": port["queue_done"] + 2 if port is not None and "queue_done" in port else int(cycles) + 1}


def _staged_run(s_seq, rows, segment, group, paired, rounds, groups, cfg: AcceleratorConfig, sliced: bool,
                lanes: int = 32, core: tuple | None = None) -> dict:
    """``kaleido_daccel_stage``'s schedule of one op's band-tiles in issue order (docs/decisions.md D121):
    `sim.timing.delta_accel.stage_run` (the early band choice and the deferred read, as `hw.rtl` builds it) on the
    host's stage fields (`sim.timing.delta_accel.stage_fields` of each band-tile's ``segment``, renumbered from 0 in
    issue order; ``sliced``: D88's slices), ``2 B`` staging entries and ``lanes`` X lanes (`hw.delta_accel.LANES`
    = 32, restated as `sim.cost.controllers.LANES`). ``s_seq``, ``rows``, ``group``, ``paired``, ``rounds``: int
    ``[T]`` per band-tile; cycle 0 the cycle after ``start``. Returns `stage_run`'s dict.

    ``core``: ``(walk, W, row ways, local, A, fw)`` (`_dcore_segments`' walk, the core's accumulate ways, each issued
    row's way, `_row_ways`, whether the D buffers are addressed per segment, `sim.timing.delta_core.core_seg_local`,
    the op's axis classes and frames a chunk):
    the controller with its issue gate and ``kaleido_dcore_stage``'s core stepped together
    (`sim.timing.delta_core.stage_core`, docs/decisions.md D129: ``kaleido_dcore_stage`` on
    ``kaleido_daccel_stage_gate`` as `hw.rtl` builds it), the row FIFO ``dcore_fifo_per_port`` x d entries (0: the
    array never held), ``dcore_count_banks`` count banks (0: as many banks as segments) and the gate's bound: the
    banks, or with ``local`` the op's segment slots where fewer (`_op_slots`, D138's ring: n D buffers of
    ``floor(buffer words / A fw R)`` slots each, at most `hw.delta_core.NB_BANKS`, the core's ``o_slots``; D126,
    D132: as built, no row then waits for the slot's rule); the dict then also has ``"core"``, `stage_core`'s core keys (``done`` counted from
    ``start``, on the array's clock).

    With ``cfg.accel_tile_ring`` (docs/decisions.md D134) both with the descriptor ring's drained gate.

    Raises:
        SimError: a staged op not issued segment by segment; with ``local`` an order that would deadlock the
            segment-local D buffers (`stage_core`'s refusal; none is reachable with the bound at most n)."""
    from sim.timing.delta_accel import stage_fields, stage_run

    seg = np.asarray(segment, dtype=np.int64)
    sg = np.zeros(len(seg), dtype=np.int64)  # renumbered: +1 at each change
    if len(seg) > 1:
        np.cumsum(seg[1:] != seg[:-1], out=sg[1:])
    grp = np.asarray(group, dtype=np.int64)
    f = stage_fields(sg, grp, groups, cfg, sliced)
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    args = (s_seq, rows, widths[grp], rounds, paired, f["seg"], f["sbuf"], f["fcount"], f["saddr"], cfg,
            2 * cfg.compact_bands, lanes)
    ring = cfg.accel_tile_ring  # the descriptor ring's drained gate, where the config builds one (D134)
    if core is None:
        return stage_run(*args, ring=ring)
    from sim.timing.delta_core import core_d_buffers, stage_core

    (tile_seg, seg_len, nb), W, rw, local, A, fw = core  # noqa: N806
    if tile_seg is None:
        raise SimError(f"{cfg.name}: a staged op not issued segment by segment (the stage needs D84's order)")
    banks, n = cfg.dcore_count_banks or max(nb, 1), core_d_buffers(cfg)
    slots = _op_slots(cfg, A, fw) if local else n
    try:
        out = stage_core(*args, tile_seg, rw, seg_len, True, W,
                         cfg.dcore_fifo_per_port * cfg.drain_rows_per_cycle or None,
                         min(banks, slots) if local else banks, n, banks, local=local, slots=slots, ring=ring)
    except ValueError as err:
        raise SimError(f"{cfg.name}: {err}") from None
    out["core"] = {k: out.pop(k) for k in ("done", "ahead", "bypass", "held", "fifo_max", "frozen", "overflow",
                                           "accel_done")}
    return out


def _issued_run(s_seq, rows, group, rounds, groups, cfg: AcceleratorConfig, core: tuple, queue: tuple | None = None,
                lanes: int = 32) -> dict:
    """``kaleido_dcore`` on ``kaleido_daccel_gate`` as one op's band-tiles run on it (docs/decisions.md D137):
    `sim.timing.delta_core.issue_core`, the controller's list schedule (`sim.timing.delta_accel.AccelRun`, ``2 B``
    staging entries as `hw.rtl` builds it, ``lanes`` X lanes, `hw.delta_accel.LANES` = 32 restated as
    `sim.cost.controllers.LANES`) stepped with the core, each take asked of the issue gate, its descriptors from
    ``kaleido_dqueue`` (``queue``: `sim.timing.delta_core.queue_scan`'s steps, as `hw.rtl` builds it; None: from the
    host's list, the read-ahead's freshness: the first take at cycle 1), the row FIFO ``dcore_fifo_per_port`` x d entries (0:
    the array never held), the gate's bound and the count banks ``dcore_count_banks`` (0: as many banks as segments,
    no take held). ``s_seq``, ``rows``, ``group`` (each band-tile's group, an index into ``groups``), ``rounds`` (its
    gather rounds): int ``[T]`` per band-tile in issue order; ``core``: ``(walk, W, row ways)`` as `_staged_run`'s.
    Returns `issue_core`'s dict (``band``, ``first``, ``last``, ``gather``: cycle 0 the cycle after ``start``) with
    the core's keys under ``"core"`` (``done`` counted from ``start``, on the array's clock)."""
    from sim.timing.delta_core import core_d_buffers, issue_core

    (tile_seg, seg_len, nb), W, rw = core  # noqa: N806
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    banks = cfg.dcore_count_banks or max(nb, 1)
    out = issue_core(s_seq, rows, widths[np.asarray(group, dtype=np.int64)], rounds, cfg, 2 * cfg.compact_bands,
                     lanes, tile_seg, rw, seg_len, tile_seg is not None, W,
                     cfg.dcore_fifo_per_port * cfg.drain_rows_per_cycle or None, banks, core_d_buffers(cfg), banks,
                     queue)
    out["core"] = {k: out.pop(k) for k in ("done", "ahead", "bypass", "held", "fifo_max", "frozen", "overflow",
                                           "accel_done")}
    return out


def _op_slots(cfg: AcceleratorConfig, n_classes: int, fw: int) -> int:
    """``kaleido_dcore_stage``'s segment slots for a segment-local op (docs/decisions.md D138; the host's ``o_slots``,
    `hw.delta_core.core_ports`, restated): `sim.timing.delta_core.segment_slots` of the n D buffers
    (`sim.timing.delta_core.core_d_buffers`) of `sim.timing.delta.diff_buffer_words` words against one segment's
    `sim.timing.delta.diff_need_words` (``A fw R`` over the ways), capped at the count banks `hw.delta_core.NB_BANKS`.

    Raises:
        SimError: a segment larger than a D buffer (`plan` sizes ``fw`` so that it fits, D122)."""
    from sim.timing.delta import diff_buffer_words, diff_need_words
    from sim.timing.delta_core import NB_BANKS, core_d_buffers, segment_slots

    try:
        return segment_slots(core_d_buffers(cfg), diff_buffer_words(cfg), diff_need_words(cfg, fw, n_classes),
                             NB_BANKS)
    except ValueError as err:
        raise SimError(f"{cfg.name}: {err}") from None


def _row_ways(dec: np.ndarray, group: np.ndarray, issued: np.ndarray, grid, groups, cfg: AcceleratorConfig,
              fw: int, ways: int, local: bool = False) -> np.ndarray:
    """Each issued row's accumulate way in ``kaleido_dcore`` (docs/decisions.md D107, D108), int64 ``[rows]`` in issue
    order (band-tile by band-tile, each band-tile's rows in drain order): ``(a M + t) mod W`` for token t of axis
    class a (`sim.timing.delta_core.row_ways`), or with ``local`` (segment-local D addresses, D125, D132) ``u mod W``
    of the token's slot u (`sim.timing.delta_core.segment_slot`, ``fw`` the op's frames a chunk), the tokens from
    `sim.timing.compact.band_tile_tokens`. ``dec`` one batch element's decisions, ``group`` its band-tiles' groups,
    ``issued`` the issued band-tiles' indices. int8 (W <= 64): the op's rows are many (qk at 480p: hundreds of
    millions), their ways are small."""
    from sim.timing.compact import band_rows, band_tile_tokens

    F, H, W = grid  # noqa: N806
    M = F * H * W  # noqa: N806
    toks, off = band_tile_tokens(np.ascontiguousarray(dec, dtype=np.int8), F, H * W, cfg.array_rows, band_rows(cfg), fw)
    of_class = np.zeros(len(groups), dtype=np.int64)
    for a, (_ax, idx) in enumerate(delta_rules.classes(groups)):
        of_class[list(idx)] = a
    issued = np.asarray(issued, dtype=np.int64)
    n = off[issued + 1] - off[issued]
    if not n.sum():
        return np.zeros(0, dtype=np.int64)
    start = np.repeat(off[issued] - (np.cumsum(n) - n), n) + np.arange(int(n.sum()), dtype=np.int64)
    if local:
        from sim.timing.delta_core import segment_slot

        return (segment_slot(toks[start], np.repeat(of_class[group[issued]], n), grid, cfg.array_rows, fw)
                % ways).astype(np.int8)
    return ((np.repeat(of_class[group[issued]], n) * M + toks[start]) % ways).astype(np.int8)


def out_ways(cfg: AcceleratorConfig) -> int:
    """``kaleido_dcore``'s output lanes V as the model times them: ``cfg.dcore_out_ways``, or where None the core's
    default (`sim.timing.delta_core.core_out_ways`, docs/decisions.md D113)."""
    return cfg.dcore_out_ways if cfg.dcore_out_ways is not None else core_out_ways(cfg)


def _dcore_segments(chunks: list, grid, cfg: AcceleratorConfig, fw: int, s: int, n_cb: int, n_classes: int,
                    chunk_major: bool) -> tuple:
    """``kaleido_dcore``'s walk (D104) of one op: ``(per issued band-tile its segment ordinal, batch elements one
    after the other, or None where the op is not issued segment by segment; each segment's commands; segments)``.
    ``chunks``: per batch element its band-tiles' chunks (`compact_tiles`); the issue order D84's chunk-major
    (per column-block group, chunk, column block) or D68's (segment by segment only with s = 1); a sliced op
    (D88: ``kaleido_dcore_stage``, D119) too, its slices issued within their segment. A segment's walk cycles are
    its commands, or with
    the output lanes V > 1 (`out_ways`: D111's rule, built as D112's lanes, the default since D113)
    `sim.timing.delta_core.segment_step_counts`'."""
    from sim.timing.delta import column_groups
    from sim.timing.delta_core import segment_base

    F, H, W = grid  # noqa: N806
    R, hw, V = cfg.array_rows, H * W, out_ways(cfg)  # noqa: N806
    nfc, npool = -(-F // fw), -(-hw // R)
    nch = nfc * npool
    seg_len = []  # the walk's order: group, pool, chunk of frames, column block
    for g0 in range(0, n_cb, s):
        for pool in range(npool):
            for fc in range(nfc):
                seg_len += [-(-min(R, hw - pool * R) // V) * (min(F, fc * fw + fw) - fc * fw) * n_classes] \
                    * min(s, n_cb - g0)
    nseg = len(seg_len)
    if not (chunk_major or s == 1 or n_cb == 1):
        return None, np.asarray(seg_len * len(chunks), dtype=np.int64), nseg * len(chunks)
    out = []
    for b, ch in enumerate(chunks):
        ch = np.asarray(ch, dtype=np.int64)
        parts = []
        if chunk_major:
            starts = np.flatnonzero(np.r_[True, np.diff(ch) != 0, True]) if len(ch) else np.zeros(1, np.int64)
            g0 = 0
            for k in column_groups(n_cb, s):
                for a0, a1 in zip(starts[:-1], starts[1:], strict=True):
                    for r in range(k):
                        parts.append(np.full(a1 - a0, segment_base(g0 + r, s, n_cb, nch) + ch[a0] * k))
                g0 += k
        else:
            for cb in range(n_cb):
                parts.append(segment_base(cb, s, n_cb, nch) + ch * min(s, n_cb - cb // s * s))
        out.append(np.concatenate(parts) + b * nseg if parts else np.zeros(0, np.int64))
    return np.concatenate(out).astype(np.int64), np.asarray(seg_len * len(chunks), dtype=np.int64), nseg * len(chunks)


def _rtl_combine(cfg: AcceleratorConfig, sched: tuple, rows: np.ndarray, cycles: int, per_batch: list,
                 M: int, n_cb: int, n_groups: int) -> int:  # noqa: N803
    """Cycles compact's combine stage as built in RTL (``kaleido_ccore``, D104) adds beyond the array's ``cycles``
    (``combine_timing = "rtl"``, docs/decisions.md D104), at least 0: per (batch element, column block) in issue
    order, a walk of ``M`` tokens of ``ceil(G / W)`` commands once the block is whole
    (`sim.timing.compact_accel.core_done`; a block's first descriptor taken 2 cycles before its first slot, the
    gather keeping ahead). From the band schedule ``sched`` (band, first, last per band-tile in issue order) and
    valid rows ``rows``; ``per_batch``: one column block's band-tiles per batch element (issued ``n_cb`` times);
    ``n_groups``: a token's commands per column block on one way (its groups). The delta cores are timed with their
    controllers since D129 (``kaleido_dcore_stage``: `sim.timing.delta_core.stage_core`, `_staged_run`) and D137
    (``kaleido_dcore``: `sim.timing.delta_core.issue_core`, `_issued_run`), their issue holds as built."""
    from sim.timing.compact import drain_reads
    from sim.timing.compact_accel import core_done, core_ways
    from sim.timing.cycle_model import PIPELINE_CYCLES

    band, first, last = sched
    v = np.asarray(rows, dtype=np.int64)
    end = drain_reads(band, last, v, cfg) + cfg.array_cols + PIPELINE_CYCLES  # each band-tile's last row leaves
    nb = len(per_batch) * n_cb
    last_row, first_desc = np.full(nb, -1, dtype=np.int64), np.full(nb, -1, dtype=np.int64)
    off = 0
    for b, tb in enumerate(per_batch):
        for c in range(n_cb):
            if tb:
                last_row[b * n_cb + c] = int(end[off:off + tb].max())
                first_desc[b * n_cb + c] = int(first[off]) - 2
            off += tb
    done = core_done(cycles, M, -(-n_groups // core_ways(cfg)), (last_row, first_desc))
    return max(0, int(done) - int(cycles))


def simulate_op(op: OpRecord, grid, b_msb: int, cfg: AcceleratorConfig, theta_index: int = 0,
                dispatcher: bool = True, tile_like=None, fused: bool = False, plan: OpPlan | None = None) -> OpTiming:
    """Timing and decision statistics of one op (`sim.results.OpTiming`, with the tiled decisions and the
    compact timing the cost stage reads); see the module docstring for definitions.

    ``theta_index`` picks the row of a decision op's stored decisions (ignored for exact ops).
    ``dispatcher=False`` makes the no-dispatcher timing (raster order, no pairing) the primary
    ``cycles``; ``no_dispatcher_cycles`` is reported either way. ``plan``: the op's `sim.plan.OpPlan`
    (None: made here from ``tile_like`` and ``fused``).

    Raises:
        SimError: theta_index out of range for a decision op.
    """
    R, C, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    plan = plan_op(op, grid, cfg, tile_like, fused) if plan is None else plan
    groups, tile_like, fused = plan.groups, plan.tile_like, plan.fused
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    seqs, nd_seqs, decs = [], [], []
    counts = np.zeros(3, dtype=np.int64)  # X elements under COMPUTE, PARTIAL, REUSE
    stored = None
    if op.kind != "exact":
        try:
            stored = op.decisions_for(theta_index)  # int8 [batch, M, G]
        except TraceError as err:
            raise SimError(str(err)) from None
    window, tiling = plan.window, plan.tiling
    hw = grid[1] * grid[2]
    raster = np.arange(hw, dtype=np.int64)
    # One walk over the tiles per tiling gives both the slots per tile (the cycle model's
    # `reuse_slot_sequence`, one column block) and the action statistics (`tile_stats`): the scheduler's
    # order and the matcher's runs are computed once (tests compare with the separate functions).
    for b in range(op.batch):
        dec = stored[b] if stored is not None else op_decisions(op, b, grid, op.theta, b_msb)
        dec = np.ascontiguousarray(dec, dtype=np.int8)
        cc = group_code_counts(dec)
        if dispatcher:  # without it, the no-dispatcher sequence below is the primary one
            order = position_order(dec, grid, tiling, R, True, window)
            stats, seq = tile_pass(dec, grid, groups, R, b_msb, True, tile_like, window, order=order)
            seqs.append(seq)
            nd_seq = tile_pass(dec, grid, groups, R, b_msb, False, tile_like, order=raster, modes=False)[1]
        else:
            stats, nd_seq = tile_pass(dec, grid, groups, R, b_msb, False, tile_like, order=raster)
        nd_seqs.append(nd_seq)
        decs.append(TiledDecisions(dec, stats, dispatcher, cc))
        counts += cc @ widths
    n_cb = plan.n_cb
    nd_seq = np.stack(nd_seqs)
    nd_cycles, nd_stall = op_cycles_tiled(nd_seq, n_cb, R, C, d)
    if dispatcher:
        s_seq = np.stack(seqs)
        cycles, stall = op_cycles_tiled(s_seq, n_cb, R, C, d)
    else:
        s_seq, cycles, stall = nd_seq, nd_cycles, nd_stall
    compact = None
    if cfg.organisation in ("compact", "delta"):  # sim.timing.compact (and .delta): band-tiles, combine unit
        compact = _compact_timing([t.decisions for t in decs], op, grid, groups, b_msb, cfg, fused)
        s_seq, cycles, stall = compact["s_seq"], compact["cycles"], compact["drain"]
        # band-tile slots over the bands, the array-equivalent issue time (sim.report.explain)
        tiles, slots = int(s_seq.size), -(-int(np.maximum(s_seq, 1).sum()) // cfg.compact_bands)
    else:  # s_seq: one column block per batch element, repeated for each of the n_cb column blocks
        tiles, slots = int(s_seq.size) * n_cb, int(np.maximum(s_seq, 1).sum()) * n_cb
    n_dense = -(-op.M // R) * n_cb  # dense_slot_sequence: raster tiles of K slots each, per batch element
    dense_cycles, dense_stall = op_cycles_tiled(np.array([[op.K]]), n_dense * op.batch, R, C, d)
    useful = (counts[COMPUTE] + 0.5 * counts[PARTIAL]) * op.N
    dense_macs = op.batch * op.M * op.K * op.N
    theta = list(op.thetas[theta_index]) if stored is not None else list(op.theta)
    return OpTiming(
        name=op.name, block=op.block, step=op.step, theta=theta,
        batch=op.batch, M=op.M, K=op.K, N=op.N,
        tiles=tiles, slots=slots,
        cycles=cycles, dense_cycles=dense_cycles,
        speedup=dense_cycles / cycles if cycles else 0.0,
        stall_cycles={"drain": stall, "combine": compact["combine"] if compact else 0},
        dense_stall_cycles={"drain": dense_stall, "combine": 0},
        useful_macs=float(useful), dense_macs=dense_macs,
        pe_utilization=float(useful / (R * C * cycles)) if cycles else 0.0,
        dense_pe_utilization=float(dense_macs / (R * C * dense_cycles)) if dense_cycles else 0.0,
        no_dispatcher_cycles=nd_cycles,
        no_dispatcher_pe_utilization=float(useful / (R * C * nd_cycles)) if nd_cycles else 0.0,
        reuse_fraction=_fractions(counts),
        dispatcher_stats=dispatcher_stats([t.stats for t in decs], n_cb),
        counts=counts, tiled=tuple(decs), compact=compact, core=compact["core"] if compact else None,
    )


def check_simulable(trace: Trace, cfg: AcceleratorConfig, trace_path: str = "", theta_index: int = 0,
                    kind: str | None = None) -> None:
    """Every check `simulate_trace` makes before simulating: not a shape trace, `check_compatible`, and
    ``theta_index`` within every decision op's stored pairs. ``kind`` overrides ``trace.kind`` (a trace
    of ops read without their arrays, `algo.trace.TraceReader.shape_ops`). Raises `SimError`."""
    kind = trace.kind if kind is None else kind
    if kind == "shapes":  # checked first: the real cause, before any size limit of the config
        raise SimError(
            f"{trace_path or 'trace'} is a shape trace (op shapes only: no operands, no decisions), which plans "
            "workloads (`kaleido inspect`) but cannot be simulated; simulate an exact trace (`kaleido capture`) or "
            "a decision trace (`kaleido capture --decisions-only`, full size with --derive-blocks), or time one "
            "op's GEMM with `kaleido simulate --gemm M,K,N`")
    check_compatible(trace, cfg)
    if kind == "decisions":
        n = min(len(op.thetas) for op in trace.ops)
        if not 0 <= theta_index < n:
            raise SimError(f"theta index {theta_index} out of range: the trace stores {n} threshold pairs "
                           f"{[list(t) for t in trace.ops[0].thetas]}")


def simulate_trace(
    trace: Trace,
    cfg: AcceleratorConfig,
    progress: Callable[[int, int, str], None] | None = None,
    trace_path: str = "",
    theta_index: int = 0,
    tech=None,
    dispatcher: bool = True,
) -> dict:
    """Simulate every op of `trace` on `cfg`; returns the results object written as JSON.

    Top-level keys: ``format``, ``version``, ``config`` (the accelerator config), ``trace`` (model,
    weights, grid, b_msb, path), ``cycles``, ``dense_cycles``, ``speedup``, ``time_us`` and
    ``dense_time_us`` (at ``clock_mhz``), ``pe_utilization``, ``dense_pe_utilization``,
    ``reuse_fraction`` (``compute``/``partial``/``reuse``, fraction of streamed-operand elements),
    ``stall_cycles`` by cause (``drain``: inside ``cycles``; ``dram``, ``vector``, ``similarity``: `sim.timing.memory`),
    ``total_cycles`` and ``dense_total_cycles`` (array cycles + DRAM and vector stalls),
    ``total_speedup``, ``total_time_us``, ``dispatcher``, ``by_block`` and ``by_step`` (`rollup`),
    and ``per_op`` (the same fields per op,
    plus shape, theta, tiles, slots and ``memory``). ``cycles`` stays the array's (RTL-exact) count.
    ``dispatcher=False`` times every op without the dispatcher (raster order, no pairing) as the
    primary result (`simulate_op`), and the action counts (energy) follow the same raster, unpaired
    tiling (`sim.cost.tiling.TiledDecisions`). ``dispatcher_stats`` (per op and total) are
    `sim.cost.tiling.dispatcher_stats` of the tiling used.
    ``theta_index`` selects which stored threshold pair a decision trace is simulated with (0-based).
    ``tech`` is the energy table (`sim.cost.tech.load_tech` name such as ``"45nm"``, a ``.toml`` path or a
    `sim.cost.tech.TechTable`; None: the config's node); a bad one raises `sim.cost.tech.TechError`.

    Raises:
        SimError: a shape trace (nothing to simulate); the trace does not fit the configuration;
            theta_index out of range.
    """
    check_simulable(trace, cfg, trace_path, theta_index)
    energy = EnergyModel(cfg, tech)
    per_op, counts = simulate_ops(trace.ops, trace.grid, trace.b_msb, cfg, energy, theta_index, dispatcher, progress)
    if progress:
        progress(len(trace.ops), len(trace.ops), "done")
    return assemble_results(trace, per_op, counts, cfg, energy, trace_path, theta_index, dispatcher)


class OpMemo:
    """Per-op results of decision ops, keyed by a digest of everything they depend on.

    A full-model trace repeats whole decision maps: `algo.trace.derive` copies each uncaptured
    (step, block) from the nearest captured one, so a 30-block step derived from 3 captured blocks
    holds 3 distinct maps per op type, and a 50-step video far fewer than 1,500. The scheduler sort,
    matcher runs, tile statistics, action counts and memory timing of a repeated op are then computed
    once. The key is the SHA-256 of the op's packed decisions for the chosen theta and a JSON of its
    name, (batch, M, K, N), channel groups, theta, the grid, b_msb, the full accelerator config, the
    dispatcher flag and the energy table (its full repr and the area it yields): every input of
    `simulate_op`, `sim.cost.energy.EnergyModel.op_actions` and `sim.timing.memory.op_memory`, so a hit
    returns exactly what computing would (tests compare). Exact ops (operands, not decisions) are not
    memoised. Held per process (a Dask worker keeps it across tasks), at most `capacity` entries,
    least recently used dropped first.
    """

    def __init__(self, capacity: int = 4096):
        self.capacity = capacity
        self.enabled = True
        self.hits = self.misses = 0
        self._store: OrderedDict[str, tuple[OpTiming, OpActions, OpMemory]] = OrderedDict()

    def key(self, op: OpRecord, grid, b_msb: int, cfg: AcceleratorConfig, energy: EnergyModel, theta_index: int,
            dispatcher: bool) -> str | None:
        if not self.enabled or op.decisions is None or not 0 <= theta_index < op.decisions.shape[0]:
            return None
        h = hashlib.sha256(np.ascontiguousarray(op.decisions[theta_index]).tobytes())
        h.update(json.dumps({
            "name": op.name, "dims": [op.batch, op.M, op.K, op.N], "groups": [list(g.as_tuple()) for g in op.groups],
            "theta": [float(v) for v in op.thetas[theta_index]], "grid": [int(v) for v in grid], "b_msb": b_msb,
            "config": cfg.model_dump(mode="json"), "dispatcher": dispatcher, "tech": repr(energy.tech),
            "area": [energy.area_mm2, energy.dense_area_mm2]}, sort_keys=True).encode())
        return h.hexdigest()

    def get(self, key: str | None, op: OpRecord) -> tuple[OpTiming, OpActions, OpMemory] | None:
        """The stored parts of an op with this key, its timing relabelled with ``op``'s block and step."""
        if key is None or key not in self._store:
            self.misses += key is not None
            return None
        self.hits += 1
        self._store.move_to_end(key)
        t, a, m = self._store[key]
        return replace(t, block=op.block, step=op.step), a, m

    def put(self, key: str | None, timing: OpTiming, actions: OpActions, memory: OpMemory) -> None:
        """Keep an op's parts (the timing without its tiled decisions). The parts are frozen and no stage
        changes another's part (`OpResult.to_json` serialises into fresh dicts), so no copy is taken."""
        if key is None:
            return
        self._store[key] = (timing.stripped(), actions, memory)
        while len(self._store) > self.capacity:
            self._store.popitem(last=False)

    def clear(self) -> None:
        self._store.clear()
        self.hits = self.misses = 0


#: The process's `OpMemo` (`simulate_ops` uses it; ``OP_MEMO.enabled = False`` turns it off).
OP_MEMO = OpMemo()


def simulate_ops(ops: list[OpRecord], grid, b_msb: int, cfg: AcceleratorConfig, energy: EnergyModel,
                 theta_index: int = 0, dispatcher: bool = True,
                 progress: Callable[[int, int, str], None] | None = None) -> tuple[list[dict], np.ndarray]:
    """Per-op results of ``ops`` (`simulate_op` + energy + memory annotations), in order, and their
    decision counts summed: int64 ``[3]`` (X elements under COMPUTE, PARTIAL, REUSE).

    Ops are independent (each from an empty pipeline) except the two ops of a fused attention pair
    (`sim.timing.attention`, one (step, block)), so any split of a trace's ops into consecutive pieces that
    keeps each (step, block) whole, simulated apart and concatenated in order, gives the same list
    (`sim.sweep.video`).
    A decision op whose inputs (and fused-attention role) were seen before in this process comes from
    `OP_MEMO`."""
    parts: list[tuple[OpTiming, OpActions, OpMemory]] = []
    plans: list[OpPlan] = []
    counts = np.zeros(3, dtype=np.int64)
    pairs = fused_pairs(ops, cfg)  # sim.timing.attention: {score op: P op} that run fused
    p_of = {j: i for i, j in pairs.items()}
    for i, op in enumerate(ops):
        if progress:
            progress(i, len(ops), f"{op.name} block {op.block} step {op.step}")
        plan = plan_op(op, grid, cfg, [g.as_tuple() for g in ops[p_of[i]].groups] if i in p_of else None,
                       i in pairs or i in p_of)  # the op's tiling, once (sim.plan)
        plans.append(plan)
        key = OP_MEMO.key(op, grid, b_msb, cfg, energy, theta_index, dispatcher)
        key = key and f"{key}|fused={plan.fused}|tile_like={plan.tile_like}"
        hit = OP_MEMO.get(key, op)
        if hit is not None:
            t, a, m = hit
        else:
            t = simulate_op(op, grid, b_msb, cfg, theta_index, dispatcher, plan=plan)  # timing
            a = energy.op_actions(t, grid, plan.groups, b_msb, fused=plan.fused)  # sim.cost
            m = op_memory(t, a, cfg)  # sim.timing.memory: DRAM, vector and similarity stalls, total_cycles
            OP_MEMO.put(key, t, a, m)
        counts += t.counts
        parts.append((t.stripped(), a, m))
    for i, j in pairs.items():  # fused attention: one timing for both ops (sim.timing.attention)
        mi, mj = fused_memory(parts[i][:2], parts[j][:2], cfg, grid, plans[i].groups, plans[j].groups)
        parts[i], parts[j] = (*parts[i][:2], mi), (*parts[j][:2], mj)
    # leakage over each design's wall time, now that every op's stalls are final
    partner = dict(pairs) | {j: i for i, j in pairs.items()}  # D89: a fused pair's SRAM
    per_op = [OpResult(t, a, m, energy.op_energy(a, m, parts[partner[k]][1] if k in partner else None)).to_json()
              for k, (t, a, m) in enumerate(parts)]
    return per_op, counts


def assemble_results(trace: Trace, per_op: list[dict], counts: np.ndarray, cfg: AcceleratorConfig,
                     energy: EnergyModel, trace_path: str = "", theta_index: int = 0,
                     dispatcher: bool = True, kind: str | None = None) -> dict:
    """The results object of `simulate_trace` from the per-op results of every op of ``trace``, in
    trace order (``trace.ops`` may hold the ops without their arrays: only metadata is read)."""
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    t = rollup(per_op, None, cfg).get("all") or ({k: 0 for k in _ROLLUP_SUMS} | {"stall_cycles": {}})
    cycles, dense, useful, dense_macs = t["cycles"], t["dense_cycles"], t["useful_macs"], t["dense_macs"]
    nd_total, total, dense_total = t["no_dispatcher_cycles"], t["total_cycles"], t["dense_total_cycles"]
    us_per_cycle = 1.0 / cfg.clock_mhz
    return {
        "format": RESULTS_FORMAT, "version": RESULTS_VERSION,
        "config": cfg.model_dump(mode="json"),
        "organisation": cfg.organisation,
        "trace": {
            "path": trace_path, "model": trace.model, "size": trace.size, "weights": trace.weights,
            "grid": list(trace.grid), "b_msb": trace.b_msb, "ops": len(trace.ops),
            "kind": trace.kind if kind is None else kind, "theta_index": theta_index,
            "steps": sorted({op.step for op in trace.ops}),
        },
        "cycles": cycles, "dense_cycles": dense,
        "speedup": dense / cycles if cycles else 0.0,
        "time_us": cycles * us_per_cycle, "dense_time_us": dense * us_per_cycle,
        "pe_utilization": useful / (R * C * cycles) if cycles else 0.0,
        "dense_pe_utilization": dense_macs / (R * C * dense) if dense else 0.0,
        "no_dispatcher_cycles": nd_total,
        "no_dispatcher_pe_utilization": useful / (R * C * nd_total) if nd_total else 0.0,
        "reuse_fraction": _fractions(counts),
        "stall_cycles": {k: t["stall_cycles"].get(k, 0) for k in STALL_CAUSES},
        "dense_stall_cycles": {k: sum(r["dense_stall_cycles"][k] for r in per_op) for k in STALL_CAUSES},
        "total_cycles": total, "dense_total_cycles": dense_total,
        "total_speedup": dense_total / total if total else 0.0, "total_time_us": total * us_per_cycle,
        "dispatcher": dispatcher,
        "dispatcher_stats": {k: sum(r["dispatcher_stats"][k] for r in per_op) for k in DISPATCHER_STAT_KEYS},
        "by_block": rollup(per_op, "block", cfg), "by_step": rollup(per_op, "step", cfg),
        "per_op": per_op,
    } | energy.totals(per_op)
