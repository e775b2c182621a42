"""``kaleido report`` and ``kaleido explain``: tables and figures from results JSON files (`sim.report`), and why
each op is as fast and as costly as it is (`sim.report.explain`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sim.cli.common import (
    check_out,
    fail,
    known_errors,
    stdout_console,
)


def report(
    results: Annotated[list[Path], typer.Argument(
        help="results JSON files from `kaleido simulate --json` or `kaleido baselines --json`, or one sweep "
             "table (results.parquet from `kaleido sweep`: Pareto and speedup-per-axis figures)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")] = Path("reports"),
) -> None:
    """Write Markdown/CSV tables and figures (cycles, energy, area, reuse heat map; with baselines:
    speedup/energy saving, quality vs speedup, resolution scaling) from simulation results."""
    from sim.report import write_report

    check_out(out, folder=True)
    removed: list[Path] = []
    tables = [p for p in results if p.suffix == ".parquet"]
    if tables and len(tables) != len(results):
        fail("give either sweep tables (.parquet from `kaleido sweep`) or results JSON files, not both")
    if len(tables) > 1:
        fail("give one sweep table at a time")
    try:
        if tables:
            from sim.sweep.figures import write_sweep_report

            paths = write_sweep_report(tables[0], out)
        else:
            paths = write_report(results, out, removed=removed)
    except known_errors() as err:
        fail(str(err))
    for p in paths:
        typer.echo(f"wrote {p}")
    for p in removed:
        typer.echo(f"removed stale {p} (an earlier report's file that this report does not write)")


def explain(
    results: Annotated[Path, typer.Argument(help="results JSON from `kaleido simulate TRACE --json`")],
    layout: Annotated[str, typer.Option(
        help="per-op layout: 'table' (one row per op, 12 columns), 'records' (a few lines per op, for 80 "
             "columns) or 'auto' (the table where the console is at least 140 columns wide, piped output "
             "included; else records)")] = "auto",
) -> None:
    """Why each op is as fast and as costly as it is (sim/report/explain.py): the speedup chain ideal -> dispatcher
    slots -> array cycles -> end to end, the mechanism binding Kaleido and dense (array, lockstep, packing,
    drain, combine, vector, similarity, DRAM), the link where Kaleido loses to dense, and the energy components that differ most from dense."""
    from sim.report.explain import (
        ExplainError,
        energy_ledger_lines,
        energy_rows,
        load_results,
        totals,
    )

    try:
        res = load_results(results)
    except ExplainError as err:
        fail(str(err))
    if layout not in ("auto", "table", "records"):
        fail(f"--layout must be auto, table or records, not {layout!r}")
    out = stdout_console()
    from rich.table import Table

    if layout == "records" or (layout == "auto" and out.width < TABLE_WIDTH):
        _explain_records(out, res, results)
    else:
        _explain_table(out, res, results)
    tot = totals(res)
    out.print(f"all ops: ideal {tot['ideal']:.2f}x -> array {tot['array']:.2f}x -> end to end {tot['end_to_end']:.2f}x"
              + (f"; energy {1 / tot['energy_saving']:.3f}x dense (energy saving = dense / Kaleido "
                 f"{tot['energy_saving']:.3f})" if tot["energy_saving"] else ""))
    if tot["energy"]:
        e = Table(title="energy by component (uJ), the largest saving first",
                  caption="part: the array and its own units (PEs, dispatcher, gather, combine unit, partial-sum and "
                          "difference buffers) or the units around it (the SRAMs beside the array, shared or "
                          "Kaleido's own P_eff, state and weight stage; DRAM, vector unit, leakage)")
        for col in ("component", "part", "Kaleido", "dense", "Kaleido - dense", "Kaleido / dense"):
            e.add_column(col, justify="left" if col in ("component", "part") else "right")
        for k, part, ke, de in energy_rows(res):
            e.add_row(k, part, f"{ke / 1e6:,.0f}", f"{de / 1e6:,.0f}", f"{(ke - de) / 1e6:+,.0f}",
                      f"{ke / de:.3f}" if de else "-")
        ke, de = res.get("energy_pj", 0.0), res.get("dense_energy_pj", 0.0)
        e.add_row("total", "", f"{ke / 1e6:,.0f}", f"{de / 1e6:,.0f}", f"{(ke - de) / 1e6:+,.0f}",
                  f"{ke / de:.3f}" if de else "-", style="bold")
        out.print(e)
        for line in energy_ledger_lines(res, ascii_only=True, components=False):
            out.print(line)
    for note in res.get("notes", []):  # written by `kaleido simulate` (sim.results.state_notes, D70)
        out.print(f"note: {note}")


def uj(pj: float) -> str:
    """A signed energy difference given in pJ, in µJ to three significant digits below 100 µJ (a small trace's
    per-op differences are fractions of a µJ) and to the µJ above."""
    x = pj / 1e6
    return f"{x:+,.0f}" if abs(x) >= 100 else f"{x:+.3g}"


#: Console width (columns) from which `explain`'s per-op table is readable: its 12 columns need about this much
#: for ratios and op names to stay whole (rendered on the demo's results at 80-200 columns; below it rich squeezes
#: columns to a few characters). A reading aid, not a measured constant of the hardware.
TABLE_WIDTH = 140


def _explain_table(out, res: dict, results: Path) -> None:
    """`explain`'s per-op table: one row per op (wide consoles and pipes)."""
    from rich.table import Table

    from sim.report.explain import explain_rows

    t = Table(title=f"{results} ({res.get('organisation', 'lockstep')} array): speedup chain per op (x dense) and "
                    "what binds",
              caption="ideal: dense MACs / useful MACs (1 / (C + P/2), each decision weighted by its MACs); slots: "
                      "dense issued slots / Kaleido's (band-tile slots / bands for compact and delta); array: array "
                      "cycles; end to end: with DRAM, vector and similarity stalls. binds: the largest stall beyond "
                      "the array (>= 5 % of the op's time), else the array's own loss; loses on: the link of the chain "
                      "that keeps least of what the link before it promised, and that ratio (below 0.98; an op "
                      "faster than dense can still lose there): lockstep / packing = slots / ideal, drain / fill = "
                      "array / slots, dram / vector / similarity / combine = end to end / array "
                      "(sim/report/explain.py)")
    for col in ("op", "block", "step", "ideal", "slots", "array", "end to end", "binds", "dense binds", "loses on",
                "energy / dense", "largest energy differences (uJ)"):
        t.add_column(col)
    for r in explain_rows(res):
        name = r["name"] + (f" (fused with {r['fused']})" if r["fused"] else "")
        diffs = ", ".join(f"{k} {uj(d)}" for k, d in r["energy_top"])
        t.add_row(name, str(r["block"]), str(r["step"]), f"{r['ideal']:.2f}", f"{r['slots']:.2f}", f"{r['array']:.2f}",
                  f"{r['end_to_end']:.2f}", r["binds"], r["dense_binds"],
                  "-" if r["loses_on"][0] == "-" else f"{r['loses_on'][0]} x{r['loses_on'][1]:.2f}",
                  f"{r['energy_ratio']:.2f}", diffs)
    out.print(t)


