"""The op-level controller (hw/accel.py, D26) under Amaranth's simulator on a 4x4 array (the
core-4x4 variant of tests/test_rtl_core.py): one op end to end in hardware, operands written
through the buffer write port, then ``start``. Asserts the decision buffer equals
`algo.reuse.golden.decide`, the order buffer equals `sim.timing.dispatch.schedule_positions`, every tile's
descriptor (decisions, row mask, clear) equals `sim.timing.dispatch.reuse_tiles`' tile in issue order,
the result rows equal `algo.reuse.golden.reuse_gemm` bit for bit, and the cycles of the last result row
and of ``done`` equal `sim.timing.core_timing.accel_timeline` (and a hand count for one tiny op)."""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from algo.reuse.golden import decide, reuse_gemm, theta_bounds
from hw import discard
from hw.accel import Accel, buffer_words, op_descriptor
from sim.timing.core_timing import accel_timeline
from sim.timing.dispatch import reuse_tiles, schedule_positions
from sim.timing.stream import unpack_lanes
from tests.test_rtl_core import CFG

R, C, G, D = CFG.array_rows, CFG.array_cols, CFG.partial_regs, CFG.drain_rows_per_cycle
MAX_TOKENS, MAX_K, MAX_N, MAX_FRAMES = 80, 16, 8, 4


def make_op(seed, grid, K, N, sizes, theta, unsigned=False, noise=4):  # noqa: N803
    """Frames close to frame 0 (drift of +-noise per channel) so SADs straddle the bounds."""
    rng = np.random.default_rng(seed)
    F, H, W = grid  # noqa: N806
    lo, hi = (0, 256) if unsigned else (-128, 128)
    base = rng.integers(lo, hi, size=(1, H * W, K))
    drift = rng.integers(-noise, noise + 1, size=(F, H * W, K)) * (np.arange(F) > 0)[:, None, None]
    X = np.clip(base + drift.cumsum(axis=0), lo, hi - 1).reshape(F * H * W, K)  # noqa: N806
    X = X.astype(np.uint8 if unsigned else np.int8)  # noqa: N806
    Wt = rng.integers(-128, 128, size=(K, N)).astype(np.int8)  # noqa: N806
    Wt[0, :2] = [-128, 127]
    groups, k = [], 0
    for s in sizes:
        groups.append((k, k + s, "f"))
        k += s
    return X, Wt, tuple(grid), groups, theta, unsigned


def run_accel(ops, cfg=CFG):
    """Run the ops back to back on ONE elaborated `Accel` of `cfg` (one build serves every op: the
    descriptor and thresholds are run-time inputs); returns one result dict per op."""
    dut = Accel(cfg, max_tokens=MAX_TOKENS, max_k=MAX_K, max_n=MAX_N, max_frames=MAX_FRAMES)
    sim = Simulator(dut)
    sim.add_clock(1e-6)
    tb = dut.tb
    cw = len(dut.out_col0) // D
    ab = CFG.acc_bits
    results = []

    async def one(ctx, X, Wt, grid, groups, theta, unsigned):  # noqa: N803
        b1, b2 = theta_bounds(theta, [k1 - k0 for k0, k1, _ in groups])
        N = Wt.shape[1]  # noqa: N806
        M = X.shape[0]  # noqa: N806
        Y = np.full((M, N), np.iinfo(np.int64).min, dtype=np.int64)  # noqa: N806
        res = {"tiles": [], "last_row": None, "core_last_row": None, "done": None, "rows": 0, "Y": Y,
               "window": dut.window}
        for name, v in op_descriptor(dut, grid, groups, N, b1, b2, unsigned).items():
            ctx.set(getattr(dut, name), v)
        for sel, addr, data in buffer_words(dut, X, Wt):  # the write port: one word per cycle while idle
            ctx.set(dut.wr_valid, 1)
            ctx.set(dut.wr_sel, sel)
            ctx.set(dut.wr_addr, addr)
            ctx.set(dut.wr_data, data)
            assert ctx.get(dut.wr_ready)
            await ctx.tick()
        ctx.set(dut.wr_valid, 0)
        ctx.set(dut.start, 1)
        core = dut.core
        for cycle in range(100_000):  # cycle 0: the start cycle
            if cycle == 1:
                ctx.set(dut.start, 0)
            if ctx.get(core.ld_valid) and ctx.get(core.ld_ready) and ctx.get(core.ld_last):
                res["tiles"].append((ctx.get(core.t_dec), ctx.get(core.t_row_mask), ctx.get(core.t_clear)))
            if ctx.get(core.out_valid):  # any core row, padding rows of a partial position block included
                res["core_last_row"] = cycle
            ov = ctx.get(dut.out_valid)
            for p in range(D):
                if ov >> p & 1:
                    tok = ctx.get(dut.out_token) >> (p * tb) & ((1 << tb) - 1)
                    c0 = ctx.get(dut.out_col0) >> (p * cw) & ((1 << cw) - 1)
                    vals = unpack_lanes(ctx.get(dut.out_data) >> (p * C * ab), C, ab)
                    n = min(C, N - c0)
                    Y[tok, c0:c0 + n] = vals[:n]
                    res["rows"] += 1
                    res["last_row"] = cycle
            if ctx.get(dut.done):
                res["done"] = cycle
                await ctx.tick()
                break
            await ctx.tick()
        res["dec"] = np.array([[ctx.get(dut.peek("dec", t)) >> (2 * g) & 3 for g in range(len(groups))]
                               for t in range(M)], dtype=np.int8)
        F, H, W = grid  # noqa: N806
        res["order"] = np.array([ctx.get(dut.peek("order", p)) for p in range(H * W)], dtype=np.int64)
        results.append(res)

    async def bench(ctx):
        for op in ops:
            await one(ctx, *op)

    sim.add_testbench(bench)
    sim.run()
    return results


