"""Quality metrics of a sampling run: PSNR and SSIM of latents and decoded frames (scikit-image), LPIPS
when its weights are local, decoding latents with a local Wan VAE, and the Pareto front of a sweep."""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from algo.reuse.fake_quant import ReuseError

__all__ = ["NO_VAE", "decode_latents", "frame_metrics", "latent_metrics", "lpips_status", "pareto_front"]

NO_VAE = "no VAE checkpoint given"


#: SSIM window (scikit-image default for 2-D images, 7); smaller odd windows for tiny frames.
SSIM_WIN = 7


# -- metrics ---------------------------------------------------------------------------------------

def _psnr(ref: np.ndarray, test: np.ndarray, data_range: float) -> float:
    from skimage.metrics import peak_signal_noise_ratio

    if np.array_equal(ref, test):
        return math.inf  # skimage divides by a zero MSE
    return float(peak_signal_noise_ratio(ref, test, data_range=data_range))


def _ssim_frames(ref: np.ndarray, test: np.ndarray, data_range: float) -> float:
    """Mean SSIM over frames of ``[T, H, W, C]`` arrays (channel axis last); NaN if frames < 3 px."""
    from skimage.metrics import structural_similarity

    side = min(ref.shape[1], ref.shape[2])
    win = min(SSIM_WIN, side if side % 2 else side - 1)
    if win < 3:
        return math.nan
    vals = [structural_similarity(r, t, win_size=win, data_range=data_range, channel_axis=-1)
            for r, t in zip(ref, test, strict=True)]
    return float(np.mean(vals))


def latent_metrics(ref: np.ndarray, test: np.ndarray) -> dict:
    """PSNR/SSIM of latents against a reference.

    Args:
        ref, test: ``[1, C, F, H, W]`` float latents (``ref`` = the exact run's final latents).

    Returns:
        ``{"psnr_db", "ssim", "data_range", "max_abs_diff", "bit_identical"}``: ``data_range`` =
        ``ref.max() - ref.min()`` (used by both metrics); PSNR over all elements (inf when equal);
        SSIM per latent frame as an ``H x W`` image with C channels, mean over frames.
    """
    r = np.asarray(ref, dtype=np.float64)[0]
    t = np.asarray(test, dtype=np.float64)[0]
    if r.shape != t.shape:
        raise ReuseError(f"latent shapes differ: {r.shape} vs {t.shape}")
    dr = float(r.max() - r.min()) or 1.0
    return {
        "psnr_db": _psnr(r, t, dr),
        "ssim": _ssim_frames(np.moveaxis(r, 0, -1), np.moveaxis(t, 0, -1), dr),
        "data_range": dr,
        "max_abs_diff": float(np.max(np.abs(r - t))),
        "bit_identical": bool(np.array_equal(np.asarray(ref), np.asarray(test))),
    }


def frame_metrics(ref: np.ndarray, test: np.ndarray) -> dict:
    """PSNR/SSIM of decoded RGB frames ``[T, H, W, 3]`` in [0, 1] (data range 1)."""
    return {"psnr_db": _psnr(ref, test, 1.0), "ssim": _ssim_frames(ref, test, 1.0), "data_range": 1.0}


def lpips_status(frames_available: bool) -> str | None:
    """None when LPIPS can be computed locally, else the explicit reason it is unavailable.

    Needs the ``lpips`` package, its linear-layer weights (shipped in the package,
    ``lpips/weights/v0.1/alex.pth``), torchvision's AlexNet backbone weights already in the torch hub
    cache (``<torch.hub.get_dir()>/checkpoints/alexnet-owt-*.pth``; nothing is downloaded), and
    decoded RGB frames (LPIPS is defined on images, not latents).
    """
    spec = importlib.util.find_spec("lpips")
    if spec is None or spec.origin is None:
        return "unavailable (no local weights: the lpips package is not installed)"
    if importlib.util.find_spec("torchvision") is None:
        return "unavailable (no local weights: torchvision, which lpips needs, is not installed)"
    lin = Path(spec.origin).parent / "weights" / "v0.1" / "alex.pth"
    hub = Path(torch.hub.get_dir()) / "checkpoints"
    if not lin.exists() or not any(hub.glob("alexnet-owt-*.pth")):
        return f"unavailable (no local weights: need {lin} and {hub}/alexnet-owt-*.pth)"
    if not frames_available:
        return f"unavailable (needs decoded frames: {NO_VAE})"
    return None


