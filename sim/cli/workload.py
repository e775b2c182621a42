"""``kaleido workload ...`` (generators) and the workload branches of ``kaleido inspect`` / ``simulate``.

Bad input ends with one ``error: ...`` line and exit code 2; outputs are written atomically.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Annotated

import typer

#: An on/off option without a value in --help (as `sim.cli.common.flag`).
_flag = functools.partial(typer.Option, metavar="")


def _c():
    """`sim.cli.common`: the error contract and helpers every command shares."""
    from sim.cli import common

    return common

workload_app = typer.Typer(help="Write workload files from GPU-side schedulers (DDiT, DiTango, Causal-RoPE SP) for `kaleido simulate`.",
                           no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)


def _errors() -> tuple[type[Exception], ...]:
    from algo.workloads.format import WorkloadError
    from sim.baselines.a100 import A100Error

    return (*_c().known_errors(), WorkloadError, A100Error)


@workload_app.command("ddit")
def ddit(
    out: Annotated[Path, typer.Option("--out", "-o", help="workload file to write (.npz)")],
    model: Annotated[str, typer.Option(help="Wan model at its published size: wan2.1-t2v-1.3b or wan2.1-t2v-14b")]
    = "wan2.1-t2v-1.3b",
    resolution: Annotated[str, typer.Option(help="480p, 720p or WxHxF (pixels, pixels, video frames)")] = "480p",
    steps: Annotated[int, typer.Option(help="denoising steps (Wan2.1 default 50)")] = 50,
    rho: Annotated[float, typer.Option(help="percentile over patches, as a fraction (DDiT rule: 0.4)")] = 0.4,
    tau: Annotated[float, typer.Option(help="threshold on that percentile (DDiT rule: 0.001)")] = 0.001,
    warmup: Annotated[int, typer.Option(help="first steps at patch p (>= 3: Δ³z needs four latents)")] = 3,
    schedule: Annotated[str | None, typer.Option(
        help="explicit patch multiple per step, comma-separated (1, 2 or 4), instead of the rule")] = None,
    trajectory_size: Annotated[str, typer.Option(
        help="model size of the sampling run the rule reads: tiny (seeded, untrained: see the caveat) or full")]
    = "tiny",
    trajectory_frames: Annotated[int, typer.Option(
        help="latent frames of that run (its height and width are the resolution's; default 3)")] = 3,
    weights: Annotated[str | None, typer.Option(
        help="checkpoint for the sampling run (as `kaleido capture --weights`; default: seeded)")] = None,
    seed: Annotated[int, typer.Option(help="seed of the sampling run (weights, noise, text)")] = 0,
    no_cfg: Annotated[bool, _flag("--no-cfg", help="one forward per step (default: two, "
                                                         "classifier-free guidance as Wan2.1 samples)")] = False,
) -> None:
    """DDiT dynamic patch scheduling: per step a patch size from {p, 2p, 4p} by the Δ³z rule on a real
    sampling run, and the ops at that step's token count (docs/workloads.md)."""
    from algo.workloads.ddit import generate_ddit
    from algo.workloads.format import save_workload

    _cli = _c()
    _cli.check_out(out)
    sched = None if schedule is None else _cli.parse_ints(schedule, "--schedule")
    try:
        with _cli.progress_callback("sampling run", steps) as cb:
            wl = generate_ddit(model, resolution, steps, rho=rho, tau=tau, warmup=warmup, schedule=sched,
                               trajectory_size=trajectory_size, trajectory_frames=trajectory_frames,
                               trajectory_weights=weights, seed=seed, cfg_branches=1 if no_cfg else 2, progress=cb)
        save_workload(wl, out)
    except _errors() as err:
        _cli.fail(str(err))
    counts = {m: sum(s["patch_multiple"] == m for s in wl.steps) for m in wl.params["patch_multiples"]}
    typer.echo(f"DDiT workload {out}: {wl.model} {wl.resolution}, {steps} steps; patch p/2p/4p steps: "
               + "/".join(str(counts.get(m, 0)) for m in (1, 2, 4)) + f"; {len(wl.ops)} op records")
    if "CAVEAT" in wl.notes:
        typer.echo("note: " + wl.notes.split("CAVEAT: ")[1])


