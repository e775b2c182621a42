"""Slot-by-slot input stream of the RTL top level (`hw/top.py`) for one GEMM.

This is the dispatcher's output in the form the hardware consumes: for every tile of the reuse
tiling (`sim.timing.dispatch.reuse_tiles`), the matcher's slots (`sim.timing.dispatch.tile_schedule`), each
turned into per-row operands and PE modes and per-column weights. RTL tests drive it into the
Verilog and compare the result rows with `algo.reuse.golden.apply_decisions` and the cycle count with
`sim.timing.cycle_model`. `port_values` gives a slot's top-level port values and `OutputCollector` places
the result rows; the cocotb bench (tests/rtl/tb_top.py) and `sim.engines.rtl` share both.

Reuse sources: each PE holds its position's previous-frame partials (temporal groups, axis
``"f"``), and for an op with a ``w``-axis group a tile holds whole image rows in raster order
(`sim.timing.dispatch.position_block`), so a token's ``w``-neighbour is the PE row above and the row link
serves it (slot flags ``sp_a``/``sp_b``, `hw.pe`; docs/decisions.md D4). Reuse along ``"h"`` needs
the partial-result buffer, not built: it raises.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algo.reuse.golden import COMPUTE
from hw.config import AcceleratorConfig
from hw.pe import MODE_BITS, MODE_OF
from hw.top import row_bits
from sim.timing.dispatch import position_block, position_order, reuse_tiles, tile_schedule


@dataclass
class StreamSlot:
    """One accepted cycle at the top level. Arrays are per row (R) or per column (C)."""

    x_a: np.ndarray      # int16 [R]: int8 or uint8 values
    x_b: np.ndarray      # int16 [R]
    mode: np.ndarray     # uint8 [R]: hw.pe.PEMode
    sel: np.ndarray      # uint8 [R]
    w_a: np.ndarray      # int16 [C]
    w_b: np.ndarray      # int16 [C]
    g_a: int
    g_b: int
    first_a: bool
    first_b: bool
    last: bool
    clear: bool
    sp_a: bool = False  # channel a's group reuses along w (PE row link)
    sp_b: bool = False  # channel b's group reuses along w


@dataclass
class Stream:
    """The whole input stream of one GEMM plus the tiles' output placement."""

    slots: list[StreamSlot]
    tiles: list  # sim.timing.dispatch.TileSpec, in issue order (tile t leaves on port t mod d)
    slots_per_tile: np.ndarray  # int64 [tiles]: issue cycles per tile (>= 1)


def build_stream(
    X: np.ndarray, W: np.ndarray, grid, groups, decisions: np.ndarray, b_msb: int, cfg: AcceleratorConfig  # noqa: N803
) -> Stream:
    """Build the slot stream of ``Y = X_eff @ W`` on the configured array.

    Args:
        X: ``[M, K]`` int8 or uint8; W: ``[K, N]`` int8; grid ``(F, H, W)``; groups
            ``(k_start, k_stop, axis)``; decisions int8 ``[M, len(groups)]``; b_msb must be the
            hardware's split.

    Raises:
        ValueError: b_msb not supported by the config, more groups than ``partial_regs``,
            reuse along ``h``, a ``w``-axis group with ``W > R``, or a ``w = 0`` token that does
            not COMPUTE a ``w``-axis group (it has no neighbour).
    """
    if b_msb not in cfg.msb_splits:
        raise ValueError(f"b_msb = {b_msb} is not supported by {cfg.name} (msb_splits {list(cfg.msb_splits)})")
    if len(groups) > cfg.partial_regs:
        raise ValueError(f"{len(groups)} channel groups exceed partial_regs = {cfg.partial_regs}")
    w_first = np.arange(decisions.shape[0]) % grid[2] == 0
    for gi, (_, _, axis) in enumerate(groups):
        if axis == "h" and np.any(decisions[:, gi] != COMPUTE):
            raise ValueError(f"group {gi} reuses along spatial axis {axis!r}: not supported by the RTL stream yet")
        if axis == "w" and np.any(decisions[w_first, gi] != COMPUTE):
            raise ValueError(f"group {gi} (axis 'w'): a w = 0 token has no neighbour and must COMPUTE")
    spatial = [axis == "w" for _, _, axis in groups]
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    _, N = W.shape  # noqa: N806
    X16, W16 = X.astype(np.int16), W.astype(np.int16)  # noqa: N806
    block = position_block(tuple(grid), groups, R)
    tiles = reuse_tiles(tuple(grid), N, R, C, position_order(decisions, tuple(grid), groups, R), block)
    slots: list[StreamSlot] = []
    per_tile = np.zeros(len(tiles), dtype=np.int64)
    for t, tile in enumerate(tiles):
        rows = len(tile.tokens)
        dec = decisions[tile.tokens]
        sched = tile_schedule(dec, groups, b_msb)
        ncols = tile.n1 - tile.n0
        if not sched:  # every row REUSEs every group: one bubble slot carries `last`
            slots.append(StreamSlot(
                np.zeros(R, np.int16), np.zeros(R, np.int16), np.zeros(R, np.uint8), np.zeros(R, np.uint8),
                np.zeros(C, np.int16), np.zeros(C, np.int16), 0, 0, False, False, True, tile.clear))
            per_tile[t] = 1
            continue
        per_tile[t] = len(sched)
        for s_i, s in enumerate(sched):
            x_a = np.zeros(R, np.int16)
            x_b = np.zeros(R, np.int16)
            mode = np.zeros(R, np.uint8)
            sel = np.zeros(R, np.uint8)
            w_a = np.zeros(C, np.int16)
            w_b = np.zeros(C, np.int16)
            x_a[:rows] = X16[tile.tokens, s.a]
            w_a[:ncols] = W16[s.a, tile.n0:tile.n1]
            if s.b >= 0:
                x_b[:rows] = X16[tile.tokens, s.b]
                w_b[:ncols] = W16[s.b, tile.n0:tile.n1]
            for r in range(rows):
                key = (int(dec[r, s.g_a]), int(dec[r, s.g_b]) if s.b >= 0 else None)
                if key not in MODE_OF:
                    raise AssertionError(f"matcher paired incompatible channels {s.a}, {s.b} (row {r}: {key})")
                mode[r], sel[r] = MODE_OF[key]
            sp_a, sp_b = spatial[s.g_a], s.b >= 0 and spatial[s.g_b]
            if sp_a and sp_b:  # impossible: both groups COMPUTE the tile's w = 0 rows (hw/pe.py)
                raise AssertionError(f"matcher paired two w-axis channels {s.a}, {s.b}")
            slots.append(StreamSlot(
                x_a, x_b, mode, sel, w_a, w_b, s.g_a, s.g_b if s.b >= 0 else 0,
                s.first_a, s.first_b, s_i == len(sched) - 1, tile.clear and s_i == 0, sp_a, sp_b))
    return Stream(slots, tiles, per_tile)


