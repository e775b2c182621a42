"""What a host writes into the op-level controller (`hw.accel.Accel`) for one op.

`op_descriptor` gives the config-register values (``c_*``, ``x_unsigned``) and checks the op
against the controller's capacity; `buffer_words` packs the operands into write-port words
(hw/accel.py's docstring, Buffers and Ports). Used by the test benches and `tests/rtl`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hw.dispatcher.matcher import channel_bits
from hw.similarity import sad_bits

if TYPE_CHECKING:
    from hw.accel import Accel


def op_descriptor(accel: Accel, grid, groups, N: int, b1, b2, x_unsigned: bool) -> dict[str, int]:  # noqa: N803
    """The config-register values (`Accel` ports ``c_*`` and ``x_unsigned``) of one op.

    Args:
        accel: the controller (its capacity is checked).
        grid: ``(F, H, W)``; groups: ``(k_start, k_stop, axis)`` partitioning ``0..K``;
        N: output channels; b1, b2: integer SAD bounds per group (`algo.reuse.golden.theta_bounds`).

    Raises:
        ValueError: a group whose axis is not ``"f"`` (h/w reuse stays on the driver-sequenced
            paths, D26), groups that do not partition ``0..K`` in order, more groups than
            ``partial_regs``, a bound outside the SAD width, or sizes beyond the controller's
            capacity (tokens, K, N, frames).
    """
    cfg = accel.cfg
    F, H, W = (int(v) for v in grid)  # noqa: N806
    for gi, (_, _, axis) in enumerate(groups):
        if axis != "f":
            raise ValueError(f"group {gi} reuses along {axis!r}: the op-level controller (hw/accel.py) "
                             "supports frame-axis ('f') groups only")
    pos = 0
    for k0, k1, _ in groups:
        if k0 != pos or k1 <= k0:
            raise ValueError(f"groups must partition 0..K in order; bad group {(k0, k1)}")
        pos = k1
    K = pos  # noqa: N806
    checks = [(len(groups), cfg.partial_regs, "channel groups", "partial_regs"),
              (F * H * W, accel.max_tokens, "tokens", "max_tokens"), (K, accel.max_k, "K", "max_k"),
              (N, accel.max_n, "N", "max_n"), (F, accel.max_frames, "frames", "max_frames")]
    for v, cap, what, name in checks:
        if not 1 <= v <= cap:
            raise ValueError(f"{what} = {v} outside 1..{cap} ({name} of this Accel)")
    cb, sb = channel_bits(cfg), sad_bits(cfg)
    for b in list(b1) + list(b2):
        if not 0 <= int(b) < 1 << sb:
            raise ValueError(f"SAD bound {b} does not fit {sb} bits")
    return {
        "c_frames": F, "c_positions": H * W, "c_k": K, "c_n": int(N), "c_n_groups": len(groups),
        "c_k0": sum(int(g[0]) << (i * cb) for i, g in enumerate(groups)),
        "c_k1": sum(int(g[1]) << (i * cb) for i, g in enumerate(groups)),
        "c_b1": sum(int(b) << (i * sb) for i, b in enumerate(b1)),
        "c_b2": sum(int(b) << (i * sb) for i, b in enumerate(b2)),
        "x_unsigned": int(x_unsigned),
    }


def buffer_words(accel: Accel, X, W) -> list[tuple[int, int, int]]:  # noqa: N803
    """The write-port words of an op's operands: ``(wr_sel, wr_addr, wr_data)`` in write order.

    Args:
        X: ``[M, K]`` int8 or uint8 (numpy); W: ``[K, N]`` int8.

    Returns:
        X words (sel 0, address ``tok*KB + j``) then W words (sel 1, address ``nb*KB + j``),
        lanes packed two's complement, lane i at bits ``[8i+7:8i]`` (module docstring).
    """
    P, C, KB = accel.P, accel.cfg.array_cols, accel.KB  # noqa: N806
    M, K = X.shape  # noqa: N806
    N = W.shape[1]  # noqa: N806
    nbeats = -(-K // P)
    out = []
    for t in range(M):
        for j in range(nbeats):
            word = 0
            for p in range(P):
                if j * P + p < K:
                    word |= (int(X[t, j * P + p]) & 0xFF) << (8 * p)
            out.append((0, t * KB + j, word))
    for nb in range(-(-N // C)):
        for j in range(nbeats):
            word = 0
            for p in range(P):
                for c in range(C):
                    k, n = j * P + p, nb * C + c
                    if k < K and n < N:
                        word |= (int(W[k, n]) & 0xFF) << (8 * (p * C + c))
            out.append((1, nb * KB + j, word))
    return out
