"""The video-DiT models capture and quality runs use: the registry of names and sizes, how each is
built (seeded, from a checkpoint, or streamed one block at a time) and its RoPE channel groups
(`algo.models.registry`).

The names below are the package's public API.
"""

from algo.models.registry import (
    DTYPES,
    MODELS,
    SAFETENSORS_FILE,
    SAFETENSORS_INDEX,
    WEIGHTS_INIT,
    CaptureError,
    ModelSpec,
    StreamedBlocks,
    blocks_of,
    build_model,
    build_streamed,
    checkpoint_of,
    family_of,
    get_spec,
    meta_model,
    model_config,
    model_family,
    num_blocks,
    rope_groups,
    rope_split,
)

__all__ = [
    "DTYPES", "MODELS", "SAFETENSORS_FILE", "SAFETENSORS_INDEX", "WEIGHTS_INIT", "CaptureError", "ModelSpec",
    "StreamedBlocks", "blocks_of", "build_model", "build_streamed", "checkpoint_of", "family_of", "get_spec",
    "meta_model", "model_config", "model_family", "num_blocks", "rope_groups", "rope_split",
]
