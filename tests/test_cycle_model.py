"""Cycle model (sim.timing.cycle_model) and data dispatcher (sim.timing.dispatch) against hand derivations.

Timing contract (sim/timing/cycle_model.py module docstring), restated for the derivations below:
  S_t = max(1, slots_t);  L_t = max(L_{t-1} + S_t, L_{t-d} + R)  with L_{-1} = -1 (cycle 0 is the
  first issue) and no port constraint for the first d tiles (tile t drains on port t mod d);
  op cycles = L_last + R + C + 2;  drain stall = sum over t of (L_t - (L_{t-1} + S_t)).
Matcher rule (docs/spec.md §3): demand COMPUTE = 1, PARTIAL = 1/2 (b_msb >= 4; a full slot otherwise),
REUSE = 0; channels in index order, each unpaired channel pairs with the lowest-index later compatible
channel (every row: demand(a) + demand(b) <= 1); a group every row REUSEs takes no slot.
"""

from __future__ import annotations

import numpy as np
import pytest

from hw.config import load_config
from sim.timing.cycle_model import (
    PIPELINE_CYCLES,
    dense_cycles_formula,
    dense_slot_sequence,
    op_cycles,
    reuse_slot_sequence,
)
from sim.timing.dispatch import Slot, count_slots, match_tile, reuse_tiles, tile_schedule

C, P, R = 0, 1, 2  # COMPUTE, PARTIAL, REUSE


def test_pipeline_constant():
    assert PIPELINE_CYCLES == 2


# ---- dense timing ------------------------------------------------------------------------------

def _dense(M, K, N, cfg):  # noqa: N803
    R_, C_, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    return op_cycles(dense_slot_sequence(M, K, N, R_, C_), R_, C_, d)


def test_dense_tiny_long_k():
    # tiny 8x8, d = 2. GEMM M = 16, K = 16, N = 8: ceil(16/8) * ceil(8/8) = 2 tiles of S = 16 slots.
    #   L_0 = -1 + 16 = 15 (port 0)
    #   L_1 = max(15 + 16, none) = 31 (port 1, unused before)
    # cycles = 31 + 8 + 8 + 2 = 49, no stall.
    cfg = load_config("tiny-8x8")
    assert (cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle) == (8, 8, 2)
    assert dense_slot_sequence(16, 16, 8, 8, 8).tolist() == [16, 16]
    assert _dense(16, 16, 8, cfg) == (49, 0)
    assert dense_cycles_formula(16, 16, 8, 8, 8, 2) == 49  # T*K + R + C + 1 = 32 + 17


def test_dense_tiny_short_k_drain_bound():
    # M = 32, K = 2, N = 8 on tiny (R = C = 8, d = 2): 4 tiles of S = 2.
    #   L_0 = -1 + 2 = 1                      (port 0)
    #   L_1 = 1 + 2 = 3                       (port 1)
    #   L_2 = max(3 + 2, L_0 + 8 = 9) = 9     (port 0; stall 9 - 5 = 4)
    #   L_3 = max(9 + 2, L_1 + 8 = 11) = 11   (port 1; stall 0)
    # cycles = 11 + 8 + 8 + 2 = 29, stall 4.
    cfg = load_config("tiny-8x8")
    assert _dense(32, 2, 8, cfg) == (29, 4)
    # The closed form applies only when K >= R / d = 4.
    with pytest.raises(ValueError):
        dense_cycles_formula(32, 2, 8, 8, 8, 2)


def test_dense_tiny_k_at_the_drain_bound():
    # K = R / d = 4, M = 32, N = 8: 4 tiles of 4. L = 3, 7, max(11, 3 + 8) = 11, max(15, 7 + 8) = 15:
    # the port becomes free exactly in time, no stall. cycles = 15 + 18 = 33 = 4*4 + 8 + 8 + 1.
    cfg = load_config("tiny-8x8")
    assert _dense(32, 4, 8, cfg) == (33, 0)
    assert dense_cycles_formula(32, 4, 8, 8, 8, 2) == 33


