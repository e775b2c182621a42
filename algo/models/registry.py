"""Registry of the video-DiT models trace capture can run, and how to build each one.

A model is named by ``(name, size)``; ``size`` picks a configuration of the same architecture:
``full`` (the published diffusers ``transformer/config.json``) or ``tiny`` (project choice, the
same structure shrunk for tests and demos). The models, their configs and everything else
family-specific (blocks, hooks, RoPE, schedule, inputs) live in one module per family
(`algo.models.families`: ``wan2.1-t2v-1.3b`` and ``wan2.1-t2v-14b`` in `algo.models.families.wan`,
``hunyuanvideo`` in `algo.models.families.hunyuan`, ``cogvideox-5b`` in
`algo.models.families.cogvideox`); `MODELS` collects their rows.

No hub access exists, so weights are seeded: ``torch.manual_seed(seed)`` right before construction,
then diffusers' default initialisation, i.e. PyTorch's module defaults (`WEIGHTS_INIT`). The global
torch RNG state of the caller is restored afterwards. Checkpoints load from a diffusers folder or a
``.safetensors`` file (`build_model`); `build_streamed` holds one block in memory at a time.

RoPE channel groups (`rope_groups`) are read from the model's own rotary code (the family's
`Family.rope_split`). Per docs/spec.md section 2, t-channels are reused spatially (axis ``"w"``: the
previous token along width) and h/w-channels temporally (axis ``"f"``: same position in the previous
frame).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch

from algo.models.families import FAMILIES, Family, family_of_class
from algo.models.families.wan import WAN_SMALL
from algo.trace import Group


class CaptureError(ValueError):
    """Trace capture cannot run as asked: unknown model or size, bad grid, steps or thresholds."""


#: The trace's ``weights`` field for seeded models; ``{seed}`` is filled in.
WEIGHTS_INIT = (
    "seeded: torch.manual_seed({seed}) before construction, diffusers default init "
    "(nn.Linear/nn.Conv3d kaiming-uniform a=sqrt(5), bias U(+-1/sqrt(fan_in)); norms weight 1, "
    "bias 0; scale_shift_table randn/sqrt(d)); no checkpoint"
)


@dataclass(frozen=True)
class ModelSpec:
    """One supported model: its diffusers class and a config per size.

    Attributes:
        name: registry name (lower case).
        diffusers_class: attribute name of the class in the ``diffusers`` package.
        source: where the ``full`` config comes from.
        sizes: size name -> keyword arguments of the diffusers class constructor.
        default_grid: size name -> default token grid ``(F, H, W)`` for capture (after patching).
        dtype: size name -> torch dtype the model runs in.
    """

    name: str
    diffusers_class: str
    source: str
    sizes: dict[str, dict]
    default_grid: dict[str, tuple[int, int, int]]
    dtype: dict[str, torch.dtype] = field(default_factory=dict)
    #: ``"wan"``, ``"hunyuan"`` or ``"cogvideox"``: how capture hooks and feeds the model.
    family: str = "wan"
    #: size name -> latent encoder of capture and quality inputs: ``"standin"`` (default,
    #: `algo.latents.encode_clip`) or ``"patch_pca"`` (`algo.train.patch_pca`, with the class
    #: prompt of the image as text, `algo.train.clips.class_text`).
    latents: dict[str, str] = field(default_factory=dict)


# Token grids (F, H, W) after the patch, the same for every model. tiny: latent 4x16x16 (128x128
# px, 13 video frames). full: the same small grid by default, because an exact trace stores P
# (heads x M x M bytes per block and step); 480p is 21x30x52 tokens (SPEC section 1).
_DEFAULT_GRID = {"tiny": (4, 8, 8), "full": (4, 8, 8)}
_DEFAULT_DTYPE = {"tiny": torch.float32, "full": torch.float32}

#: Every family's models (`algo.models.families`: one module per family holds its rows).
MODELS: dict[str, ModelSpec] = {
    row.name: ModelSpec(name=row.name, diffusers_class=row.diffusers_class,
                        source=f"{row.repo} transformer/config.json", sizes={"full": row.full, "tiny": row.tiny},
                        default_grid=dict(_DEFAULT_GRID), dtype=dict(_DEFAULT_DTYPE), family=fam.name)
    for fam in FAMILIES.values() for row in fam.models
}
# The trained size (algo.train): same class, its own latents (patch PCA) and class prompts.
MODELS["wan2.1-t2v-1.3b"].sizes["small"] = WAN_SMALL
MODELS["wan2.1-t2v-1.3b"].default_grid["small"] = (4, 8, 8)
MODELS["wan2.1-t2v-1.3b"].dtype["small"] = torch.float32
MODELS["wan2.1-t2v-1.3b"].latents["small"] = "patch_pca"


def family_of(spec: ModelSpec) -> Family:
    """The family plugin of a registry entry (`algo.models.families`)."""
    return FAMILIES[spec.family]


def _valid_names() -> str:
    return ", ".join(f"{n} (sizes: {', '.join(sorted(s.sizes))})" for n, s in sorted(MODELS.items()))


def get_spec(name: str, size: str) -> ModelSpec:
    """The registry entry for ``name``, checking that ``size`` exists.

    Raises:
        CaptureError: unknown name or size; the message lists the valid ones.
    """
    spec = MODELS.get(str(name).lower())
    if spec is None:
        raise CaptureError(f"unknown model {name!r}; supported models: {_valid_names()}")
    if size not in spec.sizes:
        raise CaptureError(
            f"model {spec.name!r} has no size {size!r}; valid sizes: {', '.join(sorted(spec.sizes))}"
        )
    return spec


def model_config(name: str, size: str) -> dict:
    """Constructor keyword arguments of the diffusers class for ``(name, size)`` (a copy)."""
    return dict(get_spec(name, size).sizes[size])


#: ``--dtype`` names -> torch dtypes capture can run in.
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

#: Config keys a checkpoint must agree on with the registered size (architecture, not runtime).
_ARCH_KEYS = ("num_attention_heads", "attention_head_dim", "num_layers", "ffn_dim", "in_channels",
              "out_channels", "text_dim", "freq_dim", "patch_size", "qk_norm", "cross_attn_norm",
              "num_single_layers", "num_refiner_layers", "mlp_ratio", "patch_size_t", "text_embed_dim",
              "pooled_projection_dim", "rope_axes_dim", "time_embed_dim", "use_rotary_positional_embeddings")


def num_blocks(name: str, size: str) -> int:
    """Transformer blocks of ``(name, size)`` as the trace numbers them (Hunyuan: dual + single)."""
    spec = get_spec(name, size)
    return family_of(spec).num_blocks(spec.sizes[size])


def _layers_config(spec: ModelSpec, size: str, n: int) -> dict:
    """Constructor arguments building only the first ``n`` trace blocks (construction order)."""
    return family_of(spec).layers_config(dict(spec.sizes[size]), n)


def blocks_of(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module]]:
    """The transformer blocks in trace order, each as ``(kind, module)`` (the family's `Family.blocks`).

    kind: ``"wan"`` (`WanTransformerBlock`), ``"dual"`` / ``"single"`` (Hunyuan dual-stream /
    single-stream blocks) or ``"cogvideox"`` (`CogVideoXBlock`).

    Raises:
        CaptureError: a model of no registered family.
    """
    return model_family(model).blocks(model)


def model_family(model: torch.nn.Module) -> Family:
    """The family plugin of a built model, from its class.

    Raises:
        CaptureError: a model of no registered family.
    """
    fam = family_of_class(type(model).__name__)
    if fam is None:
        raise CaptureError(f"{type(model).__name__} is not a model of any family in algo.models.families")
    return fam


def _to_dtype(model: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """Cast to `dtype`, keeping the class's ``_keep_in_fp32_modules`` (Wan: rope, time_embedder,
    scale_shift_table, norm1/2/3) in float32, as diffusers' ``from_pretrained(torch_dtype=...)`` does."""
    if dtype == torch.float32:
        return model
    keep = set(getattr(type(model), "_keep_in_fp32_modules", None) or ())
    for tensors in (model.named_parameters(), model.named_buffers()):
        for name, t in tensors:
            if t.is_floating_point() and not keep & set(name.split(".")):
                t.data = t.data.to(dtype)  # per tensor: Module.to() would warn about the fp32 modules
    return model


