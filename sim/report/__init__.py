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
- ``area_breakdown.png``/``.pdf`` and ``area.csv``: the die area by component (`sim.cost.area`) of each
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
  ``workload_steps.csv``, ``workload_comm_layers.csv`` (bytes per rank per step and layer against
  the reference's) and ``workload_schedule.png``/``.pdf`` (time per step against the
  reference and the schedule, e.g. DDiT's patch size per step).
- ``scaling.png``/``.pdf`` (when results of one model at two or more grids are given, e.g. 480p and
  720p): Kaleido's speedup and energy saving over dense and over each baseline against tokens.
- ``speedup_vs_reuse.png``/``.pdf`` (when results of one config, model and grid at two or more reuse levels
  are given, e.g. `kaleido synth --reuse r` at several r): array and end-to-end speedup against the
  measured REUSE share, with the ideal bound 1 / (C + P/2) (`sim.report.tables.reuse_points`), one line
  pair per organisation.
- ``organisations.png``/``.pdf`` (when results of two or more array organisations, each at two or more
  reuse levels, of one config, model and grid are given): end-to-end speedup against r per organisation,
  one panel per decision field (scattered 1x1 regions, coherent regions, captured), the ideal drawn, and
  area and energy per organisation beside it (`sim.report.organisations.result_rows`). Made by, e.g.,
  ``kaleido synth ... --reuse R --region 8x8 -o sR.npz`` for a few R, then ``kaleido simulate sR.npz
  --organisation O --json O-R.json`` for each organisation O, and ``kaleido report *.json``.
- ``summary.md`` ends with a "Why, per op" section (`sim.report.tables.explain_markdown`: the chain and binding
  mechanism of `kaleido explain`, and the energy difference split at the array); with an A100 baseline it also gives Kaleido's and dense's speedup over the A100 normalised
  three ways: raw, per mm² of die, per peak TOPS (`sim.report.tables.a100_normalised_rows`).

Report files of an earlier run in the folder that this run does not write are removed
(`REPORT_TABLES`, `REPORT_FIGURES`; nothing else). Every figure has labelled axes with units, a
legend and a caption line naming the config, trace, weights and energy table; PNGs are written at 150 dpi with the figure size given in `FIGURE_SIZES`.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from algo.fileio import atomic_write_bytes, check_output_dir
from sim.report.tables import (
    BASELINE_FIELDS,
    CSV_FIELDS,
    _baselines,
    _baselines_markdown,
    _csv_bytes,
    _energy_breakdown_rows,
    _markdown,
    _rows,
    area_items,
    baseline_rows,
    quality_points,
    scaling_groups,
)
from sim.results import RESULTS_FORMAT, RESULTS_VERSION


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
    if isinstance(data, dict) and data.get("format") == "kaleido-gemm":  # sim.timing.dataflow.gemm_result
        raise ReportError(f"{path} is a `kaleido simulate --gemm` result (one dense GEMM, already printed in full); "
                          "`kaleido report` reads trace results (`kaleido simulate TRACE --json` or "
                          "`kaleido baselines --json`)")
    from sim.workload.simulate import RESULTS_FORMAT as WORKLOAD_RESULTS_FORMAT
    from sim.workload.simulate import RESULTS_VERSION as WORKLOAD_RESULTS_VERSION

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


def _write_area_and_baselines(items, out: Path, written: list[Path]) -> None:
    """The area table and figure and the reuse heat map; with baselines, their tables and figures
    (module docstring)."""
    from sim.report.figures import (
        _area_figure,
        _baselines_figure,
        _energy_breakdown_figure,
        _heatmap_figure,
        _quality_figure,
        _save_figure,
        _scaling_figure,
    )

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
                 "energy_breakdown.csv")


REPORT_FIGURES = ("cycles_per_op", "energy_utilization", "area_breakdown", "reuse_heatmap", "baselines",
                  "energy_breakdown", "quality_speedup", "scaling", "speedup_vs_reuse", "organisations")


def report_file_names() -> list[str]:
    """The names of every file `write_report` may write (`REPORT_TABLES`, `REPORT_FIGURES` x png/pdf,
    and the workload report's `sim.workload.report.TABLES` and ``FIGURES``)."""
    from sim.workload import report as workload_report

    tables, figures = (*REPORT_TABLES, *workload_report.TABLES), (*REPORT_FIGURES, *workload_report.FIGURES)
    return [*tables, *(f"{s}.{e}" for s in figures for e in ("png", "pdf"))]


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
    from sim.workload import report as workload_report
    from sim.workload.simulate import RESULTS_FORMAT as WORKLOAD_RESULTS_FORMAT

    wl_items = [(lb, d) for lb, d in items if d["format"] == WORKLOAD_RESULTS_FORMAT]
    tr_items = [(lb, d) for lb, d in items if d["format"] != WORKLOAD_RESULTS_FORMAT]
    if tr_items:
        _write_all(tr_items, out, written)
    if wl_items:
        from sim.report.figures import _save_figure

        workload_report.write(wl_items, out, written, _save_figure, atomic_write_bytes)
    for name in report_file_names():
        stale = out / name
        if stale not in written and stale.is_file():
            stale.unlink()
            if removed is not None:
                removed.append(stale)
    return written


def _write_all(items, out: Path, written: list[Path]) -> None:
    from sim.report.figures import (  # matplotlib: once the inputs are good
        _energy_figure,
        _figure,
        _save_figure,
    )

    md = out / "summary.md"
    from sim.report.tables import explain_markdown

    atomic_write_bytes(md, (_markdown(items) + _baselines_markdown(items) + explain_markdown(items)).encode())
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
    from sim.report.tables import reuse_points

    if reuse_points(items):
        from sim.report.figures import _reuse_figure

        _save_figure(_reuse_figure(items), out, "speedup_vs_reuse", written)
    from sim.report.organisations import result_rows

    org_rows = result_rows(items)
    if org_rows:
        from sim.report.figures import _organisations_figure

        _save_figure(_organisations_figure(items, org_rows), out, "organisations", written)
    if all("energy_breakdown_pj" in d for _, d in items):
        _save_figure(_energy_figure(items), out, "energy_utilization", written)
        _write_area_and_baselines(items, out, written)
