"""``kaleido train``: train the small Wan DiT or evaluate a checkpoint (`algo.train`, docs/training.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from sim.cli.common import check_out, fail, known_errors, progress_callback, stdout_console, write_json_atomic


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
    except known_errors() as err:
        fail(str(err))
    if eval_ckpt is None:
        if out is None:
            fail("give --out DIR to train, or --eval CHECKPOINT to evaluate")
        if json_out is not None or samples is not None:
            fail("--json and --samples go with --eval")
        check_out(out, folder=True)
        n = steps or trainer.STEPS
        try:
            with progress_callback("train", n) as cb:
                log = trainer.train(out, steps=n, batch=batch or trainer.BATCH, seed=seed, lr=lr or trainer.LR,
                                    progress=cb)
        except known_errors() as err:
            fail(str(err))
        tail = log["loss"][-50:]
        typer.echo(f"trained {log['steps']} steps in {log['wall_s']:.0f} s (1 torch thread); last-50-step loss "
                   f"{sum(tail) / len(tail):.4f}; held-out loss at sigma 0.5: {log['heldout_sigma_0.5'][-1][1]:.4f}")
        for f in log["files"]:
            typer.echo(f"wrote {f}")
        return
    if out is not None or steps or batch or lr:
        fail("--eval evaluates a checkpoint: --out, --steps, --batch and --lr are for training")
    check_out(json_out)
    check_out(samples)
    if not eval_ckpt.exists():
        fail(f"checkpoint not found: {eval_ckpt}")
    try:
        with progress_callback("held-out loss") as cb:
            res = trainer.evaluate(eval_ckpt, seed=seed, progress=cb)
        written = [trainer.write_sample_grid(samples, eval_ckpt, seed=seed)] if samples is not None else []
    except known_errors() as err:
        fail(str(err))
    if json_out is not None:
        write_json_atomic(json_out, res)
    con = stdout_console()
    con.print(f"held-out flow-matching loss, {res['clips']} clips; trained: {res['weights']}")
    t = Table("sigma", "trained", "seeded", "seeded / trained")
    for s_, a, b, r in zip(res["sigma"], res["loss_trained"], res["loss_seeded"], res["ratio_seeded_over_trained"],
                           strict=True):
        t.add_row(f"{s_:g}", f"{a:.4f}", f"{b:.4f}", f"{r:.2f}x")
    con.print(t)
    for f in ([json_out] if json_out is not None else []) + written:
        typer.echo(f"wrote {f}")