def test_dense_tiny_partial_tiles():
    # M = 9, K = 5, N = 9: ceil(9/8) = 2 row blocks x 2 column blocks = 4 tiles of 5 (edge tiles
    # are not shorter in K). L = 4, 9, max(14, 4 + 8 = 12) = 14, max(19, 9 + 8 = 17) = 19.
    # cycles = 19 + 18 = 37, no stall.
    assert dense_slot_sequence(9, 5, 9, 8, 8).tolist() == [5, 5, 5, 5]
    assert _dense(9, 5, 9, load_config("tiny-8x8")) == (37, 0)


def test_dense_reference_preset():
    # 128 x 128, d = 4. M = 256, K = 128, N = 256: 2 x 2 = 4 tiles of 128, all on distinct ports:
    # L = 127, 255, 383, 511; cycles = 511 + 128 + 128 + 2 = 769 = 4*128 + 257.
    cfg = load_config("kaleido-16nm-128x128")
    assert _dense(256, 128, 256, cfg) == (769, 0)
    assert dense_cycles_formula(256, 128, 256, 128, 128, 4) == 769
    # Short K = 16 (< R/d = 32), M = 640, N = 128: 5 tiles of 16 on ports 0,1,2,3,0.
    #   L_0..L_3 = 15, 31, 47, 63; L_4 = max(63 + 16 = 79, L_0 + 128 = 143) = 143 (stall 64).
    # cycles = 143 + 128 + 128 + 2 = 401.
    assert _dense(640, 16, 128, cfg) == (401, 64)


def test_op_cycles_bubbles_and_mixed_tiles():
    # A tile with 0 slots still issues one bubble: S = [1, 1, 1], R = C = 8, d = 4: L = 0, 1, 2;
    # cycles = 2 + 8 + 8 + 2 = 20.
    assert op_cycles(np.array([0, 0, 0]), 8, 8, 4) == (20, 0)
    # Same with d = 1: every tile waits for the single port: L = 0, max(1, 0 + 8) = 8, 16;
    # stall 7 + 7 = 14; cycles = 16 + 18 = 34.
    assert op_cycles(np.array([0, 0, 0]), 8, 8, 1) == (34, 14)
    # S = [5, 1, 1, 10], R = C = 8, d = 2:
    #   L_0 = 4 (p0); L_1 = 5 (p1); L_2 = max(6, 4 + 8 = 12) = 12 (p0, stall 6);
    #   L_3 = max(22, 5 + 8 = 13) = 22 (p1). cycles = 22 + 18 = 40.
    assert op_cycles(np.array([5, 1, 1, 10]), 8, 8, 2) == (40, 6)
    # Non-square array R = 4, C = 16, d = 1, S = [2, 3]: L_0 = 1; L_1 = max(4, 1 + 4 = 5) = 5
    # (stall 1). cycles = 5 + 4 + 16 + 2 = 27.
    assert op_cycles(np.array([2, 3]), 4, 16, 1) == (27, 1)
    # No tiles: no time.
    assert op_cycles(np.array([], dtype=np.int64), 8, 8, 2) == (0, 0)


# ---- matcher: hand-made tiles --------------------------------------------------------------------

def _sched(dec, groups, b_msb=4):
    return tile_schedule(np.array(dec, dtype=np.int8), groups, b_msb)


def _pairs(slots):
    return [(s.a, s.b) for s in slots]


TWO_GROUPS = [(0, 2, "f"), (2, 4, "f")]


def test_all_reuse_group_takes_no_slot():
    # Group 0 REUSEd by both rows: its channels 0, 1 are never issued. Group 1 COMPUTEs in both rows,
    # so its channels cannot pair with each other (1 + 1 > 1): slots (2), (3).
    slots = _sched([[R, C], [R, C]], TWO_GROUPS)
    assert slots == [Slot(2, -1, 1, 0, True, False), Slot(3, -1, 1, 0, False, False)]


def test_all_reuse_tile_takes_no_slot():
    assert _sched([[R, R], [R, R], [R, R]], TWO_GROUPS) == []
    k0, k1 = np.array([0, 2]), np.array([2, 4])
    sa, sb = np.empty(4, dtype=np.int64), np.empty(4, dtype=np.int64)
    assert match_tile(np.full((3, 2), R, dtype=np.int8), k0, k1, 4, sa, sb) == 0


