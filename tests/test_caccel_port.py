"""`sim.timing.compact_accel.port_run`, the compact controller's weight-port rule compiled (docs/decisions.md D117),
against `port_schedule` (the Python rule the RTL is checked against cycle for cycle, tests/test_rtl_caccel.py) on
seeded random ops; and the cycle model's per-op count (`sim.engines.model._compact_timing`'s ``port_weights``)
against `port_schedule` on the op's band-tiles in issue order."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hw.config import load_config, with_organisation
from sim.timing.compact import band_rows
from sim.timing.compact_accel import gather_rounds, port_fields, port_run, port_schedule, tile_widths
from sim.timing.delta_accel import queue_done
from tests.test_rtl_compact import compact_cfg

#: Shapes (rows, cols, bands, ports): the balanced preset's B / d = 2 on a small array, one port per band, two
#: ports per band, and eight bands.
SHAPES = {"8x8-B2-d2": (8, 8, 2, 2), "8x8-B4-d2": (8, 8, 4, 2), "8x8-B2-d4": (8, 8, 2, 4), "16x4-B8-d4": (16, 4, 8, 4)}


def _random_op(rng, cfg, n_tiles: int):
    """A seeded op: groups of 1-69 channels, band-tiles of random groups (some PAIRED: half the slots), random valid
    rows and tokens, repeated for 1-2 column blocks in compact's issue order (column block outer)."""
    G = int(rng.integers(1, 6))  # noqa: N806
    widths = rng.integers(1, 70, G)
    bounds = np.r_[0, np.cumsum(widths)]
    groups = [(int(bounds[g]), int(bounds[g + 1]), "f") for g in range(G)]
    grp = rng.integers(0, G, n_tiles)
    brows = band_rows(cfg)
    tiles, s_seq, rows = [], [], []
    for cb in range(int(rng.integers(1, 3))):
        for g in grp:
            v, w = int(rng.integers(1, brows + 1)), int(widths[g])
            half = w > 1 and rng.random() < 0.3
            s_seq.append((w + 1) // 2 if half else w)
            rows.append(v)
            tiles.append(SimpleNamespace(group=int(g), cb=cb, tokens=rng.choice(4 * cfg.array_rows, v, replace=False)))
    return SimpleNamespace(s_seq=np.array(s_seq), rows=np.array(rows), tiles=tiles), groups


def _queue(rng, T):  # noqa: N803
    """A seeded queues' ``(step, reps, steps)`` (`sim.timing.delta_accel.queue_steps`' form) handing out T
    descriptors: emissions of 1-3 band-tiles on increasing steps 1-4 apart."""
    reps = []
    while sum(reps) < T:
        reps.append(min(int(rng.integers(1, 4)), T - sum(reps)))
    step = np.cumsum(rng.integers(1, 5, len(reps)))
    return step.astype(np.int64), np.array(reps, dtype=np.int64), int(step[-1]) + int(rng.integers(1, 6))


def _both(op, groups, cfg, entries, lanes, queue=None, barrier="off", seg=None):
    paired, saddr = port_fields(op, groups, cfg)
    rounds = gather_rounds([t.tokens for t in op.tiles], band_rows(cfg))
    got = port_run(op.s_seq, op.rows, tile_widths(op, groups), rounds, paired, saddr, cfg, entries, lanes, queue,
                   barrier, seg)
    return got, port_schedule(op, groups, cfg, entries, lanes, queue, barrier, seg)


@pytest.mark.parametrize("shape", list(SHAPES), ids=list(SHAPES))
def test_port_run_equals_port_schedule(shape):
    cfg = compact_cfg(*SHAPES[shape])
    rng = np.random.default_rng(17)
    for trial in range(40):
        op, groups = _random_op(rng, cfg, int(rng.integers(1, 24)))
        entries, lanes = int(rng.choice([1, 2, 2 * cfg.compact_bands])), int(rng.choice([2, 8, 32]))
        queue = _queue(rng, len(op.tiles)) if trial % 2 else None
        # the segment barrier (not built; D117 measures it) at the op's start or at every segment (random cuts; not
        # with the queues: the rule can wait forever there, D117)
        barrier = ("off", "first", "every" if queue is None else "first")[trial % 3]
        entries = 2 * cfg.compact_bands if barrier != "off" else entries  # B staged at once, or it waits forever
        seg = (rng.random(len(op.tiles)) < 0.2).astype(np.int64)
        seg[0] = 1
        got, want = _both(op, groups, cfg, entries, lanes, queue, barrier, seg)
        for key in ("band", "first", "last", "gather"):
            assert np.array_equal(got[key], want[key]), (trial, key)
        for key in ("late", "reads", "weights", "deferred"):
            assert got[key] == want[key], (trial, key)
        if queue is not None:
            assert got["queue_done"] == queue_done(want["gather"], queue)


def test_port_run_on_the_balanced_preset():
    """Balanced as compact (8 bands on 4 ports, 16 rows a band): equal to `port_schedule` on seeded ops; four
    band-tiles of one 64-channel group (4 words of 16 weights each) read each word at least once and at most once
    per band-tile: 64 to 256 weights per column."""
    cfg = with_organisation(load_config("kaleido-16nm-128x128-balanced"), "compact")
    rng = np.random.default_rng(3)
    for trial in range(20):
        op, groups = _random_op(rng, cfg, int(rng.integers(1, 40)))
        got, want = _both(op, groups, cfg, 16, 32)
        for key in ("first", "last", "reads", "weights", "deferred", "late"):
            assert np.array_equal(got[key], want[key]), (trial, key)
    tiles = [SimpleNamespace(group=0, cb=0, tokens=np.arange(16)) for _ in range(4)]
    op = SimpleNamespace(s_seq=np.full(4, 64), rows=np.full(4, 16), tiles=tiles)
    got, want = _both(op, [(0, 64, "f")], cfg, 16, 32)
    assert got["weights"] == want["weights"]
    assert 64 <= got["weights"] <= 4 * 64


def test_a_late_emission_is_not_cut_as_a_deadlock():
    """`sim.timing.delta_accel.stage_limit`: the cut-off counts the queues' steps. One band-tile (4 slots of 4
    channels, 2 rows) emitted at step 100,000 of 100,001 is gathered the cycle after its emission, 100,001 (the
    queues emit step i at cycle i when nothing waits); the cut-off before the queue term, 50 x (4 + (B + 8 + 1)) +
    1,000 = 1,750 cycles on B = 2, refused it as a deadlock."""
    cfg = compact_cfg(8, 8, 2, 2)
    one = [np.array([v], dtype=np.int64) for v in (4, 2, 4, 1, 0, 0)]  # s_seq, rows, widths, rounds, paired, saddr
    queue = (np.array([100_000], dtype=np.int64), np.array([1], dtype=np.int64), 100_001)
    got = port_run(*one, cfg, 4, 8, queue)
    assert got["gather"].tolist() == [100_001] and got["last"][0] > 100_001
    from sim.timing.delta_accel import stage_schedule

    zero = np.zeros(1, dtype=np.int64)
    want = stage_schedule(*one[:5], zero, zero, zero, one[5], cfg, 4, 8, early=True, defer="behind", queue=queue,
                          stage=False)
    assert want["gather"].tolist() == [100_001] and want["last"].tolist() == got["last"].tolist()
