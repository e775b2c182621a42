"""The ``kaleido`` command line: capture, inspect, simulate, report, rtl, presets.

Every subcommand has ``--help``. Invalid input (missing or corrupt trace, wrong version, unknown
model or preset, bad config) ends with a one-line ``error: ...`` on stderr and exit code 2, and
leaves no partial output file behind (outputs are written atomically).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(
    help="Kaleido: cycle-accurate simulator and RTL generator for a channel-wise reuse video-DiT accelerator.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True)
EXIT_BAD_INPUT = 2


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _known_errors() -> tuple[type[Exception], ...]:
    from algo.models import CaptureError
    from algo.trace import TraceError
    from hw.config import ConfigError
    from sim.report import ReportError
    from sim.simulate import SimError

    return (TraceError, ConfigError, CaptureError, SimError, ReportError)


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[label]}"), console=console, transient=False,
        disable=not console.is_terminal and os.environ.get("KALEIDO_PROGRESS") != "1",
    )


def _write_json_atomic(path: Path, obj: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=2, sort_keys=False)
            fh.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _parse_pair(text: str, what: str) -> tuple[float, float]:
    try:
        a, b = (float(v) for v in text.split(","))
    except ValueError:
        _fail(f"{what} must be two numbers 'a,b', got {text!r}")
    return a, b


def _parse_ints(text: str, what: str) -> list[int]:
    try:
        return [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        _fail(f"{what} must be a comma-separated list of integers, got {text!r}")
    return []


@app.command()
def capture(
    out: Annotated[Path, typer.Option("--out", "-o", help="trace file to write (.npz)")],
    model: Annotated[str, typer.Option(help="model name, e.g. wan2.1-t2v-1.3b")] = "wan2.1-t2v-1.3b",
    size: Annotated[str, typer.Option(help="'tiny' (tests, demo) or 'full' (published config)")] = "tiny",
    steps: Annotated[str, typer.Option(help="denoising step indices to capture, e.g. 0,40,47,49")] = "0,40,47,49",
    num_inference_steps: Annotated[int, typer.Option(help="length of the flow-matching schedule")] = 50,
    theta: Annotated[str, typer.Option(help="thresholds theta1,theta2 (mean |diff| per channel, int8 units)")] = "4,12",
    b_msb: Annotated[int, typer.Option(help="reused high bits of PARTIAL (1..7)")] = 4,
    blocks: Annotated[str, typer.Option(help="block indices to capture (default: all)")] = "",
    seed: Annotated[int, typer.Option(help="seed of weights, text embeddings and noise")] = 0,
    cross: Annotated[bool, typer.Option("--cross/--no-cross", help="also record cross-attention ops")] = False,
) -> None:
    """Run a diffusers video DiT on real-image latents with hooks and write an exact int8 trace."""
    from algo.capture import capture_to_file

    th = _parse_pair(theta, "--theta")
    step_list = _parse_ints(steps, "--steps")
    block_list = _parse_ints(blocks, "--blocks") or None
    try:
        with _progress() as prog:
            task = prog.add_task("capture", total=None, label="")

            def cb(done: int, total: int, label: str) -> None:
                prog.update(task, completed=done, total=total, label=label)

            tr = capture_to_file(
                out, model=model, size=size, steps=step_list, num_inference_steps=num_inference_steps,
                seed=seed, theta=th, b_msb=b_msb, progress=cb, blocks=block_list, include_cross=cross,
            )
    except _known_errors() as err:
        _fail(str(err))
    typer.echo(f"wrote {out}: {len(tr.ops)} ops, grid {tr.grid}, model {tr.model} ({tr.size}), weights: {tr.weights}")


@app.command()
def inspect(
    trace: Annotated[Path, typer.Argument(help="trace file")],
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON object instead of a table")] = False,
) -> None:
    """Summarise a trace: format, model, weights, grid and every op's shape and decisions."""
    from algo.golden import decide, decision_fractions
    from algo.trace import TRACE_VERSION, load_trace

    try:
        tr = load_trace(trace)
    except _known_errors() as err:
        _fail(str(err))
    ops = []
    for op in tr.ops:
        groups = [g.as_tuple() for g in op.groups]
        decs = [decide(op.X[b], tr.grid, groups, op.theta, tr.b_msb)[0] for b in range(op.batch)]
        import numpy as np

        ops.append({"name": op.name, "block": op.block, "step": op.step, "batch": op.batch,
                    "M": op.M, "K": op.K, "N": op.N, "groups": len(groups), "theta": list(op.theta),
                    "reuse_fraction": decision_fractions(np.stack(decs), groups)})
    summary = {"format_version": TRACE_VERSION, "model": tr.model, "size": tr.size, "weights": tr.weights,
               "grid": list(tr.grid), "b_msb": tr.b_msb, "steps": tr.steps, "ops": ops}
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    out = Console()
    out.print(f"[bold]{trace}[/]: format v{TRACE_VERSION}, model {tr.model} ({tr.size}), grid "
              f"{'x'.join(map(str, tr.grid))} = {tr.tokens} tokens, b_msb {tr.b_msb}")
    out.print(f"weights: {tr.weights}")
    t = Table("op", "block", "step", "batch", "M", "K", "N", "groups", "C/P/R %")
    for o in ops:
        f = o["reuse_fraction"]
        t.add_row(o["name"], str(o["block"]), str(o["step"]), str(o["batch"]), str(o["M"]), str(o["K"]),
                  str(o["N"]), str(o["groups"]), f"{f['compute']:.0%}/{f['partial']:.0%}/{f['reuse']:.0%}")
    out.print(t)


