"""The scheduler (position clustering) and the no-dispatcher mode, by hand."""

from __future__ import annotations

import numpy as np

from algo.golden import COMPUTE, PARTIAL, REUSE
from sim.cycle_model import reuse_slot_sequence
from sim.dispatch import reuse_tiles, schedule_positions


def test_schedule_is_a_permutation_within_windows():
    rng = np.random.default_rng(0)
    grid = (3, 5, 7)  # 35 positions
    dec = rng.integers(0, 3, size=(105, 4)).astype(np.int8)
    dec[:35] = COMPUTE
    order = schedule_positions(dec, grid, rows=4, window_tiles=2)  # windows of 8 positions
    assert sorted(order.tolist()) == list(range(35))
    for w0 in range(0, 35, 8):
        assert sorted(order[w0:w0 + 8].tolist()) == list(range(w0, min(w0 + 8, 35)))


def test_clustering_by_hand():
    """Grid (2, 1, 4): 4 positions, R = 2, one group of 3 channels (K = 3), N <= C.

    Frame 1 decisions per position: p0 REUSE, p1 COMPUTE, p2 REUSE, p3 COMPUTE.
    Raster tiles {p0, p1}, {p2, p3}: each has a COMPUTE row -> 3 slots each, frame 1 -> [3, 3].
    Scheduled: patterns sort COMPUTE (0) before REUSE (2): order p1, p3, p0, p2 -> tiles {p1, p3}
    (3 slots) and {p0, p2} (every row REUSEs: 0 slots).
    Frame 0 always computes: 3 slots per tile. Issue order: position block, then frame:
    raster [3, 3, 3, 3], scheduled [3, 3, 3, 0]; without the matcher PARTIAL would not pair either.
    """
    dec = np.array([[COMPUTE]] * 4 + [[REUSE], [COMPUTE], [REUSE], [COMPUTE]], dtype=np.int8)
    groups = [(0, 3, "f")]
    assert schedule_positions(dec, (2, 1, 4), rows=2).tolist() == [1, 3, 0, 2]
    raster = reuse_slot_sequence(dec, (2, 1, 4), groups, 2, rows=2, cols=8, b_msb=4, dispatcher=False)
    sched = reuse_slot_sequence(dec, (2, 1, 4), groups, 2, rows=2, cols=8, b_msb=4, dispatcher=True)
    assert raster.tolist() == [3, 3, 3, 3]
    assert sched.tolist() == [3, 3, 3, 0]
    tiles = reuse_tiles((2, 1, 4), 2, 2, 8, schedule_positions(dec, (2, 1, 4), rows=2))
    assert [t.tokens.tolist() for t in tiles] == [[1, 3], [5, 7], [0, 2], [4, 6]]


def test_no_dispatcher_does_not_pair():
    """Two groups of 2 channels, both PARTIAL in every row of frame 1: the matcher pairs them into
    2 slots; without the dispatcher each channel takes a slot: 4."""
    dec = np.array([[COMPUTE, COMPUTE]] * 2 + [[PARTIAL, PARTIAL]] * 2, dtype=np.int8)
    groups = [(0, 2, "f"), (2, 4, "f")]
    with_d = reuse_slot_sequence(dec, (2, 1, 2), groups, 4, rows=2, cols=4, b_msb=4, dispatcher=True)
    without = reuse_slot_sequence(dec, (2, 1, 2), groups, 4, rows=2, cols=4, b_msb=4, dispatcher=False)
    assert with_d.tolist() == [4, 2]
    assert without.tolist() == [4, 4]
