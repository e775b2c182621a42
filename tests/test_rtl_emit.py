"""Verilog emission: reproducible (byte-identical, no absolute paths, no timestamps), waivers inline."""

from __future__ import annotations

import re
from pathlib import Path

from hw.config import load_config
from hw.rtl import LINT_WAIVERS, emit


def test_emission_is_reproducible_and_portable(tmp_path):
    cfg = load_config("tiny-8x8")
    a = emit(cfg, tmp_path / "a")
    b = emit(cfg, tmp_path / "b")
    # tiny-8x8's controller (R = C = 8, d = 2, 8 groups, P = 2; 256 tokens, K 64, N 256, so KB = 32 words
    # per token and 9-bit token numbers): X in 8 banks of 256 / 8 * 32 = 1024 words x 16 bits and W in 8
    # column banks of 256 / 8 * 32 = 1024 x 16 (the same macro), effective values 32 x (2 x 9) in 9-bit
    # lanes, decisions 8 banks of 32 tokens x (8 x 2) bits in 2-bit lanes, order 8 row banks of 32 position
    # blocks x 9 bits and 2 drain-port copies of 256 x 9 (hw/accel.py), sorted by name.
    macros = ["kaleido_sram_1r1w_32x18_l9", "kaleido_sram_1rw_1024x16", "kaleido_sram_1rw_256x9",
              "kaleido_sram_1rw_32x16_l2", "kaleido_sram_1rw_32x9"]
    assert [p.name for p in a] == ["kaleido_pe.v", "kaleido_column.v", "kaleido_top.v", "kaleido_similarity.v",
                                      "kaleido_matcher.v", "kaleido_scheduler.v", "kaleido_core.v", "kaleido_accel.v",
                                      *(f"{n}.v" for n in macros)]
    for pa, pb in zip(a, b, strict=True):  # macros (a[8:]) carry their own waiver (hw.sram.emit_macro)
        text = pa.read_text()
        assert pa.read_bytes() == pb.read_bytes(), pa.name
        assert str(Path.cwd()) not in text and str(tmp_path) not in text
        assert not re.search(r"\b(19|20)\d\d-\d\d-\d\d\b|\d\d:\d\d:\d\d", text), "timestamp in Verilog"
        for code, _ in LINT_WAIVERS if not pa.name.startswith("kaleido_sram_") else []:
            assert f"/* verilator lint_off {code} */" in text
    top = a[2].read_text()
    assert "module kaleido_top" in top and "kaleido_column" in top
    assert a[1].read_text().count("kaleido_pe ") == cfg.array_rows  # PE instantiated by name, once per row
    accel = a[7].read_text()
    assert "module kaleido_accel" in accel and "kaleido_core " in accel  # the core instantiated by name
    for name, count in zip(macros, [1, 16, 2, 8, 8], strict=True):  # the macros too, once per bank
        assert len(re.findall(rf"^\s*{name} \S+\s+\(", accel, re.M)) == count, name
    for p in a[8:]:  # each macro file defines the one module its name says (swappable by name)
        assert re.findall(r"^module (\w+)", p.read_text(), re.M) == [p.stem]
