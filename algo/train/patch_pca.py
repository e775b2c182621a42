"""The latent transform of the trained model: a PCA of 8x8x3 RGB pixel patches, 16 components.

No VAE checkpoint can be downloaded, so the model's latents come from a fixed linear transform
that keeps what a video VAE's latent grid has (8x8 spatial reduction, 16 channels; Wan VAE, docs/spec.md
§1) and can be decoded back to frames for PSNR/SSIM:

- Encode: each non-overlapping 8x8-pixel cell of an RGB frame in [0, 1] is flattened in
  ``(row, column, rgb)`` order to 192 values ``p``; latent ``z = C (p - mean) / scale``, with ``C``
  the 16 leading principal directions (rows, orthonormal) and one global ``scale`` (not one per
  channel: the channels keep the PCA energy spectrum, so the leading, smooth components dominate the
  latents as they dominate the picture; docs/decisions.md).
- Decode: the pseudo-inverse, ``p = mean + scale * pinv(C) z`` (``pinv(C) = C^T`` for orthonormal
  rows), i.e. the projection of the frame onto the 16-dimensional patch subspace; values are not
  clipped (callers clip to [0, 1] for display).
- No temporal reduction: one latent frame per video frame (Wan's VAE compresses 4 frames into one;
  left out here, docs/decisions.md D44).

Fit (`fit`, run once; the result is shipped as `TRANSFORM_FILE`): every non-overlapping 8x8 patch
of the training images (`algo.train.clips.IMAGES`), each resized (scikit-image ``resize``, order 1,
anti-aliased) to the training content heights `FIT_HEIGHTS`; float64 mean and covariance,
``numpy.linalg.eigh``, the 16 largest eigenvalues' vectors, each sign-fixed so that its entry of
largest magnitude is positive; ``scale = sqrt(mean of the 16 eigenvalues)`` so that the latents of
the fit set have mean per-element variance 1. Reproduce with
``python -m algo.train.patch_pca --out algo/train/assets/patch_pca.safetensors``.

File format: safetensors (no pickle) with float32 tensors ``mean`` [192], ``components`` [16, 192],
``scale`` [1] and ``eigenvalues`` [192] (all, descending: the variance the 16 keep is reported from
them), metadata ``{"fit": command, "images": ..., "kept_variance": ...}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from algo.errors import CaptureError

#: Latent cell in pixels (Wan VAE: 8x8 spatial compression) and latent channels (16).
CELL_PX = 8
CHANNELS = 16
PATCH_DIM = CELL_PX * CELL_PX * 3
#: Content heights (px) the images are resized to for the fit: the training clips' content scale
#: (`algo.train.clips.CONTENT_HEIGHT_PX`) and its zoom range (x0.8, x1.25).
FIT_HEIGHTS = (205, 256, 320)
#: The shipped transform.
TRANSFORM_FILE = Path(__file__).parent / "assets" / "patch_pca.safetensors"
FIT_COMMAND = "python -m algo.train.patch_pca --out algo/train/assets/patch_pca.safetensors"
_SHAPES = {"mean": (PATCH_DIM,), "components": (CHANNELS, PATCH_DIM), "scale": (1,), "eigenvalues": (PATCH_DIM,)}


class TransformError(CaptureError):
    """The latent transform file is missing, unreadable or has the wrong shapes."""


@dataclass(frozen=True)
class PatchPCA:
    """A fitted transform (module docstring). Arrays float64 for the arithmetic.

    Attributes:
        mean: ``[192]`` mean patch. components: ``[16, 192]`` orthonormal rows.
        scale: global latent scale. eigenvalues: ``[192]`` all eigenvalues, descending.
    """

    mean: np.ndarray
    components: np.ndarray
    scale: float
    eigenvalues: np.ndarray

    @property
    def kept_variance(self) -> float:
        """Fraction of the fit set's patch variance the 16 components keep."""
        return float(self.eigenvalues[:CHANNELS].sum() / self.eigenvalues.sum())

    def encode(self, frames: np.ndarray) -> np.ndarray:
        """RGB frames ``[T, 8H, 8W, 3]`` (float, [0, 1]) -> latents ``[1, 16, T, H, W]`` float32.

        Raises:
            TransformError: frame sizes not multiples of 8 or not RGB.
        """
        f = np.asarray(frames, dtype=np.float64)
        if f.ndim != 4 or f.shape[-1] != 3 or f.shape[1] % CELL_PX or f.shape[2] % CELL_PX:
            raise TransformError(f"frames must be [T, 8H, 8W, 3], got {list(f.shape)}")
        t, hp, wp, _ = f.shape
        h, w = hp // CELL_PX, wp // CELL_PX
        p = f.reshape(t, h, CELL_PX, w, CELL_PX, 3).transpose(0, 1, 3, 2, 4, 5).reshape(t, h, w, PATCH_DIM)
        z = (p - self.mean) @ self.components.T / self.scale  # [T, H, W, 16]
        return np.ascontiguousarray(z.transpose(3, 0, 1, 2)[None].astype(np.float32))

    def decode(self, latents: np.ndarray) -> np.ndarray:
        """Latents ``[1, 16, T, H, W]`` -> RGB frames ``[T, 8H, 8W, 3]`` float64 (pseudo-inverse, not clipped).

        Raises:
            TransformError: not ``[1, 16, T, H, W]``.
        """
        z = np.asarray(latents, dtype=np.float64)
        if z.ndim != 5 or z.shape[:2] != (1, CHANNELS):
            raise TransformError(f"latents must be [1, {CHANNELS}, T, H, W], got {list(z.shape)}")
        _, _, t, h, w = z.shape
        p = self.mean + self.scale * (z[0].transpose(1, 2, 3, 0) @ np.linalg.pinv(self.components).T)
        return p.reshape(t, h, w, CELL_PX, CELL_PX, 3).transpose(0, 1, 3, 2, 4, 5).reshape(t, h * CELL_PX,
                                                                                         w * CELL_PX, 3)


