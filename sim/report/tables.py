"""Report tables: per-op and baseline rows, Markdown summaries, CSV bytes, and the data the figures plot
(heat-map matrix, quality points, scaling groups, area items). No matplotlib here."""

from __future__ import annotations

import csv
import io
import math
import textwrap
from pathlib import Path


def _op_label(r: dict) -> str:
    return f"{r['name']} b{r['block']} s{r['step']}"


CSV_FIELDS = ("results", "name", "block", "step", "batch", "M", "K", "N", "tiles", "dense_cycles", "cycles",
              "speedup", "pe_utilization", "dense_pe_utilization", "compute", "partial", "reuse")


def _rows(label: str, data: dict) -> list[dict]:
    rows = []
    for r in data["per_op"]:
        rf = r["reuse_fraction"]
        rows.append({
            "results": label, "name": r["name"], "block": r["block"], "step": r["step"], "batch": r["batch"],
            "M": r["M"], "K": r["K"], "N": r["N"], "tiles": r["tiles"], "dense_cycles": r["dense_cycles"],
            "cycles": r["cycles"], "speedup": round(r["speedup"], 4),
            "pe_utilization": round(r["pe_utilization"], 4),
            "dense_pe_utilization": round(r["dense_pe_utilization"], 4),
            "compute": round(rf["compute"], 4), "partial": round(rf["partial"], 4), "reuse": round(rf["reuse"], 4),
        })
    return rows


def caption(data: dict) -> str:
    """One line naming the config, trace and weights behind a figure or table."""
    t, c = data["trace"], data["config"]
    tech = data.get("energy_model", {}).get("technology")
    return (f"config {c['name']} ({c['array_rows']}x{c['array_cols']} {_organisation(data)}, {c['clock_mhz']:g} MHz); "
            f"trace {Path(t['path']).name or '?'} ({t['model']} {t['size']}, grid {'x'.join(map(str, t['grid']))}, "
            f"b_msb {t['b_msb']}); weights: {t['weights']}" + (f"; energy table: {tech}" if tech else ""))


def _organisation(data: dict) -> str:
    """The array organisation of a result (``lockstep`` for results written before the field existed)."""
    return str(data.get("organisation") or data["config"].get("organisation") or "lockstep")


def _markdown(items: list[tuple[str, dict]]) -> str:
    out = ["# Kaleido simulation report", ""]
    for label, data in items:
        rf = data["reuse_fraction"]
        out += [
            f"## {label}", "", f"_{caption(data)}_", "",
            "| metric | dense | Kaleido reuse |", "|---|---:|---:|",
            f"| cycles | {data['dense_cycles']:,} | {data['cycles']:,} |",
            f"| time (us) | {data['dense_time_us']:,.2f} | {data['time_us']:,.2f} |",
            f"| PE utilization | {data['dense_pe_utilization']:.1%} | {data['pe_utilization']:.1%} |",
            *([f"| PE utilization without the dispatcher | | {data.get('no_dispatcher_pe_utilization', 0):.1%} |"]
              if data.get("organisation", "lockstep") == "lockstep" else []),  # compact/delta have no dispatcher
            f"| speedup, array | 1.00x | {data['speedup']:.2f}x |",
            *([f"| cycles end to end (array, vector and similarity units, DRAM) | {data['dense_total_cycles']:,} "
               f"| {data['total_cycles']:,} |",
               f"| speedup end to end | 1.00x | {data['total_speedup']:.2f}x |"] if "total_speedup" in data else []),
            *([f"| energy (uJ) | {data['dense_energy_pj'] / 1e6:,.0f} | {data['energy_pj'] / 1e6:,.0f} |",
               f"| energy / dense | 1.00x | {data['energy_pj'] / data['dense_energy_pj']:.3f}x |"]
              if data.get("energy_pj") and data.get("dense_energy_pj") else []),
            "",
            f"Decisions (fraction of streamed-operand elements): COMPUTE {rf['compute']:.1%}, "
            f"PARTIAL {rf['partial']:.1%}, REUSE {rf['reuse']:.1%}.",
            "",
            "| op | block | step | M x K x N (x batch) | dense cycles | cycles | speedup | PE util. | C/P/R % |",
            "|---|---:|---:|---|---:|---:|---:|---:|---|",
        ]
        for r in data["per_op"]:
            f = r["reuse_fraction"]
            out.append(
                f"| {r['name']} | {r['block']} | {r['step']} | {r['M']} x {r['K']} x {r['N']} (x {r['batch']}) "
                f"| {r['dense_cycles']:,} | {r['cycles']:,} | {r['speedup']:.2f}x | {r['pe_utilization']:.1%} "
                f"| {f['compute']:.0%}/{f['partial']:.0%}/{f['reuse']:.0%} |"
            )
        out.append("")
    return "\n".join(out)


