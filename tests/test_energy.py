"""Energy and area models: hand-derived action counts, hand sums, tables, scaling, area, CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE as C
from algo.reuse.golden import PARTIAL as P
from algo.reuse.golden import REUSE as R
from algo.trace import load_trace
from hw.config import load_config
from sim.cost.actions import dense_actions, dram_bytes, op_actions, xeff_state_bytes
from sim.cost.area import area_breakdown, synth_pe_cells
from sim.cost.energy import COMPONENTS, EnergyModel, energy_of, sram_access_pj
from sim.cost.tech import energy_poly, load_tech, table_names
from sim.cost.tiling import tile_counts
from sim.engines.model import simulate_trace
from tests.test_cli import small_trace

# The matcher example of docs/architecture.md: 4 rows (one frame, grid 1x1x4), K = 6 in three
# groups of 2 channels, all temporal. Slots: (0, 2), (1, 3), (4, 5).
GROUPS = [(0, 2, "f"), (2, 4, "f"), (4, 6, "f")]
DEC = np.array([[C, R, P], [C, R, P], [R, C, P], [R, R, R]], dtype=np.int8)


def test_tile_counts_hand_worked():
    t = tile_counts(DEC, (1, 1, 4), GROUPS, 8, 4)
    # slot (0,2) = g0|g1: rows 0,1 COMPUTE on a, row 2 COMPUTE on b, row 3 REUSE; slot (1,3) the same;
    # slot (4,5) = g2|g2: rows 0-2 PAIRED, row 3 REUSE.
    assert t == {"issued": 3, "rows_x_channels": 4 * 6, "channels": 6, "rows": 4,
                 "compute": 6, "partial": 0, "paired": 3, "reuse": 3}


def test_op_actions_hand_worked():
    cfg = load_config("tiny-8x8")  # R = C = 8, acc_bits 28 (4 bytes), group_bits 3, SRAM 16/16/8/8 KiB
    assert cfg.acc_bits == 28 and cfg.group_bits == 3
    M, K, N = 4, 6, 8  # noqa: N806
    a = op_actions("o_proj", [DEC], (1, 1, 4), GROUPS, M, K, N, 4, cfg, cycles=100)
    assert a["mac8"] == 6 * 8            # 6 COMPUTE (token, channel) pairs x N
    assert a["mac4"] == 6 * 8            # 3 PAIRED row-slots carry 6 PARTIAL pairs, x N
    # register updates: COMPUTE 3 each (6 row-slots), PAIRED 3 each (3) = 27 per column
    assert a["pe_add"] == 27 * 8
    # + one out write per valid PE; + valid bits (D64): 18 partial-register updates (27 less 9 acc) set
    # one, and each of the 4 rows x 8 columns of valid PEs clears 2 P = 16 at the tile's clear
    assert a["pe_reg_bits"] == 28 * (27 * 8 + 4 * 8) + 18 * 8 + 16 * 4 * 8
    # 9 active row-slots x 8 cols x (42 operand + 2*3 group + 2 first) mux bits
    # + (2*6 + 2*3) register reads x 8 cols x 28 bits x log2(8) levels
    assert a["pe_mux_bits"] == 9 * 8 * 50 + 18 * 8 * 28 * 3
    # R*C x 3 issued slots x 51 pass-through bits (49 + the w-link slot flags sp_a, sp_b; D4)
    assert a["pipe_reg_bits"] == 64 * 3 * 51
    assert a["idle_pe_cycles"] == 64 * 100 - 48 - 48 / 2
    # array 4 rows x 6 ch; similarity X + X_eff; 4 tokens x 3 groups x 2-bit decision codes = 3 bytes
    assert a["sram_input_read_bytes"] == 24 + 2 * 24 + 3
    # DRAM fill (fits) + X_eff writes of the 6 non-REUSE (token, group)s x 2 channels (a temporal REUSE keeps
    # its position's X_eff entry in place: 6 REUSE x 2 = 12 of the 24 bytes unwritten) + codes
    assert a["sram_input_write_bytes"] == 24 + 12 + 3
    assert a["sram_weight_read_bytes"] == 6 * 8 and a["sram_weight_write_bytes"] == 6 * 8
    assert a["sram_output_write_bytes"] == 4 * 8 * 4 == a["sram_output_read_bytes"]
    assert a["sram_partial_read_bytes"] == 0 == a["sram_partial_write_bytes"]  # temporal groups only (D4)
    assert a["dram_read_bytes"] == 24 + 48 and a["dram_write_bytes"] == 4 * 8
    assert a["sim_add8"] == 3 * 24 + 4 * 4 * 3
    assert a["dispatch_add8"] == 3 * 3 * 4
    assert (a["vec_fp16_add"], a["vec_fp16_mult"]) == (2 * 32, 32)  # requantise + residual add


def test_xeff_state_bytes_hand_worked():
    # grid F=3, H=2, W=5: axis f keeps one position's k_g bytes, w one per frame (F k_g), h a row
    # of positions per frame (W F k_g)
    assert xeff_state_bytes([(0, 4, "f"), (4, 6, "w"), (6, 7, "h")], (3, 2, 5)) == 4 + 3 * 2 + 5 * 3 * 1


def test_dram_bytes_loop_orders_hand_worked():
    cfg = load_config("tiny-8x8")  # C = 8, input and weight SRAM 16 KiB = 16384 B
    # X resident (64 x 64 = 4096 B fits): X once; W column block 64 x 8 = 512 B fits: W once.
    assert dram_bytes(cfg, 64, 64, 16, 8, 8, 8 * 64) == {"x": 4096, "w": 1024, "y": 1024, "order": "resident"}
    # M = 512, K = 64, N = 64: X 32768 B > 16384. n_cb = 8. Column block 64 x 8 = 512 B -> s_w = 32.
    # Dense row block 8 x 64 = 512 B -> s_x = 32. A: X ceil(8/32) = 1 time + W once = 32768 + 4096.
    # B: X once, W 4096 B fits whole -> once. Equal: the tie goes to A.
    assert dram_bytes(cfg, 512, 64, 64, 64, 64, 8 * 64) == {"x": 32768, "w": 4096, "y": 32768, "order": "A"}
    # A Kaleido row block over F = 64 frames: 8 x 64 x 64 = 32768 B > 16384 -> s_x = 0: A reads X
    # once per column block (8 x 32768) + W once; B also 8 x X + W: A.
    k = dram_bytes(cfg, 512, 64, 64, 64, 1, 8 * 64 * 64)
    assert (k["x"], k["w"], k["order"]) == (8 * 32768, 4096, "A")
    # W-heavy: M = 256, K = 128, N = 256 (X 32768 B, W 32768 B, n_cb = 32). Column block 128 x 8 =
    # 1024 B -> s_w = 16; dense row block 8 x 128 = 1024 B -> s_x = 16; 32 row blocks and tiles.
    # A: X ceil(32/16) = 2 times + W once = 65536 + 32768 = 98304.
    # B: X once + W ceil(32/16) = 2 times = 32768 + 65536: the same, tie -> A.
    d = dram_bytes(cfg, 256, 128, 256, 32, 32, 8 * 128)
    assert (d["x"], d["w"], d["order"]) == (2 * 32768, 32768, "A")
    # With 7000 B of state: s_x = (16384 - 7000) // 1024 = 9; A still 2 X + W = 98304;
    # B: X once + W ceil(32/9) = 4 times = 32768 + 131072: A.
    d = dram_bytes(cfg, 256, 128, 256, 32, 32, 8 * 128, state=7000)
    assert (d["x"], d["w"], d["order"]) == (2 * 32768, 32768, "A")
    # K = 4096: column block 4096 x 8 = 32 KiB does not fit (s_w = 0): W streamed per tile in both
    # orders; row block 8 x 4096 = 32 KiB does not fit either (s_x = 0): X once per column block.
    # M = 16, N = 16: 2 tiles, n_cb = 2: X 2 x 65536, W 2 tiles x 65536.
    d = dram_bytes(cfg, 16, 4096, 16, 2, 2, 8 * 4096)
    assert (d["x"], d["w"]) == (2 * 65536, 2 * 65536)
    # M = 72, K = 256, N = 512: X = 18432 B, W = 131072 B, n_cb = 64; column block 256 x 8 = 2048 B
    # -> s_w = 8; row block 8 x 256 = 2048 B -> s_x = 8; 9 row blocks. A: X ceil(64/8) = 8 times + W
    # once = 147456 + 131072 = 278528; B: X once + W ceil(9/8) = 2 times = 18432 + 262144 = 280576: A.
    d = dram_bytes(cfg, 72, 256, 512, 9, 9, 8 * 256)
    assert (d["x"], d["w"], d["order"]) == (8 * 18432, 131072, "A")
    # N = 8192 (W = 2 MiB, n_cb = 1024): A: X 128 times = 2359296 + W 2097152 = 4456448;
    # B: X once 18432 + W 2 times 4194304 = 4212736: B is cheaper.
    d = dram_bytes(cfg, 72, 256, 8192, 9, 9, 8 * 256)
    assert (d["x"], d["w"], d["order"]) == (18432, 2 * 2097152, "B")


def test_op_actions_similarity_pass_and_no_xeff_spill():
    """X not resident: the similarity unit reads X once more (D23); X_eff state (one position's K
    bytes on temporal groups) stays on chip, however large a frame (before: 2 M K through DRAM)."""
    # R = C = 8, 16 KiB input / weight SRAM; a scheduler window of 32 tiles = 256 positions x 2 frames
    # x 64 = 32 KiB does not fit the input SRAM, so the window order (below) is out.
    cfg = load_config("tiny-8x8").model_copy(update={"scheduler_window_tiles": 32})
    grid = (2, 16, 16)  # F = 2, HW = 256 (one frame of X_eff: 256 x 64 = 16 KiB > half the SRAM)
    M, K, N = 512, 64, 8  # noqa: N806
    groups = [(0, 32, "f"), (32, 64, "f")]
    dec = np.zeros((M, 2), dtype=np.int8)  # all COMPUTE
    # Default window, 8 tiles: 64 positions x 2 frames x 64 = 8 KiB + 64 B state fit: the similarity pass
    # decides from the SRAM, X is read ceil(n_cb / s_w) = 1 time, W once.
    a = op_actions("o_proj", [dec], grid, groups, M, K, N, 4, load_config("tiny-8x8"), cycles=1000)
    assert a["dram_read_bytes"] == 32768 + 512
    a = op_actions("o_proj", [dec], grid, groups, M, K, N, 4, cfg, cycles=1000)
    # X = 32768 B > 16384: not resident. n_cb = 1, s_w = 16384 // 512 = 32: order A reads X once;
    # W (512 B) once. Similarity pass: + M K. X_eff state = 64 B: on chip, no spill.
    assert a["dram_read_bytes"] == 32768 + 512 + 32768
    assert a["dram_write_bytes"] == 512 * 8                  # Y as int8 only
    # input SRAM writes: DRAM X fill + similarity-pass fill + X_eff writes + codes (512 x 2 / 4)
    assert a["sram_input_write_bytes"] == 32768 + 32768 + 32768 + 256


def test_xeff_state_spills_only_when_it_exceeds_half_the_input_sram():
    """A group reused along h keeps a row of positions over all frames: W F k_g = 64 x 2 x 80 =
    10,240 B > 8,192 (half of tiny's 16 KiB input SRAM), so X_eff goes through DRAM (M K each way);
    the same op with a temporal group keeps 80 B. Everything else is equal: X = 256 x 80 = 20,480 B
    is not resident in either, and the row block 8 x 2 x 80 = 1,280 B gives s_x = 12 either way."""
    cfg = load_config("tiny-8x8")
    grid = (2, 2, 64)
    M, K, N = 256, 80, 8  # noqa: N806
    dec = np.zeros((M, 1), dtype=np.int8)
    h = op_actions("o_proj", [dec], grid, [(0, 80, "h")], M, K, N, 4, cfg, cycles=1000)
    f = op_actions("o_proj", [dec], grid, [(0, 80, "f")], M, K, N, 4, cfg, cycles=1000)
    assert h["dram_read_bytes"] - f["dram_read_bytes"] == 256 * 80
    assert h["dram_write_bytes"] - f["dram_write_bytes"] == 256 * 80


def test_partial_buffer_counts_spatial_groups():
    cfg = load_config("tiny-8x8")
    h = op_actions("qk", [DEC], (1, 1, 4), [(0, 2, "h"), (2, 4, "f"), (4, 6, "f")], 4, 6, 8, 4, cfg, cycles=100)
    # group 0 on axis h (buffer): rows 2 and 3 REUSE -> 2 values each, x N = 8 columns, 4 bytes each
    assert h["sram_partial_read_bytes"] == 2 * 2 * 8 * 4 == h["sram_partial_write_bytes"]
    # on axis w the PE link serves the neighbour (D4): no buffer traffic; the same neighbour adds, and
    # the link registers: 30 bits x 2 channels x 4 tokens x 8 columns more register bits than on h
    w = op_actions("qk", [DEC], (1, 1, 4), [(0, 2, "w"), (2, 4, "f"), (4, 6, "f")], 4, 6, 8, 4, cfg, cycles=100)
    assert w["sram_partial_read_bytes"] == 0 == w["sram_partial_write_bytes"]
    assert w["pe_add"] == h["pe_add"]
    assert w["pe_reg_bits"] - h["pe_reg_bits"] == 30 * 2 * 4 * 8


def test_dense_actions_hand_worked():
    cfg = load_config("tiny-8x8")
    a = dense_actions("ffn2", 2, 16, 12, 8, cfg, cycles=50)
    assert a["mac8_plain"] == 2 * 16 * 12 * 8 and a["mac8"] == 0
    assert a["pipe_reg_bits"] == 2 * 64 * 2 * 12 * 18   # batch x R*C x (2 tiles x 12 slots) x 18 bits
    assert a["sram_weight_read_bytes"] == 2 * 2 * 12 * 8


def test_energy_is_hand_sum():
    cfg = load_config("tiny-8x8")
    tech = load_tech("45nm")
    acts = {"mac8": 10, "mac4": 4, "mac8_plain": 3, "pe_add": 2, "pe_reg_bits": 100, "pe_mux_bits": 50,
            "dram_read_bytes": 8, "vec_fp16_mult": 1, "sram_input_read_bytes": 16, "cycles": 1000}
    e = energy_of(acts, cfg, tech, area_mm2=0.5)
    assert e["array_macs"] == pytest.approx(10 * 0.2 * 72 / 64 + 4 * 0.2 * 0.5 + 3 * 0.2 + 2 * 0.1 * 28 / 32)
    assert e["pe_registers"] == pytest.approx(100 * 0.009)
    assert e["pe_muxes"] == pytest.approx(50 * 0.0181 / 32)  # Aladdin 40 nm bitwise-logic unit, per bit
    assert e["dram"] == pytest.approx(8 * 162.5)
    assert e["vector_unit"] == pytest.approx(1.1)
    assert e["sram_input"] == pytest.approx(2 * 10 * math.sqrt(2))  # 2 accesses of a 16 KiB array
    assert e["leakage"] == pytest.approx(10.0 * 0.5 * 1000)           # 1000 cycles at 1 GHz = 1000 ns
    assert set(e) == set(COMPONENTS)
    # D89: 0.2 mm^2 of it power-gated over the 1000 cycles keeps a tenth of its leakage
    gated = energy_of(acts | {"gated_mm2_cycles": 0.2 * 1000}, cfg, tech, area_mm2=0.5)
    assert gated["leakage"] == pytest.approx(10.0 * (0.3 + 0.1 * 0.2) * 1000)


def test_untouched_sram_is_power_gated(tmp_path: Path):
    """D89: an SRAM that an op (with the other half of its fused pair) neither reads nor writes is gated for the
    op's wall time, in both designs; hand-picked buffers of a tiny delta op and of a fused pair."""
    from sim.cost.energy import gated_sram_mm2

    bd = {"sram_input": 1.0, "sram_weight": 2.0, "sram_score": 4.0, "sram_peff": 8.0, "sram_state": 16.0,
          "array_pe_plain": 32.0}
    qk = {"sram_input_read_bytes": 1, "sram_weight_read_bytes": 1, "sram_score_write_bytes": 1,
          "sram_state_read_bytes": 0, "sram_state_write_bytes": 5}
    pv = {"sram_weight_read_bytes": 1, "sram_peff_read_bytes": 3}
    assert gated_sram_mm2(bd, qk) == 8.0  # P_eff only; logic is never gated
    assert gated_sram_mm2(bd, pv) == 1.0 + 4.0 + 16.0
    assert gated_sram_mm2(bd, qk, pv) == 0.0  # the pair's union
    # a whole small trace (no fused attention) on tiny-8x8 with a 16 KiB score SRAM: neither design touches it,
    # so each charges a tenth of its leakage, and Kaleido's lockstep partial buffer where an op has no h group
    cfg = load_config("tiny-8x8").model_copy(update={"score_sram_kib": 16})
    ab = area_breakdown(cfg, load_tech("16nm"))
    res = simulate_trace(load_trace(small_trace(tmp_path / "t.npz")), cfg)
    checked = 0
    for r in res["per_op"]:
        if r["actions"].get("sram_score_read_bytes", 0) or r["actions"].get("sram_score_write_bytes", 0):
            continue
        checked += 1
        ns, dns = r["total_cycles"] * 1000 / cfg.clock_mhz, r["dense_total_cycles"] * 1000 / cfg.clock_mhz
        k_untouched = ab["breakdown"]["sram_score"] + ab["breakdown"]["sram_partial"] * (
            r["actions"]["sram_partial_read_bytes"] + r["actions"]["sram_partial_write_bytes"] == 0)
        assert r["energy_breakdown_pj"]["leakage"] == pytest.approx(10.0 * ns * (ab["total_mm2"] - 0.9 * k_untouched))
        assert r["dense_energy_breakdown_pj"]["leakage"] == pytest.approx(
            10.0 * dns * (ab["dense_total_mm2"] - 0.9 * ab["dense_breakdown"].get("sram_score", 0.0)))
    assert checked == len(res["per_op"]) == 2 and ab["dense_breakdown"]["sram_score"] > 0


def test_tables_load_with_sources():
    assert {"45nm", "16nm"} <= set(table_names())
    for name in table_names():
        t = load_tech(name)
        for section in (t.energy, t.area):
            assert section
            for key, row in section.items():
                assert row.source.strip(), (name, key)
                assert row.value > 0, (name, key)


def test_scaling_rule():
    base, t16 = load_tech("45nm"), load_tech("16nm")
    ef = energy_poly([0.2958, -0.1241, 0.03024], 0.8) / energy_poly([1.103, -0.362, 0.2767], 0.9)
    assert ef == pytest.approx(0.120272 / 0.84433, rel=1e-5) and t16.energy_factor == pytest.approx(ef)
    assert t16.e("mult8") == pytest.approx(0.2 * ef)
    assert t16.e("sram_1mib") == pytest.approx(100 * ef)
    assert t16.a("mult8") == pytest.approx(base.a("mult8") * 0.19)
    assert t16.e("dram_byte") == pytest.approx(3.97 * 8)   # overridden, not scaled
    assert t16.a("sram_bit") == pytest.approx(0.14)        # overridden
    assert sram_access_pj(base, 8) == pytest.approx(10) and sram_access_pj(base, 1024) == pytest.approx(100)
    assert sram_access_pj(base, 32) == pytest.approx(20)


@pytest.mark.parametrize("preset", ["tiny-8x8", "kaleido-16nm-128x128"])
def test_area_sums_to_total(preset):
    res = area_breakdown(load_config(preset))
    assert sum(res["breakdown"].values()) == pytest.approx(res["total_mm2"])
    assert 0 < res["dense_total_mm2"] < res["total_mm2"]
    assert res["pe_um2"]["kaleido"] > res["pe_um2"]["plain"]


def test_dense_die_parts():
    """The dense die's parts (drawn beside Kaleido's in the report's area figure) add up to its total, hold every
    shared buffer (the score SRAM too) and none of Kaleido's own units."""
    cfg = load_config("kaleido-16nm-128x128-balanced")
    res = area_breakdown(cfg)
    dense = res["dense_breakdown"]
    assert sum(dense.values()) == pytest.approx(res["dense_total_mm2"])
    assert dense["sram_score"] > 0
    assert dense["sram_score"] == pytest.approx(cfg.score_sram_kib * 8192 * load_tech(16).a("sram_bit") * 1e-6)
    assert {"sram_state", "sram_peff", "sram_psum", "combine_unit", "dispatcher"}.isdisjoint(dense)


def test_synth_cross_check_tiny_pe():
    s = synth_pe_cells(load_config("tiny-8x8"))
    assert s["compare"]["adders"]["yosys"] == s["compare"]["adders"]["model"]
    assert abs(s["compare"]["register_bits"]["yosys"] - s["compare"]["register_bits"]["model"]) <= 2
    mux = s["compare"]["mux_bits"]
    assert 0.8 < mux["model"] / mux["yosys"] < 1.25


def test_simulate_results_have_energy(tmp_path: Path):
    cfg = load_config("tiny-8x8")
    res = simulate_trace(load_trace(small_trace(tmp_path / "t.npz")), cfg)
    for r in [*res["per_op"], res]:
        assert r["energy_pj"] == pytest.approx(sum(r["energy_breakdown_pj"].values()))
        assert r["dense_energy_pj"] == pytest.approx(sum(r["dense_energy_breakdown_pj"].values()))
        assert r["energy_pj"] > 0 and r["dense_energy_pj"] > 0
    for r in res["per_op"]:  # useful MAC-equivalents (docs/spec.md §4) = mac8 + mac4 / 2
        assert r["actions"]["mac8"] + r["actions"]["mac4"] / 2 == pytest.approx(r["useful_macs"])
    assert res["energy_pj"] == pytest.approx(sum(r["energy_pj"] for r in res["per_op"]))
    assert res["actions"]["mac8"] == sum(r["actions"]["mac8"] for r in res["per_op"])
    assert res["energy_model"]["technology"] == "16nm"
    e2 = EnergyModel(cfg, "45nm")
    assert e2.tech.name == "45nm"


def kaleido(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_area_json_and_bad_preset():
    res = kaleido("area", "--config", "tiny-8x8", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["total_mm2"] == pytest.approx(sum(data["breakdown"].values()))
    bad = kaleido("area", "--config", "no-such-preset")
    assert bad.returncode == 2
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ")
    # --organisation: the die simulate charges for that organisation (compact builds no state SRAM, D71)
    from hw.config import with_organisation

    res = kaleido("area", "--config", "kaleido-16nm-128x128-balanced", "--organisation", "compact", "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    want = area_breakdown(with_organisation(load_config("kaleido-16nm-128x128-balanced"), "compact"), load_tech(16))
    assert data["total_mm2"] == pytest.approx(want["total_mm2"]) and data["breakdown"]["sram_state"] == 0
    bad = kaleido("area", "--config", "tiny-8x8", "--organisation", "bogus")
    assert bad.returncode == 2 and "'bogus'" in bad.stderr and "lockstep" in bad.stderr


def test_user_tech_table_by_path(tmp_path: Path):
    """--tech PATH: a user table derived from 45nm with one row replaced; energy follows the hand value."""
    p = tmp_path / "mytech.toml"
    p.write_text('node_nm = 45\nvdd = 0.9\nderived_from = "45nm"\n'
                 '[scaling]\nfrom_vdd = 0.9\nto_vdd = 0.9\nenergy_poly_from = [1.0, 0.0, 0.0]\n'
                 'energy_poly_to = [1.0, 0.0, 0.0]\narea_factor = 1.0\nsource = "identity (test)"\n'
                 '[energy.mult8]\nvalue = 1.0\nunit = "pJ"\nsource = "test value"\n')
    t = load_tech(p)
    assert t.e("mult8") == 1.0 and t.e("add8") == pytest.approx(0.03)   # replaced row; base rows x 1.0
    cfg = load_config("tiny-8x8")
    e = energy_of({"mac8_plain": 3, "mac4": 2}, cfg, t, area_mm2=0.0)
    assert e["array_macs"] == pytest.approx(3 * 1.0 + 2 * 1.0 * 0.5)
    bad = tmp_path / "bad.toml"
    bad.write_text('node_nm = 45\nvdd = 0.9\n[energy.mult8]\nvalue = 1.0\nunit = "pJ"\nsource = "x"\n')
    with pytest.raises(ValueError, match="missing rows"):
        load_tech(bad)


def test_simulate_tech_option(tmp_path: Path):
    trace = small_trace(tmp_path / "t.npz")
    from typer.testing import CliRunner

    from sim.cli import app

    def run(*args):  # in-process: one import of the stack
        return CliRunner().invoke(app, list(args))

    out = tmp_path / "r.json"
    res = run("simulate", str(trace), "--config", "tiny-8x8", "--tech", "45nm", "--json", str(out))
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert data["energy_model"]["technology"] == "45nm"
    direct = simulate_trace(load_trace(trace), load_config("tiny-8x8"), tech="45nm")
    assert data["energy_pj"] == pytest.approx(direct["energy_pj"])
    assert data["energy_pj"] > simulate_trace(load_trace(trace), load_config("tiny-8x8"))["energy_pj"]
    bad = run("simulate", str(trace), "--config", "tiny-8x8", "--tech", str(tmp_path / "nope.toml"),
              "--json", str(tmp_path / "x.json"))
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert bad.exit_code == 2 and len(lines) == 1 and "not found" in lines[0], bad.output
    assert not (tmp_path / "x.json").exists()


def test_weight_sram_charged_per_column_bank():
    # tiny-8x8: weight SRAM 16 KiB in C = 8 column banks of 2 KiB; an access of a 2 KiB array, 45 nm:
    # below 8 KiB the 8 -> 32 KiB slope (exponent 0.5) extrapolates: 10 pJ x sqrt(2 / 8) = 5 pJ per 64 bits.
    cfg = load_config("tiny-8x8")
    assert cfg.weight_sram_kib == 16 and cfg.array_cols == 8
    e = energy_of({"sram_weight_read_bytes": 16, "sram_weight_write_bytes": 8}, cfg, load_tech("45nm"), 0.0)
    assert e["sram_weight"] == pytest.approx(3 * 5.0)  # 24 bytes = 3 accesses


def test_peff_buffer_counts_energy_and_area():
    # a fused pv of one head (M = 4 queries, K = 6 keys, N = 8): the P_eff state read M K = 24 bytes and written
    # M K less the temporal-REUSE (query, key)s: DEC has 6 REUSE entries of 2-key groups -> 24 - 12 = 12.
    base = load_config("tiny-8x8").model_dump() | {"score_sram_kib": 16}
    from hw.config import config_from_dict
    with_buf = config_from_dict(base | {"peff_sram_kib": 4, "name": "tiny-peff"})
    without = config_from_dict(base | {"name": "tiny-score"})
    grid = (1, 1, 4)
    for cfg, buf in ((with_buf, "peff"), (without, "score")):
        a = op_actions("pv", [DEC], grid, GROUPS, 4, 6, 8, 4, cfg, 10, fused=True)
        assert a[f"sram_{buf}_read_bytes"] == 24 and a[f"sram_{buf}_write_bytes"] == 12
        other = "score" if buf == "peff" else "peff"
        assert a[f"sram_{other}_read_bytes"] == 0 and a[f"sram_{other}_write_bytes"] == 0
    tech = load_tech("45nm")
    e = energy_of({"sram_peff_read_bytes": 24, "sram_peff_write_bytes": 8}, with_buf, tech, 0.0)
    # 4 accesses of one of R = 8 row banks (D77: min(R, similarity lanes = R) banks of 4 / 8 KiB), 10 pJ at 8 KiB
    assert e["sram_peff"] == pytest.approx(4 * 10 * math.sqrt(0.5 / 8))
    few = config_from_dict(base | {"peff_sram_kib": 4, "similarity_lanes": 2, "name": "tiny-peff2"})
    e2 = energy_of({"sram_peff_read_bytes": 24, "sram_peff_write_bytes": 8}, few, tech, 0.0)
    assert e2["sram_peff"] == pytest.approx(4 * 10 * math.sqrt(2 / 8))  # 2 lanes: 2 banks of 2 KiB
    ab = area_breakdown(with_buf, tech)
    assert ab["breakdown"]["sram_peff"] == pytest.approx(4 * 8192 * tech.a("sram_bit") * 1e-6)
    # Kaleido's own buffer: not in the dense die
    assert ab["total_mm2"] - ab["dense_total_mm2"] == pytest.approx(
        area_breakdown(without, tech)["total_mm2"] - area_breakdown(without, tech)["dense_total_mm2"]
        + ab["breakdown"]["sram_peff"])


def test_score_buffer_charged_per_row_bank():
    # D83: the score buffer is min(R, vector lanes) row banks (and at most the similarity lanes when P_eff lives in
    # it). tiny-8x8 with a 16 KiB score buffer: R = 8, vector lanes C x d = 16 -> 8 banks of 2 KiB; 45 nm, below
    # 8 KiB the exponent-0.5 slope: 10 pJ x sqrt(2 / 8) = 5 pJ per 64-bit access.
    from hw.config import config_from_dict
    tech = load_tech("45nm")
    base = load_config("tiny-8x8").model_dump() | {"score_sram_kib": 16, "peff_sram_kib": 4}
    counts = {"sram_score_read_bytes": 16, "sram_score_write_bytes": 16}  # 4 accesses
    e = energy_of(counts, config_from_dict(base | {"name": "s8"}), tech, 0.0)
    assert e["sram_score"] == pytest.approx(4 * 10 * math.sqrt(2 / 8))
    few = config_from_dict(base | {"vector_lanes": 2, "name": "s2"})  # 2 lanes: 2 banks of 8 KiB, 10 pJ
    assert energy_of(counts, few, tech, 0.0)["sram_score"] == pytest.approx(4 * 10)
    shared = config_from_dict(base | {"peff_sram_kib": 0, "similarity_lanes": 4, "name": "s4"})  # P_eff in it
    assert energy_of(counts, shared, tech, 0.0)["sram_score"] == pytest.approx(4 * 10 * math.sqrt(4 / 8))


def test_score_buffer_fit_with_and_without_peff_buffer():
    from hw.config import config_from_dict
    from sim.timing.attention import fits_score_buffer
    base = load_config("tiny-8x8").model_dump()
    # R = 8 rows x 512 keys: scores 3 x 4,096 B = 12 KiB, P_eff 4 KiB
    assert fits_score_buffer(config_from_dict(base | {"score_sram_kib": 16, "name": "a"}), 512)
    assert not fits_score_buffer(config_from_dict(base | {"score_sram_kib": 12, "name": "b"}), 512)
    assert fits_score_buffer(config_from_dict(base | {"score_sram_kib": 12, "peff_sram_kib": 4, "name": "c"}), 512)
    assert not fits_score_buffer(config_from_dict(base | {"score_sram_kib": 12, "peff_sram_kib": 3, "name": "d"}),
                                 512)
