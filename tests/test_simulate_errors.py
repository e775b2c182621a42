"""`kaleido simulate` rejects a config whose SRAM cannot hold one fold and a trace that contradicts
itself, naming both values; exit code 2 and no output file from the CLI."""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import block_groups
from algo.trace import Group, OpRecord, Trace, save_trace
from hw.config import config_from_dict, load_config
from sim.engines.model import SimError, simulate_trace
from tests.test_cli import assert_one_line_error, kaleido

RNG = np.random.default_rng(0)
GRID = (2, 2, 4)  # 16 tokens


def op(name, batch, M, K, N, groups=None):  # noqa: N803
    X = RNG.integers(-100, 100, size=(batch, M, K)).astype(np.int8)  # noqa: N806
    W = RNG.integers(-100, 100, size=(batch, K, N)).astype(np.int8)  # noqa: N806
    gs = groups or [Group(*g, "block") for g in block_groups(K)]
    return OpRecord(name, 0, 0, X, W, gs, (2.0, 6.0))


def trace_of(*ops):
    return Trace(grid=GRID, ops=list(ops), model="synthetic", size="test", weights="random")


def big_array_config(**kw):
    """64 x 8 array (d = 2): one fold of a K = 64 op needs 64 x 64 = 4,096 input bytes (fold =
    R tokens x min(K, R) channels), 64 x 8 = 512 weight bytes, 64 x 8 x 4 = 2,048 output bytes."""
    base = dict(name="tall-64x8", array_rows=64, array_cols=8, clock_mhz=1000, drain_rows_per_cycle=2,
                max_tokens=4096, max_k=4096, input_sram_kib=2, weight_sram_kib=4, output_sram_kib=4,
                partial_sram_kib=4, dram_gbps=460.0)
    base.update(kw)
    return base


def test_sram_cannot_hold_one_fold():
    cfg = config_from_dict(big_array_config())
    with pytest.raises(SimError) as err:
        simulate_trace(trace_of(op("qkv", 1, 16, 64, 24)), cfg)
    msg = str(err.value)
    assert "input SRAM (2 KiB = 2,048 bytes)" in msg and "needs 4,096 bytes" in msg and "qkv" in msg


def test_sram_fold_fits_exactly():
    """K = 32: the input fold is 64 x 32 = 2,048 bytes = 2 KiB exactly: accepted."""
    cfg = config_from_dict(big_array_config())
    res = simulate_trace(trace_of(op("qkv", 1, 16, 32, 24)), cfg)
    assert res["cycles"] > 0


def test_output_sram_too_small_names_the_output_buffer():
    """Output fold 64 x 8 x 4 bytes (acc 28 bits) = 2,048 > 1 KiB."""
    cfg = config_from_dict(big_array_config(input_sram_kib=8, output_sram_kib=1))
    with pytest.raises(SimError, match=r"output SRAM \(1 KiB = 1,024 bytes\).*needs 2,048 bytes"):
        simulate_trace(trace_of(op("ffn2", 1, 16, 16, 8)), cfg)


def test_cli_fold_error_exits_2(tmp_path):
    toml = tmp_path / "tall.toml"
    toml.write_text("".join(f"{k} = {v!r}\n".replace("'", '"') for k, v in big_array_config().items()))
    path = tmp_path / "t.npz"
    save_trace(trace_of(op("qkv", 1, 16, 64, 24)), path)
    out = tmp_path / "out.json"
    res = kaleido("simulate", str(path), "--config", str(toml), "--json", str(out))
    assert_one_line_error(res, "input SRAM (2 KiB = 2,048 bytes)", "4,096 bytes")
    assert not out.exists()


def test_operand_shapes_disagree():
    bad = op("qkv", 1, 16, 16, 12)
    bad.W = bad.W[:, :12, :]  # W [1, 12, 12] against X [1, 16, 16]
    with pytest.raises(SimError, match=r"X \[1, 16, 16\] \(batch, M, K\) vs W \[1, 12, 12\]"):
        simulate_trace(trace_of(bad), load_config("tiny-8x8"))


def test_tokens_disagree_with_grid():
    bad = op("ffn1", 1, 20, 16, 8)
    with pytest.raises(SimError, match=r"M = 20 tokens but the grid 2x2x4 holds 16"):
        simulate_trace(trace_of(bad), load_config("tiny-8x8"))


def test_groups_disagree_with_k():
    bad = op("ffn1", 1, 16, 16, 8, groups=[Group(0, 8, "f", "block")])
    with pytest.raises(SimError, match=r"cover 0..8, expected 0..16"):
        simulate_trace(trace_of(bad), load_config("tiny-8x8"))


