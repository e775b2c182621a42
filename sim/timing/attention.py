"""Fused attention: ``qk -> softmax -> pv`` per query tile on chip, P never in DRAM (docs/decisions.md D41).

When a config has a score buffer that holds one query tile's integer scores and Kaleido's P_eff state
(`fits_score_buffer`: 3 score bytes + 1 P_eff byte per (query, key), the P_eff byte in its own buffer where the
config has one, docs/decisions.md D58) and a trace holds both ops of an attention pair (`sim.cost.actions.FUSED_PAIRS`: ``qk``
and ``pv``, ``cross_qk`` and ``cross_pv``) in the same (step, block), the pair runs fused, for the
dense baseline and for Kaleido alike (Kaleido's P_eff state is 1 byte per score). Per query tile (R query rows; Kaleido: the tiling of ``qk``,
whose ``w``-axis RoPE group makes it ``floor(R / W) * W`` whole image rows, and pv follows it, in
raster position order, because both ops must see the same query rows):

1. the array runs the tile's ``qk`` (every key column block); the vector unit takes each drained
   integer score (running row max: 1 integer compare per score, on a lane's adder) and stores it
   exactly, in `SCORE_BYTES` bytes, in the score buffer (no requantise);
2. with the row max known, the vector unit's exp pass makes P = T[rowmax - S] key by key (the
   int8-score rule of `algo.reuse.softmax`, D34: a table read, no exp) and its row sums: `EXP_ADDS`
   = 3 integer adds per score (subtract, clamp, row sum; `sim.cost.actions.fused_vector_counts`,
   docs/decisions.md D52); Kaleido's similarity unit decides pv's
   (query, key group) codes on each P group as it is made (its neighbour state P_eff, the previous
   frame's P of the same positions, in the P_eff buffer, or in the score buffer on a config without one); the
   array runs the tile's ``pv`` on P.

So P (and S) never reach DRAM, the int8 P semantics are those of the unfused trace (the row max
over all keys is known before any P value is made: ``round(255 exp(c (S - rowmax S)))`` from the
exact integer scores, D34), and the ``pv`` decisions are the trace's. Timing per pair, summed over the heads (op
aggregates: each op's work is taken as spread evenly over its query tiles, so a phase's time is
the longest of its units' totals; an optimistic bound where tiles differ):

- phase 1 = ``max(A_qk, Vmax + Vnorm + Vrope_Q, S_qk)``: the qk array time against the vector
  unit's max pass, the previous tile's output normalisation (pv's post work) and Q's RoPE, and the
  similarity unit's pass over Q (Kaleido);
- phase 2 = ``max(A_pv, Vexp, S_pv) + exposed H2``: the pv array time against the exp pass and the
  similarity unit's pass over P (Kaleido: ``heads x M x keys / similarity_lanes``); each tile's pv
  waits for its first P group to be made and decided, ``H2 = V(3 R g, 0) + ceil(R g /
  similarity_lanes)`` with g the first group's keys (dense: one key column, ``V(3 R, 0)``). The array
  does not idle through it (docs/decisions.md D75): it starts the next tile's qk, key column block by
  column block, whose scores overwrite only keys whose P the vector unit has already made -- it makes
  ``lanes / (3 R)`` keys of P per cycle from the start of H2, and qk writes ``keys / A_qk-tile`` --, stops
  for pv when the first group is decided, and finishes that qk after pv. So each H2 but the last is
  hidden up to one tile's qk time (``max(0, H2 - A_qk / tiles)`` stays exposed), the first group's exp
  and decisions move from phase 2's unit loads to phase 1's, and the last tile's H2 is exposed whole. Where
  P is made slower than qk writes scores, no H2 is overlapped (every tile's whole H2 exposed, as before);
- head: K's RoPE (all keys, before the first qk) and the first Q tile's, the first tile's Q decisions
  (Kaleido), the first DRAM fold (one Q tile and one key column block); tail: the last output
  tile's normalisation and its write;
- DRAM (`sim.cost.actions.fused_dram`: Q and K, V once per head when both fit the weight SRAM, O once)
  overlaps both phases; its excess is a stall.

Stalls by cause go to the op whose phase they fall in: head and phase-1 excess to ``qk``, phase-2
excess, H2, the tail and the DRAM excess to ``pv``, so that each op's ``total_cycles = cycles +
stalls`` and the pair's sum is the pair's time.
"""