def energy_vs_dense(data: dict) -> str:
    """``energy vs dense: 1.52x (more)`` or ``energy vs dense: 0.66x (saving 34.0%)`` (Kaleido / dense energy)."""
    e, de = data.get("energy_pj", 0.0), data.get("dense_energy_pj", 0.0)
    if not e or not de:
        return "energy vs dense: n/a"
    r = e / de
    return f"energy vs dense: {r:.2f}x ({'more' if r > 1 else f'saving {1 - r:.1%}'})"


def _baselines(data: dict) -> dict[str, dict]:
    """The results' baseline entries that ran (not skipped), in file order."""
    return {k: v for k, v in data.get("baselines", {}).items() if "skipped" not in v}


def model_label(data: dict) -> str:
    """``model size grid`` of a results file, with 480p/720p named for Wan's 30x52 / 45x80 token grids."""
    t = data["trace"]
    g = t["grid"]
    res = {(30, 52): "480p", (45, 80): "720p"}.get((g[1], g[2]), "x".join(map(str, g)))
    return f"{t['model']} {t['size']} {res}"


def _captions(items) -> str:
    """Caption lines for a figure drawn from several results: each config, trace and weights named once."""
    cfgs, traces, weights = {}, {}, {}
    for _, d in items:
        t, c = d["trace"], d["config"]
        cfgs[f"{c['name']} ({c['array_rows']}x{c['array_cols']} {_organisation(d)}, {c['clock_mhz']:g} MHz)"] = 1
        traces[f"{Path(t['path']).name or '?'} ({t['model']} {t['size']}, grid {'x'.join(map(str, t['grid']))}, "
               f"b_msb {t['b_msb']})"] = 1
        weights[t["weights"]] = 1
    text = (f"config: {', '.join(cfgs)}; trace: {', '.join(traces)}; weights: {' | '.join(weights)}; "
            f"energy table: {', '.join(dict.fromkeys(str(d.get('energy_model', {}).get('technology', '?')) for _, d in items))}")
    return "\n".join(textwrap.wrap(text, 170))


BASELINE_FIELDS = ("results", "model", "baseline", "label", "kind", "cycles", "time_us", "energy_pj",
                   "kaleido_speedup", "kaleido_energy_saving", "work_skip", "work_half", "latent_psnr_db",
                   "latent_ssim", "notes")


def baseline_rows(label: str, data: dict) -> list[dict]:
    """One row per design (Kaleido first, then every baseline; skipped ones with their reason)."""
    q = data.get("quality", {})
    rows = [{"results": label, "model": model_label(data), "baseline": "kaleido", "label": "Kaleido",
             "kind": "array", "cycles": data["cycles"], "time_us": round(data["time_us"], 6),
             "energy_pj": round(data.get("energy_pj", 0.0), 3), "kaleido_speedup": 1.0, "kaleido_energy_saving": 1.0,
             "work_skip": round(data["reuse_fraction"]["reuse"], 6),
             "work_half": round(data["reuse_fraction"]["partial"], 6),
             "latent_psnr_db": _num(q.get("latent_psnr_db")), "latent_ssim": _num(q.get("latent_ssim")), "notes": ""}]
    for name, e in data.get("baselines", {}).items():
        if "skipped" in e:
            rows.append({"results": label, "model": model_label(data), "baseline": name, "label": e["label"],
                         "kind": e["kind"], "notes": "skipped: " + e["skipped"]})
            continue
        bq, w = e.get("quality", {}), e.get("work", {})
        rows.append({"results": label, "model": model_label(data), "baseline": name, "label": e["label"],
                     "kind": e["kind"], "cycles": round(e["cycles"], 6), "time_us": round(e["time_us"], 6),
                     "energy_pj": round(e["energy_pj"], 3), "kaleido_speedup": round(e["kaleido_speedup"], 6),
                     "kaleido_energy_saving": round(e["kaleido_energy_saving"], 6),
                     "work_skip": round(w["skip"], 6) if w else "", "work_half": round(w["half"], 6) if w else "",
                     "latent_psnr_db": _num(bq.get("latent_psnr_db")), "latent_ssim": _num(bq.get("latent_ssim")),
                     "notes": e.get("notes", "")})
    return rows


