"""DRAM and vector-unit stalls (sim.timing.memory) against hand derivations.

Rules restated (sim/timing/memory.py module docstring): B = dram_gbps * 1000 / clock_mhz bytes per cycle;
D = ceil(dram_bytes / B); prologue Dh = ceil((r0*kf + kf*c0) / B), epilogue Dt = ceil(r0*c0 / B)
with r0 = min(R, M), c0 = min(C, N), kf = min(K, R); Do = max(0, D - Dh - Dt).
Vector: V(a, m) = max(ceil(a / lanes), ceil(m / lanes)); Vh = V(pre x r0/M); Vt = V(post x r0 c0 / (M N));
Vo = max(0, V(total) - Vh - Vt). Stalls: vector = Vh + Vt + max(0, Vo - A); DRAM = Dh + Dt +
max(0, Do - max(A, Vo)) when every buffer holds two folds, else D.
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import block_groups
from hw.config import config_from_dict, load_config
from sim.cost.actions import _vector_counts, op_actions
from sim.timing.memory import (
    fold_bytes,
    fold_shortfall,
    kaleido_dram_bytes,
    op_memory_timing,
    vector_lanes,
    vector_work,
)


def cfg_of(**kw):
    base = dict(name="t", array_rows=8, array_cols=8, clock_mhz=1000, drain_rows_per_cycle=2, max_tokens=4096,
                max_k=4096, input_sram_kib=1, weight_sram_kib=1, output_sram_kib=1, partial_sram_kib=1,
                dram_gbps=8.0, vector_lanes=4)
    base.update(kw)
    return config_from_dict(base)


def test_compute_bound_ffn1_by_hand():
    """ffn1, M = 16, K = N = 8 on 8x8, B = 8 B/cycle, 4 lanes, A = 100 array cycles, 800 DRAM bytes.

    Vector work: pre (LayerNorm) 4*16*8 = 512 adds, 3*128 = 384 mults; post (requantise + GELU) per
    output (M N = 128): 1+6 adds = 896, 1+14 mults = 1,920. V_total = max(ceil(1408/4), ceil(2304/4))
    = 576. Vh = max(512*8/16/4, 384*8/16/4) = 64. Vt: share 64/128: max(896/2/4, 1920/2/4) = 240.
    Vo = 576 - 304 = 272. DRAM: D = 100, Dh = (64 + 64)/8 = 16, Dt = 64/8 = 8, Do = 76.
    Vector stall = 64 + 240 + (272 - 100) = 476; DRAM stall = 24 + max(0, 76 - 272) = 24;
    total = 100 + 24 + 476 = 600 (= Dh + Vh + max(A, Vo, Do) + Vt + Dt = 16 + 64 + 272 + 240 + 8).
    """
    t = op_memory_timing("ffn1", 1, 16, 8, 8, 100, 800, cfg_of())
    assert t["stall_cycles"] == {"dram": 24, "vector": 476, "similarity": 0}
    assert (t["total_cycles"], t["dram_cycles"], t["vector_cycles"], t["double_buffered"]) == (600, 100, 576, True)


def test_dram_bound_by_hand():
    """The same op with 8,000 DRAM bytes: D = 1,000, Do = 976 > max(A, Vo) = 272, so the DRAM stall is
    24 + (976 - 272) = 728; the vector stall stays 476; total 1,304 = 16 + 64 + 976 + 240 + 8."""
    t = op_memory_timing("ffn1", 1, 16, 8, 8, 100, 8000, cfg_of())
    assert t["stall_cycles"] == {"dram": 728, "vector": 476, "similarity": 0}
    assert t["total_cycles"] == 1304


def test_no_double_buffering_serialises_dram():
    """16x16 array: the output fold is 16*16*4 = 1,024 bytes (acc 28 bits: 4096 * 255 * 128 < 2^27, plus sign -> 4 bytes), exactly 1 KiB, so
    the output SRAM holds one fold but not two: all D = ceil(800/8) = 100 cycles stall.
    o_proj M = K = N = 16: no pre work; post 2 adds (requantise + residual) and 1 mult per output:
    512 adds, 256 mults -> V_total = 128; the last tile is the whole output (share 1): Vt = 128, Vo = 0.
    Total = 200 + 100 + 128 = 428."""
    cfg = cfg_of(array_rows=16, array_cols=16)
    assert cfg.acc_bits == 28 and fold_bytes(cfg, 16) == {"input": 256, "weight": 256, "output": 1024}
    t = op_memory_timing("o_proj", 1, 16, 16, 16, 200, 800, cfg)
    assert t["double_buffered"] is False
    assert t["stall_cycles"] == {"dram": 100, "vector": 128, "similarity": 0}
    assert t["total_cycles"] == 428


def test_batch_scales_the_overlapped_part_only():
    """qk per head M = 16, K = 8, N = 16 (keys), 2 heads, A = 1,000, no DRAM bytes.
    Per head: pre (RoPE) adds 16*8 + 8*16 = 256, mults 512; post (requantise + softmax) per score
    (256): 8 adds = 2,048, 7 mults = 1,792. V_total over 2 heads = max(2*2304/4, 2*2304/4) = 1,152.
    Vh = max(256*8/16/4, 512*8/16/4) = 64; Vt (share 8*8/256 = 1/4) = max(512/4, 448/4) = 128;
    Vo = 1152 - 192 = 960 < A: vector stall 192. DRAM: D = 0 bytes, so the prologue and epilogue
    (16 and 8 cycles for a full fold) are capped at 0."""
    t = op_memory_timing("qk", 2, 16, 8, 16, 1000, 0, cfg_of())
    assert t["stall_cycles"] == {"dram": 0, "vector": 192, "similarity": 0}
    assert t["total_cycles"] == 1192


# Hand-derived (pre_adds, pre_mults, post_adds, post_mults) for M = 24, K = 16, N = 40 from the rules
# in sim/cost/actions.py's docstring: norm + modulation 4 adds + 3 mults per input element (M K = 384);
# RoPE 1 add + 2 mults per Q and K element (M K + K N = 384 + 640 = 1,024); requantise 1 + 1 per
# output (M N = 960); softmax 7 + 6 per score; 1/rowsum 1 mult per output + 4 per row (4 M = 96);
# GELU 6 + 14 per output; residual 1 add per output.
HAND_VECTOR_WORK = {
    "qkv": (4 * 384, 3 * 384, 960, 960),
    "qk": (1024, 2 * 1024, 960 + 7 * 960, 960 + 6 * 960),
    "pv": (0, 0, 960, 960 + 960 + 96),
    "o_proj": (0, 0, 960 + 960, 960),
    "cross_qk": (0, 0, 960 + 7 * 960, 960 + 6 * 960),
    "cross_pv": (0, 0, 960, 960 + 960 + 96),
    "ffn1": (4 * 384, 3 * 384, 960 + 6 * 960, 960 + 14 * 960),
    "ffn2": (0, 0, 960 + 960, 960),
}


@pytest.mark.parametrize("name", sorted(HAND_VECTOR_WORK))
def test_vector_work_equals_hand_counts(name):
    assert vector_work(name, 24, 16, 40) == HAND_VECTOR_WORK[name]
    pa, pm, qa, qm = HAND_VECTOR_WORK[name]
    assert _vector_counts(name, 24, 16, 40) == (pa + qa, pm + qm)


def test_default_lanes_match_the_area_model():
    cfg = load_config("kaleido-16nm-128x128")
    assert cfg.vector_lanes is None and vector_lanes(cfg) == 128 * 4
    assert vector_lanes(load_config("tiny-8x8")) == 8 * 2


def test_fold_bytes_and_shortfall():
    """128x128 preset: fold = 128 x 128 int8 input, 128 x 128 int8 weights, 128 x 128 x 5 output bytes
    (acc 33 bits); a K = 40 op needs 128 x 40 and 40 x 128. Input 8 KiB < 16,384 bytes: shortfall."""
    cfg = load_config("kaleido-16nm-128x128")
    assert fold_bytes(cfg, 1536) == {"input": 16384, "weight": 16384, "output": 81920}
    assert fold_bytes(cfg, 40) == {"input": 5120, "weight": 5120, "output": 81920}
    assert fold_shortfall(cfg, 75600) is None
    small = config_from_dict({**cfg.model_dump(), "input_sram_kib": 8})
    assert fold_shortfall(small, 1536) == ("input", 16384, 8)
    assert fold_shortfall(small, 64) is None  # 128 x 64 = 8,192 bytes fit exactly


def test_kaleido_dram_bytes_match_the_action_counts():
    """The shape-only DRAM rule (used by the benchmark) gives the same bytes as sim.cost.actions."""
    rng = np.random.default_rng(0)
    grid = (3, 4, 4)
    groups = block_groups(24)
    for cfg in (load_config("tiny-8x8"), cfg_of()):
        dec = rng.integers(0, 3, size=(48, len(groups))).astype(np.int8)
        dec[:16] = 0
        a = op_actions("qkv", [dec, dec], grid, groups, 48, 24, 20, 4, cfg, cycles=1000)
        assert kaleido_dram_bytes(cfg, 2, 48, 24, 20, grid) == a["dram_read_bytes"] + a["dram_write_bytes"]


def test_similarity_unit_bounds_pv_by_hand():
    """pv, 2 heads, M = 16 queries, K = 16 keys, N = 8, A = 40 array cycles, no DRAM bytes, on 8x8
    with the default similarity lanes (R = 8) and a vector unit too wide to matter (10^6 lanes: its
    post work rounds up to Vt = 1 cycle, V_total = 1, no pre work, Vo = 0).
    Similarity unit: S = ceil(2 * 16 * 16 / 8) = 64; head Sh = ceil(min(8, 16) * 16 / 8) = 16; So = 48.
    Stall = 16 + max(0, 48 - max(40, 0)) = 24; total = 40 + 0 + 1 + 24 = 65. The dense array makes no
    decisions: stall 0, total 41."""
    cfg = cfg_of(vector_lanes=10**6)
    t = op_memory_timing("pv", 2, 16, 16, 8, 40, 0, cfg, similarity=True)
    assert t["stall_cycles"] == {"dram": 0, "vector": 1, "similarity": 24}
    assert (t["total_cycles"], t["similarity_cycles"]) == (65, 64)
    assert op_memory_timing("pv", 2, 16, 16, 8, 40, 0, cfg)["total_cycles"] == 41
    wide = op_memory_timing("pv", 2, 16, 16, 8, 40, 0, cfg_of(vector_lanes=10**6, similarity_lanes=32),
                            similarity=True)
    assert wide["stall_cycles"]["similarity"] == 4 and wide["similarity_cycles"] == 16  # Sh = 4, So = 12 < 40
