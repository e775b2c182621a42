"""Training and held-out clips: real images under camera motion, with independently moving patches.

Content: photographs that installed packages ship (`IMAGES`: scikit-image's ``data`` module; no
download), each resized to a content height of `CONTENT_HEIGHT_PX` (the frame then shows about half
the picture's height). A clip of latent grid ``(F, H, W)`` is ``F`` RGB frames of ``8H x 8W`` px
(one frame per latent frame: no temporal compression), encoded with the patch PCA
(`algo.train.patch_pca`):

- Background: image ``label`` (the clip's class) seen by a moving camera. Frame ``f`` shows the
  image through the affine map ``source = c_f + R(a_f) u / z_f`` (``u``: pixel offset from the
  frame centre) with centre ``c_f = c_0 + f v`` (pan, |v| up to `MAX_PAN_PX` px per frame),
  zoom ``z_f = z_0 r^f`` (``z_0`` in [0.8, 1.25], ``r`` in [0.95, 1.05]) and rotation
  ``a_f = a_0 + f w`` (``a_0`` within +-5 degrees, ``w`` within +-2 degrees per frame); bilinear
  (``skimage.transform.warp``, order 1, mode ``reflect`` past the image border).
- Objects: 0, 1 or 2 (probabilities 1/4, 1/2, 1/4) opaque square patches of side 16..40 px cut from
  *other* images of `IMAGES`, each on its own straight path (start anywhere in the frame, velocity
  up to `MAX_OBJECT_PX` px per frame on each axis), pasted at integer positions and cut at the
  frame border.

Conditioning: class labels, one per background image, given to the model as a fixed *seeded
text embedding* (`class_text`: `TEXT_TOKENS` tokens of N(0, 1) values of width ``text_dim`` from
``numpy.random.default_rng([PROMPT_SEED, label])``), fed through Wan's text projection and
cross-attention as a real prompt's UMT5 embedding would be.

Randomness: every clip draws its parameters from its own ``numpy.random.default_rng(key)``.
Training clips use keys ``[seed, TRAIN_STREAM, step, i]``, held-out clips ``[HELDOUT_STREAM, i]``:
held-out clips are never seen in training (other camera paths, crops and objects over the same
six images; the image set itself is too small to hold images out).

Grid sizes: training cycles through `GRIDS` (latent ``(F, H, W)``; tokens after the (1, 2, 2)
patch 240..288), which include capture's default token grid 4x8x8.
"""

from __future__ import annotations

import functools
import math

import numpy as np

#: Training images: ``skimage.data`` function names (shipped with scikit-image; ``camera`` is grey,
#: repeated to RGB; ``motorcycle`` is the left view of ``stereo_motorcycle``). The class label of a
#: clip is its background's index here.
IMAGES = ("astronaut", "coffee", "chelsea", "rocket", "camera", "motorcycle")
#: Height (px) training images are resized to (project default: a 128-px frame shows half of it).
CONTENT_HEIGHT_PX = 256
#: Latent grids (F, H, W) of training clips, cycled step by step (project default).
GRIDS = ((4, 16, 16), (4, 12, 24), (3, 16, 24), (5, 12, 16))
#: Seeded text embedding per class: tokens, seed (project constants; 8 tokens as capture's text).
TEXT_TOKENS = 8
PROMPT_SEED = 20261201
TRAIN_STREAM = 11
HELDOUT_STREAM = 977
MAX_PAN_PX = 6.0
MAX_OBJECT_PX = 6.0


@functools.lru_cache(maxsize=32)
def load_image(name: str, height: int = CONTENT_HEIGHT_PX) -> np.ndarray:
    """Image `name` of `IMAGES` as float64 RGB in [0, 1], resized to `height` px (aspect kept).

    Raises:
        ValueError: unknown name.
    """
    import skimage.data
    from skimage.transform import resize

    if name not in IMAGES:
        raise ValueError(f"unknown image {name!r}; choose one of {', '.join(IMAGES)}")
    img = skimage.data.stereo_motorcycle()[0] if name == "motorcycle" else getattr(skimage.data, name)()
    if img.ndim == 2:
        img = np.stack([img] * 3, axis=-1)
    img = img[..., :3].astype(np.float64) / 255.0
    width = int(round(img.shape[1] * height / img.shape[0]))
    out = resize(img, (int(height), width, 3), order=1, anti_aliasing=True, preserve_range=True)
    return out


def class_text(label: int, text_dim: int) -> np.ndarray:
    """The fixed seeded text embedding of class `label`: ``[1, TEXT_TOKENS, text_dim]`` float32."""
    rng = np.random.default_rng([PROMPT_SEED, int(label)])
    return rng.standard_normal((1, TEXT_TOKENS, int(text_dim))).astype(np.float32)