def qk_pv(keys_in_pv: int, heads_pv: int = 2, dh_pv: int = 8):
    qk = op("qk", 2, 16, 8, 16, groups=[Group(0, 4, "w", "t"), Group(4, 8, "f", "h")])
    pv = op("pv", heads_pv, 16, keys_in_pv, dh_pv)
    pv.X = pv.X.astype(np.uint8)
    pv.x_signed = False
    return qk, pv


def test_qk_keys_disagree_with_pv():
    with pytest.raises(SimError, match=r"qk has N = 16 but pv has K = 24 \(both are the keys\)"):
        simulate_trace(trace_of(*qk_pv(24)), load_config("tiny-8x8"))


def test_heads_and_head_channels_disagree():
    with pytest.raises(SimError, match=r"qk has batch = 2 but pv has batch = 3 \(both are the heads\)"):
        simulate_trace(trace_of(*qk_pv(16, heads_pv=3)), load_config("tiny-8x8"))
    with pytest.raises(SimError, match=r"qk has K = 8 but pv has N = 4 \(both are the head channels d_h\)"):
        simulate_trace(trace_of(*qk_pv(16, dh_pv=4)), load_config("tiny-8x8"))


def test_consistent_attention_runs():
    res = simulate_trace(trace_of(*qk_pv(16)), load_config("tiny-8x8"))
    assert [r["name"] for r in res["per_op"]] == ["qk", "pv"]


def test_cli_contradicting_trace_exits_2(tmp_path):
    """The file is valid op by op (algo.trace checks each op alone); the ops contradict each other."""
    path = tmp_path / "bad.npz"
    save_trace(trace_of(*qk_pv(24)), path)
    out = tmp_path / "out.json"
    res = kaleido("simulate", str(path), "--config", "tiny-8x8", "--json", str(out))
    assert_one_line_error(res, "qk has N = 16", "pv has K = 24")
    assert not out.exists()


def test_no_dispatcher_is_lockstep_only(tmp_path):
    # compact and delta have no matcher or scheduler to switch off: one line, exit 2, nothing written
    import json

    trace, out, cfg = tmp_path / "t.npz", tmp_path / "r.json", tmp_path / "c.toml"
    save_trace(trace_of(op("qkv", 1, 16, 8, 8)), trace)
    d = load_config("tiny-8x8").model_dump() | {"name": "tiny-banded", "psum_sram_kib": 64, "compact_bands": 2}
    cfg.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in d.items() if v is not None) + "\n")
    for org in ("compact", "delta"):
        res = kaleido("simulate", str(trace), "-c", str(cfg), "--organisation", org, "--no-dispatcher",
                      "--json", str(out))
        assert_one_line_error(res, "--no-dispatcher applies to the lockstep organisation only")
        assert not out.exists()
    ok = kaleido("simulate", str(trace), "-c", "tiny-8x8", "--no-dispatcher", "--json", str(out))
    assert ok.returncode == 0, ok.stderr
    # the report shows the dispatcher-off utilization for lockstep results only
    from sim.report.tables import _markdown

    assert "without the dispatcher" in _markdown([("l", json.loads(out.read_text()))])
    ok = kaleido("simulate", str(trace), "-c", str(cfg), "--organisation", "delta", "--json", str(out))
    assert ok.returncode == 0, ok.stderr
    assert "without the dispatcher" not in _markdown([("d", json.loads(out.read_text()))])


def test_slower_note_points_to_explain_and_counts_empty_rows():
    from types import SimpleNamespace

    from sim.results import result_notes

    # 3 x 5 = 15 positions per frame on 8 rows: 2 tiles a frame, 1 of their 16 rows empty (6 %)
    tr, cfg = SimpleNamespace(grid=(2, 3, 5)), SimpleNamespace(array_rows=8, organisation="lockstep")
    res = {"cycles": 10, "dense_cycles": 5, "speedup": 0.5, "organisation": "lockstep", "notes": []}
    (note,) = result_notes(res, tr, cfg)
    assert note.startswith("Kaleido is slower than dense here (0.50x): `kaleido explain`")
    assert "busiest rows" in note and "so 6% of the tile rows are empty (dense" in note
    # with the caller's count of each op's losing link (`sim.report.explain.loses_on`), most first
    (note,) = result_notes(res, tr, cfg, {"drain": 79, "similarity": 16, "-": 1})
    assert "(ops by the link they lose most on: drain 79, similarity 16, none 1)" in note
