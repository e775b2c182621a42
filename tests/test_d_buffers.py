"""kaleido_dcore's D buffers charged in the cost model (docs/decisions.md D115): the extra buffer's SRAM (area, so
leakage) and the controller's residue state, from hand counts of the configs' sizes."""

from __future__ import annotations

import pytest

from hw.config import load_config
from sim.cost.area import area_breakdown
from sim.cost.controllers import part
from sim.cost.energy import load_tech
from tests.test_rtl_delta import delta_cfg

BALANCED = "kaleido-16nm-128x128-balanced"


def test_third_d_buffer_sram_area():
    # the partial-sum SRAM is charged by the macros kaleido_dcombine builds (D114): the state buffer and the D buffers,
    # a third of psum_sram_kib each in words of C x acc bits, each way in macros of at most 1 Mbit (a power-of-two
    # depth; the remainder not built). A third D buffer adds one: the balanced preset's 3,072 KiB / 3 = 8,388,608
    # bits // 4,224 (128 x 33) = 1,985 words, 496 a way on 4 ways, macros of 128 words (256 x 4,224 > 1 Mbit), 3 a
    # way: 4 x 384 = 1,536 words; the 8 x 8 test config's 64 KiB: 780 words of 8 x 28 = 224 bits (2 ways of 390,
    # one macro each). The difference-sum buffer (the model's D, diff_sram_kib) is unchanged.
    for cfg, words, word in ((load_config(BALANCED), 1536, 4224), (delta_cfg(8, 8, 2, 2), 780, 224)):
        bit = load_tech(cfg.technology_nm).a("sram_bit") * 1e-6  # mm^2 per bit
        two, three = (area_breakdown(cfg.model_copy(update={"dcore_d_buffers": n}))["breakdown"] for n in (2, 3))
        assert three["sram_psum"] - two["sram_psum"] == pytest.approx(words * word * bit)
        assert three["sram_diff"] == two["sram_diff"]
        grown = {k for k in three if three[k] != pytest.approx(two[k])}
        assert grown <= {"sram_psum", "ctrl_tables", "ctrl_registers", "combine_unit"}


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