def test_two_all_partial_groups_pair_channel_by_channel():
    # Groups of 3: g0 = 0..2, g1 = 3..5, every row PARTIAL in both (1/2 + 1/2 = 1 fits).
    # Ch 0 pairs with the lowest later channel, 1; ch 2 with 3 (crossing into g1); ch 4 with 5.
    # first flags: slot (0,1): g0 first -> first_a; b is g0 again -> not first.
    #              slot (2,3): g0 seen; g1 first -> first_b.  slot (4,5): both seen.
    groups = [(0, 3, "f"), (3, 6, "f")]
    slots = _sched([[P, P], [P, P]], groups)
    assert slots == [
        Slot(0, 1, 0, 0, True, False),
        Slot(2, 3, 0, 1, False, True),
        Slot(4, 5, 1, 1, False, False),
    ]
    # Groups of 1: g0 = {0}, g1 = {1}: one slot carries both, both flags set.
    assert _sched([[P, P]], [(0, 1, "f"), (1, 2, "f")]) == [Slot(0, 1, 0, 1, True, True)]


def test_row_complementary_compute_and_reuse_pair():
    # Row 0: g0 COMPUTE, g1 REUSE; row 1: g0 REUSE, g1 COMPUTE. Every row uses one of the two channels
    # at full width, so g0 and g1 are compatible; g0 with itself is not (row 0: 1 + 1).
    # Ch 0: ch 1 (g0) incompatible, ch 2 (g1) compatible -> (0, 2); ch 1 -> (1, 3).
    slots = _sched([[C, R], [R, C]], TWO_GROUPS)
    assert slots == [Slot(0, 2, 0, 1, True, True), Slot(1, 3, 0, 1, False, False)]


def test_partial_does_not_pair_with_compute():
    # Row 0 PARTIAL in g0 and COMPUTE in g1: 1/2 + 1 > 1 -> no pair across groups; g0 alone pairs
    # with itself only if no row COMPUTEs it: row 1 COMPUTEs g0 -> no. Four single slots.
    slots = _sched([[P, C], [C, R]], TWO_GROUPS)
    assert _pairs(slots) == [(0, -1), (1, -1), (2, -1), (3, -1)]
    assert [(s.first_a, s.first_b) for s in slots] == [(True, False), (False, False), (True, False),
                                                       (False, False)]


def test_b_msb_3_partial_costs_a_full_slot():
    # b_msb = 3 -> b_lsb = 5 > 4: PARTIAL no longer fits half the multiplier, so the all-PARTIAL
    # tile of test_two_all_partial_groups_pair_channel_by_channel needs one slot per channel.
    groups = [(0, 3, "f"), (3, 6, "f")]
    slots = _sched([[P, P], [P, P]], groups, b_msb=3)
    assert _pairs(slots) == [(k, -1) for k in range(6)]
    assert [s.first_a for s in slots] == [True, False, False, True, False, False]
    assert [s.g_a for s in slots] == [0, 0, 0, 1, 1, 1]
    # With b_msb = 4 the same tile takes 3 slots, with b_msb = 5 (b_lsb = 3 <= 4) too.
    assert len(_sched([[P, P], [P, P]], groups, b_msb=4)) == 3
    assert len(_sched([[P, P], [P, P]], groups, b_msb=5)) == 3


