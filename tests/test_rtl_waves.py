"""Waveforms of the compiled RTL engine (``KALEIDO_WAVES=1``, sim/engines/verilator.py): the FST
file of ``kaleido simulate --engine rtl --waves-from F --waves-cycles N`` and of the regression's
replay command, opened with an independent reader (pywellen, a Rust FST parser).

The waves build (``--trace-fst``) is cached in build/verilator/tiny-8x8-<key>-waves/ (about a
minute of CPU the first time).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from algo.trace import save_trace
from tests.rtl.cases import engine_trace

pywellen = pytest.importorskip("pywellen")

ROOT = Path(__file__).resolve().parents[1]
#: Ticks of a run before its first slot, by the driver's reset sequence: the wrapper's rst high for 3
#: cycles, then 2 low cycles (sim/engines/verilator_driver.cpp), so the first slot is offered at tick 5.
RESET_HIGH, FIRST_SLOT_TICK = 3, 5


def _run(*args: str, waves: bool = True) -> subprocess.CompletedProcess:
    """``python ARGS`` with ``KALEIDO_WAVES=1`` (or without it); the traced engines are built at g++ -O0
    (``KALEIDO_RTL_OPT``, `sim.engines.verilator_build.makeflags`): these runs are a few hundred cycles, the build
    is the time."""
    env = {**os.environ, "KALEIDO_WAVES": "1", "KALEIDO_RTL_OPT": "-O0"} if waves else \
        {k: v for k, v in os.environ.items() if k != "KALEIDO_WAVES"}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=900)


def _changes(path: Path) -> dict[str, list[tuple[int, int]]]:
    """Value changes ``[(time, value), ...]`` of every variable of an FST file, by full name."""
    wave = pywellen.Waveform(str(path))
    assert wave.file_format == "FST"
    return {v.full_name: list(v.tv) for v in wave.all_vars()}


def test_fst_window_from_cli(tmp_path):
    """``--waves-from 2 --waves-cycles 40`` writes an FST holding exactly times 4..83 (a tick is two
    time steps: inputs, then the rising edge), in which clk toggles every step, rst is high through
    tick 2 and low from tick 3, and in_valid rises at tick 5; the run's cycles and checksum equal the
    cycle model's, so the traced build is the same machine."""
    trace = tmp_path / "t.npz"
    save_trace(engine_trace(), trace)
    fst = tmp_path / "w.fst"
    res = _run("-m", "sim.cli", "simulate", str(trace), "-c", "tiny-8x8", "--engine", "rtl", "--waves-from", "2",
               "--waves-cycles", "40", "--waves-out", str(fst), "--json", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    assert f"waveforms: {fst}" in res.stdout
    res_m = _run("-m", "sim.cli", "simulate", str(trace), "-c", "tiny-8x8", "--checksum", "--json",
                 str(tmp_path / "m.json"), waves=False)
    assert res_m.returncode == 0, res_m.stderr
    rtl, model = (json.loads((tmp_path / n).read_text()) for n in ("r.json", "m.json"))
    assert rtl["cycles"] == model["cycles"] and rtl["outputs_sha256"] == model["outputs_sha256"]
    assert rtl["per_op"][0]["first_tick"] == FIRST_SLOT_TICK
    assert not list(tmp_path.glob(".*part"))  # written atomically: no partial file left

    tv = _changes(fst)
    clk = tv["TOP.clk"]  # clk changes at every time step of the window
    assert [t for t, _ in clk] == list(range(4, 2 * (2 + 40))) and [v for _, v in clk[:4]] == [0, 1, 0, 1]
    # rst is high for ticks 0..RESET_HIGH-1: high at the window's start (tick 2), low from tick 3.
    assert tv["TOP.rst"] == [(4, 1), (2 * RESET_HIGH, 0)]
    assert tv["TOP.in_valid"][:2] == [(4, 0), (2 * FIRST_SLOT_TICK, 1)]
    # The PE's named terms (hw/pe.py `wire`) and registers are in the file, for every PE.
    assert "TOP.kaleido_engine.dut.array.col7.pe7.wl_a" in tv and "TOP.kaleido_engine.dut.array.col0.pe0.acc" in tv
    assert fst.stat().st_size < 2_000_000


def test_fst_needs_waves_env(tmp_path):
    """--waves-from without KALEIDO_WAVES=1: one line naming it, exit 2, no file."""
    trace = tmp_path / "t.npz"
    save_trace(engine_trace(), trace)
    res = _run("-m", "sim.cli", "simulate", str(trace), "-c", "tiny-8x8", "--engine", "rtl", "--waves-from", "0",
               "--waves-out", str(tmp_path / "w.fst"), waves=False)
    assert res.returncode == 2 and "KALEIDO_WAVES=1" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "w.fst").exists()


def test_regression_replay_writes_fst(tmp_path):
    """The replay command a regression failure prints (`tests.rtl.regression.replay_command`) runs,
    says the case is equal to the models, and writes an FST of the window it names."""
    from tests.rtl.regression import DEFAULT_SEED, replay_command

    cmd = replay_command(DEFAULT_SEED, 3, "tiny-8x8", tile=0)
    assert cmd.startswith("KALEIDO_WAVES=1 .venv/bin/python -m tests.rtl.regression ")
    fst = tmp_path / "case3.fst"
    res = _run("-m", "tests.rtl.regression", *cmd.split(" -m tests.rtl.regression ")[1].split(), "--out", str(fst))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "equal to algo.reuse.golden and the cycle model" in res.stdout
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("waveforms:"))
    first, last = (int(v) for v in line.split("(ticks ")[1].rstrip(")").split(".."))
    clk = _changes(fst)["TOP.clk"]
    assert clk[0][0] == 2 * first and clk[-1][0] == 2 * last + 1 and last > first


def test_band_regression_replay_writes_fst(tmp_path):
    """The band regression's replay command (`tests.rtl.band_regression.replay_command`, D86) runs, says the case
    equals the models, and writes an FST of the whole run: the wrapper's reset input high for ticks 0-2 and low
    from tick 3, so the design's registered reset is high through tick 3 and low at tick 4, the run's cycle 0
    (sim/engines/verilator_band_driver.cpp)."""
    from tests.rtl.band_regression import DEFAULT_SEED, replay_command

    cmd = replay_command("delta", "b4-d2", DEFAULT_SEED, 2)
    assert cmd.startswith("KALEIDO_WAVES=1 .venv/bin/python -m tests.rtl.band_regression ")
    fst = tmp_path / "band.fst"
    res = _run("-m", "tests.rtl.band_regression", *cmd.split(" -m tests.rtl.band_regression ")[1].split(),
               "--out", str(fst))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "equal to algo.reuse.golden and the cycle model" in res.stdout
    line = next(ln for ln in res.stdout.splitlines() if ln.startswith("waveforms:"))
    first, last = (int(v) for v in line.split("(ticks ")[1].split(";")[0].split(".."))
    assert first == 0 and "cycle 0 of the run is tick 4" in line
    ch = _changes(fst)
    assert ch["TOP.clk"][0][0] == 0 and ch["TOP.clk"][-1][0] == 2 * last + 1
    assert [v for _t, v in ch["TOP.rst"]] == [1, 0] and ch["TOP.rst"][1][0] == 2 * 3  # low from tick 3
    rst_q = next(v for k, v in ch.items() if k.endswith("rst_q"))
    assert [v for _t, v in rst_q] == [1, 0] and rst_q[1][0] == 2 * 3 + 1  # the design's reset falls at tick 3's edge
