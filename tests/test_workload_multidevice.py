"""Multi-device layers: network steps, ring/direct collective formulas and the overlap rule, checked
against hand arithmetic; DiTango's LSE merge identity (float64) and its anchor list for 50 steps."""

from __future__ import annotations

import numpy as np
import pytest

from algo.workloads import ditango
from algo.workloads.format import CommEvent, Workload, WorkloadOp
from sim.workload.collectives import collective_time_us
from sim.workload.network import Dimension, Network, NetworkError
from sim.workload.simulate import simulate_workload

# 1 GB/s and 1 us per step: a step moving n bytes takes 1 + n/1000 us
RING = Network(Dimension("Ring", 4, link_gbps=0.5, links=2, latency_ns=1000.0))
SWITCH = Network(Dimension("Switch", 4, link_gbps=1.0, links=1, latency_ns=1000.0))


def test_network_presets_and_errors():
    a = Network.preset("a100", 8)
    assert a.dim.bandwidth_gbps == 300.0 and a.dim.topology == "Switch"  # 12 NVLink3 links x 25 GB/s
    assert a.step_time_us(300e3) == pytest.approx(1.0 + 1.0)  # 1 us latency + 300 kB / 300 GB/s
    with pytest.raises(NetworkError):
        Network.preset("tpu", 4)
    with pytest.raises(NetworkError):
        Dimension("Torus", 4, 1.0).check()


@pytest.mark.parametrize(("pattern", "ring", "switch"), [
    # S = 4000 bytes, P = 4, alpha = 1 us, B = 1000 bytes/us
    ("ring_p2p", 1 + 4.0, 1 + 4.0),
    ("all_gather", 3 * (1 + 4.0), 1 + 12.0),                     # (P-1)(a + S/B) | a + (P-1)S/B
    ("all_reduce", 6 * (1 + 1.0), 2 * (1 + 3.0)),                # 2(P-1)(a + S/PB) | 2(a + (P-1)S/PB)
    ("all_to_all", (1 + 3.0) + (1 + 2.0) + (1 + 1.0), 1 + 3.0),  # sum_j a + (P-j)S/PB | a + (P-1)S/PB
])
def test_collective_formulas_by_hand(pattern, ring, switch):
    assert collective_time_us(pattern, 4000, 4, RING) == pytest.approx(ring)
    assert collective_time_us(pattern, 4000, 4, SWITCH) == pytest.approx(switch)
    assert collective_time_us(pattern, 4000, 1, RING) == 0.0


class FixedDevice:
    """Every op copy takes K us (so timings are hand-countable)."""

    kind = "a100"
    _cache: dict = {}

    def describe(self):
        return {"kind": "fixed", "name": "fixed"}

    def time(self, op):
        return {"time_us": float(op.K), "dense_time_us": float(op.K)}


def test_overlap_rule_by_hand():
    ops = [WorkloadOp(step=0, name="qk", batch=1, M=1, K=10, N=1, block=0, phase="attention"),
           WorkloadOp(step=0, name="ffn1", batch=1, M=1, K=7, N=1, block=0, phase="linear"),
           WorkloadOp(step=0, name="pv", batch=1, M=1, K=2, N=1, block=0, rank=1, phase="attention")]
    comms = [CommEvent(step=0, pattern="ring_p2p", bytes=11000, group=2, block=0, overlap="attention"),  # 12 us
             CommEvent(step=0, pattern="ring_p2p", bytes=2000, group=2, block=0, overlap=None)]  # 3 us
    wl = Workload(generator="ddit", model="m", size="full", resolution="r", grid=(1, 1, 1), ops=ops, devices=2,
                  steps=[{"index": 0}], comms=comms)
    res = simulate_workload(wl, FixedDevice(), 2, network=SWITCH)
    r0, r1 = res["per_step"][0]["per_device"]
    # rank 0: compute 10 + 7 = 17; attention compute 10 hides 10 of 12 -> exposed 2 + 3 = 5 -> 22
    assert (r0["compute_us"], r0["comm_us"], r0["exposed_comm_us"]) == pytest.approx((17, 15, 5))
    # rank 1: compute 19; attention compute 12 hides all 12 -> exposed 3 -> 22
    assert (r1["compute_us"], r1["exposed_comm_us"]) == pytest.approx((19, 3))
    assert res["total_time_us"] == pytest.approx(22.0)


def test_lse_merge_equals_full_attention_float64():
    rng = np.random.default_rng(0)
    q, k, v = rng.standard_normal((5, 8)), rng.standard_normal((24, 8)) * 3, rng.standard_normal((24, 8))
    full_out, full_lse = ditango.attention_state(q, k, v)
    parts = [(0, 7), (7, 8), (8, 20), (20, 24)]
    out, lse = ditango.attention_state(q, k[0:7], v[0:7])
    for a, b in parts[1:]:
        out, lse = ditango.merge_states(out, lse, *ditango.attention_state(q, k[a:b], v[a:b]))
    np.testing.assert_allclose(out, full_out, rtol=0, atol=1e-13)
    np.testing.assert_allclose(lse, full_lse, rtol=0, atol=1e-13)


def test_anchor_list_50_steps():
    assert ditango.anchor_steps(50) == [3, 4, 9, 14, 19, 24, 29, 34, 39, 44]
    full = ditango.full_steps(50)
    assert len(full) == 18 and full == [0, 1, 2, 3, 4, 9, 14, 19, 24, 29, 34, 39, 44, 45, 46, 47, 48, 49]
    with pytest.raises(ValueError):
        ditango.anchor_steps(8)


