"""DDiT workload generator: the Δ³z rule, token grids and shapes (hand-derived), file format errors,
the CLI (`kaleido workload ddit`, `inspect`, `simulate`) and timing on Kaleido and the A100 roofline."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import numpy as np
import pytest

from algo.workloads import ddit
from algo.workloads.format import WorkloadError, load_workload, save_workload
from tests.test_cli import assert_one_line_error
from tests.trace_files import rewrite_trace


def kaleido(*args: str) -> SimpleNamespace:
    """The `kaleido` command in this process (typer's runner; a subprocess per call costs seconds of imports)."""
    from typer.testing import CliRunner

    from sim.cli import app

    r = CliRunner().invoke(app, list(args))
    if r.exception is not None and not isinstance(r.exception, SystemExit):
        raise r.exception
    return SimpleNamespace(returncode=r.exit_code, stdout=r.stdout, stderr=r.stderr)


# -- the rule ---------------------------------------------------------------------------------------

def test_third_difference_cubic_constant_quadratic_zero():
    t = np.arange(8, dtype=np.float64)[:, None, None, None, None]
    a = np.array([1.0, -2.0, 0.5]).reshape(1, 3, 1, 1, 1)
    cubic = a * t**3 + 4.0 * t**2 - 7.0 * t + 3.0 + np.zeros((8, 3, 1, 2, 2))
    quad = 4.0 * t**2 - 7.0 * t + 3.0 + np.zeros((8, 3, 1, 2, 2))
    for s in range(3, 8):
        # Δ³ of a t³ is 3! a = 6a at every step: a form that cancels (e.g. reusing z_t) gives 0 and fails here
        np.testing.assert_array_equal(ddit.third_difference(cubic, s), np.broadcast_to(6.0 * a[0], (3, 1, 2, 2)))
        np.testing.assert_array_equal(ddit.third_difference(quad, s), np.zeros((3, 1, 2, 2)))
    with pytest.raises(WorkloadError):
        ddit.third_difference(cubic, 2)  # needs four latents


def test_percentile_rule_on_hand_made_latent():
    # one channel, one frame, 4x4; 2x2 patch stds: TL 0, TR 0, BL std(0,2,2,0) = 1, BR 0
    d = np.array([[0, 0, 1, 1], [0, 0, 1, 1], [0, 2, 5, 5], [2, 0, 5, 5]], dtype=np.float64)[None, None]
    np.testing.assert_allclose(ddit.patch_stds(d, 2, 2), [0.0, 0.0, 1.0, 0.0])
    # whole 4x4: mean 28/16 = 1.75, E[x^2] = 112/16 = 7, var = 7 - 1.75^2 = 3.9375
    np.testing.assert_allclose(ddit.patch_stds(d, 4, 4), [math.sqrt(3.9375)])
    # base patch 1x1 (every 1x1 std is 0); 40th percentile of 2x2 stds [0, 0, 0, 1] -> 0
    m, pct = ddit.choose_patch(d, (1, 1), rho=0.4, tau=0.001)
    assert m == 2 and pct == {1: 0.0, 2: 0.0, 4: pytest.approx(math.sqrt(3.9375))}
    assert ddit.choose_patch(d, (1, 1), rho=0.4, tau=2.0)[0] == 4
    # rho 0.9: 2x2 percentile = 0.9 * 3 = 2.7 -> 0 + 0.7 * (1 - 0) = 0.7 > tau: only p passes
    assert ddit.choose_patch(d, (1, 1), rho=0.9, tau=0.5) == (1, {1: 0.0, 2: pytest.approx(0.7),
                                                               4: pytest.approx(math.sqrt(3.9375))})
    # padding: a 3x4 latent under 2x2 patches -> bottom patches hold one real row; std over real pixels
    d3 = d[:, :, :3]
    np.testing.assert_allclose(ddit.patch_stds(d3, 2, 2), [0.0, 0.0, 1.0, 0.0])  # row [0,2] std 1, [5,5] 0


@pytest.mark.parametrize(("latent", "m", "grid", "padded"), [
    ((21, 60, 104), 1, (21, 30, 52), False), ((21, 60, 104), 2, (21, 15, 26), False),
    ((21, 60, 104), 4, (21, 8, 13), True),  # 60 / 8 = 7.5 -> pad to 64
    ((21, 90, 160), 1, (21, 45, 80), False), ((21, 90, 160), 2, (21, 23, 40), True),  # 90 / 4 -> 92
    ((21, 90, 160), 4, (21, 12, 20), True),  # 90 / 8 -> 96
])
def test_coarse_token_grids_480p_720p(latent, m, grid, padded):
    assert ddit.coarse_token_grid(latent, (1, 2 * m, 2 * m)) == (grid, padded)


def _ops_by_name(wl, step):
    return {o.name: o for o in wl.ops if o.step == step}


@pytest.mark.parametrize(("res", "tokens"), [("480p", {1: 32760, 2: 8190, 4: 2184}),
                                             ("720p", {1: 75600, 2: 19320, 4: 5040})])
def test_ddit_shapes_hand_derived(res, tokens):
    sched = [1, 1, 1, 2, 4]
    wl = ddit.generate_ddit("wan2.1-t2v-1.3b", res, 5, schedule=sched)
    assert [s["patch_multiple"] for s in wl.steps] == sched
    for step, m in enumerate(sched):
        ops = _ops_by_name(wl, step)
        M = tokens[m]  # noqa: N806
        assert wl.steps[step]["tokens"] == M
        # Wan2.1-1.3B: d = 12 x 128 = 1536, d_ffn 8960, 30 blocks, 2 CFG branches, 16 latent channels
        assert (ops["patch_embed"].M, ops["patch_embed"].K, ops["patch_embed"].N) == (M, 16 * 4 * m * m, 1536)
        assert (ops["proj_out"].M, ops["proj_out"].K, ops["proj_out"].N) == (M, 1536, 16 * 4 * m * m)
        assert (ops["qkv"].batch, ops["qkv"].K, ops["qkv"].N) == (1, 1536, 3 * 1536)
        assert (ops["qk"].batch, ops["qk"].M, ops["qk"].K, ops["qk"].N) == (12, M, 128, M)
        assert (ops["pv"].batch, ops["pv"].K, ops["pv"].N) == (12, M, 128)
        assert (ops["cross_qk"].N, ops["cross_pv"].K) == (512, 512)
        assert (ops["ffn1"].N, ops["ffn2"].K) == (8960, 8960)
        assert ops["qk"].repeat == 60 and ops["patch_embed"].repeat == 2
    ref = _ops_by_name(wl, 4)  # the reference runs p at every step
    assert {o.M for o in wl.reference["ops"] if o.step == 4} == {tokens[1]} and ref["qk"].M == tokens[4]


def test_rule_on_a_recorded_trajectory_is_deterministic():
    from algo.capture import record_trajectory

    traj, weights = record_trajectory("wan2.1-t2v-1.3b", "tiny", (1, 16, 16), 8, seed=0)
    assert traj.shape == (9, 16, 1, 16, 16) and "seeded" in weights
    traj2, _ = record_trajectory("wan2.1-t2v-1.3b", "tiny", (1, 16, 16), 8, seed=0)
    np.testing.assert_array_equal(traj, traj2)
    rows = ddit.schedule_from_trajectory(traj, 8, (2, 2))
    assert [r["patch_multiple"] for r in rows[:3]] == [1, 1, 1] and rows[0]["percentiles"] is None
    for r in rows[3:]:
        pct = {int(k): v for k, v in r["percentiles"].items()}
        want = max([m for m in pct if pct[m] <= ddit.DEFAULT_TAU], default=1)
        assert r["patch_multiple"] == want
        d3 = ddit.third_difference(traj, r["index"])[:, :, :, :]
        assert pct[2] == pytest.approx(np.percentile(ddit.patch_stds(d3, 4, 4), 40.0))


def test_default_trajectory_is_the_trained_model_with_its_class_prompt():
    """Issue: "the trained model when it exists". The default sampling run is the shipped small
    checkpoint, fed the class prompt it was trained on (the prompt changes the run), and the notes
    say it is trained; the tiny size stays seeded with its caveat."""
    from algo.capture import record_trajectory
    from algo.models.checkpoints import shown_path
    from algo.train.trainer import CHECKPOINT

    wl = ddit.generate_ddit("wan2.1-t2v-1.3b", "256x128x5", 5, trajectory_frames=1)
    src = wl.params["schedule_source"]
    assert wl.params["trajectory_size"] == "small" and shown_path(CHECKPOINT) in src and "class prompt 0" in src
    assert not shown_path(CHECKPOINT).startswith("/")  # the shipped checkpoint is named inside the repository
    assert "CAVEAT: the trajectory comes from a trained small model" in wl.notes and "seeded (untrained)" not in wl.notes
    a, _ = record_trajectory("wan2.1-t2v-1.3b", "small", (1, 16, 16), 2, seed=0, weights=CHECKPOINT)
    b, _ = record_trajectory("wan2.1-t2v-1.3b", "small", (1, 16, 16), 2, seed=0, weights=CHECKPOINT, image="coffee")
    np.testing.assert_array_equal(a[0], b[0])  # same noise
    assert np.abs(a[2] - b[2]).max() > 1e-3  # another prompt, another run
    tiny = ddit.generate_ddit("wan2.1-t2v-1.3b", "256x128x5", 4, trajectory_size="tiny", trajectory_frames=1)
    assert "CAVEAT: the trajectory comes from the tiny model with seeded (untrained) weights" in tiny.notes


# -- files and CLI ----------------------------------------------------------------------------------

SCHED = "1,1,1,2,4,4"


def _small(tmp_path, sched=SCHED, res="256x128x5"):
    out = tmp_path / "w.npz"
    r = kaleido("workload", "ddit", "--resolution", res, "--steps", str(len(sched.split(","))), "--schedule", sched,
                "-o", str(out))
    assert r.returncode == 0, r.stderr
    return out


def test_cli_ddit_inspect_simulate(tmp_path):
    w = _small(tmp_path)
    # 256x128 px, 5 frames -> latent 2x16x32 -> tokens 2x8x16 = 256 at p, 2x4x8 = 64 at 2p, 2x2x4 = 16 at 4p
    ins = kaleido("inspect", str(w), "--json")
    assert ins.returncode == 0, ins.stderr
    info = json.loads(ins.stdout)
    assert info["kind"] == "workload" and info["generator"] == "ddit"
    assert [s["tokens"] for s in info["steps"]] == [256, 256, 256, 64, 16, 16]
    assert {(o["step"], o["M"]) for o in info["ops"] if o["name"] == "qk"} == {
        (0, 256), (1, 256), (2, 256), (3, 64), (4, 16), (5, 16)}
    assert kaleido("workload", "ddit", "--resolution", "256x128x5", "--steps", "6", "--schedule", SCHED,
                   "-o", str(tmp_path / "w2.npz")).returncode == 0
    assert (tmp_path / "w2.npz").read_bytes() == w.read_bytes()  # deterministic
    js = tmp_path / "a.json"
    sim = kaleido("simulate", str(w), "--devices", "a100", "--json", str(js))
    assert sim.returncode == 0, sim.stderr
    res = json.loads(js.read_text())
    assert res["device"]["kind"] == "a100" and len(res["per_step"]) == 6 and res["speedup"] > 1.0
    assert [r["patch_multiple"] for r in res["per_step"]] == [1, 1, 1, 2, 4, 4]
    # steps at p take the reference's time exactly
    for r in res["per_step"][:3]:
        assert r["time_us"] == pytest.approx(r["reference_time_us"])


def test_all_p_schedule_speedup_one_and_kaleido_reuse(tmp_path):
    w = _small(tmp_path, "1,1,1,1")
    js = tmp_path / "k.json"
    r = kaleido("simulate", str(w), "--devices", "kaleido-16nm-128x128", "--json", str(js))
    assert r.returncode == 0, r.stderr
    res = json.loads(js.read_text())
    assert res["speedup"] == pytest.approx(1.0) and res["reuse_speedup"] == pytest.approx(1.0)
    # every step has the same shapes: 12 distinct op shapes (patch_embed, 10 block ops, proj_out), timed once
    assert res["unique_ops_timed"] == 12
    w2 = _small(tmp_path, "1,1,1,4")
    js2 = tmp_path / "k2.json"
    r = kaleido("simulate", str(w2), "--devices", "kaleido-16nm-128x128", "--reuse", "0.6,0.2", "--json", str(js2))
    assert r.returncode == 0, r.stderr
    res2 = json.loads(js2.read_text())
    # 256 tokens: the similarity pass and vector work dominate, so reuse may lose here (docs/workloads.md)
    assert res2["dense_speedup"] > 1.0 and res2["reuse_speedup"] > 0.0
    assert res2["dense_total_time_us"] > res2["reference_dense_total_time_us"] / 16
    assert res2["speedup"] == pytest.approx(res2["dense_speedup"] * res2["reuse_speedup"])


def test_bad_inputs_exit_2(tmp_path):
    out = tmp_path / "x.npz"
    assert_one_line_error(kaleido("workload", "ddit", "--steps", "4", "--schedule", "1,1,3,1", "-o", str(out)),
                          "schedule")
    assert_one_line_error(kaleido("workload", "ddit", "--resolution", "100x100x5", "--schedule", "1", "--steps", "1",
                                  "-o", str(out)), "multiples")
    assert_one_line_error(kaleido("workload", "ddit", "--model", "hunyuanvideo", "-o", str(out)), "Wan")
    assert_one_line_error(kaleido("workload", "ddit", "--rho", "1.5", "-o", str(out)), "rho")
    assert not out.exists()
    w = _small(tmp_path)
    bad_v = rewrite_trace(w, tmp_path / "v.npz", meta_fn=lambda m: m.update(version=99))
    assert_one_line_error(kaleido("inspect", str(bad_v)), "version 99")
    bad_m = rewrite_trace(w, tmp_path / "m.npz", meta_fn=lambda m: m["ops"][3].update(M=7))
    assert_one_line_error(kaleido("simulate", str(bad_m), "--devices", "a100"), "M = 7")
    bad_n = rewrite_trace(w, tmp_path / "n.npz", meta_fn=lambda m: m["ops"][0].update(name="conv"))
    with pytest.raises(WorkloadError, match="unknown op type"):
        load_workload(bad_n)
    assert_one_line_error(kaleido("simulate", str(w), "--devices", "a100:x"), "--devices")
    assert_one_line_error(kaleido("simulate", str(w), "--devices", "a100:4"), "1 device")
    assert_one_line_error(kaleido("simulate", str(w), "--devices", "a100", "--reuse", "0.7,0.5"), "--reuse")


def test_save_refuses_inconsistent_workload(tmp_path):
    wl = ddit.generate_ddit("wan2.1-t2v-1.3b", "256x128x5", 3, schedule=[1, 1, 1])
    wl.devices = 0
    with pytest.raises(WorkloadError, match="devices"):
        save_workload(wl, tmp_path / "bad.npz")
    assert not (tmp_path / "bad.npz").exists()
