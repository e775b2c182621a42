"""Measured output quality of reuse: seeded sampling runs exact vs reuse, θ sweeps and Pareto fronts
(`algo.quality.run`; metrics in `algo.quality.metrics`).

The names below are the package's public API.
"""

from algo.quality.metrics import NO_VAE, frame_metrics, latent_metrics, lpips_status, pareto_front
from algo.quality.run import (
    DEFAULT_STEPS,
    DEFAULT_SWEEP_THETAS,
    PCA_DECODER,
    run_quality,
    sweep_quality,
    to_jsonable,
    weights_label,
    write_sweep,
)

__all__ = [
    "DEFAULT_STEPS", "DEFAULT_SWEEP_THETAS", "NO_VAE", "PCA_DECODER", "frame_metrics", "latent_metrics", "lpips_status",
    "pareto_front", "run_quality", "sweep_quality", "to_jsonable", "weights_label", "write_sweep",
]
