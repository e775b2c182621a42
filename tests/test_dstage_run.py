"""`sim.timing.delta_accel.stage_run`, the staged delta controller's rule compiled (numba, docs/decisions.md D121),
against `stage_schedule` (the plain-Python rule the RTL, ``kaleido_daccel_stage``, is checked against cycle for
cycle in tests/test_rtl_dstage.py) key for key: on the RTL benches' staged ops with the host's stage fields
(`hw.delta_accel_host.stage_plan`) and on seeded random staged ops; and `stage_fields` (the model's restatement of
the host's stage fields) against `stage_plan`."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from hw import discard
from hw.config import AcceleratorConfig
from hw.delta_accel import LANES, DeltaAccel
from hw.delta_accel_host import stage_plan
from sim.timing.compact import band_rows
from sim.timing.delta_accel import gather_rounds, stage_fields, stage_run, stage_schedule
from tests.rtl.daccel_bench import host_tiles, staged_op
from tests.test_rtl_delta import delta_cfg
from tests.test_rtl_dstage import RUNS, _get, _run_args, stage_cfg

KEYS = ("band", "first", "last", "gather", "fills")
COUNTS = ("fill_wait", "late", "reads", "weights", "fill_reads", "deferred")
FIELDS = ("seg", "sbuf", "fcount", "saddr")


def _equal(got: dict, want: dict, where) -> None:
    for key in KEYS:
        assert np.array_equal(got[key], want[key]), (where, key)
    for key in COUNTS:
        assert got[key] == want[key], (where, key)


def _args(op, widths, cfg, fields):
    rounds = gather_rounds([t.tokens for t in op.tiles], band_rows(cfg))
    return (op.s_seq, op.rows, widths, rounds, fields["paired"], *(fields[k] for k in FIELDS), cfg)


#: tests/test_rtl_dstage.py's runs with the controller as `hw.rtl` builds it (early choice, deferred read)
BUILT = [r for r in map(_run_args, RUNS) if r[6] and r[7] is None]


@pytest.mark.parametrize("run", BUILT, ids=[f"{r[0]}-{r[1]}-S{r[2]}-P{r[3]}{'' if r[4] else '-d68'}" for r in BUILT])
def test_stage_run_on_the_rtl_benches_ops(run):
    """The RTL benches' staged ops (whole-K in D84's order, D88's slices, one group of 64 in two buffers, D68's
    order with a segment per band-tile, 1, 2, 4 and 8 bands on 1-4 ports): `stage_fields` equals `stage_plan`'s
    fields, and `stage_run` equals `stage_schedule(early=True, defer="behind")` on them, every key."""
    from tests.test_rtl_dstage import MAX_K

    shape, ci, entries, lanes, cm, s = run[:6]
    cfg = stage_cfg(shape)
    job = staged_op(_get(ci), cfg, cm, s)
    B = cfg.compact_bands  # noqa: N806
    S, P = entries or 2 * B, lanes or LANES  # noqa: N806
    acc = discard(DeltaAccel(cfg, entries=S, lanes=P, max_k=MAX_K.get(ci), stage=True))
    plan, nbuf, size = stage_plan(acc, job.case.groups, host_tiles(job.op), job.segment, job.sliced)
    grp = np.array([t.group for t in job.op.tiles], dtype=np.int64)
    f = stage_fields(job.segment, grp, job.case.groups, cfg, job.sliced)
    assert (f["buffers"], f["size"]) == (nbuf, size)
    for k in FIELDS:
        assert f[k].tolist() == [int(p[k]) for p in plan], k
    widths = np.array([job.case.groups[g][1] - job.case.groups[g][0] for g in grp], dtype=np.int64)
    f["paired"] = [bool(t.partial.all()) and t.slots < w for t, w in zip(job.op.tiles, widths, strict=True)]
    args = _args(job.op, widths, cfg, f)
    want = stage_schedule(*args, S, P, early=True, defer="behind")
    _equal(stage_run(*args, S, P), want, run)
    assert len(want["fills"]) == int(f["seg"].sum())  # every segment filled once


def _random_staged(rng, cfg: AcceleratorConfig, n_tiles: int, sliced: bool):
    """A seeded staged op: groups of 1-40 channels, band-tiles of random groups (some PAIRED: half the slots),
    random valid rows and tokens, cut into 1-12 stage segments (``sliced``: each segment one group, as D88's slices
    issue; else any groups of one column block), with `stage_fields`' fields on 1-3 of its buffers."""
    G = int(rng.integers(1, 5))  # noqa: N806
    widths = rng.integers(1, 41, G)
    bounds = np.r_[0, np.cumsum(widths)]
    groups = [(int(bounds[g]), int(bounds[g + 1]), "f") for g in range(G)]
    brows = band_rows(cfg)
    seg = np.sort(rng.integers(0, int(rng.integers(1, 13)), n_tiles))
    seg = np.cumsum(np.r_[0, np.diff(seg) != 0])
    grp = rng.integers(0, G, n_tiles)
    if sliced:  # a segment per run of one slice: cut where the group changes
        grp = grp[np.lexsort((grp, seg))]
        seg = np.cumsum(np.r_[0, (np.diff(seg) != 0) | (np.diff(grp) != 0)])
    tiles, s_seq, rows = [], [], []
    for g in grp:
        v, w = int(rng.integers(1, brows + 1)), int(widths[g])
        half = w > 1 and rng.random() < 0.3
        s_seq.append((w + 1) // 2 if half else w)
        rows.append(v)
        tiles.append(SimpleNamespace(group=int(g), tokens=rng.choice(4 * cfg.array_rows, v, replace=False)))
    B, C = cfg.compact_bands, cfg.array_cols  # noqa: N806
    halves = -(-widths // B)
    size = int(halves[grp].max(initial=1)) if sliced else int(halves.sum())
    kib = -(-int(rng.integers(2, 6)) * size * B * C // 1024)  # a column bank of at least 2 buffers
    scfg = AcceleratorConfig.model_validate(cfg.model_dump() | {"diff_sram_kib": 8, "wstage_sram_kib": kib})
    f = stage_fields(seg, grp, groups, scfg, sliced)
    nb = int(rng.integers(1, 4))  # fewer buffers than the bank holds (1-3), so that fills wait for theirs
    f["saddr"] = f["saddr"] - f["sbuf"] * size + (seg % nb) * size
    f["sbuf"] = seg % nb
    w_t = widths[grp].astype(np.int64)
    f["paired"] = (np.array(s_seq) < w_t).astype(np.int64)
    return SimpleNamespace(s_seq=np.array(s_seq), rows=np.array(rows), tiles=tiles), w_t, scfg, f


#: (rows, cols, bands, ports): 2, 4, 8 bands on 1, 2, 4 ports
RANDOM_SHAPES = [(8, 8, 2, 1), (8, 8, 2, 2), (8, 8, 2, 4), (8, 8, 4, 1), (8, 8, 4, 2), (16, 4, 4, 4), (16, 8, 8, 2),
                 (16, 4, 8, 4)]


@pytest.mark.parametrize("shape", RANDOM_SHAPES, ids=[f"{r}x{c}-B{b}-d{d}" for r, c, b, d in RANDOM_SHAPES])
def test_stage_run_equals_stage_schedule_on_random_ops(shape):
    """Seeded random staged ops (whole-K and sliced segments, PAIRED band-tiles, 1-40 band-tiles in 1-12 segments,
    1-3 stage buffers; staging entries 1, 2, 2 B; lanes 2, 8, 32): `stage_run` equals `stage_schedule(early=True,
    defer="behind")`, every key."""
    cfg = delta_cfg(*shape)
    rng = np.random.default_rng(121 + sum(shape))
    fills = 0
    for trial in range(30):
        op, widths, scfg, f = _random_staged(rng, cfg, int(rng.integers(1, 41)), trial % 2 == 1)
        S, P = int(rng.choice([1, 2, 2 * cfg.compact_bands])), int(rng.choice([2, 8, 32]))  # noqa: N806
        args = _args(op, widths, scfg, f)
        want = stage_schedule(*args, S, P, early=True, defer="behind")
        _equal(stage_run(*args, S, P), want, trial)
        fills += want["fill_wait"] > 0
    assert fills  # some fills waited for their buffer


def test_stage_fields_by_hand():
    """8 x 8, B = 2, a 1 KiB stage: a column bank of 1024 / 8 / 2 = 64 half-words. Groups of 5, 8, 3 channels take
    3, 4, 2 half-words (hoff 0, 3, 7): a whole-K buffer of 9, 64 // 9 = 7 buffers; segments 0 0 1 | 7 (buffer 0
    again) on groups 1 2 0 | 2: saddr 0 + 3, 0 + 7, 9 + 0, 0 + 7. Sliced, slices of 5 and 8 channels heading
    segments (3 and 4 half-words): buffers of 4, 16 of them; segment 1's fill 4 half-words, segment 0's 3."""
    cfg = AcceleratorConfig.model_validate(delta_cfg().model_dump() | {"diff_sram_kib": 8, "wstage_sram_kib": 1})
    groups = [(0, 5, "f"), (5, 13, "f"), (13, 16, "f")]
    seg = [0, 0, 1, 2, 3, 4, 5, 6, 7]
    f = stage_fields(seg, [1, 2, 0, 0, 0, 0, 0, 0, 2], groups, cfg, False)
    assert (f["buffers"], f["size"]) == (7, 9)
    assert f["seg"].tolist() == [1, 0, 1, 1, 1, 1, 1, 1, 1]
    assert f["sbuf"].tolist() == [0, 0, 1, 2, 3, 4, 5, 6, 0]
    assert f["saddr"].tolist()[:3] + f["saddr"].tolist()[-1:] == [3, 7, 9, 7]
    assert set(f["fcount"].tolist()) == {9}
    g = stage_fields([0, 0, 1], [0, 0, 1], groups[:2], cfg, True)
    assert (g["buffers"], g["size"], g["fcount"].tolist(), g["saddr"].tolist()) == (16, 4, [3, 3, 4], [0, 0, 4])
    with pytest.raises(ValueError, match="mixes slices"):
        stage_fields([0, 0], [0, 1], groups, cfg, True)
    with pytest.raises(ValueError, match="numbered 0, 1"):
        stage_fields([0, 2], [0, 1], groups, cfg, False)
