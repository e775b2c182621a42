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

from algo.reuse.golden import AXIS_INDEX, COMPUTE, REUSE, apply_decisions
from hw.config import AcceleratorConfig, load_config
from hw.delta_combine import DeltaCombine, delta_combine_sizes
from hw.pe import PEMode
from sim.cost.compact_actions import delta_successor_reads
from sim.timing.compact import band_cycles
from sim.timing.compact_reference import _neighbour
from sim.timing.delta_reference import delta_gemm
from tests.rtl.cases import make_case
from tests.rtl.compact_bench import build_runs, check_emission, pack, run_top, simulate_combine


def delta_cfg(rows=8, cols=8, bands=2, ports=2) -> AcceleratorConfig:
    d = load_config("tiny-8x8").model_dump() | {
        "name": f"delta-{rows}x{cols}-b{bands}-d{ports}", "organisation": "delta", "psum_sram_kib": 64,
        "compact_bands": bands, "array_rows": rows, "array_cols": cols, "drain_rows_per_cycle": ports}
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
    """``Y`` from the drained rows by the delta combine rule (`sim.timing.delta`): ``D[t]`` the sum of t's rows,
    then in raster order ``Y[t] = D[t]`` (direct: t COMPUTEs every group) or ``Y[nb] + D[t]``."""
    M, N = case.X.shape[0], case.W.shape[1]  # noqa: N806
    D = np.zeros((M, N), np.int64)  # noqa: N806
    for r in runs:
        n = min(r.want.shape[1], N - r.n0)
        for t, got in zip(r.tokens, r.drained, strict=True):
            D[t, r.n0:r.n0 + n] += got[:n, 0]
    Y = np.zeros_like(D)  # noqa: N806
    for t in range(M):
        direct = (case.decisions[t] == COMPUTE).all()
        Y[t] = D[t] if direct else Y[_neighbour(t, case.groups[0][2], case.grid)] + D[t]
    return Y


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
        got, at = run_dcombine(cfg, *dcombine_program(case, runs, cfg))
        n_cb = -(-case.W.shape[1] // cfg.array_cols)
        C, N = cfg.array_cols, case.W.shape[1]  # noqa: N806
        for k, (t, cb) in enumerate((t, cb) for t in range(case.X.shape[0]) for cb in range(n_cb)):
            n = min(C, N - cb * C)
            assert np.array_equal(got[k, :n], want_y[t, cb * C:cb * C + n]), (t, cb)
        assert at == [k + 2 for k in range(len(at))]


def dcombine_program(case, runs, cfg):
    """Accumulate and output commands of ``case`` for `hw.delta_combine.DeltaCombine`: the drained rows in the
    order they left the array (cycle, then port), each into ``D`` at ``t n_cb + cb``; then per token in raster
    order and per column block an output command reading ``Y[nb]`` at ``p n_cb + cb`` (p the neighbour's
    position) and writing ``Y[t]`` at its own position's word where the next token along the axis reads it."""
    F, H, W = case.grid  # noqa: N806
    C, ab = cfg.array_cols, cfg.acc_bits  # noqa: N806
    n_cb = -(-case.W.shape[1] // C)
    rows = sorted(((at, port, t, r.n0 // C, got) for r in runs
                   for (at, port), t, got in zip(r.drained_at, r.tokens, r.drained, strict=True)), key=lambda v: v[:2])
    acc, seen = [], set()
    for _at, _p, t, cb, got in rows:
        acc.append({"a_first": int((t, cb) not in seen), "a_addr": t * n_cb + cb, "a_data": pack(got[:, 0], ab)})
        seen.add((t, cb))
    keep = delta_successor_reads(case.decisions, case.grid, case.groups[0][2])
    out = []
    for t in range(case.X.shape[0]):
        direct = bool((case.decisions[t] == COMPUTE).all())
        has = bool((case.decisions[t] != REUSE).any())
        nb = t if direct else _neighbour(t, case.groups[0][2], case.grid)
        for cb in range(n_cb):
            out.append({"c_direct": int(direct), "c_has": int(has), "c_daddr": t * n_cb + cb,
                        "c_raddr": (nb % (H * W)) * n_cb + cb, "c_waddr": (t % (H * W)) * n_cb + cb,
                        "c_keep": int(keep[t])})
    return acc, out


def run_dcombine(cfg, acc, out, sel=1):
    """Drive `DeltaCombine` (inline macros): the accumulate commands into D buffer ``sel``, then the output
    commands from it (``c_sel`` flipped, as at a chunk's end); returns the output rows and, per row, its cycle
    counted from the first output command."""
    C, ab = cfg.array_cols, cfg.acc_bits  # noqa: N806
    dut = DeltaCombine(cfg)

    async def load(ctx):
        ctx.set(dut.c_sel, sel)
        for cmd in acc:
            ctx.set(dut.a_valid, 1)
            for k, v in cmd.items():
                ctx.set(getattr(dut, k), v)
            await ctx.tick()
        ctx.set(dut.a_valid, 0)
        await ctx.tick()  # the last accumulate's write
        ctx.set(dut.c_sel, 1 - sel)

    return simulate_combine(dut, load, out, C, ab)


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
    out = [{"c_direct": 1, "c_has": 1, "c_daddr": 3, "c_raddr": 0, "c_waddr": 200, "c_keep": 1},
           {"c_direct": 0, "c_has": 1, "c_daddr": 70, "c_raddr": 200, "c_waddr": 200, "c_keep": 1},
           {"c_direct": 0, "c_has": 0, "c_daddr": 0, "c_raddr": 200, "c_waddr": 4, "c_keep": 1},
           {"c_direct": 0, "c_has": 1, "c_daddr": 130, "c_raddr": 200, "c_waddr": 5, "c_keep": 0},
           {"c_direct": 0, "c_has": 1, "c_daddr": 131, "c_raddr": 4, "c_waddr": 5, "c_keep": 0}]
    y3 = want_d[3]
    want = [y3, y3 + want_d[70], y3 + want_d[70], y3 + want_d[70] + want_d[130], y3 + want_d[70] + want_d[131]]
    for sel in (0, 1):
        got, at = run_dcombine(cfg, acc, out, sel)
        assert np.array_equal(got, np.array(want)), sel
        assert at == [2, 3, 4, 5, 6]


def test_delta_combine_sizes_refuse_small_sram():
    cfg = delta_cfg(32, 32).model_copy(update={"psum_sram_kib": 1})  # 2 words of 1,024 bits per macro
    with pytest.raises(ValueError, match="fewer than array_rows"):
        delta_combine_sizes(cfg)


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


def test_delta_modules_emit_reproducibly_and_lint_clean(tmp_path):
    # kaleido_dpe, kaleido_dcolumn, kaleido_dtop, kaleido_dcombine and its macro (tests.rtl.compact_bench.check_emission)
    check_emission(delta_cfg(8, 8, 4, 2), tmp_path)
    assert "out_m" not in (tmp_path / "a" / "kaleido_dpe.v").read_text()  # one accumulator
