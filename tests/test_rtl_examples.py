"""The example configs of the compact and delta organisations (hw/presets/examples/), and the refusals a new user
met in a trial from a fresh clone: `--engine rtl` with a config whose organisation has no RTL engine, and two
configs that would write their Verilog into one folder."""

from __future__ import annotations

from pathlib import Path

import pytest

from hw.config import load_config, preset_names
from tests.test_cli import assert_one_line_error, kaleido, small_trace

EXAMPLES = Path(__file__).resolve().parents[1] / "hw" / "presets" / "examples"


@pytest.mark.parametrize("org", ["compact", "delta"])
def test_examples_load_and_are_not_presets(org):
    cfg = load_config(EXAMPLES / f"tiny-8x8-{org}.toml")
    base = load_config("tiny-8x8")
    assert cfg.organisation == org and cfg.name == f"tiny-8x8-{org}" and cfg.name not in preset_names()
    assert (cfg.array_rows, cfg.array_cols, cfg.compact_bands) == (base.array_rows, base.array_cols, 2)
    assert bool(cfg.diff_sram_kib and cfg.wstage_sram_kib) == (org == "delta")  # the delta one has a weight stage


def test_rtl_engine_refuses_other_organisations(tmp_path):
    trace = small_trace(tmp_path / "t.npz")
    res = kaleido("simulate", str(trace), "--config", str(EXAMPLES / "tiny-8x8-delta.toml"), "--engine", "rtl",
                  "--json", str(tmp_path / "r.json"))
    assert_one_line_error(res, "lockstep organisation's RTL only", "'delta'")
    assert not (tmp_path / "r.json").exists()


def test_rtl_refuses_two_configs_in_one_folder(tmp_path):
    from hw.rtl import main

    src = (EXAMPLES / "tiny-8x8-compact.toml").read_text()
    a, b, c = tmp_path / "a.toml", tmp_path / "b.toml", tmp_path / "c.toml"
    a.write_text(src)
    b.write_text(src.replace('organisation = "compact"', 'organisation = "delta"'))  # same name, other design
    c.write_text(src.replace('name = "tiny-8x8-compact"', 'name = "tiny-8x8"'))  # a shipped preset's name
    out = tmp_path / "out"
    assert main([str(a), str(b), "--out", str(out)]) == 2
    assert main([str(c), "--out", str(out)]) == 2
    assert not out.exists()
