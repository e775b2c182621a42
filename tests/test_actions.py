"""Action counting (`sim.cost.actions`): the run-length tile counts equal the slot-by-slot reference,
the no-dispatcher tiling, and the dispatcher statistics on hand-derived cases."""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE as C
from algo.reuse.golden import PARTIAL as P
from algo.reuse.golden import REUSE as R
from hw.config import load_config
from sim.cost.actions import op_actions
from sim.cost.tiling import TiledDecisions, tile_counts, tile_stats
from sim.timing.dispatch import match_tile, schedule_positions

KEYS = ("issued", "rows_x_channels", "channels", "rows", "compute", "partial", "paired", "reuse")


def _reference_tile_stats(dec, grid, groups, rows, b_msb, dispatcher=True):
    """The slot-by-slot counting `sim.cost.tiling._tile_counts` used before the run-length version
    (kept in plain Python as the reference): every slot of `sim.timing.dispatch.match_tile`, every row of
    the tile, classified one by one. Extended here with the dispatcher statistics counted from
    the slot list, and with the no-dispatcher tiling written out directly from its definition
    (raster order; one slot per channel of each group some row needs)."""
    F, H, W = grid  # noqa: N806
    hw = H * W
    k0 = np.array([g[0] for g in groups], dtype=np.int64)
    k1 = np.array([g[1] for g in groups], dtype=np.int64)
    dec = np.ascontiguousarray(dec, dtype=np.int8)
    order = schedule_positions(dec, grid, rows) if dispatcher else np.arange(hw)
    K = int(k1[-1])  # noqa: N806
    sa, sb = np.empty(K, dtype=np.int64), np.empty(K, dtype=np.int64)
    group_of = np.repeat(np.arange(len(groups)), k1 - k0)
    out = [0] * 8
    extra = dict.fromkeys(("pair_slots", "skipped_groups", "skipped_channels", "bubble_tiles", "slots", "tiles"), 0)
    for p0 in range(0, hw, rows):
        p1 = min(p0 + rows, hw)
        rt = p1 - p0
        for f in range(F):
            d = np.ascontiguousarray(dec[f * hw + order[p0:p1]])
            needed = [g for g in range(len(groups)) if (d[:, g] != R).any()]
            if dispatcher:
                n = match_tile(d, k0, k1, b_msb, sa, sb)
            else:
                chans = [k for g in needed for k in range(k0[g], k1[g])]
                n = len(chans)
                sa[:n], sb[:n] = chans, -1
            out[0] += max(1, n)
            extra["pair_slots"] += int((sb[:n] >= 0).sum())
            extra["skipped_groups"] += len(groups) - len(needed)
            extra["skipped_channels"] += K - sum(int(k1[g] - k0[g]) for g in needed)
            extra["bubble_tiles"] += n == 0
            extra["slots"] += n
            extra["tiles"] += 1
            ch = 0
            for s in range(n):
                ga = group_of[sa[s]]
                ch += 1
                gb = -1
                if sb[s] >= 0:
                    gb = group_of[sb[s]]
                    ch += 1
                for r in range(rt):
                    da = d[r, ga]
                    db = d[r, gb] if gb >= 0 else 2
                    if da == 0 or db == 0:
                        out[4] += 1
                    elif da == 1 and db == 1:
                        out[6] += 1
                    elif da == 1 or db == 1:
                        out[5] += 1
                    else:
                        out[7] += 1
            out[1] += rt * ch
            out[2] += ch
            out[3] += rt
    return dict(zip(KEYS, out, strict=True)) | extra


def _random_case(rng, grid, widths, p, axes=None):
    """Seeded decisions [F*H*W, G] with P(COMPUTE, PARTIAL, REUSE) = p, partly copied between
    neighbouring positions so that tiles hold alike rows (runs) as well as mixed ones."""
    F, H, W = grid  # noqa: N806
    G = len(widths)  # noqa: N806
    dec = rng.choice(3, size=(F, H * W, G), p=p).astype(np.int8)
    copy = rng.random((F, H * W)) < 0.5
    for i in range(1, H * W):
        dec[:, i][copy[:, i]] = dec[:, i - 1][copy[:, i]]
    bounds = np.concatenate([[0], np.cumsum(widths)])
    axes = axes or ["f"] * G
    groups = [(int(bounds[g]), int(bounds[g + 1]), axes[g]) for g in range(G)]
    return dec.reshape(F * H * W, G), groups


