"""Array organisations side by side (docs/decisions.md D50): speedup against reuse, per-op share of the ideal, energy
against dense with the floor the shared units set, and area, for every organisation of `hw.config.ORGANISATIONS`.

`compare` simulates one synthetic decision field (`algo.workloads.synth`, the D41/D50 field) on one preset
under each organisation (`hw.config.with_organisation`); `sweep` does it for several reuse levels and
regions (scattered 1x1 and coherent 8x8 decisions); `plot` draws end-to-end speedup against r per
organisation with the ideal bound ``1 / (C + P/2)`` of the measured decisions, and the area and
energy of each organisation beside it (`make bench` writes it to ``reports/organisations/``; `kaleido report`
writes the same figure, ``organisations.png``, from results files by `result_rows`).

Energy floor (`energy_floor`): the components that do the same work in every design -- DRAM, the
vector unit, the score SRAM (fused attention) and the output SRAM -- taken at the dense design's
energy. No array organisation can go below it, so the saving it allows is ``1 - floor / dense``,
and an organisation's share of that saving is ``(dense - kaleido) / (dense - floor)``.

Ideal energy (`ideal_energy`): the floor is not reachable by any design that still computes what the
decisions say must be computed. The ideal design spends, per op, dense's energy in the shared units plus
dense's energy in everything else (array, input and weight SRAM, leakage, ...) scaled by the op's useful
work ``useful_macs / dense_macs`` = 1 / ideal speedup: every unit that is not shared does exactly the useful
MACs' share of dense's work, at dense's energy per action, and the die is no larger than dense's. It is
the energy counterpart of the ideal speedup (`_ideal`), and ``(dense - kaleido) / (dense - ideal)``
is an organisation's share of the saving reuse can give at all (docs/decisions.md D67).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

from hw.config import ORGANISATIONS, load_config, with_organisation

#: Components doing the same work in every design (module docstring): the floor of any organisation's energy.
SHARED_COMPONENTS = ("dram", "vector_unit", "sram_score", "sram_output")
#: The synthetic field of docs/decisions.md D41 and D50: Wan2.1-1.3B 480p, block 0, step 0.
FIELD = {"model": "wan2.1-t2v-1.3b", "resolution": "480p", "partial": 0.04, "persist": 0.9, "seed": 1,
         "blocks": [0], "steps": [0]}
#: Linear ops (the per-op share-of-ideal target of D50 applies to these).
LINEAR_OPS = ("qkv", "o_proj", "cross_q", "cross_o", "ffn1", "ffn2")


def _ideal(rec: dict) -> float:
    """Dense over useful MACs of an op's (or a whole result's) decisions, 1 / (C + P/2) weighted by each op's
    MACs: the one ideal `sim.report.explain` and the report's figures use."""
    if "per_op" in rec:
        useful = sum(o.get("useful_macs", 0) for o in rec["per_op"])
        dense = sum(o.get("dense_macs", 0) for o in rec["per_op"])
    else:
        useful, dense = rec.get("useful_macs", 0), rec.get("dense_macs", 0)
    return dense / useful if useful else float("inf")


def energy_floor(res: dict) -> float:
    """pJ of the `SHARED_COMPONENTS` in the dense design's breakdown (module docstring)."""
    return sum(res["dense_energy_breakdown_pj"].get(k, 0.0) for k in SHARED_COMPONENTS)


def ideal_energy(res: dict) -> float:
    """pJ of the ideal design on ``res``'s decisions (module docstring): per op (a whole result's ``per_op``,
    or one op object), the `SHARED_COMPONENTS` of dense's breakdown plus the rest of dense's energy times
    ``useful_macs / dense_macs``. An op without MACs keeps dense's energy."""
    total = 0.0
    for o in res.get("per_op", [res]):
        dense = o["dense_energy_pj"]
        shared = sum(o["dense_energy_breakdown_pj"].get(k, 0.0) for k in SHARED_COMPONENTS)
        work = o["useful_macs"] / o["dense_macs"] if o.get("dense_macs") else 1.0
        total += shared + (dense - shared) * work
    return total


