"""Synthetic decision workloads (`algo.workloads.synth`, `kaleido synth`): the field's rules, determinism, errors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from algo.trace import load_trace
from algo.workloads.synth import SynthError, SynthField, field_decisions, parse_region, synth_trace
from tests.test_cli import assert_one_line_error, kaleido

#: 64x64 pixels x 5 frames -> latent 2 x 8 x 8 -> tokens 2 x 4 x 4 = 32 (Wan: 8x VAE, 2x2 patch).
SMALL = "64x64x5"


def test_field_edges_and_extremes():
    grid = (3, 4, 6)
    groups = [(0, 4, "w"), (4, 8, "f"), (8, 12, "h")]
    rng = np.random.default_rng(0)
    d = field_decisions(rng, grid, groups, 2, SynthField(1.0, 0.0, (2, 2), 0.5)).reshape(2, 3, 4, 6, 3)
    # r = 1: every token REUSEs except those without a neighbour along the group's axis (COMPUTE).
    assert (d[:, :, :, 0, 0] == 0).all() and (d[:, :, :, 1:, 0] == 2).all()
    assert (d[:, 0, :, :, 1] == 0).all() and (d[:, 1:, :, :, 1] == 2).all()
    assert (d[:, :, 0, :, 2] == 0).all() and (d[:, :, 1:, :, 2] == 2).all()
    d = field_decisions(rng, grid, groups, 1, SynthField(0.0, 1.0, (1, 1), 0.0)).reshape(1, 3, 4, 6, 3)
    assert (d[:, 1:, :, :, 1] == 1).all()
    d = field_decisions(rng, grid, groups, 1, SynthField(0.0, 0.0, (1, 1), 0.0))
    assert (d == 0).all()


def test_field_regions_and_persistence():
    grid = (4, 4, 6)
    rng = np.random.default_rng(3)
    d = field_decisions(rng, grid, [(0, 8, "f")], 1, SynthField(0.4, 0.3, (2, 3), 1.0)).reshape(4, 4, 6)
    # persist = 1: frames 1.. keep the frame-0 draw; each 2x3 region shares one code.
    assert (d[1] == d[2]).all() and (d[2] == d[3]).all()
    for h0 in (0, 2):
        for w0 in (0, 3):
            assert len(np.unique(d[1, h0:h0 + 2, w0:w0 + 3])) == 1


def test_field_shares():
    # Region 1x1, persist 0: every (token, group) of frames >= 1 is an independent draw.
    grid = (11, 40, 40)
    d = field_decisions(np.random.default_rng(5), grid, [(0, 8, "f")], 1, SynthField(0.6, 0.1, (1, 1), 0.0))
    later = d.reshape(11, 1600)[1:]
    for code, p in ((0, 0.3), (1, 0.1), (2, 0.6)):
        share = (later == code).mean()
        assert abs(share - p) < 4 * np.sqrt(p * (1 - p) / later.size)


@pytest.mark.parametrize(("fld", "needle"), [
    (SynthField(1.2, 0.0), "--reuse"), (SynthField(0.5, -0.1), "--partial"), (SynthField(0.7, 0.4), "<= 1"),
    (SynthField(0.5, 0.1, (8, 8), 1.5), "--persist"), (SynthField(0.5, 0.1, (0, 8)), "--region"),
])
def test_field_errors(fld, needle):
    with pytest.raises(SynthError, match=needle):
        fld.check()


def test_parse_region():
    assert parse_region("8x4") == (8, 4)
    for bad in ("8", "ax3", "0x4"):
        with pytest.raises(SynthError):
            parse_region(bad)


def test_synth_trace_ops_and_determinism(tmp_path):
    fld = SynthField(0.8, 0.04, (2, 2), 0.9)
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    synth_trace(a, "wan2.1-t2v-1.3b", SMALL, fld, blocks=[0, 2], steps=[0], seed=1)
    synth_trace(b, "wan2.1-t2v-1.3b", SMALL, fld, blocks=[0, 2], steps=[0], seed=1)
    assert a.read_bytes() == b.read_bytes()
    tr = load_trace(a)
    assert tr.kind == "decisions" and tr.grid == (2, 4, 4)
    names = [op.name for op in tr.ops]
    assert names == ["qkv", "qk", "pv", "o_proj", "cross_q", "cross_qk", "cross_pv", "cross_o", "ffn1", "ffn2"] * 2
    by = {op.name: op for op in tr.ops if op.block == 0}
    # Wan2.1-1.3B (published config): d = 1536, 12 heads x 128, ffn 8960, 512 text tokens.
    assert (by["qkv"].batch, by["qkv"].K, by["qkv"].N) == (1, 1536, 4608)
    assert (by["qk"].batch, by["qk"].K, by["qk"].N) == (12, 128, 32)
    assert (by["pv"].K, by["pv"].N) == (32, 128) and by["cross_pv"].K == 512
    assert (by["ffn2"].K, by["ffn2"].N) == (8960, 1536)
    assert json.loads(tr.notes)["synthetic"]["reuse"] == 0.8
    synth_trace(b, "wan2.1-t2v-1.3b", SMALL, fld, blocks=[0, 2], steps=[0], seed=2)
    assert a.read_bytes() != b.read_bytes()


def test_cli_synth_then_simulate(tmp_path):
    out, res_json = tmp_path / "s.npz", tmp_path / "r.json"
    res = kaleido("synth", "--resolution", SMALL, "--blocks", "0", "--reuse", "0.5", "--partial", "0.2",
                  "--region", "2x2", "--seed", "3", "-o", str(out))
    assert res.returncode == 0, res.stderr
    res = kaleido("simulate", str(out), "--json", str(res_json))
    assert res.returncode == 0, res.stderr
    r = json.loads(res_json.read_text())
    assert r["trace"]["kind"] == "decisions" and len(r["per_op"]) == 10
    assert r["reuse_fraction"]["reuse"] > 0
    # inspect: drawn decisions have no thresholds, so no theta is shown (not the stored placeholder 0,0)
    res = kaleido("inspect", str(out))
    assert res.returncode == 0, res.stderr
    assert "theta: none (decisions drawn by `kaleido synth`" in res.stdout and "│ 0,0 " not in res.stdout


@pytest.mark.parametrize(("args", "needle"), [
    (["--reuse", "1.5"], "--reuse"), (["--reuse", "0.7", "--partial", "0.4"], "<= 1"), (["--region", "8"], "--region"),
    (["--steps", "-1"], "--steps must be distinct"), (["--steps", "0,0"], "--steps must be distinct"),
])
def test_cli_synth_errors(tmp_path, args, needle):
    out = tmp_path / "s.npz"
    res = kaleido("synth", "--resolution", SMALL, *args, "-o", str(out))
    assert_one_line_error(res, needle)
    assert not out.exists() and not list(tmp_path.iterdir())


def test_synth_shape_errors(tmp_path):
    # The CLI maps SynthError to one line and exit 2 (test_cli_synth_errors); these need the model registry.
    out = tmp_path / "s.npz"
    fld = SynthField(0.5, 0.1)
    for kwargs, needle in (({"model": "nope"}, "unknown model"), ({"resolution": "999p"}, "--resolution"),
                           ({"blocks": [99]}, "blocks")):
        args = {"model": "wan2.1-t2v-1.3b", "resolution": SMALL, **kwargs}
        with pytest.raises(SynthError, match=needle):
            synth_trace(out, args["model"], args["resolution"], fld, blocks=args.get("blocks"))
    assert not list(tmp_path.iterdir())


def test_weights_text_round_trip(tmp_path):
    """A synthetic trace's weights text names its field, and `field_of_weights` reads the field back; a
    captured trace's weights name none."""
    from algo.workloads.synth import field_of_weights

    fld = SynthField(0.8, 0.04, (8, 4), 0.9)
    tr = synth_trace(tmp_path / "s.npz", "wan2.1-t2v-1.3b", SMALL, fld, blocks=[0], seed=7)
    assert field_of_weights(tr.weights) == (fld, 7)
    assert field_of_weights(load_trace(tmp_path / "s.npz").weights) == (fld, 7)
    assert field_of_weights("seeded (torch.manual_seed 0)") is None
    assert field_of_weights(None) is None
