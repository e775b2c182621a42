"""The video-DiT models capture and quality runs use: the registry of names and sizes, how each is
built and its RoPE channel groups: `registry` (names, sizes, specs, blocks, RoPE), `families/` (one
plugin module per model family), `schedules` (noise schedules), `checkpoints` (seeded or checkpoint
weights), `streaming` (one block in memory at a time).

The names below are the package's public API. They are imported on first use (PEP 562 ``__getattr__``):
``import algo.models.families`` (or `algo.models.families.model_names`) loads neither the registry nor
torch, so a bad model name is answered before torch loads (``kaleido synth --model nosuch``).
"""

from __future__ import annotations

import importlib

#: Public name -> the submodule that defines it.
_HOMES = {
    **dict.fromkeys(("SAFETENSORS_FILE", "SAFETENSORS_INDEX", "Checkpoint", "build_model", "checkpoint_of"),
                    "algo.models.checkpoints"),
    **dict.fromkeys(("DTYPES", "MODELS", "WEIGHTS_INIT", "CaptureError", "ModelSpec", "blocks_of", "family_of",
                     "get_spec", "meta_model", "model_config", "model_family", "num_blocks", "rope_groups",
                     "rope_split", "seeded_weights_description"), "algo.models.registry"),
    **dict.fromkeys(("StreamedBlocks", "build_streamed"), "algo.models.streaming"),
}

__all__ = sorted(_HOMES, key=lambda n: (n[0].islower(), n))


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOMES))