def _check_config(found: dict, spec: ModelSpec, size: str, where: str) -> None:
    want = spec.sizes[size]
    bad = [f"{k} {found.get(k)!r} != {want[k]!r}" for k in _ARCH_KEYS
           if k in want and _norm(found.get(k)) != _norm(want[k])]
    if bad:
        raise CaptureError(f"checkpoint {where} does not match {spec.name} ({size}): " + "; ".join(bad))


def _norm(v):
    return list(v) if isinstance(v, (list, tuple)) else v


def _folder_root(spec: ModelSpec, size: str, path: Path) -> Path:
    """The folder holding the transformer's ``config.json`` and weights (`path` or ``path/transformer``),
    after checking that config against ``(spec, size)``.

    Raises:
        CaptureError: no or unreadable ``config.json``, another class, or an architecture mismatch.
    """
    return path / (_folder_config(spec, size, path) or "")


def _safetensors_kind(path: Path, root: Path) -> str:
    """``"index"`` (sharded) or ``"single"``: which safetensors weights the model folder `root` of
    ``--weights path`` holds (`SAFETENSORS_INDEX`, `SAFETENSORS_FILE`).

    Raises:
        CaptureError: neither (e.g. ``.bin`` pickles only, which are never loaded: they can run code).
    """
    if (root / SAFETENSORS_INDEX).is_file():
        return "index"
    if (root / SAFETENSORS_FILE).is_file():
        return "single"
    raise CaptureError(f"--weights {path}: needs safetensors weights: no {SAFETENSORS_FILE} or {SAFETENSORS_INDEX} "
                       f"in {root} (.bin pickles are not loaded: they can run code)")


