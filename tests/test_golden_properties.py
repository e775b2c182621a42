"""Property-based and hand-worked checks of the golden model beyond tests/test_golden.py.

Hypothesis draws shapes, grids, axes, b_msb, signedness and thresholds; the vectorised model must
equal the plain-Python reference (tests/reference.py) exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE, apply_decisions, decide, group_decisions, reuse_gemm
from tests import reference as ref


@st.composite
def problems(draw):
    F, H, W = (draw(st.integers(1, 3)) for _ in range(3))  # noqa: N806
    M = F * H * W  # noqa: N806
    widths = draw(st.lists(st.integers(1, 4), min_size=1, max_size=4))
    axes = draw(st.lists(st.sampled_from("fhw"), min_size=len(widths), max_size=len(widths)))
    groups, k = [], 0
    for w, a in zip(widths, axes, strict=True):
        groups.append((k, k + w, a))
        k += w
    unsigned = draw(st.booleans())
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    # Values near each other so that every decision kind occurs.
    base = rng.integers(0 if unsigned else -128, 256 if unsigned else 128, size=(1, k))
    noise = rng.integers(-6, 7, size=(M, k))
    lo, hi = (0, 255) if unsigned else (-128, 127)
    X = np.clip(base + noise, lo, hi).astype(np.uint8 if unsigned else np.int8)  # noqa: N806
    X[rng.random((M, k)) < 0.1] = lo  # extremes, e.g. -128
    N = draw(st.integers(1, 3))  # noqa: N806
    Wm = rng.integers(-128, 128, size=(k, N)).astype(np.int8)  # noqa: N806
    t1 = draw(st.sampled_from([0, 0.5, 1, 2, 3.5, 8]))
    t2 = t1 + draw(st.sampled_from([0, 0.25, 1, 4, 100]))
    b_msb = draw(st.integers(1, 7))
    return X, Wm, (F, H, W), groups, (t1, t2), b_msb


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_vectorised_equals_reference(p):
    X, W, grid, groups, theta, b_msb = p  # noqa: N806
    Y, dec = reuse_gemm(X, W, grid, groups, theta, b_msb)  # noqa: N806
    ref_y, ref_dec = ref.reuse_gemm(X, W, grid, groups, theta, b_msb)
    assert np.array_equal(group_decisions(dec, groups), np.asarray(ref_dec, dtype=np.int8))
    assert np.array_equal(Y, np.asarray(ref_y, dtype=np.int64))
    assert np.array_equal(apply_decisions(X, W, grid, groups, dec, b_msb), Y)


@settings(max_examples=60, deadline=None)
@given(problems())
def test_theta_zero_gives_exact_gemm(p):
    X, W, grid, groups, _, b_msb = p  # noqa: N806
    Y, dec = reuse_gemm(X, W, grid, groups, (0, 0), b_msb)  # noqa: N806
    assert np.all(dec == COMPUTE)
    assert np.array_equal(Y, X.astype(np.int64) @ W.astype(np.int64))


@settings(max_examples=60, deadline=None)
@given(problems())
def test_huge_theta1_reuses_wherever_a_neighbour_exists(p):
    X, W, grid, groups, _, b_msb = p  # noqa: N806
    dec, x_eff = decide(X, grid, groups, (1e6, 1e6), b_msb)
    F, H, Wd = grid  # noqa: N806
    idx = np.arange(F * H * Wd).reshape(F, H, Wd)
    for gi, (k0, k1, axis) in enumerate(groups):
        ax = "fhw".index(axis)
        first = np.take(idx, 0, axis=ax).ravel()  # tokens without a neighbour
        has_nb = np.setdiff1d(idx.ravel(), first)
        assert np.all(dec[first, gi] == COMPUTE)
        assert np.all(dec[has_nb, gi] == REUSE)
        # every token then carries the value of the first token on its line along the axis
        line_start = np.take(idx, [0], axis=ax)
        src = np.broadcast_to(line_start, idx.shape).ravel()
        assert np.array_equal(x_eff[:, k0:k1], X[src, k0:k1].astype(np.int16))


def test_decisions_do_not_depend_on_op_order():
    """Each op's decisions depend only on its own operand: deciding ops in any order gives the same."""
    rng = np.random.default_rng(3)
    grid = (3, 2, 2)
    ops = [rng.integers(-20, 20, size=(12, 8)).astype(np.int8) for _ in range(3)]
    groups = [(0, 4, "f"), (4, 8, "w")]
    fwd = [decide(x, grid, groups, (2, 5))[0] for x in ops]
    rev = [decide(x, grid, groups, (2, 5))[0] for x in reversed(ops)][::-1]
    for a, b in zip(fwd, rev, strict=True):
        assert np.array_equal(a, b)


