"""The scheduler (position clustering) and the no-dispatcher mode, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE
from sim.timing.cycle_model import reuse_slot_sequence
from sim.timing.dispatch import reuse_tiles, schedule_positions


def test_schedule_is_a_permutation_within_windows():
    rng = np.random.default_rng(0)
    grid = (3, 5, 7)  # 35 positions
    dec = rng.integers(0, 3, size=(105, 4)).astype(np.int8)
    dec[:35] = COMPUTE
    order = schedule_positions(dec, grid, rows=4, window_tiles=2)  # windows of 8 positions
    assert sorted(order.tolist()) == list(range(35))
    for w0 in range(0, 35, 8):
        assert sorted(order[w0:w0 + 8].tolist()) == list(range(w0, min(w0 + 8, 35)))


def test_clustering_by_hand():
    """Grid (2, 1, 4): 4 positions, R = 2, one group of 3 channels (K = 3), N <= C.

    Frame 1 decisions per position: p0 REUSE, p1 COMPUTE, p2 REUSE, p3 COMPUTE.
    Raster tiles {p0, p1}, {p2, p3}: each has a COMPUTE row -> 3 slots each, frame 1 -> [3, 3].
    Scheduled: patterns sort COMPUTE (0) before REUSE (2): order p1, p3, p0, p2 -> tiles {p1, p3}
    (3 slots) and {p0, p2} (every row REUSEs: 0 slots).
    Frame 0 always computes: 3 slots per tile. Issue order: position block, then frame:
    raster [3, 3, 3, 3], scheduled [3, 3, 3, 0]; without the matcher PARTIAL would not pair either.
    """
    dec = np.array([[COMPUTE]] * 4 + [[REUSE], [COMPUTE], [REUSE], [COMPUTE]], dtype=np.int8)
    groups = [(0, 3, "f")]
    assert schedule_positions(dec, (2, 1, 4), rows=2).tolist() == [1, 3, 0, 2]
    raster = reuse_slot_sequence(dec, (2, 1, 4), groups, 2, rows=2, cols=8, b_msb=4, dispatcher=False)
    sched = reuse_slot_sequence(dec, (2, 1, 4), groups, 2, rows=2, cols=8, b_msb=4, dispatcher=True)
    assert raster.tolist() == [3, 3, 3, 3]
    assert sched.tolist() == [3, 3, 3, 0]
    tiles = reuse_tiles((2, 1, 4), 2, 2, 8, schedule_positions(dec, (2, 1, 4), rows=2))
    assert [t.tokens.tolist() for t in tiles] == [[1, 3], [5, 7], [0, 2], [4, 6]]


def test_no_dispatcher_does_not_pair():
    """Two groups of 2 channels, both PARTIAL in every row of frame 1: the matcher pairs them into
    2 slots; without the dispatcher each channel takes a slot: 4."""
    dec = np.array([[COMPUTE, COMPUTE]] * 2 + [[PARTIAL, PARTIAL]] * 2, dtype=np.int8)
    groups = [(0, 2, "f"), (2, 4, "f")]
    with_d = reuse_slot_sequence(dec, (2, 1, 2), groups, 4, rows=2, cols=4, b_msb=4, dispatcher=True)
    without = reuse_slot_sequence(dec, (2, 1, 2), groups, 4, rows=2, cols=4, b_msb=4, dispatcher=False)
    assert with_d.tolist() == [4, 2]
    assert without.tolist() == [4, 4]


# ---- `--no-dispatcher` end to end: the clustering example above as a one-op decision trace ------

def _hand_trace_and_config(tmp_path):
    """The test_clustering_by_hand decisions as a decision trace, and a 2x8 array config (d = 2).

    Timing contract (docs/architecture.md): L_t = max(L_{t-1} + S_t, L_{t-2} + R), L_{-1} = -1,
    cycles = L_last + R + C + 2 = L_last + 12.
    With the dispatcher, slots [3, 3, 3, 0] -> S = [3, 3, 3, 1]: L = 2, 5, max(8, 2+2) = 8,
    max(9, 5+2) = 9 -> 21 cycles. Without: S = [3, 3, 3, 3]: L = 2, 5, 8, 11 -> 23 cycles.
    Dense (M = 8 tokens, 4 raster tiles of K = 3 slots): also 23.
    Useful MACs: COMPUTE (token, channel) pairs = 4 x 3 (frame 0) + 2 x 3 (p1, p3 of frame 1) = 18,
    times N = 2 -> 36; utilization 36 / (2 x 8 x cycles).
    """
    from algo.trace import Group, OpRecord, Trace, pack_decisions, save_trace
    from hw.config import config_from_dict

    dec = np.array([[COMPUTE]] * 4 + [[REUSE], [COMPUTE], [REUSE], [COMPUTE]], dtype=np.int8)
    op = OpRecord("o_proj", 0, 0, None, None, [Group(0, 3, "f", "block")], (1.0, 2.0), dims=(1, 8, 3, 2),
                  decisions=pack_decisions(dec)[None, None, :], thetas=((1.0, 2.0),))
    trace = Trace(grid=(2, 1, 4), ops=[op], model="hand", size="test", weights="none")
    cfg_dict = dict(name="hand-2x8", array_rows=2, array_cols=8, clock_mhz=1000, drain_rows_per_cycle=2,
                    max_tokens=4096, max_k=4096, input_sram_kib=1, weight_sram_kib=1, output_sram_kib=1,
                    partial_sram_kib=1, dram_gbps=460.0)
    path = tmp_path / "hand.npz"
    save_trace(trace, path)
    toml = tmp_path / "hand.toml"
    toml.write_text("".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in cfg_dict.items()))
    return trace, config_from_dict(cfg_dict), path, toml


def test_simulate_no_dispatcher_is_the_primary_result(tmp_path):
    from sim.engines.model import simulate_trace

    trace, cfg, _, _ = _hand_trace_and_config(tmp_path)
    on = simulate_trace(trace, cfg)
    off = simulate_trace(trace, cfg, dispatcher=False)
    assert (on["cycles"], on["no_dispatcher_cycles"], on["dense_cycles"]) == (21, 23, 23)
    assert (off["cycles"], off["no_dispatcher_cycles"], off["dense_cycles"]) == (23, 23, 23)
    assert on["dispatcher"] is True and off["dispatcher"] is False
    assert on["pe_utilization"] == pytest.approx(36 / (16 * 21))
    assert off["pe_utilization"] == pytest.approx(36 / (16 * 23))
    assert off["no_dispatcher_pe_utilization"] == pytest.approx(36 / (16 * 23))
    assert off["speedup"] == pytest.approx(1.0) and on["speedup"] == pytest.approx(23 / 21)
    assert off["per_op"][0]["slots"] == 12 and on["per_op"][0]["slots"] == 10


def test_cli_no_dispatcher_flag(tmp_path):
    import json

    from tests.test_cli import kaleido

    _, _, path, toml = _hand_trace_and_config(tmp_path)
    for flag, want in (([], 21), (["--no-dispatcher"], 23)):
        out = tmp_path / f"out{want}.json"
        res = kaleido("simulate", str(path), "--config", str(toml), "--json", str(out), *flag)
        assert res.returncode == 0, res.stderr
        r = json.loads(out.read_text())
        assert r["cycles"] == want and r["no_dispatcher_cycles"] == 23
        assert r["dispatcher"] is (not flag)
        assert ("dispatcher off" in res.stdout) is bool(flag)


def test_results_roll_up_by_block_and_step(tmp_path):
    """The hand op (21 cycles with the dispatcher, 23 dense, 36 useful MACs) in block 0 step 0 and in
    block 1 step 5: each block and each step holds one op's figures; the totals hold both (42, 46)."""
    import dataclasses

    from sim.engines.model import simulate_trace

    trace, cfg, _, _ = _hand_trace_and_config(tmp_path)
    trace.ops.append(dataclasses.replace(trace.ops[0], block=1, step=5))
    res = simulate_trace(trace, cfg)
    assert (res["cycles"], res["dense_cycles"]) == (42, 46)
    for key, names in (("by_block", ("0", "1")), ("by_step", ("0", "5"))):
        assert sorted(res[key]) == list(names)
        for n in names:
            g = res[key][n]
            assert (g["cycles"], g["dense_cycles"], g["no_dispatcher_cycles"]) == (21, 23, 23)
            assert g["speedup"] == pytest.approx(23 / 21) and g["pe_utilization"] == pytest.approx(36 / (16 * 21))
            assert g["stall_cycles"]["drain"] == 0
