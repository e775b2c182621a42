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
torch RNG state of the caller is restored afterwards. Building a model, seeded or from a checkpoint
(a diffusers folder or a ``.safetensors`` file), is `algo.models.checkpoints.build_model`;
`algo.models.streaming.build_streamed` holds one block in memory at a time.

RoPE channel groups (`rope_groups`) are read from the model's own rotary code (the family's
`Family.rope_split`). Per docs/spec.md section 2, t-channels are reused spatially (axis ``"w"``: the
previous token along width) and h/w-channels temporally (axis ``"f"``: same position in the previous
frame).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from algo.errors import CaptureError
from algo.models.families import FAMILIES, Family, family_of_class
from algo.models.families.wan import WAN_SMALL
from algo.trace import Group

#: The trace's ``weights`` field for seeded models; ``{seed}`` is filled in, ``{layers}`` and
#: ``{extra}`` by `seeded_weights_description` from the modules the model has.
WEIGHTS_INIT = (
    "seeded: torch.manual_seed({seed}) before construction, diffusers default init "
    "({layers} kaiming-uniform a=sqrt(5), bias U(+-1/sqrt(fan_in)); norms weight 1, "
    "bias 0{extra}); no checkpoint"
)


def seeded_weights_description(seed: int, model: torch.nn.Module) -> str:
    """`WEIGHTS_INIT` for `model`: names the layer classes it holds (PyTorch's default init) and, only
    where the model has one, Wan's ``scale_shift_table`` (``randn / sqrt(d)``, diffusers'
    ``transformer_wan.py``); HunyuanVideo and CogVideoX have none."""
    kinds = (torch.nn.Linear, torch.nn.Conv2d, torch.nn.Conv3d)
    present = [k.__name__ for k in kinds if any(isinstance(m, k) for m in model.modules())]
    layers = "/".join(f"nn.{n}" for n in present) or "layers"
    has_table = any(n.rsplit(".", 1)[-1] == "scale_shift_table" for n, _ in model.named_parameters())
    extra = "; scale_shift_table randn/sqrt(d)" if has_table else ""
    return WEIGHTS_INIT.format(seed=int(seed), layers=layers, extra=extra)


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
# (heads x M x M bytes per block and step); 480p is 21x30x52 tokens (docs/spec.md §1).
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
