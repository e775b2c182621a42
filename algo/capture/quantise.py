"""The numbers capture records: symmetric int8 quantisation (`quantize_int8`), the attention states
(`flash_states` from the model's own attention call; `attention_states`, a second float pass, where that
call is not plain flash attention), decisions of the streamed operand for several thresholds (`pv_decisions` without
ever holding P whole), and bf16 linears as float32 GEMMs on CPUs without oneDNN bf16."""

from __future__ import annotations

import contextlib
import math
import time

import numpy as np
import torch

from algo.models import CaptureError
from algo.reuse.golden import COMPUTE
from algo.reuse.kernels import decide_multi, quantize_int8_fast
from algo.reuse.softmax import Numerators
from algo.trace import Group, pack_decisions

__all__ = ["P_CHUNK", "attention_states", "bf16_gemm_in_fp32", "flash_states", "native_bf16_gemm", "pv_decisions",
           "quantize_int8"]

#: Query rows per chunk of the float attention states (`attention_states`, one head at a time:
#: bounds the float32 score buffer to chunk x L; project choice: 1024 x 32,760 keys x 4 B = 134 MB at 480p).
P_CHUNK = 1024


def quantize_int8(x: np.ndarray | torch.Tensor) -> tuple[np.ndarray, float]:
    """Symmetric per-tensor int8: ``(q, scale)`` with ``x ~ q * scale``.

    ``scale = max|x| / 127`` (1.0 for an all-zero tensor); ``q = clip(rint(x / scale), -128, 127)``,
    computed in float64, round half to even (`algo.reuse.kernels.quantize_int8_fast`, compiled and
    parallel; a torch tensor is first converted to float32 by torch, which is exact for bf16/fp16).

    Raises:
        CaptureError: x contains NaN or infinity.
    """
    if isinstance(x, torch.Tensor):
        x = x.detach().to(torch.float32).cpu().numpy()
    x = np.asarray(x)
    if x.dtype != np.float64:
        x = x.astype(np.float32, copy=False)  # float32 -> float64 is exact, so amax and q are unchanged
    out = quantize_int8_fast(x)
    if out is None:
        raise CaptureError("non-finite activation or weight met while quantising")
    return out


def attention_states(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, chunk: int = P_CHUNK):
    """Float attention states of every query, in query chunks (P itself is `algo.reuse.softmax`'s).

    Args:
        q: ``[heads, M, d_h]`` float; k: ``[heads, L, d_h]`` float; v: ``[heads, L, d_v]`` float.

    Returns:
        ``(out, lse)`` in float32 from the float (unquantised) operands, ``s = q k^T / sqrt(d_h)``:
        ``out = (e @ v) / rowsum e`` ``[heads, M, d_v]`` with ``e = exp(s - rowmax)``, and
        ``lse = rowmax + log(rowsum e)`` ``[heads, M]``.
    """
    q = q.to(torch.float32)
    k_t = k.to(torch.float32).transpose(1, 2)
    v = v.to(torch.float32)
    heads, m, d_h = q.shape
    att = np.empty((heads, m, v.shape[2]), dtype=np.float32)
    lse = np.empty((heads, m), dtype=np.float32)
    inv = 1.0 / math.sqrt(d_h)
    for hd in range(heads):  # one head at a time: the score buffer is chunk x L (134 MB at 480p)
        for i0 in range(0, m, chunk):
            s = torch.matmul(q[hd, i0:i0 + chunk], k_t[hd]).mul_(inv)
            mx = s.amax(dim=-1, keepdim=True)
            p = s.sub_(mx).exp_()
            rs = p.sum(dim=-1, keepdim=True)
            att[hd, i0:i0 + chunk] = (torch.matmul(p, v[hd]) / rs).numpy()
            lse[hd, i0:i0 + chunk] = (mx + torch.log(rs))[..., 0].numpy()
    return att, lse


