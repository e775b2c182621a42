"""Running a baseline's per-(token, group) work on the Kaleido array: the shared array-timing path.

An accelerator baseline (`sim.baselines.adaptiv`, `exion`, `cambricon_d`) is modelled as a *policy*:
for every op it assigns each (token, channel group) of the streamed operand one of the three work
levels the array already knows -- full 8-bit work (code `algo.reuse.golden.COMPUTE`), half work on the
4-bit multiplier half (`PARTIAL`, paired two per slot by the matcher) or none (`REUSE`: the row's
result is taken from elsewhere) -- and the op then runs through exactly the functions Kaleido's
own simulation uses (nothing is forked):

- cycles: `sim.timing.cycle_model.reuse_slot_sequence` (scheduler + matcher of `sim.timing.dispatch`) and
  `sim.timing.cycle_model.op_cycles` (the RTL's timing contract);
- actions: `sim.cost.actions.op_actions` on the same decisions, plus the policy's extra DRAM bytes
  (e.g. a previous step's outputs read back);
- energy: `sim.cost.energy.energy_of` with the same technology table and the Kaleido die area, leaking over
  the op's wall time (`sim.timing.memory.op_memory_timing`'s ``total_cycles``, as Kaleido's, D52).

So a baseline differs from Kaleido only in *which* work it skips, which is the comparison the
issue asks for. Giving every baseline Kaleido's scheduler and matcher is optimistic for the
baselines (docs/baselines.md, docs/decisions.md D16).
"""

from __future__ import annotations

import numpy as np

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE
from algo.reuse.stats import decision_counts
from algo.trace import OpRecord
from hw.config import AcceleratorConfig
from sim.cost.actions import add_actions, empty_actions, op_actions
from sim.cost.energy import EnergyModel, energy_of, gated_sram_mm2
from sim.timing.cycle_model import op_cycles, reuse_slot_sequence

FULL, HALF, SKIP = COMPUTE, PARTIAL, REUSE


def work_fractions(decisions: list[np.ndarray], groups) -> dict[str, float]:
    """``{"full", "half", "skip"}``: fractions of streamed-operand elements (group width weighted)."""
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    c = sum((decision_counts(dec, widths) for dec in decisions), np.zeros(3, np.int64))  # codes: FULL, HALF, SKIP
    tot = c.sum()
    return {k: (float(c[i] / tot) if tot else 0.0) for i, k in enumerate(("full", "half", "skip"))}


def run_policy_op(op: OpRecord, grid, b_msb: int, cfg: AcceleratorConfig, energy: EnergyModel,
                  decisions: list[np.ndarray], extra_actions: dict | None = None) -> dict:
    """Cycles, actions and energy of one op whose work levels are `decisions` (module docstring).

    Args:
        decisions: one int8 ``[M, G]`` array per batch element, codes FULL/HALF/SKIP.
        extra_actions: action counts added on top (e.g. ``dram_read_bytes``).

    Returns:
        ``{"name", "block", "step", "cycles", "time_us", "energy_pj", "energy_breakdown_pj",
        "actions", "work"}`` (``work``: `work_fractions`; ``useful_macs``: full + half / 2, x N).
    """
    R, C, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    groups = [g.as_tuple() for g in op.groups]
    seq = np.concatenate([reuse_slot_sequence(dec, grid, groups, op.N, R, C, b_msb) for dec in decisions])
    cycles, _ = op_cycles(seq, R, C, d)
    acts = op_actions(op.name, decisions, grid, groups, op.M, op.K, op.N, b_msb, cfg, cycles)
    if extra_actions:
        acts = add_actions(acts, {k: v for k, v in extra_actions.items() if k in empty_actions()})
    from sim.timing.memory import op_memory_timing

    # leakage over the op's wall time, as Kaleido's (sim.cost.energy.EnergyModel.op_energy)
    acts["cycles"] = op_memory_timing(op.name, op.batch, op.M, op.K, op.N, cycles,
                                      acts["dram_read_bytes"] + acts["dram_write_bytes"], cfg,
                                      similarity=True)["total_cycles"]
    acts["gated_mm2_cycles"] = gated_sram_mm2(energy.breakdown, acts) * acts["cycles"]  # D89, as Kaleido's
    eb = energy_of(acts, cfg, energy.tech, energy.area_mm2)
    work = work_fractions(decisions, groups)
    return {"name": op.name, "block": op.block, "step": op.step, "cycles": int(cycles),
            "time_us": cycles / cfg.clock_mhz, "energy_pj": float(sum(eb.values())),
            "energy_breakdown_pj": eb, "actions": acts, "work": work,
            "useful_macs": float(acts["mac8"] + (acts["mac5"] + acts["mac4"]) / 2)}


def all_full(op: OpRecord) -> list[np.ndarray]:
    """FULL for every (token, group) of every batch element: the op runs as dense work."""
    return [np.zeros((op.M, len(op.groups)), dtype=np.int8) for _ in range(op.batch)]

