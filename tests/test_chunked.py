"""Consumers of exact traces without stored P (format version 5) read P in query-row chunks only.

References: `algo.reuse.golden.decide` / `apply_decisions` on the whole P of the older format (P stored as
an array), and the simulator's results on that older file.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from algo.capture import capture_to_file
from algo.reuse.chunked import op_decisions, op_outputs
from algo.reuse.golden import apply_decisions, decide
from algo.trace import Group, load_trace, save_trace
from hw.config import load_config
from sim.engines.model import simulate_trace
from sim.engines.rtl import golden_checksums
from sim.sweep.video import simulate_trace_file

#: frames of 6x7 = 42 queries, 3 frames; the tiny model's default grid (4 frames of 8x8)
GRIDS = {"small": (3, 6, 7), "tiny": (4, 8, 8)}


@pytest.fixture(scope="module", params=sorted(GRIDS))
def files(request, tmp_path_factory):
    """(grid, new-format file, old-format file) of one capture (block 0, step 49, qk/pv/ffn1)."""
    d = tmp_path_factory.mktemp(f"chunked_{request.param}")
    grid = GRIDS[request.param]
    new = d / "new.npz"
    capture_to_file(out=new, steps=(49,), blocks=(0,), grid=grid, ops="qk,pv,ffn1", seed=0, theta=(4.0, 12.0))
    tr = load_trace(new)
    old = d / "old.npz"
    save_trace(dataclasses.replace(tr, ops=[dataclasses.replace(o, scores=None) for o in tr.ops]), old)
    return grid, new, old


def test_frame_decisions_and_outputs_equal_whole_p(files, row_log):
    grid, new, old = files
    hw = grid[1] * grid[2]
    pv_old = [o for o in load_trace(old).ops if o.name == "pv"][0]
    pv_new = [o for o in load_trace(new, derive_p=False).ops if o.name == "pv"][0]
    assert pv_new.X is None
    groups = [g.as_tuple() for g in pv_old.groups]
    seen_reuse = False
    for b in range(pv_old.batch):
        dec, _ = decide(pv_old.X[b], grid, groups, pv_old.theta, 4)
        seen_reuse |= bool((dec != 0).any())
        assert np.array_equal(op_decisions(pv_new, b, grid, pv_new.theta, 4), dec), b
        y = apply_decisions(pv_old.X[b], pv_old.W[b], grid, groups, dec, 4)
        blocks = list(op_outputs(pv_new, b, grid, pv_new.theta, 4))
        assert len(blocks) == grid[0] and np.array_equal(np.concatenate(blocks), y), b
    assert seen_reuse  # the check covers PARTIAL/REUSE rows, not only COMPUTE
    assert row_log and all(rows == hw and heads == 1 for rows, heads in row_log)  # one frame of one head


def test_groups_off_frames_fall_back_to_the_whole_head(files):
    """A pv op whose groups reuse along h (never captured, but legal in a file): P of one head at a time."""
    grid, new, old = files
    pv_old = [o for o in load_trace(old).ops if o.name == "pv"][0]
    pv_new = [o for o in load_trace(new, derive_p=False).ops if o.name == "pv"][0]
    k = pv_old.K
    groups = [Group(0, k // 2, "h"), Group(k // 2, k, "w")]
    a, b = dataclasses.replace(pv_old, groups=groups), dataclasses.replace(pv_new, groups=groups)
    gt = [g.as_tuple() for g in groups]
    for h in range(a.batch):
        dec = decide(a.X[h], grid, gt, a.theta, 4)[0]
        assert np.array_equal(op_decisions(b, h, grid, b.theta, 4), dec)
        assert np.array_equal(np.concatenate(list(op_outputs(b, h, grid, b.theta, 4))),
                              apply_decisions(a.X[h], a.W[h], grid, gt, dec, 4))


def test_simulate_and_checksums_equal_between_formats_without_whole_p(files, row_log):
    grid, new, old = files
    cfg = load_config("tiny-8x8")
    ref = simulate_trace(load_trace(old), cfg)
    lazy = load_trace(new, derive_p=False)
    assert golden_checksums(lazy) == golden_checksums(load_trace(old))
    got = simulate_trace(lazy, cfg)
    by_file = simulate_trace_file(new, cfg)  # what `kaleido simulate` runs: one (step, block) at a time
    for r in (got, by_file):
        assert [o["cycles"] for o in r["per_op"]] == [o["cycles"] for o in ref["per_op"]]
        for key in ("cycles", "dense_cycles", "total_cycles", "reuse_fraction", "energy_pj", "dispatcher_stats"):
            assert r[key] == ref[key], key
    assert row_log and max(rows for rows, _ in row_log) == grid[1] * grid[2]


@pytest.mark.parametrize("positions", [1, 5, 64])
def test_position_slices_equal_whole_frames(files, row_log, monkeypatch, positions):
    """Frames decided in slices of positions (`algo.reuse.chunked.SLICE_ELEMS` lowered so that a slice holds
    `positions` positions: several slices per frame and a partial last one, or one whole frame) give the
    decisions, outputs and SAD of `algo.reuse.golden.decide` / `apply_decisions` on the whole stored P;
    every P request is at most one slice of one frame of one head."""
    import algo.reuse.chunked as chunked

    grid, new, old = files
    hw = grid[1] * grid[2]
    pv_old = [o for o in load_trace(old).ops if o.name == "pv"][0]
    pv_new = [o for o in load_trace(new, derive_p=False).ops if o.name == "pv"][0]
    monkeypatch.setattr(chunked, "SLICE_ELEMS", positions * pv_new.K)
    n = min(positions, hw)
    assert chunked.slice_positions(hw, pv_new.K) == n
    groups = [g.as_tuple() for g in pv_old.groups]
    for b in range(pv_old.batch):
        dec, _, sad = decide(pv_old.X[b], grid, groups, pv_old.theta, 4, return_sad=True)
        assert np.array_equal(op_decisions(pv_new, b, grid, pv_new.theta, 4), dec), b
        y = apply_decisions(pv_old.X[b], pv_old.W[b], grid, groups, dec, 4)
        assert np.array_equal(np.concatenate(list(op_outputs(pv_new, b, grid, pv_new.theta, 4))), y), b
        chunks = list(chunked.decision_chunks(pv_new, b, grid, pv_new.theta, 4))
        assert np.array_equal(np.concatenate([c[1] for c in chunks]), dec)
        assert np.array_equal(np.concatenate([c[2] for c in chunks]), sad)
    assert row_log and all(rows <= n and heads == 1 for rows, heads in row_log)
    assert any(rows == hw % n for rows, _ in row_log) or hw % n == 0  # the partial last slice is asked for


def test_simulate_in_position_slices_equals_stored_p(files, monkeypatch):
    """`kaleido simulate`'s path (`simulate_trace_file`, one block at a time) with P decided in slices of 5
    positions gives results JSON byte-identical (trace path aside) to the cycle model on the older format,
    where P is a stored array and `decide` sees it whole."""
    import json

    import algo.reuse.chunked as chunked

    grid, new, old = files
    k = [o for o in load_trace(new, derive_p=False).ops if o.name == "pv"][0].K
    monkeypatch.setattr(chunked, "SLICE_ELEMS", 5 * k)
    cfg = load_config("tiny-8x8")
    ref = simulate_trace(load_trace(old), cfg)
    got = simulate_trace_file(new, cfg)
    strip = [{kk: v for kk, v in r.items() if kk != "trace"} for r in (ref, got)]
    assert json.dumps(strip[0], sort_keys=True) == json.dumps(strip[1], sort_keys=True)