def _folder_config(spec: ModelSpec, size: str, path: Path) -> str | None:
    """Check a diffusers folder's config; returns the subfolder (None or ``"transformer"``)."""
    import json

    sub = None
    if not (path / "config.json").is_file() and (path / "transformer" / "config.json").is_file():
        sub = "transformer"
    cfg_file = path / (sub or "") / "config.json"
    if not cfg_file.is_file():
        raise CaptureError(f"--weights {path}: no config.json (nor transformer/config.json): not a diffusers "
                           "model folder")
    try:
        found = json.loads(cfg_file.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise CaptureError(f"--weights {path}: unreadable config.json ({err})") from None
    if found.get("_class_name") not in (None, spec.diffusers_class):
        raise CaptureError(f"--weights {path}: holds a {found.get('_class_name')}, expected {spec.diffusers_class}")
    _check_config(found, spec, size, str(path))
    return sub


def _load_folder(cls, spec: ModelSpec, size: str, path: Path) -> tuple[torch.nn.Module, str]:
    """A diffusers-format folder: ``config.json`` + safetensors weights (one file or an index of shards), or a
    pipeline folder with ``transformer/``.

    Raises:
        CaptureError: no safetensors weights (``.bin`` pickles are refused), a config that is not the
            model's, or weights diffusers cannot load.
    """
    sub = _folder_config(spec, size, path)
    _safetensors_kind(path, path / (sub or ""))
    from diffusers.utils import logging as dlog

    level = dlog.get_verbosity()
    dlog.set_verbosity_error()  # diffusers' own fetch/serialisation chatter; errors still raise
    try:
        model = cls.from_pretrained(str(path), subfolder=sub, local_files_only=True, use_safetensors=True)
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "low_cpu_mem_usage" in msg:
            msg += "; diffusers needs the `accelerate` package to load this class (pip install accelerate)"
        raise CaptureError(f"--weights {path}: cannot load the diffusers checkpoint ({msg})") from None
    finally:
        dlog.set_verbosity(level)
    # A sharded folder leaves tensors as views into the memory-mapped shards at any 8-byte offset;
    # MKL's float32 GEMM rounds differently for differently aligned operands (measured: Q of a tiny
    # Wan differed in the last bit between the single-file and the sharded folder of one model).
    # Misaligned tensors are copied into fresh, 64-byte aligned memory (PyTorch's CPU allocator), as
    # every other loader's tensors are.
    for tensors in (model.parameters(), model.buffers()):
        for t in tensors:
            if t.data_ptr() % 64:
                t.data = t.data.clone()
    return model, f"checkpoint (diffusers folder): {path}"


def _check_keys(path, spec, size: str, shapes: Mapping[str, tuple]) -> None:
    """Strict check of a checkpoint's ``{key: shape}`` against the full model's (built on the meta
    device: no memory).

    Raises:
        CaptureError: missing, unexpected or wrong-shape keys (up to three of each named).
    """
    own = {k: tuple(v.shape) for k, v in meta_model(spec.name, size).state_dict().items()}
    missing, unexpected = sorted(set(own) - set(shapes)), sorted(set(shapes) - set(own))
    wrong = sorted(k for k in set(own) & set(shapes) if own[k] != tuple(shapes[k]))
    parts = []
    for label, keys in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong)):
        if keys:
            extra = f" (+{len(keys) - 3} more)" if len(keys) > 3 else ""
            detail = [f"{k} {list(shapes[k])} vs {list(own[k])}" for k in keys[:3]] \
                if label == "wrong shape" else keys[:3]
            parts.append(f"{label} keys {', '.join(detail)}{extra}")
    if parts:
        raise CaptureError(f"--weights {path}: state dict does not match {spec.name} ({size}): " + "; ".join(parts))