def test_greedy_order_worked_example():
    # Groups: g0 = {0,1}, g1 = {2}, g2 = {3,4}, g3 = {5}, g4 = {6,7}; two rows.
    #   g0 [C, R], g1 [P, P], g2 [R, C], g3 [R, R] (takes no slot), g4 [P, R]
    # demand (halves): g0 [2,0], g1 [1,1], g2 [0,2], g4 [1,0]
    # compatible pairs (every row <= 2): g0-g2, g1-g1, g1-g4, g2-g4, g4-g4
    #   (g0-g0 row0 4, g0-g1 row0 3, g0-g4 row0 3, g1-g2 row1 3, g2-g2 row1 4: no).
    # Channel order:
    #   ch 0 (g0): later compatible, lowest index: 1 no (g0), 2 no (g1), 3 yes (g2) -> (0, 3)
    #   ch 1 (g0): 2 no, 4 yes (g2)                                             -> (1, 4)
    #   ch 2 (g1): 5 is g3 (no slot at all), 6 yes (g4)                         -> (2, 6)
    #   ch 7 (g4): nothing left                                                 -> (7, -)
    # first flags: (0,3): g0 and g2 first; (1,4): neither; (2,6): g1 and g4 first; (7): g4 seen.
    groups = [(0, 2, "f"), (2, 3, "f"), (3, 5, "f"), (5, 6, "f"), (6, 8, "f")]
    slots = _sched([[C, P, R, R, P], [R, P, C, R, R]], groups)
    assert slots == [
        Slot(0, 3, 0, 2, True, True),
        Slot(1, 4, 0, 2, False, False),
        Slot(2, 6, 1, 4, True, True),
        Slot(7, -1, 4, 0, False, False),
    ]


def test_match_tile_raw_buffers():
    # The numba entry point writes the same pairs into caller buffers.
    dec = np.array([[C, R], [R, C]], dtype=np.int8)
    k0, k1 = np.array([0, 2], dtype=np.int64), np.array([2, 4], dtype=np.int64)
    sa, sb = np.full(4, -9, dtype=np.int64), np.full(4, -9, dtype=np.int64)
    n = match_tile(dec, k0, k1, 4, sa, sb)
    assert n == 2 and sa[:2].tolist() == [0, 1] and sb[:2].tolist() == [2, 3]
    assert count_slots(dec, k0, k1, 4, sa, sb) == 2


# ---- matcher: plain-Python reference on random tiles ---------------------------------------------

def _demand(d, b_msb):
    """Demand in half slots (docs/spec.md §3)."""
    return {C: 2, P: 1 if b_msb >= 4 else 2, R: 0}[d]


def reference_schedule(dec, groups, b_msb):
    """Channel-level greedy, literally as docs/spec.md §3 words it: list of (a, b, g_a, g_b, first_a, first_b)."""
    rows = len(dec)
    group_of = [gi for gi, (k0, k1, _) in enumerate(groups) for _ in range(k0, k1)]
    K = len(group_of)  # noqa: N806
    dem = [[_demand(dec[r][group_of[k]], b_msb) for r in range(rows)] for k in range(K)]
    active = [any(v > 0 for v in dem[k]) for k in range(K)]
    used = [False] * K
    out = []
    seen = set()
    for a in range(K):
        if not active[a] or used[a]:
            continue
        used[a] = True
        b = -1
        for c in range(a + 1, K):
            if active[c] and not used[c] and all(dem[a][r] + dem[c][r] <= 2 for r in range(rows)):
                b = c
                used[c] = True
                break
        ga = group_of[a]
        gb = group_of[b] if b >= 0 else 0
        fa = ga not in seen
        seen.add(ga)
        fb = b >= 0 and gb not in seen
        if b >= 0:
            seen.add(gb)
        out.append((a, b, ga, gb, fa, fb))
    return out


def test_matcher_matches_reference_on_random_tiles():
    rng = np.random.default_rng(7)
    for trial in range(400):
        ng = int(rng.integers(1, 7))
        sizes = rng.integers(1, 5, size=ng)
        bounds = np.concatenate([[0], np.cumsum(sizes)])
        groups = [(int(bounds[i]), int(bounds[i + 1]), "f") for i in range(ng)]
        rows = int(rng.integers(1, 9))
        # Per-group patterns so that REUSE-only and PARTIAL-only groups are common.
        dec = np.empty((rows, ng), dtype=np.int8)
        for g in range(ng):
            kind = rng.integers(0, 4)
            if kind == 0:
                dec[:, g] = R
            elif kind == 1:
                dec[:, g] = rng.choice([P, R], size=rows)
            elif kind == 2:
                dec[:, g] = rng.choice([C, R], size=rows)
            else:
                dec[:, g] = rng.integers(0, 3, size=rows)
        b_msb = int(rng.choice([3, 4, 5]))
        expected = reference_schedule(dec.tolist(), groups, b_msb)
        got = tile_schedule(dec, groups, b_msb)
        assert [(s.a, s.b, s.g_a, s.g_b, s.first_a, s.first_b) for s in got] == expected, (trial, dec, groups)
        # Every slot is feasible for every row, and each active channel is issued exactly once.
        issued = [k for s in got for k in (s.a, s.b) if k >= 0]
        assert sorted(issued) == [k for k0, k1, _ in groups for k in range(k0, k1)
                                  if (dec[:, groups.index((k0, k1, "f"))] != R).any()]
        for s in got:
            if s.b >= 0:
                for r in range(rows):
                    assert _demand(dec[r, s.g_a], b_msb) + _demand(dec[r, s.g_b], b_msb) <= 2


