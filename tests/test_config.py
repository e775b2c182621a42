"""Accelerator configuration (hw.config): presets, derived widths, and errors naming the key.

Expected values are the ones written in hw/presets/*.toml; derived numbers are worked by hand below.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from hw.config import (
    DEFAULT_PRESET,
    AcceleratorConfig,
    ConfigError,
    config_from_dict,
    load_config,
    preset_names,
)

PRESETS = Path(__file__).resolve().parents[1] / "hw" / "presets"
TINY_TEXT = (PRESETS / "tiny-8x8.toml").read_text()


def test_preset_names():
    assert preset_names() == ["kaleido-16nm-128x128", "kaleido-16nm-128x128-balanced", "small-32x32", "tiny-8x8"]
    assert DEFAULT_PRESET == "kaleido-16nm-128x128"


def test_reference_preset_values():
    cfg = load_config("kaleido-16nm-128x128")
    assert cfg.name == "kaleido-16nm-128x128"
    assert (cfg.technology_nm, cfg.array_rows, cfg.array_cols) == (16, 128, 128)
    assert cfg.clock_mhz == 1000
    assert cfg.operand_bits == 8 and cfg.msb_splits == (4,) and cfg.b_msb == 4
    assert cfg.partial_regs == 8 and cfg.drain_rows_per_cycle == 4
    assert cfg.max_tokens == 75600 and cfg.max_k == 75600  # 21 x 45 x 80 = 75,600 tokens at 720p
    assert 21 * 45 * 80 == cfg.max_tokens
    assert (cfg.input_sram_kib, cfg.weight_sram_kib, cfg.output_sram_kib, cfg.partial_sram_kib) == (
        512, 512, 256, 256)
    assert cfg.dram_gbps == 460.0
    # Default preset is this one.
    assert load_config() == cfg


def test_balanced_preset_follows_its_rules():
    """The sizing rules written in the preset (docs/decisions.md D41), worked by hand: s_t = 1 / (1 - 0.8) = 5."""
    ref, cfg = load_config("kaleido-16nm-128x128"), load_config("kaleido-16nm-128x128-balanced")
    R, keys, dh, s_t = 128, 21 * 30 * 52, 128, 5  # noqa: N806  480p: 32,760 tokens; d_h = 128
    assert cfg.vector_lanes == 7 * R * s_t == 4480
    assert cfg.similarity_lanes == R * s_t == 640
    kv, peff = 2 * keys * dh, R * keys * 1  # one head's K and V; one query tile's P_eff state (D58)
    window = 1 * R * 21 * 1536  # one scheduler window of X over 21 frames at K = d = 1536
    for kib, need in ((cfg.weight_sram_kib, kv), (cfg.peff_sram_kib, peff), (cfg.input_sram_kib, window)):
        assert need <= kib * 1024 < 2 * need  # the next power of two
    scores = R * keys * 3  # one query tile's int24 scores: 12,579,840 B, rounded up to whole MiB (12 MiB)
    assert cfg.score_sram_kib == -(-scores // 2**20) * 1024 == 12288
    same = ("array_rows", "array_cols", "clock_mhz", "partial_regs", "drain_rows_per_cycle",
            "output_sram_kib", "partial_sram_kib", "dram_gbps", "max_tokens", "max_k")
    assert all(getattr(cfg, k) == getattr(ref, k) for k in same)
    assert cfg.fit_scheduler_window and not ref.fit_scheduler_window
    assert ref.score_sram_kib == 0  # the reference design has no score buffer: attention unfused
    # the compact organisation's rules (preset comment, docs/decisions.md D50)
    from sim.timing.compact import chunk_frames

    assert cfg.organisation == "delta" and ref.organisation == "lockstep"  # compact's band-tiles (D68)
    assert cfg.compact_bands == R // 16 and R // cfg.compact_bands <= R * (1 - 0.8)  # 16 rows <= 25.6 tokens
    pv_groups = [(k, min(k + 4096, keys), "f") for k in range(0, keys, 4096)]  # 8 * ceil(32760 / 64) = 4096
    # the delta organisation's partial-sum SRAM (D88): ffn1's 42 weight-resident column blocks (8 MiB // (1,536 x
    # 128 B)) of carried Y, 4 B each (1,536 x 255 x 128 < 2^26), and 16 x 1,536 queued 9-bit differences
    from sim.timing.delta import plan, psum_need_bytes

    ffn1 = 42 * R * 128 * 4 + 16 * 1536 * 9 // 8
    assert psum_need_bytes(cfg, 1, 42, 1536, 8960) == ffn1 == 2_780_160
    assert 2 * 2**20 < ffn1 <= cfg.psum_sram_kib * 1024 == 3 * 2**20  # rounded up to a whole MiB
    # X read once; D122: 5 frames of D a segment in one of the core's 3 D buffers, 1,024 KiB x 8,192 // (128 x 33
    # bits) = 1,985 words // 3 = 661, 165 a way on 4 ways: 660 words >= 5 x 128 (D84's two 4-byte buffers: 4)
    assert plan(cfg, 21, 1536, 8960) == (5, 42)
    # the compact organisation on this preset: pv, 4 B partials (4096 x 255 x 128 < 2^31); a frame's staged
    # partials 128 x 8 x 128 x 4 = 512 KiB, x 2 buffers; state 2 x 512 KiB; queued P rows 16 x 32,760
    # -> (3 MiB - 1 MiB - 524,160 B) / 1 MiB = 1.5 -> 1 frame per chunk
    assert chunk_frames(cfg, 21, keys, dh, pv_groups) == 1
    qkv_groups = [(k, k + 192, "f") for k in range(0, 1536, 192)]  # 3 B partials: 192 x 255 x 128 < 2^23
    assert chunk_frames(cfg, 21, 1536, 4608, qkv_groups) == (3 * 2**20 - 2 * 393_216 - 16 * 1536) // 786_432 == 2


def test_tiny_preset_values():
    cfg = load_config("tiny-8x8")
    assert cfg.name == "tiny-8x8"
    assert (cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle) == (8, 8, 2)
    assert cfg.clock_mhz == 1000 and cfg.msb_splits == (4,) and cfg.partial_regs == 8
    assert cfg.max_tokens == 4096 and cfg.max_k == 4096
    assert (cfg.input_sram_kib, cfg.weight_sram_kib, cfg.output_sram_kib, cfg.partial_sram_kib) == (
        16, 16, 8, 8)
    assert cfg.dram_gbps == 460.0


def test_reference_derived_widths():
    cfg = load_config("kaleido-16nm-128x128")
    # |Y| <= 75,600 * 255 * 128 = 2,467,584,000: above 2^31 = 2,147,483,648, below
    # 2^32 = 4,294,967,296 -> 32 magnitude bits + 1 sign bit = 33.
    assert 2**31 < 75_600 * 255 * 128 < 2**32
    assert cfg.acc_bits == 33
    assert cfg.group_bits == 3   # 8 partial registers -> index 0..7 -> 3 bits
    assert cfg.port_bits == 2    # 4 ports -> index 0..3 -> 2 bits


def test_tiny_derived_widths():
    cfg = load_config("tiny-8x8")
    # 4096 * 255 * 128 = 2^12 * 255 * 2^7 = 255 * 2^19 = 133,693,440; 2^26 <= that < 2^27
    # (255 < 2^8) -> 27 magnitude bits + 1 sign = 28.
    assert 4096 * 255 * 128 == 133_693_440
    assert cfg.acc_bits == 28
    assert cfg.group_bits == 3
    assert cfg.port_bits == 1    # 2 ports -> index 0..1 -> 1 bit


def test_acc_bits_uses_the_larger_of_k_and_tokens():
    data = _tiny_dict()
    data["max_k"] = 1
    data["max_tokens"] = 1
    # 1 * 255 * 128 = 32,640 < 2^15 = 32,768 -> 15 + 1 = 16
    assert config_from_dict(data).acc_bits == 16
    data["max_k"] = 2
    # 2 * 32,640 = 65,280 < 2^16 -> 17
    assert config_from_dict(data).acc_bits == 17


def test_config_is_frozen():
    cfg = load_config("tiny-8x8")
    with pytest.raises(ValidationError):
        cfg.array_rows = 16


def test_load_by_path(tmp_path):
    p = tmp_path / "mine.toml"
    p.write_text(TINY_TEXT.replace('name = "tiny-8x8"', 'name = "mine"'))
    cfg = load_config(p)
    assert cfg.name == "mine" and cfg.array_rows == 8
    assert load_config(str(p)) == cfg


# ---- errors ----------------------------------------------------------------------------------

def _tiny_dict() -> dict:
    import tomllib

    return tomllib.loads(TINY_TEXT)


def _set_line(text: str, key: str, value: str) -> str:
    new, n = re.subn(rf"(?m)^{key} = .*$", f"{key} = {value}", text)
    assert n == 1, key
    return new


def _drop_line(text: str, key: str) -> str:
    new, n = re.subn(rf"(?m)^{key} = .*\n", "", text)
    assert n == 1, key
    return new


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (TINY_TEXT + "array_depth = 4\n", "array_depth"),                          # unknown key
        (_set_line(TINY_TEXT, "array_rows", "0"), "array_rows"),                  # zero rows
        (_set_line(TINY_TEXT, "array_rows", "-8"), "array_rows"),                 # negative
        (_set_line(TINY_TEXT, "array_cols", "12"), "array_cols"),                 # not a power of two
        (_set_line(TINY_TEXT, "drain_rows_per_cycle", "3"), "drain_rows_per_cycle"),
        (_set_line(TINY_TEXT, "drain_rows_per_cycle", "16"), "drain_rows_per_cycle"),  # > rows (8)
        (_drop_line(TINY_TEXT, "clock_mhz"), "clock_mhz"),                        # missing key
        (_drop_line(TINY_TEXT, "max_tokens"), "max_tokens"),                      # missing key
        (_set_line(TINY_TEXT, "clock_mhz", "0"), "clock_mhz"),
        (_set_line(TINY_TEXT, "operand_bits", "16"), "operand_bits"),
        (_set_line(TINY_TEXT, "msb_splits", "[3]"), "msb_splits"),
        (_set_line(TINY_TEXT, "msb_splits", "[]"), "msb_splits"),
        (_set_line(TINY_TEXT, "partial_regs", "6"), "partial_regs"),
        (_set_line(TINY_TEXT, "input_sram_kib", "24"), "input_sram_kib"),
        (_set_line(TINY_TEXT, "array_rows", '"eight"'), "array_rows"),           # wrong type
    ],
    ids=[
        "unknown-key", "zero-rows", "negative-rows", "cols-not-pow2", "drain-not-pow2",
        "drain-above-rows", "missing-clock", "missing-max-tokens", "zero-clock", "operand-bits",
        "msb-split-3", "msb-split-empty", "partial-regs-not-pow2", "sram-not-pow2", "rows-string",
    ],
)
def test_bad_file_raises_config_error_naming_key(tmp_path, text, key):
    p = tmp_path / "bad.toml"
    p.write_text(text)
    with pytest.raises(ConfigError) as exc:
        load_config(p)
    assert key in str(exc.value)
    assert isinstance(exc.value, ValueError)  # ConfigError is a ValueError


def test_missing_key_message_says_missing(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text(_drop_line(TINY_TEXT, "clock_mhz"))
    with pytest.raises(ConfigError, match=r"clock_mhz: missing key"):
        load_config(p)


def test_unknown_key_message_says_unknown():
    data = _tiny_dict() | {"array_depth": 4}
    with pytest.raises(ConfigError, match=r"array_depth: unknown key"):
        config_from_dict(data)


def test_drain_above_rows_message():
    data = _tiny_dict() | {"drain_rows_per_cycle": 16}
    with pytest.raises(ConfigError, match=r"drain_rows_per_cycle \(16\) exceeds array_rows \(8\)"):
        config_from_dict(data)
    # Equal to rows is allowed (one port per row).
    assert config_from_dict(_tiny_dict() | {"drain_rows_per_cycle": 8}).drain_rows_per_cycle == 8


def test_malformed_toml(tmp_path):
    p = tmp_path / "broken.toml"
    p.write_text(_set_line(TINY_TEXT, "array_rows", ""))  # "array_rows = " has no value
    with pytest.raises(ConfigError, match="malformed TOML") as exc:
        load_config(p)
    assert str(p) in str(exc.value)


def test_missing_file(tmp_path):
    p = tmp_path / "nowhere.toml"
    with pytest.raises(ConfigError, match="not found") as exc:
        load_config(p)
    assert str(p) in str(exc.value)


def test_missing_file_with_another_suffix(tmp_path):
    # a path (a folder in it, or ".toml" not at its end) that does not exist is a missing file, not an unknown preset
    for p in (str(tmp_path / "c.toml.nope"), "hw/presets/nowhere"):
        with pytest.raises(ConfigError, match="config file not found") as exc:
            load_config(p)
        assert p in str(exc.value) and "tiny-8x8" in str(exc.value)


def test_unknown_preset():
    with pytest.raises(ConfigError, match="no-such-preset") as exc:
        load_config("no-such-preset")
    # The message lists the valid names.
    assert "tiny-8x8" in str(exc.value) and "kaleido-16nm-128x128" in str(exc.value)


def test_direct_model_validation_still_rejects():
    # The pydantic model itself enforces the same rules (config_from_dict wraps its errors).
    with pytest.raises(ValidationError):
        AcceleratorConfig.model_validate(_tiny_dict() | {"array_cols": 12})
