"""Seeded random RTL regression of the compact and delta organisations on the compiled band engine
(tests/rtl/band_regression.py, `sim.engines.verilator_band`, docs/decisions.md D86): at least 1,000 band-tiles per
organisation and band shape on tiny-8x8 as that organisation (4 bands on 2 ports, 2 bands on 4), each band-tile's drained words, band and
last-slot cycle, each op's last row, and Y by the combine rule against `algo.reuse.golden` and the cycle model.
``KALEIDO_RTL_SEED`` picks another seed; a failure prints the seed, the case and the command that replays it with
waveforms.

The engines are built once per config into build/verilator/<config>-band-<key>/ (about 20-40 s each on 2 cores).
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import numpy as np
import pytest

from hw.config import MAX_ABS_W, MAX_ABS_X
from hw.pe import PEMode
from sim.engines.verilator_band import BandEngine
from tests.rtl.band_regression import (
    DEFAULT_SEED,
    ORGS,
    SHAPES,
    band_config,
    check_case,
    regression_cases,
    replay_command,
)

SEED = int(os.environ.get("KALEIDO_RTL_SEED", DEFAULT_SEED))


@pytest.fixture(scope="module", params=[(o, s) for o in ORGS for s in SHAPES], ids=lambda p: f"{p[0]}-{p[1]}")
def regression(request):
    org, shape = request.param
    cfg = band_config(org, shape)
    cases = regression_cases(org, SEED, cfg)
    ops = [c.op(cfg) for c in cases]
    results = BandEngine(cfg).run([(o, c.x_unsigned) for o, c in zip(ops, cases, strict=True)])
    return org, shape, cfg, cases, ops, results


def test_band_regression_bit_and_cycle_exact(regression):
    org, shape, cfg, cases, ops, results = regression
    tiles = sum(len(o.tiles) for o in ops)
    assert tiles >= 1000, tiles
    failures = []
    for c, o, r in zip(cases, ops, results, strict=True):
        for e in check_case(c, o, r, cfg):
            failures.append(f"seed {SEED} {cfg.name} case {c.index} ({c.describe()}): {e}\n  replay: "
                            f"{replay_command(org, shape, SEED, c.index)}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:10])


def test_band_regression_delta_combine_unit(regression):
    """Delta: every case's drained rows through the compiled combine unit ``kaleido_dcombine``
    (`sim.engines.verilator_stream`; commands of `tests.rtl.delta_bench.dcombine_program`, in drain order): every
    output row equals `algo.reuse.golden.apply_decisions`'s Y, 2 cycles after its token's last command."""
    from sim.engines.verilator_stream import StreamEngine
    from tests.rtl.band_regression import check_dcombine, dcombine_cycles

    org, shape, cfg, cases, ops, results = regression
    if org != "delta":
        pytest.skip("the compact combine unit (kaleido_combine) is checked under Amaranth's simulator only")
    progs = [dcombine_cycles(c, o, r, cfg) for c, o, r in zip(cases, ops, results, strict=True)]
    outs = StreamEngine(cfg).run([p[0] for p in progs])
    failures = [f"seed {SEED} {cfg.name} case {c.index} ({c.describe()}): {e}\n  replay: "
                f"{replay_command(org, shape, SEED, c.index)}"
                for c, p, got in zip(cases, progs, outs, strict=True) for e in check_dcombine(c, p[1], got, cfg)]
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:10])


def test_band_regression_covers_every_mix(regression):
    """Every PE mode on the slots (idle rows REUSE, half-width PAIRED band-tiles), flushes mixing COMPUTE and
    PARTIAL rows, every axis, several axis classes, int8 and uint8, shapes that are no multiple of the array,
    scattered and coherent decisions, both delta issue orders; the corners' drained words computed by hand."""
    org, _shape, cfg, cases, ops, results = regression
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    modes = set(np.concatenate([t.mode.ravel() for o in ops for t in o.tiles]).tolist())
    assert modes == {int(m) for m in PEMode}, modes
    assert any(t.partial.any() and not t.partial.all() for o in ops for t in o.tiles)  # a flush's mixed band-tile
    assert {ax for c in cases for _k0, _k1, ax in c.groups} == {"f", "w", "h"}
    assert any(len({ax for *_, ax in c.groups}) == 3 for c in cases)
    assert {c.x_unsigned for c in cases} == {False, True}
    assert any(c.W.shape[1] % C for c in cases) and any(c.grid[1] * c.grid[2] % R for c in cases)
    assert any(c.grid[1] * c.grid[2] > R for c in cases)  # a frame over several pools
    assert any(c.fw < c.grid[0] for c in cases)  # chunks of fewer frames than the op has
    F_hw = [(c.decisions.reshape(c.grid[0], -1, len(c.groups)), c) for c in cases if c.grid[1] * c.grid[2] > 1]  # noqa: N806
    per = [d[f, :, g] for d, c in F_hw for f in range(1, c.grid[0]) for g in range(len(c.groups))]
    assert any(len(set(v.tolist())) == 1 for v in per) and any(len(set(v.tolist())) == 3 for v in per)
    if org == "delta":
        assert {c.chunk_major for c in cases} == {False, True} and any(c.s > 1 for c in cases)
    kmax = max(cfg.max_k, cfg.max_tokens)
    for c, r in zip(cases, results, strict=True):
        words = np.concatenate(r.drained)[:, :, 0]
        n = c.W.shape[1]
        if c.kind == "corner_int8":  # every row COMPUTEs: K (-128)^2 in every kept column (delta: direct, X itself)
            assert (words[:, :n] == kmax * 128 * 128).all()
        elif c.kind == "corner_uint8":  # K 255 (-128): the most negative output any op has (acc_bits' bound)
            assert (words[:, :n] == -kmax * MAX_ABS_X * MAX_ABS_W).all()
        elif c.kind == "corner_diff":  # frames 0, 255 (127), 0 (-128): differences +-255 on K - 1 channels
            ext = (kmax - 1) * MAX_ABS_X * MAX_ABS_W
            assert words[:, :n].min() == -ext and words[:, :n].max() == ext
            assert ext < 1 << (cfg.acc_bits - 1)
    assert {c.kind for c in cases if c.X.shape[1] == kmax} >= {"corner_int8", "corner_uint8"}


