"""DiTango context parallelism as the reference implements it (thu-pacman/ChituDiffusion,
``chitu_diffusion/ditango/planner.py`` and ``runtime.py``; docs/decisions.md D48 lists what we
follow and where we differ).

Layout. P ranks split the sequence; ``U`` of them (``ulysses``, the reference's ``up``, default 1)
form one Ulysses group that all-to-alls Q, K and V (heads scattered, sequence gathered) before the
attention and the output after it; the ``G = P / U`` groups then pass K/V partitions on a ring, so
a rank attends with ``H / U`` heads for the ``U · M_r`` queries of its group against one group's
``U · M_r`` keys per ring position. Group g of a rank is the partition g positions along the ring
(g = 0: its own). Per rank ``M_r = ceil(F·H / P) · W`` tokens: whole rows of the latent grid (the
last shard padded), so the shard keeps a token grid for Kaleido's reuse (`shard_grid`).

Attention states. Each partition's state (out, lse) is computed alone and merged associatively:
``out ← out − σ(lse_b − lse)·(out − out_b)``, ``lse ← lse − log σ(lse − lse_b)`` (`merge_states`).

Planner (`plan_schedule`, the reference's state machine with its defaults): warm-up 5 and
cool-down 5 steps compute everything; the anchor list starts as the last two warm-up steps; at an
anchor every group is computed and, at the last layer, the planner forms per (layer l, group g)
``κ_{l,g} = κ_l · w_{l,g}`` with ``κ_l = ‖mean_d O_l,t − mean_d O_l,prev‖₂ / (t − prev)`` (the
attention output averaged over the head dimension, per token and head, against the previous
anchor's) and ``w_{l,g} = softmax_g((‖LSE_g‖₂ − max) / std)`` (LSE_g: the rank's queries against
partition g), both averaged over the ranks (an all-reduce of two ``[L, G]`` float32 matrices). The
first anchor has no previous output: no signal, so the next step becomes an anchor too. With a
signal the intervals are ``τ = round(κ^(−1/3) · mean(κ^(1/3)) / r)`` clamped to ``[1, τ_max = 8]``,
``r = max(1 − target, 1/τ_max)``, target = ``cache_ratio · T`` spread over the steps not forced
to full compute *among the anchors known at that moment* (so it grows anchor by anchor), and the
next anchor is ``anchor_interval = 5`` steps later unless that falls in the cool-down. For 50 steps
the anchors are 3, 4, 9, …, 44 and 18 steps compute everything. A selective step s computes group
g of layer l iff ``(s − last anchor) mod τ_{l,g} = 0`` (the local group too), reuses its cached
state otherwise, and skips the ring hops of reused groups: the K/V of the next computed group
comes in one jump of ``U·(skipped + 1)`` ranks. Plans need both guidance branches on the rank
(the reference's CFG group of 1: the positive branch's matrices are held and averaged with the
negative branch's, one plan for both); with one branch no plan is ever made and every step is full.

κ sources (`kappa`): ``"uniform"`` (κ_{l,g} = 1 at every anchor after the first: τ the same for
every group) or a captured trace (`kappa_from_trace`: the attention output and Q/K of every
self-attention ``pv`` op at the anchor steps).
"""

from __future__ import annotations

import math

import numpy as np

WARMUP, COOLDOWN, ANCHOR_INTERVAL = 5, 5, 5
TAU_MAX, CACHE_RATIO = 8, 0.5
CURVATURE_EPSILON, SOFTMAX_TEMPERATURE_MIN = 1e-8, 1e-6  # DiTangoPlanner's constants
TEXT_TOKENS = 512  # Wan2.1 shared_config.py text_len


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


def _check_steps(steps: int, warmup: int, cooldown: int, interval: int) -> None:
    if warmup < 2 or cooldown < 0 or interval < 1 or warmup + cooldown > steps:
        raise ValueError(f"need warmup >= 2, cooldown >= 0, interval >= 1, warmup + cooldown <= steps; got "
                         f"{warmup}, {cooldown}, {interval}, {steps}")


