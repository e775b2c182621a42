"""The ``kaleido`` command line: capture, synth, inspect, simulate, report, explain, baselines, quality, quality-sweep, train, area, rtl, presets, sweep.

Every subcommand has ``--help``. Invalid input (missing or corrupt trace, wrong version, unknown
model or preset, bad config) ends with a one-line ``error: ...`` on stderr and exit code 2, and
leaves no partial output file behind (outputs are written atomically).

One module per command group: `traces` (capture, synth, inspect), `simulation` (simulate, baselines, sweep),
`reports` (report, explain), `quality` (quality, quality-sweep), `training` (train), `hardware` (area, rtl, presets); `common`
holds the app, the error contract and the option parsers. Commands are registered here, in the
order ``--help`` lists them.
"""

from __future__ import annotations

import inspect
import sys

import typer

from sim.cli import hardware, quality, reports, simulation, traces, training
from sim.cli.common import app

app.command()(traces.capture)
app.command()(traces.synth)
app.command()(traces.inspect)
app.command()(simulation.simulate)
app.command()(reports.report)
app.command()(reports.explain)
app.command()(simulation.baselines)
app.command()(quality.quality)
app.command("quality-sweep")(quality.quality_sweep)
app.command()(training.train)
app.command()(hardware.area)
app.command()(hardware.rtl)
app.command()(hardware.presets)
app.command()(simulation.sweep)


def _no_value_help(cls):
    """``cls`` whose ``--help`` option shows no ``<bool>`` value in the help table (as `sim.cli.common.flag`)."""

    class NoValueHelp(cls):
        def get_help_option(self, ctx):
            opt = super().get_help_option(ctx)
            if opt is not None:
                opt.metavar = ""
            return opt

    return NoValueHelp


def _unwrapped_help(doc: str | None) -> str | None:
    """A command's docstring as ``--help`` text: each paragraph's source line breaks joined (typer 0.29 keeps them
    after the first paragraph, and the terminal then wraps the hard-broken lines again); a line starting a list
    item (``- ``) keeps its break."""
    if not doc:
        return doc
    paras = []
    for par in inspect.cleandoc(doc).split("\n\n"):
        lines: list[str] = []
        for line in par.splitlines():
            if lines and not line.lstrip().startswith("- "):
                lines[-1] += " " + line.strip()
            else:
                lines.append(line.strip())
        paras.append("\n".join(lines))
    return "\n\n".join(paras)


for _cmd in app.registered_commands:
    _cmd.cls = _no_value_help(_cmd.cls or typer.core.TyperCommand)
    if _cmd.help is None and _cmd.callback is not None:
        _cmd.help = _unwrapped_help(_cmd.callback.__doc__)


def _register_workload() -> None:
    from sim.cli.workload import workload_app

    for cmd in workload_app.registered_commands:  # `--help` without a `<bool>` value, as every other command
        cmd.cls = _no_value_help(cmd.cls or typer.core.TyperCommand)
        if cmd.help is None and cmd.callback is not None:
            cmd.help = _unwrapped_help(cmd.callback.__doc__)
    workload_app.info.cls = _no_value_help(workload_app.info.cls or typer.core.TyperGroup)
    app.add_typer(workload_app, name="workload")


_register_workload()
app.info.cls = _no_value_help(app.info.cls or typer.core.TyperGroup)


def main() -> None:
    """Console-script entry point (``kaleido``)."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
