"""Sweeps and split simulation on Dask (sim/sweep): a 2-process LocalCluster on tiny traces.

The cluster starts once for the module (a few seconds) and the sweeps reach it by address, the
``--scheduler`` path; the embedded-cluster path (``--workers N``) runs once (determinism test).
Expected values come from `sim.engines.model.simulate_trace` run serially in this process, never from the
sweep code under test.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from algo.trace import TraceReader, load_trace
from hw.config import config_from_dict, load_config
from sim.engines.model import simulate_trace
from sim.sweep.engine import local_cluster
from sim.sweep.runner import run_sweep
from sim.sweep.spec import SweepError, load_sweep
from sim.sweep.table import read_table
from sim.sweep.video import simulate_trace_file, split_by_block
from tests.test_cli import assert_one_line_error, kaleido
from tests.trace_files import decision_video


@pytest.fixture(scope="module")
def cluster():
    with local_cluster(2) as c:
        yield c.scheduler_address


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    d = tmp_path_factory.mktemp("sweep")
    decision_video(d / "a.npz", steps=2, blocks=2, seed=0)
    decision_video(d / "b.npz", steps=1, blocks=2, seed=1)
    return d


def _sweep_file(d: Path, text: str, name: str = "s.toml") -> Path:
    p = d / name
    p.write_text(text)
    return p


SMALL = """trace = "a.npz"
[axes]
config = ["tiny-8x8", "kaleido-16nm-128x128"]
theta_index = [0, 1, 7]
"""


def test_smallest_sweep_file_as_written(traces, cluster, tmp_path):
    """trace = "T.npz" and [axes] config = [two presets]: one row per config with simulate's fields."""
    sw = load_sweep(_sweep_file(traces, 'trace = "a.npz"\n[axes]\nconfig = ["tiny-8x8", "kaleido-16nm-128x128"]\n',
                                "smallest.toml"))
    out = run_sweep(sw, tmp_path, scheduler=cluster)
    rows = read_table(tmp_path / "results.parquet")
    assert [r["config"] for r in rows] == ["tiny-8x8", "kaleido-16nm-128x128"] and out.failed == []
    tr = load_trace(traces / "a.npz")
    for r in rows:
        want = simulate_trace(tr, load_config(r["config"]))
        assert (r["cycles"], r["total_cycles"], r["energy_pj"]) == (want["cycles"], want["total_cycles"],
                                                                   want["energy_pj"])


def test_table_equals_serial_runs_and_failures_are_one_line(traces, cluster, tmp_path):
    sw = load_sweep(_sweep_file(traces, SMALL))
    out = run_sweep(sw, tmp_path, scheduler=cluster)
    rows = read_table(tmp_path / "results.parquet")
    assert len(rows) == 6 and out.ran == sorted(out.ran) or sorted(out.ran) == list(range(6))
    tr = load_trace(traces / "a.npz")
    for r in rows:
        if r["theta_index"] == 7:  # the trace stores 2 pairs: the point fails, the sweep goes on
            assert r["status"] == "failed" and r["cycles"] is None
            assert r["error"].startswith("SimError: theta index 7 out of range") and "\n" not in r["error"]
            continue
        want = simulate_trace(tr, load_config(r["config"]), theta_index=r["theta_index"])
        assert r["status"] == "ok" and r["error"] == ""
        for k in ("cycles", "dense_cycles", "total_cycles", "energy_pj", "dense_energy_pj", "speedup",
                  "pe_utilization"):
            assert r[k] == want[k], k
        assert r["area_mm2"] == want["energy_model"]["area_mm2"]
    assert sorted(out.failed) == [2, 5]


