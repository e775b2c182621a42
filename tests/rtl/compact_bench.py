"""Stimulus and checks for the compact organisation's RTL (`hw.compact_array.CompactTop`, `hw.combine`).

The band-tiles of a case come from `sim.timing.compact_reference.band_tiles` (the value reference's
own tiling; the numba tiling equals it, tests/test_organisations.py), repeated per column block; the
band each band-tile runs on from `sim.timing.compact.band_schedule` (the controller's choice, which is
not RTL yet, docs/decisions.md D65). Each band-tile becomes slots on its band's input: rows 0 .. c - 1
its COMPUTE tokens (mode COMPUTE, channel k of the group on ``x_a``), then its PARTIAL tokens (mode
PARTIAL on a full-width band-tile; on a half-width one, two channels per slot, PAIRED, PARTIAL for an
odd group's last channel), idle rows REUSE. The expected drained words are computed here from X and W
(``out`` = Σ X w over the group for COMPUTE, Σ lo(X) w for PARTIAL; ``out_m`` = Σ msb(X) w), apart from
the RTL.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

import numpy as np

from algo.reuse.golden import split_msb
from hw.pe import PEMode
from sim.timing.compact import band_rows, band_schedule
from sim.timing.compact_reference import band_tiles


@dataclass
class Slot:
    """One band input cycle's values (`hw.compact_array.ctop_signature`'s ``b{b}_*`` ports, unpacked)."""

    x_a: list
    x_b: list
    mode: list
    w_a: list
    w_b: list
    first: int
    last: int
    rows: int


@dataclass
class BandTileRun:
    """One band-tile of one column block: its group, column block, tokens by row, whether each row is
    PARTIAL, the expected (``out``, ``out_m``) per row and column, and the model's schedule."""

    group: int
    n0: int
    tokens: list
    partial: list
    slots: list[Slot]
    want: np.ndarray  # int64 [rows, C, 2]
    band: int = -1
    first: int = -1
    last: int = -1
    got_last: int = -1
    got_band: int = -1
    port: int = -1
    drained: list = field(default_factory=list)


def build_runs(case, cfg, fw: int | None = None) -> list[BandTileRun]:
    """Band-tiles of ``case`` in issue order (column blocks outer) with slots, expected words and schedule;
    ``fw``: frames per chunk (default all frames)."""
    R, C, brows = cfg.array_rows, cfg.array_cols, band_rows(cfg)  # noqa: N806
    X, W = case.X.astype(np.int64), case.W.astype(np.int64)  # noqa: N806
    hi, lo = split_msb(case.X, 4)
    hi, lo = hi.astype(np.int64), lo.astype(np.int64)
    K, N = W.shape  # noqa: N806
    widths = [k1 - k0 for k0, k1, _ in case.groups]
    tiles = band_tiles(case.decisions, case.grid, widths, R, brows, fw=fw or case.grid[0])
    runs = []
    for n0 in range(0, N, C):
        ncol = min(C, N - n0)
        Wb = np.zeros((K, C), dtype=np.int64)  # noqa: N806
        Wb[:, :ncol] = W[:, n0:n0 + ncol]
        for bt in tiles:
            k0, k1, _ = case.groups[bt.group]
            toks = list(bt.compute) + list(bt.partial)
            part = [False] * len(bt.compute) + [True] * len(bt.partial)
            half = not bt.compute and bt.slots < widths[bt.group]
            chans = [(k0 + 2 * s, k0 + 2 * s + 1 if k0 + 2 * s + 1 < k1 else None) if half else (k0 + s, None)
                     for s in range(bt.slots)]
            slots = []
            for s, (ca, cb) in enumerate(chans):
                xa, xb, md = [0] * brows, [0] * brows, [int(PEMode.REUSE)] * brows
                for i, (t, p) in enumerate(zip(toks, part, strict=True)):
                    xa[i] = int(X[t, ca])
                    xb[i] = int(X[t, cb]) if cb is not None else 0
                    md[i] = int(PEMode.COMPUTE if not p else PEMode.PAIRED if cb is not None else PEMode.PARTIAL)
                slots.append(Slot(xa, xb, md, list(Wb[ca]), list(Wb[cb]) if cb is not None else [0] * C,
                                  int(s == 0), int(s == len(chans) - 1), len(toks)))
            want = np.zeros((len(toks), C, 2), dtype=np.int64)
            for i, (t, p) in enumerate(zip(toks, part, strict=True)):
                want[i, :, 0] = (lo if p else X)[t, k0:k1] @ Wb[k0:k1]
                want[i, :, 1] = 0 if p else hi[t, k0:k1] @ Wb[k0:k1]
            runs.append(BandTileRun(bt.group, n0, toks, part, slots, want))
    band, first, last = band_schedule(np.array([len(r.slots) for r in runs], dtype=np.int64),
                                      np.array([len(r.tokens) for r in runs], dtype=np.int64), cfg)
    for r, b, f, ll in zip(runs, band, first, last, strict=True):
        r.band, r.first, r.last = int(b), int(f), int(ll)
    return runs


