"""Measured output quality of Kaleido's reuse: a seeded flow-matching sampling run, exact vs reuse.

`run_quality` runs the same seeded Euler sampling loop two (or three) times in lock step, on one
model instance, with `algo.reuse.torch_hooks.ReuseHooks` switching the pass mode before each forward:

- **exact**: every op in ``quant_ops`` fake-quantised to int8 (operand X and weight W), reuse off;
- **reuse**: the same quantisation, and the ops in ``ops`` use the reuse algorithm's ``X_eff``;
- **float** (optional, ``float_reference=True``): the unquantised model, for context: how far the
  int8 model itself is from fp32.

Every model family runs (`algo.models.families`: the family's schedule, inputs and hooks).
Sampling (choice, documented): the family's N-step schedule (`algo.models.schedules`; Wan: flow
matching, diffusers ``FlowMatchEulerDiscreteScheduler``, shift 5.0; HunyuanVideo: the same, shift
7.0; CogVideoX: its DDIM, v-prediction; N = ``num_inference_steps`` = 50 by default, with the
terminal sigma 0 appended) of which the *last* ``steps`` are run,
starting from the real-image latents (`algo.latents.image_latents`, the panned astronaut) noised
to ``sigma[start]``, ``start = N - steps`` (`algo.latents.noisy_latents`, seeded eps from
`algo.latents.noise_like`): SDEdit-style image-to-video. With ``steps = N`` this is plain
text-to-video sampling from pure noise (``sigma[0] = 1`` so ``x = eps``). Why: with seeded
(untrained) weights, activations of neighbouring tokens only become similar once the noise level is
low (docs/capture.md), so a run that starts from real content at a moderate noise level is the
one where reuse has something to reuse. Each step is the scheduler's update (flow matching: the
Euler step ``x <- x + (sigma[i+1] - sigma[i]) * v(x, 1000 sigma[i])``; CogVideoX: the DDIM step of
``diffusers.CogVideoXDDIMScheduler``) in float32, batch 1, with 8 seeded N(0, 1) text tokens
(`algo.capture.TEXT_TOKENS`, stream ``[seed, 1]``) and the family's extra inputs, as capture.

Reported (`run_quality`'s dict): per op the decision fractions (elements of X and MAC-weighted),
the local SNR (the op's own reuse error: ``X_eff W`` against ``X W`` on the same input) and the SNR
against the exact run's output at the same (step, block, op) (accumulated error), both pooled over
calls as total signal energy over total noise energy (a per-call dB average is infinite as soon
as one call is error-free; the mean of finite per-call values is given too); PSNR and SSIM of the
final latents against the exact run (scikit-image ``peak_signal_noise_ratio`` and
``structural_similarity``; data range = max - min of the exact run's final latents; SSIM per latent
frame over the 16 channels, ``win_size`` 7, mean over frames); the SNR of the model output v
(``velocity_snr_db``, pooled over steps, each run on its own trajectory) and of the denoising
update (``update_snr_db``: signal ``x_final_exact - x_start``, noise ``x_final_reuse -
x_final_exact``), which show more than latent PSNR when the latents are dominated by the starting
point; LPIPS only when the ``lpips``
package, its weights and decoded frames are all available locally (otherwise an explicit
"unavailable (...)" string); decoded-frame PSNR/SSIM only with a local Wan VAE checkpoint
(``vae=PATH``, otherwise "no VAE checkpoint given").

The shared setup of a run (model, inputs, schedule) is `algo.quality.setup.Setup`; θ sweeps are
`algo.quality.sweep`, their files `algo.quality.output`.

Reuse fraction used as the x-axis of `sweep_quality`: the MAC-weighted fraction of work saved,
``reuse + partial / 2`` over the enabled ops (docs/spec.md §3: PARTIAL takes half a multiplier slot
when ``b_msb >= 4``; with ``b_msb < 4`` it takes a full slot and saves nothing, so the value is
``reuse`` only).

Determinism: same arguments, same machine and library versions -> same numbers (weights from
``torch.manual_seed``, data from seeded numpy generators, no timing in the results). The weights
are seeded, not trained: these numbers say how the algorithm perturbs *this* network, not what the
paper measured on trained HunyuanVideo/Wan.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from algo import latents as lat
from algo.capture import DEFAULT_MODEL, DEFAULT_SIZE, SELF_OPS
from algo.quality.metrics import (
    NO_VAE,
    _load_vae,
    _lpips,
    decode_latents,
    frame_metrics,
    latent_metrics,
    lpips_status,
)
from algo.quality.setup import DEFAULT_NUM_INFERENCE_STEPS, DEFAULT_STEPS, Setup, torch_threads
from algo.reuse.fake_quant import ReuseError, parse_ops, snr_db_energy, theta_for
from algo.reuse.thresholds import DEFAULT_THETA, ThetaSchedule, ThetaSpec
from algo.reuse.torch_hooks import ReuseHooks

__all__ = ["DEFAULT_STEPS", "PCA_DECODER", "run_quality"]

#: How frames of the trained size are decoded (no VAE): the latent transform's pseudo-inverse.
PCA_DECODER = "patch PCA pseudo-inverse (algo.train.patch_pca), clipped to [0, 1]"

ProgressFn = Callable[[int, int, str], None]


def _sample(setup: Setup, hooks: ReuseHooks, modes: Sequence[str], progress, done0, total):
    """Run the Euler loop for each mode in lock step.

    Returns:
        ``(finals, velocity)``: final latents per mode (float32 numpy ``[1, 16, F, H, W]``) and, per
        step, energies of the model output v: ``exact`` (sum v_exact^2), ``reuse_err``
        (sum (v_reuse - v_exact)^2) and, with a float pass, ``float`` and ``exact_vs_float_err``.
    """
    xs = {m: torch.from_numpy(setup.x_start.copy()).to(setup.dtype) for m in modes}
    velocity = {}
    done = done0
    with torch.inference_mode():
        for i in range(setup.start, setup.n_sched):
            sigma, t = setup.sigmas[i], setup.schedule.timestep(i)
            vs = {}
            for m in modes:
                hooks.set_pass(m, i)
                kwargs = setup.family.forward_kwargs(setup.inputs, xs[m], t)
                v = setup.family.output(setup.net(**kwargs, return_dict=False)[0]).to(torch.float32)
                vs[m] = v
                xs[m] = setup.schedule.update(xs[m], v, i).to(setup.dtype)
                done += 1
                if progress is not None:
                    progress(done, total, f"step {i} (sigma {float(sigma):.3f}) {m}")
            ve = vs["exact"].to(torch.float64)
            velocity[i] = {"exact": float((ve ** 2).sum()),
                           "reuse_err": float(((vs["reuse"].to(torch.float64) - ve) ** 2).sum())}
            if "float" in vs:
                vf = vs["float"].to(torch.float64)
                velocity[i]["float"] = float((vf ** 2).sum())
                velocity[i]["exact_vs_float_err"] = float(((ve - vf) ** 2).sum())
    return {m: x.to(torch.float32).numpy() for m, x in xs.items()}, velocity


def _vsnr(velocity: dict, sig: str, err: str) -> float:
    """Pooled SNR (dB) of the model output over all steps."""
    return snr_db_energy(sum(v[sig] for v in velocity.values()), sum(v[err] for v in velocity.values()))


def _update_snr(x_start: np.ndarray, exact: np.ndarray, reuse: np.ndarray) -> float:
    """SNR (dB) of the change the sampler made, ``exact - x_start``, against ``reuse - exact``."""
    e = exact.astype(np.float64)
    return snr_db_energy(float(((e - x_start) ** 2).sum()), float(((reuse.astype(np.float64) - e) ** 2).sum()))


def _finite_mean(vals) -> float:
    v = [x for x in vals if math.isfinite(x)]
    return float(np.mean(v)) if v else math.nan


def _theta_table(theta: ThetaSpec, ops: Sequence[str], step_ids: Sequence[int]) -> dict:
    return {op: [[int(s), *theta_for(theta, s, op)] for s in step_ids] for op in ops}


def _saved(fr: dict, b_msb: int) -> float:
    return fr["reuse"] + (fr["partial"] / 2 if b_msb >= 4 else 0.0)


def _hooks(setup: Setup, op_list, theta, b_msb, quant_ops, policy, policy_params) -> ReuseHooks:
    """Kaleido's hooks, or a baseline policy's (`algo.reuse.torch_hooks.PolicyHooks`)."""
    if policy is None:
        return ReuseHooks(setup.net, setup.grid, ops=op_list, theta=theta, b_msb=b_msb, quant_ops=quant_ops)
    from algo.reuse.torch_hooks import PolicyHooks

    return PolicyHooks(setup.net, setup.grid, policy, policy_params, ops=op_list, theta=theta, b_msb=b_msb,
                       quant_ops=quant_ops)


def _run(setup: Setup, theta, ops, b_msb, quant_ops, float_reference, vae, progress, done0=0, total=None,
         keep_latents=False, policy=None, policy_params=None) -> dict:
    op_list = parse_ops(ops)
    step_ids = list(range(setup.start, setup.n_sched))
    table = _theta_table(theta, op_list, step_ids)  # validates theta for every (step, op) up front
    modes = ("exact", "reuse") + (("float",) if float_reference else ())
    total = total if total is not None else len(step_ids) * len(modes)
    with _hooks(setup, op_list, theta, b_msb, quant_ops, policy, policy_params) as hooks:
        finals, velocity = _sample(setup, hooks, modes, progress, done0, total)
    st = hooks.stats
    per_op = {}
    for op in hooks.quant_ops:
        calls = [c for c in st.calls if c["op"] == op]
        per_op[op] = {
            "reuse_enabled": op in op_list,
            "fractions": st.fractions(op) if op in op_list else None,
            "mac_fractions": st.fractions(op, weight="macs") if op in op_list else None,
            "local_snr_db": st.local_snr_db(op) if op in op_list else math.inf,
            "snr_db": st.snr_db(op),
            "snr_db_mean_finite_calls": _finite_mean(snr_db_energy(c["signal"], c["noise"]) for c in calls),
            "calls": len(calls),
            "error_free_calls": sum(1 for c in calls if c["noise"] == 0.0),
        }
    per_step = []
    for i in step_ids:
        fr = st.fractions(None, steps={i}, weight="macs")
        per_step.append({
            "step": i, "sigma": float(setup.sigmas[i]),
            "theta": {op: list(theta_for(theta, i, op)) for op in op_list},
            "mac_fractions": fr, "mac_saved_fraction": _saved(fr, b_msb),
            "fractions": {op: st.fractions(op, steps={i}) for op in op_list},
            "snr_db": {op: st.snr_db(op, steps={i}) for op in hooks.quant_ops},
            "velocity_snr_db": snr_db_energy(velocity[i]["exact"], velocity[i]["reuse_err"]),
        })
    mac_fr = st.fractions(None, weight="macs")
    res = setup.describe()
    res.update({
        "policy": policy or "kaleido", "policy_params": dict(getattr(hooks, "params", {})),
        "ops": list(op_list), "quant_ops": list(hooks.quant_ops), "b_msb": int(b_msb),
        "theta": _theta_repr(theta), "theta_table": table,
        "quantisation": ("int8 symmetric per tensor per call (scale max|x|/127, rint half-even, clamp), X and "
                         "W of every quant op, in the exact and the reuse run; pv: P = rint(255 exp(c (S - "
                         "rowmax S))) uint8 from qk's int8 scores S (algo.reuse.softmax), O = P_eff V / rowsum(P); biases float; other ops float"),
        "reference": "exact run: same int8 fake-quantisation, reuse off",
        "reuse_fraction": st.fractions(None),
        "mac_fractions": mac_fr,
        "mac_saved_fraction": _saved(mac_fr, b_msb),
        "per_op": per_op,
        "per_step": per_step,
        "latents": latent_metrics(finals["exact"], finals["reuse"]),
        "velocity_snr_db": _vsnr(velocity, "exact", "reuse_err"),
        "update_snr_db": _update_snr(setup.x_start, finals["exact"], finals["reuse"]),
    })
    if float_reference:
        res["int8_vs_float"] = latent_metrics(finals["float"], finals["exact"])
        res["int8_vs_float"]["velocity_snr_db"] = _vsnr(velocity, "float", "exact_vs_float_err")
        res["reuse_vs_float"] = latent_metrics(finals["float"], finals["reuse"])
    frames = None
    if vae is not None:
        v = _load_vae(vae, setup.family.vae_class)
        frames = {m: decode_latents(v, finals[m]) for m in ("exact", "reuse")}
        res["frames"] = {"vae": str(vae), "shape": list(frames["exact"].shape),
                         **frame_metrics(frames["exact"], frames["reuse"])}
    elif setup.pca is not None:
        frames = {m: np.clip(setup.pca.decode(finals[m]), 0.0, 1.0) for m in ("exact", "reuse")}
        res["frames"] = {"decoder": PCA_DECODER, "shape": list(frames["exact"].shape),
                         **frame_metrics(frames["exact"], frames["reuse"])}
    else:
        res["frames"] = NO_VAE
    why = lpips_status(frames is not None)
    if why is None:
        try:
            res["lpips"] = _lpips(frames["exact"], frames["reuse"])
        except Exception as err:  # weights present but unusable: say so, do not skip
            res["lpips"] = f"unavailable (error: {str(err).splitlines()[0] if str(err) else type(err).__name__})"
    else:
        res["lpips"] = why
    if keep_latents:
        res["final_latents"] = finals
    return res


def _theta_repr(theta: ThetaSpec):
    if isinstance(theta, ThetaSchedule):
        return repr(theta)
    if callable(theta):
        return f"callable {getattr(theta, '__name__', type(theta).__name__)} (see theta_table)"
    if isinstance(theta, dict):
        return {k: [float(v[0]), float(v[1])] for k, v in theta.items()}
    return [float(theta[0]), float(theta[1])]


def run_quality(
    model: str = DEFAULT_MODEL,
    size: str = DEFAULT_SIZE,
    steps: int = DEFAULT_STEPS,
    theta: ThetaSpec = DEFAULT_THETA,
    ops: str | Iterable[str] = SELF_OPS,
    seed: int = 0,
    grid: tuple[int, int, int] | None = None,
    *,
    num_inference_steps: int = DEFAULT_NUM_INFERENCE_STEPS,
    b_msb: int = 4,
    quant_ops: Iterable[str] | None = None,
    float_reference: bool = True,
    vae: str | Path | None = None,
    image: str = "astronaut",
    pan_px: int = lat.DEFAULT_PAN_PX,
    shift: float = lat.DEFAULT_SHIFT,
    progress: ProgressFn | None = None,
    keep_latents: bool = False,
    threads: int | None = 1,
    policy: str | None = None,
    policy_params: dict | None = None,
    weights: str | Path | None = None,
) -> dict:
    """Sample with and without reuse and measure the difference (module docstring).

    Args:
        model, size: registry name and size (`algo.models.MODELS`).
        steps: Euler steps run: the last ``steps`` of the ``num_inference_steps`` schedule (1..N).
        theta: ``(theta1, theta2)``, a dict op -> pair (optional ``"default"``; missing ops take it, else
            (4, 12)), ``callable(step_index, op) -> pair`` with ``step_index`` in ``0..N-1``, or an
            `algo.reuse.thresholds.ThetaSchedule` (``parse_theta("4,12; ffn1@45-49=8,24")``); int8 units per channel.
        ops: op types with reuse (names from `algo.reuse.fake_quant.ALL_OPS`, or "all"/"self"/"none"/"a,b").
        seed: weights, text, noise.
        grid: token grid ``(F, H, W)``; None: the size's default (tiny: 4x8x8).
        b_msb: reused high bits of PARTIAL.
        quant_ops: ops fake-quantised in both runs (None: the six self ops plus enabled cross ops).
        float_reference: also run the float model and report int8-vs-float and reuse-vs-float.
        vae: local Wan VAE checkpoint folder; decoded-frame metrics (and LPIPS) only with one.
        image, pan_px, shift: latent content and schedule (`algo.latents`).
        progress: ``progress(done, total, label)`` after every forward pass.
        keep_latents: add ``"final_latents"`` ({mode: ``[1, 16, F, H, W]`` float32}) to the result.
        threads: torch intra-op threads during the run, restored afterwards (default 1: the same
            float results on any core count, and the fastest for tiny models: a tiny 10-step run
            took 1.0 s with 1 thread and 9.6 s with 2 on a busy 2-core machine); None: unchanged.
        policy: None (Kaleido's reuse) or a baseline policy of `algo.reuse.policies.POLICIES`
            (``"adaptiv"``, ``"exion"``, ``"cambricon_d"``): the reuse run applies that policy
            instead, on its own ops (``ops`` is then ignored) with ``theta``'s theta1 as its default
            threshold; the result's ``mac_saved_fraction`` is skip + half / 2 of the policy's ops.
        policy_params: the policy's parameters (`algo.reuse.policies.check_policy`).
        weights: None (seeded) or a checkpoint (`algo.models.build_model`), e.g. the trained
            ``small`` model's ``algo/train/assets/wan-small/diffusion_pytorch_model.safetensors``.
            The ``small`` size decodes frames with the patch PCA (frame PSNR/SSIM without a VAE).

    Returns:
        A dict (JSON-ready through `to_jsonable`): the configuration, ``per_op`` (fractions, SNRs),
        ``per_step``, ``reuse_fraction`` (elements), ``mac_fractions``, ``mac_saved_fraction``,
        ``latents`` (PSNR dB, SSIM, data range), ``int8_vs_float``, ``frames`` (dict or "no VAE
        checkpoint given"), ``lpips`` (float or "unavailable (...)").

    Raises:
        ReuseError (a `algo.models.CaptureError`): bad model/size/steps/grid/theta/ops/b_msb, or a VAE
            path that does not load.
    """
    if vae is not None and not Path(vae).exists():
        raise ReuseError(f"VAE checkpoint not found: {vae}")
    if policy is not None:
        from algo.reuse.policies import POLICIES, PolicyError, check_policy

        try:
            check_policy(policy, policy_params)
        except PolicyError as err:
            raise ReuseError(str(err)) from None
        ops = POLICIES[policy]["ops"]
    op_list = parse_ops(ops)
    if isinstance(steps, int) and isinstance(num_inference_steps, int) and 1 <= steps <= num_inference_steps:
        # fail on a bad theta before building the model (Setup reports bad steps)
        _theta_table(theta, op_list, list(range(num_inference_steps - steps, num_inference_steps)))
    with torch_threads(threads):
        setup = Setup(model, size, steps, seed, grid, num_inference_steps, image, pan_px, shift, weights)
        return _run(setup, theta, op_list, b_msb, quant_ops, float_reference, vae, progress,
                    keep_latents=keep_latents, policy=policy, policy_params=policy_params)


#: Names that live in `algo.quality.sweep` and `algo.quality.output`, still importable from here.
_MOVED = {"DEFAULT_SWEEP_THETAS": "algo.quality.sweep", "sweep_quality": "algo.quality.sweep",
          "to_jsonable": "algo.quality.output", "weights_label": "algo.quality.output",
          "caption": "algo.quality.output"}


def __getattr__(name: str):
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
