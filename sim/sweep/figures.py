"""`kaleido report DIR/results.parquet`: figures and a summary of a sweep table.

- ``sweep_pareto.png``/``.pdf``: end-to-end speedup over dense (``total_speedup``: array cycles plus
  DRAM, vector and similarity stalls, against the dense design's) against energy (uJ) and against
  die area (mm^2), the Pareto points (`pareto_front`) marked and joined. Points whose figures are an upper
  bound (``upper_bound_ops`` > 0: a fused score op's cross-frame state does not fit, docs/decisions.md D70)
  are drawn hollow (here and in the next figure) and kept off the front, so a config that merely lacks that
  state cannot look best;
- ``sweep_speedup_vs_axes.png``/``.pdf``: ``total_speedup`` against each key column that takes more
  than one value (numbers on a numeric axis, other values in sweep order), one panel per column;
- ``sweep_summary.md``: the Pareto points, the workload points (speedup, time, exposed communication)
  and the failed points with their errors. A sweep of workload points only gets the speedup-per-axis
  figure (its speedup over the workload's reference run) and the summary; no Pareto (no energy or area).

Figures are written with fixed metadata (`sim.report._save_figure`): equal tables give equal files.
"""

from __future__ import annotations

from pathlib import Path

from algo.fileio import atomic_write_bytes, check_output_dir
from sim.sweep.table import FIXED_COLUMNS, STATUS_COLUMNS, read_table
from sim.sweep.tasks import ALL_RESULT_COLUMNS

#: Objectives of the Pareto front: (column, +1 to maximise / -1 to minimise).
OBJECTIVES = (("total_speedup", 1), ("energy_pj", -1), ("area_mm2", -1))
SWEEP_FILES = ("sweep_summary.md", *(f"{s}.{e}" for s in ("sweep_pareto", "sweep_speedup_vs_axes")
                                      for e in ("png", "pdf")))


def pareto_front(rows: list[dict], objectives=OBJECTIVES) -> list[int]:
    """Indices (into ``rows``) of the points no other point dominates: at least as good in every
    objective and better in one. Rows missing an objective (failed points) are ignored."""
    pts = [(i, [s * float(r[c]) for c, s in objectives]) for i, r in enumerate(rows)
           if all(r.get(c) is not None for c, _ in objectives)]
    front = []
    for i, a in pts:
        dominated = any(all(bv >= av for av, bv in zip(a, b, strict=True)) and any(bv > av for av, bv in zip(a, b, strict=True))
                        for j, b in pts if j != i)
        if not dominated:
            front.append(i)
    return front


def _label(r: dict, keys: list[str]) -> str:
    return ", ".join(f"{k}={Path(str(r[k])).name if k == 'trace' else r[k]}" for k in keys if r.get(k) is not None)


def key_columns(rows: list[dict]) -> list[str]:
    """The sweep's key columns, in table order (everything but point, key, status, error, results)."""
    skip = {*FIXED_COLUMNS, *STATUS_COLUMNS, *ALL_RESULT_COLUMNS}
    return [c for c in rows[0] if c not in skip] if rows else []


