"""Dask worker preload: import the simulator and load its numba caches when a worker starts.

`sim.sweep.engine.local_cluster` starts its workers with ``preload=["sim.sweep.warm"]``; a worker of a
real cluster takes it with ``dask worker tcp://HOST:8786 --preload sim.sweep.warm`` (README). Every
compiled function the cycle model, the action counts and the memory timing call is loaded from its
``cache=True`` file (or compiled, once, on a fresh checkout) by simulating one small decision op with
and without the dispatcher, so the first task a worker runs costs what every other one does and the
loading happens while the cluster starts, not inside a point.
"""

from __future__ import annotations


def warm() -> None:
    """Simulate one 2x4x4-token decision op on tiny-8x8 (results discarded)."""
    import numpy as np

    from algo.trace import Group, OpRecord, pack_decisions
    from hw.config import load_config
    from sim.cost.energy import EnergyModel
    from sim.engines.model import OP_MEMO, simulate_ops

    cfg = load_config("tiny-8x8")
    grid, groups = (2, 4, 4), [(0, 4, "f"), (4, 8, "w")]
    dec = np.zeros((32, 2), dtype=np.int8)
    dec[16:, 0] = 2
    dec[16:, 1] = 1
    dec[np.arange(32) % 4 == 0, 1] = 0  # w = 0: no neighbour along w
    op = OpRecord("qkv", 0, 0, None, None, [Group(*g) for g in groups], (4.0, 12.0), dims=(1, 32, 8, 8),
                  decisions=pack_decisions(dec)[None, None], thetas=((4.0, 12.0),))
    was = OP_MEMO.enabled
    OP_MEMO.enabled = False
    try:
        for dispatcher in (True, False):
            simulate_ops([op], grid, 4, cfg, EnergyModel(cfg), dispatcher=dispatcher)
    finally:
        OP_MEMO.enabled = was


def dask_setup(worker) -> None:  # noqa: ARG001 - Dask's preload hook signature
    """Dask's preload hook: `warm` once in the worker process."""
    warm()