def _num(v) -> str | float:
    if v is None:
        return ""
    if isinstance(v, str):
        return v
    return v if math.isfinite(v) else ("inf" if v > 0 else "nan" if math.isnan(v) else "-inf")


#: What the baselines table shows for an infinite latent PSNR, and the footnote that says why.
EXACT_PSNR = "exact¹"
EXACT_PSNR_NOTE = ("¹ exact: the design computes without approximation (no reuse, merging or pruning), so its "
                   "final latents equal the exact int8 run bit for bit; the PSNR is infinite, with no error to "
                   "measure (`baselines.csv` keeps `inf`).")


def _baselines_markdown(items) -> str:
    if not any("baselines" in data for _, data in items):
        return ""  # no `kaleido baselines` result: no empty section
    out = ["", "## Baselines", "",
           "Kaleido speedup = baseline time / Kaleido time; energy saving = baseline energy / Kaleido energy "
           "(same trace, config and energy table; A100: roofline, `sim/baselines/a100.py`). Quality: PSNR of "
           "the final latents against the exact int8 run (`kaleido baselines --quality-steps`).", ""]
    for label, data in items:
        if "baselines" not in data:
            continue
        any_exact = False
        out += [f"### {label}: {model_label(data)}", "", f"_{caption(data)}_", "",
                "| design | cycles | time (us) | energy (uJ) | Kaleido speedup | Kaleido energy saving | "
                "skipped / half work | latent PSNR (dB) |", "|---|---:|---:|---:|---:|---:|---|---:|"]
        for r in baseline_rows(label, data):
            if "cycles" not in r:
                out.append(f"| {r['baseline']} | {r['notes']} | | | | | | |")
                continue
            work = (f"{100 * r['work_skip']:.1f} % / {100 * r['work_half']:.1f} %"
                    if r["work_skip"] != "" else "-")
            psnr = r["latent_psnr_db"]
            exact = psnr == "inf"
            any_exact |= exact
            psnr = EXACT_PSNR if exact else psnr if isinstance(psnr, str) else f"{psnr:.2f}"
            out.append(f"| {r['baseline']} | {r['cycles']:,.0f} | {r['time_us']:,.3f} | {r['energy_pj'] / 1e6:,.3f} "
                       f"| {r['kaleido_speedup']:.3f}x | {r['kaleido_energy_saving']:.3f}x | {work} "
                       f"| {psnr} |")
        out.append("")
        if any_exact:
            out += [EXACT_PSNR_NOTE, ""]
        out += _a100_normalised_markdown(data)
    return "\n".join(out)


def a100_normalised_rows(data: dict) -> list[dict]:
    """Kaleido's and the dense array's speedup over the A100 roofline three ways (`sim.baselines.a100.normalised`):
    ``[{"design", "time_us", "die_mm2", "peak_tops", "raw", "per_mm2", "per_peak_tops"}]``; empty without an
    A100 baseline or the area model's figures. Time: end to end (``total_cycles``) where the results have it."""
    from sim.baselines.a100 import normalised, peak_tops

    a = data.get("baselines", {}).get("a100")
    em, cfg = data.get("energy_model", {}), data.get("config", {})
    if not a or not a.get("time_us") or "area_mm2" not in em:
        return []
    tops = peak_tops(cfg["array_rows"], cfg["array_cols"], cfg["clock_mhz"])
    rows = []
    for design, cyc, mm2 in (("kaleido", data.get("total_cycles") or data["cycles"], em["area_mm2"]),
                             ("dense", data.get("dense_total_cycles") or data["dense_cycles"], em["dense_area_mm2"])):
        t = cyc / cfg["clock_mhz"]
        n = normalised(a["time_us"], t, mm2, tops, a.get("params", {}).get("variant", "80gb-sxm"))
        rows.append({"design": design, "time_us": t, "die_mm2": mm2, "peak_tops": tops,
                     **{k: n[k] for k in ("raw", "per_mm2", "per_peak_tops")}})
    return rows


