"""The delta organisation (sim/timing/delta.py, docs/decisions.md D68): values bit-exact against the golden
model through its band-tiles and combine unit, its sizes, DRAM and partial-sum counts by hand, and the CLI."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE, apply_decisions, block_groups, decide, split_msb
from hw.config import ORGANISATIONS, config_from_dict, load_config
from sim.cost.actions import delta_dram, dram_bytes
from sim.cost.area import area_breakdown
from sim.cost.compact_actions import delta_successor_reads
from sim.cost.tech import load_tech
from sim.timing import delta
from sim.timing.compact import CompactError, band_cycles, band_tile_sequence, shared_stage_weights
from sim.timing.delta_reference import delta_gemm, differences
from tests.test_cli import assert_one_line_error, kaleido, small_trace


def _field(rng, grid, K, axis, unsigned, extreme=False):  # noqa: N803
    M = grid[0] * grid[1] * grid[2]  # noqa: N806
    lo, hi = (0, 255) if unsigned else (-128, 127)
    if extreme:  # every operand at the range's end: the widest differences and sums
        return np.full((M, K), lo, np.uint8 if unsigned else np.int8)
    base = rng.integers(lo, hi + 1, (1, K))
    X = np.clip(base + rng.integers(-9, 10, (M, K)), lo, hi)  # noqa: N806  near-equal tokens: every decision
    return X.astype(np.uint8 if unsigned else np.int8)


@pytest.mark.parametrize("seed", range(12))
def test_delta_values_bit_exact_against_golden(seed):
    rng = np.random.default_rng(seed)
    grid = (int(rng.integers(1, 4)), int(rng.integers(1, 4)), int(rng.integers(2, 6)))
    K, N = int(rng.integers(9, 41)), int(rng.integers(1, 10))  # noqa: N806  non-multiple group widths
    groups = block_groups(K, int(rng.integers(3, 12)), "fhw"[seed % 3])
    X = _field(rng, grid, K, groups[0][2], seed % 2 == 1, extreme=seed % 5 == 4)  # noqa: N806
    W = rng.integers(-128, 128, (K, N)).astype(np.int8)  # noqa: N806
    if seed % 5 == 4:
        W[:] = -128
    dec = decide(X, grid, groups, (float(rng.uniform(0, 3)), float(rng.uniform(3, 9))))[0]
    if seed % 4 == 3:  # scattered decisions drawn directly (every mix, edge tokens COMPUTE)
        dec = rng.integers(0, 3, dec.shape).astype(np.int8)
        dec[np.asarray([delta_edge(t, grid, groups[0][2]) for t in range(dec.shape[0])])] = COMPUTE
    want = apply_decisions(X, W, grid, groups, dec)
    diff = differences(X, grid, groups, dec)
    assert diff.min() >= -(1 << (delta.DIFF_BITS - 1)) and diff.max() < 1 << (delta.DIFF_BITS - 1)
    part = np.repeat(dec == PARTIAL, [k1 - k0 for k0, k1, _ in groups], axis=1)
    direct = (dec == COMPUTE).all(axis=1)
    part[direct] = False
    assert np.abs(diff[part]).max(initial=0) <= 15  # lsb(X) - lsb(X_eff[nb]): the signed high half's range
    for rows, brows, fw in ((4, 2, 1), (8, 4, 2), (3, 1, 5), (16, 16, 3)):
        assert np.array_equal(delta_gemm(X, W, grid, groups, dec, rows, brows, fw), want), (rows, brows, fw)
    assert np.array_equal(delta_gemm(X, W, grid, groups, dec, 4, 2, 1, b_msb=3),  # no pairing below b_msb = 4
                          apply_decisions(X, W, grid, groups, dec, 3))


def test_paired_product_every_operand():
    """The PAIRED slot's arithmetic (sign-corrected low half) equals the plain products on every operand pair."""
    d = np.arange(-15, 16)
    for wa, wb in ((-128, 127), (127, -128), (-1, 3), (0, 5)):
        got = [[delta.paired_product(int(a), int(b), wa, wb) for b in d] for a in d]
        assert np.array_equal(np.array(got), d[:, None] * wa + d[None, :] * wb)


def delta_edge(t, grid, axis):
    F, H, W = grid  # noqa: N806
    f, rem = divmod(t, H * W)
    h, w = divmod(rem, W)
    return {"f": f, "h": h, "w": w}[axis] == 0


def test_differences_refuse_a_neighbourless_reuse():
    X = np.zeros((4, 4), np.int8)  # noqa: N806
    dec = np.zeros((4, 2), np.int8)
    dec[0, 1] = REUSE  # token 0 has no h neighbour
    with pytest.raises(ValueError, match="without a neighbour"):  # the golden model refuses it first
        differences(X, (1, 2, 2), [(0, 2, "w"), (2, 4, "h")], dec)
    assert not delta.eligible([(0, 2, "w"), (2, 4, "f")]) and delta.eligible(block_groups(64))
    assert delta.classes([(0, 2, "w"), (2, 3, "f"), (3, 4, "f"), (4, 6, "w")]) == [("w", [0, 3]), ("f", [1, 2])]


@pytest.mark.parametrize("seed", range(10))
def test_axis_classes_bit_exact_against_golden(seed):
    """D71: qk-like groups on two or three axes, one carried value per class, through the band-tiles."""
    rng = np.random.default_rng(100 + seed)
    grid = (int(rng.integers(2, 4)), int(rng.integers(1, 4)), int(rng.integers(2, 6)))
    a, b = int(rng.integers(2, 7)), int(rng.integers(2, 7))
    K, N = a + b + int(rng.integers(2, 7)), int(rng.integers(1, 8))  # noqa: N806
    axes = ("w", "f", "f") if seed % 3 else ("w", "h", "f")
    groups = [(0, a, axes[0]), (a, a + b, axes[1]), (a + b, K, axes[2])]
    X = _field(rng, grid, K, "f", seed % 2 == 1, extreme=seed == 9)  # noqa: N806
    W = rng.integers(-128, 128, (K, N)).astype(np.int8)  # noqa: N806
    dec = decide(X, grid, groups, (float(rng.uniform(0, 3)), float(rng.uniform(3, 9))))[0]
    if seed % 4 == 3:  # scattered: every mix, tokens without a neighbour COMPUTE that group
        dec = rng.integers(0, 3, dec.shape).astype(np.int8)
        for g, (_k0, _k1, ax) in enumerate(groups):
            dec[np.asarray([delta_edge(t, grid, ax) for t in range(dec.shape[0])]), g] = COMPUTE
    want = apply_decisions(X, W, grid, groups, dec)
    for rows, brows, fw in ((4, 2, 1), (8, 4, 2), (3, 1, 5)):
        assert np.array_equal(delta_gemm(X, W, grid, groups, dec, rows, brows, fw), want), (rows, brows, fw)


