"""DiTango context parallelism (thu-pacman/ChituDiffusion, ``chitu_diffusion/ditango/``): the pieces
the workload generator is built from. The generator itself (per-rank ops and ring hops per
layer and step, κ/importance intervals from captured attention states) is not written yet.

- `merge_states`: attention over a sequence split into partitions, each partition's state
  (out, lse) computed alone and merged associatively:
  ``out ← out − σ(lse_b − lse)·(out − out_b)``, ``lse ← lse − log σ(lse − lse_b)``
  (σ the logistic function; ``−log σ(x) = log(1 + e^{−x})``), equal to attention over the union.
- `anchor_steps` / `full_steps`: the steps where every partition is computed, as the reference
  sets them: warm-up 5, cool-down 5, anchor interval 5 (issue 18's reading of the reference
  code): anchors are the last two warm-up steps, then every interval-th step after the warm-up
  before the cool-down; for 50 steps 3, 4, 9, 14, …, 44, and 18 of 50 steps compute everything
  (warm-up 0–4, anchors 9–44, cool-down 45–49).
"""

from __future__ import annotations

import numpy as np

WARMUP, COOLDOWN, ANCHOR_INTERVAL = 5, 5, 5
TAU_MAX, CACHE_RATIO = 8, 0.5


def attention_state(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(softmax(s) v, logsumexp(s))`` with ``s = q kᵀ / sqrt(d)``, float64; q ``[M, d]``, k, v ``[L, d]``."""
    s = q.astype(np.float64) @ k.astype(np.float64).T / np.sqrt(q.shape[1])
    mx = s.max(axis=1, keepdims=True)
    e = np.exp(s - mx)
    z = e.sum(axis=1, keepdims=True)
    return (e / z) @ v.astype(np.float64), (mx + np.log(z))[:, 0]


def merge_states(out: np.ndarray, lse: np.ndarray, out_b: np.ndarray, lse_b: np.ndarray):
    """Merge partition b's state into (out, lse) (module docstring); out ``[M, d]``, lse ``[M]``."""
    sig = 1.0 / (1.0 + np.exp(-(lse_b - lse)))
    new_out = out - sig[:, None] * (out - out_b)
    new_lse = lse + np.log1p(np.exp(-(lse - lse_b)))  # lse − log σ(lse − lse_b)
    return new_out, new_lse


def anchor_steps(steps: int, warmup: int = WARMUP, cooldown: int = COOLDOWN,
                 interval: int = ANCHOR_INTERVAL) -> list[int]:
    """Anchor steps (module docstring). Raises ValueError when warm-up + cool-down exceed the steps."""
    if warmup < 2 or cooldown < 0 or interval < 1 or warmup + cooldown > steps:
        raise ValueError(f"need warmup >= 2, cooldown >= 0, interval >= 1, warmup + cooldown <= steps; got "
                         f"{warmup}, {cooldown}, {interval}, {steps}")
    return [warmup - 2, warmup - 1, *range(warmup - 1 + interval, steps - cooldown, interval)]


def full_steps(steps: int, warmup: int = WARMUP, cooldown: int = COOLDOWN, interval: int = ANCHOR_INTERVAL) -> list[int]:
    """Steps that compute every partition: warm-up, anchors, cool-down."""
    return sorted({*range(warmup), *anchor_steps(steps, warmup, cooldown, interval), *range(steps - cooldown, steps)})
