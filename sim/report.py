"""Reports from simulation results: Markdown and CSV tables and a cycles-per-op figure.

`write_report(results_paths, out_dir)` reads one or more results JSON files written by
``kaleido simulate --json`` and writes, atomically, into ``out_dir``:

- ``summary.md``: per results file, the totals and a per-op table (shape, dense and reuse cycles,
  speedup, PE utilization, decision fractions);
- ``per_op.csv``: the same per-op rows, one file for all inputs (column ``results`` names the file);
- ``cycles_per_op.png`` and ``.pdf``: grouped bars of dense vs reuse cycles per op (log scale when
  the values span over a decade, else linear from 0), one panel per results file, 0.2 in per op,
  with a caption line naming config, trace, weights and energy table;
- ``energy_utilization.png`` and ``.pdf`` (when the results carry energy): per results file, the
  energy breakdown by component (stacked bars, µJ, dense vs Kaleido) and PE utilization dense /
  without the dispatcher / with the dispatcher.
- ``area_breakdown.png``/``.pdf`` and ``area.csv``: the die area by component (`sim.area`) of each
  distinct config, Kaleido vs the dense baseline's die.
- ``reuse_heatmap.png``/``.pdf``: per results file, the MAC-weighted work saved
  (REUSE + PARTIAL / 2, %) of every (block, step), a layer x step heat map.

With baselines (results from ``kaleido baselines``, key ``baselines``; `sim.baselines`):

- ``baselines.csv``, ``baselines_per_op.csv`` and a "Baselines" section in ``summary.md``: per
  results file and baseline: cycles, time, energy, Kaleido's speedup (baseline time / Kaleido time)
  and energy saving (baseline energy / Kaleido energy), work skipped and measured quality;
- ``baselines.png``/``.pdf``: Kaleido's speedup and energy saving against every baseline, one
  group per results file (model, size, grid);
- ``energy_breakdown.png``/``.pdf`` and ``energy_breakdown.csv``: energy by component, stacked, for
  Kaleido and every array baseline (the A100's board energy in the CSV and as a note on the figure,
  not as a bar: it would squash the others);
- ``quality_speedup.png``/``.pdf`` (when quality was measured): latent PSNR against the exact int8
  run versus each design's speedup over the dense array (dense time / design time; ``baselines.png``
  shows Kaleido over each baseline instead, and both axes say which), one hollow marker shape per
  design, with the Pareto front when it has two or more points;
- workload results (`kaleido simulate W.npz --json`; `sim.workload.report`): ``workload_summary.md``,
  ``workload_steps.csv`` and ``workload_schedule.png``/``.pdf`` (time per step against the
  reference and the schedule, e.g. DDiT's patch size per step).
- ``scaling.png``/``.pdf`` (when results of one model at two or more grids are given, e.g. 480p and
  720p): Kaleido's speedup and energy saving over dense and over each baseline against tokens.

Report files of an earlier run in the folder that this run does not write are removed
(`REPORT_TABLES`, `REPORT_FIGURES`; nothing else). Every figure has labelled axes with units, a
legend and a caption line naming the config, trace, weights and energy table; PNGs are written at 150 dpi with the figure size given in `FIGURE_SIZES`.
"""

from __future__ import annotations

import csv
import io
import json
import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from algo.fileio import atomic_write_bytes, check_output_dir  # noqa: E402
from sim.simulate import RESULTS_FORMAT, RESULTS_VERSION  # noqa: E402
from sim.workload import report as workload_report  # noqa: E402
from sim.workload.simulate import RESULTS_FORMAT as WORKLOAD_RESULTS_FORMAT  # noqa: E402
from sim.workload.simulate import RESULTS_VERSION as WORKLOAD_RESULTS_VERSION  # noqa: E402


class ReportError(ValueError):
    """A results file is missing, not JSON, or not Kaleido results of a supported version."""


