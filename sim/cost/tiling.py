"""Tile walks: one op's decisions under a tiling, walked once per tiling (docs/decisions.md D55).

`tile_pass` walks the position tiles of one batch element in the scheduler's order (or raster order
without the dispatcher) and gives both the slots per tile (the cycle model's `reuse_slot_sequence`,
one column block) and the per-tile statistics (`tile_stats`: issued channels, rows, codes, matcher
pairs, skipped groups, bubbles) that the action rules of `sim.cost.actions` count; `group_code_counts`
counts the codes per group; `TiledDecisions` carries a batch element's decisions with the statistics
of the tiling it was timed under; `dispatcher_stats` sums the dispatcher's statistics of one op.
Split from `sim.cost.actions` (the rules that turn these statistics into action counts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from sim.timing.dispatch import WINDOW_TILES, position_block, position_order, runs_from_compat

#: Per-tile statistics `_tile_counts` returns, in order (see `tile_stats` for the definitions).
_STAT_KEYS = ("issued", "rows_x_channels", "channels", "rows", "compute", "partial", "paired", "reuse",
              "pair_slots", "skipped_groups", "skipped_channels", "bubble_tiles", "slots", "tiles")
#: The keys `tile_counts` returns (the action rules' inputs).
COUNT_KEYS = _STAT_KEYS[:8]


@numba.njit(cache=True)
def _popcount(x):
    """Set bits of a uint64 (SWAR bit count)."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return np.int64((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@numba.njit(cache=True)