def summary(res: dict, unsized: int = 0) -> dict:
    """The figures the bench prints for one result: totals, per-op share of the ideal, energy and floor, and
    ``unsized``, the number of fused score ops whose temporal state does not fit (`sim.results.state_notes`,
    D70: their figures are an upper bound)."""
    dense_e, e, floor, ideal_e = res["dense_energy_pj"], res["energy_pj"], energy_floor(res), ideal_energy(res)
    per_op = {o["name"]: {"total": o["total_speedup"], "array": o["speedup"], "ideal": _ideal(o),
                          "share": o["total_speedup"] / _ideal(o), "array_share": o["speedup"] / _ideal(o)}
              for o in res["per_op"]}
    return {"organisation": res["organisation"], "total_speedup": res["total_speedup"], "speedup": res["speedup"],
            "ideal": _ideal(res), "energy_vs_dense": e / dense_e,
            "floor_vs_dense": floor / dense_e,
            "floor_saving_share": (dense_e - e) / (dense_e - floor) if dense_e > floor else 0.0,
            "ideal_energy_vs_dense": ideal_e / dense_e,
            "ideal_saving_share": (dense_e - e) / (dense_e - ideal_e) if dense_e > ideal_e else 0.0,
            "area_mm2": res["energy_model"]["area_mm2"], "dense_area_mm2": res["energy_model"]["dense_area_mm2"],
            "per_op": per_op, "unsized": unsized}


def compare(preset: str, reuse: float, region: tuple[int, int], organisations=ORGANISATIONS,
            progress: Callable[[str], None] | None = None, combine_timing: str = "model") -> dict[str, dict]:
    """`summary` of the D50 field at ``reuse`` and ``region`` on ``preset`` under each organisation, the banded
    organisations' combine timed as ``combine_timing`` (`hw.config.AcceleratorConfig.combine_timing`)."""
    from algo.trace import load_trace
    from algo.workloads.synth import SynthField, synth_trace
    from sim.engines.model import simulate_trace
    from sim.results import state_notes

    base = load_config(preset)
    f = FIELD
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "synth.npz")
        synth_trace(path, f["model"], f["resolution"], SynthField(reuse, f["partial"], region, f["persist"]),
                    blocks=f["blocks"], steps=f["steps"], seed=f["seed"])
        tr = load_trace(path)
        out = {}
        for org in organisations:
            if progress:
                progress(f"{org} r={reuse} region {region[0]}x{region[1]}")
            cfg = with_organisation(base.model_copy(update={"combine_timing": combine_timing}), org)
            res = simulate_trace(tr, cfg)
            out[org] = summary(res, len(state_notes(res, tr, cfg)))
    return out


def sweep(preset: str, reuses, regions, organisations=ORGANISATIONS,
          progress: Callable[[str], None] | None = None) -> list[dict]:
    """Rows ``{region, reuse, organisation, total_speedup, ideal, energy_vs_dense, area_mm2, dense_area_mm2}``."""
    rows = []
    for region in regions:
        for r in reuses:
            for org, s in compare(preset, r, region, organisations, progress).items():
                rows.append({"region": f"{region[0]}x{region[1]}", "reuse": r, "organisation": org,
                             **{k: s[k] for k in ("total_speedup", "ideal", "energy_vs_dense", "area_mm2",
                                                  "dense_area_mm2")}})
    return rows


def result_rows(items) -> list[dict]:
    """`sweep`'s rows from results files (``[(label, results)]``), for `kaleido report`: one row per trace
    result whose per-op records carry MAC counts. ``region`` is the synthetic field's (read back from the
    trace's weights text by `algo.workloads.synth.field_of_weights`) or ``"captured"``; ``reuse`` is the
    measured REUSE share; ``ideal`` the dense over useful MACs of its decisions (`sim.report.explain`'s ideal).
    Rows are kept only for the (config, model, grid, region) groups in which at least two organisations each
    have at least two reuse levels (what the figure needs); empty otherwise."""
    from algo.workloads.synth import field_of_weights

    groups: dict[tuple, list[dict]] = {}
    for _, d in items:
        if "per_op" not in d or "reuse_fraction" not in d or "energy_model" not in d:
            continue
        useful = sum(o.get("useful_macs", 0) for o in d["per_op"])
        dense = sum(o.get("dense_macs", 0) for o in d["per_op"])
        if not useful or "reuse" not in d["reuse_fraction"]:
            continue
        tr = d.get("trace", {})
        fld = field_of_weights(tr.get("weights"))
        region = f"{fld[0].region[0]}x{fld[0].region[1]}" if fld else "captured"
        key = (d["config"].get("name"), tr.get("model"), tuple(tr.get("grid", ())), region)
        groups.setdefault(key, []).append({
            "region": region, "reuse": d["reuse_fraction"]["reuse"], "organisation": d.get("organisation", "lockstep"),
            "total_speedup": d.get("total_speedup", d["speedup"]), "ideal": dense / useful,
            "energy_vs_dense": d["energy_pj"] / d["dense_energy_pj"] if d.get("dense_energy_pj") else float("nan"),
            "area_mm2": d["energy_model"]["area_mm2"], "dense_area_mm2": d["energy_model"]["dense_area_mm2"]})
    out = []
    for rows in groups.values():
        levels = {}
        for r in rows:
            levels.setdefault(r["organisation"], set()).add(round(r["reuse"], 6))
        if sum(len(v) >= 2 for v in levels.values()) >= 2:
            out += sorted(rows, key=lambda r: (r["organisation"], r["reuse"]))
    return out


