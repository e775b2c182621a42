"""`kaleido baselines` and `kaleido inspect` (`algo.reuse.stats`) on exact traces without stored P read P one
latent frame of one head at a time and give the results of the older format, where P is a stored array.

References: `algo.reuse.golden.decide` (``return_sad``) on the whole stored P, the statistics and baseline
entries computed from the older file (P stored whole, no query-row chunks involved), and the per-group rules
written out here with loops.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from algo.capture import capture_to_file
from algo.reuse.chunked import decision_chunks
from algo.reuse.golden import block_groups, decide
from algo.reuse.policies import FULL, SKIP, prune_codes, token_merge
from algo.reuse.stats import trace_statistics
from algo.trace import load_trace, save_trace
from hw.config import load_config
from sim.baselines import run_baselines
from sim.engines.model import simulate_trace

#: frames of 6x7 = 42 queries, 3 frames; the tiny model's default grid (4 frames of 8x8)
GRIDS = {"small": (3, 6, 7), "tiny": (4, 8, 8)}


@pytest.fixture(scope="module", params=sorted(GRIDS))
def files(request, tmp_path_factory):
    """(grid, new-format file, old-format file) of one capture: block 0, steps 47 and 49 (the inter-step
    baselines need a previous step), qk/pv/ffn1/ffn2 (EXION's FFN rule needs both FFN ops)."""
    d = tmp_path_factory.mktemp(f"consumers_{request.param}")
    grid = GRIDS[request.param]
    new = d / "new.npz"
    capture_to_file(out=new, steps=(47, 49), blocks=(0,), grid=grid, ops="qk,pv,ffn1,ffn2", seed=0,
                    theta=(4.0, 12.0))
    tr = load_trace(new)  # P regenerated whole into X
    old = d / "old.npz"
    save_trace(dataclasses.replace(tr, ops=[dataclasses.replace(o, scores=None) for o in tr.ops]), old)
    return grid, new, old


def _one_frame_one_head(row_log, grid) -> bool:
    return bool(row_log) and all(rows == grid[1] * grid[2] and heads == 1 for rows, heads in row_log)


def test_decision_chunks_equal_golden_decide_with_sad(files, row_log):
    grid, new, old = files
    olds, news = load_trace(old).ops, load_trace(new, derive_p=False).ops
    for o_old, o_new in zip(olds, news, strict=True):
        groups = [g.as_tuple() for g in o_old.groups]
        for b in range(o_old.batch):
            dec, _, sad = decide(o_old.X[b], grid, groups, o_old.theta, 4, return_sad=True)
            chunks = list(decision_chunks(o_new, b, grid, o_new.theta, 4))
            assert len(chunks) == (grid[0] if o_new.name == "pv" else 1)
            assert np.array_equal(np.concatenate([c[1] for c in chunks]), dec), (o_new.name, b)
            assert np.array_equal(np.concatenate([c[2] for c in chunks]), sad), (o_new.name, b)
            assert [c[0].start for c in chunks] == [i * (o_new.M // len(chunks)) for i in range(len(chunks))]
    assert _one_frame_one_head(row_log, grid)


def test_prune_codes_and_token_merge_against_loops():
    rng = np.random.default_rng(3)
    groups = [tuple(g) for g in block_groups(40)]
    p = rng.choice(np.array([0, 1, 2, 200], dtype=np.uint8), size=(30, 40), p=[0.6, 0.3, 0.05, 0.05])
    want = np.array([[SKIP if (row[k0:k1] <= 1).all() else FULL for k0, k1, _ in groups] for row in p])
    got = prune_codes(p, groups, 1)
    assert got.dtype == np.int8 and np.array_equal(got, want) and (want == SKIP).any() and (want == FULL).any()
    # token merge: frame f's token takes frame f-1's effective row when mean |diff| <= theta
    x = rng.integers(-3, 4, size=(3 * 4, 6)).astype(np.int8)
    merged, eff = token_merge(x, (3, 2, 2), 1.5)
    ref_eff, ref_m = x.astype(np.int16).copy(), np.zeros(12, bool)
    for i in range(4, 12):
        if np.abs(ref_eff[i].astype(int) - ref_eff[i - 4]).mean() <= 1.5:
            ref_eff[i], ref_m[i] = ref_eff[i - 4], True
    assert np.array_equal(merged, ref_m) and np.array_equal(eff, ref_eff) and ref_m.any() and not ref_m.all()


def test_statistics_equal_between_formats(files, row_log):
    grid, new, old = files
    ref = trace_statistics(load_trace(old))
    got = trace_statistics(load_trace(new, derive_p=False))
    assert json.dumps(got) == json.dumps(ref)
    assert _one_frame_one_head(row_log, grid)
    pv = [o for o in ref["ops"] if o["name"] == "pv"]
    assert pv and any(o["reuse_fraction"]["compute"] < 1 for o in pv)  # the chunks carry PARTIAL/REUSE rows


def test_baselines_equal_between_formats(files, row_log):
    grid, new, old = files
    cfg = load_config("tiny-8x8")
    params = {"exion": {"p_min": 60}, "adaptiv": {"theta": 30}}  # so that pv's groups are pruned / merged
    tr_old = load_trace(old)
    ref = run_baselines(tr_old, cfg, simulate_trace(tr_old, cfg), params=params)
    row_log.clear()
    lazy = load_trace(new, derive_p=False)
    got = run_baselines(lazy, cfg, simulate_trace(lazy, cfg), params=params)
    assert json.dumps(got) == json.dumps(ref)
    assert _one_frame_one_head(row_log, grid)
    for name in ("exion", "adaptiv"):  # skipped work exists on pv: the chunked rules are exercised
        pv = [r for r in ref[name]["per_op"] if r["name"] == "pv"]
        assert pv and any(r["work"]["skip"] > 0 for r in pv), name


def _cli(*args: str):
    from typer.testing import CliRunner

    from sim.cli import app

    return CliRunner().invoke(app, list(args))


def test_cli_baselines_and_inspect_equal_between_formats(files, tmp_path):
    _, new, old = files
    outs = {}
    for name, path in (("new", new), ("old", old)):
        r = _cli("baselines", str(path), "--config", "tiny-8x8", "--only", "exion,adaptiv,cambricon_d",
                 "--json", str(tmp_path / f"{name}.json"))
        assert r.exit_code == 0, r.output
        res = json.loads((tmp_path / f"{name}.json").read_text())
        res["trace"].pop("path")
        r = _cli("inspect", "--json", str(path))
        assert r.exit_code == 0, r.output
        stats = json.loads(r.output)
        stats.pop("format_version")
        outs[name] = (res, stats)
    assert outs["new"] == outs["old"]
