"""``kaleido simulate`` (cycle model, one dense GEMM, or the RTL engine; split by (step, block) on Dask),
``kaleido baselines`` and ``kaleido sweep`` (design-space sweeps on Dask, `sim.sweep`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sim.cli.common import (
    check_out,
    check_theta_index,
    check_theta_kind,
    db,
    fail,
    flag,
    known_errors,
    parse_ints,
    progress,
    progress_callback,
    stdout_console,
    write_json_atomic,
)

#: The error of --dataflow/--timing given with a trace.
GEMM_ONLY = ("--dataflow and --timing apply to --gemm only (a trace runs on the output-stationary "
             "Kaleido array with native timing)")

def _simulate_gemm(gemm: str, config: str, dataflow: str, timing: str, json_out: Path | None) -> None:
    """``kaleido simulate --gemm M,K,N``: time one dense GEMM (reuse off) with `sim.timing.dataflow`."""
    from hw.config import ConfigError, load_config
    from sim.timing.dataflow import gemm_result

    shape = parse_ints(gemm, "--gemm")
    if len(shape) != 3 or min(shape) <= 0:
        fail(f"--gemm must be three positive integers 'M,K,N', got {gemm!r}")
    try:
        cfg = load_config(config)
        res = gemm_result(*shape, cfg, dataflow=dataflow, timing=timing)
    except ConfigError as err:
        fail(str(err))
    except ValueError as err:  # unknown dataflow or timing (sim.timing.dataflow names the argument)
        fail(f"--{str(err)}")
    if json_out is not None:
        write_json_atomic(json_out, res)
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
        fail("--no-dispatcher, --theta-index and --tech apply to --engine model only")
    waves_from, waves_cycles, waves_out = waves
    want_waves = os.environ.get("KALEIDO_WAVES") == "1"
    try:
        cfg = load_config(config)
    except known_errors() as err:
        fail(str(err))
    if cfg.organisation != "lockstep" and (want_waves or waves_from is not None or waves_cycles is not None):
        fail(f"waveforms (KALEIDO_WAVES=1, --waves-from, --waves-cycles) apply to the lockstep RTL engine only; "
             f"{cfg.name} is {cfg.organisation!r}")
    if not want_waves and (waves_from is not None or waves_cycles is not None):
        fail("--waves-from and --waves-cycles need KALEIDO_WAVES=1 in the environment")
    if want_waves:
        check_out(waves_out)
        if (waves_from or 0) < 0 or (waves_cycles if waves_cycles is not None else 1) <= 0:
            fail("--waves-from must be >= 0 and --waves-cycles > 0")
    timings: dict = {}
    try:
        if cfg.organisation != "lockstep":
            _simulate_core(trace, cfg, json_out, want_waves)
            return
        tr = load_trace(trace, derive_p=False)  # pv's P regenerated one frame of one head at a time (D81)
        t0 = time.perf_counter()
        with progress_callback("simulate (RTL)", len(tr.ops)) as cb:
            res = simulate_trace_rtl(
                tr, cfg, progress=cb, trace_path=str(trace), fst=waves_out if want_waves else None,
                waves_from=waves_from or 0, waves_cycles=waves_cycles or 10_000, timings=timings,
                log=lambda line: print(line, file=sys.stderr, flush=True))
    except (*known_errors(), RtlEngineError) as err:
        fail(str(err))
    if json_out is not None:
        write_json_atomic(json_out, res)
    out = stdout_console()
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


def _simulate_core(trace: Path, cfg, json_out: Path | None, want_waves: bool) -> None:
    """``--engine rtl`` on a delta or compact config: the trace through the op-level controller with its combine
    stage, ``kaleido_dcore`` (``kaleido_dcore_stage`` with a weight stage, D119) or ``kaleido_ccore``, compiled by
    Verilator (`sim.engines.verilator_core`, D102)."""
    from algo.trace import load_trace
    from sim.engines.verilator_build import RtlEngineError
    from sim.engines.verilator_core import simulate_trace_core

    if want_waves:
        fail(f"KALEIDO_WAVES=1 applies to the lockstep RTL engine; {cfg.name} is {cfg.organisation!r}")
    timings: dict = {}
    try:
        tr = load_trace(trace)  # pv's P whole: the core's host side slices it
        res = simulate_trace_core(tr, cfg, str(trace), log=lambda line: print(line, file=sys.stderr, flush=True),
                                  timings=timings)
    except (*known_errors(), RtlEngineError) as err:
        fail(str(err))
    if json_out is not None:
        write_json_atomic(json_out, res)
    out = stdout_console()
    c, m, d = res["cycles"], res["model_cycles"], res["dense_cycles"]
    out.print(f"[bold]{trace}[/] on {cfg.name} (RTL, Verilator, {res['core']}): {c:,} controller cycles "
              f"(start to done per slice, host writes not counted); outputs sha256 {res['outputs_sha256'][:16]}...")
    out.print(f"the cycle model on the same trace and config: {m:,} array cycles (the controller takes {c / m:.2f}x "
              f"that; combine timed as {cfg.combine_timing!r}), dense {d:,} (speedup of the controller over dense "
              f"{d / c:.2f}x; docs/decisions.md D102, D104)")
    print(f"RTL engine: {timings.get('run_s', 0):.1f} s in all", file=sys.stderr)
    if json_out is not None:
        out.print(f"results: {json_out}")


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
    no_dispatcher: Annotated[bool, flag(
        "--no-dispatcher", help="time with the data dispatcher off (raster position order, no channel pairing)")] = False,
    engine: Annotated[str, typer.Option(
        help="model (cycle model) or rtl (the RTL compiled by Verilator, arrays up to 32x32, exact traces only; "
             "reports cycles, tiles, slots and outputs_sha256; build cached in build/verilator/; KALEIDO_WAVES=1 "
             "writes an FST of the --waves-from window; a delta or compact config runs its op-level controller with "
             "its combine stage, kaleido_dcore (kaleido_dcore_stage with a weight stage) or kaleido_ccore, on "
             "tiny-8x8-sized configs, and reports its own cycles beside the cycle model's and dense's)")] = "model",
    waves_from: Annotated[int | None, typer.Option(
        help="--engine rtl with KALEIDO_WAVES=1: first tick (clock cycle of the run, reset included) to dump "
             "(default 0)")] = None,
    waves_cycles: Annotated[int | None, typer.Option(
        help="--engine rtl with KALEIDO_WAVES=1: ticks to dump (default 10000)")] = None,
    waves_out: Annotated[Path, typer.Option(
        help="--engine rtl with KALEIDO_WAVES=1: FST file to write")] = Path("waves.fst"),
    checksum: Annotated[bool, flag(
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
    timeline: Annotated[Path | None, typer.Option(
        "--timeline", help="traces, model engine: write a Chrome/Perfetto trace-event timeline here (one track per "
                           "unit: array, vector, similarity, DRAM; Kaleido and dense; sim/report/timeline.py)")] = None,
    organisation: Annotated[str | None, typer.Option(
        "--organisation", help="array organisation, overriding the config's: lockstep (a tile's rows share one slot "
                               "sequence), compact (per-group compaction with a combine unit; needs the config's "
                               "psum_sram_kib > 0) or delta (compact's band-tiles carrying one output per token and "
                               "column; the same needs) (default: the config's; docs/architecture.md)")] = None,
    combine_timing: Annotated[str | None, typer.Option(
        "--combine-timing", help="compact and delta organisations, overriding the config's combine_timing: model "
                                 "(the design's combine unit) or rtl (the combine stage as kaleido_ccore / "
                                 "kaleido_dcore are built, with their row FIFO and holds: the README's as-built "
                                 "figures; docs/decisions.md D104, D116) (default: the config's)")] = None,
) -> None:
    """Cycle-simulate every op of a trace, dense and with Kaleido reuse; time a workload file
    (`kaleido workload`) on P devices; or one dense GEMM (--gemm)."""
    if (trace is None) == (gemm is None):
        fail("give exactly one of TRACE or --gemm M,K,N")
    check_out(json_out)
    check_out(timeline)
    if timeline is not None:
        if not timeline.parent.is_dir():
            fail(f"--timeline: folder {timeline.parent} does not exist")
        if gemm is not None or engine != "model":
            fail("--timeline applies to traces on the model engine")
    if trace is not None and not trace.is_file():  # before numpy and the models load (issue 13: under 1 s)
        if gemm is None and (dataflow is not None or timing is not None):  # the option's error names the real cause
            fail(GEMM_ONLY)
        fail(f"trace not found: {trace}")
    from algo.workloads.format import is_workload_file

    if trace is not None and is_workload_file(trace):
        if (gemm or dataflow or timing or no_dispatcher or checksum or engine != "model" or theta_index or tech
                or workers != 1 or scheduler or timeline or organisation or combine_timing):
            fail("a workload takes --devices, --config, --reuse, --seed and --json only")
        from sim.cli.workload import simulate_workload_cmd

        simulate_workload_cmd(trace, devices, config, json_out, reuse, seed)
        return
    if combine_timing is not None and (trace is None or engine != "model"):
        fail("--combine-timing applies to traces on --engine model (--engine rtl runs the cores themselves)")
    if organisation is not None and (trace is None or engine != "model"):
        fail("--organisation applies to traces on --engine model (--gemm times a dense GEMM; --engine rtl runs the "
             "config's own organisation: give a delta or compact config, e.g. hw/presets/examples/tiny-8x8-delta.toml)")
    if devices is not None or reuse is not None or seed:
        fail("--devices, --reuse and --seed apply to workload files (`kaleido workload`), not traces")
    if gemm is not None:
        if no_dispatcher:
            fail("--no-dispatcher applies to traces only (--gemm times a dense GEMM, reuse off)")
        _simulate_gemm(gemm, config, dataflow or "os", timing or "native", json_out)
        return
    if dataflow is not None or timing is not None:
        fail(GEMM_ONLY)
    if engine not in ("model", "rtl"):
        fail(f"--engine must be model or rtl, got {engine!r}")
    if engine == "rtl":
        if workers != 1 or scheduler:
            fail("--workers and --scheduler apply to --engine model only")
        _simulate_rtl(trace, config, json_out, no_dispatcher or theta_index != 0 or tech is not None,
                      (waves_from, waves_cycles, waves_out))
        return
    if waves_from is not None or waves_cycles is not None:
        fail("--waves-from and --waves-cycles apply to --engine rtl only")
    if workers < 1:
        fail(f"--workers must be >= 1, got {workers}")
    if checksum and (workers != 1 or scheduler):
        fail("--checksum runs in this process: drop --workers/--scheduler")
    from algo.trace import load_trace
    from hw.config import load_config, with_combine_timing, with_organisation

    try:
        cfg = with_combine_timing(with_organisation(load_config(config), organisation), combine_timing)
        if no_dispatcher and cfg.organisation != "lockstep":
            fail(f"--no-dispatcher applies to the lockstep organisation only: {cfg.organisation} has no matcher or "
                 "scheduler to switch off (its queues form the band-tiles); use --organisation lockstep")
        tr, kind = _trace_meta(trace)
        if workers != 1 or scheduler is not None or kind == "decisions" or (kind == "exact" and not checksum):
            # one (step, block) at a time (sim.sweep.video; exact pv ops regenerate P in frame chunks), in this
            # process with --workers 1: memory bounded by one block's operands, not the trace's
            check_theta_kind(kind, trace, theta_index)
            from sim.sweep.engine import EngineError  # numba, dask: only once the inputs are known good
            from sim.sweep.video import simulate_trace_file

            with progress_callback("simulate (blocks)") as cb:
                try:
                    res = simulate_trace_file(trace, cfg, workers=0 if workers == 1 and not scheduler else workers,
                                              scheduler=scheduler, theta_index=theta_index, tech=tech,
                                              dispatcher=not no_dispatcher, progress=cb)
                except EngineError as err:
                    fail(str(err))
        else:
            # pv's P regenerated in frame chunks (algo.reuse.chunked); the cycle model reads no attention states
            tr = load_trace(trace, derive_p=False, states=False)
            check_theta_index(tr, trace, theta_index)
            from sim.engines.model import simulate_trace  # numba: only once the inputs are known good

            with progress_callback("simulate", len(tr.ops)) as cb:
                res = simulate_trace(tr, cfg, progress=cb, trace_path=str(trace), theta_index=theta_index,
                                     tech=tech, dispatcher=not no_dispatcher)
        if checksum:
            from sim.engines.rtl import golden_checksums

            total_sum, per_op_sums = golden_checksums(tr)
            per_op = [r | {"outputs_sha256": h} for r, h in zip(res["per_op"], per_op_sums, strict=True)]
            res = res | {"per_op": per_op, "outputs_sha256": total_sum}  # a new object: res itself stays as made
    except known_errors() as err:
        fail(str(err))
    from sim.results import state_notes

    if unsized := state_notes(res, tr, cfg):  # D70: kept in the results, so explain and reports can show them
        res = res | {"notes": unsized}
    if json_out is not None:
        write_json_atomic(json_out, res)
    if timeline is not None:
        from sim.report.timeline import timeline_events

        write_json_atomic(timeline, timeline_events(res))
    rf = res["reuse_fraction"]
    out = stdout_console()
    out.print(f"[bold]{trace}[/] on {cfg.name} ({cfg.organisation}){' (dispatcher off)' if no_dispatcher else ''}: "
              f"{res['cycles']:,} "
              f"array cycles vs {res['dense_cycles']:,} dense -> [bold]{res['speedup']:.2f}x[/]; PE utilization "
              f"{res['pe_utilization']:.1%} (dense {res['dense_pe_utilization']:.1%}); decisions C/P/R "
              f"{rf['compute']:.1%}/{rf['partial']:.1%}/{rf['reuse']:.1%}")
    st = res["stall_cycles"]
    # a banded organisation's drain stall is summed over its bands (sim.timing.compact.band_cycles), so it may
    # exceed the array cycles it lies inside
    drain = (f"drain {st['drain']:,} (in the array cycles)" if cfg.organisation == "lockstep" else
             f"drain {st['drain']:,} band-cycles (summed over the {cfg.compact_bands} bands, inside the array cycles)")
    out.print(f"with DRAM, vector and similarity units: {res['total_cycles']:,} cycles vs "
              f"{res['dense_total_cycles']:,} dense -> {res['total_speedup']:.2f}x; stalls: {drain}, "
              f"DRAM {st['dram']:,}, vector {st['vector']:,}, similarity {st['similarity']:,}"
              + (f", combine unit {st['combine']:,}" if st.get("combine") else ""))
    if (ds := res.get("dispatcher_stats")) is not None and no_dispatcher:
        out.print(f"dispatcher off (raster order): {ds['tiles']:,} tiles, {ds['skipped_groups']:,} skipped groups")
    elif ds is not None:  # sim.cost.tiling.dispatcher_stats
        out.print(f"dispatcher: {ds['tiles']:,} tiles, {ds['clusters']:,} clusters, {ds['rows_moved']:,} rows moved, "
                  f"{ds['pair_slots']:,} paired slots, {ds['skipped_groups']:,} skipped groups")
    if "energy_pj" in res:
        bound = (f"; optimistic: {len(unsized)} fused score op(s) count reuse whose state {cfg.organisation} does not "
                 "hold (note below, D70)") if unsized else ""
        out.print(_energy_line(res) + bound)
    from collections import Counter

    from sim.report.explain import explain_rows
    from sim.results import result_notes

    losses = Counter(r["loses_on"][0] for r in explain_rows(res)) if res.get("per_op") and "config" in res else None
    for note in result_notes(res, tr, cfg, losses):
        out.print(f"note: {note}")
    if checksum:
        out.print(f"outputs sha256 {res['outputs_sha256'][:16]}... (full hash in --json: outputs_sha256)")
    if json_out is not None:
        out.print(f"results: {json_out}")
    if timeline is not None:
        out.print(f"timeline: {timeline} (open in ui.perfetto.dev or chrome://tracing)")


def _trace_meta(path: Path):
    """``(trace, kind)``: the trace at ``path`` with its ops' metadata only (no arrays) and its kind."""
    from algo.trace import TraceReader

    with TraceReader(path) as rd:
        return rd.trace(rd.shape_ops()), rd.kind


