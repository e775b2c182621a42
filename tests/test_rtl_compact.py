"""The compact organisation's RTL (hw/compact_pe.py, hw/compact_array.py) under Amaranth's simulator on
tiny-8x8 as the compact organisation: 2 bands of 4 rows (a band per output port, B = d), 4 bands of 2
rows (two bands per port, B > d) and 2 bands on 4 ports (two ports per band, B < d), and one other shape
(4 x 8, 2 bands, d = 1).

Seeded random band-tile workloads (every mode mix, scattered and coherent decisions, int8 and uint8, a
non-multiple shape: N not a multiple of C, a partial position block, odd group widths, chunk flushes
mixing COMPUTE and PARTIAL tokens):

- every drained word equals the group partial computed from X and W apart from the RTL
  (`tests.rtl.compact_bench`), and the drained partials combined as `sim.timing.compact_reference`
  combines them equal `algo.reuse.golden.apply_decisions` bit for bit;
- every band-tile runs on the band and its last slot issues at the cycle `sim.timing.compact.band_schedule`
  gives (the band choice is the RTL's, ``b{b}_tile``; the bench only presents the chosen band-tile's
  operands, the controller's gather, not RTL yet, docs/decisions.md D65), and the op's last row leaves in
  the cycle `sim.timing.compact.band_cycles`'s op total ends.
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import AXIS_INDEX, COMPUTE, apply_decisions
from hw.combine import Combine, combine_sizes
from hw.config import AcceleratorConfig, load_config
from sim.timing.compact import band_cycles
from tests.rtl.cases import make_case
from tests.rtl.combine_rules import compact_y
from tests.rtl.compact_bench import (
    build_runs,
    check_emission,
    combine_program,
    run_top,
    simulate_combine,
    unpack_signed,
)


def compact_cfg(rows=8, cols=8, bands=2, ports=2) -> AcceleratorConfig:
    d = load_config("tiny-8x8").model_dump() | {
        "name": f"compact-{rows}x{cols}-b{bands}-d{ports}", "organisation": "compact", "psum_sram_kib": 64,
        "compact_bands": bands, "array_rows": rows, "array_cols": cols, "drain_rows_per_cycle": ports}
    return AcceleratorConfig.model_validate(d)


def combine(case, runs):
    """``Y`` from the drained partials by the reference's combine rule (`tests.rtl.combine_rules.compact_y`)."""
    rows = ((t, r.group, r.n0, got) for r in runs for t, got in zip(r.tokens, r.drained, strict=True))
    return compact_y(case.decisions, case.grid, case.groups, case.W.shape[1], rows)


def run_combine(cfg, writes, cmds):
    """Drive `hw.combine.Combine` (inline macros): the staged writes (one per port and cycle), then one
    command per cycle; returns the output rows and, per row, its cycle counted from the first command."""
    C, ab, d = cfg.array_cols, cfg.acc_bits, cfg.drain_rows_per_cycle  # noqa: N806
    sa = max(1, (combine_sizes(cfg)["stage_depth"] - 1).bit_length())
    dut = Combine(cfg)

    async def load(ctx):
        per_port = [[w for w in writes if w[0] == p] for p in range(d)]
        for i in range(max(len(q) for q in per_port)):
            we = addr = data = 0
            for p, q in enumerate(per_port):
                if i < len(q):
                    we |= 1 << p
                    addr |= q[i][1] << (p * sa)
                    data |= q[i][2] << (p * 2 * C * ab)
            ctx.set(dut.st_we, we)
            ctx.set(dut.st_waddr, addr)
            ctx.set(dut.st_wdata, data)
            await ctx.tick()
        ctx.set(dut.st_we, 0)

    return simulate_combine(dut, load, cmds, C, ab)


def _case(seed, grid, K, N, sizes, x_unsigned, axes, fw, coherent=False):  # noqa: N803
    """A seeded case (`tests.rtl.cases.make_case`) with these group axes; a token without a neighbour
    along its group's axis COMPUTEs. ``coherent``: each (frame, group) takes one decision for all tokens."""
    c = make_case(f"compact{seed}", 100 + seed, grid, K, N, sizes, x_unsigned=x_unsigned)
    if coherent:
        F, H, W = grid  # noqa: N806
        c.decisions = np.repeat(c.decisions.reshape(F, H * W, -1)[:, :1], H * W, axis=1).reshape(F * H * W, -1)
    c.groups = [(k0, k1, a) for (k0, k1, _), a in zip(c.groups, axes, strict=True)]
    idx = np.unravel_index(np.arange(c.X.shape[0]), grid)
    for g, a in enumerate(axes):
        c.decisions[idx[AXIS_INDEX[a]] == 0, g] = COMPUTE
    return c, fw


CASES = [
    # 6 positions (a partial pool at R = 8), N = 11 (a partial column block), chunks of 2 frames
    _case(1, (3, 2, 3), 10, 11, [3, 4, 3], False, "fff", 2),
    # uint8 operands, w and h groups (the combine unit's spatial neighbours), odd widths
    _case(2, (3, 2, 4), 12, 8, [4, 5, 3], True, "fwh", None),
    # coherent decisions (a whole frame agrees per group), int8
    _case(3, (4, 2, 4), 8, 5, [4, 4], False, "ff", None, coherent=True),
    # one w group: a token's command reads the state word the previous command writes (forwarded)
    _case(4, (2, 2, 4), 5, 8, [5], False, "w", None),
]



