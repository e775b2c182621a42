"""The work a Dask task does: small descriptions in, small results out.

A task receives a plain dict (paths, a config as JSON, a few scalars) and loads its inputs itself, so
nothing of gigabytes travels through the scheduler: `run_point` simulates one sweep point (one trace on
one config), `run_ops` one piece of a trace (the ops of one (step, block), read alone from the file by
`algo.trace.TraceReader`). Both are top-level functions of an importable module, so every worker
process imports them (and loads the numba caches, ``cache=True``) once.
"""

from __future__ import annotations

#: Result columns of a point, from `sim.engines.model.simulate_trace`'s results (same names where the
#: results have a top-level field; ``area_mm2``/``dense_area_mm2`` from ``energy_model``,
#: ``reuse_*`` from ``reuse_fraction``, ``stall_*`` from ``stall_cycles``; ``upper_bound_ops``: the fused score
#: ops whose cross-frame state the point's config does not hold, `sim.results.state_notes`, D70: 0 when the
#: point's figures are exact, else they are an upper bound and the report keeps the point off the Pareto front).
RESULT_COLUMNS = (
    "cycles", "dense_cycles", "speedup", "no_dispatcher_cycles", "total_cycles", "dense_total_cycles",
    "total_speedup", "time_us", "total_time_us", "pe_utilization", "dense_pe_utilization",
    "energy_pj", "dense_energy_pj", "energy_saving", "area_mm2", "dense_area_mm2",
    "reuse_compute", "reuse_partial", "reuse_reuse",
    "stall_drain", "stall_combine", "stall_dram", "stall_vector", "stall_similarity", "upper_bound_ops",
)
#: Result columns of a workload point, from `sim.workload.simulate.simulate_workload`'s results (the
#: top-level fields of ``kaleido simulate W.npz --json``; ``comm_us``/``exposed_comm_us``: their
#: ``per_step`` values summed, the communication time and the part of it not hidden behind compute).
WORKLOAD_COLUMNS = (
    "total_time_us", "dense_total_time_us", "reference_total_time_us", "reference_dense_total_time_us",
    "speedup", "dense_speedup", "reuse_speedup", "comm_us", "exposed_comm_us", "unique_ops_timed",
)
#: Every result column a table may hold, trace columns first (`sim.sweep.table`).
ALL_RESULT_COLUMNS = RESULT_COLUMNS + tuple(c for c in WORKLOAD_COLUMNS if c not in RESULT_COLUMNS)
#: Columns holding integers (cycle counts, op shapes); the others are floats.
INT_COLUMNS = ("cycles", "dense_cycles", "no_dispatcher_cycles", "total_cycles", "dense_total_cycles",
               "stall_drain", "stall_combine", "stall_dram", "stall_vector", "stall_similarity", "unique_ops_timed",
               "upper_bound_ops")


def one_line(err: BaseException) -> str:
    """``Type: first line of the message`` (what a failed point records)."""
    msg = str(err).strip().splitlines()
    return f"{type(err).__name__}: {msg[0] if msg else ''}".rstrip(": ")


def summary_row(res: dict, upper_bound_ops: int = 0) -> dict:
    """The `RESULT_COLUMNS` of one results object; ``upper_bound_ops`` as the column (module constants)."""
    row = {k: res[k] for k in RESULT_COLUMNS if k in res}
    row["upper_bound_ops"] = int(upper_bound_ops)
    row["area_mm2"] = res["energy_model"]["area_mm2"]
    row["dense_area_mm2"] = res["energy_model"]["dense_area_mm2"]
    for k, v in res["reuse_fraction"].items():
        row[f"reuse_{k}"] = v
    for k, v in res["stall_cycles"].items():
        row[f"stall_{k}"] = v
    return {k: row[k] for k in RESULT_COLUMNS}


def workload_row(res: dict) -> dict:
    """The `WORKLOAD_COLUMNS` of one workload results object."""
    row = {k: res.get(k) for k in WORKLOAD_COLUMNS}
    steps = res.get("per_step") or []
    row["comm_us"] = float(sum(r.get("comm_us", 0.0) for r in steps))
    row["exposed_comm_us"] = float(sum(r.get("exposed_comm_us", 0.0) for r in steps))
    return row


