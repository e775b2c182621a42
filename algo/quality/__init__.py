"""Measured output quality of reuse: seeded sampling runs exact vs reuse (`algo.quality.run`, on one
`algo.quality.setup.Setup`), θ sweeps and Pareto fronts (`algo.quality.sweep`), their files
(`algo.quality.output`); metrics in `algo.quality.metrics`.

The names below are the package's public API.
"""

from algo.quality.metrics import NO_VAE, frame_metrics, latent_metrics, lpips_status, pareto_front
from algo.quality.output import to_jsonable, weights_label
from algo.quality.run import PCA_DECODER, run_quality
from algo.quality.setup import DEFAULT_STEPS
from algo.quality.sweep import DEFAULT_SWEEP_THETAS, sweep_quality

__all__ = [
    "DEFAULT_STEPS", "DEFAULT_SWEEP_THETAS", "NO_VAE", "PCA_DECODER", "frame_metrics", "latent_metrics", "lpips_status",
    "pareto_front", "run_quality", "sweep_quality", "to_jsonable", "weights_label",
]
