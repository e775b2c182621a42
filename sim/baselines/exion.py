"""EXION-like inter-step FFN reuse and attention-score sparsity on the Kaleido array.

- ``ffn1``: a token skips (SKIP on every group) when its input is within ``theta`` (mean |difference|
  per channel, int8 units; default: the op's Kaleido theta1) of the same block's ``ffn1`` input at
  the previous captured step (`sim.baselines.history`), `algo.reuse.policies.interstep_rows`;
  ``ffn2`` skips the same tokens (the token's whole FFN output is reused). A skipped row's previous
  output is read back from DRAM: ``N`` bytes (int8) per skipped row, added to ``dram_read_bytes``.
  The first captured step of a block runs in full.
- ``pv``: softmax numerators ``P <= p_min`` are dropped (`algo.reuse.policies.prune_scores`);
  a (token, group) whose P values are all dropped is SKIP (P read one latent frame of one head at a
  time, `algo.reuse.chunked.frame_operands`: regenerated, never whole). ``qk`` runs dense (see docs/baselines.md:
  on an output-stationary array a score can be skipped only with its whole R x C output tile).
- Other ops run dense. Needs an exact trace (operands).
"""

from __future__ import annotations

import numpy as np

from algo.reuse.chunked import frame_operands
from algo.reuse.policies import interstep_rows, prune_codes, rows_to_codes
from sim.baselines.history import StepHistory
from sim.baselines.policy import all_full

NAME = "exion"
LABEL = "EXION-like (inter-step FFN reuse + score sparsity)"
NEEDS_OPERANDS = True


def _ffn_skip(op, ctx, params) -> list[np.ndarray] | None:
    """Per batch element, bool [M] skipped tokens of this block's FFN at op.step (from ffn1), or None."""
    ffn1 = op if op.name == "ffn1" else ctx.history.op("ffn1", op.block, op.step)
    if ffn1 is None:
        return None
    prev = ctx.history.previous(ffn1)
    if prev is None:
        return None
    theta = ffn1.theta[0] if params.get("theta") is None else float(params["theta"])
    xp = StepHistory.rescaled(prev, ffn1)
    return [interstep_rows(ffn1.X[b], xp[b], theta) for b in range(ffn1.batch)]


def decisions(op, ctx, params) -> tuple[list[np.ndarray], dict, str]:
    """Work codes per batch element, extra actions and a note; see the module docstring."""
    G = len(op.groups)  # noqa: N806
    groups = [g.as_tuple() for g in op.groups]
    if op.name == "pv":
        p_min = int(params["p_min"])
        return [np.concatenate([prune_codes(p, groups, p_min) for _, p in frame_operands(op, b, ctx.grid)])
                for b in range(op.batch)], {}, ""
    if op.name in ("ffn1", "ffn2"):
        skip = _ffn_skip(op, ctx, params)
        if skip is None:
            return all_full(op), {}, "first captured step: computed in full"
        n_skip = int(sum(s.sum() for s in skip))
        return [rows_to_codes(s, G) for s in skip], {"dram_read_bytes": n_skip * op.N}, ""
    return all_full(op), {}, ""
