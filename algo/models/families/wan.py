"""Wan2.1 (`diffusers.WanTransformer3DModel`, 0.42.1): configs, blocks, hooks, RoPE, schedule, inputs.

Models:

- ``wan2.1-t2v-1.3b`` ``full``: the published Wan2.1-T2V-1.3B transformer config (Hugging Face
  ``Wan-AI/Wan2.1-T2V-1.3B-Diffusers``, ``transformer/config.json``; docs/spec.md section 1 table):
  12 heads x 128 head dim (d = 1536), 30 layers, ffn_dim 8960, in/out channels 16, text_dim 4096
  (UMT5-XXL width), freq_dim 256, patch (1, 2, 2), qk_norm ``rms_norm_across_heads``,
  cross_attn_norm True, eps 1e-6, rope_max_seq_len 1024 (class default). About 1.4e9 parameters,
  5.7 GB in float32. ``tiny`` (project choice, for tests and demos): the same structure shrunk to
  2 layers, 2 heads x 32 head dim (d = 64), ffn_dim 128, text_dim 32, freq_dim 32.
- ``wan2.1-t2v-14b`` (``Wan-AI/Wan2.1-T2V-14B-Diffusers``): 40 heads x 128 (d = 5120), 40 layers,
  ffn_dim 13824, otherwise as 1.3B; 28 GB in bf16 (build the recorded blocks only, or stream them:
  `algo.models.streaming.build_streamed`). ``tiny``: the 1.3B tiny config.

Blocks: ``model.blocks`` (`WanTransformerBlock`, kind ``"wan"``): ``attn1`` (self-attention, its
input the modulated norm1 output), ``attn2`` (cross-attention to the text), ``ffn.net[0].proj``
and ``ffn.net[2]``. The attention processor calls the module-level
``diffusers.models.transformers.transformer_wan.dispatch_attention_fn`` with Q and K already
normed and rotated (``[B, S, heads, d_h]``); `attention_patch` wraps it.

RoPE (`WanRotaryPosEmbed`, ``model.rope``, attributes ``t_dim``, ``h_dim``, ``w_dim``): checked
against diffusers 0.42.1 ``transformer_wan.py``, ``WanRotaryPosEmbed.forward`` concatenates the
frequency tables in the order ``[freqs_f, freqs_h, freqs_w]`` along the channel axis, each
frequency repeated for an interleaved pair, and ``apply_rotary_emb`` rotates channel pairs
``(2i, 2i+1)`` with entry ``2i``: channels ``[0, t)`` encode time, ``[t, t+h)`` height, ``[t+h, d_h)``
width; ``h = w = 2 (d_h // 6)``, ``t = d_h - 2h`` (44/42/42 at d_h 128, 12/10/10 at 32).

Schedule: flow matching, shift 5.0 (Wan2.1 repository default for t2v; `algo.latents.DEFAULT_SHIFT`).
Inputs: seeded text tokens of width ``text_dim``; no extras.
"""

from __future__ import annotations

from algo import latents as lat
from algo.models.families.base import Attention, Family, Linear, ModelRow, patched_attribute
from algo.models.schedules import FlowMatch

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

#: ``small`` of ``wan2.1-t2v-1.3b`` (project choice): the trained model's config (algo/train,
#: docs/training.md): 4 layers, 2 heads x 64 head dim (d = 128; RoPE t/h/w = 24/20/20), ffn_dim 512,
#: text_dim 32, freq_dim 64.
WAN_SMALL = dict(
    _WAN_13B_FULL,
    num_attention_heads=2,
    attention_head_dim=64,
    text_dim=32,
    freq_dim=64,
    ffn_dim=512,
    num_layers=4,
)

_WAN_14B_FULL = dict(_WAN_13B_FULL, num_attention_heads=40, ffn_dim=13824, num_layers=40)


class Wan(Family):
    name = "wan"
    order = 0
    models = (
        ModelRow("wan2.1-t2v-1.3b", "WanTransformer3DModel", "Wan-AI/Wan2.1-T2V-1.3B-Diffusers", _WAN_13B_FULL,
                 _WAN_TINY),
        ModelRow("wan2.1-t2v-14b", "WanTransformer3DModel", "Wan-AI/Wan2.1-T2V-14B-Diffusers", _WAN_14B_FULL,
                 _WAN_TINY),
    )
    has_cross = True
    block_prefix = "blocks."
    vae_class = "AutoencoderKLWan"
    ddit_trajectory = True

    def blocks(self, model):
        return [("wan", b) for b in model.blocks]

    def sites(self, kind, blk):
        a1, a2, ffn = blk.attn1, blk.attn2, blk.ffn
        return [Linear("qkv", a1, (a1.to_q, a1.to_k, a1.to_v)), Attention("self", a1),
                Linear("o_proj", a1.to_out[0], (a1.to_out[0],)),
                Linear("ffn1", ffn.net[0].proj, (ffn.net[0].proj,)), Linear("ffn2", ffn.net[2], (ffn.net[2],)),
                Linear("cross_q", a2, (a2.to_q,)), Attention("cross", a2),
                Linear("cross_o", a2.to_out[0], (a2.to_out[0],))]

    def text_width(self, cfg):
        return int(cfg["text_dim"])

    def attention_patch(self, fn):
        import diffusers.models.transformers.transformer_wan as mod

        return patched_attribute(mod, "dispatch_attention_fn", fn, "bshd")

    def rope_split(self, model):
        rope = model.rope
        return int(rope.t_dim), int(rope.h_dim), int(rope.w_dim), int(rope.attention_head_dim)

    def schedule(self, n_steps, shift=None):
        return FlowMatch(n_steps, lat.DEFAULT_SHIFT if shift is None else shift)


FAMILY = Wan()
