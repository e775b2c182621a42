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

import contextlib
import csv
import dataclasses
import io
import json
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from algo import latents as lat
from algo.capture import DEFAULT_MODEL, DEFAULT_SIZE, SELF_OPS, TEXT_TOKENS, patch_of
from algo.fileio import atomic_write_bytes
from algo.models import build_model, family_of, get_spec
from algo.quality.metrics import (
    NO_VAE,
    _load_vae,
    _lpips,
    decode_latents,
    frame_metrics,
    latent_metrics,
    lpips_status,
    pareto_front,
)
from algo.reuse.fake_quant import ReuseError, parse_ops, snr_db_energy, theta_for
from algo.reuse.thresholds import DEFAULT_THETA, ThetaSchedule, ThetaSpec
from algo.reuse.torch_hooks import ReuseHooks

__all__ = ["DEFAULT_STEPS", "DEFAULT_SWEEP_THETAS", "run_quality", "sweep_quality", "to_jsonable", "write_sweep"]

#: Default number of Euler steps run (the last 10 of the 50-step schedule: sigma 0.54 -> 0).
DEFAULT_STEPS = 10
#: Length of the sampling schedule (Wan2.1 repo default for t2v: 50 FlowMatchEuler steps, shift 5;
#: docs/capture.md "schedule").
DEFAULT_NUM_INFERENCE_STEPS = 50
#: Default sweep thresholds (theta1, theta2), int8 units per channel; (0, 0) is the no-reuse check.
#: Project choice: points around `algo.reuse.thresholds.DEFAULT_THETA` (4, 12) from lossless to mostly
#: REUSE; the quality-sweep tables in docs/results.md use this list.
DEFAULT_SWEEP_THETAS = ((0, 0), (0.5, 2), (1, 4), (2, 6), (2, 8), (4, 12), (4, 16), (6, 20), (8, 24), (12, 32))
#: How frames of the trained size are decoded (no VAE): the latent transform's pseudo-inverse.
PCA_DECODER = "patch PCA pseudo-inverse (algo.train.patch_pca), clipped to [0, 1]"

ProgressFn = Callable[[int, int, str], None]


@contextlib.contextmanager
def _threads(n: int | None):
    """Set torch's intra-op thread count for the block (None: leave it)."""
    if n is None:
        yield
        return
    if int(n) < 1:
        raise ReuseError(f"threads must be >= 1 or None, got {n}")
    old = torch.get_num_threads()
    torch.set_num_threads(int(n))
    try:
        yield
    finally:
        torch.set_num_threads(old)


# -- the sampling run ------------------------------------------------------------------------------

class _Setup:
    """Model, inputs and schedule shared by every run of one configuration."""

    def __init__(self, model, size, steps, seed, grid, num_inference_steps, image, pan_px, shift, weights=None):
        spec = get_spec(model, size)
        cfg = spec.sizes[size]
        fam = family_of(spec)
        if not isinstance(num_inference_steps, int) or num_inference_steps < 1:
            raise ReuseError(f"num_inference_steps must be a positive integer, got {num_inference_steps!r}")
        if not isinstance(steps, int) or not 1 <= steps <= num_inference_steps:
            raise ReuseError(f"steps must be an integer in 1..{num_inference_steps}, got {steps!r}")
        grid = tuple(int(v) for v in (spec.default_grid[size] if grid is None else grid))
        max_len = int(cfg.get("rope_max_seq_len", 1024))
        if len(grid) != 3 or min(grid) <= 0 or max(grid) > max_len:
            raise ReuseError(f"grid must be 3 positive token counts (F, H, W), each <= {max_len}; got {grid}")
        if image not in lat.IMAGES:
            raise ReuseError(f"unknown image {image!r}; choose one of {', '.join(lat.IMAGES)}")
        self.spec, self.family, self.size, self.seed, self.grid = spec, fam, size, int(seed), grid
        self.schedule = fam.schedule(num_inference_steps, shift)
        self.steps, self.n_sched, self.image, self.pan_px = steps, num_inference_steps, image, pan_px
        self.shift = getattr(self.schedule, "shift", None)  # None: not a flow-matching schedule
        if weights is not None and not Path(weights).expanduser().exists():
            raise ReuseError(f"--weights: checkpoint not found: {Path(weights).expanduser().resolve()}")
        self.net, self.weights = build_model(spec.name, size, seed, weights=weights)
        #: decoded frames without a VAE: the patch PCA's pseudo-inverse for the trained size
        self.pca = None
        if spec.latents.get(size) == "patch_pca":
            from algo.train import patch_pca

            self.pca = patch_pca.load()
        self.dtype = next(self.net.parameters()).dtype
        p_t, p_h, p_w = patch_of(cfg)
        self.latent_grid = (grid[0] * p_t, grid[1] * p_h, grid[2] * p_w)
        x0 = lat.model_latents(spec, size, self.latent_grid, pan_px=pan_px, image=image)
        eps = lat.noise_like(x0, seed)
        self.sigmas = self.schedule.sigmas
        self.start = num_inference_steps - steps
        self.x_start = self.schedule.noised(x0, eps, self.start)
        self.inputs = fam.inputs(cfg, self.net, grid, seed, self.dtype, TEXT_TOKENS)
        self.prompt = lat.class_prompt(spec, size, image)
        if self.prompt is not None:  # the trained size: the class prompt of the image (algo.train.clips)
            self.inputs = dataclasses.replace(
                self.inputs, text=torch.from_numpy(self.prompt[1](self.inputs.text.shape[-1])).to(self.dtype))

    def describe(self) -> dict:
        return {
            "model": self.spec.name, "size": self.size, "weights": self.weights, "seed": self.seed,
            "grid": list(self.grid), "latent_grid": list(self.latent_grid),
            "tokens": int(np.prod(self.grid)), "num_inference_steps": self.n_sched, "steps": self.steps,
            "start_step": self.start, "shift": self.shift,
            "sigmas": [float(s) for s in self.sigmas[self.start:]],
            "start": (f"{self.image} panned {self.pan_px} px/latent frame ({lat.encoder_name(self.spec, self.size)}), "
                      f"noised to sigma[{self.start}] = {float(self.sigmas[self.start]):.4f} with seeded eps"),
            "text": self.prompt[0] if self.prompt else f"{TEXT_TOKENS} seeded N(0,1) tokens",
        }


