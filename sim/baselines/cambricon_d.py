"""Cambricon-D-like inter-step delta computing on the Kaleido array.

Linear ops (``qkv``, ``o_proj``, ``ffn1``, ``ffn2``, and ``cross_q``/``cross_o`` when present) compute
``Y_s = Y_{s-1} + (X_s - X_{s-1}) W`` against the previous captured step of the same op
(`sim.baselines.history`): per (token, group), all deltas 0 -> SKIP, all within -8..7 -> HALF
(4-bit multiplier half, paired two per slot by the matcher), else FULL
(`algo.reuse.policies.delta_codes`). Memory: the previous step's X (``M K`` bytes) and Y
(``M N`` values of ``ceil(acc_bits / 8)`` bytes, kept at accumulator width so that the sum stays
exact) are read from DRAM and the new Y is written at that width, added to the DRAM actions.
``qk`` and ``pv`` (both operands change between steps) and the first captured step run dense.
Needs an exact trace.
"""

from __future__ import annotations

import numpy as np

from algo.reuse.policies import delta_codes
from sim.baselines.history import StepHistory
from sim.baselines.policy import all_full
from sim.cost.actions import value_bytes

NAME = "cambricon_d"
LABEL = "Cambricon-D-like (inter-step delta)"
NEEDS_OPERANDS = True
LINEAR_OPS = ("qkv", "o_proj", "ffn1", "ffn2", "cross_q", "cross_o")


def decisions(op, ctx, params) -> tuple[list[np.ndarray], dict, str]:
    """Work codes per batch element, extra DRAM actions and a note; see the module docstring."""
    if op.name not in LINEAR_OPS:
        return all_full(op), {}, ""
    prev = ctx.history.previous(op)
    if prev is None:
        return all_full(op), {}, "first captured step: computed in full"
    groups = [g.as_tuple() for g in op.groups]
    xp = StepHistory.rescaled(prev, op)
    ob = value_bytes(ctx.cfg)
    extra = {"dram_read_bytes": op.batch * (op.M * op.K + op.M * op.N * ob),
             "dram_write_bytes": op.batch * op.M * op.N * (ob - 1)}  # Y at acc width instead of int8
    return [delta_codes(op.X[b], xp[b], groups) for b in range(op.batch)], extra, ""