from __future__ import annotations

from hw.config import AcceleratorConfig
from sim.cost.actions import FUSED_INT_ADDS_PER_SCORE, FUSED_PAIRS, vector_work
from sim.results import OpActions, OpMemory, OpTiming
from sim.timing.dispatch import position_block
from sim.timing.memory import _vcycles, dram_cycles, similarity_lanes, vector_lanes

#: Bytes per score in the score buffer: the exact integer score S = Q Kt of int8 operands, |S| <= d_h x 2^14,
#: so 24 bits hold it for d_h <= 512 (P = T[rowmax - S] needs S exactly, docs/decisions.md D34).
SCORE_BYTES = 3
#: Integer adds per score of the exp pass on a vector lane (one adder per lane, `sim.timing.memory`):
#: ``d = rowmax - S``, the table clamp and the row sum; the table read rides along
#: (`sim.cost.actions.fused_vector_counts`: the max pass is the remaining one).
EXP_ADDS = FUSED_INT_ADDS_PER_SCORE - 1
#: Bytes per (query, key) of Kaleido's P_eff neighbour state (the previous frame's uint8 P of the same positions).
P_EFF_BYTES = 1


def fits_score_buffer(cfg: AcceleratorConfig, keys: int) -> bool:
    """The score buffer holds one query tile's integer scores and the P_eff state its own buffer:
    ``R x keys x SCORE_BYTES <= score_sram_kib x 1024`` and ``R x keys x P_EFF_BYTES <= peff_sram_kib x 1024``;
    without a P_eff buffer (``peff_sram_kib = 0``) both in the score buffer, ``R x keys x (SCORE_BYTES +
    P_EFF_BYTES) <= score_sram_kib x 1024`` (docs/decisions.md D58)."""
    rk = cfg.array_rows * keys
    if cfg.peff_sram_kib:
        return rk * SCORE_BYTES <= cfg.score_sram_kib * 1024 and rk * P_EFF_BYTES <= cfg.peff_sram_kib * 1024
    return rk * (SCORE_BYTES + P_EFF_BYTES) <= cfg.score_sram_kib * 1024


def fused_pairs(ops, cfg: AcceleratorConfig) -> dict[int, int]:
    """Indices ``{score_op: p_op}`` of the attention pairs of a trace's ops that run fused (module docstring):
    both ops in the same (step, block) and the keys fit the score buffer."""
    where: dict[tuple[int, int, str], int] = {}
    for i, op in enumerate(ops):
        where.setdefault((op.step, op.block, op.name), i)
    out = {}
    for (step, block, name), i in where.items():
        j = where.get((step, block, FUSED_PAIRS.get(name, "")))
        if j is not None and fits_score_buffer(cfg, ops[i].N):
            out[i] = j
    return out


def _phase_split(a: int, parts: dict[str, int]) -> dict[str, int]:
    """Excess of the longest unit over the array time ``a``, charged to it (first key wins a tie)."""
    out = dict.fromkeys(parts, 0)
    if parts:
        k = max(parts, key=lambda n: (parts[n], -list(parts).index(n)))
        out[k] = max(0, parts[k] - a)
    return out