def test_hand_partial_after_reuse_and_minus_128():
    """Grid (3,1,1), one group of 2 channels along f, b_msb = 4, theta = (2, 10), |g| = 2 ->
    bounds b1 = ceil(2*2) = 4, b2 = ceil(10*2) = 20.

    t0: X = [-128, 5]  -> COMPUTE (no neighbour), X_eff = [-128, 5].
    t1: X = [-127, 6]  -> SAD = |(-127)-(-128)| + |6-5| = 2 < 4 -> REUSE, X_eff = [-128, 5].
    t2: X = [-120, 15] -> SAD vs X_eff(t1) = 8 + 10 = 18; 4 <= 18 < 20 -> PARTIAL:
        msb(-128) = -128, lsb(-120) = -120 - msb(-120) = -120 - (-128) = 8 -> -120
        msb(5) = 0, lsb(15) = 15 -> 15.  X_eff = [-120, 15].
    W = [[1], [1]]: Y = [-123, -123, -105].
    """
    X = np.array([[-128, 5], [-127, 6], [-120, 15]], dtype=np.int8)  # noqa: N806
    W = np.array([[1], [1]], dtype=np.int8)  # noqa: N806
    dec, x_eff = decide(X, (3, 1, 1), [(0, 2, "f")], (2, 10))
    assert dec[:, 0].tolist() == [COMPUTE, REUSE, PARTIAL]
    assert x_eff.tolist() == [[-128, 5], [-128, 5], [-120, 15]]
    Y, _ = reuse_gemm(X, W, (3, 1, 1), [(0, 2, "f")], (2, 10))  # noqa: N806
    assert Y[:, 0].tolist() == [-123, -123, -105]


def test_hand_partial_keeps_minus_128_msb():
    """PARTIAL of -113 after -128: msb(-128) = -128 (0x80), lsb(-113) = -113 - (-128) = 15 -> X_eff = -113.
    With neighbour 112 (msb 112) instead, lsb(-113) = 15 -> X_eff = 127."""
    X = np.array([[-128], [-113]], dtype=np.int8)  # noqa: N806
    dec = np.array([[COMPUTE], [PARTIAL]], dtype=np.int8)
    W = np.array([[2]], dtype=np.int8)  # noqa: N806
    assert apply_decisions(X, W, (2, 1, 1), [(0, 1, "f")], dec)[:, 0].tolist() == [-256, -226]
    X2 = np.array([[112], [-113]], dtype=np.int8)  # noqa: N806
    assert apply_decisions(X2, W, (2, 1, 1), [(0, 1, "f")], dec)[:, 0].tolist() == [224, 254]


@pytest.mark.parametrize("bad, match", [
    (dict(X=np.zeros((4, 2), np.int16)), "X must be int8 or uint8"),
    (dict(grid=(2, 1, 1)), "grid"),
    (dict(W=np.zeros((3, 1), np.int8)), "W must be"),
    (dict(theta=(3, 1)), "theta1 must not exceed theta2"),
])
def test_bad_input_names_the_argument(bad, match):
    args = dict(X=np.zeros((4, 2), np.int8), W=np.zeros((2, 1), np.int8), grid=(4, 1, 1),
                groups=[(0, 2, "f")], theta=(1, 2))
    args.update(bad)
    with pytest.raises(ValueError, match=match):
        reuse_gemm(**args)