def load_results(path: str | Path) -> dict:
    """Read and check a results JSON file. Raises `ReportError`."""
    path = Path(path)
    if not path.is_file():
        raise ReportError(f"results file not found: {path}")
    try:
        data = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ReportError(f"{path}: not valid JSON ({err})") from None
    if isinstance(data, dict) and data.get("format") == "kaleido-gemm":  # sim.dataflow.gemm_result
        raise ReportError(f"{path} is a `kaleido simulate --gemm` result (one dense GEMM, already printed in full); "
                          "`kaleido report` reads trace results (`kaleido simulate TRACE --json` or "
                          "`kaleido baselines --json`)")
    if isinstance(data, dict) and data.get("format") == WORKLOAD_RESULTS_FORMAT:  # `kaleido simulate W.npz`
        if data.get("version") != WORKLOAD_RESULTS_VERSION:
            raise ReportError(f"{path}: workload results version {data.get('version')} not supported "
                              f"(expected {WORKLOAD_RESULTS_VERSION})")
        for key in ("total_time_us", "per_step", "workload", "device"):
            if key not in data:
                raise ReportError(f"{path}: missing field {key!r}")
        return data
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise ReportError(f"{path}: not a Kaleido results file")
    if data.get("engine") == "rtl":
        raise ReportError(f"{path} is a `kaleido simulate --engine rtl` result (cycles and output checksums only); "
                          "`kaleido report` reads cycle-model results (`kaleido simulate TRACE --json`)")
    if data.get("version") != RESULTS_VERSION:
        raise ReportError(f"{path}: results version {data.get('version')} not supported (expected {RESULTS_VERSION})")
    for key in ("cycles", "dense_cycles", "per_op", "config", "trace"):
        if key not in data:
            raise ReportError(f"{path}: missing field {key!r}")
    return data


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


def _figure(items: list[tuple[str, dict]]):
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    n = len(items)
    n_ops = max(len(d["per_op"]) for _, d in items)
    # 0.2 in per op (two bars and a 6.5 pt label), 8-40 in wide; 4.2 in per panel + the caption
    fig, axes = plt.subplots(n, 1, figsize=(min(40.0, max(8.0, 0.2 * n_ops + 2)), 4.2 * n + 0.5), squeeze=False)
    for ax, (label, data) in zip(axes[:, 0], items, strict=True):
        ops = data["per_op"]
        xs = range(len(ops))
        ax.bar([x - 0.2 for x in xs], [r["dense_cycles"] for r in ops], width=0.4, label="dense (reuse off)",
               color="#9e9e9e")
        ax.bar([x + 0.2 for x in xs], [r["cycles"] for r in ops], width=0.4, label="Kaleido reuse", color="#1f77b4")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([_op_label(r) for r in ops], rotation=90, fontsize=6.5)
        ax.set_xlim(-0.6, len(ops) - 0.4)
        vals = [v for r in ops for v in (r["dense_cycles"], r["cycles"]) if v > 0]
        if vals and max(vals) > 10 * min(vals):  # over a decade: log, labelled at 1, 1.5, 2, 3, 4, 5, 6, 8 x 10^k
            ax.set_yscale("log")
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0),
                                                  numticks=40))
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_ylabel("cycles per op (log)")
        else:  # a narrow range: linear from 0, so bar heights compare honestly
            ax.set_ylabel("cycles per op")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.grid(True, axis="y", which="major", alpha=0.3)
        ax.set_title(f"{label}: cycles per op, dense vs Kaleido reuse; {data['speedup']:.2f}x overall "
                     "(dense cycles / Kaleido cycles)", fontsize=10, loc="left")
        ax.legend(fontsize=8, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, borderaxespad=0.2)
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


def energy_vs_dense(data: dict) -> str:
    """``energy vs dense: 1.52x (more)`` or ``energy vs dense: 0.66x (saving 34.0%)`` (Kaleido / dense energy)."""
    e, de = data.get("energy_pj", 0.0), data.get("dense_energy_pj", 0.0)
    if not e or not de:
        return "energy vs dense: n/a"
    r = e / de
    return f"energy vs dense: {r:.2f}x ({'more' if r > 1 else f'saving {1 - r:.1%}'})"


#: PE-utilization bars: greys and hatches, so they never read as an energy component (tab20 colours).
UTIL_STYLE = (("dense", "#d0d0d0", ""), ("no dispatcher", "#8c8c8c", "//"), ("dispatcher", "#3c3c3c", ""))


