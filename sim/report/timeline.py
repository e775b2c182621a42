"""A Chrome/Perfetto trace-event timeline of a results JSON (`kaleido simulate TRACE --timeline OUT.json`).

Open the file in https://ui.perfetto.dev or chrome://tracing (both read the Trace Event Format's JSON
object form: ``{"traceEvents": [...], "displayTimeUnit": "ns"}``). Layout:

- one process per design (``pid`` 1 Kaleido, 2 dense), one thread (track) per unit: ``array``, ``vector
  unit``, ``similarity unit`` (Kaleido only) and ``DRAM`` (`TRACKS`);
- ops run one after another, as `sim.engines.model` times them: op i starts when op i - 1's
  ``total_cycles`` end (a fused attention pair's two ops follow each other, their stalls split between
  them as `sim.timing.attention` charges them);
- on the ``array`` track each op is one slice of its array ``cycles`` (RTL-exact, drain stall included),
  followed by one ``stall: <cause>`` slice per cause with stall cycles (``dram``, ``vector``,
  ``similarity``); the array track's slices of an op therefore add up to its ``total_cycles`` and the
  op slices over the whole track to the result's ``cycles`` (where in the op a stall falls is not
  drawn more finely: head and tail waits and overlap excess are shown as one slice per cause);
- on the other tracks each op is one slice of that unit's busy cycles (``memory``: ``vector_cycles``,
  ``similarity_cycles``, ``dram_cycles``; dense: ``dense_vector_cycles``, ``dense_dram_cycles``) from the
  op's start, clipped to the op's window (the unclipped cycles are in the slice's ``args``).

Time: ``ts``/``dur`` in microseconds at the config's clock (1 cycle = 1 / clock_mhz µs); every slice's
``args.cycles`` holds its exact cycle count.

Bounded size: at most `MAX_SLICES_PER_TRACK` slices per track. A result with more ops is drawn with
consecutive ops of one (step, block) merged into one slice per track (named ``step S block B``, cycles
summed); if that still exceeds the bound, whole steps are merged (``step S``). The ``otherData`` field
says which granularity was used. Either way the slices still add up to the result's cycles.
"""

from __future__ import annotations

from itertools import groupby

#: Tracks (thread ids) per design.
TRACKS = {"array": 1, "vector unit": 2, "similarity unit": 3, "DRAM": 4}
#: Slices per track above which ops are merged (module docstring): about 100 bytes per event, so a
#: timeline stays under about 10 MB whatever the trace's length (project choice).
MAX_SLICES_PER_TRACK = 20_000
STALL_CAUSES = ("dram", "vector", "similarity")


def _units(op: dict, dense: bool) -> dict[str, int]:
    m = op.get("memory", {})
    if dense:
        return {"vector unit": m.get("dense_vector_cycles", 0), "DRAM": m.get("dense_dram_cycles", 0)}
    return {"vector unit": m.get("vector_cycles", 0), "similarity unit": m.get("similarity_cycles", 0),
            "DRAM": m.get("dram_cycles", 0)}


def _items(per_op: list[dict], dense: bool, grain: str) -> list[dict]:
    """Slices' content: ``{"name", "cycles", "stalls": {cause: n}, "units": {track: n}, "total"}`` per item."""
    pre = "dense_" if dense else ""
    rows = []
    for op in per_op:
        st = op.get(f"{pre}stall_cycles", {})
        rows.append({"name": op["name"], "step": op["step"], "block": op["block"], "cycles": op[f"{pre}cycles"],
                     "stalls": {k: st.get(k, 0) for k in STALL_CAUSES},
                     "units": _units(op, dense), "total": op.get(f"{pre}total_cycles", op[f"{pre}cycles"])})
    if grain == "op":
        return rows
    key = (lambda r: (r["step"], r["block"])) if grain == "block" else (lambda r: (r["step"],))
    out = []
    for k, grp in groupby(rows, key=key):
        grp = list(grp)
        out.append({"name": f"step {k[0]}" + (f" block {k[1]}" if grain == "block" else ""),
                    "cycles": sum(r["cycles"] for r in grp), "total": sum(r["total"] for r in grp),
                    "stalls": {c: sum(r["stalls"][c] for r in grp) for c in STALL_CAUSES},
                    "units": {u: sum(r["units"].get(u, 0) for r in grp) for u in grp[0]["units"]}})
    return out


def _grain(per_op: list[dict], max_slices: int) -> str:
    if len(per_op) <= max_slices:
        return "op"
    blocks = sum(1 for _ in groupby(per_op, key=lambda o: (o["step"], o["block"])))
    return "block" if blocks <= max_slices else "step"


def timeline_events(res: dict, max_slices: int = MAX_SLICES_PER_TRACK) -> dict:
    """The trace-event object of a results JSON (module docstring): ``{"traceEvents", "displayTimeUnit",
    "otherData"}``. Raises `ValueError` if ``res`` has no ``per_op``."""
    if "per_op" not in res:
        raise ValueError("not a trace result (no per_op): --timeline needs `kaleido simulate TRACE`")
    us = 1.0 / res["config"]["clock_mhz"]
    grain = _grain(res["per_op"], max_slices)
    ev = []
    for pid, design, dense in ((1, "Kaleido", False), (2, "dense", True)):
        ev.append({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": design}})
        for track, tid in TRACKS.items():
            if dense and track == "similarity unit":
                continue
            ev.append({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": track}})
        t = 0
        for it in _items(res["per_op"], dense, grain):
            ev.append({"ph": "X", "pid": pid, "tid": TRACKS["array"], "name": it["name"], "cat": "op",
                       "ts": t * us, "dur": it["cycles"] * us, "args": {"cycles": it["cycles"]}})
            s = t + it["cycles"]
            for cause in STALL_CAUSES:
                n = it["stalls"][cause]
                if n:
                    ev.append({"ph": "X", "pid": pid, "tid": TRACKS["array"], "name": f"stall: {cause}",
                               "cat": "stall", "ts": s * us, "dur": n * us, "args": {"cycles": n, "op": it["name"]}})
                    s += n
            for track, n in it["units"].items():
                if n:
                    shown = min(n, it["total"])
                    ev.append({"ph": "X", "pid": pid, "tid": TRACKS[track], "name": it["name"], "cat": "unit",
                               "ts": t * us, "dur": shown * us, "args": {"cycles": n, "shown_cycles": shown}})
            t += it["total"]
    return {"traceEvents": ev, "displayTimeUnit": "ns",
            "otherData": {"granularity": grain, "clock_mhz": res["config"]["clock_mhz"],
                          "cycles": res["cycles"], "total_cycles": res.get("total_cycles"),
                          "dense_cycles": res["dense_cycles"], "dense_total_cycles": res.get("dense_total_cycles")}}
