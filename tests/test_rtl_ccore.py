"""The compact controller with its combine stage (hw/compact_core.py, ``kaleido_ccore``, docs/decisions.md D97)
under Amaranth's simulator: final ``Y`` rows from the RTL alone against the golden model, and every row's cycle
against `sim.timing.compact_accel.core_cycles` fed by the controller's model (`caccel_cycles` with its queues).

Cases: tests/test_rtl_caccel.py's five (every mode mix, paired band-tiles, flushes, a REUSE-only group past frame 0,
scattered and coherent, int8 and uint8, ``f``/``w``/``h`` groups incl. one ``w`` group alone, whose head is read
the cycle it is written, N = 11, 13 and 5 against C = 8, the accumulator's corners at K = 64) on 8 x 8 with 2 bands on 2 ports, some on 4 bands on 2,
2 bands on 4 and 16 x 4 with 8 bands on 4 (three column blocks). Cases 1-4 and 6 on 8 x 8 with 2 bands on 2 ports
and six seeded random ops back to back on one core (the where tables are cleared by the walk, so an op sees none of
the previous one's entries) run on the compiled engine instead (tests/test_rtl_core_engine.py, D102), which checks
their Y rows and cycles, not the SRAM access counts.
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import REUSE, apply_decisions
from hw import discard
from hw.combine import combine_sizes
from hw.compact_core import CompactCore, core_ports, default_ways
from sim.cost.compact_actions import successor_reads
from sim.engines.band_stimulus import band_op
from sim.timing.compact_accel import block_times, caccel_cycles, caccel_schedule, core_cycles, queue_steps
from tests.rtl.caccel_bench import run_ccore
from tests.test_rtl_caccel import ALL, SHAPES, _random_job
from tests.test_rtl_compact import compact_cfg

# Cases 1-4 and 6 on 8 x 8 with 2 bands on 2 ports and the seeded random ops back to back (`ENGINE_RUNS`,
# `random_jobs`) run on the compiled engine (tests/test_rtl_core_engine.py, D102: Y rows and their cycles); cases 0
# and 5 stay here with the partial-sum SRAM access counts.
ENGINE_RUNS = [("8x8-B2-d2", c) for c in (1, 2, 3, 4, 6)]
RUNS = [("8x8-B2-d2", 0), ("8x8-B4-d2", 1), ("8x8-B4-d2", 3), ("8x8-B2-d4", 0), ("16x4-B8-d4", 1), ("8x8-B2-d2", 5)]


def check_core(cfg, case, op, fw, got, ways=None):
    """Every (column block, token) Y row once, equal to `apply_decisions`, at `core_cycles`' cycle (``ways``: the
    core's, default `default_ways`); ``done`` too; the partial-sum SRAM's word accesses."""
    C, N, M, G = cfg.array_cols, case.W.shape[1], case.X.shape[0], len(case.groups)  # noqa: N806
    n_cb = -(-N // C)
    q = queue_steps(case.decisions, case.grid, cfg, fw or case.grid[0], n_cb)
    args = (op, case.groups, cfg, 2 * cfg.compact_bands, 32, q)
    blocks = block_times(op, caccel_schedule(*args), cfg, n_cb)
    y_at, done = core_cycles(caccel_cycles(*args), M, -(-G // (ways or default_ways(cfg))), blocks)  # W a command
    want = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    assert not got.twice
    assert sorted(got.y) == [(cb, t) for cb in range(n_cb) for t in range(M)]
    for (cb, t), (cycle, row) in got.y.items():
        n = min(C, N - cb * C)
        assert np.array_equal(row[:n], want[t, cb * C:cb * C + n]), (cb, t)
        assert cycle == y_at[cb, t], (cb, t)
    assert got.cycles == done
    # the partial-sum SRAM's word accesses against the model's rules (sim.cost.compact_actions): a staged word per
    # COMPUTE or PARTIAL (token, group) and column block; a state word written where the successor along the
    # group's axis reads it (successor_reads) and the token is not REUSE
    need = case.decisions != REUSE
    assert got.staged == n_cb * int(need.sum())
    assert got.state_writes == n_cb * int((need & successor_reads(case.decisions, case.grid, case.groups)).sum())
    assert got.state_reads == n_cb * M * G


@pytest.mark.parametrize(("shape", "ci"), RUNS, ids=[f"{s}-{c}" for s, c in RUNS])
def test_ccore_y_rows_and_cycles(shape, ci):
    case, fw = ALL[ci]
    cfg = compact_cfg(*SHAPES[shape])
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw)
    [got] = run_ccore(cfg, [(case, op, fw)])
    check_core(cfg, case, op, fw, got)


@pytest.mark.parametrize("ways", [1, 4])
def test_ccore_other_ways(ways):
    # one way (kaleido_combine, a command per group: D97's walk on the banked where tables) and 4 ways on d = 2
    # (a token's 3 groups in one command, one way idle), case 0 (two column blocks)
    case, fw = ALL[0]
    cfg = compact_cfg(*SHAPES["8x8-B2-d2"])
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw)
    [got] = run_ccore(cfg, [(case, op, fw)], ways=ways)
    check_core(cfg, case, op, fw, got, ways)


def random_jobs(cfg) -> list:
    """Six seeded random ops (tests/test_rtl_caccel.py's ``_random_job``) as ``(case, op, fw)``: run back to back on
    one core by tests/test_rtl_core_engine.py (the where tables the walk clears carry over from op to op)."""
    rng = np.random.default_rng(971)
    return [_random_job(rng, cfg, k) for k in range(6)]


def test_core_cycles_by_hand():
    # T = 10, 2 tokens, 2 groups, 1 column block whose last row leaves at 8 (staged 9, counted 10): the block is
    # whole once done is seen, 11; commands (t0 g0, t0 g1, t1 g0, t1 g1) read at 11-14, issue at 12-15; token 0's
    # row 2 cycles after its last command (13): 15; token 1's: 17; done the cycle after: 18
    y, done = core_cycles(10, 2, 2, ([8], [0]))
    assert y.tolist() == [[15, 17]] and done == 18
    # one group, two column blocks: block 0's last row leaves at 5 (counted 7), block 1's first descriptor is taken
    # at 4 (seen 5): block 0 walks at 7, 8 (rows at 10, 11) while block 1 drains; block 1 (last row 8, counted 10)
    # waits for done (seen 11): reads 11, 12, rows 14, 15, done 16
    y, done = core_cycles(10, 2, 1, ([5, 8], [0, 4]))
    assert y.tolist() == [[10, 11], [14, 15]] and done == 16
    # block 1's first descriptor taken late (9, seen 10): block 0, drained at 3 (counted 5), waits for it
    y, _ = core_cycles(12, 1, 1, ([3, 10], [0, 9]))
    assert y[0].tolist() == [10 + 3]
    # the walk binds: block 0 (whole at 7) reads 4 commands 7-10, so block 1 (whole at T + 1 = 9) starts at 11
    y, done = core_cycles(8, 2, 2, ([5, 6], [0, 4]))
    assert y.tolist() == [[11, 13], [15, 17]] and done == 18


def test_core_ports_refuse_what_does_not_fit():
    cfg = compact_cfg(8, 8, 2, 2)
    core = discard(CompactCore(cfg))
    assert core_ports(core, (2, 2, 4), [(0, 2, "f"), (2, 5, "w")], 11, [40, 40]) == {"o_w": 4, "o_axes": 0 | 2 << 2}
    with pytest.raises(ValueError, match="H W <= 8"):
        core_ports(core, (2, 3, 3), [(0, 2, "f")], 8, [4])  # 9 positions: the state macro holds one pool of 8
    with pytest.raises(ValueError, match="4 column blocks"):
        core_ports(core, (2, 2, 2), [(0, 2, "f")], 33, [4])
    # 8 x 8, d = 2: 2 ways; a word is 2 C acc_bits = 2 x 8 x 28 = 448 bits; the state R x partial_regs = 64 words,
    # 32 a way; 64 KiB leave (524,288 - 64 x 448) / (2 ports x 2 ways x 448) = 276 words -> 256 a staging macro.
    # Groups 0 and 2 share way 0
    sz = combine_sizes(cfg, 2)
    assert (sz["word"], sz["state_depth"], sz["stage_depth"]) == (448, 32, 256)
    assert core_ports(core, (1, 2, 4), [(0, 1, "f")] * 3, 8, [128, 256, 128])["o_w"] == 4
    with pytest.raises(ValueError, match="257 rows on a way"):
        core_ports(core, (1, 2, 4), [(0, 1, "f")] * 3, 8, [128, 0, 129])


def test_ccore_and_caccel_emit_reproducibly_and_lint_clean(tmp_path):
    # kaleido_ccore and everything below it (kaleido_caccel, kaleido_dqueue, kaleido_combine_w2, kaleido_ctop_ext, ...) on
    # an 8 x 8 compact config, all in hw.rtl's plan: the same bytes twice, no paths, each file's macros and children
    # instantiated by name, Verilator -Wall clean per file and over the whole hierarchy from kaleido_ccore and from
    # kaleido_caccel.
    import re
    from pathlib import Path

    from hw.combine import Combine, combine_module_name
    from hw.compact_accel import CompactAccel
    from hw.lint import lint_folder
    from hw.rtl import emit, plan
    from hw.sram import macro_name

    cfg = compact_cfg(8, 8, 2, 2)
    own = [macro_name(*mc) for mc in discard(CompactCore(cfg, pe="instance")).macros()]
    below = [macro_name(*mc) for mc in discard(CompactAccel(cfg, pe="instance", queues=True)).macros()]
    ways = default_ways(cfg)
    assert ways == 2  # d = 2 (D104)
    below += [macro_name(*mc) for mc in discard(Combine(cfg, ways=ways)).macros()]
    names = ("kaleido_ccore", "kaleido_caccel", "kaleido_dqueue", combine_module_name(ways), "kaleido_ctop_ext", "kaleido_ccolumn",
             "kaleido_cpe", "kaleido_top", "kaleido_column", "kaleido_pe", *dict.fromkeys(own + below))
    assert set(names) <= {name for name, _, _ in plan(cfg)}
    a = emit(cfg, tmp_path / "a", only=names)
    b = emit(cfg, tmp_path / "b", only=("kaleido_ccore", "kaleido_caccel", "kaleido_dqueue"))
    for p in b:
        assert (tmp_path / "a" / p.name).read_bytes() == p.read_bytes(), p.name
        assert str(Path.cwd()) not in p.read_text() and str(tmp_path) not in p.read_text()
    text = {p.stem: p.read_text() for p in b}
    accel_macros = [macro_name(*mc) for mc in discard(CompactAccel(cfg, pe="instance", queues=True)).macros()]
    for top, children in (("kaleido_ccore", (*own, "kaleido_caccel", combine_module_name(ways))),
                          ("kaleido_caccel", ("kaleido_ctop_ext", "kaleido_dqueue"))):  # D109: the early choice
        for name in children:
            assert re.search(rf"^\s*{name} \S+\s+\(", text[top], re.M), (top, name)
    for name in accel_macros:  # the controller's macros (the decision buffer's in kaleido_dqueue)
        assert re.search(rf"^\s*{name} \S+\s+\(", text["kaleido_caccel"] + text["kaleido_dqueue"], re.M), name
    assert sorted(p.name for p in a) == sorted(f"{n}.v" for n in dict.fromkeys(names))
    runs = lint_folder(tmp_path / "a", full=True, jobs=2, tops=("kaleido_ccore", "kaleido_caccel"))
    assert all(ok for _, ok, _, _ in runs), [(label, out[:600]) for label, ok, _, out in runs if not ok]
    assert {"kaleido_ccore.v whole hierarchy", "kaleido_caccel.v whole hierarchy"} <= {label for label, *_ in runs}