def _energy_line(res: dict) -> str:
    """``energy (TECH table): Kaleido X uJ vs dense Y uJ -> saving/more`` (sim.cost.energy totals)."""
    e, de = res["energy_pj"], res["dense_energy_pj"]
    tech = res.get("energy_model", {}).get("technology", "?")
    if e <= de:
        verdict = f"saving {1 - e / de:.1%} ({de / e:.2f}x less)" if e else "no energy"
    else:
        verdict = f"{e / de:.2f}x the dense energy (more)"
    return f"energy ({tech} table): Kaleido {e / 1e6:,.2f} uJ vs dense {de / 1e6:,.2f} uJ -> {verdict}"


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

    check_out(json_out)
    if quality_steps < 0:
        fail(f"--quality-steps must be >= 0, got {quality_steps}")
    try:
        cfg = load_config(config)
        tr = load_trace(trace, derive_p=False)  # pv's P regenerated one frame of one head at a time (D66)
        check_theta_index(tr, trace, theta_index)
        # numba, amaranth: only once the inputs are known good
        from sim.baselines import (
            BASELINES,
            attach_baselines,
            measure_quality,
            parse_params,
            run_baselines,
        )
        from sim.engines.model import simulate_trace

        names = tuple(v.strip() for v in only.split(",") if v.strip()) or BASELINES
        params = parse_params(param)
        with progress_callback("simulate", len(tr.ops)) as cb:
            res = simulate_trace(tr, cfg, progress=cb, trace_path=str(trace), theta_index=theta_index, tech=tech)
        with progress_callback("baselines", len(names)) as cb:
            attach_baselines(res, run_baselines(tr, cfg, res, names, params, tech, theta_index, cb))
        if quality_steps:
            with progress_callback("quality") as cb:
                measure_quality(res, tr, quality_steps, params=params, progress=cb)
    except known_errors() as err:
        fail(str(err))
    if json_out is not None:
        from algo.quality import to_jsonable

        write_json_atomic(json_out, to_jsonable(res))
    from sim.report.tables import EXACT_PSNR, EXACT_PSNR_NOTE

    exact = []

    def psnr(v: float) -> str:  # an infinite PSNR is an exact design (the report's footnote)
        if v == float("inf"):
            exact.append(v)
            return EXACT_PSNR
        return db(v)

    t = Table("design", "cycles", "time (us)", "energy (uJ)", "Kaleido speedup", "Kaleido energy saving",
              "latent PSNR (dB)")
    q = res.get("quality", {})
    t.add_row("Kaleido", f"{res['cycles']:,}", f"{res['time_us']:,.2f}", f"{res['energy_pj'] / 1e6:,.2f}", "1.00x",
              "1.00x", psnr(q["latent_psnr_db"]) if q else "-")
    for name, e in res["baselines"].items():
        if "skipped" in e:
            t.add_row(name, "skipped: " + e["skipped"], "", "", "", "", "")
            continue
        bq = e.get("quality", {})
        t.add_row(name, f"{e['cycles']:,.0f}", f"{e['time_us']:,.2f}", f"{e['energy_pj'] / 1e6:,.2f}",
                  f"{e['kaleido_speedup']:.3g}x", f"{e['kaleido_energy_saving']:.3g}x",
                  psnr(bq["latent_psnr_db"]) if bq else "-")
    out = stdout_console()
    out.print(f"[bold]{trace}[/] on {cfg.name}, energy table {res['energy_model']['technology']}; weights: "
              f"{tr.weights}")
    out.print(t)
    if exact:
        out.print(EXACT_PSNR_NOTE)
    if json_out is not None:
        out.print(f"results: {json_out}")


