"""Flow-matching training of the small Wan DiT on CPU, held-out evaluation, samples, loss curve.

Model: `diffusers.WanTransformer3DModel` with the registry's ``small`` config of
``wan2.1-t2v-1.3b`` (`algo.models`: 4 layers, 2 heads x 64 head dim, RoPE t/h/w 24/20/20, self-
and cross-attention, FFN 512, adaLN modulation from the timestep; about 1.0 M parameters), built
exactly as the seeded model (``torch.manual_seed(seed)`` then the class), then trained.

Objective (Wan2.1 / rectified flow): for clean latents ``x0`` (`algo.train.clips`), noise ``eps``
and noise level ``sigma``, input ``x_t = (1 - sigma) x0 + sigma eps``, timestep ``1000 sigma``,
target velocity ``eps - x0`` (what diffusers' ``FlowMatchEulerDiscreteScheduler`` integrates:
``x <- x + (sigma' - sigma) v``), mean squared error over all latent elements. Timesteps: Wan's
shifted sampling, ``u ~ U(0, 1)``, ``sigma = s u / (1 + (s - 1) u)`` with shift ``s`` =
`TRAIN_SHIFT` (3.0: diffusers' Wan docs suggest 3.0 for 480p and 5.0 for 720p; our grids are smaller still).

Optimiser (project defaults, docs/decisions.md): AdamW (betas 0.9/0.999, weight decay 0.01),
peak learning rate `LR` after `WARMUP` linear warm-up steps, cosine decay to 10 % at the last
step, gradient norm clipped to 1.0, batch `BATCH` clips of one grid (grids cycle per step).

Determinism: one torch intra-op thread during training (``torch.set_num_threads(1)``; float
reductions split over more threads sum in another order), ``torch.manual_seed(seed)`` for the
weights, every random draw of data and noise from seeded numpy generators
(``default_rng([seed, NOISE_STREAM, step])``); same command, machine and library versions ->
byte-identical checkpoint and log.

Evaluation (`evaluate`): the loss above at fixed noise levels `EVAL_SIGMAS`, averaged over
`EVAL_CLIPS` held-out clips (`algo.train.clips.heldout_clips`, never seen in training) with fixed
noise (``default_rng([EVAL_NOISE_STREAM, i])``), for the trained checkpoint and for the seeded
model it started from.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from algo.fileio import atomic_write_bytes
from algo.models import SAFETENSORS_FILE, CaptureError, build_model, get_spec, model_config
from algo.train import clips

MODEL, SIZE = "wan2.1-t2v-1.3b", "small"
TRAIN_SHIFT = 3.0
LR = 1e-3
WARMUP = 100
BATCH = 8
STEPS = 1200
CLIP_NORM = 1.0
NOISE_STREAM = 5
EVAL_NOISE_STREAM = 978
EVAL_SIGMAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
EVAL_CLIPS = 48
#: Held-out loss at sigma 0.5 on the first `CURVE_CLIPS` held-out clips every `CURVE_EVERY` steps.
CURVE_EVERY = 200
CURVE_CLIPS = 16
#: Where the shipped results live.
ASSETS = Path(__file__).parent / "assets"
CHECKPOINT = ASSETS / "wan-small" / SAFETENSORS_FILE
TRAIN_COMMAND = "kaleido train --out algo/train/assets/wan-small"

ProgressFn = Callable[[int, int, str], None]


class TrainError(CaptureError):
    """Training or evaluation cannot run as asked (bad steps, batch, output, checkpoint)."""


@contextlib.contextmanager
def one_thread():
    """Run the block with one torch intra-op thread (restored afterwards)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def shifted_sigma(u: np.ndarray, shift: float = TRAIN_SHIFT) -> np.ndarray:
    """Wan's shifted noise level ``shift u / (1 + (shift - 1) u)`` of ``u`` in [0, 1]."""
    return shift * u / (1 + (shift - 1) * u)


def lr_at(step: int, steps: int, peak: float = LR, warmup: int = WARMUP) -> float:
    """Learning rate of step `step` (0-based) of `steps`: linear warm-up, cosine to 10 %."""
    if step < warmup:
        return peak * (step + 1) / warmup
    frac = (step - warmup) / max(1, steps - warmup - 1)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def _texts(labels, text_dim: int) -> torch.Tensor:
    return torch.from_numpy(np.concatenate([clips.class_text(int(lab), text_dim) for lab in labels]))


