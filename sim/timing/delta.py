"""The delta organisation: the compact organisation's band-tiles, with each token's output carried forward
as one value per output column instead of one partial sum per channel group (docs/architecture.md "Array
organisations", docs/decisions.md D68).

Why it is exact. ``Y = X_eff W`` (`algo.reuse.golden`). When every group of an op reuses along the same
axis, every group of token t has the same neighbour nb, so by linearity

    Y[t] = Y[nb] + sum over the groups g that t does not REUSE of (X_eff[t, g] - X_eff[nb, g]) W[g]

exactly in integers: a REUSE group has ``X_eff[t, g] = X_eff[nb, g]`` (its difference is 0), a COMPUTE
group's difference is ``X - X_eff[nb]`` (9 bits signed, the array's operand width `hw.pe.X_BITS`), a
PARTIAL group's ``lsb(X) - lsb(X_eff[nb])`` (``-15 .. 15`` with ``b_msb = 4``: 5 bits signed). A token
with no neighbour COMPUTEs every group (the golden model's rule) and is ``Y[t] = sum_g X[t, g] W[g]``; so is
any token that COMPUTEs every group (the *direct* form: its differences are X itself, no state read). The
compact organisation keeps, per (position, group, output column), the chain's msb partial and total (its
successor may REUSE or be PARTIAL in any group); here the state is Y itself: one value per (position,
output column), G times less, and the combine unit adds differences instead of per-group partials.

Axis classes (`classes`, docs/decisions.md D71). The identity needs one neighbour, so it is applied per *axis
class*, the groups that reuse along one axis: ``S_a[t] = S_a[nb_a] + sum over g in a not REUSE of
(X_eff[t, g] - X_eff[nb_a, g]) W[g]`` (``S_a[t]`` alone from X in the direct form, every group of a COMPUTE), and
``Y[t] = sum_a S_a[t]``. Every op of a block but ``qk`` has one class (`eligible`: the single-carry form above);
``qk``'s RoPE groups form two (t on ``w``; h and w on ``f``), so it carries two values per (token, column)
instead of compact's msb partial and total per group.

Where the carried values live. An op that is not a fused score op keeps them, per chunk, in the partial-sum
SRAM (`psum_need_bytes`, one set per class). A fused score op (``qk``) runs one query tile over **every** key
before the softmax, position block by position block with frames innermost (sim/timing/attention.py), so its
classes' carried values span all ``N`` keys (D70): the state SRAM (``state_sram_kib``, `state_need_bytes`)
holds, per class, what the next query tile reads -- an ``f`` class the tile's ``R x N`` values, a ``w`` class
the row of the pool's last position for each frame (``F x N``: the next pool of the same frame, F tiles later,
starts there), an ``h`` class its last image row (``F x W x N``).

Timing (every op): `sim.timing.compact`'s queues, band-tiles and bands -- a PARTIAL band-tile still
pairs two channels per slot (`paired_product`: one 5-bit signed difference on the split multiplier's signed
high half, the other on its 4-bit unsigned low half plus a sign correction ``-16 w`` when it is negative) --
with one change:
- *column-block groups*: the state of a pool is small, so the pools of ``s`` resident column blocks are
  worked together (`plan`): each band-tile, once its rows are loaded, issues for each of the ``s`` column
  blocks in turn (its slots ``s`` times, one per column block's weights), and X is read from DRAM once per
  column-block group rather than once per column block (`sim.cost.actions.delta_dram`). ``s`` is the
  most column blocks (up to the weight SRAM's, so X is read no more often than dense reads it) whose
  combine state fits the partial-sum SRAM with at least one frame per chunk, and the chunk's frames
  ``Fw`` the most that then fit: X passes first, packing second (D68 measures the other order).

Partial-sum SRAM of one chunk (`psum_need_bytes`), ``s`` column blocks of ``c = min(C, N)`` outputs:
the difference sums ``D[t]`` of the chunk's tokens, double-buffered (``2 Fw R s c yb``), the carried
``Y`` of the pool's positions (``R s c yb``) and the queued difference rows (``R / B x K`` 9-bit values),
``yb`` = `output_bytes` (Y's exact bound, signed); with several axis classes, a ``D`` and a carried set per class.

Difference-sum buffer (``diff_sram_kib`` > 0, docs/decisions.md D84). The chunk's band-tiles issue column block
by column block: per column-block group and chunk, the chunk's band-tiles for one column block, then for the
next (`issue_order` with ``chunks``). So only one column block's ``D`` is live; the combine unit walks one
segment (a chunk's column block) while the array fills the next ones, in ``kaleido_dcore``'s n D buffers, which
are the difference-sum buffer: an n-th of it each, words of C acc bits (`diff_buffer_words`, D122; D84 counted
two buffers of ``yb``-byte values); a segment's ``A Fw R`` words (`diff_need_words`) bound ``Fw``; the partial-sum
SRAM keeps only the carried ``Y`` and the queued rows. What a band-tile costs does not change with the order: its
rows' differences and its weights stream per slot and per column block either way
(`sim.cost.compact_actions`).

Weight stage (``wstage_sram_kib`` > 0, with the difference-sum buffer; docs/decisions.md D85). In that order a
*segment*, the chunk's band-tiles for one column block (`chunk_major`), reads only that column block's
``K x C`` weights. A small column-banked stage holds ``stage_buffers`` of them per column, filled from the weight
SRAM at ``B`` bytes per column bank and cycle (`stage_fill_cycles`: the width the B band lanes read from it
without a stage), one fill at a time. Segment i's fill waits for the buffer of segment ``i - buffers`` to be
released, and its band-tiles wait for its fill (`sim.timing.compact.band_schedule`). The bands then read the
stage, and the weight SRAM is read once per chunk and column block instead of once per band-tile.

Stage ports (docs/decisions.md D88). A column bank of the stage has one read port, as every weight bank: it is
read one word of ``2 B`` weights a cycle, round robin over the bands, into each band's word registers
(`sim.timing.compact` "Weight words").

Stage slices (docs/decisions.md D88). An op whose two column blocks do not fit a bank (``2 K > bank``: on the
balanced preset every op but qk) goes through the stage in *slices* (`stage_slices`): each group is cut into
near-equal runs of at most ``bank / B`` channels, and each slice is queued and tiled as a group of its own with
its group's decisions, so a band-tile reads one slice's weights. Within a segment the band-tiles go slice by slice
(`slice_order`); a segment is then one chunk's band-tiles of one slice for one column block, and the stage holds
``bank / width`` (at least B) slices. The weight SRAM is still read ``chunks x K x N`` bytes per op (each slice
once per chunk and column block); a token now drains one difference row per slice instead of per group, so the
difference-sum buffer and the combine unit take more rows. Exact as before: splitting a group with one decision
into slices is the same sum (tests/test_delta.py against `algo.reuse.golden`).

Combine unit: each drained band-tile row (a token's difference sum of one group, C outputs) is added into
``D[t]`` (the first written, the others read-add-write); at the chunk's end, in raster order,
``Y[t] = Y[nb] + D[t]`` (``D[t]`` alone in the direct form, ``Y[nb]`` alone when t REUSEs every group),
``Y[t]`` goes to the vector unit and, where the next frame's token reads it, stays as state
(`combine_adds_delta`). With several classes, per class ``D_a`` and ``S_a[t] = S_a[nb_a] + D_a[t]``, one
after the other, and ``Y[t] = sum_a S_a[t]`` (hw/delta_combine.py, docs/decisions.md D79).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from algo.reuse.golden import COMPUTE, REUSE
from hw.config import AcceleratorConfig
from hw.delta_combine import carried_bytes
from hw.pe import X_BITS
from sim.timing.compact import CompactError, band_rows, frames_that_fit

#: Bits of one queued difference value: the array's operand width (hw/pe.py ``X_BITS``: 9 bits signed
#: holds X - X_eff[nb] of int8 and of uint8 operands, -255..255).
DIFF_BITS = X_BITS


def paired_product(da: int, db: int, wa: int, wb: int) -> int:
    """One PAIRED slot of the delta PE: ``da wa + db wb`` for two PARTIAL differences in ``-15 .. 15``, as the
    split multiplier forms it: ``da`` on the 5-bit signed high half, ``db``'s low four bits ``db & 15`` on the
    4-bit unsigned low half, and ``-16 wb`` added when ``db < 0`` (``db = (db & 15) - 16`` then)."""
    return da * wa + (db & 15) * wb - (16 * wb if db < 0 else 0)


def classes(groups) -> list[tuple[str, list[int]]]:
    """The op's axis classes (module docstring): ``(axis, group indices)`` per reuse axis, in the order the axes
    first appear in ``groups`` (``(k0, k1, axis)`` triples)."""
    out: dict[str, list[int]] = {}
    for g, (_k0, _k1, ax) in enumerate(groups):
        out.setdefault(ax, []).append(g)
    return list(out.items())


def eligible(groups) -> bool:
    """True when every channel group reuses along the same axis: one class, the single-carry form (module
    docstring)."""
    return len(classes(groups)) == 1


def state_need_bytes(cfg: AcceleratorConfig, grid, K: int, N: int, groups) -> int:  # noqa: N803
    """State-SRAM bytes a fused score op's classes carry from one query tile to the next (module docstring):
    ``R N yb`` for an ``f`` class, ``F N yb`` for ``w``, ``F W N yb`` for ``h``; ``yb`` = `output_bytes` (K)."""
    F, _H, W = grid  # noqa: N806
    rows = {"f": cfg.array_rows, "w": F, "h": F * W}
    return sum(rows[ax] for ax, _ in classes(groups)) * N * output_bytes(K)


def output_bytes(K: int) -> int:  # noqa: N803
    """Bytes of one carried output ``Y``: its exact bound ``K x 255 x 128`` plus the sign
    (`hw.delta_combine.carried_bytes`, whose value at the largest head dimension is the state SRAM's word)."""
    return carried_bytes(K)


def psum_need_bytes(cfg: AcceleratorConfig, frames: int, col_blocks: int, K: int, N: int,  # noqa: N803
                    n_classes: int = 1) -> int:
    """Partial-sum SRAM bytes of one chunk of ``frames`` frames over ``col_blocks`` column blocks
    (module docstring), ``n_classes`` axis classes each with its own ``D`` and carried values; with a
    difference-sum buffer (``diff_sram_kib``) the ``D`` sums are not in it (`diff_need_words`)."""
    R = cfg.array_rows  # noqa: N806
    outs = R * col_blocks * min(cfg.array_cols, N) * output_bytes(K) * n_classes
    staged = 0 if cfg.diff_sram_kib else 2 * frames * outs
    return staged + outs + math.ceil(band_rows(cfg) * K * DIFF_BITS / 8)


def diff_need_words(cfg: AcceleratorConfig, frames: int, n_classes: int = 1) -> int:
    """Words (C acc bits each) of one of ``kaleido_dcore``'s D buffers that one segment of a chunk of ``frames`` frames
    takes (module docstring, D84, D122): the chunk's ``frames x R`` tokens' ``D`` per class, over the core's W
    accumulate ways (`sim.timing.delta_core.core_ways`; a (token, class) in way ``u mod W``, so each way holds
    ``ceil(A frames R / W)``): ``W ceil(A frames R / W)``."""
    from sim.timing.delta_core import core_ways

    w = core_ways(cfg)
    return w * -(-(n_classes * frames * cfg.array_rows) // w)


def diff_buffer_words(cfg: AcceleratorConfig) -> int:
    """Words of one of ``kaleido_dcore``'s n D buffers (`sim.timing.delta_core.core_d_buffers`) as built from
    ``diff_sram_kib`` (`hw.delta_combine.delta_combine_sizes`' ``d_depth``, docs/decisions.md D122): each holds one
    segment's sums, so it bounds the frames per chunk (`plan`).

    Raises:
        ValueError: a D buffer below ``array_rows`` words (the message names ``diff_sram_kib``)."""
    from hw.delta_combine import delta_combine_sizes
    from sim.timing.delta_core import core_d_buffers, core_ways

    return delta_combine_sizes(cfg, core_ways(cfg), 1, core_d_buffers(cfg))["d_depth"]


def x_window_bits(cfg: AcceleratorConfig, frames: int, pool: int, K: int) -> int:  # noqa: N803
    """Input-SRAM bits the chunk-major order (D84) needs for a chunk of ``frames`` frames of one pool of ``pool``
    positions and ``K`` channels (docs/decisions.md D130, D131): the chunk is gone over once per column block of its
    group, so it stays whole; two chunks (the one issued and the one refilled while it issues, the model overlapping
    DRAM with the array) of `DIFF_BITS` differences, ``2 frames pool K 9``, and the similarity unit's X_eff state of
    the pool (int8, ``pool K 8``)."""
    return 2 * frames * pool * K * DIFF_BITS + 8 * pool * K


def window_frames(cfg: AcceleratorConfig, pool: int, K: int, p_op: bool = False) -> int:  # noqa: N803
    """The most frames per chunk whose X the die holds (docs/decisions.md D131), 0 where not even one frame's does:
    `x_window_bits` within ``8 x 1024 input_sram_kib`` bits; for the P op of a fused attention pair (``p_op``: its X
    is P, made one query tile at a time in the score buffer, sim/timing/attention.py, and not staged in the input
    SRAM, D76) the query tiles whose scores the score buffer holds, ``frames pool K SCORE_BYTES <= 1024
    score_sram_kib`` (`sim.timing.attention.SCORE_BYTES`, 3: a query tile's exact scores)."""
    if p_op:
        from sim.timing.attention import SCORE_BYTES

        return cfg.score_sram_kib * 1024 // (pool * K * SCORE_BYTES)
    return max(0, (cfg.input_sram_kib * 8192 - 8 * pool * K) // (2 * DIFF_BITS * pool * K))


def plan(cfg: AcceleratorConfig, F: int, K: int, N: int, fused: bool = False,  # noqa: N803
         name: str = "op", groups=None, pool: int | None = None, p_op: bool = False) -> tuple[int, int]:
    """``(Fw, s)``: frames per chunk and column blocks per group (module docstring). ``fused``: a fused
    score op, one frame per chunk; ``groups``: the op's ``(k0, k1, axis)`` groups, whose axis classes
    (`classes`) each keep their own values (None: one class); ``pool``: positions a pool holds, ``min(R, H W)``
    (None: ``R = array_rows``, the most); ``p_op``: the P op of a fused attention pair.

    ``Fw`` is the most frames (docs/decisions.md D131) whose chunk fits every buffer it needs at once: the carried
    values in the partial-sum SRAM (`psum_need_bytes`), one segment's sums in one of the core's D buffers
    (`diff_need_words`, D122), and the chunk's X (`window_frames`: the input SRAM's window, or a P op's score
    buffer); at least 1 -- where not even one frame's X fits the input SRAM, `sim.cost.actions.delta_dram` reads X
    once per column block instead of once per group.

    Raises:
        CompactError: not even one frame of one column block fits the partial-sum SRAM, or one frame's sums one
        D buffer.
    """
    cap = cfg.psum_sram_kib * 1024
    n_classes = len(classes(groups)) if groups is not None else 1
    n_cb = -(-N // cfg.array_cols)
    s_w = max(1, cfg.weight_sram_kib * 1024 // (K * min(N, cfg.array_cols)))
    s = min(n_cb, s_w)
    while s > 1 and psum_need_bytes(cfg, 1, s, K, N, n_classes) > cap:
        s -= 1
    what = f"{name} (K = {K}, N = {N}, {s} column block{'s' if s > 1 else ''})"
    fw = frames_that_fit(cfg, F, lambda f: psum_need_bytes(cfg, f, s, K, N, n_classes), fused, what)
    if cfg.diff_sram_kib:  # D's frames: one segment in one of the core's D buffers, an n-th of diff_sram_kib (D122)
        try:
            have = diff_buffer_words(cfg)
        except ValueError as err:
            raise CompactError(f"array organisation {cfg.organisation!r} cannot run {what}: {err}") from None
        one = diff_need_words(cfg, 1, n_classes)
        if one > have:
            raise CompactError(
                f"array organisation {cfg.organisation!r} cannot run {what} on {cfg.name}: one frame's difference sums "
                f"need {one:,} words of a D buffer, diff_sram_kib = {cfg.diff_sram_kib:,} gives {have:,}")
        while fw > 1 and diff_need_words(cfg, fw, n_classes) > have:
            fw -= 1
    # the chunk's X: the input SRAM's window, or a fused P op's query tiles in the score buffer (D131)
    fw = max(1, min(fw, window_frames(cfg, cfg.array_rows if pool is None else pool, K, p_op)))
    return fw, s


def column_groups(n_cb: int, s: int) -> list[int]:
    """Sizes of the column-block groups: ``s`` each, the last one the rest."""
    return [min(s, n_cb - i) for i in range(0, n_cb, s)]


def issue_order(per_cb: np.ndarray, n_cb: int, s: int, chunks: np.ndarray | None = None) -> np.ndarray:
    """A per-band-tile array of one column block (its band-tile sequence) in the delta issue order (module
    docstring): per column-block group, each band-tile repeated once per column block of the group; with
    ``chunks`` (int64 ``[T]``, each band-tile's chunk, non-decreasing: a difference-sum buffer, D84), per
    column-block group and chunk, the chunk's band-tiles once per column block of the group."""
    per_cb = np.ascontiguousarray(per_cb)
    if not per_cb.size:
        return per_cb
    if chunks is None:
        return np.concatenate([np.repeat(per_cb, k) for k in column_groups(n_cb, s)])
    return per_cb[chunk_major(chunks, n_cb, s)[0]]


def chunk_major(chunks: np.ndarray, n_cb: int, s: int) -> tuple[np.ndarray, np.ndarray]:
    """The chunk-major issue order (D84) of one column block's band-tiles, each band-tile's chunk in ``chunks``
    (int64 ``[T]``, non-decreasing): ``(index, segment)``, int64 each -- for every issued band-tile, its index
    into the column block's sequence, and its *segment*, numbered from 0: the run of one chunk's band-tiles for
    one column block, which reads one buffer of the weight stage (D85)."""
    if not len(chunks):
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, np.diff(chunks) != 0, True]).astype(np.int64)
    return _chunk_major(starts, np.array(column_groups(n_cb, s), dtype=np.int64))


@numba.njit(cache=True)
def _chunk_major(starts, ks):
    """Indices of `issue_order`'s chunk-major order and each entry's segment: per group size k, per chunk
    [starts[c], starts[c + 1]), the chunk's indices k times, each time a new segment."""
    n = 0
    for k in ks:
        n += k * starts[-1]
    out = np.empty(n, dtype=np.int64)
    seg = np.empty(n, dtype=np.int64)
    i = 0
    sg = 0
    for k in ks:
        for c in range(starts.shape[0] - 1):
            for _ in range(k):
                for j in range(starts[c], starts[c + 1]):
                    out[i] = j
                    seg[i] = sg
                    i += 1
                sg += 1
    return out, seg


def stage_words(cfg: AcceleratorConfig, K: int, groups=None) -> int:  # noqa: N803
    """Half-words of ``B = compact_bands`` weights that one buffer of ``K`` weights takes in a column bank of the
    weight stage: ``ceil(K / B)``, or with the op's ``groups`` ``[(k0, k1, axis), ...]`` (a whole-K buffer) each
    group starting on its own half-word, ``Σ ceil(|g| / B)`` -- the layout `hw.delta_accel.DeltaAccel` (stage=True)
    fills, whose stage words of 2 B weights are two half-words at any half-word offset (docs/decisions.md D96, plan
    item 5: aligning channels instead would need a byte rotator of 2 B lanes per column bank)."""
    B = cfg.compact_bands  # noqa: N806
    if groups is None:
        return -(-K // B)
    return sum(-(-(k1 - k0) // B) for k0, k1, _ in groups)


def stage_buffers(cfg: AcceleratorConfig, K: int, groups=None) -> int:  # noqa: N803
    """Buffers of ``K`` weights (a column block's column, or a slice's, D88) one column bank of the weight stage holds
    (module docstring, D85): the bank's half-words over `stage_words` (with ``groups``: group-aligned, D96)."""
    if groups is None:
        return cfg.wstage_sram_kib * 1024 // cfg.array_cols // K
    return cfg.wstage_sram_kib * 1024 // cfg.array_cols // cfg.compact_bands // stage_words(cfg, K, groups)


def stages(cfg: AcceleratorConfig, K: int, groups=None) -> bool:  # noqa: N803
    """True when an op of ``K`` channels (in ``groups``, group-aligned as `stage_buffers`) reads its weights through
    the weight stage (module docstring, D85): the config has one and a column bank holds at least two column blocks'
    ``K`` weights of its column."""
    return stage_buffers(cfg, K, groups) >= 2


def stage_slices(cfg: AcceleratorConfig, groups) -> tuple[list[tuple[int, int, str]], np.ndarray, int] | None:
    """The weight stage's slices of an op whose two column blocks of weights do not fit a column bank (`stages` is
    False; module docstring, D88): each group cut into the fewest near-equal runs of channels of at most
    ``bank / B`` channels. Returns ``(slices, columns, width)`` -- the slices as ``(k0, k1, axis)``
    groups, int64 ``[len(slices)]`` the group each slice belongs to (its decision column), and the widest slice's
    channels -- or None when the config has no weight stage or difference-sum buffer, or a bank cannot hold
    one channel per band.

    A bank holds one slice per band (``B = compact_bands`` buffers of ``bank / B`` channels), so each band can
    work on a different slice and no band waits for a buffer only because the slices are many."""
    if not (cfg.wstage_sram_kib and cfg.diff_sram_kib):
        return None
    width = cfg.wstage_sram_kib * 1024 // cfg.array_cols // cfg.compact_bands
    if width < 1:
        return None
    out, cols = [], []
    for g, (k0, k1, ax) in enumerate(groups):
        n = -(-(k1 - k0) // width)
        cuts = [k0 + (k1 - k0) * i // n for i in range(n + 1)]
        out += [(cuts[i], cuts[i + 1], ax) for i in range(n)]
        cols += [g] * n
    return out, np.array(cols, dtype=np.int64), max(k1 - k0 for k0, k1, _ in out)


def slice_order(order: np.ndarray, segment: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`chunk_major`'s ``(order, segment)`` with each segment's band-tiles put slice by slice (``group``: int64
    ``[T]``, each band-tile's slice in the column block's sequence; stable within a slice): ``(order, segment)``,
    the segments now the runs of one chunk, column block and slice (D88)."""
    g = np.asarray(group, dtype=np.int64)[order]
    idx = np.lexsort((g, segment))
    o, s, g = order[idx], segment[idx], g[idx]
    new = np.r_[True, (np.diff(s) != 0) | (np.diff(g) != 0)] if len(o) else np.zeros(0, dtype=bool)
    return o, (np.cumsum(new) - 1).astype(np.int64)


def stage_fill_cycles(cfg: AcceleratorConfig, K: int, groups=None) -> int:  # noqa: N803
    """Cycles to fill one buffer of the weight stage with ``K x C`` weights (a column block's, or a slice's, D88): the
    weight SRAM delivers ``B x C`` bytes a cycle (the B band lanes' width it serves without a stage), one half-word
    per column bank, so `stage_words`: ``ceil(K / B)``, or with the op's ``groups`` (a whole-K buffer, group-aligned
    as the RTL fills it, docs/decisions.md D96) ``Σ ceil(|g| / B)``."""
    return stage_words(cfg, K, groups)


def token_terms(dec: np.ndarray) -> tuple[int, int, int]:
    """``(differences, direct, carried)`` of one op's decisions ``[M, G]``: the non-REUSE (token, group)
    pairs (each one drained difference row), the tokens that COMPUTE every group (direct form) and the
    tokens that read ``Y[nb]`` (any group not COMPUTE)."""
    dec = np.asarray(dec)
    diffs = int((dec != REUSE).sum())
    direct = int((dec == COMPUTE).all(axis=1).sum())
    return diffs, direct, dec.shape[0] - direct


def class_terms(dec: np.ndarray, groups) -> list[tuple[str, int, int, int]]:
    """``(axis, differences, direct, carried)`` of each axis class (`classes`, `token_terms` on its groups)."""
    dec = np.asarray(dec)
    return [(ax, *token_terms(dec[:, idx])) for ax, idx in classes(groups)]


def combine_adds_delta(dec: np.ndarray, N: int, groups=None) -> int:  # noqa: N803
    """Combine-unit adds of one GEMM (module docstring), per output column times N, per axis class (``groups``;
    None = one class): ``D[t]`` takes ``n_t - 1`` adds for n_t difference rows, and ``S[nb] + D[t]`` one more
    where t reads ``S[nb]`` and has at least one difference (a token that REUSEs every group of the class
    copies ``S[nb]``); ``Y[t] = sum_a S_a[t]`` adds ``classes - 1`` per token."""
    dec = np.asarray(dec)
    parts = [dec] if groups is None else [dec[:, idx] for _ax, idx in classes(groups)]
    adds = dec.shape[0] * (len(parts) - 1)
    for d in parts:
        n = (d != REUSE).sum(axis=1)
        carried = ~(d == COMPUTE).all(axis=1)
        adds += int((np.maximum(n - 1, 0) + (carried & (n > 0))).sum())
    return int(N * adds)
