"""Reference data dispatcher: the tile scheduler and the channel matcher (docs/spec.md §3).

Scheduler: a tile holds R spatial positions of one frame, and a position block is processed frame
after frame, so each PE keeps its position's partial sums of the previous frame in local registers
(temporal neighbour, no SRAM traffic). Which positions share a tile is a permutation of the
positions, fixed over all frames (docs/spec.md §3 reference): `schedule_positions` clusters
positions whose reuse patterns -- the binary strings of their decisions over (group, frame) --
are alike, by sorting the strings inside windows of ``window_tiles * R`` consecutive positions
(so data stays local), then cutting the sorted order into tiles of R. Without the scheduler
(`--no-dispatcher`), positions stay in raster order.

Ops with a ``w``-axis group (the RoPE t-groups of ``qk``) tile differently (docs/decisions.md D4):
a tile holds whole image rows in raster order, ``floor(R / W) * W`` positions
(`position_block`), so every ``w``-neighbour of a tile row is the row above (the PE link) and every
``w = 0`` row, which has no neighbour, COMPUTEs (so a ``w`` group never skips a tile). The
scheduler is off for such ops (raster order, `position_order`): permuting positions would break
the row-above relation, and permuting whole image rows is left for later. ``W > R`` is rejected.

Matcher: inside one tile, channels are taken in index order; each unpaired channel pairs with the
lowest-index later unpaired channel that is *compatible*: for every row of the tile,
``demand(a) + demand(b) <= 1`` with COMPUTE = 1, PARTIAL = 1/2 (1 when b_msb < 4: the low part
then does not fit half the multiplier) and REUSE = 0. One pair or single channel is one cycle
slot. Channels of a group that every row REUSEs take no slot. Demand depends only on a channel's
group, so compatibility is a group-by-group relation, and within each group channels are consumed
in index order: a pointer per group gives the greedy choice in ``O(slots * groups)``.

This module is the reference the RTL stream generator and the cycle model share.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE
from hw.config import WINDOW_TILES  # the default scheduler window in tiles (its one home)

#: Demand in half slots per (row, group) decision (docs/spec.md §3: COMPUTE = 1, PARTIAL = 1/2, REUSE = 0).
DEMAND_HALVES = {COMPUTE: 2, PARTIAL: 1, REUSE: 0}


@numba.njit(cache=True)
def _group_demand(dec, b_msb):
    """Per-(row, group) demand in half slots from decisions ``[rows, G]``."""
    rows, ng = dec.shape
    dem = np.zeros((rows, ng), dtype=np.int8)
    half = 1 if b_msb >= 4 else 2
    for r in range(rows):
        for g in range(ng):
            d = dec[r, g]
            if d == 0:
                dem[r, g] = 2
            elif d == 1:
                dem[r, g] = half
    return dem


@numba.njit(cache=True)
def _compat(dem):
    """``compat[g, h]``: every row's demand of g and h together fits one slot (<= 2 halves)."""
    rows, ng = dem.shape
    c = np.ones((ng, ng), dtype=np.bool_)
    active = np.zeros(ng, dtype=np.bool_)
    for g in range(ng):
        for r in range(rows):
            if dem[r, g] > 0:
                active[g] = True
                break
    for g in range(ng):
        for h in range(ng):
            for r in range(rows):
                if dem[r, g] + dem[r, h] > 2:
                    c[g, h] = False
                    break
    return c, active


