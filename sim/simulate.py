"""Simulate a trace on an accelerator configuration: decisions, tiles, cycles, utilization.

For every op of the trace (and every batch index: heads of ``qk``/``pv``), the decisions come from
the golden model (`algo.golden.decide`, with the op's theta and the trace's b_msb) for exact traces,
or from the trace itself for decision traces (``thetas[theta_index]``; `algo.trace`), the dispatcher
(`sim.dispatch`) turns each tile's decisions into cycle slots, and the cycle model
(`sim.cycle_model`) times the tile sequence. The dense baseline is the same array with reuse off
and raster tiling (``ceil(M/R) * ceil(N/C)`` tiles of K slots), under the same overlap rules.

Ops run one after another, each from an empty pipeline (no overlap between ops in this version).
PE utilization (SPEC section 4) = useful MAC-equivalents / (R * C * cycles), where a COMPUTE
channel counts 1, a PARTIAL channel 1/2 and a REUSE channel 0, for each of the N outputs.
Every result also carries ``no_dispatcher_cycles`` and ``no_dispatcher_pe_utilization``: the same
decisions without the dispatcher (raster position order, no channel pairing; `sim.dispatch`), the
paper's "with vs without the data dispatcher" comparison.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from algo.golden import COMPUTE, PARTIAL, REUSE, decide
from algo.trace import OpRecord, Trace, TraceError
from hw.config import AcceleratorConfig
from sim.cycle_model import dense_slot_sequence, op_cycles, reuse_slot_sequence
from sim.energy import EnergyModel

RESULTS_FORMAT = "kaleido-results"
RESULTS_VERSION = 1


class SimError(ValueError):
    """The trace cannot run on this configuration (unsupported b_msb, too many tokens, ...)."""


def check_compatible(trace: Trace, cfg: AcceleratorConfig) -> None:
    """Reject a trace the hardware cannot run, naming the parameter. Raises `SimError`."""
    if trace.b_msb not in cfg.msb_splits:
        raise SimError(
            f"trace b_msb = {trace.b_msb} is not supported by config {cfg.name!r} "
            f"(msb_splits = {list(cfg.msb_splits)})"
        )
    if trace.tokens > cfg.max_tokens:
        raise SimError(f"trace has {trace.tokens} tokens, config {cfg.name!r} max_tokens = {cfg.max_tokens}")
    for op in trace.ops:
        if op.K > cfg.max_k:
            raise SimError(f"op {op.name} (block {op.block}) has K = {op.K} > max_k = {cfg.max_k}")
        if len(op.groups) > cfg.partial_regs:
            raise SimError(
                f"op {op.name} (block {op.block}) has {len(op.groups)} channel groups > "
                f"partial_regs = {cfg.partial_regs} (spilling to the partial buffer is not modelled yet)"
            )


def _fractions(counts: np.ndarray) -> dict[str, float]:
    total = counts.sum()
    names = ("compute", "partial", "reuse")
    return {n: (float(counts[i] / total) if total else 0.0) for i, n in enumerate(names)}


def simulate_op(op: OpRecord, grid, b_msb: int, cfg: AcceleratorConfig, theta_index: int = 0) -> dict:
    """Timing and decision statistics of one op; see the module docstring for definitions.

    ``theta_index`` picks the row of a decision op's stored decisions (ignored for exact ops).

    Raises:
        SimError: theta_index out of range for a decision op.
    """
    R, C, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    groups = [g.as_tuple() for g in op.groups]
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    seqs, nd_seqs, decs = [], [], []
    counts = np.zeros(3, dtype=np.int64)  # X elements under COMPUTE, PARTIAL, REUSE
    stored = None
    if op.X is None:
        try:
            stored = op.decisions_for(theta_index)  # int8 [batch, M, G]
        except TraceError as err:
            raise SimError(str(err)) from None
    for b in range(op.batch):
        dec = stored[b] if stored is not None else decide(op.X[b], grid, groups, op.theta, b_msb)[0]
        seqs.append(reuse_slot_sequence(dec, grid, groups, op.N, R, C, b_msb))
        nd_seqs.append(reuse_slot_sequence(dec, grid, groups, op.N, R, C, b_msb, dispatcher=False))
        decs.append(dec)
        for code in (COMPUTE, PARTIAL, REUSE):
            counts[code] += int(((dec == code) * widths).sum())
    s_seq = np.concatenate(seqs)
    cycles, stall = op_cycles(s_seq, R, C, d)
    nd_cycles, _ = op_cycles(np.concatenate(nd_seqs), R, C, d)
    dense_seq = np.tile(dense_slot_sequence(op.M, op.K, op.N, R, C), op.batch)
    dense_cycles, dense_stall = op_cycles(dense_seq, R, C, d)
    useful = (counts[COMPUTE] + 0.5 * counts[PARTIAL]) * op.N
    dense_macs = op.batch * op.M * op.K * op.N
    theta = list(op.thetas[theta_index]) if stored is not None else list(op.theta)
    return {
        "name": op.name, "block": op.block, "step": op.step, "theta": theta,
        "batch": op.batch, "M": op.M, "K": op.K, "N": op.N,
        "tiles": int(s_seq.size), "slots": int(np.maximum(s_seq, 1).sum()),
        "cycles": cycles, "dense_cycles": dense_cycles,
        "speedup": dense_cycles / cycles if cycles else 0.0,
        "stall_cycles": {"drain": stall}, "dense_stall_cycles": {"drain": dense_stall},
        "useful_macs": float(useful), "dense_macs": dense_macs,
        "pe_utilization": float(useful / (R * C * cycles)) if cycles else 0.0,
        "dense_pe_utilization": float(dense_macs / (R * C * dense_cycles)) if dense_cycles else 0.0,
        "no_dispatcher_cycles": nd_cycles,
        "no_dispatcher_pe_utilization": float(useful / (R * C * nd_cycles)) if nd_cycles else 0.0,
        "reuse_fraction": _fractions(counts),
        "_counts": counts, "_decisions": decs,
    }


def simulate_trace(
    trace: Trace,
    cfg: AcceleratorConfig,
    progress: Callable[[int, int, str], None] | None = None,
    trace_path: str = "",
    theta_index: int = 0,
) -> dict:
    """Simulate every op of `trace` on `cfg`; returns the results object written as JSON.

    Top-level keys: ``format``, ``version``, ``config`` (the accelerator config), ``trace`` (model,
    weights, grid, b_msb, path), ``cycles``, ``dense_cycles``, ``speedup``, ``time_us`` and
    ``dense_time_us`` (at ``clock_mhz``), ``pe_utilization``, ``dense_pe_utilization``,
    ``reuse_fraction`` (``compute``/``partial``/``reuse``, fraction of streamed-operand elements),
    ``stall_cycles``, and ``per_op`` (the same fields per op, plus shape, theta, tiles and slots).
    ``theta_index`` selects which stored threshold pair a decision trace is simulated with (0-based).

    Raises:
        SimError: the trace does not fit the configuration; theta_index out of range.
    """
    check_compatible(trace, cfg)
    if trace.kind == "decisions":
        n = min(len(op.thetas) for op in trace.ops)
        if not 0 <= theta_index < n:
            raise SimError(f"theta index {theta_index} out of range: the trace stores {n} threshold pairs "
                           f"{[list(t) for t in trace.ops[0].thetas]}")
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    per_op = []
    counts = np.zeros(3, dtype=np.int64)
    energy = EnergyModel(cfg)
    for i, op in enumerate(trace.ops):
        if progress:
            progress(i, len(trace.ops), f"{op.name} block {op.block} step {op.step}")
        r = simulate_op(op, trace.grid, trace.b_msb, cfg, theta_index)
        energy.annotate_op(r, op.name, r.pop("_decisions"), trace.grid, [g.as_tuple() for g in op.groups],
                           trace.b_msb)  # sim.energy: actions, energy_pj, dense_energy_pj
        counts += r.pop("_counts")
        per_op.append(r)
    if progress:
        progress(len(trace.ops), len(trace.ops), "done")
    cycles = sum(r["cycles"] for r in per_op)
    dense = sum(r["dense_cycles"] for r in per_op)
    useful = sum(r["useful_macs"] for r in per_op)
    dense_macs = sum(r["dense_macs"] for r in per_op)
    us_per_cycle = 1.0 / cfg.clock_mhz
    return energy.annotate_total({
        "format": RESULTS_FORMAT, "version": RESULTS_VERSION,
        "config": cfg.model_dump(mode="json"),
        "trace": {
            "path": trace_path, "model": trace.model, "size": trace.size, "weights": trace.weights,
            "grid": list(trace.grid), "b_msb": trace.b_msb, "ops": len(trace.ops),
            "kind": trace.kind, "theta_index": theta_index,
            "steps": sorted({op.step for op in trace.ops}),
        },
        "cycles": cycles, "dense_cycles": dense,
        "speedup": dense / cycles if cycles else 0.0,
        "time_us": cycles * us_per_cycle, "dense_time_us": dense * us_per_cycle,
        "pe_utilization": useful / (R * C * cycles) if cycles else 0.0,
        "dense_pe_utilization": dense_macs / (R * C * dense) if dense else 0.0,
        "no_dispatcher_cycles": sum(r["no_dispatcher_cycles"] for r in per_op),
        "no_dispatcher_pe_utilization": (
            useful / (R * C * sum(r["no_dispatcher_cycles"] for r in per_op)) if per_op else 0.0),
        "reuse_fraction": _fractions(counts),
        "stall_cycles": {"drain": sum(r["stall_cycles"]["drain"] for r in per_op)},
        "per_op": per_op,
    })
