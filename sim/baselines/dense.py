"""The dense baseline: the same R x C array with reuse off (plain int8 MAC PEs, raster tiling).

Its cycles and energy are computed by `sim.engines.model` (``dense_cycles``, ``dense_energy_pj``, per op
and in total; `sim.cost.actions.dense_actions`); this module only presents them as a baseline entry.
"""

from __future__ import annotations

NAME = "dense"
LABEL = "dense array (reuse off)"


def from_results(results: dict) -> dict:
    """The dense baseline entry from a Kaleido results object (`sim.engines.model.simulate_trace`):
    ``cycles`` (array cycles, int), ``time_us`` (cycles / clock_mhz), ``energy_pj`` (pJ), per op and total."""
    clock = results["config"]["clock_mhz"]
    per_op = [{"name": r["name"], "block": r["block"], "step": r["step"], "cycles": r["dense_cycles"],
               "time_us": r["dense_cycles"] / clock, "energy_pj": r.get("dense_energy_pj", 0.0)}
              for r in results["per_op"]]
    return {"name": NAME, "label": LABEL, "kind": "array", "params": {},
            "cycles": results["dense_cycles"], "time_us": results["dense_cycles"] / clock,
            "energy_pj": results.get("dense_energy_pj", 0.0),
            "energy_breakdown_pj": results.get("dense_energy_breakdown_pj", {}), "per_op": per_op,
            "work": {"full": 1.0, "half": 0.0, "skip": 0.0}, "notes": "plain int8 MAC PEs, smaller die"}
