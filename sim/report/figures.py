"""Report figures (matplotlib, Agg backend): cycles per op, energy and utilization, baselines, energy and
area breakdowns, reuse heat map, quality vs speedup, resolution scaling; `FIGURE_SIZES`, `PNG_DPI`."""

from __future__ import annotations

import io
import math
import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker as mticker  # noqa: E402

from algo.fileio import atomic_write_bytes  # noqa: E402
from sim.report.tables import (  # noqa: E402
    _baselines,
    _captions,
    _energy_breakdown_rows,
    _is_roofline,
    _op_label,
    energy_vs_dense,
    heatmap_matrix,
    model_label,
    quality_points,
    reuse_points,
)


def _ratio_ticks(axis) -> None:
    """Label a log axis of ratios as plain numbers with an x (``0.5x``, ``2x``, ``4x``) instead of matplotlib's
    ``4×10^0``: every minor tick over at most 1.5 decades, only the 2s and 5s over more (so labels do not pile up)."""
    def minor(v: float, _pos) -> str:
        lo, hi = sorted(axis.get_view_interval())
        if lo > 0 and math.log10(hi / lo) > 1.5 and round(v / 10 ** math.floor(math.log10(v))) not in (2, 5):
            return ""
        return f"{v:g}x"

    axis.set_major_formatter(mticker.FuncFormatter(lambda v, _pos: f"{v:g}x"))
    axis.set_minor_formatter(mticker.FuncFormatter(minor))


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
            ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0), numticks=40))  # 1-2-5: no crowding
            ax.yaxis.set_minor_formatter(NullFormatter())
            ax.set_ylabel("cycles per op (log)")
        else:  # a narrow range: linear from 0, so bar heights compare honestly
            ax.set_ylabel("cycles per op")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        ax.grid(True, axis="y", which="major", alpha=0.3)
        e2e = f", end to end {data['total_speedup']:.2f}x" if "total_speedup" in data else ""
        ax.set_title(f"{label}: array {data['speedup']:.2f}x{e2e} (dense / Kaleido cycles)\n"
                     "the array's cycles per op, dense vs Kaleido reuse", fontsize=10, loc="left")
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0.2)  # beside, not over
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


#: Stacked-bar colours: tab20's ten strong hues first, then its ten light ones, so that components drawn next to
#: each other never get a hue and its light variant (tab20 pairs them at adjacent indices); the light ones are
#: hatched too, so a strong hue and its light variant also differ in pattern.
STACK_ORDER = (*range(0, 20, 2), *range(1, 20, 2))


def stack_style(i: int) -> dict:
    """``color`` and ``hatch`` keyword arguments for the ``i``-th component of a stacked bar chart."""
    return {"color": plt.get_cmap("tab20")(STACK_ORDER[i % 20]), "hatch": "..." if i % 20 >= 10 else ""}


#: PE-utilization bars: greys and hatches, so they never read as an energy component (tab20 colours).
UTIL_STYLE = (("dense", "#d0d0d0", ""), ("no dispatcher", "#8c8c8c", "//"), ("dispatcher", "#3c3c3c", ""))


