"""The op list a capture records, from the model built on the meta device (`plan_ops`: shapes and
groups from the family's GEMM sites, no weights, no forward), and shape traces written from it
(`write_shape_trace`)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from algo.capture.request import (
    DEFAULT_MODEL,
    DEFAULT_SIZE,
    DEFAULT_STEPS,
    TEXT_TOKENS,
    ProgressFn,
    _check_family_ops,
    _check_thetas,
    parse_ops,
    patch_of,
    resolution_grid,
)
from algo.models import CaptureError, blocks_of, family_of, get_spec, meta_model, rope_groups
from algo.reuse.golden import block_groups
from algo.reuse.thresholds import DEFAULT_THETA, ThetaSpec, resolve_theta
from algo.trace import Group, OpRecord, Trace, TraceWriter

__all__ = ["plan_ops", "write_shape_trace"]

def _blocks_of(k: int) -> list[Group]:
    return [Group(k0, k1, axis, "block") for k0, k1, axis in block_groups(k)]


def plan_ops(model: str = DEFAULT_MODEL, size: str = DEFAULT_SIZE, grid: tuple[int, int, int] | None = None,
             steps: Sequence[int] = DEFAULT_STEPS, blocks: Sequence[int] | None = None,
             ops: str | Sequence[str] | None = None, *, resolution: str | None = None,
             theta: ThetaSpec = DEFAULT_THETA, net: torch.nn.Module | None = None,
             text_tokens: int = TEXT_TOKENS) -> tuple[tuple, list[OpRecord]]:
    """The op list a capture records, with shapes and groups, from the model built on the meta device.

    No forward pass and no memory: shapes are read from the model's own modules (linear layers'
    ``in_features``/``out_features``, ``attn1.heads``, ``model.rope``) and the token grid; ``L`` =
    ``text_tokens`` text tokens for cross-attention and joint attention (default `TEXT_TOKENS`, the
    capture's; `algo.workloads.synth` passes the real models' 512).

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
