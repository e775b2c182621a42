"""Latent inputs from real image content, and the flow-matching noise schedule.

Why a stand-in: a video DiT denoises VAE latents, but no VAE checkpoint exists offline (no hub
access). What matters for channel-wise reuse is the *spatial and temporal structure* of the
latents: real content has large smooth regions, edges and textures, and a camera pan moves them
coherently from frame to frame. So the latents here come from a real photograph shipped inside
scikit-image (`IMAGES`; nothing downloaded), panned into a clip and reduced to the latent grid by
a fixed deterministic encoder:

1. `pan_clip`: the image is resized (``skimage.transform.resize``, order 1, anti-aliased) to the
   content scale of a 480p video (height `CONTENT_HEIGHT_PX` = 480 px, 832x480, docs/spec.md §1), or
   larger if the clip needs more, so that a small grid is a *crop* of a 480p-scale video rather
   than a thumbnail of the whole picture (a thumbnail makes neighbouring tokens far apart in
   content and understates similarity). A window of ``8H x 8W`` pixels slides horizontally by
   ``pan_px`` pixels per *latent* frame; frame ``f`` is the window at column offset
   ``f * pan_px`` (centred vertically, the pan centred horizontally). Wan's VAE compresses 4 video
   frames into one latent frame (docs/spec.md §1), so the default ``pan_px = 4`` is 1 px per video
   frame, a slow pan; the content moves by half a latent cell per latent frame.
2. `encode_clip`: each 8x8-pixel latent cell (Wan VAE: 8x8 spatial compression, 16 channels) is
   split into 4x4 sub-cells of 2x2 pixels; their RGB means give 48 features, projected to 16
   channels by a fixed Gaussian matrix (seed `PROJECTION_SEED`, independent of the capture seed,
   entries N(0, 1/48)), then standardised per channel over the clip (mean 0, std 1; Wan's
   pipeline also normalises VAE latents per channel with ``latents_mean``/``latents_std``).

Where it differs from real VAE latents: the encoder is linear and local (no learned nonlinear
features, no cross-cell context); the temporal axis is not compressed causally (each latent frame
is one video frame rather than a 4-frame summary, and the first latent frame is not special);
channel statistics are standardised exactly rather than approximately. Spatial smoothness and
motion coherence, the properties reuse exploits, are preserved.

Noise schedule (`flow_sigmas`): diffusers 0.42.1 ``FlowMatchEulerDiscreteScheduler`` with
``shift`` (default 5.0, the Wan2.1 repository's ``generate.py`` default sample shift for
text-to-video; diffusers' Wan docs suggest 3.0 for 480p and 5.0 for 720p),
``num_train_timesteps = 1000``, no dynamic shifting:
``sigma_min = shift(1/1000)``, ``s = linspace(1, sigma_min, N)``,
``sigma = shift * s / (1 + (shift - 1) * s)``, ``timestep = 1000 * sigma``.
(Wan's default sampler, UniPC with flow sigmas, spaces the unshifted sigmas slightly differently.)
Noising (`noisy_latents`) is the rectified-flow interpolation ``x_t = (1 - sigma) x0 + sigma eps``
(the scheduler's ``scale_noise``) with one seeded ``eps`` shared by all steps, i.e. the ideal
straight trajectory from that noise to the clip.
"""

from __future__ import annotations

import numpy as np

#: Seed of the fixed 48 -> 16 projection of the stand-in encoder (project constant).
PROJECTION_SEED = 20240801
#: Latent cell in pixels and latent channels (Wan VAE: 8x8 spatial, 16 channels; docs/spec.md §1).
CELL_PX = 8
LATENT_CHANNELS = 16
#: Sub-cell size inside a latent cell for the stand-in encoder (4x4 sub-cells of 2x2 px).
SUB_PX = 2
#: Default horizontal pan in pixels per latent frame (project default, see module docstring).
DEFAULT_PAN_PX = 4
#: Image height after resizing: the content scale of a 480p (832x480) video (docs/spec.md §1).
CONTENT_HEIGHT_PX = 480
#: Wan2.1 text-to-video sample shift (Wan2.1 repository generate.py default).
DEFAULT_SHIFT = 5.0
NUM_TRAIN_TIMESTEPS = 1000


