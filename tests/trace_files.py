"""Test helper: rewrite a saved trace file with edited metadata or arrays (to make bad traces)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def rewrite_trace(src: Path, dst: Path, meta_fn=None, arr_fn=None) -> Path:
    """Copy the ``.npz`` trace ``src`` to ``dst`` after ``meta_fn(meta)`` edits its JSON metadata
    (the uint8 ``meta`` array) and ``arr_fn(arrays)`` its arrays (name -> ndarray), both in place.

    Returns ``dst``. Writes with plain `numpy.savez` (no atomic write: test scratch files only).
    """
    with np.load(src) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(bytes(arrays["meta"]).decode())
    if meta_fn:
        meta_fn(meta)
    if arr_fn:
        arr_fn(arrays)
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(dst, **arrays)
    return dst


def set_array(key: str, fn):
    """An ``arr_fn`` for `rewrite_trace` that replaces array ``key`` by ``fn(array)``."""
    def arr_fn(a):
        a[key] = fn(a[key])
    return arr_fn


def with_nan(x: np.ndarray, at: int = 3) -> np.ndarray:
    """A copy of ``x`` with element ``at`` (flat index) set to NaN."""
    x = x.copy()
    x.flat[at] = np.nan
    return x