def _patches(img: np.ndarray) -> np.ndarray:
    h, w = (img.shape[0] // CELL_PX) * CELL_PX, (img.shape[1] // CELL_PX) * CELL_PX
    x = img[:h, :w].reshape(h // CELL_PX, CELL_PX, w // CELL_PX, CELL_PX, 3).transpose(0, 2, 1, 3, 4)
    return x.reshape(-1, PATCH_DIM)


def fit() -> PatchPCA:
    """Fit the transform on the training images (module docstring); deterministic."""
    from algo.train.clips import IMAGES, load_image

    rows = [_patches(load_image(name, h)) for name in IMAGES for h in FIT_HEIGHTS]
    x = np.concatenate(rows).astype(np.float64)
    mean = x.mean(axis=0)
    cov = (x - mean).T @ (x - mean) / len(x)
    vals, vecs = np.linalg.eigh(cov)
    order = np.argsort(vals)[::-1]
    vals, vecs = vals[order], vecs[:, order]
    comps = vecs[:, :CHANNELS].T.copy()
    for c in comps:
        if c[np.argmax(np.abs(c))] < 0:
            c *= -1
    scale = float(np.sqrt(vals[:CHANNELS].mean()))
    return PatchPCA(mean=mean, components=comps, scale=scale, eigenvalues=np.maximum(vals, 0.0))


def save(pca: PatchPCA, out: str | Path) -> Path:
    """Write `pca` as safetensors (atomic; byte-identical for equal inputs)."""
    from algo.fileio import atomic_write_bytes
    from algo.train.clips import IMAGES
    from algo.train.stfile import safetensors_bytes

    tensors = {"mean": pca.mean, "components": pca.components, "scale": np.array([pca.scale]),
               "eigenvalues": pca.eigenvalues}
    meta = {"fit": FIT_COMMAND, "images": ",".join(IMAGES), "fit_heights_px": json.dumps(list(FIT_HEIGHTS)),
            "kept_variance": f"{pca.kept_variance:.6f}"}
    data = safetensors_bytes({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}, meta)
    return atomic_write_bytes(Path(out), data)


_CACHE: dict = {}
#: The transform `load()` returns without a path (`use` replaces it for the process).
_DEFAULT: list[Path] = [TRANSFORM_FILE]


def use(path: str | Path | None) -> PatchPCA:
    """Make `path` (None: the shipped `TRANSFORM_FILE`) the transform every later `load()` returns,
    after checking it (`load`). Returns it.

    Raises:
        TransformError: as `load`.
    """
    pca = load(TRANSFORM_FILE if path is None else path)
    _DEFAULT[0] = Path(TRANSFORM_FILE if path is None else path).expanduser().resolve()
    return pca


def load(path: str | Path | None = None) -> PatchPCA:
    """Read a transform file (default: the shipped `TRANSFORM_FILE`), checking every tensor's shape.

    Raises:
        TransformError: missing or unreadable file, a missing tensor or a wrong shape (named).
    """
    from safetensors import SafetensorError
    from safetensors.numpy import load_file

    p = Path(_DEFAULT[0] if path is None else path).expanduser().resolve()
    if p in _CACHE:
        return _CACHE[p]
    if not p.is_file():
        raise TransformError(f"latent transform file not found: {p}")
    try:
        t = load_file(str(p))
    except (SafetensorError, OSError, ValueError) as err:
        raise TransformError(f"latent transform {p}: not a readable safetensors file ({err})") from None
    for k, shape in _SHAPES.items():
        if k not in t:
            raise TransformError(f"latent transform {p}: no tensor {k!r}")
        if tuple(t[k].shape) != shape:
            raise TransformError(f"latent transform {p}: {k} has shape {list(t[k].shape)}, expected {list(shape)}")
    f64 = {k: t[k].astype(np.float64) for k in _SHAPES}
    if not all(np.isfinite(v).all() for v in f64.values()) or f64["scale"][0] <= 0:
        raise TransformError(f"latent transform {p}: non-finite values or a non-positive scale")
    pca = PatchPCA(mean=f64["mean"], components=f64["components"], scale=float(f64["scale"][0]),
                   eigenvalues=f64["eigenvalues"])
    _CACHE[p] = pca
    return pca


def main(argv: list[str] | None = None) -> int:
    """``python -m algo.train.patch_pca --out FILE``: fit and write the transform."""
    import argparse

    ap = argparse.ArgumentParser(description="Fit the 8x8x3 patch PCA latent transform on the training images.")
    ap.add_argument("--out", type=Path, default=TRANSFORM_FILE, help="output .safetensors file")
    args = ap.parse_args(argv)
    pca = fit()
    save(pca, args.out)
    print(f"wrote {args.out}: 16 of 192 components keep {100 * pca.kept_variance:.2f} % of the patch variance, "
          f"scale {pca.scale:.5f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
