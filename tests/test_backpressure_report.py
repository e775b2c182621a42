"""`sim.report.backpressure`: its per-op figures are the core detail the cycle model publishes (each delta op's
``core`` under ``combine_timing = "rtl"``, from one `issue_core` call an unstaged op (docs/decisions.md D137) or one
`stage_core` call a staged op (D129), on a small
synthetic field; bad arguments exit 2 with one line and print nothing."""

from __future__ import annotations

import json

import pytest

import sim.timing.delta_core as dcore
from sim.engines.model import OP_MEMO
from sim.report import backpressure
from sim.report.organisations import FIELD

SMALL = "64x64x5"  # tests/test_synth.py's small field: 5 frames of 32 x 32 positions


def test_report_reads_the_models_core_detail(tmp_path, monkeypatch, capsys):
    """Two variants (the built FIFO and banks, 8:8; neither rule, 0:0) on the balanced preset at 64x64x5, the op memo
    off: the core's timing functions are called once an op, each with ``detail=True``, and the report's per-op
    figures are those calls' results summed (done, held, frozen) or maxed (ahead, fifo_max) by op name, in the trace's
    op order (the spy's, not the report's reading). Without either rule nothing is held; with them some op is. With
    the op memo on, a rerun whose every op is a hit prints the same figures (the memo keeps each op's detail)."""
    from algo.trace import load_trace
    from algo.workloads.synth import SynthField, synth_trace

    calls: list[tuple[str, dict]] = []

    def spy(name, fn):
        def run(*a, **k):
            got = fn(*a, **k)
            calls.append((name, dict(got) if isinstance(got, dict) else {"plain": got, "detail": k.get("detail")}))
            return got
        return run

    for name, kind in (("held_done", "held"), ("ways_done", "ways"), ("issue_core", "issue"), ("stage_core", "stage")):
        monkeypatch.setattr(dcore, name, spy(kind, getattr(dcore, name)))
    monkeypatch.setattr(OP_MEMO, "enabled", False)
    assert backpressure.main(["--resolution", SMALL, "0.8", "8:8", "0:0"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = [json.loads(x) for x in out.splitlines()]
    assert [(r["fifo_per_port"], r["banks"]) for r in lines] == [(8, 8), (0, 0)]
    f = FIELD
    synth_trace(tmp_path / "s.npz", f["model"], SMALL, SynthField(0.8, f["partial"], (8, 8), f["persist"]),
                blocks=f["blocks"], steps=f["steps"], seed=f["seed"])
    names = [op.name for op in load_trace(tmp_path / "s.npz").ops]
    assert len(calls) == 2 * len(names)  # one call an op and variant, no second run
    assert all("plain" not in d for _, d in calls)  # every call returned the detail
    for v, row in enumerate(lines):
        mine = calls[v * len(names):(v + 1) * len(names)]
        # staged ops stage_core, unstaged ones issue_core (both variants; the back-pressure keys with 8:8 only)
        assert "stage" in {k for k, _ in mine} <= {"issue", "stage"}
        want: dict[str, dict] = {}
        for name, (_how, d) in zip(names, mine, strict=True):
            p = want.setdefault(name, {"done": 0, "held": 0, "frozen": 0, "ahead": 0, "fifo_max": 0})
            bp = v == 0
            for k in ("done", "held", "frozen"):
                p[k] += d.get(k, 0) if bp or k == "done" else 0
            for k in ("ahead", "fifo_max"):
                p[k] = max(p[k], d.get(k, 0) if bp or k == "ahead" else 0)
        assert row["per"] == want
    assert all(p["held"] == p["frozen"] == p["fifo_max"] == 0 for p in lines[1]["per"].values())
    assert any(p["held"] + p["frozen"] > 0 for p in lines[0]["per"].values())
    assert lines[0]["total"] <= lines[1]["total"]  # holding the array or the issue never speeds it up
    # the op memo keeps the detail: a second run of the same field, every op a hit, prints the same line
    monkeypatch.setattr(OP_MEMO, "enabled", True)
    OP_MEMO.clear()
    try:
        for _ in range(2):
            assert backpressure.main(["--resolution", SMALL, "0.8", "8:8"]) == 0
            assert [json.loads(x) for x in capsys.readouterr().out.splitlines()] == lines[:1]
        assert OP_MEMO.hits == len(names)
    finally:
        OP_MEMO.clear()


def test_per_op_needs_the_core_detail():
    """A result whose op has no ``core`` (another organisation or the model's combine timing) is refused by name."""
    with pytest.raises(ValueError, match="op qk .block 0, step 0. has no core detail"):
        backpressure.per_op({"per_op": [{"name": "qk", "block": 0, "step": 0}]})


@pytest.mark.parametrize("argv", [
    [], ["0.8"], ["x", "8:8"], ["0.8", "8"], ["0.8", "8:8:8"], ["0.8", "-1:8"], ["0.8", "a:8"], ["--preset"],
    ["--resolution", SMALL], ["--preset", "no-such-preset", "0.8", "8:8"], ["1.5", "8:8"],
    ["--resolution", "bogus", "0.8", "8:8"]])
def test_bad_arguments_exit_2_with_one_line(argv, capsys):
    assert backpressure.main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