def fused_pair_timing(qk: dict, pv: dict, cfg: AcceleratorConfig, grid, qk_groups, pv_groups,
                      kaleido: bool) -> tuple[dict, dict]:
    """Stalls of one fused pair (module docstring rules) for Kaleido (``kaleido``) or the dense baseline.

    Args:
        qk, pv: the ops' timings (`sim.results.OpTiming.json`) with ``actions``/``dense_actions``
            (`sim.results.OpActions`): ``batch``, ``M``, ``K``, ``N``, ``cycles``/``dense_cycles`` and DRAM bytes.
        qk_groups, pv_groups: ``(k0, k1, axis)`` channel groups (the tiling and pv's first group).

    Returns:
        Per op ``{"stall_cycles": {"dram", "vector", "similarity"}, "total_cycles", "dram_cycles",
        "vector_cycles", "similarity_cycles", "double_buffered"}`` (as `sim.timing.memory.op_memory_timing`).
    """
    R = cfg.array_rows  # noqa: N806
    heads, M, dh, keys = qk["batch"], qk["M"], qk["K"], qk["N"]  # noqa: N806
    pre = "" if kaleido else "dense_"
    # the array's time, with the compact organisation's combine stall (sim.timing.compact) inside it
    a_qk, a_pv = (o[f"{pre}cycles"] + o[f"{pre}stall_cycles"].get("combine", 0) for o in (qk, pv))
    lanes, slanes = vector_lanes(cfg), similarity_lanes(cfg)
    scores = heads * M * keys
    rope_a, rope_m, _, _ = vector_work(qk["name"], M, dh, keys)  # RoPE of Q and K (0 for cross_qk)
    _, _, norm_a, norm_m = vector_work(pv["name"], M, keys, dh)
    rq_a, rq_m = (M * dh, 2 * M * dh) if rope_a else (0, 0)  # Q's share of the RoPE work
    rk_a, rk_m = rope_a - rq_a, rope_m - rq_m
    if kaleido:
        # lockstep: qk's whole-image-row tiles (row link, D4); compact: R positions (no row link)
        rows = position_block(grid, qk_groups, R) if cfg.organisation == "lockstep" else R
        npb = -(-(grid[1] * grid[2]) // rows)
        tiles = npb * grid[0]
    else:
        rows = min(R, M)
        tiles = -(-M // R)
    r0 = min(rows, M)
    vh = _vcycles(heads * (rk_a + rq_a * r0 / M), heads * (rk_m + rq_m * r0 / M), lanes)
    v_rope_rest = _vcycles(heads * rq_a * (1 - r0 / M), heads * rq_m * (1 - r0 / M), lanes)
    vt = _vcycles(norm_a * r0 / M, norm_m * r0 / M, lanes)
    v_norm = _vcycles(heads * norm_a, heads * norm_m, lanes) - vt
    v_max = _vcycles(scores, 0, lanes)  # running row max: 1 integer compare per score
    v_exp = _vcycles(EXP_ADDS * scores, 0, lanes)
    g0 = (pv_groups[0][1] - pv_groups[0][0]) if kaleido else 1
    h2_v = _vcycles(EXP_ADDS * r0 * g0, 0, lanes)
    h2_s = _vcycles(r0 * g0, 0, slanes) if kaleido else 0
    s_qk = _vcycles(heads * M * dh, 0, slanes) if kaleido else 0
    sh = _vcycles(r0 * dh, 0, slanes) if kaleido else 0
    s_pv = _vcycles(scores, 0, slanes) if kaleido else 0
    n_t = heads * tiles
    # H2 overlapped with the next tile's qk (module docstring) when the vector unit makes P faster than qk writes
    # the scores it frees: lanes / (EXP_ADDS R) keys per cycle against keys per qk tile-time
    ahead = lanes * a_qk >= EXP_ADDS * r0 * keys * n_t
    hidden = n_t - 1 if ahead else 0  # every tile's H2 but the last one's
    t_qk = a_qk / n_t  # one tile's qk on the array
    e_v = max(0.0, h2_v - t_qk) if ahead else h2_v  # what the next tile's qk does not cover, per hidden H2
    e_s = (max(0.0, h2_v + h2_s - t_qk) - e_v) if ahead else h2_s
    p1_parts = {"vector": v_max + v_norm + v_rope_rest + hidden * h2_v,
                "similarity": max(0, s_qk - sh) + hidden * h2_s}
    p1x = _phase_split(a_qk, p1_parts)
    p1 = a_qk + sum(p1x.values())
    p2x = _phase_split(a_pv, {"vector": v_exp - hidden * h2_v, "similarity": s_pv - hidden * h2_s})
    h2_vec = hidden * e_v + (n_t - hidden) * h2_v  # exposed: the uncovered parts, the last tile's whole H2
    h2_sim = hidden * e_s + (n_t - hidden) * h2_s
    p2 = a_pv + sum(p2x.values()) + h2_vec + h2_sim
    act = "actions" if kaleido else "dense_actions"
    nbytes = sum(o[act]["dram_read_bytes"] + o[act]["dram_write_bytes"] for o in (qk, pv))
    d = dram_cycles(cfg, nbytes)
    dh_ = min(d, dram_cycles(cfg, r0 * dh + dh * min(cfg.array_cols, keys)))
    dt = min(d - dh_, dram_cycles(cfg, r0 * dh))
    d_excess = max(0, d - dh_ - dt - (p1 + p2))
    qk_st = {"dram": dh_, "vector": vh + p1x["vector"], "similarity": sh + p1x["similarity"]}
    pv_st = {"dram": dt + d_excess, "vector": vt + p2x["vector"] + h2_vec, "similarity": p2x["similarity"] + h2_sim}
    out = []
    for a, st, op in ((a_qk, qk_st, qk), (a_pv, pv_st, pv)):
        own = op[act]
        out.append({"stall_cycles": {k: int(v) for k, v in st.items()}, "total_cycles": int(a + sum(st.values())),
                    "dram_cycles": dram_cycles(cfg, own["dram_read_bytes"] + own["dram_write_bytes"]),
                    "vector_cycles": int(v_max + vh + v_rope_rest if op is qk else v_exp + v_norm + vt),
                    "similarity_cycles": int(s_qk if op is qk else s_pv), "double_buffered": True})
    return out[0], out[1]


def fused_memory(qk: tuple[OpTiming, OpActions], pv: tuple[OpTiming, OpActions], cfg: AcceleratorConfig, grid,
                 qk_groups, pv_groups) -> tuple[OpMemory, OpMemory]:
    """The memory parts of a fused pair's two ops (module docstring rules), both designs, in place of their
    unfused ones (`sim.timing.memory.op_memory`): ``fused`` names the partner."""
    views = [t.json() | {"actions": a.actions, "dense_actions": a.dense_actions} for t, a in (qk, pv)]
    k = fused_pair_timing(*views, cfg, grid, qk_groups, pv_groups, kaleido=True)
    d = fused_pair_timing(*views, cfg, grid, qk_groups, pv_groups, kaleido=False)
    out = []
    for kt, dt, partner in ((k[0], d[0], pv[0].name), (k[1], d[1], qk[0].name)):
        out.append(OpMemory(
            stall_cycles=kt["stall_cycles"], dense_stall_cycles=dt["stall_cycles"],
            total_cycles=kt["total_cycles"], dense_total_cycles=dt["total_cycles"],
            total_speedup=dt["total_cycles"] / kt["total_cycles"] if kt["total_cycles"] else 0.0,
            memory={"dram_cycles": kt["dram_cycles"], "vector_cycles": kt["vector_cycles"],
                    "similarity_cycles": kt["similarity_cycles"], "double_buffered": True,
                    "dense_dram_cycles": dt["dram_cycles"], "dense_vector_cycles": dt["vector_cycles"]},
            fused=partner))
    return out[0], out[1]


def cross_frame_state(cfg: AcceleratorConfig, groups, K: int, N: int, grid) -> tuple[int, int]:  # noqa: N803
    """``(need, holds)`` in bytes: the neighbour state that a fused score op's channel groups carry from one query
    tile to the next tiles that read it, and what the organisation has on chip for it (docs/decisions.md D70).
    ``(0, 0)`` for lockstep and compact when no group reuses along ``f``.

    Fused attention issues query tiles position block by position block with frames innermost (the P_eff state of
    pv is the previous frame's P of the same positions, `fits_score_buffer`), and each tile runs its score op
    over **all** ``N`` key columns before the softmax. So the state of the f-axis groups spans every key:
    ``R x N`` (query row, key) pairs, not one column block's ``R x C``:

    - ``lockstep`` and ``compact``: per f-axis group, the chain's msb partial and its total (what a PARTIAL and a
      REUSE successor read), `sim.timing.compact.partial_bytes` each: ``R N G_f 2 pb``. Lockstep holds them in
      the PEs' partial registers, one column block at a time (``R min(C, N) G_f 2 pb``); compact in the
      partial-sum SRAM (``psum_sram_kib``).
    - ``delta``: one carried value per axis class (`sim.timing.delta.state_need_bytes`, D71), in the state SRAM
      (``state_sram_kib``; the partial-sum SRAM on a config without one).

    Shapes: ``groups`` ``(k0, k1, axis)`` triples; K channels, N keys, grid ``(F, H, W)``. No errors raised.
    """
    from sim.timing.compact import partial_bytes
    from sim.timing.delta import state_need_bytes

    if cfg.organisation == "delta":
        return state_need_bytes(cfg, grid, K, N, groups), (cfg.state_sram_kib or cfg.psum_sram_kib) * 1024
    g_f = sum(1 for g in groups if g[2] == "f")
    if not g_f:
        return 0, 0
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    per = g_f * 2 * partial_bytes(groups)
    if cfg.organisation == "lockstep":
        return R * N * per, R * min(C, N) * per
    return R * N * per, cfg.psum_sram_kib * 1024