def _tile_counts(dec, F, hw, rows, k0, k1, b_msb, order, paired, modes, slots):  # noqa: N803
    """Sums over the position tiles of one GEMM (one column block), in ``O(rows x G + G^2 x rows / 64)``
    per tile.

    ``paired``: the matcher pairs channels (`sim.timing.dispatch.pair_runs`); else one slot per channel of every
    group some row needs (the no-dispatcher slot sequence, `sim.timing.dispatch.count_slots_unpaired`).
    ``modes``: count the row-slots by mode (``compute`` .. ``reuse``; left 0 otherwise).
    ``slots``: int64 ``[ceil(hw / rows) * F]`` output, the slots of each (position block,
    frame) tile in issue order (`sim.timing.cycle_model.reuse_slot_sequence`'s one column block: the same
    walk, the sum of the run lengths, `sim.timing.dispatch.count_slots`).
    Returns int64 ``[len(_STAT_KEYS)]`` in `_STAT_KEYS` order.

    Each tile's decisions are held as bit masks over its rows, per group: ``cm`` (COMPUTE) and ``pm``
    (PARTIAL), 64 rows a word. The matcher's compatibility (`sim.timing.dispatch._compat`: every row's
    demand of g and h together <= 2 halves) is then "no row where one needs 2 halves and the other any
    (``d2[g] & (d2[h] | d1[h])``) or one needs 1 and the other 2 (``d1[g] & d2[h]``)", with ``d2`` the
    rows needing a full slot (COMPUTE, and PARTIAL when b_msb < 4) and ``d1`` half (PARTIAL, b_msb >= 4);
    the greedy walk is `sim.timing.dispatch.runs_from_compat`, the one `pair_runs` uses. A run's row
    modes are bit counts: COMPUTE ``|cm_a | cm_b|``, PAIRED ``|pm_a & pm_b|``, PARTIAL
    ``|(pm_a ^ pm_b) & ~(cm_a | cm_b)|``, the other valid rows REUSE.
    """
    out = np.zeros(14, dtype=np.int64)
    ng = k0.shape[0]
    run_a = np.empty(2 * ng + 1, dtype=np.int64)
    run_b = np.empty(2 * ng + 1, dtype=np.int64)
    run_n = np.empty(2 * ng + 1, dtype=np.int64)
    npb = (hw + rows - 1) // rows
    nw = (rows + 63) // 64
    cm = np.zeros((ng, nw), dtype=np.uint64)
    pm = np.zeros((ng, nw), dtype=np.uint64)
    d1 = np.zeros((ng, nw), dtype=np.uint64)
    d2 = np.zeros((ng, nw), dtype=np.uint64)
    compat = np.ones((ng, ng), dtype=np.bool_)
    active = np.zeros(ng, dtype=np.bool_)
    one = np.uint64(1)
    zero = np.uint64(0)
    for pb in range(npb):
        p0 = pb * rows
        p1 = min(p0 + rows, hw)
        rt = p1 - p0
        for f in range(F):
            cm[:] = 0
            pm[:] = 0
            for r in range(rt):
                tok = f * hw + order[p0 + r]
                bit = one << np.uint64(r & 63)
                w = r >> 6
                for g in range(ng):
                    v = dec[tok, g]
                    if v == 0:
                        cm[g, w] |= bit
                    elif v == 1:
                        pm[g, w] |= bit
            skipped = 0
            skipped_ch = 0
            nr = 0
            for g in range(ng):
                used = False
                for w in range(nw):
                    if (cm[g, w] | pm[g, w]) != zero:
                        used = True
                        break
                active[g] = used
                if not used:
                    skipped += 1
                    skipped_ch += k1[g] - k0[g]
                elif not paired:
                    run_a[nr], run_b[nr], run_n[nr] = g, -1, k1[g] - k0[g]
                    nr += 1
            if paired:
                for g in range(ng):
                    for w in range(nw):
                        if b_msb >= 4:
                            d2[g, w] = cm[g, w]
                            d1[g, w] = pm[g, w]
                        else:
                            d2[g, w] = cm[g, w] | pm[g, w]
                            d1[g, w] = zero
                for g in range(ng):
                    for h in range(ng):
                        ok = True
                        for w in range(nw):
                            if ((d2[g, w] & (d2[h, w] | d1[h, w])) | (d1[g, w] & d2[h, w])) != zero:
                                ok = False
                                break
                        compat[g, h] = ok
                nr = runs_from_compat(compat, active, k0, k1, run_a, run_b, run_n)
            n = 0
            ch = 0
            for i in range(nr):
                ga, gb, c = run_a[i], run_b[i], run_n[i]
                n += c
                if gb >= 0:
                    ch += 2 * c
                    out[8] += c
                else:
                    ch += c
                if not modes:
                    continue
                nc = npart = npair = 0
                for w in range(nw):
                    ca, pa = cm[ga, w], pm[ga, w]
                    cb = cm[gb, w] if gb >= 0 else zero
                    pbm = pm[gb, w] if gb >= 0 else zero
                    nc += _popcount(ca | cb)
                    npair += _popcount(pa & pbm)
                    npart += _popcount((pa ^ pbm) & ~(ca | cb))
                out[4] += c * nc
                out[5] += c * npart
                out[6] += c * npair
                out[7] += c * (rt - nc - npart - npair)
            slots[pb * F + f] = n
            out[0] += max(1, n)
            out[1] += rt * ch
            out[2] += ch
            out[3] += rt
            out[9] += skipped
            out[10] += skipped_ch
            out[11] += n == 0
            out[12] += n
            out[13] += 1
    return out


