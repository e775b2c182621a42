"""Outputs get an ordinary file mode (0666 less the umask), not mkstemp's 0600."""

from __future__ import annotations

import os

from algo.fileio import atomic_write_json
from hw.config import load_config
from hw.rtl import emit


def test_outputs_have_ordinary_mode(tmp_path):
    old = os.umask(0o022)
    try:
        paths = [atomic_write_json(tmp_path / "r.json", {"a": 1}),
                 *emit(load_config("tiny-8x8"), tmp_path / "rtl", only=("kaleido_pe",))]
    finally:
        os.umask(old)
    assert len(paths) == 2
    for p in paths:
        assert p.stat().st_mode & 0o777 == 0o644, p
