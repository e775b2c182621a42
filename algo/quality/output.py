"""What quality runs' files are made of: plain-JSON conversion of results, labels and captions. The θ
sweep's CSV, JSON and figure are written by `sim.report.quality.write_quality_sweep` (figures live
in `sim.report`; `algo` writes no figure).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def to_jsonable(obj):
    """Plain JSON types: numpy scalars/arrays to Python, tuples to lists, non-finite floats to
    the strings ``"inf"``, ``"-inf"``, ``"nan"`` (strict JSON has no infinity)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else ("nan" if math.isnan(f) else ("inf" if f > 0 else "-inf"))
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


def _fmt(v: float, nd: int = 2) -> str:
    return f"{v:.{nd}f}" if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def weights_label(weights: str, seed: int) -> str:
    """``weights seeded, untrained (seed N)`` or ``weights trained (checkpoint NAME)``, from a weights description."""
    if str(weights).startswith("seeded"):
        return f"weights seeded, untrained (seed {seed})"
    return f"weights trained (checkpoint {Path(str(weights).split(': ', 1)[-1]).name})"


def caption(config: dict) -> str:
    """One-line figure caption: model, size, weights, steps, grid, seed, reference."""
    shift = config["shift"]
    sampler = "DDIM" if shift is None else "Euler"
    sched = f"{config['num_inference_steps']}" + ("" if shift is None else f", shift {shift:g}")
    return (f"{config['model']} ({config['size']}), {weights_label(config['weights'], config['seed'])}; "
            f"{config['steps']} {sampler} steps (last {config['steps']} of {sched}) from noised real-image latents; "
            f"grid {'x'.join(map(str, config['grid']))} tokens; ops {','.join(config['ops'])}; "
            "reference: int8 run without reuse")
