"""What a host writes into the compact op-level controller (`hw.compact_accel.CompactAccel`, ``kaleido_caccel``,
docs/decisions.md D97) for one op: the X bytes, the weights, the band-tile list (host path) or the decision codes
and the queues' op ports (``queues=True``), and the capacity checks. The weight, descriptor and decision words and
the group layout are the delta controller's (`hw.delta_accel_host`, re-exported here); the X words are bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from hw.compact_accel import X_BYTE_BITS
from hw.delta_accel_host import (  # noqa: F401  (re-exported: the compact host's words are these)
    SEL_DEC,
    SEL_DESC,
    SEL_W,
    SEL_X,
    dec_words,
    descriptor_word,
    group_layout,
    w_words,
)
from hw.delta_accel_host import queue_ports as _delta_queue_ports

if TYPE_CHECKING:
    from hw.compact_accel import CompactAccel


def _pack(values, bits: int) -> int:
    out, mask = 0, (1 << bits) - 1
    for i, v in enumerate(values):
        out |= (int(v) & mask) << (bits * i)
    return out


def x_words(acc: CompactAccel, X: np.ndarray, groups) -> list[tuple[int, int]]:  # noqa: N803
    """``(address, word)`` of the X buffer: ``X`` int8 or uint8 ``[M, K]``, per token and group, each group
    starting on a word of ``P`` bytes (word ``t KW + xoff_g + j``: channels ``k0 + P j ..``, lane l at bits
    ``[8 l, 8 l + 8)``, two's complement for int8).

    Raises:
        ValueError: M above ``max_tokens``, an operand outside -128 .. 255, or as `group_layout`.
    """
    X = np.asarray(X).astype(np.int64)  # noqa: N806
    M = X.shape[0]  # noqa: N806
    if M > acc.max_tokens:
        raise ValueError(f"M = {M} tokens: the controller holds {acc.max_tokens}")
    if X.size and (X.min() < -128 or X.max() > 255):
        raise ValueError("an operand outside int8 and uint8 (-128 .. 255)")
    out = []
    for (k0, k1, _), (xo, xw, _) in zip(groups, group_layout(acc, groups), strict=True):
        for t in range(M):
            for j in range(xw):
                out.append((t * acc.KW + xo + j, _pack(X[t, k0 + acc.P * j:min(k1, k0 + acc.P * (j + 1))], X_BYTE_BITS)))
    return out


def op_words(acc: CompactAccel, X: np.ndarray, W: np.ndarray, groups, tiles) -> list[tuple[int, int, int]]:  # noqa: N803
    """Every write of one op: ``(wr_sel, wr_addr, wr_data)``: the X buffer, the weight buffer, then one descriptor
    per band-tile of ``tiles`` (issue order; each ``(group, cb, tokens, n_compute, slots)``; empty with the queues).

    Raises:
        ValueError: more band-tiles than ``max_tiles``, or as `x_words`, `hw.delta_accel_host.w_words`,
            `hw.delta_accel_host.descriptor_word`.
    """
    tiles = list(tiles)
    if len(tiles) > acc.max_tiles:
        raise ValueError(f"{len(tiles)} band-tiles: the controller holds {acc.max_tiles}")
    out = [(SEL_X, a, w) for a, w in x_words(acc, X, groups)]
    out += [(SEL_W, a, w) for a, w in w_words(acc, np.asarray(W).astype(np.int64), groups)]
    out += [(SEL_DESC, n, descriptor_word(acc, groups, *t)) for n, t in enumerate(tiles)]
    return out


def queue_ports(acc: CompactAccel, grid, groups, fw: int, n_cb: int) -> dict[str, int]:
    """The op's ``c_*`` port values for ``kaleido_dqueue`` in compact's issue order (column block outer): the delta
    controller's (`hw.delta_accel_host.queue_ports`) with one column block per group and D68's order.

    Raises:
        ValueError: as `hw.delta_accel_host.queue_ports`.
    """
    return _delta_queue_ports(acc, grid, groups, fw, n_cb, 1, False)