@numba.njit(cache=True)
def match_tile(dec, k0, k1, b_msb, slot_a, slot_b):
    """Greedy channel matcher for one tile.

    Args:
        dec: int8 ``[rows, G]`` decisions of the tile's valid rows.
        k0, k1: int64 ``[G]`` channel range of each group.
        b_msb: reused high bits (PARTIAL pairs only when b_msb >= 4).
        slot_a, slot_b: int64 output buffers of length >= K; ``slot_b = -1`` for a single channel.

    Returns:
        The number of slots written (0 when every row REUSEs every group).
    """
    dem = _group_demand(dec, b_msb)
    compat, active = _compat(dem)
    ng = k0.shape[0]
    ptr = k0.copy()
    n = 0
    g = 0
    while g < ng:
        if not active[g] or ptr[g] >= k1[g]:
            g += 1
            continue
        a = ptr[g]
        ptr[g] += 1
        best = -1
        best_g = -1
        for h in range(ng):
            if active[h] and compat[g, h] and ptr[h] < k1[h]:
                if best < 0 or ptr[h] < best:
                    best = ptr[h]
                    best_g = h
        if best >= 0:
            ptr[best_g] += 1
        slot_a[n] = a
        slot_b[n] = best
        n += 1
    return n


@numba.njit(cache=True)
def pair_runs(dec, k0, k1, b_msb, run_a, run_b, run_n):
    """The matcher's slots of one tile as runs ``(group a, group b or -1, slots)``; returns the run count.

    The same greedy as `match_tile`, walked by runs of channels in ``O(G^2)`` steps instead of
    ``O(K * G)``: groups own disjoint, ordered channel ranges, so "the lowest-index free compatible
    channel" is always in the lowest-index compatible group that has a free channel (that group's
    pointer is below every later group's range). Hence, for the lowest unfinished group g: if g is
    compatible with itself its channels pair two by two (its own next channel is the lowest free
    one), and a last odd channel pairs with the first compatible later group that has channels left
    (or stays single); otherwise g's channels pair one for one with the first compatible later group
    h that has channels left, a run of ``min(left(g), left(h))`` slots, after which the next such
    group takes over. Every slot of a run carries the same group pair, so per-row modes are the same
    on every slot of a run. Tests compare the slot count with `match_tile` on random tiles.

    Args:
        dec, k0, k1, b_msb: as `match_tile`.
        run_a, run_b, run_n: int64 output buffers of length ``>= 2 G + 1`` (each run but a group's
            self-run ends one group): first group, second group (-1: single channel), slots.
    """
    dem = _group_demand(dec, b_msb)
    compat, active = _compat(dem)
    return runs_from_compat(compat, active, k0, k1, run_a, run_b, run_n)


@numba.njit(cache=True)
def runs_from_compat(compat, active, k0, k1, run_a, run_b, run_n):
    """`pair_runs`' greedy walk given the tile's group compatibility (bool ``[G, G]``) and which groups
    some row needs (bool ``[G]``); the same outputs and return value (the run count)."""
    ng = k0.shape[0]
    left = np.zeros(ng, dtype=np.int64)
    for g in range(ng):
        if active[g]:
            left[g] = k1[g] - k0[g]
    nr = 0
    for g in range(ng):
        while left[g] > 0:
            if compat[g, g]:
                c = left[g] // 2
                if c > 0:
                    run_a[nr], run_b[nr], run_n[nr] = g, g, c
                    nr += 1
                left[g] = left[g] % 2
                if left[g] == 0:
                    break
            h = g + 1
            while h < ng and (left[h] == 0 or not compat[g, h]):
                h += 1
            if h == ng:
                run_a[nr], run_b[nr], run_n[nr] = g, -1, left[g]
                left[g] = 0
            elif compat[g, g]:  # one odd channel left
                run_a[nr], run_b[nr], run_n[nr] = g, h, 1
                left[g] = 0
                left[h] -= 1
            else:
                run = min(left[g], left[h])
                run_a[nr], run_b[nr], run_n[nr] = g, h, run
                left[g] -= run
                left[h] -= run
            nr += 1
    return nr


@numba.njit(cache=True)
def count_slots(dec, k0, k1, b_msb, scratch_a, scratch_b):
    """Number of slots `match_tile` would emit, in ``O(G^2)`` steps instead of ``O(K * G)``.

    The sum of the run lengths of `pair_runs` (see its docstring for why runs are exact).
    ``scratch_a``/``scratch_b`` are unused (kept for the signature).
    """
    size = 2 * k0.shape[0] + 1
    run_a = np.empty(size, dtype=np.int64)
    run_b = np.empty(size, dtype=np.int64)
    run_n = np.empty(size, dtype=np.int64)
    nr = pair_runs(dec, k0, k1, b_msb, run_a, run_b, run_n)
    n = 0
    for i in range(nr):
        n += run_n[i]
    return n