def flash_states(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, layout: str):
    """The model's own attention and its states from one call of PyTorch's CPU flash-attention kernel.

    A plain ``scaled_dot_product_attention`` call on the CPU runs
    ``aten._scaled_dot_product_flash_attention_for_cpu``, which also returns the log-sum-exp of every
    query; calling that kernel directly on the same operands gives the same output bits (PyTorch
    2.13; tests/test_capture_flash_states.py) and the states at no extra cost (D72).

    Args:
        query, key, value: ``[1, S, heads, d_h]`` (``layout="bshd"``) or ``[1, heads, S, d_h]``
            (``"bhsd"``), the operands of a plain attention call (`algo.models.families.base.plain_call`).

    Returns:
        ``(model_out, out, lse)``, or None where torch would not choose the flash kernel (then the
        caller runs the original function and `attention_states`): ``model_out`` the attention output
        in the call's layout and dtype (what the original returns), ``out`` float32 ``[heads, S, d_v]``
        (``softmax(q k^T / sqrt(d_h)) v`` as the model computed it: bf16 values for a bf16 model) and
        ``lse`` float32 ``[heads, S]`` (``log sum_j exp s_ij``).
    """
    from torch.nn.attention import SDPBackend

    if query.device.type != "cpu" or query.ndim != 4 or query.shape[0] != 1:
        return None
    qb, kb, vb = (t if layout == "bhsd" else t.permute(0, 2, 1, 3) for t in (query, key, value))
    if SDPBackend(torch._fused_sdp_choice(qb, kb, vb, None, 0.0, False)) != SDPBackend.FLASH_ATTENTION:
        return None
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(qb, kb, vb, 0.0, False)
    model_out = out if layout == "bhsd" else out.permute(0, 2, 1, 3)
    return model_out, out[0].to(torch.float32).contiguous(), lse[0].to(torch.float32).contiguous()


def _scale_of(t: torch.Tensor) -> float:
    """The `quantize_int8` scale of `t` without building the int8 tensor: ``max|t| / 127`` (1 if zero)."""
    amax = float(t.detach().abs().max().to(torch.float32)) if t.numel() else 0.0
    if not math.isfinite(amax):
        raise CaptureError("non-finite activation or weight met while quantising")
    return amax / 127.0 if amax > 0 else 1.0


def _decide_packed(x_q: np.ndarray, grid, groups: list[Group], thetas, b_msb: int) -> np.ndarray:
    """Decisions of every batch index for every theta, packed: uint8 ``[T, batch, ceil(M*G/4)]``
    (`algo.reuse.kernels.decide_multi`: `algo.reuse.golden.decide`'s decisions, all thetas in one pass)."""
    gt = [g.as_tuple() for g in groups]
    dec = [decide_multi(x_q[b], grid, gt, thetas, b_msb) for b in range(x_q.shape[0])]
    return np.stack([np.stack([pack_decisions(d[ti]) for d in dec]) for ti in range(len(thetas))])