def target_reuse(steps: int, anchors, warmup: int = WARMUP, cooldown: int = COOLDOWN,
                 cache_ratio: float = CACHE_RATIO) -> float:
    """The reference's selective cache-ratio target with the anchors known so far:
    ``min(1, cache_ratio·T / max(1, T − |warm-up ∪ cool-down ∪ anchors|))``."""
    forced = {*range(warmup), *range(max(0, steps - cooldown), steps), *(a for a in anchors if 0 <= a < steps)}
    return max(0.0, min(1.0, min(float(steps), cache_ratio * steps) / max(1, steps - len(forced))))


def interval(kappa: np.ndarray, target: float, tau_max: int = TAU_MAX) -> np.ndarray:
    """Recompute interval per entry: ``τ = round(κ^(−1/3) · mean(κ^(1/3)) / r)`` clamped to
    ``[1, τ_max]``, ``r = max(1 − target, 1/τ_max)``, κ floored at 1e-8 (the reference's
    ``_compute_interval_plan``; the mean runs over every layer and group)."""
    k = np.maximum(np.asarray(kappa, dtype=np.float64), CURVATURE_EPSILON)
    r = max(1.0 - float(target), 1.0 / tau_max)
    raw = k ** (-1.0 / 3.0)
    tau = np.rint(raw * np.mean(1.0 / raw) / max(r, CURVATURE_EPSILON))
    return np.clip(tau, 1, tau_max).astype(int)


def plan_schedule(steps: int, layers: int, groups: int, kappa_at, cfg_branches: int = 2, warmup: int = WARMUP,
                  cooldown: int = COOLDOWN, anchor_interval: int = ANCHOR_INTERVAL, tau_max: int = TAU_MAX,
                  cache_ratio: float = CACHE_RATIO) -> list[dict]:
    """Per step ``{"index", "kind"}`` with kind ``warmup``/``cooldown``/``anchor``/``selective`` and
    ``compute``: bool ``[layers, groups]`` (which partitions are computed), plus at anchors that made
    a plan ``tau`` ``[layers, groups]`` and ``target``.

    ``kappa_at(step, prev_anchor)`` gives κ ``[layers, groups]`` at an anchor (None: no previous
    output, no signal). Raises ValueError on a bad step split.
    """
    _check_steps(steps, warmup, cooldown, anchor_interval)
    anchors = sorted({warmup - 2, warmup - 1})
    cool = max(0, steps - cooldown)
    out, tau, last, prev = [], None, -1, -1
    full = np.ones((layers, groups), dtype=bool)
    for s in range(steps):
        if s in anchors:
            row = {"index": s, "kind": "anchor", "compute": full}
            kap = kappa_at(s, prev) if cfg_branches == 2 else None
            prev = s
            if cfg_branches == 2:  # the reference plans only when both branches run on the rank
                last = s
                if kap is not None and bool(np.any(np.asarray(kap) > CURVATURE_EPSILON)):
                    target = target_reuse(steps, anchors, warmup, cooldown, cache_ratio)
                    tau = interval(kap, target, tau_max)
                    row.update(tau=tau, target=target)
                    if s + anchor_interval < cool:
                        anchors = sorted({*anchors, s + anchor_interval})
                else:
                    tau = None
                    anchors = sorted({*anchors, s + 1})
        elif s < warmup or s >= cool:
            row = {"index": s, "kind": "warmup" if s < warmup else "cooldown", "compute": full}
        else:
            comp = full if tau is None else ((max(1, s - last) % tau) == 0)
            row = {"index": s, "kind": "selective", "compute": comp}
        out.append(row)
    return out


def anchor_steps(steps: int, warmup: int = WARMUP, cooldown: int = COOLDOWN,
                 interval: int = ANCHOR_INTERVAL) -> list[int]:
    """The anchors `plan_schedule` reaches when every anchor after the first has a signal. Raises ValueError."""
    sched = plan_schedule(steps, 1, 1, lambda s, prev: None if prev < 0 else np.ones((1, 1)), 2, warmup, cooldown,
                          interval)
    return [r["index"] for r in sched if r["kind"] == "anchor"]


def full_steps(steps: int, warmup: int = WARMUP, cooldown: int = COOLDOWN, interval: int = ANCHOR_INTERVAL) -> list[int]:
    """Steps that compute every partition: warm-up, anchors, cool-down."""
    return sorted({*range(warmup), *anchor_steps(steps, warmup, cooldown, interval),
                   *range(max(0, steps - cooldown), steps)})


