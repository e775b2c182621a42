"""Trace capture: run a real diffusers video DiT with hooks and record int8 GEMM operands.

`capture` builds a registered model (`algo.models`), makes latents from a panned real image mixed
with noise at each requested step's flow-matching noise level (`algo.latents`), runs one forward
pass per step and records, for every transformer block, the operands of these GEMMs
``Y[b] = X[b] @ W[b]`` (docs/spec.md §1; shapes for M tokens, d = heads * d_h, d_ffn, L text
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

(the 1/rowsum normalisation runs on the vector unit, docs/spec.md §1); the attention states use
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
``diffusers.models.attention_processor``) are hooked the same way (each family's `attention_patch`); their
joint text+video attention maps onto the same op names with the video tokens as GEMM rows and
text tokens as extra keys (`algo.capture.record.register` at the family's `sites`, docs/capture.md "How ops map"). Exact traces also hold the
attention output and log-sum-exp per head of every self-attention ``pv`` (from the model's own attention call, `flash_states`, D72; trace format version 3), decision traces too (version 4);
`write_shape_trace` writes shapes only, without a forward. Tokens are in the model's order, raster
``f*(H*W) + h*W + w``: ``WanTransformer3DModel.forward`` flattens the patch-embedding output
``[B, C, F, H, W]`` with ``flatten(2)``, and ``WanRotaryPosEmbed`` builds its tables in the same order.

Quantisation (docs/spec.md §1): symmetric int8, one scale per (step, block, op, tensor):
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

import dataclasses
import time
from pathlib import Path

import torch

from algo import latents as lat
from algo.capture.estimate import check_fits, estimate_capture, human
from algo.capture.plan import plan_ops
from algo.capture.quantise import bf16_gemm_in_fp32, native_bf16_gemm
from algo.capture.record import Recorder, _StopForward, register
from algo.capture.request import TEXT_TOKENS, CaptureRequest, ProgressFn, patch_of
from algo.models import DTYPES, blocks_of, build_model, build_streamed, meta_model, model_family, rope_groups
from algo.trace import Trace, TraceWriter

__all__ = ["capture", "capture_request", "capture_to_file"]


def capture(progress: ProgressFn | None = None, **options) -> Trace:
    """Run the model on real-content latents and return an exact or a decision trace.

    Args:
        progress: called as ``progress(done, total, label)``: once with ``done = 0`` before the
            model is built (the full model takes ~25 s to initialise on 2 cores), then after each
            block run (``total = len(steps) * (last recorded block + 1)``).
        **options: the fields of `CaptureRequest` (``model``, ``size``, ``steps``, ``grid``,
            ``theta``, ``thetas``, ``blocks``, ``ops``, ``weights``, ``out``, ...).

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

    Raises:
        CaptureError: as `CaptureRequest.resolve`; a captured shape that disagrees with the config
            (`algo.capture.plan.plan_ops`).
        TypeError: an option that is not a `CaptureRequest` field.
    """
    dry_run = bool(options.pop("dry_run", False))
    return capture_request(CaptureRequest(**options), progress, dry_run=dry_run)


def capture_request(request: CaptureRequest, progress: ProgressFn | None = None, dry_run: bool = False) -> Trace:
    """`capture` of a `CaptureRequest` (same returns and errors).

    Before any weight is built the file size and peak memory are estimated from the shape plan
    (`algo.capture.estimate`); with ``out`` set, an estimate over the free disk at its folder or the
    available memory raises `algo.capture.estimate.CaptureTooLarge` (a `CaptureError`), nothing
    written. ``dry_run`` (also ``capture(dry_run=True)``): return that
    `algo.capture.estimate.CaptureEstimate` instead of capturing.
    """
    t_start = time.perf_counter()
    r = request.resolve()
    spec, fam, cfg, step_list, grid, block_list, op_names, theta_list = (
        r.spec, r.family, r.cfg, r.steps, r.grid, r.blocks, r.ops, r.thetas)
    size, seed, theta, b_msb, weights, dtype = (request.size, request.seed, request.theta, request.b_msb,
                                                request.weights, request.dtype)
    num_inference_steps, image, pan_px, shift = (request.num_inference_steps, request.image, request.pan_px,
                                                 request.shift)
    out, attn_states, stream_blocks = request.out, request.attn_states, request.stream_blocks

    last = block_list[-1]
    n_total = len(step_list) * (last + 1)
    folder = weights is not None and Path(weights).expanduser().is_dir()
    run_dt = DTYPES[dtype] if dtype else spec.dtype.get(size, torch.float32)
    meta_net = meta_model(spec.name, size)
    est = estimate_capture(spec.name, size, grid, step_list, block_list, op_names, thetas=theta_list, net=meta_net,
                           attn_states=attn_states, itemsize=torch.empty((), dtype=run_dt).element_size(),
                           stream_blocks=stream_blocks, n_built=len(blocks_of(meta_net)) if folder else last + 1)
    if dry_run:
        return est
    if out is not None:
        check_fits(est, out)
    if progress is not None:
        progress(0, n_total, f"building {spec.name} ({size})")
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
    _, plan = plan_ops(spec.name, size, grid, step_list, block_list, op_names, theta=theta, net=meta_net)
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
    if progress is not None and writer is not None:
        user_progress = progress

        def progress(done, total, label):  # the same callback, with the bytes written so far
            user_progress(done, total, f"{label}, {human(writer.bytes_written)} written")
    rec = Recorder(rope_groups(net), theta, block_list, op_names, f * h * w, progress, n_total, grid,
                    int(b_msb), thetas=theta_list, sink=writer.add if writer else None,
                    keep=writer is None or kind == "decisions", plan=plan_dims,
                    video_first=fam.video_first, attn_states=attn_states)
    step_meta = []
    handles = register(net, rec)
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
                  total_s=t_end - t_start, est_file_bytes=est.file_bytes, est_peak_bytes=est.peak_bytes)
    return Trace(
        grid=grid, ops=rec.ops, b_msb=int(b_msb), model=spec.name, size=size, weights=weights_desc,
        seed=int(seed), steps=step_meta, notes=notes, timing=timing,
    )


def _run_dtype(net: torch.nn.Module) -> torch.dtype:
    """The dtype the blocks compute in: that of the first block's query projection."""
    fam = model_family(net)
    kind, blk = fam.blocks(net)[0]
    return fam.self_attention(kind, blk).to_q.weight.dtype


def capture_to_file(out: str | Path, **kwargs) -> Trace:
    """`capture` (same keyword arguments) streaming the trace into ``out`` (atomic; `algo.trace.TraceWriter`).

    Returns:
        The captured `Trace` (op shapes only for exact traces: the operands are on disk).
    """
    return capture(out=out, **kwargs)
