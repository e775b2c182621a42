"""Array organisations as a config parameter (D50): the field, the `--organisation` override,
its one-line errors, and the results JSON naming the organisation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE, apply_decisions
from hw.config import ORGANISATIONS, ConfigError, config_from_dict, load_config, with_organisation
from sim.cost.actions import op_actions
from sim.cost.area import area_breakdown
from sim.cost.compact_actions import compact_actions
from sim.cost.energy import action_energies
from sim.cost.tech import load_tech
from sim.cost.tiling import TiledDecisions, tile_stats
from sim.timing.compact import band_cycles, chunk_frames, combine_adds, compact_tiles, partial_bytes
from sim.timing.compact_reference import band_tiles, compact_gemm
from tests.test_cli import assert_one_line_error, kaleido, small_trace


def test_presets_default_to_lockstep():
    for name in ("tiny-8x8", "kaleido-16nm-128x128"):
        assert load_config(name).organisation == "lockstep"


def test_unknown_organisation_names_the_known_ones():
    with pytest.raises(ConfigError) as err:
        with_organisation(load_config("tiny-8x8"), "systolic-magic")
    msg = str(err.value)
    assert "systolic-magic" in msg and all(o in msg for o in ORGANISATIONS)


def test_cli_unknown_organisation_exits_2_and_writes_nothing(tmp_path):
    tr = small_trace(tmp_path / "t.npz")
    out = tmp_path / "r.json"
    res = kaleido("simulate", str(tr), "--config", "tiny-8x8", "--organisation", "nope", "--json", str(out))
    assert_one_line_error(res, "'nope'", *ORGANISATIONS)
    assert not out.exists()


def test_results_name_the_organisation(tmp_path):
    tr = small_trace(tmp_path / "t.npz")
    out = tmp_path / "r.json"
    res = kaleido("simulate", str(tr), "--config", "tiny-8x8", "--organisation", "lockstep", "--json", str(out))
    assert res.returncode == 0, res.stderr
    r = json.loads(out.read_text())
    assert r["organisation"] == "lockstep" and r["config"]["organisation"] == "lockstep"


# ---- the compact organisation (sim/timing/compact.py) ------------------------------------------

def tiny_compact(**kw):
    """tiny-8x8 (R = C = 8, d = 2) as the compact organisation, 2 bands of 4 rows, 64 KiB partial-sum SRAM."""
    d = load_config("tiny-8x8").model_dump() | {"organisation": "compact", "psum_sram_kib": 64, "compact_bands": 2}
    return config_from_dict(d | kw)


def _timed(dec, grid, groups, cfg, fw=None):
    fw = fw or chunk_frames(cfg, grid[0], groups[-1][1], cfg.array_cols, groups)
    slots, _, nc, npart = compact_tiles(dec.astype(np.int8), grid, groups, cfg, fw, 4)
    return list(slots), list(nc + npart), band_cycles(slots, nc + npart, cfg)


def test_compact_all_compute_two_bands_in_parallel():
    # 8 tokens COMPUTE one group of 8 channels: two band-tiles of 4 rows x 8 slots, one per band, both
    # ending their last slot at cycle 7; each band's 4 rows are read at 8..11 on its own port and leave
    # C + 1 cycles later: cycles = 7 + 4 + C + 2 = 21 (the lockstep tile: 8 slots, 8 rows: 7 + R + C + 2 = 25).
    slots, valid, (cyc, stall) = _timed(np.zeros((8, 1)), (1, 1, 8), [(0, 8, "f")], tiny_compact())
    assert slots == [8, 8] and valid == [4, 4] and (cyc, stall) == (21, 0)


def test_compact_scattered_partials_pair_at_half_width():
    # F = 4 frames of 8 positions, one group of 8 channels. Frame 0 COMPUTEs (2 band-tiles of 8 slots);
    # frames 1-3 each have 2 scattered PARTIAL tokens, the rest REUSE. The PARTIAL queue reaches 4 after
    # frame 2 (a half-width band-tile: 4 slots, 4 rows); frame 3's 2 are flushed at the chunk end (4 slots,
    # 2 rows). Bands (1 port each, a port busy one cycle per valid row after a band-tile's last slot):
    # t0 band 0 L = 7 (port free at 11); t1 band 1 L = 7 (free 11); t2 band 0 L = max(7 + 4, 11) = 11;
    # t3 band 1 L = max(7 + 4, 11) = 11. Last row reads: t2's 4th row at 11 + 4 = 15, t3's 2nd at 13
    # -> cycles 15 + C + 2 = 25.
    dec = np.full((32, 1), REUSE)
    dec[:8] = COMPUTE
    for f, (a, b) in zip((1, 2, 3), ((1, 6), (0, 3), (5, 7)), strict=True):
        dec[8 * f + a] = dec[8 * f + b] = PARTIAL
    slots, valid, (cyc, stall) = _timed(dec, (4, 1, 8), [(0, 8, "f")], tiny_compact())
    assert slots == [8, 8, 4, 4] and valid == [4, 4, 4, 2] and (cyc, stall) == (25, 0)


def test_compact_non_multiple_shape_two_column_blocks():
    # HW = 10 positions (pools of 8 and 2), K = 12 in groups of 8 and 4, N = 10 (column blocks of 8 and 2),
    # F = 1 (all COMPUTE). Per column block: pool 0 -> [8, 8] (group 0) and [4, 4] (group 1); pool 1 ->
    # flushed [8] and [4] with 2 valid rows each. List schedule over 2 bands (hand, docstring of
    # sim.timing.compact): last slots 7, 7, 11, 11, 19, 15 | 23, 27, 27, 31, 35, 35; the last two hold 2
    # rows each, read at 36..37 -> 37 + C + 2 = 47 (dense lockstep: 4 tiles x 12 slots, 47 + 18 = 65).
    cfg = tiny_compact()
    groups = [(0, 8, "f"), (8, 12, "f")]
    slots, _, nc, npart = compact_tiles(np.zeros((10, 2), np.int8), (1, 2, 5), groups, cfg, 1, 4)
    assert list(slots) == [8, 8, 4, 4, 8, 4] and list(nc + npart) == [4, 4, 4, 4, 2, 2]
    seq, valid = np.tile(slots, 2), np.tile(nc + npart, 2)
    assert band_cycles(seq, valid, cfg) == (47, 0)


def test_compact_bands_sharing_a_port_read_in_turns():
    # B = 4 bands of 2 rows on d = 2 ports: q = 2 bands per port, band b on port b mod 2 in the cycles c
    # with c mod 2 = b // 2. 6 tokens COMPUTE one group of 3 channels: band-tiles of 2 rows x 3 slots on
    # bands 0, 1, 2, each last slot at cycle 2. Reads: bands 0, 1 (turn 0) rows at 4 and 6; band 2 (turn 1)
    # at 3 and 5 -> cycles 6 + C + 2 = 16.
    from sim.timing.compact import band_schedule, drain_reads

    cfg = tiny_compact(compact_bands=4)
    slots, valid, (cyc, stall) = _timed(np.zeros((6, 1)), (1, 1, 6), [(0, 3, "f")], cfg)
    assert slots == [3, 3, 3] and valid == [2, 2, 2] and (cyc, stall) == (16, 0)
    band, _, last = band_schedule(np.array(slots), np.array(valid), cfg)
    assert list(band) == [0, 1, 2] and list(last) == [2, 2, 2]
    assert list(drain_reads(band, last, np.array(valid), cfg)) == [6, 6, 5]


def test_compact_one_band_full_tiles_is_the_lockstep_contract():
    from sim.timing.cycle_model import op_cycles

    cfg = tiny_compact(compact_bands=1)
    seq = np.array([8, 3, 1, 12, 2, 2, 9])
    assert band_cycles(seq, np.full(7, 8), cfg) == op_cycles(seq, 8, 8, 2)


def _random_decisions(rng, grid, groups, p=(0.3, 0.2, 0.5)):
    F, H, W = grid  # noqa: N806
    dec = rng.choice([COMPUTE, PARTIAL, REUSE], size=(F, H, W, len(groups)), p=p).astype(np.int8)
    for g, (_, _, axis) in enumerate(groups):  # a token without a neighbour COMPUTEs (golden rule)
        idx = [slice(None)] * 3
        idx["fhw".index(axis)] = 0
        dec[(*idx, g)] = COMPUTE
    return dec.reshape(F * H * W, len(groups))


@pytest.mark.parametrize("seed", range(4))
def test_compact_reference_is_bit_exact_to_golden(seed):
    rng = np.random.default_rng(seed)
    grid = (3, 3, 5)
    M = 45  # noqa: N806
    groups = [(0, 6, "w"), (6, 11, "f"), (11, 16, "h"), (16, 20, "f")]
    X = rng.integers(0, 256, size=(M, 20)).astype(np.uint8) if seed % 2 else \
        rng.integers(-128, 128, size=(M, 20)).astype(np.int8)  # noqa: N806
    W = rng.integers(-128, 128, size=(20, 7)).astype(np.int8)  # noqa: N806
    dec = _random_decisions(rng, grid, groups)
    want = apply_decisions(X, W, grid, groups, dec, 4)
    for rows, brows, fw in ((8, 4, 1), (8, 2, 3), (16, 16, 2), (4, 1, 2)):
        assert np.array_equal(compact_gemm(X, W, grid, groups, dec, rows, brows, fw), want)
        # the numba tiling equals the reference's band-tiles
        cfg = tiny_compact(array_rows=rows, array_cols=8, compact_bands=rows // brows,
                           drain_rows_per_cycle=min(2, rows))
        slots, grp, nc, npart = compact_tiles(dec, grid, groups, cfg, fw, 4)
        ref = band_tiles(dec, grid, [k1 - k0 for k0, k1, _ in groups], rows, brows, fw)
        assert list(slots) == [b.slots for b in ref] and list(grp) == [b.group for b in ref]
        assert list(nc) == [len(b.compute) for b in ref] and list(npart) == [len(b.partial) for b in ref]


def test_compact_actions_hand_counts():
    # the scattered-PARTIAL case above: 32 tokens, 1 group of 8 channels, N = 8 (one column block)
    cfg = tiny_compact()
    groups = [(0, 8, "f")]
    dec = np.full((32, 1), REUSE, np.int8)
    dec[:8] = COMPUTE
    for f, (a, b) in zip((1, 2, 3), ((1, 6), (0, 3), (5, 7)), strict=True):
        dec[8 * f + a] = dec[8 * f + b] = PARTIAL
    grid = (4, 1, 8)
    bt = compact_tiles(dec, grid, groups, cfg, 4, 4)
    td = TiledDecisions(dec, tile_stats(dec, grid, groups, 8, 4), True)
    a = op_actions("qkv", [td], grid, groups, 32, 8, 8, 4, cfg, 29)
    lock_in, lock_w = a["sram_input_read_bytes"], a["sram_weight_read_bytes"]
    lock_rows_x_ch, lock_ch = td.stats["rows_x_channels"], td.stats["channels"]
    c = compact_actions(dict(a), [td], [bt], groups, 8, cfg, grid)
    pb = partial_bytes(groups)
    assert pb == 3  # 8 x 255 x 128 = 261,120: 18 bits + sign -> 3 bytes
    # Cc = 64, Pc = 48 (token, channel) pairs; Cg = 8, Pg = 6, Rg = 18 (token, group) pairs
    assert c["mac8"] == 64 * 8 and c["mac4"] == 48 * 8
    # PE (hw/compact_pe.py): band-tiles [8 slots x 4 COMPUTE rows] x 2, [4 slots x 4 PARTIAL rows] (paired),
    # [4 slots x 2 PARTIAL rows] (paired too: half width): PARTIAL row-slots Ps = 16 + 8 = 24; a COMPUTE
    # row-slot adds into acc and accm, a PARTIAL one into acc, and every active row-slot uses the 18-bit halves'
    # adder; acc writes 2 per COMPUTE row-slot, 1 per PARTIAL one, + out per row (14) and out_m per COMPUTE row
    # (8), per column; 60 product-path mux bits per active row-slot; 39 lane bits per PE and slot over a band's
    # 4 rows, of which x_b and w_b (9 + 8) only in the two paired band-tiles (D24's rule)
    assert c["pe_add"] == 8 * (2 * 64 + 24) and c["pe_add_half"] == 8 * (64 + 24) and c["pe_add_corr"] == 0
    assert c["pe_reg_bits"] == cfg.acc_bits * (8 * (2 * 64 + 24) + (14 + 8) * 8)
    assert c["pe_mux_bits"] == 8 * (64 + 24) * 60
    assert c["pipe_reg_bits"] == (8 + 8 + 4 + 4) * 4 * 8 * (39 - 17) + (4 + 4) * 4 * 8 * 17
    assert c["combine_add"] == 8 * (32 + 6) == combine_adds(dec, 8)
    # neighbour state (D58): frame 0's 8 COMPUTEs all have a non-COMPUTE successor (frame 1 has no COMPUTE),
    # Cs = 8; of the 6 PARTIALs the 4 in frames 1 and 2 have a REUSE successor, Ps = 4 (frame 3 has none).
    # D127: as kaleido_combine (hw/combine.py) accesses its macros, words of a column's two partials (2 x 28 acc bits
    # = 7 bytes a column), whole: the staging macros written by each drained row and read back by its command (Cg +
    # Pg = 14; a REUSE command reads none); the state macro read by the PARTIAL and REUSE commands (Pg + Rg = 24; a
    # COMPUTE reads none), written where a successor reads it, not by a REUSE (Cs + Ps = 12). N = 8 columns.
    assert cfg.acc_bits == 28
    assert c["psum_staging_write_bytes"] == c["psum_staging_read_bytes"] == 14 * 8 * 7
    assert c["sram_psum_read_bytes"] == 24 * 8 * 7 and c["sram_psum_write_bytes"] == 12 * 8 * 7
    assert c["gather_mux_bits"] == (64 + 48) * 8 * 3  # log2(R = 8) = 3 mux levels per bit
    assert c["sram_input_read_bytes"] == lock_in - lock_rows_x_ch + 64 + 48
    # kaleido_caccel (D109): one weight buffer read by band turn into the bands' word registers: every band-tile's
    # weights (4 band-tiles x 8 channels x 8 columns = 256 bytes) through the registers; without the port's count
    # the buffer is read once per band-tile word (256 bytes), with it (D117) that count x min(C, N); written once
    assert c["sram_weight_read_bytes"] == lock_w - lock_ch * 8 + 4 * 8 * 8
    c2 = compact_actions(dict(a), [td], [bt], groups, 8, cfg, grid, port_weights=20)
    assert c2["sram_weight_read_bytes"] == lock_w - lock_ch * 8 + 20 * 8
    # D127: the port's reads as built, each a word of 2 B = 4 channels from both half-word banks of B x C = 16 bytes
    # (5 reads: 5 x 32 bytes), and each band-tile's ceil(8 / 4) = 2 words loaded whole into its word registers
    c3 = compact_actions(dict(a), [td], [bt], groups, 8, cfg, grid, port_weights=20, port_reads=5)
    assert c3["sram_weight_read_bytes"] == lock_w - lock_ch * 8 + 5 * 2 * 2 * 8
    assert c3["weight_word_reg_bits"] == 4 * 2 * (2 * 2 * 8) * 8
    assert c["weight_word_reg_bits"] == 8 * 4 * 8 * 8 and c["sram_weight_write_bytes"] == a["sram_weight_write_bytes"]
    assert c["sram_partial_read_bytes"] == 0 and c["dispatch_add8"] == 32
    # the delta PE on the same band-tiles (D68): one accumulate per active row-slot, the halves' adder on each,
    # the 13-bit sign correction on each PARTIAL row-slot; acc writes per active row-slot + out per row (14);
    # its product path has 42 mux bits per active row-slot (hi_x 5, hi_w 8, the high term's select 17, the sign
    # correction's operand 12; hw/compact_pe.py, D73)
    d = compact_actions(dict(a), [td], [bt], groups, 8, cfg, grid, delta_blocks=1)
    # the delta PE's multiplies (D92): the 64 COMPUTE pairs through both halves; the 48 PARTIAL pairs two per
    # paired slot, one on the 5-bit high half alone and one on the 4-bit low half alone, x N = 8
    assert d["mac8"] == 64 * 8 and d["mac5"] == 24 * 8 and d["mac4"] == 24 * 8
    e = action_energies(cfg, tech16 := load_tech(16))
    # D127: compact's partial-sum traffic at a column slice of kaleido_combine's own macros (area test below): the
    # state macro's 32 words x 2 x 28 bits, a staging macro's 256 words x 2 x 28 bits
    from sim.cost.energy import sram_access_pj

    assert e["sram_psum_read_bytes"][1] == pytest.approx(sram_access_pj(tech16, 32 * 56 / 8192) / 8)
    assert e["psum_staging_write_bytes"][1] == pytest.approx(sram_access_pj(tech16, 256 * 56 / 8192) / 8)
    assert e["mac5"][1] == pytest.approx(tech16.e("mult8") * 5 * 8 / 64)  # 5 x 8 of 8 x 8 partial-product bits
    assert e["mac8"][1] == pytest.approx(tech16.e("mult8") * (5 * 8 + 4 * 8) / 64)
    assert d["pe_add"] == d["pe_add_half"] == 8 * (64 + 24) and d["pe_add_corr"] == 8 * 24
    assert d["pe_reg_bits"] == cfg.acc_bits * (8 * (64 + 24) + 14 * 8)
    assert d["pipe_reg_bits"] == c["pipe_reg_bits"]
    assert d["pe_mux_bits"] == 8 * (64 + 24) * 42


def test_compact_area_rules():
    tech = load_tech(16)
    cfg = tiny_compact()
    lock = area_breakdown(load_config("tiny-8x8"), tech)["breakdown"]
    b = area_breakdown(cfg, tech)["breakdown"]
    um = 1e-6
    assert b["gather_network"] == pytest.approx(8 * 8 * 7 * tech.a("mux2_bit") * um)
    # combine unit: 4 C d = 64 adders, 2 acc-bit registers each (hw/combine.py: 2 C adders, 4 C registers per way)
    assert b["combine_unit"] == pytest.approx(64 * cfg.acc_bits * (tech.a("add_bit") + 2 * tech.a("reg_bit")) * um)
    # around the array (hw/compact_array.py, B = 2 bands of 4 rows, d = 2, C = 8, acc = 28, row lane 20 bits,
    # band lane 19, Σ_j (j + 1) = 36): row skew 2 x 20 x 10 = 400, band 0's lane 19 x 36 = 684, read strobes
    # 2 x (1 + 2) x 36 = 216, 2 sequencers x (2 + 3 + 2) = 14, band choice 3 x 24 = 72, de-skew
    # 2 x 2 x 28 x 28 = 3,136 + valid 2 x 7 = 14, row tags 2 x 3 x 9 = 54 -> 4,590; band 1's lane 684, and the
    # weight words of kaleido_caccel's one weight buffer (D109): 3 words of 2 B = 4 bytes per band and column,
    # 3 x 4 x 8 bits x 8 columns x 2 bands = 1,536; no weight copy
    assert cfg.acc_bits == 28
    assert b["array_io_skew"] == pytest.approx(4590 * tech.a("reg_bit") * um)
    assert b["band_weight_lanes"] == pytest.approx((684 + 1536) * tech.a("reg_bit") * um)
    assert b["ctrl_weight_copies"] == 0
    assert area_breakdown(cfg, tech)["dense_total_mm2"] == pytest.approx(
        area_breakdown(load_config("tiny-8x8"), tech)["dense_total_mm2"])  # the dense die does not change
    # the partial-sum SRAM as kaleido_combine builds it (D127): words of 2 C acc = 448 bits; W = 2 ways (d = 2 divides
    # G = 8), a state macro of R G / W = 32 words each; the rest, 64 KiB less 64 state words, over d W = 4 staging
    # macros: 495,616 // (4 x 448) = 276 words, a power of two: 256 each
    assert b["sram_psum"] == pytest.approx((2 * 32 + 4 * 256) * 448 * tech.a("sram_bit") * um)
    assert b["sram_partial"] == 0
    assert "sram_psum" not in lock or lock["sram_psum"] == 0
    assert b["array_pe_kaleido_extra"] < lock["array_pe_kaleido_extra"]  # no per-group partial registers


def test_delta_combine_area_rule():
    # D79: the delta combine unit in ways of 2 C of the 4 C d = 64 lanes (4 ways), each as hw/delta_combine.py
    # builds it: 3 C = 24 acc-bit adders (D accumulate, S_a, the class sum Y) and 5 C = 40 acc-bit registers
    tech = load_tech(16)
    cfg = tiny_compact().model_copy(update={"organisation": "delta"})
    b = area_breakdown(cfg, tech)["breakdown"]
    um = 1e-6
    assert b["combine_unit"] == pytest.approx(4 * 8 * cfg.acc_bits * (3 * tech.a("add_bit") + 5 * tech.a("reg_bit")) * um)


def test_compact_cannot_be_built_without_psum(tmp_path):
    tr = small_trace(tmp_path / "t.npz")
    out = tmp_path / "r.json"
    res = kaleido("simulate", str(tr), "--config", "tiny-8x8", "--organisation", "compact", "--json", str(out))
    assert_one_line_error(res, "compact", "psum_sram_kib = 0", *ORGANISATIONS)
    assert not out.exists()


def test_compact_psum_too_small_for_an_op_is_a_clean_error(tmp_path):
    d = load_config("tiny-8x8").model_dump() | {"organisation": "compact", "psum_sram_kib": 1, "name": "tiny-psum1"}
    toml = tmp_path / "c.toml"
    toml.write_text("\n".join(f"{k} = {json.dumps(v)}" for k, v in d.items() if v is not None) + "\n")
    tr = small_trace(tmp_path / "t.npz")
    out = tmp_path / "r.json"
    res = kaleido("simulate", str(tr), "--config", str(toml), "--json", str(out))
    assert_one_line_error(res, "compact", "psum_sram_kib = 1")
    assert not out.exists()


def test_compact_end_to_end_cycles_and_values(tmp_path):
    # small_trace's qkv op (grid 2x2x4: 16 tokens, K = 16 in 2 groups of 8, N = 12) times as kaleido_caccel runs
    # its band-tiles (D117: `sim.timing.compact_accel.caccel_cycles`, the rule the RTL equals cycle for cycle, less
    # the start cycle), its array's list schedule plus the queues, the gather and the weight port; the JSON names
    # the organisation
    from types import SimpleNamespace

    from algo.reuse.golden import decide
    from algo.trace import load_trace
    from sim.engines.model import simulate_trace
    from sim.timing.compact import band_rows, band_tile_tokens
    from sim.timing.compact_accel import caccel_cycles, queue_steps

    tr = load_trace(small_trace(tmp_path / "t.npz"))
    cfg = tiny_compact()
    res = simulate_trace(tr, cfg)
    assert res["organisation"] == "compact"
    op = tr.ops[0]
    groups = [g.as_tuple() for g in op.groups]
    dec = decide(op.X[0], tr.grid, groups, op.theta, 4)[0]
    slots, grp, nc, npart = compact_tiles(dec, tr.grid, groups, cfg, 2, 4)
    cyc, _ = band_cycles(np.tile(slots, 2), np.tile(nc + npart, 2), cfg)  # N = 12: two column blocks
    toks, off = band_tile_tokens(dec.astype(np.int8), 2, 8, 8, band_rows(cfg), 2)
    tiles = [SimpleNamespace(group=int(g), cb=cb, tokens=toks[off[i]:off[i + 1]])
             for cb in range(2) for i, g in enumerate(grp)]
    bop = SimpleNamespace(s_seq=np.tile(slots, 2), rows=np.tile(nc + npart, 2), tiles=tiles)
    # with its queues (`hw.rtl` emits them): each descriptor no earlier than kaleido_dqueue emits it
    queue = queue_steps(dec, tr.grid, cfg, 2, 2)
    port = caccel_cycles(bop, groups, cfg, 2 * cfg.compact_bands, 32, queue) - 1
    assert res["per_op"][0]["cycles"] == port >= caccel_cycles(bop, groups, cfg, 2 * cfg.compact_bands, 32) - 1 > cyc
    assert np.array_equal(compact_gemm(op.X[0], op.W[0], tr.grid, groups, dec, 8, 4, 2),
                          apply_decisions(op.X[0], op.W[0], tr.grid, groups, dec, 4))


def test_organisations_figure_and_floor(tmp_path):
    from sim.report.organisations import energy_floor, plot

    rows = [{"region": reg, "reuse": r, "organisation": org, "total_speedup": s, "ideal": 1 / (1 - r) - 0.1,
             "energy_vs_dense": 1.0, "area_mm2": a, "dense_area_mm2": 40.0}
            for reg in ("1x1", "8x8") for r in (0.3, 0.8)
            for org, s, a in (("lockstep", 1.0, 80.0), ("compact", 2.0 + r, 54.0))]
    paths = plot(rows, tmp_path / "figs")
    assert all(p.is_file() and p.stat().st_size > 1000 for p in paths)
    res = {"dense_energy_breakdown_pj": {"dram": 2.0, "vector_unit": 1.0, "sram_score": 3.0, "sram_output": 4.0,
                                         "array_macs": 100.0}}
    assert energy_floor(res) == 10.0  # the shared units only, at dense's energy


def test_ideal_energy_by_hand():
    """The ideal design keeps dense's shared units and scales everything else by the op's useful work."""
    from sim.report.organisations import ideal_energy, summary

    def op(shared, rest, useful, dense_macs, e):
        return {"dense_energy_pj": shared + rest, "energy_pj": e, "useful_macs": useful, "dense_macs": dense_macs,
                "dense_energy_breakdown_pj": {"dram": shared / 2, "sram_score": shared / 2, "array_macs": rest}}
    # op 1: 40 pJ shared + 60 other at 1/4 of the work -> 40 + 15; op 2: no MACs, dense's 30 pJ kept
    ops = [op(40.0, 60.0, 25, 100, 80.0), op(10.0, 20.0, 0, 0, 30.0)]
    res = {"per_op": ops, "dense_energy_pj": 130.0, "energy_pj": 110.0, "organisation": "compact",
           "total_speedup": 1.0, "speedup": 1.0, "dense_energy_breakdown_pj": {"dram": 25.0, "array_macs": 80.0},
           "energy_model": {"area_mm2": 1.0, "dense_area_mm2": 1.0}}
    for o in ops:
        o.update(total_speedup=1.0, speedup=1.0, name="x")
    assert ideal_energy(res) == 55.0 + 30.0
    assert ideal_energy(ops[0]) == 55.0
    s = summary(res)
    assert s["ideal_energy_vs_dense"] == 85.0 / 130.0
    assert s["ideal_saving_share"] == (130.0 - 110.0) / (130.0 - 85.0)


def test_successor_reads_and_psum_state_hand_counts():
    from sim.cost.compact_actions import successor_reads
    # grid (2, 2, 2), 8 tokens; group 0 temporal, group 1 on w, group 2 on h
    groups = [(0, 2, "f"), (2, 4, "w"), (4, 6, "h")]
    dec = np.full((8, 3), COMPUTE, np.int8)
    dec[4, 0] = REUSE   # frame 1, (0, 0): token 0's temporal successor
    dec[1, 1] = PARTIAL  # frame 0, (0, 1): token 0's w successor
    dec[7, 2] = REUSE   # frame 1, (1, 1): token 5's h successor
    s = successor_reads(dec, (2, 2, 2), groups)
    want = np.zeros((8, 3), bool)
    want[0, 0] = want[0, 1] = want[5, 2] = True
    assert np.array_equal(s, want)
    # all COMPUTE, one temporal group: no state written or read, each token stages its total only
    cfg = tiny_compact()
    g1 = [(0, 8, "f")]
    grid = (4, 1, 8)
    dec = np.full((32, 1), COMPUTE, np.int8)
    bt = compact_tiles(dec, grid, g1, cfg, 4, 4)
    td = TiledDecisions(dec, tile_stats(dec, grid, g1, 8, 4), True)
    a = op_actions("qkv", [td], grid, g1, 32, 8, 8, 4, cfg, 29)
    c = compact_actions(dict(a), [td], [bt], g1, 8, cfg, grid)
    # 32 rows staged and read back by their 32 COMPUTE commands, which read no state and write none (D127: 2 x 28
    # acc bits = 7 bytes a column, N = 8)
    assert c["psum_staging_write_bytes"] == c["psum_staging_read_bytes"] == 32 * 8 * 7
    assert c["sram_psum_read_bytes"] == c["sram_psum_write_bytes"] == 0


def test_compact_weight_reads_are_the_ports():
    """The compact weight SRAM's reads as `kaleido_caccel` makes them (D109), counted per op through the trace model
    (D117). 8 tokens of one frame (all COMPUTE, no neighbour), one group of K = 32, N = 16 (two column blocks): per
    column block two band-tiles of 4 rows x 32 slots, 8 words of 2 B = 4 channels each."""
    from types import SimpleNamespace

    from algo.trace import Group, OpRecord, Trace, pack_decisions
    from sim.engines.model import simulate_trace
    from sim.timing.compact_accel import port_schedule, queue_steps

    grid, K, N = (1, 2, 4), 32, 16  # noqa: N806
    dec = np.zeros((8, 1), dtype=np.int8)
    op = OpRecord("o_proj", 0, 0, None, None, [Group(0, K, "f")], (0.0, 0.0), dims=(1, 8, K, N),
                  decisions=pack_decisions(dec)[None, None], thetas=((0.0, 0.0),))
    cfg = tiny_compact()
    res = simulate_trace(Trace(grid=grid, ops=[op], model="test", size="test", weights="none"), cfg)
    a = res["per_op"][0]["actions"]
    # the port on these band-tiles (tokens 0-3 and 4-7, one gather round and one X word each, staging entries 2 B =
    # 4), with the queues as `hw.rtl` builds it: kaleido_dqueue scans 4 positions a step, so band-tiles 0 and 1 are
    # emitted at steps (cycles) 0 and 1 and gathered at 1 (the cycle after) and 3 (the gather busy 1 + 1 round x 1
    # word); band-tile 0's word 0 is read at band 0's first (even) turn once its fields are held (3 + 1 = 4), in its
    # register at 6, its operands at 1 + 1 + 3 = 5: first slot 6; band-tile 1's at band 1's turn 5, in at 7 = its
    # operands' 3 + 4: first slot 7. From the host's list instead (no queues): gathers 0 and 2, first slots 4 and 7
    tiles = [SimpleNamespace(group=0, cb=cb, tokens=np.arange(4) + 4 * i) for cb in range(2) for i in range(2)]
    bop = SimpleNamespace(s_seq=np.full(4, 32), rows=np.full(4, 4), tiles=tiles)
    ref = port_schedule(bop, [(0, K, "f")], cfg, 4, 32, queue_steps(dec, grid, cfg, 1, 2))
    assert list(ref["gather"][:2]) == [1, 3] and list(ref["first"][:2]) == [6, 7]
    assert list(port_schedule(bop, [(0, K, "f")], cfg, 4, 32)["first"][:2]) == [4, 7]
    # the reads are `port_schedule`'s (the rule the RTL is checked against cycle by cycle, tests/test_rtl_caccel.py),
    # between each of the 16 distinct words once (64 weights) and once per band-tile word (128): x 8 bytes a column
    assert 64 < ref["weights"] < 128
    assert a["sram_weight_read_bytes"] == ref["weights"] * 8
    assert a["weight_word_reg_bits"] == 8 * 4 * 32 * 8