def check(op, res, expect_cycles=None, window_tiles=CFG.scheduler_window_tiles):
    """Assert one op's run (module docstring) against the golden model and the reference scheduler,
    tiling and timeline for a scheduler window of `window_tiles` tiles (the config's)."""
    X, Wt, grid, groups, theta, unsigned = op  # noqa: N806
    dec, _ = decide(X, grid, groups, theta, 4)
    np.testing.assert_array_equal(res["dec"], dec)
    assert res["window"] == window_tiles * R
    order = schedule_positions(dec, grid, R, window_tiles=window_tiles)
    np.testing.assert_array_equal(res["order"], order)
    N = Wt.shape[1]  # noqa: N806
    tiles = reuse_tiles(grid, N, R, C, order)
    want = []
    for t in tiles:
        rows = len(t.tokens)
        td = sum(int(dec[t.tokens[r], g]) << (2 * (r * G + g)) for r in range(rows) for g in range(len(groups)))
        want.append((td, (1 << rows) - 1, int(t.clear)))
    assert res["tiles"] == want
    Y, _ = reuse_gemm(X, Wt, grid, groups, theta, 4)  # noqa: N806
    np.testing.assert_array_equal(res["Y"], Y)
    assert res["rows"] == X.shape[0] * len(range(0, N, C))
    tl = accel_timeline(grid, groups, dec, N, R, C, D, 2, window_tiles * R)
    assert res["core_last_row"] + 1 == tl.cycles and res["done"] == tl.done
    assert res["last_row"] <= res["core_last_row"]
    if expect_cycles is not None:
        assert tl.cycles == expect_cycles
    return dec


OPS = {
    # M = 3*2*3 = 18 tokens (6 positions: a partial position block), K = 10 in groups 4/3/3
    # (K not a multiple of the group size, groups straddle two-channel words), N = 6.
    "mixed": lambda: make_op(1, (3, 2, 3), 10, 6, [4, 3, 3], (2.5, 4.0)),
    # uint8, M = 4*1*5 = 20, K = 9 in 4/5, N = 8 (two column blocks), wider thresholds: REUSE-heavy.
    "mostly_reuse": lambda: make_op(2, (4, 1, 5), 9, 8, [4, 5], (1.2, 2.0), unsigned=True, noise=1),
    # K = max_k = 16 in five groups 4/4/3/3/2, F = 4 frames (15 pattern digits), 6 positions, N = 5.
    "many_groups": lambda: make_op(4, (4, 3, 2), 16, 5, [4, 4, 3, 3, 2], (1.5, 3.0)),
    # theta = (0, 0): SAD < 0 never holds, every decision COMPUTE; 35 positions > window 32: two
    # scheduler windows (32 and 3 positions).
    "all_compute": lambda: make_op(3, (2, 5, 7), 5, 3, [3, 2], (0.0, 0.0)),
}