CASES = [  # grid, group widths, P(C, P, R), rows, b_msb
    ((1, 1, 4), [2, 2, 2], (0.3, 0.3, 0.4), 8, 4),
    ((3, 4, 5), [4, 4, 4, 4], (0.4, 0.3, 0.3), 8, 4),
    ((4, 6, 7), [3, 5, 1, 7, 2], (0.1, 0.6, 0.3), 16, 4),
    ((2, 9, 9), [8] * 8, (0.2, 0.2, 0.6), 32, 4),
    ((5, 3, 11), [6, 6, 6, 6, 6, 6, 5], (0.05, 0.9, 0.05), 4, 4),
    ((3, 5, 5), [2, 3, 4], (0.0, 1.0, 0.0), 8, 4),      # all PARTIAL: everything pairs
    ((3, 5, 5), [2, 3, 4], (1.0, 0.0, 0.0), 8, 4),      # all COMPUTE: nothing pairs
    ((3, 5, 5), [2, 3, 4], (0.0, 0.0, 1.0), 8, 4),      # all REUSE: bubble tiles
    ((4, 4, 6), [5, 3, 6, 2], (0.3, 0.4, 0.3), 8, 2),    # b_msb < 4: PARTIAL needs the full multiplier
    ((2, 7, 3), [9, 1, 4], (0.5, 0.25, 0.25), 128, 4),  # fewer positions than rows
    ((2, 10, 20), [3, 4, 5], (0.3, 0.3, 0.4), 96, 4),   # tiles of more than 64 rows (two mask words)
]


@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_run_length_counts_equal_reference(case, seed):
    grid, widths, p, rows, b_msb = CASES[case]
    dec, groups = _random_case(np.random.default_rng(100 * case + seed), grid, widths, p)
    for dispatcher in (True, False):
        ref = _reference_tile_stats(dec, grid, groups, rows, b_msb, dispatcher)
        got = tile_stats(dec, grid, groups, rows, b_msb, dispatcher)
        assert {k: got[k] for k in ref} == ref, dispatcher
        assert got["slots"] == got["channels"] - got["pair_slots"]
        if dispatcher:
            assert tile_counts(dec, grid, groups, rows, b_msb) == {k: ref[k] for k in KEYS}


def test_tile_counts_match_the_cycle_models_slots():
    """Σ issued slots equals the cycle model's slot sequence (one column block), both tilings."""
    from sim.timing.cycle_model import reuse_slot_sequence

    grid, widths, p, rows, b_msb = CASES[2]
    dec, groups = _random_case(np.random.default_rng(7), grid, widths, p)
    for dispatcher in (True, False):
        seq = reuse_slot_sequence(dec, grid, groups, 1, rows, 1, b_msb, dispatcher=dispatcher)
        t = tile_stats(dec, grid, groups, rows, b_msb, dispatcher)
        assert (t["issued"], t["slots"], t["tiles"]) == (int(np.maximum(seq, 1).sum()), int(seq.sum()), seq.size)


# Hand case for the no-dispatcher tiling: docs/architecture.md's matcher example (test_energy):
# 4 rows of one frame, three temporal groups of 2 channels.
GROUPS3 = [(0, 2, "f"), (2, 4, "f"), (4, 6, "f")]
DEC3 = np.array([[C, R, P], [C, R, P], [R, C, P], [R, R, R]], dtype=np.int8)