def test_killed_sweep_resumes_without_rerunning_points(traces, cluster, tmp_path):
    """Stopped after 2 points (as Ctrl-C), run again: the other 4 run, none twice, the same table bytes."""
    sw = load_sweep(_sweep_file(traces, SMALL))
    with pytest.raises(KeyboardInterrupt):
        run_sweep(sw, tmp_path / "r", scheduler=cluster, stop_after=2)
    first = sorted(int(json.loads(p.read_text())["status"] != "") for p in (tmp_path / "r" / "points").iterdir())
    assert len(first) == 2 and not (tmp_path / "r" / "results.parquet").exists()
    out = run_sweep(sw, tmp_path / "r", scheduler=cluster)
    assert len(out.skipped) == 2 and len(out.ran) == 4 and not set(out.ran) & set(out.skipped)
    again = run_sweep(sw, tmp_path / "r", scheduler=cluster)  # everything finished: nothing runs
    assert again.ran == [] and len(again.skipped) == 6
    fresh = run_sweep(sw, tmp_path / "fresh", workers=0)
    assert out.files and fresh.files
    for a, b in zip(out.files, fresh.files, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_tables_byte_identical_whatever_the_worker_count(traces, tmp_path):
    text = '[axes]\ntrace = ["a.npz", "b.npz"]\nvector_lanes = [4, 32]\n[[points]]\ntrace = "b.npz"\ndispatcher = false\n'
    sw = load_sweep(_sweep_file(traces, text, "w.toml"))
    assert len(sw.points) == 5
    one = run_sweep(sw, tmp_path / "one", workers=0)
    two = run_sweep(sw, tmp_path / "two", workers=2)  # the embedded LocalCluster, finishing in any order
    for a, b in zip(one.files, two.files, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    rows = read_table(tmp_path / "two" / "results.csv")
    assert [(Path(r["trace"]).name, r["vector_lanes"], r["dispatcher"]) for r in rows] == [
        ("a.npz", "4", ""), ("a.npz", "32", ""), ("b.npz", "4", ""), ("b.npz", "32", ""), ("b.npz", "", "false")]


def test_restarted_process_after_sigkill_skips_finished_points(traces, tmp_path):
    """A real kill: SIGKILL the command once 2 point files exist; the rerun runs only the rest."""
    sw = _sweep_file(traces, 'trace = "a.npz"\n[axes]\nconfig = ["tiny-8x8"]\nvector_lanes = [1, 2, 4, 8, 16, 32]\n',
                     "k.toml")
    out = tmp_path / "k"
    proc = subprocess.Popen([sys.executable, "-m", "sim.cli", "sweep", str(sw), "-o", str(out), "--workers", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None:
        if len(list((out / "points").glob("*.json"))) >= 2:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = len(list((out / "points").glob("*.json")))
    assert not list((out / "points").glob(".*")), "a killed writer left a temporary file"
    res = kaleido("sweep", str(sw), "-o", str(out), "--workers", "0")
    assert res.returncode == 0, res.stderr
    assert f"{6 - done} run now, {done} finished before, 0 failed" in res.stdout
    assert len(read_table(out / "results.parquet")) == 6


@pytest.mark.parametrize("text, needles", [
    ('trace = "a.npz"\n[axes]\nconfig = ["tiny-8x8"]\nbogus = [1]\n', ("axes.bogus", "unknown axis")),
    ('trace = "a.npz"\n[axes]\nconfig = []\n', ("axes.config", "empty")),
    ('trace = "a.npz"\n[axes]\nconfig = ["tiny-8x8"]\narray_rows = [12]\n', ("array_rows", "power of two")),
    ('trace = "missing.npz"\n[axes]\nconfig = ["tiny-8x8"]\n', ("trace", "not found")),
    ('trace = "a.npz"\n[axes]\nconfig = ["nope"]\n', ("config", "unknown config preset")),
    ('trace = "a.npz"\n[axes]\ntheta_index = ["x"]\n', ("theta_index", "non-negative integer")),
])
def test_bad_sweep_file_exits_2_naming_the_key_before_any_task(traces, tmp_path, text, needles):
    sw = _sweep_file(tmp_path, text.replace('"a.npz"', f'"{traces / "a.npz"}"'), "bad.toml")
    with pytest.raises(SweepError) as err:
        load_sweep(sw)
    for n in needles:
        assert n in str(err.value)
    if needles[0] in ("axes.bogus", "array_rows"):  # end to end: exit 2, one line, nothing written
        res = kaleido("sweep", str(sw), "-o", str(tmp_path / "out"))
        assert_one_line_error(res, *needles)
        assert not (tmp_path / "out").exists()


def test_split_simulation_equals_serial_and_reads_one_block_at_a_time(traces, cluster, monkeypatch):
    path = traces / "a.npz"
    cfg = load_config("tiny-8x8")
    want = simulate_trace(load_trace(path), cfg, trace_path=str(path), theta_index=1)
    got = simulate_trace_file(path, cfg, scheduler=cluster, theta_index=1)
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    with TraceReader(path) as rd:
        pieces = split_by_block(rd.shape_ops())
    assert len(pieces) == 4 and all(len(p) == 4 for p in pieces)
    seen = []
    orig = TraceReader.load_ops

    def spy(self, indices):
        ops = orig(self, indices)
        seen.append({(o.step, o.block) for o in ops})
        return ops

    monkeypatch.setattr(TraceReader, "load_ops", spy)
    serial = simulate_trace_file(path, cfg, workers=0, theta_index=1)  # in this process: the spy sees every read
    assert json.dumps(serial, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert len(seen) == 4 and all(len(s) == 1 for s in seen)


def test_cli_simulate_decision_trace_streams_with_the_same_json(traces, tmp_path):
    path = traces / "a.npz"
    res = kaleido("simulate", str(path), "--config", "tiny-8x8", "--json", str(tmp_path / "r.json"))
    assert res.returncode == 0, res.stderr
    want = simulate_trace(load_trace(path), load_config("tiny-8x8"), trace_path=str(path))
    assert json.loads((tmp_path / "r.json").read_text()) == json.loads(json.dumps(want))
    bad = kaleido("simulate", str(path), "--config", "tiny-8x8", "--workers", "0")
    assert_one_line_error(bad, "--workers must be >= 1")


def test_point_config_is_validated_like_a_config_file(traces):
    sw = load_sweep(_sweep_file(traces, 'trace = "a.npz"\n[fixed]\nvector_lanes = 8\n[[points]]\nconfig = "tiny-8x8"\n'
                                'array_cols = 16\n', "p.toml"))
    (pt,) = sw.points
    assert pt.config == config_from_dict(load_config("tiny-8x8").model_dump() | {"vector_lanes": 8, "array_cols": 16})
    assert sw.columns == ["vector_lanes", "config", "array_cols"] and os.path.isabs(pt.trace)


def test_op_memo_returns_what_computing_would(traces):
    """Blocks 1 of each step copy block 0's decisions (as derived traces do): memo hits, equal results."""
    import dataclasses

    from sim.engines.model import OP_MEMO

    tr = load_trace(traces / "a.npz")
    src = {(o.step, o.name): o for o in tr.ops if o.block == 0}
    tr.ops = [dataclasses.replace(o, decisions=src[(o.step, o.name)].decisions.copy()) if o.block == 1 else o
              for o in tr.ops]
    cfg = load_config("tiny-8x8")
    OP_MEMO.enabled = False
    try:
        want = simulate_trace(tr, cfg, theta_index=1)
    finally:
        OP_MEMO.enabled = True
    OP_MEMO.clear()
    got = simulate_trace(tr, cfg, theta_index=1)
    assert (OP_MEMO.hits, OP_MEMO.misses) == (8, 8)  # 2 steps x 4 ops copied, 2 x 4 distinct
    assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
    assert [(r["block"], r["step"]) for r in got["per_op"]] == [(o.block, o.step) for o in tr.ops]
    other = simulate_trace(tr, cfg, theta_index=0, dispatcher=False)  # another theta and mode: no stale hit
    OP_MEMO.enabled = False
    try:
        assert json.dumps(other, sort_keys=True) == json.dumps(simulate_trace(tr, cfg, theta_index=0, dispatcher=False),
                                                                sort_keys=True)
    finally:
        OP_MEMO.enabled = True


def test_pareto_front_by_hand():
    from sim.sweep.figures import pareto_front

    rows = [{"total_speedup": 2.0, "energy_pj": 10.0, "area_mm2": 1.0},   # dominated by 1
            {"total_speedup": 2.5, "energy_pj": 9.0, "area_mm2": 1.0},
            {"total_speedup": 3.0, "energy_pj": 20.0, "area_mm2": 1.0},   # fastest
            {"total_speedup": 1.0, "energy_pj": 20.0, "area_mm2": 0.5},   # smallest
            {"total_speedup": None, "energy_pj": None, "area_mm2": None},  # failed: ignored
            {"total_speedup": 1.0, "energy_pj": 20.0, "area_mm2": 0.5}]   # ties 3: neither dominates
    assert pareto_front(rows) == [1, 2, 3, 5]


def test_report_of_a_sweep_table(traces, tmp_path):
    sw = load_sweep(_sweep_file(traces, SMALL))
    run_sweep(sw, tmp_path / "s", workers=0)
    res = kaleido("report", str(tmp_path / "s" / "results.parquet"), "-o", str(tmp_path / "rep"))
    assert res.returncode == 0, res.stderr
    names = sorted(p.name for p in (tmp_path / "rep").iterdir())
    assert names == sorted(["sweep_pareto.png", "sweep_pareto.pdf", "sweep_speedup_vs_axes.png",
                            "sweep_speedup_vs_axes.pdf", "sweep_summary.md"])
    md = (tmp_path / "rep" / "sweep_summary.md").read_text()
    assert "6 points, 4 ok, 2 failed" in md and "theta index 7 out of range" in md


@pytest.fixture(scope="module")
def workloads(tmp_path_factory):
    """DiTango ring workloads for 2 and 4 devices (small 256x128x5 video, 12 steps) and a 3-step DDiT one."""
    from algo.workloads import ddit, ditango
    from algo.workloads.format import save_workload

    d = tmp_path_factory.mktemp("workloads")
    for p in (2, 4):
        save_workload(ditango.generate_ditango("wan2.1-t2v-1.3b", "256x128x5", devices=p, num_inference_steps=12),
                      d / f"dt-{p}.npz")
    save_workload(ddit.generate_ddit("wan2.1-t2v-1.3b", "256x128x5", 3, schedule=[1, 2, 1]), d / "ddit.npz")
    return d


def _serial_workload(path, config, devices=None, reuse=None, seed=0):
    """`kaleido simulate W.npz` run serially here: the expected values of a workload point."""
    from algo.workloads.format import load_workload
    from algo.workloads.synth import SynthField
    from sim.workload.device import A100Device, KaleidoDevice
    from sim.workload.simulate import simulate_workload

    wl = load_workload(path)
    field = None if reuse is None else SynthField(*(float(v) for v in reuse.split(",")))
    dev = A100Device(None) if config == "a100" else KaleidoDevice(load_config(config), field, seed, wl.b_msb)
    return simulate_workload(wl, dev, devices)


def test_workload_and_device_count_axes(workloads, cluster, tmp_path):
    """devices x config over DiTango files named per count, and a DDiT workload with synthetic reuse as
    listed points: one row per point, equal to the serial workload run; comm sums over the steps."""
    text = ('workload = "dt-{devices}.npz"\n[axes]\ndevices = [2, 4]\nconfig = ["kaleido-16nm-128x128", "a100"]\n'
            '[[points]]\nworkload = "ddit.npz"\nreuse = "0.5,0.2"\n'
            '[[points]]\nworkload = "ddit.npz"\n')
    sw = load_sweep(_sweep_file(workloads, text, "wl.toml"))
    assert [pt.kind for pt in sw.points] == ["workload"] * 6
    out = run_sweep(sw, tmp_path, scheduler=cluster)
    assert out.failed == []
    rows = read_table(tmp_path / "results.parquet")
    assert "cycles" not in rows[0] and "total_time_us" in rows[0]
    assert [(r["devices"], r["config"]) for r in rows[:4]] == [(2, "kaleido-16nm-128x128"), (2, "a100"),
                                                                (4, "kaleido-16nm-128x128"), (4, "a100")]
    for r in rows[:4]:
        want = _serial_workload(workloads / f"dt-{r['devices']}.npz", r["config"], r["devices"])
        assert (r["total_time_us"], r["speedup"], r["reference_total_time_us"]) == (
            want["total_time_us"], want["speedup"], want["reference_total_time_us"])
        assert r["comm_us"] == sum(s["comm_us"] for s in want["per_step"]) > 0
        assert r["exposed_comm_us"] == sum(s["exposed_comm_us"] for s in want["per_step"])
    reuse, dense = rows[4], rows[5]
    want = _serial_workload(workloads / "ddit.npz", "kaleido-16nm-128x128", reuse="0.5,0.2")
    assert (reuse["total_time_us"], reuse["reuse_speedup"]) == (want["total_time_us"], want["reuse_speedup"])
    assert reuse["reuse_speedup"] > 1.0 and dense["reuse_speedup"] == 1.0  # no --reuse: dense, no claim
    from sim.sweep.figures import write_sweep_report

    files = write_sweep_report(tmp_path / "results.parquet", tmp_path / "report")
    assert sorted(f.name for f in files) == ["sweep_speedup_vs_axes.pdf", "sweep_speedup_vs_axes.png",
                                             "sweep_summary.md"]
    summary = (tmp_path / "report" / "sweep_summary.md").read_text()
    assert "## Workload points" in summary and summary.count("\n| ") == 7  # header + 6 points


@pytest.mark.parametrize("text, needles", [
    ('workload = "dt-{devices}.npz"\n[axes]\ndevices = [2, 3]\n', ("workload", "not found")),
    ('workload = "dt-2.npz"\n[axes]\ndevices = [4]\n', ("devices", "generated for 2 device(s)")),
    ('workload = "dt-{devices}.npz"\n[axes]\nconfig = ["tiny-8x8"]\n', ("workload", "sets no devices")),
    ('workload = "dt-2.npz"\n[axes]\ntheta_index = [0]\n', ("theta_index", "trace points only")),
    ('workload = "dt-2.npz"\n[axes]\nconfig = ["a100"]\nreuse = ["0.5,0.2"]\n', ("reuse", "A100")),
    ('workload = "ddit.npz"\n[axes]\nreuse = ["0.9,0.2"]\n', ("reuse", "<= 1")),
    ('workload = "ddit.npz"\ntrace = "x.npz"\n[axes]\nseed = [0]\n', ("workload", "both")),
])
def test_bad_workload_sweep_names_the_key(workloads, tmp_path, text, needles):
    sw = _sweep_file(workloads, text, "bad-wl.toml")
    with pytest.raises(SweepError) as err:
        load_sweep(sw)
    for n in needles:
        assert n in str(err.value), str(err.value)


def test_upper_bound_points_are_marked_and_kept_off_the_front(tmp_path):
    """D70 in sweeps: a point whose config lacks a fused score op's cross-frame state gets ``upper_bound_ops``
    > 0 (its figures are an upper bound) and the report leaves it off the Pareto front even where it would
    dominate, listing it apart."""
    from algo.trace.writer import save_trace
    from sim.sweep.figures import write_sweep_report
    from sim.sweep.table import write_table
    from sim.sweep.tasks import RESULT_COLUMNS, run_point
    from tests.test_attention import _cfg, _pair

    save_trace(_pair(), tmp_path / "pair.npz")
    desc = {"trace": str(tmp_path / "pair.npz"), "theta_index": 0, "tech": None, "dispatcher": True}
    narrow = run_point(desc | {"config": _cfg().model_dump(mode="json")})  # 16 keys = 2 column blocks of 8
    wide = run_point(desc | {"config": _cfg().model_copy(update={"array_cols": 16}).model_dump(mode="json")})
    assert narrow["status"] == wide["status"] == "ok"
    assert narrow["result"]["upper_bound_ops"] == 1 and wide["result"]["upper_bound_ops"] == 0
    base = dict.fromkeys(RESULT_COLUMNS, 0.0)
    rows = [{"point": 0, "key": "a", "cfg": "exact", "status": "ok", "error": ""} | base |
            {"total_speedup": 2.0, "energy_pj": 2e6, "area_mm2": 2.0, "upper_bound_ops": 0},
            {"point": 1, "key": "b", "cfg": "bound", "status": "ok", "error": ""} | base |
            {"total_speedup": 3.0, "energy_pj": 1e6, "area_mm2": 1.0, "upper_bound_ops": 1}]  # dominates point 0
    cols = ["point", "key", "cfg", "status", "error", *RESULT_COLUMNS]
    write_table(tmp_path / "t", cols, rows)
    write_sweep_report(tmp_path / "t" / "results.parquet", tmp_path / "rep")
    md = (tmp_path / "rep" / "sweep_summary.md").read_text()
    pareto = md.split("## Pareto points")[1].split("## Upper bounds")[0]
    assert "| 0 | exact |" in pareto and "| 1 |" not in pareto
    assert "- point 1 (cfg=bound): 1 op(s), speedup 3.000" in md.split("## Upper bounds")[1]


def test_sweep_notes_keys_an_organisation_does_not_build(traces):
    """A key column that varies over points whose organisation does not build that buffer (hw.config.UNBUILT_KEYS)
    gets a note naming it and those organisations; the area model charges exactly those buffers 0 mm^2."""
    from hw.config import ORGANISATIONS, UNBUILT_KEYS, load_config, with_organisation
    from sim.cost.area import area_breakdown
    from sim.sweep.spec import unbuilt_notes

    sw = load_sweep(_sweep_file(traces, 'trace = "a.npz"\n[axes]\nstate_sram_kib = [0, 14336]\n'
                                'organisation = ["delta", "compact", "lockstep"]\n'
                                '[fixed]\nconfig = "kaleido-16nm-128x128-balanced"\n', "unbuilt.toml"))
    notes = unbuilt_notes(sw)
    assert notes == ["state_sram_kib varies, but 4 of 6 points run an organisation that does not build that buffer "
                     "(compact, lockstep): their results repeat whatever its value"]
    base = load_config("kaleido-16nm-128x128-balanced")
    for org in ORGANISATIONS:
        b = area_breakdown(with_organisation(base, org))["breakdown"]
        for key in ("partial_sram_kib", "psum_sram_kib", "state_sram_kib", "diff_sram_kib", "wstage_sram_kib"):
            unbuilt = key in UNBUILT_KEYS[org]
            assert (b["sram_" + key.removesuffix("_sram_kib")] == 0) == unbuilt, (org, key)
