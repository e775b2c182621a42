"""DDiT dynamic patch scheduling as a workload generator (Kim, Ghadiyaram, Gadde, "DDiT: Dynamic
Patch Scheduling for Efficient Diffusion Transformers", arXiv:2602.16968, CVPR 2026; no official
code is published, so the rule below is the paper's as the project reads it).

The rule (`choose_patch`, `schedule_from_trajectory`):

1. Third-order finite difference of the latent trajectory over the last four steps,
   ``Δ³z_t = z_t − 3 z_{t−1} + 3 z_{t−2} − z_{t−3}`` (`third_difference`; four distinct latents:
   exactly 6a for a cubic ``a t³ + …``, exactly 0 for a quadratic), ``z_t`` the latent step t
   starts from.
2. Per candidate patch size ``m·p`` (m in `PATCH_MULTIPLES` = 1, 2, 4; p the model's spatial patch,
   Wan 2×2 latent pixels; the temporal patch stays the model's): split Δ³z of every latent frame
   into ``m·p_h × m·p_w`` patches, take each patch's standard deviation over its channels and
   pixels (population std, ddof 0), take the ρ-th percentile over all patches (`numpy.percentile`,
   linear interpolation; ρ = `DEFAULT_RHO` = 0.4) and compare with τ (`DEFAULT_TAU` = 0.001): the
   size passes when the percentile is ≤ τ. The step uses the largest passing size, p when none
   passes (p is the model's own, always allowed). The first `WARMUP_STEPS` = 3 steps use p (Δ³
   needs four latents). ρ, τ and the warm-up follow our reading of the paper (docs/spec.md §7) (defaults
   configurable).
3. Token grid at patch ``m·p`` (`coarse_token_grid`): ``(F/p_t, ⌈H/(m p_h)⌉, ⌈W/(m p_w)⌉)`` for a
   latent of F × H × W: a side that does not divide is zero-padded at the bottom / right to the
   next multiple (project rule, docs/decisions.md). Wan 480p (latent 21×60×104): p 21×30×52,
   2p 21×15×26, 4p 21×8×13 (60 → 64 padded); 720p (21×90×160): 21×45×80, 21×23×40 (90 → 92),
   21×12×20 (90 → 96). Patches that cover padding take their std over the real pixels only.

The workload (`generate_ddit`): per step the patch embedding GEMM of its size (a separate
``patch_embed`` per size, K = C_in·p_t·m p_h·m p_w, N = d), every transformer block's GEMMs at the
reduced token count (`algo.capture.plan_ops` on the coarse grid; cross-attention over
`WAN_TEXT_TOKENS` = 512 text tokens) and the output projection of that size (``proj_out``, N =
C_out·p_t·m p_h·m p_w); ``repeat`` = blocks × classifier-free-guidance branches (2: Wan2.1
samples with guidance by default). The reference is the same run at p on every step.

The trajectory comes from a real sampling run (`algo.capture.record_trajectory`) of the registered
model at ``trajectory_size`` — by default the *trained small* Wan shipped in ``algo/train/assets``
(docs/training.md; a 4-block model trained here on patch-PCA latents, not Wan2.1: the schedule
says what the rule does on a trained denoiser's trajectory, not what DDiT picks on Wan2.1, and τ
was set for Wan's VAE latents, not for these); ``tiny`` is the seeded (untrained) tiny Wan, whose
latents move the way an untrained network moves them (the workload notes carry a caveat). The run
is open loop (the trajectory is sampled at
p throughout; a real DDiT run samples coarse steps with the coarse embedding, which changes later
latents). An explicit ``schedule`` replaces the rule (e.g. to replay a published schedule).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from algo.workloads.format import Workload, WorkloadError, WorkloadOp

#: Candidate patch sizes as multiples of the model's spatial patch (DDiT: p, 2p, 4p).
PATCH_MULTIPLES = (1, 2, 4)
#: Percentile over patches (DDiT's ρ, as a fraction) and threshold on it (τ), our reading of the paper (docs/spec.md §7).
DEFAULT_RHO = 0.4
DEFAULT_TAU = 0.001
#: Steps at the base patch before the rule can run (Δ³ needs four latents).
WARMUP_STEPS = 3
#: Text tokens of Wan2.1's cross-attention (the pipeline pads UMT5 output to text_len = 512;
#: Wan2.1 repository ``wan/configs/shared_config.py`` ``text_len = 512``).
WAN_TEXT_TOKENS = 512
#: Classifier-free guidance branches per step (Wan2.1 samples with guidance, sample_guide_scale 5.0).
CFG_BRANCHES = 2
#: Default latent frames of the trajectory run (the resolution's full latent height and width, so
#: the coarse patches and their padding are the workload's own; 3 frames keep the run seconds long).
TRAJECTORY_FRAMES = 3

SOURCES = {
    "patch_multiples": "DDiT (arXiv:2602.16968): patch sizes p, 2p, 4p with one patch embedding per size",
    "rho": "DDiT rule as we read the paper: 0.4-th quantile (40th percentile) of per-patch std of Δ³z",
    "tau": "DDiT rule as we read the paper: threshold 0.001",
    "warmup": "Δ³z needs the latents of four steps: the first 3 steps use p",
    "text_tokens": "Wan2.1 shared_config.py text_len = 512",
    "cfg_branches": "Wan2.1 generate.py: classifier-free guidance (sample_guide_scale 5.0) runs both branches",
    "padding": "project rule (docs/decisions.md): zero-pad the latent to the next multiple of the patch",
}

ProgressFn = Callable[[int, int, str], None]


def third_difference(trajectory: np.ndarray, t: int) -> np.ndarray:
    """``Δ³z_t = z_t − 3 z_{t−1} + 3 z_{t−2} − z_{t−3}`` in float64.

    Args:
        trajectory: ``[T, ...]`` latents, entry t the latent step t starts from.
        t: step index, ``3 <= t < T``.

    Raises:
        WorkloadError: ``t`` out of range.
    """
    traj = np.asarray(trajectory)
    if not 3 <= t < traj.shape[0]:
        raise WorkloadError(f"Δ³z_t needs steps t-3..t inside the trajectory of {traj.shape[0]} latents; t = {t}")
    z0, z1, z2, z3 = (traj[t - k].astype(np.float64) for k in range(4))
    return z0 - 3.0 * z1 + 3.0 * z2 - z3


def coarse_token_grid(latent_grid: Sequence[int], patch: Sequence[int]) -> tuple[tuple[int, int, int], bool]:
    """Token grid of a latent ``(F, H, W)`` under ``patch`` ``(p_t, p_h, p_w)`` with the padding rule.

    Returns:
        ``((F/p_t, ceil(H/p_h), ceil(W/p_w)), padded)``; ``padded`` is True when H or W does not divide.

    Raises:
        WorkloadError: F not a multiple of p_t, or a non-positive size.
    """
    f, h, w = (int(v) for v in latent_grid)
    pt, ph, pw = (int(v) for v in patch)
    if min(f, h, w, pt, ph, pw) <= 0 or f % pt:
        raise WorkloadError(f"latent grid {tuple(latent_grid)} and patch {tuple(patch)}: sizes must be positive "
                            "and the frames a multiple of the temporal patch")
    return (f // pt, -(-h // ph), -(-w // pw)), bool(h % ph or w % pw)


def patch_stds(d: np.ndarray, ph: int, pw: int) -> np.ndarray:
    """Standard deviation (ddof 0) of each ``ph × pw`` spatial patch of every frame, over channels and pixels.

    Args:
        d: ``[C, F, H, W]`` (e.g. Δ³z of one latent); H and W are padded to multiples of ph, pw and
            the padding is left out of each patch's std.

    Returns:
        float64 ``[F * ceil(H/ph) * ceil(W/pw)]``, frame-major, raster order.
    """
    d = np.asarray(d, dtype=np.float64)
    c, f, h, w = d.shape
    nh, nw = -(-h // ph), -(-w // pw)
    pad = np.full((c, f, nh * ph, nw * pw), np.nan)
    pad[:, :, :h, :w] = d
    blocks = pad.reshape(c, f, nh, ph, nw, pw).transpose(1, 2, 4, 0, 3, 5).reshape(f * nh * nw, -1)
    return np.nanstd(blocks, axis=1)


def choose_patch(delta: np.ndarray, base_patch: Sequence[int], rho: float = DEFAULT_RHO, tau: float = DEFAULT_TAU,
                 multiples: Sequence[int] = PATCH_MULTIPLES) -> tuple[int, dict[int, float]]:
    """The DDiT rule on one Δ³z: ``(multiple, {multiple: percentile})`` (module docstring, step 2).

    Args:
        delta: ``[C, F, H, W]`` float.
        base_patch: the model's ``(p_h, p_w)`` spatial patch in latent pixels.
    """
    ph, pw = (int(v) for v in base_patch)
    pct = {int(m): float(np.percentile(patch_stds(delta, m * ph, m * pw), 100.0 * rho)) for m in multiples}
    passing = [m for m in sorted(pct) if pct[m] <= tau]
    return (max(passing) if passing else min(pct)), pct


def check_rule_params(rho: float, tau: float, warmup: int, multiples: Sequence[int]) -> None:
    """Raise `WorkloadError` on a ρ outside [0, 1], τ < 0, warm-up < 3 or bad patch multiples."""
    if not 0.0 <= float(rho) <= 1.0:
        raise WorkloadError(f"rho must be in [0, 1] (a quantile), got {rho}")
    if not float(tau) >= 0.0 or not math.isfinite(float(tau)):
        raise WorkloadError(f"tau must be a finite number >= 0, got {tau}")
    if int(warmup) < 3:
        raise WorkloadError(f"warmup must be >= 3 (Δ³z needs four latents), got {warmup}")
    ms = [int(m) for m in multiples]
    if not ms or min(ms) != 1 or len(set(ms)) != len(ms):
        raise WorkloadError(f"patch multiples must be distinct and include 1 (the model's own patch), got {list(ms)}")


def schedule_from_trajectory(trajectory: np.ndarray, steps: int, base_patch: Sequence[int], rho: float = DEFAULT_RHO,
                             tau: float = DEFAULT_TAU, warmup: int = WARMUP_STEPS,
                             multiples: Sequence[int] = PATCH_MULTIPLES) -> list[dict]:
    """Patch multiple per step: ``[{"index", "patch_multiple", "percentiles"}]``; percentiles None in the warm-up.

    Args:
        trajectory: ``[>= steps, C, F, H, W]`` (entry t: the latent step t starts from).

    Raises:
        WorkloadError: a trajectory shorter than ``steps`` or bad rule parameters.
    """
    check_rule_params(rho, tau, warmup, multiples)
    traj = np.asarray(trajectory)
    if traj.ndim != 5 or traj.shape[0] < steps:
        raise WorkloadError(f"trajectory must be [steps >= {steps}, C, F, H, W], got {list(traj.shape)}")
    out = []
    for t in range(steps):
        if t < warmup:
            out.append({"index": t, "patch_multiple": 1, "percentiles": None})
            continue
        m, pct = choose_patch(third_difference(traj, t), base_patch, rho, tau, multiples)
        out.append({"index": t, "patch_multiple": m, "percentiles": {str(k): v for k, v in pct.items()}})
    return out


def _step_ops(net, spec, latent_grid, patch, m: int, step: int, branches: int) -> tuple[list[WorkloadOp], dict]:
    """The ops of one step at patch multiple m (module docstring) and the step's grid facts."""
    from algo.capture import CROSS_OPS, SELF_OPS, plan_ops
    from algo.models import blocks_of
    from algo.reuse.golden import block_groups

    pt, ph, pw = patch
    grid, padded = coarse_token_grid(latent_grid, (pt, m * ph, m * pw))
    cfg = spec.sizes["full"]
    _, plan = plan_ops(spec.name, "full", grid, [step], [0], (*SELF_OPS, *CROSS_OPS), net=net,
                       text_tokens=WAN_TEXT_TOKENS)
    layers = len(blocks_of(net))
    d = int(cfg["num_attention_heads"]) * int(cfg["attention_head_dim"])
    m_tok = math.prod(grid)

    def mk(name, batch, M, K, N, groups, block, repeat, x_signed=True, phase=""):  # noqa: N803
        return WorkloadOp(step=step, name=name, batch=batch, M=M, K=K, N=N, block=block, repeat=repeat,
                          x_signed=x_signed, grid=grid, groups=tuple(groups), phase=phase)

    def g(k):
        return [(k0, k1, axis, "block") for k0, k1, axis in block_groups(k)]

    k_in = int(cfg["in_channels"]) * pt * m * ph * m * pw
    ops = [mk("patch_embed", 1, m_tok, k_in, d, g(k_in), None, branches)]
    for op in plan:
        groups = [(x.k_start, x.k_stop, x.axis, x.kind) for x in op.groups]
        phase = "attention" if op.name in ("qk", "pv", "cross_qk", "cross_pv") else "linear"
        ops.append(mk(op.name, op.batch, m_tok, op.K, op.N, groups, 0, layers * branches, op.x_signed, phase))
    n_out = int(cfg["out_channels"]) * pt * m * ph * m * pw
    ops.append(mk("proj_out", 1, m_tok, d, n_out, g(d), None, branches))
    return ops, {"grid": list(grid), "tokens": m_tok, "padded": padded,
                 "patch": [pt, m * ph, m * pw]}