def test_no_dispatcher_tile_counts_hand_worked():
    # One slot per channel: g0's two slots see rows C, C, R, R; g1's R, R, C, R; g2's P, P, P, R
    # (single PARTIAL channel -> PARTIAL mode, not PAIRED).
    t = tile_stats(DEC3, (1, 1, 4), GROUPS3, 8, 4, dispatcher=False)
    assert {k: t[k] for k in KEYS} == {"issued": 6, "rows_x_channels": 24, "channels": 6, "rows": 4,
                                       "compute": 2 * 2 + 2 * 1, "partial": 2 * 3, "paired": 0,
                                       "reuse": 2 * 2 + 2 * 3 + 2 * 1}
    assert (t["pair_slots"], t["slots"], t["bubble_tiles"]) == (0, 6, 0)
    # With the matcher: (0, 2), (1, 3), (4, 5) -> three slots, one of them a pair of channels 4, 5.
    on = tile_stats(DEC3, (1, 1, 4), GROUPS3, 8, 4)
    assert (on["issued"], on["pair_slots"], on["slots"]) == (3, 3, 3)


def test_no_dispatcher_op_actions_hand_worked():
    cfg = load_config("tiny-8x8")  # R = C = 8, acc_bits 28, group_bits 3, partial_regs 8, 49 pipe bits
    off = op_actions("o_proj", [DEC3], (1, 1, 4), GROUPS3, 4, 6, 8, 4, cfg, cycles=100, dispatcher=False)
    on = op_actions("o_proj", [DEC3], (1, 1, 4), GROUPS3, 4, 6, 8, 4, cfg, cycles=100)
    # Same MACs either way: 6 COMPUTE and 6 PARTIAL (token, channel) pairs, x N = 8.
    assert off["mac8"] == on["mac8"] == 48 and off["mac4"] == on["mac4"] == 48
    # Register updates per column: COMPUTE 3 x 6 row-slots + PARTIAL 2 x 6 = 30 (paired: 3 x 6 + 3 x 3 = 27).
    assert off["pe_add"] == 30 * 8 and on["pe_add"] == 27 * 8
    # 12 active row-slots x 8 cols x 50 select bits + (2*6 + 6) register reads x 8 x 28 bits x 3 levels.
    assert off["pe_mux_bits"] == 12 * 8 * 50 + 18 * 8 * 28 * 3
    # Pass-through bits: 51 (with the row link's slot flags sp_a, sp_b, D4), of which the second-channel
    # lanes x_b (9) + w_b (8) + g_b (3) + first_b (1) + sp_b (1) = 22 clock only on two-channel slots
    # (D24): off = 6 single slots x 29 bits; on = 3 pair slots x 51.
    assert off["pipe_reg_bits"] == 64 * 6 * (51 - 22) and on["pipe_reg_bits"] == 64 * 3 * 51
    assert off["dispatch_add8"] == 0 and on["dispatch_add8"] == 3 * 3 * 4  # matcher off: no matcher work
    assert off["sim_add8"] == on["sim_add8"]  # the similarity unit still decides
    # A TiledDecisions carries its own tiling: the flag passed to op_actions is then ignored.
    pre = TiledDecisions(DEC3, tile_stats(DEC3, (1, 1, 4), GROUPS3, 8, 4, dispatcher=False), False)
    assert op_actions("o_proj", [pre], (1, 1, 4), GROUPS3, 4, 6, 8, 4, cfg, cycles=100) == off


def _stats_trace():
    """Hand case for the dispatcher statistics on tiny-8x8 (R = 8): grid 2 x 1 x 16, one temporal
    group of 2 channels, N = 16 (2 column blocks). Frame 0 COMPUTEs; in frame 1 even positions are
    PARTIAL and odd ones REUSE."""
    from algo.trace import Group, OpRecord, Trace, pack_decisions

    dec = np.zeros((32, 1), dtype=np.int8)
    dec[16::2], dec[17::2] = P, R
    op = OpRecord("o_proj", 0, 0, None, None, [Group(0, 2, "f", "block")], (1.0, 2.0), dims=(1, 32, 2, 16),
                  decisions=pack_decisions(dec)[None, None, :], thetas=((1.0, 2.0),))
    return Trace(grid=(2, 1, 16), ops=[op], model="hand", size="test", weights="none")


