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
    return (f"config {c['name']} ({c['array_rows']}x{c['array_cols']}, {c['clock_mhz']:g} MHz); "
            f"trace {Path(t['path']).name or '?'} ({t['model']} {t['size']}, grid {'x'.join(map(str, t['grid']))}, "
            f"b_msb {t['b_msb']}); weights: {t['weights']}" + (f"; energy table: {tech}" if tech else ""))


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
            f"| PE utilization without the dispatcher | | {data.get('no_dispatcher_pe_utilization', 0):.1%} |",
            f"| speedup | 1.00x | {data['speedup']:.2f}x |",
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
        cfgs[f"{c['name']} ({c['array_rows']}x{c['array_cols']}, {c['clock_mhz']:g} MHz)"] = 1
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
    return "\n".join(out)


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
    """``(config name, sim.cost.area.area_breakdown)`` for each distinct (config, energy table) of the results."""
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
        key = (cfg.name, tech.name)
        if key not in seen:
            seen.add(key)
            out.append((f"{cfg.name} @ {tech.name}", area_breakdown(cfg, tech)))
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
