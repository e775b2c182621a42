"""Seeded RTL test cases shared by the cocotb benches and pytest: operands, groups, decisions.

Each case is a small GEMM on the token grid with temporal channel groups (the reuse source the
RTL holds in PE registers) and a random mix of decisions: some groups coherent over the tile
(so the matcher drops or pairs them), others scattered per token.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE


@dataclass
class Case:
    name: str
    X: np.ndarray           # [M, K] int8 or uint8
    W: np.ndarray           # [K, N] int8
    grid: tuple[int, int, int]
    groups: list[tuple[int, int, str]]
    decisions: np.ndarray   # [M, G] int8
    x_unsigned: bool


def random_decisions(rng, grid, n_groups, p_scatter=0.5) -> np.ndarray:
    F, H, W = grid  # noqa: N806
    hw = H * W
    dec = np.zeros((F, hw, n_groups), dtype=np.int8)
    for f in range(1, F):
        for g in range(n_groups):
            if rng.random() < p_scatter:
                dec[f, :, g] = rng.choice([COMPUTE, PARTIAL, REUSE], size=hw, p=[0.3, 0.35, 0.35])
            else:
                dec[f, :, g] = rng.choice([COMPUTE, PARTIAL, REUSE], p=[0.2, 0.4, 0.4])
    return dec.reshape(F * hw, n_groups)


def make_case(name, seed, grid, K, N, group_sizes, x_unsigned=False, dense=False) -> Case:  # noqa: N803
    rng = np.random.default_rng(seed)
    M = int(np.prod(grid))  # noqa: N806
    if x_unsigned:
        X = rng.integers(0, 256, size=(M, K), dtype=np.int64).astype(np.uint8)  # noqa: N806
        X[0, :2] = [0, 255]
    else:
        X = rng.integers(-128, 128, size=(M, K), dtype=np.int64).astype(np.int8)  # noqa: N806
        X[0, :2] = [-128, 127]
    W = rng.integers(-128, 128, size=(K, N), dtype=np.int64).astype(np.int8)  # noqa: N806
    W[0, :2] = [-128, 127]
    assert sum(group_sizes) == K
    groups, k = [], 0
    for s in group_sizes:
        groups.append((k, k + s, "f"))
        k += s
    if dense:
        dec = np.zeros((M, len(groups)), dtype=np.int8)
    else:
        dec = random_decisions(rng, grid, len(groups))
    return Case(name, X, W, tuple(grid), groups, dec, x_unsigned)


def complementary_case(seed: int, rows: int, cols: int) -> Case:
    """Row-complementary groups so the matcher pairs across groups and rows select lane b:
    g0 COMPUTE / g1 REUSE on the upper half of the rows and the opposite on the lower half;
    g2 PARTIAL / g3 REUSE likewise; g4 PARTIAL everywhere (pairs with itself); g5 COMPUTE / g6
    PARTIAL on complementary halves (COMPUTE on lane a beside PARTIAL on lane b; g6's odd channel
    is a lone PARTIAL)."""
    grid = (3, 1, rows)
    c = make_case("complementary", seed, grid, 19, cols, [3, 3, 2, 2, 4, 2, 3])
    upper = np.arange(rows) < rows // 2
    for f in range(1, 3):
        sl = slice(f * rows, (f + 1) * rows)
        c.decisions[sl, 0] = np.where(upper, COMPUTE, REUSE)
        c.decisions[sl, 1] = np.where(upper, REUSE, COMPUTE)
        c.decisions[sl, 2] = np.where(upper, PARTIAL, REUSE)
        c.decisions[sl, 3] = np.where(upper, REUSE, PARTIAL)
        c.decisions[sl, 4] = PARTIAL
        c.decisions[sl, 5] = np.where(upper, COMPUTE, REUSE)
        c.decisions[sl, 6] = np.where(upper, REUSE, PARTIAL)
    return c


def cases_for(rows: int, cols: int) -> list[Case]:
    """Cases sized for an R x C array: full and partial position blocks and column blocks,
    K not a multiple of anything, short K (drain-bound), uint8 operands, a dense op, and
    row-complementary groups (cross-group pairing, lane-b selects)."""
    hw_full = rows  # one position block exactly
    return [
        make_case("mixed", 1, (4, 2, hw_full // 2), 20, cols + cols // 2, [6, 6, 4, 4]),
        make_case("uint8_two_blocks", 2, (3, 3, (rows + rows // 2) // 3 or 1), 16, cols, [4, 4, 4, 4],
                  x_unsigned=True),
        make_case("short_k", 3, (3, 1, rows), 3, cols, [1, 2]),
        make_case("dense", 4, (2, 1, rows), 12, cols, [4, 4, 4], dense=True),
        complementary_case(5, rows, cols),
    ]


def _with_axes(c: Case, axes: list[str]) -> Case:
    """Give the case's groups these reuse axes and make its decisions valid for them: a token
    without a neighbour (``w = 0`` for axis ``w``, frame 0 for ``f``) COMPUTEs."""
    c.groups = [(k0, k1, a) for (k0, k1, _), a in zip(c.groups, axes, strict=True)]
    f_i, _, w_i = np.unravel_index(np.arange(c.X.shape[0]), c.grid)
    for gi, a in enumerate(axes):
        c.decisions[(w_i if a == "w" else f_i) == 0, gi] = COMPUTE
    return c


def spatial_cases(rows: int, cols: int) -> list[Case]:
    """Cases with ``w``-axis groups (the PE row link, docs/decisions.md D4), W <= R so a tile holds
    whole image rows:

    - ``spatial_random``: grid 3 x 2 x R/2 (one tile per frame), two column blocks, ``w`` and ``f``
      groups with scattered and coherent decisions in every frame (``w`` groups reuse in frame 0
      too), long REUSE/PARTIAL chains along ``w``;
    - ``spatial_rows``: grid 2 x 3 x R/2 (1.5 tiles per frame: a full and a half tile of whole rows);
    - ``spatial_pairs``: row-complementary ``w``/``f`` groups so the matcher pairs a spatial lane with
      a temporal one, spatial on lane a and on lane b (COMPUTE beside link REUSE, PAIRED PARTIALs).
    """
    half = max(1, rows // 2)
    a = _with_axes(make_case("spatial_random", 7, (3, 2, half), 14, cols + cols // 2, [3, 4, 3, 4]),
                   ["w", "f", "w", "f"])
    rng = np.random.default_rng(8)
    for gi in (0, 2):  # w groups: every frame, REUSE-heavy (chains), then w = 0 COMPUTE again
        a.decisions[:, gi] = rng.choice([COMPUTE, PARTIAL, REUSE], size=a.X.shape[0], p=[0.15, 0.35, 0.5])
    a = _with_axes(a, ["w", "f", "w", "f"])
    b = _with_axes(make_case("spatial_rows", 9, (2, 3, half), 10, cols, [4, 3, 3]), ["w", "f", "w"])
    grid = (3, 2, half)
    c = make_case("spatial_pairs", 10, grid, 20, cols, [3, 3, 2, 2, 3, 3, 2, 2])
    w0 = np.arange(int(np.prod(grid))) % half == 0
    c.decisions[:, 0] = np.where(w0, COMPUTE, REUSE)          # w: w = 0 computes, the rest reuse (chains)
    c.decisions[:, 1] = np.where(w0, REUSE, COMPUTE)          # f: complementary -> pairs with g0
    c.decisions[:, 2] = np.where(w0, COMPUTE, PARTIAL)        # w: PARTIAL chain
    c.decisions[:, 3] = np.where(w0, REUSE, PARTIAL)          # f: pairs with g2 (PAIRED, spatial lane a)
    w4 = np.arange(int(np.prod(grid))) % half % 4
    c.decisions[:, 4] = np.array([REUSE, COMPUTE, REUSE, REUSE])[w4]      # f, then w: spatial on lane b
    c.decisions[:, 5] = np.array([COMPUTE, REUSE, PARTIAL, REUSE])[w4]    # beside C, C, P, R on lane a
    c.decisions[:, 6] = np.array([REUSE, PARTIAL, PARTIAL, COMPUTE])[w4]  # f, then w: PAIRED, spatial
    c.decisions[:, 7] = np.array([COMPUTE, PARTIAL, PARTIAL, REUSE])[w4]  # on lane b
    c = _with_axes(c, ["w", "f", "w", "f", "f", "w", "f", "w"])
    return [a, b, c]


def spatial_random_cases(rows: int, cols: int) -> list[Case]:
    """Seeded random cases with ``w``-axis groups over image-row widths W <= R that fill a tile
    exactly (W = R: one image row per tile), leave padding rows (W = 3: 6 of 8 rows) or leave an odd
    block (W = 5, 7), uint8 operands, only-``w`` groups; ``w`` groups REUSE-heavy (chains)."""
    specs = [  # name, seed, grid, K, N, group sizes, axes, uint8
        ("spatial_w_eq_r", 21, (2, 2, rows), 9, cols, [4, 5], ["w", "f"], False),
        ("spatial_padded", 22, (3, 3, 3), 12, cols + 3, [3, 3, 3, 3], ["f", "w", "f", "w"], False),
        ("spatial_uint8", 23, (2, 2, 5), 10, cols, [5, 5], ["w", "f"], True),
        ("spatial_only_w", 24, (4, 1, 7), 11, cols, [4, 4, 3], ["w", "w", "w"], False),
    ]
    out = []
    for name, seed, grid, K, N, sizes, axes, u8 in specs:  # noqa: N806
        if grid[2] > rows:
            continue
        c = make_case(name, seed, grid, K, N, sizes, x_unsigned=u8)
        rng = np.random.default_rng(seed + 100)
        for gi, a in enumerate(axes):
            if a == "w":
                c.decisions[:, gi] = rng.choice([COMPUTE, PARTIAL, REUSE], size=c.X.shape[0], p=[0.2, 0.3, 0.5])
        out.append(_with_axes(c, axes))
    return out


def acc_width_case(rows: int, cols: int, max_k: int) -> Case:
    """Proves the accumulator width: K = max_k, every X = 255 (uint8, pv's P) and every W = -128,
    so each output is max_k * 255 * -128, the most negative value any op can produce
    (hw.config.AcceleratorConfig.acc_bits); dense, one tile of R tokens x C columns."""
    c = make_case("acc_width", 6, (1, 1, rows), max_k, cols, [max_k // 8] * 8, x_unsigned=True, dense=True)
    c.X[:] = 255
    c.W[:] = -128
    return c


def engine_trace(seed: int = 0, spatial: bool = False, grid: tuple[int, int, int] = (3, 2, 4)):
    """A small exact trace for ``kaleido simulate --engine rtl`` on tiny-8x8: grid 3x2x4 (24 tokens,
    one position block of 8 per frame; `grid` = (F, H, W) changes it, e.g. 2x4x8 for one block of 32),
    frames after the first close to frame 0 so every decision occurs;
    ops ``qkv`` (K = 20 in three temporal groups, N = 12: two column blocks), ``qk`` (2 heads,
    K = 8, N = 12 keys; its t-group reuses along ``w`` as in the models, docs/spec.md §2, and drifts by
    small steps along ``w`` so it REUSEs and PARTIALs over the PE row link) and ``pv`` (2 heads, uint8 P, K = 12, N = 8). With `spatial`, one extra op
    whose group reuses along ``h`` (constant operands: every token reuses), which the RTL rejects
    (the partial-result buffer is not built; ``w`` is served by the PE row link, docs/decisions.md D4)."""
    from algo.trace import Group, OpRecord, Trace

    rng = np.random.default_rng(seed)
    F, H, W = grid  # noqa: N806

    def frames(batch, K, lo, hi, dtype):  # noqa: N803
        base = rng.integers(lo, hi, size=(batch, 1, H * W, K))
        x = np.concatenate([base + rng.integers(-3, 4, size=(batch, 1, H * W, K)) * (f > 0) for f in range(F)],
                           axis=1)
        return np.clip(x.reshape(batch, F * H * W, K), lo, hi - 1).astype(dtype)

    def smooth_w(x, k0, k1):
        """Channels k0..k1 start at the w = 0 value and drift by steps of -6..6 along w."""
        v = x.reshape(x.shape[0], F, H, W, -1).astype(np.int64)
        steps = rng.integers(-6, 7, size=(*v.shape[:4], k1 - k0))
        steps[:, :, :, 0] = 0
        v[..., k0:k1] = v[:, :, :, :1, k0:k1] + np.cumsum(steps, axis=3)
        return np.clip(v, -100, 99).reshape(x.shape).astype(x.dtype)

    def weights(batch, K, N):  # noqa: N803
        return rng.integers(-128, 128, size=(batch, K, N)).astype(np.int8)

    ops = [
        OpRecord("qkv", 0, 0, frames(1, 20, -60, 60, np.int8), weights(1, 20, 12),
                 [Group(0, 8, "f"), Group(8, 14, "f"), Group(14, 20, "f")], (2.0, 6.0)),
        OpRecord("qk", 0, 0, smooth_w(frames(2, 8, -100, 100, np.int8), 0, 4), weights(2, 8, 12),
                 [Group(0, 4, "w", "t"), Group(4, 8, "f", "h")], (3.0, 8.0)),
        OpRecord("pv", 0, 0, frames(2, 12, 0, 256, np.uint8), weights(2, 12, 8),
                 [Group(0, 6, "f"), Group(6, 12, "f")], (2.0, 6.0), x_signed=False),
    ]
    if spatial:
        ops.append(OpRecord("ffn1", 0, 0, np.full((1, F * H * W, 8), 5, np.int8), weights(1, 8, 8),
                            [Group(0, 8, "h")], (2.0, 6.0)))
    return Trace(grid=(F, H, W), ops=ops, model="synthetic", size="test", weights="random")


def core_load_beats(case: Case, stream, cfg, P: int):  # noqa: N803
    """The load beats that feed `hw.core.TileCore` (and the emitted ``kaleido_core``) one stream.

    For every tile of ``stream`` (`sim.timing.stream.build_stream`) and every beat ``j`` of ``ceil(K / P)``
    beats, yields a dict of the core's load-port values: ``ld_beat``, ``ld_last``, ``ld_x`` /
    ``ld_w`` (P channels x R rows of X and P channels x C columns of W, int8 lanes packed by
    `sim.timing.stream.pack_lanes`, zeros past K and past the tile's rows/columns), and on a tile's last
    beat its descriptor: ``t_dec`` (2 bits per (row, group), row-major over ``partial_regs``
    groups), ``t_row_mask``, ``t_k0`` / ``t_k1`` (group channel ranges, `channel_bits` each),
    ``t_n_groups``, ``t_clear``, ``t_wgroups`` (bit g set for a ``w``-axis group). ``ld_valid`` is the caller's.
    """
    from hw.dispatcher.matcher import channel_bits
    from sim.timing.stream import pack_lanes

    R, C, G, cb = cfg.array_rows, cfg.array_cols, cfg.partial_regs, channel_bits(cfg)  # noqa: N806
    K = case.X.shape[1]  # noqa: N806
    nb = -(-K // P)
    X16, W16 = case.X.astype(np.int16), case.W.astype(np.int16)  # noqa: N806
    k0 = sum(g[0] << (i * cb) for i, g in enumerate(case.groups))
    k1 = sum(g[1] << (i * cb) for i, g in enumerate(case.groups))
    for tile in stream.tiles:
        rows, ncols = len(tile.tokens), tile.n1 - tile.n0
        dec = case.decisions[tile.tokens]
        for j in range(nb):
            xs, ws = np.zeros((P, R), np.int16), np.zeros((P, C), np.int16)
            for p in range(P):
                k = j * P + p
                if k < K:
                    xs[p, :rows] = X16[tile.tokens, k]
                    ws[p, :ncols] = W16[k, tile.n0:tile.n1]
            beat = {"ld_beat": j, "ld_last": int(j == nb - 1), "ld_x": pack_lanes(xs.reshape(-1), 8),
                    "ld_w": pack_lanes(ws.reshape(-1), 8)}
            if j == nb - 1:
                beat.update(t_dec=sum(int(dec[r, g]) << (2 * (r * G + g))
                                      for r in range(rows) for g in range(dec.shape[1])),
                            t_row_mask=(1 << rows) - 1, t_k0=k0, t_k1=k1, t_n_groups=len(case.groups),
                            t_clear=int(tile.clear),
                            t_wgroups=sum(1 << g for g, grp in enumerate(case.groups) if grp[2] == "w"))
            yield beat
