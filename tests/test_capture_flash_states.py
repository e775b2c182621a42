"""Attention states from the model's own attention call (D72): `algo.capture.quantise.flash_states`.

Capture no longer runs a second float attention pass for the states: on a plain attention call
(`algo.models.families.base.plain_call`) it runs PyTorch's CPU flash-attention kernel itself, hands
its output to the model and keeps the log-sum-exp the kernel returns. Checked here:

- the output handed to the model is ``torch.nn.functional.scaled_dot_product_attention``'s, bit for
  bit (both layouts, float32 and bfloat16), and the states match a float64 reference;
- the captured model's forward is unchanged: every recorded operand of a two-block tiny Wan capture
  (float32 and bf16) is identical with the states on (flash path) and off (original function).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from algo.capture import capture
from algo.capture.quantise import flash_states
from algo.models.families.base import plain_call


def test_plain_call():
    assert plain_call((), {})
    assert plain_call((), dict(attn_mask=None, dropout_p=0.0, is_causal=False, backend=None, parallel_config=None))
    assert not plain_call((None,), {})  # positional extras: unknown meaning
    assert not plain_call((), dict(attn_mask=torch.ones(1, 4, dtype=torch.bool)))
    assert not plain_call((), dict(dropout_p=0.1))
    assert not plain_call((), dict(is_causal=True))
    assert not plain_call((), dict(scale=0.5))
    assert not plain_call((), dict(backend="flash"))
    assert not plain_call((), dict(return_lse=True))  # unknown keyword


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_flash_states_output_is_sdpa_and_states_match_float64(dtype, layout):
    gen = torch.Generator().manual_seed(3)
    s, h, d = 300, 3, 32
    q, k, v = (torch.randn(1, h, s, d, generator=gen).to(dtype) for _ in range(3))  # bhsd
    ops = (q, k, v) if layout == "bhsd" else tuple(t.transpose(1, 2) for t in (q, k, v))
    with torch.inference_mode():
        got = flash_states(*ops, layout)
        ref = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert got is not None
    model_out, out, lse = got
    ref = ref if layout == "bhsd" else ref.transpose(1, 2)
    assert model_out.dtype == dtype and model_out.shape == ref.shape and torch.equal(model_out, ref)
    assert out.dtype == lse.dtype == torch.float32 and out.shape == (h, s, d) and lse.shape == (h, s)
    q64, k64, v64 = (t[0].to(torch.float64) for t in (q, k, v))
    sc = q64 @ k64.transpose(1, 2) / math.sqrt(d)
    # float32 evaluation of unit-variance scores over d = 32 channels and 300 keys: 1e-5 is ~100 ulps;
    # bf16 operands: the kernel rounds the probabilities to bf16 before P V and the output to bf16
    # (relative 2^-8 each), and its scores are float32 sums of exact bf16 products
    tol_lse, tol_out = (1e-5, 1e-5) if dtype == torch.float32 else (1e-4, 2e-2)
    np.testing.assert_allclose(lse.numpy(), torch.logsumexp(sc, -1).numpy(), atol=tol_lse, rtol=0)
    np.testing.assert_allclose(out.numpy(), (torch.softmax(sc, -1) @ v64).numpy(), atol=tol_out, rtol=0)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_model_forward_unchanged_by_states(dtype):
    kw = dict(steps=(49,), blocks=(0, 1), seed=0, dtype=dtype)
    on, off = capture(attn_states=True, **kw), capture(attn_states=False, **kw)
    assert len(on.ops) == len(off.ops) > 6
    assert sum(o.attn_out is not None for o in on.ops) == 2 and all(o.attn_out is None for o in off.ops)
    for a, b in zip(on.ops, off.ops, strict=True):  # block 1's operands come after block 0's attention output
        assert {**a.meta(), "attn_states": None} == {**b.meta(), "attn_states": None}
        for x, y in ((a.X, b.X), (a.W, b.W)):
            assert (x is None) == (y is None)
            if x is not None:
                np.testing.assert_array_equal(x, y)
