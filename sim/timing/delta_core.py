"""Cycles of the delta controller's combine stage (`hw.delta_core.DeltaCore`, ``kaleido_dcore``, docs/decisions.md
D95), cycle 0 the ``start`` cycle, after ``kaleido_daccel``'s rows (`sim.timing.delta_accel.row_out_cycles`) and
``done`` (`sim.timing.delta_accel.accel_cycles`):

- a row leaving ``kaleido_daccel`` at c is written into the row FIFO at ``w = c + 1``; rows are popped one a cycle
  in leaving order (a cycle's rows in port order), row k at ``j_k = max(w_k + 1, j_{k-1} + 1)``; its accumulate
  command issues at ``j_k + 2`` (the seen bit's read between);
- the output walk starts once ``done`` has come and the accumulate pipeline is empty: at ``x = max(T_a,
  j_last + 3)`` (``T_a`` the controller's ``done``; ``x = T_a`` without rows) the phase changes, command i of the
  walk (`commands`) is generated at ``x + 1 + i`` and issued at ``x + 2 + i``; a token's ``Y`` row leaves at
  ``x + 4 + i`` for its last class's command i; ``done`` pulses at ``x + n + 4`` for n commands;
- the FIFO holds, after cycle x's writes, the rows written by x less those popped before x; its depth must cover
  the most (`core_schedule`'s ``fifo_max``).

Plain Python (the RTL benches' sizes); the cycle model of whole traces calls only `walk_done`, the same ``done`` in
closed form, and only with ``combine_timing = "rtl"`` (`sim.engines.model`, docs/decisions.md D104).
"""

from __future__ import annotations

import numpy as np


def commands(grid, n_cb: int, n_classes: int, R: int) -> list[tuple[int, int, int]]:  # noqa: N803
    """The output walk's commands in order, ``(token, column block, class)`` (`hw.delta_core` module docstring):
    per pool of R positions of a frame, per frame, per column block, per position, per class."""
    F, H, W = grid  # noqa: N806
    hw = H * W
    return [(f * hw + p, cb, a) for pool in range(0, hw, R) for f in range(F) for cb in range(n_cb)
            for p in range(pool, min(pool + R, hw)) for a in range(n_classes)]


def core_schedule(row_cycles, accel_done: int, grid, n_cb: int, n_classes: int, R: int) -> dict:  # noqa: N803
    """The combine stage's timing (module docstring).

    Args:
        row_cycles: the cycle each drained row leaves ``kaleido_daccel`` (any order); accel_done: its ``done``
            cycle; grid, n_cb, n_classes, R: the walk's sizes (`commands`).

    Returns:
        ``{"acc": int64 [rows] accumulate-command cycles (sorted), "start": x, "rows": {(token, cb): cycle of its Y
        row}, "done": cycle, "fifo_max": the most rows the FIFO holds}``.
    """
    c = np.sort(np.asarray(row_cycles, dtype=np.int64))
    j = np.empty_like(c)
    prev = None
    for k, ck in enumerate(c):
        j[k] = ck + 2 if prev is None else max(ck + 2, prev + 1)
        prev = j[k]
    x = int(accel_done) if not len(c) else max(int(accel_done), int(j[-1]) + 3)
    cmds = commands(grid, n_cb, n_classes, R)
    rows = {(t, cb): x + 4 + i for i, (t, cb, a) in enumerate(cmds) if a == n_classes - 1}
    w = c + 1
    fifo_max = max((int((w <= wk).sum() - (j < wk).sum()) for wk in np.unique(w)), default=0)
    return {"acc": j + 2, "start": x, "rows": rows, "done": x + len(cmds) + 4, "fifo_max": fifo_max}


def walk_done(row_cycles, accel_done: int, n_commands: int) -> int:
    """`core_schedule`'s ``done`` in closed form, without the walk's command list (the cycle model's
    ``combine_timing = "rtl"``, docs/decisions.md D104; tests check it equal to `core_schedule` on the RTL cases).

    Args:
        row_cycles: int64 ``[rows]``, the cycle each drained row leaves ``kaleido_daccel`` (any order); accel_done:
            its ``done`` cycle; n_commands: the output walk's commands (``len(commands(...))``: tokens x column
            blocks x axis classes).

    With the rows sorted, ``c_0 <= ... <= c_{n-1}``, the pop rule ``j_k = max(c_k + 2, j_{k-1} + 1)`` gives
    ``j_{n-1} = max_k (c_k + 2 + n - 1 - k)``; the walk starts at ``x = max(accel_done, j_{n-1} + 3)`` and ``done``
    is ``x + n_commands + 4``.
    """
    c = np.sort(np.asarray(row_cycles, dtype=np.int64))
    n = len(c)
    x = int(accel_done) if not n else max(int(accel_done), int((c + (n + 1) - np.arange(n)).max()) + 3)
    return x + int(n_commands) + 4
