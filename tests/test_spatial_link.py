"""Spatial reuse by passing effective increments down the column (docs/decisions.md D4).

Golden-side check of the design before any RTL: a plain-Python model of what each PE row does in
a tile of whole image rows (raster order), per channel k of a group and output n:

- COMPUTE: its own increments ``(msb(x)*w, lsb(x)*w)``;
- PARTIAL: the link's msb increment and its own ``lsb(x)*w``;
- REUSE:   both increments from the link;

where the link of a ``w``-axis group carries the row above's *effective* increments (the row
above is the ``w``-neighbour because a tile holds whole image rows), and a temporal (``f``) group's
source is the same PE row's increments of the previous frame's tile (its registers). ``Y`` is the
sum of the effective increments. It must equal `algo.reuse.golden.apply_decisions` exactly, chains of
REUSE/PARTIAL along ``w`` included.
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE, apply_decisions

LO = 4  # b_lsb for b_msb = 4 (docs/decisions.md D6)


def _msb(v):
    return (v >> LO) << LO


def increment_model(X, W, grid, groups, dec, rows):  # noqa: N803
    """Y by the increment-passing rule over tiles of ``floor(rows / W) * W`` raster positions."""
    F, H, Wd = grid  # noqa: N806
    hw = H * Wd
    block = (rows // Wd) * Wd
    M, N = X.shape[0], W.shape[1]  # noqa: N806
    x = X.astype(np.int64)
    w = W.astype(np.int64)
    Y = np.zeros((M, N), dtype=np.int64)  # noqa: N806
    for p0 in range(0, hw, block):
        npos = min(block, hw - p0)
        assert p0 % Wd == 0 and npos % Wd == 0, "a tile holds whole image rows"
        prev_frame = {}  # (row, channel) -> (msb inc, lsb inc) of the previous frame's tile: PE registers
        for f in range(F):
            here = {}
            for r in range(npos):
                t = f * hw + p0 + r
                for gi, (k0, k1, axis) in enumerate(groups):
                    d = int(dec[t, gi])
                    for k in range(k0, k1):
                        own = (_msb(x[t, k]) * w[k], (x[t, k] - _msb(x[t, k])) * w[k])
                        if d == COMPUTE:
                            inc = own
                        else:
                            if axis == "w":
                                assert r > 0, "a w = 0 row has no neighbour and must COMPUTE"
                                src = here[(r - 1, k)]  # the link from the PE row above
                            else:
                                assert axis == "f" and f > 0
                                src = prev_frame[(r, k)]
                            inc = (src[0], own[1]) if d == PARTIAL else src
                        here[(r, k)] = inc
                        Y[t] += inc[0] + inc[1]
            prev_frame = here
    return Y


def _random_case(seed, grid, sizes, axes, p=(0.3, 0.35, 0.35), unsigned=False):
    rng = np.random.default_rng(seed)
    F, H, Wd = grid  # noqa: N806
    M = F * H * Wd  # noqa: N806
    K = sum(sizes)  # noqa: N806
    if unsigned:
        X = rng.integers(0, 256, size=(M, K)).astype(np.uint8)  # noqa: N806
    else:
        X = rng.integers(-128, 128, size=(M, K)).astype(np.int8)  # noqa: N806
        X[:2, 0] = [-128, 127]
    W = rng.integers(-128, 128, size=(K, 5)).astype(np.int8)  # noqa: N806
    W[0, :2] = [-128, 127]
    groups, k = [], 0
    for s, a in zip(sizes, axes, strict=True):
        groups.append((k, k + s, a))
        k += s
    dec = rng.choice([COMPUTE, PARTIAL, REUSE], size=(M, len(groups)), p=list(p)).astype(np.int8)
    f_i, _, w_i = np.unravel_index(np.arange(M), grid)
    for gi, (_, _, a) in enumerate(groups):
        dec[(w_i if a == "w" else f_i) == 0, gi] = COMPUTE
    return X, W, groups, dec


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("grid,rows", [((3, 2, 4), 8), ((2, 3, 4), 8), ((2, 5, 3), 8), ((2, 2, 8), 8),
                                       ((2, 4, 13), 128 // 3)])
def test_increment_passing_equals_golden(seed, grid, rows):
    p = (0.1, 0.3, 0.6) if seed % 2 else (0.3, 0.35, 0.35)  # odd seeds: long REUSE/PARTIAL chains
    X, W, groups, dec = _random_case(seed, grid, [3, 2, 4], ["w", "f", "w"], p, unsigned=seed == 5)  # noqa: N806
    want = apply_decisions(X, W, grid, groups, dec, 4)
    assert np.array_equal(increment_model(X, W, grid, groups, dec, rows), want)


def test_chains_along_w_occur():
    """The long-chain seeds really chain: some token REUSEs/PARTIALs a neighbour that itself did."""
    grid = (3, 2, 4)
    _, _, groups, dec = _random_case(1, grid, [3, 2, 4], ["w", "f", "w"], (0.1, 0.3, 0.6))
    d = dec[:, 0].reshape(grid)
    chained = (d[..., 1:] != COMPUTE) & (d[..., :-1] != COMPUTE)
    assert chained.sum() >= 4


# ---- step 2: the tiling of ops with w-axis groups (sim.timing.dispatch) ----------------------------------

def test_w_ops_tile_whole_image_rows_in_raster_order():
    from sim.timing.cycle_model import reuse_slot_sequence
    from sim.timing.dispatch import position_block, position_order, reuse_tiles

    grid = (2, 3, 3)  # W = 3, R = 8 -> floor(8 / 3) * 3 = 6 positions per tile: blocks {0..5}, {6..8}
    assert position_block(grid, [(0, 2, "w"), (2, 4, "f")], 8) == 6
    assert position_block(grid, [(0, 2, "f"), (2, 4, "f")], 8) == 8
    tiles = reuse_tiles(grid, 3, 8, 8, None, 6)
    assert [t.tokens.tolist() for t in tiles] == [[0, 1, 2, 3, 4, 5], [9, 10, 11, 12, 13, 14],
                                                  [6, 7, 8], [15, 16, 17]]
    # decisions the scheduler would reorder (position 1 alone COMPUTEs the f group in frame 1)
    dec = np.zeros((18, 2), dtype=np.int8)
    dec[9:, 1] = REUSE
    dec[10, 1] = COMPUTE
    f_only = [(0, 2, "f"), (2, 4, "f")]
    assert position_order(dec, grid, f_only, 2).tolist() != list(range(9))
    assert position_order(dec, grid, [(0, 2, "w"), (2, 4, "f")], 2).tolist() == list(range(9))
    # slots per tile, hand-derived: group 0 (2 channels, w) COMPUTEs everywhere; group 1 (2 channels, f)
    # COMPUTEs in frame 0 and only at position 1 in frame 1. COMPUTE + COMPUTE never pair, so a tile
    # takes 4 slots when some row needs group 1, else 2: tiles (block 0, f 0), (0, 1), (1, 0), (1, 1).
    seq = reuse_slot_sequence(dec, grid, [(0, 2, "w"), (2, 4, "f")], 3, 8, 8, 4)
    assert seq.tolist() == [4, 4, 4, 2]


def test_w_wider_than_the_array_is_rejected():
    from sim.timing.cycle_model import reuse_slot_sequence

    dec = np.zeros((2 * 9, 1), dtype=np.int8)
    with pytest.raises(ValueError, match="W = 9 positions exceed the array's R = 8 rows"):
        reuse_slot_sequence(dec, (2, 1, 9), [(0, 4, "w")], 8, 8, 8, 4)


# ---- step 4: the stream and the cycle model agree on w-axis ops -------------------------------

def test_stream_and_cycle_model_tile_w_ops_alike():
    """For the RTL's w-axis cases, the stream's slots per tile (matcher, `sim.timing.dispatch.match_tile`)
    equal the cycle model's run-length count (`sim.timing.dispatch.count_slots`) and the action counts'
    tiles, over the same whole-image-row tiles."""
    from hw.config import load_config
    from sim.cost.tiling import tile_stats
    from sim.timing.cycle_model import reuse_slot_sequence
    from sim.timing.stream import build_stream
    from tests.rtl.cases import spatial_cases, spatial_random_cases

    cfg = load_config("tiny-8x8")
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    for c in [*spatial_cases(R, C), *spatial_random_cases(R, C)]:
        st = build_stream(c.X, c.W, c.grid, c.groups, c.decisions, 4, cfg)
        seq = reuse_slot_sequence(c.decisions, c.grid, c.groups, c.W.shape[1], R, C, 4)
        assert st.slots_per_tile.tolist() == seq.tolist(), c.name
        t = tile_stats(c.decisions, c.grid, c.groups, R, 4)
        n_cb = -(-c.W.shape[1] // C)
        assert t["tiles"] * n_cb == len(st.tiles) and t["issued"] * n_cb == len(st.slots), c.name
        assert all(len(tile.tokens) % c.grid[2] == 0 and tile.tokens[0] % c.grid[2] == 0 for tile in st.tiles)


def test_stream_rejects_a_w0_token_that_reuses():
    from hw.config import load_config
    from sim.timing.stream import build_stream
    from tests.rtl.cases import spatial_cases

    c = spatial_cases(8, 8)[0]
    dec = c.decisions.copy()
    dec[4, 0] = REUSE  # token 4 is w = 0 (W = 4) of group 0, axis w
    with pytest.raises(ValueError, match="w = 0 token has no neighbour"):
        build_stream(c.X, c.W, c.grid, c.groups, dec, 4, load_config("tiny-8x8"))


def test_simulate_rejects_w_wider_than_the_array():
    from algo.trace import Group, OpRecord, Trace
    from hw.config import load_config
    from sim.engines.model import SimError, check_compatible

    rng = np.random.default_rng(0)
    op = OpRecord("qk", 0, 0, rng.integers(-5, 5, size=(1, 18, 4)).astype(np.int8),
                  rng.integers(-5, 5, size=(1, 4, 8)).astype(np.int8), [Group(0, 4, "w", "t")], (2.0, 6.0))
    tr = Trace(grid=(2, 1, 9), ops=[op], model="synthetic", size="test", weights="random")
    with pytest.raises(SimError, match="W = 9 positions > array_rows = 8"):
        check_compatible(tr, load_config("tiny-8x8"))
