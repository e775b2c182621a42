"""One quality configuration, built once and shared by every run on it (`algo.quality.run`,
`algo.quality.sweep`): the model and its weights, the family's schedule and forward inputs, the
noised real-image starting latents; plus the torch thread-count guard the runs use.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path

import numpy as np
import torch

from algo import latents as lat
from algo.capture import TEXT_TOKENS, patch_of
from algo.models import build_model, family_of, get_spec
from algo.reuse.fake_quant import ReuseError

#: Default number of Euler steps run (the last 10 of the 50-step schedule: sigma 0.54 -> 0).
DEFAULT_STEPS = 10
#: Length of the sampling schedule (Wan2.1 repo default for t2v: 50 FlowMatchEuler steps, shift 5;
#: docs/capture.md "schedule").
DEFAULT_NUM_INFERENCE_STEPS = 50


@contextlib.contextmanager
def torch_threads(n: int | None):
    """Set torch's intra-op thread count for the block (None: leave it)."""
    if n is None:
        yield
        return
    if int(n) < 1:
        raise ReuseError(f"threads must be >= 1 or None, got {n}")
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


class Setup:
    """Model, inputs and schedule shared by every run of one configuration."""

    def __init__(self, model, size, steps, seed, grid, num_inference_steps, image, pan_px, shift, weights=None):
        spec = get_spec(model, size)
        cfg = spec.sizes[size]
        fam = family_of(spec)
        if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
            raise ReuseError(f"num_inference_steps must be a positive integer, got {num_inference_steps!r}")
        if not isinstance(steps, int) or not 1 <= steps <= num_inference_steps:
            raise ReuseError(f"steps must be an integer in 1..{num_inference_steps}, got {steps!r}")
        grid = tuple(int(v) for v in (spec.default_grid[size] if grid is None else grid))
        max_len = int(cfg.get("rope_max_seq_len", 1024))
        if len(grid) != 3 or min(grid) <= 0 or max(grid) > max_len:
            raise ReuseError(f"grid must be 3 positive token counts (F, H, W), each <= {max_len}; got {grid}")
        if image not in lat.IMAGES:
            raise ReuseError(f"unknown image {image!r}; choose one of {', '.join(lat.IMAGES)}")
        self.spec, self.family, self.size, self.seed, self.grid = spec, fam, size, int(seed), grid
        self.schedule = fam.schedule(num_inference_steps, shift)
        self.steps, self.n_sched, self.image, self.pan_px = steps, num_inference_steps, image, pan_px
        self.shift = getattr(self.schedule, "shift", None)  # None: not a flow-matching schedule
        if weights is not None and not Path(weights).expanduser().exists():
            raise ReuseError(f"--weights: checkpoint not found: {Path(weights).expanduser().resolve()}")
        self.net, self.weights = build_model(spec.name, size, seed, weights=weights)
        #: decoded frames without a VAE: the patch PCA's pseudo-inverse for the trained size
        self.pca = None
        if spec.latents.get(size) == "patch_pca":
            from algo.train import patch_pca

            self.pca = patch_pca.load()
        self.dtype = next(self.net.parameters()).dtype
        p_t, p_h, p_w = patch_of(cfg)
        self.latent_grid = (grid[0] * p_t, grid[1] * p_h, grid[2] * p_w)
        x0 = lat.model_latents(spec, size, self.latent_grid, pan_px=pan_px, image=image)
        eps = lat.noise_like(x0, seed)
        self.sigmas = self.schedule.sigmas
        self.start = num_inference_steps - steps
        self.x_start = self.schedule.noised(x0, eps, self.start)
        self.inputs = fam.inputs(cfg, self.net, grid, seed, self.dtype, TEXT_TOKENS)
        self.prompt = lat.class_prompt(spec, size, image)
        if self.prompt is not None:  # the trained size: the class prompt of the image (algo.train.clips)
            self.inputs = dataclasses.replace(
                self.inputs, text=torch.from_numpy(self.prompt[1](self.inputs.text.shape[-1])).to(self.dtype))

    def describe(self) -> dict:
        return {
            "model": self.spec.name, "size": self.size, "weights": self.weights, "seed": self.seed,
            "grid": list(self.grid), "latent_grid": list(self.latent_grid),
            "tokens": int(np.prod(self.grid)), "num_inference_steps": self.n_sched, "steps": self.steps,
            "start_step": self.start, "shift": self.shift,
            "sigmas": [float(s) for s in self.sigmas[self.start:]],
            "start": (f"{self.image} panned {self.pan_px} px/latent frame ({lat.encoder_name(self.spec, self.size)}), "
                      f"noised to sigma[{self.start}] = {float(self.sigmas[self.start]):.4f} with seeded eps"),
            "text": self.prompt[0] if self.prompt else f"{TEXT_TOKENS} seeded N(0,1) tokens",
        }
