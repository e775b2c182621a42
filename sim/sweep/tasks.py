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
#: ``reuse_*`` from ``reuse_fraction``, ``stall_*`` from ``stall_cycles``).
RESULT_COLUMNS = (
    "cycles", "dense_cycles", "speedup", "no_dispatcher_cycles", "total_cycles", "dense_total_cycles",
    "total_speedup", "time_us", "total_time_us", "pe_utilization", "dense_pe_utilization",
    "energy_pj", "dense_energy_pj", "energy_saving", "area_mm2", "dense_area_mm2",
    "reuse_compute", "reuse_partial", "reuse_reuse",
    "stall_drain", "stall_dram", "stall_vector", "stall_similarity",
)
#: Columns holding integers (cycle counts); the others are floats.
INT_COLUMNS = ("cycles", "dense_cycles", "no_dispatcher_cycles", "total_cycles", "dense_total_cycles",
               "stall_drain", "stall_dram", "stall_vector", "stall_similarity")


def one_line(err: BaseException) -> str:
    """``Type: first line of the message`` (what a failed point records)."""
    msg = str(err).strip().splitlines()
    return f"{type(err).__name__}: {msg[0] if msg else ''}".rstrip(": ")


def summary_row(res: dict) -> dict:
    """The `RESULT_COLUMNS` of one results object."""
    row = {k: res[k] for k in RESULT_COLUMNS if k in res}
    row["area_mm2"] = res["energy_model"]["area_mm2"]
    row["dense_area_mm2"] = res["energy_model"]["dense_area_mm2"]
    for k, v in res["reuse_fraction"].items():
        row[f"reuse_{k}"] = v
    for k, v in res["stall_cycles"].items():
        row[f"stall_{k}"] = v
    return {k: row[k] for k in RESULT_COLUMNS}


def run_point(desc: dict) -> dict:
    """Simulate one sweep point.

    Args:
        desc: ``{"trace": path, "config": AcceleratorConfig as JSON, "theta_index": int, "tech": str or
            None, "dispatcher": bool}``.

    Returns:
        ``{"status": "ok", "result": {column: value}}`` (`RESULT_COLUMNS`) or ``{"status": "failed",
        "error": one line}``; never raises for a bad point (any exception becomes its error line).
    """
    try:
        from algo.trace import load_trace
        from hw.config import config_from_dict
        from sim.engines.model import simulate_trace

        cfg = config_from_dict(desc["config"], "sweep point")
        tr = load_trace(desc["trace"], derive_p=False)
        res = simulate_trace(tr, cfg, trace_path=desc["trace"], theta_index=desc["theta_index"],
                             tech=desc["tech"], dispatcher=desc["dispatcher"])
        return {"status": "ok", "result": summary_row(res)}
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
    with TraceReader(desc["trace"], derive_p=False) as rd:
        ops = rd.load_ops(desc["ops"])
        grid, b_msb = rd.grid, rd.b_msb
    per_op, counts = simulate_ops(ops, grid, b_msb, cfg, EnergyModel(cfg, desc["tech"]), desc["theta_index"],
                                  desc["dispatcher"])
    return per_op, [int(v) for v in counts]
