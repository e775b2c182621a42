"""The previous denoising step's operand of the same op: what inter-step baselines compare against.

Inter-step policies (`sim.baselines.exion` FFN reuse, `sim.baselines.cambricon_d` delta computing)
need, for an op at step s, the same op (name, block) at the previous step. A trace holds the steps
it was captured at (e.g. 0, 40, 47, 49), so "previous" is the previous *captured* step of that op:
with gaps the operands are further apart than one sampling step, which understates inter-step
similarity (docs/baselines.md). The first captured step has no previous one and runs in full.

The previous operand is brought to the current op's quantisation scale before comparing:
``x_prev_cur = clip(rint(X_prev * x_scale_prev / x_scale), lo, hi)`` in float64 (half to even), with
the int8 range (-128..127) or uint8 (0..255) of the op -- in hardware the stored previous values
would be rescaled the same way (one multiply per element on the vector unit; not charged).
"""

from __future__ import annotations

import numpy as np

from algo.trace import OpRecord, Trace


class StepHistory:
    """Index of a trace's exact ops by (name, block) and step."""

    def __init__(self, trace: Trace):
        self._ops: dict[tuple[str, int], list[OpRecord]] = {}
        for op in trace.ops:
            self._ops.setdefault((op.name, op.block), []).append(op)
        for v in self._ops.values():
            v.sort(key=lambda o: o.step)
        self._by_step = {(op.name, op.block, op.step): op for op in trace.ops}

    def op(self, name: str, block: int, step: int) -> OpRecord | None:
        """The op ``name`` of ``block`` at ``step``, or None."""
        return self._by_step.get((name, block, step))

    def previous(self, op: OpRecord) -> OpRecord | None:
        """The same (name, block) at the latest captured step before ``op.step``, or None."""
        prev = [o for o in self._ops.get((op.name, op.block), []) if o.step < op.step]
        return prev[-1] if prev else None

    @staticmethod
    def rescaled(prev: OpRecord, cur: OpRecord) -> np.ndarray:
        """``prev.X`` in ``cur``'s quantisation scale (module docstring): int16 ``[batch, M, K]``."""
        lo, hi = (-128, 127) if cur.x_signed else (0, 255)
        v = np.rint(prev.X.astype(np.float64) * (prev.x_scale / cur.x_scale))
        return np.clip(v, lo, hi).astype(np.int16)
