"""Exact traces without P (format version 5): pv's P regenerated from qk's int8 Q and K, bit for bit.

The reference is the P a capture stores in the older format (version 3, P as an array), and,
independently, the rule computed here from scratch in int64 / float64 numpy.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from algo.capture import capture, capture_to_file
from algo.reuse.softmax import softmax_numerators_int8
from algo.trace import TraceError, TraceReader, load_trace, save_trace
from hw.config import load_config
from sim.engines.model import simulate_trace
from sim.engines.rtl import golden_checksums
from tests.trace_files import rewrite_trace

#: tiny: the model's default grid (4 frames of 8x8); small: frames of 6x7 = 42 queries, 5 frames
GRIDS = {"tiny": (4, 8, 8), "small": (5, 6, 7)}


def _p_reference(qk) -> np.ndarray:
    """P from the rule's definition, in int64 and float64: round(255 exp(c (S - rowmax S)))."""
    s = qk.X.astype(np.int64) @ qk.W.astype(np.int64)
    c = qk.x_scale * qk.w_scale / np.sqrt(qk.K)
    return np.rint(255.0 * np.exp(c * (s - s.max(axis=2, keepdims=True)))).astype(np.uint8)


@pytest.fixture(scope="module", params=sorted(GRIDS))
def files(request, tmp_path_factory):
    """(grid, new-format file, old-format file) of one capture (block 0, step 49, qkv/qk/pv/o_proj)."""
    d = tmp_path_factory.mktemp(f"derived_{request.param}")
    grid = GRIDS[request.param]
    new = d / "new.npz"
    capture_to_file(out=new, steps=(49,), blocks=(0,), grid=grid, ops="qkv,qk,pv,o_proj", seed=0)
    tr = load_trace(new)
    old = d / "old.npz"
    save_trace(dataclasses.replace(tr, ops=[dataclasses.replace(o, scores=None) for o in tr.ops]), old)
    return grid, new, old


def test_versions_and_sizes(files):
    _, new, old = files
    with TraceReader(new) as rn, TraceReader(old) as ro:
        assert rn.version == 5 and ro.version == 3
        pv = [i for i, m in enumerate(rn.op_meta) if m["name"] == "pv"][0]
        assert rn.op_meta[pv]["p_from"]["qk"] == pv - 1  # qk of the same block just before it
        assert f"op{pv:05d}_X" not in rn.files and f"op{pv:05d}_X" in ro.files
    m = load_trace(old).ops[2].M
    heads = load_trace(old).ops[2].batch
    assert old.stat().st_size - new.stat().st_size >= heads * m * m  # P's bytes are gone


def test_regenerated_p_equals_stored_p_every_head_and_chunk(files):
    grid, new, old = files
    f_n, h_n, w_n = grid
    hw = h_n * w_n
    stored = [o for o in load_trace(old).ops if o.name == "pv"][0].X
    with TraceReader(new, derive_p=False) as rd:
        ops = rd.load_ops(range(rd.n_ops))
    qk, pv = [o for o in ops if o.name == "qk"][0], [o for o in ops if o.name == "pv"][0]
    assert pv.X is None and pv.scores is not None
    assert np.array_equal(stored, _p_reference(qk))
    for hd in range(pv.batch):
        for f in range(f_n):  # frame chunks, as the decision path computes them
            rows = slice(f * hw, (f + 1) * hw)
            assert np.array_equal(pv.p_rows(rows, slice(hd, hd + 1))[0], stored[hd, rows]), (hd, f)
        step = 100 if pv.M > 100 else 7
        last = (pv.M - 1) // step * step  # the last, partial chunk
        assert pv.M - last < step
        assert np.array_equal(pv.p_rows(slice(last, pv.M), slice(hd, hd + 1))[0], stored[hd, last:])
    q, k_t, qs, ks = pv.scores
    assert np.array_equal(softmax_numerators_int8(q, k_t, qs, ks, chunk=5), stored)  # any chunking


def test_checksums_and_cycles_equal_between_formats(files):
    _, new, old = files
    a, b = load_trace(new), load_trace(old)
    assert golden_checksums(a) == golden_checksums(b)
    cfg = load_config("tiny-8x8")
    ra, rb = simulate_trace(a, cfg), simulate_trace(b, cfg)
    assert ra["cycles"] == rb["cycles"] and ra["dense_cycles"] == rb["dense_cycles"]
    assert [o["cycles"] for o in ra["per_op"]] == [o["cycles"] for o in rb["per_op"]]


def test_pv_without_qk_stores_its_own_q_and_k(tmp_path):
    out = tmp_path / "pv.npz"
    capture_to_file(out=out, steps=(49,), blocks=(0,), ops="pv", seed=0)
    with TraceReader(out) as rd:
        assert rd.version == 5 and "qk" not in rd.op_meta[0]["p_from"]
        assert {"op00000_Q.npy", "op00000_Kt.npy"} <= {f + ".npy" for f in rd.files}
    with_qk = capture(steps=(49,), blocks=(0,), ops="qk,pv", seed=0)  # in memory: P materialised
    assert np.array_equal(load_trace(out).ops[0].X, with_qk.ops[1].X)
    assert np.array_equal(with_qk.ops[1].X, _p_reference(with_qk.ops[0]))


def test_bad_p_source_rejected(files, tmp_path):
    _, new, _ = files

    def point_elsewhere(meta):
        pv = [i for i, m in enumerate(meta["ops"]) if m["name"] == "pv"][0]
        meta["ops"][pv]["p_from"]["qk"] = 0  # the qkv op
    bad = rewrite_trace(new, tmp_path / "bad.npz", meta_fn=point_elsewhere)
    with pytest.raises(TraceError, match="not the qk op"):
        load_trace(bad)

    def old_version(meta):
        meta["version"] = 3
    with pytest.raises(TraceError, match="derived P needs format version 5"):
        load_trace(rewrite_trace(new, tmp_path / "v3.npz", meta_fn=old_version))
