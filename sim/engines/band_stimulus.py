"""The band-tile stimulus of the banded array tops (``kaleido_ctop``, ``kaleido_dtop``; `hw.compact_array`): one
GEMM's band-tiles in its organisation's issue order, each band-tile's slots as the ``b{b}_*`` ports carry them,
the words its rows should drain, and the cycle model's schedule of them (docs/decisions.md D65, D73, D86).

Band-tiles come from `sim.timing.compact_reference.band_tiles` (the value reference's tiling; the numba
`sim.timing.compact.compact_tiles` counts the same ones, and gives each its chunk), repeated per column block in
the issue order `sim.engines.model` times the organisation with (`issue_order`):

- compact: column block outer, each column block's band-tiles in sequence;
- delta without a difference-sum buffer (D68): per group of ``s`` column blocks, each band-tile once per column
  block of the group (`sim.timing.delta.issue_order`);
- delta with one (``diff_sram_kib`` > 0, D84): chunk-major, per column-block group and chunk the chunk's
  band-tiles once per column block (`sim.timing.delta.chunk_major`).

A band-tile's slots (`BandTile`): rows 0 .. c - 1 its COMPUTE tokens (mode COMPUTE, channel k of the group on
``x_a``), then its PARTIAL tokens (mode PARTIAL on a full-width band-tile; on a half-width one two channels per
slot, PAIRED, PARTIAL for an odd group's last channel), idle rows REUSE with zero operands. Operands are X
(int8 or uint8, compact) or the 9-bit differences of `sim.timing.delta_reference.differences` (delta). The
expected drained words are computed here from X and W, apart from the RTL: compact ``out`` = sum X w over the
group (COMPUTE) or sum lo(X) w (PARTIAL) and ``out_m`` = sum msb(X) w (0 for PARTIAL); delta one word, the row's
difference sum.

Used by the compiled band engine (`sim.engines.verilator_band`) and the Amaranth-simulator benches
(tests/rtl/compact_bench.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algo.reuse.golden import split_msb
from hw.config import AcceleratorConfig
from hw.pe import PEMode


@dataclass
class BandTile:
    """One band-tile of one column block, as its band's ports carry it.

    Attributes:
        group: channel group index; n0: first output column of its column block; cb: column block index.
        tokens: int64 ``[rows]`` raster token of each valid row; partial: bool ``[rows]`` (PARTIAL row).
        x_a, x_b, mode: int64 ``[slots, R / B]`` per slot and band row (operands signed: int8, uint8 as
            0..255, or 9-bit differences; modes `hw.pe.PEMode`); w_a, w_b: int64 ``[slots, C]`` weights.
        want: int64 ``[rows, C, words]``: the expected drained words (module docstring; words 2 compact, 1 delta).
    """

    group: int
    n0: int
    cb: int
    tokens: np.ndarray
    partial: np.ndarray
    x_a: np.ndarray
    x_b: np.ndarray
    mode: np.ndarray
    w_a: np.ndarray
    w_b: np.ndarray
    want: np.ndarray

    @property
    def slots(self) -> int:
        return int(self.x_a.shape[0])


@dataclass
class BandOp:
    """One GEMM's band-tiles in issue order with the cycle model's schedule of them.

    Attributes:
        tiles: `BandTile` list, issue order.
        band, first, last: int64 ``[T]``: `sim.timing.compact.band_schedule` (band, first and last slot cycle).
        cycles: `sim.timing.compact.band_cycles`'s op cycles (the last row's read cycle + C + 2).
    """

    tiles: list[BandTile]
    band: np.ndarray
    first: np.ndarray
    last: np.ndarray
    cycles: int

    @property
    def s_seq(self) -> np.ndarray:
        return np.array([t.slots for t in self.tiles], dtype=np.int64)

    @property
    def rows(self) -> np.ndarray:
        return np.array([len(t.tokens) for t in self.tiles], dtype=np.int64)


def issue_order(tile_chunks: np.ndarray, n_cb: int, cfg: AcceleratorConfig, s: int = 1,
                chunk_major: bool | None = None) -> list[tuple[int, int]]:
    """``(band-tile index, column block)`` per issued band-tile (module docstring).

    Args:
        tile_chunks: int64 ``[T]`` each band-tile's chunk (`sim.timing.compact.compact_tiles` with ``chunks``).
        n_cb: column blocks; s: column blocks per group (delta, `sim.timing.delta.plan`; compact: 1).
        chunk_major: delta's order: True D84's, False D68's, None as the config (``diff_sram_kib`` > 0: D84).
    """
    from sim.timing import delta as dl

    T = len(tile_chunks)  # noqa: N806
    if cfg.organisation != "delta":
        return [(t, cb) for cb in range(n_cb) for t in range(T)]
    groups, c0 = [], 0
    for k in dl.column_groups(n_cb, s):
        groups.append(range(c0, c0 + k))
        c0 += k
    if not (bool(cfg.diff_sram_kib) if chunk_major is None else chunk_major):
        return [(t, cb) for cbs in groups for t in range(T) for cb in cbs]
    starts = np.flatnonzero(np.r_[True, np.diff(tile_chunks) != 0, True]) if T else np.zeros(1, np.int64)
    out = [(t, cb) for cbs in groups for c in range(len(starts) - 1) for cb in cbs
           for t in range(starts[c], starts[c + 1])]
    return out  # the same order as `sim.timing.delta.chunk_major` (tests/test_rtl_band_regression.py)


def band_op(X: np.ndarray, W: np.ndarray, grid, groups, dec: np.ndarray, cfg: AcceleratorConfig,  # noqa: N803
            fw: int | None = None, s: int = 1, chunk_major: bool | None = None) -> BandOp:
    """The band-tiles of ``Y = X_eff W`` on ``cfg``'s banded array (compact or delta), in issue order, with their
    slots, expected words and schedule (module docstring).

    Args:
        X: int8/uint8 ``[M, K]``; W: int8 ``[K, N]``; grid ``(F, H, W)``; groups ``(k0, k1, axis)``; dec: int8
            ``[M, G]`` decisions (`algo.reuse.golden.decide`), b_msb = 4 (the RTL's split).
        fw: frames per chunk (default every frame); s, chunk_major: `issue_order`.

    Raises:
        ValueError: ``cfg`` is the lockstep organisation, or as `sim.timing.delta_reference.differences` (a group
            that is not COMPUTE without a neighbour).
    """
    from sim.timing.compact import band_cycles, band_rows, band_schedule, compact_tiles
    from sim.timing.compact_reference import band_tiles
    from sim.timing.delta_reference import differences

    if cfg.organisation not in ("compact", "delta"):
        raise ValueError(f"band-tiles need the compact or delta organisation; {cfg.name} is {cfg.organisation!r}")
    delta = cfg.organisation == "delta"
    R, C, brows = cfg.array_rows, cfg.array_cols, band_rows(cfg)  # noqa: N806
    F = grid[0]  # noqa: N806
    fw = fw or F
    ops = (differences(X, grid, groups, dec) if delta else np.asarray(X)).astype(np.int64)
    hi, lo = (v.astype(np.int64) for v in split_msb(X, 4))
    W64 = np.asarray(W).astype(np.int64)  # noqa: N806
    K, N = W64.shape  # noqa: N806
    n_cb = -(-N // C)
    Wp = np.zeros((K, n_cb * C), dtype=np.int64)  # noqa: N806  (W padded to whole column blocks)
    Wp[:, :N] = W64
    widths = [k1 - k0 for k0, k1, _ in groups]
    tiles = band_tiles(dec, grid, widths, R, brows, fw)
    (slots, *_), chunk = compact_tiles(dec, grid, groups, cfg, fw, 4, chunks=True)
    assert slots.tolist() == [bt.slots for bt in tiles], "compact_reference.band_tiles != compact_tiles"
    out = []
    for t, cb in issue_order(chunk, n_cb, cfg, s, chunk_major):
        bt = tiles[t]
        k0, k1, _ = groups[bt.group]
        toks = np.array(list(bt.compute) + list(bt.partial), dtype=np.int64)
        part = np.arange(len(toks)) >= len(bt.compute)
        half = not bt.compute and bt.slots < k1 - k0
        ca = k0 + (2 * np.arange(bt.slots) if half else np.arange(bt.slots))
        cbx = np.where(half & (ca + 1 < k1), ca + 1, -1)
        Wb = Wp[:, cb * C:(cb + 1) * C]  # noqa: N806
        xa = np.zeros((bt.slots, brows), np.int64)
        xb = np.zeros((bt.slots, brows), np.int64)
        mode = np.full((bt.slots, brows), int(PEMode.REUSE), np.int64)
        n = len(toks)
        xa[:, :n] = ops[toks][:, ca].T
        xb[:, :n] = np.where(cbx[:, None] >= 0, ops[toks][:, np.maximum(cbx, 0)].T, 0)
        pm = np.where(cbx >= 0, int(PEMode.PAIRED), int(PEMode.PARTIAL))
        mode[:, :n] = np.where(part[None, :], pm[:, None], int(PEMode.COMPUTE))
        wa = Wb[ca]
        wb = np.where(cbx[:, None] >= 0, Wb[np.maximum(cbx, 0)], 0)
        g = slice(k0, k1)
        if delta:
            want = (ops[toks, g] @ Wb[g])[:, :, None]
        else:
            want = np.stack([np.where(part[:, None], lo[toks, g] @ Wb[g], ops[toks, g] @ Wb[g]),
                             np.where(part[:, None], 0, hi[toks, g] @ Wb[g])], axis=2)
        out.append(BandTile(bt.group, cb * C, cb, toks, part, xa, xb, mode, wa, wb, want))
    s_seq = np.array([t.slots for t in out], dtype=np.int64)
    rows = np.array([len(t.tokens) for t in out], dtype=np.int64)
    band, first, last = band_schedule(s_seq, rows, cfg)
    cycles = band_cycles(s_seq, rows, cfg)[0] if len(out) else 0
    return BandOp(out, band, first, last, cycles)


def pack_bits(values: np.ndarray, bits: int) -> np.ndarray:
    """uint8 ``[n, ceil(m bits / 8)]``: each row of ``values`` (int ``[n, m]``, signed or unsigned) as one
    little-endian word with lane i at bits ``[bits i, bits (i + 1))`` (two's complement, truncated to ``bits``)."""
    v = np.asarray(values, dtype=np.int64)
    lanes = (v[..., None] >> np.arange(bits)) & 1
    return np.packbits(lanes.reshape(v.shape[0], -1).astype(np.uint8), axis=1, bitorder="little")