def _energy_figure(items: list[tuple[str, dict]]):
    n = len(items)
    fig, axes = plt.subplots(n, 2, figsize=(13, 4.4 * n + 0.5), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    cmap = plt.get_cmap("tab20")
    for row, (label, data) in enumerate(items):
        ax, ax2 = axes[row]
        comps = list(data["energy_breakdown_pj"])
        bottoms = [0.0, 0.0]
        for ci, comp in enumerate(comps):
            vals = [data["dense_energy_breakdown_pj"].get(comp, 0.0) / 1e6, data["energy_breakdown_pj"][comp] / 1e6]
            ax.bar(["dense (reuse off)", "Kaleido"], vals, bottom=bottoms, label=comp, color=cmap(ci % 20))
            bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
        ax.set_ylabel("energy (µJ)")
        ax.set_title(f"{label}: energy by component; {energy_vs_dense(data)}", fontsize=10)
        h, lb = ax.get_legend_handles_labels()
        ax.legend(h[::-1], lb[::-1], fontsize=7, title="component", title_fontsize=8, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0))  # next to its own panel, top component first
        util = [data["dense_pe_utilization"], data.get("no_dispatcher_pe_utilization", 0.0), data["pe_utilization"]]
        bars = ax2.bar([s[0] for s in UTIL_STYLE], [100 * u for u in util], color=[s[1] for s in UTIL_STYLE],
                       hatch=[s[2] for s in UTIL_STYLE], edgecolor="k", linewidth=0.6)
        ax2.bar_label(bars, labels=[f"{100 * u:.1f}%" for u in util], fontsize=7)
        ax2.set_ylabel("PE utilization (%)")
        ax2.set_ylim(0, 110)
        ax2.set_title("PE utilization (useful MAC-equivalents / PE-cycles)", fontsize=9)
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


def _save_figure(fig, out: Path, stem: str, written: list[Path]) -> None:
    for ext, kw in (("png", {"dpi": PNG_DPI}), ("pdf", {})):
        b = io.BytesIO()
        # Fixed metadata so equal inputs give byte-identical figures.
        meta = {"Software": None} if ext == "png" else {"CreationDate": None, "Producer": None, "Creator": None}
        fig.savefig(b, format=ext, metadata=meta, **kw)
        path = out / f"{stem}.{ext}"
        atomic_write_bytes(path, b.getvalue())
        written.append(path)
    plt.close(fig)


# ---- issue 7: baselines, area, heat map, quality, scaling ------------------------------------

#: Figure sizes in inches (width, height per results panel); PNGs at `PNG_DPI`.
FIGURE_SIZES = {"baselines": (11.0, 4.6), "energy_breakdown": (12.0, 4.8), "area_breakdown": (10.0, 4.8),
                "reuse_heatmap": (9.0, 4.2), "quality_speedup": (9.0, 6.0), "scaling": (11.0, 4.8)}
PNG_DPI = 150


def figure_inches(stem: str, panels: int = 1) -> tuple[float, float]:
    """Figure size of a report figure in inches: fixed width, height per panel (`FIGURE_SIZES`)."""
    w, h = FIGURE_SIZES[stem]
    return w, h * panels


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


def _caption_block(fig, items) -> float:
    """Draw the caption at the bottom of `fig`; returns the figure fraction it takes (for tight_layout)."""
    text = _captions(items)
    lines = text.count("\n") + 1
    fig.text(0.01, 0.005, text, fontsize=6, va="bottom")
    return min(0.5, (0.06 + 0.1 * lines) / fig.get_figheight())


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


def _baselines_markdown(items) -> str:
    out = ["", "# Baselines", "",
           "Kaleido speedup = baseline time / Kaleido time; energy saving = baseline energy / Kaleido energy "
           "(same trace, config and energy table; A100: roofline, `sim/baselines/a100.py`). Quality: PSNR of "
           "the final latents against the exact int8 run (`kaleido baselines --quality-steps`).", ""]
    for label, data in items:
        if "baselines" not in data:
            continue
        out += [f"## {label}: {model_label(data)}", "", f"_{caption(data)}_", "",
                "| design | cycles | time (us) | energy (uJ) | Kaleido speedup | Kaleido energy saving | "
                "skipped / half work | latent PSNR (dB) |", "|---|---:|---:|---:|---:|---:|---|---:|"]
        for r in baseline_rows(label, data):
            if "cycles" not in r:
                out.append(f"| {r['baseline']} | {r['notes']} | | | | | | |")
                continue
            work = (f"{100 * r['work_skip']:.1f} % / {100 * r['work_half']:.1f} %"
                    if r["work_skip"] != "" else "-")
            psnr = r["latent_psnr_db"]
            out.append(f"| {r['baseline']} | {r['cycles']:,.0f} | {r['time_us']:,.3f} | {r['energy_pj'] / 1e6:,.3f} "
                       f"| {r['kaleido_speedup']:.3f}x | {r['kaleido_energy_saving']:.3f}x | {work} "
                       f"| {psnr if isinstance(psnr, str) else f'{psnr:.2f}'} |")
        out.append("")
    return "\n".join(out)


