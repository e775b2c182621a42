"""The example configs of the compact and delta organisations (hw/presets/examples/), `--engine rtl` with them (their
op-level controllers since D102; a new user's trial from a fresh clone met a refusal there before), and a refusal:
two configs that would write their Verilog into one folder."""

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


def test_rtl_engine_runs_other_organisations_without_waves(tmp_path, monkeypatch):
    # the compact example through kaleido_ccore (D102; the engine is built by tests/test_rtl_core_engine.py first in
    # the suite): the outputs' checksum is the golden model's; waveforms are the lockstep engine's only
    import json

    from algo.trace import load_trace
    from sim.engines.rtl import golden_checksums

    trace = small_trace(tmp_path / "t.npz")
    res = kaleido("simulate", str(trace), "--config", str(EXAMPLES / "tiny-8x8-compact.toml"), "--engine", "rtl",
                  "--json", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    out = json.loads((tmp_path / "r.json").read_text())
    assert out["core"] == "ccore" and out["outputs_sha256"] == golden_checksums(load_trace(trace))[0]
    # beside the controller's cycles, the cycle model's on the same trace and config (its own CLI run)
    res_m = kaleido("simulate", str(trace), "--config", str(EXAMPLES / "tiny-8x8-compact.toml"), "--json",
                    str(tmp_path / "m.json"))
    assert res_m.returncode == 0, res_m.stderr
    model = json.loads((tmp_path / "m.json").read_text())
    assert (out["model_cycles"], out["dense_cycles"]) == (model["cycles"], model["dense_cycles"])
    assert [(r["model_cycles"], r["dense_cycles"]) for r in out["per_op"]] == [
        (m["cycles"], m["dense_cycles"]) for m in model["per_op"]]
    assert f"the cycle model on the same trace and config: {model['cycles']:,} array cycles" in res.stdout
    first = load_trace(trace).ops[0]
    assert f"step {first.step} block {first.block} {first.name} (op 1 of " in res.stderr  # progress names the op
    # and gives the time left by the MACs still to run: none after the last op
    assert res.stderr.count(" s left (by MACs)") == len(load_trace(trace).ops) and "about 0 s left" in res.stderr
    monkeypatch.setenv("KALEIDO_WAVES", "1")
    res = kaleido("simulate", str(trace), "--config", str(EXAMPLES / "tiny-8x8-delta.toml"), "--engine", "rtl",
                  "--json", str(tmp_path / "w.json"))
    assert_one_line_error(res, "KALEIDO_WAVES=1", "apply to the lockstep RTL engine only", "'delta'")
    assert not (tmp_path / "w.json").exists()


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
