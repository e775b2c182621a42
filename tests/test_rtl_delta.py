"""The delta organisation's RTL (hw/compact_pe.py, hw/compact_array.py and hw/delta_combine.py on a delta
config: ``kaleido_dpe``, ``kaleido_dtop``, ``kaleido_dcombine``) under Amaranth's simulator, docs/decisions.md D73.

Shapes: tiny-8x8 as the delta organisation with 2 bands (B = d), 4 bands (B > d, two bands per port) and
2 bands on 4 ports (B < d), and 4 x 8 with 2 bands and one port. Seeded random band-tile workloads (every
decision mix incl. paired half-width band-tiles and chunk flushes mixing COMPUTE and PARTIAL rows,
scattered and frame-coherent decisions, int8 and uint8, every group on ``f``, ``w`` or ``h``, N = 11 and
5 against C = 8 with the delta issue order of two column blocks, odd group widths):

- every drained word equals the row's difference sum computed from X, X_eff and W apart from the RTL
  (`tests.rtl.compact_bench`), and the drained rows added up as the delta combine rule says
  (``Y[t] = Y[nb] + D[t]``) equal `algo.reuse.golden.apply_decisions` and
  `sim.timing.delta_reference.delta_gemm` bit for bit;
- every band-tile runs on the band and its last slot issues at the cycle `sim.timing.compact.band_schedule`
  gives over the delta issue order, and the op's last row leaves in the cycle `sim.timing.compact.band_cycles`
  ends (the timing `sim.engines.model` uses for a delta op);
- the drained rows through `hw.delta_combine.DeltaCombine` (D accumulate, then Y = Y[nb] + D) give Y bit
  for bit, a token's row 2 cycles after its output command;
- the PE's PAIRED slot against plain integer products: every (difference, weight) pair of each multiplier
  half and every pair of differences (`sim.timing.delta.paired_product`'s sign correction in RTL).
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth.sim import Simulator

from algo.reuse.golden import AXIS_INDEX, COMPUTE, PARTIAL, REUSE, apply_decisions
from hw.config import AcceleratorConfig, load_config
from hw.delta_combine import STATE_BITS, delta_combine_sizes
from hw.pe import PEMode
from sim.timing.compact import band_cycles
from sim.timing.delta import output_bytes, plan, state_need_bytes
from sim.timing.delta_reference import delta_gemm
from tests.rtl.cases import make_case
from tests.rtl.combine_rules import delta_y
from tests.rtl.compact_bench import build_runs, check_emission, pack, run_top
from tests.rtl.delta_bench import dcombine_program, run_dcombine


def delta_cfg(rows=8, cols=8, bands=2, ports=2, state_kib=0) -> AcceleratorConfig:
    d = load_config("tiny-8x8").model_dump() | {
        "name": f"delta-{rows}x{cols}-b{bands}-d{ports}", "organisation": "delta", "psum_sram_kib": 64,
        "compact_bands": bands, "array_rows": rows, "array_cols": cols, "drain_rows_per_cycle": ports,
        "state_sram_kib": state_kib}
    return AcceleratorConfig.model_validate(d)


def _case(seed, grid, K, N, sizes, x_unsigned, axis, fw, s, coherent=False):  # noqa: N803
    """A seeded case (`tests.rtl.cases.make_case`) with every group on ``axis`` (delta-eligible); a token without
    a neighbour COMPUTEs. ``coherent``: each (frame, group) takes one decision for all tokens. ``fw``: chunk
    frames; ``s``: column blocks per group (`sim.timing.delta.plan`)."""
    c = make_case(f"delta{seed}", 300 + seed, grid, K, N, sizes, x_unsigned=x_unsigned)
    if coherent:
        F, H, W = grid  # noqa: N806
        c.decisions = np.repeat(c.decisions.reshape(F, H * W, -1)[:, :1], H * W, axis=1).reshape(F * H * W, -1)
    c.groups = [(k0, k1, axis) for k0, k1, _ in c.groups]
    idx = np.unravel_index(np.arange(c.X.shape[0]), grid)
    c.decisions[idx[AXIS_INDEX[axis]] == 0] = COMPUTE
    c.decisions[[4, 5]] = COMPUTE  # two direct tokens (every group COMPUTEs) amid carried ones
    return c, fw, s


CASES = [
    # 6 positions (a partial pool at R = 8), N = 11: two column blocks issued together (s = 2), chunks of 2 frames
    _case(1, (3, 2, 3), 10, 11, [3, 4, 3], False, "f", 2, 2),
    # uint8 operands (differences -255..255), w groups, odd widths, one column block at a time
    _case(2, (3, 2, 4), 12, 11, [4, 5, 3], True, "w", None, 1),
    # coherent decisions (a whole frame agrees per group), int8, N < C
    _case(3, (4, 2, 4), 8, 5, [4, 4], False, "f", None, 1, coherent=True),
    # h groups, uint8, one group
    _case(4, (2, 3, 2), 5, 8, [5], True, "h", 1, 1),
]

SHAPES = {"8x8-B2-d2": (8, 8, 2, 2), "8x8-B4-d2": (8, 8, 4, 2), "4x8-B2-d1": (4, 8, 2, 1), "8x8-B2-d4": (8, 8, 2, 4)}
RUNS = [(s, c) for s in list(SHAPES)[:3] for c in range(len(CASES))] + [("8x8-B2-d4", 0), ("8x8-B2-d4", 1)]


def combine_rule(case, runs) -> np.ndarray:
    """``Y`` from the drained rows by the delta combine rule per axis class (`tests.rtl.combine_rules.delta_y`)."""
    rows = ((t, r.group, r.n0, got) for r in runs for t, got in zip(r.tokens, r.drained, strict=True))
    return delta_y(case.decisions, case.grid, case.groups, case.W.shape[1], rows)


def check_dcombine(case, runs, cfg, want_y, fused=False) -> dict:
    """The drained rows of ``runs`` through `hw.delta_combine.DeltaCombine` (`tests.rtl.delta_bench`): every
    output row equals ``want_y``'s (token, column block), 2 cycles after its token's last command; returns the
    enables the bench counted."""
    acc, out = dcombine_program(case, runs, cfg, fused)
    got, at, counts = run_dcombine(cfg, acc, out)
    C, N = cfg.array_cols, case.W.shape[1]  # noqa: N806
    last = [(k, c["_token"], c["_cb"]) for k, c in enumerate(out) if c["c_last"]]
    assert len(got) == len(last)
    for row, (_k, t, cb) in zip(got, last, strict=True):
        n = min(C, N - cb * C)
        assert np.array_equal(row[:n], want_y[t, cb * C:cb * C + n]), (t, cb)
    assert at == [k + 2 for k, _t, _cb in last]
    return counts


@pytest.mark.parametrize(("shape", "ci"), [(SHAPES[s], c) for s, c in RUNS], ids=[f"{s}-{c}" for s, c in RUNS])
def test_delta_top_values_and_band_tile_cycles(shape, ci):
    case, fw, s = CASES[ci]
    cfg = delta_cfg(*shape)
    runs = build_runs(case, cfg, fw, s)
    end = run_top(cfg, runs, case.x_unsigned)
    for r in runs:
        assert np.array_equal(np.array(r.drained), r.want), f"band-tile of group {r.group} at n0 = {r.n0}"
    assert [r.got_band for r in runs] == [r.band for r in runs]
    assert [r.got_last for r in runs] == [r.last for r in runs]
    want_y = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    y = combine_rule(case, runs)
    assert np.array_equal(y, want_y)
    F, H, W = case.grid  # noqa: N806
    ref = delta_gemm(case.X, case.W, case.grid, case.groups, case.decisions, cfg.array_rows,
                     cfg.array_rows // cfg.compact_bands, fw or F)
    assert np.array_equal(ref, want_y)
    cycles, _ = band_cycles(np.array([len(r.slots) for r in runs]), np.array([len(r.tokens) for r in runs]), cfg)
    assert end + 1 == cycles
    if shape == (8, 8, 2, 2):
        check_dcombine(case, runs, cfg, want_y)


def _qk_case(seed, grid, N, groups, x_unsigned, coherent=False):  # noqa: N803
    """A seeded qk-like case over several axis classes: groups ``(k0, k1, axis)``; an ``f`` group's decisions as
    `tests.rtl.cases.make_case` draws them (frame 0 COMPUTE), a ``w``/``h`` group's drawn for every frame;
    ``coherent``: each (frame, group) takes one decision; a token without a neighbour along a group's axis
    COMPUTEs it; token 5 COMPUTEs every group (direct in every class)."""
    c = make_case(f"dqk{seed}", 400 + seed, grid, groups[-1][1], N, [k1 - k0 for k0, k1, _ in groups], x_unsigned)
    rng = np.random.default_rng(500 + seed)
    F, H, W = grid  # noqa: N806
    M = F * H * W  # noqa: N806
    c.groups = list(groups)
    idx = np.unravel_index(np.arange(M), grid)
    for g, (_k0, _k1, ax) in enumerate(groups):
        if ax != "f":
            c.decisions[:, g] = rng.choice([COMPUTE, PARTIAL, REUSE], size=M, p=[0.3, 0.35, 0.35])
        if coherent:
            c.decisions[:, g] = np.repeat(c.decisions[::H * W, g], H * W)
        c.decisions[idx[AXIS_INDEX[ax]] == 0, g] = COMPUTE
    c.decisions[5] = COMPUTE
    return c


def _hand_case():
    """grid (2, 1, 12), R = 8: pools of positions 0-7 and 8-11 of one image row; t group on w, h group on f.
    w group: COMPUTE at w = 0, else REUSE (frame 0) / PARTIAL (frame 1); f group: frame 0 COMPUTE, frame 1 REUSE."""
    c = make_case("dqk-hand", 399, (2, 1, 12), 6, 11, [3, 3])
    c.groups = [(0, 3, "w"), (3, 6, "f")]
    w = np.tile(np.arange(12), 2)
    c.decisions[:12, 0] = np.where(w[:12] == 0, COMPUTE, REUSE)
    c.decisions[12:, 0] = np.where(w[12:] == 0, COMPUTE, PARTIAL)
    c.decisions[:12, 1], c.decisions[12:, 1] = COMPUTE, REUSE
    return c


QK_CASES = {
    "hand": _hand_case(),
    # two classes as Wan2.1's qk (t on w; h and w on f), pools splitting image rows (H W = 10 > R = 8), N = 11
    "qk-int8": _qk_case(1, (3, 2, 5), 11, [(0, 3, "w"), (3, 6, "f"), (6, 9, "f")], False),
    # uint8 operands, odd widths, coherent decisions, N < C
    "qk-uint8-coherent": _qk_case(6, (2, 2, 6), 5, [(0, 4, "w"), (4, 7, "f"), (7, 9, "f")], True, coherent=True),
    # three axis classes (h, w, f)
    "three-axes": _qk_case(3, (2, 3, 4), 11, [(0, 3, "h"), (3, 5, "w"), (5, 8, "f")], True),
}


def model_counts(case, cfg, fused, out_lanes=1):
    """The model's counts of the combine's carried traffic (`sim.cost.compact_actions`' delta rules) in values:
    ``{"state_read", "state_write", "psum_carried_read", "psum_carried_write", "lane"}`` (the partial-sum SRAM's
    ``D`` traffic, one read and one write per difference row, taken out); ``out_lanes``: the combine's output
    lanes V (the lane register written once per step of V positions, `sim.cost.compact_actions.lane_writes`)."""
    import collections

    from sim.cost.compact_actions import _delta_terms

    a = collections.defaultdict(int)
    N = case.W.shape[1]  # noqa: N806
    _delta_terms(a, case.decisions, case.groups, N, 0, 0, 1, -(-N // cfg.array_cols), case.grid, cfg.array_rows,
                 cfg.acc_bits, state_buffer=fused, out_lanes=out_lanes)
    # bytes a value: the built word's (D127): acc bits in the partial-sum SRAM, STATE_BITS in the state SRAM
    diffs = int((case.decisions != REUSE).sum())

    def values(key, bits):
        n = a[key] * 8 / bits
        assert n == round(n), (key, n)
        return round(n)
    return {"state_read": values("sram_state_read_bytes", STATE_BITS),
            "state_write": values("sram_state_write_bytes", STATE_BITS),
            "psum_carried_read": values("sram_psum_read_bytes", cfg.acc_bits) - diffs * N,
            "psum_carried_write": values("sram_psum_write_bytes", cfg.acc_bits) - diffs * N,
            "lane": a["combine_reg_bits"] // cfg.acc_bits}


@pytest.mark.parametrize("name", list(QK_CASES))
def test_delta_axis_classes_through_array_and_combine(name):
    # D79: qk-like band-tiles over two and three axis classes through kaleido_dtop (one frame per chunk, the
    # fused score op's, two column blocks issued together), then kaleido_dcombine with the carried values in
    # the partial-sum state buffer and in the state SRAM: Y bit for bit against the golden model and
    # delta_gemm, each band-tile's band and last slot and the op's end against the model, and the combine's
    # state-SRAM, state-buffer and lane-register accesses against the model's counts.
    case = QK_CASES[name]
    cfg = delta_cfg(state_kib=2)  # 85 words of 24 bits per column bank
    K, N = case.W.shape  # noqa: N806
    fw, s = plan(cfg, case.grid[0], K, N, fused=True, groups=case.groups)  # the model's chunk and column-block group
    assert fw == 1 and s == -(-N // 8)
    runs = build_runs(case, cfg, fw, s)
    end = run_top(cfg, runs, case.x_unsigned)
    for r in runs:
        assert np.array_equal(np.array(r.drained), r.want), f"band-tile of group {r.group} at n0 = {r.n0}"
    assert [(r.got_band, r.got_last) for r in runs] == [(r.band, r.last) for r in runs]
    cycles, _ = band_cycles(np.array([len(r.slots) for r in runs]), np.array([len(r.tokens) for r in runs]), cfg)
    assert end + 1 == cycles
    want_y = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    assert np.array_equal(combine_rule(case, runs), want_y)
    assert np.array_equal(delta_gemm(case.X, case.W, case.grid, case.groups, case.decisions, 8, 4, fw), want_y)
    n_cb = -(-N // 8)
    for fused in (False, True):
        got = check_dcombine(case, runs, cfg, want_y, fused)
        want = model_counts(case, cfg, fused)
        assert got["st_re"] == want["state_read"] and got["st_we"] == want["state_write"], fused
        assert got["ps_re"] * N == want["psum_carried_read"] * n_cb, fused  # words of C columns against values
        assert got["ps_we"] * N == want["psum_carried_write"] * n_cb, fused
        assert got["lane_we"] == want["lane"], fused
        if name == "hand":
            # w class: p = 8 reads across the pool boundary (2 frames), p = 7 writes for it; the other 10 positions
            # with w >= 1 per frame read the lane register, written by their left neighbours. f class: frame 1's 12
            # tokens read, frame 0's write. 11 columns each.
            assert (got["st_re"], got["st_we"]) == ((22 + 132, 22 + 132) if fused else (0, 0))
            assert (got["ps_re"], got["ps_we"]) == ((0, 0) if fused else (14 * 2, 14 * 2))
            assert got["lane_we"] == 20 * 11


@pytest.mark.parametrize("macro_bits", [None, 1 << 14], ids=["one-macro", "banked"])
def test_dcombine_forwarding_and_both_buffers(macro_bits, monkeypatch):
    # repeated D addresses back to back (forwarded), both D buffers, a Y written and read the next cycle; with
    # macros of 2^14 bits at most, buffers of 12 banks of 64 words (addresses in banks 0, 1, 2 and 3)
    import hw.delta_combine

    if macro_bits:
        monkeypatch.setattr(hw.delta_combine, "MACRO_MAX_BITS", macro_bits)
    cfg = delta_cfg()
    sz = delta_combine_sizes(cfg)
    assert (sz["banks"], sz["bank_depth"]) == ((12, 64) if macro_bits else (1, 780))  # 780 words of 224 bits
    C, ab = cfg.array_cols, cfg.acc_bits  # noqa: N806
    rng = np.random.default_rng(7)
    rows = rng.integers(-(1 << 20), 1 << 20, size=(12, C))
    addrs = [3, 3, 3, 70, 3, 70, 70, 130, 131, 130, 130, 3]
    acc, want_d = [], {}
    for a, row in zip(addrs, rows, strict=True):
        acc.append({"a_first": int(a not in want_d), "a_addr": a, "a_data": pack(row, ab)})
        want_d[a] = want_d.get(a, 0) + row
    # Y chain: word 2 written then read at once (forwarded), then read again from the macro
    one = {"c_first": 1, "c_last": 1, "c_reg": 0, "c_sram": 0, "c_hold": 0, "c_cols": C}  # one class, no lane register
    out = [one | c for c in (
        {"c_direct": 1, "c_has": 1, "c_daddr": 3, "c_raddr": 0, "c_waddr": 200, "c_keep": 1},
        {"c_direct": 0, "c_has": 1, "c_daddr": 70, "c_raddr": 200, "c_waddr": 200, "c_keep": 1},
        {"c_direct": 0, "c_has": 0, "c_daddr": 0, "c_raddr": 200, "c_waddr": 4, "c_keep": 1},
        {"c_direct": 0, "c_has": 1, "c_daddr": 130, "c_raddr": 200, "c_waddr": 5, "c_keep": 0},
        {"c_direct": 0, "c_has": 1, "c_daddr": 131, "c_raddr": 4, "c_waddr": 5, "c_keep": 0})]
    y3 = want_d[3]
    want = [y3, y3 + want_d[70], y3 + want_d[70], y3 + want_d[70] + want_d[130], y3 + want_d[70] + want_d[131]]
    for sel in (0, 1):
        got, at, _ = run_dcombine(cfg, acc, out, sel)
        assert np.array_equal(got, np.array(want)), sel
        assert at == [2, 3, 4, 5, 6]


def test_state_sram_words_at_their_bounds():
    # the state SRAM stores STATE_BITS = 24 bits of each value and sign-extends them: a direct S at the bounds
    # +-(2^23 - 1) and -2^23 written to word 5, then (after a command that writes elsewhere, so no forwarding) read
    # back as S[nb] by a REUSE-only command (Y = S[nb]); and a value past the bound is what the words cannot hold
    cfg = delta_cfg(state_kib=2)
    C, ab = cfg.array_cols, cfg.acc_bits  # noqa: N806
    top = (1 << (STATE_BITS - 1)) - 1
    row = np.array([top, -top - 1, -top, 1, -1, 0, 12345, -54321])
    acc = [{"a_first": 1, "a_addr": 0, "a_data": pack(row, ab)}]
    one = {"c_first": 1, "c_last": 1, "c_reg": 0, "c_sram": 1, "c_hold": 0, "c_cols": C, "c_daddr": 0}
    out = [one | {"c_direct": 1, "c_has": 1, "c_raddr": 0, "c_waddr": 5, "c_keep": 1},
           one | {"c_direct": 1, "c_has": 1, "c_raddr": 0, "c_waddr": 9, "c_keep": 0},
           one | {"c_direct": 0, "c_has": 0, "c_raddr": 5, "c_waddr": 6, "c_keep": 0}]
    got, at, counts = run_dcombine(cfg, acc, out)
    assert np.array_equal(got, np.array([row, row, row])) and at == [2, 3, 4]
    assert (counts["st_we"], counts["st_re"], counts["ps_re"], counts["ps_we"]) == (C, C, 0, 0)
    acc[0]["a_data"] = pack(row + (row == top), ab)  # column 0 = 2^23: one past the bound
    got, _, _ = run_dcombine(cfg, acc, out)
    assert got[2, 0] == -(1 << (STATE_BITS - 1)) and np.array_equal(got[2, 1:], row[1:])


def test_delta_combine_sizes_refuse_small_sram():
    cfg = delta_cfg(32, 32).model_copy(update={"psum_sram_kib": 1})  # 2 words of 1,024 bits per macro
    with pytest.raises(ValueError, match="fewer than array_rows"):
        delta_combine_sizes(cfg)


def test_state_sram_sizes():
    # STATE_BITS: 256 x 255 x 128 = 8,355,840 < 2^23, 24 bits with the sign; balanced preset: 14,336 KiB over 128
    # column banks of 24-bit words -> 38,229 words per bank, one macro each (917,496 bits <= 1 Mbit)
    from hw.delta_combine import STATE_BITS, state_sram_sizes

    assert STATE_BITS == 8 * output_bytes(256) == 24
    st = state_sram_sizes(load_config("kaleido-16nm-128x128-balanced"))
    assert st == {"word": 24, "depth": 14336 * 8192 // (128 * 24), "bank_depth": 38229, "banks": 1}
    # Wan2.1's fused qk at 480p (sim.timing.delta.state_need_bytes: the f class R x N, the w class F x N values of
    # 3 bytes) fits each bank: (128 + 21) rows x ceil(32,760 / 128) = 256 column blocks = 38,144 words
    qk = [(0, 44, "w"), (44, 86, "f"), (86, 128, "f")]
    cfg = load_config("kaleido-16nm-128x128-balanced")
    assert state_need_bytes(cfg, (21, 30, 52), 128, 32760, qk) == (128 + 21) * 32760 * 3
    assert (128 + 21) * -(-32760 // 128) == 38144 <= st["depth"]
    assert state_sram_sizes(delta_cfg()) is None  # no state SRAM: no macros, no c_sram store
    with pytest.raises(ValueError, match="fewer than array_rows"):
        state_sram_sizes(delta_cfg(32, 32, state_kib=1))  # 8,192 bits over 32 banks of 24 bits: 10 words < 32


def run_pe(cfg, slots):
    """One `hw.compact_pe.CompactPE` (delta) fed one single-slot band-tile per cycle ``(mode, x_a, x_b, w_a, w_b)``;
    returns each slot's ``out``."""
    from hw.compact_pe import CompactPE

    dut = CompactPE(cfg)
    got = []

    async def bench(ctx):
        ctx.set(dut.i_valid, 1)
        ctx.set(dut.i_first, 1)
        ctx.set(dut.i_last, 1)
        for mode, xa, xb, wa, wb in slots:
            for k, v in (("mode", mode), ("x_a", xa), ("x_b", xb), ("w_a", wa), ("w_b", wb)):
                ctx.set(getattr(dut, "i_" + k), v)
            await ctx.tick()
            got.append(ctx.get(dut.out))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return np.array(got, dtype=np.int64)


def test_delta_pe_paired_and_full_products():
    # PAIRED: cycle i takes da = i mod 31 - 15 with w_a = i // 31 - 128 (every pair of the low half and its
    # sign correction), db = (da + 7 (i // 31)) mod 31 - 15 with w_b = w_a (every pair of the signed high
    # half) -- so every (da, db) pair too; expected: plain integer products. COMPUTE and PARTIAL: every 9-bit
    # difference against 16 weights incl. -128 and 127.
    cfg = delta_cfg()
    i = np.arange(31 * 256)
    da, wa = i % 31 - 15, i // 31 - 128
    db = (i % 31 + 7 * (i // 31)) % 31 - 15
    slots = [(int(PEMode.PAIRED), int(a), int(b), int(w), int(w)) for a, b, w in zip(da, db, wa, strict=True)]
    x = np.arange(-255, 256)
    ws = [-128, -127, -64, -16, -15, -2, -1, 0, 1, 2, 15, 16, 63, 100, 126, 127]
    full = [(int(md), int(v), 0, w, 0) for w in ws for v in x for md in (PEMode.COMPUTE,)]
    full += [(int(PEMode.PARTIAL), int(v), 0, w, 0) for w in ws for v in range(-15, 16)]
    got = run_pe(cfg, slots + full)
    want = [a * w + b * w for a, b, w in zip(da, db, wa, strict=True)] + [xa * w for _m, xa, _xb, w, _wb in full]
    assert np.array_equal(got, np.array(want, dtype=np.int64))
    assert {(int(a), int(b)) for a, b in zip(da, db, strict=True)} == {(a, b) for a in range(-15, 16)
                                                                      for b in range(-15, 16)}


def test_delta_pe_counts_equal_yosys():
    # sim.cost.area.delta_pe_extra + the plain PE against Yosys's coarse cells of kaleido_dpe
    from sim.cost.area import synth_pe_cells

    s = synth_pe_cells(delta_cfg())
    for k in ("adders", "register_bits", "mux_bits"):
        assert s["compare"][k]["yosys"] == s["compare"][k]["model"], k
    assert s["cells"]["$add"]["bits"] + s["cells"]["$sub"]["bits"] == s["model"]["add_bits"]
    assert s["cells"]["$sub"]["bits"] == 13  # the sign-correction adder (W_BITS + LO_BITS + 1)


@pytest.mark.parametrize("state_kib", [0, 2], ids=["no-state-sram", "state-sram"])
def test_dcombine_counts_equal_yosys(state_kib):
    # hw.delta_combine.combine_way_counts (what sim.cost.area charges per way) against Yosys's coarse cells of
    # kaleido_dcombine on 8 columns of 28 acc bits: 3 C = 24 adders of acc bits (D accumulate, S_a, Y), and
    # 5 C acc = 1,120 bits of word registers (cells at least acc bits wide; the narrower ones are the streams'
    # valid, flag and address registers, not counted). The macros are memories, not registers.
    from hw.delta_combine import DeltaCombine, combine_way_counts
    from sim.cost.area import yosys_cells

    cfg = delta_cfg(state_kib=state_kib)
    cells, _, _ = yosys_cells(DeltaCombine(cfg))
    want = combine_way_counts(cfg)
    adders = [w for t in ("$add", "$sub") for w in cells.get(t, {"widths": []})["widths"]]
    assert len(adders) == want["adders"] == 24 and sum(adders) == want["add_bits"] == 24 * cfg.acc_bits
    regs = sum(w for t, v in cells.items() if "dff" in t for w in v["widths"] if w >= cfg.acc_bits)
    assert regs == want["reg_bits"] == 5 * 8 * cfg.acc_bits
    assert len(cells["$mem_v2"]["widths"]) == 3 + (8 if state_kib else 0)  # D, D, state buffer; 8 column banks


def test_delta_modules_emit_reproducibly_and_lint_clean(tmp_path):
    # kaleido_dpe, kaleido_dcolumn, kaleido_dtop, kaleido_dcombine and its macro (tests.rtl.compact_bench.check_emission)
    check_emission(delta_cfg(8, 8, 4, 2, state_kib=2), tmp_path)  # with the state SRAM's column-bank macro
    assert "out_m" not in (tmp_path / "a" / "kaleido_dpe.v").read_text()  # one accumulator