def _baselines_figure(items):
    items = [(lb, d) for lb, d in items if _baselines(d)]
    n = len(items)
    fig, axes = plt.subplots(n, 2, figsize=figure_inches("baselines", n), squeeze=False)
    for row, (label, data) in enumerate(items):
        bl = _baselines(data)
        names = list(bl)
        # Kaleido over each baseline (> 1: Kaleido better), the convention of baselines.csv and summary.md;
        # quality_speedup.png plots every design over the dense array instead, and says so on its axis.
        for ax, key, what, ratio in (
                (axes[row, 0], "kaleido_speedup", "Kaleido speedup", "baseline time / Kaleido time"),
                (axes[row, 1], "kaleido_energy_saving", "Kaleido energy saving", "baseline energy / Kaleido energy")):
            vals = [bl[k][key] for k in names]
            ticks = ["\n".join(textwrap.wrap(bl[k]["label"], 16)) for k in names]
            bars = ax.bar(ticks, vals, color=[plt.get_cmap("tab10")(i) for i in range(len(names))])
            ax.bar_label(bars, labels=[f"{v:.3g}x" for v in vals], fontsize=7)
            ax.axhline(1.0, color="k", lw=0.8, ls="--")
            ax.set_yscale("log")
            ax.margins(y=0.12)
            ax.set_ylabel(f"{ratio}\n(x, log; dashed: 1x)", fontsize=8)
            ax.set_title(f"{label}: {model_label(data)}\n{what} over each baseline (> 1: Kaleido better)", fontsize=9)
            ax.tick_params(axis="x", labelsize=6.5)
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


def _energy_breakdown_rows(label: str, data: dict) -> list[tuple[str, dict]]:
    designs = [("kaleido", data.get("energy_breakdown_pj", {}))]
    for name, e in _baselines(data).items():
        designs.append((name, e.get("energy_breakdown_pj", {})))
    if "dense" not in data.get("baselines", {}) and "dense_energy_breakdown_pj" in data:
        designs.insert(0, ("dense", data["dense_energy_breakdown_pj"]))
    return designs


def _is_roofline(data: dict, design: str) -> bool:
    return data.get("baselines", {}).get(design, {}).get("kind") == "roofline"


def _energy_breakdown_figure(items):
    n = len(items)
    fig, axes = plt.subplots(n, 1, figsize=figure_inches("energy_breakdown", n), squeeze=False)
    cmap = plt.get_cmap("tab20")
    comps: list[str] = []
    for _, data in items:
        for d, eb in _energy_breakdown_rows("", data):
            if not _is_roofline(data, d):
                comps += [c for c in eb if c not in comps]
    for ax, (label, data) in zip(axes[:, 0], items, strict=True):
        designs = _energy_breakdown_rows(label, data)
        # Roofline designs (the A100) have one board-energy number, often 10x the arrays: named in a
        # note, not drawn, so the array designs' components stay readable (values in energy_breakdown.csv).
        roof = [(d, eb) for d, eb in designs if _is_roofline(data, d)]
        designs = [(d, eb) for d, eb in designs if (d, eb) not in roof]
        kal = data.get("energy_pj", 0.0)
        for i, (d, eb) in enumerate(roof):
            tot = sum(eb.values())
            ax.text(0.01, 0.97 - 0.07 * i, f"not drawn: {d} (board energy, roofline) {tot / 1e6:,.1f} µJ"
                    + (f" = {tot / kal:.2f}x Kaleido" if kal else "") + " (energy_breakdown.csv)",
                    transform=ax.transAxes, fontsize=7, va="top")
        bottoms = [0.0] * len(designs)
        for ci, comp in enumerate(comps):
            vals = [eb.get(comp, 0.0) / 1e6 for _, eb in designs]
            ax.bar([d for d, _ in designs], vals, bottom=bottoms, label=comp, color=cmap(ci % 20))
            bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
        ax.set_ylabel("energy (µJ)")
        ax.set_xlabel("design")
        ax.margins(y=0.15)
        ax.set_title(f"{label}: {model_label(data)} - energy by component", fontsize=9)
        ax.legend(fontsize=6.5, ncol=2, loc="center left", bbox_to_anchor=(1.0, 0.5), title="component")
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


