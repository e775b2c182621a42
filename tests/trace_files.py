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


def decision_video(path: Path, steps: int = 2, blocks: int = 2, grid=(2, 4, 4), seed: int = 0) -> Path:
    """A small full-model-like decision trace: every (step, block) holds qkv, qk (a w-axis RoPE group and
    an f group, 2 heads), pv (2 heads) and ffn1, with two stored theta pairs and seeded random decisions
    (COMPUTE wherever a token has no neighbour along its group's axis)."""
    from algo.reuse.golden import block_groups
    from algo.trace import Group, OpRecord, Trace, pack_decisions, save_trace

    rng = np.random.default_rng(seed)
    F, H, W = grid  # noqa: N806
    M = F * H * W  # noqa: N806
    thetas = ((2.0, 6.0), (4.0, 12.0))
    shapes = (("qkv", 1, 32, 48, block_groups(32)), ("qk", 2, 8, M, [(0, 4, "w"), (4, 8, "f")]),
              ("pv", 2, M, 8, block_groups(M)), ("ffn1", 1, 32, 64, block_groups(32)))
    ops = []
    for s in range(steps):
        for b in range(blocks):
            for name, batch, K, N, groups in shapes:  # noqa: N806
                d = rng.choice(3, size=(len(thetas), batch, F, H, W, len(groups)), p=(0.4, 0.3, 0.3)).astype(np.int8)
                for gi, g in enumerate(groups):
                    if g[2] == "w":
                        d[..., 0, gi] = 0  # w = 0: no neighbour along w
                    else:
                        d[:, :, 0, ..., gi] = 0  # frame 0: no neighbour along f
                d = d.reshape(len(thetas), batch, M, len(groups))
                packed = np.stack([np.stack([pack_decisions(d[t, i]) for i in range(batch)]) for t in range(len(thetas))])
                ops.append(OpRecord(name, b, s, None, None, [Group(*g) for g in groups], thetas[0],
                                    dims=(batch, M, K, N), decisions=packed, thetas=thetas))
    save_trace(Trace(grid=grid, ops=ops, model="synthetic", size="test", weights="none (random decisions)"), path)
    return path
