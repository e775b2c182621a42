"""CogVideoX (`diffusers.CogVideoXTransformer3DModel`, 0.42.1): configs, blocks, hooks, RoPE, schedule,
inputs.

Model ``cogvideox-5b`` (``THUDM/CogVideoX-5b``, ``transformer/config.json``): 48 heads x 64
(d = 3072), 42 layers, ff inner 4d = 12288, time_embed_dim 512, text_embed_dim 4096, patch 2 (no
temporal patch), attention_bias True, norm_eps 1e-5, use_rotary_positional_embeddings True, sample
13x60x90 latent (base size of the RoPE crop). ``tiny`` (project choice): 2 heads x 32, 2 layers,
text width 32, time_embed_dim 32.

Blocks: ``transformer_blocks`` (`CogVideoXBlock`, kind ``"cogvideox"``): ``attn1`` (joint
attention: its processor concatenates ``[text, video]``, so `video_first` is False) and ``ff``,
which runs on the concatenated ``[text, video]`` sequence. ``CogVideoXAttnProcessor2_0`` calls
``F.scaled_dot_product_attention`` (``F`` = ``torch.nn.functional`` as bound in
``diffusers.models.attention_processor``; ``[B, heads, S, d_h]``): `attention_patch` replaces that
module's ``F`` by a proxy whose ``scaled_dot_product_attention`` is wrapped (nothing else changes).

RoPE: CogVideoX has no rotary module; its pipeline builds the tables with
``diffusers.models.embeddings.get_3d_rotary_pos_embed`` (t = d_h/4, h = w = 3 d_h/8: 16/24/24 at
d_h 64) and passes them to ``forward``. `rope_split` reads the split from that function's output
(which channels vary with t, h or w); `rotary_emb` computes the tables as the pipeline does.

Schedule: `algo.models.schedules.DDIM` (CogVideoX-5B's scheduler). Inputs: seeded text tokens and
the RoPE tables; the model takes latents as ``[B, F, C, H, W]`` and an integer timestep.
"""

from __future__ import annotations

import contextlib
import types

from algo.lazy import lazy_module
from algo.models.families.base import Attention, Family, Inputs, Linear, ModelRow, seeded_text
from algo.models.schedules import DDIM

torch = lazy_module("torch")  # imported on first use (algo.lazy: model names without torch)

_COGVIDEOX_5B_FULL = dict(
    num_attention_heads=48,
    attention_head_dim=64,
    in_channels=16,
    out_channels=16,
    flip_sin_to_cos=True,
    freq_shift=0,
    time_embed_dim=512,
    text_embed_dim=4096,
    num_layers=42,
    dropout=0.0,
    attention_bias=True,
    sample_width=90,
    sample_height=60,
    sample_frames=49,
    patch_size=2,
    temporal_compression_ratio=4,
    max_text_seq_length=226,
    activation_fn="gelu-approximate",
    timestep_activation_fn="silu",
    norm_elementwise_affine=True,
    norm_eps=1e-5,
    spatial_interpolation_scale=1.875,
    temporal_interpolation_scale=1.0,
    use_rotary_positional_embeddings=True,
    use_learned_positional_embeddings=False,
)

_COGVIDEOX_TINY = dict(
    _COGVIDEOX_5B_FULL,
    num_attention_heads=2,
    attention_head_dim=32,
    time_embed_dim=32,
    text_embed_dim=32,
    num_layers=2,
)


