"""The compiled engine's pre-optimised PE (sim/engines/verilator_build.py `preoptimise`, docs/decisions.md D87).

Its equivalence with the emitted PE is checked where it runs: tests/test_rtl_engine.py, test_rtl_regression.py and
test_rtl_waves.py compare the engine's outputs and cycles with the golden and cycle models. Here: the rewrite of
Yosys' sign-extension concatenations on hand-written lines, and that the derived file is reproducible and keeps the
emitted PE's ports and named signals.
"""

from __future__ import annotations

import re
from pathlib import Path

from hw.config import load_config
from sim.engines.verilator_build import preoptimise, sign_extensions


def test_sign_extensions_rewrites_only_whole_signal_extensions():
    text = ("  wire [3:0] s;\n  reg [12:0] r;\n  wire [4:0] t;\n"
            "  assign a = c ? b : { s[3], s[3], s };\n"          # s sign-extended to 6 bits
            "  assign d = { r[12], r };\n"                        # r to 14 bits
            "  assign e = { s[2], s };\n"                         # not s's top bit: kept
            "  assign f = { t[3], t };\n"                         # t is 5 bits: t[3] is not its top bit, kept
            "  assign g = { s[3], s[3], s[2:0] };\n"              # a part of s: kept
            "  assign h = { u[3], u };\n")                        # u not declared here: kept
    out = sign_extensions(text).splitlines()
    assert out[3] == "  assign a = c ? b : $unsigned(6'($signed(s)));"
    assert out[4] == "  assign d = $unsigned(14'($signed(r)));"
    assert out[5:] == text.splitlines()[5:]


def _ports(verilog: str) -> list[str]:
    return sorted(re.findall(r"^\s*(?:input|output)\s+(?:\[\d+:0\]\s+)?(\w+);", verilog, re.M))


def test_preoptimised_pe_is_reproducible_and_keeps_ports_and_names(tmp_path):
    from hw.rtl import emit

    cfg = load_config("tiny-8x8")
    a, b = preoptimise(cfg, "kaleido_pe"), preoptimise(cfg, "kaleido_pe")
    assert a == b
    text = a.decode()
    assert "/tmp" not in text and str(Path.cwd()) not in text and "(*" not in text  # no paths, no attributes
    emit(cfg, tmp_path, only=("kaleido_pe",))
    emitted = (tmp_path / "kaleido_pe.v").read_text()
    # 2 x 4 row-lane, 2 x 12 column-lane, 2 x 2 link fields, out, out_valid, out_port, clk, rst (hw.pe.pe_signature)
    assert _ports(text) == _ports(emitted) and len(_ports(text)) == 2 * 4 + 2 * 12 + 2 * 2 + 3 + 2
    # The PE's named terms (hw/pe.py `wire`) survive for the waveforms (opt_clean without -purge).
    for name in ("wl_a", "wl_b", "merge", "clear", "old_a", "acc_next", "acc"):
        assert re.search(rf"^\s*(?:wire|reg) (?:\[\d+:0\] )?{name}\b", text, re.M), name
    assert "$unsigned(18'($signed(p_lo)))" in text
