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
- ``pv``: X = P = ``round(255 exp(s - rowmax s))`` uint8 ``[heads, M, M]``; W = V ``[heads, M, d_h]``.
- ``o_proj``: X = input of ``attn1.to_out[0]`` ``[1, M, d]``; W = its weight^T ``[1, d, d]``.
- ``ffn1``: X = input of ``ffn.net[0].proj`` ``[1, M, d]``; W = its weight^T ``[1, d, d_ffn]``.
- ``ffn2``: X = input of ``ffn.net[2]`` (after GELU) ``[1, M, d_ffn]``; W = its weight^T ``[1, d_ffn, d]``.

with ``s = Q K^T / sqrt(d_h)`` in float32 from the float Q and K (the 1/rowsum normalisation runs on
the vector unit, SPEC section 1). With ``include_cross=True`` the cross-attention GEMMs whose streamed
operand is the video tokens are recorded too: ``cross_q`` (``attn2`` input, ``to_q`` weight^T),
``cross_qk`` (Q after RMSNorm [M, d_h] against K^T [d_h, L]; no RoPE), ``cross_pv`` (P [M, L] against
V [L, d_h]) and ``cross_o``. The text-side K/V projections (L rows, not the token grid) are not
recorded. Biases are not part of the GEMM and are ignored.

How: Wan's attention processor calls the module-level
``diffusers.models.transformers.transformer_wan.dispatch_attention_fn`` with Q and K already
rotated; it is wrapped for the duration of the capture (restored in ``finally``); forward
pre-hooks on the linear layers capture their inputs. Tokens are in the model's order, raster
``f*(H*W) + h*W + w``: ``WanTransformer3DModel.forward`` flattens the patch-embedding output
``[B, C, F, H, W]`` with ``flatten(2)``, and ``WanRotaryPosEmbed`` builds its tables in the same order.

Quantisation (SPEC section 1): symmetric int8, one scale per (step, block, op, tensor):
``scale = max|x| / 127`` (1 when x is all zero), ``q = clip(rint(x / scale), -128, 127)``
(``np.rint``: round half to even); per-head tensors share one scale across heads. P is uint8 with
``x_scale = 1/255``.

Channel groups: ``qk`` uses the model's RoPE t/h/w split (`algo.models.rope_groups`); every other op
uses `algo.golden.block_groups` (blocks of ``G = 8 * ceil(K / 64)``, reuse axis ``"f"``, kind
``"block"``); for ``pv`` K is the key-token count M.

Determinism: weights from ``torch.manual_seed(seed)``, text embeddings and noise from
``numpy.random.default_rng([seed, stream])``; the same arguments give a byte-identical trace file
on the same machine and library versions.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from algo import latents as lat
from algo.golden import block_groups, decide
from algo.models import DTYPES, CaptureError, build_model, get_spec, meta_model, rope_groups
from algo.thresholds import DEFAULT_THETA, ThetaSpec, check_pair, resolve_theta
from algo.trace import OP_TYPES, Group, OpRecord, Trace, TraceWriter, pack_decisions

