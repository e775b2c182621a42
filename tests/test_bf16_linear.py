"""The bf16-linear-as-fp32-GEMM workaround of `algo.capture` (AVX2-only CPUs, docs/capture.md)."""

from __future__ import annotations

import torch

from algo.capture.quantise import _Bf16LinearInFp32, bf16_gemm_in_fp32, native_bf16_gemm


def test_bf16_linear_equals_float64_rounded_to_bf16() -> None:
    """Products of bf16 numbers are exact in fp32; with short K the fp32 sum is exact too, so the
    result must equal the float64 product rounded once to bf16, element for element."""
    g = torch.Generator().manual_seed(0)
    # Small integers times powers of two: every partial sum is exactly representable in fp32.
    x = (torch.randint(-8, 8, (64, 16), generator=g).float() / 4).to(torch.bfloat16)
    w = (torch.randint(-8, 8, (32, 16), generator=g).float() / 8).to(torch.bfloat16)
    b = (torch.randint(-8, 8, (32,), generator=g).float() / 2).to(torch.bfloat16)
    ref = (x.double() @ w.double().T + b.double()).to(torch.bfloat16)
    with _Bf16LinearInFp32():
        y = torch.nn.functional.linear(x, w, b)
    assert y.dtype == torch.bfloat16
    assert torch.equal(y, ref)


def test_other_dtypes_pass_through() -> None:
    x, w = torch.ones(2, 3), torch.ones(4, 3)
    with _Bf16LinearInFp32():
        y = torch.nn.functional.linear(x, w)
    assert y.dtype == torch.float32 and torch.equal(y, torch.full((2, 4), 3.0))


def test_context_only_for_bf16_without_native_support() -> None:
    ctx = bf16_gemm_in_fp32(torch.bfloat16)
    assert isinstance(ctx, _Bf16LinearInFp32) == (not native_bf16_gemm())
    assert not isinstance(bf16_gemm_in_fp32(torch.float32), _Bf16LinearInFp32)