def _run_workload(desc: dict) -> dict:
    from algo.workloads.format import load_workload
    from hw.config import config_from_dict
    from sim.engines.model import SimError
    from sim.sweep.spec import parse_reuse
    from sim.workload.device import A100Device, KaleidoDevice
    from sim.workload.simulate import simulate_workload

    wl = load_workload(desc["workload"])
    field = None
    if desc["reuse"] is not None:
        field = parse_reuse(desc["reuse"])
        if not any(o.grid is not None and o.groups for o in wl.ops):
            raise SimError(f"reuse: the {wl.generator} workload's ops carry no token grid, so Kaleido's reuse "
                           "cannot apply to it yet")
    if desc["config"] is None:
        dev = A100Device(None)
    else:
        dev = KaleidoDevice(config_from_dict(desc["config"], "sweep point"), field, desc["seed"], wl.b_msb,
                            desc["tech"])
    return workload_row(simulate_workload(wl, dev, desc["devices"], workload_path=desc["workload"]))


def run_point(desc: dict) -> dict:
    """Simulate one sweep point.

    Args:
        desc: ``{"trace": path, "config": AcceleratorConfig as JSON, "theta_index": int, "tech": str or
            None, "dispatcher": bool}``, or for a workload point ``{"workload": path, "config": JSON or
            None (A100s), "devices": int, "reuse": "r,p[,HxW,q]" or None, "seed": int, "tech": ...}``.

    Returns:
        ``{"status": "ok", "result": {column: value}}`` (`RESULT_COLUMNS`, `WORKLOAD_COLUMNS` for a
        workload) or ``{"status": "failed",
        "error": one line}``; never raises for a bad point (any exception becomes its error line).
    """
    try:
        if "workload" in desc:
            return {"status": "ok", "result": _run_workload(desc)}
        from algo.trace import load_trace
        from hw.config import config_from_dict
        from sim.engines.model import simulate_trace

        cfg = config_from_dict(desc["config"], "sweep point")
        tr = load_trace(desc["trace"], derive_p=False, states=False)  # the cycle model reads no states
        res = simulate_trace(tr, cfg, trace_path=desc["trace"], theta_index=desc["theta_index"],
                             tech=desc["tech"], dispatcher=desc["dispatcher"])
        from sim.results import state_notes

        return {"status": "ok", "result": summary_row(res, len(state_notes(res, tr, cfg)))}
    except Exception as err:  # noqa: BLE001 - a failed point is recorded, the sweep goes on
        return {"status": "failed", "error": one_line(err)}


def run_ops(desc: dict) -> tuple[list[dict], list[int]]:
    """Per-op results of some ops of a trace file (`sim.engines.model.simulate_ops`), the file read op by op.

    Args:
        desc: ``{"trace": path, "ops": [op indices], "config": AcceleratorConfig as JSON, "theta_index":
            int, "tech": str or None, "dispatcher": bool}``.

    Returns:
        (per-op results in index order, their decision counts [compute, partial, reuse] as ints).

    Raises:
        algo.trace.TraceError, sim.engines.model.SimError, sim.cost.tech.TechError: as `simulate_trace`.
    """
    from algo.trace import TraceReader
    from hw.config import config_from_dict
    from sim.cost.energy import EnergyModel
    from sim.engines.model import simulate_ops

    cfg = config_from_dict(desc["config"], "simulate task")
    with TraceReader(desc["trace"], derive_p=False, states=False) as rd:  # the cycle model reads no states
        ops = rd.load_ops(desc["ops"])
        grid, b_msb = rd.grid, rd.b_msb
    per_op, counts = simulate_ops(ops, grid, b_msb, cfg, EnergyModel(cfg, desc["tech"]), desc["theta_index"],
                                  desc["dispatcher"])
    return per_op, [int(v) for v in counts]