# ---- reuse tiling and slot sequence --------------------------------------------------------------

def test_reuse_tiles_order():
    # grid (F, H, W) = (2, 1, 3): 3 positions per frame; R = 2 -> position blocks {0, 1}, {2}.
    # N = 10, C = 8 -> column blocks [0, 8), [8, 10). Order: column block, position block, frame.
    tiles = reuse_tiles((2, 1, 3), 10, rows=2, cols=8)
    got = [(t.tokens.tolist(), t.n0, t.n1, t.clear) for t in tiles]
    block = [([0, 1], True), ([3, 4], False), ([2], True), ([5], False)]
    assert got == [(tok, 0, 8, clr) for tok, clr in block] + [(tok, 8, 10, clr) for tok, clr in block]


def test_reuse_slot_sequence_by_hand():
    # grid (2, 1, 3), groups g0 = {0, 1}, g1 = {2, 3} (temporal), R = 2, C = 8, N = 10.
    # Frame 0 (tokens 0..2) has no temporal neighbour: all COMPUTE.
    # Frame 1: token 3 [R, R], token 4 [R, P], token 5 [R, R].
    dec = np.array([[C, C], [C, C], [C, C], [R, R], [R, P], [R, R]], dtype=np.int8)
    groups = [(0, 2, "f"), (2, 4, "f")]
    # Tile (block {0,1}, f0): 2 COMPUTE groups, nothing pairs (1 + 1 > 1) -> 4 slots.
    # Tile (block {0,1}, f1): rows [R,R], [R,P]: g0 takes no slot; g1 demands [0, 1/2], so its two
    #   channels pair -> 1 slot (b_msb = 4); with b_msb = 3 PARTIAL is a full slot -> 2 slots.
    # Tile (block {2}, f0): 4 slots.  Tile (block {2}, f1): row [R, R] -> 0 slots.
    # Two column blocks repeat the sequence.
    seq = reuse_slot_sequence(dec, (2, 1, 3), groups, N=10, rows=2, cols=8, b_msb=4)
    assert seq.dtype == np.int64
    assert seq.tolist() == [4, 1, 4, 0] * 2
    seq3 = reuse_slot_sequence(dec, (2, 1, 3), groups, N=10, rows=2, cols=8, b_msb=3)
    assert seq3.tolist() == [4, 2, 4, 0] * 2
    # Timing with R = 2, C = 8, d = 1: S = [4, 1, 4, 1] * 2 (the empty tile issues a bubble).
    #   L = 3; max(4, 3+2=5) = 5 (stall 1); max(9, 7) = 9; max(10, 11) = 11 (stall 1);
    #       15; max(16, 17) = 17 (stall 1); 21; max(22, 23) = 23 (stall 1).
    # cycles = 23 + 2 + 8 + 2 = 35, stall 4.
    assert op_cycles(seq, 2, 8, 1) == (35, 4)
    # The per-tile counts equal the matcher's schedules of the tiles' own decision rows.
    for tile, s in zip(reuse_tiles((2, 1, 3), 10, 2, 8), seq.tolist(), strict=True):
        assert len(tile_schedule(dec[tile.tokens], groups, 4)) == s


