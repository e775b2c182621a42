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


@pytest.fixture(scope="session")
def captured_block():
    """A captured trace, made once per session: tiny Wan2.1 (seeded weights), step 49, block 0, every op of the
    block (`algo.capture.capture`, seed 0); tests/test_rtl_engine.py and tests/test_rtl_core_engine.py run it
    through the compiled RTL. Read-only: a test that changes it must copy it."""
    from algo.capture import capture

    return capture(steps=(49,), seed=0, blocks=(0,))
