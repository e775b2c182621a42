"""kaleido_dcore's D buffers charged in the cost model (docs/decisions.md D115): the extra buffer's SRAM (area, so
leakage) and the controller's residue state, from hand counts of the configs' sizes."""

from __future__ import annotations

import pytest

from hw.config import BALANCED_PRESET, load_config
from sim.cost.area import area_breakdown
from sim.cost.controllers import part
from sim.cost.energy import load_tech
from tests.test_rtl_delta import delta_cfg

BALANCED = BALANCED_PRESET


def test_third_d_buffer_sram_area():
    # the partial-sum SRAM is charged by the macros kaleido_dcombine builds (D114). Without a difference-sum buffer
    # (the 8 x 8 test config) the state buffer and the D buffers are a third of psum_sram_kib each, in words of C x
    # acc bits, each way in macros of at most 1 Mbit: 64 KiB -> 780 words of 8 x 28 = 224 bits (2 ways of 390, one
    # macro each), so a third D buffer adds one. With one (the balanced preset, D122) the D buffers are the
    # difference-sum buffer, an n-th of its 1,024 KiB each: 8,388,608 bits // 4,224 (128 x 33) = 1,985 words; n = 2:
    # 992 a buffer, 248 a way (one 248 x 4,224 macro, 1,047,552 bits <= 1 Mbit), 8 macros; n = 3: 661, 165 a way, 12
    # macros. The state buffer (all of psum_sram_kib) does not change with n.
    cfg = delta_cfg(8, 8, 2, 2)
    bit = load_tech(cfg.technology_nm).a("sram_bit") * 1e-6  # mm^2 per bit
    two, three = (area_breakdown(cfg.model_copy(update={"dcore_d_buffers": n}))["breakdown"] for n in (2, 3))
    assert three["sram_psum"] - two["sram_psum"] == pytest.approx(780 * 224 * bit)
    assert three["sram_diff"] == two["sram_diff"] == 0
    grown = {k for k in three if three[k] != pytest.approx(two[k])}
    assert grown <= {"sram_psum", "ctrl_tables", "ctrl_registers", "combine_unit"}
    cfg = load_config(BALANCED)
    two, three = (area_breakdown(cfg.model_copy(update={"dcore_d_buffers": n}))["breakdown"] for n in (2, 3))
    assert (two["sram_diff"], three["sram_diff"]) == (pytest.approx(8 * 248 * 4224 * bit),
                                                      pytest.approx(12 * 165 * 4224 * bit))
    assert three["sram_psum"] == two["sram_psum"]


def test_third_d_buffer_controller_parts():
    # 8 x 8, d = 2 ways (W = 2): seen banks one per buffer and way, 4 -> 6; per FIFO entry (8 per port x 2 ports)
    # a 2-bit residue, not a parity bit; the tile table's entry 2 bits wider
    cfg = delta_cfg(8, 8, 2, 2)
    two, three = cfg.model_copy(update={"dcore_d_buffers": 2}), cfg.model_copy(update={"dcore_d_buffers": 3})
    assert (part(two, "kaleido_dcore", "seen bits")["count"], part(three, "kaleido_dcore", "seen bits")["count"]) == (4, 6)
    assert (part(two, "kaleido_dcore", "FIFO parity")["bits"], part(three, "kaleido_dcore", "FIFO parity")["bits"]) == (16, 32)
    assert part(three, "kaleido_dcore", "tile table")["width"] == part(two, "kaleido_dcore", "tile table")["width"] + 2
    # the walk's residue counter (2 bits) beside its ordinal; per extra way (1 of 2) its s1 and s2 residues one bit
    # wider than the parity; the combine's a_sel a 2-bit buffer number per way (2 ways)
    for name, more in (("walk segment", 2), ("accumulate ways", 2)):
        assert part(three, "kaleido_dcore", name)["bits"] == part(two, "kaleido_dcore", name)["bits"] + more
    assert (part(three, "kaleido_dcombine_w2_v2_b3", "accumulate ways")["bits"]
            == part(two, "kaleido_dcombine_w2_v2", "accumulate ways")["bits"] + 2)
    with pytest.raises(KeyError):
        part(two, "kaleido_dcore", "residue mod n")


def test_fifo_bypass_registers_and_charges():
    # D118: the inventory's bypass registers are the elaborated design's (stage A per FIFO bank, stage B per way,
    # stage A's first entry and count), 8 x 8 d = 2 (W = 2); and the charge: a bypassed row's FIFO write and read
    # (2 x the FIFO word's bytes) off, every row's stage-A write and each bypassed row's stage-B write in registers
    import collections

    from hw.delta_core import DeltaCore
    from sim.cost.controllers import bypass_actions
    from tests.test_controller_cost import _bank_bits, _clocked_bits

    cfg = delta_cfg(8, 8, 2, 2).model_copy(update={"dcore_fifo_bypass": True})
    regs = _clocked_bits(DeltaCore(cfg, pe="instance", out_ways=2, d_buffers=3, fifo_bypass=True))
    assert part(cfg, "kaleido_dcore", "FIFO bypass")["bits"] == _bank_bits(regs, r"fifo_a_\w+|acc_s1_byp\w*")
    width = part(cfg, "kaleido_dcore", "row FIFO")["width"]
    a = collections.Counter({"ctrl_fifo_bytes": 100 * 2 * width / 8})
    bypass_actions(a, 100, 20, cfg)
    assert a["ctrl_fifo_bytes"] == pytest.approx(80 * 2 * width / 8) and a["ctrl_reg_bits"] == width * 120
    off = cfg.model_copy(update={"dcore_fifo_bypass": False})
    with pytest.raises(KeyError):
        part(off, "kaleido_dcore", "FIFO bypass")
    assert bypass_actions(collections.Counter(), 100, 20, off) == {}


