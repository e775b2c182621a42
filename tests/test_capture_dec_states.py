"""Attention states in decision traces (format version 4, docs/decisions.md D28).

Decision traces compute P one latent frame of queries per head (`algo.capture.pv_decisions`);
the attention output and log-sum-exp come from the model's own attention call (PyTorch's CPU
flash-attention kernel, which returns both: `algo.capture.quantise.flash_states`, D72; before D72 a
second float32 pass in frame chunks). Checked against

- the exact trace of the same capture (model, seed, step), whose states come from the same call;
- a float64 reference from the model's own float Q, K, V: ``torch.logsumexp`` of the scores and
  ``softmax(s) @ V``.

Tolerances are first-order float32 rounding bounds (u = 2^-24, gamma_n = n u / (1 - n u); Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., eq. 3.5 for a length-n dot product):

- scores: ``|s^ - s| <= E_s = gamma_{d_h} A + 2 u A`` per row, ``A = max_j sum_c |q_c k_jc| / sqrt(d_h)``;
- LSE (1-Lipschitz in the max norm of s): ``E_s + u D + 4 u + gamma_L + u log L + u |lse|`` with
  D = ``max_j (max s - s_j)`` <= 2A (rounding of s - max), 4u for float32 exp (<= 1 ulp in SLEEF's
  expf, doubled), gamma_L for the row sum, u log L for the log of a sum in [1, L];
- output (a convex combination of V rows whose weights move by a relative
  ``delta = 2 (E_s + u D + 4 u) + 3 gamma_L``): ``delta max|V| + u |out|``.

One evaluation is within that bound of the exact value, so two evaluations (decision vs exact
trace) are within twice the bound. (On this machine they are in fact bit-identical.)
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from algo.capture import capture, capture_to_file
from algo.trace import TraceError, load_trace
from algo.trace.derive import derive_trace
from tests.attention_spy import self_attention_operands
from tests.trace_files import rewrite_trace, set_array, with_nan

U = 2.0 ** -24
KW = dict(steps=(49,), ops="qk,pv", seed=0)


def gamma(n: int) -> float:
    return n * U / (1 - n * U)


def bounds(q_abs, k_abs, v_max, lse, out):
    """Per-element float32 error bounds of one evaluation of (lse, out), from |Q| [heads, M, d_h],
    |K| [heads, L, d_h] (upper bounds, float64) and max|V| per head (module docstring)."""
    d_h, n_keys = q_abs.shape[-1], k_abs.shape[1]
    a = (q_abs @ k_abs.transpose(0, 2, 1)).max(-1) / math.sqrt(d_h)  # [heads, M]
    e_s = gamma(d_h) * a + 2 * U * a
    base = e_s + U * 2 * a + 4 * U
    b_lse = base + gamma(n_keys) + U * math.log(n_keys) + U * np.abs(lse)
    delta = 2 * base + 3 * gamma(n_keys)
    b_out = delta[..., None] * v_max[:, None, None] + U * np.abs(out)
    return b_lse, b_out


def trace_bounds(qk, pv, lse, out):
    """`bounds` from an exact trace's int8 Q, K, V: |x| <= |x^| + scale / 2."""
    q_abs = np.abs(qk.X.astype(np.float64)) * qk.x_scale + qk.x_scale / 2
    k_abs = np.abs(qk.W.astype(np.float64)).transpose(0, 2, 1) * qk.w_scale + qk.w_scale / 2
    v_max = np.abs(pv.W.astype(np.float64)).max(axis=(1, 2)) * pv.w_scale + pv.w_scale / 2
    return bounds(q_abs, k_abs, v_max, lse, out)


@pytest.fixture(scope="module")
def wan(tmp_path_factory):
    """Tiny Wan, step 49: exact and decision traces (files) and the float Q, K, V of each block's
    self-attention seen by the model during the decision capture."""
    d = tmp_path_factory.mktemp("decstates")
    capture_to_file(out=d / "exact.npz", **KW)
    with self_attention_operands() as ops:
        capture_to_file(out=d / "dec.npz", thetas="2,6;4,12", **KW)
    seen = [tuple(t[0].transpose(0, 1).to(torch.float64) for t in qkv) for qkv in ops]
    return load_trace(d / "exact.npz"), load_trace(d / "dec.npz"), seen, d


