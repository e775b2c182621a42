"""Energy and area models: hand-derived action counts, hand sums, tables, scaling, area, CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from algo.golden import COMPUTE as C
from algo.golden import PARTIAL as P
from algo.golden import REUSE as R
from algo.trace import load_trace
from hw.config import load_config
from sim.actions import dense_actions, op_actions, tile_counts
from sim.area import area_breakdown, synth_pe_cells
from sim.energy import COMPONENTS, EnergyModel, energy_of, sram_access_pj
from sim.simulate import simulate_trace
from sim.tech import energy_poly, load_tech, table_names
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
    assert a["pe_reg_bits"] == 28 * (27 * 8 + 4 * 8)        # + one out write per valid PE
    # 9 active row-slots x 8 cols x (42 operand + 2*3 group + 2 first) mux bits
    # + (2*6 + 2*3) register reads x 8 cols x 28 bits x log2(8) levels
    assert a["pe_mux_bits"] == 9 * 8 * 50 + 18 * 8 * 28 * 3
    assert a["pipe_reg_bits"] == 64 * 3 * 49                # R*C x 3 issued slots x 49 pass-through bits
    assert a["idle_pe_cycles"] == 64 * 100 - 48 - 48 / 2
    assert a["sram_input_read_bytes"] == 24 + 2 * 24         # array 4 rows x 6 ch; similarity X + X_eff
    assert a["sram_input_write_bytes"] == 24 + 24            # DRAM fill (fits) + X_eff writes
    assert a["sram_weight_read_bytes"] == 6 * 8 and a["sram_weight_write_bytes"] == 6 * 8
    assert a["sram_output_write_bytes"] == 4 * 8 * 4 == a["sram_output_read_bytes"]
    assert a["sram_partial_read_bytes"] == 0 == a["sram_partial_write_bytes"]  # temporal groups only (D4)
    assert a["dram_read_bytes"] == 24 + 48 and a["dram_write_bytes"] == 4 * 8
    assert a["sim_add8"] == 3 * 24 + 4 * 4 * 3
    assert a["dispatch_add8"] == 3 * 3 * 4
    assert (a["vec_fp16_add"], a["vec_fp16_mult"]) == (2 * 32, 32)  # requantise + residual add


def test_partial_buffer_counts_spatial_groups():
    cfg = load_config("tiny-8x8")
    groups = [(0, 2, "w"), (2, 4, "f"), (4, 6, "f")]
    a = op_actions("qk", [DEC], (1, 1, 4), groups, 4, 6, 8, 4, cfg, cycles=100)
    # group 0 (spatial): rows 2 and 3 REUSE -> 2 values each, x N = 8 columns, 4 bytes each
    assert a["sram_partial_read_bytes"] == 2 * 2 * 8 * 4 == a["sram_partial_write_bytes"]


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
    assert e["pe_muxes"] == pytest.approx(50 * 0.0045)
    assert e["dram"] == pytest.approx(8 * 162.5)
    assert e["vector_unit"] == pytest.approx(1.1)
    assert e["sram_input"] == pytest.approx(2 * 10 * math.sqrt(2))  # 2 accesses of a 16 KiB array
    assert e["leakage"] == pytest.approx(10.0 * 0.5 * 1000)           # 1000 cycles at 1 GHz = 1000 ns
    assert set(e) == set(COMPONENTS)


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
    for r in res["per_op"]:  # useful MAC-equivalents (SPEC section 4) = mac8 + mac4 / 2
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