def _energy_figure(items: list[tuple[str, dict]]):
    n = len(items)
    fig, axes = plt.subplots(n, 2, figsize=(13, 4.4 * n + 0.5), squeeze=False,
                             gridspec_kw={"width_ratios": [3, 2]})
    for row, (label, data) in enumerate(items):
        ax, ax2 = axes[row]
        comps = list(data["energy_breakdown_pj"])
        bottoms = [0.0, 0.0]
        for ci, comp in enumerate(comps):
            vals = [data["dense_energy_breakdown_pj"].get(comp, 0.0) / 1e6, data["energy_breakdown_pj"][comp] / 1e6]
            ax.bar(["dense (reuse off)", "Kaleido"], vals, bottom=bottoms, label=comp, **stack_style(ci))
            bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
        ax.set_ylabel("energy (µJ)")
        ax.set_title(f"{label}: energy by component; {energy_vs_dense(data)}", fontsize=10)
        h, lb = ax.get_legend_handles_labels()
        ax.legend(h[::-1], lb[::-1], fontsize=7, title="component", title_fontsize=8, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0))  # next to its own panel, top component first
        util = [data["dense_pe_utilization"], data.get("no_dispatcher_pe_utilization", 0.0), data["pe_utilization"]]
        styles = list(UTIL_STYLE)
        if data.get("organisation", "lockstep") != "lockstep":  # compact/delta: no dispatcher to switch off
            util, styles = [util[0], util[2]], [styles[0], ("Kaleido", *styles[2][1:])]
        bars = ax2.bar([s[0] for s in styles], [100 * u for u in util], color=[s[1] for s in styles],
                       hatch=[s[2] for s in styles], edgecolor="k", linewidth=0.6)
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


#: Figure sizes in inches (width, height per results panel); PNGs at `PNG_DPI`.
FIGURE_SIZES = {"baselines": (11.0, 4.6), "energy_breakdown": (12.0, 4.8), "area_breakdown": (10.0, 4.8),
                "reuse_heatmap": (9.0, 4.2), "quality_speedup": (9.0, 6.0), "scaling": (11.0, 4.8),
                "speedup_vs_reuse": (8.0, 5.0), "organisations": (4.2, 4.2)}


PNG_DPI = 150


def figure_inches(stem: str, panels: int = 1) -> tuple[float, float]:
    """Figure size of a report figure in inches: fixed width, height per panel (`FIGURE_SIZES`)."""
    w, h = FIGURE_SIZES[stem]
    return w, h * panels


def _caption_block(fig, items) -> float:
    """Draw the caption at the bottom of `fig`; returns the figure fraction it takes (for tight_layout)."""
    text = _captions(items)
    lines = text.count("\n") + 1
    fig.text(0.01, 0.005, text, fontsize=6, va="bottom")
    return min(0.5, (0.06 + 0.1 * lines) / fig.get_figheight())


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
            _ratio_ticks(ax.yaxis)
            ax.margins(y=0.12)
            ax.set_ylabel(f"{ratio}\n(x, log; dashed: 1x)", fontsize=8)
            ax.set_title(f"{label}: {model_label(data)}\n{what} over each baseline (> 1: Kaleido better)", fontsize=9)
            ax.tick_params(axis="x", labelsize=6.5)
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


def _energy_breakdown_figure(items):
    n = len(items)
    fig, axes = plt.subplots(n, 1, figsize=figure_inches("energy_breakdown", n), squeeze=False)
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
            ax.bar([d for d, _ in designs], vals, bottom=bottoms, label=comp, **stack_style(ci))
            bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
        ax.set_ylabel("energy (µJ)")
        ax.set_xlabel("design")
        ax.margins(y=0.15)
        ax.set_title(f"{label}: {model_label(data)} - energy by component", fontsize=9)
        ax.legend(fontsize=6.5, ncol=2, loc="center left", bbox_to_anchor=(1.0, 0.5), title="component")
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


def _area_figure(areas, items):
    fig, ax = plt.subplots(1, 1, figsize=figure_inches("area_breakdown"))
    comps = list(areas[0][1]["breakdown"])
    xs, bottoms = [], []
    for name, _a in areas:
        label = name.replace(" (", "\n(", 1)  # the preset's name, then (organisation) @ table
        xs += [f"{label}\nKaleido", f"{label}\ndense die"]
        bottoms += [0.0, 0.0]
    for ci, comp in enumerate(comps):
        vals = []
        for _, a in areas:
            v = a["breakdown"].get(comp, 0.0)
            vals += [v, a["dense_breakdown"].get(comp, 0.0)]  # sim.cost.area: the dense die's parts
        ax.bar(xs, vals, bottom=bottoms, label=comp, **stack_style(ci))
        bottoms = [b + v for b, v in zip(bottoms, vals, strict=True)]
    ax.set_ylabel("area (mm²)")
    ax.set_xlabel("configuration")
    ax.tick_params(axis="x", labelsize=8)
    ax.set_title("Die area by component (sim/cost/area.py)", fontsize=10)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5), title="component")
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


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


