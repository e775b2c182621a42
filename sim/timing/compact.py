"""The compact array organisation: per-group compaction in row bands (docs/architecture.md "Array
organisations", docs/decisions.md D50).

The lockstep array (`sim.timing.cycle_model`) gives all R rows of a tile one slot sequence, so a
slot is saved only where every row agrees. Here a tile's rows need not agree:

- **Band-tiles.** The R rows are cut into ``B = compact_bands`` bands of ``R / B`` rows; each band
  has its own weight lane per column (B weights enter each column per cycle, one per band), so each
  band runs its own slot sequence. A *band-tile* is ``R / B`` tokens x C output channels of **one
  channel group g**: ``|g|`` slots when any of its tokens COMPUTEs g, ``ceil(|g| / 2)`` when all are
  PARTIAL (two channels per slot, one on each 4-bit multiplier half, as the lockstep matcher pairs;
  ``|g|`` when ``b_msb < 4``). REUSE costs no slot: a token that REUSEs g is in no band-tile of g.
- **Queues.** Tokens are taken pool by pool: a pool is one frame of one position block (R raster
  positions; issue order: column block, position block, frame -- the lockstep order). For each
  group two queues (COMPUTE tokens, PARTIAL tokens) collect the pool's tokens that need g, in pool
  order then group order; whenever a queue holds ``R / B`` tokens it issues a band-tile. Queues
  carry over from frame to frame within a *chunk* of ``Fw`` frames (`chunk_frames`) and are flushed
  at its end: the rest of g's COMPUTE queue (c tokens) and PARTIAL queue (p tokens) make one band-tile
  of ``|g|`` slots if ``c + p <= R / B`` (``ceil(|g|/2)`` if c = 0), else a full-width band-tile of
  the c COMPUTE and ``R / B - c`` PARTIAL tokens and one half-width band-tile of the rest.
- **Bands.** Band-tiles go, in issue order, to the band whose last slot issued first (list
  scheduling; ties to the lowest band). A band issues its band-tiles back to back under the drain
  rule of the lockstep contract scaled to a band: its valid partial rows (its tokens; idle rows have
  nothing to drain) leave on its share of the column's ``d`` output ports, one row per cycle:
  ``d_b = max(1, d / B)`` ports per band, used round robin, a band-tile holding its port for
  ``valid rows x max(1, B / d)`` cycles after its last slot, so ``L_t >= L_{t - d_b} + occ_{t - d_b}``
  on a band (B = 1 with full band-tiles is `sim.timing.cycle_model.op_cycles`'s rule). The op's array cycles end
  when its last valid row leaves: its read cycle (`drain_reads`) + C + `PIPELINE_CYCLES` (the same skew and
  drain path as the lockstep array; a full tile's last row is read R cycles after its last slot).
- **Weight words.** The B bands of a column read B different weights a cycle (each its own band-tile's slot),
  and a column bank of the weight SRAM (or of the delta organisation's weight stage) has one read port. So a
  bank is read one word of ``2 B`` consecutive weights of its column a cycle (`weight_word_bytes`), round robin
  over the bands, into three word registers per band and column (`weight_word_bits`: the word in use, the
  next, and one read ahead, D94), from which the band's lane takes one weight a slot (two on a PAIRED slot). A band needs a word at
  most every B cycles, which the round robin gives it, so the port does not stall a band as long as its
  band-tiles last at least B slots; the next band-tile's first word is read during the previous one's last B
  slots (docs/decisions.md D88). Not in the RTL (its band lanes take their weights from ports; the supply is
  the controller's); charged in area and as one register write per weight byte a band reads. A read of the
  bank (the delta organisation's weight stage, or the weight SRAM) is loaded into every band whose window for
  the same word holds the reading band's turn (`shared_stage_weights`, D92): bands in step on one group's
  weights read each word once, with the same timing. (The rule only: the cycle model no longer computes this count;
  the cost charges the controllers' own reads, `stage_run` and `op_port`, since D127.)
- **Combine unit.** Each drained row is one token's partial sum of one group for C outputs; the
  combine unit (``combine_lanes`` acc-bit adders) adds, per (token, group, output), the partial
  into the token's output (COMPUTE: the new partial; PARTIAL: the neighbour's msb partial + the new
  lsb partial, 2 adds; REUSE: the neighbour's stored partial) and keeps each position's per-group
  msb/lsb partials as the next frame's neighbour state, in the partial-sum SRAM (``psum_sram_kib``).
  A ``w``-axis group's neighbour is the previous position of the same frame, an ``h``-axis group's
  the previous image row: the combine walks a pool in raster order, so no row link is needed and
  ``qk`` tiles like every other op (its band-tiles take any tokens). Combine work per op:
  ``adds = N x (M G + PARTIAL (token, group) pairs)``; it overlaps the array pool by pool (staging
  double-buffered), so its stall is one pool's share after the last band-tile plus any excess of its
  total over the array's cycles (`combine_stall`).

Sizes (`chunk_frames`): per chunk the partial-sum SRAM holds, double-buffered, the staged partials of
every (token, group) of the chunk (``2 x Fw x R x G x min(C, N) x pb`` bytes, ``pb`` =
`partial_bytes`), the neighbour state (``2 x R x G x min(C, N) x pb``: msb and lsb) and the queued
operand rows of the open band-tiles (``R / B x K`` bytes at most: a queue issues whenever it holds
R / B tokens). A fused score op (``qk``, ``cross_qk``: its scores must be complete per query tile for
the softmax, sim/timing/attention.py) has ``Fw = 1``; a fused P op's queued P rows wait in that stash. An op whose ``Fw`` would be
0 cannot run (`CompactError`).

This module is the reference tiling that `sim.timing.compact_reference` computes values with and
`sim.cost.compact_actions` counts.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from hw.config import MAX_ABS_W, MAX_ABS_X, AcceleratorConfig
from sim.timing.cycle_model import PIPELINE_CYCLES


class CompactError(ValueError):
    """An op that the compact organisation cannot run on this config (partial-sum SRAM too small)."""


def combine_lanes(cfg: AcceleratorConfig) -> int:
    """Combine-unit adders: ``cfg.combine_lanes``, or ``4 x array_cols x drain_rows_per_cycle`` when unset.

    Rule (docs/decisions.md D50): the combine unit keeps pace with ``qk`` at the target reuse r_t = 0.8,
    the op with the most combine work per slot: per pool and column block it adds ``R x G x C``
    values (G = 3 RoPE groups) while the array issues about ``K (1 - r_t)`` = 25.6 slots at K = 128,
    so ``3 x 128 x 128 / 25.6 = 1,920`` adds per cycle -> 2,048 = 4 x C x d on 128 x 128, d = 4."""
    return cfg.combine_lanes if cfg.combine_lanes is not None else 4 * cfg.array_cols * cfg.drain_rows_per_cycle


def weight_word_bytes(cfg: AcceleratorConfig) -> int:
    """Bytes of one read of a weight-SRAM (or weight-stage) column bank: ``2 B`` (module docstring, "Weight
    words"): each of the B bands takes up to two weights a slot and gets a word every B cycles."""
    return 2 * cfg.compact_bands


WORD_REGISTERS = 3  # weight words a band holds per column: in use, next, and one read ahead (D88, D94)


def weight_word_bits(cfg: AcceleratorConfig) -> int:
    """Register bits of the bands' weight words (module docstring): three words of `weight_word_bytes` per band and
    column (docs/decisions.md D94: with two, a PAIRED band-tile whose last word is short and the next band-tile's
    first word need the band's one turn at once; a third register lets each band read ahead on one read port)."""
    return WORD_REGISTERS * weight_word_bytes(cfg) * 8 * cfg.compact_bands * cfg.array_cols


def band_rows(cfg: AcceleratorConfig) -> int:
    """Rows per band ``R / B`` (``B = compact_bands``)."""
    return cfg.array_rows // cfg.compact_bands


def partial_bytes(groups) -> int:
    """Bytes of one stored per-group partial sum: the widest group's ``|g| x 255 x 128`` bound, signed."""
    widest = max(k1 - k0 for k0, k1, _ in groups)
    return -(-((widest * MAX_ABS_X * MAX_ABS_W).bit_length() + 1) // 8)


def psum_need_bytes(cfg: AcceleratorConfig, frames: int, K: int, N: int, groups) -> int:  # noqa: N803
    """Partial-sum SRAM bytes a chunk of ``frames`` frames needs (module docstring, "Sizes")."""
    R = cfg.array_rows  # noqa: N806
    words = R * len(groups) * min(cfg.array_cols, N) * partial_bytes(groups)
    return 2 * frames * words + 2 * words + band_rows(cfg) * K


def chunk_frames(cfg: AcceleratorConfig, F: int, K: int, N: int, groups, fused: bool = False,  # noqa: N803
                 name: str = "op") -> int:
    """Frames per chunk ``Fw``: the most (up to F; 1 with ``fused``, a fused score op) whose needs fit
    ``psum_sram_kib``.

    Raises:
        CompactError: not even one frame fits; the message names the op, the need and the SRAM size.
    """
    return frames_that_fit(cfg, F, lambda f: psum_need_bytes(cfg, f, K, N, groups), fused,
                           f"{name} (K = {K}, N = {N}, {len(groups)} groups)")


def frames_that_fit(cfg: AcceleratorConfig, F: int, need, fused: bool, what: str) -> int:  # noqa: N803
    """The most frames (up to F; 1 with ``fused``) whose partial-sum SRAM need ``need(frames)`` (bytes, affine in
    the frames) fits ``psum_sram_kib``; shared by `chunk_frames` and `sim.timing.delta.plan`.

    Raises:
        CompactError: not even one frame fits; the message names ``what``, the need and the SRAM size.
    """
    cap = cfg.psum_sram_kib * 1024
    need1 = need(1)
    if need1 > cap:
        raise CompactError(
            f"array organisation {cfg.organisation!r} cannot run {what} on {cfg.name}: one frame's partial sums "
            f"need {math.ceil(need1 / 1024):,} KiB of partial-sum SRAM, psum_sram_kib = {cfg.psum_sram_kib:,}")
    if fused:
        return 1
    if need(2) <= need1:  # nothing in it grows with the frames (sim.timing.delta with a difference-sum buffer)
        return F
    return int(min(F, 1 + (cap - need1) // (need(2) - need1)))


@numba.njit(cache=True)
def band_tile_sequence(dec, F, hw, R, brows, fw, widths, half_ok):  # noqa: N803
    """Band-tiles of one column block in issue order (module docstring).

    Args:
        dec: int8 ``[F * hw, G]`` decisions, raster token order.
        F, hw: frames, positions per frame; R: positions per pool; brows: tokens per band-tile;
        fw: frames per chunk; widths: int64 ``[G]`` group widths; half_ok: PARTIAL tiles take half slots.
    Returns:
        ``(slots, group, n_compute, n_partial, chunk)``: int64 ``[T]`` each -- slots of each band-tile, its
        group, how many of its tokens COMPUTE / are PARTIAL, and its chunk (numbered in issue order).
    """
    G = widths.shape[0]  # noqa: N806
    npb = (hw + R - 1) // R
    cap = 2 * (F * hw * G // max(1, brows) + 2 * G * npb * ((F + fw - 1) // fw) + 1)
    slots = np.empty(cap, dtype=np.int64)
    grp = np.empty(cap, dtype=np.int64)
    nc = np.empty(cap, dtype=np.int64)
    npt = np.empty(cap, dtype=np.int64)
    chk = np.empty(cap, dtype=np.int64)
    chunk = 0
    half = np.empty(G, dtype=np.int64)
    for g in range(G):
        half[g] = (widths[g] + 1) // 2 if half_ok else widths[g]
    qc = np.zeros(G, dtype=np.int64)
    qp = np.zeros(G, dtype=np.int64)
    t = 0
    for pb in range(npb):
        p0 = pb * R
        p1 = min(p0 + R, hw)
        for f in range(F):
            for p in range(p0, p1):
                row = f * hw + p
                for g in range(G):
                    d = dec[row, g]
                    if d == 0:
                        qc[g] += 1
                    elif d == 1:
                        qp[g] += 1
            for g in range(G):
                while qc[g] >= brows:
                    slots[t], grp[t], nc[t], npt[t], chk[t] = widths[g], g, brows, 0, chunk
                    t += 1
                    qc[g] -= brows
                while qp[g] >= brows:
                    slots[t], grp[t], nc[t], npt[t], chk[t] = half[g], g, 0, brows, chunk
                    t += 1
                    qp[g] -= brows
            if (f + 1) % fw == 0 or f == F - 1:  # chunk end: flush
                for g in range(G):
                    c, q = qc[g], qp[g]
                    if c + q == 0:
                        continue
                    if c + q <= brows:
                        slots[t], grp[t], nc[t], npt[t], chk[t] = (widths[g] if c > 0 else half[g]), g, c, q, chunk
                        t += 1
                    else:
                        slots[t], grp[t], nc[t], npt[t], chk[t] = widths[g], g, c, brows - c, chunk
                        t += 1
                        slots[t], grp[t], nc[t], npt[t], chk[t] = half[g], g, 0, q - (brows - c), chunk
                        t += 1
                    qc[g] = 0
                    qp[g] = 0
                chunk += 1
    return slots[:t], grp[:t], nc[:t], npt[:t], chk[:t]


@numba.njit(cache=True)
def band_tile_tokens(dec, F, hw, R, brows, fw):  # noqa: N803
    """The tokens of `band_tile_sequence`'s band-tiles, in the same order, each band-tile's rows as the controller
    drains them: its COMPUTE tokens, then its PARTIAL ones, each in queue (raster) order
    (`sim.timing.compact_reference.band_tiles`' ``compute + partial``; the cycle model's rows' accumulate ways,
    `sim.timing.delta_core.row_ways`, docs/decisions.md D108).

    Args:
        dec: int8 ``[F * hw, G]`` decisions, raster token order; F, hw, R, brows, fw: as `band_tile_sequence`.
    Returns:
        ``(tokens, offsets)``: int64 ``[rows]``, the band-tiles' tokens one after the other, and int64 ``[T + 1]``,
        band-tile t's at ``tokens[offsets[t]:offsets[t + 1]]``.
    """
    G = dec.shape[1]  # noqa: N806
    npb = (hw + R - 1) // R
    cap = F * hw * G
    toks = np.empty(cap, dtype=np.int64)
    offs = np.empty(cap + 1, dtype=np.int64)
    qlen = F * min(R, hw) + 1  # a pool's tokens: a queue is emptied at every chunk's end
    qc = np.empty((G, qlen), dtype=np.int64)
    qp = np.empty((G, qlen), dtype=np.int64)
    hc = np.zeros(G, dtype=np.int64)  # heads and tails
    tc = np.zeros(G, dtype=np.int64)
    hp = np.zeros(G, dtype=np.int64)
    tp = np.zeros(G, dtype=np.int64)
    n = 0
    t = 0
    offs[0] = 0
    for pb in range(npb):
        p0 = pb * R
        p1 = min(p0 + R, hw)
        for f in range(F):
            for p in range(p0, p1):
                row = f * hw + p
                for g in range(G):
                    d = dec[row, g]
                    if d == 0:
                        qc[g, tc[g]] = row
                        tc[g] += 1
                    elif d == 1:
                        qp[g, tp[g]] = row
                        tp[g] += 1
            for g in range(G):
                while tc[g] - hc[g] >= brows:
                    for i in range(brows):
                        toks[n] = qc[g, hc[g] + i]
                        n += 1
                    hc[g] += brows
                    t += 1
                    offs[t] = n
                while tp[g] - hp[g] >= brows:
                    for i in range(brows):
                        toks[n] = qp[g, hp[g] + i]
                        n += 1
                    hp[g] += brows
                    t += 1
                    offs[t] = n
            if (f + 1) % fw == 0 or f == F - 1:  # chunk end: flush
                for g in range(G):
                    c = tc[g] - hc[g]
                    q = tp[g] - hp[g]
                    if c + q == 0:
                        hc[g] = tc[g] = hp[g] = tp[g] = 0
                        continue
                    for i in range(c):
                        toks[n] = qc[g, hc[g] + i]
                        n += 1
                    k = q if c + q <= brows else brows - c
                    for i in range(k):
                        toks[n] = qp[g, hp[g] + i]
                        n += 1
                    t += 1
                    offs[t] = n
                    if k < q:
                        for i in range(k, q):
                            toks[n] = qp[g, hp[g] + i]
                            n += 1
                        t += 1
                        offs[t] = n
                    hc[g] = tc[g] = hp[g] = tp[g] = 0
    return toks[:n], offs[:t + 1]


@numba.njit(cache=True)
def _band_issue(s_seq, occ, bands, ports_b, seg, fill, nbuf):
    """List-schedule band-tiles on ``bands`` bands: ``(band, first, last)`` int64 ``[T]`` each, the band
    each band-tile goes to and the cycles its first and last slots issue.

    ``occ[t]``: cycles band-tile t holds its output port after its last slot (its valid rows, scaled
    when bands share a port); a port is free again ``occ`` cycles after the last slot of its previous
    band-tile. ``seg[t]`` (non-decreasing from 0), ``fill`` > 0 and ``nbuf``: a weight stage (`band_schedule`)."""
    T = s_seq.shape[0]  # noqa: N806
    prev = np.full(bands, -1, dtype=np.int64)
    free = np.full((bands, ports_b), -(1 << 40), dtype=np.int64)
    count = np.zeros(bands, dtype=np.int64)
    band = np.empty(T, dtype=np.int64)
    first = np.empty(T, dtype=np.int64)
    last = np.empty(T, dtype=np.int64)
    nseg = seg[-1] + 1 if fill > 0 and T > 0 else 0
    done = np.full(max(nseg, 1), -1, dtype=np.int64)  # each segment's last slot so far
    ready = 0  # the cycle the current segment's weights are in the stage
    filled = 0  # the cycle the stage's port finished its last fill
    cur = -1
    for t in range(T):
        if fill > 0 and seg[t] != cur:  # a new segment: fill its buffer of the stage
            cur = seg[t]
            start = max(filled, done[cur - nbuf] + 1 if cur >= nbuf else 0)  # that buffer held segment cur - nbuf
            filled = start + fill
            ready = filled
        b = 0
        for j in range(1, bands):
            if prev[j] < prev[b]:
                b = j
        base = max(prev[b], ready - 1)
        want = base + max(1, s_seq[t])
        k = count[b] % ports_b
        lt = max(want, free[b, k])
        free[b, k] = lt + occ[t]
        first[t] = base + 1
        prev[b] = lt
        count[b] += 1
        band[t] = b
        last[t] = lt
        if fill > 0:
            done[cur] = max(done[cur], lt)
    return band, first, last


def band_schedule(s_seq: np.ndarray, rows_valid: np.ndarray, cfg: AcceleratorConfig, segments: np.ndarray | None = None,
                  fill: int = 0, buffers: int = 2) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per band-tile of one op, in issue order: ``(band, first, last)`` int64 ``[T]`` -- the band it runs
    on, the cycle its first slot issues and the cycle its last slot issues (after any drain stall).

    Args:
        s_seq: int64 ``[T]`` slots per band-tile; rows_valid: int64 ``[T]`` its tokens (valid rows).

    Band rule of the module docstring: band-tiles go to the band whose last slot issued first (ties to
    the lowest band) and issue back to back there, the first slot the cycle after the band's previous
    last slot; ``d_b = max(1, d / B)`` ports per band, used round robin; a band-tile's last slot waits
    until its port is free, ``valid rows x max(1, B / d)`` cycles after the port's previous last slot.
    The RTL (`hw.compact_array.CompactTop`) is compared against it band-tile by band-tile.

    Weight stage (the delta organisation's, docs/decisions.md D85): ``segments`` (int64 ``[T]``, non-decreasing
    from 0) numbers the runs of band-tiles that read one stage buffer (one chunk and column block), ``fill`` > 0
    the cycles one buffer takes to fill, ``buffers`` how many the stage holds. Buffers are used in turn and fills
    are serial: segment i's fill starts when the previous fill ends and segment i - buffers has issued its last
    slot (its buffer is free), and no band-tile of segment i issues its first slot before the fill ends."""
    B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    s = np.ascontiguousarray(s_seq, dtype=np.int64)
    occ = np.ascontiguousarray(rows_valid, dtype=np.int64) * max(1, B // d)
    seg = np.zeros(s.shape[0], dtype=np.int64) if segments is None else np.ascontiguousarray(segments, dtype=np.int64)
    return _band_issue(s, occ, B, max(1, d // B), seg, int(fill) if segments is not None else 0, int(buffers))


def band_cycles(s_seq: np.ndarray, rows_valid: np.ndarray, cfg: AcceleratorConfig, segments: np.ndarray | None = None,
                fill: int = 0, buffers: int = 2, schedule: tuple | None = None) -> tuple[int, int]:
    """Array cycles of one op from its band-tiles in issue order: ``(cycles, drain_stall_cycles)``.

    Args:
        s_seq: int64 ``[T]`` slots per band-tile; rows_valid: int64 ``[T]`` its tokens (valid rows).

    Band rule of the module docstring: B bands, ``d_b = max(1, d / B)`` ports each, used round robin;
    a band-tile holds its port for its valid rows x ``max(1, B / d)`` cycles after its last slot (only
    valid rows drain); ``cycles = the last row's read cycle + C + 2`` (`drain_reads`). With B = 1 and full
    band-tiles this is `sim.timing.cycle_model.op_cycles` exactly (tests). ``segments``, ``fill``, ``buffers``: a
    weight stage (`band_schedule`); its waits count in the cycles, not in the drain stall. ``schedule``: the
    `band_schedule` of the same arguments, when the caller has it already."""
    if s_seq.size == 0:
        return 0, 0
    s = np.ascontiguousarray(s_seq, dtype=np.int64)
    band, first, last = schedule if schedule is not None else band_schedule(s, rows_valid, cfg, segments, fill,
                                                                             buffers)
    stall = int((last - first + 1 - np.maximum(1, s)).sum())
    return int(drain_reads(band, last, rows_valid, cfg).max() + cfg.array_cols + PIPELINE_CYCLES), stall


def paired_tiles(tiles: tuple, groups) -> np.ndarray:
    """bool ``[T]``: which band-tiles of `compact_tiles`' ``(slots, group, n_compute, n_partial)`` are PAIRED
    (every row PARTIAL at half width: two channels a slot, ``ceil(|g| / 2)`` slots)."""
    slots, grp, nc, npart = tiles
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    return (nc == 0) & (npart > 0) & (widths[grp] > 1) & (slots == (widths[grp] + 1) // 2)


def shared_stage_weights(segment: np.ndarray, group: np.ndarray, paired: np.ndarray, band: np.ndarray,
                         first: np.ndarray, widths: np.ndarray, bands: int) -> int:
    """Weights per column that the bands read from the weight stage when one read feeds every band that wants the
    same word at that cycle (docs/decisions.md D92).

    Args:
        segment, group, band, first: int64 ``[T]``, per issued band-tile (issue order): its stage segment, its
            group (or slice), its band and the cycle its first slot issues (`band_schedule`); paired: bool ``[T]``,
            a PAIRED band-tile (`paired_tiles`); widths: int64 ``[G]`` channels per group; bands: B.

    The rule ("Weight words" above, D88) with the read shared: band-tile t takes word j (weights ``2 B j ..
    2 B j + 2 B - 1`` of its group's weights of one column block: the same words for every band-tile of a
    segment and group) over ``L`` slots from ``first + j L`` (``L = 2 B``, or ``B`` when PAIRED: two weights a
    slot), so word j may be loaded into its band's free word register over the window ``[first + (j - 1) L,
    first + j L)`` (word 0: the previous band-tile's last B slots, ``[first - B, first)``). Band b's turn at the
    port is every cycle ``c`` with ``c mod B = b``; at its first turn in its window a band-tile whose word is not
    loaded yet reads it, and that read is loaded into every other band's band-tile of the same segment and
    group whose window for the same word holds that cycle. Each band still has its word when it needs it, so
    the timing does not change; only reads are saved. Without any overlap this is Σ |g| per band-tile."""
    T = len(first)  # noqa: N806
    if not T:
        return 0
    w = np.asarray(widths, dtype=np.int64)
    g = np.asarray(group, dtype=np.int64)
    idx = np.lexsort((g, np.asarray(segment, dtype=np.int64)))
    key_s, key_g = np.asarray(segment, dtype=np.int64)[idx], g[idx]
    starts = np.flatnonzero(np.r_[True, (np.diff(key_s) != 0) | (np.diff(key_g) != 0), True]).astype(np.int64)
    return int(_shared_reads(starts, idx, w[g], np.asarray(paired, dtype=np.bool_), np.asarray(band, dtype=np.int64),
                             np.asarray(first, dtype=np.int64), int(bands)))


@numba.njit(cache=True)
def _shared_reads(starts, idx, width, paired, band, first, B):  # noqa: N803
    """`shared_stage_weights`' count: per run ``idx[starts[r]:starts[r + 1]]`` (one segment and group), per word,
    the reads in turn order, each loading every window that holds its cycle (distinct bands)."""
    total = 0
    word = 2 * B
    for r in range(starts.shape[0] - 1):
        mem = idx[starts[r]:starts[r + 1]]
        n = mem.shape[0]
        nw = (width[mem[0]] + word - 1) // word
        lo = np.empty(n, dtype=np.int64)
        hi = np.empty(n, dtype=np.int64)
        turn = np.empty(n, dtype=np.int64)
        for j in range(nw):
            for i in range(n):
                t = mem[i]
                L = B if paired[t] else word  # noqa: N806
                if j == 0:
                    lo[i] = first[t] - B
                    hi[i] = first[t]
                else:
                    lo[i] = first[t] + (j - 1) * L
                    hi[i] = first[t] + j * L
                turn[i] = lo[i] + (band[t] - lo[i]) % B
            order = np.argsort(turn, kind="mergesort")
            loaded = np.zeros(n, dtype=np.bool_)
            size = min(word, width[mem[0]] - j * word)
            for k in range(n):
                i = order[k]
                if loaded[i]:
                    continue
                total += size
                for m in range(n):
                    if not loaded[m] and lo[m] <= turn[i] < hi[m] and (m == i or band[mem[m]] != band[mem[i]]):
                        loaded[m] = True
    return total


def drain_reads(band: np.ndarray, last: np.ndarray, rows_valid: np.ndarray, cfg: AcceleratorConfig) -> np.ndarray:
    """int64 ``[T]``: the cycle each band-tile's last valid row is read out of the array (its row then
    leaves the array ``C + 1`` cycles later, `hw.compact_array`).

    A band-tile's rows are read one per turn of its port from the cycle after its last slot, row i no
    earlier than ``L + 1 + i``: with ``B <= d`` every cycle (rows at ``L + 1 .. L + v``); with ``B > d`` a
    port serves ``q = B / d`` bands, band b on the cycles ``c`` with ``c mod q = b // d``, so row 0 at the
    first such cycle after L and each next row q cycles later. The port rule of `band_schedule` keeps
    a port's band-tiles' reads apart (``v q`` cycles per band-tile)."""
    B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    q = max(1, B // d)
    v = np.asarray(rows_valid, dtype=np.int64)
    phase = np.asarray(band, dtype=np.int64) // d if B > d else 0
    t0 = last + 1 + np.mod(phase - (last + 1), q)
    return t0 + (v - 1) * q


def compact_tiles(dec: np.ndarray, grid, groups, cfg: AcceleratorConfig, fw: int, b_msb: int,
                  chunks: bool = False):
    """Band-tiles of one column block of one GEMM (`band_tile_sequence` with the config's sizes).

    Args:
        dec: int8 ``[M, G]`` decisions; grid ``(F, H, W)``; groups ``(k0, k1, axis)``; fw: `chunk_frames`.
        chunks: also return each band-tile's chunk.
    Returns:
        ``(slots, group, n_compute, n_partial)`` int64 ``[T]`` arrays; with ``chunks``, ``(that, chunk)``.
    """
    F, H, W = grid  # noqa: N806
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    *tiles, chunk = band_tile_sequence(np.ascontiguousarray(dec, dtype=np.int8), F, H * W, cfg.array_rows,
                                       band_rows(cfg), fw, widths, b_msb >= 4)
    return (tuple(tiles), chunk) if chunks else tuple(tiles)


def combine_adds(dec: np.ndarray, N: int) -> int:  # noqa: N803
    """Combine-unit adds of one GEMM: ``N x (M G + PARTIAL (token, group) pairs)`` (module docstring)."""
    M, G = dec.shape  # noqa: N806
    return int(N * (M * G + int((dec == 1).sum())))


def combine_stall(adds: int, pools: int, array_cycles: int, cfg: AcceleratorConfig) -> int:
    """Cycles the combine unit adds beyond the array's: the last pool's share after the last band-tile
    (``ceil(adds / pools / lanes)``) plus any excess of the rest over the array's cycles."""
    if adds <= 0 or pools <= 0:
        return 0
    lanes = combine_lanes(cfg)
    total = math.ceil(adds / lanes)
    tail = math.ceil(adds / pools / lanes)
    return int(tail + max(0, total - tail - array_cycles))
