"""The compact organisation's op-level controller (hw/compact_accel.py, ``kaleido_caccel``, docs/decisions.md D97)
under Amaranth's simulator, against the model of its cycles (`sim.timing.compact_accel`), the compact reference and
the golden model.

Cases: tests/test_rtl_compact.py's four seeded cases (every decision mix incl. paired half-width band-tiles and chunk
flushes mixing COMPUTE and PARTIAL rows, scattered and frame-coherent decisions, int8 and uint8, ``f``/``w``/``h``
groups, odd widths, N = 11 and 5 against C = 8, a partial pool), a REUSE-heavy case (one group REUSEd by every
token with a neighbour) and the accumulator's corners at K = 64 (X -128 or 255 against W -128; a 40-channel group
two X words a row). Shapes: 8 x 8 with 2 bands on 2 ports, 4 bands on 2, 2 bands on 4, 4 x 8 with 2 bands on 1,
16 x 8 with 4 bands on 2 and 16 x 4 with 8 bands on 4. With the host's band-tile list and with the queues
(``kaleido_dqueue``), staging entries and lanes varied; seeded random ops back to back. For each op:

- every band-tile's rows leave once, tagged (band-tile, row), with the (``out``, ``out_m``) words
  `sim.engines.band_stimulus.band_op` computes from X and W apart from the RTL; ``Y`` placed from the tags by the
  compact combine rule equals `algo.reuse.golden.apply_decisions`;
- every row leaves in the cycle `sim.timing.compact_accel` gives and ``done`` comes `caccel_cycles` after ``start``;
  the controller's band-tile numbers equal ``kaleido_ctop_ext``'s tags every cycle; the staging macros read each band-tile
  row's words once (D105: `tests.rtl.daccel_bench.staging_words`, the read enables counted every cycle);
- the X buffer's reads equal, in words, the gather's count from the decisions alone, whose bytes are the model's
  array input reads (`sim.cost.compact_actions`: ``n_cb (cc + pc)``);
- the weight buffer's reads (D109: the read enable of its one port, counted every cycle) equal the count of
  `sim.timing.compact_accel.port_schedule` (the rule cycle by cycle) and lie between one read per distinct (column
  block, group, word of 2 B channels) and one per band-tile word; the rule's count by hand on four band-tiles;
- with the queues, every descriptor equals the host list's in order (compact's issue order from ``kaleido_dqueue``
  with one column block per group).

On 8 x 8 with 2 bands on 2 ports the rows placed from the controller's outputs alone (tags and descriptors) go
through the partial-sum SRAM and ``kaleido_combine`` (`tests.rtl.compact_bench.combine_program`) to ``Y``.
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE, apply_decisions
from hw import discard
from hw.compact_accel import CompactAccel
from hw.compact_accel_host import descriptor_word, op_words, x_words
from hw.config import load_config
from hw.delta_accel import LANES
from hw.pe import PEMode
from sim.engines.band_stimulus import band_op
from sim.timing.compact import band_cycles, band_schedule
from sim.timing.compact_accel import (
    caccel_cycles,
    caccel_schedule,
    gather_reads,
    port_schedule,
    queue_steps,
    row_out_cycles,
)
from tests.rtl.caccel_bench import host_tiles, run_caccel, runs_from_tags
from tests.rtl.combine_rules import compact_y
from tests.rtl.daccel_bench import staging_words
from tests.test_rtl_compact import CASES, _case, compact_cfg, run_combine
from tests.test_rtl_compact import SHAPES as _SHAPES

#: tests/test_rtl_compact.py's shapes and two larger ones: 16 x 8 with 4 bands of 4 rows on 2 ports, and 16 x 4 with
#: 8 bands of 2 rows on 4 ports (the balanced preset's B / d = 2; C = 4, so N = 11 is three column blocks).
SHAPES = _SHAPES | {"16x8-B4-d2": (16, 8, 4, 2), "16x4-B8-d4": (16, 4, 8, 4)}


def _reuse_case():
    """Case 3's grid with group 1 REUSEd by every token that has a frame neighbour (a REUSE-only group past frame
    0), group 0 mixed."""
    c, fw = _case(5, (4, 2, 3), 9, 13, [4, 5], False, "ff", 3)
    F = c.grid[0]  # noqa: N806
    first = np.arange(c.X.shape[0]) < c.X.shape[0] // F
    c.decisions[~first, 1] = REUSE
    return c, fw


def _corner_case(x_unsigned: bool):
    """The accumulator's corner at the controller's longest K (``accel_max_k`` = 64): every X -128 (int8) or 255
    (uint8) against every W -128, groups of 40 and 24 channels (two and one 32-byte X words a row)."""
    c, fw = _case(6 + x_unsigned, (3, 2, 2), 64, 9, [40, 24], x_unsigned, "ff", None)
    c.X[:] = 255 if x_unsigned else -128
    c.W[:] = -128
    return c, fw


ALL = [*CASES, _reuse_case(), _corner_case(False), _corner_case(True)]
# (shape, case, entries, lanes, queues); entries None: 2 B
RUNS = [("8x8-B2-d2", c, None, LANES, False) for c in range(5)] + [
    ("8x8-B2-d2", 0, None, LANES, True), ("8x8-B2-d2", 4, None, LANES, True),
    ("8x8-B4-d2", 1, None, LANES, True), ("8x8-B4-d2", 2, 2, 2, False), ("4x8-B2-d1", 3, 4, 4, True),
    ("8x8-B2-d4", 0, 1, 2, True), ("8x8-B2-d4", 1, None, LANES, False),
    ("16x8-B4-d2", 1, None, LANES, True), ("16x4-B8-d4", 0, None, LANES, True),
    ("8x8-B2-d2", 5, None, LANES, True), ("8x8-B4-d2", 6, None, LANES, False),
]


def check_run(cfg, case, op, got, S, lanes, fw, queues):  # noqa: N803
    """The checks of the module docstring on one op's `tests.rtl.caccel_bench.CaccelRun`."""
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    q = queue_steps(case.decisions, case.grid, cfg, fw or case.grid[0], n_cb) if queues else None
    band, _first, last, _g = caccel_schedule(op, case.groups, cfg, S, lanes, q)
    # the weight buffer's reads (D109): the model's count of the same rule, and between one read per distinct
    # (column block, group, word) and one per band-tile word (words of 2 B channels)
    word = 2 * cfg.compact_bands
    nw = [-(-(case.groups[t.group][1] - case.groups[t.group][0]) // word) for t in op.tiles]
    assert got.w_reads == port_schedule(op, case.groups, cfg, S, lanes, q)["reads"]
    assert sum(dict(((t.cb, t.group), w) for t, w in zip(op.tiles, nw, strict=True)).values()) <= got.w_reads <= sum(nw)
    out = row_out_cycles(band, last, op.rows, cfg)
    want = {(n, i): (int(out[n][i]), t.want[i]) for n, t in enumerate(op.tiles) for i in range(len(t.tokens))}
    assert not got.twice
    assert sorted(got.rows) == sorted(want)
    for key, (cycle, words) in got.rows.items():
        assert np.array_equal(words, want[key][1]), key
        assert cycle == want[key][0], key
    assert got.cycles == caccel_cycles(op, case.groups, cfg, S, lanes, q)
    assert got.tile_mismatch == 0
    assert got.staging_reads == staging_words(case, op, lanes)  # D105: each band-tile row's words once
    rows = ((int(op.tiles[n].tokens[i]), op.tiles[n].group, op.tiles[n].n0, w) for (n, i), (_c, w) in got.rows.items())
    y = compact_y(case.decisions, case.grid, case.groups, case.W.shape[1], rows)
    assert np.array_equal(y, apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4))
    words, nbytes = gather_reads(case.decisions, case.groups, n_cb, lanes)
    assert got.x_reads == words
    need = case.decisions != REUSE  # the model's n_cb (cc + pc): needed channels of COMPUTE and PARTIAL tokens
    widths = np.array([k1 - k0 for k0, k1, _ in case.groups])
    assert nbytes == n_cb * int((need * widths).sum()) == n_cb * sum(len(t.tokens) * widths[t.group]
                                                                      for t in op.tiles[:len(op.tiles) // n_cb])
    acc = discard(CompactAccel(cfg, entries=S, lanes=lanes, queues=queues))
    assert [got.descs[n] for n in range(len(op.tiles))] == [descriptor_word(acc, case.groups, *t)
                                                           for t in host_tiles(op)]


@pytest.mark.parametrize(("shape", "ci", "entries", "lanes", "queues"), RUNS,
                         ids=[f"{s}-{c}-S{e}-P{p}{'-queues' if q else ''}" for s, c, e, p, q in RUNS])
def test_caccel_values_tags_cycles_and_reads(shape, ci, entries, lanes, queues):
    case, fw = ALL[ci]
    cfg = compact_cfg(*SHAPES[shape])
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw)
    [got] = run_caccel(cfg, [(case, op, fw)], entries=entries, lanes=lanes, queues=queues)
    check_run(cfg, case, op, got, entries or 2 * cfg.compact_bands, lanes, fw, queues)
    if shape == "8x8-B2-d2" and ci < 4 and not queues:  # the tagged rows through the partial-sum SRAM and combine unit
        acc = discard(CompactAccel(cfg))
        runs = runs_from_tags(acc, case.groups, got)
        from tests.rtl.compact_bench import combine_program

        want_y = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
        M, N, C, G = case.X.shape[0], case.W.shape[1], cfg.array_cols, len(case.groups)  # noqa: N806
        for n0, writes, cmds in combine_program(case, runs, cfg):
            y, at = run_combine(cfg, writes, cmds)
            n = min(C, N - n0)
            assert np.array_equal(y[:, :n], want_y[:, n0:n0 + n])
            assert at == [G * t + G - 1 + 2 for t in range(M)]


def test_cases_cover_the_mode_mixes():
    # both PARTIAL pairings (paired half-width band-tiles; PARTIAL rows at full width beside COMPUTE rows), a group
    # REUSEd past frame 0 (only its frame-0 tokens form band-tiles), int8 and uint8, N not a multiple of C
    cfg = compact_cfg(8, 8, 2, 2)
    ops = [band_op(c.X, c.W, c.grid, c.groups, c.decisions, cfg, fw) for c, fw in ALL]
    modes = np.concatenate([t.mode.reshape(-1) for op in ops for t in op.tiles])
    assert {int(m) for m in modes} == {int(PEMode.COMPUTE), int(PEMode.PARTIAL), int(PEMode.PAIRED), int(PEMode.REUSE)}
    assert any(t.partial.any() and not t.partial.all() for op in ops for t in op.tiles)
    assert any((t.mode == int(PEMode.PAIRED)).any() for op in ops for t in op.tiles)
    reuse_case, _ = ALL[4]
    M1 = reuse_case.X.shape[0] // reuse_case.grid[0]  # noqa: N806
    assert all(t.tokens.max() < M1 for t in ops[4].tiles if t.group == 1)
    assert {c.x_unsigned for c, _ in ALL} == {False, True}
    assert any(c.W.shape[1] % cfg.array_cols for c, _ in ALL)
    assert all((c.decisions == v).any() for c, _ in ALL[:2] for v in (COMPUTE, PARTIAL, REUSE))
    # the corners by hand: every output 64 x (-128) x (-128) = 2^20 (int8) and 64 x 255 x (-128) = -2,088,960 (uint8),
    # whatever the decisions (equal neighbours); group 0's COMPUTE rows drain 40 x 2^14 = 655,360 and 40 x 255 x
    # (-128) = -1,305,600 in out
    for (c, _), y, g0 in ((ALL[5], 1 << 20, 655_360), (ALL[6], -2_088_960, -1_305_600)):
        assert (apply_decisions(c.X, c.W, c.grid, c.groups, c.decisions, 4) == y).all()
        op = ops[ALL.index((c, _))]
        rows = [t.want[i, :c.W.shape[1] - t.n0, 0] for t in op.tiles if t.group == 0 for i in range(len(t.tokens))
                if not t.partial[i]]  # columns past N are zero padding
        assert rows and all((r == g0).all() for r in rows)


def _random_job(rng, cfg, k: int):
    F, H, W = (int(v) for v in rng.integers([2, 1, 2], [5, 3, 5]))  # noqa: N806
    sizes = [int(v) for v in rng.integers(1, 8, size=int(rng.integers(1, 4)))]
    sizes[0] += sum(sizes) < 2  # make_case sets two corner operands: K >= 2
    axes = "".join(str(rng.choice(["f", "w", "h"] if H > 1 else ["f", "w"])) for _ in sizes)
    fw = [None, 1, 2][int(rng.integers(3))]
    case, fw = _case(40 + k, (F, H, W), sum(sizes), int(rng.integers(3, 18)), sizes, bool(rng.integers(2)), axes, fw,
                     coherent=bool(rng.integers(2)))
    return case, band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw), fw


@pytest.mark.parametrize("shape", ["8x8-B2-d2", "8x8-B4-d2"])
def test_caccel_random_ops_back_to_back(shape):
    # six seeded random ops (1-3 groups of 1-8 channels, K >= 2 on f, w or h, N 3-17, int8/uint8, scattered or coherent,
    # chunk frames) one after the other on one controller with its queues: the start cycle resets kaleido_ctop's
    # drain phase and band-tile numbers and the queues
    cfg = compact_cfg(*SHAPES[shape])
    rng = np.random.default_rng(97)
    jobs = [_random_job(rng, cfg, k) for k in range(6)]
    got = run_caccel(cfg, jobs, queues=True)
    for (case, op, fw), run in zip(jobs, got, strict=True):
        check_run(cfg, case, op, run, 2 * cfg.compact_bands, LANES, fw, True)


def test_caccel_timing_is_band_schedule_plus_gather_and_the_weight_port():
    # By hand, 8 x 8, 2 bands on 2 ports, 4 band-tiles of 12 slots and 4 rows of one 12-channel group (consecutive
    # tokens: one round of one 32-byte word each), 4 entries. The array alone (band_schedule, cycle 0 its first
    # slot): bands 0, 1, 0, 1, last slots 11, 11, 23, 23. The controller (cycle 0 the cycle after start):
    # - gathers: band-tile n's descriptor read at 2 n (one round of one word), its fields held from 2 n + 2, its
    #   rows written by 2 n + 2, so its first slot no earlier than 2 n + 4 (D91);
    # - the weight port (D109): words of 2 B = 4 channels, 3 a band-tile; band b reads at its turns (cycles = b mod 2),
    #   a word read at c usable from c + 2. Band-tile 0: word 0 read at 2, first slot 4 (the gather's). Band-tile 1:
    #   fields from 4, band 1's turn at 5, word 0 from 7: first slot 7, one cycle after its gather allows;
    # - bands back to back (the early choice hands band-tile 2 to band 0 and 3 to band 1 ahead): first slots 4, 7,
    #   16, 19, last slots 15, 18, 27, 30 (the array's + 4, + 7, + 4, + 7);
    # - the op: band-tile 3's rows read at 31-34, done at 34 + C + 3 = 45 = band_cycles (37) + 7 + 1 (start).
    # Reads, turn by turn (in use = words read and not yet past their last slot; "behind": a band with two in use
    # leaves the read to a band on an earlier word of the same group): band 0 word 0 at 2, word 1 at 4; band 1
    # word 0 at 5; band 0 defers word 2 at 6 (band 1 on word 1); band 1 word 1 at 7; band 0 word 2 at 8, loaded into
    # band 1 too (its next word). Band-tiles 2 and 3 likewise: band 0 words 0, 1 at 12, 14; band 1 word 0 at 15;
    # band 0 defers word 2 at 16; band 1 word 1 at 17; band 0 word 2 at 18, loaded into band 1. So 10 reads of 12
    # band-tile words, 2 deferred.
    from types import SimpleNamespace

    cfg = compact_cfg(8, 8, 2, 2)
    s, rows = np.array([12, 12, 12, 12]), np.array([4, 4, 4, 4])
    Op = SimpleNamespace(s_seq=s, rows=rows, tiles=[SimpleNamespace(group=0, cb=0, tokens=np.arange(4) + 4 * i)  # noqa: N806
                                                    for i in range(4)])
    groups = [(0, 12, "f")]
    band, first, last, gather = caccel_schedule(Op, groups, cfg, 4, 32)
    mb, mf, ml = band_schedule(s, rows, cfg)
    assert mb.tolist() == [0, 1, 0, 1] and ml.tolist() == [11, 11, 23, 23]
    assert band.tolist() == mb.tolist() and gather.tolist() == [0, 2, 4, 6]
    assert first.tolist() == [4, 7, 16, 19] and last.tolist() == [15, 18, 27, 30]
    assert band_cycles(s, rows, cfg)[0] == 37 and caccel_cycles(Op, groups, cfg, 4, 32) == 45
    got = port_schedule(Op, groups, cfg, 4, 32)
    assert (got["reads"], got["deferred"], got["weights"], got["fill_reads"]) == (10, 2, 40, 0)


def test_host_words_and_errors():
    cfg = compact_cfg(8, 8, 2, 2)
    acc = discard(CompactAccel(cfg, lanes=4))
    groups = [(0, 3, "f"), (3, 8, "f")]
    X = np.array([[1, -2, 3, -128, 127, 0, 5, 6]], np.int64)  # noqa: N806
    # P = 4: group 0 in one word (3 bytes), group 1 in two (4 + 1)
    assert x_words(acc, X, groups) == [(0, 1 | 0xFE << 8 | 3 << 16), (1, 0x80 | 127 << 8 | 0 << 16 | 5 << 24),
                                       (2, 6)]
    with pytest.raises(ValueError, match="int8 and uint8"):
        op_words(acc, np.full((1, 8), 256), np.zeros((8, 8), np.int64), groups, [])
    with pytest.raises(ValueError, match="compact organisation"):
        CompactAccel(load_config("tiny-8x8"))
    with pytest.raises(ValueError, match="power of two"):
        CompactAccel(cfg, entries=3)


# The emission and lint of kaleido_caccel (and kaleido_dqueue under it) is tests/test_rtl_ccore.py's: one emission of
# the whole hierarchy from kaleido_ccore, checked from both tops.
