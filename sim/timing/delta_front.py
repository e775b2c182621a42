"""Cycles of the similarity pass in front of the delta and compact controllers (`hw.delta_front.DeltaFront`,
``kaleido_dfront`` / ``kaleido_cfront``, docs/decisions.md D103), derived from its two-stage pipeline.

Per token (raster order) the pass walks every group's ``xw_g = ceil(|g| / P)`` words twice: phase A feeds the
similarity unit, phase B writes the effective values and the controller's words. With ``W = sum_g xw_g``
(`words_per_token`), stage 1 runs cycles 1 .. 2 M W after the ``start`` cycle 0; each cycle's stage 2 follows one
cycle later. So (`front_schedule`):

- word j of group g of token t (``off_g = sum_{g' < g} xw_g'``) is written at ``2 + 2 t W + W + off_g + j``;
- token t's decision word at ``2 + 2 (t + 1) W`` (stage 2 of the next token's first phase-A word, or the cycle
  after the last token's last word);
- ``done`` pulses at ``3 + 2 M W`` (`front_cycles`).

What the trace model counts (`sim.timing.memory`, D31): one similarity pass of ``S = ceil(M K / lanes)`` cycles per
op, its head ``Sh`` serial and the rest overlapped with the array, for every organisation. The RTL front takes
``2 M W`` (two passes over the words, each group rounded up to whole words) and runs before the controller, not
beside it: `front_cycles` is what it adds to a delta or compact op run through ``kaleido_dfront`` and the
controller one after the other, which the model does not charge (D103 gives the ratio).
"""

from __future__ import annotations


def words_per_token(groups, lanes: int) -> list[int]:
    """Per group ``ceil(|g| / lanes)``: the X words of one token's group (groups ``(k0, k1, axis)``)."""
    return [-(-(k1 - k0) // lanes) for k0, k1, _ in groups]


def front_schedule(M: int, groups, lanes: int) -> tuple[dict[tuple[int, int, int], int], list[int], int]:  # noqa: N803
    """``(word_cycles, dec_cycles, done)``: the cycle (from the ``start`` cycle, 0) at which the front writes word
    ``j`` of group ``g`` of token ``t`` (key ``(t, g, j)``), each token's decision word, and the ``done`` pulse, for
    M tokens (module docstring)."""
    xw = words_per_token(groups, lanes)
    W = sum(xw)  # noqa: N806
    off = [sum(xw[:g]) for g in range(len(xw))]
    words = {(t, g, j): 2 + 2 * t * W + W + off[g] + j for t in range(M) for g in range(len(xw)) for j in range(xw[g])}
    return words, [2 + 2 * (t + 1) * W for t in range(M)], front_cycles(M, groups, lanes)


def front_cycles(M: int, groups, lanes: int) -> int:  # noqa: N803
    """Cycle of the front's ``done`` pulse after ``start``: ``3 + 2 M sum_g ceil(|g| / lanes)`` (module docstring)."""
    return 3 + 2 * M * sum(words_per_token(groups, lanes))