def hop_jumps(compute: np.ndarray) -> list[int]:
    """Ring jumps (in groups) of one layer's computed remote partitions: group g computed after k
    skipped remote groups is fetched in one jump of k + 1 (the reference's
    ``_generate_selective_comm_pattern``); ``compute`` bool ``[groups]``."""
    jumps, skip = [], 0
    for g in range(1, len(compute)):
        if compute[g]:
            jumps.append(skip + 1)
            skip = 0
        else:
            skip += 1
    return jumps


def shard_grid(grid: tuple[int, int, int], devices: int) -> tuple[tuple[int, int, int], int]:
    """``(shard grid, tokens M_r)`` of one rank: ``ceil(F·H / P)`` whole latent rows of W tokens; the
    grid is ``(rows / H, H, W)`` when the rows are whole frames, else ``(1, rows, W)``."""
    f, h, w = grid
    rows = -(-(f * h) // devices)
    g = (rows // h, h, w) if rows % h == 0 else (1, rows, w)
    return g, rows * w


def kappa_from_trace(path, steps: int, layers: int, groups: int, ulysses: int):
    """A ``kappa_at(step, prev)`` for `plan_schedule` from a captured exact trace (module docstring).

    The trace's self-attention ``pv`` ops hold, per head, the float attention output ``attn_out``
    ``[heads, M, d_h]`` and the int8 Q and K (``scores``). Its tokens are split into G groups of
    consecutive tokens; rank r (group i = r // U, Ulysses member u = r mod U) holds group i's
    queries and head slice u (heads split as evenly as rounding allows). Per rank: κ_l =
    ‖mean_d out_t − mean_d out_prev‖₂ / (t − prev) over its queries and heads; LSE_g of its queries
    against group (i + g) mod G's keys from the dequantised int8 Q and K; w = softmax((‖LSE_g‖₂ −
    max)/std); κ_{l,g} = mean over ranks of κ_l·w_{l,g}. Workload layer l takes trace block
    ``l · B_trace // layers`` (the capture may be a smaller model). Steps are read when first asked for.

    Raises:
        WorkloadError: not an exact trace with attention states, or a needed step missing (also
            later, from ``kappa_at``).
    """
    from algo.trace import TraceError, TraceReader
    from algo.workloads.format import WorkloadError

    try:
        with TraceReader(path, derive_p=False) as rd:
            kind, meta = rd.kind, list(rd.op_meta)
    except TraceError as err:
        raise WorkloadError(f"--kappa: {err}") from None
    if kind != "exact":
        raise WorkloadError(f"--kappa: {path} is a {kind} trace; κ needs an exact capture (Q, K and the "
                            "attention output of every self-attention pv op)")
    where = {(m["step"], m["block"]): i for i, m in enumerate(meta) if m["name"] == "pv"}
    blocks = sorted({b for _, b in where})
    if not blocks:
        raise WorkloadError(f"--kappa: {path} holds no self-attention pv ops")
    have = sorted({t for t, _ in where})
    cache: dict[int, list] = {}

    def per_step(s: int):
        if s not in cache:
            if any((s, b) not in where for b in blocks):
                raise WorkloadError(f"--kappa: {path} has no step {s} in every block (the anchors need it; it "
                                    f"holds steps {have}); capture with --steps covering the anchors of "
                                    f"--num-inference-steps {steps}")
            with TraceReader(path, derive_p=False) as rd:
                ops = rd.load_ops([where[(s, b)] for b in blocks])
            for b, op in zip(blocks, ops, strict=True):
                if op.attn_out is None or op.scores is None:
                    raise WorkloadError(f"--kappa: {path} step {s} block {b}: no attention states or Q/K")
            cache[s] = [_rank_stats(op, groups, ulysses) for op in ops]
        return cache[s]

    def kappa_at(step: int, prev: int):
        cur = per_step(step)
        if prev < 0:
            return None
        old = per_step(prev)
        mats = []
        for (o_t, w), (o_p, _) in zip(cur, old, strict=True):
            kl = np.array([np.linalg.norm(a - b) for a, b in zip(o_t, o_p, strict=True)]) / max(1, step - prev)
            mats.append((kl[:, None] * w).mean(axis=0))  # mean over ranks of κ_l·w_{l,g}
        return np.stack([mats[i * len(blocks) // layers] for i in range(layers)])

    return kappa_at


def _rank_stats(op, groups: int, ulysses: int):
    """Per rank: (mean over d_h of its output ``[heads_u, M_i]``, softmax weights ``[groups]``)."""
    q8, k8, qs, ks = op.scores
    heads, m, _ = op.attn_out.shape
    ranks = groups * ulysses
    if m < groups or heads < ulysses:
        from algo.workloads.format import WorkloadError

        raise WorkloadError(f"--kappa: the trace's {m} tokens and {heads} heads cannot be split over {groups} "
                            f"groups of {ulysses}")
    bounds = np.linspace(0, m, groups + 1).round().astype(int)
    hb = np.linspace(0, heads, ulysses + 1).round().astype(int)
    q = q8.astype(np.float32) * qs
    k = k8.astype(np.float32) * ks  # [heads, d_h, L]
    inv = 1.0 / math.sqrt(q.shape[2])
    outs, ws = [], []
    for r in range(ranks):
        i, u = divmod(r, ulysses)
        hs, qs_ = slice(hb[u], hb[u + 1]), slice(bounds[i], bounds[i + 1])
        outs.append(op.attn_out[hs, qs_].astype(np.float64).mean(axis=-1))
        norms = []
        for g in range(groups):
            j = (i + g) % groups
            s = np.einsum("hmd,hdl->hml", q[hs, qs_], k[hs, :, bounds[j]:bounds[j + 1]]) * inv
            mx = s.max(axis=-1, keepdims=True)
            lse = mx[..., 0] + np.log(np.exp(s - mx).sum(axis=-1))
            norms.append(float(np.linalg.norm(lse)))
        sc = np.array(norms)
        temp = max(float(sc.std()), SOFTMAX_TEMPERATURE_MIN)
        e = np.exp((sc - sc.max()) / temp)
        ws.append(e / e.sum())
    return outs, np.stack(ws)


def uniform_kappa(layers: int, groups: int):
    """The stand-in: κ = 1 for every (layer, group) at every anchor after the first."""
    return lambda step, prev: None if prev < 0 else np.ones((layers, groups))


def reuse_axis(grid: tuple[int, int, int]) -> str:
    """The reuse axis of a shard's channel groups: ``f`` (the previous frame) when the shard holds
    more than one frame, else ``h`` (the row above): a shard of rows within a frame has the previous
    frame's tokens on another rank, so temporal reuse has no neighbour there (docs/decisions.md D48)."""
    return "f" if grid[0] > 1 else "h"


def shard_groups(k: int, grid: tuple[int, int, int]) -> tuple:
    """Channel groups ``(k0, k1, axis, "block")`` of K = k on a shard (`reuse_axis`)."""
    from algo.reuse.golden import block_groups

    return tuple((g0, g1, ax, "block") for g0, g1, ax in block_groups(k, axis=reuse_axis(grid)))


def _linear_ops(s: int, m: int, d: int, ffn: int, heads: int, d_h: int, rep: int, grid) -> list:
    """One step's per-rank linear ops (every layer and branch: ``repeat = rep``) on m query rows."""
    from algo.workloads.format import WorkloadOp

    lin = [("qkv", 1, d, 3 * d), ("o_proj", 1, d, d), ("cross_q", 1, d, d), ("cross_qk", heads, d_h, TEXT_TOKENS),
           ("cross_pv", heads, TEXT_TOKENS, d_h), ("cross_o", 1, d, d), ("ffn1", 1, d, ffn), ("ffn2", 1, ffn, d)]
    return [WorkloadOp(step=s, name=n, batch=b, M=m, K=k, N=nn, block=0, repeat=rep, phase="linear",
                       x_signed=n != "cross_pv", grid=grid,
                       groups=shard_groups(k, grid))
            for n, b, k, nn in lin]


def generate_ditango(model: str = "wan2.1-t2v-14b", resolution: str = "720p", devices: int = 8,
                     num_inference_steps: int = 50, cfg_branches: int = 2, kappa: str = "uniform",
                     ulysses: int = 1):
    """DiTango over ``devices`` ranks (module docstring): the workload and plain context parallelism
    (the same layout, every step full) as its reference.

    Per rank and step: the linear ops on its ``M_r`` tokens (block 0, every layer and branch);
    per layer l (block l): with ``U > 1`` four all-to-alls over the U ranks, not overlapped: Q, K
    and V (three calls, as the reference makes them) and the output, ``M_r · d · 2`` bytes each (bf16); ``qk``/``pv`` of
    ``H/U`` heads, ``U·M_r`` queries against ``U·M_r`` keys once per computed partition, and one
    ``ring_p2p`` of that partition's K and V (``2 · U·M_r · (d/U) · 2`` bytes, bf16) per computed
    remote partition, at ``distance`` U·jump ranks, overlapping the layer's attention; a layer that
    computes nothing sends nothing. At a plan-making anchor: an all-reduce over the P ranks of the
    two ``[L, G]`` float32 matrices (``2 · L · G · 4`` bytes). Both branches run on every rank
    (``repeat`` 2, one plan). Cache per rank: every group's state per layer and branch, out in bf16
    (``U·M_r · H/U · d_h · 2``) and lse in float32 (``U·M_r · H/U · 4``).

    ``kappa``: ``"uniform"`` or the path of an exact capture (`kappa_from_trace`).

    Raises:
        WorkloadError: bad model, resolution, devices, ulysses, steps or kappa.
    """
    from algo.capture import resolution_grid
    from algo.models import CaptureError, get_spec
    from algo.workloads.format import CommEvent, Workload, WorkloadError, WorkloadOp

    p, u = int(devices), int(ulysses)
    if p < 1 or u < 1 or p % u:
        raise WorkloadError(f"devices must be >= 1 and a multiple of ulysses >= 1, got devices {devices}, "
                            f"ulysses {ulysses}")
    if cfg_branches not in (1, 2):
        raise WorkloadError(f"cfg_branches must be 1 or 2, got {cfg_branches}")
    try:
        spec = get_spec(model, "full")
        grid = tuple(resolution_grid(resolution, spec.sizes["full"]["patch_size"]))
    except (CaptureError, TypeError) as err:
        raise WorkloadError(str(err)) from None
    cfg = spec.sizes["full"]
    heads, d_h = int(cfg["num_attention_heads"]), int(cfg["attention_head_dim"])
    d, ffn, layers = heads * d_h, int(cfg["ffn_dim"]), int(cfg["num_layers"])
    if heads % u:
        raise WorkloadError(f"ulysses {u} does not divide the model's {heads} heads")
    g_num = p // u
    sgrid, m_r = shard_grid(grid, p)
    if m_r * p - math.prod(grid) >= m_r:
        raise WorkloadError(f"{p} ranks leave a rank without tokens ({grid[0] * grid[1]} latent rows)")
    qgrid = sgrid if u == 1 else (1, sgrid[0] * sgrid[1] * u, sgrid[2])
    m_q, h_r, b = m_r * u, heads // u, int(cfg_branches)
    try:
        kappa_at = (uniform_kappa(layers, g_num) if kappa == "uniform"
                    else kappa_from_trace(kappa, num_inference_steps, layers, g_num, u))
        sched = plan_schedule(num_inference_steps, layers, g_num, kappa_at, b)
    except ValueError as err:
        raise WorkloadError(str(err)) from None
    hop = 2.0 * m_q * h_r * d_h * 2

    def step_records(s: int, comp: np.ndarray, anchor_plan: bool):
        ops = _linear_ops(s, m_r, d, ffn, heads, d_h, layers * b, sgrid)
        comms = []
        for layer in range(layers):
            c = int(comp[layer].sum())
            if u > 1:
                comms.append(CommEvent(step=s, pattern="all_to_all", bytes=1.0 * m_r * d * 2, group=u, block=layer,
                                       repeat=4 * b))  # Q, K, V and the output, one call each as the reference
            if c:
                ops += [WorkloadOp(step=s, name="qk", batch=h_r, M=m_q, K=d_h, N=m_q, block=layer, repeat=b * c,
                                   phase="attention", grid=qgrid, groups=shard_groups(d_h, qgrid)),
                        WorkloadOp(step=s, name="pv", batch=h_r, M=m_q, K=m_q, N=d_h, block=layer, repeat=b * c,
                                   x_signed=False, phase="attention", grid=qgrid, groups=shard_groups(m_q, qgrid))]
            for jump, n in sorted(_count(hop_jumps(comp[layer])).items()):
                if g_num > 1:
                    comms.append(CommEvent(step=s, pattern="ring_p2p", bytes=hop, group=p, block=layer,
                                           repeat=b * n, overlap="attention", distance=u * jump))
        if anchor_plan and p > 1:
            comms.append(CommEvent(step=s, pattern="all_reduce", bytes=2.0 * layers * g_num * 4, group=p,
                                   block=None, repeat=1))
        return ops, comms

    ops, comms, ref_ops, ref_comms, steps_meta = [], [], [], [], []
    full = np.ones((layers, g_num), dtype=bool)
    for row in sched:
        s, comp = row["index"], row["compute"]
        o, c = step_records(s, comp, "tau" in row)
        ops += o
        comms += c
        o, c = step_records(s, full, False)
        ref_ops += o
        ref_comms += c
        hops = sum(len(hop_jumps(comp[i])) for i in range(layers))
        meta = {"index": s, "kind": row["kind"], "full": bool(comp.all()) and row["kind"] != "selective",
                "anchor": row["kind"] == "anchor", "partitions_computed": int(comp.sum()),
                "partitions": layers * g_num, "ring_hop_bytes": hop * hops * b,
                "ring_cp_hop_bytes": hop * (g_num - 1) * layers * b}
        if "tau" in row:
            meta.update(tau_mean=float(row["tau"].mean()), tau_min=int(row["tau"].min()),
                        tau_max=int(row["tau"].max()), target_reuse=row["target"])
        steps_meta.append(meta)
    cache = layers * b * g_num * m_q * h_r * (d_h * 2 + 4)
    anchors = [r["index"] for r in sched if r["kind"] == "anchor"]
    n_full = sum(bool(r["compute"].all()) for r in sched)
    computed = sum(int(r["compute"].sum()) for r in sched) / (len(sched) * layers * g_num)
    notes = (f"DiTango over {p} ranks ({g_num} ring groups of {u} Ulysses ranks), {m_r} tokens per rank "
             f"(whole latent rows, shard grid {'x'.join(map(str, sgrid))}); anchors {anchors}; {n_full} of "
             f"{num_inference_steps} steps compute every partition; {computed:.1%} of partition-steps computed; "
             f"kappa {'uniform stand-in' if kappa == 'uniform' else 'from ' + str(kappa)}; "
             + ("both CFG branches per rank, one plan" if b == 2 else "one branch: no plan, every step full")
             + f"; attention-state cache per rank {cache / 2**30:.2f} GiB")
    return Workload(generator="ditango", model=spec.name, size="full", resolution=str(resolution), grid=grid,
                    ops=ops, devices=p, steps=steps_meta, comms=comms,
                    params={"devices": p, "ulysses": u, "groups": g_num, "num_inference_steps": num_inference_steps,
                            "warmup": WARMUP, "cooldown": COOLDOWN, "anchor_interval": ANCHOR_INTERVAL,
                            "tau_max": TAU_MAX, "cache_ratio": CACHE_RATIO, "kappa": str(kappa),
                            "cfg_branches": b, "tokens_per_rank": m_r, "cache_bytes_per_rank": cache,
                            "anchors": anchors, "partition_steps_computed": computed},
                    sources={"planner": "thu-pacman/ChituDiffusion chitu_diffusion/ditango/planner.py defaults "
                                        "(DiTangoPlanner: warm-up 5, cool-down 5, anchor interval 5, tau_max 8, "
                                        "cache ratio 0.5, curvature power 1/3)",
                             "ring": "chitu_diffusion/ditango/runtime.py (_generate_selective_comm_pattern)",
                             "text_tokens": "Wan2.1 shared_config.py text_len = 512"},
                    notes=notes, reference={"label": f"plain context parallelism ({g_num}-group ring"
                                            + (f", Ulysses {u}" if u > 1 else "") + ", every step full)",
                                            "ops": ref_ops, "comms": ref_comms})


def _count(xs) -> dict:
    out: dict = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out
