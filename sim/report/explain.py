"""Why an op is as fast and as costly as it is (`kaleido explain RESULT.json`), from a results JSON.

Per op, the speedup chain (each a ratio against the dense design on the same array):

- ``ideal``: ``dense_macs / useful_macs`` = 1 / (C + P/2) of the op's decisions (every saved MAC
  turned into time);
- ``slots``: dense issued slots / Kaleido issued slots (``slots``; dense = ``batch ceil(M/R) ceil(N/C)
  K``): what the dispatcher's tiling, skipping and pairing leave of the ideal (a tile's slots are
  set by its busiest rows: the lockstep loss);
- ``array``: ``speedup`` (the array's cycles, RTL-exact: the slots plus fill, drain and drain stalls);
- ``end to end``: ``total_speedup`` (with DRAM, vector and similarity stalls, `sim.memory`,
  `sim.timing.attention`).

The binding mechanism of a design on an op is the array when its stalls (beyond the array's own
cycles) are below `ARRAY_BOUND_SHARE` of its total, else the cause with the most stall cycles
(``dram``, ``vector``, ``similarity``, and the compact organisation's ``combine`` unit,
`sim.timing.compact`); within the array, ``drain`` when the drain stall is at least that share of the
array cycles, else the organisation's own loss when Kaleido's slots are above the ideal -- ``lockstep``
(a tile's slots are set by its busiest rows) or, for the compact organisation, ``packing`` (partly
filled band-tiles at pool and chunk ends) -- or ``array``. For the compact organisation ``slots`` are
band-tile slots divided by the bands (the array-equivalent issue time). Where Kaleido *loses* is a second
question (`loses_on`): the chain link that falls furthest below 1, named by its mechanism.
Energy: each op's components (`sim.energy.COMPONENTS`) against dense, largest differences first; the
compact organisation's own components are ``gather_network``, ``combine_unit``, ``controller`` (D101) and ``sram_psum`` (and the delta
organisation's difference-sum buffer ``sram_diff``, D84, which holds what the partial-sum SRAM held before).
The whole result's energy difference is split into the array's share (`ARRAY_COMPONENTS`: what reuse saves
and what the PE extras cost) and the share of the units around it (SRAMs, DRAM, vector unit, leakage), where
a floor that no array can remove shows (`energy_ledger`), with the ops whose DRAM bytes exceed dense's.
"""

from __future__ import annotations

import json
from pathlib import Path

#: Stalls below this share of an op's total time: the array binds (project default, a reading aid).
ARRAY_BOUND_SHARE = 0.05


class ExplainError(ValueError):
    """The file is not a results JSON of `kaleido simulate`."""


