"""AdapTiV-like token merging on the Kaleido array (`algo.reuse.policies.token_merge`).

Every op: a token whose streamed row is within ``theta`` (mean |difference| per channel, int8 units;
default: the op's Kaleido theta1) of its temporal neighbour's effective row over *all* K channels
is merged -- SKIP on every group -- otherwise every group is FULL. Decision traces carry no
operands: a token is merged there iff Kaleido's stored decisions REUSE every group of it (the
strictest reading of "the whole token is similar"; noted in the result). The operand is read one
latent frame at a time (`algo.reuse.chunked.frame_operands`: a ``pv`` op's P is regenerated per frame
of one head, never whole; `algo.reuse.policies.merge_frames`). Kept and left out of the published
design: docs/baselines.md.
"""

from __future__ import annotations

import numpy as np

from algo.reuse.chunked import frame_operands
from algo.reuse.policies import SKIP, merge_frames, rows_to_codes

NAME = "adaptiv"
LABEL = "AdapTiV-like (token merging)"
NEEDS_OPERANDS = False


def decisions(op, ctx, params) -> tuple[list[np.ndarray], dict, str]:
    """Work codes per batch element, extra actions (none) and a note; see the module docstring."""
    G = len(op.groups)  # noqa: N806
    if op.kind != "exact":
        stored = op.decisions_for(ctx.theta_index)
        return [rows_to_codes((stored[b] == SKIP).all(axis=1), G) for b in range(op.batch)], {}, \
            "decision trace: merged iff every group REUSEs"
    theta = op.theta[0] if params.get("theta") is None else float(params["theta"])

    def merged(b: int) -> np.ndarray:
        return np.concatenate([m for m, _ in merge_frames((x for _, x in frame_operands(op, b, ctx.grid)), theta)])

    return [rows_to_codes(merged(b), G) for b in range(op.batch)], {}, ""
