"""Full-model derivation (algo/trace/derive.py): the nearest-(step, block) rule, the streamed trace, the CLI."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from algo.capture import capture
from algo.models import CaptureError
from algo.trace import load_trace
from algo.trace.derive import derive_trace, parse_index_set, source_map


def test_rule_by_hand():
    sig = {0: 1.0, 10: 0.9, 20: 0.5, 30: 0.3, 49: 0.0}
    kinds = ["wan"] * 9
    m = source_map([10, 20, 30], [2, 3, 7], [0, 49], [0, 4, 8], sig, kinds)
    assert m[(10, 2)] == (0, 0)  # sigma 0.9 nearer 1.0; block 2 ties between 0 and 4 -> lower
    assert m[(20, 3)] == (49, 4)  # sigma 0.5 ties between 1.0 and 0.0 -> later step
    assert m[(30, 7)] == (49, 8)
    # HunyuanVideo: a block of the same stream kind is preferred
    hy = source_map([0], [2], [0], [0, 3], {0: 1.0}, ["dual", "dual", "dual", "single"])
    assert hy[(0, 2)] == (0, 0)


def test_index_sets():
    assert parse_index_set("all", 3, "x") == [0, 1, 2]
    assert parse_index_set("2,0,2", 3, "x") == [0, 2]
    assert parse_index_set("", 3, "x") is None
    with pytest.raises(CaptureError, match="indices in 0..2"):
        parse_index_set("3", 3, "x")


@pytest.fixture(scope="module")
def captured():
    return capture(steps=(47, 49), blocks=(0, 1), thetas="2,6;4,12", ops="qkv,qk,ffn2", seed=0)


def test_derived_trace_copies_nearest_captured(captured, tmp_path):
    sub = [o for o in captured.ops if o.step == 49 and o.block == 0]
    import dataclasses

    part = dataclasses.replace(captured, ops=sub)
    out = tmp_path / "derived.npz"
    der = derive_trace(out, from_blocks=[0], from_steps=[49], thetas="2,6;4,12", derive_steps=[0, 47, 49],
                       captured=part)
    back = load_trace(out)
    assert back.kind == "decisions" and len(back.ops) == 3 * 2 * 3  # steps x blocks x ops
    src = {o.name: o for o in sub}
    for o in back.ops:
        np.testing.assert_array_equal(o.decisions, src[o.name].decisions)
        assert o.derived_from == (None if (o.step, o.block) == (49, 0) else (49, 0))
        assert o.x_scale == src[o.name].x_scale
    assert [m["index"] for m in back.steps] == [0, 47, 49]
    cap_steps = {m["index"]: m for m in captured.steps}  # the schedule as the capture fed the model
    assert back.steps[1] == cap_steps[47] and back.steps[2] == cap_steps[49]
    assert len(der.ops) == len(back.ops)


def test_cli_derive(tmp_path):
    from sim.cli import app

    out = tmp_path / "d.npz"
    r = CliRunner().invoke(app, ["capture", "-o", str(out), "--decisions-only", "--thetas", "4,12", "--blocks", "0",
                                 "--steps", "49", "--ops", "qkv", "--derive-blocks", "all", "--derive-steps", "0,49"])
    assert r.exit_code == 0, r.output
    tr = load_trace(out)
    assert [(o.step, o.block, o.derived_from) for o in tr.ops] == [(0, 0, (49, 0)), (0, 1, (49, 0)),
                                                                   (49, 0, None), (49, 1, (49, 0))]
    r = CliRunner().invoke(app, ["capture", "-o", str(tmp_path / "e.npz"), "--derive-blocks", "all"])
    assert r.exit_code == 2 and "--decisions-only" in r.output