def test_reuse_dense_equivalence_at_theta_zero():
    # All-COMPUTE decisions with one channel group of K channels: every tile needs K slots (COMPUTE
    # channels never pair), as in the dense raster tiling when H*W is a multiple of R.
    # grid (3, 2, 8), R = C = 8, K = 8, N = 16: per frame 16 positions = 2 blocks; 2 col blocks;
    # 2 * 2 * 3 = 12 tiles of 8 = the dense M = 48 GEMM's ceil(48/8) * 2 = 12 tiles of 8.
    dec = np.zeros((48, 1), dtype=np.int8)
    seq = reuse_slot_sequence(dec, (3, 2, 8), [(0, 8, "f")], N=16, rows=8, cols=8, b_msb=4)
    assert seq.tolist() == [8] * 12
    assert seq.tolist() == dense_slot_sequence(48, 8, 16, 8, 8).tolist()


def test_fast_slot_count_equals_the_matcher_on_random_tiles():
    """`count_slots` (run-length greedy) emits as many slots as `match_tile` (channel by channel) on
    seeded random tiles: long groups, uneven group widths, rows mixing all three decisions, b_msb 3 and 4."""
    rng = np.random.default_rng(7)
    for trial in range(400):
        rows = int(rng.integers(1, 9))
        ng = int(rng.integers(1, 9))
        widths = rng.integers(1, 40 if trial % 2 else 4, size=ng)
        k1 = np.cumsum(widths).astype(np.int64)
        k0 = (k1 - widths).astype(np.int64)
        p = rng.dirichlet(np.ones(3))
        dec = rng.choice(3, size=(rows, ng), p=p).astype(np.int8)
        b_msb = 4 if trial % 3 else 3
        sa = np.empty(int(k1[-1]), dtype=np.int64)
        sb = np.empty(int(k1[-1]), dtype=np.int64)
        want = match_tile(dec, k0, k1, b_msb, sa, sb)
        assert count_slots(dec, k0, k1, b_msb, sa, sb) == want, (dec, widths, b_msb)


def test_benchmark_step_has_every_op_with_published_shapes():
    """docs/spec.md §1, Wan2.1-T2V-1.3B at 480p: d = 1536 = 12 x 128, d_ffn = 8960, M = 21*30*52 = 32,760,
    512 text tokens; RoPE split 44/42/42 of d_h."""
    from sim.bench import block_ops

    m = 21 * 30 * 52
    got = {name: (batch, K, N) for name, batch, K, N, _ in block_ops("wan2.1-t2v-1.3b", m)}
    assert got == {"qkv": (1, 1536, 4608), "qk": (12, 128, m), "pv": (12, m, 128), "o_proj": (1, 1536, 1536),
                   "cross_q": (1, 1536, 1536), "cross_qk": (12, 128, 512), "cross_pv": (12, 512, 128),
                   "cross_o": (1, 1536, 1536), "ffn1": (1, 1536, 8960), "ffn2": (1, 8960, 1536)}
    qk_groups = next(g for name, _, _, _, g in block_ops("wan2.1-t2v-1.3b", m) if name == "qk")
    assert qk_groups == [(0, 44, "w"), (44, 86, "f"), (86, 128, "f")]


def test_benchmark_decisions_are_valid_and_seeded():
    """Frame 0 and the w = 0 column of w-axis groups compute (no neighbour); equal seeds, equal decisions;
    every 8x8-position region of a frame shares one decision per group."""
    from sim.bench import coherent_decisions

    grid, groups = (3, 10, 12), [(0, 4, "w"), (4, 8, "f")]
    a = coherent_decisions(np.random.default_rng(5), grid, groups, 2)
    b = coherent_decisions(np.random.default_rng(5), grid, groups, 2)
    assert a.shape == (2, 360, 2) and a.dtype == np.int8 and np.array_equal(a, b)
    d = a.reshape(2, 3, 10, 12, 2)
    assert (d[:, 0] == 0).all() and (d[:, :, :, 0, 0] == 0).all()
    region = d[:, 1:, :8, 1:8, 1]  # one region, group 1 (w = 0 is only forced for the w-axis group)
    assert (region == region[:, :, :1, :1]).all()
    assert set(np.unique(a[:, 120:])) <= {0, 1, 2}
