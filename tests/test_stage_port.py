"""The weight stage's read port and the bands' word registers, cycle by cycle (`sim.timing.delta_accel.stage_port`,
docs/decisions.md D94): the read count the model charges (`sim.timing.compact.shared_stage_weights`, D88/D92) by hand
and on seeded ops, and the two places where that rule asks more of the hardware than D88 builds (one read port per
column bank, two word registers per band)."""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE, block_groups
from hw.config import config_from_dict, load_config
from sim.timing.compact import band_schedule, shared_stage_weights
from sim.timing.delta_accel import stage_port, staged_tiles

TINY = dict(organisation="delta", psum_sram_kib=64, compact_bands=2, diff_sram_kib=8, wstage_sram_kib=1)


def _port(segment, group, paired, band, first, widths, bands, last=None):
    w = np.asarray(widths)
    if last is None:  # back to back, no drain stall
        last = [f + (-(-int(w[g]) // 2) if p else int(w[g])) - 1 for f, g, p in zip(first, group, paired, strict=True)]
    return stage_port(segment, group, paired, band, first, last, w, bands)


def test_stage_port_by_hand():
    """B = 2 bands, words of 4 weights, band b's turns the cycles c with c mod 2 = b (the cases of
    tests/test_delta.py::test_shared_stage_reads_by_hand, counted there by hand)."""
    w = [8, 12]
    one = lambda **k: _port(**({"segment": [0, 0], "group": [0, 0], "paired": [False, False],  # noqa: E731
                                "band": [0, 1], "first": [10, 10], "widths": w, "bands": 2} | k))
    r = one()  # in step: word 0 read at 8 by band 0 for both, word 1 at 10: 2 reads of 4
    assert (r["weights"], r["reads"], r["busy_turns"], r["max_regs"], r["early"]) == (8, 2, 0, 2, 0)
    assert one(first=[10, 14])["weights"] == one(first=[10, 11])["weights"] == one(first=[10, 12])["weights"] == 16
    assert one(group=[0, 1])["weights"] == 20 and one(segment=[0, 1])["weights"] == 16
    r = one(group=[1, 1], paired=[False, True])  # words 0 and 1 shared, word 2 apart: 4 reads of 4
    assert (r["weights"], r["reads"]) == (16, 4)
    assert _port([0], [1], [False], [0], [10], w, 2)["weights"] == 12  # alone: |g|


def test_stage_port_asks_two_reads_and_three_registers_by_hand():
    """B = 4, words of 8 weights, band 3's turns c = 3 mod 4. Band-tile 0: PAIRED, |g| = 9 (2 words, L = B = 4),
    slots 10..14 (word 0 on 10..13, word 1 on 14). Band-tile 1, next on band 3, another segment, |g| = 9 single
    (L = 8), slots 15..23. Windows: t0 word 0 [6, 10) -> turn 7; t0 word 1 [10, 14) -> turn 11; t1 word 0 [11, 15) ->
    turn 11 as well: one band, one turn, two reads. From 12 the band holds t0's word 0 (in use to 13), t0's word 1
    and t1's word 0: three words. t1's word 0 is read at 11, before t0's last slot (14), when ``kaleido_dtop`` hands
    band 3 its next band-tile."""
    r = _port([0, 1], [0, 0], [True, False], [3, 3], [10, 15], [9], 4)
    assert r["weights"] == 18 == shared_stage_weights([0, 1], [0, 0], [True, False], [3, 3], [10, 15], np.array([9]), 4)
    assert (r["reads"], r["busy_turns"], r["max_regs"], r["early"]) == (4, 1, 3, 1)


def _seeded(cfg, seed, grid, K):  # noqa: N803
    rng = np.random.default_rng(seed)
    N = int(rng.integers(3, 2 * cfg.array_cols + 5))  # noqa: N806  one, two or three column blocks, non-multiple
    groups = block_groups(K, int(rng.integers(3, max(4, K // 2))), "f")
    M = grid[0] * grid[1] * grid[2]  # noqa: N806
    r = float(rng.uniform(0.2, 0.8))
    dec = rng.choice(3, (M, len(groups)), p=[(1 - r) / 2, (1 - r) / 2, r]).astype(np.int8)
    dec[: grid[1] * grid[2]] = COMPUTE  # frame 0 has no neighbour
    return dec, groups, N


CASES = [("tiny", s, (3, 2, 4) if s % 2 else (2, 4, 4), K) for s, K in enumerate((12, 37, 80, 160))] + [
    ("balanced", s, (2, 16, 16) if s % 2 else (3, 8, 16), K) for s, K in enumerate((128, 256, 1536))]


@pytest.mark.parametrize(("preset", "seed", "grid", "K"), CASES)
def test_stage_port_counts_the_model_reads(preset, seed, grid, K):  # noqa: N803
    """On seeded ops (every decision mix: PAIRED band-tiles; groups wider than a word; 2 K over a bank: sliced,
    D88), the port read cycle by cycle reads what `shared_stage_weights` charges."""
    cfg = (config_from_dict(load_config("tiny-8x8").model_dump() | TINY) if preset == "tiny"
           else load_config("kaleido-16nm-128x128-balanced"))
    dec, groups, N = _seeded(cfg, seed, grid, K)  # noqa: N806
    st = staged_tiles(dec, grid, groups, cfg, K, N)
    assert st is not None and st["paired"].any()
    assert (st["widths"] > 2 * cfg.compact_bands).any() == (K > 12)  # K = 12: groups of 4, one word
    band, first, last = band_schedule(st["s_seq"], st["rows"], cfg, st["segment"], st["fill"], st["buffers"])
    want = shared_stage_weights(st["segment"], st["group"], st["paired"], band, first, st["widths"], cfg.compact_bands)
    r = stage_port(st["segment"], st["group"], st["paired"], band, first, last, st["widths"], cfg.compact_bands)
    assert r["weights"] == want
    assert r["reads"] <= r["weights"]  # a read is at most one word


def test_staged_tiles_is_the_model_path():
    """`staged_tiles` issues and times the op as `sim.engines.model` does: the model's stage reads are its
    `shared_stage_weights` x min(C, N), and the weight SRAM fills the stage once per chunk: K x N bytes a chunk."""
    from algo.trace import Group, OpRecord, Trace, pack_decisions
    from sim.engines.model import simulate_trace

    cfg = config_from_dict(load_config("tiny-8x8").model_dump() | TINY)
    grid, K = (3, 2, 4), 160  # noqa: N806  128-byte banks: 2 K over a bank, slices of at most 64
    dec, groups, N = _seeded(cfg, 7, grid, K)  # noqa: N806
    op = OpRecord("o_proj", 0, 0, None, None, [Group(k0, k1, ax) for k0, k1, ax in groups], (0.0, 0.0),
                  dims=(1, dec.shape[0], K, N), decisions=pack_decisions(dec)[None, None], thetas=((0.0, 0.0),))
    a = simulate_trace(Trace(grid=grid, ops=[op], model="test", size="test", weights="none"), cfg)["per_op"][0]["actions"]
    st = staged_tiles(dec, grid, groups, cfg, K, N)
    # D127: the model charges the reads kaleido_daccel_stage makes (its `stage_run`), a word of 2 B channels from both
    # half-word macros of every column bank (2 B C bytes): at least each (segment, group) word once, at most once
    # per issued band-tile; each read word loaded whole into the word register of every band-tile that takes it
    C, B = cfg.array_cols, cfg.compact_bands  # noqa: N806
    words = -(-st["widths"][st["group"]] // (2 * B))
    distinct = sum(int(words[i]) for i in range(len(words))
                   if not any(st["segment"][j] == st["segment"][i] and st["group"][j] == st["group"][i]
                              for j in range(i)))
    got = a["sram_wstage_read_bytes"]
    assert got % (2 * B * C) == 0 and distinct * 2 * B * C <= got <= int(words.sum()) * 2 * B * C
    assert a["stage_reg_bits"] == int(words.sum()) * 2 * B * C * 8
    # the fills: per segment its slice's (D88) half-words of B channels, each a weight-buffer word of B x C bytes
    # read and a stage half-word written (the host's `stage_plan`; its column blocks all C wide)
    heads = [i for i in range(len(words)) if i == 0 or st["segment"][i] != st["segment"][i - 1]]
    fills = sum(-(-int(st["widths"][st["group"][i]]) // B) for i in heads)
    assert st["held"] < K and len(heads) == st["chunks"] * -(-N // C) * len(st["widths"])  # sliced, every slice
    assert a["sram_weight_read_bytes"] == a["sram_wstage_write_bytes"] == fills * B * C


def test_prefetch_rule_by_hand():
    """D94's buildable rule (tests/rtl/stage_port_check.py) on the hand case above. Band 3 needs t0's words 0 and 1
    (first used at 10 and 14, last at 13 and 14) and t1's words 0 and 1 (first used at 15 and 23). With two
    registers, t0's two words fill them, and none frees before cycle 15, the next turn (t0's words are last used at
    13 and 14). So t1's word 0 is read at 15, the cycle of its first use: late. With three registers, it is read a
    turn ahead and nothing is late. Either way each word is read once: 18 weights."""
    from tests.rtl.stage_port_check import prefetch

    args = ([0, 1], [0, 0], [True, False], [3, 3], [10, 15], [14, 23], [9], 4)
    assert prefetch(*args, regs=2) == {"weights": 18, "reads": 4, "late": 1}
    assert prefetch(*args, regs=3) == {"weights": 18, "reads": 4, "late": 0}