def area_items(items) -> list[tuple[str, dict]]:
    """``(config name, sim.area.area_breakdown)`` for each distinct (config, energy table) of the results."""
    from hw.config import AcceleratorConfig
    from sim.area import area_breakdown
    from sim.tech import TechError, load_tech

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


AREA_DENSE_PARTS = ("array_pe_plain", "array_io_skew", "vector_unit", "sram_input", "sram_weight", "sram_output")


def _area_figure(areas, items):
    fig, ax = plt.subplots(1, 1, figsize=figure_inches("area_breakdown"))
    comps = list(areas[0][1]["breakdown"])
    cmap = plt.get_cmap("tab20")
    xs, bottoms = [], []
    for name, _a in areas:
        xs += [f"{name}\nKaleido", f"{name}\ndense die"]
        bottoms += [0.0, 0.0]
    for ci, comp in enumerate(comps):
        vals = []
        for _, a in areas:
            v = a["breakdown"].get(comp, 0.0)
            vals += [v, v if comp in AREA_DENSE_PARTS else 0.0]
        ax.bar(xs, vals, bottom=bottoms, label=comp, color=cmap(ci % 20))
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    ax.set_ylabel("area (mm²)")
    ax.set_xlabel("configuration")
    ax.set_title("Die area by component (sim/area.py)", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), title="component")
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


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


def _heatmap_figure(items):
    n = len(items)
    fig, axes = plt.subplots(n, 1, figsize=figure_inches("reuse_heatmap", n), squeeze=False)
    for ax, (label, data) in zip(axes[:, 0], items, strict=True):
        blocks, steps, m = heatmap_matrix(data)
        im = ax.imshow([[100 * v for v in row] for row in m], aspect="auto", cmap="viridis", origin="lower",
                       vmin=0, vmax=100)
        ax.set_xticks(range(len(steps)), [str(s) for s in steps])
        ax.set_yticks(range(len(blocks)), [str(b) for b in blocks])
        ax.set_xlabel("denoising step (index in the schedule)")
        ax.set_ylabel("layer (transformer block)")
        ax.set_title(f"{label}: {model_label(data)} - work saved by reuse per layer and step", fontsize=9)
        for i, row in enumerate(m):
            for j, v in enumerate(row):
                if math.isfinite(v):
                    ax.text(j, i, f"{100 * v:.1f}", ha="center", va="center", fontsize=7, color="w")
        fig.colorbar(im, ax=ax, label="REUSE + ½ PARTIAL (% of MACs)")
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


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


def _quality_figure(items):
    from algo.quality import pareto_front

    fig, ax = plt.subplots(1, 1, figsize=figure_inches("quality_speedup"))
    finite = [p["psnr_db"] for _, d in items for p in quality_points(d) if math.isfinite(p["psnr_db"])]
    cap = (max(finite) if finite else 60.0) + 10.0
    # One marker shape per design, hollow, largest first: designs at the same point stay visible as
    # concentric shapes (e.g. dense and an exact policy, both at 1x and infinite PSNR).
    markers = "osD^vP*X<>"
    styles = ["-", "--", ":", "-."]
    designs = list(dict.fromkeys(p["design"] for _, d in items for p in quality_points(d)))
    for k, (label, data) in enumerate(items):
        pts = quality_points(data)
        suffix = f" ({label})" if len(items) > 1 else ""
        for p in pts:
            i = designs.index(p["design"])
            y = p["psnr_db"] if math.isfinite(p["psnr_db"]) else cap
            ax.scatter(p["speedup_vs_dense"], y, marker=markers[i % len(markers)], s=max(30, 190 - 30 * i),
                       facecolors="none", edgecolors=plt.get_cmap("tab10")(i % 10), linewidths=1.6, zorder=3,
                       label=f"{p['design']}{suffix}")
        # one label per place; designs within 3 % in speedup and 1.5 dB share it (listed together)
        at: dict[tuple[float, float], list[str]] = {}
        for p in pts:
            x, y = p["speedup_vs_dense"], (p["psnr_db"] if math.isfinite(p["psnr_db"]) else cap)
            near = next((key for key in at if abs(math.log(x / key[0])) < 0.03 and abs(y - key[1]) < 1.5), (x, y))
            at.setdefault(near, []).append(p["design"])
        for (x, y), names in at.items():
            ax.annotate(" = ".join(names), (x, y), textcoords="offset points", xytext=(9, -3 - 9 * k), fontsize=7)
        front = pareto_front([p["speedup_vs_dense"] for p in pts],
                             [p["psnr_db"] if math.isfinite(p["psnr_db"]) else cap for p in pts])
        if len(front) >= 2:  # a front of one point is no line
            ax.plot([pts[i]["speedup_vs_dense"] for i in front],
                    [pts[i]["psnr_db"] if math.isfinite(pts[i]["psnr_db"]) else cap for i in front],
                    styles[k % len(styles)], color="tab:red", lw=1, label=f"Pareto front{suffix}")
    ax.axhline(cap, color="gray", ls=":", lw=0.8, label=f"∞ dB (identical to the exact run), drawn at {cap:.0f}")
    ax.set_xscale("log")
    ax.set_xlabel("each design's speedup over the dense array = dense time / design time (x, log; > 1: faster)")
    ax.set_ylabel("PSNR of final latents vs exact int8 run (dB)")
    ax.set_title("Quality vs speedup: Kaleido and baselines", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.0, 0.5), markerscale=0.6)
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


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


