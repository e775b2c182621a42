"""Opt-in pytest plugin: each test's CPU seconds, its own process's and its reaped children's (Verilator, g++, CLI
subprocesses), and its wall seconds, one tab-separated line a test appended to ``$KALEIDO_CPU_PROFILE``.

``PYTHONPATH=$PWD .venv/bin/python -m pytest -p tests.cpu_profile ...`` with ``KALEIDO_CPU_PROFILE=/tmp/cpu.tsv``
(docs/decisions.md D135): on the shared machine junit's per-test times are wall seconds that grow with the other
users' load (4.8x in the profile of D135), CPU seconds much less. Columns: node id, own CPU s, children's CPU s, wall
s, worker pid. Setup and teardown count with the test that ran them (a module fixture with the module's first test).
"""

from __future__ import annotations

import os
import resource
import time

import pytest


def _cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    out = os.environ.get("KALEIDO_CPU_PROFILE")
    if not out:
        yield
        return
    (own0, kids0), wall0 = _cpu(), time.perf_counter()
    yield
    (own1, kids1), wall1 = _cpu(), time.perf_counter()
    with open(out, "a") as fh:
        fh.write(f"{item.nodeid}\t{own1 - own0:.3f}\t{kids1 - kids0:.3f}\t{wall1 - wall0:.3f}\t{os.getpid()}\n")
