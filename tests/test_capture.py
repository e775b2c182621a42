"""Trace capture from a real (tiny, seeded) diffusers Wan model: algo.models, algo.latents, algo.capture.

Expected shapes are derived by hand from the tiny config (2 layers, 2 heads x 32, d = 64,
ffn 128, latent 4x16x16 -> 4x8x8 = 256 tokens), not from the code under test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algo import latents as lat
from algo.capture import CaptureError, capture, capture_to_file, quantize_int8
from algo.models import MODELS, model_config, rope_groups
from algo.trace import load_trace
from tests.attention_spy import self_attention_operands

STEPS = (0, 49)
M = 4 * 8 * 8  # tokens
D, HEADS, DH, FFN = 64, 2, 32, 128
# Wan RoPE split (diffusers WanRotaryPosEmbed): h = w = 2 * (d_h // 6) = 10, t = d_h - 2h = 12.
QK_GROUPS = [[0, 12, "w", "t"], [12, 22, "f", "h"], [22, 32, "f", "w"]]
# (X shape, X dtype, W shape) per op for the tiny model.
SHAPES = {
    "qkv": ((1, M, D), np.int8, (1, D, 3 * D)),
    "qk": ((HEADS, M, DH), np.int8, (HEADS, DH, M)),
    "pv": ((HEADS, M, M), np.uint8, (HEADS, M, DH)),
    "o_proj": ((1, M, D), np.int8, (1, D, D)),
    "ffn1": ((1, M, D), np.int8, (1, D, FFN)),
    "ffn2": ((1, M, FFN), np.int8, (1, FFN, D)),
}


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """A tiny capture of steps 0 and 49, written and read back, plus the float Q/K the model used."""
    calls = []
    path = tmp_path_factory.mktemp("cap") / "tiny.npz"
    with self_attention_operands() as seen:
        capture_to_file(out=path, steps=STEPS, seed=0, progress=lambda *a: calls.append(a))
    float_qk = [(q[0].transpose(0, 1), k[0].transpose(0, 1)) for q, k, _ in seen]
    return load_trace(path), path, float_qk, calls


def test_op_list_and_metadata(captured):
    trace, _, _, calls = captured
    assert trace.grid == (4, 8, 8)
    assert [s["index"] for s in trace.steps] == list(STEPS)
    assert trace.steps[0]["sigma"] == 1.0 and trace.steps[0]["timestep"] == 1000.0
    assert 0 < trace.steps[1]["sigma"] < 0.05
    assert trace.model == "wan2.1-t2v-1.3b" and trace.size == "tiny" and trace.seed == 0
    assert trace.weights.startswith("seeded: torch.manual_seed(0)")
    assert trace.b_msb == 4
    names = [(op.step, op.block, op.name) for op in trace.ops]
    assert names == [(s, b, n) for s in STEPS for b in range(2) for n in SHAPES]
    # progress: one call per (step, block), done counting up to total
    assert [c[:2] for c in calls] == [(i, 4) for i in range(5)]
    assert all(isinstance(c[2], str) for c in calls)


def test_shapes_dtypes_groups(captured):
    trace = captured[0]
    for op in trace.ops:
        xs, xdt, ws = SHAPES[op.name]
        assert op.X.shape == xs and op.X.dtype == xdt, op.name
        assert op.W.shape == ws and op.W.dtype == np.int8, op.name
        assert op.x_signed == (op.name != "pv")
        assert op.theta[0] <= op.theta[1]
        groups = [[g.k_start, g.k_stop, g.axis, g.kind] for g in op.groups]
        if op.name == "qk":
            assert groups == QK_GROUPS
        else:
            # project default G = 8 * ceil(K / 64): K = 64 -> 8, K = 128 -> 16, K = 256 -> 32
            g = {64: 8, 128: 16, 256: 32}[op.K]
            assert groups == [[k, k + g, "f", "block"] for k in range(0, op.K, g)]
    pv = next(op for op in trace.ops if op.name == "pv")
    assert pv.x_scale == pytest.approx(1 / 255)
    assert (pv.X.max(axis=2) == 255).all()  # each row's maximum is exp(0)


def test_quantisation_uses_full_range(captured):
    for op in captured[0].ops:
        if op.x_signed:
            assert np.abs(op.X.astype(int)).max() == 127, op.name
        assert np.abs(op.W.astype(int)).max() == 127, op.name


def test_int8_scores_track_float_scores(captured):
    trace, _, float_qk, _ = captured
    qk_ops = [op for op in trace.ops if op.name == "qk"]
    pv_ops = [op for op in trace.ops if op.name == "pv"]
    assert len(float_qk) == len(qk_ops) == 4
    for op, pv, (q, k) in zip(qk_ops, pv_ops, float_qk, strict=True):
        s_float = (q @ k.transpose(1, 2)).numpy() / np.sqrt(DH)
        s_int = (op.X.astype(np.float64) @ op.W.astype(np.float64)) * op.x_scale * op.w_scale / np.sqrt(DH)
        for h in range(HEADS):
            assert np.corrcoef(s_float[h].ravel(), s_int[h].ravel())[0, 1] > 0.999
        # P comes from the exact int8 scores (the accelerator's qk output): round(255 exp(c (S - rowmax)))
        s_exact = op.X.astype(np.int64) @ op.W.astype(np.int64)
        c = op.x_scale * op.w_scale / np.sqrt(DH)
        p_int = np.rint(255 * np.exp(c * (s_exact - s_exact.max(axis=2, keepdims=True))))
        assert np.array_equal(p_int, pv.X)
        # ... and tracks the float-score P it replaces
        p_float = np.rint(255 * np.exp(s_float - s_float.max(axis=2, keepdims=True)))
        assert np.corrcoef(p_float.ravel(), pv.X.ravel().astype(float))[0, 1] > 0.99


def test_deterministic_bytes(captured, tmp_path):
    path = captured[1]
    again = tmp_path / "again.npz"
    capture_to_file(out=again, steps=STEPS, seed=0)
    assert again.read_bytes() == path.read_bytes()


def test_seed_changes_trace():
    a = capture(steps=(49,), seed=0, blocks=(0,))
    b = capture(steps=(49,), seed=1, blocks=(0,))
    assert not np.array_equal(a.ops[0].W, b.ops[0].W)


def test_cross_ops_and_block_selection():
    trace = capture(steps=(49,), blocks=(1,), include_cross=True, theta={"qk": (1.0, 2.0)})
    names = [op.name for op in trace.ops]
    assert names == ["qkv", "qk", "pv", "o_proj", "cross_q", "cross_qk", "cross_pv", "cross_o", "ffn1", "ffn2"]
    assert {op.block for op in trace.ops} == {1}
    by = {op.name: op for op in trace.ops}
    assert by["cross_q"].X.shape == (1, M, D) and by["cross_q"].W.shape == (1, D, D)
    assert by["cross_qk"].X.shape == (HEADS, M, DH) and by["cross_qk"].W.shape == (HEADS, DH, 8)
    assert by["cross_pv"].X.shape == (HEADS, M, 8) and by["cross_pv"].W.shape == (HEADS, 8, DH)
    assert by["cross_o"].W.shape == (1, D, D)
    assert by["qk"].theta == (1.0, 2.0) and by["qkv"].theta != (1.0, 2.0)


def test_dispatch_restored_after_error():
    import diffusers.models.transformers.transformer_wan as wan_mod

    original = wan_mod.dispatch_attention_fn

    def boom(done, total, label):
        if done >= 1:  # after the first block, i.e. mid-forward with the wrapper installed
            assert wan_mod.dispatch_attention_fn is not original
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        capture(steps=(0,), progress=boom)
    assert wan_mod.dispatch_attention_fn is original


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"model": "sora"}, "wan2.1-t2v-1.3b"),
        ({"size": "huge"}, "tiny"),
        ({"steps": (50,)}, "steps"),
        ({"grid": (4, 0, 8)}, "grid"),
        ({"theta": (3.0, 1.0)}, "theta"),
        ({"b_msb": 8}, "b_msb"),
        ({"blocks": (2,)}, "blocks"),
    ],
)
def test_bad_arguments_raise_capture_error(kwargs, match):
    with pytest.raises(CaptureError, match=match):
        capture(**kwargs)
    assert issubclass(CaptureError, ValueError)


def test_full_config_and_rope_groups_from_module():
    import diffusers

    cfg = model_config("wan2.1-t2v-1.3b", "full")
    assert (cfg["num_attention_heads"], cfg["attention_head_dim"], cfg["num_layers"], cfg["ffn_dim"]) == (
        12, 128, 30, 8960)
    assert (cfg["text_dim"], cfg["freq_dim"], tuple(cfg["patch_size"])) == (4096, 256, (1, 2, 2))
    with torch.device("meta"):  # no memory, no init cost
        full = diffusers.WanTransformer3DModel(**cfg)
    g = rope_groups(full)
    assert [(x.k_start, x.k_stop, x.axis, x.kind) for x in g] == [
        (0, 44, "w", "t"), (44, 86, "f", "h"), (86, 128, "f", "w")]
    assert "wan2.1-t2v-1.3b" in MODELS


def test_token_order_is_raster():
    """Row f*H*W + h*W + w entering block 0 is the patch embedding of latent patch (f, 2h, 2w)."""
    from algo.models import build_model

    model, _ = build_model("wan2.1-t2v-1.3b", "tiny", 0)
    x = torch.from_numpy(lat.image_latents((4, 16, 16)))
    seen = {}

    def grab(_module, args):
        seen["h"] = args[0].clone()

    handle = model.blocks[0].register_forward_pre_hook(grab)
    try:
        with torch.inference_mode():
            model(hidden_states=x, timestep=torch.tensor([500.0]),
                  encoder_hidden_states=torch.zeros(1, 8, 32), return_dict=False)
    finally:
        handle.remove()
    conv = model.patch_embedding
    for f, h, w in [(0, 0, 1), (1, 2, 3), (3, 7, 5)]:
        patch = x[:, :, f:f + 1, 2 * h:2 * h + 2, 2 * w:2 * w + 2]
        ref = torch.nn.functional.conv3d(patch, conv.weight, conv.bias).flatten()
        torch.testing.assert_close(seen["h"][0, f * 64 + h * 8 + w], ref, rtol=1e-5, atol=1e-5)


def test_flow_sigmas_match_diffusers_scheduler():
    from diffusers import FlowMatchEulerDiscreteScheduler

    for n, shift in [(50, 5.0), (20, 3.0), (1, 5.0)]:
        sched = FlowMatchEulerDiscreteScheduler(shift=shift)
        sched.set_timesteps(n)
        np.testing.assert_allclose(lat.flow_sigmas(n, shift), sched.sigmas[:-1].numpy(), rtol=0, atol=1e-7)
    # hand check of the shift formula: sigma' = 5 s / (1 + 4 s) at s = 0.5 -> 5/6
    assert 5 * 0.5 / (1 + 4 * 0.5) == pytest.approx(5 / 6)


def test_latents_real_content_and_pan():
    x = lat.image_latents((4, 16, 16))
    assert x.shape == (1, 16, 4, 16, 16) and x.dtype == np.float32
    np.testing.assert_allclose(x.std(axis=(0, 2, 3, 4)), 1.0, rtol=1e-4)
    z = x[0]
    # consecutive frames of a slow pan are far more alike than unrelated positions
    d_time = np.abs(z[:, 1:] - z[:, :-1]).mean()
    d_far = np.abs(z[:, :, :8] - z[:, :, 8:]).mean()
    assert d_time < 0.7 * d_far
    clip = lat.pan_clip(3, 32, 32, pan_px=4)
    np.testing.assert_array_equal(clip[1][:, :-4], clip[0][:, 4:])  # the window slides by 4 px
    eps = lat.noise_like(x, 0)
    np.testing.assert_array_equal(lat.noisy_latents(x, 1.0, eps), eps)
    np.testing.assert_allclose(lat.noisy_latents(x, 0.25, eps), 0.75 * x + 0.25 * eps, atol=1e-6)


def test_quantize_int8_rounding():
    q, s = quantize_int8(np.array([0.5, 1.5, 2.5, -2.5, 127.0], dtype=np.float32))
    assert s == 1.0 and q.tolist() == [0, 2, 2, -2, 127]  # round half to even
    q, s = quantize_int8(np.zeros(3))
    assert s == 1.0 and q.tolist() == [0, 0, 0]
    with pytest.raises(CaptureError):
        quantize_int8(np.array([np.nan]))


def test_capture_is_byte_identical_across_processes(tmp_path):
    """The same `kaleido capture` in two fresh processes with different hash seeds and thread counts
    writes byte-identical files (a decision trace of two theta pairs with attention states; the exact
    trace's bytes are compared within one process by `test_deterministic_bytes`)."""
    import os
    import subprocess
    import sys

    args = ["capture", "--model", "wan2.1-t2v-1.3b", "--size", "tiny", "--steps", "48,49", "--ops", "qkv,qk,pv,ffn1"]
    args += ["--decisions-only", "--thetas", "2,6;4,12", "--attn-states"]
    outs = []
    for hash_seed, threads in (("1", "1"), ("2", "2")):
        out = tmp_path / f"{hash_seed}.npz"
        env = dict(os.environ, PYTHONHASHSEED=hash_seed, OMP_NUM_THREADS=threads)
        res = subprocess.run([sys.executable, "-m", "sim.cli", *args, "--out", str(out)], capture_output=True,
                             text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert load_trace(tmp_path / "1.npz").kind == "decisions"
