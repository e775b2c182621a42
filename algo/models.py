"""Registry of the video-DiT models trace capture can run, and how to build each one.

A model is named by ``(name, size)``. ``size`` picks a configuration of the same architecture:

- ``wan2.1-t2v-1.3b``, diffusers class `diffusers.WanTransformer3DModel` (0.42.1):

  ``full``: the published Wan2.1-T2V-1.3B transformer config (Hugging Face
  ``Wan-AI/Wan2.1-T2V-1.3B-Diffusers``, ``transformer/config.json``; SPEC.md section 1 table):
  12 heads x 128 head dim (d = 1536), 30 layers, ffn_dim 8960, in/out channels 16, text_dim 4096
  (UMT5-XXL width), freq_dim 256, patch (1, 2, 2), qk_norm ``rms_norm_across_heads``,
  cross_attn_norm True, eps 1e-6, rope_max_seq_len 1024 (class default). About 1.4e9 parameters,
  5.7 GB in float32.

  ``tiny`` (project choice, for tests and demos): the same structure shrunk to 2 layers, 2 heads x 32
  head dim (d = 64), ffn_dim 128, text_dim 32, freq_dim 32. RoPE t/h/w = 12/10/10 channels per head
  (diffusers' ``WanRotaryPosEmbed``: ``h = w = 2*(d_h // 6)``, ``t = d_h - 2h``).

No hub access exists, so weights are seeded: ``torch.manual_seed(seed)`` right before construction,
then diffusers' default initialisation, i.e. PyTorch's module defaults (`WEIGHTS_INIT`). The global
torch RNG state of the caller is restored afterwards.

RoPE channel groups (`rope_groups`) are read from the model's own rotary module, ``model.rope``
(`WanRotaryPosEmbed`, attributes ``t_dim``, ``h_dim``, ``w_dim``). Layout inside each head, checked
against diffusers 0.42.1 ``transformer_wan.py``: ``WanRotaryPosEmbed.forward`` concatenates the
frequency tables in the order ``[freqs_f, freqs_h, freqs_w]`` along the channel axis, with each
frequency repeated for an interleaved pair (``repeat_interleave_real=True``), and
``WanAttnProcessor.apply_rotary_emb`` rotates channel pairs ``(2i, 2i+1)`` with entry ``2i`` of that
table; so channels ``[0, t)`` encode time, ``[t, t+h)`` height and ``[t+h, d_h)`` width. Per SPEC
section 2, t-channels are reused spatially (axis ``"w"``: the previous token along width) and
h/w-channels temporally (axis ``"f"``: same position in the previous frame).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

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


_WAN_13B_FULL = dict(
    patch_size=(1, 2, 2),
    num_attention_heads=12,
    attention_head_dim=128,
    in_channels=16,
    out_channels=16,
    text_dim=4096,
    freq_dim=256,
    ffn_dim=8960,
    num_layers=30,
    cross_attn_norm=True,
    qk_norm="rms_norm_across_heads",
    eps=1e-6,
    image_dim=None,
    added_kv_proj_dim=None,
    rope_max_seq_len=1024,
)

_WAN_TINY = dict(
    _WAN_13B_FULL,
    num_attention_heads=2,
    attention_head_dim=32,
    text_dim=32,
    freq_dim=32,
    ffn_dim=128,
    num_layers=2,
)

MODELS: dict[str, ModelSpec] = {
    "wan2.1-t2v-1.3b": ModelSpec(
        name="wan2.1-t2v-1.3b",
        diffusers_class="WanTransformer3DModel",
        source="Wan-AI/Wan2.1-T2V-1.3B-Diffusers transformer/config.json",
        sizes={"full": _WAN_13B_FULL, "tiny": _WAN_TINY},
        # Token grids (F, H, W) after the 1x2x2 patch. tiny: latent 4x16x16 (128x128 px, 13 video
        # frames). full: the same small grid by default, because an exact trace stores P
        # (heads x M x M bytes per block and step); 480p is 21x30x52 tokens (SPEC section 1).
        default_grid={"tiny": (4, 8, 8), "full": (4, 8, 8)},
        dtype={"tiny": torch.float32, "full": torch.float32},
    ),
}


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


def build_model(name: str, size: str, seed: int = 0) -> tuple[torch.nn.Module, str]:
    """Construct the model with seeded weights, in eval mode, gradients off.

    Args:
        name: registry name, e.g. ``"wan2.1-t2v-1.3b"``.
        size: ``"tiny"`` or ``"full"``.
        seed: ``torch.manual_seed`` value used right before construction.

    Returns:
        ``(model, weights)``: the diffusers module (dtype from the registry) and the description of
        its weights for the trace's ``weights`` field.

    Raises:
        CaptureError: unknown name or size.
    """
    import diffusers

    spec = get_spec(name, size)
    cls = getattr(diffusers, spec.diffusers_class)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = cls(**spec.sizes[size])
    dtype = spec.dtype.get(size, torch.float32)
    if dtype != torch.float32:  # diffusers warns on .to(): keep its fp32 modules in mind if this is used
        model = model.to(dtype)
    model.eval()
    model.requires_grad_(False)
    return model, WEIGHTS_INIT.format(seed=int(seed))


def rope_groups(model: torch.nn.Module) -> list[Group]:
    """The qk channel groups of one head, read from ``model.rope`` (Wan's `WanRotaryPosEmbed`).

    Returns:
        ``[Group(0, t, "w", "t"), Group(t, t+h, "f", "h"), Group(t+h, d_h, "f", "w")]``:
        t-channels reused along width (spatial), h/w-channels along frames (temporal); 44/42/42 for
        d_h = 128, 12/10/10 for d_h = 32.

    Raises:
        CaptureError: the model has no Wan-style rotary module or its dims do not add up.
    """
    rope = getattr(model, "rope", None)
    try:
        t, h, w = int(rope.t_dim), int(rope.h_dim), int(rope.w_dim)
        d_h = int(rope.attention_head_dim)
    except AttributeError:
        raise CaptureError(
            f"{type(model).__name__} has no Wan-style rotary module (model.rope with t_dim/h_dim/w_dim)"
        ) from None
    if min(t, h, w) <= 0 or t + h + w != d_h:
        raise CaptureError(f"RoPE split t/h/w = {t}/{h}/{w} does not partition head dim {d_h}")
    return [Group(0, t, "w", "t"), Group(t, t + h, "f", "h"), Group(t + h, d_h, "f", "w")]