SHAPES = {"8x8-B2-d2": (8, 8, 2, 2), "8x8-B4-d2": (8, 8, 4, 2), "4x8-B2-d1": (4, 8, 2, 1), "8x8-B2-d4": (8, 8, 2, 4)}
#: (shape, case): every case on the first three shapes; two bands with two ports each (round robin) on two cases.
RUNS = [(s, c) for s in list(SHAPES)[:3] for c in range(len(CASES))] + [("8x8-B2-d4", 0), ("8x8-B2-d4", 1)]


@pytest.mark.parametrize(("shape", "ci"), [(SHAPES[s], c) for s, c in RUNS], ids=[f"{s}-{c}" for s, c in RUNS])
def test_compact_top_values_and_band_tile_cycles(shape, ci):
    case, fw = CASES[ci]
    cfg = compact_cfg(*shape)
    runs = build_runs(case, cfg, fw)
    end = run_top(cfg, runs, case.x_unsigned)
    for r in runs:
        assert np.array_equal(np.array(r.drained), r.want), f"band-tile of group {r.group} at n0 = {r.n0}"
    assert [r.got_band for r in runs] == [r.band for r in runs]  # the RTL's band choice is the list schedule's
    assert [r.got_last for r in runs] == [r.last for r in runs]
    want_y = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    assert np.array_equal(combine(case, runs), want_y)
    cycles, _ = band_cycles(np.array([len(r.slots) for r in runs]), np.array([len(r.tokens) for r in runs]), cfg)
    assert end + 1 == cycles  # the op's array cycles: its last row's cycle + 1
    if shape == (8, 8, 2, 2):  # the drained rows through the partial-sum SRAM and the combine unit
        M, N, C, G = case.X.shape[0], case.W.shape[1], cfg.array_cols, len(case.groups)  # noqa: N806
        for n0, writes, cmds in combine_program(case, runs, cfg):
            y, at = run_combine(cfg, writes, cmds)
            n = min(C, N - n0)
            assert np.array_equal(y[:, :n], want_y[:, n0:n0 + n])
            assert at == [G * t + G - 1 + 2 for t in range(M)]  # a token's row 2 cycles after its last command


def test_combine_reads_only_the_words_a_command_uses():
    """D127: ``kaleido_combine`` reads a staging word only for a COMPUTE or PARTIAL command (a REUSE uses none) and a
    state word only for a PARTIAL or REUSE command (a COMPUTE uses none). On the mixed w / h / f case, every column
    block's program: the macros' read-enable cycles equal those counts, taken from the commands' decisions, and Y is
    still the golden model's."""
    from amaranth.sim import Simulator

    from hw.pe import COMPUTE as HC
    from hw.pe import REUSE as HR

    case, fw = CASES[1]
    cfg = compact_cfg(*SHAPES["8x8-B2-d2"])
    runs = build_runs(case, cfg, fw)
    run_top(cfg, runs, case.x_unsigned)
    want_y = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    C, ab, d = cfg.array_cols, cfg.acc_bits, cfg.drain_rows_per_cycle  # noqa: N806
    sa = max(1, (combine_sizes(cfg)["stage_depth"] - 1).bit_length())
    seen = set()
    for n0, writes, cmds in combine_program(case, runs, cfg):
        decs = [c["c_dec"] for c in cmds]
        seen |= set(decs)
        dut = Combine(cfg)
        got = {"staging": 0, "state": 0}
        out = {}

        async def bench(ctx, dut=dut, writes=writes, cmds=cmds, out=out, got=got):
            for p, addr, data in writes:  # one staged write a cycle
                ctx.set(dut.st_we, 1 << p)
                ctx.set(dut.st_waddr, addr << (p * sa))
                ctx.set(dut.st_wdata, data << (p * 2 * C * ab))
                await ctx.tick()
            ctx.set(dut.st_we, 0)
            rows = []
            for cycle in range(len(cmds) + 3):  # `output_commands`, counting the read enables before each edge
                ctx.set(dut.c_valid, int(cycle < len(cmds)))
                for k, v in (cmds[cycle] if cycle < len(cmds) else {}).items():
                    ctx.set(getattr(dut, k), v)
                for k in got:
                    got[k] += sum(ctx.get(e) for e in dut.read_enables[k])
                if ctx.get(dut.y_valid):
                    rows.append(unpack_signed(ctx.get(dut.y_data), ab, C))
                await ctx.tick()
            out["rows"] = rows

        sim = Simulator(dut)
        sim.add_clock(1e-6)
        sim.add_testbench(bench)
        sim.run()
        assert got == {"staging": sum(x != HR for x in decs), "state": sum(x != HC for x in decs)}, n0
        n = min(C, case.W.shape[1] - n0)
        assert np.array_equal(np.array(out["rows"], dtype=np.int64)[:, :n], want_y[:, n0:n0 + n])
    assert len(seen) == 3 and d == 2  # every decision among the commands


def test_compact_pe_counts_equal_yosys():
    # sim.cost.area.compact_pe_extra + the plain PE against Yosys's coarse cells of kaleido_cpe
    from sim.cost.area import synth_pe_cells

    s = synth_pe_cells(compact_cfg())
    for k in ("adders", "register_bits", "mux_bits"):
        assert s["compare"][k]["yosys"] == s["compare"][k]["model"], k
    assert s["cells"]["$add"]["bits"] == s["model"]["add_bits"]


def test_compact_modules_emit_reproducibly_and_lint_clean(tmp_path):
    # kaleido_cpe, kaleido_ccolumn, kaleido_ctop, kaleido_combine and its macros (tests.rtl.compact_bench.check_emission)
    check_emission(compact_cfg(8, 8, 4, 2), tmp_path)
