"""`algo.reuse.kernels` against the NumPy golden model (`algo.reuse.golden.decide`) and a plain NumPy quantiser."""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import decide
from algo.reuse.kernels import decide_multi, quantize_int8_fast

THETAS = [(0.0, 0.0), (0.5, 2.0), (2.0, 6.0), (1.0, 1.0), (40.0, 90.0)]


def _near_tokens(rng, m, k, dtype):
    """Rows that differ from one base row by small steps, so every decision kind occurs."""
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    base = rng.integers(lo, hi + 1, size=(1, k))
    return (base + rng.integers(-7, 8, size=(m, k))).clip(lo, hi).astype(dtype)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
@pytest.mark.parametrize("grid", [(3, 4, 5), (1, 2, 3), (4, 1, 6), (2, 3, 1)])
def test_decide_multi_equals_golden(grid, dtype):
    rng = np.random.default_rng([grid[0], grid[1], grid[2], np.dtype(dtype).itemsize])
    m = int(np.prod(grid))
    x = _near_tokens(rng, m, 11, dtype)
    groups = [(0, 3, "f"), (3, 7, "h"), (7, 10, "w"), (10, 11, "f")]
    for b_msb in (1, 4, 7):
        got = decide_multi(x, grid, groups, THETAS, b_msb)
        assert got.shape == (len(THETAS), m, len(groups)) and got.dtype == np.int8
        for ti, th in enumerate(THETAS):
            np.testing.assert_array_equal(got[ti], decide(x, grid, groups, th, b_msb)[0], err_msg=f"{th} {b_msb}")
    assert {0, 1, 2} <= set(np.unique(decide_multi(x, grid, groups, [(2.0, 6.0)], 4)).tolist()) or m < 12


def test_decide_multi_carried_frames_equal_whole_grid():
    """Deciding one frame at a time with the carried effective rows equals the whole-grid decisions."""
    rng = np.random.default_rng(7)
    grid, hw = (5, 3, 4), 12
    x = _near_tokens(rng, 60, 9, np.uint8)
    groups = [(0, 4, "f"), (4, 9, "f")]
    whole = decide_multi(x, grid, groups, THETAS)
    prev = np.repeat(x[:hw].astype(np.int16)[None], len(THETAS), axis=0)
    for f in range(1, 5):
        got = decide_multi(x[f * hw:(f + 1) * hw], (1, 3, 4), groups, THETAS, prev=prev)
        np.testing.assert_array_equal(got, whole[:, f * hw:(f + 1) * hw], err_msg=f"frame {f}")
    with pytest.raises(ValueError, match="axis 'f'"):
        decide_multi(x[:hw], (1, 3, 4), [(0, 4, "h"), (4, 9, "f")], THETAS, prev=prev)
    with pytest.raises(ValueError, match="prev must be int16"):
        decide_multi(x[:hw], (1, 3, 4), groups, THETAS[:2], prev=prev)


def test_quantize_int8_fast_equals_numpy():
    rng = np.random.default_rng(3)
    for x in (rng.standard_normal((300, 7)).astype(np.float32), rng.standard_normal(5000) * 1e3,
              np.array([0.5, 1.5, 2.5, -2.5, 127.0], dtype=np.float32), np.zeros(4, np.float32)):
        amax = float(np.abs(x.astype(np.float64)).max())
        scale = amax / 127.0 if amax > 0 else 1.0
        want = np.clip(np.rint(x.astype(np.float64) / scale), -128, 127).astype(np.int8)
        q, s = quantize_int8_fast(x)
        assert s == scale and q.shape == x.shape
        np.testing.assert_array_equal(q, want)
    assert quantize_int8_fast(np.array([1.0, np.inf], np.float32)) is None
    assert quantize_int8_fast(np.array([np.nan, 1.0])) is None


def _p_reference(q: np.ndarray, k_t: np.ndarray, q_s: float, k_s: float) -> np.ndarray:
    """docs/decisions.md D34's P written out with nothing of `algo.reuse.softmax`: int64 scores,
    ``rint(255 exp(-c (rowmax - S)))`` per element in float64."""
    s = np.einsum("hmd,hdl->hml", q.astype(np.int64), k_t.astype(np.int64))
    c = q_s * k_s / np.sqrt(q.shape[2])
    return np.rint(255.0 * np.exp(-c * (s.max(-1, keepdims=True) - s))).astype(np.uint8)


@pytest.mark.parametrize("d_h,scale", [(16, 0.02), (16, 0.5), (32, 0.001), (1100, 0.02)])
def test_numerators_equal_formula(d_h, scale):
    """The compiled P (`numerators_from_scores` through `softmax.Numerators`) against the formula,
    for short and long tables (c large: most of a row is 0; c small: no zero, the table capped at
    the largest gap), equal rows (ties at
    255), chunks of 5 rows and strided rows; d_h 1100 takes the float64 score path."""
    from algo.reuse.softmax import Numerators, softmax_numerators_int8

    rng = np.random.default_rng(d_h)
    q = rng.integers(-128, 128, size=(2, 23, d_h)).astype(np.int8)
    q[:, 5] = q[:, 4]  # equal rows
    k_t = rng.integers(-128, 128, size=(2, d_h, 37)).astype(np.int8)
    k_t[:, :, 7] = k_t[:, :, 3]  # equal keys: a tie at the row maximum where one of them is it
    ref = _p_reference(q, k_t, scale, scale)
    assert (ref == 255).any() and ((ref > 0) & (ref < 255)).any() and ((ref == 0).any() or scale < 0.01)
    assert np.array_equal(softmax_numerators_int8(q, k_t, scale, scale), ref)
    assert np.array_equal(softmax_numerators_int8(q, k_t, scale, scale, chunk=5), ref)
    num = Numerators(q, k_t, scale, scale, chunk=4)
    assert np.array_equal(num.rows(1, range(2, 23, 3)), ref[1, 2:23:3])
    assert np.array_equal(num.rows(0, range(23)), ref[0])


def test_numerators_reject_bad_arrays():
    from algo.reuse.kernels import numerators_from_scores

    table = np.array([255, 3, 0], dtype=np.uint8)
    s = np.zeros((2, 3), dtype=np.float32)
    with pytest.raises(ValueError, match="numerators need"):
        numerators_from_scores(s, table, np.empty((2, 3), dtype=np.int8))
    with pytest.raises(ValueError, match="numerators need"):
        numerators_from_scores(s.astype(np.int32), table, np.empty((2, 3), dtype=np.uint8))
    with pytest.raises(ValueError, match="numerators need"):
        numerators_from_scores(np.zeros((3, 4), dtype=np.float32)[:, :3], table, np.empty((3, 3), dtype=np.uint8))