def _camera_frame(img: np.ndarray, out_hw, centre, angle, zoom) -> np.ndarray:
    from skimage.transform import AffineTransform, warp

    h, w = out_hw
    ca, sa = math.cos(angle), math.sin(angle)
    # output (x, y) -> input (x, y): translate to the frame centre, scale 1/zoom, rotate, move to centre
    lin = np.array([[ca, -sa], [sa, ca]]) / zoom
    off = np.array([centre[1], centre[0]]) - lin @ np.array([(w - 1) / 2, (h - 1) / 2])
    m = np.eye(3)
    m[:2, :2], m[:2, 2] = lin, off
    return warp(img, AffineTransform(matrix=m), output_shape=(h, w), order=1, mode="reflect")


def render_clip(rng: np.random.Generator, latent_grid, label: int) -> np.ndarray:
    """One clip (module docstring): ``[F, 8H, 8W, 3]`` float64 RGB in [0, 1], parameters from `rng`."""
    f, lh, lw = (int(v) for v in latent_grid)
    h, w = 8 * lh, 8 * lw
    img = load_image(IMAGES[label])
    ih, iw = img.shape[:2]
    c0 = np.array([rng.uniform(0.3, 0.7) * ih, rng.uniform(0.3, 0.7) * iw])
    speed, heading = rng.uniform(0, MAX_PAN_PX), rng.uniform(0, 2 * math.pi)
    v = speed * np.array([math.sin(heading), math.cos(heading)])
    z0, zr = math.exp(rng.uniform(math.log(0.8), math.log(1.25))), rng.uniform(0.95, 1.05)
    a0, aw = math.radians(rng.uniform(-5, 5)), math.radians(rng.uniform(-2, 2))
    frames = np.stack([_camera_frame(img, (h, w), c0 + k * v, a0 + k * aw, z0 * zr ** k) for k in range(f)])
    n_obj = int(rng.choice(3, p=[0.25, 0.5, 0.25]))
    others = [i for i in range(len(IMAGES)) if i != label]
    for _ in range(n_obj):
        src = load_image(IMAGES[others[int(rng.integers(len(others)))]])
        side = int(rng.integers(16, 41))
        y, x = int(rng.integers(0, src.shape[0] - side)), int(rng.integers(0, src.shape[1] - side))
        patch = src[y:y + side, x:x + side]
        p0 = np.array([rng.uniform(-side / 2, h - side / 2), rng.uniform(-side / 2, w - side / 2)])
        pv = rng.uniform(-MAX_OBJECT_PX, MAX_OBJECT_PX, size=2)
        for k in range(f):
            top, left = (int(round(c)) for c in p0 + k * pv)
            y0, x0, y1, x1 = max(top, 0), max(left, 0), min(top + side, h), min(left + side, w)
            if y1 > y0 and x1 > x0:
                frames[k, y0:y1, x0:x1] = patch[y0 - top:y1 - top, x0 - left:x1 - left]
    return frames


def clip_latents(key, latent_grid, label: int | None = None, pca=None) -> tuple[np.ndarray, int]:
    """Latents of the clip drawn with ``default_rng(key)``: ``([1, 16, F, H, W] float32, label)``.

    The label is drawn first (uniform over `IMAGES`) unless given.
    """
    from algo.train import patch_pca

    rng = np.random.default_rng(key)
    lab = int(rng.integers(len(IMAGES))) if label is None else int(label)
    return (pca or patch_pca.load()).encode(render_clip(rng, latent_grid, lab)), lab


def training_batch(seed: int, step: int, batch: int, latent_grid) -> tuple[np.ndarray, np.ndarray]:
    """Batch of training step `step`: ``([B, 16, F, H, W] float32, [B] int64 labels)``."""
    xs, labels = zip(*(clip_latents([int(seed), TRAIN_STREAM, int(step), i], latent_grid) for i in range(batch)),
                     strict=True)
    return np.concatenate(xs), np.array(labels, dtype=np.int64)


def heldout_clips(n: int) -> list[tuple[np.ndarray, int, tuple[int, int, int]]]:
    """The first `n` held-out clips ``(latents [1, 16, F, H, W], label, latent grid)``, cycling `GRIDS`."""
    out = []
    for i in range(int(n)):
        g = GRIDS[i % len(GRIDS)]
        x, lab = clip_latents([HELDOUT_STREAM, i], g, label=i % len(IMAGES))
        out.append((x, lab, g))
    return out


def pan_latents(latent_grid, pan_px: int, image: str) -> np.ndarray:
    """Capture's input for the trained model: a horizontal pan of `pan_px` px per frame over `image`
    at the training content scale, no objects, PCA-encoded: ``[1, 16, F, H, W]`` float32.

    Raises:
        ValueError: unknown image or a negative pan.
    """
    from algo.train import patch_pca

    if image not in IMAGES:
        raise ValueError(f"unknown image {image!r}; choose one of {', '.join(IMAGES)}")
    if pan_px < 0:
        raise ValueError(f"pan must be >= 0 px, got {pan_px}")
    f, lh, lw = (int(v) for v in latent_grid)
    img = load_image(image)
    c = np.array([img.shape[0] / 2, img.shape[1] / 2 - (f - 1) * pan_px / 2])
    frames = np.stack([_camera_frame(img, (8 * lh, 8 * lw), c + [0, k * pan_px], 0.0, 1.0) for k in range(f)])
    return patch_pca.load().encode(frames)
