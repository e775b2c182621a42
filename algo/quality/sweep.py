"""Quality against reuse: one `algo.quality.run` per threshold pair on one shared setup, the Pareto
front of work saved against latent PSNR (its files: `sim.report.quality.write_quality_sweep`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from algo import latents as lat
from algo.capture import DEFAULT_MODEL, DEFAULT_SIZE, SELF_OPS
from algo.quality.metrics import pareto_front
from algo.quality.run import ProgressFn, _run, _theta_table
from algo.quality.setup import DEFAULT_NUM_INFERENCE_STEPS, DEFAULT_STEPS, Setup, torch_threads
from algo.reuse.fake_quant import ReuseError, parse_ops

#: Default sweep thresholds (theta1, theta2), int8 units per channel; (0, 0) is the no-reuse check.
#: Project choice: points around `algo.reuse.thresholds.DEFAULT_THETA` (4, 12) from lossless to mostly
#: REUSE; the quality-sweep tables in docs/results.md use this list.
DEFAULT_SWEEP_THETAS = ((0, 0), (0.5, 2), (1, 4), (2, 6), (2, 8), (4, 12), (4, 16), (6, 20), (8, 24), (12, 32))


def sweep_quality(
    thetas: Sequence[tuple[float, float]] = DEFAULT_SWEEP_THETAS,
    model: str = DEFAULT_MODEL,
    size: str = DEFAULT_SIZE,
    steps: int = DEFAULT_STEPS,
    ops: str | Iterable[str] = SELF_OPS,
    seed: int = 0,
    grid: tuple[int, int, int] | None = None,
    *,
    num_inference_steps: int = DEFAULT_NUM_INFERENCE_STEPS,
    b_msb: int = 4,
    image: str = "astronaut",
    pan_px: int = lat.DEFAULT_PAN_PX,
    shift: float = lat.DEFAULT_SHIFT,
    progress: ProgressFn | None = None,
    threads: int | None = 1,
    weights: str | Path | None = None,
) -> dict:
    """Quality against reuse fraction over a list of (theta1, theta2), one model instance.

    Each theta is one `run_quality` (same theta for every enabled op and step); the float model runs
    once (with the first point) for the int8-vs-float context line.

    Args:
        thetas: pairs ``(theta1, theta2)``, each ``0 <= theta1 <= theta2``.
        other arguments: as `run_quality`.

    Returns:
        ``{"config": ..., "points": [...], "pareto": [indices], "int8_vs_float": ...}``
        (`sim.report.quality.write_quality_sweep` writes its files);
        each point: theta1, theta2, compute/partial/reuse (MAC-weighted), mac_saved, latent_psnr_db,
        latent_ssim, velocity_snr_db, update_snr_db, snr_db and local_snr_db per op.

    Raises:
        ReuseError: no thetas, a bad pair, or as `run_quality`.
    """
    if not thetas:
        raise ReuseError("no thetas given")
    op_list = parse_ops(ops)
    if isinstance(steps, int):
        for t in thetas:
            _theta_table(tuple(t), op_list, [0])
    with torch_threads(threads):
        return _sweep(thetas, op_list, b_msb, progress,
                      Setup(model, size, steps, seed, grid, num_inference_steps, image, pan_px, shift, weights))


def _sweep(thetas, op_list, b_msb, progress, setup: Setup) -> dict:
    per_run = [setup.steps * 3] + [setup.steps * 2] * (len(thetas) - 1)
    total, done = sum(per_run), 0
    points, int8_vs_float = [], None
    for k, t in enumerate(thetas):
        th = (float(t[0]), float(t[1]))
        r = _run(setup, th, op_list, b_msb, None, k == 0, None, progress, done, total)
        done += per_run[k]
        if k == 0:
            int8_vs_float = r["int8_vs_float"]
        fr = r["mac_fractions"]
        points.append({
            "theta1": th[0], "theta2": th[1], **fr, "mac_saved": r["mac_saved_fraction"],
            "latent_psnr_db": r["latents"]["psnr_db"], "latent_ssim": r["latents"]["ssim"],
            "velocity_snr_db": r["velocity_snr_db"], "update_snr_db": r["update_snr_db"],
            **({"frame_psnr_db": r["frames"]["psnr_db"], "frame_ssim": r["frames"]["ssim"]}
               if isinstance(r["frames"], dict) else {}),
            "snr_db": {op: r["per_op"][op]["snr_db"] for op in r["quant_ops"]},
            "local_snr_db": {op: r["per_op"][op]["local_snr_db"] for op in op_list},
        })
    config = {k: v for k, v in r.items() if k in (
        "model", "size", "weights", "seed", "grid", "latent_grid", "tokens", "num_inference_steps", "steps",
        "start_step", "shift", "sigmas", "start", "text", "ops", "quant_ops", "b_msb", "quantisation", "reference")}
    front = pareto_front([p["mac_saved"] for p in points], [p["latent_psnr_db"] for p in points])
    res = {"config": config, "points": points, "pareto": front, "int8_vs_float": int8_vs_float,
           "lpips": r["lpips"], "frames": r["frames"]}
    return res
