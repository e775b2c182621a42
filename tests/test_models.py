"""Registered models: published shapes from shape traces, tiny captures of every family,
and Q/K in traces after RoPE, recomputed from each model's own rotary tables.

Expected numbers are docs/spec.md §1's table and token counts, written out here by hand.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algo.capture import CaptureError, capture, plan_ops, write_shape_trace
from algo.models import blocks_of, build_model, meta_model, num_blocks, rope_split
from algo.models.families.cogvideox import rotary_emb as cogvideox_rotary_emb
from algo.trace import load_trace

# docs/spec.md §1: d = heads x d_h, layers, d_ffn, RoPE t/h/w.
PUBLISHED_CONFIGS = {
    "wan2.1-t2v-1.3b": (12, 128, 30, 8960, (44, 42, 42)),
    "wan2.1-t2v-14b": (40, 128, 40, 13824, (44, 42, 42)),
    "hunyuanvideo": (24, 128, 60, 12288, (16, 56, 56)),  # 20 dual + 40 single blocks
    "cogvideox-5b": (48, 64, 42, 12288, (16, 24, 24)),
}
TEXT = 8  # algo.capture.TEXT_TOKENS: joint attention keys = video tokens + 8 text tokens


@pytest.mark.parametrize("res,grid,tokens", [("480p", (21, 30, 52), 32_760), ("720p", (21, 45, 80), 75_600)])
def test_wan_shape_trace_full_size(tmp_path, res, grid, tokens):
    path = tmp_path / f"wan_{res}.npz"
    write_shape_trace(path, "wan2.1-t2v-1.3b", "full", resolution=res, steps=(0, 49), ops="all")
    tr = load_trace(path)
    assert tr.kind == "shapes" and tr.version == 3
    assert tr.grid == grid and tr.tokens == tokens
    assert len(tr.ops) == 2 * 30 * 10  # steps x layers x every op type of docs/spec.md §1 (Wan has cross-attention)
    qk = next(o for o in tr.ops if o.name == "qk")
    assert (qk.batch, qk.M, qk.K, qk.N) == (12, tokens, 128, tokens)
    assert [g.k_stop - g.k_start for g in qk.groups] == [44, 42, 42]
    assert [g.axis for g in qk.groups] == ["w", "f", "f"]
    pv = next(o for o in tr.ops if o.name == "pv")
    assert (pv.batch, pv.M, pv.K, pv.N) == (12, tokens, tokens, 128)
    # the split comes from the model's own rotary module
    assert rope_split(meta_model("wan2.1-t2v-1.3b", "full")) == (44, 42, 42)


@pytest.mark.parametrize("model", sorted(PUBLISHED_CONFIGS))
def test_published_configs_in_shape_plans(model):
    heads, d_h, layers, d_ffn, rope = PUBLISHED_CONFIGS[model]
    d = heads * d_h
    net = meta_model(model, "full")
    assert rope_split(net) == rope
    assert num_blocks(model, "full") == layers == len(blocks_of(net))
    grid, ops = plan_ops(model, "full", resolution="480p", steps=(0,), blocks=(0, layers - 1))
    assert grid == (21, 30, 52)
    m = 32_760
    keys = m if model.startswith("wan") else m + TEXT
    for b in (0, layers - 1):
        got = {o.name: (o.batch, o.M, o.K, o.N) for o in ops if o.block == b}
        assert got == {"qkv": (1, m, d, 3 * d), "qk": (heads, m, d_h, keys), "pv": (heads, m, keys, d_h),
                       "o_proj": (1, m, d, d), "ffn1": (1, m, d, d_ffn), "ffn2": (1, m, d_ffn, d)}


def test_cross_ops_only_for_wan():
    with pytest.raises(CaptureError, match="no cross-attention"):
        plan_ops("hunyuanvideo", "tiny", ops="cross")


@pytest.mark.parametrize("model", ["hunyuanvideo", "cogvideox-5b", "wan2.1-t2v-14b"])
def test_tiny_capture_every_op(model):
    tr = capture(model=model, size="tiny", steps=(49,), attn_states=False)
    n = num_blocks(model, "tiny")
    assert n == 2
    for b in range(n):
        names = sorted(o.name for o in tr.ops if o.block == b)
        assert names == sorted(["qkv", "qk", "pv", "o_proj", "ffn1", "ffn2"])
    for o in tr.ops:
        assert o.M == 256 and o.X.shape == (o.batch, 256, o.K) and o.W.shape == (o.batch, o.K, o.N)
        if o.name in ("qk", "pv"):  # joint attention: video tokens attend to video + text keys
            assert (o.N if o.name == "qk" else o.K) == (256 if model.startswith("wan") else 256 + TEXT)


def _pre_rope_hooks(net, family):
    """Forward hooks on block 0's norm_q / norm_k: the query and key after QK norm, before RoPE."""
    kind, blk = blocks_of(net)[0]
    attn = blk.attn1 if kind in ("wan", "cogvideox") else blk.attn
    got = {}

    def keep(name):
        def hook(_m, _a, out):
            got.setdefault(name, out.detach().clone())
        return hook

    hs = [attn.norm_q.register_forward_hook(keep("q")), attn.norm_k.register_forward_hook(keep("k"))]
    return got, hs, int(attn.heads)


def _rotate(x, cos, sin):
    """Interleaved-pair rotation (channels 2i, 2i+1 by the angle of table entry 2i), by hand."""
    x1, x2 = x[..., 0::2], x[..., 1::2]
    c, s = cos[..., 0::2], sin[..., 0::2]
    out = torch.empty_like(x)
    out[..., 0::2] = x1 * c - x2 * s
    out[..., 1::2] = x1 * s + x2 * c
    return out