def test_class_combine_and_state_by_hand():
    # grid (2, 1, 2): tokens 0, 1 (frame 0), 2, 3 (frame 1); groups t (w axis) and h (f axis)
    groups = [(0, 2, "w"), (2, 4, "f")]
    dec = np.array([[COMPUTE, COMPUTE], [REUSE, COMPUTE], [COMPUTE, PARTIAL], [PARTIAL, REUSE]], np.int8)
    # w class (group 0): rows 1, 0, 1, 1; direct: tokens 0 and 2; carried: 1, 3
    # f class (group 1): rows 1, 1, 1, 0; direct: tokens 0 and 1; carried: 2, 3
    assert delta.class_terms(dec, groups) == [("w", 3, 2, 2), ("f", 3, 2, 2)]
    # adds per column: w: token 0: 0, token 1: copies -> 0, token 2: 0, token 3: 1 row + S[nb] -> 1;
    # f: token 2: 1 row + S[nb] -> 1, token 3 copies -> 0; Y = S_w + S_f: 1 add for each of 4 tokens
    assert delta.combine_adds_delta(dec, 3, groups) == 3 * (1 + 1 + 4)
    assert delta.combine_adds_delta(dec[:, :1], 3) == delta.combine_adds_delta(dec[:, :1], 3, groups[:1]) == 3
    cfg = load_config("kaleido-16nm-128x128-balanced")
    # state SRAM of a fused qk at 480p: f class R N yb, w class F N yb; yb = 3 (128 x 255 x 128 < 2^22)
    qk = [(0, 44, "w"), (44, 86, "f"), (86, 128, "f")]
    assert delta.state_need_bytes(cfg, (21, 30, 52), 128, 32760, qk) == (128 + 21) * 32760 * 3
    assert delta.state_need_bytes(cfg, (21, 30, 52), 128, 32760, [(0, 64, "h")]) == 21 * 52 * 32760 * 3
    assert delta.state_need_bytes(cfg, (21, 30, 52), 128, 32760, qk) <= cfg.state_sram_kib * 1024


def test_differences_by_hand():
    # grid (2, 1, 2): tokens 0, 1 (frame 0) and 2, 3 (frame 1); one temporal group of 2 channels
    X = np.array([[100, -7], [5, 6], [101, -8], [20, 7]], np.int8)  # noqa: N806
    dec = np.array([[COMPUTE], [COMPUTE], [PARTIAL], [REUSE]], np.int8)
    d = differences(X, (2, 1, 2), [(0, 2, "f")], dec)
    _, lo = split_msb(X, 4)
    # frame 0 COMPUTEs everything: the direct form, X itself; token 2 PARTIAL: lsb(101) - lsb(100) = 5 - 4,
    # lsb(-8) - lsb(-7) = 8 - 9; token 3 REUSE: 0
    assert d.tolist() == [[100, -7], [5, 6], [lo[2, 0] - lo[0, 0], lo[2, 1] - lo[0, 1]], [0, 0]]
    assert d[2].tolist() == [1, -1]


def test_token_terms_combine_and_successors_by_hand():
    # grid (3, 1, 1): one position over 3 frames, 2 groups; frame 0 COMPUTE both, frame 1 REUSE both,
    # frame 2 PARTIAL + COMPUTE
    dec = np.array([[COMPUTE, COMPUTE], [REUSE, REUSE], [PARTIAL, COMPUTE]], np.int8)
    assert delta.token_terms(dec) == (4, 1, 2)  # 2 + 0 + 2 difference rows, token 0 direct, 1 and 2 carried
    # adds per column: token 0: 2 rows -> 1; token 1: copies Y[nb] -> 0; token 2: 1 + Y[nb] -> 2
    assert delta.combine_adds_delta(dec, 5) == 5 * 3
    # token 0's successor (token 1) is carried, token 1's (token 2) too, token 2 has none
    assert delta_successor_reads(dec, (3, 1, 1), "f").tolist() == [True, True, False]