@numba.njit(cache=True)
def count_slots_unpaired(dec, k0, k1):
    """Slots without the matcher: one per channel of every group some row needs (no pairing).

    Args:
        dec: int8 ``[rows, G]`` decisions of one tile; k0, k1: int64 ``[G]`` group channel ranges.
    Returns:
        int: slots (cycles) the tile issues.
    """
    rows, ng = dec.shape
    n = 0
    for g in range(ng):
        for r in range(rows):
            if dec[r, g] != REUSE:
                n += k1[g] - k0[g]
                break
    return n



def schedule_positions(decisions: np.ndarray, grid, rows: int, window_tiles: int = WINDOW_TILES) -> np.ndarray:
    """The scheduler's position order: a permutation of ``0 .. H*W-1`` (int64).

    Each position's reuse pattern is the string of its decision codes over (group, frame), group
    major (frame 0 excluded: it always computes). Inside each window of ``window_tiles * rows``
    consecutive raster positions the positions are sorted by that string (stable, so equal
    patterns keep raster order), which puts alike patterns in the same tile.

    Args:
        decisions: int8 ``[M, G]`` for ``M = F*H*W`` tokens in raster order.
    """
    F, H, W = grid  # noqa: N806
    hw = H * W
    d = np.ascontiguousarray(decisions, dtype=np.int8).reshape(F, hw, -1)
    order = np.arange(hw, dtype=np.int64)
    win = max(1, window_tiles) * rows
    if F < 2 or d.shape[2] == 0:
        return order
    words = _pattern_words(d)  # [positions, words]: the pattern packed, order-preserving
    for w0 in range(0, hw, win):
        w1 = min(w0 + win, hw)
        block = words[w0:w1]
        keys = [block[:, c] for c in range(block.shape[1] - 1, -1, -1)]  # lexsort: last key is primary
        order[w0:w1] = w0 + np.lexsort(keys)
    return order


#: Decision codes (2 bits each) packed into one uint64 word of a reuse pattern (`_pattern_words`).
CODES_PER_WORD = 32


@numba.njit(cache=True)
def _pattern_words(d):
    """Each position's reuse pattern (codes over (group, frame >= 1), group major, as
    `schedule_positions` defines it) packed 2 bits a code, `CODES_PER_WORD` codes a uint64 word, the
    first code in the top bits and the last word zero-padded: uint64 ``[positions, words]``.

    Codes are 0..2 and every position has the same pattern length, so comparing the word rows
    lexicographically compares the patterns lexicographically (the stable sort of either gives the
    same permutation), with a 32nd of the sort keys.
    """
    F, hw, ng = d.shape
    n = ng * (F - 1)
    nw = (n + CODES_PER_WORD - 1) // CODES_PER_WORD
    out = np.zeros((hw, nw), dtype=np.uint64)
    for p in range(hw):
        c = 0
        for g in range(ng):
            for f in range(1, F):
                w = c // CODES_PER_WORD
                shift = 2 * (CODES_PER_WORD - 1 - c % CODES_PER_WORD)
                out[p, w] |= np.uint64(d[f, p, g] & 3) << np.uint64(shift)
                c += 1
    return out


def has_w_groups(groups) -> bool:
    """True when some channel group reuses along ``w`` (spatial reuse over the PE link, D4)."""
    return any(g[2] == "w" for g in groups)