def tiny_op():
    """Grid (2, 1, 2): M = 4 tokens, K = 3 in one group, N = 2; frame 1 equals frame 0 and theta =
    (1, 2), so b1 = 3 > SAD = 0: frame 1 REUSEs (see `test_accel_tiny_op_hand_count`)."""
    rng = np.random.default_rng(5)
    x0 = rng.integers(-128, 128, size=(2, 3))
    X = np.concatenate([x0, x0]).astype(np.int8)  # noqa: N806
    Wt = rng.integers(-128, 128, size=(3, 2)).astype(np.int8)  # noqa: N806
    return X, Wt, (2, 1, 2), [(0, 3, "f")], (1.0, 2.0), False


OPS["tiny"] = tiny_op


@pytest.fixture(scope="module")
def runs():
    """Every op of OPS on one simulated Accel, back to back: {name: (op, result)}."""
    ops = {name: make() for name, make in OPS.items()}
    return dict(zip(ops, zip(ops.values(), run_accel(list(ops.values())), strict=True), strict=True))


@pytest.mark.parametrize("name", [n for n in OPS if n != "tiny"])
def test_accel_runs_one_op_like_the_golden_model(runs, name):
    dec = check(*runs[name])
    if name == "all_compute":
        assert (dec == 0).all()
    elif name == "mostly_reuse":
        assert (dec[5:] == 2).mean() > 0.5 and len(np.unique(dec[5:])) == 3
    else:  # frame 0 (6 positions) always COMPUTEs; later frames mix all three decisions
        assert len(np.unique(dec[6:])) == 3


def test_accel_tiny_op_hand_count(runs):
    """`tiny_op` by hand, from the controller's registers (P = 2, R = C = 4, d = 2):
    - start: cycle 0. SIM: the group spans words 0..1 (2 words), phase A + phase B = 4 cycles per
      token, 4 tokens: 16 counter cycles 1..16, and cycle 17 runs the last word's second stage
      (SRAM read in one cycle, similarity unit and writes in the next).
    - SCHED: one window of n = 2 positions, L = 1 group x (F - 1) = 1 digit column: 1 start cycle +
      L * (2n + 1) + n = 1 + 5 + 2 = 8 cycles: 18..25.
    - TILES_START 26 reads tile 0's positions from the order banks; tile 0's rows (tokens 0, 1:
      banks 0, 1, no conflict) are read at 27 and 28, so its beats are offered at 28 and 29 (core
      cycles 0 and 1, A_0 = 1). Tile 0 (frame 0, COMPUTE; 3 unpairable COMPUTE channels = 3 slots)
      issues slots 2, 3, 4 (L_0 = 4); tile 1 (tokens 2, 3, all REUSE: one bubble slot) has its
      beats at core cycles 2, 3 (A_1 = 3) and issues at max(L_0, A_1) + 1 = 5 (L_1 = 5). The last
      row leaves at core cycle L_1 + R + C + 1 = 14 (hw/core.py), i.e. cycle 28 + 14 = 42, and
      done pulses at 43.
    """
    dec = check(*runs["tiny"], expect_cycles=43)
    assert dec.ravel().tolist() == [0, 0, 2, 2]
    assert runs["tiny"][1]["core_last_row"] == 42 and runs["tiny"][1]["done"] == 43


def test_accel_honours_the_config_window():
    """An Accel built for ``scheduler_window_tiles = 2`` sorts in windows of 2 R = 8 positions, as the
    reference does for that config: an op of 20 positions runs three windows (8, 8, 4 positions), an
    op of 35 positions five; decisions, order, tiles, results and cycles as `check` asserts.

    The first op has 5 position blocks x 3 frames x 1 column block = 15 tiles, an odd number, so the
    core's drain-port round robin (d = 2) hands the second op's first tile to port 1: the controller's
    result tokens must follow it (``port0``; every op of OPS has an even tile count)."""
    cfg = CFG.model_copy(update={"scheduler_window_tiles": 2})
    ops = [make_op(6, (3, 4, 5), 6, 4, [3, 3], (2.5, 4.0)), OPS["all_compute"]()]
    assert len(reuse_tiles(ops[0][2], ops[0][1].shape[1], R, C, np.arange(20))) == 15 and D == 2
    results = run_accel(ops, cfg)
    dec = check(ops[0], results[0], window_tiles=2)
    assert len(np.unique(dec[20:])) == 3
    dec = check(ops[1], results[1], window_tiles=2)
    assert (dec == 0).all()