def _region_order(region: str) -> tuple:
    return (1, 0) if region == "captured" else (0, int(region.split("x")[0]) * int(region.split("x")[1]))


def figure(rows: list[dict], panel_inches: tuple[float, float] = (4.2, 3.6)):
    """The figure of `plot`: one panel per region (end-to-end speedup against r per organisation, the
    ideal bound drawn per region as measured), and a panel of area (bars) and energy against dense
    (diamonds) per organisation at the highest r of the first region. Returns the matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    regions = sorted({r["region"] for r in rows}, key=_region_order)
    orgs = list(dict.fromkeys(r["organisation"] for r in rows))
    fig, axes = plt.subplots(1, len(regions) + 1, figsize=(panel_inches[0] * (len(regions) + 1), panel_inches[1]))
    for ax, region in zip(axes, regions, strict=False):
        sel = [r for r in rows if r["region"] == region]
        ideal = sorted({(round(r["reuse"], 6), r["ideal"]) for r in sel})
        ax.plot([x for x, _ in ideal], [y for _, y in ideal], "k--", label="ideal 1/(C+P/2)")
        for org in orgs:
            pts = sorted((r["reuse"], r["total_speedup"]) for r in sel if r["organisation"] == org)
            ax.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=org)
        kind = {"1x1": "scattered", "captured": "captured"}.get(region, "coherent")
        ax.set_title(f"{kind} decisions" + ("" if region == "captured" else f" ({region} regions)"))
        ax.set_xlabel("REUSE share r")
        ax.set_ylabel("end-to-end speedup vs dense (x)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    ax = axes[-1]
    first = [r for r in rows if r["region"] == regions[0]]
    top = max(r["reuse"] for r in first)
    sel = [next(r for r in first if r["organisation"] == org and r["reuse"] == max(
        x["reuse"] for x in first if x["organisation"] == org)) for org in orgs if any(
        r["organisation"] == org for r in first)]
    xs = range(len(sel) + 1)
    areas = [sel[0]["dense_area_mm2"]] + [r["area_mm2"] for r in sel]
    ax.bar(xs, areas, color=["grey"] + [f"C{i}" for i in range(len(sel))])
    ax.set_xticks(list(xs), ["dense"] + [r["organisation"] for r in sel])
    ax.set_ylabel("area (mm^2)")
    ax2 = ax.twinx()
    ax2.plot(xs, [1.0] + [r["energy_vs_dense"] for r in sel], "kD", label="energy / dense")
    ax2.set_ylabel(f"energy / dense at r = {top:.2g} ({regions[0]})")
    ax2.set_ylim(0, max(2.0, max(r["energy_vs_dense"] for r in sel) * 1.1))
    ax.set_title("area (bars) and energy (diamonds)")
    fig.tight_layout()
    return fig


def plot(rows: list[dict], out_dir: str | Path) -> list[Path]:
    """`figure` as ``organisations.png`` and ``.pdf`` in ``out_dir`` (created); returns the paths."""
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    fig = figure(rows)
    paths = [out / "organisations.png", out / "organisations.pdf"]
    for p in paths:
        fig.savefig(p, dpi=120, metadata={"CreationDate": None} if p.suffix == ".pdf" else None)
    plt.close(fig)
    return paths
