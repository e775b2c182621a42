"""Trace capture: run a real diffusers video DiT with hooks and record int8 GEMM operands.

`capture` builds a registered model (`algo.models`), makes latents from a panned real image mixed
with noise at each requested step's flow-matching noise level (`algo.latents`), runs one forward
pass per step and records, for every transformer block, the operands of these GEMMs
``Y[b] = X[b] @ W[b]`` (SPEC.md section 1; shapes for M tokens, d = heads * d_h, d_ffn, L text
tokens):

- ``qkv``: X = ``attn1`` input (modulated norm1 output) ``[1, M, d]``;
  W = ``[to_q; to_k; to_v].weight^T`` ``[1, d, 3d]``.
- ``qk``: X = Q after RMSNorm and RoPE, per head ``[heads, M, d_h]``;
  W = K after RoPE, transposed ``[heads, d_h, M]``.
- ``pv``: X = P = ``round(255 exp(c (S - rowmax S)))`` uint8 ``[heads, M, M]`` from ``qk``'s exact int8
  scores S, ``c = q_scale k_scale / sqrt(d_h)`` (`algo.reuse.softmax`, the one P rule); W = V
  ``[heads, M, d_h]``. A trace streamed to a file (``out``) stores no P: the pv record names the
  qk op whose Q and K regenerate it (`algo.trace` format version 5).
- ``o_proj``: X = input of ``attn1.to_out[0]`` ``[1, M, d]``; W = its weight^T ``[1, d, d]``.
- ``ffn1``: X = input of ``ffn.net[0].proj`` ``[1, M, d]``; W = its weight^T ``[1, d, d_ffn]``.
- ``ffn2``: X = input of ``ffn.net[2]`` (after GELU) ``[1, M, d_ffn]``; W = its weight^T ``[1, d_ffn, d]``.

(the 1/rowsum normalisation runs on the vector unit, SPEC section 1); the attention states use
``s = Q K^T / sqrt(d_h)`` in float32 from the float Q and K. With ``include_cross=True`` the cross-attention GEMMs whose streamed
operand is the video tokens are recorded too: ``cross_q`` (``attn2`` input, ``to_q`` weight^T),
``cross_qk`` (Q after RMSNorm [M, d_h] against K^T [d_h, L]; no RoPE), ``cross_pv`` (P [M, L] against
V [L, d_h]) and ``cross_o``. The text-side K/V projections (L rows, not the token grid) are not
recorded. Biases are not part of the GEMM and are ignored.

How: Wan's attention processor calls the module-level
``diffusers.models.transformers.transformer_wan.dispatch_attention_fn`` with Q and K already
rotated; it is wrapped for the duration of the capture (restored in ``finally``); forward
pre-hooks on the linear layers capture their inputs. HunyuanVideo (``transformer_hunyuan_video.
dispatch_attention_fn``) and CogVideoX (``F.scaled_dot_product_attention`` inside
``diffusers.models.attention_processor``) are hooked the same way (`_attention_patched`); their
joint text+video attention maps onto the same op names with the video tokens as GEMM rows and
text tokens as extra keys (`_register`, docs/capture.md "How ops map"). Exact traces also hold the
attention output and log-sum-exp per head of every self-attention ``pv`` (`attention_states`; trace format version 3), decision traces too (`pv_decisions` with ``v``; version 4);
`write_shape_trace` writes shapes only, without a forward. Tokens are in the model's order, raster
``f*(H*W) + h*W + w``: ``WanTransformer3DModel.forward`` flattens the patch-embedding output
``[B, C, F, H, W]`` with ``flatten(2)``, and ``WanRotaryPosEmbed`` builds its tables in the same order.

Quantisation (SPEC section 1): symmetric int8, one scale per (step, block, op, tensor):
``scale = max|x| / 127`` (1 when x is all zero), ``q = clip(rint(x / scale), -128, 127)``
(``np.rint``: round half to even); per-head tensors share one scale across heads. P is uint8 with
``x_scale = 1/255``.

Channel groups: ``qk`` uses the model's RoPE t/h/w split (`algo.models.rope_groups`); every other op
uses `algo.reuse.golden.block_groups` (blocks of ``G = 8 * ceil(K / 64)``, reuse axis ``"f"``, kind
``"block"``); for ``pv`` K is the key-token count M.

Determinism: weights from ``torch.manual_seed(seed)``, text embeddings and noise from
``numpy.random.default_rng([seed, stream])``; the same arguments give a byte-identical trace file
on the same machine and library versions.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from algo import latents as lat
from algo.models import (
    DTYPES,
    CaptureError,
    blocks_of,
    build_model,
    build_streamed,
    family_of,
    get_spec,
    meta_model,
    model_family,
    num_blocks,
    rope_groups,
)
from algo.reuse.golden import COMPUTE, block_groups
from algo.reuse.kernels import decide_multi, quantize_int8_fast
from algo.reuse.softmax import softmax_numerators_int8
from algo.reuse.thresholds import DEFAULT_THETA, ThetaSpec, check_pair, resolve_theta
from algo.trace import OP_TYPES, Group, OpRecord, Trace, TraceWriter, pack_decisions

__all__ = [
    "CaptureError", "DEFAULT_MODEL", "DEFAULT_SIZE", "DEFAULT_STEPS", "DEFAULT_THETA", "SELF_OPS",
    "CROSS_OPS", "TEXT_TOKENS", "RESOLUTIONS", "capture", "capture_to_file", "quantize_int8",
    "attention_states", "parse_ops", "parse_resolution", "plan_ops", "pv_decisions", "resolution_grid",
    "write_shape_trace", "patch_of", "record_trajectory", "native_bf16_gemm", "bf16_gemm_in_fp32",
]

DEFAULT_MODEL = "wan2.1-t2v-1.3b"
DEFAULT_SIZE = "tiny"
#: Default denoising steps captured (indices into the 50-step schedule, shift 5): pure noise
#: (sigma 1.0), middle (0.54) and two late steps (0.19, 0.024). With seeded weights, neighbouring
#: tokens only become similar once the noise level is low (docs/capture.md).
DEFAULT_STEPS = (0, 40, 47, 49)
#: Ops recorded per block, in execution order.
SELF_OPS = ("qkv", "qk", "pv", "o_proj", "ffn1", "ffn2")
CROSS_OPS = ("cross_q", "cross_qk", "cross_pv", "cross_o")
#: Number of seeded text-embedding tokens (real Wan pads UMT5 output to 512; project stand-in).
TEXT_TOKENS = 8
#: Query rows per chunk of the float attention states (`attention_states`, one head at a time:
#: bounds the float32 score buffer to chunk x L; project choice: 1024 x 32,760 keys x 4 B = 134 MB at 480p).
P_CHUNK = 1024

ProgressFn = Callable[[int, int, str], None]


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


def _blocks_of(k: int) -> list[Group]:
    return [Group(k0, k1, axis, "block") for k0, k1, axis in block_groups(k)]


def _per_head(t: torch.Tensor) -> torch.Tensor:
    """``[1, S, heads, d_h]`` (the processor's layout) -> ``[heads, S, d_h]`` float32."""
    if t.ndim != 4 or t.shape[0] != 1:
        raise CaptureError(f"expected attention operands [1, S, heads, d_h] (batch 1), got {tuple(t.shape)}")
    return t[0].transpose(0, 1).to(torch.float32)


def _weight_t(*linears: torch.nn.Linear) -> torch.Tensor:
    """``concat(weights)^T``: the ``[in, out]`` stationary operand of one or more nn.Linear."""
    return torch.cat([lin.weight.detach() for lin in linears], dim=0).t()


class _StopForward(Exception):
    """Raised by a block hook after the last recorded block: later blocks need not run."""


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
                 thetas, b_msb: int, timing: dict | None = None, v: torch.Tensor | None = None):
    """Packed decisions of ``pv``'s streamed operand P without ever holding P whole.

    P = `algo.reuse.softmax.softmax_numerators_int8` of the int8 Q and K^T (quantised here as
    ``qk`` quantises them; uint8 ``[heads, M, L]``) is computed one latent frame of queries
    (``H*W`` rows) at a time per head. Every group of ``pv`` reuses along frames (axis ``"f"``,
    `algo.reuse.golden.block_groups`), so frame f's decisions depend only on frame f and the effective
    rows of frame f-1: `algo.reuse.kernels.decide_multi` decides frame f against the carried effective
    rows of frame f-1 (``prev``, one per theta) and updates them, which gives exactly the
    decisions of `algo.reuse.golden.decide` on the whole P (tests/test_capture.py). Peak memory per head:
    one frame of float32 scores (``H*W x L x 4`` bytes) plus T int16 frames of state.

    Args:
        q: ``[heads, M, d_h]`` float; k: ``[heads, L, d_h]`` float.
        groups: channel groups over the L keys, every axis ``"f"``.
        v: ``[heads, L, d_v]`` float, or None: with it, the attention states are computed in the
            same frame chunks (`attention_states`: float32, from the float operands).

        timing: if given, accumulates ``p_chunks`` (number of P query chunks: heads x frames),
            ``p_chunk_s`` (seconds computing P chunks) and ``p_decide_s`` (seconds deciding).

    Returns:
        ``(packed, out, lse)``: ``packed`` uint8 ``[len(thetas), heads, ceil(M * G / 4)]``, identical
        to packing `decide` on the whole P; with `v`, ``out`` float32 ``[heads, M, d_v]``
        (``softmax(s) V``) and ``lse`` float32 ``[heads, M]`` (``log sum_j exp s_ij``), else None.

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
    if v is not None:
        att = np.empty((heads, q.shape[1], v.shape[2]), dtype=np.float32)
        lse = np.empty((heads, q.shape[1]), dtype=np.float32)
    q_q, q_s = quantize_int8(q)
    k_q, k_s = quantize_int8(k.transpose(1, 2))
    tm = timing if timing is not None else {}
    for key in ("p_chunks", "p_chunk_s", "p_decide_s"):
        tm.setdefault(key, 0)
    for hd in range(heads):
        prev = None  # int16 [T, H*W, L]: effective P of the previous frame, per theta
        for f in range(f_n):
            t0 = time.perf_counter()
            rows = slice(f * hw, (f + 1) * hw)
            p = softmax_numerators_int8(q_q, k_q, q_s, k_s, rows=rows, heads=slice(hd, hd + 1))[0]  # [hw, L]
            if v is not None:
                att[hd:hd + 1, rows], lse[hd:hd + 1, rows] = attention_states(
                    q[hd:hd + 1, rows], k[hd:hd + 1], v[hd:hd + 1])
            t1 = time.perf_counter()
            tm["p_chunks"] += 1
            tm["p_chunk_s"] += t1 - t0
            if prev is None:  # frame 0 always computes; its effective value is itself
                dec[:, hd, :hw] = COMPUTE
                prev = np.repeat(p.astype(np.int16)[None], len(thetas), axis=0)
            else:
                dec[:, hd, f * hw:(f + 1) * hw] = decide_multi(p, (1, h_n, w_n), gt, thetas, b_msb, prev=prev)
            tm["p_decide_s"] += time.perf_counter() - t1
    packed = np.stack([np.stack([pack_decisions(dec[ti, hd]) for hd in range(heads)]) for ti in range(len(thetas))])
    return (packed, None, None) if v is None else (packed, att, lse)


class _Recorder:
    """Hooks state for one capture: which (step, block, attention) is running, and the records."""

    def __init__(self, qk_groups, theta, blocks, ops, tokens, progress, n_total, grid, b_msb,
                 thetas=None, sink=None, keep=True, plan=None, video_first=True, attn_states=True):
        self.qk_groups = qk_groups
        self.theta = theta
        self.blocks = set(blocks)
        self.last_block = max(blocks)
        self.ops_wanted = set(ops)
        self.tokens = tokens
        self.progress = progress
        self.n_total = n_total
        self.grid = grid
        self.b_msb = b_msb
        self.thetas = thetas  # None: exact trace; else decision trace for these pairs
        self.sink = sink
        self.keep = keep
        self.plan = plan or {}
        self.video_first = video_first
        self.attn_states = attn_states
        self.n_done = 0
        self.step = 0
        self.step_label = ""
        self.context: tuple[int, str] | None = None  # (block, "self" | "cross") inside attn1/attn2
        self.ops: list[OpRecord] = []
        self.timing = {"decide_s": 0.0, "pv_s": 0.0, "write_s": 0.0, "blocks_s": 0.0}
        self._block_t0 = 0.0
        self._w_cache: dict[tuple[int, str], tuple[np.ndarray | None, float]] = {}

    # -- recording -------------------------------------------------------------------------------
    def _weight(self, block: int, name: str, linears, cols=None) -> tuple[np.ndarray | None, float]:
        key = (block, name)
        if key not in self._w_cache:
            w = _weight_t(*linears)
            if cols is not None:
                w = w[cols[0]:cols[1]]
            self._w_cache[key] = (None, _scale_of(w)) if self.thetas is not None else quantize_int8(w)
        return self._w_cache[key]

    def _emit(self, op: OpRecord) -> None:
        want = self.plan.get((op.step, op.block, op.name))
        got = (op.batch, op.M, op.K, op.N)
        if want is not None and want != got:
            raise CaptureError(f"{op.name} of block {op.block}: captured (batch, M, K, N) = {got}, "
                               f"the model's config gives {want}")
        if self.sink is not None:
            t0 = time.perf_counter()
            self.sink(op)
            self.timing["write_s"] += time.perf_counter() - t0
        if self.keep:
            self.ops.append(op)
        else:  # exact op already on disk: keep only its shape
            self.ops.append(dataclasses.replace(op, X=None, W=None, dims=got, scores=None))

    def video(self, t: torch.Tensor, axis: int = 1) -> torch.Tensor:
        """The video-token rows of a sequence: all (Wan), the first M (Hunyuan: ``[video, text]``)
        or the last M (CogVideoX: ``[text, video]``)."""
        n = t.shape[axis]
        if n == self.tokens:
            return t
        return t.narrow(axis, 0 if self.video_first else n - self.tokens, self.tokens)

    def _add(self, name, block, x_q, x_scale, w_q, w_scale, groups, x_signed=True, w_shape=None, states=None,
             scores=None):
        if x_q is not None and x_q.ndim == 2:
            x_q = x_q[None]
        if w_q is not None and w_q.ndim == 2:
            w_q = w_q[None]
        rows = (x_q if x_q is not None else scores[0]).shape[1]
        if rows != self.tokens:
            raise CaptureError(f"{name} of block {block}: {rows} rows, expected {self.tokens} tokens")
        theta = resolve_theta(self.theta, self.step, name)
        if self.thetas is None:
            op = OpRecord(name=name, block=block, step=self.step,
                          X=None if x_q is None else np.ascontiguousarray(x_q),
                          W=np.ascontiguousarray(w_q), groups=list(groups), theta=theta, x_signed=x_signed,
                          x_scale=float(x_scale), w_scale=float(w_scale), scores=scores)
            if states is not None:
                op.attn_out = np.ascontiguousarray(states[0])
                op.lse = np.ascontiguousarray(states[1])
        else:
            t0 = time.perf_counter()
            packed = _decide_packed(x_q, self.grid, list(groups), self.thetas, self.b_msb)
            self.timing["decide_s"] += time.perf_counter() - t0
            op = self._decision_op(name, block, (x_q.shape[0], x_q.shape[1], x_q.shape[2], w_shape[-1]),
                                   packed, groups, x_signed, x_scale, w_scale)
        self._emit(op)

    def _decision_op(self, name, block, dims, packed, groups, x_signed, x_scale, w_scale) -> OpRecord:
        return OpRecord(name=name, block=block, step=self.step, X=None, W=None, groups=list(groups),
                        theta=tuple(self.thetas[0]), x_signed=x_signed, x_scale=float(x_scale),
                        w_scale=float(w_scale), dims=tuple(int(v) for v in dims), decisions=packed,
                        thetas=tuple(tuple(t) for t in self.thetas))

    def linear_input(self, name: str, block: int, linears, cols: tuple[int, int] | None = None):
        """A forward pre-hook recording the input of ``linears[0]``'s call with W = concat(weights)^T
        (video-token rows only; with `cols`, input channels ``cols[0]:cols[1]`` and the matching
        rows of W: one of the two GEMMs a fused linear layer adds up)."""

        def hook(_module, args, kwargs):
            if block not in self.blocks or name not in self.ops_wanted:
                return
            x = self.video(args[0] if args else kwargs["hidden_states"], axis=1)
            if cols is not None:
                x = x[..., cols[0]:cols[1]]
            x_q, x_s = quantize_int8(x)
            w_q, w_s = self._weight(block, name, linears, cols)
            n_out = sum(lin.out_features for lin in linears)
            self._add(name, block, x_q, x_s, w_q, w_s, _blocks_of(x_q.shape[-1]), w_shape=(n_out,))

        return hook

    def attention(self, query, key, value, layout: str = "bshd", attn_mask=None) -> None:
        """Called by the wrapped attention function with ``[1, S, heads, d_h]`` (``layout="bshd"``:
        Wan, Hunyuan ``dispatch_attention_fn``) or ``[1, heads, S, d_h]`` (``"bhsd"``: CogVideoX's
        ``F.scaled_dot_product_attention``) operands. Query rows are cut to the video tokens
        (`video_rows`); keys and values stay whole (joint attention: text keys too)."""
        if self.context is None or self.context[0] not in self.blocks:
            return
        block, kind = self.context
        prefix = "" if kind == "self" else "cross_"
        want_qk, want_pv = prefix + "qk" in self.ops_wanted, prefix + "pv" in self.ops_wanted
        if not (want_qk or want_pv):
            return
        if layout == "bhsd":
            query, key, value = (t.transpose(1, 2) for t in (query, key, value))
        qh, kh, vh = _per_head(query), _per_head(key), _per_head(value)
        qh = self.video(qh, axis=1)
        groups = self.qk_groups if kind == "self" else _blocks_of(qh.shape[-1])
        if want_qk or (want_pv and self.thetas is None):
            q_q, q_s = quantize_int8(qh)
            if self.thetas is None:
                k_q, k_s = quantize_int8(kh.transpose(1, 2))
            else:
                k_q, k_s = None, _scale_of(kh)
        if want_qk:
            self._add(prefix + "qk", block, q_q, q_s, k_q, k_s, groups, w_shape=(kh.shape[1],))
        if not want_pv:
            return
        t0 = time.perf_counter()
        pv_groups = _blocks_of(kh.shape[1])
        if self.thetas is None:
            states = kind == "self" and self.attn_states
            out, lse = attention_states(qh, kh, vh) if states else (None, None)
            v_q, v_s = quantize_int8(vh)
            # P is derived from the int8 Q and K (`algo.reuse.softmax`): materialised only when the
            # trace stays in memory; a trace streamed to a file stores Q and K, never P
            scores = (q_q, k_q, q_s, k_s)
            p = None if self.sink is not None else softmax_numerators_int8(*scores)
            self._add(prefix + "pv", block, p, 1.0 / 255.0, v_q, v_s, pv_groups, x_signed=False,
                      states=(out, lse) if states else None, scores=scores)
        else:
            states = kind == "self" and self.attn_states
            packed, out, lse = pv_decisions(qh, kh, self.grid, pv_groups, self.thetas, self.b_msb,
                                            timing=self.timing, v=vh if states else None)
            dims = (qh.shape[0], qh.shape[1], kh.shape[1], vh.shape[2])
            op = self._decision_op(prefix + "pv", block, dims, packed, pv_groups, False, 1.0 / 255.0, _scale_of(vh))
            if states:
                op.attn_out, op.lse = out, lse
            self._emit(op)
        self.timing["pv_s"] += time.perf_counter() - t0

    # -- context and progress hooks --------------------------------------------------------------
    def enter(self, block: int, kind: str):
        def hook(_module, _args, _kwargs):
            self.context = (block, kind)

        return hook

    def leave(self, _module, _args, _output):
        self.context = None

    def block_start(self, _module, _args, _kwargs):
        self._block_t0 = time.perf_counter()

    def block_done(self, block: int):
        def hook(_module, _args, _output):
            if block in self.blocks:
                self.timing["blocks_s"] += time.perf_counter() - self._block_t0
            self.n_done += 1
            if self.progress is not None:
                self.progress(self.n_done, self.n_total, f"{self.step_label} block {block}")
            if block == self.last_block:
                raise _StopForward

        return hook


def _register(model, rec: _Recorder) -> list:
    """Hooks on every transformer block (`algo.models.blocks_of`) at the family's GEMM sites
    (`algo.models.families.base.Family.sites`) for the ops of SPEC section 1."""
    from algo.models.families.base import Attention

    fam = model_family(model)
    handles = []

    def pre(module, hook):
        handles.append(module.register_forward_pre_hook(hook, with_kwargs=True))

    for b, (kind, blk) in enumerate(fam.blocks(model)):
        for site in fam.sites(kind, blk):
            if isinstance(site, Attention):
                pre(site.module, rec.enter(b, site.kind))
                handles.append(site.module.register_forward_hook(rec.leave))
            else:
                pre(site.hooked, rec.linear_input(site.op, b, site.linears, cols=site.cols))
        handles.append(blk.register_forward_hook(rec.block_done(b)))
        pre(blk, rec.block_start)
    return handles


def _check_thetas(theta: ThetaSpec, steps: Iterable[int], ops: Iterable[str]) -> None:
    """Resolve the threshold spec for every captured (step, op) up front; raises `CaptureError`."""
    if isinstance(theta, Mapping):
        unknown = set(theta) - set(OP_TYPES) - {"default"}
        if unknown:
            raise CaptureError(f"theta given for unknown op types {sorted(unknown)}; op types: {OP_TYPES}")
    for s in steps:
        for op in ops:
            try:
                resolve_theta(theta, s, op)
            except ValueError as err:
                raise CaptureError(str(err)) from None


#: Named video sizes ``(frames, height_px, width_px)`` (SPEC section 1: Wan 480p 832x480 and 720p
#: 1280x720, 81 frames).
RESOLUTIONS = {"480p": (81, 480, 832), "720p": (81, 720, 1280)}
#: Wan VAE compression (SPEC section 1): 4x in time (causal: 1 + 4n frames -> 1 + n latent frames),
#: 8x8 in space.
VAE_TIME, VAE_SPACE = 4, 8


def parse_resolution(text: str) -> tuple[int, int, int]:
    """``"480p"``, ``"720p"`` or ``"WxHxF"`` (pixels, pixels, video frames) -> ``(frames, height, width)``.

    Raises:
        CaptureError: unknown name or malformed ``WxHxF``.
    """
    t = str(text).strip().lower()
    if t in RESOLUTIONS:
        return RESOLUTIONS[t]
    parts = t.split("x")
    try:
        w, h, f = (int(v) for v in parts)
    except ValueError:
        raise CaptureError(f"--resolution must be 480p, 720p or WxHxF (e.g. 832x480x81), got {text!r}") from None
    if min(w, h, f) <= 0:
        raise CaptureError(f"--resolution sizes must be positive, got {text!r}")
    return (f, h, w)


def resolution_grid(resolution: str | tuple[int, int, int], patch: Sequence[int] = (1, 2, 2)) -> tuple[int, int, int]:
    """Token grid ``(F, H, W)`` of a video: latent ``((frames-1)/4 + 1, height/8, width/8)`` divided by the patch.

    480p (81 x 480 x 832) -> latent 21 x 60 x 104 -> tokens 21 x 30 x 52 = 32,760; 720p -> 21 x 45 x 80
    = 75,600 (SPEC section 1).

    Raises:
        CaptureError: frames not 1 + 4n, or a side not a multiple of 8 x the patch.
    """
    frames, height, width = parse_resolution(resolution) if isinstance(resolution, str) else resolution
    p_t, p_h, p_w = (int(v) for v in patch)
    if (frames - 1) % VAE_TIME:
        raise CaptureError(f"frames must be 1 + {VAE_TIME}n (Wan's causal VAE), got {frames}")
    lat_f = (frames - 1) // VAE_TIME + 1
    if height % (VAE_SPACE * p_h) or width % (VAE_SPACE * p_w) or lat_f % p_t:
        raise CaptureError(f"video {width}x{height}x{frames}: width and height must be multiples of "
                           f"{VAE_SPACE * p_w} and {VAE_SPACE * p_h} (VAE 8x8 times the {p_h}x{p_w} patch)")
    return (lat_f // p_t, height // (VAE_SPACE * p_h), width // (VAE_SPACE * p_w))


def parse_ops(ops: str | Sequence[str] | None, include_cross: bool = False) -> tuple[str, ...]:
    """Op types to record, in execution order (`OP_TYPES` order).

    None: `SELF_OPS` (plus `CROSS_OPS` when `include_cross`); a string: comma-separated names,
    ``self``, ``cross`` or ``all``.

    Raises:
        CaptureError: an unknown op type or an empty selection.
    """
    if ops is None:
        names = set(SELF_OPS) | (set(CROSS_OPS) if include_cross else set())
    else:
        items = [v.strip() for v in ops.split(",")] if isinstance(ops, str) else [str(v) for v in ops]
        names = set()
        for v in (i for i in items if i):
            names |= {"self": set(SELF_OPS), "cross": set(CROSS_OPS), "all": set(OP_TYPES)}.get(v, {v})
        unknown = sorted(names - set(OP_TYPES))
        if unknown:
            raise CaptureError(f"unknown op types {unknown}; op types: {', '.join(OP_TYPES)}")
        if include_cross:
            names |= set(CROSS_OPS)
    if not names:
        raise CaptureError("no op types selected")
    return tuple(o for o in OP_TYPES if o in names)


def plan_ops(model: str = DEFAULT_MODEL, size: str = DEFAULT_SIZE, grid: tuple[int, int, int] | None = None,
             steps: Sequence[int] = DEFAULT_STEPS, blocks: Sequence[int] | None = None,
             ops: str | Sequence[str] | None = None, *, resolution: str | None = None,
             theta: ThetaSpec = DEFAULT_THETA, net: torch.nn.Module | None = None,
             text_tokens: int = TEXT_TOKENS) -> tuple[tuple, list[OpRecord]]:
    """The op list a capture records, with shapes and groups, from the model built on the meta device.

    No forward pass and no memory: shapes are read from the model's own modules (linear layers'
    ``in_features``/``out_features``, ``attn1.heads``, ``model.rope``) and the token grid; ``L`` =
    ``text_tokens`` text tokens for cross-attention and joint attention (default `TEXT_TOKENS`, the
    capture's; `algo.synth` passes the real models' 512).

    Returns:
        ``(grid, ops)``: ops are ``"shape"`` `OpRecord` s (X = W = None, ``dims = (batch, M, K, N)``),
        in capture order.

    Raises:
        CaptureError: unknown model, size, op type; bad grid, resolution, steps or blocks.
    """
    spec = get_spec(model, size)
    cfg = spec.sizes[size]
    if resolution is not None:
        grid = resolution_grid(resolution, patch_of(cfg))
    grid = tuple(int(v) for v in (spec.default_grid[size] if grid is None else grid))
    net = meta_model(spec.name, size) if net is None else net
    m = grid[0] * grid[1] * grid[2]
    qk_groups = rope_groups(net)
    all_blocks = blocks_of(net)
    block_list = list(range(len(all_blocks))) if blocks is None else sorted({int(b) for b in blocks})
    if block_list and (block_list[0] < 0 or block_list[-1] >= len(all_blocks)):
        raise CaptureError(f"blocks must be indices in 0..{len(all_blocks) - 1}, got {blocks}")
    names = parse_ops(ops)
    _check_family_ops(spec, names)
    fam = family_of(spec)
    # Keys of joint attention (Hunyuan, CogVideoX): the M video tokens and the text tokens.
    n_keys = m + text_tokens if fam.joint_text else m
    out = []
    for s in sorted({int(v) for v in steps}):
        for b in block_list:
            dims = _block_dims(fam, *all_blocks[b], m, {"self": n_keys, "cross": text_tokens})
            for name in names:
                d = dims[name]
                groups = qk_groups if name == "qk" else _blocks_of(d[2])
                out.append(OpRecord(name=name, block=b, step=s, X=None, W=None, groups=list(groups),
                                    theta=resolve_theta(theta, s, name), x_signed=name not in ("pv", "cross_pv"),
                                    dims=d))
    return grid, out


def _block_dims(fam, kind: str, blk, m: int, keys: dict[str, int]) -> dict[str, tuple[int, int, int, int]]:
    """``op -> (batch, M, K, N)`` of one block from its GEMM sites: linears ``(1, M, K, N)``;
    ``qk``/``pv`` (``cross_`` too) ``(heads, M, d_h, keys)`` / ``(heads, M, keys, d_h)``, keys per
    attention kind."""
    from algo.models.families.base import Attention

    dims = {}
    for site in fam.sites(kind, blk):
        if isinstance(site, Attention):
            heads = int(site.module.heads)
            d_h = site.module.to_q.out_features // heads
            prefix = "" if site.kind == "self" else "cross_"
            dims[prefix + "qk"] = (heads, m, d_h, keys[site.kind])
            dims[prefix + "pv"] = (heads, m, keys[site.kind], d_h)
        else:
            dims[site.op] = (1, m, site.k, site.n)
    return dims


def _check_family_ops(spec, names) -> None:
    if not family_of(spec).has_cross and set(names) & set(CROSS_OPS):
        raise CaptureError(f"{spec.name} has no cross-attention (text and video tokens attend jointly); "
                           f"op types: {', '.join(SELF_OPS)}")


def _parse_thetas(thetas) -> list[tuple[float, float]] | None:
    if thetas is None:
        return None
    if isinstance(thetas, str):
        thetas = [p.split(",") for p in thetas.split(";") if p.strip()]
    out = []
    for i, t in enumerate(thetas):
        try:
            out.append(check_pair(t, f" {i} of thetas"))
        except ValueError as err:
            raise CaptureError(str(err)) from None
    if not out:
        raise CaptureError("decision traces need at least one theta pair (e.g. '2,6;4,12;8,24')")
    return out


def capture(
    model: str = DEFAULT_MODEL,
    size: str = DEFAULT_SIZE,
    steps: Sequence[int] = DEFAULT_STEPS,
    num_inference_steps: int = 50,
    grid: tuple[int, int, int] | None = None,
    seed: int = 0,
    theta: ThetaSpec = DEFAULT_THETA,
    b_msb: int = 4,
    progress: ProgressFn | None = None,
    *,
    blocks: Sequence[int] | None = None,
    include_cross: bool = False,
    ops: str | Sequence[str] | None = None,
    resolution: str | None = None,
    weights: str | Path | None = None,
    dtype: str | None = None,
    thetas: str | Sequence[Sequence[float]] | None = None,
    image: str = "astronaut",
    pan_px: int = lat.DEFAULT_PAN_PX,
    shift: float = lat.DEFAULT_SHIFT,
    out: str | Path | None = None,
    attn_states: bool = True,
    stream_blocks: bool = False,
) -> Trace:
    """Run the model on real-content latents and return an exact or a decision trace.

    Args:
        model: registry name (`algo.models.MODELS`), e.g. ``"wan2.1-t2v-1.3b"``.
        size: ``"tiny"`` or ``"full"``.
        steps: denoising step indices to capture, each in ``0 .. num_inference_steps-1``
            (sorted, duplicates dropped).
        num_inference_steps: length N of the flow-matching schedule (`algo.latents.flow_sigmas`).
        grid: token grid ``(F, H, W)`` after patching (latent = grid * patch size); None: the
            size's default, ``(4, 8, 8)`` = 256 tokens. Not together with `resolution`.
        seed: seeds the weights (torch, when `weights` is None), text embeddings and noise (numpy).
        theta: thresholds in int8 units per channel (SPEC section 2): a pair for every op, a
            mapping op type -> pair (``"default"`` for the rest), a callable ``(step, op) -> pair`` or
            a `algo.reuse.thresholds.ThetaSchedule` (step-sensitive thresholds); resolved per recorded op.
            Exact traces only; decision traces use `thetas`.
        b_msb: reused high bits for PARTIAL, 1..7 (stored in the trace).
        progress: called as ``progress(done, total, label)``: once with ``done = 0`` before the
            model is built (the full model takes ~25 s to initialise on 2 cores), then after each
            block run (``total = len(steps) * (last recorded block + 1)``).
        blocks: block indices to record (None: all). Blocks up to the last recorded one run; later
            blocks are neither built (seeded or safetensors weights) nor run.
        include_cross: also record cross_q, cross_qk, cross_pv, cross_o (same as adding ``cross``
            to `ops`).
        ops: op types to record (`parse_ops`: names, ``self``, ``cross``, ``all``); None: `SELF_OPS`.
        resolution: ``"480p"``, ``"720p"`` or ``"WxHxF"`` pixels and video frames (`resolution_grid`).
        weights: None (seeded), a diffusers folder or a ``.safetensors`` file (`algo.models.build_model`).
        dtype: ``"fp32"`` or ``"bf16"`` (None: the registry's, float32).
        thetas: None for an exact trace (int8 operands); else a decision trace holding packed
            decisions for each pair (``"2,6;4,12;8,24"`` or a list of pairs), no operands.
        image, pan_px, shift: latent content and schedule (`algo.latents`).
        stream_blocks: any model, seeded or with `weights`: keep the blocks on the meta device and
            fill each one just before it runs, freeing it after (`algo.models.build_streamed`:
            one block in memory at a time, e.g. Wan2.1-14B, HunyuanVideo; seeded blocks are
            rebuilt from their recorded RNG state, checkpoint blocks read lazily with
            ``safe_open``; the trace equals the unstreamed capture bit for bit).
        attn_states: store the attention output and log-sum-exp per head on every self-attention
            ``pv`` op (`algo.trace`: exact traces version 3; decision traces version 4, computed in
            `pv_decisions`' frame chunks).
        out: write the trace here as it is captured (`algo.trace.TraceWriter`: op arrays stream
            into a temporary file, renamed into place at the end; nothing is left on error). The
            returned trace then holds the decision ops (decision traces) or only op shapes (exact).

    Returns:
        A `Trace` with ops in execution order: for each step, for each block, the selected op types
        in `OP_TYPES` order; ``trace.timing`` holds seconds spent: ``build_s``, ``forward_s``
        (forward passes including hooks), ``blocks_s`` (of which inside the recorded blocks, hooks
        included: the time to set against a bare forward of those blocks), ``decide_s``, ``pv_s`` (P and its decisions),
        ``write_s``; decision traces with pv also ``p_chunks`` (P query chunks, one latent frame
        of one head each), ``p_chunk_s`` (computing them) and ``p_decide_s`` (their decisions).

    Raises:
        CaptureError: unknown model or size, bad steps, grid, resolution, blocks, ops, theta(s),
            b_msb, dtype or weights; a captured shape that disagrees with the config (`plan_ops`).
    """
    t_start = time.perf_counter()
    spec = get_spec(model, size)
    cfg = spec.sizes[size]
    n_layers = num_blocks(spec.name, size)
    if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
        raise CaptureError(f"num_inference_steps must be a positive integer, got {num_inference_steps!r}")
    step_list = sorted({int(s) for s in steps})
    if not step_list or step_list[0] < 0 or step_list[-1] >= num_inference_steps:
        raise CaptureError(f"steps must be non-empty indices in 0..{num_inference_steps - 1}, got {list(steps)}")
    if resolution is not None:
        if grid is not None:
            raise CaptureError("give grid or resolution, not both")
        grid = resolution_grid(resolution, patch_of(cfg))
    grid = tuple(int(v) for v in (spec.default_grid[size] if grid is None else grid))
    max_len = int(cfg.get("rope_max_seq_len", 1024))
    if len(grid) != 3 or min(grid) <= 0 or max(grid) > max_len:
        raise CaptureError(f"grid must be 3 positive token counts (F, H, W), each <= {max_len}; got {grid}")
    block_list = list(range(n_layers)) if blocks is None else sorted({int(b) for b in blocks})
    if not block_list or block_list[0] < 0 or block_list[-1] >= n_layers:
        raise CaptureError(f"blocks must be indices in 0..{n_layers - 1}, got {blocks}")
    if not 1 <= int(b_msb) <= 7:
        raise CaptureError(f"b_msb must be in 1..7, got {b_msb}")
    if image not in lat.IMAGES:
        raise CaptureError(f"unknown image {image!r}; choose one of {', '.join(lat.IMAGES)}")
    if dtype is not None and dtype not in DTYPES:
        raise CaptureError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    op_names = parse_ops(ops, include_cross)
    _check_family_ops(spec, op_names)
    fam = family_of(spec)
    theta_list = _parse_thetas(thetas)
    _check_thetas(theta, step_list, op_names)
    if weights is not None and not Path(weights).expanduser().exists():
        raise CaptureError(f"--weights: checkpoint not found: {Path(weights).expanduser().resolve()}")

    last = block_list[-1]
    n_total = len(step_list) * (last + 1)
    if progress is not None:
        progress(0, n_total, f"building {spec.name} ({size})")
    folder = weights is not None and Path(weights).expanduser().is_dir()
    streamer = None
    if stream_blocks:
        net, weights_desc, streamer = build_streamed(spec.name, size, seed, dtype=DTYPES[dtype] if dtype else None,
                                                     num_layers=last + 1, weights=weights)
        run_dtype = DTYPES[dtype] if dtype else spec.dtype.get(size, torch.float32)
    else:
        net, weights_desc = build_model(spec.name, size, seed, weights=weights,
                                        dtype=DTYPES[dtype] if dtype else None,
                                        num_layers=None if folder else last + 1)
        run_dtype = _run_dtype(net)
    t_built = time.perf_counter()
    _, plan = plan_ops(spec.name, size, grid, step_list, block_list, op_names, theta=theta,
                       net=meta_model(spec.name, size))
    plan_dims = {(o.step, o.block, o.name): (o.batch, o.M, o.K, o.N) for o in plan}
    p_t, p_h, p_w = patch_of(cfg)
    f, h, w = grid
    x0 = lat.model_latents(spec, size, (f * p_t, h * p_h, w * p_w), pan_px=pan_px, image=image)
    eps = lat.noise_like(x0, seed)
    schedule = fam.schedule(num_inference_steps, shift)
    inputs = fam.inputs(cfg, net, grid, seed, run_dtype, TEXT_TOKENS)
    prompt = lat.class_prompt(spec, size, image)
    if prompt is not None:  # the trained size: the class prompt of the image (algo.train.clips)
        inputs = dataclasses.replace(inputs, text=torch.from_numpy(prompt[1](inputs.text.shape[-1])).to(run_dtype))
    text_desc = prompt[0] if prompt is not None else (f"{TEXT_TOKENS} seeded N(0,1) tokens of width "
                                                      f"{inputs.text.shape[-1]}")

    notes = (
        f"latents: {image} panned {pan_px} px/latent frame, {lat.encoder_name(spec, size)}, "
        f"latent grid {f * p_t}x{h * p_h}x{w * p_w}; {schedule.describe()}; text: {text_desc}; blocks recorded: {block_list}; "
        f"ops: {list(op_names)}; "
        f"dtype: {str(run_dtype).replace('torch.', '')}"
        + (" (linears as float32 GEMMs of the bf16 operands: CPU without oneDNN bf16)"
           if run_dtype == torch.bfloat16 and not native_bf16_gemm() else "")
        + "; pv X = P = round(255 exp(c (S - rowmax S))) from qk's int8 scores S (algo.reuse.softmax), "
          "x_scale 1/255" + ("; P not stored: regenerated from Q and K" if theta_list is None and out is not None
                             else "")
        + ("; pv decisions from P computed one latent frame of queries at a time (exact)"
           if theta_list is not None else "")
    )
    kind = "exact" if theta_list is None else "decisions"
    writer = None
    if out is not None:
        writer = TraceWriter(out, grid, kind, b_msb=int(b_msb), model=spec.name, size=size,
                             weights=weights_desc, seed=int(seed), notes=notes)
    rec = _Recorder(rope_groups(net), theta, block_list, op_names, f * h * w, progress, n_total, grid,
                    int(b_msb), thetas=theta_list, sink=writer.add if writer else None,
                    keep=writer is None or kind == "decisions", plan=plan_dims,
                    video_first=fam.video_first, attn_states=attn_states)
    step_meta = []
    handles = _register(net, rec)
    try:
        with torch.inference_mode(), fam.attention_patch(rec.attention), bf16_gemm_in_fp32(run_dtype):
            for s in step_list:
                sigma, timestep = schedule.sigma(s), schedule.timestep(s)
                x_t = torch.from_numpy(schedule.noised(x0, eps, s)).to(run_dtype)
                step_meta.append({"index": s, "sigma": sigma, "timestep": timestep})
                rec.step, rec.step_label = s, f"step {s} (sigma {sigma:.3f})"
                try:
                    net(**fam.forward_kwargs(inputs, x_t, timestep), return_dict=False)
                except _StopForward:
                    pass
        if writer is not None:
            writer.steps = step_meta
            writer.commit()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    finally:
        for hd in handles:
            hd.remove()
        if streamer is not None:
            streamer.release()
    t_end = time.perf_counter()
    timing = dict(rec.timing, build_s=t_built - t_start, forward_s=t_end - t_built - rec.timing["write_s"],
                  total_s=t_end - t_start)
    return Trace(
        grid=grid, ops=rec.ops, b_msb=int(b_msb), model=spec.name, size=size, weights=weights_desc,
        seed=int(seed), steps=step_meta, notes=notes, timing=timing,
    )


def patch_of(cfg: Mapping) -> tuple[int, int, int]:
    """The patch ``(p_t, p_h, p_w)`` of a model config (Wan: ``patch_size`` triple; Hunyuan:
    ``patch_size_t`` x ``patch_size``^2; CogVideoX 1.0: 1 x ``patch_size``^2, ``patch_size_t`` None)."""
    p = cfg["patch_size"]
    if isinstance(p, (list, tuple)):
        return tuple(int(v) for v in p)
    return (int(cfg.get("patch_size_t") or 1), int(p), int(p))


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


def _run_dtype(net: torch.nn.Module) -> torch.dtype:
    """The dtype the blocks compute in: that of the first block's query projection."""
    fam = model_family(net)
    kind, blk = fam.blocks(net)[0]
    return fam.self_attention(kind, blk).to_q.weight.dtype


def write_shape_trace(out: str | Path, model: str = DEFAULT_MODEL, size: str = DEFAULT_SIZE, *,
                      grid: tuple[int, int, int] | None = None, resolution: str | None = None,
                      steps: Sequence[int] = DEFAULT_STEPS, num_inference_steps: int = 50,
                      blocks: Sequence[int] | None = None, ops: str | Sequence[str] | None = None,
                      include_cross: bool = False, theta: ThetaSpec = DEFAULT_THETA, b_msb: int = 4,
                      progress: ProgressFn | None = None) -> Trace:
    """Write a shape trace (`algo.trace` kind ``"shapes"``): every selected op's ``(batch, M, K, N)``,
    groups and theta at any size, from the model built on the meta device (`plan_ops`): no
    weights, no forward pass, no memory (a full Wan2.1-14B 720p plan takes seconds).

    Scales are stored as 1.0 placeholders (nothing was quantised). Steps are recorded with the
    schedule's noise level as a capture would (flow matching; CogVideoX: DDPM ``sqrt(1-abar)``).

    Raises:
        CaptureError: as `plan_ops`, plus bad steps or b_msb; `algo.trace.TraceError` never (the
            ops are checked before the file is committed).
    """
    spec = get_spec(model, size)
    if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
        raise CaptureError(f"num_inference_steps must be a positive integer, got {num_inference_steps!r}")
    step_list = sorted({int(s) for s in steps})
    if not step_list or step_list[0] < 0 or step_list[-1] >= num_inference_steps:
        raise CaptureError(f"steps must be non-empty indices in 0..{num_inference_steps - 1}, got {list(steps)}")
    if not 1 <= int(b_msb) <= 7:
        raise CaptureError(f"b_msb must be in 1..7, got {b_msb}")
    if grid is not None and resolution is not None:
        raise CaptureError("give grid or resolution, not both")
    op_names = parse_ops(ops, include_cross)
    _check_thetas(theta, step_list, op_names)
    if progress is not None:
        progress(0, 1, f"planning {spec.name} ({size})")
    net = meta_model(spec.name, size)
    g, plan = plan_ops(spec.name, size, grid, step_list, blocks, op_names, resolution=resolution, theta=theta,
                       net=net)
    step_meta = family_of(spec).schedule(num_inference_steps).step_meta(step_list)
    notes = (f"shape trace: shapes from {spec.diffusers_class} built on the meta device ({spec.source}); "
             f"no weights, no forward, scales are placeholders; joint/cross attention text tokens: {TEXT_TOKENS}")
    with TraceWriter(out, g, "shapes", b_msb=int(b_msb), model=spec.name, size=size,
                     weights="none (shape trace)", seed=0, steps=step_meta, notes=notes) as wr:
        for op in plan:
            wr.add(op)
    if progress is not None:
        progress(1, 1, f"{len(plan)} ops")
    return Trace(grid=g, ops=plan, b_msb=int(b_msb), model=spec.name, size=size, weights="none (shape trace)",
                 steps=step_meta, notes=notes)


def capture_to_file(out: str | Path, **kwargs) -> Trace:
    """`capture` (same keyword arguments) streaming the trace into ``out`` (atomic; `algo.trace.TraceWriter`).

    Returns:
        The captured `Trace` (op shapes only for exact traces: the operands are on disk).
    """
    return capture(out=out, **kwargs)


def record_trajectory(model: str = DEFAULT_MODEL, size: str = DEFAULT_SIZE, latent_grid: tuple[int, int, int] = (3, 16, 16),
                      num_inference_steps: int = 50, seed: int = 0, shift: float = lat.DEFAULT_SHIFT,
                      weights: str | Path | None = None, progress: ProgressFn | None = None) -> tuple[np.ndarray, str]:
    """The latent trajectory of a real sampling run: text-to-video from pure noise, Euler flow matching.

    ``z_0 = eps`` (`algo.latents.noise_like` of the latent shape, seed ``seed``), then for each step i
    of the N-step schedule (`algo.latents.flow_sigmas` with ``shift``, terminal sigma 0 appended)
    ``z_{i+1} = z_i + (sigma_{i+1} - sigma_i) v(z_i, 1000 sigma_i)`` in float32, batch 1, one
    conditional branch (no classifier-free guidance), 8 seeded text tokens (`TEXT_TOKENS`, stream
    ``[seed, 1]`` as `capture`). Wan family only.

    Args:
        latent_grid: ``(F, H, W)`` latent frames and pixels (before the model's patch; H and W
            multiples of the patch).
        weights: as `algo.models.build_model` (None: seeded weights).

    Returns:
        ``(trajectory, weights_description)``: float32 ``[N + 1, 16, F, H, W]``, entry i the latent
        step i starts from (entry N the final latent).

    Raises:
        CaptureError: unknown model or size, a non-Wan family, a bad grid or step count.
    """
    spec = get_spec(model, size)
    if spec.family != "wan":
        raise CaptureError(f"trajectory recording supports the Wan family (Euler flow-matching loop); {spec.name!r} "
                           f"is {spec.family!r}")
    cfg = spec.sizes[size]
    pt, ph, pw = patch_of(cfg)
    grid = tuple(int(v) for v in latent_grid)
    if len(grid) != 3 or min(grid) <= 0 or grid[0] % pt or grid[1] % ph or grid[2] % pw:
        raise CaptureError(f"latent grid must be 3 positive sizes, H and W multiples of the patch {(pt, ph, pw)}; "
                           f"got {latent_grid}")
    if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
        raise CaptureError(f"num_inference_steps must be a positive integer, got {num_inference_steps!r}")
    net, wdesc = build_model(spec.name, size, seed, weights=weights)
    dtype = next(net.parameters()).dtype
    sig = np.append(lat.flow_sigmas(num_inference_steps, shift), np.float32(0.0)).astype(np.float32)
    z = lat.noise_like(np.zeros((1, lat.LATENT_CHANNELS, *grid), dtype=np.float32), seed)
    text = np.random.default_rng([int(seed), 1]).standard_normal((1, TEXT_TOKENS, int(cfg["text_dim"])))
    text_t = torch.from_numpy(text.astype(np.float32)).to(dtype)
    out = np.empty((num_inference_steps + 1, *z.shape[1:]), dtype=np.float32)
    x = torch.from_numpy(z)
    with torch.inference_mode():
        for i in range(num_inference_steps):
            out[i] = x[0].numpy()
            t = torch.tensor([float(sig[i] * np.float32(lat.NUM_TRAIN_TIMESTEPS))], dtype=torch.float32)
            v = net(hidden_states=x.to(dtype), timestep=t, encoder_hidden_states=text_t,
                    return_dict=False)[0].to(torch.float32)
            x = x + float(sig[i + 1] - sig[i]) * v
            if progress is not None:
                progress(i + 1, num_inference_steps, f"step {i} (sigma {float(sig[i]):.3f})")
    out[num_inference_steps] = x[0].numpy()
    return out, wdesc
