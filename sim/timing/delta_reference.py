"""Plain-Python reference of the delta organisation's dataflow (`sim.timing.delta` states the rules): the
values its band-tiles and combine unit produce, through the same band-tiles as the compact organisation's
reference (`sim.timing.compact_reference.band_tiles`, PARTIAL band-tiles at full width).

`delta_gemm` computes ``Y``: each band-tile row yields its token's difference sum of one group (COMPUTE:
``sum (X - X_eff[nb]) w`` through both multiplier halves, 9-bit signed operands; PARTIAL: ``sum (lsb(X) -
lsb(X_eff[nb])) w``, two channels a slot by `sim.timing.delta.paired_product`), the combine unit adds a token's rows into ``D[t]``
and then walks the tokens in raster order: ``Y[t] = Y[nb] + D[t]``. The differences are formed from the
decisions and the neighbour's effective operand, as the similarity unit forms them when it decides (it
holds ``X_eff[nb]`` for its SAD). Tests check ``Y`` bit for bit against `algo.reuse.golden.apply_decisions`.
"""

from __future__ import annotations

import numpy as np

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE, effective_operand, split_msb
from sim.timing.compact_reference import _neighbour, _neighbour_missing, band_tiles
from sim.timing.delta import eligible, paired_product


def differences(X: np.ndarray, grid, groups, dec: np.ndarray, b_msb: int = 4) -> np.ndarray:  # noqa: N803
    """int16 ``[M, K]``: the operand the array multiplies for each (token, channel) (module docstring):
    ``X`` for every channel of a token that COMPUTEs every group (the direct form, which also covers the
    tokens without a neighbour), else ``X - X_eff[nb]`` (COMPUTE), ``lsb(X) - lsb(X_eff[nb])`` (PARTIAL),
    0 (REUSE). Each fits `sim.timing.delta.DIFF_BITS` bits signed.

    Raises:
        ValueError: groups on more than one axis (`sim.timing.delta.eligible`), or the golden model's errors.
    """
    if not eligible(groups):
        raise ValueError("the delta form needs every channel group on one reuse axis")
    x_eff = effective_operand(X, grid, groups, dec, b_msb)
    X16 = np.asarray(X).astype(np.int16)  # noqa: N806
    M = X16.shape[0]  # noqa: N806
    out = np.zeros_like(X16)
    _, lo = split_msb(X16, b_msb)
    _, lo_eff = split_msb(x_eff, b_msb)
    for t in range(M):
        if (np.asarray(dec[t]) == COMPUTE).all():  # direct form (every token without a neighbour is one)
            out[t] = X16[t]
            continue
        for g, (k0, k1, axis) in enumerate(groups):
            d = dec[t, g]
            if _neighbour_missing(t, axis, grid):
                raise ValueError(f"token {t} group {g}: not COMPUTE without a neighbour")
            nb = _neighbour(t, axis, grid)
            if d == COMPUTE:
                out[t, k0:k1] = X16[t, k0:k1] - x_eff[nb, k0:k1]
            elif d == PARTIAL:
                out[t, k0:k1] = lo[t, k0:k1] - lo_eff[nb, k0:k1]
    return out


def delta_gemm(X: np.ndarray, W: np.ndarray, grid, groups, dec: np.ndarray, rows: int, brows: int,  # noqa: N803
               fw: int, b_msb: int = 4) -> np.ndarray:
    """``Y`` int64 ``[M, N]`` computed through the delta organisation's band-tiles and combine unit.

    Args:
        X: int8/uint8 ``[M, K]``; W: int8 ``[K, N]``; dec: int8 ``[M, G]``; rows, brows, fw: pool positions,
            band-tile tokens, chunk frames (`sim.timing.delta`).
    Raises:
        ValueError: as `differences`.
    """
    diff = differences(X, grid, groups, dec, b_msb).astype(np.int64)
    M = diff.shape[0]  # noqa: N806
    W64 = W.astype(np.int64)  # noqa: N806
    widths = [k1 - k0 for k0, k1, _ in groups]
    D = np.zeros((M, W.shape[1]), dtype=np.int64)  # noqa: N806
    rows_in = np.zeros(M, dtype=np.int64)
    for bt in band_tiles(dec, grid, widths, rows, brows, fw, half_ok=b_msb >= 4):
        k0, k1, _ = groups[bt.group]
        for t in bt.compute:  # one channel a slot, both halves
            D[t] += diff[t, k0:k1] @ W64[k0:k1]
            rows_in[t] += 1
        for t in bt.partial:  # two channels a slot (b_msb >= 4), the sign-corrected pair
            d, w = diff[t, k0:k1], W64[k0:k1]
            if b_msb >= 4:
                for c in range(0, k1 - k0, 2):
                    if c + 1 < k1 - k0:
                        D[t] += [paired_product(int(d[c]), int(d[c + 1]), int(w[c, n]), int(w[c + 1, n]))
                                 for n in range(w.shape[1])]
                    else:
                        D[t] += d[c] * w[c]
            else:
                D[t] += d @ w
            rows_in[t] += 1
    want = (np.asarray(dec) != REUSE).sum(axis=1)
    assert np.array_equal(rows_in, want), "a difference row was not drained exactly once"
    axis = groups[0][2]
    Y = np.zeros_like(D)  # noqa: N806
    for t in range(M):  # raster order: Y[nb] exists when t reads it
        direct = bool((np.asarray(dec[t]) == COMPUTE).all())
        Y[t] = D[t] if direct else Y[_neighbour(t, axis, grid)] + D[t]
    return Y
