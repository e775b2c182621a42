"""Trace format v2 (decision traces), checkpoint loading, resolutions and shape plans.

Expected values are derived independently: packed bytes by hand, full-size shapes from docs/spec.md §1
(480p 21x30x52 = 32,760 tokens, 720p 21x45x80 = 75,600; Wan2.1-1.3B d = 1536, d_ffn = 8960,
12 heads x 128, RoPE 44/42/42), decisions by running `algo.reuse.golden.decide` on an exact capture.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

from algo.capture import CaptureError, capture, capture_to_file, parse_ops, plan_ops, resolution_grid
from algo.models import build_model
from algo.reuse.golden import decide
from algo.trace import TraceError, load_trace, pack_decisions, save_trace, unpack_decisions
from hw.config import load_config
from sim.engines.model import SimError, simulate_trace
from tests.trace_files import rewrite_trace

THETAS = [(2.0, 6.0), (4.0, 12.0)]
KW = dict(steps=(49,), blocks=(1,), include_cross=True, seed=0)


def kaleido(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """An exact and a decision trace of the same tiny run (block 1, step 49, every op)."""
    d = tmp_path_factory.mktemp("v2")
    capture_to_file(out=d / "exact.npz", theta=THETAS[1], **KW)
    capture_to_file(out=d / "dec.npz", thetas="2,6; 4,12", **KW)
    return load_trace(d / "exact.npz"), load_trace(d / "dec.npz"), d


# -- packing -------------------------------------------------------------------------------------

def test_pack_by_hand():
    # [0, 1, 2, 0 | 2] -> 00 01 10 00 = 0x18, then 10 00 00 00 (zero padding) = 0x80
    packed = pack_decisions(np.array([0, 1, 2, 0, 2], dtype=np.int8))
    assert packed.dtype == np.uint8 and packed.tolist() == [0x18, 0x80]
    assert unpack_decisions(packed, 5).tolist() == [0, 1, 2, 0, 2]
    with pytest.raises(TraceError, match="code 3"):
        unpack_decisions(np.array([0x03], np.uint8), 4)
    with pytest.raises(TraceError, match="padding"):
        unpack_decisions(np.array([0x18, 0x81], np.uint8), 5)
    with pytest.raises(TraceError, match=r"uint8 \[2\]"):
        unpack_decisions(np.array([0x18], np.uint8), 5)
    rng = np.random.default_rng(0)
    d = rng.integers(0, 3, size=1001).astype(np.int8)
    np.testing.assert_array_equal(unpack_decisions(pack_decisions(d), d.size), d)


# -- decision traces -----------------------------------------------------------------------------

def test_decisions_equal_golden_on_exact_operands(pair):
    exact, dec, _ = pair
    assert exact.version == 5 and dec.version == 4  # 5: exact pv derives P from qk; 4: the decision pv carries attention states (D28)
    assert exact.kind == "exact" and dec.kind == "decisions"
    assert [(o.name, o.block, o.step) for o in exact.ops] == [(o.name, o.block, o.step) for o in dec.ops]
    assert len(dec.ops) == 10
    for e, d in zip(exact.ops, dec.ops, strict=True):
        assert (d.batch, d.M, d.K, d.N) == (e.batch, e.M, e.K, e.N), e.name
        assert d.groups == e.groups and d.x_signed == e.x_signed
        assert d.x_scale == e.x_scale and d.w_scale == e.w_scale, e.name
        assert d.thetas == tuple(THETAS) and d.theta == THETAS[0]
        assert d.X is None and d.W is None
        assert d.decisions.shape == (2, e.batch, -(-e.M * len(e.groups) // 4))
        for ti, th in enumerate(THETAS):
            got = d.decisions_for(ti)
            for b in range(e.batch):  # pv: whole P here, frame chunks in the decision capture
                want, _ = decide(e.X[b], exact.grid, [g.as_tuple() for g in e.groups], th, exact.b_msb)
                np.testing.assert_array_equal(got[b], want, err_msg=f"{e.name} head {b} theta {th}")


def test_simulate_decision_trace_matches_exact(pair):
    exact, dec, _ = pair
    cfg = load_config("tiny-8x8")
    a = simulate_trace(exact, cfg)
    b = simulate_trace(dec, cfg, theta_index=1)  # thetas[1] = (4, 12) = the exact trace's theta
    assert [r["cycles"] for r in a["per_op"]] == [r["cycles"] for r in b["per_op"]]
    assert a["reuse_fraction"] == b["reuse_fraction"]
    c = simulate_trace(dec, cfg, theta_index=0)  # lower thresholds: no more reuse than (4, 12)
    assert c["reuse_fraction"]["reuse"] <= b["reuse_fraction"]["reuse"]
    with pytest.raises(SimError, match="theta index 2"):
        simulate_trace(dec, cfg, theta_index=2)


def test_round_trip_identical(pair, tmp_path):
    _, dec, _ = pair
    again = tmp_path / "again.npz"
    save_trace(dec, again)
    back = load_trace(again)
    for a, b in zip(dec.ops, back.ops, strict=True):
        np.testing.assert_array_equal(a.decisions, b.decisions)
        assert a.meta() == b.meta()


def test_corrupt_decision_traces_rejected(pair, tmp_path):
    _, _, d = pair
    good = d / "dec.npz"
    raw = good.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(raw[: len(raw) // 2])
    # flip one byte inside the first decision array's data (zip CRC no longer matches)
    with zipfile.ZipFile(good) as z:
        info = z.getinfo("op00000_D.npy")
    flip = bytearray(raw)
    pos = info.header_offset + 30 + len(info.filename) + len(info.extra) + 200
    flip[pos] ^= 0xFF
    (tmp_path / "flip.npz").write_bytes(bytes(flip))

    def short(a):
        a["op00000_D"] = a["op00000_D"][..., :-1]

    def code3(a):
        a["op00001_D"] = np.full_like(a["op00001_D"], 0xFF)

    def edge(a):  # first token (frame 0) never has a temporal neighbour: REUSE there is invalid
        a["op00000_D"] = a["op00000_D"].copy()
        a["op00000_D"][0, 0, 0] = 0x80

    cases = {
        "trunc.npz": "corrupt or truncated",
        "flip.npz": "corrupt or truncated",
        "v7.npz": "version 7",
        "nan.npz": "w_scale",
        "kind.npz": "unknown trace kind",
        "short.npz": "packed decisions have shape",
        "code3.npz": "code 3",
        "edge.npz": "without a neighbour",
        "nothetas.npz": "thetas",
    }
    rewrite_trace(good, tmp_path / "v7.npz", meta_fn=lambda m: m.update(version=7))
    rewrite_trace(good, tmp_path / "nan.npz", meta_fn=lambda m: m["ops"][3].update(w_scale=float("nan")))
    rewrite_trace(good, tmp_path / "kind.npz", meta_fn=lambda m: m.update(kind="sparse"))
    rewrite_trace(good, tmp_path / "short.npz", arr_fn=short)
    rewrite_trace(good, tmp_path / "code3.npz", arr_fn=code3)
    rewrite_trace(good, tmp_path / "edge.npz", arr_fn=edge)
    rewrite_trace(good, tmp_path / "nothetas.npz", meta_fn=lambda m: m["ops"][0].pop("thetas"))
    for name, needle in cases.items():
        with pytest.raises(TraceError, match=needle):
            load_trace(tmp_path / name)


def test_version1_files_still_load(tmp_path):
    X = np.arange(-8, 8, dtype=np.int8).reshape(1, 4, 4)  # noqa: N806
    W = np.ones((1, 4, 2), dtype=np.int8)  # noqa: N806
    meta = {"format": "kaleido-trace", "version": 1, "model": "m", "size": "s", "weights": "w", "seed": 0,
            "grid": [1, 2, 2], "b_msb": 4, "group_size_rule": "r", "steps": [], "notes": "",
            "ops": [{"name": "qkv", "block": 0, "step": 0, "batch": 1, "M": 4, "K": 4, "N": 2, "x_signed": True,
                     "groups": [[0, 4, "f", "block"]], "theta": [1, 2], "x_scale": 1.0, "w_scale": 1.0}]}
    np.savez(tmp_path / "v1.npz", meta=np.frombuffer(json.dumps(meta).encode(), np.uint8),
             op00000_X=X, op00000_W=W)
    tr = load_trace(tmp_path / "v1.npz")
    assert tr.version == 1 and tr.kind == "exact"
    np.testing.assert_array_equal(tr.ops[0].X, X)


def test_streamed_capture_leaves_nothing_on_error(tmp_path):
    out = tmp_path / "t.npz"

    def boom(done, total, label):
        if done >= 1:
            raise RuntimeError("stop")

    with pytest.raises(RuntimeError, match="stop"):
        capture_to_file(out=out, steps=(49,), thetas="4,12", progress=boom)
    assert list(tmp_path.iterdir()) == []


# -- resolution, ops, shape plans ------------------------------------------------------------------

def test_resolution_grids():
    assert resolution_grid("480p") == (21, 30, 52)  # 832x480x81 -> latent 21x60x104 -> /(1,2,2)
    assert resolution_grid("720p") == (21, 45, 80)
    assert resolution_grid("832x480x81") == (21, 30, 52)
    assert resolution_grid("128x128x13") == (4, 8, 8)
    for bad, needle in [("1080i", "480p, 720p or WxHxF"), ("832x480x80", r"1 \+ 4n"), ("830x480x81", "multiples")]:
        with pytest.raises(CaptureError, match=needle):
            resolution_grid(bad)


@pytest.mark.parametrize("res, grid, m", [("480p", (21, 30, 52), 32_760), ("720p", (21, 45, 80), 75_600)])
def test_full_size_shape_plan(res, grid, m):
    g, ops = plan_ops("wan2.1-t2v-1.3b", "full", steps=(0,), blocks=(0, 29), ops="all", resolution=res)
    assert g == grid and grid[0] * grid[1] * grid[2] == m
    # docs/spec.md §1: d = 12 x 128 = 1536, d_ffn = 8960, RoPE t/h/w 44/42/42; L = 8 seeded text tokens
    want = {"qkv": (1, m, 1536, 4608), "qk": (12, m, 128, m), "pv": (12, m, m, 128), "o_proj": (1, m, 1536, 1536),
            "cross_q": (1, m, 1536, 1536), "cross_qk": (12, m, 128, 8), "cross_pv": (12, m, 8, 128),
            "cross_o": (1, m, 1536, 1536), "ffn1": (1, m, 1536, 8960), "ffn2": (1, m, 8960, 1536)}
    assert [(o.block, o.name) for o in ops] == [(b, n) for b in (0, 29) for n in want]
    for o in ops:
        assert (o.batch, o.M, o.K, o.N) == want[o.name], o.name
        if o.name == "qk":
            assert [(g.k_start, g.k_stop, g.axis) for g in o.groups] == [(0, 44, "w"), (44, 86, "f"), (86, 128, "f")]
        assert o.groups[-1].k_stop == o.K


def test_ops_selection():
    assert parse_ops("ffn2,qkv") == ("qkv", "ffn2")
    assert parse_ops("cross") == ("cross_q", "cross_qk", "cross_pv", "cross_o")
    with pytest.raises(CaptureError, match="'softmax'"):
        parse_ops("qkv,softmax")
    tr = capture(steps=(49,), blocks=(0,), ops="pv,ffn1")
    assert [o.name for o in tr.ops] == ["pv", "ffn1"]


# -- checkpoints ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """A tiny model seeded with 3 saved as a diffusers folder and as one safetensors file."""
    from safetensors.torch import save_file

    d = tmp_path_factory.mktemp("ckpt")
    model, _ = build_model("wan2.1-t2v-1.3b", "tiny", seed=3)
    model.save_pretrained(d / "folder")
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(sd, str(d / "w.safetensors"))
    bad = dict(sd)
    bad.pop("blocks.0.ffn.net.2.bias")
    bad["blocks.1.attn1.to_q.weight"] = torch.zeros(3, 3)
    save_file(bad, str(d / "bad.safetensors"))
    big, _ = build_model("wan2.1-t2v-1.3b", "tiny", seed=3)
    from diffusers import WanTransformer3DModel
    three = WanTransformer3DModel(**dict(big.config, num_layers=3))
    three.save_pretrained(d / "three")
    return d


def test_checkpoint_weights_load(checkpoints):
    kw = dict(steps=(49,), blocks=(0,), ops="qkv,ffn2", seed=0)
    ref3 = capture(**dict(kw, seed=3))
    ref0 = capture(**kw)
    for src, fmt in [(checkpoints / "folder", "diffusers folder"), (checkpoints / "w.safetensors", "safetensors file")]:
        tr = capture(weights=src, **kw)
        assert tr.weights == f"checkpoint ({fmt}): {src.resolve()}"
        for a, b, c in zip(tr.ops, ref3.ops, ref0.ops, strict=True):
            np.testing.assert_array_equal(a.W, b.W)  # the weights of the seed-3 model ...
            assert not np.array_equal(a.W, c.W)  # ... not those of seed 0


@pytest.mark.parametrize("name, needle", [
    ("nope", "not found"), ("three", "num_layers 3 != 2"), ("bad.safetensors", "missing keys blocks.0.ffn.net.2.bias"),
])
def test_bad_checkpoints(checkpoints, name, needle):
    with pytest.raises(CaptureError, match=needle):
        capture(steps=(49,), weights=checkpoints / name)


def test_bad_checkpoint_cli_exit_2(checkpoints, tmp_path):
    out = tmp_path / "t.npz"
    res = kaleido("capture", "--out", str(out), "--weights", str(checkpoints / "bad.safetensors"))
    assert res.returncode == 2 and res.stderr.startswith("error: ") and "wrong shape" in res.stderr
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_inspect_and_simulate_cli_on_decision_trace(pair):
    _, _, d = pair
    res = kaleido("inspect", str(d / "dec.npz"), "--json", "--theta-index", "1")
    assert res.returncode == 0, res.stderr
    js = json.loads(res.stdout)
    assert js["format_version"] == 4 and js["kind"] == "decisions"
    first = js["ops"][0]
    assert {k: first[k] for k in ("name", "block", "step", "M", "K", "N")} == {
        "name": "qkv", "block": 1, "step": 49, "M": 256, "K": 64, "N": 192}
    assert first["theta"] == [4.0, 12.0] and first["thetas"] == [[2.0, 6.0], [4.0, 12.0]]
    res = kaleido("simulate", str(d / "dec.npz"), "--config", "tiny-8x8", "--theta-index", "5")
    assert res.returncode == 2 and "theta index 5" in res.stderr
