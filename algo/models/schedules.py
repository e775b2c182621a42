"""Noise schedules of the model families, written once: what capture, shape traces, derivation and
quality runs feed the model at step ``i`` of an N-step schedule, and how a sampler steps.

- `FlowMatch` (Wan, HunyuanVideo): diffusers ``FlowMatchEulerDiscreteScheduler``'s sigmas
  (`algo.latents.flow_sigmas`, shift per family), ``x_t = (1 - sigma) x0 + sigma eps``
  (`algo.latents.noisy_latents`), timestep ``1000 sigma`` in float32, Euler update
  ``x <- x + (sigma[i+1] - sigma[i]) v`` with the scheduler's terminal sigma 0.
- `DDIM` (CogVideoX): ``diffusers.CogVideoXDDIMScheduler`` with `COGVIDEOX_SCHEDULER`: timestep
  ``t`` of the scheduler's N-step list, ``x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps``, the
  noise level reported as ``sigma = sqrt(1 - abar_t)``; the update is the scheduler's own ``step``
  (DDIM, eta 0, v-prediction).
"""

from __future__ import annotations

import math

import numpy as np

from algo import latents as lat
from algo.lazy import lazy_module

torch = lazy_module("torch")  # imported on first use (algo.lazy: model names without torch)

__all__ = ["COGVIDEOX_SCHEDULER", "DDIM", "FlowMatch", "Schedule"]

#: Scheduler of CogVideoX-5B (``THUDM/CogVideoX-5b`` ``scheduler/scheduler_config.json``, class
#: `diffusers.CogVideoXDDIMScheduler`): DDPM betas scaled_linear 0.00085..0.012, zero-terminal-SNR
#: rescaling, v-prediction, trailing timestep spacing, no SNR shift.
COGVIDEOX_SCHEDULER = dict(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear",
                           rescale_betas_zero_snr=True, snr_shift_scale=1.0, timestep_spacing="trailing",
                           set_alpha_to_one=True, prediction_type="v_prediction", clip_sample=False)


class Schedule:
    """One N-step schedule. Step indices run ``0 .. n_steps - 1`` (noisiest first).

    Attributes:
        n_steps: N.
        sigmas: float32 ``[N + 1]``, the noise level of every step and the terminal 0.
    """

    n_steps: int
    sigmas: np.ndarray

    def timestep(self, i: int) -> float:
        """The model's timestep input at step ``i``."""
        raise NotImplementedError

    def noised(self, x0: np.ndarray, eps: np.ndarray, i: int) -> np.ndarray:
        """Float32 latents at step ``i`` from clean latents ``x0`` and noise ``eps`` (same shape)."""
        raise NotImplementedError

    def update(self, x: torch.Tensor, v: torch.Tensor, i: int) -> torch.Tensor:
        """The sampler's step from ``i`` to ``i + 1``: float32 latents from float32 ``x`` and model output ``v``."""
        raise NotImplementedError

    def describe(self) -> str:
        """One phrase for trace notes: the noising rule and the schedule."""
        raise NotImplementedError

    def sigma(self, i: int) -> float:
        return float(self.sigmas[i])

    def step_meta(self, steps) -> list[dict]:
        """``[{"index", "sigma", "timestep"}]`` of the given step indices, as traces record them."""
        return [{"index": int(s), "sigma": self.sigma(s), "timestep": self.timestep(s)} for s in steps]


class FlowMatch(Schedule):
    """Flow matching (``FlowMatchEulerDiscreteScheduler``, ``shift``)."""

    name = "FlowMatchEuler"

    def __init__(self, n_steps: int, shift: float):
        self.n_steps, self.shift = int(n_steps), float(shift)
        self.sigmas = np.append(lat.flow_sigmas(self.n_steps, self.shift), np.float32(0.0)).astype(np.float32)

    def timestep(self, i: int) -> float:
        return float(self.sigmas[i] * np.float32(lat.NUM_TRAIN_TIMESTEPS))

    def noised(self, x0, eps, i):
        return lat.noisy_latents(x0, float(self.sigmas[i]), eps)

    def update(self, x, v, i):
        dt = float(self.sigmas[i + 1] - self.sigmas[i])  # float32 difference, as the scheduler's step
        return x.to(torch.float32) + dt * v

    def describe(self) -> str:
        return (f"noise: x_t = (1-sigma) x0 + sigma eps, eps seeded; schedule: FlowMatchEuler shift "
                f"{self.shift}, {self.n_steps} steps")


class DDIM(Schedule):
    """CogVideoX's DDIM (`COGVIDEOX_SCHEDULER`)."""

    name = "CogVideoXDDIM"

    def __init__(self, n_steps: int):
        from diffusers import CogVideoXDDIMScheduler

        self.n_steps = int(n_steps)
        self.scheduler = CogVideoXDDIMScheduler(**COGVIDEOX_SCHEDULER)
        self.scheduler.set_timesteps(self.n_steps)
        self.timesteps = [int(t) for t in self.scheduler.timesteps]
        self.abar = self.scheduler.alphas_cumprod.numpy()
        self.sigmas = np.array([math.sqrt(1.0 - float(self.abar[t])) for t in self.timesteps] + [0.0],
                               dtype=np.float32)

    def sigma(self, i: int) -> float:
        return math.sqrt(1.0 - float(self.abar[self.timesteps[i]]))  # float64, as traces record it

    def timestep(self, i: int) -> float:
        return float(self.timesteps[i])

    def noised(self, x0, eps, i):
        a = float(self.abar[self.timesteps[i]])
        return (np.float32(math.sqrt(a)) * x0 + np.float32(math.sqrt(1.0 - a)) * eps).astype(np.float32)

    def update(self, x, v, i):
        out = self.scheduler.step(v.to(torch.float32), self.timesteps[i], x.to(torch.float32), return_dict=False)
        return out[0].to(torch.float32)

    def describe(self) -> str:
        return f"noise: x_t = sqrt(abar) x0 + sqrt(1-abar) eps, eps seeded; schedule: CogVideoXDDIM {self.n_steps} steps"