def generate_ddit(model: str = "wan2.1-t2v-1.3b", resolution: str = "480p", num_inference_steps: int = 50, *,
                  rho: float = DEFAULT_RHO, tau: float = DEFAULT_TAU, warmup: int = WARMUP_STEPS,
                  multiples: Sequence[int] = PATCH_MULTIPLES, schedule: Sequence[int] | None = None,
                  trajectory: np.ndarray | None = None, trajectory_size: str = "small",
                  trajectory_frames: int = TRAJECTORY_FRAMES, trajectory_weights=None, seed: int = 0,
                  cfg_branches: int = CFG_BRANCHES, progress: ProgressFn | None = None) -> Workload:
    """Build the DDiT workload of ``model`` at ``resolution`` (module docstring).

    Args:
        schedule: patch multiple per step (length ``num_inference_steps``); None: the rule on a
            recorded trajectory.
        trajectory: ``[>= steps, 16, F, H, W]`` latents to run the rule on; None: record one with
            `algo.capture.record_trajectory` (``trajectory_size`` model, seed ``seed``, the
            resolution's latent height and width, ``trajectory_frames`` latent frames).
        trajectory_size: ``"small"`` (default: the trained checkpoint `algo.train.trainer.CHECKPOINT`
            unless ``trajectory_weights`` names another), ``"tiny"`` or ``"full"`` (seeded unless
            ``trajectory_weights``).
        cfg_branches: forwards per step (2 with classifier-free guidance, 1 without).

    Raises:
        WorkloadError: bad parameters or schedule; `algo.models.CaptureError` for an unknown model or
        resolution (re-raised as WorkloadError).
    """
    from algo.capture import patch_of, record_trajectory, resolution_grid
    from algo.models import CaptureError, family_of, get_spec, meta_model

    try:
        spec = get_spec(model, "full")
        if not family_of(spec).ddit_trajectory:
            raise WorkloadError(f"the DDiT generator supports the Wan family (patch triple, Euler trajectory); "
                                f"{spec.name!r} is {spec.family!r}")
        patch = patch_of(spec.sizes["full"])
        resolution_grid(resolution, patch)  # the model's own grid must divide
        latent = resolution_grid(resolution, (1, 1, 1))
    except CaptureError as err:
        raise WorkloadError(str(err)) from None
    if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
        raise WorkloadError(f"num_inference_steps must be a positive integer, got {num_inference_steps!r}")
    if int(cfg_branches) not in (1, 2):
        raise WorkloadError(f"cfg_branches must be 1 or 2, got {cfg_branches}")
    check_rule_params(rho, tau, warmup, multiples)
    weights = None
    if schedule is not None:
        sched = [int(v) for v in schedule]
        if len(sched) != num_inference_steps or any(v not in multiples for v in sched):
            raise WorkloadError(f"schedule must give one patch multiple from {list(multiples)} per step "
                                f"({num_inference_steps}), got {len(sched)} values {sorted(set(sched))}")
        rows = [{"index": t, "patch_multiple": v, "percentiles": None} for t, v in enumerate(sched)]
        source = "explicit schedule (the rule did not run)"
    else:
        if trajectory is None:
            if trajectory_size == "small" and trajectory_weights is None:
                from algo.train.trainer import CHECKPOINT

                trajectory_weights = CHECKPOINT
            tf = int(trajectory_frames)
            if tf < 1 or tf > latent[0]:
                raise WorkloadError(f"trajectory_frames must be in 1..{latent[0]}, got {trajectory_frames}")
            try:
                trajectory, weights = record_trajectory(model, trajectory_size, (tf, latent[1], latent[2]),
                                                        num_inference_steps, seed, weights=trajectory_weights,
                                                        progress=progress)
            except CaptureError as err:
                raise WorkloadError(str(err)) from None
            source = (f"sampling run of {spec.name} ({trajectory_size}, weights: {weights}), latent "
                      f"{tf}x{latent[1]}x{latent[2]}, seed {seed}, no guidance, open loop at patch p")
        else:
            source = "trajectory given by the caller"
        rows = schedule_from_trajectory(trajectory, num_inference_steps, patch[1:], rho, tau, warmup, multiples)
    net = meta_model(spec.name, "full")
    ops, ref_ops, steps_meta, cache = [], [], [], {}
    for row in rows:
        t, m = row["index"], row["patch_multiple"]
        for mult, dst in ((m, ops), (1, ref_ops)):
            if mult not in cache:
                cache[mult] = _step_ops(net, spec, latent, patch, mult, 0, int(cfg_branches))
            dst.extend(WorkloadOp(**{**o.__dict__, "step": t}) for o in cache[mult][0])
        steps_meta.append({"index": t, "patch_multiple": m, **cache[m][1], "percentiles": row["percentiles"]})
    if schedule is not None or trajectory is not None and weights is None:
        caveat = ""
    elif str(weights).startswith("seeded"):  # `algo.models.WEIGHTS_INIT`; a checkpoint names its file
        caveat = (f" CAVEAT: the trajectory comes from the {trajectory_size} model with seeded (untrained) weights; "
                  "the schedule shows the rule on that run, not DDiT's choice on trained Wan2.1.")
    else:
        caveat = (f" CAVEAT: the trajectory comes from a trained {trajectory_size} model (params.schedule_source names "
                  "the checkpoint), not Wan2.1, and on its own latents (tau was set for Wan's VAE latents): the schedule "
                  "shows the rule on a trained denoiser's run, not DDiT's choice on Wan2.1.")
    notes = (f"DDiT dynamic patch scheduling; schedule from: {source}. Latent {latent[0]}x{latent[1]}x{latent[2]}; "
             f"padding rule: a latent side that does not divide the patch is zero-padded to the next multiple.{caveat}")
    params = {"num_inference_steps": num_inference_steps, "rho": float(rho), "tau": float(tau), "warmup": int(warmup),
              "patch_multiples": [int(v) for v in multiples], "cfg_branches": int(cfg_branches),
              "text_tokens": WAN_TEXT_TOKENS, "seed": int(seed), "trajectory_size": trajectory_size,
              "trajectory_frames": int(trajectory_frames), "schedule_source": source,
              "latent_grid": list(latent), "base_patch": list(patch)}
    return Workload(generator="ddit", model=spec.name, size="full", resolution=str(resolution),
                    grid=tuple(cache[1][1]["grid"]), ops=ops, devices=1, steps=steps_meta, params=params,
                    sources=dict(SOURCES), notes=notes,
                    reference={"label": "every step at the model's patch p", "ops": ref_ops, "comms": []})
