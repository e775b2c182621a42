"""Baselines (sim.baselines, algo.reuse.policies): hand-derived codes, cycles and roofline values,
lossless settings measured lossless in the PyTorch path, and the `kaleido baselines` CLI contract.

The hand-built trace: tiny-8x8 (R = C = 8, d = 2), grid 3x2x4 (8 positions per frame, so each frame
is one tile of 8 rows), x_scale 1. ``ffn1`` at steps 0 and 1 (M 24, K 16 in 2 groups of 8 channels,
`algo.reuse.golden.block_groups`, N 8): step 0 has frame 1 = frame 0 and frame 2 = frame 0 + 5; step 1 =
step 0 with token 8's channels 0-1 +3 and token 17's channels 2-3 +20 (both in group 0). ``pv`` at
step 0: P (uint8, K 24 in 3 groups of 8, N 8) = 200 in channels 0-7, 1 in channels 8-15, 0 in 16-23.

Cycle derivations use docs/architecture.md's timing contract: ``L_t = max(L_{t-1} + S_t, L_{t-2} + 8)``,
op cycles ``L_last + R + C + 2 = L_last + 18``.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from algo.reuse.golden import block_groups
from algo.reuse.policies import (
    FULL,
    HALF,
    SKIP,
    PolicyError,
    check_policy,
    delta_codes,
    interstep_rows,
    prune_scores,
    token_merge,
)
from algo.trace import Group, OpRecord, Trace, save_trace
from hw.config import load_config
from sim.baselines import BaselineError, a100, attach_baselines, parse_params, run_baselines
from sim.baselines.policy import run_policy_op
from sim.cost.energy import EnergyModel
from sim.engines.model import simulate_op, simulate_trace

GRID = (3, 2, 4)


def _groups(k: int) -> list[Group]:
    return [Group(*g, "block") for g in block_groups(k)]


def hand_trace() -> Trace:
    rng = np.random.default_rng(7)
    base = rng.integers(-60, 60, size=(8, 16))
    x0 = np.concatenate([base, base, base + 5]).astype(np.int8)[None]
    x1 = x0.copy()
    x1[0, 8, 0:2] += 3
    x1[0, 17, 2:4] += 20
    w = rng.integers(-128, 128, size=(1, 16, 8)).astype(np.int8)
    p = np.zeros((1, 24, 24), dtype=np.uint8)
    p[0, :, 0:8], p[0, :, 8:16] = 200, 1
    v = rng.integers(-128, 128, size=(1, 24, 8)).astype(np.int8)
    ops = [OpRecord("ffn1", 0, 0, x0, w, _groups(16), (2.0, 6.0)),
           OpRecord("pv", 0, 0, p, v, _groups(24), (2.0, 6.0), x_signed=False),
           OpRecord("ffn1", 0, 1, x1, w, _groups(16), (2.0, 6.0))]
    return Trace(grid=GRID, ops=ops, model="synthetic", size="test", weights="random")


@pytest.fixture(scope="module")
def run():
    tr, cfg = hand_trace(), load_config("tiny-8x8")
    res = simulate_trace(tr, cfg)
    entries = run_baselines(tr, cfg, res)
    return tr, cfg, attach_baselines(res, entries)


def _op(entry, name, step):
    return next(r for r in entry["per_op"] if r["name"] == name and r["step"] == step)


# -- the rules on hand values --------------------------------------------------------------------

def test_token_merge_chain():
    x = np.array([[10, 10], [11, 13], [12, 12]], dtype=np.int8)   # grid 3x1x1: one position, 3 frames
    merged, eff = token_merge(x, (3, 1, 1), 2.0)
    # frame 1: mean |[1, 3]| = 2 <= 2 -> merged, eff = [10, 10]; frame 2 vs eff [10, 10]: mean 2 -> merged
    assert merged.tolist() == [False, True, True]
    assert eff.tolist() == [[10, 10], [10, 10], [10, 10]]
    # theta 1.9: frame 1 kept (mean 2); frame 2 vs frame 1's [11, 13]: mean |[1, -1]| = 1 -> merged
    merged, eff = token_merge(x, (3, 1, 1), 1.9)
    assert merged.tolist() == [False, False, True] and eff.tolist() == [[10, 10], [11, 13], [11, 13]]


def test_delta_prune_interstep_codes():
    groups = [(0, 2, "f"), (2, 4, "f"), (4, 6, "f")]
    x = np.array([[0, 0, 3, -8, 8, 0]], dtype=np.int8)
    assert delta_codes(x, np.zeros_like(x, dtype=np.int16), groups).tolist() == [[SKIP, HALF, FULL]]
    p = np.array([[0, 1, 200, 255]], dtype=np.uint8)
    codes, p_eff = prune_scores(p, [(0, 2, "f"), (2, 4, "f")], 1)
    assert codes.tolist() == [[SKIP, FULL]] and p_eff.tolist() == [[0, 0, 200, 255]]
    assert interstep_rows(np.array([[4, 0], [0, 0]]), np.array([[0, 0], [0, 0]]), 2.0).tolist() == [True, True]
    assert interstep_rows(np.array([[5, 0]]), np.array([[0, 0]]), 2.0).tolist() == [False]
    with pytest.raises(PolicyError, match="unknown parameters"):
        check_policy("exion", {"nope": 1})
    with pytest.raises(PolicyError, match="unknown baseline policy"):
        check_policy("eyeriss")


# -- array policies: hand-derived cycles -----------------------------------------------------------

def test_dense_entry_is_the_simulators_dense(run):
    _, _, res = run
    d = res["baselines"]["dense"]
    assert d["cycles"] == res["dense_cycles"] and d["energy_pj"] == res["dense_energy_pj"]
    assert _op(d, "ffn1", 0)["cycles"] == 3 * 16 + 17   # T K + R + C + 1, T = 3 tiles of 16 slots


def test_cambricon_d_hand_cycles(run):
    _, _, res = run
    e = res["baselines"]["cambricon_d"]
    # step 0: no previous step -> dense work on the reuse tiling, 3 tiles x 16 slots = 65 cycles
    assert _op(e, "ffn1", 0)["cycles"] == 65
    # step 1: frame 0 all SKIP (1 bubble slot); frame 1: token 8's group 0 deltas (3, 3, 0, ..) fit 4 bits:
    # HALF, its 8 channels pair up: 4 slots; frame 2: token 17's group 0 has a 20: FULL, 8 slots.
    # L = 0, 4, max(4 + 8, 0 + 8) = 12 -> 12 + 18 = 30.
    r = _op(e, "ffn1", 1)
    assert r["cycles"] == 30
    assert r["work"] == pytest.approx({"full": 8 / 384, "half": 8 / 384, "skip": 368 / 384})
    # extra DRAM: previous X (24 x 16 B) and Y at 4-byte accumulator width (24 x 8 x 4 B) read, Y written
    # 3 bytes wider than int8 (24 x 8 x 3 B); step 0 has no extra
    r0 = _op(e, "ffn1", 0)
    assert r["actions"]["dram_read_bytes"] - r0["actions"]["dram_read_bytes"] == 24 * 16 + 24 * 8 * 4
    assert r["actions"]["dram_write_bytes"] - r0["actions"]["dram_write_bytes"] == 24 * 8 * 3
    assert _op(e, "pv", 0)["work"]["full"] == 1.0  # attention runs dense


def test_exion_hand_cycles(run):
    _, _, res = run
    e = res["baselines"]["exion"]
    # ffn1 step 1: every token but 17 within theta1 = 2 of step 0 (token 8: 6/16 = 0.375; token 17: 40/16 = 2.5)
    # -> frames 0 and 1 all SKIP (1 slot each), frame 2 one FULL row (16 slots): L = 0, 1, 17 -> 35.
    assert _op(e, "ffn1", 1)["cycles"] == 35
    # pv: group 0 (P = 200) FULL, group 1 (P = 1 <= p_min = 1) and group 2 (P = 0) SKIP:
    # 3 tiles x 8 slots: L = 7, 15, max(23, 7 + 8) = 23 -> 41.
    assert _op(e, "pv", 0)["cycles"] == 41
    assert _op(e, "ffn1", 1)["actions"]["dram_read_bytes"] - _op(e, "ffn1", 0)["actions"]["dram_read_bytes"] \
        == 23 * 8   # the 23 skipped rows' previous outputs (N = 8 int8 bytes each)
    assert _op(e, "ffn1", 0)["cycles"] == 65  # first captured step: computed in full
    assert "first captured step" in e["notes"]


def test_adaptiv_hand_cycles(run):
    _, _, res = run
    # ffn1 step 0: frame 1 = frame 0 (merged), frame 2 = frame 0 + 5 (mean 5 > theta1 = 2: kept).
    # Tiles 16, 1, 16 slots: L = 15, 16, max(32, 15 + 8) = 32 -> 50.
    assert _op(res["baselines"]["adaptiv"], "ffn1", 0)["cycles"] == 50


def test_policy_with_kaleidos_decisions_matches_kaleido(run):
    """The shared path is Kaleido's own: feeding it the golden decisions gives Kaleido's cycles and energy."""
    tr, cfg, res = run
    from algo.reuse.golden import decide

    op = tr.ops[2]
    dec = decide(op.X[0], GRID, [g.as_tuple() for g in op.groups], op.theta, tr.b_msb)[0]
    r = run_policy_op(op, GRID, tr.b_msb, cfg, EnergyModel(cfg), [dec])
    k = simulate_op(op, GRID, tr.b_msb, cfg)
    assert r["cycles"] == k.cycles == res["per_op"][2]["cycles"]
    assert r["energy_pj"] == pytest.approx(res["per_op"][2]["energy_pj"])


def test_kaleido_ratios_and_decision_trace_skip(run):
    _, cfg, res = run
    t_k = res["cycles"] / cfg.clock_mhz
    for name, e in res["baselines"].items():
        assert e["kaleido_speedup"] == pytest.approx(e["time_us"] / t_k), name
        assert e["kaleido_energy_saving"] == pytest.approx(e["energy_pj"] / res["energy_pj"]), name
        assert e["energy_pj"] == pytest.approx(sum(e["energy_breakdown_pj"].values())), name
        assert e["cycles"] == pytest.approx(sum(r["cycles"] for r in e["per_op"])), name


# -- A100 roofline ---------------------------------------------------------------------------------

def test_a100_normalised_three_ways():
    # 128 x 128 int8 MACs at 1 GHz: 2 x 16,384 x 1e9 = 32.768 TOPS; A100 int8 peak 624 -> 19.04x; die 826 mm^2.
    assert a100.peak_tops(128, 128, 1000) == pytest.approx(32.768)
    n = a100.normalised(10.0, 40.0, 82.6, 32.768)
    assert n["raw"] == pytest.approx(0.25)
    assert n["per_mm2"] == pytest.approx(0.25 * 10.0)
    assert n["per_peak_tops"] == pytest.approx(0.25 * 624 / 32.768)
    with pytest.raises(a100.A100Error):
        a100.normalised(10.0, 0.0, 82.6, 32.768)
    from sim.report.tables import a100_normalised_rows

    data = {"baselines": {"a100": {"time_us": 10.0, "params": {"variant": "80gb-sxm"}}},
            "energy_model": {"area_mm2": 82.6, "dense_area_mm2": 41.3},
            "config": {"array_rows": 128, "array_cols": 128, "clock_mhz": 1000},
            "cycles": 30_000, "total_cycles": 40_000, "dense_cycles": 80_000, "dense_total_cycles": 80_000}
    k, d = a100_normalised_rows(data)
    assert (k["design"], k["time_us"], k["per_mm2"]) == ("kaleido", 40.0, pytest.approx(2.5))
    assert (d["raw"], d["per_mm2"]) == (pytest.approx(0.125), pytest.approx(0.125 * 20))


def test_a100_roofline_hand_values():
    p = a100.check_params(None)
    # 1024^3 GEMM, int8: 2 x 2^30 FLOPs / (624e12 x 0.7) = 4.9164 us; bytes 2 x 2^20 + 2 x 2^20 = 4 MiB
    # / (2039e9 x 0.8) = 2.5713 us -> compute bound.
    t, tc, tm = a100.op_time_us(1, 1024, 1024, 1024, p)
    assert tc == pytest.approx(2 * 1024 ** 3 / (624e12 * 0.7) * 1e6)
    assert tm == pytest.approx(4 * 1024 ** 2 / (2039e9 * 0.8) * 1e6)
    assert t == pytest.approx(4.91639, rel=1e-5)
    # memory bound: M = 1 (GEMV): 2 x 1024^2 FLOPs vs (1024 + 1024^2 + 2 x 1024) bytes
    t, tc, tm = a100.op_time_us(1, 1, 1024, 1024, {**p, "variant": "40gb-sxm"})
    assert t == tm == pytest.approx((1024 + 1024 ** 2 + 2048) / (1555e9 * 0.8) * 1e6)
    tr = hand_trace()
    e = a100.run(tr, 1000.0)
    assert e["energy_pj"] == pytest.approx(400.0 * e["time_us"] * 1e6)   # 400 W x time
    assert e["cycles"] == pytest.approx(e["time_us"] * 1000.0)
    with pytest.raises(a100.A100Error, match="compute_efficiency"):
        a100.check_params({"compute_efficiency": 1.5})


def test_parse_params():
    assert parse_params(["a100.compute_efficiency=0.5", "exion.p_min=2", "a100.variant=40gb-sxm"]) == {
        "a100": {"compute_efficiency": 0.5, "variant": "40gb-sxm"}, "exion": {"p_min": 2}}
    with pytest.raises(BaselineError, match="BASELINE.KEY=VALUE"):
        parse_params(["nope=1"])


# -- quality measured in the PyTorch path ---------------------------------------------------------

@pytest.mark.parametrize("policy,params", [("cambricon_d", {}), ("exion", {"theta": 0, "p_min": 0})])
def test_lossless_policies_are_bit_identical(policy, params):
    """Delta computing is exact; EXION with theta 0 and p_min 0 drops only exact repeats and zero scores."""
    import torch

    from algo.quality import run_quality

    torch.set_num_threads(1)
    r = run_quality(steps=2, theta=(4, 12), float_reference=False, policy=policy, policy_params=params)
    assert r["latents"]["bit_identical"] and math.isinf(r["latents"]["psnr_db"])
    assert r["policy"] == policy and set(r["ops"]) <= {"qkv", "o_proj", "ffn1", "ffn2", "pv"}
    if policy == "cambricon_d":  # the second step finds small deltas: some work runs on the 4-bit half
        assert r["mac_fractions"]["partial"] > 0


def test_adaptiv_quality_is_measured():
    import torch

    from algo.quality import run_quality

    torch.set_num_threads(1)
    r = run_quality(steps=2, theta=(8, 24), float_reference=False, policy="adaptiv")
    merged = r["mac_fractions"]["reuse"]
    assert r["mac_fractions"]["partial"] == 0.0      # whole tokens: never a partial group
    assert (merged > 0) == (not r["latents"]["bit_identical"])


# -- CLI -------------------------------------------------------------------------------------------

def kaleido(*args: str):
    """The CLI in-process (typer's runner: one import of the stack instead of one per call)."""
    from typer.testing import CliRunner

    from sim.cli import app

    return CliRunner().invoke(app, list(args))


def test_cli_baselines_json_and_errors(tmp_path):
    path = tmp_path / "t.npz"
    save_trace(hand_trace(), path)
    out = tmp_path / "b.json"
    res = kaleido("baselines", str(path), "--config", "tiny-8x8", "--tech", "45nm", "--json", str(out),
                  "--param", "exion.p_min=2")
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["energy_model"]["technology"] == "45nm"
    assert list(data["baselines"]) == ["dense", "a100", "adaptiv", "exion", "cambricon_d"]
    assert data["baselines"]["exion"]["params"]["p_min"] == 2
    for args, needle in ((["--param", "a100.nope=1"], "unknown parameters"),
                         (["--only", "eyeriss"], "unknown"),
                         (["--tech", "7nm"], "no technology table")):
        bad = tmp_path / "bad.json"
        r = kaleido("baselines", str(path), "--config", "tiny-8x8", "--json", str(bad), *args)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        assert r.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], \
            r.output
        assert not bad.exists()