def tile_stats(decisions: np.ndarray, grid, groups, rows: int, b_msb: int, dispatcher: bool = True,
               tile_like=None, window_tiles: int = WINDOW_TILES) -> dict[str, int]:
    """Per-column-block sums over the reuse tiling of one GEMM and one batch element.

    With ``dispatcher`` the tiling is the cycle model's: the scheduler's position order
    (`sim.timing.dispatch.schedule_positions`) and the matcher's slots (`sim.timing.dispatch.match_tile`); without,
    raster position order and one slot per channel of every group some row needs (no pairing), as
    `sim.timing.cycle_model.reuse_slot_sequence` times it. Counts over all (position block, frame) tiles:

    - ``issued``: issued slots, ``max(1, slots)`` per tile (a tile that carries nothing issues one
      bubble slot); ``slots``: slots carrying channels (no bubbles);
    - ``rows_x_channels``: Σ valid rows x channels carried (2 per paired slot); ``channels``: Σ
      channels carried; ``rows``: Σ valid rows;
    - ``compute``/``partial``/``paired``/``reuse``: row-slots by mode (module docstring);
    - ``pair_slots``: slots carrying two channels. Every channel some row needs takes exactly one
      slot place, so ``slots = channels - pair_slots``: the slots pairing saves against the same
      tiling without the matcher (0 without the dispatcher);
    - ``skipped_groups``/``skipped_channels``: (tile, group)s whose every row REUSEs, and their
      channels: the slots skipping saves against issuing every channel (K per tile);
    - ``bubble_tiles``: tiles whose every group is skipped (they issue one bubble slot);
      ``tiles``: (position block, frame) tiles;
    - ``clusters``: runs of positions with an identical reuse pattern (decision string over
      (group, frame >= 1), `sim.timing.dispatch.schedule_positions`) that are consecutive in issue order
      within one position block, summed over position blocks (a block of alike positions is 1);
      the scheduler's sort lowers it below the raster order's;
    - ``rows_moved``: token rows in a different position block than raster order puts them:
      positions ``i`` with ``order[i] // rows != i // rows``, times F frames (0 without the dispatcher).

    Args:
        decisions: int8 ``[F*H*W, G]`` codes (0 COMPUTE, 1 PARTIAL, 2 REUSE), raster token order.
        groups: ``(k_start, k_stop, axis)`` per group, contiguous from channel 0.
        rows: the array's R (tile height). An op with a ``w``-axis group tiles
            ``floor(R / W) * W`` positions in raster order (`sim.timing.dispatch.position_block`, D4).
        tile_like: groups whose tiling the op follows (a fused ``pv`` takes its ``qk``'s query
            tiles, sim/timing/attention.py); None = its own.
        window_tiles: scheduler window in position blocks (`sim.timing.dispatch.schedule_positions`).
    """
    return tile_pass(decisions, grid, groups, rows, b_msb, dispatcher, tile_like, window_tiles)[0]


@numba.njit(cache=True)
def _clusters(dec, F, hw, block, order):  # noqa: N803
    """`tile_stats`' ``clusters``: positions in issue order that start a position block or whose
    decisions over (frame >= 1, group) differ from the previous position's."""
    ng = dec.shape[1]
    n = 0
    for i in range(hw):
        if i % block == 0:
            n += 1
            continue
        a, b = order[i], order[i - 1]
        same = True
        for f in range(1, F):
            for g in range(ng):
                if dec[f * hw + a, g] != dec[f * hw + b, g]:
                    same = False
                    break
            if not same:
                break
        n += not same
    return n


