"""Exceptions of `algo` that modules below the model registry raise too.

`CaptureError` belongs to trace capture (`algo.models.registry` re-exports it, the public name is
``algo.models.CaptureError``); it lives here, in a module without imports, so that a module the
registry depends on (`algo.train.patch_pca`'s `TransformError`, reached from `algo.latents`) can
subclass it without importing `algo.models` (and torch): no import cycle algo.latents -> algo.train
-> algo.models -> algo.latents.
"""

from __future__ import annotations


class CaptureError(ValueError):
    """Trace capture cannot run as asked: unknown model or size, bad grid, steps or thresholds."""