#: A gap between neighbouring speedups (sorted, ratio) wider than this splits the x axis of
#: quality_speedup.png in two: designs at 0.9-1.5x and the A100 roofline at hundreds of x would
#: otherwise share one log axis, on which every design near 1x collapses into one column.
SPEEDUP_BREAK_RATIO = 4.0


def speedup_clusters(speedups, ratio: float = SPEEDUP_BREAK_RATIO) -> list[tuple[float, float]]:
    """``(low, high)`` ranges of `speedups` (positive floats) split at every gap wider than `ratio`
    between sorted neighbours; one range when no gap is that wide (no broken axis)."""
    xs = sorted(float(x) for x in speedups)
    if not xs:
        return [(1.0, 1.0)]
    out = [[xs[0], xs[0]]]
    for x in xs[1:]:
        if x > out[-1][1] * ratio:
            out.append([x, x])
        else:
            out[-1][1] = x
    return [(lo, hi) for lo, hi in out]


def _quality_figure(items):
    from algo.quality import pareto_front

    all_x = [p["speedup_vs_dense"] for _, d in items for p in quality_points(d)]
    clusters = speedup_clusters(all_x)
    # Panel widths by the designs each holds (1 to 4 parts): the crowded panel near 1x gets the room
    # to separate its designs, a lone outlier (the A100 roofline) a narrow panel.
    widths = [min(4, max(1, sum(lo <= x <= hi for x in all_x))) for lo, hi in clusters]
    fig, axes = plt.subplots(1, len(clusters), figsize=figure_inches("quality_speedup"), sharey=True,
                             squeeze=False, gridspec_kw={"width_ratios": widths})
    axes = list(axes[0])
    finite = [p["psnr_db"] for _, d in items for p in quality_points(d) if math.isfinite(p["psnr_db"])]
    cap = (max(finite) if finite else 60.0) + 10.0
    # One marker shape per design, hollow, largest first: designs at the same point stay visible as
    # concentric shapes (e.g. dense and an exact policy, both at 1x and infinite PSNR).
    markers = "osD^vP*X<>"
    styles = ["-", "--", ":", "-."]
    designs = list(dict.fromkeys(p["design"] for _, d in items for p in quality_points(d)))
    for ax in axes:
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
                near = next((key for key in at if abs(math.log(x / key[0])) < 0.03 and abs(y - key[1]) < 1.5),
                            (x, y))
                at.setdefault(near, []).append(p["design"])
            for (x, y), names in at.items():
                ax.annotate(" = ".join(names) + (f" ({x:,.0f}x)" if x >= 100 else f" ({x:.3g}x)"), (x, y),
                            textcoords="offset points",
                            xytext=(9, -3 - 9 * k), fontsize=7, annotation_clip=True)
            front = pareto_front([p["speedup_vs_dense"] for p in pts],
                                 [p["psnr_db"] if math.isfinite(p["psnr_db"]) else cap for p in pts])
            if len(front) >= 2:  # a front of one point is no line
                ax.plot([pts[i]["speedup_vs_dense"] for i in front],
                        [pts[i]["psnr_db"] if math.isfinite(pts[i]["psnr_db"]) else cap for i in front],
                        styles[k % len(styles)], color="tab:red", lw=1, label=f"Pareto front{suffix}")
        ax.axhline(cap, color="gray", ls=":", lw=0.8, label=f"∞ dB (identical to the exact run), drawn at {cap:.0f}")
        ax.set_xscale("log")
        ax.grid(True, alpha=0.3)
    for ax, (lo, hi), width in zip(axes, clusters, widths, strict=True):
        pad = 10 ** (0.08 + 0.04 * math.log10(hi / lo))
        ax.set_xlim(lo / pad, hi * pad * 1.3)  # room for the labels right of the markers
        # within a decade: a few plain linear ticks (log ticks would give one label or overlap)
        # (two on a one-part panel, whose labels would otherwise overlap)
        ax.xaxis.set_major_locator(mticker.MaxNLocator(2 if width == 1 else 4) if hi / lo < 10
                                   else mticker.LogLocator())
        ax.xaxis.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 100 else f"{v:g}"))
        ax.xaxis.set_minor_formatter(mticker.NullFormatter())
    for left, right in zip(axes, axes[1:], strict=False):  # broken-axis marks: // on the shared edge
        left.spines["right"].set_visible(False)
        right.spines["left"].set_visible(False)
        right.tick_params(axis="y", left=False)
        kw = {"marker": [(-1, -1.5), (1, 1.5)], "markersize": 10, "linestyle": "none", "color": "k",
              "mec": "k", "mew": 1, "clip_on": False}
        left.plot([1, 1], [0, 1], transform=left.transAxes, **kw)
        right.plot([0, 0], [0, 1], transform=right.transAxes, **kw)
    broken = " (axis broken between the panels)" if len(axes) > 1 else ""
    bottom = _caption_block(fig, items)
    fig.supxlabel("each design's speedup over the dense array = dense time / design time (x, log; > 1: faster)"
                  + broken, fontsize=9, y=bottom, va="bottom")
    axes[0].set_ylabel("PSNR of final latents vs exact int8 run (dB)")
    fig.suptitle("Quality vs speedup: Kaleido and baselines", fontsize=10)
    handles, labels = axes[-1].get_legend_handles_labels()
    axes[-1].legend(handles, labels, fontsize=6.5, loc="center left", bbox_to_anchor=(1.0, 0.5), markerscale=0.6)
    fig.tight_layout(rect=(0, bottom + 0.03, 1, 1))  # tight_layout leaves supxlabel out: 0.03 for it
    if len(axes) > 1:
        fig.subplots_adjust(wspace=0.06)  # the panels of a broken axis sit close (after tight_layout)
    return fig


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


