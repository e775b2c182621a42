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
        help="results JSON files from `kaleido simulate --json` or `kaleido baselines --json`")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")] = Path("reports"),
) -> None:
    """Write Markdown/CSV tables and figures (cycles, energy, area, reuse heat map; with baselines:
    speedup/energy saving, quality vs speedup, resolution scaling) from simulation results."""
    from sim.report import write_report

    check_out(out, folder=True)
    removed: list[Path] = []
    try:
        paths = write_report(results, out, removed=removed)
    except known_errors() as err:
        fail(str(err))
    for p in paths:
        typer.echo(f"wrote {p}")
    for p in removed:
        typer.echo(f"removed stale {p} (an earlier report's file that this report does not write)")
