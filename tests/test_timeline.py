"""`kaleido simulate --timeline` (sim/report/timeline.py): a trace-event file that parses, whose array slices add up
to the result's cycles (op slices) and total cycles (with the stall slices), for both designs; bounded by merging."""

from __future__ import annotations

import json

from sim.engines.model import simulate_trace
from sim.report.timeline import TRACKS, timeline_events
from tests.test_attention import _cfg, _pair
from tests.test_cli import assert_one_line_error, kaleido, small_trace


def _array_sums(tl: dict, pid: int) -> tuple[int, int]:
    ev = [e for e in tl["traceEvents"] if e["ph"] == "X" and e["pid"] == pid and e["tid"] == TRACKS["array"]]
    return sum(e["args"]["cycles"] for e in ev if e["cat"] == "op"), sum(e["args"]["cycles"] for e in ev)


def _check(tl: dict, res: dict) -> None:
    assert _array_sums(tl, 1) == (res["cycles"], res["total_cycles"])
    assert _array_sums(tl, 2) == (res["dense_cycles"], res["dense_total_cycles"])
    # slices on one track never overlap and end where the last op ends
    for pid, total in ((1, res["total_cycles"]), (2, res["dense_total_cycles"])):
        ev = sorted((e for e in tl["traceEvents"] if e["ph"] == "X" and e["pid"] == pid and e["tid"] == 1),
                    key=lambda e: e["ts"])
        for a, b in zip(ev, ev[1:], strict=False):
            assert a["ts"] + a["dur"] <= b["ts"] + 1e-6
        assert abs(ev[-1]["ts"] + ev[-1]["dur"] - total / tl["otherData"]["clock_mhz"]) < 1e-6


def test_fused_pair_timeline_adds_up():
    res = simulate_trace(_pair(), _cfg())
    tl = json.loads(json.dumps(timeline_events(res)))
    _check(tl, res)
    names = {e["args"]["name"] for e in tl["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names == set(TRACKS)
    # stalls of the fused pv (vector: tail + first P column per tile) are drawn as their own slices
    assert any(e["name"] == "stall: vector" for e in tl["traceEvents"] if e["ph"] == "X")


def test_cli_timeline_and_bound(tmp_path):
    tr = small_trace(tmp_path / "t.npz")
    out, js = tmp_path / "tl.json", tmp_path / "r.json"
    r = kaleido("simulate", str(tr), "-c", "tiny-8x8", "--json", str(js), "--timeline", str(out))
    assert r.returncode == 0, r.stderr
    res, tl = json.loads(js.read_text()), json.loads(out.read_text())
    assert tl["otherData"]["granularity"] == "op"
    _check(tl, res)
    merged = timeline_events(res, max_slices=1)  # 2 ops of one (step, block): one slice per track
    assert merged["otherData"]["granularity"] == "block"
    assert sum(1 for e in merged["traceEvents"] if e["ph"] == "X" and e["pid"] == 1 and e.get("cat") == "op") == 1
    _check(merged, res)


def test_cli_timeline_missing_folder(tmp_path):
    tr = small_trace(tmp_path / "t.npz")
    out = tmp_path / "nope" / "tl.json"
    assert_one_line_error(kaleido("simulate", str(tr), "-c", "tiny-8x8", "--timeline", str(out)), "does not exist")
    assert not out.parent.exists()
