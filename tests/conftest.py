"""Fixtures shared by test modules."""

from __future__ import annotations

import pytest

from algo.trace import OpRecord

#: Test files that run longest, longest first (`pytest --durations=40` on the whole suite, 2026-12-05: each over
#: about 60 s of its slowest tests). `make test`'s workers (pytest-xdist, ``--dist loadfile``) take files in collection
#: order, so starting these first keeps one worker from ending the run alone on a late heavy file: in the fresh-clone
#: run before this order the suite used 27.5 CPU-minutes in 15.4 minutes on 2 cores. Order only: every test still runs.
HEAVY_FIRST = ("test_rtl_dcore_emit.py", "test_rtl_core_engine.py", "test_rtl_engine.py", "test_rtl_dcore.py",
               "test_rtl_dstage.py", "test_rtl_dcore_stage.py", "test_rtl_ccore.py", "test_rtl_band_regression.py",
               "test_rtl_waves.py")


def pytest_collection_modifyitems(session, config, items):
    """`HEAVY_FIRST`'s files first, in its order; every other file after them in its own order (a stable sort, so
    a file's tests stay together and in order)."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


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
