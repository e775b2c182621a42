"""Reuse inside the PyTorch model and measured quality: algo.reuse.torch_hooks, algo.quality, `kaleido quality`.

Expected values come from the golden model (`algo.reuse.golden.decide`), from trace capture (`algo.capture`,
which quantises the same operands independently), and from hand arithmetic, not from the code under test.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from algo import latents as lat
from algo.capture import TEXT_TOKENS, capture
from algo.models import build_model, model_config, rope_groups
from algo.quality import NO_VAE, pareto_front, run_quality, sweep_quality, to_jsonable
from algo.reuse.fake_quant import ReuseError, dequantize, snr_db, snr_db_energy, theta_for
from algo.reuse.golden import block_groups, decide
from algo.reuse.thresholds import parse_theta
from algo.reuse.torch_hooks import ReuseHooks

SELF = ("qkv", "qk", "pv", "o_proj", "ffn1", "ffn2")
GRID = (4, 8, 8)  # tiny default token grid
BIG = (8.0, 24.0)


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def no_reuse():
    return run_quality(steps=3, theta=(0, 0), float_reference=False, keep_latents=True)


@pytest.fixture(scope="module")
def big_reuse():
    return run_quality(steps=3, theta=BIG, keep_latents=True)


# -- helpers on hand values ------------------------------------------------------------------------

def test_snr_helper_hand_values():
    assert snr_db([3.0, 4.0], [0.3, 0.4]) == pytest.approx(20.0, abs=1e-12)  # 25 / 0.25 = 100
    assert snr_db(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 0.0])) == math.inf
    assert snr_db_energy(1.0, 10.0) == pytest.approx(-10.0)
    assert snr_db_energy(0.0, 1.0) == -math.inf


def test_theta_forms_and_errors():
    assert theta_for((1, 4), 3, "qkv") == (1.0, 4.0)
    assert theta_for({"qkv": (2, 8)}, 0, "qkv") == (2.0, 8.0)
    assert theta_for(lambda s, op: (s, s + 1), 7, "pv") == (7.0, 8.0)
    with pytest.raises(ReuseError, match="theta1 <= theta2"):
        theta_for((8, 4), 0, "qkv")
    # Project rules (algo.reuse.thresholds): a mapping's missing ops take "default", else (4, 12).
    assert theta_for({"qkv": (1, 2)}, 0, "ffn1") == (4.0, 12.0)
    assert theta_for({"qkv": (1, 2), "default": (0, 1)}, 0, "ffn1") == (0.0, 1.0)
    sched = parse_theta("4,12; ffn1@48-49=8,24")
    assert theta_for(sched, 49, "ffn1") == (8.0, 24.0) and theta_for(sched, 47, "ffn1") == (4.0, 12.0)
    with pytest.raises(ReuseError, match="unknown op"):
        run_quality(steps=1, ops="qkv,bogus")


def test_pareto_front_hand_values():
    # saved, psnr: (0, inf) on the front; (0.1, 40) beats (0.05, 30); (0.2, 35) and (0.3, 20) are on it.
    saved = [0.0, 0.05, 0.1, 0.2, 0.3, 0.25]
    psnr = [math.inf, 30.0, 40.0, 35.0, 20.0, 19.0]
    assert pareto_front(saved, psnr) == [0, 2, 3, 4]


# -- exactness: theta (0, 0) -----------------------------------------------------------------------

def test_theta_zero_is_bit_identical(no_reuse):
    r = no_reuse
    fin = r["final_latents"]
    assert np.array_equal(fin["exact"], fin["reuse"])
    assert r["latents"]["bit_identical"] and r["latents"]["psnr_db"] == math.inf
    assert r["latents"]["ssim"] == pytest.approx(1.0)
    assert r["velocity_snr_db"] == math.inf and r["update_snr_db"] == math.inf
    for op in SELF:
        v = r["per_op"][op]
        assert v["snr_db"] == math.inf and v["local_snr_db"] == math.inf, op
        assert v["fractions"] == {"compute": 1.0, "partial": 0.0, "reuse": 0.0}
        assert v["calls"] == 3 * 2  # 3 steps x 2 blocks
    assert r["mac_saved_fraction"] == 0.0


def test_large_theta_reuses_with_finite_quality(big_reuse):
    r = big_reuse
    assert r["mac_fractions"]["compute"] < 1.0 and r["mac_saved_fraction"] > 0.0
    for op in SELF:
        f = r["per_op"][op]["fractions"]
        assert f["partial"] + f["reuse"] > 0.0, op
        assert sum(f.values()) == pytest.approx(1.0)
        assert math.isfinite(r["per_op"][op]["local_snr_db"])
    assert math.isfinite(r["latents"]["psnr_db"]) and 0.0 < r["latents"]["ssim"] < 1.0
    assert not np.array_equal(r["final_latents"]["exact"], r["final_latents"]["reuse"])
    # The schedule: last 3 of 50 steps, Euler from noised image latents, terminal sigma 0.
    assert r["start_step"] == 47 and [s["step"] for s in r["per_step"]] == [47, 48, 49]
    assert r["sigmas"][-1] == 0.0 and len(r["sigmas"]) == 4
    # int8 without reuse is close to the float model, much closer than with reuse.
    assert r["int8_vs_float"]["psnr_db"] > r["latents"]["psnr_db"]


def test_missing_vae_and_lpips_are_reported(no_reuse, tmp_path):
    assert no_reuse["frames"] == NO_VAE == "no VAE checkpoint given"
    lp = no_reuse["lpips"]
    assert isinstance(lp, str) and lp.startswith("unavailable (")
    if importlib.util.find_spec("lpips") is None:
        assert "no local weights" in lp
    with pytest.raises(ReuseError, match="VAE checkpoint not found"):
        run_quality(steps=1, vae=tmp_path / "nope")
    js = json.dumps(to_jsonable(no_reuse["latents"]), allow_nan=False)
    assert '"psnr_db": "inf"' in js


# -- per-op switch ---------------------------------------------------------------------------------

def _inputs(seed=0, step=49):
    cfg = model_config("wan2.1-t2v-1.3b", "tiny")
    x0 = lat.image_latents((GRID[0], 2 * GRID[1], 2 * GRID[2]))
    sigma = float(lat.flow_sigmas(50)[step])
    x = torch.from_numpy(lat.noisy_latents(x0, sigma, lat.noise_like(x0, seed)))
    t = torch.tensor([float(np.float32(sigma) * np.float32(1000))])
    text = np.random.default_rng([seed, 1]).standard_normal((1, TEXT_TOKENS, cfg["text_dim"]))
    return x, t, torch.from_numpy(text.astype(np.float32))


def test_only_ffn1_enabled():
    net, _ = build_model("wan2.1-t2v-1.3b", "tiny", 0)
    x, t, text = _inputs()
    with ReuseHooks(net, GRID, ops=("ffn1",), theta=BIG) as rh, torch.inference_mode():
        rh.set_pass("exact", 49)
        net(hidden_states=x, timestep=t, encoder_hidden_states=text, return_dict=False)
        rh.set_pass("reuse", 49)
        net(hidden_states=x, timestep=t, encoder_hidden_states=text, return_dict=False)
    st = rh.stats
    assert st.ops() == ["ffn1"] and {o for o, _ in st.local} == {"ffn1"}
    assert st.fractions("ffn1")["compute"] < 1.0
    calls = {(c["block"], c["op"]): c for c in st.calls}
    # Block 0: everything before ffn1 sees identical inputs -> identical outputs; ffn1 and after differ.
    for op in ("qkv", "qk", "pv", "o_proj"):
        assert calls[(0, op)]["noise"] == 0.0, op
    assert calls[(0, "ffn1")]["noise"] > 0.0 and calls[(0, "ffn2")]["noise"] > 0.0
    assert calls[(1, "qkv")]["noise"] > 0.0  # block 1 input carries block 0's ffn error
    # Hooks are gone afterwards: a plain forward equals the unhooked model's.
    net2, _ = build_model("wan2.1-t2v-1.3b", "tiny", 0)
    with torch.inference_mode():
        a = net(hidden_states=x, timestep=t, encoder_hidden_states=text, return_dict=False)[0]
        b = net2(hidden_states=x, timestep=t, encoder_hidden_states=text, return_dict=False)[0]
    assert torch.equal(a, b)


def test_step_sensitive_theta_callable():
    def th(step, op):
        return BIG if step == 49 else (0, 0)

    r = run_quality(steps=2, theta=th, ops="ffn1,ffn2", float_reference=False)
    assert r["theta_table"]["ffn1"] == [[48, 0.0, 0.0], [49, 8.0, 24.0]]
    by_step = {s["step"]: s for s in r["per_step"]}
    assert by_step[48]["mac_fractions"]["compute"] == 1.0 and by_step[48]["velocity_snr_db"] == math.inf
    assert by_step[49]["mac_fractions"]["compute"] < 1.0
    assert set(r["ops"]) == {"ffn1", "ffn2"} and r["per_op"]["qkv"]["fractions"] is None


# -- the torch operand is the golden model's X_eff, on a captured operand --------------------------

def test_torch_operand_equals_golden_on_captured_operand():
    theta = (4.0, 12.0)
    tr = capture(steps=(49,), blocks=[0], theta=theta)
    cap = {op.name: op for op in tr.ops}
    net, _ = build_model("wan2.1-t2v-1.3b", "tiny", 0)
    x, t, text = _inputs()
    with ReuseHooks(net, GRID, ops=SELF, theta=theta, record_operands=True) as rh, torch.inference_mode():
        rh.set_pass("reuse", 49)
        net(hidden_states=x, timestep=t, encoder_hidden_states=text, return_dict=False)
    rec = {o["op"]: o for o in rh.operands if o["block"] == 0}
    # qkv of block 0: nothing upstream is quantised, so the operand is exactly the captured one.
    q = rec["qkv"]
    np.testing.assert_array_equal(q["x_q"], cap["qkv"].X)
    assert q["scale"] == cap["qkv"].x_scale
    groups = [g.as_tuple() for g in cap["qkv"].groups]
    assert groups == block_groups(64)
    dec, x_eff = decide(cap["qkv"].X[0], tr.grid, groups, theta, tr.b_msb)
    expect = (x_eff.astype(np.float64) * cap["qkv"].x_scale).astype(np.float32)
    np.testing.assert_array_equal(q["x_used"][0].numpy(), expect)
    np.testing.assert_array_equal(q["decisions"][0], dec)
    assert (dec != 0).any()  # the check covers PARTIAL/REUSE rows, not only COMPUTE
    # qk (RoPE t/h/w groups from the model, per head) and pv (uint8 P): X_eff x scale per head.
    assert rec["qk"]["groups"] == [g.as_tuple() for g in rope_groups(net)] == [g.as_tuple() for g in cap["qk"].groups]
    for op in ("qk", "pv"):
        o = rec[op]
        for h in range(o["x_q"].shape[0]):
            _, e = decide(o["x_q"][h], GRID, o["groups"], theta, 4)
            scale = o["scale"] if op == "qk" else 1.0  # P is used as integers, normalised by rowsum after
            np.testing.assert_array_equal(o["x_used"][h].numpy(), dequantize(e, scale).numpy())
    assert rec["pv"]["x_q"].dtype == np.uint8


def test_pv_operand_is_p_from_the_int8_scores():
    """The hooks' P follows the trace's rule (int8 scores of qk's operands): block 0 with only qk and pv
    quantised sees the float model's Q and K, as capture does, so the exact pass's P is the captured P,
    and the reuse pass's P comes from qk's effective Q (what the accelerator's qk GEMM outputs)."""
    theta = (4.0, 12.0)
    tr = capture(steps=(49,), blocks=[0], ops="qk,pv", theta=theta)
    cap = {op.name: op for op in tr.ops}
    net, _ = build_model("wan2.1-t2v-1.3b", "tiny", 0)
    x, t, text = _inputs()
    recs = {}
    with ReuseHooks(net, GRID, ops=("qk",), quant_ops=("qk", "pv"), theta=theta, record_operands=True) as rh, \
            torch.inference_mode():
        for mode in ("exact", "reuse"):
            rh.operands.clear()
            rh.set_pass(mode, 49)
            net(hidden_states=x, timestep=t, encoder_hidden_states=text, return_dict=False)
            recs[mode] = {o["op"]: o for o in rh.operands if o["block"] == 0}
    qk = cap["qk"]
    np.testing.assert_array_equal(recs["exact"]["qk"]["x_q"], qk.X)
    np.testing.assert_array_equal(recs["exact"]["pv"]["x_q"], cap["pv"].X)
    q_eff = recs["reuse"]["qk"]["x_eff"]
    assert not np.array_equal(q_eff, qk.X)  # qk reused something
    s = q_eff.astype(np.int64) @ qk.W.astype(np.int64)  # exact integer scores, K from the capture
    c = qk.x_scale * qk.w_scale / math.sqrt(qk.K)
    want = np.rint(255.0 * np.exp(c * (s - s.max(axis=2, keepdims=True)))).astype(np.uint8)
    np.testing.assert_array_equal(recs["reuse"]["pv"]["x_q"], want)


# -- sweep, determinism, VAE -----------------------------------------------------------------------

def test_sweep_writes_outputs_and_is_deterministic(tmp_path):
    kw = dict(thetas=[(0, 0), BIG], steps=1, ops="ffn1,ffn2")
    from sim.report.quality import write_quality_sweep

    a = sweep_quality(**kw)
    write_quality_sweep(a, tmp_path / "a")
    b = sweep_quality(**kw)
    write_quality_sweep(b, tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == ["quality_sweep.csv", "quality_sweep.json", "quality_sweep.pdf", "quality_sweep.png"]
    for n in names:
        assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes(), n
    assert a["points"][0]["latent_psnr_db"] == math.inf and a["points"][1]["mac_saved"] > 0
    assert a["pareto"] == [0, 1] and b["points"] == a["points"]
    rows = (tmp_path / "a" / "quality_sweep.csv").read_text().splitlines()
    assert rows[0].startswith("theta1,theta2,compute,partial,reuse,mac_saved,latent_psnr_db") and len(rows) == 3
    assert ",inf," in rows[1]


def test_decoded_frames_with_local_vae(tmp_path):
    from diffusers import AutoencoderKLWan

    torch.manual_seed(0)
    AutoencoderKLWan(base_dim=8, dim_mult=[1, 1, 1, 1], num_res_blocks=1).save_pretrained(tmp_path / "vae")
    r = run_quality(steps=1, theta=BIG, ops="ffn2", grid=(2, 4, 4), float_reference=False, vae=tmp_path / "vae")
    fr = r["frames"]
    assert isinstance(fr, dict) and fr["shape"] == [5, 64, 64, 3] and fr["data_range"] == 1.0  # 1 + 4 (F - 1)
    assert math.isfinite(fr["psnr_db"]) or fr["psnr_db"] == math.inf
    assert isinstance(r["lpips"], str) and r["lpips"].startswith("unavailable (")


# -- CLI -------------------------------------------------------------------------------------------

def _kaleido(*args):
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("args", [("quality", "--theta", "8,4"), ("quality-sweep", "--thetas", "1,4;12,2")])
def test_cli_bad_theta_exits_2_with_one_line(args, tmp_path):
    res = _kaleido(*args, "--json" if args[0] == "quality" else "--out", str(tmp_path / "o"))
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "theta1 <= theta2" in lines[0]
    assert not (tmp_path / "o").exists()


def test_cli_quality_summary(tmp_path):
    from typer.testing import CliRunner

    from sim.cli import app

    out = tmp_path / "q.json"
    # In-process (the model libraries are already imported): a subprocess spends ~5 s importing them.
    res = CliRunner().invoke(app, ["quality", "--steps", "1", "--grid", "2,4,4", "--theta", "8,24",
                                   "--ops", "ffn1,ffn2", "--json", str(out)])
    assert res.exit_code == 0, (res.stdout, res.stderr)
    assert "frames: no VAE checkpoint given" in res.stdout
    assert "lpips: unavailable (" in res.stdout
    data = json.loads(out.read_text())
    assert data["ops"] == ["ffn1", "ffn2"] and data["frames"] == NO_VAE
    assert isinstance(data["latents"]["psnr_db"], float)


def test_cross_ops_optional():
    r = run_quality(steps=1, ops="cross_qk,cross_pv", theta=BIG, float_reference=False)
    assert r["quant_ops"] == [*SELF, "cross_qk", "cross_pv"]
    assert [op for op, v in r["per_op"].items() if v["fractions"] is not None] == ["cross_qk", "cross_pv"]
    assert r["per_op"]["cross_qk"]["fractions"]["compute"] < 1.0