def pack(values, bits: int) -> int:
    """Pack signed or unsigned integers into one unsigned word, lane i at bits ``[bits i, bits (i + 1))``."""
    out, mask = 0, (1 << bits) - 1
    for i, v in enumerate(values):
        out |= (int(v) & mask) << (bits * i)
    return out


def unpack_signed(word: int, bits: int, n: int) -> list[int]:
    """``n`` signed ``bits``-bit lanes of ``word`` (lane i at bits ``[bits i, bits (i + 1))``)."""
    out = []
    for i in range(n):
        v = (word >> (bits * i)) & ((1 << bits) - 1)
        out.append(v - (1 << bits) if v >> (bits - 1) else v)
    return out


def combine_program(case, runs, cfg):
    """The partial-sum SRAM writes and the combine commands of ``case`` (`hw.combine.Combine`), per column
    block: ``[(n0, writes, commands)]`` with writes ``(port, addr, word)`` (each drained row at the next
    free address of the staging macro of the port it left on) and commands (dicts of the ``c_*`` ports)
    in raster order, per token its groups in order. State word of (position p, group g): ``p x
    partial_regs + g`` (one pool: the cases' H W <= R); a ``w``/``h`` REUSE run points its successor at
    the chain's last written word (`hw.combine` docstring); ``keep`` = `successor_reads`."""
    from hw.combine import combine_sizes
    from sim.cost.compact_actions import successor_reads

    F, H, W = case.grid  # noqa: N806
    G, P, ab = len(case.groups), cfg.partial_regs, cfg.acc_bits  # noqa: N806
    assert H * W <= cfg.array_rows
    depth = combine_sizes(cfg)["stage_depth"]
    keep = successor_reads(case.decisions, case.grid, case.groups)
    out = []
    for n0 in sorted({r.n0 for r in runs}):
        writes, where, nxt = [], {}, collections.Counter()
        for r in runs:
            if r.n0 != n0:
                continue
            for t, got in zip(r.tokens, r.drained, strict=True):
                assert nxt[r.port] < depth
                writes.append((r.port, nxt[r.port], pack(got.reshape(-1), ab)))
                where[(t, r.group)] = (r.port, nxt[r.port])
                nxt[r.port] += 1
        head = {}  # (token, group) -> state word holding its chain's state
        cmds = []
        for t in range(case.X.shape[0]):
            f, h, w = (int(v) for v in np.unravel_index(t, case.grid))
            p = h * W + w
            for g, (_k0, _k1, ax) in enumerate(case.groups):
                dec = int(case.decisions[t, g])
                own = p * P + g
                nb = {"f": (f - 1, h, w), "h": (f, h - 1, w), "w": (f, h, w - 1)}[ax]
                nbt = int(np.ravel_multi_index(nb, case.grid)) if min(nb) >= 0 else -1
                raddr = head.get((nbt, g), own) if ax != "f" else own
                head[(t, g)] = raddr if dec == 2 else own
                port, saddr = where.get((t, g), (0, 0))
                cmds.append({"c_dec": dec, "c_port": port, "c_saddr": saddr, "c_raddr": raddr, "c_waddr": own,
                             "c_keep": int(keep[t, g]), "c_first": int(g == 0), "c_last": int(g == G - 1)})
        out.append((n0, writes, cmds))
    return out
