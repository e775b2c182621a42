"""Threshold schedules (step-sensitive thresholds) and trace decision statistics."""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.stats import DELTA_EDGES, trace_statistics
from algo.reuse.thresholds import DEFAULT_THETA, ThetaSchedule, parse_theta, resolve_theta
from algo.trace import OP_TYPES, Group, OpRecord, Trace


def test_parse_schedule_last_rule_wins():
    s = parse_theta("4,12; ffn1=2,8; qk@47-49=8,24; qk@49=9,30", OP_TYPES)
    assert isinstance(s, ThetaSchedule)
    assert s(0, "qkv") == (4.0, 12.0)
    assert s(0, "ffn1") == (2.0, 8.0)
    assert s(46, "qk") == (4.0, 12.0)
    assert s(47, "qk") == (8.0, 24.0)
    assert s(49, "qk") == (9.0, 30.0)
    assert parse_theta("ffn2=1,1")(3, "qkv") == DEFAULT_THETA


@pytest.mark.parametrize("text, match", [
    ("4", "cannot parse"), ("foo=1,2", "unknown op type 'foo'"), ("3,2", "theta1 <= theta2"),
    ("qk@9-3=1,2", "empty"), ("1,nan", "theta1 <= theta2"), ("-1,2", "theta1 <= theta2"),
])
def test_parse_errors(text, match):
    with pytest.raises(ValueError, match=match):
        parse_theta(text, OP_TYPES)


def test_resolve_forms():
    assert resolve_theta((1, 2), 5, "qk") == (1.0, 2.0)
    assert resolve_theta({"qk": (1, 3), "default": (0, 1)}, 5, "qk") == (1.0, 3.0)
    assert resolve_theta({"qk": (1, 3), "default": (0, 1)}, 5, "pv") == (0.0, 1.0)
    assert resolve_theta(lambda step, op: (step / 10, step / 5), 20, "pv") == (2.0, 4.0)
    with pytest.raises(ValueError, match="for pv at step 3"):
        resolve_theta(lambda step, op: (5, 1), 3, "pv")


def _trace():
    """Grid (3, 1, 1): three frames of one position; one op, K = 3 in two groups:
    g0 = channel 0 (kind 'h', axis f), g1 = channels 1..2 (kind 'block', axis f). theta (1, 3):
    bounds g0: b1 = 1, b2 = 3; g1: b1 = 2, b2 = 6.

    X rows t0 = [0, 10, 10], t1 = [0, 12, 10], t2 = [5, 12, 10].
    g0: t1 SAD |0-0| = 0 < 1 -> REUSE (Δ = 0); t2 SAD |5-0| = 5 >= 3 -> COMPUTE (Δ = 5).
    g1: t1 SAD 2 + 0 = 2, not < 2, < 6 -> PARTIAL (Δ = 1); X_eff(t1) = msb(10) + lsb(12) = 0 + 12 = 12, 10
        t2 SAD vs [12, 10] = 0 -> REUSE (Δ = 0).
    Elements: g0 (width 1): C 2 (t0, t2), R 1; g1 (width 2): C 2 (t0), P 2, R 2. Total 9 elements:
    C 4, P 2, R 3.
    """
    X = np.array([[[0, 10, 10], [0, 12, 10], [5, 12, 10]]], dtype=np.int8)  # noqa: N806
    W = np.ones((1, 3, 2), dtype=np.int8)  # noqa: N806
    op = OpRecord("ffn1", 0, 7, X, W, [Group(0, 1, "f", "h"), Group(1, 3, "f", "block")], (1.0, 3.0))
    return Trace(grid=(3, 1, 1), ops=[op], model="synthetic", size="test", weights="none")


def test_statistics_by_hand():
    st = trace_statistics(_trace())
    assert st["total"] == pytest.approx({"compute": 4 / 9, "partial": 2 / 9, "reuse": 3 / 9})
    assert st["by_group_kind"]["h"] == pytest.approx({"compute": 2 / 3, "partial": 0, "reuse": 1 / 3})
    assert st["by_group_kind"]["block"] == pytest.approx({"compute": 2 / 6, "partial": 2 / 6, "reuse": 2 / 6})
    assert set(st["by_step"]) == {"7"} and set(st["by_block"]) == {"0"} and set(st["by_op_type"]) == {"ffn1"}
    h = st["delta_histogram"]
    counts_h = np.array(h["counts"]["h"])
    counts_b = np.array(h["counts"]["block"])
    # g0: Δ = 0 and 5 -> bins [0, 0.5) and [5, 5.5); g1: Δ = 1 and 0 -> [1, 1.5) and [0, 0.5).
    assert counts_h.sum() == 2 and counts_h[0] == 1 and counts_h[int(5 / 0.5)] == 1
    assert counts_b.sum() == 2 and counts_b[0] == 1 and counts_b[int(1 / 0.5)] == 1
    assert len(h["edges"]) == len(DELTA_EDGES) and h["edges"][-1] == "inf"


def test_capture_applies_step_sensitive_thresholds(tmp_path):
    from algo.capture import capture

    sched = parse_theta("4,12; ffn1@49=1,2", OP_TYPES)
    tr = capture(steps=(47, 49), blocks=[0], theta=sched)
    got = {(op.name, op.step): op.theta for op in tr.ops}
    assert got[("ffn1", 49)] == (1.0, 2.0)
    assert got[("ffn1", 47)] == (4.0, 12.0)
    assert got[("qk", 49)] == (4.0, 12.0)
