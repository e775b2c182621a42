"""Causal-RoPE sequence parallelism for Self-Forcing (guandeh17/Self-Forcing) on Wan2.1-T2V-1.3B.

Facts (checked in the reference code, docs/decisions.md D48): 480×832, 81 frames → 21 latent frames of 1,560
tokens (30×52); 7 autoregressive blocks of 3 latent frames (4,680 query tokens each); per block
4 denoising forwards plus one forward at t = 0 on the block's clean prediction that rewrites its
KV-cache slots: 35 forwards a video, no classifier-free guidance. The configured timesteps 1000,
750, 500, 250 are warped through the shift-5 schedule ``t' = 1000·5u/(1 + 4u)``, u = t/1000:
1000, 937.5, 833.3, 625 (`warped_timesteps`). The KV cache is allocated at 32,760 tokens per
layer from the start; block b attends over the first ``4,680·(b+1)`` (bidirectional inside the
block, no window, no sink; `kv_tokens`). The 512 text tokens' cross-attention K/V are computed
once per video (``cross_kv``, before block 0). RoPE uses the global time index t_global = t_local
+ s, computed per rank: no communication.

Sequence parallel over P ranks (`generate_causal_sp`): weights replicated; each rank holds
``⌈90/P⌉`` whole latent rows of 52 tokens of the block's 3 × 30 rows (the last rank padded) for
the linear ops and cross-attention, so its ops keep a token grid ``(1, rows, 52)`` for Kaleido's
reuse (along ``h``: the previous frame is on another rank; `algo.workloads.ditango.reuse_axis`);
the attention ops' query grid is the whole block, ``(3, 30, 52)`` (reuse along ``f``). Self-attention
is Ulysses-style: one fused all-to-all of Q, K and V (sequence gathered, heads scattered; bf16,
``3·M_r·d·2`` bytes per rank) instead of three all-gathers, then each rank attends for its heads
over all the block's queries and the cache, and an all-to-all of the output (``M_r·d·2`` bytes)
returns the rank's tokens for the output projection (the return trip Ulysses needs; the reference
may fuse it differently). Heads do not divide evenly: 12 heads over 8 ranks give ranks 0–3 two
heads and ranks 4–7 one (``12 // P + (r < 12 % P)``), so the step waits for the two-head ranks —
the workload holds rank-specific attention ops and the simulator takes the slowest rank.
The reference is the same video on one device. KV cache per rank: its heads' K and V for all
32,760 slots in bf16, every layer (``params.kv_cache_bytes_per_rank``; the slowest rank's).
Self-Forcing's repository has no sequence-parallel code: this layout is ours (docs/decisions.md D48).
"""

from __future__ import annotations

TOKENS_PER_FRAME = 1560
FRAMES_PER_BLOCK = 3
BLOCKS = 7
CONFIGURED_TIMESTEPS = (1000.0, 750.0, 500.0, 250.0)
SHIFT = 5.0
KV_CACHE_TOKENS = 32760
TEXT_TOKENS = 512


def warped_timesteps(ts=CONFIGURED_TIMESTEPS, shift: float = SHIFT) -> list[float]:
    """``1000·shift·u/(1 + (shift−1)u)`` for u = t/1000."""
    return [1000.0 * shift * (t / 1000.0) / (1.0 + (shift - 1.0) * t / 1000.0) for t in ts]


def kv_tokens(block: int) -> int:
    """Keys block b attends over: its own and every earlier block's tokens."""
    return TOKENS_PER_FRAME * FRAMES_PER_BLOCK * (block + 1)