def test_bank_conflicts_stretch_the_beats(runs):
    """Tiles whose rows share an X bank (token mod R) take more than one cycle per beat: the sorted
    ops have such tiles (so the cycle-exact checks above cover the banked loader's stall), and
    `bank_conflicts` counts by hand: tokens 0, 4, 8, 1 with R = 4 put three rows in bank 0."""
    from types import SimpleNamespace

    from sim.timing.core_timing import bank_conflicts

    tiles = [SimpleNamespace(tokens=t) for t in ([0, 4, 8, 1], [3, 2, 1, 0], [5])]
    assert bank_conflicts(tiles, 4).tolist() == [3, 1, 1]
    for name in ("mostly_reuse", "many_groups"):
        X, Wt, grid, groups, theta, _ = runs[name][0]  # noqa: N806
        dec, _ = decide(X, grid, groups, theta, 4)
        tl = accel_timeline(grid, groups, dec, Wt.shape[1], R, C, D, 2, CFG.scheduler_window_tiles * R)
        assert tl.bank_cycles.max() == 2 and tl.core.load_stall > 0, name


def test_descriptor_rejects_spatial_groups_and_oversized_ops():
    dut = Accel(CFG, max_tokens=MAX_TOKENS, max_k=MAX_K, max_n=MAX_N, max_frames=MAX_FRAMES)
    discard(dut)  # only its capacity is used here: never elaborated
    for axis in ("h", "w"):
        with pytest.raises(ValueError, match=f"reuses along '{axis}'.*'f'"):
            op_descriptor(dut, (2, 2, 2), [(0, 4, "f"), (4, 8, axis)], 4, [1, 1], [2, 2], False)
    with pytest.raises(ValueError, match="K = 17 outside"):
        op_descriptor(dut, (2, 2, 2), [(0, 17, "f")], 4, [1], [2], False)
    with pytest.raises(ValueError, match="tokens = 90 outside 1..80"):
        op_descriptor(dut, (2, 5, 9), [(0, 4, "f")], 4, [1], [2], False)
    with pytest.raises(ValueError, match="partition"):
        op_descriptor(dut, (2, 2, 2), [(0, 4, "f"), (5, 8, "f")], 4, [1, 1], [2, 2], False)
    with pytest.raises(ValueError, match="power of two"):
        Accel(CFG, load_channels=3)
    with pytest.raises(ValueError, match="multiple of rows"):
        accel_timeline((1, 1, 4), [(0, 2, "f")], np.zeros((4, 1), np.int8), 4, R, C, D, 2, 6)


@pytest.mark.parametrize("preset", ["tiny-8x8", "small-32x32", "kaleido-16nm-128x128", "kaleido-16nm-128x128-balanced"])
def test_model_window_is_the_accel_window(preset):
    """The Accel's window is fixed at elaboration (``scheduler_window_tiles * R``); the cycle model's
    window of an op (`sim.cost.actions.scheduler_window`) shrinks below it only with
    ``fit_scheduler_window`` and an op whose window of X does not fit the input SRAM. Every op the
    emitted Accel can hold (``accel_max_tokens`` tokens, ``accel_max_k`` channels: at most 16 KiB of X)
    fits, so on every preset the model and the RTL sort in the same windows."""
    from hw.config import load_config
    from sim.cost.actions import scheduler_window

    cfg = load_config(preset)
    acc = discard(Accel(cfg, pe="instance"))
    assert acc.window == cfg.scheduler_window_tiles * cfg.array_rows
    T, K = cfg.accel_max_tokens, cfg.accel_max_k  # noqa: N806
    for grid in [(1, 1, T), (T, 1, 1), (2, 8, T // 16), (T // 16, 4, 4)]:
        assert scheduler_window(cfg, K, grid, [(0, K, "f")]) == cfg.scheduler_window_tiles, grid