def inspect_workload(path: Path, as_json: bool) -> None:
    """``kaleido inspect W.npz`` for a workload: every op with its step, rank, block, repeat and shape."""
    from algo.workloads.format import load_workload

    _cli = _c()
    try:
        wl = load_workload(path)
    except _errors() as err:
        _cli.fail(str(err))

    def op_row(o):
        return {"step": o.step, "name": o.name, "rank": o.rank, "block": o.block, "repeat": o.repeat,
                "batch": o.batch, "M": o.M, "K": o.K, "N": o.N, "grid": None if o.grid is None else list(o.grid),
                "groups": len(o.groups), "phase": o.phase}

    summary = {"format_version": wl.version, "kind": "workload", "generator": wl.generator, "model": wl.model,
               "size": wl.size, "resolution": wl.resolution, "grid": list(wl.grid), "devices": wl.devices,
               "b_msb": wl.b_msb, "params": wl.params, "sources": wl.sources, "notes": wl.notes, "steps": wl.steps,
               "ops": [op_row(o) for o in wl.ops],
               "comms": [c.meta() for c in wl.comms],
               "reference": None if wl.reference is None else {"label": wl.reference["label"],
                                                               "ops": len(wl.reference["ops"])},
               "macs": sum(o.macs * o.repeat for o in wl.ops),
               "reference_macs": None if wl.reference is None else sum(o.macs * o.repeat for o in wl.reference["ops"])}
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return
    from rich.table import Table

    out = _cli.stdout_console()
    out.print(f"[bold]{path}[/]: workload v{wl.version} ({wl.generator}), model {wl.model}, {wl.resolution}, grid "
              f"{'x'.join(map(str, wl.grid))}, {wl.devices} device(s), {len(wl.ops)} op records")
    out.print(f"notes: {wl.notes}")
    if wl.generator == "ddit":
        out.print("schedule (patch multiple per step): " + "".join(str(s["patch_multiple"]) for s in wl.steps))
    t = Table("step", "op", "rank", "block", "repeat", "batch", "M", "K", "N", "grid")
    for o in wl.ops:
        t.add_row(str(o.step), o.name, "all" if o.rank is None else str(o.rank), "-" if o.block is None else str(o.block),
                  str(o.repeat), str(o.batch), str(o.M), str(o.K), str(o.N),
                  "-" if o.grid is None else "x".join(map(str, o.grid)))
    out.print(t)
    if summary["reference_macs"]:
        out.print(f"MACs: {summary['macs']:.4g} vs {summary['reference_macs']:.4g} in the reference "
                  f"({wl.reference['label']}): {summary['reference_macs'] / summary['macs']:.2f}x fewer")


def _parse_reuse(text: str | None):
    """``"r,p"`` or ``"r,p,HxW,q"`` -> `algo.workloads.synth.SynthField` (region and persistence default 8x8, 0.9)."""
    from algo.workloads.synth import SynthError, SynthField, parse_region

    _cli = _c()
    if text is None:
        return None
    parts = [v.strip() for v in text.split(",")]
    try:
        if len(parts) not in (2, 4):
            raise ValueError
        kw = {"reuse": float(parts[0]), "partial": float(parts[1])}
        if len(parts) == 4:
            kw.update(region=parse_region(parts[2]), persist=float(parts[3]))
        fld = SynthField(**kw)
        fld.check()
    except ValueError as err:
        msg = str(err) if isinstance(err, SynthError) else "not numbers"
        _cli.fail(f"--reuse must be 'r,p' or 'r,p,HxW,q' (REUSE and PARTIAL shares, region, persistence; "
                   f"algo.workloads.synth), got {text!r}: {msg}")
    return fld


def simulate_workload_cmd(path: Path, devices: str | None, config: str, json_out: Path | None, reuse: str | None,
                          seed: int) -> None:
    """``kaleido simulate W.npz``: time a workload on ``--devices PRESET[:P]`` (default: ``--config``)."""
    from algo.workloads.format import load_workload
    from sim.workload.device import make_device, parse_devices
    from sim.workload.simulate import simulate_workload

    _cli = _c()
    fractions = _parse_reuse(reuse)
    try:
        preset, p = parse_devices(devices) if devices is not None else (config, None)
        wl = load_workload(path)
        if fractions is not None and not any(o.grid is not None and o.groups for o in wl.ops):
            _cli.fail(f"--reuse: the {wl.generator} workload's ops carry no token grid (contiguous sequence shards "
                       "per rank), so Kaleido's reuse cannot apply to it yet; simulate it without --reuse")
        dev = make_device(preset, fractions, seed, wl.b_msb)
        n = len(wl.ops) + (len(wl.reference["ops"]) if wl.reference else 0)
        with _cli.progress_callback("simulate workload", n) as cb:
            res = simulate_workload(wl, dev, p, workload_path=str(path), progress=cb)
    except _errors() as err:
        _cli.fail(str(err))
    if json_out is not None:
        _cli.write_json_atomic(json_out, res)
    out = _cli.stdout_console()
    d = res["device"]
    out.print(f"[bold]{path}[/] ({wl.generator}, {wl.model} {wl.resolution}) on {d['count']} x {d['name']}: "
              f"{res['total_time_us'] / 1e6:.4g} s")
    if res["speedup"] is not None:
        out.print(f"reference ({wl.reference['label']}): {res['reference_dense_total_time_us'] / 1e6:.4g} s -> "
                  f"speedup {res['speedup']:.2f}x (scheduler alone {res['dense_speedup']:.2f}x"
                  + (f", reuse on top {res['reuse_speedup']:.2f}x" if fractions else "") + ")")
    if res["per_step"] and "comm_us" in res["per_step"][0]:
        comm = sum(r["comm_us"] for r in res["per_step"])
        exp = sum(r["exposed_comm_us"] for r in res["per_step"])
        out.print(f"communication {comm / 1e6:.4g} s, exposed {exp / 1e6:.4g} s ({res['network']['topology']}, "
                  f"{res['network']['bandwidth_gbps']:g} GB/s per device)")
    if wl.generator == "causal-sp":
        from algo.workloads.causal_sp import time_to_first_frame_us

        res["time_to_first_frame_us"] = time_to_first_frame_us(res)
        if json_out is not None:
            _cli.write_json_atomic(json_out, res)
        out.print(f"time to first frame (block 0's 4 denoising forwards): {res['time_to_first_frame_us'] / 1e6:.4g} s")
    out.print(f"{res['unique_ops_timed']} distinct op shapes timed")
    if json_out is not None:
        out.print(f"results: {json_out}")