def _load(name: str) -> np.ndarray:
    import skimage.data

    img = getattr(skimage.data, name)()
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    return img[..., :3]


#: Images that ship inside scikit-image (no pooch download), by `skimage.data` function name.
IMAGES = ("astronaut", "coffee", "chelsea", "rocket", "camera")


def pan_clip(frames: int, height_px: int, width_px: int, pan_px: int = DEFAULT_PAN_PX,
             image: str = "astronaut", content_height_px: int = CONTENT_HEIGHT_PX) -> np.ndarray:
    """A horizontal camera pan over a real image.

    Args:
        frames: number of frames F (one per latent frame).
        height_px, width_px: frame size in pixels.
        pan_px: window shift to the right per frame, pixels (>= 0).
        image: one of `IMAGES`.
        content_height_px: height the image is resized to (at least; more when the clip needs it).

    Returns:
        ``[F, height_px, width_px, 3]`` float32 RGB in [0, 1].

    Raises:
        ValueError: unknown image, non-positive sizes or a negative pan.
    """
    from skimage.transform import resize

    if image not in IMAGES:
        raise ValueError(f"unknown image {image!r}; choose one of {', '.join(IMAGES)}")
    if frames <= 0 or height_px <= 0 or width_px <= 0 or pan_px < 0:
        raise ValueError(f"bad clip size {frames}x{height_px}x{width_px} or pan {pan_px}")
    img = _load(image).astype(np.float64) / 255.0
    need_w = width_px + (frames - 1) * pan_px
    scale = max(content_height_px / img.shape[0], height_px / img.shape[0], need_w / img.shape[1])
    out_h = max(height_px, int(round(img.shape[0] * scale)))
    out_w = max(need_w, int(round(img.shape[1] * scale)))
    img = resize(img, (out_h, out_w, 3), order=1, anti_aliasing=True, preserve_range=True)
    y0 = (out_h - height_px) // 2
    x0 = (out_w - need_w) // 2
    clip = np.stack([img[y0:y0 + height_px, x0 + f * pan_px:x0 + f * pan_px + width_px] for f in range(frames)])
    return clip.astype(np.float32)


def encode_clip(clip: np.ndarray) -> np.ndarray:
    """The stand-in VAE encoder: RGB frames to standardised 16-channel latents.

    Args:
        clip: ``[F, 8H, 8W, 3]`` float RGB.

    Returns:
        ``[1, 16, F, H, W]`` float32, per-channel mean 0 and std 1 over the clip.
    """
    f, hp, wp, _ = clip.shape
    if hp % CELL_PX or wp % CELL_PX:
        raise ValueError(f"frame size {hp}x{wp} is not a multiple of the {CELL_PX}-px latent cell")
    h, w, s = hp // CELL_PX, wp // CELL_PX, CELL_PX // SUB_PX
    x = clip.astype(np.float64).reshape(f, h, s, SUB_PX, w, s, SUB_PX, 3).mean(axis=(3, 6))
    feats = x.transpose(0, 1, 3, 2, 4, 5).reshape(f, h, w, s * s * 3)  # [F, H, W, 48]
    proj = np.random.default_rng(PROJECTION_SEED).standard_normal((s * s * 3, LATENT_CHANNELS))
    z = feats @ (proj / np.sqrt(s * s * 3))  # [F, H, W, 16]
    z = (z - z.mean(axis=(0, 1, 2))) / np.maximum(z.std(axis=(0, 1, 2)), 1e-12)
    return np.ascontiguousarray(z.transpose(3, 0, 1, 2)[None].astype(np.float32))