def sweep(
    sweep_file: Annotated[Path, typer.Argument(help="sweep file (TOML): the trace or workload and the axes (README, \"Sweeps\")")],
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

    check_out(out, folder=True)
    if workers is not None and workers < 0:
        fail(f"--workers must be >= 0, got {workers}")
    try:
        sw = load_sweep(sweep_file)
    except SweepError as err:
        fail(str(err))
    from sim.sweep.spec import unbuilt_notes

    for note in unbuilt_notes(sw):
        typer.echo(f"note: {note}", err=True)
    with progress() as prog:
        task = prog.add_task(f"sweep {sw.name}", total=len(sw.points), label="")

        def cb(done: int, failed: int, total: int, label: str) -> None:
            prog.update(task, completed=done, total=total,
                        label=f"done {done - failed}, failed {failed}, remaining {total - done}")

        try:
            res = run_sweep(sw, out, workers=workers, scheduler=scheduler, progress=cb)
        except EngineError as err:
            fail(str(err))
        except KeyboardInterrupt:
            typer.echo(f"interrupted: finished points are kept in {out / 'points'}; run the same command again "
                       "to resume", err=True)
            sys.exit(130)
    typer.echo(f"{len(sw.points)} points: {len(res.ran)} run now, {len(res.skipped)} finished before, "
               f"{len(res.failed)} failed")
    for p in res.files:
        typer.echo(f"wrote {p}")
