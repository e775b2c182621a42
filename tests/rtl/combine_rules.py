"""``Y`` from the rows a banded array drained, by each organisation's combine rule, in plain Python (the
checks of tests/test_rtl_compact.py, tests/test_rtl_delta.py and the band regression, tests/rtl/band_regression.py).

A drained row is ``(token, group, n0, words)``: the token's partial of one group for the C output columns of the
column block at ``n0`` (``words`` int64 ``[C, 2]`` compact: ``out`` and ``out_m``; ``[C, 1]`` delta: the row's
difference sum). Columns past N are dropped.
"""

from __future__ import annotations

import numpy as np

from algo.reuse.golden import AXIS_INDEX, COMPUTE, PARTIAL
from sim.timing.compact_reference import _neighbour
from sim.timing.delta import classes


def compact_y(dec: np.ndarray, grid, groups, N: int, rows) -> np.ndarray:  # noqa: N803
    """int64 ``[M, N]`` by `sim.timing.compact_reference`'s combine rule: raster order, per group the new
    partial (COMPUTE), or the neighbour's msb + the new lsb (PARTIAL), or the neighbour's state (REUSE)."""
    F, H, W = grid  # noqa: N806
    M = F * H * W  # noqa: N806
    staged = {}
    for t, g, n0, got in rows:
        n = min(got.shape[0], N - n0)
        staged.setdefault((t, g), [np.zeros(N, np.int64), np.zeros(N, np.int64)])
        staged[(t, g)][0][n0:n0 + n] = got[:n, 0]
        staged[(t, g)][1][n0:n0 + n] = got[:n, 1]
    G = len(groups)  # noqa: N806
    tot, msb = np.zeros((M, G, N), np.int64), np.zeros((M, G, N), np.int64)
    Y = np.zeros((M, N), np.int64)  # noqa: N806
    for t in range(M):
        idx = list(np.unravel_index(t, (F, H, W)))
        for g, (_k0, _k1, ax) in enumerate(groups):
            d = dec[t, g]
            nb = idx.copy()
            nb[AXIS_INDEX[ax]] -= 1
            nbt = int(np.ravel_multi_index(nb, (F, H, W))) if d != COMPUTE else -1
            if d == COMPUTE:
                tot[t, g], msb[t, g] = staged[(t, g)]
            elif d == PARTIAL:
                msb[t, g] = msb[nbt, g]
                tot[t, g] = msb[nbt, g] + staged[(t, g)][0]
            else:
                tot[t, g], msb[t, g] = tot[nbt, g], msb[nbt, g]
            Y[t] += tot[t, g]
    return Y


def delta_y(dec: np.ndarray, grid, groups, N: int, rows) -> np.ndarray:  # noqa: N803
    """int64 ``[M, N]`` by the delta combine rule per axis class (`sim.timing.delta`, D71): ``D_a[t]`` the sum of
    t's rows of class a's groups, then in raster order ``S_a[t] = D_a[t]`` (direct: t COMPUTEs every group of a)
    or ``S_a[nb] + D_a[t]``, and ``Y[t] = sum_a S_a[t]``."""
    M = int(np.prod(grid))  # noqa: N806
    cls = classes(groups)
    of_group = {g: a for a, (_ax, idx) in enumerate(cls) for g in idx}
    D = np.zeros((len(cls), M, N), np.int64)  # noqa: N806
    for t, g, n0, got in rows:
        n = min(got.shape[0], N - n0)
        D[of_group[g], t, n0:n0 + n] += got[:n, 0]
    S = np.zeros_like(D)  # noqa: N806
    for a, (axis, idx) in enumerate(cls):
        for t in range(M):
            direct = (dec[t, idx] == COMPUTE).all()
            S[a, t] = D[a, t] if direct else S[a, _neighbour(t, axis, grid)] + D[a, t]
    return S.sum(axis=0)
