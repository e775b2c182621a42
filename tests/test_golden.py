"""Golden reuse model (algo.reuse.golden) against hand-worked examples and a plain-Python reference.

Every expected value is either worked out by hand in the comments below or computed by
tests/reference.py, which is written from docs/spec.md §2 alone (Python ints and loops).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from algo.reuse.golden import (
    COMPUTE,
    PARTIAL,
    REUSE,
    apply_decisions,
    group_decisions,
    split_msb,
    theta_bounds,
)
from algo.reuse.golden import (
    reuse_gemm as spec_reuse_gemm,
)
from tests import reference as ref

C, P, R = 0, 1, 2  # COMPUTE, PARTIAL, REUSE as docs/spec.md §2 numbers them


def reuse_gemm(X, W, grid, groups, theta, b_msb=4):  # noqa: N803
    """`algo.reuse.golden.reuse_gemm` (docs/spec.md §2 form: per-channel decisions [M, K]), decisions viewed per group."""
    Y, dec = spec_reuse_gemm(X, W, grid, groups, theta, b_msb=b_msb)  # noqa: N806
    assert dec.shape == X.shape and dec.dtype == np.int8
    return Y, group_decisions(dec, groups)


def test_decision_codes():
    assert (COMPUTE, PARTIAL, REUSE) == (0, 1, 2)


# ---- hand-worked examples --------------------------------------------------------------------

def test_hand_example_mixed_axes_int8():
    # grid (F, H, W) = (2, 1, 2): raster tokens t0 = (f0, w0), t1 = (f0, w1), t2 = (f1, w0), t3 = (f1, w1).
    # Group A = channels 0..2, axis "w": t1 <- t0, t3 <- t2; t0, t2 have no w-neighbour.
    # Group B = channels 2..4, axis "f": t2 <- t0, t3 <- t1; t0, t1 have no f-neighbour.
    # theta = (1.0, 4.0), |g| = 2: bounds b1 = 2, b2 = 8 (SAD < 2 REUSE, SAD < 8 PARTIAL).
    # b_msb = 4, b_lsb = 4: msb(v) = 16 * floor(v / 16), lsb(v) = v mod 16 in [0, 16).
    X = np.array(
        [
            [10, -20, 5, -18],   # t0
            [11, -20, 40, -7],   # t1
            [-3, 100, 2, -14],   # t2
            [-1, 95, 41, -7],    # t3
        ],
        dtype=np.int8,
    )
    # t0: A no neighbour -> C; B no neighbour -> C.                      X_eff = [10, -20, 5, -18]
    # t1: A vs X_eff[t0, A] = [10, -20]: SAD = 1 + 0 = 1 < 2 -> REUSE, X_eff A = [10, -20]
    #     B no f-neighbour -> C, X_eff B = [40, -7].                       X_eff = [10, -20, 40, -7]
    # t2: A no w-neighbour -> C, X_eff A = [-3, 100]
    #     B vs X_eff[t0, B] = [5, -18]: SAD = |2-5| + |-14+18| = 3 + 4 = 7, 2 <= 7 < 8 -> PARTIAL:
    #       ch2: msb(5) = 0,     lsb(2) = 2                       -> 0 + 2 = 2
    #       ch3: msb(-18) = -32 (-18 >> 4 = -2), lsb(-14) = -14 - (-16) = 2 -> -32 + 2 = -30
    #                                                                    X_eff = [-3, 100, 2, -30]
    # t3: A vs X_eff[t2, A] = [-3, 100]: SAD = |-1+3| + |95-100| = 2 + 5 = 7 -> PARTIAL:
    #       ch0: msb(-3) = -16, lsb(-1) = -1 - (-16) = 15   -> -16 + 15 = -1
    #       ch1: msb(100) = 96, lsb(95) = 95 - 80 = 15       -> 96 + 15 = 111
    #     B vs X_eff[t1, B] = [40, -7]: SAD = 1 + 0 = 1 < 2 -> REUSE, X_eff B = [40, -7]
    #                                                                    X_eff = [-1, 111, 40, -7]
    W = np.array([[1, 2], [1, -1], [1, 0], [1, 3]], dtype=np.int8)
    # Y[:, 0] = a + b + c + d;  Y[:, 1] = 2a - b + 3d
    # t0: 10 - 20 + 5 - 18 = -23;    20 + 20 - 54 = -14
    # t1: 10 - 20 + 40 - 7 = 23;     20 + 20 - 21 = 19
    # t2: -3 + 100 + 2 - 30 = 69;    -6 - 100 - 90 = -196
    # t3: -1 + 111 + 40 - 7 = 143;   -2 - 111 - 21 = -134
    groups = [(0, 2, "w"), (2, 4, "f")]
    Y, dec = reuse_gemm(X, W, (2, 1, 2), groups, (1.0, 4.0), b_msb=4)
    assert Y.dtype == np.int64 and Y.shape == (4, 2)
    assert dec.dtype == np.int8 and dec.shape == (4, 2)
    assert dec.tolist() == [[C, C], [R, C], [C, P], [P, R]]
    assert Y.tolist() == [[-23, -14], [23, 19], [69, -196], [143, -134]]
    # The same decisions applied explicitly give the same Y.
    assert apply_decisions(X, W, (2, 1, 2), groups, dec, b_msb=4).tolist() == Y.tolist()
    # The exact product differs on t2 and t3 (PARTIAL and REUSE change the operand):
    exact = X.astype(np.int64) @ W.astype(np.int64)
    assert exact[2].tolist() == [-3 + 100 + 2 - 14, -6 - 100 - 42]
    assert exact[2].tolist() != Y[2].tolist()


def test_hand_example_chain_compares_with_effective_value():
    # grid (4, 1, 1): a chain of frames, both groups temporal ("f"). theta = (1.5, 3.0), |g| = 2:
    # b1 = ceil(3.0) = 3, b2 = ceil(6.0) = 6.
    X = np.array(
        [
            [0, 0, -128, 127],
            [1, 1, -120, 127],
            [2, 2, -121, 126],
            [3, 3, -118, 124],
        ],
        dtype=np.int8,
    )
    # Group A (ch 0, 1):
    #   t1 vs eff t0 [0, 0]: SAD 2 < 3 -> REUSE, eff [0, 0]
    #   t2 vs eff t1 [0, 0] (NOT X[t1] = [1, 1]): SAD 4, 3 <= 4 < 6 -> PARTIAL,
    #      eff = msb(0) + lsb(2) = 2 -> [2, 2]   (against X[t1] the SAD would be 2 -> REUSE)
    #   t3 vs eff t2 [2, 2]: SAD 2 -> REUSE, eff [2, 2]
    # Group B (ch 2, 3):
    #   t1 vs [-128, 127]: SAD 8 + 0 = 8 >= 6 -> COMPUTE, eff [-120, 127]
    #   t2 vs [-120, 127]: SAD 1 + 1 = 2 -> REUSE, eff [-120, 127]
    #   t3 vs [-120, 127]: SAD 2 + 3 = 5 -> PARTIAL:
    #      msb(-120) = -128, lsb(-118) = -118 + 128 = 10 -> -118;  msb(127) = 112, lsb(124) = 12 -> 124
    # X_eff = [[0,0,-128,127], [0,0,-120,127], [2,2,-120,127], [2,2,-118,124]]
    W = np.array([[1], [1], [1], [1]], dtype=np.int8)
    # Y = row sums: -1, 7, 11, 10
    Y, dec = reuse_gemm(X, W, (4, 1, 1), [(0, 2, "f"), (2, 4, "f")], (1.5, 3.0))
    assert dec.tolist() == [[C, C], [R, C], [P, R], [R, P]]
    assert Y[:, 0].tolist() == [-1, 7, 11, 10]


def test_hand_example_uint8_partial_crosses_msb():
    # pv-style unsigned operand. grid (2, 1, 1), one temporal group of 2, theta = (0, 10):
    # b1 = 0 (never REUSE), b2 = 20.
    X = np.array([[255, 0], [239, 2]], dtype=np.uint8)
    # t1 vs [255, 0]: SAD 16 + 2 = 18 < 20 -> PARTIAL (b_msb = 4):
    #   msb(255) = 240, lsb(239) = 15 -> 255;  msb(0) = 0, lsb(2) = 2 -> 2.   X_eff[t1] = [255, 2]
    # W = [[2], [1]]: Y = [510 + 0, 510 + 2] = [510, 512]   (255 must stay 255, never -1)
    W = np.array([[2], [1]], dtype=np.int8)
    Y, dec = reuse_gemm(X, W, (2, 1, 1), [(0, 2, "f")], (0, 10))
    assert dec.tolist() == [[C], [P]]
    assert Y.tolist() == [[510], [512]]
    # With b_msb = 2 (b_lsb = 6): msb(255) = 192, lsb(239) = 239 - 192 = 47 -> 239; msb(0) + lsb(2) = 2.
    Y2, _ = reuse_gemm(X, W, (2, 1, 1), [(0, 2, "f")], (0, 10), b_msb=2)
    assert Y2.tolist() == [[510], [478 + 2]]


def test_large_theta_reuses_the_first_frame():
    # theta1 = 255 exceeds any mean |difference|: every token with an f-neighbour REUSEs, so its
    # effective operand is the frame-0 token at the same (h, w).
    rng = np.random.default_rng(0)
    X = rng.integers(-128, 128, size=(3 * 2 * 2, 5), dtype=np.int8)
    W = rng.integers(-128, 128, size=(5, 3), dtype=np.int8)
    Y, dec = reuse_gemm(X, W, (3, 2, 2), [(0, 5, "f")], (255, 255))
    assert dec[:4].tolist() == [[C]] * 4 and dec[4:].tolist() == [[R]] * 8
    first = X[:4].astype(np.int64) @ W.astype(np.int64)
    assert Y.tolist() == np.concatenate([first, first, first]).tolist()


def test_theta_zero_is_exact():
    # theta = (0, 0): SAD < 0 never holds, so everything COMPUTEs and Y is the exact product.
    rng = np.random.default_rng(1)
    X = rng.integers(-3, 3, size=(8, 4), dtype=np.int8)
    X[4:] = X[:4]  # identical frames still COMPUTE at theta 0
    W = rng.integers(-128, 128, size=(4, 2), dtype=np.int8)
    Y, dec = reuse_gemm(X, W, (2, 2, 2), [(0, 4, "f")], (0, 0))
    assert (dec == C).all()
    assert Y.tolist() == ref.matmul(X, W)


def test_accumulation_exceeds_int32():
    # pv at 720p: K = 75,600 tokens, P = 255 (uint8), W = -128: |Y| = 75,600 * 255 * 128
    # = 2,467,584,000 > 2^31 - 1 = 2,147,483,647.
    K = 75_600  # noqa: N806
    X = np.full((1, K), 255, dtype=np.uint8)
    W = np.full((K, 2), -128, dtype=np.int8)
    W[:, 1] = 127
    Y, _ = reuse_gemm(X, W, (1, 1, 1), [(0, K, "f")], (1, 2))
    assert Y.dtype == np.int64
    assert Y.tolist() == [[-2_467_584_000, 2_448_306_000]]  # 75,600 * 255 * 127 = 2,448,306,000


# ---- split_msb -------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("b_msb", "values", "msb", "lsb"),
    [
        # b_lsb = 4: msb = 16 * floor(v / 16)
        # -128 = -8*16 + 0; -1 = -1*16 + 15; 127 = 7*16 + 15
        (4, [-128, -1, 0, 1, 127], [-128, -16, 0, 0, 112], [0, 15, 0, 1, 15]),
        # b_lsb = 5: msb = 32 * floor(v / 32); -1 = -32 + 31; 127 = 3*32 + 31
        (3, [-128, -1, 0, 1, 127], [-128, -32, 0, 0, 96], [0, 31, 0, 1, 31]),
        # b_lsb = 7: msb = 128 * floor(v / 128): -1 = -128 + 127; 127 = 0 + 127
        (1, [-128, -1, 0, 1, 127], [-128, -128, 0, 0, 0], [0, 127, 0, 1, 127]),
        # b_lsb = 1: msb = 2 * floor(v / 2): -1 = -2 + 1; 127 = 126 + 1
        (7, [-128, -1, 0, 1, 127], [-128, -2, 0, 0, 126], [0, 1, 0, 1, 1]),
    ],
)
def test_split_msb_int8(b_msb, values, msb, lsb):
    m, low = split_msb(np.array(values, dtype=np.int8), b_msb)
    assert m.tolist() == msb
    assert low.tolist() == lsb
    assert all(0 <= v < 2 ** (8 - b_msb) for v in low.tolist())
    assert (m + low).tolist() == values


@pytest.mark.parametrize(
    ("b_msb", "msb", "lsb"),
    [
        (4, [0, 240], [0, 15]),   # 255 = 15*16 + 15
        (3, [0, 224], [0, 31]),   # 255 = 7*32 + 31
        (1, [0, 128], [0, 127]),  # 255 = 128 + 127
        (7, [0, 254], [0, 1]),    # 255 = 254 + 1
    ],
)
def test_split_msb_uint8(b_msb, msb, lsb):
    m, low = split_msb(np.array([0, 255], dtype=np.uint8), b_msb)
    assert m.tolist() == msb and low.tolist() == lsb


@pytest.mark.parametrize("b_msb", [0, 8])
def test_split_msb_rejects_bad_split(b_msb):
    with pytest.raises(ValueError, match="b_msb"):
        split_msb(np.array([1], dtype=np.int8), b_msb)


def test_split_msb_matches_reference_on_all_values():
    for b_msb in range(1, 8):
        for dtype, lo, hi in ((np.int8, -128, 128), (np.uint8, 0, 256)):
            vals = list(range(lo, hi))
            m, low = split_msb(np.array(vals, dtype=dtype), b_msb)
            assert m.tolist() == [ref.msb(v, b_msb) for v in vals]
            assert low.tolist() == [ref.lsb(v, b_msb) for v in vals]


# ---- theta_bounds ----------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("theta", "n", "expected"),
    [
        (0.3, 10, 3),   # 3/10 * 10 = 3 exactly, not 4
        (0.28, 25, 7),  # float 0.28 * 25 = 7.000000000000001 would ceil to 8
        (0.14, 50, 7),  # float 0.14 * 50 = 7.000000000000001
        (1.1, 50, 55),  # float 1.1 * 50 = 55.00000000000001
        (2.2, 25, 55),  # float 2.2 * 25 = 55.00000000000001
        (0.1, 10, 1),   # Fraction(0.1) (the binary double) * 10 is just above 1 and would ceil to 2
        (0.3, 3, 1),    # 0.9 -> 1
        (1.5, 2, 3),
        (0.0, 8, 0),
        (2.25, 4, 9),
        (0.35, 6, 3),   # 2.1 -> 3
    ],
)
def test_theta_bounds_exact(theta, n, expected):
    b1, b2 = theta_bounds((theta, theta), [n])
    assert b1.tolist() == [expected] and b2.tolist() == [expected]


def test_theta_bounds_per_group():
    # theta = (0.5, 2.5), sizes [1, 2, 3, 10]: b1 = ceil(0.5, 1, 1.5, 5) = [1, 1, 2, 5],
    # b2 = ceil(2.5, 5, 7.5, 25) = [3, 5, 8, 25]
    b1, b2 = theta_bounds((0.5, 2.5), [1, 2, 3, 10])
    assert b1.tolist() == [1, 1, 2, 5]
    assert b2.tolist() == [3, 5, 8, 25]


def test_sad_at_the_bound_is_not_below_it():
    # theta1 = 0.28, |g| = 25 -> b1 = 28/100 * 25 = 7 exactly. SAD = 7 (seven channels differ by 1)
    # is not < 7: PARTIAL (b2 = ceil(5 * 25) = 125). SAD = 6 -> REUSE. A float product
    # 0.28 * 25 = 7.000000000000001 would give b1 = 8 and REUSE both.
    n = 25
    W = np.ones((n, 1), dtype=np.int8)
    X = np.zeros((3, n), dtype=np.int8)
    X[1, :7] = 1          # t1 vs t0 = zeros: SAD 7 -> PARTIAL; eff = msb(0) + lsb(1) = X[1]
    X[2, :8] = 1          # t2 vs eff t1: SAD 1 -> REUSE, eff = X[1]
    Y, dec = reuse_gemm(X, W, (3, 1, 1), [(0, n, "f")], (0.28, 5.0))
    assert dec.tolist() == [[C], [P], [R]]
    assert Y.tolist() == [[0], [7], [7]]
    X[1, 6] = 0           # SAD 6 -> REUSE, eff t1 = zeros; t2 vs zeros: SAD 8 -> PARTIAL, eff X[2]
    Y, dec = reuse_gemm(X, W, (3, 1, 1), [(0, n, "f")], (0.28, 5.0))
    assert dec.tolist() == [[C], [R], [P]]
    assert Y.tolist() == [[0], [0], [8]]


@pytest.mark.parametrize("theta", [(2.0, 1.0), (-0.5, 1.0), (0.0, float("nan")), (0.0, float("inf"))])
def test_theta_bounds_rejects(theta):
    with pytest.raises(ValueError, match="theta"):
        theta_bounds(theta, [4])


def test_reuse_gemm_rejects_theta1_above_theta2():
    X = np.zeros((2, 2), dtype=np.int8)
    with pytest.raises(ValueError, match="theta"):
        reuse_gemm(X, np.zeros((2, 1), dtype=np.int8), (2, 1, 1), [(0, 2, "f")], (1.0, 0.5))


# ---- vectorised model vs the plain-Python reference ------------------------------------------

GRIDS = [(3, 2, 4), (1, 4, 3), (5, 1, 1), (2, 3, 1), (1, 1, 1), (2, 1, 3)]
THETAS = [(0, 0), (0, 2), (1.5, 1.5), (0.5, 3.0), (2, 8), (0.3, 1.7), (4, 4)]
K = 10


def smooth_operand(rng, grid, dtype, noise):
    """Tokens close to a per-channel base value (so all three decisions occur), some at the extremes."""
    M = grid[0] * grid[1] * grid[2]  # noqa: N806
    lo, hi = (-128, 127) if dtype == np.int8 else (0, 255)
    base = rng.integers(lo, hi + 1, size=K)
    base[0], base[1] = lo, hi  # saturated channels exercise two's complement / unsigned extremes
    x = base[None, :] + rng.integers(-noise, noise + 1, size=(M, K))
    return np.clip(x, lo, hi).astype(dtype)


def group_sets(axis):
    axes = ["f", "h", "w"] if axis == "mixed" else [axis] * 3
    return [(0, 3, axes[0]), (3, 4, axes[1]), (4, K, axes[2])]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("b_msb", range(1, 8))
@pytest.mark.parametrize("axis", ["f", "h", "w", "mixed"])
def test_reuse_gemm_matches_reference(axis, b_msb, dtype):
    seed = ["f", "h", "w", "mixed"].index(axis) * 100 + b_msb * 2 + (dtype == np.uint8)
    rng = np.random.default_rng(seed)
    groups = group_sets(axis)
    seen = set()
    for grid, theta in itertools.product(GRIDS, THETAS):
        X = smooth_operand(rng, grid, dtype, noise=int(rng.integers(1, 6)))
        W = rng.integers(-128, 128, size=(K, 3), dtype=np.int8)
        Y, dec = reuse_gemm(X, W, grid, groups, theta, b_msb=b_msb)
        ref_y, ref_dec = ref.reuse_gemm(X, W, grid, groups, theta, b_msb=b_msb)
        assert dec.dtype == np.int8 and dec.shape == (X.shape[0], len(groups))
        assert Y.dtype == np.int64
        assert dec.tolist() == ref_dec, (grid, theta)
        assert Y.tolist() == ref_y, (grid, theta)
        # Consequences of docs/spec.md §2 checked on the reference too: theta1 == theta2 leaves no PARTIAL,
        # theta1 == 0 leaves no REUSE.
        if theta[0] == theta[1]:
            assert P not in {d for row in ref_dec for d in row}
        if theta[0] == 0:
            assert R not in {d for row in ref_dec for d in row}
        seen.update(d for row in ref_dec for d in row)
    assert seen == {C, P, R}  # the data exercised every decision


@pytest.mark.parametrize("dtype", [np.int8, np.uint8], ids=["int8", "uint8"])
@pytest.mark.parametrize("b_msb", [1, 3, 4, 7])
@pytest.mark.parametrize("axis", ["f", "h", "w", "mixed"])
def test_apply_decisions_matches_reference(axis, b_msb, dtype):
    rng = np.random.default_rng(1000 + b_msb + 10 * (dtype == np.uint8) + 100 * len(axis))
    groups = group_sets(axis)
    for grid in GRIDS:
        M = grid[0] * grid[1] * grid[2]  # noqa: N806
        X = smooth_operand(rng, grid, dtype, noise=40)
        W = rng.integers(-128, 128, size=(K, 2), dtype=np.int8)
        dec = rng.integers(0, 3, size=(M, len(groups))).astype(np.int8)
        for i in range(M):  # tokens without a neighbour must COMPUTE
            for gi, (_, _, ax) in enumerate(groups):
                if ref.neighbour(i, ax, grid) is None:
                    dec[i, gi] = C
        Y = apply_decisions(X, W, grid, groups, dec, b_msb=b_msb)
        assert Y.dtype == np.int64
        assert Y.tolist() == ref.matmul(ref.effective_given(X, grid, groups, dec, b_msb), W)


def test_reference_neighbours_by_hand():
    # grid (2, 2, 3): token 11 = (f1, h1, w2); f-nb 5 = (f0, h1, w2), h-nb 8 = (f1, h0, w2), w-nb 10.
    g = (2, 2, 3)
    assert [ref.neighbour(11, a, g) for a in "fhw"] == [5, 8, 10]
    # token 6 = (f1, h0, w0): f-nb 0, no h- or w-neighbour.
    assert [ref.neighbour(6, a, g) for a in "fhw"] == [0, None, None]


# ---- errors ----------------------------------------------------------------------------------

def _xw(M=4, K=4, N=2):  # noqa: N803
    return np.zeros((M, K), dtype=np.int8), np.zeros((K, N), dtype=np.int8)


def test_apply_decisions_rejects_reuse_on_first_token():
    X, W = _xw()
    dec = np.zeros((4, 1), dtype=np.int8)
    dec[0, 0] = REUSE
    with pytest.raises(ValueError, match="neighbour"):
        apply_decisions(X, W, (4, 1, 1), [(0, 4, "f")], dec)


def test_apply_decisions_rejects_partial_at_inner_edge():
    # grid (2, 2, 2), axis h: token 5 = (f1, h0, w1) has no h-neighbour though tokens precede it.
    X, W = _xw(M=8)
    dec = np.zeros((8, 2), dtype=np.int8)
    dec[7, 1] = PARTIAL  # token 7 = (f1, h1, w1) has h-neighbour 5: allowed
    apply_decisions(X, W, (2, 2, 2), [(0, 2, "f"), (2, 4, "h")], dec)
    dec[5, 1] = PARTIAL
    with pytest.raises(ValueError, match="neighbour"):
        apply_decisions(X, W, (2, 2, 2), [(0, 2, "f"), (2, 4, "h")], dec)


@pytest.mark.parametrize(
    "dec",
    [np.full((4, 1), 3, dtype=np.int8), np.full((4, 1), -1, dtype=np.int8), np.zeros((4, 2), dtype=np.int8),
     np.zeros((3, 1), dtype=np.int8)],
    ids=["value3", "negative", "too-many-groups", "too-few-tokens"],
)
def test_apply_decisions_rejects_bad_decisions(dec):
    X, W = _xw()
    with pytest.raises(ValueError):
        apply_decisions(X, W, (4, 1, 1), [(0, 4, "f")], dec)


@pytest.mark.parametrize(
    ("grid", "groups"),
    [
        ((2, 1, 1), [(0, 4, "f")]),                      # 2 tokens, X has 4
        ((2, 2, 2), [(0, 4, "f")]),                      # 8 tokens, X has 4
        ((4, 1, 1), [(0, 2, "f"), (3, 4, "f")]),         # gap at channel 2
        ((4, 1, 1), [(0, 3, "f"), (2, 4, "f")]),         # overlap
        ((4, 1, 1), [(0, 2, "f")]),                      # does not cover K = 4
        ((4, 1, 1), [(0, 2, "f"), (2, 6, "f")]),         # beyond K
        ((4, 1, 1), [(2, 4, "f"), (0, 2, "f")]),         # out of order
        ((4, 1, 1), [(0, 0, "f"), (0, 4, "f")]),         # empty group
        ((4, 1, 1), [(0, 4, "x")]),                      # unknown axis
        ((4, 1, 1), [(0, 4, "t")]),                      # RoPE name, not an axis
    ],
)
def test_bad_grid_or_groups(grid, groups):
    X, W = _xw()
    with pytest.raises(ValueError):
        reuse_gemm(X, W, grid, groups, (1, 2))
    with pytest.raises(ValueError):
        apply_decisions(X, W, grid, groups, np.zeros((4, len(groups)), dtype=np.int8))


def test_bad_operands():
    X, W = _xw()
    g = [(0, 4, "f")]
    with pytest.raises(ValueError):
        reuse_gemm(X.astype(np.int16), W, (4, 1, 1), g, (1, 2))
    with pytest.raises(ValueError):
        reuse_gemm(X[0], W, (4, 1, 1), g, (1, 2))
    with pytest.raises(ValueError):
        reuse_gemm(X, W.astype(np.int16), (4, 1, 1), g, (1, 2))
    with pytest.raises(ValueError):
        reuse_gemm(X, np.zeros((3, 2), dtype=np.int8), (4, 1, 1), g, (1, 2))


@pytest.mark.parametrize("b_msb", [0, 8])
def test_bad_b_msb_rejected_by_both_entry_points(b_msb):
    # b_msb must be 1..7 (b_lsb = 8 - b_msb >= 1, and split_msb / apply_decisions reject the rest).
    # reuse_gemm must reject it too instead of computing with a meaningless mask: with b_msb = 0
    # a PARTIAL of X = -3 against a neighbour 5 would yield 253, outside int8.
    X = np.array([[5], [-3]], dtype=np.int8)
    W = np.ones((1, 1), dtype=np.int8)
    with pytest.raises(ValueError, match="b_msb"):
        apply_decisions(X, W, (2, 1, 1), [(0, 1, "f")], np.array([[0], [1]], dtype=np.int8), b_msb=b_msb)
    with pytest.raises(ValueError, match="b_msb"):
        reuse_gemm(X, W, (2, 1, 1), [(0, 1, "f")], (0, 100), b_msb=b_msb)


def test_spec_forms_chain():
    """reuse_gemm's per-channel [M, K] decisions feed apply_decisions directly, and so does [M, G]."""
    rng = np.random.default_rng(7)
    X = rng.integers(-128, 128, size=(12, 6), dtype=np.int64).astype(np.int8)  # noqa: N806
    W = rng.integers(-128, 128, size=(6, 3), dtype=np.int64).astype(np.int8)  # noqa: N806
    groups = [(0, 2, "f"), (2, 6, "w")]
    Y, dec = spec_reuse_gemm(X, W, (3, 2, 2), groups, (40, 80))  # noqa: N806
    assert dec.shape == (12, 6)
    assert np.array_equal(apply_decisions(X, W, (3, 2, 2), groups, dec), Y)
    assert np.array_equal(apply_decisions(X, W, (3, 2, 2), groups, group_decisions(dec, groups)), Y)
    bad = dec.copy()
    bad[5, 3] = (bad[5, 2] + 1) % 3
    with pytest.raises(ValueError, match="constant inside each channel group"):
        apply_decisions(X, W, (3, 2, 2), groups, bad)
