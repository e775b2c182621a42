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


def interval(kappa: np.ndarray, target_reuse: float, tau_max: int = TAU_MAX) -> np.ndarray:
    """Recompute interval per group: ``τ = round(κ^(−1/3) · mean(κ^(1/3)) / r)`` clamped to
    ``[1, τ_max]``, ``r = max(1 − target_reuse, 1/τ_max)`` (issue 18's reading of the reference)."""
    k = np.asarray(kappa, dtype=np.float64)
    r = max(1.0 - float(target_reuse), 1.0 / tau_max)
    c = np.cbrt(k)
    tau = np.rint((1.0 / c) * c.mean() / r)
    return np.clip(tau, 1, tau_max).astype(int)


def target_reuse(steps: int, cache_ratio: float = CACHE_RATIO, **kw) -> float:
    """``cache_ratio · T`` reused group-steps spread over the steps not forced to full compute."""
    free = steps - len(full_steps(steps, **kw))
    return min(1.0, cache_ratio * steps / free) if free > 0 else 0.0


def generate_ditango(model: str = "wan2.1-t2v-14b", resolution: str = "720p", devices: int = 8,
                     num_inference_steps: int = 50, cfg_branches: int = 2, kappa: str = "uniform"):
    """Ring context parallelism over ``devices`` ranks with DiTango's anchors (module docstring).

    Per rank and step: every block's linear ops on its ``ceil(tokens/P)`` query tokens (the last
    shard padded), attention (``qk``, ``pv``) once per K/V partition computed, and one ``ring_p2p``
    hop of a partition's K and V (bf16, ``2 · M_r · d · 2`` bytes) for every remote partition
    computed, overlapping the attention. Full steps compute all P partitions. Other steps recompute
    a partition g when ``(s − last anchor) mod τ_g = 0`` (`interval`), else reuse its cached state and
    skip its hop; the rank's own partition is always computed. ``kappa="uniform"``: every group has
    the same κ (a stand-in: the captured-κ path, κ_l = ‖mean O_l,t − mean O_l,prev‖ / steps and
    softmax importance of ‖LSE_g‖, is not written yet), so τ is the same for all groups. Plans need
    both guidance branches (``cfg_branches = 2``); with 1 every step is full. The reference is plain
    ring context parallelism (every step full).

    Raises:
        WorkloadError: bad model, resolution, devices or kappa.
    """
    import math

    from algo.capture import resolution_grid
    from algo.models import CaptureError, get_spec
    from algo.workloads.format import CommEvent, Workload, WorkloadError, WorkloadOp

    if kappa != "uniform":
        raise WorkloadError("kappa must be 'uniform' (captured κ is not implemented yet)")
    if int(devices) < 1:
        raise WorkloadError(f"devices must be >= 1, got {devices}")
    try:
        spec = get_spec(model, "full")
        grid = resolution_grid(resolution, spec.sizes["full"]["patch_size"])
    except (CaptureError, TypeError) as err:
        raise WorkloadError(str(err)) from None
    cfg = spec.sizes["full"]
    p, tokens = int(devices), math.prod(grid)
    m_r = -(-tokens // p)
    heads, d_h = int(cfg["num_attention_heads"]), int(cfg["attention_head_dim"])
    d, ffn, layers = heads * d_h, int(cfg["ffn_dim"]), int(cfg["num_layers"])
    rep = layers * int(cfg_branches)
    full = set(full_steps(num_inference_steps)) if cfg_branches == 2 else set(range(num_inference_steps))
    anchors = anchor_steps(num_inference_steps)
    tau = int(interval(np.ones(p), target_reuse(num_inference_steps))[0])
    hop = 2.0 * m_r * d * 2

    def step_ops(s: int, parts: int) -> tuple[list, list]:
        lin = [("qkv", 1, d, 3 * d), ("o_proj", 1, d, d), ("cross_q", 1, d, d), ("cross_qk", heads, d_h, 512),
               ("cross_pv", heads, 512, d_h), ("cross_o", 1, d, d), ("ffn1", 1, d, ffn), ("ffn2", 1, ffn, d)]
        ops = [WorkloadOp(step=s, name=n, batch=b, M=m_r, K=k, N=nn, block=0, repeat=rep, phase="linear")
               for n, b, k, nn in lin]
        ops += [WorkloadOp(step=s, name="qk", batch=heads, M=m_r, K=d_h, N=m_r, block=0, repeat=rep * parts,
                           phase="attention"),
                WorkloadOp(step=s, name="pv", batch=heads, M=m_r, K=m_r, N=d_h, block=0, repeat=rep * parts,
                           x_signed=False, phase="attention")]
        comms = [CommEvent(step=s, pattern="ring_p2p", bytes=hop, group=p, block=0, repeat=rep * (parts - 1),
                           overlap="attention")] if parts > 1 and p > 1 else []
        return ops, comms

    ops, comms, ref_ops, ref_comms, steps_meta = [], [], [], [], []
    last = None
    for s in range(num_inference_steps):
        if s in anchors:
            last = s
        recompute = s in full or last is None or (s - last) % tau == 0
        parts = p if recompute else 1
        o, c = step_ops(s, parts)
        ops += o
        comms += c
        o, c = step_ops(s, p)
        ref_ops += o
        ref_comms += c
        steps_meta.append({"index": s, "full": s in full, "anchor": s in anchors, "partitions_computed": parts,
                           "hop_bytes_per_layer": hop * (parts - 1), "ring_cp_hop_bytes_per_layer": hop * (p - 1)})
    cache = layers * int(cfg_branches) * (p - 1) * heads * m_r * (d_h * 2 + 4)
    notes = (f"DiTango ring context parallelism over {p} ranks, {m_r} query tokens per rank (ceil of {tokens}/{p}); "
             f"anchors {anchors}; {len(full)} of {num_inference_steps} steps full; kappa uniform stand-in (tau = {tau} "
             "for every group), not the captured-kappa plan; K/V hops in bf16; attention-state cache per rank "
             f"{cache / 2**30:.2f} GiB (bf16 out + fp32 lse per cached partition, both branches)")
    return Workload(generator="ditango", model=spec.name, size="full", resolution=str(resolution), grid=tuple(grid),
                    ops=ops, devices=p, steps=steps_meta, comms=comms,
                    params={"devices": p, "num_inference_steps": num_inference_steps, "warmup": WARMUP,
                            "cooldown": COOLDOWN, "anchor_interval": ANCHOR_INTERVAL, "tau_max": TAU_MAX,
                            "cache_ratio": CACHE_RATIO, "tau": tau, "kappa": kappa, "cfg_branches": cfg_branches,
                            "cache_bytes_per_rank": cache},
                    sources={"anchors": "thu-pacman/ChituDiffusion chitu_diffusion/ditango (issue 18's reading)",
                             "text_tokens": "Wan2.1 shared_config.py text_len = 512"},
                    notes=notes, reference={"label": "plain ring context parallelism (every step full)",
                                            "ops": ref_ops, "comms": ref_comms})
