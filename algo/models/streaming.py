"""Block streaming: a model whose transformer blocks are materialised one at a time, seeded (rebuilt
from the RNG state recorded at construction) or read lazily from a safetensors checkpoint
(`build_streamed`, `StreamedBlocks`; docs/decisions.md D27)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

import torch

from algo.models.checkpoints import Checkpoint, _to_dtype
from algo.models.registry import (
    CaptureError,
    _layers_config,
    blocks_of,
    get_spec,
    meta_model,
    num_blocks,
    seeded_weights_description,
)


def _cast(module: torch.nn.Module, dtype: torch.dtype, keep: set[str]) -> None:
    """Cast floating tensors of `module` to `dtype` in place, except those under a submodule named
    in `keep` (the class's ``_keep_in_fp32_modules``), which become float32 (as `_to_dtype`)."""
    for tensors in (module.named_parameters(), module.named_buffers()):
        for name, t in tensors:
            if t.is_floating_point():
                t.data = t.data.to(torch.float32 if keep & set(name.split(".")) else dtype)


@dataclass
class _BlockRecipe:
    """How to rebuild one block: its class, constructor arguments and the torch CPU RNG state at
    the start of its construction inside the model's constructor."""

    cls: type
    args: tuple
    kwargs: dict
    rng_state: torch.Tensor
    module: torch.nn.Module


@contextlib.contextmanager
def _recording_blocks(classes, materialise: bool, recipes: list[_BlockRecipe]):
    """Patch the ``__init__`` of the block classes while a model is constructed: each block records
    a `_BlockRecipe`, is built on the CPU (`materialise`: same RNG draws as an ordinary build) or on
    the meta device (no memory, no RNG draws), and ends on the meta device. Restored on exit."""
    saved = {c: c.__dict__.get("__init__") for c in classes}

    def patched(orig):
        def init(self, *args, **kwargs):
            state = torch.get_rng_state()
            if materialise:
                orig(self, *args, **kwargs)
            else:
                with torch.device("meta"):
                    orig(self, *args, **kwargs)
            self.to(device="meta")  # frees a materialised block at once: one block in memory
            recipes.append(_BlockRecipe(type(self), args, dict(kwargs), state, self))
        return init

    try:
        for c in classes:
            c.__init__ = patched(c.__init__)
        yield
    finally:
        for c, orig in saved.items():
            if orig is None:
                del c.__init__
            else:
                c.__init__ = orig


def _block_prefixes(model: torch.nn.Module) -> list[str]:
    """State-dict prefix of every block in trace order, e.g. ``"blocks.3."``,
    ``"single_transformer_blocks.0."``."""
    names = {id(m): n for n, m in model.named_modules()}
    return [names[id(blk)] + "." for _, blk in blocks_of(model)]


#: State-dict prefixes of the block lists of every family (Wan ``blocks``; Hunyuan and CogVideoX
#: ``transformer_blocks``, Hunyuan ``single_transformer_blocks``; diffusers 0.42.1 attribute names).
_BLOCK_LISTS = ("blocks.", "transformer_blocks.", "single_transformer_blocks.")


_LIBC = []


def _release_freed_memory() -> None:
    """Return freed heap memory to the OS: glibc ``malloc_trim(0)`` (a no-op where there is none).

    Without it, a freed block's tensors below glibc's mmap threshold (up to 32 MB, e.g. a 3072 x
    3072 bf16 weight of 18.9 MB) stay in the heap, fragmented: RSS grew by about 144 MB per
    streamed full-size HunyuanVideo block (measured, 2026-11-29), 3 GB over 21 blocks."""
    if not _LIBC:
        import ctypes

        try:
            _LIBC.append(ctypes.CDLL("libc.so.6").malloc_trim)
        except (OSError, AttributeError):
            _LIBC.append(None)
    if _LIBC[0] is not None:
        _LIBC[0](0)


class StreamedBlocks:
    """Run a model whose transformer blocks are materialised one at a time (D27: Wan2.1-14B is
    28 GB and HunyuanVideo 26 GB in bf16).

    Every block (`blocks_of`: Wan ``blocks``, Hunyuan ``transformer_blocks`` then
    ``single_transformer_blocks``, CogVideoX ``transformer_blocks``) stays on the meta device. A
    forward pre-hook fills block b just before it runs, ``load_state_dict(..., assign=True)`` with
    the tensors of `source` (b), casts them like `_to_dtype`, and a forward hook returns the block
    to the meta device after it ran, so at most one block's weights are in memory.

    Attributes:
        max_live: most blocks holding real tensors at once, seen in any pre-hook (1 when streaming works).
        built, freed: per trace block, how many times it was materialised / returned to meta.
    """

    def __init__(self, model: torch.nn.Module, source, dtype: torch.dtype):
        self.max_live = 0
        self._blocks = [blk for _, blk in blocks_of(model)]
        self.built = [0] * len(self._blocks)
        self.freed = [0] * len(self._blocks)
        self._keep = set(getattr(type(model), "_keep_in_fp32_modules", None) or ())
        self._handles = []
        for b, blk in enumerate(self._blocks):
            self._handles.append(blk.register_forward_pre_hook(self._build(b, source, dtype)))
            self._handles.append(blk.register_forward_hook(self._free(b)))

    def _build(self, b, source, dtype):
        def hook(module, _args):
            module.load_state_dict(source(b), strict=True, assign=True)
            _cast(module, dtype, self._keep)
            self.built[b] += 1
            live = sum(any(not p.is_meta for p in blk.parameters()) for blk in self._blocks)
            self.max_live = max(self.max_live, live)
        return hook

    def _free(self, b):
        def hook(module, _args, _out):
            module.to(device="meta")
            _release_freed_memory()
            self.freed[b] += 1
        return hook

    def release(self) -> None:
        """Remove the hooks and return every block to the meta device."""
        for h in self._handles:
            h.remove()
        for blk in self._blocks:
            blk.to(device="meta")


def build_streamed(name: str, size: str, seed: int = 0, dtype: torch.dtype | None = None,
                   num_layers: int | None = None, *, weights: str | Path | None = None,
                   ) -> tuple[torch.nn.Module, str, StreamedBlocks]:
    """A model of any family whose non-block parts are in memory and whose blocks are meta-device
    shells filled one at a time when they run (`StreamedBlocks`; docs/decisions.md D27).

    The model is constructed exactly as `build_model` does (``torch.manual_seed(seed)`` then the
    diffusers class with the first `num_layers` trace blocks), with each block class's ``__init__``
    wrapped (`_recording_blocks`) so that every block is moved to the meta device as soon as it is
    constructed, after recording its constructor arguments and the torch RNG state at its start.

    - Seeded (`weights` None): blocks are constructed on the CPU during the build (same random
      draws as an ordinary build, so the non-block parts are identical), then freed; block b is
      rebuilt from its recorded RNG state when it runs. The streamed weights therefore equal
      `build_model`'s bit for bit (`WEIGHTS_INIT`), at the cost of initialising each block once at
      build time and once per forward pass.
    - Checkpoint (`weights`: a diffusers folder with ``diffusion_pytorch_model.safetensors`` or its
      sharded index, or one ``.safetensors`` file, same keys as `build_model` loads): blocks are
      constructed on the meta device; keys and shapes are checked against the full model from the
      file headers; the non-block tensors are read once; block b's tensors (its state-dict prefix,
      e.g. ``blocks.3.``) are read with ``safe_open`` when it runs. Peak memory: non-block
      parameters plus one block (float32 while loading), never the whole checkpoint.

    Args:
        name, size, seed, dtype, num_layers: as `build_model` (`num_layers`: blocks built, None all).
        weights: None (seeded) or a checkpoint path as above.

    Returns:
        ``(model, weights, streamer)``: `weights` is the `build_model` description plus how blocks
        are streamed; call ``streamer.release()`` when done.

    Raises:
        CaptureError: as `build_model`; a folder without safetensors weights (``.bin`` only).
    """
    import diffusers

    spec = get_spec(name, size)
    cls = getattr(diffusers, spec.diffusers_class)
    run_dtype = dtype or spec.dtype.get(size, torch.float32)
    full_layers = num_blocks(name, size)
    n = full_layers if num_layers is None else int(num_layers)
    if not 1 <= n <= full_layers:
        raise CaptureError(f"num_layers must be in 1..{full_layers}, got {num_layers}")
    ckpt = None
    if weights is not None:
        path = Path(weights).expanduser().resolve()
        if not path.exists():
            raise CaptureError(f"--weights: checkpoint not found: {path}")
        ckpt = Checkpoint(path, spec, size)
    classes = {type(blk) for _, blk in blocks_of(meta_model(name, size))}
    recipes: list[_BlockRecipe] = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        with _recording_blocks(classes, ckpt is None, recipes):
            model = cls(**_layers_config(spec, size, n))
    order = {id(r.module): r for r in recipes}
    blocks = blocks_of(model)
    if len(recipes) != len(blocks) or any(id(blk) not in order for _, blk in blocks):
        raise CaptureError(f"{spec.diffusers_class}: block construction was not recorded as expected")
    prefixes = _block_prefixes(model)
    if ckpt is None:
        desc = seeded_weights_description(seed, model).replace("; no checkpoint", "")
        if n != full_layers:
            desc += f"; blocks 0..{n - 1} of {full_layers} built"
        desc += ("; streamed: each block rebuilt from its recorded RNG state just before it runs "
                 "(same weights as unstreamed); no checkpoint")
        recipe_of = [order[id(blk)] for _, blk in blocks]

        def source(b: int) -> dict:
            r = recipe_of[b]
            with torch.random.fork_rng(devices=[]):
                torch.set_rng_state(r.rng_state)
                return r.cls(*r.args, **r.kwargs).state_dict()
    else:
        non_block = [k for k in model.state_dict() if not k.startswith(_BLOCK_LISTS)]
        missing = set(non_block) - set(ckpt.keys)
        if missing:  # cannot happen after the full-model check; guards a changed diffusers class
            raise CaptureError(f"--weights {ckpt.path}: missing keys {sorted(missing)[:3]}")
        res = model.load_state_dict(ckpt.tensors(non_block), strict=False)
        if res.unexpected_keys:
            raise CaptureError(f"--weights {ckpt.path}: unexpected keys {res.unexpected_keys[:3]}")
        desc = ckpt.desc + "; streamed: each block's tensors read from the checkpoint just before it runs"
        block_keys = [[k for k in ckpt.keys if k.startswith(p)] for p in prefixes]

        def source(b: int) -> dict:
            p = prefixes[b]
            return {k[len(p):]: t for k, t in ckpt.tensors(block_keys[b]).items()}
    model = _to_dtype(model, run_dtype)
    model.eval()
    model.requires_grad_(False)
    streamer = StreamedBlocks(model, source, run_dtype)
    streamer.checkpoint = ckpt
    return model, desc, streamer
