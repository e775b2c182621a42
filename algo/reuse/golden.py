"""Bit-exact golden model of Kaleido's channel-wise reuse (docs/spec.md §2).

For one GEMM ``Y = X_eff @ W`` with a streamed int8 (or uint8) operand ``X`` of M tokens in raster
order ``f*(H*W) + h*W + w`` and K channels partitioned into channel groups, each (token, group) gets
one decision:

- COMPUTE (0): ``X_eff = X``
- PARTIAL (1): ``X_eff = msb(X_eff[nb]) + lsb(X)`` (top ``b_msb`` bits reused, low bits computed)
- REUSE (2):   ``X_eff = X_eff[nb]``

where ``nb`` is the token one step back along the group's reuse axis (``"f"`` temporal, ``"h"`` or
``"w"`` spatial). The decision compares the integer ``SAD = sum |X - X_eff[nb]|`` over the group with
integer bounds ``ceil(theta * |g|)`` (`theta_bounds`): ``SAD < b1`` -> REUSE, else ``SAD < b2`` ->
PARTIAL, else COMPUTE. Tokens without a neighbour (grid edge) always COMPUTE.

Public entry points (docs/spec.md §2): `reuse_gemm` and `apply_decisions`; `decide` is the
building block they share (per-group decisions and ``X_eff``). Values are exact: Y is int64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

COMPUTE, PARTIAL, REUSE = 0, 1, 2
DECISION_NAMES = ("compute", "partial", "reuse")
AXIS_INDEX = {"f": 0, "h": 1, "w": 2}

GroupSpec = tuple[int, int, str]


def split_msb(v: np.ndarray, b_msb: int) -> tuple[np.ndarray, np.ndarray]:
    """Split integers into their top ``b_msb`` bits and the rest, for 8-bit operands.

    ``msb(v) = (v >> b_lsb) << b_lsb`` (arithmetic shift, two's complement) and
    ``lsb(v) = v - msb(v)``, in ``[0, 2**b_lsb)``, with ``b_lsb = 8 - b_msb``.
    Works for int8 and uint8 values held in any wider signed integer type.

    Args:
        v: integer array (int8/uint8 values; any integer dtype).
        b_msb: 1..7.

    Returns:
        ``(msb, lsb)`` as int16 arrays of ``v``'s shape.
    """
    if not 1 <= b_msb <= 7:
        raise ValueError(f"b_msb must be in 1..7, got {b_msb}")
    b_lsb = 8 - b_msb
    v16 = np.asarray(v).astype(np.int16)
    msb = (v16 >> b_lsb) << b_lsb
    return msb, v16 - msb


def theta_bounds(theta: tuple[float, float], group_sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Integer SAD bounds per group, the form the hardware compares.

    ``b = ceil(theta * |g|)``: for an integer SAD, ``SAD < theta*|g|`` iff ``SAD < b``. theta is read
    as the decimal it prints as (``Fraction(str(theta))``), so 0.3 * 10 gives exactly 3.

    Returns:
        ``(b1, b2)``, int64 arrays of ``len(group_sizes)``.

    Raises:
        ValueError: theta1 > theta2, a negative or non-finite theta.
    """
    t1, t2 = float(theta[0]), float(theta[1])
    if not (math.isfinite(t1) and math.isfinite(t2)) or t1 < 0 or t2 < 0:
        raise ValueError(f"theta must be finite and >= 0, got {theta}")
    if t1 > t2:
        raise ValueError(f"theta1 must not exceed theta2, got theta = ({t1}, {t2})")
    f1, f2 = Fraction(str(t1)), Fraction(str(t2))
    b1 = np.array([math.ceil(f1 * n) for n in group_sizes], dtype=np.int64)
    b2 = np.array([math.ceil(f2 * n) for n in group_sizes], dtype=np.int64)
    return b1, b2


def _check(X: np.ndarray, grid, groups) -> tuple[int, int, int]:  # noqa: N803
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D [M, K], got shape {X.shape}")
    if X.dtype not in (np.int8, np.uint8):
        raise ValueError(f"X must be int8 or uint8, got {X.dtype}")
    F, H, W = (int(v) for v in grid)  # noqa: N806
    if F * H * W != X.shape[0]:
        raise ValueError(f"grid {grid} has {F * H * W} tokens but X has {X.shape[0]} rows")
    pos = 0
    for k0, k1, axis in groups:
        if k0 != pos or k1 <= k0:
            raise ValueError(f"groups must partition 0..K in order; bad group {(k0, k1, axis)}")
        if axis not in AXIS_INDEX:
            raise ValueError(f"group axis must be one of f, h, w; got {axis!r}")
        pos = k1
    if pos != X.shape[1]:
        raise ValueError(f"groups cover 0..{pos} but K = {X.shape[1]}")
    return F, H, W


def _gemm_exact(X_eff: np.ndarray, W: np.ndarray) -> np.ndarray:  # noqa: N803
    """Exact integer GEMM, int64 result.

    Runs in float64 BLAS: every product and partial sum is an integer below
    ``K * 255 * 128 < 2**53`` for K < 2.7e11, so float64 represents each exactly.
    """
    if W.ndim != 2 or W.shape[0] != X_eff.shape[1]:
        raise ValueError(f"W must be [K, N] with K = {X_eff.shape[1]}, got {W.shape}")
    if W.dtype != np.int8:
        raise ValueError(f"W must be int8, got {W.dtype}")
    return (X_eff.astype(np.float64) @ W.astype(np.float64)).astype(np.int64)


def decide(
    X: np.ndarray,  # noqa: N803
    grid: tuple[int, int, int],
    groups: Sequence[GroupSpec],
    theta: tuple[float, float],
    b_msb: int = 4,
    return_sad: bool = False,
) -> tuple[np.ndarray, np.ndarray] | tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Decisions and effective operand of the reuse algorithm.

    Args:
        X: ``[M, K]`` int8 or uint8, raster token order.
        grid: ``(F, H, W)`` with ``F*H*W == M``.
        groups: ``(k_start, k_stop, axis)`` partitioning ``0..K``.
        theta: ``(theta1, theta2)``, mean |difference| per channel, int8 units.
        b_msb: reused high bits for PARTIAL, 1..7.
        return_sad: also return the similarity ``SAD`` of every (token, group).

    Returns:
        ``(decisions, X_eff)``: int8 ``[M, len(groups)]`` and int16 ``[M, K]``; with `return_sad`,
        also ``SAD`` int64 ``[M, len(groups)]`` (sum of |X - X_eff[nb]| over the group, int8 units;
        -1 for tokens without a neighbour).

    Raises:
        ValueError: bad shapes, dtypes, groups or thresholds.
    """
    F, H, W = _check(X, grid, groups)  # noqa: N806
    if not 1 <= b_msb <= 7:
        raise ValueError(f"b_msb must be in 1..7, got {b_msb}")
    b1, b2 = theta_bounds(theta, [k1 - k0 for k0, k1, _ in groups])
    M, K = X.shape  # noqa: N806
    dec = np.zeros((M, len(groups)), dtype=np.int8)
    sad_all = np.full((M, len(groups)), -1, dtype=np.int64)
    x_eff = np.empty((M, K), dtype=np.int16)
    lsb_mask = (1 << (8 - b_msb)) - 1
    for gi, (k0, k1, axis) in enumerate(groups):
        n = k1 - k0
        xg = X[:, k0:k1].astype(np.int16).reshape(F, H, W, n)
        eg = np.empty_like(xg)
        dg = np.zeros((F, H, W), dtype=np.int8)
        sg = np.full((F, H, W), -1, dtype=np.int64)
        ax = AXIS_INDEX[axis]
        # Move the reuse axis to the front and walk along it: every neighbour precedes its token.
        xs, es, ds = np.moveaxis(xg, ax, 0), np.moveaxis(eg, ax, 0), np.moveaxis(dg, ax, 0)
        ss = np.moveaxis(sg, ax, 0)
        es[0] = xs[0]
        for s in range(1, xs.shape[0]):
            nb = es[s - 1]
            sad = np.abs(xs[s].astype(np.int32) - nb).sum(axis=-1)
            ss[s] = sad
            d = np.where(sad < b1[gi], REUSE, np.where(sad < b2[gi], PARTIAL, COMPUTE)).astype(np.int8)
            ds[s] = d
            partial = (nb & ~lsb_mask) + (xs[s] & lsb_mask)
            es[s] = np.where((d == REUSE)[..., None], nb, np.where((d == PARTIAL)[..., None], partial, xs[s]))
        dec[:, gi] = dg.reshape(M)
        sad_all[:, gi] = sg.reshape(M)
        x_eff[:, k0:k1] = eg.reshape(M, n)
    if return_sad:
        return dec, x_eff, sad_all
    return dec, x_eff


def effective_operand(
    X: np.ndarray,  # noqa: N803
    grid: tuple[int, int, int],
    groups: Sequence[GroupSpec],
    decisions: np.ndarray,
    b_msb: int = 4,
) -> np.ndarray:
    """``X_eff`` for given decisions (``[M, len(groups)]`` int8); int16 ``[M, K]``.

    Raises:
        ValueError: shapes, decision values outside {0, 1, 2}, or a non-COMPUTE decision for a
            token that has no neighbour in that group.
    """
    F, H, W = _check(X, grid, groups)  # noqa: N806
    M, K = X.shape  # noqa: N806
    decisions = np.asarray(decisions)
    if decisions.shape != (M, len(groups)):
        raise ValueError(f"decisions must be [M, n_groups] = [{M}, {len(groups)}], got {decisions.shape}")
    if decisions.min(initial=0) < 0 or decisions.max(initial=0) > 2:
        raise ValueError("decisions must be 0 (COMPUTE), 1 (PARTIAL) or 2 (REUSE)")
    if not 1 <= b_msb <= 7:
        raise ValueError(f"b_msb must be in 1..7, got {b_msb}")
    lsb_mask = (1 << (8 - b_msb)) - 1
    x_eff = np.empty((M, K), dtype=np.int16)
    for gi, (k0, k1, axis) in enumerate(groups):
        n = k1 - k0
        xg = X[:, k0:k1].astype(np.int16).reshape(F, H, W, n)
        dg = decisions[:, gi].reshape(F, H, W)
        eg = np.empty_like(xg)
        ax = AXIS_INDEX[axis]
        xs, es, ds = np.moveaxis(xg, ax, 0), np.moveaxis(eg, ax, 0), np.moveaxis(dg, ax, 0)
        if np.any(ds[0] != COMPUTE):
            raise ValueError(
                f"group {gi} ({k0}..{k1}, axis {axis}): a token without a neighbour must be COMPUTE"
            )
        es[0] = xs[0]
        for s in range(1, xs.shape[0]):
            nb, d = es[s - 1], ds[s][..., None]
            partial = (nb & ~lsb_mask) + (xs[s] & lsb_mask)
            es[s] = np.where(d == REUSE, nb, np.where(d == PARTIAL, partial, xs[s]))
        x_eff[:, k0:k1] = eg.reshape(M, n)
    return x_eff


def channel_decisions(decisions: np.ndarray, groups: Sequence[GroupSpec]) -> np.ndarray:
    """Per-group decisions ``[M, n_groups]`` -> per-channel ``[M, K]`` (each repeated over its group)."""
    widths = [k1 - k0 for k0, k1, _ in groups]
    return np.repeat(np.asarray(decisions, dtype=np.int8), widths, axis=1)


def group_decisions(decisions: np.ndarray, groups: Sequence[GroupSpec]) -> np.ndarray:
    """Per-channel decisions ``[M, K]`` -> per-group ``[M, n_groups]``.

    Raises:
        ValueError: the decisions are not constant inside a group (a decision is per token and group).
    """
    decisions = np.asarray(decisions)
    firsts = np.array([k0 for k0, _, _ in groups], dtype=np.int64)
    per_group = decisions[:, firsts].astype(np.int8)
    if not np.array_equal(channel_decisions(per_group, groups), decisions):
        raise ValueError("per-channel decisions must be constant inside each channel group")
    return per_group


def reuse_gemm(
    X: np.ndarray,  # noqa: N803
    W: np.ndarray,  # noqa: N803
    grid: tuple[int, int, int],
    groups: Sequence[GroupSpec],
    theta: tuple[float, float],
    b_msb: int = 4,
) -> tuple[np.ndarray, np.ndarray]:
    """Run the reuse algorithm and the GEMM: ``(Y, decisions)`` (docs/spec.md §2).

    Args:
        X: ``[M, K]`` int8 or uint8 streamed operand, raster token order.
        W: ``[K, N]`` int8 stationary operand.
        grid, groups, theta, b_msb: as in `decide`.

    Returns:
        ``Y`` int64 ``[M, N]`` (``X_eff @ W``, exact) and ``decisions`` int8 ``[M, K]``: the decision of
        each token for each channel, constant inside a group (`decide` gives the ``[M, n_groups]`` form;
        `group_decisions` converts; `apply_decisions` takes either).

    Raises:
        ValueError: bad shapes, dtypes, groups, b_msb or thresholds.
    """
    dec, x_eff = decide(X, grid, groups, theta, b_msb)
    return _gemm_exact(x_eff, W), channel_decisions(dec, groups)


def apply_decisions(
    X: np.ndarray,  # noqa: N803
    W: np.ndarray,  # noqa: N803
    grid: tuple[int, int, int],
    groups: Sequence[GroupSpec],
    decisions: np.ndarray,
    b_msb: int = 4,
) -> np.ndarray:
    """``Y = X_eff @ W`` (int64 ``[M, N]``) for given decisions (docs/spec.md §2).

    Args:
        decisions: int8 ``[M, len(groups)]`` (one per token and group), or the ``[M, K]`` per-channel
            form `reuse_gemm` returns (constant inside each group).

    Raises:
        ValueError: as `effective_operand`, W not int8 ``[K, N]``, or per-channel decisions that vary
            inside a group.
    """
    decisions = np.asarray(decisions)
    if decisions.ndim == 2 and X.ndim == 2 and decisions.shape == X.shape and len(groups) != X.shape[1]:
        decisions = group_decisions(decisions, groups)
    return _gemm_exact(effective_operand(X, grid, groups, decisions, b_msb), W)


def decision_fractions(decisions: np.ndarray, groups: Sequence[GroupSpec]) -> dict[str, float]:
    """Fraction of streamed-operand elements under each decision, weighted by group width.

    Args:
        decisions: ``[..., M, n_groups]`` int8.

    Returns:
        ``{"compute": f, "partial": f, "reuse": f}`` summing to 1.
    """
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.float64)
    d = np.asarray(decisions).reshape(-1, len(groups))
    total = widths.sum() * d.shape[0]
    return {
        name: float(((d == code) * widths).sum() / total) if total else 0.0
        for code, name in enumerate(DECISION_NAMES)
    }


def default_group_size(K: int) -> int:  # noqa: N803
    """Project default G = 8 * ceil(K / 64): at most 8 blocks of G channels (docs/spec.md §2)."""
    return 8 * math.ceil(K / 64)


def block_groups(K: int, G: int | None = None, axis: str = "f") -> list[GroupSpec]:  # noqa: N803
    """Blocks of G consecutive channels (the last one shorter), all reused along `axis`."""
    G = default_group_size(K) if G is None else G  # noqa: N806
    if G <= 0:
        raise ValueError(f"group size G must be positive, got {G}")
    return [(k0, min(k0 + G, K), axis) for k0 in range(0, K, G)]