__all__ = [
    "CaptureError", "DEFAULT_MODEL", "DEFAULT_SIZE", "DEFAULT_STEPS", "DEFAULT_THETA", "SELF_OPS",
    "CROSS_OPS", "TEXT_TOKENS", "RESOLUTIONS", "capture", "capture_to_file", "quantize_int8",
    "softmax_numerators", "parse_ops", "parse_resolution", "plan_ops", "pv_decisions", "resolution_grid",
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
#: Query rows per chunk when computing P (bounds the float32 score buffer to heads x chunk x M).
P_CHUNK = 1024
#: Elements per float64 chunk in `quantize_int8` (32 MB of float64; project choice).
QUANT_CHUNK = 1 << 22

ProgressFn = Callable[[int, int, str], None]


def quantize_int8(x: np.ndarray | torch.Tensor) -> tuple[np.ndarray, float]:
    """Symmetric per-tensor int8: ``(q, scale)`` with ``x ~ q * scale``.

    ``scale = max|x| / 127`` (1.0 for an all-zero tensor); ``q = clip(rint(x / scale), -128, 127)``,
    computed in float64, round half to even.

    Raises:
        CaptureError: x contains NaN or infinity.
    """
    if isinstance(x, torch.Tensor):
        x = x.detach().to(torch.float32).cpu().numpy()
    x = np.asarray(x)
    if x.dtype != np.float64:
        x = x.astype(np.float32, copy=False)  # float32 -> float64 is exact, so amax and q are unchanged
    flat = x.reshape(-1)
    amax = float(max(flat.max(), -flat.min())) if flat.size else 0.0
    if not math.isfinite(amax):
        raise CaptureError("non-finite activation or weight met while quantising")
    scale = amax / 127.0 if amax > 0 else 1.0
    q = np.empty(flat.shape, dtype=np.int8)
    for i in range(0, flat.size, QUANT_CHUNK):  # float64 work in chunks: bounds peak memory at 480p
        q[i:i + QUANT_CHUNK] = np.clip(np.rint(flat[i:i + QUANT_CHUNK].astype(np.float64) / scale), -128, 127)
    return q.reshape(x.shape), scale


def softmax_numerators(q: torch.Tensor, k: torch.Tensor, chunk: int = P_CHUNK) -> np.ndarray:
    """``P = round(255 * exp(s - rowmax s))`` with ``s = q k^T / sqrt(d_h)``, float32, in query chunks.

    Args:
        q: ``[heads, M, d_h]`` float.
        k: ``[heads, L, d_h]`` float.

    Returns:
        ``[heads, M, L]`` uint8 (``torch.round``: half to even; the row maximum gives 255).
    """
    q = q.to(torch.float32)
    k_t = k.to(torch.float32).transpose(1, 2)
    heads, m, d_h = q.shape
    out = np.empty((heads, m, k_t.shape[2]), dtype=np.uint8)
    inv = 1.0 / math.sqrt(d_h)
    for i0 in range(0, m, chunk):
        s = torch.matmul(q[:, i0:i0 + chunk], k_t) * inv
        p = torch.exp(s - s.amax(dim=-1, keepdim=True))
        out[:, i0:i0 + chunk] = torch.round(p * 255.0).to(torch.uint8).numpy()
    return out


def _blocks_of(k: int) -> list[Group]:
    return [Group(k0, k1, axis, "block") for k0, k1, axis in block_groups(k)]


def _per_head(t: torch.Tensor) -> torch.Tensor:
    """``[1, S, heads, d_h]`` (the processor's layout) -> ``[heads, S, d_h]`` float32."""
    if t.ndim != 4 or t.shape[0] != 1:
        raise CaptureError(f"expected attention operands [1, S, heads, d_h], got {tuple(t.shape)}")
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
    """Decisions of every batch index for every theta, packed: uint8 ``[T, batch, ceil(M*G/4)]``."""
    gt = [g.as_tuple() for g in groups]
    return np.stack([np.stack([pack_decisions(decide(x_q[b], grid, gt, th, b_msb)[0]) for b in range(x_q.shape[0])])
                     for th in thetas])


def pv_decisions(q: torch.Tensor, k: torch.Tensor, grid: tuple[int, int, int], groups: list[Group],
                 thetas, b_msb: int) -> np.ndarray:
    """Packed decisions of ``pv``'s streamed operand P without ever holding P whole.

    P = `softmax_numerators` (uint8, ``[heads, M, L]``) is computed one latent frame of queries
    (``H*W`` rows) at a time per head. Every group of ``pv`` reuses along frames (axis ``"f"``,
    `algo.golden.block_groups`), so frame f's decisions depend only on frame f and the effective
    rows of frame f-1: `algo.golden.decide` runs on the two-frame grid ``(2, H, W)`` whose first
    frame is frame f-1's effective operand (frame 0 of a two-frame grid always computes, so its
    effective value is itself) and whose second is frame f; its frame-1 decisions and effective
    rows are exactly those of the full-grid `decide`. Peak memory per head: one frame of float32
    scores (``H*W x L x 4`` bytes) plus a few uint8/int16 copies.

    Args:
        q: ``[heads, M, d_h]`` float; k: ``[heads, L, d_h]`` float.
        groups: channel groups over the L keys, every axis ``"f"``.

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
    for hd in range(heads):
        prev = [None] * len(thetas)
        for f in range(f_n):
            p = softmax_numerators(q[hd:hd + 1, f * hw:(f + 1) * hw], k[hd:hd + 1])[0]  # [hw, L] uint8
            for ti, th in enumerate(thetas):
                if prev[ti] is None:
                    dec[ti, hd, :hw] = 0
                    prev[ti] = p
                    continue
                d2, eff2 = decide(np.concatenate([prev[ti], p]), (2, h_n, w_n), gt, th, b_msb)
                dec[ti, hd, f * hw:(f + 1) * hw] = d2[hw:]
                prev[ti] = eff2[hw:].astype(np.uint8)  # effective P stays in 0..255
    return np.stack([np.stack([pack_decisions(dec[ti, hd]) for hd in range(heads)]) for ti in range(len(thetas))])


class _Recorder:
    """Hooks state for one capture: which (step, block, attention) is running, and the records."""

    def __init__(self, qk_groups, theta, blocks, ops, tokens, progress, n_total, grid, b_msb,
                 thetas=None, sink=None, keep=True, plan=None):
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
        self.n_done = 0
        self.step = 0
        self.step_label = ""
        self.context: tuple[int, str] | None = None  # (block, "self" | "cross") inside attn1/attn2
        self.ops: list[OpRecord] = []
        self.timing = {"decide_s": 0.0, "pv_s": 0.0, "write_s": 0.0}
        self._w_cache: dict[tuple[int, str], tuple[np.ndarray | None, float]] = {}

    # -- recording -------------------------------------------------------------------------------
    def _weight(self, block: int, name: str, linears) -> tuple[np.ndarray | None, float]:
        key = (block, name)
        if key not in self._w_cache:
            w = _weight_t(*linears)
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
            self.ops.append(dataclasses.replace(op, X=None, W=None, dims=got))

    def _add(self, name, block, x_q, x_scale, w_q, w_scale, groups, x_signed=True, w_shape=None):
        if x_q.ndim == 2:
            x_q = x_q[None]
        if w_q is not None and w_q.ndim == 2:
            w_q = w_q[None]
        if x_q.shape[1] != self.tokens:
            raise CaptureError(f"{name} of block {block}: {x_q.shape[1]} rows, expected {self.tokens} tokens")
        theta = resolve_theta(self.theta, self.step, name)
        if self.thetas is None:
            op = OpRecord(name=name, block=block, step=self.step, X=np.ascontiguousarray(x_q),
                          W=np.ascontiguousarray(w_q), groups=list(groups), theta=theta, x_signed=x_signed,
                          x_scale=float(x_scale), w_scale=float(w_scale))
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

    def linear_input(self, name: str, block: int, linears):
        """A forward pre-hook recording the input of ``linears[0]``'s call with W = concat(weights)^T."""

        def hook(_module, args, kwargs):
            if block not in self.blocks or name not in self.ops_wanted:
                return
            x = args[0] if args else kwargs["hidden_states"]
            x_q, x_s = quantize_int8(x)
            w_q, w_s = self._weight(block, name, linears)
            n_out = sum(lin.out_features for lin in linears)
            self._add(name, block, x_q, x_s, w_q, w_s, _blocks_of(x_q.shape[-1]), w_shape=(n_out,))

        return hook

    def attention(self, query, key, value) -> None:
        """Called by the wrapped dispatch_attention_fn with ``[1, S, heads, d_h]`` operands."""
        if self.context is None or self.context[0] not in self.blocks:
            return
        block, kind = self.context
        prefix = "" if kind == "self" else "cross_"
        want_qk, want_pv = prefix + "qk" in self.ops_wanted, prefix + "pv" in self.ops_wanted
        if not (want_qk or want_pv):
            return
        qh, kh, vh = _per_head(query), _per_head(key), _per_head(value)
        groups = self.qk_groups if kind == "self" else _blocks_of(qh.shape[-1])
        if want_qk:
            q_q, q_s = quantize_int8(qh)
            if self.thetas is None:
                k_q, k_s = quantize_int8(kh.transpose(1, 2))
            else:
                k_q, k_s = None, _scale_of(kh)
            self._add(prefix + "qk", block, q_q, q_s, k_q, k_s, groups, w_shape=(kh.shape[1],))
        if not want_pv:
            return
        t0 = time.perf_counter()
        pv_groups = _blocks_of(kh.shape[1])
        if self.thetas is None:
            p = softmax_numerators(qh, kh)
            v_q, v_s = quantize_int8(vh)
            self._add(prefix + "pv", block, p, 1.0 / 255.0, v_q, v_s, pv_groups, x_signed=False)
        else:
            packed = pv_decisions(qh, kh, self.grid, pv_groups, self.thetas, self.b_msb)
            dims = (qh.shape[0], qh.shape[1], kh.shape[1], vh.shape[2])
            self._emit(self._decision_op(prefix + "pv", block, dims, packed, pv_groups, False, 1.0 / 255.0,
                                         _scale_of(vh)))
        self.timing["pv_s"] += time.perf_counter() - t0

    # -- context and progress hooks --------------------------------------------------------------
    def enter(self, block: int, kind: str):
        def hook(_module, _args, _kwargs):
            self.context = (block, kind)

        return hook

    def leave(self, _module, _args, _output):
        self.context = None

    def block_done(self, block: int):
        def hook(_module, _args, _output):
            self.n_done += 1
            if self.progress is not None:
                self.progress(self.n_done, self.n_total, f"{self.step_label} block {block}")
            if block == self.last_block:
                raise _StopForward

        return hook


def _register(model, rec: _Recorder) -> list:
    handles = []
    for b, blk in enumerate(model.blocks):
        a1, a2, ffn = blk.attn1, blk.attn2, blk.ffn
        handles += [
            a1.register_forward_pre_hook(rec.linear_input("qkv", b, (a1.to_q, a1.to_k, a1.to_v)), with_kwargs=True),
            a1.register_forward_pre_hook(rec.enter(b, "self"), with_kwargs=True),
            a1.register_forward_hook(rec.leave),
            a1.to_out[0].register_forward_pre_hook(rec.linear_input("o_proj", b, (a1.to_out[0],)), with_kwargs=True),
            a2.register_forward_pre_hook(rec.linear_input("cross_q", b, (a2.to_q,)), with_kwargs=True),
            a2.register_forward_pre_hook(rec.enter(b, "cross"), with_kwargs=True),
            a2.register_forward_hook(rec.leave),
            a2.to_out[0].register_forward_pre_hook(rec.linear_input("cross_o", b, (a2.to_out[0],)), with_kwargs=True),
            ffn.net[0].proj.register_forward_pre_hook(rec.linear_input("ffn1", b, (ffn.net[0].proj,)), with_kwargs=True),
            ffn.net[2].register_forward_pre_hook(rec.linear_input("ffn2", b, (ffn.net[2],)), with_kwargs=True),
            blk.register_forward_hook(rec.block_done(b)),
        ]
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
             theta: ThetaSpec = DEFAULT_THETA, net: torch.nn.Module | None = None) -> tuple[tuple, list[OpRecord]]:
    """The op list a capture records, with shapes and groups, from the model built on the meta device.

    No forward pass and no memory: shapes are read from the model's own modules (linear layers'
    ``in_features``/``out_features``, ``attn1.heads``, ``model.rope``) and the token grid; ``L`` =
    `TEXT_TOKENS` text tokens for cross-attention.

    Returns:
        ``(grid, ops)``: ops are ``"shape"`` `OpRecord` s (X = W = None, ``dims = (batch, M, K, N)``),
        in capture order.

    Raises:
        CaptureError: unknown model, size, op type; bad grid, resolution, steps or blocks.
    """
    spec = get_spec(model, size)
    cfg = spec.sizes[size]
    if resolution is not None:
        grid = resolution_grid(resolution, cfg["patch_size"])
    grid = tuple(int(v) for v in (spec.default_grid[size] if grid is None else grid))
    net = meta_model(spec.name, size) if net is None else net
    m = grid[0] * grid[1] * grid[2]
    qk_groups = rope_groups(net)
    n_layers = len(net.blocks)
    block_list = list(range(n_layers)) if blocks is None else sorted({int(b) for b in blocks})
    names = parse_ops(ops)
    out = []
    for s in sorted({int(v) for v in steps}):
        for b in block_list:
            blk = net.blocks[b]
            a1, a2, ffn = blk.attn1, blk.attn2, blk.ffn
            heads = int(a1.heads)
            d_h = a1.to_q.out_features // heads
            dims = {
                "qkv": (1, m, a1.to_q.in_features, a1.to_q.out_features + a1.to_k.out_features + a1.to_v.out_features),
                "qk": (heads, m, d_h, m), "pv": (heads, m, m, d_h),
                "o_proj": (1, m, a1.to_out[0].in_features, a1.to_out[0].out_features),
                "cross_q": (1, m, a2.to_q.in_features, a2.to_q.out_features),
                "cross_qk": (heads, m, d_h, TEXT_TOKENS), "cross_pv": (heads, m, TEXT_TOKENS, d_h),
                "cross_o": (1, m, a2.to_out[0].in_features, a2.to_out[0].out_features),
                "ffn1": (1, m, ffn.net[0].proj.in_features, ffn.net[0].proj.out_features),
                "ffn2": (1, m, ffn.net[2].in_features, ffn.net[2].out_features),
            }
            for name in names:
                d = dims[name]
                groups = qk_groups if name == "qk" else _blocks_of(d[2])
                out.append(OpRecord(name=name, block=b, step=s, X=None, W=None, groups=list(groups),
                                    theta=resolve_theta(theta, s, name), x_signed=name not in ("pv", "cross_pv"),
                                    dims=d))
    return grid, out


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
            a `algo.thresholds.ThetaSchedule` (step-sensitive thresholds); resolved per recorded op.
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
        out: write the trace here as it is captured (`algo.trace.TraceWriter`: op arrays stream
            into a temporary file, renamed into place at the end; nothing is left on error). The
            returned trace then holds the decision ops (decision traces) or only op shapes (exact).

    Returns:
        A `Trace` with ops in execution order: for each step, for each block, the selected op types
        in `OP_TYPES` order; ``trace.timing`` holds seconds spent: ``build_s``, ``forward_s``
        (forward passes including hooks), ``decide_s``, ``pv_s`` (P and its decisions),
        ``write_s``.

    Raises:
        CaptureError: unknown model or size, bad steps, grid, resolution, blocks, ops, theta(s),
            b_msb, dtype or weights; a captured shape that disagrees with the config (`plan_ops`).
    """
    t_start = time.perf_counter()
    spec = get_spec(model, size)
    cfg = spec.sizes[size]
    n_layers = int(cfg["num_layers"])
    if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
        raise CaptureError(f"num_inference_steps must be a positive integer, got {num_inference_steps!r}")
    step_list = sorted({int(s) for s in steps})
    if not step_list or step_list[0] < 0 or step_list[-1] >= num_inference_steps:
        raise CaptureError(f"steps must be non-empty indices in 0..{num_inference_steps - 1}, got {list(steps)}")
    if resolution is not None:
        if grid is not None:
            raise CaptureError("give grid or resolution, not both")
        grid = resolution_grid(resolution, cfg["patch_size"])
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
    theta_list = _parse_thetas(thetas)
    _check_thetas(theta, step_list, op_names)
    if weights is not None and not Path(weights).expanduser().exists():
        raise CaptureError(f"--weights: checkpoint not found: {Path(weights).expanduser().resolve()}")

    last = block_list[-1]
    n_total = len(step_list) * (last + 1)
    if progress is not None:
        progress(0, n_total, f"building {spec.name} ({size})")
    folder = weights is not None and Path(weights).expanduser().is_dir()
    net, weights_desc = build_model(spec.name, size, seed, weights=weights,
                                    dtype=DTYPES[dtype] if dtype else None,
                                    num_layers=None if folder else last + 1)
    t_built = time.perf_counter()
    run_dtype = net.blocks[0].attn1.to_q.weight.dtype
    _, plan = plan_ops(spec.name, size, grid, step_list, block_list, op_names, theta=theta,
                       net=meta_model(spec.name, size))
    plan_dims = {(o.step, o.block, o.name): (o.batch, o.M, o.K, o.N) for o in plan}
    p_t, p_h, p_w = cfg["patch_size"]
    f, h, w = grid
    x0 = lat.image_latents((f * p_t, h * p_h, w * p_w), pan_px=pan_px, image=image)
    eps = lat.noise_like(x0, seed)
    sigmas = lat.flow_sigmas(num_inference_steps, shift)
    text = np.random.default_rng([int(seed), 1]).standard_normal((1, TEXT_TOKENS, int(cfg["text_dim"])))
    text_t = torch.from_numpy(text.astype(np.float32)).to(run_dtype)

    notes = (
        f"latents: {image} panned {pan_px} px/latent frame, stand-in encoder (algo.latents), "
        f"latent grid {f * p_t}x{h * p_h}x{w * p_w}; noise: x_t = (1-sigma) x0 + sigma eps, eps seeded; "
        f"schedule: FlowMatchEuler shift {shift}, {num_inference_steps} steps; text: {TEXT_TOKENS} seeded "
        f"N(0,1) tokens of width {cfg['text_dim']}; blocks recorded: {block_list}; ops: {list(op_names)}; "
        f"dtype: {str(run_dtype).replace('torch.', '')}; pv X = round(255 exp(s - rowmax)), x_scale 1/255"
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
                    keep=writer is None or kind == "decisions", plan=plan_dims)
    import diffusers.models.transformers.transformer_wan as wan_mod

    original = wan_mod.dispatch_attention_fn

    def dispatch_wrapper(query, key, value, *args, **kwargs):
        rec.attention(query, key, value)
        return original(query, key, value, *args, **kwargs)

    step_meta = []
    handles = _register(net, rec)
    wan_mod.dispatch_attention_fn = dispatch_wrapper
    try:
        with torch.inference_mode():
            for s in step_list:
                sigma = float(sigmas[s])
                timestep = float(np.float32(sigma) * np.float32(lat.NUM_TRAIN_TIMESTEPS))
                step_meta.append({"index": s, "sigma": sigma, "timestep": timestep})
                rec.step, rec.step_label = s, f"step {s} (sigma {sigma:.3f})"
                x_t = torch.from_numpy(lat.noisy_latents(x0, sigma, eps)).to(run_dtype)
                try:
                    net(hidden_states=x_t, timestep=torch.tensor([timestep], dtype=torch.float32),
                        encoder_hidden_states=text_t, return_dict=False)
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
        wan_mod.dispatch_attention_fn = original
        for hd in handles:
            hd.remove()
    t_end = time.perf_counter()
    timing = dict(rec.timing, build_s=t_built - t_start, forward_s=t_end - t_built - rec.timing["write_s"],
                  total_s=t_end - t_start)
    return Trace(
        grid=grid, ops=rec.ops, b_msb=int(b_msb), model=spec.name, size=size, weights=weights_desc,
        seed=int(seed), steps=step_meta, notes=notes, timing=timing,
    )


def capture_to_file(out: str | Path, **kwargs) -> Trace:
    """`capture` (same keyword arguments) streaming the trace into ``out`` (atomic; `algo.trace.TraceWriter`).

    Returns:
        The captured `Trace` (op shapes only for exact traces: the operands are on disk).
    """
    return capture(out=out, **kwargs)
