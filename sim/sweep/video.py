"""A whole trace (e.g. a 50-step video's decision trace) simulated piece by piece on an `Engine`.

`simulate_trace_file` reads only the trace's metadata in this process, runs the same checks as
`sim.engines.model.simulate_trace`, and splits the ops by (step, block): one `sim.sweep.tasks.run_ops`
task per pair, which reads its own ops from the file (`algo.trace.TraceReader.load_ops`), so no
process holds more than one (step, block)'s decisions. Ops are independent (each op starts from an
empty pipeline), so the per-op results put back in trace order and summed by
`sim.engines.model.assemble_results` -- the serial run's own summation, in the same order -- give a results
object equal to `simulate_trace(load_trace(path), ...)` field for field (tests compare).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from algo.trace import TraceReader
from hw.config import AcceleratorConfig
from sim.cost.energy import EnergyModel
from sim.engines.model import assemble_results, check_simulable
from sim.sweep.engine import Engine
from sim.sweep.tasks import run_ops


def split_by_block(ops) -> list[list[int]]:
    """Op indices grouped by (step, block), groups in order of first appearance, indices ascending."""
    groups: dict[tuple[int, int], list[int]] = {}
    for i, op in enumerate(ops):
        groups.setdefault((op.step, op.block), []).append(i)
    return list(groups.values())


def simulate_trace_file(path: str | Path, cfg: AcceleratorConfig, workers: int | None = 0,
                        scheduler: str | None = None, theta_index: int = 0, tech=None, dispatcher: bool = True,
                        progress: Callable[[int, int, str], None] | None = None) -> dict:
    """`sim.engines.model.simulate_trace` of the trace file at ``path``, one task per (step, block).

    Args:
        workers, scheduler: as `sim.sweep.engine.Engine` (0: in this process, still one block at a time).
        tech: an energy table name or ``.toml`` path (None: the config's node).
        progress: ``progress(done, total, label)`` per (step, block) finished.

    Raises:
        algo.trace.TraceError, sim.engines.model.SimError, sim.cost.tech.TechError: as `simulate_trace` (a bad op
            is found when its block is read).
        sim.sweep.engine.EngineError: the cluster cannot be started or reached.
    """
    path = Path(path)
    with TraceReader(path) as rd:
        meta_ops, kind = rd.shape_ops(), rd.kind
        trace = rd.trace(meta_ops)
    check_simulable(trace, cfg, str(path), theta_index, kind=kind)
    energy = EnergyModel(cfg, tech)  # a bad table fails here, before any task
    pieces = split_by_block(meta_ops)
    cfg_json = cfg.model_dump(mode="json")
    tech_arg = None if tech is None else str(tech)
    descs = [{"trace": str(path.resolve()), "ops": idx, "config": cfg_json, "theta_index": theta_index,
              "tech": tech_arg, "dispatcher": dispatcher} for idx in pieces]
    per_op: list[dict | None] = [None] * len(meta_ops)
    counts = np.zeros(3, dtype=np.int64)
    if progress:
        progress(0, len(pieces), "")
    with Engine(workers, scheduler) as eng:
        for done, (j, (results, c)) in enumerate(eng.run(run_ops, descs, name="block"), start=1):
            for i, r in zip(pieces[j], results, strict=True):
                per_op[i] = r
            counts += np.asarray(c, dtype=np.int64)
            if progress:
                op = meta_ops[pieces[j][0]]
                progress(done, len(pieces), f"step {op.step} block {op.block}")
    return assemble_results(trace, per_op, counts, cfg, energy, str(path), theta_index, dispatcher, kind=kind)