def _forward(net, x_t: np.ndarray, sigma: np.ndarray, labels, text_dim: int) -> torch.Tensor:
    t = torch.from_numpy((np.asarray(sigma, dtype=np.float32) * np.float32(1000)).astype(np.float32))
    return net(hidden_states=torch.from_numpy(x_t), timestep=t, encoder_hidden_states=_texts(labels, text_dim),
               return_dict=False)[0]


def flow_batch(x0: np.ndarray, sigma: np.ndarray, eps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(x_t, target)`` float32: ``(1 - sigma) x0 + sigma eps`` and ``eps - x0`` (sigma per clip)."""
    s = np.asarray(sigma, dtype=np.float32).reshape(-1, 1, 1, 1, 1)
    return ((1 - s) * x0 + s * eps).astype(np.float32), (eps - x0).astype(np.float32)


def new_model(seed: int = 0) -> torch.nn.Module:
    """The seeded model (train mode, gradients on), identical to `build_model(MODEL, SIZE, seed)`."""
    net, _ = build_model(MODEL, SIZE, seed)
    net.train()
    net.requires_grad_(True)
    return net


def _heldout_loss(net, held, sigmas, text_dim: int) -> list[float]:
    """Mean loss per sigma over held-out clips (fixed noise per clip)."""
    out = []
    with torch.no_grad():
        for s in sigmas:
            tot, n = 0.0, 0
            for i, (x0, lab, _g) in enumerate(held):
                eps = np.random.default_rng([EVAL_NOISE_STREAM, i]).standard_normal(x0.shape).astype(np.float32)
                x_t, target = flow_batch(x0, np.array([s]), eps)
                pred = _forward(net, x_t, np.array([s]), [lab], text_dim)
                tot += float(((pred.double() - torch.from_numpy(target).double()) ** 2).sum())
                n += target.size
            out.append(tot / n)
    return out


def train(out_dir: str | Path, steps: int = STEPS, batch: int = BATCH, seed: int = 0, lr: float = LR,
          progress: ProgressFn | None = None) -> dict:
    """Train and write ``out_dir/diffusion_pytorch_model.safetensors``, ``train_log.json`` and
    ``loss_curve.png`` (all atomic; byte-identical for equal arguments on one machine).

    Args:
        out_dir: output folder (created).
        steps: optimiser steps (>= 1). batch: clips per step (>= 1). seed: weights and data.
        lr: peak learning rate.
        progress: ``progress(done, total, label)`` after each step.

    Returns:
        The log dict (config, per-step loss, held-out curve) plus ``"wall_s"`` and ``"files"``.

    Raises:
        TrainError: steps or batch < 1, a non-positive learning rate.
    """
    from algo.train.stfile import safetensors_bytes

    if int(steps) < 1 or int(batch) < 1 or not lr > 0:
        raise TrainError(f"steps and batch must be >= 1 and lr > 0; got steps {steps}, batch {batch}, lr {lr}")
    out = Path(out_dir)
    cfg = model_config(MODEL, SIZE)
    text_dim = int(cfg["text_dim"])
    t0 = time.perf_counter()
    with one_thread():
        net = new_model(seed)
        opt = torch.optim.AdamW(net.parameters(), lr=lr, betas=(0.9, 0.999), weight_decay=0.01)
        held = clips.heldout_clips(CURVE_CLIPS)
        losses, curve = [], []
        for step in range(int(steps)):
            grid = clips.GRIDS[step % len(clips.GRIDS)]
            x0, labels = clips.training_batch(seed, step, int(batch), grid)
            rng = np.random.default_rng([int(seed), NOISE_STREAM, step])
            sigma = shifted_sigma(rng.uniform(0.0, 1.0, size=len(x0)))
            eps = rng.standard_normal(x0.shape).astype(np.float32)
            x_t, target = flow_batch(x0, sigma, eps)
            for g in opt.param_groups:
                g["lr"] = lr_at(step, int(steps), lr)
            pred = _forward(net, x_t, sigma, labels, text_dim)
            loss = torch.nn.functional.mse_loss(pred, torch.from_numpy(target))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), CLIP_NORM)
            opt.step()
            losses.append(float(loss.detach()))
            if (step + 1) % CURVE_EVERY == 0 or step + 1 == int(steps):
                net.eval()
                curve.append([step + 1, _heldout_loss(net, held, [0.5], text_dim)[0]])
                net.train()
            if progress is not None:
                progress(step + 1, int(steps), f"loss {np.mean(losses[-50:]):.4f}")
    wall = time.perf_counter() - t0
    net.eval()
    sd = {k: v.detach().contiguous() for k, v in net.state_dict().items()}
    config = dict(cfg, _class_name=get_spec(MODEL, SIZE).diffusers_class)
    meta = {"config": json.dumps(config, sort_keys=True), "model": MODEL, "size": SIZE,
            "command": f"{TRAIN_COMMAND} --steps {steps} --batch {batch} --seed {seed} --lr {lr:g}",
            "steps": str(int(steps)), "seed": str(int(seed))}
    log = {"model": MODEL, "size": SIZE, "command": meta["command"], "steps": int(steps), "batch": int(batch),
           "seed": int(seed), "lr": lr, "warmup": WARMUP, "shift": TRAIN_SHIFT, "grids": [list(g) for g in clips.GRIDS],
           "images": list(clips.IMAGES), "threads": 1,
           "parameters": int(sum(p.numel() for p in net.parameters())),
           "loss": [round(v, 6) for v in losses], "heldout_sigma_0.5": curve}
    files = [atomic_write_bytes(out / SAFETENSORS_FILE, safetensors_bytes(sd, meta)),
             atomic_write_bytes(out / "train_log.json", (json.dumps(log, indent=1) + "\n").encode()),
             write_loss_curve(log, out / "loss_curve.png")]
    return dict(log, wall_s=wall, files=[str(f) for f in files])


def write_loss_curve(log: dict, path: str | Path) -> Path:
    """PNG of the training loss (per step and a 50-step running mean) and the held-out loss at sigma 0.5."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loss = np.asarray(log["loss"])
    k = min(50, len(loss))
    run = np.convolve(loss, np.ones(k) / k, mode="valid")
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(np.arange(1, len(loss) + 1), loss, color="tab:blue", alpha=0.25, lw=0.6, label="training loss (batch)")
    ax.plot(np.arange(k, len(loss) + 1), run, color="tab:blue", label=f"training loss ({k}-step mean)")
    if log["heldout_sigma_0.5"]:
        c = np.asarray(log["heldout_sigma_0.5"])
        ax.plot(c[:, 0], c[:, 1], "o-", color="tab:red", label=f"held-out loss at σ = 0.5 ({CURVE_CLIPS} clips)")
    ax.set_yscale("log")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("flow-matching MSE (v = ε − x0)")
    ax.set_title(f"{log['model']} ({log['size']}), {log['parameters']:,} parameters, batch {log['batch']}, "
                 f"shift {log['shift']:g}", fontsize=9)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.text(0.5, 0.005, log["command"], ha="center", va="bottom", fontsize=7)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    b = io.BytesIO()
    fig.savefig(b, format="png", dpi=120, metadata={"Software": None})
    plt.close(fig)
    return atomic_write_bytes(Path(path), b.getvalue())


def load_trained(weights: str | Path | None = None, seed: int = 0) -> tuple[torch.nn.Module, str]:
    """The trained model from a safetensors checkpoint (default: the shipped `CHECKPOINT`).

    Raises:
        CaptureError: missing or truncated file, config or tensors that do not match (`build_model`).
    """
    return build_model(MODEL, SIZE, seed, weights=CHECKPOINT if weights is None else weights)


def evaluate(weights: str | Path | None = None, sigmas=EVAL_SIGMAS, n_clips: int = EVAL_CLIPS, seed: int = 0,
             progress: ProgressFn | None = None) -> dict:
    """Held-out flow-matching loss per sigma, trained checkpoint against the seeded model (module docstring).

    Returns:
        ``{"sigma": [...], "loss_trained": [...], "loss_seeded": [...], "ratio_seeded_over_trained":
        [...], "clips": n, "weights": description, "seeded": description}``.

    Raises:
        CaptureError: as `load_trained`; TrainError: no sigmas, a sigma outside (0, 1], n_clips < 1.
    """
    sig = [float(s) for s in sigmas]
    if not sig or any(not 0 < s <= 1 for s in sig) or int(n_clips) < 1:
        raise TrainError(f"sigmas must be in (0, 1] and clips >= 1; got {sig}, {n_clips}")
    text_dim = int(model_config(MODEL, SIZE)["text_dim"])
    with one_thread():
        trained, desc = load_trained(weights, seed)
        seeded, sdesc = build_model(MODEL, SIZE, seed)
        held = clips.heldout_clips(int(n_clips))
        lt, ls = [], []
        for k, s in enumerate(sig):
            lt += _heldout_loss(trained, held, [s], text_dim)
            ls += _heldout_loss(seeded, held, [s], text_dim)
            if progress is not None:
                progress(k + 1, len(sig), f"sigma {s:g}")
    return {"sigma": sig, "loss_trained": lt, "loss_seeded": ls,
            "ratio_seeded_over_trained": [b / a for a, b in zip(lt, ls, strict=True)],
            "clips": int(n_clips), "weights": desc, "seeded": sdesc,
            "heldout": "algo.train.clips.heldout_clips: own rng stream, never used in training"}


def sample(net, label: int, latent_grid=(4, 16, 16), num_steps: int = 50, shift: float = TRAIN_SHIFT,
           seed: int = 0) -> np.ndarray:
    """Euler flow-matching sampling from pure noise (``default_rng([seed, 7, label])``), class `label`:
    final latents ``[1, 16, F, H, W]`` float32 (schedule `algo.latents.flow_sigmas` + terminal 0)."""
    from algo import latents as lat

    text_dim = int(net.config.text_dim)
    x = np.random.default_rng([int(seed), 7, int(label)]).standard_normal((1, 16, *latent_grid)).astype(np.float32)
    sig = np.append(lat.flow_sigmas(num_steps, shift), np.float32(0.0)).astype(np.float32)
    with torch.no_grad(), one_thread():
        for i in range(num_steps):
            v = _forward(net, x, np.array([sig[i]]), [label], text_dim).numpy()
            x = (x + np.float32(sig[i + 1] - sig[i]) * v).astype(np.float32)
    return x


def write_sample_grid(path: str | Path, weights: str | Path | None = None, seed: int = 0,
                      latent_grid=(4, 16, 16), num_steps: int = 50) -> Path:
    """PNG: per class, one held-out real clip (frame 0, and its PCA round trip) beside the 4 frames sampled
    from pure noise by the trained model and by the seeded one (frame 0), decoded with the patch PCA."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from algo.train import patch_pca

    pca = patch_pca.load()
    trained, _ = load_trained(weights, seed)
    seeded, _ = build_model(MODEL, SIZE, seed)
    n_cls, f = len(clips.IMAGES), int(latent_grid[0])
    cols = ["real clip", "real, PCA round trip"] + [f"trained sample f{k}" for k in range(f)] + ["seeded sample f0"]
    fig, axes = plt.subplots(n_cls, len(cols), figsize=(1.6 * len(cols), 1.6 * n_cls))
    for lab in range(n_cls):
        rng = np.random.default_rng([clips.HELDOUT_STREAM, 10_000 + lab])
        real = clips.render_clip(rng, latent_grid, lab)
        rt = pca.decode(pca.encode(real))
        st = pca.decode(sample(trained, lab, latent_grid, num_steps, seed=seed))
        ss = pca.decode(sample(seeded, lab, latent_grid, num_steps, seed=seed))
        row = [real[0], rt[0]] + [st[k] for k in range(f)] + [ss[0]]
        for c, im in enumerate(row):
            ax = axes[lab, c]
            ax.imshow(np.clip(im, 0, 1), interpolation="nearest")
            ax.set_xticks([])
            ax.set_yticks([])
            if lab == 0:
                ax.set_title(cols[c], fontsize=7)
            if c == 0:
                ax.set_ylabel(clips.IMAGES[lab], fontsize=8)
    fig.suptitle(f"Samples from pure noise ({num_steps} Euler steps, shift {TRAIN_SHIFT:g}), decoded with the patch "
                 "PCA pseudo-inverse", fontsize=9)
    fig.tight_layout()
    b = io.BytesIO()
    fig.savefig(b, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return atomic_write_bytes(Path(path), b.getvalue())