def test_balanced_die_sram_list_by_hand():
    # D122: the balanced preset's delta die holds each SRAM once, as the RTL builds it. Its combine unit
    # kaleido_dcombine_w4_v4_b3 (W = d = 4 ways, V = 4 lanes, n = 3 D buffers), words of C x acc = 128 x 33 = 4,224
    # bits. D buffers: the difference-sum buffer, 1,024 KiB x 8,192 // 4,224 = 1,985 words, 661 a buffer, 165 a way
    # (one macro: 165 x 4,224 = 696,960 bits <= 1 Mbit): 3 x 4 = 12 macros of 165 x 4,224. State buffer: all of
    # psum_sram_kib, 3,072 KiB x 8,192 // 4,224 = 5,957 words, 1,489 a lane, in macros of 128 words (the largest power
    # of two with 128 x 4,224 <= 1 Mbit), 11 a lane (the remainder not built): 44 macros of 128 x 4,224. State SRAM:
    # 14,336 KiB x 8,192 // (128 columns x 24 bits) = 38,229 words a column bank, 9,557 a lane bank (229,368 bits, one
    # macro): 128 x 4 = 512 macros of 9,557 x 24. The other SRAMs at their config size.
    from sim.cost.controllers import built_sram_bits, d_buffer_macro
    from sim.cost.energy import action_energies, sram_access_pj

    cfg = load_config(BALANCED)
    tech = load_tech(cfg.technology_nm)
    cmb = "kaleido_dcombine_w4_v4_b3"
    assert [(p["depth"], p["width"], p["count"], p["charged"]) for p in (
        part(cfg, cmb, "D buffers"), part(cfg, cmb, "state buffer"), part(cfg, cmb, "state SRAM"))] == [
        (165, 4224, 12, "sram_diff"), (128, 4224, 44, "sram_psum"), (9557, 24, 512, "sram_state")]
    diff, psum, state = 12 * 165 * 4224, 44 * 128 * 4224, 512 * 9557 * 24
    assert built_sram_bits(cfg) == {"sram_psum": psum, "sram_state": state, "sram_diff": diff}
    bit = tech.a("sram_bit") * 1e-6
    ab = area_breakdown(cfg, tech)["breakdown"]
    want = {"sram_psum": psum, "sram_state": state, "sram_diff": diff, "sram_input": 4096 * 8192,
            "sram_weight": 8192 * 8192, "sram_output": 256 * 8192, "sram_partial": 0, "sram_score": 12288 * 8192,
            "sram_peff": 4096 * 8192, "sram_wstage": 192 * 8192}
    assert {k: v for k, v in ab.items() if k.startswith("sram_")} == {k: pytest.approx(v * bit) for k, v in
                                                                       want.items()}
    # per access: the D traffic at a column slice of a D buffer's macro (165 words x 33 bits), the carried values
    # at one of the state buffer's (128 x 33)
    assert d_buffer_macro(cfg)["depth"] == 165
    e = action_energies(cfg, tech)
    for b, depth in (("diff", 165), ("psum", 128)):
        per_byte = sram_access_pj(tech, depth * 33 / 8192) / 8
        assert e[f"sram_{b}_read_bytes"] == e[f"sram_{b}_write_bytes"] == (f"sram_{b}", pytest.approx(per_byte))


def test_diff_sram_too_small_for_a_d_buffer():
    # D122: a D buffer below one pool's R words is refused in one line naming diff_sram_kib: the balanced preset at
    # 64 KiB, 524,288 bits // 4,224 = 124 words, 41 a buffer of 3 (< R = 128)
    from hw.delta_combine import delta_combine_sizes

    cfg = load_config(BALANCED).model_copy(update={"diff_sram_kib": 64})
    with pytest.raises(ValueError, match=r"diff_sram_kib = 64 holds 41 words .* of its 3 D buffers, fewer than "
                                         r"array_rows = 128") as err:
        delta_combine_sizes(cfg, 4, 4, 3)
    assert "\n" not in str(err.value)


def test_rtl_refuses_a_diff_sram_too_small_in_one_line(tmp_path, capsys):
    # D122: hw.rtl refuses the config before writing anything: exit 2, one line naming diff_sram_kib
    from pathlib import Path

    from hw.rtl import main

    text = Path("hw/presets/kaleido-16nm-128x128-balanced.toml").read_text()
    toml = tmp_path / "small.toml"
    toml.write_text(text.replace('name = "kaleido-16nm-128x128-balanced"', 'name = "bal-diff64"')
                    .replace("diff_sram_kib = 1024", "diff_sram_kib = 64"))
    out = tmp_path / "rtl"
    assert main([str(toml), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: bal-diff64: diff_sram_kib = 64 holds 41 words")
    assert not out.exists()