def write_sweep_report(table: str | Path, out_dir: str | Path) -> list[Path]:
    """Write `SWEEP_FILES` for the sweep table at ``table`` (``.parquet``) into ``out_dir``.

    Raises:
        sim.report.ReportError: not a sweep table, or no point succeeded.
    """
    import matplotlib.pyplot as plt

    from sim.report import ReportError
    from sim.report.figures import _save_figure

    table = Path(table)
    try:
        rows = read_table(table)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise ReportError(f"{table}: not a readable sweep table ({type(err).__name__}: {err})") from None
    if not rows or "status" not in rows[0] or not ({"total_speedup", "speedup"} & set(rows[0])):
        raise ReportError(f"{table}: not a sweep table (no status/speedup columns; `kaleido sweep` writes it)")
    ok_all = [r for r in rows if r["status"] == "ok"]
    if not ok_all:
        raise ReportError(f"{table}: no point of the sweep succeeded (see its error column)")
    keys = key_columns(rows)
    out = check_output_dir(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    ok = [r for r in ok_all if r.get("total_speedup") is not None]  # trace points
    wl = [r for r in ok_all if r.get("total_speedup") is None and _wl_speedup(r) is not None]  # workload points
    exact = [i for i, r in enumerate(ok) if not r.get("upper_bound_ops")]  # tables before the column: exact
    bounds = [r for r in ok if r.get("upper_bound_ops")]
    front = [exact[i] for i in pareto_front([ok[i] for i in exact])]
    if not ok:
        return written + _workload_report(table, rows, wl, keys, out, written)

    fig, axes = plt.subplots(1, 2, figsize=(11.0, 4.6))
    for ax, col, xl in ((axes[0], "energy_pj", "energy (uJ)"), (axes[1], "area_mm2", "area (mm^2)")):
        scale = 1e-6 if col == "energy_pj" else 1.0
        ax.scatter([ok[i][col] * scale for i in exact], [ok[i]["total_speedup"] for i in exact], s=18, color="0.6",
                   label="points")
        if bounds:
            ax.scatter([r[col] * scale for r in bounds], [r["total_speedup"] for r in bounds], s=22,
                       facecolors="none", edgecolors="C1", label="optimistic (state unsized, D70)")
        fr = sorted(front, key=lambda i: ok[i][col])
        ax.plot([ok[i][col] * scale for i in fr], [ok[i]["total_speedup"] for i in fr], "o-", color="C3",
                label="Pareto (speedup, energy, area)")
        ax.axhline(1.0, color="0.3", lw=0.8, ls=":")
        ax.set_xlabel(xl)
        ax.set_ylabel("speedup over dense, end to end")
        ax.legend(fontsize=8)
    fig.suptitle(f"{table.parent.name or table.stem}: {len(ok)} points ({len(rows) - len(ok)} failed)")
    fig.tight_layout()
    _save_figure(fig, out, "sweep_pareto", written)

    varying = [k for k in keys if len({repr(r.get(k)) for r in rows}) > 1] or keys[:1]
    fig, axes = plt.subplots(1, max(1, len(varying)), figsize=(4.2 * max(1, len(varying)), 4.0), squeeze=False)
    for ax, k in zip(axes[0], varying, strict=False):
        vals = [r.get(k) for r in ok]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
        if numeric:
            xs = vals
        else:
            order = list(dict.fromkeys(str(v) for v in (r.get(k) for r in rows)))
            xs = [order.index(str(v)) for v in vals]
            ax.set_xticks(range(len(order)), [Path(o).name if k == "trace" else o for o in order], rotation=20,
                          fontsize=7)
        bound = [bool(r.get("upper_bound_ops")) for r in ok]
        ax.scatter([x for x, b in zip(xs, bound, strict=True) if not b],
                   [r["total_speedup"] for r, b in zip(ok, bound, strict=True) if not b], s=18, color="C0")
        if any(bound):
            ax.scatter([x for x, b in zip(xs, bound, strict=True) if b],
                       [r["total_speedup"] for r, b in zip(ok, bound, strict=True) if b], s=22, facecolors="none",
                       edgecolors="C1", label="optimistic (state unsized, D70)")
            ax.legend(fontsize=7)
        if numeric and all(v > 0 for v in vals) and max(vals) / min(vals) >= 16:
            ax.set_xscale("log", base=2)
        ax.axhline(1.0, color="0.3", lw=0.8, ls=":")
        ax.set_xlabel(k)
        ax.set_ylabel("speedup over dense, end to end")
    fig.tight_layout()
    _save_figure(fig, out, "sweep_speedup_vs_axes", written)

    lines = [f"# Sweep {table}", "", f"{len(rows)} points, {len(ok)} ok, {len(rows) - len(ok)} failed. "
             "Speedup: `total_speedup` (array cycles plus DRAM, vector and similarity stalls, against the dense "
             "design on the same config).", "", "## Pareto points (speedup up, energy down, area down)", "",
             "| point | " + " | ".join(keys) + " | speedup | energy (uJ) | area (mm^2) |",
             "|---" * (len(keys) + 4) + "|"]
    for i in sorted(front, key=lambda i: -ok[i]["total_speedup"]):
        r = ok[i]
        cells = [str(r["point"]), *(str(r.get(k)) if r.get(k) is not None else "" for k in keys)]
        cells += [f"{r['total_speedup']:.3f}", f"{r['energy_pj'] / 1e6:.3f}", f"{r['area_mm2']:.3f}"]
        lines.append("| " + " | ".join(cells) + " |")
    if bounds:
        lines += ["", "## Upper bounds (off the Pareto front)", "",
                  f"{len(bounds)} point(s) count a fused score op's temporal reuse although their config does not "
                  "hold its cross-frame state (docs/decisions.md D70): their figures are optimistic (speedup an upper "
                  "bound, energy a lower bound). compact and lockstep keep no such state whatever `state_sram_kib` "
                  "says, so they are always here for a score op whose state spans more than their own buffers.",
                  ""] + [f"- point {r['point']} ({_label(r, keys)}): {r['upper_bound_ops']} op(s), speedup "
                         f"{r['total_speedup']:.3f}" for r in bounds]
    if wl:
        lines += _workload_lines(wl, keys)
    lines += _failed_lines(rows, keys)
    md = out / "sweep_summary.md"
    atomic_write_bytes(md, ("\n".join(lines) + "\n").encode())
    written.append(md)
    return written


def _wl_speedup(r: dict):
    """A workload point's speedup: over its reference run (``speedup``), else reuse on dense (``reuse_speedup``)."""
    return r.get("speedup") if r.get("speedup") is not None else r.get("reuse_speedup")


def _failed_lines(rows: list[dict], keys: list[str]) -> list[str]:
    failed = [r for r in rows if r["status"] != "ok"]
    if not failed:
        return []
    return ["", "## Failed points", ""] + [f"- point {r['point']} ({_label(r, keys)}): {r['error']}" for r in failed]


def _workload_lines(wl: list[dict], keys: list[str]) -> list[str]:
    lines = ["", "## Workload points", "", "Speedup: over the workload's reference run (`speedup`), or of reuse "
             "over the same chips dense (`reuse_speedup`) when it has none; time: the whole run.", "",
             "| point | " + " | ".join(keys) + " | speedup | time (s) | exposed comm (s) |", "|---" * (len(keys) + 4) + "|"]
    for r in wl:
        cells = [str(r["point"]), *(str(r.get(k)) if r.get(k) is not None else "" for k in keys)]
        cells += [f"{_wl_speedup(r):.3f}", f"{r['total_time_us'] / 1e6:.4g}", f"{(r.get('exposed_comm_us') or 0) / 1e6:.4g}"]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def _workload_report(table: Path, rows: list[dict], wl: list[dict], keys: list[str], out: Path,
                     written: list[Path]) -> list[Path]:
    """A sweep of workload points only: ``sweep_speedup_vs_axes`` of `_wl_speedup` and the summary."""
    import matplotlib.pyplot as plt

    from sim.report.figures import _save_figure

    varying = [k for k in keys if len({repr(r.get(k)) for r in rows}) > 1] or keys[:1]
    fig, axes = plt.subplots(1, max(1, len(varying)), figsize=(4.2 * max(1, len(varying)), 4.0), squeeze=False)
    for ax, k in zip(axes[0], varying, strict=False):
        order = list(dict.fromkeys(str(r.get(k)) for r in rows))
        vals = [r.get(k) for r in wl]
        numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals)
        xs = vals if numeric else [order.index(str(v)) for v in vals]
        if not numeric:
            ax.set_xticks(range(len(order)), [Path(o).name if k == "workload" else o for o in order], rotation=20,
                          fontsize=7)
        ax.scatter(xs, [_wl_speedup(r) for r in wl], s=18, color="C0")
        ax.axhline(1.0, color="0.3", lw=0.8, ls=":")
        ax.set_xlabel(k)
        ax.set_ylabel("speedup (workload)")
    fig.suptitle(f"{table.parent.name or table.stem}: {len(wl)} workload points ({len(rows) - len(wl)} failed)")
    fig.tight_layout()
    _save_figure(fig, out, "sweep_speedup_vs_axes", written)
    lines = [f"# Sweep {table}", "", f"{len(rows)} points, {len(wl)} ok, {len(rows) - len(wl)} failed.",
             *_workload_lines(wl, keys), *_failed_lines(rows, keys)]
    md = out / "sweep_summary.md"
    atomic_write_bytes(md, ("\n".join(lines) + "\n").encode())
    return [md]