def test_dispatcher_stats_hand_worked():
    """Scheduler: frame-1 patterns P, R, P, R, ... sort (stable) to the 8 even positions, then the
    8 odd ones, so block 0 = {0, 2, .., 14}, block 1 = {1, 3, .., 15}: positions 8..14 (even) and
    1..7 (odd) change block, 8 positions x 2 frames = 16 rows moved; each block is one pattern run
    (2 clusters; raster order alternates: 8 runs per block, 16). Per column block: frame 0 tiles
    carry 2 COMPUTE channels (2 single slots each, COMPUTE + COMPUTE > 1 slot); frame 1 block 0
    pairs its two PARTIAL channels (1 pair slot), block 1 is all REUSE (skipped group of 2
    channels, a bubble tile). Without the dispatcher each frame-1 block needs both channels, one
    slot each. Two column blocks double the per-tile counts."""
    from sim.engines.model import simulate_trace

    cfg = load_config("tiny-8x8")
    on = simulate_trace(_stats_trace(), cfg)
    off = simulate_trace(_stats_trace(), cfg, dispatcher=False)
    assert on["per_op"][0]["dispatcher_stats"] == {
        "tiles": 8, "clusters": 2, "rows_moved": 16, "pair_slots": 2, "skipped_groups": 2,
        "skipped_channels": 4, "bubble_tiles": 2}
    assert off["dispatcher_stats"] == {
        "tiles": 8, "clusters": 16, "rows_moved": 0, "pair_slots": 0, "skipped_groups": 0,
        "skipped_channels": 0, "bubble_tiles": 0}
    assert on["dispatcher_stats"] == on["per_op"][0]["dispatcher_stats"]
    # Energy follows the tiling: issued slots per column block 2 + 2 + 1 + 1 (bubble) = 6 with,
    # 2 + 2 + 2 + 2 = 8 without; pipe_reg_bits = R*C x 2 column blocks x (issued x 29 bits + pair
    # slots x the 22 second-channel lane bits, D24): 1 pair slot per column block with, none without.
    assert on["actions"]["pipe_reg_bits"] == 64 * 2 * (6 * 29 + 1 * 22)
    assert off["actions"]["pipe_reg_bits"] == 64 * 2 * 8 * 29
    # mac4: 16 PARTIAL (token, channel) pairs x N either way; updates per column: 32 COMPUTE
    # row-slots x 3 + 8 PAIRED x 3 = 120 with, + 16 PARTIAL x 2 = 128 without; x N = 16.
    assert on["actions"]["mac4"] == off["actions"]["mac4"] == 16 * 16
    assert on["actions"]["pe_add"] == 120 * 16 and off["actions"]["pe_add"] == 128 * 16
    assert on["actions"]["dispatch_add8"] == 1 * 32 * 2 and off["actions"]["dispatch_add8"] == 0


def test_bench_full_step_trace_matches_the_timed_step():
    """`sim.bench.simulate_step_energy` (the benchmark line timing `simulate_trace` with energy) runs
    the same decisions as `simulate_step`: one 480p block gives the same array cycles, and its
    dispatcher statistics are self-consistent (every tile of every GEMM counted)."""
    from sim.bench import block_ops, simulate_step, simulate_step_energy

    e = simulate_step_energy("wan2.1-t2v-1.3b", "480p", blocks=1)
    s = simulate_step("wan2.1-t2v-1.3b", "480p", blocks=1)
    assert e["cycles"] == s["cycles"] > 0 and e["energy_pj"] > 0
    # tiles = Σ_ops batch x F x ceil(HW / P) x ceil(N / C): P = R = 128 positions per tile, so
    # F x ceil(HW / P) = 21 x ceil(1560 / 128) = 273, except for qk, whose RoPE t-group reuses along w:
    # P = floor(128 / 52) x 52 = 104 whole image rows (docs/decisions.md D4), 21 x ceil(1560 / 104) = 315
    want = sum(b * (315 if name == "qk" else 273) * -(-n // 128)
               for name, b, _, n, _ in block_ops("wan2.1-t2v-1.3b", 32760))
    assert e["dispatcher_stats"]["tiles"] == want