def tile_pass(decisions: np.ndarray, grid, groups, rows: int, b_msb: int, dispatcher: bool = True,
              tile_like=None, window_tiles: int = WINDOW_TILES, order: np.ndarray | None = None,
              modes: bool = True) -> tuple[dict[str, int], np.ndarray]:
    """`tile_stats` and the tiling's slots per tile from one walk over the tiles.

    Args:
        decisions, grid, groups, rows, b_msb, dispatcher, tile_like, window_tiles: as `tile_stats`.
        order: the position order if already computed (`sim.timing.dispatch.position_order` with the same
            arguments); None computes it.
        modes: count the row-slots by mode (``compute``/``partial``/``paired``/``reuse``) and the
            ``clusters`` (all 0 when False: only the slots are wanted).

    Returns:
        (the `tile_stats` dict, int64 ``[ceil(HW / block) * F]`` slots per (position block, frame) tile
        in issue order: one column block of `sim.timing.cycle_model.reuse_slot_sequence` with the same
        ``dispatcher``, window and ``tile_like``).
    """
    F, H, W = grid  # noqa: N806
    hw = H * W
    k0 = np.array([g[0] for g in groups], dtype=np.int64)
    k1 = np.array([g[1] for g in groups], dtype=np.int64)
    dec = np.ascontiguousarray(decisions, dtype=np.int8)
    tiling = groups if tile_like is None else tile_like
    block = position_block(grid, tiling, rows)  # R, or whole image rows for a w-axis op (D4)
    if order is None:
        order = position_order(dec, grid, tiling, rows, dispatcher, window_tiles)
    order = np.ascontiguousarray(order, dtype=np.int64)
    slots = np.zeros(-(-hw // block) * F, dtype=np.int64)
    v = _tile_counts(dec, F, hw, block, k0, k1, b_msb, order, dispatcher, modes, slots)
    out = {k: int(x) for k, x in zip(_STAT_KEYS, v, strict=True)}
    out["clusters"] = int(_clusters(dec, F, hw, block, order)) if modes else 0
    out["rows_moved"] = int((order // block != np.arange(hw) // block).sum()) * F
    return out, slots


@numba.njit(cache=True)
def _code_counts(dec):
    ng = dec.shape[1]
    out = np.zeros((3, ng), dtype=np.int64)
    for i in range(dec.shape[0]):
        for g in range(ng):
            out[dec[i, g], g] += 1
    return out


def group_code_counts(decisions: np.ndarray) -> np.ndarray:
    """(token, group) decisions per code and group: int64 ``[3, G]`` (rows COMPUTE, PARTIAL, REUSE).

    Args:
        decisions: int8 ``[M, G]`` codes 0..2.

    Raises:
        ValueError: a code outside 0..2.
    """
    dec = np.ascontiguousarray(decisions, dtype=np.int8)
    if dec.size and (dec.min() < 0 or dec.max() > 2):
        raise ValueError("decisions must be 0 (COMPUTE), 1 (PARTIAL) or 2 (REUSE)")
    return _code_counts(dec.reshape(dec.shape[0], -1))


def tile_counts(decisions: np.ndarray, grid, groups, rows: int, b_msb: int, dispatcher: bool = True) -> dict[str, int]:
    """The `COUNT_KEYS` of `tile_stats` (the inputs of the action rules)."""
    t = tile_stats(decisions, grid, groups, rows, b_msb, dispatcher)
    return {k: t[k] for k in COUNT_KEYS}


@dataclass(frozen=True)
class TiledDecisions:
    """One batch element's decisions with the `tile_stats` of the tiling they were timed under.

    `sim.engines.model` passes these to `op_actions` (through `sim.cost.energy`), so the action counts follow
    its ``dispatcher`` flag (``dispatcher``: the flag ``stats`` were made with) and the tiling is
    counted once per op.
    """

    decisions: np.ndarray
    stats: dict[str, int]
    dispatcher: bool = True
    #: `group_code_counts` of ``decisions`` if already made (None: `op_actions` counts them).
    code_counts: np.ndarray | None = None


#: Keys of `dispatcher_stats`.
DISPATCHER_STAT_KEYS = ("tiles", "clusters", "rows_moved", "pair_slots", "skipped_groups", "skipped_channels",
                        "bubble_tiles")


def dispatcher_stats(stats: list[dict[str, int]], n_col_blocks: int) -> dict[str, int]:
    """Dispatcher statistics of one op from its batch elements' `tile_stats`.

    Summed over the batch; counts per tile are also summed over the ``n_col_blocks = ceil(N / C)``
    column blocks, which repeat the same position tiles:

    - ``tiles``: tiles issued (position blocks x frames x column blocks);
    - ``clusters``: runs of alike positions sharing a position block (`tile_stats`; per position
      block, not repeated per column block);
    - ``rows_moved``: token rows the scheduler puts in another position block than raster order;
    - ``pair_slots``: slots carrying two channels = slots saved by pairing against the same tiling
      without the matcher;
    - ``skipped_groups``/``skipped_channels``: (tile, group)s every row of which REUSEs, and their
      channels = slots saved by skipping;
    - ``bubble_tiles``: tiles with nothing to compute (one bubble slot each).

    Without the dispatcher (raster order, no pairing) ``rows_moved`` and ``pair_slots`` are 0 and
    ``clusters`` counts the raster order's runs.
    """
    out = dict.fromkeys(DISPATCHER_STAT_KEYS, 0)
    for s in stats:
        out["clusters"] += s["clusters"]
        out["rows_moved"] += s["rows_moved"]
        for k in ("tiles", "pair_slots", "skipped_groups", "skipped_channels", "bubble_tiles"):
            out[k] += s[k] * n_col_blocks
    return out
