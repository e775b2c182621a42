"""AdapTiV-like token merging on the Kaleido array (`algo.reuse.policies.token_merge`).

Every op: a token whose streamed row is within ``theta`` (mean |difference| per channel, int8 units;
default: the op's Kaleido theta1) of its temporal neighbour's effective row over *all* K channels
is merged -- SKIP on every group -- otherwise every group is FULL. Decision traces carry no
operands: a token is merged there iff Kaleido's stored decisions REUSE every group of it (the
strictest reading of "the whole token is similar"; noted in the result). Kept and left out of
the published design: docs/baselines.md.
"""

from __future__ import annotations

import numpy as np

from algo.reuse.policies import SKIP, rows_to_codes, token_merge

NAME = "adaptiv"
LABEL = "AdapTiV-like (token merging)"
NEEDS_OPERANDS = False


def decisions(op, ctx, params) -> tuple[list[np.ndarray], dict, str]:
    """Work codes per batch element, extra actions (none) and a note; see the module docstring."""
    G = len(op.groups)  # noqa: N806
    if op.X is None:
        stored = op.decisions_for(ctx.theta_index)
        return [rows_to_codes((stored[b] == SKIP).all(axis=1), G) for b in range(op.batch)], {}, \
            "decision trace: merged iff every group REUSEs"
    theta = op.theta[0] if params.get("theta") is None else float(params["theta"])
    return [rows_to_codes(token_merge(op.X[b], ctx.grid, theta)[0], G) for b in range(op.batch)], {}, ""