def _a100_normalised_markdown(data: dict) -> list[str]:
    rows = a100_normalised_rows(data)
    if not rows:
        return []
    cfg = data["config"]
    tops = rows[0]["peak_tops"]
    out = ["Speedup over the A100 roofline normalised three ways (`sim.baselines.a100.normalised`: raw = A100 time "
           "/ design time; per mm² = raw × 826 mm² / the design's die (area model, its own node; the A100 is 7 nm); "
           "per peak TOPS = raw × 624 / the array's peak int8 TOPS). This "
           f"{cfg['array_rows']}×{cfg['array_cols']} array at {cfg['clock_mhz']:g} MHz has {tops:.2f} peak int8 TOPS, "
           f"1/{624 / tops:,.0f} of the A100's 624, so only per peak TOPS can reach a figure like the paper's 6.6×.",
           "",
           "| design | time (us) | die (mm²) | peak TOPS | raw | per mm² | per peak TOPS |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['design']} | {r['time_us']:,.1f} | {r['die_mm2']:.1f} | {r['peak_tops']:.1f} | {r['raw']:.3f}x "
                   f"| {r['per_mm2']:.3f}x | {r['per_peak_tops']:.3f}x |")
    return out + [""]


def _energy_breakdown_rows(label: str, data: dict) -> list[tuple[str, dict]]:
    designs = [("kaleido", data.get("energy_breakdown_pj", {}))]
    for name, e in _baselines(data).items():
        designs.append((name, e.get("energy_breakdown_pj", {})))
    if "dense" not in data.get("baselines", {}) and "dense_energy_breakdown_pj" in data:
        designs.insert(0, ("dense", data["dense_energy_breakdown_pj"]))
    return designs


def _is_roofline(data: dict, design: str) -> bool:
    return data.get("baselines", {}).get(design, {}).get("kind") == "roofline"


def area_items(items) -> list[tuple[str, dict]]:
    """``(label, sim.cost.area.area_breakdown)`` for each distinct (config, organisation, energy table) of the
    results."""
    from hw.config import AcceleratorConfig
    from sim.cost.area import area_breakdown
    from sim.cost.tech import TechError, load_tech

    out, seen = [], set()
    for _, data in items:
        cfg = AcceleratorConfig.model_validate(data["config"])
        tname = data.get("energy_model", {}).get("technology", cfg.technology_nm)
        try:
            tech = load_tech(tname)
        except TechError:  # a user table given by path: fall back to the config's node
            tech = load_tech(cfg.technology_nm)
        key = (cfg.name, cfg.organisation, tech.name)  # one die per organisation of a preset
        if key not in seen:
            seen.add(key)
            out.append((f"{cfg.name} ({cfg.organisation}) @ {tech.name}", area_breakdown(cfg, tech)))
    return out


def heatmap_matrix(data: dict) -> tuple[list[int], list[int], list[list[float]]]:
    """``(blocks, steps, saved[block][step])``: MAC-weighted REUSE + PARTIAL / 2 fraction (NaN: no op)."""
    blocks = sorted({r["block"] for r in data["per_op"]})
    steps = sorted({r["step"] for r in data["per_op"]})
    num = {(b, s): 0.0 for b in blocks for s in steps}
    den = dict.fromkeys(num, 0.0)
    for r in data["per_op"]:
        f = r["reuse_fraction"]
        key = (r["block"], r["step"])
        num[key] += (f["reuse"] + f["partial"] / 2) * r["dense_macs"]
        den[key] += r["dense_macs"]
    return blocks, steps, [[num[(b, s)] / den[(b, s)] if den[(b, s)] else math.nan for s in steps] for b in blocks]


def quality_points(data: dict) -> list[dict]:
    """``{"design", "speedup_vs_dense", "psnr_db"}`` for Kaleido and every baseline with measured quality.

    Speedup over the dense array = dense time / design time; infinite PSNR (bit-identical to the
    exact run) stays ``inf``.
    """
    clock = data["config"]["clock_mhz"]
    dense_t = data["dense_cycles"] / clock
    pts = []
    if "quality" in data:
        pts.append({"design": "kaleido", "speedup_vs_dense": dense_t / data["time_us"],
                    "psnr_db": float(data["quality"]["latent_psnr_db"])})
    for name, e in _baselines(data).items():
        if "quality" in e:
            pts.append({"design": name, "speedup_vs_dense": dense_t / e["time_us"],
                        "psnr_db": float(e["quality"]["latent_psnr_db"])})
    return pts