def pv_decisions(q: torch.Tensor, k: torch.Tensor, grid: tuple[int, int, int], groups: list[Group],
                 thetas, b_msb: int, timing: dict | None = None) -> np.ndarray:
    """Packed decisions of ``pv``'s streamed operand P without ever holding P whole.

    P = `algo.reuse.softmax.softmax_numerators_int8` of the int8 Q and K^T (quantised here as
    ``qk`` quantises them; uint8 ``[heads, M, L]``) is computed one latent frame of queries
    (``H*W`` rows) at a time per head (`algo.reuse.softmax.Numerators`: one score buffer reused by
    every chunk). Every group of ``pv`` reuses along frames (axis ``"f"``,
    `algo.reuse.golden.block_groups`), so frame f's decisions depend only on frame f and the effective
    rows of frame f-1: `algo.reuse.kernels.decide_multi` decides frame f against the carried effective
    rows of frame f-1 (``prev``, one per theta) and updates them, which gives exactly the
    decisions of `algo.reuse.golden.decide` on the whole P (tests/test_capture.py). Peak memory per head:
    a 1,024-row chunk of float32 scores (``1024 x L x 4`` bytes), one frame of P (``H*W x L``) and T
    int16 frames of state. The attention states are not computed here: capture takes them from the
    model's own attention call (`flash_states`, D72).

    Args:
        q: ``[heads, M, d_h]`` float; k: ``[heads, L, d_h]`` float.
        groups: channel groups over the L keys, every axis ``"f"``.
        timing: if given, accumulates ``p_chunks`` (number of P query chunks: heads x frames),
            ``p_chunk_s`` (seconds computing P chunks) and ``p_decide_s`` (seconds deciding).

    Returns:
        uint8 ``[len(thetas), heads, ceil(M * G / 4)]``, identical to packing `decide` on the whole P.

    Raises:
        CaptureError: a group that does not reuse along frames.
    """
    if any(g.axis != "f" for g in groups):
        raise CaptureError("pv decisions in frame chunks need every group to reuse along frames (axis 'f')")
    f_n, h_n, w_n = grid
    hw = h_n * w_n
    gt = [g.as_tuple() for g in groups]
    heads = q.shape[0]
    dec = np.empty((len(thetas), heads, q.shape[1], len(groups)), dtype=np.int8)
    q_q, q_s = quantize_int8(q)
    k_q, k_s = quantize_int8(k.transpose(1, 2))
    num = Numerators(q_q, k_q, q_s, k_s)
    p = np.empty((hw, k_q.shape[2]), dtype=np.uint8)
    tm = timing if timing is not None else {}
    for key in ("p_chunks", "p_chunk_s", "p_decide_s"):
        tm.setdefault(key, 0)
    for hd in range(heads):
        prev = None  # int16 [T, H*W, L]: effective P of the previous frame, per theta
        for f in range(f_n):
            t0 = time.perf_counter()
            num.rows(hd, range(f * hw, (f + 1) * hw), out=p)
            t1 = time.perf_counter()
            tm["p_chunks"] += 1
            tm["p_chunk_s"] += t1 - t0
            if prev is None:  # frame 0 always computes; its effective value is itself
                dec[:, hd, :hw] = COMPUTE
                prev = np.repeat(p.astype(np.int16)[None], len(thetas), axis=0)
            else:
                dec[:, hd, f * hw:(f + 1) * hw] = decide_multi(p, (1, h_n, w_n), gt, thetas, b_msb, prev=prev)
            tm["p_decide_s"] += time.perf_counter() - t1
    return np.stack([np.stack([pack_decisions(dec[ti, hd]) for hd in range(heads)]) for ti in range(len(thetas))])


def native_bf16_gemm() -> bool:
    """Whether PyTorch runs bfloat16 GEMMs through oneDNN on this CPU.

    oneDNN's bf16 matmul needs AVX-512 (BW/VL/DQ; native with AVX512-BF16 or AMX) or AVX2-VNNI-2
    (``torch.ops.mkldnn._is_mkldnn_bf16_supported``, PyTorch 2.13). Without it (e.g. AVX2-only AMD
    EPYC Zen 3), ``aten::addmm`` on bf16 falls back to PyTorch's reference GEMM: about 2 GMAC/s on
    two cores against about 30 for MKL's float32 GEMM (docs/capture.md, "Speed at 480p").
    """
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # pragma: no cover - builds without oneDNN
        return False


class _Bf16LinearInFp32(torch.overrides.TorchFunctionMode):
    """``F.linear`` on bfloat16 operands computed as a float32 GEMM, result rounded to bfloat16.

    A product of two bf16 numbers is exact in float32 and bf16 GEMMs accumulate in float32 (oneDNN,
    PyTorch's reference kernel, GPU tensor cores), so this differs from a native bf16 GEMM only in
    summation order (scaled Wan block output: 98 % of elements bit-identical, relative L2 4e-4,
    a tenth of the bf16-vs-fp32 difference). Every other op passes through unchanged.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.nn.functional.linear:
            x, w = args[0], args[1] if len(args) > 1 else kwargs["weight"]
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            if x.dtype == torch.bfloat16 and w.dtype == torch.bfloat16:
                y = torch.nn.functional.linear(x.float(), w.float(), None if b is None else b.float())
                return y.to(torch.bfloat16)
        return func(*args, **kwargs)


def bf16_gemm_in_fp32(dtype: torch.dtype) -> contextlib.AbstractContextManager:
    """Context for a forward in ``dtype``: bf16 linears as float32 GEMMs when the CPU lacks oneDNN
    bf16 (`native_bf16_gemm`), otherwise nothing. 8x faster for a scaled Wan2.1-1.3B block on an
    AVX2-only CPU (docs/capture.md, "Speed at 480p"); outputs keep the bf16 dtype."""
    if dtype == torch.bfloat16 and not native_bf16_gemm():
        return _Bf16LinearInFp32()
    return contextlib.nullcontext()
