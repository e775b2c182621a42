"""sim/report/streaming.py (docs/decisions.md D130): an op's on-chip needs, whole and windowed, by hand."""

import numpy as np
import pytest

from hw.config import BALANCED_PRESET, load_config
from sim.report.streaming import inflight_max, issued_segments, main, op_needs
from sim.timing.delta import plan

TINY_DELTA = "hw/presets/examples/tiny-8x8-delta.toml"
BALANCED = BALANCED_PRESET


def test_issued_segments_by_hand():
    """All COMPUTE, one 8-channel group, grid (2, 1, 8) on the 8 x 8 delta example (B = 2 bands of 4 rows, N = 16:
    two column blocks, both in one group): a chunk of one frame is 8 tokens, two band-tiles of 4 per column block,
    so 2 chunks x 2 column blocks = 4 segments of 2; with two frames a chunk, 2 segments of 4. Either way 8 issued."""
    cfg = load_config(TINY_DELTA)
    dec = np.zeros((16, 1), dtype=np.int8)
    per, issued = issued_segments(cfg, dec, (2, 1, 8), [(0, 8, "f")], 8, 16, 1, 2)
    assert per.tolist() == [2, 2, 2, 2] and issued == 8
    per, issued = issued_segments(cfg, dec, (2, 1, 8), [(0, 8, "f")], 8, 16, 2, 2)
    assert per.tolist() == [4, 4] and issued == 8


def test_op_needs_whole_and_model_by_hand():
    """The same op: the op-address D buffers and the state buffer hold A M n_cb = 16 x 2 words of C acc bits (2 ways
    divide 16 tokens evenly); the model's chunk is fw x pool x K int8 = 2 x 8 x 8 bytes; 8 band-tiles issued."""
    cfg = load_config(TINY_DELTA)
    rec = op_needs(cfg, "x", 16, 8, 16, (2, 1, 8), [(0, 8, "f")], dec=np.zeros((16, 1), dtype=np.int8))
    word = 8 * cfg.acc_bits
    assert rec["whole"]["D buffers (op address)"] == 32 * word
    assert rec["whole"]["state buffer"] == 32 * word
    assert rec["model"]["x_chunk"] == 8 * 2 * 8 * 8
    assert (rec["fw"], rec["s"], rec["band_tiles"], rec["segments"], rec["seg_tiles_max"]) == (2, 2, 8, 2, 4)
    # the window: three D buffers of one segment each, A fw R = 16 words (2 ways)
    assert rec["window"]["D buffers (segment-local)"] == 3 * 16 * word
    # the state buffer (D133) on V = 2 lanes: at the op's address 2 x A F ceil(H W / 2) n_cb = 2 x 2 x 4 x 2 = 32
    # words; per pool R s = 8 x 2 = 16; built: psum_sram_kib 64 x 8192 / (8 x 28) = 2,340 words, 1,170 a position bank
    # (one macro of 262,080 bits <= 2^20)
    assert rec["state_buffer"] == {"op_address_words": 32, "per_pool_words": 16, "built_words": 2340,
                                   "built_bits": 2340 * word}
    assert rec["window"]["carried (per pool)"] == 16 * word


def test_inflight_max_by_hand():
    # live [0, 5], [1, 2], [2, 10]: all three at cycle 2
    assert inflight_max(np.array([0, 1, 2]), np.array([5, 2, 10]), 0) == 3
    # [0, 1] and [2, 3] never overlap; with a lag of 1, [0, 2] and [2, 4] overlap at cycle 2
    assert inflight_max(np.array([0, 2]), np.array([1, 3]), 0) == 1
    assert inflight_max(np.array([0, 2]), np.array([1, 3]), 1) == 2
    assert inflight_max(np.zeros(0), np.zeros(0), 5) == 0


def test_plan_caps_the_chunk_on_the_balanced_preset_by_hand():
    """D131 (D130's `fw_fit` moved into `sim.timing.delta.plan`): 4 MiB input SRAM = 33,554,432 bits, pool 128:
    K = 1,536 leaves (33,554,432 - 8 x 196,608) / (18 x 196,608) = 9.04 frames (so the D buffers' 5 stay); K = 8,960
    (ffn2) (33,554,432 - 9,175,040) / 20,643,840 = 1.18 -> 1; pv's P (32,760 keys) in the 12 MiB score buffer at 3
    bytes a score: 12,582,912 / 12,579,840 -> 1 query tile. s as D130's table (weights and carried values)."""
    cfg = load_config(BALANCED)
    assert plan(cfg, 21, 1536, 4608, name="qkv", pool=128) == (5, 36)
    assert plan(cfg, 21, 8960, 1536, name="ffn2", pool=128) == (1, 7)
    assert plan(cfg, 21, 32760, 128, name="pv", pool=128, p_op=True) == (1, 1)
    assert plan(cfg, 21, 512, 128, name="cross_pv", pool=128, p_op=True) == (5, 1)
    rec = op_needs(cfg, "ffn2", 21 * 30 * 52, 8960, 1536, (21, 30, 52), [(0, 8960, "f")])
    assert rec["fw"] == 1 and rec["model"]["x_chunk"] == 8 * 128 * 8960


@pytest.mark.parametrize("argv", [[], ["x"], ["1.5"], ["--preset"], ["--preset", "no-such-preset", "0.8"]])
def test_bad_arguments_one_line_exit_2(argv, capsys):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1


def test_state_buffer_per_pool_fits_the_balanced_psum_sram_by_hand():
    """D133 at 480p on the balanced preset: the state buffer as built is 4 position banks of 3 MiB / 4 / (128 x 33
    bits) = 1,489 words, in macros of 128 words (2^20 // 4,224 = 248 -> 128), 11 a bank: 5,632 words (2.84 MiB);
    per pool qkv needs R s = 128 x 36 = 4,608 words, ffn1 128 x 42 = 5,376: both fit, while at the op's address
    they need A F H W n_cb = 32,760 x 36 and x 70 (rounded up to 4 banks: H W = 1,560 is a multiple of 4)."""
    cfg = load_config(BALANCED)
    grid, M = (21, 30, 52), 21 * 30 * 52  # noqa: N806
    for name, N, s, words in (("qkv", 4608, 36, 4608), ("ffn1", 8960, 42, 5376)):  # noqa: N806
        rec = op_needs(cfg, name, M, 1536, N, grid, [(0, 1536, "f")])
        assert rec["s"] == s
        assert rec["state_buffer"] == {"op_address_words": M * -(-N // 128), "per_pool_words": words,
                                       "built_words": 5632, "built_bits": 5632 * 128 * 33}
