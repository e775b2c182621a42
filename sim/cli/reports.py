"""``kaleido report``: tables and figures from results JSON files (`sim.report`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sim.cli.common import (
    check_out,
    fail,
    known_errors,
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