def _check_file_config(path: Path, spec: ModelSpec, size: str) -> None:
    """A safetensors file may carry its diffusers config as JSON in the header metadata (``"config"``,
    as `algo.train` writes it): check its class and architecture against ``(spec, size)``.

    Raises:
        CaptureError: unreadable config JSON, another class, or an architecture mismatch (named).
    """
    import json

    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as fh:
        meta = fh.metadata() or {}
    if "config" not in meta:
        return
    try:
        found = json.loads(meta["config"])
        if not isinstance(found, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:
        raise CaptureError(f"--weights {path}: unreadable config in the safetensors metadata ({err})") from None
    if found.get("_class_name") not in (None, spec.diffusers_class):
        raise CaptureError(f"--weights {path}: holds a {found.get('_class_name')}, expected {spec.diffusers_class}")
    _check_config(found, spec, size, str(path))


def _load_safetensors(model: torch.nn.Module, spec: ModelSpec, size: str, path: Path,
                      num_layers: int) -> str:
    """Load a diffusers-keyed state dict from one safetensors file into `model` (strict)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        sd = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise CaptureError(f"--weights {path}: not a readable safetensors file ({err})") from None
    _check_file_config(path, spec, size)
    full_layers = int(spec.sizes[size]["num_layers"])
    prefix = family_of(spec).block_prefix
    if prefix is not None:
        present = {int(k[len(prefix):].split(".")[0]) for k in sd if k.startswith(prefix)}
        if present and present != set(range(full_layers)):
            raise CaptureError(f"--weights {path}: holds blocks {min(present)}..{max(present)} "
                               f"({len(present)} blocks), {spec.name} ({size}) has {full_layers}")
    # Strict check against the full model's keys and shapes (meta device: no memory), then load
    # the tensors of the blocks that were built.
    _check_keys(path, spec, size, {k: tuple(v.shape) for k, v in sd.items()})
    built = set(model.state_dict())
    model.load_state_dict({k: v for k, v in sd.items() if k in built}, strict=True)
    return f"checkpoint (safetensors file): {path}"


#: Prefixes of the trace ``weights`` descriptions of checkpoints (`build_model`, `build_streamed`).
_CHECKPOINT_DESCS = ("checkpoint (safetensors file): ", "checkpoint (diffusers folder): ")


def checkpoint_of(weights: str) -> Path | None:
    """The checkpoint path a trace's ``weights`` description names (None for seeded weights).

    Raises:
        CaptureError: the description names a checkpoint that no longer exists.
    """
    for prefix in _CHECKPOINT_DESCS:
        if str(weights).startswith(prefix):
            path = Path(str(weights)[len(prefix):].split("; ")[0])
            if not path.exists():
                raise CaptureError(f"the trace was captured from checkpoint {path}, which is not found")
            return path
    return None


def build_model(name: str, size: str, seed: int = 0, *, weights: str | Path | None = None,
                dtype: torch.dtype | None = None, num_layers: int | None = None,
                ) -> tuple[torch.nn.Module, str]:
    """Construct the model, in eval mode, gradients off, with seeded or checkpoint weights.

    Args:
        name: registry name, e.g. ``"wan2.1-t2v-1.3b"``.
        size: ``"tiny"`` or ``"full"``.
        seed: ``torch.manual_seed`` value used right before construction (seeded weights).
        weights: None (seeded, `WEIGHTS_INIT`); a local diffusers-format folder (``config.json``
            and weights, or a pipeline folder with ``transformer/``), loaded with
            ``from_pretrained(path, local_files_only=True)`` after its config is checked against the
            size's; or one ``.safetensors`` file holding a diffusers-keyed state dict, loaded
            strictly into the model built from the size's config.
        dtype: run dtype (None: the registry's, float32); `_keep_in_fp32_modules` stay float32.
        num_layers: build only the first n trace blocks (None: all; Hunyuan counts dual then
            single-stream blocks). Seeded blocks are identical to the full model's first n
            (construction order: embeddings, rope, blocks 0, 1, ...); a safetensors checkpoint
            must still hold every block. Not with a folder.

    Returns:
        ``(model, weights)``: the diffusers module and the description of its weights for the
        trace's ``weights`` field (seeded: `WEIGHTS_INIT`; checkpoint: its format and absolute path).

    Raises:
        CaptureError: unknown name or size; a missing path, unreadable file or a checkpoint whose
            config or tensors do not match ``(name, size)``.
    """
    import diffusers

    spec = get_spec(name, size)
    cls = getattr(diffusers, spec.diffusers_class)
    full_layers = num_blocks(name, size)
    n = full_layers if num_layers is None else int(num_layers)
    if not 1 <= n <= full_layers:
        raise CaptureError(f"num_layers must be in 1..{full_layers}, got {num_layers}")
    cfg = _layers_config(spec, size, n)
    path = None if weights is None else Path(weights).expanduser().resolve()
    if path is not None and not path.exists():
        raise CaptureError(f"--weights: checkpoint not found: {path}")
    if path is not None and path.is_dir():
        if n != full_layers:
            raise CaptureError("a diffusers folder checkpoint loads every block (num_layers must be None)")
        model, desc = _load_folder(cls, spec, size, path)
    else:
        if path is not None and path.suffix != ".safetensors":
            raise CaptureError(f"--weights {path}: expected a diffusers folder or a .safetensors file")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            model = cls(**cfg)
        desc = WEIGHTS_INIT.format(seed=int(seed))
        if path is not None:
            desc = _load_safetensors(model, spec, size, path, n)
        elif n != full_layers:
            desc += f"; blocks 0..{n - 1} of {full_layers} built"
    model = _to_dtype(model, dtype or spec.dtype.get(size, torch.float32))
    model.eval()
    model.requires_grad_(False)
    return model, desc


def meta_model(name: str, size: str) -> torch.nn.Module:
    """The model built on the meta device (shapes only: no memory, no initialisation cost)."""
    import diffusers

    spec = get_spec(name, size)
    with torch.device("meta"):
        return getattr(diffusers, spec.diffusers_class)(**spec.sizes[size])


def rope_split(model: torch.nn.Module) -> tuple[int, int, int]:
    """The RoPE t/h/w channel counts of one head, read from the model's own rotary code.

    The family's `Family.rope_split`: Wan ``model.rope.t_dim/h_dim/w_dim`` (`WanRotaryPosEmbed`);
    Hunyuan ``model.rope.rope_dim`` (`HunyuanVideoRotaryPosEmbed`); CogVideoX (no rotary module):
    the tables of `algo.models.families.cogvideox.rotary_emb` on a 2x2x2 grid, a channel belonging
    to the axis along which its cosine changes.

    Raises:
        CaptureError: no known rotary module, or dims that do not partition the head dim.
    """
    fam = family_of_class(type(model).__name__)
    try:
        t, h, w, d_h = fam.rope_split(model) if fam is not None else (None,) * 4
    except (AttributeError, ValueError) as err:
        raise CaptureError(f"{type(model).__name__}: {err}") from None
    if fam is None:
        raise CaptureError(f"{type(model).__name__} has no known rotary module (Wan model.rope.t_dim, "
                           "Hunyuan model.rope.rope_dim, CogVideoX get_3d_rotary_pos_embed)")
    if min(t, h, w) <= 0 or t + h + w != d_h:
        raise CaptureError(f"RoPE split t/h/w = {t}/{h}/{w} does not partition head dim {d_h}")
    return t, h, w


def rope_groups(model: torch.nn.Module) -> list[Group]:
    """The qk channel groups of one head, from the model's own rotary module (`rope_split`).

    Returns:
        ``[Group(0, t, "w", "t"), Group(t, t+h, "f", "h"), Group(t+h, d_h, "f", "w")]``:
        t-channels reused along width (spatial), h/w-channels along frames (temporal); 44/42/42 for
        Wan at d_h = 128, 12/10/10 for d_h = 32; Hunyuan 16/56/56; CogVideoX-5B 16/24/24.

    Raises:
        CaptureError: the model has no known rotary module or its dims do not add up.
    """
    t, h, w = rope_split(model)
    return [Group(0, t, "w", "t"), Group(t, t + h, "f", "h"), Group(t + h, t + h + w, "f", "w")]


#: File names of a diffusers model folder's safetensors weights (diffusers ``SAFETENSORS_WEIGHTS_NAME``
#: and ``SAFE_WEIGHTS_INDEX_NAME``, 0.42.1): one file, or shards listed by the index's ``weight_map``.
SAFETENSORS_FILE = "diffusion_pytorch_model.safetensors"
SAFETENSORS_INDEX = "diffusion_pytorch_model.safetensors.index.json"


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


class _Checkpoint:
    """Lazy reader of a diffusers-keyed safetensors checkpoint: a folder (single file or shards
    with an index) or one ``.safetensors`` file. Opening reads only the headers (keys, shapes);
    `tensors` reads the named tensors with ``safetensors.safe_open`` (memory-mapped, only those
    tensors' bytes are read).

    Raises:
        CaptureError: no safetensors weights, unreadable index or file, or keys / shapes that do
            not match the full model of ``(spec, size)`` (missing, unexpected, wrong shape: named).
    """

    def __init__(self, path: Path, spec: ModelSpec, size: str):
        import json

        from safetensors import SafetensorError, safe_open

        self.path = path
        if path.is_dir():
            root = _folder_root(spec, size, path)
            if _safetensors_kind(path, root) == "index":
                try:
                    wmap = json.loads((root / SAFETENSORS_INDEX).read_text())["weight_map"]
                    self.file_of = {str(k): root / str(v) for k, v in wmap.items()}
                except (OSError, ValueError, KeyError, TypeError, AttributeError) as err:
                    raise CaptureError(f"--weights {path}: unreadable {SAFETENSORS_INDEX} ({err})") from None
                files = sorted(set(self.file_of.values()))
            else:
                self.file_of, files = None, [root / SAFETENSORS_FILE]
            self.desc = f"checkpoint (diffusers folder): {path}"
        else:
            if path.suffix != ".safetensors":
                raise CaptureError(f"--weights {path}: expected a diffusers folder or a .safetensors file")
            files, self.file_of = [path], None
            self.desc = f"checkpoint (safetensors file): {path}"
        shapes: dict[str, tuple] = {}
        for f in files:
            try:
                with safe_open(str(f), framework="pt") as fh:
                    for k in fh.keys():
                        shapes[k] = tuple(fh.get_slice(k).get_shape())
            except (SafetensorError, OSError, ValueError) as err:
                raise CaptureError(f"--weights {path}: not a readable safetensors file {f.name} ({err})") from None
        if self.file_of is None:
            self.file_of = {k: files[0] for k in shapes}
        elif set(shapes) != set(self.file_of):
            odd = sorted(set(shapes) ^ set(self.file_of))[:3]
            raise CaptureError(f"--weights {path}: {SAFETENSORS_INDEX} and the shard files disagree on keys, "
                               f"e.g. {', '.join(odd)}")
        _check_keys(path, spec, size, shapes)
        self.keys = sorted(shapes)
        self.reads = 0  # tensors read so far (tests: only the blocks that ran are read)

    def tensors(self, keys) -> dict[str, torch.Tensor]:
        """The named tensors, float32 (the dtype the model is constructed in), read lazily.

        Each is a fresh copy from PyTorch's allocator (64-byte aligned): ``get_tensor`` may return
        a tensor at any offset, and MKL's float32 GEMM rounds differently for differently aligned
        operands, which made streamed and plain captures of one checkpoint differ in the last bit."""
        from safetensors import safe_open

        by_file: dict[Path, list[str]] = {}
        for k in keys:
            by_file.setdefault(self.file_of[k], []).append(k)
        out = {}
        for f, ks in sorted(by_file.items()):
            with safe_open(str(f), framework="pt") as fh:
                for k in ks:
                    out[k] = fh.get_tensor(k).to(torch.float32, copy=True)
                    self.reads += 1
        return out


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
    """Run a model whose transformer blocks are materialised one at a time (issue 4: Wan2.1-14B is
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
        ckpt = _Checkpoint(path, spec, size)
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
        desc = WEIGHTS_INIT.format(seed=int(seed)).replace("; no checkpoint", "")
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