def scaling_groups(items) -> dict[str, list[tuple[str, dict]]]:
    """Results grouped by (model, size, config, theta of the first op) with two or more distinct grids,
    each group sorted by tokens (one result per grid: the first given)."""
    groups: dict[str, dict] = {}
    for label, d in items:
        t = d["trace"]
        theta = ",".join(f"{v:g}" for v in d["per_op"][0]["theta"]) if d["per_op"] else "?"
        key = f"{t['model']} {t['size']} on {d['config']['name']}, θ {theta}"
        groups.setdefault(key, {}).setdefault(tuple(t["grid"]), (label, d))
    return {k: sorted(v.values(), key=lambda it: math.prod(it[1]["trace"]["grid"]))
            for k, v in groups.items() if len(v) >= 2}


def _csv_bytes(fields, rows) -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()


def reuse_points(items) -> list[dict]:
    """Speedup against the measured REUSE share, one point per results file, for a figure drawn when at least two
    results of one (config, organisation, model, grid) differ in reuse (e.g. `kaleido synth --reuse r` at several r):
    ``[{"label", "group", "reuse", "compute", "partial", "ideal", "array", "end_to_end"}]`` sorted by group and
    reuse. ``ideal`` = dense MACs / useful MACs = 1 / (C + P/2) of the MACs (every saved MAC turned into time);
    ``array`` = ``speedup``; ``end_to_end`` = ``total_speedup``. Empty when no group has two reuse levels."""
    groups: dict[tuple, list[dict]] = {}
    for label, d in items:
        useful = sum(o.get("useful_macs", 0) for o in d["per_op"])
        dense = sum(o.get("dense_macs", 0) for o in d["per_op"])
        rf = d.get("reuse_fraction", {})
        if not useful or "reuse" not in rf:
            continue
        key = (d["config"].get("name"), d.get("organisation", "lockstep"), d["trace"].get("model"),
               tuple(d["trace"].get("grid", ())))
        groups.setdefault(key, []).append({
            "label": label, "group": f"{key[0]} {key[1]}, {key[2]} {'x'.join(map(str, key[3]))}", "reuse": rf["reuse"],
            "compute": rf.get("compute", 0.0), "partial": rf.get("partial", 0.0), "ideal": dense / useful,
            "array": d["speedup"], "end_to_end": d.get("total_speedup", d["speedup"])})
    out = []
    for pts in groups.values():
        if len({round(p["reuse"], 6) for p in pts}) >= 2:
            out += sorted(pts, key=lambda p: p["reuse"])
    return out


def explain_markdown(items) -> str:
    """The "Why, per op" section of summary.md: `sim.report.explain` rows (speedup chain, binding mechanism of
    Kaleido and dense, energy against dense) and the energy split at the array (`sim.report.explain.energy_ledger`)."""
    from sim.report.explain import energy_ledger_lines, explain_rows, totals

    out = ["", "## Why, per op (`kaleido explain`)", "",
           "Speedup chain against dense: ideal (1 / (C + P/2) of the MACs) → dispatcher slots → array cycles → end to "
           "end, and the mechanism that binds each design (sim/report/explain.py).", ""]
    for label, d in items:
        if "per_op" not in d or "config" not in d:
            continue
        out += [f"### {label}", "", "| op | block | step | ideal | slots | array | end to end | binds | dense binds "
                "| energy / dense |", "|---|---:|---:|---:|---:|---:|---:|---|---|---:|"]
        for r in explain_rows(d):
            name = r["name"] + (f" (fused with {r['fused']})" if r["fused"] else "")
            out.append(f"| {name} | {r['block']} | {r['step']} | {r['ideal']:.2f} | {r['slots']:.2f} | {r['array']:.2f} "
                       f"| {r['end_to_end']:.2f} | {r['binds']} | {r['dense_binds']} | {r['energy_ratio']:.2f} |")
        t = totals(d)
        out += ["", f"All ops: ideal {t['ideal']:.2f}× → array {t['array']:.2f}× → end to end {t['end_to_end']:.2f}×."]
        if "energy_breakdown_pj" in d:
            out += [line + "." for line in energy_ledger_lines(d)]
        out += [f"Note: {n}." for n in d.get("notes", [])]  # `kaleido simulate`'s state notes (D70)
        out.append("")
    return "\n".join(out)
