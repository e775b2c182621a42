"""The delta organisation's op-level controller (hw/delta_accel.py, ``kaleido_daccel``, docs/decisions.md D91)
under Amaranth's simulator, against the model of its cycles (`sim.timing.delta_accel`) and the golden model.

Seeded cases of tests/test_rtl_delta.py (every decision mix incl. paired half-width band-tiles and chunk flushes,
scattered and frame-coherent decisions, int8 and uint8, ``f``/``w``/``h`` groups, N = 11 and 5 against C = 8 with
two column blocks, odd group widths, direct tokens) and its qk-like cases over two and three axis classes, on
8 x 8 with 2 bands on 2 ports, 4 bands on 2, 2 bands on 4, and 4 x 8 with 2 bands on 1, in D68's and D84's issue
orders, with the staging entries and lanes varied. For each:

- every band-tile's rows leave the controller once each, tagged (band-tile, row), with the difference sum
  `sim.engines.band_stimulus.band_op` computes from X, X_eff and W apart from the RTL, and ``Y`` placed from the
  tags by the delta combine rule equals `algo.reuse.golden.apply_decisions` and
  `sim.timing.delta_reference.delta_gemm` bit for bit;
- every row leaves in the cycle `sim.timing.delta_accel.row_out_cycles` gives, and ``done`` comes
  `accel_cycles` cycles after ``start``; the controller's band-tile numbers equal ``kaleido_dtop``'s every cycle;
- the staging macros read each band-tile row's words once (D105: `tests.rtl.daccel_bench.staging_words`), the
  read enables counted every cycle.
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import apply_decisions
from hw import discard
from hw.config import load_config
from hw.delta_accel import LANES, DeltaAccel
from hw.delta_accel_host import descriptor_word, group_layout, op_words
from sim.engines.band_stimulus import band_op
from sim.timing.delta_accel import accel_cycles, accel_schedule, gather_rounds, row_out_cycles
from sim.timing.delta_reference import delta_gemm
from tests.rtl.combine_rules import delta_y
from tests.rtl.daccel_bench import run_daccel, staging_words
from tests.test_rtl_delta import CASES, QK_CASES, SHAPES, _case, delta_cfg

# (shape, case, entries, lanes, chunk-major issue order); entries None: 2 B
RUNS = [("8x8-B2-d2", c, None, LANES, False) for c in range(4)] + [
    ("8x8-B4-d2", 0, None, LANES, False), ("8x8-B4-d2", 1, 2, 2, False), ("4x8-B2-d1", 2, None, LANES, False),
    ("8x8-B2-d4", 1, 1, 2, False), ("8x8-B2-d2", 0, None, LANES, True), ("4x8-B2-d1", 3, 4, 4, True),
    ("8x8-B2-d2", "qk-int8", None, LANES, False), ("8x8-B4-d2", "three-axes", 2, LANES, True),
    ("8x8-B2-d2", "hand", 1, 2, False), ("8x8-B2-d4", "qk-uint8-coherent", None, LANES, True),
]


def _widths(case, op):
    return np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles], dtype=np.int64)


def _rounds(cfg, op):
    return gather_rounds([t.tokens for t in op.tiles], cfg.array_rows // cfg.compact_bands)


@pytest.mark.parametrize(("shape", "ci", "entries", "lanes", "chunk_major"), RUNS,
                         ids=[f"{s}-{c}-S{e}-P{p}{'-cm' if cm else ''}" for s, c, e, p, cm in RUNS])
def test_daccel_values_tags_and_cycles(shape, ci, entries, lanes, chunk_major):
    if isinstance(ci, str):
        case, fw, s = QK_CASES[ci], 1, 2
    else:
        case, fw, s = CASES[ci]
    cfg = delta_cfg(*SHAPES[shape])
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s, chunk_major=chunk_major)
    [got] = run_daccel(cfg, [(case, op)], entries=entries, lanes=lanes)
    check_run(cfg, case, op, got, entries or 2 * cfg.compact_bands, lanes, fw)


def check_run(cfg, case, op, got, S, lanes, fw, queue=None):  # noqa: N803
    """The checks of the module docstring on one op's `tests.rtl.daccel_bench.DaccelRun`; ``queue``: the controller
    ran with its queues (`sim.timing.delta_accel.queue_steps`' triple, tests/test_rtl_dqueue.py)."""
    band, _first, last, _g = accel_schedule(op.s_seq, op.rows, _widths(case, op), _rounds(cfg, op), cfg, S, lanes,
                                            queue)
    out = row_out_cycles(band, last, op.rows, cfg)
    want = {(n, i): (int(out[n][i]), t.want[i, :, 0]) for n, t in enumerate(op.tiles) for i in range(len(t.tokens))}
    assert not got.twice
    assert sorted(got.rows) == sorted(want)
    for key, (cycle, words) in got.rows.items():
        assert np.array_equal(words, want[key][1]), key
        assert cycle == want[key][0], key
    assert got.cycles == accel_cycles(op.s_seq, op.rows, _widths(case, op), _rounds(cfg, op), cfg, S, lanes, queue)
    assert got.tile_mismatch == 0
    # D105: each band-tile row's staging words read once (the macros' read enables, counted every cycle)
    assert got.staging_reads == staging_words(case, op, lanes)
    # Y from the tags alone: tile n's row i is token op.tiles[n].tokens[i] of its group and column block
    rows = ((int(op.tiles[n].tokens[i]), op.tiles[n].group, op.tiles[n].n0, w[:, None])
            for (n, i), (_c, w) in got.rows.items())
    y = delta_y(case.decisions, case.grid, case.groups, case.W.shape[1], rows)
    want_y = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    assert np.array_equal(y, want_y)
    ref = delta_gemm(case.X, case.W, case.grid, case.groups, case.decisions, cfg.array_rows,
                     cfg.array_rows // cfg.compact_bands, fw or case.grid[0])
    assert np.array_equal(ref, want_y)


def _random_job(rng, cfg, k: int):
    """A seeded random op on ``cfg`` (tests/test_rtl_delta.py's ``_case``: every group on one axis, tokens without
    a neighbour and two direct tokens COMPUTE) and its band-tiles in a random delta issue order."""
    F, H, W = (int(v) for v in rng.integers([2, 1, 2], [5, 4, 6]))  # noqa: N806
    sizes = [int(v) for v in rng.integers(1, 7, size=int(rng.integers(1, 4)))]
    N = int(rng.integers(3, 18))  # noqa: N806
    axis = str(rng.choice(["f", "w", "h"] if H > 1 else ["f", "w"]))
    fw = [None, 1, 2][int(rng.integers(3))]
    s = int(rng.integers(1, 3))
    case, fw, s = _case(20 + k, (F, H, W), sum(sizes), N, sizes, bool(rng.integers(2)), axis, fw, s,
                        coherent=bool(rng.integers(2)))
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s, chunk_major=bool(rng.integers(2)))
    return case, op, fw


@pytest.mark.parametrize("shape", ["8x8-B2-d2", "8x8-B4-d2"])
def test_daccel_random_ops_back_to_back(shape):
    # six seeded random ops (grids, group widths 1-6 in 1-3 groups on f, w or h, N 3-17, int8/uint8, scattered
    # or coherent, chunk frames and column-block groups, both issue orders) one after the other on one
    # controller: each op's rows, tags, cycles and Y as in the test above (the start cycle resets kaleido_dtop's
    # drain phase and band-tile numbers, so op 2 times as op 1 would).
    cfg = delta_cfg(*SHAPES[shape])
    rng = np.random.default_rng(91)
    jobs = [_random_job(rng, cfg, k) for k in range(6)]
    got = run_daccel(cfg, [(case, op) for case, op, _fw in jobs])
    for (case, op, fw), run in zip(jobs, got, strict=True):
        check_run(cfg, case, op, run, 2 * cfg.compact_bands, LANES, fw)


def test_accel_schedule_by_hand():
    # 8 x 8, 2 bands, 2 ports (q = 1), R / B = 4 difference-buffer banks (token mod 4), one staging entry, P = 8.
    # Band-tile 0: tokens 1 and 5 (both bank 1: 2 rounds), width 3 (1 word), 3 slots: gather from cycle 0, X words
    # at 1-2, first slot at 0 + 2 + 3 = 5 on band 0, last at 7; rows read at 8 and 9. Band-tile 1: token 2, width 9
    # (2 words, 1 round), 9 slots: its entry is free the cycle after band-tile 0's last slot, gather at 8, words
    # at 9-10, first slot 13 on band 1 (its last slot, -1, is earlier than band 0's, 7), last 21, read at 22. Rows
    # leave C + 1 cycles after their read, + 1 for the start cycle; done the cycle after the last: 22 + C + 3 = 33.
    cfg = delta_cfg(8, 8, 2, 2)
    s, rows, widths = np.array([3, 9]), np.array([2, 1]), np.array([3, 9])
    rounds = gather_rounds([[1, 5], [2]], 4)
    assert rounds.tolist() == [2, 1]
    band, first, last, gather = accel_schedule(s, rows, widths, rounds, cfg, entries=1, lanes=8)
    assert band.tolist() == [0, 1] and first.tolist() == [5, 13] and last.tolist() == [7, 21]
    assert gather.tolist() == [0, 8]
    assert [c.tolist() for c in row_out_cycles(band, last, rows, cfg)] == [[18, 19], [32]]
    assert accel_cycles(s, rows, widths, rounds, cfg, entries=1, lanes=8) == 33
    # two entries: band-tile 1's gather follows band-tile 0's at once (cycle 3), first slot at 3 + 2 + 3 = 8
    band, first, last, gather = accel_schedule(s, rows, widths, rounds, cfg, entries=2, lanes=8)
    assert gather.tolist() == [0, 3] and first.tolist() == [5, 8] and last.tolist() == [7, 16]
    # tokens 1 and 2 in distinct banks: one round; band-tile 0's first slot at 0 + 1 + 3 = 4, last 6, band-tile
    # 1's gather at 7 (one entry), first slot 7 + 2 + 3 = 12, last 20, read 21: 32 cycles
    one = gather_rounds([[1, 2], [2]], 4)
    assert one.tolist() == [1, 1] and accel_cycles(s, rows, widths, one, cfg, entries=1, lanes=8) == 32
    assert accel_cycles(*(np.array([], np.int64),) * 4, cfg, 2, 8) == 1


def test_host_words_and_errors():
    cfg = delta_cfg(8, 8, 2, 2)
    acc = discard(DeltaAccel(cfg, lanes=8))  # read for its sizes only, never elaborated
    groups = [(0, 3, "f"), (3, 12, "f")]
    assert group_layout(acc, groups) == [(0, 1, 0), (1, 2, 2)]  # P = 8: 3 ch in 1 X word and 2 weight words, 9 in 2 and 5
    word = descriptor_word(acc, groups, 1, 1, [5, 6], 0, 5)  # all PARTIAL, 5 slots < 9 channels: paired
    fields, pos = {}, 0
    for name, bits in acc.fields:
        fields[name] = (word >> pos) & ((1 << bits) - 1)
        pos += bits
    assert fields | {"tokens": 0} == {"nrows": 2, "ncomp": 0, "width": 9, "paired": 1, "cb": 1, "xoff": 1,
                                       "xwords": 2, "woff": 2, "tokens": 0}
    assert fields["tokens"] == 5 | 6 << acc.tb
    with pytest.raises(ValueError, match="band has 4"):
        descriptor_word(acc, groups, 0, 0, [1, 2, 3, 4, 5], 0, 3)
    with pytest.raises(ValueError, match="9 bits"):
        op_words(acc, np.full((2, 12), 256), np.zeros((12, 8), np.int64), groups, [])
    with pytest.raises(ValueError, match="delta organisation"):
        DeltaAccel(load_config("tiny-8x8"))
    with pytest.raises(ValueError, match="power of two"):
        DeltaAccel(cfg, lanes=3)


def test_daccel_emits_reproducibly_and_lints_clean(tmp_path):
    # kaleido_daccel and everything below it (kaleido_dtop, kaleido_dcolumn, kaleido_dpe, kaleido_delay from
    # kaleido_top.v, its SRAM macros) on an 8 x 8 delta config: the same bytes twice, no paths, Verilator -Wall
    # clean per file and over the whole hierarchy from kaleido_daccel.
    import re
    from pathlib import Path

    from hw.lint import lint_folder
    from hw.rtl import emit
    from hw.sram import macro_name

    # The emitted kaleido_daccel is the one with its queues (D93): kaleido_dqueue and its decision-buffer macro.
    cfg = delta_cfg(8, 8, 2, 2)
    macros = [macro_name(*mc) for mc in discard(DeltaAccel(cfg, pe="instance", queues=True)).macros()]
    names = ("kaleido_daccel", "kaleido_dqueue", "kaleido_dtop", "kaleido_dcolumn", "kaleido_dpe", "kaleido_top",
             "kaleido_column", "kaleido_pe", *macros)
    a = emit(cfg, tmp_path / "a", only=names)
    b = emit(cfg, tmp_path / "b", only=("kaleido_daccel", "kaleido_dqueue"))
    for p in b:
        assert (tmp_path / "a" / p.name).read_bytes() == p.read_bytes(), p.name
    text = b[0].read_text()
    assert str(Path.cwd()) not in text and str(tmp_path) not in text
    assert "kaleido_dtop " in text and "kaleido_dqueue " in text
    qtext = (tmp_path / "a" / "kaleido_dqueue.v").read_text()
    assert str(Path.cwd()) not in qtext and str(tmp_path) not in qtext
    for name in macros:  # each macro instantiated by name (the decision buffer's in kaleido_dqueue)
        assert re.search(rf"^\s*{name} \S+\s+\(", text + qtext, re.M), name
    assert sorted(p.name for p in a) == sorted(f"{n}.v" for n in names)
    runs = lint_folder(tmp_path / "a", full=True, jobs=2, tops=("kaleido_daccel",))
    assert all(ok for _, ok, _, _ in runs), [(label, out[:600]) for label, ok, _, out in runs if not ok]
    assert "kaleido_daccel.v whole hierarchy" in {label for label, *_ in runs}