@workload_app.command("ditango")
def ditango_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="workload file to write (.npz)")],
    model: Annotated[str, typer.Option(help="Wan model at its published size (DiTango's paper: wan2.1-t2v-14b)")]
    = "wan2.1-t2v-14b",
    resolution: Annotated[str, typer.Option(help="480p, 720p or WxHxF (pixels, pixels, video frames)")] = "720p",
    devices: Annotated[int, typer.Option(help="ranks P (sequence split P ways)")] = 8,
    steps: Annotated[int, typer.Option(help="denoising steps (Wan2.1 default 50; >= 10: warm-up 5 + cool-down 5, "
                                            "the reference code's defaults)")] = 50,
    no_cfg: Annotated[bool, _flag("--no-cfg", help="one branch per step: DiTango plans nothing, every step full "
                                                   "(default: two, classifier-free guidance as Wan2.1 samples)")] = False,
    kappa: Annotated[str, typer.Option(help="'uniform' (every group the same curvature: a stand-in) or an exact "
                                            "capture (kaleido capture) holding the anchor steps, whose attention "
                                            "outputs and Q/K give the curvature and LSE importance")] = "uniform",
    ulysses: Annotated[int, typer.Option(help="Ulysses ranks U per ring group (all-to-all heads inside a group of U, "
                                              "ring over P/U groups; the reference's 'up', default 1: pure ring)")]
    = 1,
) -> None:
    """DiTango context parallelism as thu-pacman/ChituDiffusion runs it: K/V partitions on a ring (optionally
    Ulysses inside groups), full steps at warm-up, anchors and cool-down, cached partition states
    elsewhere by curvature intervals (docs/workloads.md, docs/decisions.md D48)."""
    from algo.workloads.ditango import generate_ditango
    from algo.workloads.format import save_workload

    _cli = _c()
    _cli.check_out(out)
    try:
        wl = generate_ditango(model, resolution, devices, steps, cfg_branches=1 if no_cfg else 2, kappa=kappa,
                              ulysses=ulysses)
        save_workload(wl, out)
    except (*_errors(), ValueError) as err:
        _cli.fail(str(err))
    full = sum(s["full"] for s in wl.steps)
    typer.echo(f"DiTango workload {out}: {wl.model} {wl.resolution} on {devices} ranks ({wl.params['groups']} ring "
               f"groups), {steps} steps, {full} full, {wl.params['partition_steps_computed']:.1%} of partition-steps "
               f"computed; {len(wl.ops)} op records, {len(wl.comms)} comm records")


@workload_app.command("causal-sp")
def causal_sp_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="workload file to write (.npz)")],
    devices: Annotated[int, typer.Option(help="sequence-parallel ranks P (Self-Forcing's paper: 4 to 8)")] = 8,
    model: Annotated[str, typer.Option(help="the Self-Forcing base model (Wan2.1-T2V-1.3B)")] = "wan2.1-t2v-1.3b",
    resolution: Annotated[str, typer.Option(help="fixed by the reference: 832x480x81 (480p, 81 frames)")] = "480p",
) -> None:
    """Causal-RoPE sequence parallelism (Self-Forcing): 7 blocks x (4 denoising + 1 KV-rewrite)
    forwards over a growing KV cache, one fused QKV all-to-all per attention (docs/workloads.md)."""
    from algo.workloads.causal_sp import generate_causal_sp
    from algo.workloads.format import save_workload

    _cli = _c()
    _cli.check_out(out)
    if resolution not in ("480p", "832x480x81"):
        _cli.fail(f"--resolution: Self-Forcing generates 832x480x81 (480p) only, got {resolution!r}")
    try:
        wl = generate_causal_sp(devices, model)
        save_workload(wl, out)
    except _errors() as err:
        _cli.fail(str(err))
    typer.echo(f"Causal-RoPE SP workload {out}: {wl.model} on {devices} ranks, {len(wl.steps)} forwards, heads per "
               f"rank {wl.params['heads_per_rank']}")
