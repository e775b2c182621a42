"""The video-DiT models capture and quality runs use: the registry of names and sizes, how each is
built and its RoPE channel groups: `registry` (names, sizes, specs, blocks, RoPE), `families/` (one
plugin module per model family), `schedules` (noise schedules), `checkpoints` (seeded or checkpoint
weights), `streaming` (one block in memory at a time).

The names below are the package's public API.
"""

from algo.models.checkpoints import (
    SAFETENSORS_FILE,
    SAFETENSORS_INDEX,
    Checkpoint,
    build_model,
    checkpoint_of,
)
from algo.models.registry import (
    DTYPES,
    MODELS,
    WEIGHTS_INIT,
    CaptureError,
    ModelSpec,
    blocks_of,
    family_of,
    get_spec,
    meta_model,
    model_config,
    model_family,
    num_blocks,
    rope_groups,
    rope_split,
    seeded_weights_description,
)
from algo.models.streaming import StreamedBlocks, build_streamed

__all__ = [
    "DTYPES", "MODELS", "SAFETENSORS_FILE", "SAFETENSORS_INDEX", "WEIGHTS_INIT", "CaptureError", "Checkpoint", "ModelSpec",
    "StreamedBlocks", "blocks_of", "build_model", "build_streamed", "checkpoint_of", "family_of", "get_spec",
    "meta_model", "model_config", "model_family", "num_blocks", "rope_groups", "rope_split",
    "seeded_weights_description",
]