def pack_lanes(values: np.ndarray, bits: int) -> int:
    """Pack lane values (two's complement, `bits` wide) into an int: lane i at bits [bits*i + bits-1 : bits*i]."""
    mask = (1 << bits) - 1
    out = 0
    for i, v in enumerate(values):
        out |= (int(v) & mask) << (bits * i)
    return out


def unpack_lanes(value: int, n: int, bits: int, signed: bool = True) -> np.ndarray:
    """Inverse of `pack_lanes`: n lanes of `bits` bits, sign-extended when `signed`; int64."""
    mask = (1 << bits) - 1
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        v = (value >> (bits * i)) & mask
        if signed and v >> (bits - 1):
            v -= 1 << bits
        out[i] = v
    return out


def port_values(s: StreamSlot, x_unsigned: bool) -> dict[str, int]:
    """The top-level input port values (``hw.top.top_signature``) that present slot `s`, valid high."""
    return {
        "in_valid": 1,
        "in_x_a": pack_lanes(s.x_a, 8), "in_x_b": pack_lanes(s.x_b, 8),
        "in_mode": pack_lanes(s.mode, MODE_BITS), "in_sel": pack_lanes(s.sel, 1),
        "in_w_a": pack_lanes(s.w_a, 8), "in_w_b": pack_lanes(s.w_b, 8),
        "in_g_a": int(s.g_a), "in_g_b": int(s.g_b),
        "in_first_a": int(s.first_a), "in_first_b": int(s.first_b),
        "in_sp_a": int(s.sp_a), "in_sp_b": int(s.sp_b),
        "in_last": int(s.last), "in_clear": int(s.clear),
        "x_unsigned": int(x_unsigned),
    }


class OutputCollector:
    """Places the top's result rows into output matrices (timing contract, docs/architecture.md).

    Tile t (in issue order) leaves on port ``t mod d``, its R rows in order on consecutive valid
    cycles of that port; row r of tile t is token ``tile.tokens[r]`` (rows past the tile's valid
    rows are padding and dropped), columns ``tile.n0 .. tile.n1``.

    Args:
        placed: ``(tile, Y)`` per tile in issue order, ``Y`` the int64 ``[M, N]`` matrix the tile's
            rows go to (several GEMMs may share one stream, e.g. the heads of ``qk``).
        cfg: the accelerator config (R, C, d, acc_bits).
    """

    def __init__(self, placed: list, cfg: AcceleratorConfig):
        self.R, self.C, self.d, self.ab = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle, cfg.acc_bits
        self.rb = row_bits(cfg)
        self.placed = placed
        self.port_tiles = [list(range(p, len(placed), self.d)) for p in range(self.d)]
        self.rows_seen = [0] * self.d
        self.tiles_left = len(placed)

    def sample(self, out_valid: int, out_data: int, out_row: int) -> bool:
        """Take one cycle's output ports; True when a tile's last row arrived this cycle.

        Raises:
            AssertionError: a row index out of order or a row for no pending tile (an RTL bug).
        """
        done = False
        for p in range(self.d):
            if not (out_valid >> p) & 1:
                continue
            row = (out_row >> (p * self.rb)) & ((1 << self.rb) - 1)
            if row != self.rows_seen[p] or not self.port_tiles[p]:
                raise AssertionError(f"port {p}: row {row}, expected {self.rows_seen[p]} "
                                     f"({len(self.port_tiles[p])} tiles pending)")
            tile, Y = self.placed[self.port_tiles[p][0]]  # noqa: N806
            vals = unpack_lanes(out_data >> (p * self.C * self.ab), self.C, self.ab)
            if row < len(tile.tokens):
                Y[tile.tokens[row], tile.n0:tile.n1] = vals[:tile.n1 - tile.n0]
            self.rows_seen[p] += 1
            if self.rows_seen[p] == self.R:
                self.rows_seen[p] = 0
                self.port_tiles[p].pop(0)
                self.tiles_left -= 1
                done = True
        return done
