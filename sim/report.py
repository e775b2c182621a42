"""Reports from simulation results: Markdown and CSV tables and a cycles-per-op figure.

`write_report(results_paths, out_dir)` reads one or more results JSON files written by
``kaleido simulate --json`` and writes, atomically, into ``out_dir``:

- ``summary.md``: per results file, the totals and a per-op table (shape, dense and reuse cycles,
  speedup, PE utilization, decision fractions);
- ``per_op.csv``: the same per-op rows, one file for all inputs (column ``results`` names the file);
- ``cycles_per_op.png`` and ``.pdf``: grouped bars of dense vs reuse cycles per op (log scale),
  one panel per results file, with a caption line naming config, trace and weights;
- ``energy_utilization.png`` and ``.pdf`` (when the results carry energy): per results file, the
  energy breakdown by component (stacked bars, µJ, dense vs Kaleido) and PE utilization dense /
  without the dispatcher / with the dispatcher.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from algo.fileio import atomic_write_bytes  # noqa: E402
from sim.simulate import RESULTS_FORMAT, RESULTS_VERSION  # noqa: E402


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
    if not isinstance(data, dict) or data.get("format") != RESULTS_FORMAT:
        raise ReportError(f"{path}: not a Kaleido results file")
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
    return (f"config {c['name']} ({c['array_rows']}x{c['array_cols']}, {c['clock_mhz']:g} MHz); "
            f"trace {Path(t['path']).name or '?'} ({t['model']} {t['size']}, grid {'x'.join(map(str, t['grid']))}, "
            f"b_msb {t['b_msb']}); weights: {t['weights']}")


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
    n = len(items)
    fig, axes = plt.subplots(n, 1, figsize=(max(8, 0.35 * max(len(d["per_op"]) for _, d in items) + 2), 3.6 * n),
                             squeeze=False)
    for ax, (label, data) in zip(axes[:, 0], items, strict=True):
        ops = data["per_op"]
        xs = range(len(ops))
        ax.bar([x - 0.2 for x in xs], [r["dense_cycles"] for r in ops], width=0.4, label="dense (reuse off)",
               color="#9e9e9e")
        ax.bar([x + 0.2 for x in xs], [r["cycles"] for r in ops], width=0.4, label="Kaleido reuse", color="#1f77b4")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([_op_label(r) for r in ops], rotation=60, ha="right", fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("cycles per op")
        ax.set_title(f"{label}: {data['speedup']:.2f}x overall", fontsize=10)
        ax.legend(fontsize=8)
        ax.text(0.0, -0.62 if len(ops) > 6 else -0.35, "\n".join(textwrap.wrap(caption(data), 200)),
                transform=ax.transAxes, fontsize=6.5, va="top")
    fig.tight_layout()
    return fig


def _energy_figure(items: list[tuple[str, dict]]):
    n = len(items)
    fig, axes = plt.subplots(n, 2, figsize=(13, 4.4 * n), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    handles = labels = None
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
        ax.set_title(f"{label}: energy by component, saving {data.get('energy_saving', 0):.2f}x", fontsize=10)
        if handles is None:
            handles, labels = ax.get_legend_handles_labels()
        util = [data["dense_pe_utilization"], data.get("no_dispatcher_pe_utilization", 0.0), data["pe_utilization"]]
        ax2.bar(["dense", "no dispatcher", "dispatcher"], [100 * u for u in util],
                color=["#9e9e9e", "#ff7f0e", "#1f77b4"])
        ax2.set_ylabel("PE utilization (%)")
        ax2.set_ylim(0, 105)
        ax2.set_title("PE utilization (useful MAC-equivalents / PE-cycles)", fontsize=9)
        ax.text(0.0, -0.12, "\n".join(textwrap.wrap(caption(data), 150)), transform=ax.transAxes, fontsize=6.5,
                va="top")
    fig.legend(handles[::-1], labels[::-1], loc="center right", fontsize=8, title="component")
    fig.subplots_adjust(left=0.07, right=0.84, top=1 - 0.08 / n, bottom=0.22 / n, hspace=0.5, wspace=0.3)
    return fig


def _save_figure(fig, out: Path, stem: str, written: list[Path]) -> None:
    for ext, kw in (("png", {"dpi": 150}), ("pdf", {})):
        b = io.BytesIO()
        # Fixed metadata so equal inputs give byte-identical figures.
        meta = {"Software": None} if ext == "png" else {"CreationDate": None, "Producer": None, "Creator": None}
        fig.savefig(b, format=ext, metadata=meta, **kw)
        path = out / f"{stem}.{ext}"
        atomic_write_bytes(path, b.getvalue())
        written.append(path)
    plt.close(fig)


def write_report(results_paths: list[str | Path], out_dir: str | Path) -> list[Path]:
    """Write the report files for the given results into `out_dir`; returns the paths written.

    Raises:
        ReportError: any results file is invalid (checked before anything is written).
    """
    if not results_paths:
        raise ReportError("no results files given")
    items = []
    for p in results_paths:
        data = load_results(p)
        items.append((Path(p).stem, data))
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = []

    md = out / "summary.md"
    atomic_write_bytes(md, _markdown(items).encode())
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
    return written