def _sample(setup: _Setup, hooks: ReuseHooks, modes: Sequence[str], progress, done0, total):
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


def _hooks(setup: _Setup, op_list, theta, b_msb, quant_ops, policy, policy_params) -> ReuseHooks:
    """Kaleido's hooks, or a baseline policy's (`algo.reuse.torch_hooks.PolicyHooks`)."""
    if policy is None:
        return ReuseHooks(setup.net, setup.grid, ops=op_list, theta=theta, b_msb=b_msb, quant_ops=quant_ops)
    from algo.reuse.torch_hooks import PolicyHooks

    return PolicyHooks(setup.net, setup.grid, policy, policy_params, ops=op_list, theta=theta, b_msb=b_msb,
                       quant_ops=quant_ops)


def _run(setup: _Setup, theta, ops, b_msb, quant_ops, float_reference, vae, progress, done0=0, total=None,
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
        # fail on a bad theta before building the model (_Setup reports bad steps)
        _theta_table(theta, op_list, list(range(num_inference_steps - steps, num_inference_steps)))
    with _threads(threads):
        setup = _Setup(model, size, steps, seed, grid, num_inference_steps, image, pan_px, shift, weights)
        return _run(setup, theta, op_list, b_msb, quant_ops, float_reference, vae, progress,
                    keep_latents=keep_latents, policy=policy, policy_params=policy_params)


def sweep_quality(
    thetas: Sequence[tuple[float, float]] = DEFAULT_SWEEP_THETAS,
    out_dir: str | Path | None = None,
    model: str = DEFAULT_MODEL,
    size: str = DEFAULT_SIZE,
    steps: int = DEFAULT_STEPS,
    ops: str | Iterable[str] = SELF_OPS,
    seed: int = 0,
    grid: tuple[int, int, int] | None = None,
    *,
    num_inference_steps: int = DEFAULT_NUM_INFERENCE_STEPS,
    b_msb: int = 4,
    image: str = "astronaut",
    pan_px: int = lat.DEFAULT_PAN_PX,
    shift: float = lat.DEFAULT_SHIFT,
    progress: ProgressFn | None = None,
    threads: int | None = 1,
    weights: str | Path | None = None,
) -> dict:
    """Quality against reuse fraction over a list of (theta1, theta2), one model instance.

    Each theta is one `run_quality` (same theta for every enabled op and step); the float model runs
    once (with the first point) for the int8-vs-float context line.

    Args:
        thetas: pairs ``(theta1, theta2)``, each ``0 <= theta1 <= theta2``.
        out_dir: if given, `write_sweep` writes ``quality_sweep.csv``, ``.json``, ``.png``, ``.pdf`` there.
        other arguments: as `run_quality`.

    Returns:
        ``{"config": ..., "points": [...], "pareto": [indices], "int8_vs_float": ..., "files": [...]}``;
        each point: theta1, theta2, compute/partial/reuse (MAC-weighted), mac_saved, latent_psnr_db,
        latent_ssim, velocity_snr_db, update_snr_db, snr_db and local_snr_db per op.

    Raises:
        ReuseError: no thetas, a bad pair, or as `run_quality`.
    """
    if not thetas:
        raise ReuseError("no thetas given")
    op_list = parse_ops(ops)
    if isinstance(steps, int):
        for t in thetas:
            _theta_table(tuple(t), op_list, [0])
    with _threads(threads):
        return _sweep(thetas, out_dir, op_list, b_msb, progress,
                      _Setup(model, size, steps, seed, grid, num_inference_steps, image, pan_px, shift, weights))


def _sweep(thetas, out_dir, op_list, b_msb, progress, setup: _Setup) -> dict:
    per_run = [setup.steps * 3] + [setup.steps * 2] * (len(thetas) - 1)
    total, done = sum(per_run), 0
    points, int8_vs_float = [], None
    for k, t in enumerate(thetas):
        th = (float(t[0]), float(t[1]))
        r = _run(setup, th, op_list, b_msb, None, k == 0, None, progress, done, total)
        done += per_run[k]
        if k == 0:
            int8_vs_float = r["int8_vs_float"]
        fr = r["mac_fractions"]
        points.append({
            "theta1": th[0], "theta2": th[1], **fr, "mac_saved": r["mac_saved_fraction"],
            "latent_psnr_db": r["latents"]["psnr_db"], "latent_ssim": r["latents"]["ssim"],
            "velocity_snr_db": r["velocity_snr_db"], "update_snr_db": r["update_snr_db"],
            **({"frame_psnr_db": r["frames"]["psnr_db"], "frame_ssim": r["frames"]["ssim"]}
               if isinstance(r["frames"], dict) else {}),
            "snr_db": {op: r["per_op"][op]["snr_db"] for op in r["quant_ops"]},
            "local_snr_db": {op: r["per_op"][op]["local_snr_db"] for op in op_list},
        })
    config = {k: v for k, v in r.items() if k in (
        "model", "size", "weights", "seed", "grid", "latent_grid", "tokens", "num_inference_steps", "steps",
        "start_step", "shift", "sigmas", "start", "text", "ops", "quant_ops", "b_msb", "quantisation", "reference")}
    front = pareto_front([p["mac_saved"] for p in points], [p["latent_psnr_db"] for p in points])
    res = {"config": config, "points": points, "pareto": front, "int8_vs_float": int8_vs_float,
           "lpips": r["lpips"], "frames": r["frames"], "files": []}
    if out_dir is not None:
        res["files"] = [str(p) for p in write_sweep(res, out_dir)]
    return res


# -- output ----------------------------------------------------------------------------------------

def to_jsonable(obj):
    """Plain JSON types: numpy scalars/arrays to Python, tuples to lists, non-finite floats to
    the strings ``"inf"``, ``"-inf"``, ``"nan"`` (strict JSON has no infinity)."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        f = float(obj)
        return f if math.isfinite(f) else ("nan" if math.isnan(f) else ("inf" if f > 0 else "-inf"))
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (np.bool_,)):
        return bool(obj)
    return obj


def _fmt(v: float, nd: int = 2) -> str:
    return f"{v:.{nd}f}" if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))


def weights_label(weights: str, seed: int) -> str:
    """``weights seeded, untrained (seed N)`` or ``weights trained (checkpoint NAME)``, from a weights description."""
    if str(weights).startswith("seeded"):
        return f"weights seeded, untrained (seed {seed})"
    return f"weights trained (checkpoint {Path(str(weights).split(': ', 1)[-1]).name})"


def caption(config: dict) -> str:
    """One-line figure caption: model, size, weights, steps, grid, seed, reference."""
    shift = config["shift"]
    sampler = "DDIM" if shift is None else "Euler"
    sched = f"{config['num_inference_steps']}" + ("" if shift is None else f", shift {shift:g}")
    return (f"{config['model']} ({config['size']}), {weights_label(config['weights'], config['seed'])}; "
            f"{config['steps']} {sampler} steps (last {config['steps']} of {sched}) from noised real-image latents; "
            f"grid {'x'.join(map(str, config['grid']))} tokens; ops {','.join(config['ops'])}; "
            "reference: int8 run without reuse")


def write_sweep(res: dict, out_dir: str | Path) -> list[Path]:
    """Write ``quality_sweep.csv``, ``quality_sweep.json``, ``quality_sweep.png`` and ``.pdf`` atomically.

    The figure plots PSNR (dB) and SSIM of the final latents and the SNR (dB) of the model output
    against the MAC-weighted work saved (%), marks the PSNR Pareto front and draws the int8-vs-fp32
    values (no reuse) as context lines; points with
    infinite PSNR (no reuse) are listed in the legend, not plotted. Fixed metadata: equal inputs give
    byte-identical files.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    pts, front, cfg = res["points"], set(res["pareto"]), res["config"]
    ops = cfg["quant_ops"]
    written = []

    fields = ["theta1", "theta2", "compute", "partial", "reuse", "mac_saved", "latent_psnr_db", "latent_ssim",
              "velocity_snr_db", "update_snr_db", "pareto"] + [f"snr_db_{o}" for o in ops] + [f"local_snr_db_{o}" for o in cfg["ops"]]
    frames = bool(pts) and "frame_psnr_db" in pts[0]
    fields += ["frame_psnr_db", "frame_ssim"] if frames else []
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(fields)
    for i, p in enumerate(pts):
        w.writerow([_fmt(p["theta1"], 3), _fmt(p["theta2"], 3), _fmt(p["compute"], 5), _fmt(p["partial"], 5),
                    _fmt(p["reuse"], 5), _fmt(p["mac_saved"], 5), _fmt(p["latent_psnr_db"], 3),
                    _fmt(p["latent_ssim"], 5), _fmt(p["velocity_snr_db"], 3), _fmt(p["update_snr_db"], 3),
                    int(i in front)]
                   + [_fmt(p["snr_db"][o], 3) for o in ops] + [_fmt(p["local_snr_db"][o], 3) for o in cfg["ops"]]
                   + ([_fmt(p["frame_psnr_db"], 3), _fmt(p["frame_ssim"], 5)] if frames else []))
    written.append(atomic_write_bytes(out / "quality_sweep.csv", buf.getvalue().encode()))
    written.append(atomic_write_bytes(out / "quality_sweep.json",
                                      (json.dumps(to_jsonable({k: v for k, v in res.items() if k != "files"}),
                                                  indent=2) + "\n").encode()))

    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    fin = [i for i, p in enumerate(pts) if math.isfinite(p["latent_psnr_db"])]
    inf_pts = [p for p in pts if not math.isfinite(p["latent_psnr_db"])]
    for ax, key, ylabel in ((axes[0], "latent_psnr_db", "PSNR of final latents vs exact int8 run (dB)"),
                            (axes[1], "latent_ssim", "SSIM of final latents vs exact int8 run (1 = equal)"),
                            (axes[2], "velocity_snr_db", "SNR of model output v vs exact int8 run (dB)")):
        xs = [100 * pts[i]["mac_saved"] for i in fin]
        ys = [pts[i][key] for i in fin]
        ax.plot(xs, ys, "o", color="tab:blue", label="sweep point (label: θ1,θ2)")
        for i in fin:
            ax.annotate(f"{pts[i]['theta1']:g},{pts[i]['theta2']:g}", (100 * pts[i]["mac_saved"], pts[i][key]),
                        textcoords="offset points", xytext=(4, 3), fontsize=7)
        fr = [i for i in res["pareto"] if i in fin]
        if key == "latent_psnr_db" and fr:
            ax.plot([100 * pts[i]["mac_saved"] for i in fr], [pts[i][key] for i in fr], "-", color="tab:red",
                    label="Pareto front (max PSNR per reuse)")
        ivf_key = {"latent_psnr_db": "psnr_db", "velocity_snr_db": "velocity_snr_db"}.get(key)
        ivf = (res.get("int8_vs_float") or {}).get(ivf_key) if ivf_key else None
        if ivf is not None and math.isfinite(ivf):
            ax.axhline(ivf, ls="--", color="gray", label=f"int8 vs fp32, no reuse ({ivf:.1f} dB)")
        if inf_pts:
            ax.plot([], [], " ", label="not plotted (identical, PSNR ∞): θ = "
                    + "; ".join(f"{p['theta1']:g},{p['theta2']:g}" for p in inf_pts))
        ax.set_xlabel("work saved: REUSE + ½ PARTIAL (% of enabled ops' MACs)")
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="best")
    fig.suptitle("Kaleido reuse: output quality vs reuse fraction")
    fig.text(0.5, 0.01, caption(cfg), ha="center", va="bottom", fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 0.95))
    for ext, kw in (("png", {"dpi": 150}), ("pdf", {})):
        b = io.BytesIO()
        meta = {"Software": None} if ext == "png" else {"CreationDate": None, "Producer": None, "Creator": None}
        fig.savefig(b, format=ext, metadata=meta, **kw)
        written.append(atomic_write_bytes(out / f"quality_sweep.{ext}", b.getvalue()))
    plt.close(fig)
    return written