def _reuse_figure(items):
    """End-to-end and array speedup against the measured REUSE share, with the ideal bound 1 / (C + P/2)
    (`sim.report.tables.reuse_points`)."""
    pts = reuse_points(items)
    fig, ax = plt.subplots(figsize=figure_inches("speedup_vs_reuse"))
    styles = ["-", "--", ":", "-."]
    for gi, g in enumerate(dict.fromkeys(p["group"] for p in pts)):
        gp = [p for p in pts if p["group"] == g]
        x = [p["reuse"] for p in gp]
        ls = styles[gi % len(styles)]
        ax.plot(x, [p["ideal"] for p in gp], "k" + ls, label=f"ideal 1/(C + P/2): {g}")
        ax.plot(x, [p["array"] for p in gp], "o" + ls, color="tab:blue", ms=4, label=f"array (speedup): {g}")
        # open, larger markers: where end to end equals the array the blue line stays visible inside them
        ax.plot(x, [p["end_to_end"] for p in gp], "s" + ls, color="tab:red", ms=9, mfc="none", lw=1.0,
                label=f"end to end (total_speedup): {g}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_yscale("log")
    _ratio_ticks(ax.yaxis)
    ax.set_xlabel("measured REUSE share of the X elements (R)")
    ax.set_ylabel("speedup over dense (x, log)")
    ax.set_title("Kaleido speedup against reuse, with the ideal bound", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig


def _organisations_figure(items, rows):
    """`sim.report.organisations.figure` with the report's caption (width per panel from `FIGURE_SIZES`)."""
    from sim.report.organisations import figure

    fig = figure(rows, figure_inches("organisations"))
    fig.tight_layout(rect=(0, _caption_block(fig, items), 1, 1))
    return fig
