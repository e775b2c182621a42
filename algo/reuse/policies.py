"""Accelerator baselines' reuse rules as policies on int8 operands, shared by the simulator and PyTorch.

Each rule takes the quantised streamed operand of one GEMM (``[M, K]``, int8, or uint8 for
``pv``'s P; raster token order, grid ``(F, H, W)``) and returns per-(token, group) *work codes*
in the array's three levels -- `FULL` (= `algo.reuse.golden.COMPUTE`: 8-bit multiply), `HALF`
(= `PARTIAL`: a 4-bit-wide multiply on the low multiplier half) and `SKIP` (= `REUSE`: no
multiply, the result comes from elsewhere) -- and, where the rule changes the values the GEMM
sees, the effective operand ``x_eff`` (int16 ``[M, K]``). `sim.baselines` times and charges the
codes on the Kaleido array; `algo.reuse.torch_hooks.PolicyHooks` applies ``x_eff`` inside a diffusers forward pass so that
`algo.quality.run_quality(policy=...)` *measures* each baseline's quality with Kaleido's metric.
What each model keeps and leaves out of the published design: docs/baselines.md.

- **AdapTiV-like token merging** (`token_merge`; Yoo et al., "AdapTiV: Sign-Similarity based
  Image-Adaptive Token Merging for Vision Transformer Acceleration", MICRO 2024): whole tokens are
  merged with a similar neighbour -- here the temporal neighbour Kaleido uses (same position,
  previous frame) -- when the mean |difference| per channel over *all* K channels is
  ``<= theta`` (int8 units; by default the op's Kaleido theta1, so both use the same per-channel
  budget, at token instead of channel-group granularity). A merged token takes its neighbour's
  effective row (chains follow, as `algo.reuse.golden.decide` does) and costs no multiply.
- **EXION-like** (Heo et al., "EXION: Exploiting Inter- and Intra-Iteration Output Sparsity for
  Diffusion Models", HPCA 2025): *inter-step FFN reuse* (`interstep_rows`): a token whose ``ffn1``
  input differs from its previous-step input by a mean |difference| per channel ``<= theta`` skips
  both FFN GEMMs and reuses its previous-step FFN rows; *attention-score sparsity*
  (`prune_scores`): softmax numerators ``P <= p_min`` (uint8, ``P = round(255 exp(s - rowmax))``)
  are dropped, and a (token, group) of ``pv`` whose P values are all dropped is skipped.
- **Cambricon-D-like delta computing** (`delta_codes`; Kong et al., "Cambricon-D: Full-Network
  Differential Acceleration for Diffusion Models", ISCA 2024): linear ops compute
  ``Y_s = Y_{s-1} + (X_s - X_{s-1}) W``; a (token, group) whose deltas are all zero is skipped, one
  whose deltas fit 4-bit signed (-8..7) runs on the 4-bit half, others in full. Exact: ``x_eff``
  equals ``X_s`` (the outliers are computed at full width), so quality is that of the exact run.

Pure numpy (no torch import), so the simulator can use the rules without loading PyTorch.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE

FULL, HALF, SKIP = COMPUTE, PARTIAL, REUSE


class PolicyError(ValueError):
    """Unknown policy or bad policy parameter."""

#: Signed 4-bit range of a delta on the 4-bit multiplier half (hw/pe.py LO_BITS = 4).
DELTA4_MIN, DELTA4_MAX = -8, 7

#: Policies, the ops each applies to, and their parameters' defaults (None: the op's Kaleido theta1).
#: ``p_min = 1`` (uint8 P, project choice, docs/baselines.md): drops exp(s - rowmax) < 1.5/255, the
#: values that round to 0 or 1 of 255.
POLICIES = {
    "adaptiv": {"ops": ("qkv", "qk", "pv", "o_proj", "ffn1", "ffn2"), "params": {"theta": None}},
    "exion": {"ops": ("pv", "ffn1", "ffn2"), "params": {"theta": None, "p_min": 1}},
    "cambricon_d": {"ops": ("qkv", "o_proj", "ffn1", "ffn2"), "params": {}},
}


def rows_to_codes(skip_rows: np.ndarray, n_groups: int) -> np.ndarray:
    """``[M]`` bool (row skipped) -> int8 ``[M, G]`` codes: SKIP on every group of a skipped row, else FULL."""
    return np.repeat(np.where(np.asarray(skip_rows), SKIP, FULL).astype(np.int8)[:, None], n_groups, axis=1)


def token_merge(x: np.ndarray, grid, theta: float) -> tuple[np.ndarray, np.ndarray]:
    """AdapTiV-like merging against the temporal neighbour (module docstring).

    Args:
        x: ``[M, K]`` int8/uint8, ``M = F*H*W``.
        theta: mean |difference| per channel (int8 units), >= 0.

    Returns:
        ``(merged, x_eff)``: bool ``[M]`` and int16 ``[M, K]``. Frame 0 is never merged.
    Example: grid (2, 1, 1), K = 2, x = [[10, 10], [11, 13]]: mean |diff| = 2 -> merged iff theta >= 2.
    """
    F, H, W = grid  # noqa: N806
    hw = H * W
    x = np.asarray(x)
    if x.ndim != 2 or x.shape[0] != F * hw:
        raise ValueError(f"x must be [F*H*W, K] = [{F * hw}, K], got {x.shape}")
    merged, eff = np.zeros(x.shape[0], dtype=bool), np.empty(x.shape, dtype=np.int16)
    for f, (m, e) in enumerate(merge_frames((x[f * hw:(f + 1) * hw] for f in range(F)), theta)):
        merged[f * hw:(f + 1) * hw], eff[f * hw:(f + 1) * hw] = m, e
    return merged, eff


def merge_frames(frames: Iterable[np.ndarray], theta: float) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """`token_merge` one latent frame at a time: for each frame ``[H*W, K]`` (int8/uint8, in frame
    order) yields ``(merged bool [H*W], x_eff int16 [H*W, K])``; only the previous frame's effective rows
    are kept, so a caller that regenerates the operand per frame (`algo.reuse.chunked.frame_operands`)
    never holds it whole. Concatenated, the results equal `token_merge`'s."""
    nb = None
    for x in frames:
        cur = np.asarray(x).astype(np.int16)
        if nb is None:  # frame 0: no temporal neighbour, never merged
            m = np.zeros(cur.shape[0], dtype=bool)
        else:
            m = np.abs(cur.astype(np.int32) - nb).mean(axis=1) <= theta
            cur[m] = nb[m]
        yield m, cur
        nb = cur