def image_latents(latent_grid: tuple[int, int, int], pan_px: int = DEFAULT_PAN_PX,
                  image: str = "astronaut") -> np.ndarray:
    """Clean latents ``x0`` of a panned real image: ``[1, 16, F, H, W]`` float32.

    Args:
        latent_grid: ``(F, H, W)`` latent frames, rows, columns (before the model's patching).
    """
    f, h, w = (int(v) for v in latent_grid)
    return encode_clip(pan_clip(f, CELL_PX * h, CELL_PX * w, pan_px, image))


def encoder_name(spec, size: str) -> str:
    """How `model_latents` encodes clips for ``(spec, size)``: the registry's ``latents`` entry."""
    if spec.latents.get(size, "standin") == "patch_pca":
        return "patch PCA encoder (algo.train.patch_pca), training content scale"
    return "stand-in encoder (algo.latents)"


def model_latents(spec, size: str, latent_grid: tuple[int, int, int], pan_px: int = DEFAULT_PAN_PX,
                  image: str = "astronaut") -> np.ndarray:
    """Clean latents ``[1, 16, F, H, W]`` float32 of a panned real image, in the encoding the model of
    ``(spec, size)`` was made for (`algo.models.ModelSpec.latents`): the stand-in encoder
    (`image_latents`) or, for the trained size, the patch PCA at the training content scale
    (`algo.train.clips.pan_latents`)."""
    if spec.latents.get(size, "standin") == "patch_pca":
        from algo.train.clips import pan_latents

        return pan_latents(latent_grid, pan_px, image)
    return image_latents(latent_grid, pan_px=pan_px, image=image)


def class_prompt(spec, size: str | None, image: str):
    """``(description, text_fn)`` of the class prompt the trained size is conditioned on for `image`
    (`algo.train.clips.class_text`; ``text_fn(width)`` -> ``[1, 8, width]`` float32), or None for
    models fed seeded random text."""
    if size is None or spec.latents.get(size, "standin") != "patch_pca":
        return None
    from algo.train import clips

    label = clips.IMAGES.index(image)
    return (f"class prompt {label} ({image}): seeded embedding default_rng([{clips.PROMPT_SEED}, {label}])",
            lambda width: clips.class_text(label, width))


def flow_sigmas(num_inference_steps: int, shift: float = DEFAULT_SHIFT) -> np.ndarray:
    """Noise levels of the N inference steps, as diffusers' FlowMatchEulerDiscreteScheduler sets them.

    Returns:
        ``[N]`` float32, decreasing from 1.0 (without the scheduler's terminal 0); the model's
        timestep at step i is ``1000 * sigma[i]``.
    """
    if num_inference_steps < 1:
        raise ValueError(f"num_inference_steps must be >= 1, got {num_inference_steps}")

    def shifted(s):
        return shift * s / (1 + (shift - 1) * s)

    # The scheduler's sigma_min is the shifted smallest training sigma, held in float32.
    sigma_min = float(np.float32(shifted(np.float32(1.0 / NUM_TRAIN_TIMESTEPS))))
    t = np.linspace(1.0 * NUM_TRAIN_TIMESTEPS, sigma_min * NUM_TRAIN_TIMESTEPS, num_inference_steps)
    return shifted(t / NUM_TRAIN_TIMESTEPS).astype(np.float32)


def noise_like(x0: np.ndarray, seed: int) -> np.ndarray:
    """Seeded standard normal noise ``eps`` of ``x0``'s shape (float32).

    Drawn from ``numpy.random.default_rng([seed, 2])`` (stream 2 of the capture seed).
    """
    return np.random.default_rng([int(seed), 2]).standard_normal(x0.shape).astype(np.float32)


def noisy_latents(x0: np.ndarray, sigma: float, eps: np.ndarray) -> np.ndarray:
    """``x_t = (1 - sigma) * x0 + sigma * eps`` (float32, ``x0``'s shape)."""
    s = np.float32(sigma)
    return ((np.float32(1) - s) * x0 + s * eps).astype(np.float32)