def _lpips(ref: np.ndarray, test: np.ndarray) -> float:
    """Mean LPIPS (AlexNet) over frames of ``[T, H, W, 3]`` in [0, 1]; lpips expects [-1, 1]."""
    import lpips

    net = lpips.LPIPS(net="alex", verbose=False)
    to_t = lambda a: torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).permute(0, 3, 1, 2) * 2 - 1  # noqa: E731
    with torch.no_grad():
        return float(net(to_t(ref), to_t(test)).mean())


def _load_vae(path: str | Path, vae_class: str | None = "AutoencoderKLWan"):
    """A diffusers ``AutoencoderKLWan`` (the family's `Family.vae_class`) from a local folder (or a
    pipeline folder with ``vae/``).

    Raises:
        ReuseError: the family has no VAE decoding here, or the checkpoint does not load.
    """
    if vae_class != "AutoencoderKLWan":
        raise ReuseError("decoded-frame metrics need a Wan VAE: only Wan-family latents are decoded")
    from diffusers import AutoencoderKLWan

    p = Path(path)
    if not p.exists():
        raise ReuseError(f"VAE checkpoint not found: {p}")
    sub = "vae" if (p / "vae" / "config.json").exists() else None
    try:
        vae = AutoencoderKLWan.from_pretrained(p, subfolder=sub, local_files_only=True, low_cpu_mem_usage=False)
    except Exception as err:  # diffusers raises OSError/ValueError/EnvironmentError variants
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ReuseError(f"cannot load a Wan VAE from {p}: {first}") from None
    vae.eval()
    vae.requires_grad_(False)
    return vae


def decode_latents(vae, latents: np.ndarray) -> np.ndarray:
    """Decode normalised latents ``[1, 16, F, H, W]`` with a Wan VAE: frames ``[T, 8H, 8W, 3]`` in [0, 1].

    As diffusers' ``WanPipeline``: ``z = latents * latents_std + latents_mean`` (per channel, from the
    VAE config), ``vae.decode(z)``, output in [-1, 1] clamped and mapped to [0, 1].
    """
    z_dim = int(vae.config.z_dim)
    x = torch.from_numpy(np.asarray(latents, dtype=np.float32)).to(vae.dtype)
    mean = torch.tensor(vae.config.latents_mean, dtype=x.dtype).view(1, z_dim, 1, 1, 1)
    std = torch.tensor(vae.config.latents_std, dtype=x.dtype).view(1, z_dim, 1, 1, 1)
    with torch.no_grad():
        video = vae.decode(x * std + mean, return_dict=False)[0]  # [1, 3, T, H, W]
    frames = ((video.float().clamp(-1, 1) + 1) / 2)[0].permute(1, 2, 3, 0)
    return frames.numpy().astype(np.float64)


def pareto_front(saved: Sequence[float], psnr: Sequence[float]) -> list[int]:
    """Indices of points on the front "max PSNR for a given reuse fraction".

    A point is on the front when no other point saves at least as much with at least the same
    PSNR, one of them strictly more. Returned sorted by saved fraction, ascending.
    """
    idx = []
    for i, (s, p) in enumerate(zip(saved, psnr, strict=True)):
        dominated = any((s2 >= s and p2 >= p) and (s2 > s or p2 > p)
                        for j, (s2, p2) in enumerate(zip(saved, psnr, strict=True)) if j != i)
        if not dominated:
            idx.append(i)
    return sorted(idx, key=lambda i: (saved[i], -psnr[i] if math.isfinite(psnr[i]) else -math.inf))
