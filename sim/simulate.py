"""Simulate a trace on an accelerator configuration: decisions, tiles, cycles, utilization.

For every op of the trace (and every batch index: heads of ``qk``/``pv``), the decisions come from
the golden model (`algo.golden.decide`, with the op's theta and the trace's b_msb), the dispatcher
(`sim.dispatch`) turns each tile's decisions into cycle slots, and the cycle model
(`sim.cycle_model`) times the tile sequence. The dense baseline is the same array with reuse off
and raster tiling (``ceil(M/R) * ceil(N/C)`` tiles of K slots), under the same overlap rules.

Ops run one after another, each from an empty pipeline (no overlap between ops in this version).
PE utilization (SPEC section 4) = useful MAC-equivalents / (R * C * cycles), where a COMPUTE
channel counts 1, a PARTIAL channel 1/2 and a REUSE channel 0, for each of the N outputs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from algo.golden import COMPUTE, PARTIAL, REUSE, decide
from algo.trace import OpRecord, Trace
from hw.config import AcceleratorConfig
from sim.cycle_model import dense_slot_sequence, op_cycles, reuse_slot_sequence

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


def simulate_op(op: OpRecord, grid, b_msb: int, cfg: AcceleratorConfig) -> dict:
    """Timing and decision statistics of one op; see the module docstring for definitions."""
    R, C, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    groups = [g.as_tuple() for g in op.groups]
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    seqs = []
    counts = np.zeros(3, dtype=np.int64)  # X elements under COMPUTE, PARTIAL, REUSE
    for b in range(op.batch):
        dec, _ = decide(op.X[b], grid, groups, op.theta, b_msb)
        seqs.append(reuse_slot_sequence(dec, grid, groups, op.N, R, C, b_msb))
        for code in (COMPUTE, PARTIAL, REUSE):
            counts[code] += int(((dec == code) * widths).sum())
    s_seq = np.concatenate(seqs)
    cycles, stall = op_cycles(s_seq, R, C, d)
    dense_seq = np.tile(dense_slot_sequence(op.M, op.K, op.N, R, C), op.batch)
    dense_cycles, dense_stall = op_cycles(dense_seq, R, C, d)
    useful = (counts[COMPUTE] + 0.5 * counts[PARTIAL]) * op.N
    dense_macs = op.batch * op.M * op.K * op.N
    return {
        "name": op.name, "block": op.block, "step": op.step,
        "batch": op.batch, "M": op.M, "K": op.K, "N": op.N,
        "tiles": int(s_seq.size), "slots": int(np.maximum(s_seq, 1).sum()),
        "cycles": cycles, "dense_cycles": dense_cycles,
        "speedup": dense_cycles / cycles if cycles else 0.0,
        "stall_cycles": {"drain": stall}, "dense_stall_cycles": {"drain": dense_stall},
        "useful_macs": float(useful), "dense_macs": dense_macs,
        "pe_utilization": float(useful / (R * C * cycles)) if cycles else 0.0,
        "dense_pe_utilization": float(dense_macs / (R * C * dense_cycles)) if dense_cycles else 0.0,
        "reuse_fraction": _fractions(counts),
        "_counts": counts,
    }


def simulate_trace(
    trace: Trace,
    cfg: AcceleratorConfig,
    progress: Callable[[int, int, str], None] | None = None,
    trace_path: str = "",
) -> dict:
    """Simulate every op of `trace` on `cfg`; returns the results object written as JSON.

    Top-level keys: ``format``, ``version``, ``config`` (the accelerator config), ``trace`` (model,
    weights, grid, b_msb, path), ``cycles``, ``dense_cycles``, ``speedup``, ``time_us`` and
    ``dense_time_us`` (at ``clock_mhz``), ``pe_utilization``, ``dense_pe_utilization``,
    ``reuse_fraction`` (``compute``/``partial``/``reuse``, fraction of streamed-operand elements),
    ``stall_cycles``, and ``per_op`` (the same fields per op, plus shape, tiles and slots).

    Raises:
        SimError: the trace does not fit the configuration.
    """
    check_compatible(trace, cfg)
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    per_op = []
    counts = np.zeros(3, dtype=np.int64)
    for i, op in enumerate(trace.ops):
        if progress:
            progress(i, len(trace.ops), f"{op.name} block {op.block} step {op.step}")
        r = simulate_op(op, trace.grid, trace.b_msb, cfg)
        counts += r.pop("_counts")
        per_op.append(r)
    if progress:
        progress(len(trace.ops), len(trace.ops), "done")
    cycles = sum(r["cycles"] for r in per_op)
    dense = sum(r["dense_cycles"] for r in per_op)
    useful = sum(r["useful_macs"] for r in per_op)
    dense_macs = sum(r["dense_macs"] for r in per_op)
    us_per_cycle = 1.0 / cfg.clock_mhz
    return {
        "format": RESULTS_FORMAT, "version": RESULTS_VERSION,
        "config": cfg.model_dump(mode="json"),
        "trace": {
            "path": trace_path, "model": trace.model, "size": trace.size, "weights": trace.weights,
            "grid": list(trace.grid), "b_msb": trace.b_msb, "ops": len(trace.ops),
            "steps": sorted({op.step for op in trace.ops}),
        },
        "cycles": cycles, "dense_cycles": dense,
        "speedup": dense / cycles if cycles else 0.0,
        "time_us": cycles * us_per_cycle, "dense_time_us": dense * us_per_cycle,
        "pe_utilization": useful / (R * C * cycles) if cycles else 0.0,
        "dense_pe_utilization": dense_macs / (R * C * dense) if dense else 0.0,
        "reuse_fraction": _fractions(counts),
        "stall_cycles": {"drain": sum(r["stall_cycles"]["drain"] for r in per_op)},
        "per_op": per_op,
    }