@pytest.mark.parametrize("model,family", [("wan2.1-t2v-1.3b", "wan"), ("hunyuanvideo", "hunyuan"),
                                          ("cogvideox-5b", "cogvideox")])
def test_q_and_k_in_trace_are_after_rope(model, family, monkeypatch):
    import algo.capture.run as cap

    m = 256
    grid = (4, 8, 8)
    hooked = {}
    real_build = cap.build_model

    def build_and_hook(*a, **k):
        net, desc = real_build(*a, **k)
        hooked["net"] = net
        hooked["got"], hooked["handles"], hooked["heads"] = _pre_rope_hooks(net, family)
        return net, desc

    monkeypatch.setattr(cap, "build_model", build_and_hook)
    tr = capture(model=model, size="tiny", steps=(49,), blocks=(0,), ops="qk")
    for h in hooked["handles"]:
        h.remove()
    net, got, heads = hooked["net"], hooked["got"], hooked["heads"]
    qk = tr.ops[0]
    d_h = qk.K
    head = heads - 1
    # Pre-RoPE Q and K of one head, video tokens only, [M, d_h] float32
    q, k = got["q"].to(torch.float32), got["k"].to(torch.float32)
    if family == "wan":  # [1, M, d] (RMSNorm across heads)
        q, k = (t[0].unflatten(-1, (heads, d_h))[:, head] for t in (q, k))
        cos, sin = net.rope(torch.zeros(1, 16, *(g * p for g, p in zip(grid, (1, 2, 2), strict=True))))
        cos, sin = cos[0, :, 0], sin[0, :, 0]
    elif family == "hunyuan":  # [1, M, heads, d_h]; dual block: video tokens only
        q, k = (t[0, :m, head] for t in (q, k))
        cos, sin = net.rope(torch.zeros(1, 16, grid[0], 2 * grid[1], 2 * grid[2]))
    else:  # CogVideoX [1, heads, L + M, d_h], text first
        q, k = (t[0, head, -m:] for t in (q, k))
        cos, sin = cogvideox_rotary_emb(net.config, grid)
    assert cos.shape == (m, d_h)
    q_rot, k_rot = _rotate(q, cos, sin), _rotate(k, cos, sin)
    q_trace = qk.X[head].astype(np.float64) * qk.x_scale
    k_trace = qk.W[head].T.astype(np.float64) * qk.w_scale  # W = K^T [d_h, keys]
    video_keys = slice(0, m) if family != "cogvideox" else slice(qk.N - m, qk.N)
    # dequantised int8 is within half a step of the float value
    assert np.abs(q_trace - q_rot.numpy()).max() <= qk.x_scale * 0.5 + 1e-5
    assert np.abs(k_trace[video_keys] - k_rot.numpy()).max() <= qk.w_scale * 0.5 + 1e-5
    # and the rotation matters: the pre-RoPE values are far off
    assert np.abs(q_trace - q.numpy()).max() > 10 * qk.x_scale


def test_safetensors_round_trip_hunyuan_partial_build(tmp_path):
    from safetensors.torch import save_file

    net, _ = build_model("hunyuanvideo", "tiny", seed=3)
    path = tmp_path / "hy.safetensors"
    save_file({k: v.contiguous() for k, v in net.state_dict().items()}, str(path))
    part, desc = build_model("hunyuanvideo", "tiny", seed=0, weights=path, num_layers=1)
    assert desc.startswith("checkpoint (safetensors file)")
    assert len(blocks_of(part)) == 1
    for k, v in part.state_dict().items():
        assert torch.equal(v, net.state_dict()[k]), k


def test_cli_shape_only_and_inspect_json(tmp_path):
    import json

    from typer.testing import CliRunner

    from sim.cli import app

    out = tmp_path / "hy720.npz"
    r = CliRunner().invoke(app, ["capture", "--shape-only", "--model", "hunyuanvideo", "--size", "full",
                                 "--resolution", "720p", "--steps", "0", "--blocks", "0,59", "-o", str(out)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["inspect", str(out), "--json"])
    assert r.exit_code == 0, r.output
    js = json.loads(r.output)
    assert js["kind"] == "shapes" and js["grid"] == [21, 45, 80]
    qk = [o for o in js["ops"] if o["name"] == "qk"]
    assert [(o["block"], o["M"], o["K"], o["N"]) for o in qk] == [(0, 75_600, 128, 75_600 + TEXT),
                                                                   (59, 75_600, 128, 75_600 + TEXT)]
    r = CliRunner().invoke(app, ["capture", "--shape-only", "--decisions-only", "-o", str(tmp_path / "x.npz")])
    assert r.exit_code == 2


def test_stream_blocks_one_block_in_memory_same_trace(monkeypatch):
    """Streamed blocks (Wan2.1-14B path) give the trace of the same weights built the ordinary way."""
    import algo.capture.run as cap

    seen = {}
    real_streamed = cap.build_streamed

    def spy_streamed(*a, **k):
        net, desc, streamer = real_streamed(*a, **k)
        seen["streamer"] = streamer
        return net, desc, streamer

    monkeypatch.setattr(cap, "build_streamed", spy_streamed)
    a = capture(model="wan2.1-t2v-14b", size="tiny", steps=(49,), ops="qkv,qk,ffn2", stream_blocks=True)
    assert seen["streamer"].max_live == 1 and "streamed" in a.weights
    # streamed blocks are rebuilt from their recorded RNG state: the ordinary build's weights
    # (every family: tests/test_capture_stream.py)
    b = capture(model="wan2.1-t2v-14b", size="tiny", steps=(49,), ops="qkv,qk,ffn2")
    for x, y in zip(a.ops, b.ops, strict=True):
        np.testing.assert_array_equal(x.X, y.X)
        np.testing.assert_array_equal(x.W, y.W)
