"""The delta controller with its weight stage (`hw.delta_accel.DeltaAccel` with ``stage=True``, docs/decisions.md
D96) under Amaranth's simulator, against the model of its cycles and counts (`sim.timing.delta_accel.
stage_schedule`), the golden model, and the trace model's counts (`sim.engines.model`).

Cases: tests/test_rtl_delta.py's seeded cases and qk-like cases (every decision mix incl. PAIRED band-tiles and
flushes, scattered and coherent, int8 and uint8, ``f``/``w``/``h`` groups, odd widths, N = 11 and 5 against C = 8),
plus groups wider than a stage word of non-multiple widths (13/14/13, over five column blocks and over two), one
group of 64 (two buffers in a bank; in D68's order a segment per band-tile, so fills wait for their buffer) and
sliced groups (D88: a group of 70 over a 64-channel slice limit, two slices of 35); on 8 x 8 with 2 bands on 2 and
4 ports, 4 bands on 2, 1 band on 1 and 8 on 2, and 4 x 8 with 2 bands on 1; the model's issue order (D84
chunk-major, slice by slice) and D68's with two column blocks per group. For each op:

- every band-tile's rows leave once, tagged, with `sim.engines.band_stimulus.band_op`'s difference sums, and Y
  from the tags equals `algo.reuse.golden.apply_decisions` on the case's own groups (sliced ones too);
- every row's cycle and ``done`` equal `stage_schedule`'s; the band-tile numbers equal ``kaleido_dtop``'s;
- the stage reads, weight-buffer reads (fills) and stage writes counted on the RTL equal `stage_schedule`'s; the
  staging macros read each band-tile row's words once (D105: `tests.rtl.daccel_bench.staging_words`).
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import apply_decisions
from hw import discard
from hw.config import AcceleratorConfig
from hw.delta_accel import LANES, DeltaAccel
from hw.delta_accel_host import stage_plan, stage_w_words
from sim.timing.delta_accel import drain_reads, gather_rounds, row_out_cycles, stage_schedule, staged_tiles
from tests.rtl.cases import make_case
from tests.rtl.combine_rules import delta_y
from tests.rtl.daccel_bench import host_tiles, run_staged, staged_op, staging_words
from tests.test_rtl_delta import CASES, QK_CASES, SHAPES, delta_cfg


def stage_cfg(shape: str, kib: int = 1) -> AcceleratorConfig:
    """tests/test_rtl_delta.py's shape with a difference-sum buffer and a ``kib`` KiB weight stage (1 KiB at C = 8:
    128 bytes per column bank, 64 half-words at B = 2)."""
    c = delta_cfg(*(SHAPES.get(shape) or EXTRA_SHAPES[shape]))
    return AcceleratorConfig.model_validate(c.model_dump() | {"diff_sram_kib": 8, "wstage_sram_kib": kib})


#: Band counts at the ends: one band (every cycle its turn) and eight (one row each, words of 16 channels).
EXTRA_SHAPES = {"8x8-B1-d1": (8, 8, 1, 1), "8x8-B8-d2": (8, 8, 8, 2)}


def _wide(seed, N, x_unsigned=False):  # noqa: N803  groups of 13/14/13 (wider than a word of 4, not multiples of B)
    from tests.test_rtl_delta import _case

    return _case(seed, (3, 2, 4), 40, N, [13, 14, 13], x_unsigned, "f", None, 1)[0]


def _sliced(seed):  # K = 90: 2 K over a 128-byte bank, so D88's slices: 70 -> 35 + 35, 20 whole
    c = make_case(f"sliced{seed}", 500 + seed, (3, 2, 3), 90, 5, [70, 20])
    return c


def _one_wide(seed):  # one group of 64: a 32-half-word buffer, two in a bank
    from tests.test_rtl_delta import _case

    return _case(seed, (3, 2, 4), 64, 11, [64], False, "f", None, 1)[0]


SPECIAL = {"wide": _wide(41, 37), "wide-uint8": _wide(42, 11, True), "sliced": _sliced(1), "one-wide": _one_wide(43),
           # four tokens, one group: 4 band-tiles on 8 bands, so bands 4-7 start idle (D99)
           "few": make_case("few", 700, (1, 1, 4), 8, 5, [8])}
MAX_K = {"sliced": 96}


def _get(ci):
    if isinstance(ci, int):
        return CASES[ci][0]
    return QK_CASES.get(ci) or SPECIAL[ci]


def model_of(cfg, job, S, P, max_k=None, early=True, defer=None, ring=0):  # noqa: N803
    """`stage_schedule` of one `StagedOp` with the host's stage fields (`stage_plan`), plus its per-row out cycles
    and op cycles (`row_out_cycles`, ``max read + C + 3``); ``early``: the early band choice (D99); ``defer``: the
    deferred stage read (D100's ``defer="behind"``; default ``early``, as `DeltaAccel`); ``ring``: the descriptor
    ring's entries (D134; 0: none)."""
    acc = discard(DeltaAccel(cfg, entries=S, lanes=P, max_k=max_k, stage=True, early=early, defer=defer))
    plan, nbuf, _size = stage_plan(acc, job.case.groups, host_tiles(job.op), job.segment, job.sliced)
    widths = np.array([job.case.groups[t.group][1] - job.case.groups[t.group][0] for t in job.op.tiles])
    rounds = gather_rounds([t.tokens for t in job.op.tiles], cfg.array_rows // cfg.compact_bands)
    paired = [bool(t.partial.all()) and t.slots < w for t, w in zip(job.op.tiles, widths, strict=True)]
    r = stage_schedule(job.op.s_seq, job.op.rows, widths, rounds, paired, *([p[k] for p in plan] for k in (
        "seg", "sbuf", "fcount", "saddr")), cfg, S, P, early=acc.early,
        defer="behind" if acc.defer else "off", ring=ring)
    r["cycles"] = int(drain_reads(r["band"], r["last"], job.op.rows, cfg).max()) + cfg.array_cols + 3
    r["out"] = row_out_cycles(r["band"], r["last"], job.op.rows, cfg)
    r["nbuf"], r["paired"], r["widths"] = nbuf, np.array(paired), widths
    return r


# (shape, case, entries, lanes, chunk-major, column blocks per group in D68's order[, early[, defer]]); defer
# (D100's deferred stage read) defaults to early, as DeltaAccel's
RUNS = [("8x8-B2-d2", c, None, LANES, True, None) for c in range(4)] + [
    ("8x8-B4-d2", 1, None, LANES, True, None), ("4x8-B2-d1", 2, 2, 4, True, None),
    ("8x8-B2-d4", 0, None, LANES, True, None), ("8x8-B2-d2", "qk-int8", None, LANES, True, None),
    ("8x8-B4-d2", "three-axes", 2, LANES, True, None), ("8x8-B2-d2", "wide", None, LANES, True, None),
    ("8x8-B2-d2", "wide-uint8", None, 8, False, 2), ("8x8-B4-d2", "qk-uint8-coherent", None, LANES, False, 2),
    ("8x8-B2-d2", "sliced", None, LANES, True, None), ("8x8-B2-d2", 1, 1, 2, False, 2),
    ("8x8-B2-d2", "one-wide", None, LANES, False, 2), ("8x8-B1-d1", 0, None, LANES, True, None),
    ("8x8-B8-d2", 0, None, LANES, True, None), ("8x8-B8-d2", "few", None, LANES, True, None),
    # kaleido_dtop's own band choice (D96), still built with early=False
    ("8x8-B2-d2", "wide", None, LANES, True, None, False), ("8x8-B4-d2", 1, None, LANES, True, None, False),
    # reads the deferred stage read skips (D100): "next" and "behind" (wide on B = 4: "behind" only), on 8 bands;
    # without it (as D99 built) and with it on kaleido_dtop's own choice
    ("8x8-B4-d2", "wide", None, LANES, True, None), ("8x8-B8-d2", "one-wide", None, LANES, True, None),
    ("8x8-B2-d2", "wide", None, LANES, True, None, True, False), ("8x8-B2-d2", "wide", None, LANES, True, None, False, True),
]


def _run_args(r):
    """A run's parameters with ``early`` (True) and ``defer`` (None) filled in."""
    return (*r, *(True, None)[len(r) - 6:])


def _run_id(r):
    early, defer = _run_args(r)[6:]
    on = early if defer is None else defer
    return (f"{r[0]}-{r[1]}-S{r[2]}-P{r[3]}{'' if r[4] else '-d68'}{'' if early else '-late'}"
            f"{'' if on == early else ('-defer' if on else '-nodefer')}")


@pytest.mark.parametrize(("shape", "ci", "entries", "lanes", "cm", "s", "early", "defer"),
                         [_run_args(r) for r in RUNS], ids=[_run_id(r) for r in RUNS])
def test_staged_values_cycles_and_counts(shape, ci, entries, lanes, cm, s, early, defer):
    cfg = stage_cfg(shape)
    case = _get(ci)
    job = staged_op(case, cfg, chunk_major=cm, s=s)
    S = entries or 2 * cfg.compact_bands  # noqa: N806
    mk = MAX_K.get(ci)
    [got] = run_staged(cfg, [job], entries=entries, lanes=lanes, max_k=mk, early=early, defer=defer)
    m = model_of(cfg, job, S, lanes, mk, early, defer)
    op = job.op
    assert not got.twice
    want = {(n, i): (int(m["out"][n][i]), t.want[i, :, 0]) for n, t in enumerate(op.tiles) for i in range(len(t.tokens))}
    assert sorted(got.rows) == sorted(want)
    for key, (cycle, words) in got.rows.items():
        assert np.array_equal(words, want[key][1]), key
        assert cycle == want[key][0], key
    assert got.cycles == m["cycles"]
    assert got.tile_mismatch == 0
    assert (got.stage_reads, got.fill_reads, got.fill_writes) == (m["reads"], m["fill_reads"], m["fill_reads"])
    assert got.deferred == m["deferred"]
    assert got.staging_reads == staging_words(job.case, op, lanes)  # D105: each band-tile row's words once
    # Y from the tags alone, on the case's own groups (a sliced group's slices sum to its product, D88)
    rows = ((int(op.tiles[n].tokens[i]), op.tiles[n].group, op.tiles[n].n0, w[:, None])
            for (n, i), (_c, w) in got.rows.items())
    y = delta_y(job.case.decisions, job.case.grid, job.case.groups, case.W.shape[1], rows)
    assert np.array_equal(y, apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4))
    if ci == "one-wide" and not cm:  # a segment per band-tile (D68's order, two column blocks) in two buffers: fills wait
        assert m["fill_wait"] > 0 and m["nbuf"] == 2


def test_stage_schedule_by_hand():
    """8 x 8, B = 2 (turns: band 0 on even cycles), d = 2 (a port per band), S = 4, P = 32. Two band-tiles of one
    group of 3 channels (one stage word, 2 half-words to fill), 3 slots, one row each, one round of one X word.

    One segment: gather 0 at 0 (first slot >= 0 + 1 + 3 = 4; fields held from 2), gather 1 at 2 (first slot >= 6,
    fields from 4). The fill pointer meets band-tile 0 at 2: fill reads 2 and 3, passes at 3, words readable from
    5. Band-tile 1 passes at 4 (readable from 6). Band 0's turn at 6 reads the word (half-words 0, 1); band 1's
    next word is the same, so it loads too: one read of 3 weights, in both registers from 8. Both bands wait 4 and
    2 cycles (late 6), issue their first slots at 8 and last at 10.

    Two segments in one buffer: band-tile 1's fill waits from 4 until band-tile 0's last slot (10) has issued: it
    reads 11 and 12 (7 cycles waited), band 1's turn at 15 reads its word (13 is a turn too early: readable from
    14), first slot 17, last 19; late 4 + 11 = 15; 2 reads of 3 weights."""
    cfg = stage_cfg("8x8-B2-d2")
    args = dict(s_seq=[3, 3], rows=[1, 1], widths=[3, 3], rounds=[1, 1], paired=[0, 0], sbuf=[0, 0],
                fcount=[2, 2], saddr=[0, 0], cfg=cfg, entries=4, lanes=32)
    r = stage_schedule(seg=[1, 0], **args)
    assert r["band"].tolist() == [0, 1] and r["first"].tolist() == [8, 8] and r["last"].tolist() == [10, 10]
    assert r["gather"].tolist() == [0, 2] and r["fills"].tolist() == [2]
    assert (r["reads"], r["weights"], r["late"], r["fill_wait"], r["fill_reads"]) == (1, 3, 6, 0, 2)
    r = stage_schedule(seg=[1, 1], **args)
    assert r["first"].tolist() == [8, 17] and r["last"].tolist() == [10, 19] and r["fills"].tolist() == [2, 11]
    assert (r["reads"], r["weights"], r["late"], r["fill_wait"], r["fill_reads"]) == (2, 6, 15, 7, 4)


def test_early_band_choice_by_hand():
    """The first hand case's two band-tiles and a third of the same segment and group (3 slots, one row), with the
    early band choice (D99). As there: gathers at 0, 2, 4 (band-tile 2's fields held from 6, first slot >= 8), one
    fill (reads 2, 3), band 0's turn at 6 reads the word for both bands, first slots at 8, last at 10; E = 8 + 3 - 1
    = 10 on both bands from the first slot. Both are candidates from 9 (started before it); the tie goes to band
    0, whose E is within 2 B = 4 cycles (10 <= 9 + 4): band-tile 2 is its next from 10, E = max(10 + 3, 10 + 1 row
    x q = 11) = 13. Band 0's turn at 10: its band-tile's one word is read, so it reads band-tile 2's word (the last
    slot pops the word in use in the same cycle: a register free); the word is there from 12, so band-tile 2's
    first slot waits one cycle (11) and issues at 12, last at 14. Late 4 + 2 + 1 = 7, reads 2 of 3 weights each.
    With kaleido_dtop's own choice band 0 learns band-tile 2 at its last slot (10), reads at its turn 12 and
    issues at 14..16."""
    cfg = stage_cfg("8x8-B2-d2")
    args = dict(s_seq=[3, 3, 3], rows=[1, 1, 1], widths=[3, 3, 3], rounds=[1, 1, 1], paired=[0, 0, 0], seg=[1, 0, 0],
                sbuf=[0, 0, 0], fcount=[2, 2, 2], saddr=[0, 0, 0], cfg=cfg, entries=4, lanes=32)
    r = stage_schedule(early=True, **args)
    assert r["band"].tolist() == [0, 1, 0] and r["first"].tolist() == [8, 8, 12] and r["last"].tolist() == [10, 10, 14]
    assert (r["reads"], r["weights"], r["late"], r["fill_wait"], r["fill_reads"]) == (2, 6, 7, 0, 2)
    r = stage_schedule(**args)
    assert r["band"].tolist() == [0, 1, 0] and r["first"].tolist() == [8, 8, 14] and r["last"].tolist() == [10, 10, 16]


def test_deferred_reads_and_barrier_by_hand():
    """D100's options of `stage_schedule` (model only, not built). 8 x 8, B = 2 (band 0's turn on even cycles), one
    group of 16 channels (4 words of 2 B = 4, L = 4 slots each), two band-tiles of one segment, 16 slots, one row;
    band-tile 1 takes 12 gather rounds, so the bands run 3 cycles apart.

    Gathers at 0 (first slot >= 4) and 2 (first slot >= 2 + 12 + 3 = 17). The fill reads 8 half-words 2..9:
    band-tile 0 readable from 11, band-tile 1 passes at 10, readable from 12. Turns 12, 13, 14 read words 0, 1, 2,
    each loaded into both bands (both free), there from 14, 15, 16. Band 0 issues 14..29 (late 4..13: 10), band 1
    17..32. Band 0 uses word 0 on 14..17 and pops it at 17, so at its turn 18 it has a register free for word 3;
    band 1 needs word 3 too but holds words 0-2 until its pop at 20. Default: band 0 reads word 3 at 18 for itself,
    band 1 at its turn 21 for itself: 5 reads, 20 weights. ``defer="next"`` (and ``"behind"``): at 18 band 0 still
    holds words 1 and 2 (two in use), band 1's next word is the same and it is full: band 0 skips (1 deferred); at
    its turn 20 band 1 pops in the same cycle (a register free), so band 0's read of word 3 loads into both: 4
    reads, 16 weights, the same cycles. ``barrier="first"``: band 0 holds its first slot until band-tile 1 is past
    its gather (17): both issue 17..32, in step, and every read loads both: 4 reads with 3 word registers, no
    deferral. The early choice changes nothing here (two band-tiles, two bands)."""
    cfg = stage_cfg("8x8-B2-d2")
    args = dict(s_seq=[16, 16], rows=[1, 1], widths=[16, 16], rounds=[1, 12], paired=[0, 0], seg=[1, 0], sbuf=[0, 0],
                fcount=[8, 8], saddr=[0, 0], cfg=cfg, entries=4, lanes=32)
    for early in (False, True):
        r = stage_schedule(early=early, **args)
        assert r["first"].tolist() == [14, 17] and r["last"].tolist() == [29, 32]
        assert (r["reads"], r["weights"], r["late"], r["deferred"]) == (5, 20, 10, 0)
        for d in ("next", "behind"):
            r = stage_schedule(early=early, defer=d, **args)
            assert r["first"].tolist() == [14, 17] and r["last"].tolist() == [29, 32]
            assert (r["reads"], r["weights"], r["late"], r["deferred"]) == (4, 16, 10, 1)
        r = stage_schedule(early=early, barrier="first", **args)
        assert r["first"].tolist() == [17, 17] and r["last"].tolist() == [32, 32]
        assert (r["reads"], r["weights"], r["late"], r["deferred"]) == (4, 16, 10, 0)
    with pytest.raises(ValueError, match="defer must be"):
        stage_schedule(defer="yes", **args)
    with pytest.raises(ValueError, match="barrier must be"):
        stage_schedule(barrier=True, **args)


@pytest.mark.parametrize("ci", [0, 1, "qk-int8", "wide", "sliced"])
def test_staged_path_is_the_trace_model_path(ci):
    """The bench's staged op is the trace model's (`staged_tiles`: D84's order, D85's segments, D88's slices), and
    the fill traffic the host plans equals `simulate_trace`'s weight-SRAM reads and stage writes (chunks x K x N
    bytes). The fill cycles: the RTL's group-aligned half-words, Σ ceil(|g| / B) per segment (whole K) or
    ceil(|slice| / B), against the model's Σ ceil(|g| / B) (D96, plan item 5, taken) and ceil(widest slice / B). Stage reads: each (segment, group) word at least once, at most once per band-tile."""
    from algo.trace import Group, OpRecord, Trace, pack_decisions
    from sim.engines.model import simulate_trace

    cfg = stage_cfg("8x8-B2-d2")
    case = _get(ci)
    job = staged_op(case, cfg)
    K, N = case.W.shape  # noqa: N806
    st = staged_tiles(case.decisions, case.grid, case.groups, cfg, K, N)
    assert st is not None
    assert np.array_equal(st["s_seq"], job.op.s_seq) and np.array_equal(st["segment"], job.segment)
    assert st["group"].tolist() == [t.group for t in job.op.tiles]
    m = model_of(cfg, job, 4, LANES, MAX_K.get(ci))
    assert np.array_equal(st["paired"], m["paired"]) and m["paired"].any()  # PAIRED band-tiles in every case here
    op = OpRecord("o_proj", 0, 0, None, None, [Group(k0, k1, ax) for k0, k1, ax in case.groups], (0.0, 0.0),
                  dims=(1, case.decisions.shape[0], K, N), decisions=pack_decisions(case.decisions)[None, None],
                  thetas=((0.0, 0.0),))
    a = simulate_trace(Trace(grid=case.grid, ops=[op], model="test", size="test", weights="none"), cfg)["per_op"][0][
        "actions"]
    C, B = cfg.array_cols, cfg.compact_bands  # noqa: N806
    heads = [n for n in range(len(job.op.tiles)) if n == 0 or job.segment[n] != job.segment[n - 1]]
    widths = [k1 - k0 for k0, k1, _ in job.case.groups]
    fills = sum(-(-widths[job.op.tiles[n].group] // B) if job.sliced else sum(-(-w // B) for w in widths)
                for n in heads)
    assert m["fill_reads"] == fills
    # D127: the model charges the controller's own traffic (`m` counts as the RTL does,
    # test_staged_values_cycles_and_counts): each fill read a weight-buffer word of B channels x C and a stage
    # half-word written, each stage read a word of 2 B channels from both half-word macros of the C column banks
    assert a["sram_weight_read_bytes"] == a["sram_wstage_write_bytes"] == fills * B * C
    assert a["sram_wstage_read_bytes"] == m["reads"] * 2 * B * C
    if job.sliced:  # the model fills every slice as its widest (`stage_fill_cycles` of the held width)
        assert fills <= len(heads) * st["fill"]
    else:  # group-aligned half-words, the model's count since D96's plan item 5: Σ ceil(|g| / B) a fill
        assert fills == len(heads) * st["fill"]
    seen = {(int(job.segment[n]), t.group) for n, t in enumerate(job.op.tiles)}
    assert sum(widths[g] for _, g in seen) <= m["weights"] <= sum(widths[t.group] for t in job.op.tiles)


def test_stage_host_words_and_errors():
    cfg = stage_cfg("8x8-B2-d2")
    acc = discard(DeltaAccel(cfg, lanes=8, stage=True))
    groups = [(0, 3, "f"), (3, 8, "f")]
    W = np.arange(8 * 9, dtype=np.int64).reshape(8, 9) % 100  # noqa: N806  N = 9: two column blocks
    words = dict(stage_w_words(acc, W, groups))
    # group 1 (5 channels) at half-words 2, 3, 4 of a block (B = 2: 2 channels a half-word); block 1 at KWH
    assert acc.KWH == 64 and sorted(words) == [0, 1, 2, 3, 4, 64, 65, 66, 67, 68]
    lane = lambda word, i: (word >> (8 * i)) & 0xFF  # noqa: E731  lane h C + c
    assert [lane(words[4], h * 8 + c) for h in range(2) for c in (0, 7)] == [W[7, 0], W[7, 7], 0, 0]
    # block 1, group 0's half-word 1: channel 2 of column 8 (its lane 0), channel 3 is past the group, column 9 past N
    assert (lane(words[65], 0), lane(words[65], 8), lane(words[65], 1)) == (W[2, 8], 0, 0)
    tiles = [(0, 0, [1], 1, 3), (1, 0, [1], 1, 5), (0, 1, [2], 1, 3)]
    plan, nbuf, size = stage_plan(acc, groups, tiles, [0, 0, 1], sliced=False)
    assert (nbuf, size) == (64 // 5, 5)  # 2 + 3 half-words a buffer, 64 half-words a bank
    assert [p["seg"] for p in plan] == [1, 0, 1] and [p["saddr"] for p in plan] == [0, 2, 5]
    assert [(p["fsrc"], p["fcount"], p["fdst"], p["sbuf"]) for p in plan] == [(0, 5, 0, 0)] * 2 + [(64, 5, 5, 1)]
    with pytest.raises(ValueError, match="mixes column blocks"):
        stage_plan(acc, groups, tiles, [0, 0, 0], sliced=False)
    with pytest.raises(ValueError, match="numbered"):
        stage_plan(acc, groups, tiles, [0, 2, 2], sliced=False)
    with pytest.raises(ValueError, match="weight stage needs"):
        DeltaAccel(cfg, stage=True, queues=True)
    with pytest.raises(ValueError, match="weight stage needs"):
        DeltaAccel(delta_cfg(*SHAPES["8x8-B2-d2"]), stage=True)
    with pytest.raises(ValueError, match="early band choice"):
        DeltaAccel(cfg, early=True)
    with pytest.raises(ValueError, match="deferred stage read"):
        DeltaAccel(cfg, defer=True)
    # the deferred read follows the early choice unless asked (D100): on with it, off without it
    assert [discard(DeltaAccel(cfg, stage=True, early=e, defer=f)).defer
            for e, f in ((True, None), (False, None), (True, False), (False, True))] == [True, False, False, True]
    from hw.compact_array import CompactTop

    with pytest.raises(ValueError, match="choice must be"):
        CompactTop(cfg, choice="ahead")


def test_dstage_emits_reproducibly_and_lints_clean(tmp_path):
    # kaleido_daccel_stage_gate (kaleido_daccel_stage with the issue gate, what `make rtl` emits since D129; the
    # gateless one only on request, hw.rtl.OPTIONAL_ROLES) with everything below it on an 8 x 8 delta config with a
    # stage: the same bytes twice, no paths, each macro instantiated by name, Verilator -Wall clean per file and over
    # the whole hierarchy.
    import re
    from pathlib import Path

    from hw.delta_accel import DSGATE_MODULE_NAME, DSTAGE_MODULE_NAME
    from hw.lint import lint_folder
    from hw.rtl import emit, plan
    from hw.sram import macro_name

    cfg = stage_cfg("8x8-B2-d2")
    assert DSGATE_MODULE_NAME in [name for name, _, _ in plan(cfg)]
    assert DSTAGE_MODULE_NAME in [name for name, _, _ in plan(cfg, optional=True)]
    assert DSGATE_MODULE_NAME not in [name for name, _, _ in plan(delta_cfg(*SHAPES["8x8-B2-d2"]))]  # no stage
    macros = [macro_name(*mc) for mc in discard(DeltaAccel(cfg, pe="instance", stage=True, issue_gate=True)).macros()]
    assert "kaleido_sram_1r1w_32x16" in macros  # a column bank's half-word macro: 64 half-words of B = 2 bytes
    names = (DSGATE_MODULE_NAME, "kaleido_dtop_ext", "kaleido_dcolumn", "kaleido_dpe", "kaleido_top", "kaleido_column",
             "kaleido_pe", *macros)
    a = emit(cfg, tmp_path / "a", only=names)
    b = emit(cfg, tmp_path / "b", only=(DSGATE_MODULE_NAME,))
    assert (tmp_path / "a" / b[0].name).read_bytes() == b[0].read_bytes()
    assert sorted(p.name for p in a) == sorted(f"{n}.v" for n in names)
    text = b[0].read_text()
    assert str(Path.cwd()) not in text and str(tmp_path) not in text and "kaleido_dtop_ext " in text
    for name in macros:
        assert re.search(rf"^\s*{name} \S+\s+\(", text, re.M), name
    assert len(re.findall(r"^\s*kaleido_sram_1r1w_32x16 ", text, re.M)) == 2 * cfg.array_cols
    runs = lint_folder(tmp_path / "a", full=True, jobs=2, tops=(DSGATE_MODULE_NAME,))
    assert all(ok for _, ok, _, _ in runs), [(label, out[:600]) for label, ok, _, out in runs if not ok]
    assert f"{DSGATE_MODULE_NAME}.v whole hierarchy" in {label for label, *_ in runs}


def test_staged_ops_back_to_back():
    # three ops one after the other on one controller (the start cycle resets the fill pointer, the word registers
    # and the turn): each op's rows, cycles and counts as the first test checks them
    cfg = stage_cfg("8x8-B2-d2")
    jobs = [staged_op(_get(ci), cfg, chunk_major=cm, s=s) for ci, cm, s in ((0, True, None), ("one-wide", False, 2),
                                                                            ("qk-int8", True, None))]
    runs = run_staged(cfg, jobs)
    for job, got in zip(jobs, runs, strict=True):
        m = model_of(cfg, job, 4, LANES)
        assert got.cycles == m["cycles"] and got.tile_mismatch == 0 and not got.twice
        assert (got.stage_reads, got.fill_reads) == (m["reads"], m["fill_reads"])
        for n, t in enumerate(job.op.tiles):
            for i in range(len(t.tokens)):
                cycle, words = got.rows[(n, i)]
                assert cycle == m["out"][n][i] and np.array_equal(words, t.want[i, :, 0])