def _explain_records(out, res: dict, results: Path) -> None:
    """`explain`'s per-op records: three or four lines per op, each short enough for 80 columns (narrow terminals)."""
    from sim.report.explain import explain_rows

    out.print(f"{results} ({res.get('organisation', 'lockstep')} array): speedup chain per op (x dense) and what "
              "binds", style="bold")
    out.print("chain: ideal (dense MACs / useful MACs) -> slots (dense issued slots / Kaleido's) -> array (array "
              "cycles) -> end to end (with DRAM, vector and similarity stalls). binds: the largest stall beyond the "
              "array (>= 5 % of the op's time), else the array's own loss. loses on: the link that keeps least of "
              "what the link before it promised, and that ratio (below 0.98): lockstep / packing = slots / ideal, "
              "drain / fill = array / slots, dram / vector / similarity / combine = end to end / array. "
              "--layout table: one row per op (sim/report/explain.py)")
    for r in explain_rows(res):
        name = r["name"] + (f" (fused with {r['fused']})" if r["fused"] else "")
        loses = "-" if r["loses_on"][0] == "-" else f"{r['loses_on'][0]} x{r['loses_on'][1]:.2f}"
        out.print(f"[bold]{name}[/bold] (block {r['block']}, step {r['step']})")
        out.print(f"  ideal {r['ideal']:.2f} -> slots {r['slots']:.2f} -> array {r['array']:.2f} -> end to end "
                  f"{r['end_to_end']:.2f}")
        out.print(f"  bound by {r['binds']} (dense by {r['dense_binds']}); loses on {loses}; energy "
                  f"{r['energy_ratio']:.2f}x dense")
        if r["energy_top"]:
            out.print("  largest energy differences (uJ): "
                      + ", ".join(f"{k} {uj(d)}" for k, d in r["energy_top"]))
