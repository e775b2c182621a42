"""Model families as plugins (algo.models.families): every family runs capture and quality on its tiny config.

References: the trace capture records (`algo.capture`, which quantises the operands on its own), the
golden model (`algo.reuse.golden.decide`), the unmodified diffusers forward (the float pass) and the
capture's own quantiser on hand-cut weight halves, never the hooks under test.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from algo import latents as lat
from algo.capture import TEXT_TOKENS, capture, patch_of, quantize_int8
from algo.models import MODELS, build_model, family_of, get_spec
from algo.models.families import FAMILIES
from algo.quality import run_quality
from algo.reuse.fake_quant import dequantize
from algo.reuse.golden import decide
from algo.reuse.torch_hooks import ReuseHooks

FAMILY_MODELS = [("wan2.1-t2v-1.3b", "wan"), ("hunyuanvideo", "hunyuan"), ("cogvideox-5b", "cogvideox")]
GRID = (4, 8, 8)
THETA = (4.0, 12.0)
SELF = ("qkv", "qk", "pv", "o_proj", "ffn1", "ffn2")


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def test_every_model_comes_from_a_family_module():
    assert list(FAMILIES) == ["wan", "hunyuan", "cogvideox"]
    assert sorted(MODELS) == sorted(row.name for fam in FAMILIES.values() for row in fam.models)
    for name, fam in FAMILY_MODELS:
        assert family_of(get_spec(name, "tiny")) is FAMILIES[fam]
    assert [FAMILIES[f].has_cross for f in FAMILIES] == [True, False, False]


def _forward_at(model: str, step: int, rh_kwargs: dict):
    """One forward of the tiny model at schedule step ``step`` on capture's inputs, under ReuseHooks."""
    spec = get_spec(model, "tiny")
    fam = family_of(spec)
    net, _ = build_model(model, "tiny", 0)
    sch = fam.schedule(50)
    p = patch_of(spec.sizes["tiny"])
    x0 = lat.image_latents(tuple(g * q for g, q in zip(GRID, p, strict=True)))
    x_t = torch.from_numpy(sch.noised(x0, lat.noise_like(x0, 0), step))
    inputs = fam.inputs(spec.sizes["tiny"], net, GRID, 0, torch.float32, TEXT_TOKENS)
    with ReuseHooks(net, GRID, **rh_kwargs) as rh, torch.inference_mode():
        rh.set_pass("reuse", step)
        net(**fam.forward_kwargs(inputs, x_t, sch.timestep(step)), return_dict=False)
    return net, rh


@pytest.mark.parametrize("model,family", FAMILY_MODELS)
def test_quality_hooks_see_the_captured_operand(model, family):
    """qkv of block 0 (nothing upstream quantised): the hooks' operand is the captured X bit for bit,
    and their decisions are the golden model's on it."""
    tr = capture(model=model, steps=(49,), blocks=[0], theta=THETA, ops="qkv")
    cap = tr.ops[0]
    _, rh = _forward_at(model, 49, dict(ops=SELF, theta=THETA, record_operands=True))
    got = next(o for o in rh.operands if o["block"] == 0 and o["op"] == "qkv")
    np.testing.assert_array_equal(got["x_q"], cap.X)
    assert got["scale"] == cap.x_scale
    dec, x_eff = decide(cap.X[0], tr.grid, [g.as_tuple() for g in cap.groups], THETA, tr.b_msb)
    np.testing.assert_array_equal(got["decisions"][0], dec)
    np.testing.assert_array_equal(got["x_used"][0].numpy(), (x_eff.astype(np.float64) * cap.x_scale).astype(np.float32))
    assert (dec != 0).any()


@pytest.mark.parametrize("model,family", FAMILY_MODELS)
def test_quality_runs_for_every_family(model, family):
    """theta 0 reuses nothing that differs: bit-identical latents; the int8 model stays close to the
    float diffusers forward (a mis-assembled joint attention would not); reuse at (4, 12) saves work."""
    zero = run_quality(model=model, steps=2, theta=(0, 0), float_reference=False)
    assert zero["latents"]["bit_identical"]
    r = run_quality(model=model, steps=2, theta=THETA)
    assert r["int8_vs_float"]["velocity_snr_db"] > 40.0
    assert 0.0 < r["mac_saved_fraction"] < 1.0
    assert np.isfinite(r["latents"]["psnr_db"]) and r["velocity_snr_db"] > 10.0
    assert set(r["per_op"]) == set(SELF)
    assert all(r["per_op"][op]["calls"] > 0 for op in SELF)
    sch = family_of(get_spec(model, "tiny")).schedule(50)
    assert r["sigmas"] == pytest.approx([float(sch.sigmas[i]) for i in (48, 49, 50)])


def test_hunyuan_fused_proj_out_weights_quantised_per_op():
    """The single-stream block's proj_out holds o_proj (input channels 0:d) and ffn2 (d:): in the
    exact pass each half is the capture's int8 W of that op times its scale."""
    tr = capture(model="hunyuanvideo", steps=(49,), blocks=[1], theta=THETA, ops="o_proj,ffn2")
    cap = {o.name: o for o in tr.ops}
    net, _ = build_model("hunyuanvideo", "tiny", 0)
    lin = net.single_transformer_blocks[0].proj_out
    d = net.single_transformer_blocks[0].attn.to_q.out_features
    with ReuseHooks(net, GRID, ops=SELF, theta=THETA) as rh:
        rh.set_pass("exact", 49)
        w = lin.weight.detach().clone()
    halves = [dequantize(cap[op].W[0], cap[op].w_scale).t() for op in ("o_proj", "ffn2")]
    np.testing.assert_array_equal(w[:, :d].numpy(), halves[0].numpy())
    np.testing.assert_array_equal(w[:, d:].numpy(), halves[1].numpy())
    q_o, s_o = quantize_int8(lin.weight.detach().t()[:d])  # the capture's quantiser on the hand-cut half
    np.testing.assert_array_equal(q_o, cap["o_proj"].W[0])
    assert s_o == cap["o_proj"].w_scale
    assert not torch.equal(lin.weight, w)  # float weights restored on exit


@pytest.mark.parametrize("name,table,convs", [("wan2.1-t2v-1.3b", True, ["nn.Conv3d"]),
                                               ("hunyuanvideo", False, ["nn.Conv3d"]),
                                               ("cogvideox-5b", False, ["nn.Conv2d"])])
def test_seeded_weights_text_names_only_what_the_model_has(name, table, convs):
    """The seeded-weights description names Wan's ``scale_shift_table`` only for Wan (diffusers'
    transformer_wan.py defines it; HunyuanVideo and CogVideoX have none) and the model's conv layer
    class (Wan and Hunyuan patch with nn.Conv3d, CogVideoX with nn.Conv2d)."""
    net, desc = build_model(name, "tiny", 0)
    names = {n.rsplit(".", 1)[-1] for n, _ in net.named_parameters()}
    assert ("scale_shift_table" in names) == table  # the premise, from the model itself
    assert ("scale_shift_table" in desc) == table
    for conv in ("nn.Conv2d", "nn.Conv3d"):
        assert (conv in desc) == (conv in convs)
    assert desc.startswith("seeded: torch.manual_seed(0)") and "nn.Linear" in desc
