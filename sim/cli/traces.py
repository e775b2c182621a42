"""``kaleido capture``, ``kaleido synth`` and ``kaleido inspect``: write a trace from a model or a
synthetic decision field, summarise a trace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sim.cli.common import (
    check_model,
    check_out,
    fail,
    flag,
    known_errors,
    parse_ints,
    progress_callback,
    size_label,
    stdout_console,
)


def capture(
    out: Annotated[Path, typer.Option("--out", "-o", help="trace file to write (.npz)")],
    model: Annotated[str, typer.Option(help="model: wan2.1-t2v-1.3b, wan2.1-t2v-14b, hunyuanvideo, "
                                            "cogvideox-5b")] = "wan2.1-t2v-1.3b",
    size: Annotated[str, typer.Option(help="'tiny' (reduced model for tests), 'small' (the trained model's config: "
                                           "give --weights the trained checkpoint named above)"
                                           " or 'full' (the published config) (default: tiny; full with "
                                           "--shape-only)")] = "",
    steps: Annotated[str, typer.Option(help="denoising step indices to capture, e.g. 0,40,47,49")] = "0,40,47,49",
    num_inference_steps: Annotated[int, typer.Option(help="length of the flow-matching schedule")] = 50,
    theta: Annotated[str, typer.Option(help="thresholds theta1,theta2 (mean |diff| per channel, int8 units); "
                                       "per op/step rules: '4,12; ffn1=2,8; qk@47-49=8,24'")] = "4,12",
    b_msb: Annotated[int, typer.Option(help="reused high bits of PARTIAL (1..7)")] = 4,
    blocks: Annotated[str, typer.Option(help="block indices to capture (default: all)")] = "",
    seed: Annotated[int, typer.Option(help="seed of weights, text embeddings and noise")] = 0,
    cross: Annotated[bool, flag("--cross/--no-cross", help="also record cross-attention ops")] = False,
    ops: Annotated[str, typer.Option(help="op types to record: qkv, qk, pv, o_proj, ffn1, ffn2 (+ cross_q, "
                                          "cross_qk, cross_pv, cross_o), or self/cross/all (default: self)")] = "",
    resolution: Annotated[str, typer.Option(help="video size 480p, 720p or WxHxF pixels x frames "
                                                 "(default: the size's small grid)")] = "",
    weights: Annotated[Path | None, typer.Option(help="local checkpoint: diffusers folder or .safetensors "
                                                      "file (default: seeded weights)")] = None,
    dtype: Annotated[str, typer.Option(help="fp32 or bf16")] = "fp32",
    decisions_only: Annotated[bool, flag(
        "--decisions-only", rich_help_panel="Decision and shape traces", help="write a decision trace (packed decisions per theta, no operands)")] = False,
    thetas: Annotated[str, typer.Option(rich_help_panel="Decision and shape traces", help="--decisions-only: threshold pairs, e.g. '2,6;4,12;8,24'")] = "4,12",
    shape_only: Annotated[bool, flag(
        "--shape-only", rich_help_panel="Decision and shape traces", help="write a shape trace: every op's (batch, M, K, N) and groups from the model's "
                             "config, no weights, no forward (any size, e.g. --size full --resolution 720p)")] = False,
    derive_blocks: Annotated[str, typer.Option(
        rich_help_panel="Decision and shape traces", help="full-model decision trace: output blocks 'all' or a list; the decisions of blocks not in "
             "--blocks are copied from the nearest captured (step, block) (docs/capture.md); "
             "needs --decisions-only")] = "",
    derive_steps: Annotated[str, typer.Option(
        rich_help_panel="Decision and shape traces", help="with --derive-blocks: output steps 'all' (default) or a list; --steps are the captured ones")] = "",
    stream_blocks: Annotated[bool, flag(
        "--stream-blocks", rich_help_panel="Memory", help="any model, seeded or --weights (safetensors): fill each block just before it "
                                "runs and free it after (one block in memory: wan2.1-t2v-14b, hunyuanvideo); "
                                "same trace as without")] = False,
    attn_states: Annotated[bool, flag(
        "--attn-states/--no-attn-states", rich_help_panel="Memory", help="store the attention output and log-sum-exp per head on "
                                               "self-attention pv ops (480p: ~201 MB per block and step)")] = True,
    dry_run: Annotated[bool, flag(
        "--dry-run", rich_help_panel="Memory", help="print the estimated file size and peak memory (from the shape plan, before any "
                          "weight is built) against this machine's free disk and memory, write nothing")] = False,
) -> None:
    """Run a diffusers video DiT on real-image latents with hooks and write an exact int8 trace
    (or, with --decisions-only, a decision trace for large sizes; with --shape-only, shapes only).
    Models: wan2.1-t2v-1.3b, wan2.1-t2v-14b, hunyuanvideo, cogvideox-5b (sizes tiny, full; wan2.1-t2v-1.3b also small, the size of the trained checkpoint the demo passes with `--weights`).

    The trained checkpoint:
    algo/train/assets/wan-small/diffusion_pytorch_model.safetensors."""
    check_out(out)
    check_model(model)
    from algo.capture import capture_to_file, write_shape_trace
    from algo.reuse.thresholds import parse_theta
    from algo.trace import OP_TYPES

    size = size or ("full" if shape_only else "tiny")  # a shape trace costs nothing at full size
    try:
        th = parse_theta(theta, OP_TYPES, num_inference_steps)
    except ValueError as err:
        fail(f"--theta: {err}")
    step_list = parse_ints(steps, "--steps")
    block_list = parse_ints(blocks, "--blocks") or None
    if shape_only and decisions_only:
        fail("--shape-only and --decisions-only exclude each other")
    if (derive_blocks or derive_steps) and not decisions_only:
        fail("--derive-blocks/--derive-steps write a decision trace: add --decisions-only")
    if dry_run and (shape_only or derive_blocks or derive_steps):
        fail("--dry-run estimates a capture (exact or --decisions-only), not --shape-only or --derive-blocks")
    try:
        if dry_run:
            from algo.capture import capture as run_capture
            from algo.capture.estimate import CaptureTooLarge, check_fits

            est = run_capture(model=model, size=size, steps=step_list, num_inference_steps=num_inference_steps,
                              seed=seed, theta=th, b_msb=b_msb, blocks=block_list, include_cross=cross,
                              ops=ops or None, resolution=resolution or None, weights=weights, dtype=dtype,
                              thetas=thetas if decisions_only else None, stream_blocks=stream_blocks,
                              attn_states=attn_states, dry_run=True)
            typer.echo(f"estimate: {est.summary()}")
            try:
                check_fits(est, out)
                typer.echo(f"fits this machine; nothing written to {out} (--dry-run)")
            except CaptureTooLarge as err:
                typer.echo(f"does not fit: {err}")
            return
        if derive_blocks or derive_steps:
            from algo.models import num_blocks
            from algo.trace.derive import derive_trace

            with progress_callback("capture + derive") as cb:
                tr = derive_trace(
                    out, from_blocks=block_list or list(range(num_blocks(model, size))), from_steps=step_list,
                    thetas=thetas, model=model, size=size, derive_blocks=derive_blocks or "all",
                    derive_steps=derive_steps or "all", num_inference_steps=num_inference_steps, progress=cb,
                    seed=seed, b_msb=b_msb, ops=ops or None, include_cross=cross, resolution=resolution or None,
                    weights=weights, dtype=dtype, attn_states=attn_states)
            n_der = sum(o.derived_from is not None for o in tr.ops)
            typer.echo(f"wrote {out}: derived decision trace, {len(tr.ops)} ops ({n_der} derived), grid {tr.grid}, "
                       f"model {tr.model}, {size_label(tr.size)}")
            return
        if shape_only:
            with progress_callback("shape trace") as cb:
                tr = write_shape_trace(out, model, size, steps=step_list, num_inference_steps=num_inference_steps,
                                       blocks=block_list, ops=ops or None, include_cross=cross,
                                       resolution=resolution or None, theta=th, b_msb=b_msb, progress=cb)
            typer.echo(f"wrote {out}: shape trace, {len(tr.ops)} ops, grid {tr.grid} = {tr.tokens} tokens, "
                       f"model {tr.model}, {size_label(tr.size)}")
            return
        with progress_callback("capture") as cb:
            tr = capture_to_file(
                out, model=model, size=size, steps=step_list, num_inference_steps=num_inference_steps,
                seed=seed, theta=th, b_msb=b_msb, progress=cb, blocks=block_list, include_cross=cross,
                ops=ops or None, resolution=resolution or None, weights=weights, dtype=dtype,
                thetas=thetas if decisions_only else None, stream_blocks=stream_blocks, attn_states=attn_states,
            )
    except known_errors() as err:
        fail(str(err))
    kind = "decision" if decisions_only else "exact"
    typer.echo(f"wrote {out}: {kind} trace, {len(tr.ops)} ops, grid {tr.grid}, model {tr.model}, {size_label(tr.size)}, "
               f"weights: {tr.weights}")


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
    (algo/workloads/synth.py): regions of HxW positions share a code per channel group, drawn with
    (COMPUTE, PARTIAL, REUSE) = (1 - r - p, p, r) and kept from frame to frame with chance q.
    `kaleido simulate OUT` runs it like a captured decision trace."""
    from algo.workloads.synth import SynthError, SynthField, parse_region, synth_trace

    check_out(out)
    step_list = parse_ints(steps, "--steps")
    block_list = parse_ints(blocks, "--blocks") or None
    if not step_list:
        fail("--steps must name at least one step")
    if min(step_list) < 0 or len(set(step_list)) != len(step_list):
        fail(f"--steps must be distinct step indices >= 0, got {steps!r}")
    try:
        fld = SynthField(reuse, partial, parse_region(region), persist)
        fld.check()
    except SynthError as err:  # before the model registry (torch) is imported
        fail(str(err))
    try:
        with progress_callback("synth") as cb:
            tr = synth_trace(out, model, resolution, fld, blocks=block_list, steps=step_list, seed=seed, progress=cb)
    except (SynthError, *known_errors()) as err:
        fail(str(err))
    typer.echo(f"wrote {out}: synthetic decision trace, {len(tr.ops)} ops, grid {tr.grid} = {tr.tokens:,} tokens, "
               f"model {tr.model}; (C, P, R) = {tuple(round(v, 6) for v in fld.probabilities)}, region "
               f"{fld.region[0]}x{fld.region[1]}, persist {fld.persist:g}, seed {seed}")


