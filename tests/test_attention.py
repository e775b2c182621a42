"""Fused attention (sim/timing/attention.py): hand-derived cycles and bytes of a small qk -> pv pair."""

from __future__ import annotations

import math

import numpy as np
import pytest

from algo.trace import Group, OpRecord, Trace, pack_decisions
from hw.config import load_config
from sim.engines.model import simulate_trace
from sim.timing.attention import fused_pairs

GRID = (2, 2, 4)  # 16 tokens: 2 frames of 2 x 4 positions


def _cfg(score_kib: int = 16):
    # tiny-8x8: R = C = 8, d = 2, vector lanes C*d = 16, similarity lanes R = 8, 460 B per cycle.
    return load_config("tiny-8x8").model_copy(update={"score_sram_kib": score_kib})


def _pair(pv_dec=None):
    """qk: 1 head, M = 16, d_h = 8, 16 keys (RoPE t-group on w, one f-group); pv: 16 keys in groups of 8."""
    qk_groups = [Group(0, 4, "w", "t"), Group(4, 8, "f", "h")]
    pv_groups = [Group(0, 8, "f"), Group(8, 16, "f")]
    qk_dec = np.zeros((16, 2), dtype=np.int8)
    pv_dec = np.zeros((16, 2), dtype=np.int8) if pv_dec is None else pv_dec
    ops = [OpRecord("qk", 0, 0, None, None, qk_groups, (0.0, 0.0), dims=(1, 16, 8, 16),
                    decisions=pack_decisions(qk_dec)[None, None], thetas=((0.0, 0.0),)),
           OpRecord("pv", 0, 0, None, None, pv_groups, (0.0, 0.0), x_signed=False, dims=(1, 16, 16, 8),
                    decisions=pack_decisions(pv_dec)[None, None], thetas=((0.0, 0.0),))]
    return Trace(grid=GRID, ops=ops, model="test", size="test", weights="none")


def test_pairs_need_the_score_buffer():
    tr = _pair()
    assert fused_pairs(tr.ops, _cfg()) == {0: 1}
    # R x keys x (3 + 1) = 8 x 16 x 4 = 512 bytes: a 0 KiB buffer cannot hold them.
    assert fused_pairs(tr.ops, _cfg(0)) == {}
    assert fused_pairs(tr.ops[:1], _cfg()) == {}  # no partner, no fusion


