"""Plain-Python reference of the reuse algorithm (docs/spec.md §2), used only by tests.

Written from the text of docs/spec.md §2 alone, independently of `algo.reuse.golden`: Python ints, explicit loops, no
numpy arithmetic. Inputs may be numpy arrays or nested lists; they are converted to lists of Python
ints first, so int8/uint8 wrap-around can never happen here.

- Tokens are in raster order ``i = f*H*W + h*W + w``; the neighbour along an axis is the token one
  step back along it, none at the grid edge.
- ``msb(v) = (v >> b_lsb) << b_lsb`` with Python's arithmetic (floor) shift, ``lsb(v) = v - msb(v)``.
- Decision per (token, group): ``SAD < ceil(theta1*|g|)`` -> REUSE, else ``SAD < ceil(theta2*|g|)`` ->
  PARTIAL, else COMPUTE; SAD against the neighbour's *effective* value; no neighbour -> COMPUTE.
- ``Y = X_eff @ W`` in Python ints.
"""

from __future__ import annotations

import math
from fractions import Fraction

COMPUTE, PARTIAL, REUSE = 0, 1, 2


def to_int_rows(a) -> list[list[int]]:
    """A 2-D array or nested list as a list of lists of Python ints."""
    return [[int(v) for v in row] for row in (a.tolist() if hasattr(a, "tolist") else a)]


def coords(i: int, grid: tuple[int, int, int]) -> tuple[int, int, int]:
    """``(f, h, w)`` of raster token ``i``."""
    _, H, W = grid  # noqa: N806
    return i // (H * W), (i // W) % H, i % W


def neighbour(i: int, axis: str, grid: tuple[int, int, int]) -> int | None:
    """The token one step back along ``axis`` (``"f"``, ``"h"``, ``"w"``), or None at the edge."""
    F, H, W = grid  # noqa: N806
    f, h, w = coords(i, grid)
    if axis == "f":
        return None if f == 0 else (f - 1) * H * W + h * W + w
    if axis == "h":
        return None if h == 0 else f * H * W + (h - 1) * W + w
    if axis == "w":
        return None if w == 0 else f * H * W + h * W + (w - 1)
    raise ValueError(f"bad axis {axis!r}")


def msb(v: int, b_msb: int) -> int:
    b_lsb = 8 - b_msb
    return (v >> b_lsb) << b_lsb


def lsb(v: int, b_msb: int) -> int:
    return v - msb(v, b_msb)


def exact_fraction(theta) -> Fraction:
    """theta as the decimal number it is written as (0.3 means 3/10, not the nearest double)."""
    if isinstance(theta, Fraction):
        return theta
    if isinstance(theta, int):
        return Fraction(theta)
    return Fraction(repr(float(theta)))


def bound(theta, n: int) -> int:
    """``ceil(theta * n)`` computed exactly."""
    return math.ceil(exact_fraction(theta) * n)


def reuse(X, grid, groups, theta, b_msb: int = 4):  # noqa: N803
    """Decisions ``[M][n_groups]`` and effective operand ``[M][K]`` (lists of Python ints)."""
    x = to_int_rows(X)
    M = len(x)  # noqa: N806
    K = len(x[0]) if M else 0  # noqa: N806
    assert grid[0] * grid[1] * grid[2] == M
    dec = [[COMPUTE] * len(groups) for _ in range(M)]
    eff = [[None] * K for _ in range(M)]
    for i in range(M):  # raster order: every neighbour precedes its token
        for gi, (k0, k1, axis) in enumerate(groups):
            n = k1 - k0
            nb = neighbour(i, axis, grid)
            if nb is None:
                d = COMPUTE
            else:
                sad = 0
                for k in range(k0, k1):
                    sad += abs(x[i][k] - eff[nb][k])
                if sad < bound(theta[0], n):
                    d = REUSE
                elif sad < bound(theta[1], n):
                    d = PARTIAL
                else:
                    d = COMPUTE
            dec[i][gi] = d
            for k in range(k0, k1):
                eff[i][k] = effective_value(x[i][k], None if nb is None else eff[nb][k], d, b_msb)
    return dec, eff


def effective_value(v: int, nb_eff: int | None, d: int, b_msb: int) -> int:
    if d == COMPUTE:
        return v
    if nb_eff is None:
        raise ValueError("a token without a neighbour must COMPUTE")
    if d == REUSE:
        return nb_eff
    if d == PARTIAL:
        return msb(nb_eff, b_msb) + lsb(v, b_msb)
    raise ValueError(f"bad decision {d}")


def effective_given(X, grid, groups, decisions, b_msb: int = 4):  # noqa: N803
    """Effective operand for given decisions ``[M][n_groups]``."""
    x = to_int_rows(X)
    dec = to_int_rows(decisions)
    M, K = len(x), len(x[0])  # noqa: N806
    eff = [[None] * K for _ in range(M)]
    for i in range(M):
        for gi, (k0, k1, axis) in enumerate(groups):
            nb = neighbour(i, axis, grid)
            for k in range(k0, k1):
                eff[i][k] = effective_value(x[i][k], None if nb is None else eff[nb][k], dec[i][gi], b_msb)
    return eff


def matmul(A, B) -> list[list[int]]:  # noqa: N803
    """Exact integer product of two nested lists (Python ints)."""
    a, b = to_int_rows(A), to_int_rows(B)
    K, N = len(b), len(b[0])  # noqa: N806
    out = []
    for row in a:
        assert len(row) == K
        out.append([sum(row[k] * b[k][n] for k in range(K)) for n in range(N)])
    return out


def reuse_gemm(X, W, grid, groups, theta, b_msb: int = 4):  # noqa: N803
    """``(Y, decisions)`` as nested lists of Python ints."""
    dec, eff = reuse(X, grid, groups, theta, b_msb)
    return matmul(eff, W), dec