def inspect(
    trace: Annotated[Path, typer.Argument(help="trace file")],
    as_json: Annotated[bool, flag("--json", help="print a JSON object instead of a table")] = False,
    theta_index: Annotated[int, typer.Option(help="decision traces: which stored theta pair (0-based)")] = 0,
) -> None:
    """Summarise a trace: format, model, weights, grid, every op's shape and decision fractions
    (per op, op type, channel-group kind, block and step) and histograms of the similarity Δ."""
    if not trace.is_file():  # before numpy and numba load (algo.reuse.stats reads P through the compiled kernels)
        fail(f"trace not found: {trace}")
    from algo.reuse.stats import trace_statistics
    from algo.trace import load_trace
    from algo.workloads.format import is_workload_file

    if is_workload_file(trace):  # a workload (`kaleido workload ...`), not a trace
        from sim.cli.workload import inspect_workload

        inspect_workload(trace, as_json)
        return
    try:
        tr = load_trace(trace, derive_p=False)  # pv's P regenerated one frame of one head at a time (D66)
        if tr.kind == "shapes":  # no operands, no decisions: shapes only
            stats = {"ops": [{"name": o.name, "block": o.block, "step": o.step, "batch": o.batch, "M": o.M,
                              "K": o.K, "N": o.N, "groups": len(o.groups), "theta": list(o.theta),
                              "reuse_fraction": None} for o in tr.ops],  # no decisions in a shape trace
                     "by_op_type": {}, "by_group_kind": {}, "by_step": {}, "by_block": {}, "total": None}
        else:
            stats = trace_statistics(tr, theta_index)
    except known_errors() as err:
        fail(str(err))
    for item, o in zip(stats["ops"], tr.ops, strict=True):  # attention output + log-sum-exp stored (pv ops)
        item["attn_states"] = o.attn_out is not None
    summary = {"format_version": tr.version, "kind": tr.kind, "model": tr.model, "size": tr.size, "weights": tr.weights,
               "grid": list(tr.grid), "b_msb": tr.b_msb, "steps": tr.steps, **stats}
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
        return

    def pct(f: dict | None) -> str:
        return "-" if f is None else f"{f['compute']:.0%}/{f['partial']:.0%}/{f['reuse']:.0%}"

    out = stdout_console()
    out.print(f"[bold]{trace}[/]: format v{tr.version} ({tr.kind}), model {tr.model}, {size_label(tr.size)}, grid "
              f"{'x'.join(map(str, tr.grid))} = {tr.tokens} tokens, b_msb {tr.b_msb}")
    out.print(f"weights: {tr.weights}")
    n_states = sum(o.attn_out is not None for o in tr.ops)
    if n_states:
        out.print(f"attention states (output and log-sum-exp per head): {n_states} pv ops")
    synthetic = '"synthetic"' in (tr.notes or "")  # `kaleido synth`: decisions drawn, no thresholds applied
    if synthetic:
        out.print("theta: none (decisions drawn by `kaleido synth`, not thresholded)")
    t = Table("op", "block", "step", "batch", "M", "K", "N", "groups", "theta", "C/P/R %")
    for o in stats["ops"]:
        t.add_row(o["name"], str(o["block"]), str(o["step"]), str(o["batch"]), str(o["M"]), str(o["K"]),
                  str(o["N"]), str(o["groups"]), "-" if synthetic else "{:g},{:g}".format(*o["theta"]),
                  pct(o["reuse_fraction"]))
    out.print(t)
    for key, title in (("by_op_type", "op type"), ("by_group_kind", "group kind"), ("by_step", "step"),
                       ("by_block", "block")):
        out.print(f"{title}: " + ", ".join(f"{k} {pct(v)}" for k, v in stats[key].items()))
    out.print(f"total C/P/R: {pct(stats['total'])}")
