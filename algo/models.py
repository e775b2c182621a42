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
from pathlib import Path

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


#: ``--dtype`` names -> torch dtypes capture can run in.
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}

#: Config keys a checkpoint must agree on with the registered size (architecture, not runtime).
_ARCH_KEYS = ("num_attention_heads", "attention_head_dim", "num_layers", "ffn_dim", "in_channels",
              "out_channels", "text_dim", "freq_dim", "patch_size", "qk_norm", "cross_attn_norm")


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


def _load_folder(cls, spec: ModelSpec, size: str, path: Path) -> tuple[torch.nn.Module, str]:
    """A diffusers-format folder: ``config.json`` + weights, or a pipeline folder with ``transformer/``."""
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
    try:
        model = cls.from_pretrained(str(path), subfolder=sub, local_files_only=True)
    except (OSError, ValueError, RuntimeError, KeyError) as err:
        msg = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        if "low_cpu_mem_usage" in msg:
            msg += "; diffusers needs the `accelerate` package to load this class (pip install accelerate)"
        raise CaptureError(f"--weights {path}: cannot load the diffusers checkpoint ({msg})") from None
    return model, f"checkpoint (diffusers folder): {path}"


def _load_safetensors(model: torch.nn.Module, spec: ModelSpec, size: str, path: Path,
                      num_layers: int) -> str:
    """Load a diffusers-keyed state dict from one safetensors file into `model` (strict)."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        sd = load_file(str(path))
    except (SafetensorError, OSError, ValueError) as err:
        raise CaptureError(f"--weights {path}: not a readable safetensors file ({err})") from None
    full_layers = int(spec.sizes[size]["num_layers"])
    present = {int(k.split(".")[1]) for k in sd if k.startswith("blocks.")}
    if present and present != set(range(full_layers)):
        raise CaptureError(f"--weights {path}: holds blocks {min(present)}..{max(present)} "
                           f"({len(present)} blocks), {spec.name} ({size}) has {full_layers}")
    sd = {k: v for k, v in sd.items() if not (k.startswith("blocks.") and int(k.split(".")[1]) >= num_layers)}
    own = model.state_dict()
    missing = sorted(set(own) - set(sd))
    unexpected = sorted(set(sd) - set(own))
    wrong = sorted(k for k in set(own) & set(sd) if tuple(own[k].shape) != tuple(sd[k].shape))
    if missing or unexpected or wrong:
        parts = []
        for label, keys in (("missing", missing), ("unexpected", unexpected), ("wrong shape", wrong)):
            if keys:
                extra = f" (+{len(keys) - 3} more)" if len(keys) > 3 else ""
                detail = [f"{k} {list(sd[k].shape)} vs {list(own[k].shape)}" for k in keys[:3]] \
                    if label == "wrong shape" else keys[:3]
                parts.append(f"{label} keys {', '.join(detail)}{extra}")
        raise CaptureError(f"--weights {path}: state dict does not match {spec.name} ({size}): "
                           + "; ".join(parts))
    model.load_state_dict(sd, strict=True)
    return f"checkpoint (safetensors file): {path}"


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
        num_layers: build only the first n blocks (None: all). Seeded blocks are identical to the
            full model's first n (construction order: patch embedding, rope, condition embedder,
            blocks 0, 1, ...); a safetensors checkpoint must still hold every block. Not with a folder.

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
    full_layers = int(spec.sizes[size]["num_layers"])
    n = full_layers if num_layers is None else int(num_layers)
    if not 1 <= n <= full_layers:
        raise CaptureError(f"num_layers must be in 1..{full_layers}, got {num_layers}")
    cfg = dict(spec.sizes[size], num_layers=n)
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