def test_decision_states_equal_exact_states(wan):
    exact, dec, _, _ = wan
    assert dec.version == 4 and exact.version == 5  # the lowest version that describes each file (5: P derived)
    pairs = [(e, x) for e, x in zip(exact.ops, dec.ops, strict=True) if e.name == "pv"]
    assert len(pairs) == 2
    for i, (e, x) in enumerate(pairs):
        assert x.kind == "decisions" and x.attn_out.dtype == np.float32 and x.lse.dtype == np.float32
        assert x.attn_out.shape == (x.batch, x.M, x.N) == (2, 256, 32) and x.lse.shape == (2, 256)
        qk = exact.ops[2 * i]
        b_lse, b_out = trace_bounds(qk, e, e.lse, e.attn_out)
        assert (np.abs(x.lse - e.lse) <= 2 * b_lse).all()
        assert (np.abs(x.attn_out - e.attn_out) <= 2 * b_out).all()


def test_decision_states_equal_float64_reference(wan):
    _, dec, seen, _ = wan
    pvs = [o for o in dec.ops if o.name == "pv"]
    assert len(seen) == len(pvs) == 2
    for x, (q, k, v) in zip(pvs, seen, strict=True):
        s = q @ k.transpose(1, 2) / math.sqrt(q.shape[-1])
        lse_ref = torch.logsumexp(s, dim=-1).numpy()
        out_ref = (torch.softmax(s, dim=-1) @ v).numpy()
        b_lse, b_out = bounds(q.abs().numpy(), k.abs().numpy(), v.abs().amax(dim=(1, 2)).numpy(), lse_ref, out_ref)
        assert (np.abs(x.lse - lse_ref) <= b_lse).all()
        assert (np.abs(x.attn_out - out_ref) <= b_out).all()
        assert np.abs(x.lse - lse_ref).max() > 0  # float32, not float64: the bound is not vacuous


@pytest.mark.parametrize("model", ["hunyuanvideo", "cogvideox-5b"])
def test_decision_states_joint_attention(model):
    """Joint attention (video queries against [video, text] / [text, video] keys): same states."""
    exact = capture(model=model, blocks=(1,), **KW)
    dec = capture(model=model, blocks=(1,), thetas="4,12", **KW)
    qk, e = exact.ops
    x = dec.ops[1]
    assert x.attn_out.shape == (2, 256, 32) and x.lse.shape == (2, 256) and x.N == 32 and x.K == 256 + 8
    b_lse, b_out = trace_bounds(qk, e, e.lse, e.attn_out)
    assert (np.abs(x.lse - e.lse) <= 2 * b_lse).all() and (np.abs(x.attn_out - e.attn_out) <= 2 * b_out).all()


def test_cli_no_attn_states_writes_version_3(tmp_path):
    from typer.testing import CliRunner

    from sim.cli import app

    r = CliRunner().invoke(app, ["capture", "--decisions-only", "--thetas", "4,12", "--no-attn-states", "--steps",
                                 "49", "--blocks", "0", "--ops", "qk,pv", "-o", str(tmp_path / "t.npz")])
    assert r.exit_code == 0, r.output
    tr = load_trace(tmp_path / "t.npz")
    assert tr.version == 3 and [o.name for o in tr.ops] == ["qk", "pv"]
    assert all(o.attn_out is None and o.lse is None for o in tr.ops)


def test_derived_ops_carry_no_states(wan):
    _, dec, _, _ = wan
    der = derive_trace(None, from_blocks=[0], from_steps=[49], thetas="2,6;4,12", derive_blocks=[0, 1],
                       derive_steps=[49], captured=type(dec)(**{**dec.__dict__, "ops": dec.ops[:2]}))
    pv = {o.block: o for o in der.ops if o.name == "pv"}
    assert pv[0].derived_from is None and pv[0].lse is not None
    assert pv[1].derived_from == (49, 0) and pv[1].lse is None and pv[1].attn_out is None


def _derive(m):
    m["ops"][1]["derived_from"] = [49, 1]


@pytest.mark.parametrize("arr_fn, meta_fn, match", [
    (set_array("op00001_L", lambda x: with_nan(x, 5)), None, "log-sum-exp holds NaN"),
    (set_array("op00001_O", lambda x: x * np.inf), None, "attention output holds NaN or infinity"),
    (set_array("op00001_O", lambda x: x[:, :, :-1]), None, r"attention output has shape \[2, 256, 31\], expected \[2, 256, 32\]"),
    (set_array("op00001_L", lambda x: x.astype(np.float16)), None, "log-sum-exp must be float32"),
    (lambda a: a.pop("op00001_O"), None, "attention state arrays missing"),
    (None, lambda m: m.update(version=3), "attention states on a decision op need format version 4, file says 3"),
    (None, _derive, "a derived op cannot hold attention states"),
])
def test_bad_decision_states_rejected(wan, tmp_path, arr_fn, meta_fn, match):
    _, _, _, d = wan
    bad = rewrite_trace(d / "dec.npz", tmp_path / "bad.npz", meta_fn, arr_fn)
    with pytest.raises(TraceError, match=match):
        load_trace(bad)