def _scaling_figure(groups):
    fig, axes = plt.subplots(1, 2, figsize=figure_inches("scaling"))
    all_items, ticks = [], {}
    styles = ["-", "--", ":", "-."]
    for gi, (gname, its) in enumerate(groups.items()):
        all_items += its
        tokens = [math.prod(d["trace"]["grid"]) for _, d in its]
        names = ["dense"] + sorted({n for _, d in its for n in _baselines(d) if n != "dense"})
        for i, name in enumerate(names):
            sp, es = [], []
            for _, d in its:
                e = _baselines(d).get(name)
                if e is None and name == "dense":
                    sp.append(d["speedup"])
                    es.append(d.get("energy_saving", math.nan))
                elif e is None:
                    sp.append(math.nan)
                    es.append(math.nan)
                else:
                    sp.append(e["kaleido_speedup"])
                    es.append(e["kaleido_energy_saving"])
            c = plt.get_cmap("tab10")(i)
            ls = "o" + styles[gi % len(styles)]
            axes[0].plot(tokens, sp, ls, color=c, label=f"vs {name}: {gname}")
            axes[1].plot(tokens, es, ls, color=c, label=f"vs {name}: {gname}")
        ticks.update({t: f"{t}\n{model_label(d).split()[-1]}" for t, (_, d) in zip(tokens, its, strict=True)})
    for ax, what in ((axes[0], "speedup"), (axes[1], "energy saving")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.minorticks_off()
        ax.set_xticks(list(ticks), list(ticks.values()))
        ax.set_xlabel("tokens (F x H x W; grid below)")
        ax.set_ylabel(f"Kaleido {what} (x, log)")
        ax.set_title(f"Kaleido {what} vs resolution", fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize=6, loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.tight_layout(rect=(0, _caption_block(fig, all_items), 1, 1))
    return fig


def _csv_bytes(fields, rows) -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()


def _write_issue7(items, out: Path, written: list[Path]) -> None:
    """Tables and figures of issue 7 (module docstring)."""
    areas = area_items(items)
    area_rows = [{"config": name, "component": k, "mm2": round(v, 6)}
                 for name, a in areas for k, v in [*a["breakdown"].items(), ("total", a["total_mm2"]),
                                                   ("dense_total", a["dense_total_mm2"])]]
    written.append(atomic_write_bytes(out / "area.csv", _csv_bytes(("config", "component", "mm2"), area_rows)))
    _save_figure(_area_figure(areas, items), out, "area_breakdown", written)
    _save_figure(_heatmap_figure(items), out, "reuse_heatmap", written)
    with_b = [(lb, d) for lb, d in items if "baselines" in d]
    if not with_b:
        return
    rows = [r for lb, d in with_b for r in baseline_rows(lb, d)]
    written.append(atomic_write_bytes(out / "baselines.csv", _csv_bytes(BASELINE_FIELDS, rows)))
    per_op = [{"results": lb, "baseline": name, "name": r["name"], "block": r["block"], "step": r["step"],
               "cycles": round(r["cycles"], 6), "time_us": round(r["time_us"], 6), "energy_pj": round(r["energy_pj"], 3)}
              for lb, d in with_b for name, e in _baselines(d).items() for r in e["per_op"]]
    written.append(atomic_write_bytes(out / "baselines_per_op.csv", _csv_bytes(
        ("results", "baseline", "name", "block", "step", "cycles", "time_us", "energy_pj"), per_op)))
    eb_rows = [{"results": lb, "design": design, "component": c, "energy_pj": round(v, 3)}
               for lb, d in with_b for design, eb in _energy_breakdown_rows(lb, d) for c, v in eb.items()]
    written.append(atomic_write_bytes(out / "energy_breakdown.csv", _csv_bytes(
        ("results", "design", "component", "energy_pj"), eb_rows)))
    _save_figure(_baselines_figure(with_b), out, "baselines", written)
    _save_figure(_energy_breakdown_figure(with_b), out, "energy_breakdown", written)
    if any(quality_points(d) for _, d in with_b):
        _save_figure(_quality_figure([(lb, d) for lb, d in with_b if quality_points(d)]), out, "quality_speedup",
                     written)
    groups = scaling_groups(with_b)
    if groups:
        _save_figure(_scaling_figure(groups), out, "scaling", written)


#: Every file `write_report` may write (figures as .png and .pdf); in the output folder, those of
#: them an earlier report wrote and this one does not are stale and removed (nothing else is touched).
REPORT_TABLES = ("summary.md", "per_op.csv", "area.csv", "baselines.csv", "baselines_per_op.csv",
                 "energy_breakdown.csv", *workload_report.TABLES)
REPORT_FIGURES = ("cycles_per_op", "energy_utilization", "area_breakdown", "reuse_heatmap", "baselines",
                  "energy_breakdown", "quality_speedup", "scaling", *workload_report.FIGURES)


def report_file_names() -> list[str]:
    """The names of every file `write_report` may write (`REPORT_TABLES`, `REPORT_FIGURES` x png/pdf)."""
    return [*REPORT_TABLES, *(f"{s}.{e}" for s in REPORT_FIGURES for e in ("png", "pdf"))]


def write_report(results_paths: list[str | Path], out_dir: str | Path,
                 removed: list[Path] | None = None) -> list[Path]:
    """Write the report files for the given results into `out_dir`; returns the paths written.

    Report files of an earlier run in `out_dir` that this report does not write (e.g.
    ``baselines.png`` when the new results have no baselines) are deleted, so the folder never mixes
    two runs; their paths are appended to `removed` when given. Other files are left alone.

    Raises:
        ReportError: any results file is invalid (checked before anything is written).
        algo.fileio.OutputPathError: `out_dir` is an existing file or a parent is a file.
    """
    if not results_paths:
        raise ReportError("no results files given")
    items = []
    for p in results_paths:
        data = load_results(p)
        items.append((Path(p).stem, data))
    out = check_output_dir(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    wl_items = [(lb, d) for lb, d in items if d["format"] == WORKLOAD_RESULTS_FORMAT]
    tr_items = [(lb, d) for lb, d in items if d["format"] != WORKLOAD_RESULTS_FORMAT]
    if tr_items:
        _write_all(tr_items, out, written)
    if wl_items:
        workload_report.write(wl_items, out, written, _save_figure, atomic_write_bytes)
    for name in report_file_names():
        stale = out / name
        if stale not in written and stale.is_file():
            stale.unlink()
            if removed is not None:
                removed.append(stale)
    return written


def _write_all(items, out: Path, written: list[Path]) -> None:

    md = out / "summary.md"
    atomic_write_bytes(md, (_markdown(items) + _baselines_markdown(items)).encode())
    written.append(md)

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, lineterminator="\n")
    w.writeheader()
    for label, data in items:
        w.writerows(_rows(label, data))
    csv_path = out / "per_op.csv"
    atomic_write_bytes(csv_path, buf.getvalue().encode())
    written.append(csv_path)

    _save_figure(_figure(items), out, "cycles_per_op", written)
    if all("energy_breakdown_pj" in d for _, d in items):
        _save_figure(_energy_figure(items), out, "energy_utilization", written)
        _write_issue7(items, out, written)