def test_band_stimulus_issue_order_is_the_models(regression):
    """The band-tiles the regression issues, at the model's chunk frames and column blocks, are the ones
    `sim.engines.model` times the organisation with, in the same order (D84's chunk-major order for delta)."""
    from sim.engines.model import _compact_timing
    from sim.timing import delta as delta_rules
    from sim.timing.compact import band_cycles, chunk_frames
    from tests.rtl.band_regression import BandCase

    org, _shape, cfg, cases, _ops, _res = regression
    for c in cases[:40]:
        K, N = c.X.shape[1], c.W.shape[1]  # noqa: N806
        fw, s = (delta_rules.plan(cfg, c.grid[0], K, N, False, "op", c.groups) if org == "delta"
                 else (chunk_frames(cfg, c.grid[0], K, N, c.groups), 1))
        case = BandCase(org, c.index, c.kind, c.X, c.W, c.grid, c.groups, c.decisions, c.x_unsigned, fw, s,
                        org == "delta")
        op = case.op(cfg)
        timing = _compact_timing([c.decisions], SimpleNamespace(K=K, N=N, name="op"), c.grid, c.groups, 4, cfg, False)
        assert op.s_seq.tolist() == timing["s_seq"].tolist(), c.index
        if org == "delta":
            assert op.cycles == timing["cycles"]
        else:  # the model times compact's op as kaleido_caccel runs it (D117: queues, gather, weight port), the
            # regression drives kaleido_ctop alone: its cycles are the band schedule of the same band-tiles
            assert op.cycles == band_cycles(timing["s_seq"], timing["rows"], cfg)[0] <= timing["cycles"]


def test_band_engine_refuses_the_lockstep_organisation(tmp_path):
    """A lock-step config: one line naming the config and its organisation, before any build folder is made."""
    from hw.config import load_config
    from sim.engines.band_stimulus import band_op
    from sim.engines.verilator_build import RtlEngineError

    cfg = load_config("tiny-8x8")
    with pytest.raises(RtlEngineError, match="^the band engine runs the compact or delta organisation; tiny-8x8 is "
                                             "'lockstep'$"):
        BandEngine(cfg, build_root=tmp_path / "b")
    assert not (tmp_path / "b").exists()
    x, w = np.zeros((1, 2), np.int8), np.zeros((2, 1), np.int8)
    with pytest.raises(ValueError, match="tiny-8x8 is 'lockstep'"):
        band_op(x, w, (1, 1, 1), [(0, 2, "f")], np.zeros((1, 1), np.int8), cfg)
