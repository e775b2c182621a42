"""Plain-Python reference of the compact organisation's dataflow: which tokens each band-tile holds and
the values the array and the combine unit produce (`sim.timing.compact` states the rules).

`band_tiles` builds the band-tiles with their token lists (the numba `sim.timing.compact.band_tile_sequence`
counts the same tiles; tests compare them), and `compact_gemm` computes ``Y`` through them: each
band-tile row yields its token's partial sums of one group (COMPUTE: ``Σ msb(x) w`` and ``Σ lsb(x) w``
on the two multiplier halves; PARTIAL: ``Σ lsb(x) w`` only), and the combine unit walks the tokens
in raster order adding, per group, the new partials or the neighbour's stored ones. Tests check it
bit for bit against `algo.reuse.golden.apply_decisions`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algo.reuse.golden import AXIS_INDEX, COMPUTE, PARTIAL, REUSE, split_msb


@dataclass(frozen=True)
class BandTile:
    """One band-tile: ``group`` index, ``slots``, and its tokens (raster indices) that COMPUTE / are PARTIAL."""

    group: int
    slots: int
    compute: tuple[int, ...]
    partial: tuple[int, ...]


def band_tiles(dec: np.ndarray, grid, widths, rows: int, brows: int, fw: int, half_ok: bool = True) -> list[BandTile]:
    """Band-tiles of one column block in issue order (`sim.timing.compact` "Queues").

    Args:
        dec: int8 ``[M, G]``; grid ``(F, H, W)``; widths: channels per group; rows: positions per pool (R);
        brows: tokens per band-tile (R / B); fw: frames per chunk; half_ok: PARTIAL tiles take half slots.
    """
    F, H, W = grid  # noqa: N806
    hw = H * W
    G = len(widths)  # noqa: N806
    half = [(w + 1) // 2 if half_ok else w for w in widths]
    qc: list[list[int]] = [[] for _ in range(G)]
    qp: list[list[int]] = [[] for _ in range(G)]
    out: list[BandTile] = []
    for p0 in range(0, hw, rows):
        for f in range(F):
            for p in range(p0, min(p0 + rows, hw)):
                t = f * hw + p
                for g in range(G):
                    if dec[t, g] == COMPUTE:
                        qc[g].append(t)
                    elif dec[t, g] == PARTIAL:
                        qp[g].append(t)
            for g in range(G):
                while len(qc[g]) >= brows:
                    out.append(BandTile(g, widths[g], tuple(qc[g][:brows]), ()))
                    qc[g] = qc[g][brows:]
                while len(qp[g]) >= brows:
                    out.append(BandTile(g, half[g], (), tuple(qp[g][:brows])))
                    qp[g] = qp[g][brows:]
            if (f + 1) % fw == 0 or f == F - 1:
                for g in range(G):
                    c, q = qc[g], qp[g]
                    if len(c) + len(q) == 0:
                        continue
                    if len(c) + len(q) <= brows:
                        out.append(BandTile(g, widths[g] if c else half[g], tuple(c), tuple(q)))
                    else:
                        k = brows - len(c)
                        out.append(BandTile(g, widths[g], tuple(c), tuple(q[:k])))
                        out.append(BandTile(g, half[g], (), tuple(q[k:])))
                    qc[g], qp[g] = [], []
    return out


def _neighbour(t: int, axis: str, grid) -> int:
    F, H, W = grid  # noqa: N806
    f, rem = divmod(t, H * W)
    h, w = divmod(rem, W)
    idx = [f, h, w]
    idx[AXIS_INDEX[axis]] -= 1
    return (idx[0] * H + idx[1]) * W + idx[2]


def compact_gemm(X: np.ndarray, W: np.ndarray, grid, groups, dec: np.ndarray, rows: int, brows: int,  # noqa: N803
                 fw: int, b_msb: int = 4) -> np.ndarray:
    """``Y`` int64 ``[M, N]`` computed through the compact organisation's band-tiles and combine unit.

    Args:
        X: int8/uint8 ``[M, K]``; W: int8 ``[K, N]``; dec: int8 ``[M, G]`` (`algo.reuse.golden.decide`);
        rows, brows, fw: pool positions, band-tile tokens, chunk frames (`sim.timing.compact`).
    Raises:
        ValueError: a REUSE or PARTIAL token without a neighbour (the golden model's rule).
    """
    M, _ = X.shape  # noqa: N806
    N = W.shape[1]  # noqa: N806
    widths = [k1 - k0 for k0, k1, _ in groups]
    hi, lo = split_msb(X, b_msb)
    W64 = W.astype(np.int64)  # noqa: N806
    staged: dict[tuple[int, int], tuple[np.ndarray | None, np.ndarray]] = {}
    for bt in band_tiles(dec, grid, widths, rows, brows, fw, b_msb >= 4):
        k0, k1, _ = groups[bt.group]
        w = W64[k0:k1]
        for t in bt.compute:  # both multiplier halves
            staged[(t, bt.group)] = (hi[t, k0:k1].astype(np.int64) @ w, lo[t, k0:k1].astype(np.int64) @ w)
        for t in bt.partial:  # the low half only
            staged[(t, bt.group)] = (None, lo[t, k0:k1].astype(np.int64) @ w)
    # combine unit: raster order (frames outer), so every neighbour's state exists when read
    state_m = np.zeros((M, len(groups), N), dtype=np.int64)
    state_l = np.zeros((M, len(groups), N), dtype=np.int64)
    Y = np.zeros((M, N), dtype=np.int64)  # noqa: N806
    for t in range(M):
        for g, (_, _, axis) in enumerate(groups):
            d = dec[t, g]
            if d != COMPUTE:
                nb = _neighbour(t, axis, grid)
                if nb < 0 or _neighbour_missing(t, axis, grid):
                    raise ValueError(f"token {t} group {g}: {'REUSE' if d == REUSE else 'PARTIAL'} without a neighbour")
            if d == COMPUTE:
                m, lo_ = staged.pop((t, g))
            elif d == PARTIAL:
                _, lo_ = staged.pop((t, g))
                m = state_m[nb, g]
            else:
                m, lo_ = state_m[nb, g], state_l[nb, g]
            state_m[t, g], state_l[t, g] = m, lo_
            Y[t] += m + lo_
    assert not staged, "a staged partial was never combined"
    return Y


def _neighbour_missing(t: int, axis: str, grid) -> bool:
    F, H, W = grid  # noqa: N806
    f, rem = divmod(t, H * W)
    h, w = divmod(rem, W)
    return {"f": f, "h": h, "w": w}[axis] == 0
