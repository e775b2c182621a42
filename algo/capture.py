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

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from algo import latents as lat
from algo.golden import block_groups
from algo.models import CaptureError, build_model, get_spec, rope_groups
from algo.thresholds import DEFAULT_THETA, ThetaSpec, resolve_theta
from algo.trace import OP_TYPES, Group, OpRecord, Trace, save_trace

__all__ = [
    "CaptureError", "DEFAULT_MODEL", "DEFAULT_SIZE", "DEFAULT_STEPS", "DEFAULT_THETA", "SELF_OPS",
    "CROSS_OPS", "TEXT_TOKENS", "capture", "capture_to_file", "quantize_int8", "softmax_numerators",
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
    x64 = np.asarray(x, dtype=np.float64)
    amax = float(np.max(np.abs(x64))) if x64.size else 0.0
    if not math.isfinite(amax):
        raise CaptureError("non-finite activation or weight met while quantising")
    scale = amax / 127.0 if amax > 0 else 1.0
    q = np.clip(np.rint(x64 / scale), -128, 127).astype(np.int8)
    return q, scale


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


class _Recorder:
    """Hooks state for one capture: which (step, block, attention) is running, and the records."""

    def __init__(self, qk_groups, theta, blocks, include_cross, tokens, progress, n_total):
        self.qk_groups = qk_groups
        self.theta = theta
        self.blocks = set(blocks)
        self.include_cross = include_cross
        self.tokens = tokens
        self.progress = progress
        self.n_total = n_total
        self.n_done = 0
        self.step = 0
        self.step_label = ""
        self.context: tuple[int, str] | None = None  # (block, "self" | "cross") inside attn1/attn2
        self.ops: list[OpRecord] = []
        self._w_cache: dict[tuple[int, str], tuple[np.ndarray, float]] = {}

    # -- recording -------------------------------------------------------------------------------
    def _weight(self, block: int, name: str, linears) -> tuple[np.ndarray, float]:
        key = (block, name)
        if key not in self._w_cache:
            self._w_cache[key] = quantize_int8(_weight_t(*linears))
        return self._w_cache[key]

    def _add(self, name, block, x_q, x_scale, w_q, w_scale, groups, x_signed=True):
        if x_q.ndim == 2:
            x_q = x_q[None]
        if w_q.ndim == 2:
            w_q = w_q[None]
        if x_q.shape[1] != self.tokens:
            raise CaptureError(f"{name} of block {block}: {x_q.shape[1]} rows, expected {self.tokens} tokens")
        self.ops.append(OpRecord(
            name=name, block=block, step=self.step, X=np.ascontiguousarray(x_q), W=np.ascontiguousarray(w_q),
            groups=list(groups), theta=resolve_theta(self.theta, self.step, name), x_signed=x_signed,
            x_scale=float(x_scale), w_scale=float(w_scale),
        ))

    def linear_input(self, name: str, block: int, linears):
        """A forward pre-hook recording the input of ``linears[0]``'s call with W = concat(weights)^T."""

        def hook(_module, args, kwargs):
            if block not in self.blocks:
                return
            x = args[0] if args else kwargs["hidden_states"]
            x_q, x_s = quantize_int8(x)
            w_q, w_s = self._weight(block, name, linears)
            self._add(name, block, x_q, x_s, w_q, w_s, _blocks_of(x_q.shape[-1]))

        return hook

    def attention(self, query, key, value) -> None:
        """Called by the wrapped dispatch_attention_fn with ``[1, S, heads, d_h]`` operands."""
        if self.context is None or self.context[0] not in self.blocks:
            return
        block, kind = self.context
        if kind == "cross" and not self.include_cross:
            return
        qh, kh, vh = _per_head(query), _per_head(key), _per_head(value)
        prefix = "" if kind == "self" else "cross_"
        groups = self.qk_groups if kind == "self" else _blocks_of(qh.shape[-1])
        q_q, q_s = quantize_int8(qh)
        k_q, k_s = quantize_int8(kh.transpose(1, 2))
        self._add(prefix + "qk", block, q_q, q_s, k_q, k_s, groups)
        p = softmax_numerators(qh, kh)
        v_q, v_s = quantize_int8(vh)
        self._add(prefix + "pv", block, p, 1.0 / 255.0, v_q, v_s, _blocks_of(p.shape[-1]), x_signed=False)

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
            a2.register_forward_pre_hook(rec.enter(b, "cross"), with_kwargs=True),
            a2.register_forward_hook(rec.leave),
            ffn.net[0].proj.register_forward_pre_hook(rec.linear_input("ffn1", b, (ffn.net[0].proj,)), with_kwargs=True),
            ffn.net[2].register_forward_pre_hook(rec.linear_input("ffn2", b, (ffn.net[2],)), with_kwargs=True),
            blk.register_forward_hook(rec.block_done(b)),
        ]
        if rec.include_cross:
            handles += [
                a2.register_forward_pre_hook(rec.linear_input("cross_q", b, (a2.to_q,)), with_kwargs=True),
                a2.to_out[0].register_forward_pre_hook(
                    rec.linear_input("cross_o", b, (a2.to_out[0],)), with_kwargs=True),
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
    image: str = "astronaut",
    pan_px: int = lat.DEFAULT_PAN_PX,
    shift: float = lat.DEFAULT_SHIFT,
) -> Trace:
    """Run the model on real-content latents and return an exact trace.

    Args:
        model: registry name (`algo.models.MODELS`), e.g. ``"wan2.1-t2v-1.3b"``.
        size: ``"tiny"`` or ``"full"``.
        steps: denoising step indices to capture, each in ``0 .. num_inference_steps-1``
            (sorted, duplicates dropped).
        num_inference_steps: length N of the flow-matching schedule (`algo.latents.flow_sigmas`).
        grid: token grid ``(F, H, W)`` after patching (latent = grid * patch size); None: the
            size's default, ``(4, 8, 8)`` = 256 tokens.
        seed: seeds the weights (torch), text embeddings and noise (numpy).
        theta: thresholds in int8 units per channel (SPEC section 2): a pair for every op, a
            mapping op type -> pair (``"default"`` for the rest), a callable ``(step, op) -> pair`` or
            a `algo.thresholds.ThetaSchedule` (step-sensitive thresholds); resolved per recorded op.
        b_msb: reused high bits for PARTIAL, 1..7 (stored in the trace).
        progress: called as ``progress(done, total, label)``: once with ``done = 0`` before the
            model is built (the full model takes ~25 s to initialise on 2 cores), then after each
            block of each step (``total = len(steps) * layers``).
        blocks: block indices to record (None: all); every block still runs.
        include_cross: also record cross_q, cross_qk, cross_pv, cross_o.
        image, pan_px, shift: latent content and schedule (`algo.latents`).

    Returns:
        A `Trace` with ops in execution order: for each step, for each block, `SELF_OPS` (with the
        cross ops between o_proj and ffn1 when requested).

    Raises:
        CaptureError: unknown model or size, bad steps, grid, blocks, theta or b_msb.
    """
    spec = get_spec(model, size)
    cfg = spec.sizes[size]
    n_layers = int(cfg["num_layers"])
    if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
        raise CaptureError(f"num_inference_steps must be a positive integer, got {num_inference_steps!r}")
    step_list = sorted({int(s) for s in steps})
    if not step_list or step_list[0] < 0 or step_list[-1] >= num_inference_steps:
        raise CaptureError(f"steps must be non-empty indices in 0..{num_inference_steps - 1}, got {list(steps)}")
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
    op_names = SELF_OPS + (CROSS_OPS if include_cross else ())
    _check_thetas(theta, step_list, op_names)

    n_total = len(step_list) * n_layers
    if progress is not None:
        progress(0, n_total, f"building {spec.name} ({size})")
    net, weights = build_model(spec.name, size, seed)
    dtype = next(net.parameters()).dtype
    p_t, p_h, p_w = cfg["patch_size"]
    f, h, w = grid
    x0 = lat.image_latents((f * p_t, h * p_h, w * p_w), pan_px=pan_px, image=image)
    eps = lat.noise_like(x0, seed)
    sigmas = lat.flow_sigmas(num_inference_steps, shift)
    text = np.random.default_rng([int(seed), 1]).standard_normal((1, TEXT_TOKENS, int(cfg["text_dim"])))
    text_t = torch.from_numpy(text.astype(np.float32)).to(dtype)

    rec = _Recorder(rope_groups(net), theta, block_list, include_cross, f * h * w, progress, n_total)
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
                x_t = torch.from_numpy(lat.noisy_latents(x0, sigma, eps)).to(dtype)
                net(hidden_states=x_t, timestep=torch.tensor([timestep], dtype=torch.float32),
                    encoder_hidden_states=text_t, return_dict=False)
    finally:
        wan_mod.dispatch_attention_fn = original
        for hd in handles:
            hd.remove()

    notes = (
        f"latents: {image} panned {pan_px} px/latent frame, stand-in encoder (algo.latents), "
        f"latent grid {f * p_t}x{h * p_h}x{w * p_w}; noise: x_t = (1-sigma) x0 + sigma eps, eps seeded; "
        f"schedule: FlowMatchEuler shift {shift}, {num_inference_steps} steps; text: {TEXT_TOKENS} seeded "
        f"N(0,1) tokens of width {cfg['text_dim']}; blocks recorded: {block_list}; "
        "pv X = round(255 exp(s - rowmax)), x_scale 1/255"
    )
    return Trace(
        grid=grid, ops=rec.ops, b_msb=int(b_msb), model=spec.name, size=size, weights=weights,
        seed=int(seed), steps=step_meta, notes=notes,
    )


def capture_to_file(out: str | Path, **kwargs) -> Trace:
    """`capture` (same keyword arguments) and write the trace atomically to ``out`` (`save_trace`).

    Returns:
        The captured `Trace`.
    """
    trace = capture(**kwargs)
    save_trace(trace, out)
    return trace