def interstep_rows(x: np.ndarray, x_prev: np.ndarray, theta: float) -> np.ndarray:
    """EXION-like FFN reuse: bool ``[M]``, True where mean_k |x - x_prev| <= theta (same scale)."""
    if x.shape != x_prev.shape:
        raise ValueError(f"previous-step operand {x_prev.shape} differs from {x.shape}")
    return np.abs(x.astype(np.int32) - x_prev).mean(axis=1) <= theta


def prune_scores(p: np.ndarray, groups, p_min: int) -> tuple[np.ndarray, np.ndarray]:
    """EXION-like score sparsity on ``pv``'s P (uint8 ``[M, K]``): ``(codes [M, G], p_eff int16 [M, K])``.

    ``p_eff`` = P with every value ``<= p_min`` set to 0; a group whose P values are all dropped is
    SKIP, else FULL. ``p_min = 0`` drops only exact zeros (lossless).
    """
    p_eff = np.where(p <= p_min, 0, p).astype(np.int16)
    return prune_codes(p, groups, p_min), p_eff


def prune_codes(p: np.ndarray, groups, p_min: int) -> np.ndarray:
    """`prune_scores`' codes alone (int8 ``[rows, G]``), for any rows of P: SKIP where every value of
    the group is ``<= p_min`` (its largest is), else FULL. ``groups`` partition ``0..K`` in order, as
    every trace's do (`algo.trace.validate_groups`)."""
    starts = np.array([k0 for k0, _, _ in groups], dtype=np.int64)
    return np.where(np.maximum.reduceat(p, starts, axis=1) <= p_min, SKIP, FULL).astype(np.int8)


def delta_codes(x: np.ndarray, x_prev: np.ndarray, groups) -> np.ndarray:
    """Cambricon-D-like codes ``[M, G]``: SKIP if every delta of the group is 0, HALF if all fit -8..7."""
    if x.shape != x_prev.shape:
        raise ValueError(f"previous-step operand {x_prev.shape} differs from {x.shape}")
    dlt = x.astype(np.int32) - x_prev
    codes = np.empty((x.shape[0], len(groups)), dtype=np.int8)
    for g, (k0, k1, _ax) in enumerate(groups):
        d = dlt[:, k0:k1]
        zero = (d == 0).all(axis=1)
        small = ((d >= DELTA4_MIN) & (d <= DELTA4_MAX)).all(axis=1)
        codes[:, g] = np.where(zero, SKIP, np.where(small, HALF, FULL))
    return codes


def rescale(x_prev: np.ndarray, scale_prev: float, scale: float, signed: bool) -> np.ndarray:
    """Previous-step int values in the current scale: ``clip(rint(x_prev * scale_prev / scale))`` (int16)."""
    lo, hi = (-128, 127) if signed else (0, 255)
    return np.clip(np.rint(np.asarray(x_prev, dtype=np.float64) * (scale_prev / scale)), lo, hi).astype(np.int16)


def check_policy(name: str, params: dict | None = None) -> dict:
    """Validated parameters of policy ``name`` (defaults filled in). Raises `PolicyError`."""
    if name not in POLICIES:
        raise PolicyError(f"unknown baseline policy {name!r}; choose one of {', '.join(POLICIES)}")
    defaults = POLICIES[name]["params"]
    params = dict(params or {})
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise PolicyError(f"policy {name}: unknown parameters {unknown}; known: {sorted(defaults) or 'none'}")
    out = {**defaults, **params}
    for k, v in out.items():
        if v is not None and (not isinstance(v, (int, float)) or v < 0):
            raise PolicyError(f"policy {name}: parameter {k} must be a number >= 0, got {v!r}")
    return out


__all__ = ["DELTA4_MAX", "DELTA4_MIN", "FULL", "HALF", "POLICIES", "SKIP", "PolicyError", "check_policy",
           "delta_codes", "interstep_rows", "merge_frames", "prune_codes", "prune_scores", "rescale", "rows_to_codes",
           "token_merge"]