@app.command()
def simulate(
    trace: Annotated[Path, typer.Argument(help="trace file from `kaleido capture`")],
    config: Annotated[str, typer.Option("--config", "-c", help="preset name or TOML file")] = "kaleido-16nm-128x128",
    json_out: Annotated[Path | None, typer.Option("--json", help="write results JSON here")] = None,
) -> None:
    """Cycle-simulate every op of a trace, dense and with Kaleido reuse."""
    from algo.trace import load_trace
    from hw.config import load_config
    from sim.simulate import simulate_trace

    try:
        cfg = load_config(config)
        tr = load_trace(trace)
        with _progress() as prog:
            task = prog.add_task("simulate", total=len(tr.ops), label="")

            def cb(done: int, total: int, label: str) -> None:
                prog.update(task, completed=done, total=total, label=label)

            res = simulate_trace(tr, cfg, progress=cb, trace_path=str(trace))
    except _known_errors() as err:
        _fail(str(err))
    if json_out is not None:
        _write_json_atomic(json_out, res)
    rf = res["reuse_fraction"]
    out = Console()
    out.print(f"[bold]{trace}[/] on {cfg.name}: {res['cycles']:,} cycles vs {res['dense_cycles']:,} dense "
              f"-> [bold]{res['speedup']:.2f}x[/]; PE utilization {res['pe_utilization']:.1%} "
              f"(dense {res['dense_pe_utilization']:.1%}); decisions C/P/R "
              f"{rf['compute']:.1%}/{rf['partial']:.1%}/{rf['reuse']:.1%}")
    if json_out is not None:
        out.print(f"results: {json_out}")


@app.command()
def report(
    results: Annotated[list[Path], typer.Argument(help="results JSON files from `kaleido simulate --json`")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")] = Path("reports"),
) -> None:
    """Write Markdown/CSV tables and a cycles-per-op figure from simulation results."""
    from sim.report import write_report

    try:
        paths = write_report(results, out)
    except _known_errors() as err:
        _fail(str(err))
    for p in paths:
        typer.echo(f"wrote {p}")


@app.command()
def rtl(
    presets: Annotated[list[str] | None, typer.Argument(help="presets or TOML files (default: all presets)")] = None,
    out: Annotated[Path, typer.Option("--out", help="output root")] = Path("rtl_out"),
) -> None:
    """Emit Verilog for accelerator presets into OUT/<preset>/ (same as `make rtl`)."""
    from hw.rtl import main as rtl_main

    args = [*(presets or []), "--out", str(out)]
    code = rtl_main(args)
    if code:
        raise typer.Exit(code)


@app.command()
def presets() -> None:
    """List the shipped accelerator presets and their main parameters."""
    from hw.config import load_config, preset_names

    t = Table("preset", "array", "clock MHz", "partial regs", "drain rows/cycle", "acc bits", "max tokens")
    for name in preset_names():
        c = load_config(name)
        t.add_row(name, f"{c.array_rows}x{c.array_cols}", f"{c.clock_mhz:g}", str(c.partial_regs),
                  str(c.drain_rows_per_cycle), str(c.acc_bits), f"{c.max_tokens:,}")
    Console().print(t)


def main() -> None:
    """Console-script entry point (``kaleido``)."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
