"""Cycles of the delta organisation's op-level controller (`hw.delta_accel.DeltaAccel`, ``kaleido_daccel``,
docs/decisions.md D91): `sim.timing.compact.band_schedule`'s list schedule and drain rule over the band-tiles in
issue order, with each band-tile's first slot no earlier than the controller's gather has staged its operands.

Gather rule (hw/delta_accel.py's docstring), cycle 0 the cycle after ``start``: band-tile n's gather starts
(its descriptor read) at

    g_n = max(g_{n-1} + 1 + u_{n-1} x xw_{n-1},  L_{n-S} + 1),   g_0 = 0,

``xw = ceil(width / P)`` X words per row (``P = lanes``), ``S = entries`` staging entries (band-tile n - S held
entry n mod S until its last slot issued at ``L_{n-S}``). The difference buffer is banked by token mod ``R / B``
(one bank per band row), each bank read once a cycle, so a band-tile's rows are read in ``u`` rounds
(`gather_rounds`: the most of its tokens in one bank; 1 when its tokens fall in distinct banks, as consecutive
tokens do), ``xw`` words each: its words are read on the ``u x xw`` cycles after ``g_n`` and written one cycle
later, so its first slot issues no earlier than ``g_n + u x xw + 3`` (a synchronous read of the last written
word the cycle after the write). Bands as `band_schedule` (the band whose
last slot issued first, ties to the lowest; back to back; a last slot waits for its drain port). Rows drain as
`sim.timing.compact.drain_reads` and leave ``C + 1`` cycles after their read; ``done`` pulses the cycle after
the last row leaves, so the op takes ``max read + C + 3`` cycles counted from the ``start`` cycle (one more than
`band_cycles`, whose cycle 0 is the array's first: here the start cycle comes first).

Plain Python over the band-tiles (the RTL benches' sizes); the cycle model of whole traces does not call it.
"""

from __future__ import annotations

import numpy as np

from hw.config import AcceleratorConfig
from sim.timing.compact import drain_reads


def gather_rounds(tokens, banks: int) -> np.ndarray:
    """int64 ``[T]``: per band-tile (``tokens``: each band-tile's row tokens), the most of its tokens in one bank
    of the difference buffer (``token mod banks``, ``banks = R / B``): the rounds its gather takes."""
    return np.array([np.bincount(np.asarray(t, dtype=np.int64) % banks).max() for t in tokens], dtype=np.int64)


def gather_words(widths: np.ndarray, lanes: int) -> np.ndarray:
    """int64 ``[T]``: X words per row of each band-tile, ``ceil(width / lanes)``."""
    return -(-np.asarray(widths, dtype=np.int64) // lanes)


def accel_schedule(s_seq: np.ndarray, rows: np.ndarray, widths: np.ndarray, rounds: np.ndarray, cfg: AcceleratorConfig,
                   entries: int, lanes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per band-tile in issue order: ``(band, first, last, gather)`` int64 ``[T]`` (module docstring; cycle 0 the
    cycle after ``start``).

    Args:
        s_seq: slots per band-tile; rows: its valid rows; widths: its group's channels; rounds: its gather rounds
            (`gather_rounds`); entries: S; lanes: P.
    """
    B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    q, ports_b = max(1, B // d), max(1, d // B)
    s = np.asarray(s_seq, dtype=np.int64)
    v = np.asarray(rows, dtype=np.int64)
    xw = gather_words(widths, lanes)
    u = np.asarray(rounds, dtype=np.int64)
    T = len(s)  # noqa: N806
    band, first, last, gather = (np.zeros(T, dtype=np.int64) for _ in range(4))
    prev = [-1] * B
    free = [[-(1 << 40)] * ports_b for _ in range(B)]
    count = [0] * B
    g_end = -1  # the last X-word cycle of the previous gather
    for t in range(T):
        g = max(g_end + 1, int(last[t - entries]) + 1 if t >= entries else 0)
        g_end = g + int(u[t] * xw[t])
        ready = g_end + 3
        b = min(range(B), key=lambda j: (prev[j], j))
        base = max(prev[b], ready - 1)
        k = count[b] % ports_b
        lt = max(base + max(1, int(s[t])), free[b][k])
        free[b][k] = lt + int(v[t]) * q
        band[t], first[t], last[t], gather[t] = b, base + 1, lt, g
        prev[b] = lt
        count[b] += 1
    return band, first, last, gather


def accel_cycles(s_seq: np.ndarray, rows: np.ndarray, widths: np.ndarray, rounds: np.ndarray, cfg: AcceleratorConfig,
                 entries: int, lanes: int) -> int:
    """Cycles of one op from the ``start`` cycle to the ``done`` pulse (module docstring): ``max read + C + 3``;
    1 without band-tiles (``done`` the cycle after ``start``)."""
    if len(s_seq) == 0:
        return 1
    band, _first, last, _g = accel_schedule(s_seq, rows, widths, rounds, cfg, entries, lanes)
    return int(drain_reads(band, last, rows, cfg).max()) + cfg.array_cols + 3


def row_out_cycles(band: np.ndarray, last: np.ndarray, rows: np.ndarray, cfg: AcceleratorConfig) -> list[np.ndarray]:
    """Per band-tile, int64 ``[rows]``: the cycle (counted from ``start``) each row leaves the controller's drain
    ports: read as `sim.timing.compact.drain_reads` (row i ``max(1, B / d)`` turns after row i - 1), out
    ``C + 1`` cycles later, plus the start cycle."""
    B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    q = max(1, B // d)
    end = drain_reads(band, last, rows, cfg)
    return [end[t] - q * (int(rows[t]) - 1 - np.arange(int(rows[t]))) + cfg.array_cols + 2 for t in range(len(end))]