def heads_per_rank(heads: int, devices: int) -> list[int]:
    """Heads of each rank when ``heads`` are scattered over ``devices`` ranks as evenly as possible."""
    return [heads // devices + (r < heads % devices) for r in range(devices)]


def generate_causal_sp(devices: int = 8, model: str = "wan2.1-t2v-1.3b"):
    """The Self-Forcing video on ``devices`` ranks (module docstring). Raises WorkloadError."""
    from algo.models import CaptureError, get_spec
    from algo.workloads.format import CommEvent, Workload, WorkloadError, WorkloadOp

    p = int(devices)
    if p < 1:
        raise WorkloadError(f"devices must be >= 1, got {devices}")
    try:
        cfg = get_spec(model, "full").sizes["full"]
    except CaptureError as err:
        raise WorkloadError(str(err)) from None
    heads, d_h = int(cfg["num_attention_heads"]), int(cfg["attention_head_dim"])
    if p > heads:
        raise WorkloadError(f"{p} ranks > {heads} heads: a rank would hold no head")
    d, ffn, layers = heads * d_h, int(cfg["ffn_dim"]), int(cfg["num_layers"])
    from algo.workloads.ditango import shard_groups

    q_tok = TOKENS_PER_FRAME * FRAMES_PER_BLOCK
    width = 52  # 832 px / 8 (VAE) / 2 (patch)
    rows = -(-(q_tok // width) // p)
    m_r = rows * width
    sgrid, qgrid = (1, rows, width), (FRAMES_PER_BLOCK, TOKENS_PER_FRAME // width, width)
    hpr = heads_per_rank(heads, p)
    ts = warped_timesteps()
    ops, comms, ref, steps = [], [], [], []

    def lin(s, m, grid):
        return [WorkloadOp(step=s, name=n, batch=b, M=m, K=k, N=nn, block=0, repeat=layers, phase="linear",
                           x_signed=n != "cross_pv", grid=grid,
                           groups=shard_groups(k, grid))
                for n, b, k, nn in (("qkv", 1, d, 3 * d), ("o_proj", 1, d, d), ("cross_q", 1, d, d),
                                    ("cross_qk", heads, d_h, TEXT_TOKENS), ("cross_pv", heads, TEXT_TOKENS, d_h),
                                    ("cross_o", 1, d, d), ("ffn1", 1, d, ffn), ("ffn2", 1, ffn, d))]

    def attn(s, h, keys, rank=None):
        return [WorkloadOp(step=s, name="qk", batch=h, M=q_tok, K=d_h, N=keys, block=0, rank=rank, repeat=layers,
                           phase="attention", grid=qgrid),
                WorkloadOp(step=s, name="pv", batch=h, M=q_tok, K=keys, N=d_h, block=0, rank=rank, repeat=layers,
                           x_signed=False, phase="attention", grid=qgrid)]

    s = 0
    for b in range(BLOCKS):
        keys = kv_tokens(b)
        for j, t in enumerate([*ts, 0.0]):
            kind = "denoise" if j < len(ts) else "kv_rewrite"
            if s == 0:  # text K/V once per video, every layer
                for dst in (ops, ref):
                    dst.append(WorkloadOp(step=0, name="cross_kv", batch=1, M=TEXT_TOKENS, K=d, N=2 * d, block=0,
                                          repeat=layers, phase="linear"))
            ops += lin(s, m_r, sgrid)
            for r in range(p):
                ops += attn(s, hpr[r], keys, r)
            if p > 1:
                comms += [CommEvent(step=s, pattern="all_to_all", bytes=3.0 * m_r * d * 2, group=p, block=0,
                                    repeat=layers, overlap=None),
                          CommEvent(step=s, pattern="all_to_all", bytes=1.0 * m_r * d * 2, group=p, block=0,
                                    repeat=layers, overlap=None)]
            ref += lin(s, q_tok, qgrid) + attn(s, heads, keys)
            steps.append({"index": s, "block": b, "kind": kind, "timestep": t, "kv_tokens": keys,
                          "kv_cache_allocated": KV_CACHE_TOKENS})
            s += 1
    notes = (f"Self-Forcing causal video on {p} ranks: {BLOCKS} blocks x (4 denoising + 1 KV-rewrite) forwards, "
             f"timesteps {[round(v, 1) for v in ts]}, no CFG; {m_r} tokens per rank; heads per rank {hpr}"
             + (" (uneven: the step waits for the ranks with more heads)" if len(set(hpr)) > 1 else "")
             + "; fused QKV all-to-all + output all-to-all per attention, not overlapped; time to first frame = "
               "block 0's 4 denoising forwards (VAE decode not modelled)")
    return Workload(generator="causal-sp", model=model, size="full", resolution="832x480x81",
                    grid=(21, 30, 52), ops=ops, devices=p, steps=steps, comms=comms,
                    params={"devices": p, "heads_per_rank": hpr, "tokens_per_rank": m_r, "timesteps": ts,
                            "kv_cache_bytes_per_rank": layers * 2 * KV_CACHE_TOKENS * max(hpr) * d_h * 2,
                            "blocks": BLOCKS, "frames_per_block": FRAMES_PER_BLOCK, "shift": SHIFT,
                            "kv_cache_tokens": KV_CACHE_TOKENS},
                    sources={"schedule": "guandeh17/Self-Forcing pipeline/causal_inference.py, configs/self_forcing_dmd.yaml, "
                                         "utils/scheduler.py (docs/decisions.md D48)",
                             "text_tokens": "Wan2.1 shared_config.py text_len = 512"},
                    notes=notes, reference={"label": "the same video on one device", "ops": ref, "comms": []})


def time_to_first_frame_us(results: dict) -> float:
    """Sum of block 0's denoising-step times in a `sim.workload.simulate` result."""
    return sum(r["time_us"] for r in results["per_step"] if r.get("block") == 0 and r.get("kind") == "denoise")



