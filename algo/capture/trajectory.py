"""The latent trajectory of a real sampling run (`record_trajectory`), for workload generators that
follow how the latents change from step to step (DDiT)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import torch

from algo import latents as lat
from algo.capture.request import DEFAULT_MODEL, DEFAULT_SIZE, TEXT_TOKENS, ProgressFn, patch_of
from algo.models import CaptureError, build_model, family_of, get_spec

__all__ = ["record_trajectory"]


def record_trajectory(model: str = DEFAULT_MODEL, size: str = DEFAULT_SIZE, latent_grid: tuple[int, int, int] = (3, 16, 16),
                      num_inference_steps: int = 50, seed: int = 0, shift: float = lat.DEFAULT_SHIFT,
                      weights: str | Path | None = None, progress: ProgressFn | None = None,
                      image: str = "astronaut") -> tuple[np.ndarray, str]:
    """The latent trajectory of a real sampling run: text-to-video from pure noise.

    ``z_0 = eps`` (`algo.latents.noise_like` of the latent shape, seed ``seed``), then for each step i
    of the family's N-step schedule (`algo.models.schedules`; Wan: flow matching with ``shift``,
    terminal sigma 0 appended, ``z_{i+1} = z_i + (sigma_{i+1} - sigma_i) v(z_i, 1000 sigma_i)``) the
    schedule's update in float32, batch 1, one conditional branch (no classifier-free guidance), 8
    seeded text tokens (`TEXT_TOKENS`, stream ``[seed, 1]``) and the family's extra inputs, as `capture`;
    the trained size (``small``, patch-PCA latents) gets the class prompt of ``image`` instead
    (`algo.latents.class_prompt`), the text it was trained on, as `capture` gives it.

    Args:
        latent_grid: ``(F, H, W)`` latent frames and pixels (before the model's patch; H and W
            multiples of the patch).
        weights: as `algo.models.build_model` (None: seeded weights).
        image: class of the trained size's prompt (`algo.train.clips.IMAGES`); unused otherwise.

    Returns:
        ``(trajectory, weights_description)``: float32 ``[N + 1, 16, F, H, W]``, entry i the latent
        step i starts from (entry N the final latent).

    Raises:
        CaptureError: unknown model or size, a bad grid or step count.
    """
    spec = get_spec(model, size)
    fam = family_of(spec)
    cfg = spec.sizes[size]
    pt, ph, pw = patch_of(cfg)
    grid = tuple(int(v) for v in latent_grid)
    if len(grid) != 3 or min(grid) <= 0 or grid[0] % pt or grid[1] % ph or grid[2] % pw:
        raise CaptureError(f"latent grid must be 3 positive sizes, H and W multiples of the patch {(pt, ph, pw)}; "
                           f"got {latent_grid}")
    if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
        raise CaptureError(f"num_inference_steps must be a positive integer, got {num_inference_steps!r}")
    net, wdesc = build_model(spec.name, size, seed, weights=weights)
    dtype = next(net.parameters()).dtype
    sch = fam.schedule(num_inference_steps, shift)
    z = lat.noise_like(np.zeros((1, lat.LATENT_CHANNELS, *grid), dtype=np.float32), seed)
    inputs = fam.inputs(cfg, net, (grid[0] // pt, grid[1] // ph, grid[2] // pw), seed, dtype, TEXT_TOKENS)
    prompt = lat.class_prompt(spec, size, image)
    if prompt is not None:  # the trained size: its class prompt (algo.train.clips), as capture feeds it
        inputs = dataclasses.replace(inputs, text=torch.from_numpy(prompt[1](inputs.text.shape[-1])).to(dtype))
        wdesc += f"; text: {prompt[0]}"
    out = np.empty((num_inference_steps + 1, *z.shape[1:]), dtype=np.float32)
    x = torch.from_numpy(z)
    with torch.inference_mode():
        for i in range(num_inference_steps):
            out[i] = x[0].numpy()
            v = fam.output(net(**fam.forward_kwargs(inputs, x.to(dtype), sch.timestep(i)), return_dict=False)[0])
            x = sch.update(x, v.to(torch.float32), i)
            if progress is not None:
                progress(i + 1, num_inference_steps, f"step {i} (sigma {sch.sigma(i):.3f})")
    out[num_inference_steps] = x[0].numpy()
    return out, wdesc
