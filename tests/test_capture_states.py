"""Attention states in exact traces (format version 3): attention output and log-sum-exp per head of
every self-attention pv op; shape traces; round trip and rejection of bad states."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from algo.capture import capture_to_file
from algo.trace import TraceError, load_trace, save_trace
from tests.attention_spy import self_attention_operands
from tests.trace_files import rewrite_trace, set_array, with_nan


@pytest.fixture(scope="module")
def states(tmp_path_factory):
    """Tiny Wan, block 0, step 49, qk and pv; the float Q, K, V of the self-attention and the output
    torch's own ``scaled_dot_product_attention`` gives for them (what the model's call would return)."""
    d = tmp_path_factory.mktemp("states")
    with self_attention_operands() as seen:
        capture_to_file(out=d / "t.npz", steps=(49,), blocks=(0,), ops="qk,pv", seed=0)
    assert len(seen) == 1
    q, k, v = seen[0]  # block 0's self-attention, [1, S, heads, d_h]
    out = torch.nn.functional.scaled_dot_product_attention(*(t.permute(0, 2, 1, 3) for t in (q, k, v)))
    return load_trace(d / "t.npz"), (q, k, v, out.permute(0, 2, 1, 3)), d


def test_lse_equals_logsumexp_of_stored_qk(states):
    tr, _, _ = states
    qk, pv = tr.ops
    assert (qk.name, pv.name) == ("qk", "pv") and pv.lse is not None and qk.lse is None
    d_h = qk.K
    q = qk.X.astype(np.float64) * qk.x_scale  # [heads, M, d_h]
    kt = qk.W.astype(np.float64) * qk.w_scale  # [heads, d_h, M]
    ref = torch.logsumexp(torch.from_numpy(q @ kt / math.sqrt(d_h)), dim=-1).numpy()
    # Tolerance, derived: with |q - q^| <= e_q = x_scale/2 and |k - k^| <= e_k = w_scale/2,
    # |s_ij - s^_ij| <= (sum_c |q^_ic| e_k + e_q sum_c |k^_jc| + d_h e_q e_k) / sqrt(d_h), and
    # logsumexp is 1-Lipschitz in the max norm, so per row |LSE - LSE^| <= max_j of that bound
    # (+1e-4 for float32 arithmetic in the capture).
    e_q, e_k = qk.x_scale / 2, qk.w_scale / 2
    k_abs = np.abs(kt).sum(axis=1).max(axis=-1)  # [heads]: max_j sum_c |k^_jc|
    bound = (np.abs(q).sum(-1) * e_k + e_q * k_abs[:, None] + d_h * e_q * e_k) / math.sqrt(d_h) + 1e-4
    err = np.abs(pv.lse - ref)
    assert (err <= bound).all(), float((err - bound).max())
    assert err.max() > 0  # int8 really is coarser than the float scores the trace's LSE came from


def test_states_equal_float_attention(states):
    tr, (q, k, v, out), _ = states
    pv = tr.ops[1]
    qh, kh, vh = (t[0].transpose(0, 1).to(torch.float64) for t in (q, k, v))  # [heads, M, d_h]
    s = qh @ kh.transpose(1, 2) / math.sqrt(qh.shape[-1])
    np.testing.assert_allclose(pv.lse, torch.logsumexp(s, -1).numpy(), atol=1e-4, rtol=0)
    model_out = out[0].transpose(0, 1).to(torch.float32).numpy()  # the model's own attention output
    np.testing.assert_allclose(pv.attn_out, model_out, atol=1e-4, rtol=0)
    assert pv.attn_out.dtype == np.float32 and pv.attn_out.shape == (pv.batch, pv.M, pv.N)


def test_round_trip_identical(states, tmp_path):
    tr, _, _ = states
    save_trace(tr, tmp_path / "again.npz")
    back = load_trace(tmp_path / "again.npz")
    for a, b in zip(tr.ops, back.ops, strict=True):
        np.testing.assert_array_equal(a.X, b.X)
        np.testing.assert_array_equal(a.W, b.W)
        if a.lse is not None:
            np.testing.assert_array_equal(a.lse, b.lse)
            np.testing.assert_array_equal(a.attn_out, b.attn_out)
        assert a.meta() == b.meta()


@pytest.mark.parametrize("arr_fn,meta_fn,match", [
    (set_array("op00001_L", with_nan), None, "log-sum-exp holds NaN"),
    (set_array("op00001_O", with_nan), None, "attention output holds NaN"),
    (set_array("op00001_L", lambda x: x[:, :-1]), None, r"log-sum-exp has shape"),
    (set_array("op00001_O", lambda x: x.astype(np.float64)), None, "attention output must be float32"),
    (lambda a: a.pop("op00001_L"), None, "attention state arrays missing"),
])
def test_bad_states_rejected(states, tmp_path, arr_fn, meta_fn, match):
    _, _, d = states
    bad = rewrite_trace(d / "t.npz", tmp_path / "bad.npz", meta_fn, arr_fn)
    with pytest.raises(TraceError, match=match):
        load_trace(bad)


def test_shape_trace_version_and_kind(tmp_path):
    from algo.capture import write_shape_trace

    write_shape_trace(tmp_path / "s.npz", "wan2.1-t2v-1.3b", "tiny", steps=(0,))
    tr = load_trace(tmp_path / "s.npz")
    assert tr.kind == "shapes" and all(o.X is None and o.decisions is None for o in tr.ops)
    bad = rewrite_trace(tmp_path / "s.npz", tmp_path / "v2.npz", lambda m: m.update(version=2))
    with pytest.raises(TraceError, match="shape traces exist from format version 3"):
        load_trace(bad)


def test_inspect_reports_states(states):
    import json
    import subprocess
    import sys

    _, _, d = states
    res = subprocess.run([sys.executable, "-m", "sim.cli", "inspect", str(d / "t.npz"), "--json"],
                         capture_output=True, text=True, check=True)
    assert [(o["name"], o["attn_states"]) for o in json.loads(res.stdout)["ops"]] == [("qk", False), ("pv", True)]


def test_reader_skips_states_on_request(states, tmp_path):
    """``states=False`` (what the cycle model reads, D72): same operands, no states, members still checked."""
    tr, _, d = states
    lean = load_trace(d / "t.npz", states=False)
    assert any(o.attn_out is not None for o in tr.ops)
    for a, b in zip(tr.ops, lean.ops, strict=True):
        assert b.attn_out is None and b.lse is None
        np.testing.assert_array_equal(a.X, b.X)
        np.testing.assert_array_equal(a.W, b.W)
    bad = rewrite_trace(d / "t.npz", tmp_path / "bad.npz", None, lambda a: a.pop("op00001_L"))
    with pytest.raises(TraceError, match="attention state arrays missing"):
        load_trace(bad, states=False)