def load_results(path: str | Path) -> dict:
    """Read a results JSON; raises `ExplainError` (missing, not JSON, not a trace result)."""
    p = Path(path)
    if not p.is_file():
        raise ExplainError(f"results file not found: {p}")
    try:
        res = json.loads(p.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        hint = (" -- it looks like a trace: run `kaleido simulate TRACE --json R.json`, then explain R.json"
                if p.suffix == ".npz" else "")
        raise ExplainError(f"{p} is not a results JSON ({err.__class__.__name__}){hint}") from None
    if not isinstance(res, dict) or "per_op" not in res or "config" not in res:
        raise ExplainError(f"{p} is not the results JSON of a trace (`kaleido simulate TRACE --json`)")
    return res


#: The loss within the array named for each organisation when its slots exceed the ideal (module docstring).
ORGANISATION_LOSS = {"lockstep": "lockstep", "compact": "packing", "delta": "packing"}


def binding(op: dict, dense: bool, organisation: str = "lockstep") -> str:
    """The mechanism binding one design on one op (module docstring)."""
    pre = "dense_" if dense else ""
    total, cycles = op.get(f"{pre}total_cycles", 0), op[f"{pre}cycles"]
    st = op.get(f"{pre}stall_cycles", {})
    outside = {k: st.get(k, 0) for k in ("dram", "vector", "similarity", "combine")}
    if total and sum(outside.values()) >= ARRAY_BOUND_SHARE * total:
        return max(outside, key=outside.get)
    if cycles and st.get("drain", 0) >= ARRAY_BOUND_SHARE * cycles:
        return "drain"
    if not dense and op.get("useful_macs") and op["dense_macs"] / op["useful_macs"] > 1.1 * op.get("speedup", 0):
        return ORGANISATION_LOSS.get(organisation, "lockstep")
    return "array"


#: A chain link below this ratio is a loss worth naming (a reading aid, like `ARRAY_BOUND_SHARE`: 2 % is below the
#: cycle model's fill/drain rounding on small ops).
LOSS_RATIO = 0.98


def loses_on(row: dict, op: dict, organisation: str = "lockstep") -> tuple[str, float]:
    """Where along the chain Kaleido falls furthest below what the previous link promised, as (link, ratio).

    ``row`` is `explain_rows`' row of ``op``. The links: ideal -> slots is the organisation's tiling loss
    (`ORGANISATION_LOSS`: ``lockstep`` or ``packing``); slots -> array is ``drain`` when Kaleido's drain stall is at
    least `ARRAY_BOUND_SHARE` of its array cycles, else ``fill`` (the array's fill and drain around the slots);
    array -> end to end is the stall outside the array (``dram``, ``vector``, ``similarity``, ``combine``) whose
    cycles exceed dense's the most. The link with the smallest ratio below `LOSS_RATIO` is named; ``("-", 1.0)``
    when none is. This answers a different question from `binding`: an op can be DRAM-bound in both designs (the
    same stall) and lose to dense in its array (``binds dram``, ``loses on drain``)."""
    links = []
    if row["ideal"] and row["slots"]:
        links.append((ORGANISATION_LOSS.get(organisation, "lockstep"), row["slots"] / row["ideal"]))
    if row["slots"] and row["array"]:
        drain = op.get("stall_cycles", {}).get("drain", 0)
        links.append(("drain" if drain >= ARRAY_BOUND_SHARE * op["cycles"] else "fill", row["array"] / row["slots"]))
    if row["array"] and row["end_to_end"]:
        st, dst = op.get("stall_cycles", {}), op.get("dense_stall_cycles", {})
        keys = ("dram", "vector", "similarity", "combine")
        links.append((max(keys, key=lambda k: st.get(k, 0) - dst.get(k, 0)), row["end_to_end"] / row["array"]))
    worst = min(links, key=lambda t: t[1], default=("-", 1.0))
    return worst if worst[1] < LOSS_RATIO else ("-", 1.0)


def dense_slots(op: dict, cfg: dict) -> int:
    """Issued slots of the dense design: ``batch ceil(M/R) ceil(N/C) K``."""
    R, C = cfg["array_rows"], cfg["array_cols"]  # noqa: N806
    return op["batch"] * -(-op["M"] // R) * -(-op["N"] // C) * op["K"]


def explain_rows(res: dict) -> list[dict]:
    """One row per op: ``name``, ``block``, ``step``, ``ideal``, ``slots``, ``array``, ``end_to_end``,
    ``binds`` (Kaleido), ``dense_binds``, ``loses_on`` (`loses_on`'s (link, ratio)), ``energy_ratio`` and
    ``energy_top`` (components by difference)."""
    cfg = res["config"]
    rows = []
    for op in res["per_op"]:
        e, de = op.get("energy_breakdown_pj", {}), op.get("dense_energy_breakdown_pj", {})
        diff = sorted(((e.get(k, 0.0) - de.get(k, 0.0), k) for k in set(e) | set(de)), key=lambda t: -abs(t[0]))
        rows.append({
            "name": op["name"], "block": op["block"], "step": op["step"], "fused": op.get("fused"),
            "ideal": op["dense_macs"] / op["useful_macs"] if op.get("useful_macs") else float("inf"),
            "slots": dense_slots(op, cfg) / op["slots"] if op.get("slots") else 0.0,
            "array": op["speedup"], "end_to_end": op.get("total_speedup", op["speedup"]),
            "binds": binding(op, False, res.get("organisation", "lockstep")), "dense_binds": binding(op, True),
            "energy_ratio": op["energy_pj"] / op["dense_energy_pj"] if op.get("dense_energy_pj") else 0.0,
            "energy_top": [(k, d) for d, k in diff[:3] if d],
        })
        rows[-1]["loses_on"] = loses_on(rows[-1], op, res.get("organisation", "lockstep"))
    return rows


def totals(res: dict) -> dict:
    """Whole-result chain: ideal, array, end to end, energy saving, and energy by component (pJ, both designs)."""
    useful = sum(o["useful_macs"] for o in res["per_op"])
    dense_macs = sum(o["dense_macs"] for o in res["per_op"])
    return {"ideal": dense_macs / useful if useful else float("inf"), "array": res["speedup"],
            "end_to_end": res.get("total_speedup", res["speedup"]), "energy_saving": res.get("energy_saving"),
            "energy": res.get("energy_breakdown_pj", {}), "dense_energy": res.get("dense_energy_breakdown_pj", {})}


#: Energy components of the array itself (`sim.cost.energy.COMPONENTS`); the rest are the units around it.
ARRAY_COMPONENTS = ("array_macs", "pe_registers", "pe_muxes", "dispatcher", "gather_network", "combine_unit",
                    "controller", "sram_psum", "sram_diff")  # the last five: the compact and delta organisations'
                                               # own units (sim.cost.compact_actions; controller: their op-level
                                               # controllers, D101; sram_diff: delta's D sums, D84)


def _dram(op: dict, key: str) -> float:
    a = op.get(key, {})
    return a.get("dram_read_bytes", 0) + a.get("dram_write_bytes", 0)


def energy_ledger(res: dict) -> dict:
    """Kaleido minus dense energy (pJ) of a whole result, by component, split at the array:

    ``{"array": {component: pJ}, "around": {component: pJ}, "array_pj", "around_pj", "dram_over": [(op name,
    block, step, Kaleido / dense DRAM bytes)]}`` (components with a zero difference left out; ``dram_over``:
    the ops whose Kaleido DRAM bytes exceed dense's). A positive ``around_pj`` is energy that the units
    around the array spend beyond dense's whatever the array saves (`ARRAY_COMPONENTS`).
    """
    e, de = res.get("energy_breakdown_pj", {}), res.get("dense_energy_breakdown_pj", {})
    diff = {k: e.get(k, 0.0) - de.get(k, 0.0) for k in dict.fromkeys([*e, *de])}
    arr = {k: v for k, v in diff.items() if k in ARRAY_COMPONENTS and v}
    around = {k: v for k, v in diff.items() if k not in ARRAY_COMPONENTS and v}
    over = [(o["name"], o["block"], o["step"], _dram(o, "actions") / _dram(o, "dense_actions"))
            for o in res["per_op"] if _dram(o, "dense_actions") and _dram(o, "actions") > _dram(o, "dense_actions")]
    return {"array": arr, "around": around, "array_pj": sum(arr.values()), "around_pj": sum(around.values()),
            "dram_over": over}


def energy_rows(res: dict) -> list[tuple[str, str, float, float]]:
    """Energy by component of a whole result, for a table: ``(component, "array" | "around", Kaleido pJ, dense
    pJ)``, components where either design spends energy, the largest saving (Kaleido − dense most negative) first
    (`ARRAY_COMPONENTS` says which side of the array a component is on)."""
    e, de = res.get("energy_breakdown_pj", {}), res.get("dense_energy_breakdown_pj", {})
    rows = [(k, "array" if k in ARRAY_COMPONENTS else "around", e.get(k, 0.0), de.get(k, 0.0))
            for k in dict.fromkeys([*e, *de]) if e.get(k) or de.get(k)]
    return sorted(rows, key=lambda r: (r[2] - r[3], r[0]))


def energy_ledger_lines(res: dict, ascii_only: bool = False, components: bool = True) -> list[str]:
    """The `energy_ledger` of ``res`` as sentences: the Kaleido − dense energy of the array and of the units
    around it (µJ, by component, most saved first), then the ops whose DRAM bytes exceed dense's (when any).
    ``ascii_only``: ``-``, ``uJ`` and ``x`` for the minus, micro and multiplication signs (terminals).
    ``components=False``: the first sentence without its per-component lists (for a caller that shows
    `energy_rows` as a table)."""
    minus, micro, times = ("-", "uJ", "x") if ascii_only else ("−", "µJ", "×")
    led = energy_ledger(res)

    def fmt(x):
        return ", ".join(f"{k} {v / 1e6:+,.0f}" for k, v in sorted(x.items(), key=lambda kv: kv[1])) or "none"
    if components:
        lines = [f"Kaleido {minus} dense energy ({micro}): the array {led['array_pj'] / 1e6:+,.0f} ({fmt(led['array'])}); "
                 f"the units around it {led['around_pj'] / 1e6:+,.0f} ({fmt(led['around'])})"]
    else:
        lines = [f"Kaleido {minus} dense energy ({micro}): the array {led['array_pj'] / 1e6:+,.0f}, "
                 f"the units around it {led['around_pj'] / 1e6:+,.0f}"]
    from sim.report.organisations import energy_floor, ideal_energy

    dense_e = res.get("dense_energy_pj", 0.0)
    if dense_e and all("useful_macs" in o for o in res["per_op"]):
        ideal_e, floor = ideal_energy(res), energy_floor(res)
        share = (dense_e - res["energy_pj"]) / (dense_e - ideal_e) if dense_e > ideal_e else 0.0
        lines.append(f"energy {res['energy_pj'] / dense_e:.3f}{times} dense; an ideal design on these decisions (the "
                     f"shared units at dense's energy, {floor / dense_e:.3f}{times}, everything else doing only the useful "
                     f"MACs' share) {ideal_e / dense_e:.3f}{times}: " + (
                         f"this design has {share:.2f} of the saving reuse allows" if share >= 0 else
                         "this design spends more than dense, so it reaches none of that saving"))
    if led["dram_over"]:
        lines.append("DRAM bytes above dense's: " + _dram_over_text(led["dram_over"], times))
    return lines


def _dram_over_text(over: list, times: str) -> str:
    """The ops whose DRAM bytes exceed dense's, one entry per op name (``over``: ``(name, block, step, ratio)``
    tuples): a single op with its block and step, several as a count and the range of their ratios."""
    by_name: dict[str, list] = {}
    for n, b, s_, x in over:
        by_name.setdefault(n, []).append((b, s_, x))
    parts = []
    for n, rows in by_name.items():
        if len(rows) == 1:
            b, s_, x = rows[0]
            parts.append(f"{n} (block {b}, step {s_}) {x:.2f}{times}")
        else:
            lo, hi = min(r[2] for r in rows), max(r[2] for r in rows)
            rng = f"{lo:.2f}{times}" if f"{lo:.2f}" == f"{hi:.2f}" else f"{lo:.2f}-{hi:.2f}{times}"
            parts.append(f"{n} ({len(rows)} ops) {rng}")
    return ", ".join(parts)