def test_sizes_plan_and_dram_by_hand():
    # D68's rule: D staged in the partial-sum SRAM (the balanced preset without its difference-sum buffer)
    cfg = load_config("kaleido-16nm-128x128-balanced").model_copy(update={"diff_sram_kib": 0})
    # Wan2.1-1.3B 480p ffn2: K = 8960, N = 1536 (12 column blocks), grid (21, 30, 52)
    K, N, grid = 8960, 1536, (21, 30, 52)  # noqa: N806
    M = 21 * 30 * 52  # noqa: N806
    assert delta.output_bytes(K) == 4  # 8960 x 255 x 128 < 2^29, plus the sign
    R, C = 128, 128  # noqa: N806
    outs = R * C * 4
    # psum need of (Fw, s): 2 Fw R s C yb + R s C yb + R/B K 9/8, B = 8
    assert delta.psum_need_bytes(cfg, 2, 3, K, N) == 2 * 2 * 3 * outs + 3 * outs + 16 * 8960 * 9 // 8
    fw, s = delta.plan(cfg, 21, K, N)
    cap = cfg.psum_sram_kib * 1024
    s_w = cfg.weight_sram_kib * 1024 // (K * C)  # 7 column blocks of weights
    assert s == min(12, s_w) == 7  # one frame of 7 column blocks fits: 3 x 7 x 64 KiB + 161 KB < 8 MiB
    need1 = 3 * s * outs + 16 * 8960 * 9 // 8
    assert min(21, 1 + (cap - need1) // (2 * s * outs)) > 1  # the partial-sum SRAM alone would take more frames
    # ... but the chunk's X (D131): two chunks of 9-bit differences and a pool's int8 X_eff in the 4 MiB input SRAM,
    # (33,554,432 - 8 x 128 x 8,960) // (18 x 128 x 8,960) = 24,379,392 // 20,643,840 = 1 frame
    assert fw == 1
    d = delta_dram(cfg, M, K, N, grid, s)
    assert d["x"] == 2 * M * K and d["w"] == K * N and d["sim_pass"] == 0  # ceil(12 / 7) passes
    dense = dram_bytes(cfg, M, K, N, -(-M // R), -(-M // R), R * K)
    assert d["x"] + d["w"] + d["y"] <= dense["x"] + dense["w"] + dense["y"]
    assert delta.issue_order(np.array([5, 7]), 5, 2).tolist() == [5, 5, 7, 7, 5, 5, 7, 7, 5, 7]


def test_chunk_window_by_hand():
    """D131: the chunk-major order holds a chunk whole, so Fw is capped by the input SRAM (two chunks of 9-bit
    differences and a pool's int8 X_eff) and a fused P op's by the score buffer; the cap never goes below 1 frame,
    and where one frame does not fit delta_dram reads X once per column block."""
    cfg = load_config("hw/presets/examples/tiny-8x8-delta.toml")
    assert cfg.input_sram_kib == 16  # 131,072 bits
    # pool 8, K = 256: (131,072 - 8 x 8 x 256) // (2 x 9 x 8 x 256) = 114,688 // 36,864 = 3 frames
    assert delta.window_frames(cfg, 8, 256) == 3
    assert delta.x_window_bits(cfg, 3, 8, 256) == 2 * 3 * 8 * 256 * 9 + 8 * 8 * 256 <= 131_072
    assert delta.plan(cfg, 4, 256, 32, pool=8)[0] == 3  # the example's pv (K = 256 keys, N = 32, 4 frames)
    assert delta.plan(cfg.model_copy(update={"input_sram_kib": 32}), 4, 256, 32, pool=8)[0] == 4  # it did not bind
    # a pool of 4 positions (H W = 4): (131,072 - 8,192) // 18,432 = 6
    assert delta.window_frames(cfg, 4, 256) == 6
    # K = 1,024: one pool's X_eff alone is 65,536 bits, a frame of differences 147,456 more: 0 frames, plan keeps 1
    assert delta.window_frames(cfg, 8, 1024) == 0 and delta.plan(cfg, 4, 1024, 32, pool=8)[0] == 1
    # delta_dram: M = 256 tokens (grid 4 x 8 x 8), N = 32 (4 column blocks), one group of 4. K = 512 fits one frame
    # ((131,072 - 32,768) // 73,728 = 1): X once per group, 256 x 512 B; K = 1,024 does not: once per column block
    # (D68's "one pool beside X_eff", 2 x 8 x 1,024 B <= 16 KiB, counted it once per group)
    assert delta_dram(cfg, 256, 512, 32, (4, 8, 8), 4)["x"] == 256 * 512
    assert delta_dram(cfg, 256, 1024, 32, (4, 8, 8), 4)["x"] == 4 * 256 * 1024
    # a fused P op: its chunk's query tiles of scores in the score buffer, 3 bytes a score
    big = load_config("kaleido-16nm-128x128-balanced")  # 12 MiB = 12,582,912 B; one 480p tile 128 x 32,760 x 3
    assert delta.window_frames(big, 128, 32760, p_op=True) == 12_582_912 // 12_579_840 == 1
    assert delta.window_frames(big, 128, 512, p_op=True) == 12_582_912 // (128 * 512 * 3) == 64  # cross_pv


def test_core_engine_and_staged_tiles_plan_with_pool_and_p_op():
    """D131's Noticed, fixed: `CoreEngine.plan` and `staged_tiles` pass the pool and the fused P op to `delta.plan`
    as `sim.engines.model` does, so a fused P op on a config with a score buffer is capped there by the score
    buffer, and a small frame's pool by its own positions."""
    from sim.engines.verilator_core import CoreEngine, CoreOp
    from sim.timing.delta_accel import staged_tiles

    cfg = load_config("hw/presets/examples/tiny-8x8-delta.toml").model_copy(update={"score_sram_kib": 16})
    K, N = 256, 8  # noqa: N806  (pv's keys and a head's columns, one column block)
    groups = [(k, k + 32, "f") for k in range(0, K, 32)]
    eng = CoreEngine.__new__(CoreEngine)  # plan reads only the config (no Verilator build)
    eng.cfg, eng.delta = cfg, True

    def core_fw(grid, p_op):
        M = grid[0] * grid[1] * grid[2]  # noqa: N806
        op = CoreOp(np.zeros((M, K), np.uint8), np.zeros((K, N), np.int8), grid, groups,
                    np.zeros((M, len(groups)), np.int8), True, p_op=p_op)
        return eng.plan(op)[0]

    def staged_chunks(grid, p_op):
        M = grid[0] * grid[1] * grid[2]  # noqa: N806  every group COMPUTE: every chunk has band-tiles
        return staged_tiles(np.zeros((M, len(groups)), np.int8), grid, groups, cfg, K, N, p_op=p_op)["chunks"]

    # pool 8 (H W = 8): the input SRAM's window (131,072 - 8 x 8 x 256) // (2 x 9 x 8 x 256) = 3 frames; a P op's
    # query tiles of scores 16,384 // (8 x 256 x 3) = 2 (the score buffer binds)
    assert core_fw((6, 2, 4), False) == 3 and core_fw((6, 2, 4), True) == 2
    assert staged_chunks((6, 2, 4), False) == 2 and staged_chunks((6, 2, 4), True) == 3  # 6 frames in 3s, 2s
    # pool 4 (H W = 4): (131,072 - 8,192) // 18,432 = 6 frames (the default pool of R = 8 positions gave 3); the P
    # op's 16,384 // (4 x 256 x 3) = 5
    assert core_fw((8, 2, 2), False) == 6 and core_fw((8, 2, 2), True) == 5
    assert staged_chunks((8, 2, 2), False) == 2  # 8 frames in chunks of 6 (3 before the pool was passed)


def test_difference_sum_buffer_plan_and_order_by_hand():
    # D84, D122: the balanced preset's 1,024 KiB difference-sum buffer
    cfg = load_config("kaleido-16nm-128x128-balanced")
    assert cfg.diff_sram_kib == 1024
    K, N = 8960, 1536  # noqa: N806  (ffn2 at 480p)
    R, C, yb = 128, 128, 4  # noqa: N806
    # the partial-sum SRAM keeps only the carried Y (R s C yb) and the queued rows: no term grows with the frames
    assert delta.psum_need_bytes(cfg, 5, 3, K, N) == 3 * R * C * yb + 16 * 8960 * 9 // 8
    # D122: the buffer is kaleido_dcore's n = 3 D buffers on W = 4 ways, words of C x acc = 128 x 33 = 4,224 bits:
    # 1,024 KiB x 8,192 // 4,224 = 1,985 words, 661 a buffer, 165 a way (one macro), 660 a buffer as built. A segment
    # takes Fw x R tokens' sums per class, 128 words a frame -> 5 frames (640 words)
    assert delta.diff_buffer_words(cfg) == 4 * 165 == 660
    assert delta.diff_need_words(cfg, 1) == 128 and delta.diff_need_words(cfg, 3) == 384
    # ... but the chunk's X binds first (D131: 1 frame of ffn2's K = 8,960, test_chunk_window_by_hand); K = 1,536
    # (ffn1: 24 column blocks of N = 3,072 would be 42 of 70 as D130 has it; here N = 1,536, 12) keeps the 5
    assert delta.plan(cfg, 21, K, N) == (1, 7)
    assert delta.plan(cfg, 21, 1536, N)[0] == 5
    # qk (2 classes): 256 words a frame; fused: one frame
    groups = [(0, 44, "w"), (44, 86, "f"), (86, 128, "f")]
    assert delta.diff_need_words(cfg, 1, 2) == 256
    assert delta.plan(cfg, 21, 128, 32760, fused=True, groups=groups)[0] == 1
    # a bank too small for one frame: the op cannot run, one line naming the buffer
    small = cfg.model_copy(update={"diff_sram_kib": 64})  # 41 words a D buffer < R = 128
    with pytest.raises(CompactError, match="diff_sram_kib = 64"):
        delta.plan(small, 21, K, N)
    # chunk-major issue order: band-tiles a, b in chunk 0 and c in chunk 1, 5 column blocks in groups of 2, 2, 1:
    # per group, per chunk, the chunk's band-tiles once per column block of the group
    order = delta.issue_order(np.array([1, 2, 3]), 5, 2, np.array([0, 0, 1]))
    assert order.tolist() == [1, 2, 1, 2, 3, 3, 1, 2, 1, 2, 3, 3, 1, 2, 3]
    # area (D122): the D buffers as built, 3 x 4 ways of one 165 x 4,224-bit macro (the remainder of 1,024 KiB below
    # them not built), on the delta die only, not in the dense die, not built for another organisation
    tech = load_tech("16nm")
    ab = area_breakdown(cfg, tech)
    assert ab["breakdown"]["sram_diff"] == pytest.approx(12 * 165 * 4224 * tech.a("sram_bit") * 1e-6)
    assert "sram_diff" not in ab["dense_breakdown"]
    assert area_breakdown(cfg.model_copy(update={"organisation": "compact"}), tech)["breakdown"]["sram_diff"] == 0


def tiny_delta(**kw):
    d = load_config("tiny-8x8").model_dump() | {"organisation": "delta", "psum_sram_kib": 64, "compact_bands": 2}
    return config_from_dict(d | kw)


def test_delta_end_to_end_on_a_small_trace(tmp_path):
    from algo.trace import load_trace
    from sim.engines.model import simulate_trace

    tr = load_trace(small_trace(tmp_path / "t.npz"))
    cfg = tiny_delta()
    res = simulate_trace(tr, cfg)
    assert res["organisation"] == "delta"
    op = tr.ops[0]
    groups = [g.as_tuple() for g in op.groups]
    dec = decide(op.X[0], tr.grid, groups, op.theta, 4)[0]
    fw, s = delta.plan(cfg, tr.grid[0], op.K, op.N)
    slots, _, nc, npt, _ = band_tile_sequence(dec, tr.grid[0], tr.grid[1] * tr.grid[2], 8, 4, fw,
                                           np.array([k1 - k0 for k0, k1, _ in groups], np.int64), True)
    n_cb = math.ceil(op.N / 8)
    cyc, _ = band_cycles(delta.issue_order(slots, n_cb, s), delta.issue_order(nc + npt, n_cb, s), cfg)
    assert res["per_op"][0]["cycles"] == cyc
    assert np.array_equal(delta_gemm(op.X[0], op.W[0], tr.grid, groups, dec, 8, 4, fw),
                          apply_decisions(op.X[0], op.W[0], tr.grid, groups, dec, 4))
    for o in res["per_op"]:  # never more DRAM than dense
        a, d = o["actions"], o["dense_actions"]
        assert a["dram_read_bytes"] + a["dram_write_bytes"] <= d["dram_read_bytes"] + d["dram_write_bytes"]


def test_delta_area_is_compacts_with_a_9_bit_gather_and_one_accumulator():
    """The delta PE (hw/compact_pe.py, D73): compact's without the msb accumulator's adder, accm, out_m and one first
    gate, with a 13-bit sign-correction adder, and 18 product-path mux bits fewer (no p_msb gate, 17, nor p_lo gate,
    13; a 12-bit correction operand select); the drain de-skew carries one acc-bit word per port instead of two;
    the gather carries 9 bits; the combine unit has one more row of C acc-bit adders (the class sum) and of C
    acc-bit registers (the lane register) per way of 2 C lanes (D79); the rest of the die is compact's."""
    cfg = tiny_delta()
    tech = load_tech(cfg.technology_nm)
    comp = area_breakdown(tiny_delta(organisation="compact"))["breakdown"]
    dlt = area_breakdown(cfg)["breakdown"]
    assert dlt["gather_network"] == pytest.approx(comp["gather_network"] * 9 / 8)
    acc, um = cfg.acc_bits, 1e-6  # um^2 -> mm^2
    per_pe = (13 - acc) * tech.a("add_bit") - 2 * acc * tech.a("reg_bit") - (acc + 17 + 13 - 12) * tech.a("mux2_bit")
    assert dlt["array_pe_kaleido_extra"] - comp["array_pe_kaleido_extra"] == pytest.approx(64 * per_pe * um)
    deskew = 2 * acc * (8 * 7 // 2)  # d = 2 ports, column j: 7 - j registers of one word fewer
    assert comp["array_io_skew"] - dlt["array_io_skew"] == pytest.approx(deskew * tech.a("reg_bit") * um)
    ways = 4 * 8 * cfg.drain_rows_per_cycle / (2 * 8)  # 4 C d lanes in ways of 2 C
    extra = ways * 8 * acc * (tech.a("add_bit") + tech.a("reg_bit"))
    assert dlt["combine_unit"] - comp["combine_unit"] == pytest.approx(extra * um)
    same = set(dlt) - {"gather_network", "array_pe_kaleido_extra", "array_io_skew", "combine_unit"}
    # the controllers' 9-bit staging, their cores' tables (D101) and registers (kaleido_dcore's segment walk, D104)
    same -= {"ctrl_staging", "ctrl_tables", "ctrl_registers"}
    # the weights (D109): compact's kaleido_caccel reads one weight buffer through 3 word registers of 2 B = 4
    # channels per band and column (3 x 4 x 8 bits x C = 8 x B = 2 = 1,536 bits); this unstaged delta's
    # kaleido_daccel a copy per band (B - 1 = one more weight SRAM, tiny-8x8's 16 KiB) and no word registers
    same -= {"ctrl_weight_copies", "band_weight_lanes"}
    assert comp["band_weight_lanes"] - dlt["band_weight_lanes"] == pytest.approx(1536 * tech.a("reg_bit") * um)
    assert comp["ctrl_weight_copies"] == 0
    assert dlt["ctrl_weight_copies"] == pytest.approx(cfg.weight_sram_kib * 8192 * tech.a("sram_bit") * um)
    # the partial-sum SRAM as kaleido_dcombine builds it (D114): buffers of 524,288 // 224 // 3 = 780 words of
    # C x acc = 224 bits, the state and three D buffers (D115's default), 4 x 780 x 224 bits; on two D buffers 3 x
    # 780 x 224; compact's as kaleido_combine builds it (D127): 2 ways' state macros of 32 words and 4 staging macros
    # of 256 words of 2 C acc = 448 bits
    same -= {"sram_psum"}
    assert dlt["sram_psum"] == pytest.approx(4 * 780 * 224 * tech.a("sram_bit") * um)
    two = area_breakdown(cfg.model_copy(update={"dcore_d_buffers": 2}))["breakdown"]
    assert two["sram_psum"] == pytest.approx(3 * 780 * 224 * tech.a("sram_bit") * um)
    assert comp["sram_psum"] == pytest.approx((2 * 32 + 4 * 256) * 448 * tech.a("sram_bit") * um)
    assert {k: dlt[k] for k in same} == {k: comp[k] for k in same}


def test_delta_needs_a_psum_sram(tmp_path):
    tr = small_trace(tmp_path / "t.npz")
    out = tmp_path / "r.json"
    res = kaleido("simulate", str(tr), "--config", "tiny-8x8", "--organisation", "delta", "--json", str(out))
    assert_one_line_error(res, "delta", "psum_sram_kib = 0", *ORGANISATIONS)
    assert not out.exists()
    d = load_config("tiny-8x8").model_dump() | {"organisation": "delta", "psum_sram_kib": 1, "name": "tiny-psum1"}
    toml = tmp_path / "c.toml"
    toml.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in d.items() if v is not None) + "\n")
    res = kaleido("simulate", str(tr), "--config", str(toml), "--json", str(out))
    assert_one_line_error(res, "delta", "psum_sram_kib = 1")
    assert not out.exists()


def test_weight_stage_schedule_by_hand():
    # D85 on tiny-8x8 with 2 bands, d = 2 ports (one per band, a band-tile holds it 1 cycle per valid row)
    from sim.timing.compact import band_schedule

    cfg = tiny_delta()
    one = np.ones(4, np.int64)
    # without a stage: two bands, back to back
    band, first, last = band_schedule(np.array([4, 4, 4, 4]), one, cfg)
    assert band.tolist() == [0, 1, 0, 1] and first.tolist() == [0, 0, 4, 4] and last.tolist() == [3, 3, 7, 7]
    # segments [0, 0, 1, 1], 3 cycles a fill: segment 0's weights are in at cycle 3; segment 1's fill runs 3..5
    # (buffer 1 was never used) and is hidden behind segment 0's slots 3..6
    band, first, last = band_schedule(np.array([4, 4, 4, 4]), one, cfg, np.array([0, 0, 1, 1]), 3, 2)
    assert first.tolist() == [3, 3, 7, 7] and last.tolist() == [6, 6, 10, 10]
    # a long segment 0 holds its buffer: with 2 buffers segment 2's fill waits until segment 0's last slot
    # (cycle 12): it starts at 13, so segment 2 issues from 16; with 3 buffers it fills at 6..8 and issues at 9
    seq, valid, seg = np.array([10, 2, 2]), np.ones(3, np.int64), np.array([0, 1, 2])
    _, first, last = band_schedule(seq, valid, cfg, seg, 3, 2)
    assert first.tolist() == [3, 6, 16] and last.tolist() == [12, 7, 17]
    _, first, last = band_schedule(seq, valid, cfg, seg, 3, 3)
    assert first.tolist() == [3, 6, 9] and last.tolist() == [12, 7, 10]


def test_weight_stage_rules_by_hand():
    cfg = load_config("kaleido-16nm-128x128-balanced")
    assert cfg.wstage_sram_kib == 192  # 128 column banks of 1.5 KiB
    assert delta.stage_buffers(cfg, 128) == 12 and delta.stages(cfg, 128)  # qk: 1,536 // 128
    assert delta.stage_buffers(cfg, 512) == 3 and delta.stages(cfg, 512)  # cross_pv
    assert not delta.stages(cfg, 1536) and not delta.stages(cfg, 8960)  # qkv ... ffn1, ffn2, pv: in slices (D88)
    assert delta.stage_fill_cycles(cfg, 128) == 16  # 128 weights of a column at B = 8 a cycle
    # group-aligned (D96 plan item 5): Wan2.1-1.3B's qk groups of 44/42/42 channels take 6 + 6 + 6 half-words of 8,
    # and a 1,536-byte bank's 192 half-words hold 10 such buffers (not 1,536 // 128 = 12); whole-B groups change nothing
    qk = [(0, 44, "f"), (44, 86, "h"), (86, 128, "w")]
    assert delta.stage_fill_cycles(cfg, 128, qk) == 18 and delta.stage_buffers(cfg, 128, qk) == 10
    assert delta.stages(cfg, 128, qk)
    assert delta.stage_fill_cycles(cfg, 128, [(0, 64, "f"), (64, 128, "h")]) == 16
    assert delta.stage_buffers(cfg, 128, [(0, 64, "f"), (64, 128, "h")]) == 12
    assert delta.chunk_major(np.array([0, 0, 1]), 5, 2)[1].tolist() == [0, 0, 1, 1, 2, 3, 4, 4, 5, 5, 6, 7, 8, 8, 9]
    with pytest.raises(ValueError, match="needs diff_sram_kib > 0"):
        config_from_dict(cfg.model_dump() | {"diff_sram_kib": 0})
    tech = load_tech("16nm")
    ab = area_breakdown(cfg, tech)
    assert ab["breakdown"]["sram_wstage"] == pytest.approx(192 * 8192 * tech.a("sram_bit") * 1e-6)
    # D88, D94: the bands read their weights as words, per band and column three 16-byte words (2 B bytes: a band
    # reads a word every B = 8 cycles and takes up to 2 weights a slot; in use, next, read ahead),
    # 3 x 16 x 8 x 8 x 128 = 393,216 register bits
    from sim.timing.compact import weight_word_bits, weight_word_bytes

    assert weight_word_bytes(cfg) == 16 and weight_word_bits(cfg) == 3 * 16 * 8 * 8 * 128
    assert "sram_wstage" not in ab["dense_breakdown"]


def test_stage_slices_by_hand():
    """D88: a bank of 1,536 B holds one slice per band (B = 8): slices of at most 192 channels."""
    cfg = load_config("kaleido-16nm-128x128-balanced")
    qkv = [(192 * i, 192 * (i + 1), "f") for i in range(8)]  # the model-width ops' groups: one slice each
    sl, cols, width = delta.stage_slices(cfg, qkv)
    assert sl == qkv and cols.tolist() == list(range(8)) and width == 192
    sl, cols, width = delta.stage_slices(cfg, [(0, 1120, "f"), (1120, 2240, "f")])  # ffn2: ceil(1120 / 192) = 6
    assert cols.tolist() == [0] * 6 + [1] * 6 and width == 187  # 1,120 = 186 + 187 + 187 + 186 + 187 + 187
    assert [k1 - k0 for k0, k1, _ in sl[:6]] == [186, 187, 187, 186, 187, 187]
    assert sl[0][0] == 0 and sl[5][1] == 1120 and sl[6] == (1120, 1306, "f")
    sl, cols, width = delta.stage_slices(cfg, [(0, 4096, "f")])  # pv: ceil(4096 / 192) = 22 slices of 186-187
    assert len(sl) == 22 and width == 187 and sum(k1 - k0 for k0, k1, _ in sl) == 4096
    assert delta.stage_slices(config_from_dict(cfg.model_dump() | {"wstage_sram_kib": 0}), qkv) is None
    # slice_order: within each segment (chunk, column block) the band-tiles slice by slice, stable
    order, seg = delta.slice_order(np.arange(6), np.array([0, 0, 0, 1, 1, 1]), np.array([1, 0, 1, 0, 0, 2]))
    assert order.tolist() == [1, 0, 2, 3, 4, 5] and seg.tolist() == [0, 1, 1, 2, 2, 3]


def test_shared_stage_reads_by_hand():
    """D92: a stage read is loaded into every band whose window for the same word holds the reading band's turn.
    B = 2 bands: words of 2 B = 4 weights; band b's turns are the cycles c with c mod 2 = b."""
    w = np.array([8, 12])
    one = lambda **k: shared_stage_weights(**({"segment": [0, 0], "group": [0, 0], "paired": [False, False],  # noqa: E731
                                                 "band": [0, 1], "first": [10, 10], "widths": w, "bands": 2} | k))
    # in step, |g| = 8 (2 words): word 0's windows [8, 10), band 0 reads at 8 for both; word 1's [10, 14), at 10
    assert one() == 8
    # 4 cycles apart (a whole window, L = 4): word 0 [8, 10) and [12, 14) never overlap: every word read twice
    assert one(first=[10, 14]) == 16
    # one cycle apart: band 0 reads word 0 at 8, outside band 1's [9, 11); band 1 at 9; word 1: [10, 14) and
    # [11, 15), band 0's read at 10 is outside band 1's window -> read again at 11: no sharing at all here
    assert one(first=[10, 11]) == 16
    # two cycles apart: word 0 [8, 10) / [10, 12), no; word 1 [10, 14) / [12, 16): band 0 reads at 10, band 1's
    # first turn is 13 (13 mod 2 = 1) -> 10 is outside its window, so it reads at 13: 16 again
    assert one(first=[10, 12]) == 16
    # another group or another segment, or the same band: no sharing
    assert one(group=[0, 1]) == 8 + 12 and one(segment=[0, 1]) == 16 and one(band=[0, 0]) == 16
    # a PAIRED band-tile (two weights a slot, L = B = 2) beside a single one, |g| = 12 (3 words), both at 10:
    # word 0 [8, 10) both, read at 8 by band 0; word 1 single [10, 14), paired [10, 12): read at 10, shared;
    # word 2 single [14, 18) (turn 14), paired [12, 14) (turn 13): apart -> 4 + 4 + 4 + 4 = 16 of 24
    assert one(group=[1, 1], paired=[False, True]) == 16
    # with no other band-tile there is nothing to share: Σ |g|
    assert shared_stage_weights([0], [1], [False], [0], [10], w, 2) == 12


@pytest.mark.parametrize("seed", range(4))
def test_sliced_groups_bit_exact(seed):
    """Slices of a group, each with its group's decision, give the golden model's Y through the delta
    organisation's band-tiles (D88: a band-tile reads one slice's weights)."""
    rng = np.random.default_rng(100 + seed)
    grid = (3, 2, 4)
    K, N = 37, 5  # noqa: N806
    groups = block_groups(K, 12, "f")  # widths 12, 12, 12, 1
    X = _field(rng, grid, K, "f", seed % 2 == 1)  # noqa: N806
    W = rng.integers(-128, 128, (K, N)).astype(np.int8)  # noqa: N806
    dec = rng.integers(0, 3, (X.shape[0], len(groups))).astype(np.int8)
    dec[: grid[1] * grid[2]] = COMPUTE  # frame 0 has no neighbour
    cfg = config_from_dict(load_config("tiny-8x8").model_dump() | {
        "organisation": "delta", "psum_sram_kib": 64, "compact_bands": 2, "diff_sram_kib": 8, "wstage_sram_kib": 1})
    sl, cols, width = delta.stage_slices(cfg, groups)  # 1,024 B / 8 columns / 2 bands = 64: no cut at K = 37
    assert sl == [tuple(g) for g in groups] and width <= 64
    narrow, cols = [], []  # slices of at most 5 channels: 4 + 4 + 4 per wide group, the 1-wide group whole
    for g, (k0, k1, ax) in enumerate(groups):
        n = -(-(k1 - k0) // 5)
        narrow += [(k0 + (k1 - k0) * i // n, k0 + (k1 - k0) * (i + 1) // n, ax) for i in range(n)]
        cols += [g] * n
    assert [k1 - k0 for k0, k1, _ in narrow] == [4] * 9 + [1]
    want = apply_decisions(X, W, grid, groups, dec)
    for rows, brows, fw in ((4, 2, 1), (8, 4, 3)):
        assert np.array_equal(delta_gemm(X, W, grid, narrow, dec[:, cols], rows, brows, fw), want)


def test_stage_traffic_as_the_staged_controller_makes_it_by_hand():
    """D127: the stage's reads, fills and word-register loads charged as ``kaleido_daccel_stage`` makes them. tiny-8x8
    (C = 8) as delta, B = 2 bands of 4 rows, a 1 KiB stage (64 half-words of B = 2 channels a column bank): 4 tokens
    (grid 1 x 2 x 2, one pool) that COMPUTE one group of K = 9 channels, N = 16 (2 column blocks). Each column block
    is one band-tile of 4 rows and its own segment (D84's chunk-major order), in its own stage buffer, so no read is
    shared: every band-tile reads its ceil(9 / 2 B) = 3 words itself."""
    from algo.trace import Group, OpRecord, Trace, pack_decisions
    from sim.engines.model import simulate_trace

    grid, K, N = (1, 2, 2), 9, 16  # noqa: N806
    dec = np.full((4, 1), COMPUTE, dtype=np.int8)
    op = OpRecord("o_proj", 0, 0, None, None, [Group(0, K, "f")], (0.0, 0.0), dims=(1, 4, K, N),
                  decisions=pack_decisions(dec)[None, None], thetas=((0.0, 0.0),))
    cfg = config_from_dict(load_config("tiny-8x8").model_dump() | {
        "organisation": "delta", "psum_sram_kib": 64, "compact_bands": 2, "diff_sram_kib": 8, "wstage_sram_kib": 1})
    res = simulate_trace(Trace(grid=grid, ops=[op], model="test", size="test", weights="none"), cfg)
    a = res["per_op"][0]["actions"]
    # 2 band-tiles x 3 words, each read from both half-word macros (2 x 2 channels) of the 8 column banks: 6 x 32 B
    # (before D127: D92's 18 weights a column x 1.58, at most one read per band-tile: 18 x 8 = 144 bytes, the last
    # word's 1 channel counted, not its 4)
    assert a["sram_wstage_read_bytes"] == 6 * 2 * 2 * 8
    # each word into its band's word register of 2 B channels x 8 columns x 8 bits, whole
    assert a["stage_reg_bits"] == 6 * 4 * 8 * 8
    # 2 fills of ceil(9 / B) = 5 half-words, each a weight-buffer word of B channels x 8 columns read and a stage
    # half-word written: 10 x 16 B (K x N = 144 before: the half-word's padding channel is read and written too)
    assert a["sram_weight_read_bytes"] == a["sram_wstage_write_bytes"] == 10 * 2 * 8
    # priced at the built macro: a column bank is two half-word macros of 64 / 2 words of B x 8 bits (D96)
    from sim.cost.energy import sram_access_pj

    tech = load_tech("16nm")
    e = res["per_op"][0]["energy_breakdown_pj"]["sram_wstage"]
    assert e == pytest.approx((6 * 32 + 10 * 16) * sram_access_pj(tech, 32 * 16 / 8192) / 8
                              + 6 * 4 * 8 * 8 * tech.e("reg_bit"))


def test_sliced_stage_counts_by_hand():
    """D88: an op whose two column blocks of weights do not fit a stage bank goes through the stage in slices.
    tiny-8x8 (C = 8) as delta, B = 2 bands of 4 rows, 1 KiB stage: 128 B per column bank, so slices of at most
    128 / 2 = 64 channels; K = 160 in two groups of 80 -> two slices of 40 each."""
    from algo.trace import Group, OpRecord, Trace, pack_decisions
    from sim.engines.model import simulate_trace

    grid, K, N = (2, 2, 4), 160, 8  # noqa: N806  16 tokens: one pool (8 positions) per frame
    dec = np.zeros((16, 2), dtype=np.int8)  # frame 0 COMPUTEs everything (no neighbour)
    dec[8:, 0] = REUSE  # frame 1: group 0 REUSEs, group 1 COMPUTEs
    op = OpRecord("o_proj", 0, 0, None, None, [Group(0, 80, "f"), Group(80, 160, "f")], (0.0, 0.0),
                  dims=(1, 16, K, N), decisions=pack_decisions(dec)[None, None], thetas=((0.0, 0.0),))
    trace = Trace(grid=grid, ops=[op], model="test", size="test", weights="none")
    base = load_config("tiny-8x8").model_dump() | {"organisation": "delta", "psum_sram_kib": 64, "compact_bands": 2,
                                                    "diff_sram_kib": 8}
    plain = simulate_trace(trace, config_from_dict(base | {"wstage_sram_kib": 0}))["per_op"][0]["actions"]
    sliced = simulate_trace(trace, config_from_dict(base | {"wstage_sram_kib": 1}))["per_op"][0]["actions"]
    vb = 28 / 8  # D127: a D value takes its word's acc bits (tiny-8x8's 28), not its own bound's 3 bytes
    assert load_config("tiny-8x8").acc_bits == 28
    # Band-tiles of 4 tokens, one chunk (both frames): group 0 (frame 0's 8 tokens) 2 band-tiles, group 1 (16) 4;
    # each reads its 80 weights of each of the 8 columns, sliced or not: 6 x 80 x 8 bytes.
    # Without the stage kaleido_daccel's bands read their own weight copies (D91; charged since D101): a word of two
    # channels x 8 columns a slot, 6 x 80 slots x 16 bytes, with no word registers.
    assert plain["sram_weight_read_bytes"] == 6 * 80 * 16 and plain["sram_wstage_read_bytes"] == 0
    # Through the stage, bands in step share each read (D92). Segments = slices of 40 (3 buffers of a 128-byte
    # bank, fills of 40 / B = 20 cycles): slice 0's 2 band-tiles both start at 20 (its fill's end), slice 1's at 60
    # (the bands free at 59), slice 2's 4 at 100 and 140, slice 3's at 180 and 220 -- always two in step, so each
    # word is read once for both: 2 + 2 + 4 + 4 band-tiles of 40 weights, halved: 240 weights per column. Since
    # D127 the model charges the reads kaleido_daccel_stage makes on its own schedule (`stage_run`, equal to the RTL's
    # count in tests/test_rtl_dstage.py), a word of 2 B = 4 channels from both half-word macros of the 8 column banks
    # (32 bytes): at least each slice's 10 words once (40 reads), at most each band-tile's own (120).
    assert sliced["sram_wstage_read_bytes"] % 32 == 0 and 40 * 32 <= sliced["sram_wstage_read_bytes"] <= 120 * 32
    assert sliced["stage_reg_bits"] == 8 * 6 * 80 * 8  # through the word registers: 120 words of 4 x 8 weights
    assert plain["stage_reg_bits"] == plain["weight_word_reg_bits"] == sliced["weight_word_reg_bits"] == 0
    # ... and the weight SRAM fills the stage once per chunk and column block: K x N bytes (per slice 40 / B = 20
    # half-words, each one weight-buffer word and one stage half-word of 2 x 8 bytes).
    assert sliced["sram_weight_read_bytes"] == sliced["sram_wstage_write_bytes"] == K * N
    # A token drains one difference row per slice it does not REUSE: frame 0 8 x 4, frame 1 8 x 2 (group 1's two),
    # against one per group unsliced: 8 x 2 + 8 x 1. Each is written into D and read back once.
    assert sliced["sram_diff_write_bytes"] == sliced["sram_diff_read_bytes"] == 48 * N * vb
    assert plain["sram_diff_write_bytes"] == plain["sram_diff_read_bytes"] == 24 * N * vb
    same = ("mac8", "mac4", "pe_add", "pe_mux_bits", "gather_mux_bits", "sram_input_read_bytes")  # per slot / channel
    assert all(sliced[k] == plain[k] for k in same)


def test_simulate_combine_timing_option(tmp_path):
    """``kaleido simulate --combine-timing rtl`` times the combine as the cores are built: the same results as a
    TOML that sets ``combine_timing = "rtl"`` (the config's own field, independent of the option), with the core's
    per-op detail (``core``, only under that timing); bad values and a lockstep config one line each, exit 2."""
    tr = small_trace(tmp_path / "t.npz")
    ex = "hw/presets/examples/tiny-8x8-delta.toml"
    d = load_config(ex).model_dump() | {"combine_timing": "rtl"}
    toml = tmp_path / "c.toml"
    toml.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in d.items() if v is not None) + "\n")
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    res = kaleido("simulate", str(tr), "--config", ex, "--combine-timing", "rtl", "--json", str(a))
    assert res.returncode == 0, res.stderr
    assert kaleido("simulate", str(tr), "--config", str(toml), "--json", str(b)).returncode == 0
    ra, rb = json.loads(a.read_text()), json.loads(b.read_text())
    assert ra["config"]["combine_timing"] == "rtl"
    assert [o["cycles"] for o in ra["per_op"]] == [o["cycles"] for o in rb["per_op"]]
    assert ra["energy_pj"] == rb["energy_pj"] and all("core" in o for o in ra["per_op"])
    bad = kaleido("simulate", str(tr), "--config", ex, "--combine-timing", "fast", "--json", str(tmp_path / "c.json"))
    assert_one_line_error(bad, "--combine-timing", "model", "rtl")
    bad = kaleido("simulate", str(tr), "--config", "tiny-8x8", "--combine-timing", "rtl")
    assert_one_line_error(bad, "--combine-timing", "lockstep")
    assert not (tmp_path / "c.json").exists()