def rotary_emb(config, grid: tuple[int, int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """CogVideoX's RoPE tables ``(cos, sin)``, each float32 ``[F*H*W, d_h]``, for a token grid.

    Exactly what ``CogVideoXPipeline._prepare_rotary_positional_embeddings`` (diffusers 0.42.1) does
    for CogVideoX 1.0 (``patch_size_t`` None): ``get_resize_crop_region_for_grid((H, W),
    sample_width / p, sample_height / p)`` then ``get_3d_rotary_pos_embed(embed_dim=d_h,
    crops_coords, grid_size=(H, W), temporal_size=F)``.
    """
    from diffusers.models.embeddings import get_3d_rotary_pos_embed

    f, h, w = (int(v) for v in grid)
    p = int(config.patch_size)
    crops = _resize_crop_region((h, w), int(config.sample_width) // p, int(config.sample_height) // p)
    cos, sin = get_3d_rotary_pos_embed(embed_dim=int(config.attention_head_dim), crops_coords=crops,
                                       grid_size=(h, w), temporal_size=f, device=torch.device("cpu"))
    return cos.to(torch.float32), sin.to(torch.float32)


def _resize_crop_region(src: tuple[int, int], tgt_width: int, tgt_height: int):
    """``get_resize_crop_region_for_grid`` of diffusers 0.42.1 ``pipelines/cogvideo/pipeline_cogvideox.py``,
    copied: that module imports ``transformers`` (the text encoder), which capture does not need."""
    h, w = src
    if h / w > tgt_height / tgt_width:
        rh, rw = tgt_height, int(round(tgt_height / h * w))
    else:
        rw, rh = tgt_width, int(round(tgt_width / w * h))
    top, left = int(round((tgt_height - rh) / 2.0)), int(round((tgt_width - rw) / 2.0))
    return (top, left), (top + rh, left + rw)


class CogVideoX(Family):
    name = "cogvideox"
    order = 2
    models = (ModelRow("cogvideox-5b", "CogVideoXTransformer3DModel", "THUDM/CogVideoX-5b", _COGVIDEOX_5B_FULL,
                       _COGVIDEOX_TINY),)
    joint_text = True
    video_first = False

    def blocks(self, model):
        return [("cogvideox", b) for b in model.transformer_blocks]

    def sites(self, kind, blk):
        a1, ff = blk.attn1, blk.ff
        return [Linear("qkv", a1, (a1.to_q, a1.to_k, a1.to_v)), Attention("self", a1),
                Linear("o_proj", a1.to_out[0], (a1.to_out[0],)),
                Linear("ffn1", ff.net[0].proj, (ff.net[0].proj,)), Linear("ffn2", ff.net[2], (ff.net[2],))]

    @contextlib.contextmanager
    def attention_patch(self, fn):
        import diffusers.models.attention_processor as ap

        original_f = ap.F
        sdpa = original_f.scaled_dot_product_attention

        def sdpa_wrapper(query, key, value, *args, **kwargs):
            out = fn(query, key, value, "bhsd", kwargs.get("attn_mask"))
            return sdpa(query, key, value, *args, **kwargs) if out is None else out

        proxy = types.SimpleNamespace(**{k: getattr(original_f, k) for k in dir(original_f) if not k.startswith("__")})
        proxy.scaled_dot_product_attention = sdpa_wrapper
        ap.F = proxy
        try:
            yield
        finally:
            ap.F = original_f

    def rope_split(self, model):
        """From `rotary_emb` on a 2x2x2 grid: a channel belongs to the axis along which its cosine changes.

        Raises:
            ValueError: the tables are not laid out ``[t | h | w]``.
        """
        d_h = int(model.config.attention_head_dim)
        cos, _ = rotary_emb(model.config, (2, 2, 2))  # [8, d_h], raster (f, h, w)
        c = cos.reshape(2, 2, 2, d_h)
        var = [(c.select(a, 1) - c.select(a, 0)).abs().amax(dim=(0, 1)) > 0 for a in range(3)]
        t, h, w = (int(v.sum()) for v in var)
        axes = torch.stack(var).to(torch.int64).argmax(dim=0)  # per channel: 0 t, 1 h, 2 w
        if not torch.equal(axes, torch.tensor([0] * t + [1] * h + [2] * w)):
            raise ValueError("CogVideoX RoPE tables are not laid out [t | h | w]")
        return t, h, w, d_h

    def schedule(self, n_steps, shift=None):
        return DDIM(n_steps)

    def inputs(self, cfg, net, grid, seed, dtype, tokens):
        cos, sin = rotary_emb(net.config, grid)
        return Inputs(seeded_text(seed, tokens, self.text_width(cfg), dtype), dict(image_rotary_emb=(cos, sin)))

    def forward_kwargs(self, inputs, x_t, timestep):
        # CogVideoX takes [B, F, C, H, W] and an integer timestep
        return dict(hidden_states=x_t.permute(0, 2, 1, 3, 4), timestep=torch.tensor([int(timestep)]),
                    encoder_hidden_states=inputs.text, **inputs.extra)

    def output(self, out):
        return out.permute(0, 2, 1, 3, 4)


FAMILY = CogVideoX()
