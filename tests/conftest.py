"""Fixtures shared by test modules."""

from __future__ import annotations

import pytest

from algo.trace import OpRecord


@pytest.fixture
def row_log(monkeypatch):
    """Every ``p_rows`` call's number of rows and heads, as (rows, heads) pairs."""
    calls = []
    real = OpRecord.p_rows

    def logged(self, rows=None, heads=None):
        out = real(self, rows, heads)
        calls.append((out.shape[1], out.shape[0]))
        return out
    monkeypatch.setattr(OpRecord, "p_rows", logged)
    return calls