def position_block(grid, groups, rows: int) -> int:
    """Spatial positions per tile: R, or ``floor(R / W) * W`` (whole image rows) for an op with a
    ``w``-axis group (module docstring; docs/decisions.md D4).

    Raises:
        ValueError: a ``w``-axis group and ``W > R`` (an image row does not fit one tile: its
            continuation would need the partial-result buffer, not built).
    """
    if not has_w_groups(groups):
        return rows
    W = int(grid[2])  # noqa: N806
    if W > rows:
        raise ValueError(f"spatial (w-axis) reuse needs whole image rows in a tile: W = {W} positions "
                         f"exceed the array's R = {rows} rows")
    return (rows // W) * W


def position_order(decisions: np.ndarray, grid, groups, rows: int, dispatcher: bool = True,
                   window_tiles: int = WINDOW_TILES) -> np.ndarray:
    """The tiling's position order: the scheduler's (`schedule_positions`, windows of
    ``window_tiles`` tiles) with the dispatcher, raster order without it or for an op with a
    ``w``-axis group (module docstring)."""
    if dispatcher and not has_w_groups(groups):
        return schedule_positions(decisions, tuple(grid), rows, window_tiles)
    F, H, W = grid  # noqa: N806
    return np.arange(H * W, dtype=np.int64)


# ---- tiling ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class TileSpec:
    """One output tile of the reuse tiling.

    Attributes:
        tokens: int64 ``[rows_valid]`` raster token indices of the tile rows (row r = tokens[r]).
        n0, n1: output-channel (column) range ``[n0, n1)``.
        clear: the tile starts a position block (frame 0): PEs reset their partial registers.
    """

    tokens: np.ndarray
    n0: int
    n1: int
    clear: bool


def reuse_tiles(
    grid: tuple[int, int, int], N: int, rows: int, cols: int, order: np.ndarray | None = None,  # noqa: N803
    block: int | None = None,
) -> list[TileSpec]:
    """Tiles in issue order: for each column block, for each position block, frame after frame.

    ``order`` is the scheduler's position permutation (`schedule_positions`); None = raster order.
    ``block``: positions per tile (`position_block`); None = ``rows``.
    """
    block = rows if block is None else block
    F, H, W = grid  # noqa: N806
    hw = H * W
    order = np.arange(hw, dtype=np.int64) if order is None else np.asarray(order, dtype=np.int64)
    out = []
    for n0 in range(0, N, cols):
        for p0 in range(0, hw, block):
            pos = order[p0:min(p0 + block, hw)]
            for f in range(F):
                out.append(TileSpec(f * hw + pos, n0, min(n0 + cols, N), f == 0))
    return out


@dataclass(frozen=True)
class Slot:
    """One cycle slot of a tile: channel ``a`` and optionally ``b`` (-1), with group bookkeeping.

    ``first_a``/``first_b``: the slot is the first of the tile to carry a channel of that group,
    so PEs overwrite (rather than add to) that group's partial registers.
    """

    a: int
    b: int
    g_a: int
    g_b: int
    first_a: bool
    first_b: bool


def tile_schedule(dec_rows: np.ndarray, groups, b_msb: int) -> list[Slot]:
    """The matcher's slot list for one tile (``dec_rows``: int8 ``[rows_valid, G]``), in issue order."""
    k0 = np.array([g[0] for g in groups], dtype=np.int64)
    k1 = np.array([g[1] for g in groups], dtype=np.int64)
    K = int(k1[-1])  # noqa: N806
    sa = np.empty(K, dtype=np.int64)
    sb = np.empty(K, dtype=np.int64)
    n = match_tile(np.ascontiguousarray(dec_rows, dtype=np.int8), k0, k1, b_msb, sa, sb)
    group_of = np.repeat(np.arange(len(groups)), k1 - k0)
    seen: set[int] = set()
    slots = []
    for i in range(n):
        a, b = int(sa[i]), int(sb[i])
        ga = int(group_of[a])
        gb = int(group_of[b]) if b >= 0 else 0
        fa = ga not in seen
        seen.add(ga)
        fb = b >= 0 and gb not in seen
        if b >= 0:
            seen.add(gb)
        slots.append(Slot(a, b, ga, gb, fa, fb))
    return slots
