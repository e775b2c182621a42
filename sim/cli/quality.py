"""``kaleido quality`` and ``kaleido quality-sweep``: exact-vs-reuse sampling runs (`algo.quality`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sim.cli.common import (
    check_model,
    check_out,
    db,
    fail,
    known_errors,
    parse_grid,
    parse_theta_pair,
    progress_callback,
    stdout_console,
    write_json_atomic,
)


def quality(
    model: Annotated[str, typer.Option(help="model name, e.g. wan2.1-t2v-1.3b")] = "wan2.1-t2v-1.3b",
    size: Annotated[str, typer.Option(help="'tiny', 'small' (the trained model's config, with --weights) or "
                                           "'full'")] = "tiny",
    steps: Annotated[int, typer.Option(help="Euler steps run: the last N of the schedule")] = 10,
    num_inference_steps: Annotated[int, typer.Option(help="length of the flow-matching schedule")] = 50,
    theta: Annotated[str, typer.Option(help="thresholds theta1,theta2 (int8 units per channel), or rules as "
                                            "capture: '4,12; ffn1=2,8; qk@47-49=8,24'")] = "4,12",
    ops: Annotated[str, typer.Option(help="ops with reuse: qkv, qk, pv, o_proj, ffn1, ffn2 (+ cross_q, cross_qk, "
                                          "cross_pv, cross_o), or all/self/none")] = "qkv,qk,pv,o_proj,ffn1,ffn2",
    seed: Annotated[int, typer.Option(help="seed of weights, text embeddings and noise")] = 0,
    grid: Annotated[str, typer.Option(help="token grid F,H,W (default: the size's default)")] = "",
    b_msb: Annotated[int, typer.Option(help="reused high bits of PARTIAL (1..7)")] = 4,
    json_out: Annotated[Path | None, typer.Option("--json", help="write the full result JSON here")] = None,
    vae: Annotated[Path | None, typer.Option("--vae", help="local Wan VAE checkpoint folder (decoded frames)")] = None,
    weights: Annotated[Path | None, typer.Option(help="checkpoint (.safetensors or diffusers folder; default: seeded "
                                                      "weights), e.g. the trained --size small model named above")] = None,
) -> None:
    """Sample with and without reuse (int8 fake-quant both) and report per-op SNR, PSNR/SSIM, reuse.

    The trained --size small checkpoint: algo/train/assets/wan-small/diffusion_pytorch_model.safetensors."""
    from algo.reuse.thresholds import parse_theta
    from algo.trace import OP_TYPES

    try:
        sched = parse_theta(theta, OP_TYPES, num_inference_steps)
    except ValueError as err:
        fail(f"--theta: {err}")
    th = sched if sched.rules else sched.default
    check_out(json_out)
    check_model(model)
    g = parse_grid(grid)
    if vae is not None and not vae.exists():
        fail(f"VAE checkpoint not found: {vae}")
    from algo.quality import run_quality, to_jsonable, weights_label

    try:
        with progress_callback("quality") as cb:
            res = run_quality(model=model, size=size, steps=steps, theta=th, ops=ops, seed=seed, grid=g,
                              num_inference_steps=num_inference_steps, b_msb=b_msb, vae=vae, progress=cb,
                              weights=weights)
    except known_errors() as err:
        fail(str(err))
    if json_out is not None:
        write_json_atomic(json_out, to_jsonable(res))
    out = stdout_console()
    out.print(f"[bold]{res['model']}[/] ({res['size']}), {weights_label(res['weights'], res['seed'])}; "
              f"{res['steps']} Euler steps (last {res['steps']} of {res['num_inference_steps']}), grid "
              f"{'x'.join(map(str, res['grid']))}; theta {theta}; b_msb {res['b_msb']}")
    t = Table("op", "reuse", "C/P/R % (elements)", "local SNR dB", "SNR vs exact dB")
    for op, v in res["per_op"].items():
        f = v["fractions"]
        t.add_row(op, "on" if v["reuse_enabled"] else "off",
                  f"{100 * f['compute']:.1f}/{100 * f['partial']:.1f}/{100 * f['reuse']:.1f}" if f else "-",
                  db(v["local_snr_db"]) if v["reuse_enabled"] else "-", db(v["snr_db"]))
    out.print(t)
    mf, lt = res["mac_fractions"], res["latents"]
    out.print(f"MACs C/P/R {mf['compute']:.1%}/{mf['partial']:.1%}/{mf['reuse']:.1%}, work saved "
              f"{res['mac_saved_fraction']:.1%}")
    out.print(f"final latents vs exact: PSNR {db(lt['psnr_db'])} dB, SSIM {lt['ssim']:.4f} "
              f"(data range {lt['data_range']:.3f}){' - bit-identical' if lt['bit_identical'] else ''}; "
              f"model-output (v) SNR {db(res['velocity_snr_db'])} dB; denoising-update SNR "
              f"{db(res['update_snr_db'])} dB")
    if "int8_vs_float" in res:
        iv = res["int8_vs_float"]
        out.print(f"context, int8 without reuse vs fp32: latent PSNR {db(iv['psnr_db'])} dB, "
                  f"model-output SNR {db(iv['velocity_snr_db'])} dB")
    fr = res["frames"]
    out.print("frames: " + (fr if isinstance(fr, str) else
                            f"decoded vs exact PSNR {db(fr['psnr_db'])} dB, SSIM {fr['ssim']:.4f} "
                            f"({fr.get('decoder') or 'VAE ' + str(fr.get('vae'))})"))
    lp = res["lpips"]
    out.print(f"lpips: {lp if isinstance(lp, str) else f'{lp:.4f}'}")
    if json_out is not None:
        out.print(f"results: {json_out}")


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
    pairs = [parse_theta_pair(p, "--thetas entry") for p in thetas.split(";") if p.strip()]
    if not pairs:
        fail("--thetas must list at least one pair 't1,t2'")
    g = parse_grid(grid)
    check_out(out, folder=True)
    check_model(model)
    from algo.quality import sweep_quality, weights_label

    try:
        with progress_callback("quality sweep") as cb:
            res = sweep_quality(thetas=pairs, model=model, size=size, steps=steps, ops=ops, seed=seed,
                                grid=g, num_inference_steps=num_inference_steps, b_msb=b_msb, progress=cb,
                                weights=weights)
    except known_errors() as err:
        fail(str(err))
    from sim.report.quality import write_quality_sweep

    files = write_quality_sweep(res, out)
    con = stdout_console()
    c = res["config"]
    con.print(f"[bold]{c['model']}[/] ({c['size']}), {weights_label(c['weights'], c['seed'])}; {c['steps']} steps; grid "
              f"{'x'.join(map(str, c['grid']))}; reference: int8 without reuse")
    frames = bool(res["points"]) and "frame_psnr_db" in res["points"][0]
    t = Table("theta", "MACs C/P/R %", "saved %", "PSNR dB", "SSIM", "v SNR dB",
              *(("frame PSNR dB", "frame SSIM") if frames else ()), "Pareto")
    for i, p in enumerate(res["points"]):
        t.add_row(f"{p['theta1']:g},{p['theta2']:g}", f"{100 * p['compute']:.1f}/{100 * p['partial']:.1f}/"
                  f"{100 * p['reuse']:.1f}",
                  f"{p['mac_saved']:.1%}", db(p["latent_psnr_db"]), f"{p['latent_ssim']:.4f}",
                  db(p["velocity_snr_db"]),
                  *((db(p["frame_psnr_db"]), f"{p['frame_ssim']:.4f}") if frames else ()),
                  "*" if i in res["pareto"] else "")
    con.print(t)
    con.print(f"lpips: {res['lpips']}; frames: {res['frames'] if isinstance(res['frames'], str) else 'decoded'}")
    for f in files:
        typer.echo(f"wrote {f}")
