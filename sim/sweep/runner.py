"""Run a sweep: skip finished points, run the rest on an `Engine`, store each result, write the table.

`run_sweep` computes every point's key (`sim.sweep.store.point_key`), skips the points whose result
file exists, submits the others as `sim.sweep.tasks.run_point` tasks and writes each outcome as it
arrives (atomically, under its key), so a sweep killed at any moment and run again runs no finished
point a second time and ends with the same table. A failed point (any error inside the task, or a
worker that died) is stored with its one-line error and the sweep goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from sim.sweep.engine import Engine
from sim.sweep.spec import Sweep
from sim.sweep.store import PointStore, point_key
from sim.sweep.table import table_rows, write_table
from sim.sweep.tasks import one_line, run_point

#: ``progress(done, failed, total, label)``: points finished (failed ones included), of which failed.
Progress = Callable[[int, int, int, str], None]


@dataclass
class SweepOutcome:
    """What a run did: point indices run now, skipped (finished before), failed (now or before); files."""

    ran: list[int] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def point_desc(pt) -> dict:
    """The small description a task receives for a `sim.sweep.spec.Point`."""
    cfg = None if pt.config is None else pt.config.model_dump(mode="json")
    if pt.kind == "workload":
        return {"workload": pt.workload, "config": cfg, "devices": pt.devices, "reuse": pt.reuse,
                "seed": pt.seed, "tech": pt.tech}
    return {"trace": pt.trace, "config": cfg, "theta_index": pt.theta_index,
            "tech": pt.tech, "dispatcher": pt.dispatcher}


def run_sweep(sweep: Sweep, out_dir: str | Path, workers: int | None = None, scheduler: str | None = None,
              progress: Progress | None = None, stop_after: int | None = None) -> SweepOutcome:
    """Run every unfinished point of ``sweep`` and write ``DIR/results.parquet`` and ``DIR/results.csv``.

    Args:
        workers, scheduler: as `Engine` (None: one local worker process per core).
        progress: called after each point.
        stop_after: stop (as Ctrl-C would, `KeyboardInterrupt`) after this many points finished in this
            run (tests of restart safety).

    Raises:
        KeyboardInterrupt: interrupted (finished points are stored; no table is written).
        sim.sweep.engine.EngineError: the cluster cannot be started or reached.
    """
    store = PointStore(out_dir)
    keys = [point_key(pt) for pt in sweep.points]
    outcomes: list[dict | None] = [store.get(k) for k in keys]
    out = SweepOutcome(skipped=[i for i, o in enumerate(outcomes) if o is not None])
    todo = [i for i, o in enumerate(outcomes) if o is None]
    total = len(sweep.points)
    n_failed = sum(1 for o in outcomes if o is not None and o["status"] != "ok")
    if progress:
        progress(total - len(todo), n_failed, total, f"{len(out.skipped)} finished before")
    if todo:
        with Engine(workers, scheduler) as eng:
            descs = [point_desc(sweep.points[i]) for i in todo]
            for j, res in eng.run(run_point, descs, name="point", errors="return"):
                i = todo[j]
                if isinstance(res, BaseException):  # the worker died (distributed.KilledWorker), ...
                    res = {"status": "failed", "error": one_line(res)}
                store.put(keys[i], res)
                outcomes[i] = res
                out.ran.append(i)
                n_failed += res["status"] != "ok"
                if progress:
                    progress(sum(o is not None for o in outcomes), n_failed, total, f"point {i}")
                if stop_after is not None and len(out.ran) >= stop_after and len(out.ran) < len(todo):
                    raise KeyboardInterrupt
    out.failed = [i for i, o in enumerate(outcomes) if o["status"] != "ok"]
    cols, rows = table_rows(sweep, keys, outcomes)  # result columns of the point kinds present
    out.files = write_table(out_dir, cols, rows)
    return out