def test_interval_rule_by_hand():
    # r = max(1 - 0.5, 1/8) = 0.5; kappa 1, 8: cbrt 1, 2, mean 1.5 -> tau = round(1.5/0.5) = 3, round(0.75/0.5) = 2
    assert list(ditango.interval([1.0, 8.0], 0.5)) == [3, 2]
    assert list(ditango.interval([1.0, 1.0], 1.0)) == [8, 8]  # r floored at 1/tau_max
    assert ditango.target_reuse(50) == pytest.approx(0.5 * 50 / 32)  # 32 steps not forced full


def test_ditango_schedule_and_volumes_small(tmp_path):
    from tests.test_workload_ddit import kaleido

    wl = ditango.generate_ditango("wan2.1-t2v-1.3b", "256x128x5", devices=2, num_inference_steps=12)
    # 12 steps: warm-up 0-4, cool-down 7-11, anchors [3, 4] (none between); target reuse 6/2 -> 1, r = 1/8,
    # tau = 8, so steps 5 and 6 ((s - 4) mod 8 != 0) reuse the remote partition and skip its hop
    assert [s["partitions_computed"] for s in wl.steps] == [2] * 5 + [1, 1] + [2] * 5
    # 256 tokens / 2 ranks = 128 per rank; K and V of one partition in bf16: 2 * 128 * 1536 * 2 bytes
    hop = 2 * 128 * 1536 * 2
    assert {c.bytes for c in wl.comms} == {hop} and {c.repeat for c in wl.comms} == {30 * 2}
    assert sorted({c.step for c in wl.comms}) == [0, 1, 2, 3, 4, 7, 8, 9, 10, 11]
    assert len(wl.reference["comms"]) == 12
    qk = [o for o in wl.ops if o.name == "qk"]
    assert [o.repeat for o in qk] == [120] * 5 + [60, 60] + [120] * 5 and qk[0].M == 128 and qk[0].N == 128
    out = tmp_path / "d.npz"
    assert kaleido("workload", "ditango", "--model", "wan2.1-t2v-1.3b", "--resolution", "256x128x5", "--devices", "2",
                   "--steps", "12", "-o", str(out)).returncode == 0
    r = kaleido("simulate", str(out), "--devices", "a100:2", "--json", str(tmp_path / "r.json"))
    assert r.returncode == 0, r.stderr
    import json

    res = json.loads((tmp_path / "r.json").read_text())
    assert len(res["per_step"][0]["per_device"]) == 2 and res["speedup"] > 1.0
    assert res["per_step"][5]["comm_us"] == 0.0 and res["per_step"][0]["comm_us"] > 0.0
    from tests.test_cli import assert_one_line_error

    assert_one_line_error(kaleido("workload", "ditango", "--devices", "0", "-o", str(tmp_path / "x.npz")), "devices")
    assert_one_line_error(kaleido("workload", "ditango", "--steps", "8", "-o", str(tmp_path / "x.npz")), "cooldown")
    assert_one_line_error(kaleido("simulate", str(out), "--devices", "a100:4"), "2 device")
    assert_one_line_error(kaleido("simulate", str(out), "--devices", "kaleido-16nm-128x128:2", "--reuse", "0.5,0.2"),
                          "no token grid")


def test_causal_sp_schedule_kv_heads_and_volumes(tmp_path):
    from algo.workloads import causal_sp as csp
    from tests.test_workload_ddit import kaleido

    # shift 5: 1000 -> 1000, 750 -> 3.75/4 = 937.5, 500 -> 2.5/3 = 833.33, 250 -> 1.25/2 = 625
    assert csp.warped_timesteps() == pytest.approx([1000.0, 937.5, 2500.0 / 3.0, 625.0])
    assert [csp.kv_tokens(b) for b in range(7)] == [4680, 9360, 14040, 18720, 23400, 28080, 32760]
    assert csp.heads_per_rank(12, 8) == [2, 2, 2, 2, 1, 1, 1, 1]
    wl = csp.generate_causal_sp(8)
    assert len(wl.steps) == 35 and [s["kind"] for s in wl.steps[:5]] == ["denoise"] * 4 + ["kv_rewrite"]
    qk = [o for o in wl.ops if o.name == "qk" and o.step == 34]
    assert [(o.rank, o.batch, o.M, o.N) for o in qk] == [(r, 2 if r < 4 else 1, 4680, 32760) for r in range(8)]
    # 4680 / 8 = 585 tokens per rank; fused QKV all-to-all 3 * 585 * 1536 * 2 bytes, output 585 * 1536 * 2
    assert sorted({c.bytes for c in wl.comms}) == [585 * 1536 * 2, 3 * 585 * 1536 * 2]
    assert sum(o.name == "cross_kv" for o in wl.ops) == 1
    out = tmp_path / "c.npz"
    assert kaleido("workload", "causal-sp", "--devices", "4", "-o", str(out)).returncode == 0
    r = kaleido("simulate", str(out), "--devices", "a100:4", "--json", str(tmp_path / "c.json"))
    assert r.returncode == 0, r.stderr
    assert "time to first frame" in r.stdout
    import json

    res = json.loads((tmp_path / "c.json").read_text())
    ttff = sum(s["time_us"] for s in res["per_step"][:4])
    assert res["time_to_first_frame_us"] == pytest.approx(ttff) and res["speedup"] > 1.0
    from tests.test_cli import assert_one_line_error

    assert_one_line_error(kaleido("workload", "causal-sp", "--devices", "13", "-o", str(tmp_path / "x.npz")), "heads")
