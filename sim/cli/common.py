"""What every ``kaleido`` command shares: the typer app, the error contract (one line ``error: ...``,
exit code 2), output-path checks, progress bars, atomic JSON output and small option parsers.

Nothing here imports torch, numba or matplotlib: the error path of a command stays fast.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

app = typer.Typer(
    help="Kaleido: cycle-accurate simulator and RTL generator for a channel-wise reuse video-DiT accelerator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"kaleido {version('kaleido')}")
        raise typer.Exit


@app.callback()
def _main(version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, metavar="",
                                                 help="print the version and exit")] = False) -> None:
    """Kaleido: cycle-accurate simulator and RTL generator for a channel-wise reuse video-DiT accelerator."""


#: An on/off option: metavar "" so --help shows the flag without a "<bool>" value.
flag = functools.partial(typer.Option, metavar="")
#: Width of piped (non-terminal) output: rich would cut tables at 80 columns with "…".
PIPE_WIDTH = 160


def stdout_console() -> Console:
    """The console for results on stdout.

    When piped (not a terminal) tables are laid out at least `PIPE_WIDTH` columns wide and plain
    lines are never wrapped (``soft_wrap``), so a line such as ``stalls: ... similarity 4,864``
    stays one line for grep and scripts.
    """
    con = Console()
    if not con.is_terminal:
        con = Console(width=max(PIPE_WIDTH, con.width), soft_wrap=True)
    return con


EXIT_BAD_INPUT = 2


def fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


#: The project's bad-input errors, as (module, class): each ends a command with exit code 2.
KNOWN_ERRORS = (("algo.trace", "TraceError"), ("hw.config", "ConfigError"), ("algo.errors", "CaptureError"),
                ("sim.engines.model", "SimError"), ("sim.report", "ReportError"), ("sim.cost.tech", "TechError"),
                ("algo.fileio", "OutputPathError"), ("sim.baselines", "BaselineError"))


def known_errors() -> tuple[type[Exception], ...]:
    """The `KNOWN_ERRORS` classes of the modules imported so far (``except known_errors() as err``).

    An error can only come from a module that is imported, and Python evaluates an ``except``
    clause's expression only when an exception reaches it; so this never imports anything (no
    torch, numba or matplotlib on a fast error path such as a missing trace file)."""
    return tuple(getattr(sys.modules[mod], name) for mod, name in KNOWN_ERRORS if mod in sys.modules)


def check_model(name: str) -> None:
    """Fail at once (exit 2) on a model name no family defines, before torch loads
    (`algo.models.families.unknown_model`)."""
    from algo.models.families import unknown_model

    if (msg := unknown_model(name)) is not None:
        fail(msg)


def check_out(path: Path | None, folder: bool = False) -> None:
    """Fail at once (exit 2) on an output path that cannot be written: a folder given for a file
    (or a file for a folder), or a file among its parents (`algo.fileio.check_output_file`)."""
    from algo.fileio import OutputPathError, check_output_dir, check_output_file

    if path is None:
        return
    try:
        (check_output_dir if folder else check_output_file)(path)
    except OutputPathError as err:
        fail(str(err))


@contextlib.contextmanager
def progress_callback(title: str, total: int | None = None):
    """A rich progress bar; yields the ``progress(done, total, label)`` callback the library calls."""
    with progress() as prog:
        task = prog.add_task(title, total=total, label="")

        def cb(done: int, total: int, label: str) -> None:
            prog.update(task, completed=done, total=total, label=label)

        yield cb


def progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TimeRemainingColumn(), TextColumn("{task.fields[label]}"), console=console, transient=False,
        disable=not console.is_terminal and os.environ.get("KALEIDO_PROGRESS") != "1",
    )


def write_json_atomic(path: Path, obj: dict) -> None:
    from algo.fileio import atomic_write_json

    atomic_write_json(path, obj)

def parse_pair(text: str, what: str) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in text.split(","))
    except ValueError:
        fail(f"{what} must be two numbers 'a,b', got {text!r}")
    return a, b


def parse_ints(text: str, what: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        fail(f"{what} must be a comma-separated list of integers, got {text!r}")
    return []


def parse_theta_pair(text: str, what: str) -> tuple[float, float]:
    import math

    t1, t2 = parse_pair(text, what)
    if not (math.isfinite(t1) and math.isfinite(t2)) or t1 < 0 or t1 > t2:
        fail(f"{what} must satisfy 0 <= theta1 <= theta2, got {text!r}")
    return t1, t2


def parse_grid(grid: str) -> tuple[int, int, int] | None:
    g = parse_ints(grid, "--grid")
    if g and len(g) != 3:
        fail(f"--grid must be three integers F,H,W, got {grid!r}")
    return tuple(g) if g else None


def db(v: float) -> str:
    import math

    return f"{v:.2f}" if math.isfinite(v) else str(v)


def size_label(size: str) -> str:
    """``size tiny (reduced test model)`` / ``size full (published config)``: what a trace's size means."""
    return {"tiny": "size tiny (reduced test model, not the published config)",
            "small": "size small (the trained model's config, not the published one)",
            "full": "size full (published config)"}.get(size, f"size {size}")


def check_theta_index(tr, path: Path, theta_index: int) -> None:
    """--theta-index picks a stored pair of a decision trace; anywhere else it would be silently ignored."""
    check_theta_kind(tr.kind, path, theta_index)


def check_theta_kind(kind: str, path: Path, theta_index: int) -> None:
    """`check_theta_index` from the trace's kind alone."""
    if theta_index != 0 and kind != "decisions":
        fail(f"--theta-index applies to decision traces only; {path} is an {kind} trace (its ops carry "
             "their own theta, set at capture with --theta)")
