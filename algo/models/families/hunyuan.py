"""HunyuanVideo (`diffusers.HunyuanVideoTransformer3DModel`, 0.42.1): configs, blocks, hooks, RoPE,
schedule, inputs.

Model ``hunyuanvideo`` (``hunyuanvideo-community/HunyuanVideo``, the diffusers conversion of
tencent/HunyuanVideo, ``transformer/config.json``): 24 heads x 128 (d = 3072), 20 dual-stream + 40
single-stream blocks, mlp_ratio 4 (d_ffn 12288), 2 token-refiner layers, patch 1x2x2, qk_norm
rms_norm, guidance_embeds True, text_embed_dim 4096, pooled_projection_dim 768, rope_theta 256,
rope_axes_dim (16, 56, 56). ``tiny`` (project choice): 2 heads x 32, 1 dual + 1 single block, 1
refiner layer, text width 32, pooled width 16, rope_axes_dim (8, 12, 12).

Blocks in trace order: ``0..num_layers-1`` the dual-stream blocks (``transformer_blocks[b]``, kind
``"dual"``: ``attn`` on the video tokens with its own text projections, ``ff``), then the
single-stream blocks (``single_transformer_blocks[b - num_layers]``, kind ``"single"``: ``attn``,
``proj_mlp`` and one fused ``proj_out([attn | mlp]) = attn @ W[:d] + mlp @ W[d:]``, recorded as
o_proj and ffn2). Attention is joint: the sequence is ``[video, text]`` (`video_first`), the
processor calls the module-level ``transformer_hunyuan_video.dispatch_attention_fn`` with
``[B, S, heads, d_h]`` operands after norm and RoPE (RoPE on the video tokens only) and an all-True
boolean mask when every text token is valid.

RoPE: ``model.rope.rope_dim`` (`HunyuanVideoRotaryPosEmbed`), laid out ``[t | h | w]`` (its
``forward`` concatenates the three axes' tables), interleaved pairs.

Schedule: flow matching, shift 7.0 (``scheduler/scheduler_config.json``: FlowMatchEulerDiscreteScheduler,
shift 7.0), used when the caller keeps Wan's default shift. Inputs: seeded text tokens, an all-ones
text mask, seeded N(0, 1) pooled projections (numpy stream ``[seed, 3]``) and the embedded guidance
``1000 * HUNYUAN_GUIDANCE``.
"""

from __future__ import annotations

import numpy as np

from algo import latents as lat
from algo.lazy import lazy_module
from algo.models.families.base import (
    Attention,
    Family,
    Inputs,
    Linear,
    ModelRow,
    patched_attribute,
    seeded_text,
)
from algo.models.schedules import FlowMatch

torch = lazy_module("torch")  # imported on first use (algo.lazy: model names without torch)

#: HunyuanVideo's flow-matching shift (``hunyuanvideo-community/HunyuanVideo``
#: ``scheduler/scheduler_config.json``: FlowMatchEulerDiscreteScheduler, shift 7.0).
HUNYUAN_SHIFT = 7.0
#: HunyuanVideo's embedded guidance scale (diffusers ``HunyuanVideoPipeline`` default 6.0; the
#: transformer takes ``guidance = 1000 * scale``).
HUNYUAN_GUIDANCE = 6.0

_HUNYUAN_FULL = dict(
    in_channels=16,
    out_channels=16,
    num_attention_heads=24,
    attention_head_dim=128,
    num_layers=20,
    num_single_layers=40,
    num_refiner_layers=2,
    mlp_ratio=4.0,
    patch_size=2,
    patch_size_t=1,
    qk_norm="rms_norm",
    guidance_embeds=True,
    text_embed_dim=4096,
    pooled_projection_dim=768,
    rope_theta=256.0,
    rope_axes_dim=(16, 56, 56),
)

_HUNYUAN_TINY = dict(
    _HUNYUAN_FULL,
    num_attention_heads=2,
    attention_head_dim=32,
    num_layers=1,
    num_single_layers=1,
    num_refiner_layers=1,
    text_embed_dim=32,
    pooled_projection_dim=16,
    rope_axes_dim=(8, 12, 12),
)


class Hunyuan(Family):
    name = "hunyuan"
    order = 1
    models = (ModelRow("hunyuanvideo", "HunyuanVideoTransformer3DModel", "hunyuanvideo-community/HunyuanVideo",
                       _HUNYUAN_FULL, _HUNYUAN_TINY),)
    joint_text = True
    video_first = True

    def blocks(self, model):
        return ([("dual", b) for b in model.transformer_blocks]
                + [("single", b) for b in model.single_transformer_blocks])

    def sites(self, kind, blk):
        a = blk.attn
        out = [Linear("qkv", a, (a.to_q, a.to_k, a.to_v)), Attention("self", a)]
        if kind == "single":
            d = a.to_q.out_features
            return out + [Linear("ffn1", blk.proj_mlp, (blk.proj_mlp,)),
                          Linear("o_proj", blk.proj_out, (blk.proj_out,), cols=(0, d)),
                          Linear("ffn2", blk.proj_out, (blk.proj_out,), cols=(d, blk.proj_out.in_features))]
        return out + [Linear("o_proj", a.to_out[0], (a.to_out[0],)),
                      Linear("ffn1", blk.ff.net[0].proj, (blk.ff.net[0].proj,)),
                      Linear("ffn2", blk.ff.net[2], (blk.ff.net[2],))]

    def layers_config(self, cfg, n):
        dual = int(cfg["num_layers"])
        return dict(cfg, num_layers=min(n, dual), num_single_layers=max(0, n - dual))

    def num_blocks(self, cfg):
        return int(cfg["num_layers"]) + int(cfg["num_single_layers"])

    def attention_patch(self, fn):
        import diffusers.models.transformers.transformer_hunyuan_video as mod

        return patched_attribute(mod, "dispatch_attention_fn", fn, "bshd")

    def rope_split(self, model):
        t, h, w = (int(v) for v in model.rope.rope_dim)
        return t, h, w, int(model.config.attention_head_dim)

    def schedule(self, n_steps, shift=None):
        return FlowMatch(n_steps, HUNYUAN_SHIFT if shift is None or shift == lat.DEFAULT_SHIFT else float(shift))

    def inputs(self, cfg, net, grid, seed, dtype, tokens):
        pooled = np.random.default_rng([int(seed), 3]).standard_normal((1, int(cfg["pooled_projection_dim"])))
        return Inputs(seeded_text(seed, tokens, self.text_width(cfg), dtype),
                      dict(encoder_attention_mask=torch.ones(1, tokens, dtype=torch.int64),
                           pooled_projections=torch.from_numpy(pooled.astype(np.float32)).to(dtype),
                           guidance=torch.tensor([HUNYUAN_GUIDANCE * 1000.0], dtype=torch.float32)))


FAMILY = Hunyuan()