def test_dense_fused_pair_by_hand():
    res = simulate_trace(_pair(), _cfg())
    qk, pv = res["per_op"]
    # Dense array (closed form T*K + R + C + 1): qk 4 tiles x 8 slots + 17 = 49; pv 2 tiles x 16 + 17 = 49.
    assert qk["dense_cycles"] == 49 and pv["dense_cycles"] == 49
    # Vector unit, 16 lanes, V(a, m) = max(ceil(a/16), ceil(m/16)); 256 scores.
    vh = max(math.ceil((128 + 128 * 8 / 16) / 16), math.ceil((256 + 256 * 8 / 16) / 16))  # K's + first Q tile's RoPE
    v_max = 16  # V(256, 0): the running max, 1 integer compare per score
    v_rope_rest = max(math.ceil(64 / 16), math.ceil(128 / 16))
    vt = max(math.ceil(64 / 16), math.ceil(160 / 16))  # last tile's normalisation: pv post (128, 320) x 8/16
    v_norm = max(math.ceil(128 / 16), math.ceil(320 / 16)) - vt
    v_exp = math.ceil(3 * 256 / 16)  # P = T[rowmax - S]: subtract, clamp, row sum per score (a table read, no exp)
    h2 = 2 * math.ceil(3 * 8 / 16)  # 2 query tiles, one key column each
    assert (vh, v_max + v_norm + v_rope_rest, v_exp, h2) == (24, 34, 48, 4)
    # DRAM: Q 128 + K 128 (qk), V 128 + O 128 (pv) = 512 B -> 2 cycles: 1 head (first fold), 1 tail.
    assert qk["dense_actions"]["dram_read_bytes"] == 256 and qk["dense_actions"]["dram_write_bytes"] == 0
    assert pv["dense_actions"]["dram_read_bytes"] == 128 and pv["dense_actions"]["dram_write_bytes"] == 128
    assert qk["dense_stall_cycles"] == {"drain": 0, "combine": 0, "dram": 1, "vector": vh, "similarity": 0}
    assert qk["dense_total_cycles"] == 49 + 1 + vh  # phase 1: the array (49) outlasts the vector unit (34)
    # phase 2: the array (49) outlasts the exp pass (48): only the first P column per tile and the tail wait
    # D75: each tile's first P column is made while the next tile's qk runs (P is made at 16 / 3 keys per cycle,
    # faster than qk writes the 16 keys of a tile's scores in 49 / 2 cycles: 16 x 49 >= 3 x 8 x 16 x 2), so only
    # the last tile's wait (h2 / 2) and the tail are exposed; the hidden one adds its 2 cycles to phase 1's
    # vector load (34 + 2 <= 49) and takes them from phase 2's (48 - 2 <= 49)
    assert pv["dense_stall_cycles"] == {"drain": 0, "combine": 0, "dram": 1, "vector": vt + h2 // 2, "similarity": 0}
    assert pv["dense_total_cycles"] == 49 + h2 // 2 + vt + 1 == 62
    assert qk["fused"] == "pv" and pv["fused"] == "qk"
    # Integer scores in the score SRAM (3 B written, 3 B read each), never in DRAM; P written into the input SRAM.
    assert qk["dense_actions"]["sram_score_write_bytes"] == qk["dense_actions"]["sram_score_read_bytes"] == 768
    assert pv["dense_actions"]["sram_input_write_bytes"] == 256
    # D83: the scores are qk's output, so it writes nothing to the output SRAM; pv writes its M x d_h = 16 x 8
    # outputs there (tiny-8x8: acc_bits 28 -> 4 B each), written once and read once.
    assert qk["dense_actions"]["sram_output_write_bytes"] == qk["dense_actions"]["sram_output_read_bytes"] == 0
    assert pv["dense_actions"]["sram_output_write_bytes"] == pv["dense_actions"]["sram_output_read_bytes"] == 16 * 8 * 4


def test_kaleido_fused_pair_with_reuse_by_hand():
    # pv: frame 1 REUSEs group 1 on every token (frame 0 has no neighbour: COMPUTE).
    dec = np.zeros((16, 2), dtype=np.int8)
    dec[8:, 1] = 2
    res = simulate_trace(_pair(dec), _cfg())
    qk, pv = res["per_op"]
    # Kaleido's pv follows qk's tiling: whole image rows, floor(8/4)*4 = 8 positions = 1 block x 2 frames.
    # Tile (frame 0): 16 slots; tile (frame 1): group 1 skipped, 8 slots: 24 slots + R + C + 1 = 41.
    assert pv["cycles"] == 24 + 8 + 8 + 1 and pv["tiles"] == 2
    a_qk = qk["cycles"]
    # Similarity unit, 8 lanes: qk's pass over Q 16*8/8 = 16 (head: first tile 8*8/8 = 8); pv's over P 256/8 = 32.
    # Per query tile the first P group (8 keys) is made and decided first: V(3*8*8, 0) = 12, 8*8/8 = 8.
    h2_v, h2_s = math.ceil(192 / 16), 8
    # D75: P is made at 16 / 3 keys per cycle, faster than qk writes a tile's 16 keys in a_qk / 2 cycles
    # (16 a_qk >= 3 x 8 x 16 x 2), so the first tile's H2 runs beside the second tile's qk: it is covered up to
    # a_qk / 2 cycles and its work joins phase 1's loads (vector 34 + h2_v, similarity 8 + h2_s), leaving phase 2
    # 48 - h2_v and 32 - h2_s; the last tile's H2 is exposed whole.
    assert a_qk == 49 and 16 * a_qk >= 3 * 8 * 16 * 2
    hid_v, hid_s = max(0, h2_v - a_qk / 2), max(0, h2_v + h2_s - a_qk / 2) - max(0, h2_v - a_qk / 2)
    assert qk["stall_cycles"]["similarity"] == 8 + max(0, (16 - 8) + h2_s - a_qk)
    assert qk["stall_cycles"]["vector"] == 24 + max(0, 34 + h2_v - a_qk)
    assert pv["stall_cycles"] == {"drain": pv["stall_cycles"]["drain"], "combine": 0, "dram": 1,
                                  "vector": 10 + max(0, 48 - h2_v - 41) + hid_v + h2_v,
                                  "similarity": max(0, 32 - h2_s - 41) + hid_s + h2_s}
    assert pv["total_cycles"] == 41 + h2_v + h2_s + 10 + 1 == 72
    # P is never read from DRAM, and no similarity pass re-reads it: V in, O out.
    assert pv["actions"]["dram_read_bytes"] == 128 and pv["actions"]["dram_write_bytes"] == 128
    # P_eff state in the score SRAM: read M*K = 256 B; written in place except where frame 1 REUSEs
    # group 1 (8 tokens x 8 keys = 64 B keep their entry): 192 B.
    assert pv["actions"]["sram_score_read_bytes"] == 256 and pv["actions"]["sram_score_write_bytes"] == 192
    # Input SRAM reads: the array's rows x carried channels (frame 0: 8 x 16; frame 1: 8 x 8, group 1 skipped) and
    # the 2-bit codes (16 x 2 / 4 = 8 B); the similarity unit sees P on its way from the vector unit, not from the SRAM.
    assert pv["actions"]["sram_input_read_bytes"] == 8 * 16 + 8 * 8 + 8
    # D83: Kaleido's qk, too, leaves its scores in the score SRAM only (3 + 3 B per score), none in the output SRAM.
    assert qk["actions"]["sram_output_write_bytes"] == qk["actions"]["sram_output_read_bytes"] == 0
    assert qk["actions"]["sram_score_write_bytes"] == qk["actions"]["sram_score_read_bytes"] == 3 * 256
    # The vector unit's softmax on qk: 4 integer adds and one table read per score, RoPE in fp16, no exp.
    assert qk["actions"]["vec_int_add"] == 4 * 256 and qk["actions"]["vec_lut_read"] == 256


def test_unfused_without_score_buffer():
    res = simulate_trace(_pair(), _cfg(0))
    qk, pv = res["per_op"]
    assert "fused" not in qk
    assert qk["dense_actions"]["dram_write_bytes"] == 16 * 16  # P written as uint8
    assert pv["dense_actions"]["dram_read_bytes"] >= 16 * 16  # and read back


def test_cross_frame_state_by_hand():
    """D70: a fused score op's f-axis state spans every key of the query tile (R x N pairs), per organisation."""
    from sim.timing.attention import cross_frame_state

    qk = [(0, 44, "w"), (44, 86, "f"), (86, 128, "f")]  # Wan2.1's RoPE groups of one head
    cfg = load_config("kaleido-16nm-128x128-balanced")  # R = C = 128, psum 3 MiB
    # partial bound of the widest group: 44 x 255 x 128 = 1,436,160 < 2^21 -> 21 bits + sign = 22 -> 3 bytes;
    # two f-groups, msb and total each: 128 x 32,760 x 2 x 2 x 3 bytes.
    need = 128 * 32760 * 2 * 2 * 3
    g480 = (21, 30, 52)
    compact = cfg.model_copy(update={"organisation": "compact"})
    assert cross_frame_state(compact, qk, 128, 32760, g480) == (need, 3 * 2**20)
    lock = cfg.model_copy(update={"organisation": "lockstep"})
    assert cross_frame_state(lock, qk, 128, 32760, g480) == (need, 128 * 128 * 2 * 2 * 3)  # one column block in PEs
    assert cross_frame_state(lock, qk, 128, 100, g480) == (128 * 100 * 12, 128 * 100 * 12)  # N <= C: it fits
    assert cross_frame_state(lock, [(0, 128, "w")], 128, 512, g480) == (0, 0)
    # delta (D71): one carried value per axis class and (row, key): Y's bound 128 x 255 x 128 = 4,177,920 < 2^22
    # -> 23 bits -> 3 bytes; the f class R N, the w class F N, in the 14 MiB state SRAM.
    assert cross_frame_state(cfg, qk, 128, 32760, g480) == ((128 + 21) * 32760 * 3, 14 * 2**20)
    cross = [(16 * i, 16 * i + 16, "f") for i in range(8)]  # cross_qk: 8 groups, 512 text keys
    assert cross_frame_state(cfg, cross, 128, 512, g480) == (128 * 512 * 3, 14 * 2**20)
    no_state = cfg.model_copy(update={"state_sram_kib": 0})
    assert cross_frame_state(no_state, qk, 128, 32760, g480) == ((128 + 21) * 32760 * 3, 3 * 2**20)


def test_state_note_names_an_unsized_state():
    """The simulate note (sim.results.state_notes) appears exactly when the state does not fit."""
    from sim.results import state_notes

    tr = _pair()
    cfg = _cfg()  # lockstep tiny-8x8: R = C = 8, 16 keys = two column blocks
    res = simulate_trace(tr, cfg)
    notes = state_notes(res, tr, cfg)
    assert len(notes) == 1 and notes[0].startswith("qk (fused)") and "D70" in notes[0]
    wide = cfg.model_copy(update={"array_cols": 16})  # one column block holds all 16 keys
    assert state_notes(simulate_trace(tr, wide), tr, wide) == []


def test_delta_fused_qk_class_state_by_hand():
    """D71: the delta organisation's fused qk carries one value per axis class; the f class's in the state SRAM,
    the w class's inside the pool in the combine lane's register."""
    from algo.trace import Group, OpRecord, Trace, pack_decisions

    cfg = _cfg().model_copy(update={"organisation": "delta", "psum_sram_kib": 64, "compact_bands": 2,
                                    "state_sram_kib": 1})
    C, P, R_ = 0, 1, 2  # noqa: N806  COMPUTE, PARTIAL, REUSE
    w_pos = np.tile(np.arange(4), 4)  # grid (2, 2, 4): w of each raster token
    dec = np.zeros((16, 2), dtype=np.int8)
    dec[:8, 0] = np.where(w_pos[:8] == 0, C, R_)  # frame 0: t group (w axis) REUSEs after each row's first
    dec[8:, 0] = np.where(w_pos[8:] == 0, C, P)  # frame 1: PARTIAL after each row's first
    dec[8:, 1] = R_  # frame 1: h group (f axis) REUSEs frame 0's
    qk_groups = [Group(0, 4, "w", "t"), Group(4, 8, "f", "h")]
    pv_groups = [Group(0, 8, "f"), Group(8, 16, "f")]
    ops = [OpRecord("qk", 0, 0, None, None, qk_groups, (0.0, 0.0), dims=(1, 16, 8, 16),
                    decisions=pack_decisions(dec)[None, None], thetas=((0.0, 0.0),)),
           OpRecord("pv", 0, 0, None, None, pv_groups, (0.0, 0.0), x_signed=False, dims=(1, 16, 16, 8),
                    decisions=pack_decisions(np.zeros((16, 2), np.int8))[None, None], thetas=((0.0, 0.0),))]
    trace = Trace(grid=GRID, ops=ops, model="test", size="test", weights="none")
    res = simulate_trace(trace, cfg)
    qk = res["per_op"][0]["actions"]
    # D127: a value takes the bits of the word built for it: the state SRAM's 24 (`STATE_BITS`, a head dimension of
    # up to 256: 256 x 255 x 128 < 2^23), the D buffers' and the state buffer's acc bits (28 on this config)
    sb, vb, n = 3, cfg.acc_bits / 8, 16  # 16 keys
    assert cfg.acc_bits == 28
    # f class: frame 1's 8 tokens read S_f[nb]; frame 0's 8 tokens write it for them: the state SRAM.
    assert qk["sram_state_read_bytes"] == 8 * n * sb and qk["sram_state_write_bytes"] == 8 * n * sb
    # w class: one pool is a whole frame (8 positions), so every w neighbour is in the pool: no SRAM access;
    # the 12 tokens with w >= 1 take S_w[t - 1] from the combine lane's register (acc bits each). On
    # kaleido_dcore's V = d = 2 output lanes (D113) the register is written once per run of 2 positions holding
    # any (D114): the held values are w = 0, 1, 2 of each image row, positions 0-2 and 4-6 of a frame, so runs
    # (0, 1), (2, 3), (4, 5), (6, 7) all hold: 4 writes a frame, 8 in all (one lane: 12).
    assert qk["combine_reg_bits"] == 8 * n * cfg.acc_bits
    one = simulate_trace(trace, cfg.model_copy(update={"dcore_out_ways": 1}))["per_op"][0]["actions"]
    assert one["combine_reg_bits"] == 12 * n * cfg.acc_bits
    # D traffic in the partial-sum SRAM: the non-REUSE (token, group) pairs: w class 2 + 8, f class 8.
    assert qk["sram_psum_write_bytes"] == qk["sram_psum_read_bytes"] == 18 * n * vb
    # D84: with a difference-sum buffer the same D traffic goes there instead; apart from the cycles (the band-tiles
    # issue column block by column block within a chunk, a different list schedule) nothing else moves
    dcfg = cfg.model_copy(update={"diff_sram_kib": 8})
    dres = simulate_trace(trace, dcfg)
    dqk = dres["per_op"][0]["actions"]
    assert dqk["sram_diff_write_bytes"] == dqk["sram_diff_read_bytes"] == 18 * n * vb
    assert dqk["sram_psum_write_bytes"] == dqk["sram_psum_read_bytes"] == 0
    timing = ("cycles", "idle_pe_cycles", "gated_mm2_cycles")
    # (the queues' decision banks are read every cycle they run, D127: their bytes follow the cycles too)
    assert all(dqk[k] == qk[k] for k in qk if "psum" not in k and "diff" not in k and k not in timing
               and k not in ("ctrl_fifo_bytes", "ctrl_dec_bytes"))
    # ... but the row FIFO's entries (D address, count bank, row) are narrower: the D buffers are the difference-sum
    # buffer's (D122), 48 words a way against a third of psum_sram_kib's 390, a 1 + 6-bit D address against 1 + 9:
    # 234 bits against 237 for the same entries
    assert dqk["ctrl_fifo_bytes"] == pytest.approx(qk["ctrl_fifo_bytes"] * 234 / 237)
    # D122: the difference-sum buffer is kaleido_dcore's 3 D buffers (d = 2 ways, V = 2 lanes), an access charged at
    # a column slice of their macro: 8 KiB x 8,192 // (8 columns x 28 acc bits) = 292 words // 3 buffers = 97 // 2
    # ways = 48 words a way, a 48 x 224-bit macro, a column's slice 48 x 28 bits (below 8 KiB the exponent-0.5
    # slope). Kaleido only.
    from sim.cost.energy import sram_access_pj
    from sim.cost.tech import load_tech

    assert dcfg.acc_bits == 28 and dcfg.drain_rows_per_cycle == 2
    per_byte = sram_access_pj(load_tech("16nm"), 48 * 28 / 8192) / 8
    assert dres["per_op"][0]["energy_breakdown_pj"]["sram_diff"] == pytest.approx(2 * 18 * n * vb * per_byte)
    assert dres["dense_energy_breakdown_pj"]["sram_diff"] == 0
    # D85: with a weight stage (1 KiB: 128 B per column bank, 16 column blocks of K = 8 weights) the band-tiles read
    # their weights from the stage, and the weight SRAM fills it once per chunk with band-tiles (the 2 frames of the
    # one position block, one frame a chunk) and column block: 2 x K x N = 2 x 8 x 16 bytes, written into the stage
    scfg = dcfg.model_copy(update={"wstage_sram_kib": 1})
    sqk = simulate_trace(trace, scfg)["per_op"][0]["actions"]
    # Without the stage every band-tile reads its group's 4 weights a column: 10 band-tiles (per column block of 8:
    # frame 0's h group in 2 band-tiles of 4 rows and its 2 COMPUTE t tokens in 1; frame 1's t group in 1 PAIRED
    # and 1 COMPUTE band-tile) x 4 weights x 8 columns. Since D101 the RTL's rule is charged: kaleido_daccel's bands
    # read their own weight copies, a word of 2 channels x 8 columns a slot: 8 band-tiles of 4 slots and the 2
    # PAIRED ones of 2, 36 slots x 16 bytes.
    assert dqk["sram_weight_read_bytes"] == 36 * 2 * 8
    # D127: the stage reads kaleido_daccel_stage makes (the cycle model's `stage_run`), each a word of 2 B = 4
    # channels from both half-word macros of all 8 column banks (32 bytes). A group of 4 weights is one word: each of
    # the 10 band-tiles loads one, and one read feeds every band that wants the same word at the turn (D92), so the
    # reads lie between the distinct (segment, group) words -- chunk 0's h and t in each of its 2 column blocks, chunk
    # 1's t in each: 6 -- and 10 (tests/test_rtl_dstage.py checks the count equal to the RTL's).
    assert sqk["sram_wstage_read_bytes"] % 32 == 0 and 6 * 32 <= sqk["sram_wstage_read_bytes"] <= 10 * 32
    assert sqk["stage_reg_bits"] == 10 * 4 * 8 * 8  # each band-tile loads one word register of 4 x 8 weights
    # The fills: per segment (2 chunks x 2 column blocks) the whole K in group-aligned half-words of B = 2 channels
    # (2 + 2), each one weight-buffer read and one stage half-word write of 2 x 8 bytes: 16 x 16 = 2 x 8 x 16 bytes.
    assert sqk["sram_weight_read_bytes"] == sqk["sram_wstage_write_bytes"] == 2 * 8 * 16
    # combine adds: frame 1's 6 PARTIAL t-group tokens add S_w[nb] (6); Y = S_w + S_f for all 16 tokens.
    assert qk["combine_add"] == (6 + 16) * n
    assert res["energy_breakdown_pj"]["sram_state"] > 0 and res["dense_energy_breakdown_pj"]["sram_state"] == 0
    # D76, D136: pv's P is not staged in the input SRAM, nor are its differences: only the 2-bit codes (16 x 2 x 2
    # / 8 = 8 bytes) are written there
    pv = res["per_op"][1]["actions"]
    assert pv["sram_input_write_bytes"] == 8
    assert res["per_op"][1]["dense_actions"]["sram_input_write_bytes"] == 16 * 16  # dense stages P (and has no codes)


@pytest.mark.parametrize("peff_kib", [0, 1])
def test_delta_fused_pv_differences_in_the_score_buffer_by_hand(peff_kib):
    """D136: a delta fused P op's 9-bit differences are stashed in the score buffer (in the entries of the scores
    the exp pass has read), not in the input SRAM's queue stash (one 480p query tile of them would not fit it)."""
    cfg = _cfg().model_copy(update={"organisation": "delta", "psum_sram_kib": 64, "compact_bands": 2,
                                    "state_sram_kib": 1, "peff_sram_kib": peff_kib})
    C, P, R_ = 0, 1, 2  # noqa: N806  COMPUTE, PARTIAL, REUSE
    dec = np.full((16, 2), C, dtype=np.int8)  # frame 0 (tokens 0-7): no neighbour, every group COMPUTE
    dec[10:12] = (P, R_)  # frame 1: tokens 8-9 COMPUTE both groups, 10-11 PARTIAL + REUSE,
    dec[12:16] = (R_, C)  # 12-15 REUSE + COMPUTE
    res = simulate_trace(_pair(dec), cfg)
    pv, dense = res["per_op"][1]["actions"], res["per_op"][1]["dense_actions"]
    # pv: M = 16 queries, K = 16 keys in two f groups of 8, N = 8 = C (one column block, one X pass). Needed (token,
    # channel) pairs: 8 x 16 (frame 0) + 2 x 16 (8-9) + 2 x 8 (10-11's PARTIAL group) + 4 x 8 (12-15's COMPUTE
    # group) = 208 differences of 9 bits: 234 bytes, written once and read once by the gather
    diffs = (8 * 16 + 2 * 16 + 2 * 8 + 4 * 8) * 9 // 8
    codes = 16 * 2 * 2 // 8  # 2-bit decision codes, written by the similarity unit and read by the queues
    assert diffs == 234
    # input SRAM: the codes only (no P, D76; no differences, D136)
    assert pv["sram_input_write_bytes"] == codes and pv["sram_input_read_bytes"] == codes
    # P_eff (`sim.cost.actions`, unchanged): M K read as the similarity unit decides, written in place where the
    # group is not REUSE: 256 less tokens 10-11's group 2 (2 x 8) and 12-15's group 1 (4 x 8) = 208
    peff_r, peff_w = 16 * 16, 16 * 16 - 2 * 8 - 4 * 8
    if peff_kib:
        assert (pv["sram_peff_read_bytes"], pv["sram_peff_write_bytes"]) == (peff_r, peff_w)
        assert pv["sram_score_read_bytes"] == pv["sram_score_write_bytes"] == diffs
    else:  # no P_eff buffer: P_eff lives in the score buffer too (D58)
        assert (pv["sram_score_read_bytes"], pv["sram_score_write_bytes"]) == (diffs + peff_r, diffs + peff_w)
    assert dense["sram_score_read_bytes"] == dense["sram_score_write_bytes"] == 0  # dense reads P from the input SRAM
    assert dense["sram_input_write_bytes"] == 16 * 16


def test_state_note_kept_in_results_and_explained(tmp_path):
    """D70: the note is written into the results JSON and `kaleido explain` prints it."""
    import json

    from algo.trace.writer import save_trace
    from tests.test_cli import kaleido

    trace, res_path = tmp_path / "pair.npz", tmp_path / "r.json"
    save_trace(_pair(), trace)
    cfg = tmp_path / "c.toml"
    d = _cfg().model_dump() | {"name": "tiny-score"}
    cfg.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in d.items() if v is not None) + "\n")
    run = kaleido("simulate", str(trace), "--config", str(cfg), "--json", str(res_path))
    assert run.returncode == 0, run.stderr
    notes = json.loads(res_path.read_text())["notes"]
    assert len(notes) == 1 and notes[0].startswith("qk (fused)")
    energy = next(ln for ln in run.stdout.splitlines() if ln.startswith("energy ("))  # the headline says so too
    assert "optimistic: 1 fused score op(s)" in energy and "D70" in energy
    shown = kaleido("explain", str(res_path))
    assert shown.returncode == 0 and f"note: {notes[0]}" in " ".join(shown.stdout.split())
    from sim.report.tables import explain_markdown

    assert f"Note: {notes[0]}." in explain_markdown([("r", json.loads(res_path.read_text()))])
