"""Buffer, DRAM and vector-unit timing of one op: stall cycles by cause beyond the array's cycles.

The array's cycles (`sim.timing.cycle_model`, RTL-exact, including the output-drain stall) stay the op's
``cycles``; this module adds what the memory system and the vector unit cost on top, per op, from
the op's DRAM bytes (`sim.cost.actions` rules) and its vector work (the same per-element counts as
`sim.cost.actions`, split into work before and after the GEMM). Rules (docs/decisions.md D10, D11):

Fold (the buffers' unit of work). A fold is one output tile (R tokens x C output channels) over one
K-chunk of ``kf = min(K, R)`` channels, the reduction depth of a weight- or input-stationary fold on
the same array (SCALE-Sim's ``ceil(K/R)`` folds); the output-stationary PEs keep accumulating across
K-chunks, so the buffers never need a tile's whole K. One fold needs ``R * kf`` input bytes (int8 X),
``kf * C`` weight bytes (int8 W) and ``R * C * ob`` output bytes (acc-width results, ``ob =
ceil(acc_bits / 8)``, `sim.cost.actions.value_bytes`). A config whose buffer cannot hold one fold cannot
run the op (`fold_shortfall`; the simulator raises). When every buffer holds two folds, the buffers
are double-buffered: the next fold's DRAM transfer overlaps the current fold's compute.

DRAM, per op (granularity: the whole op, with a fold-sized prologue and epilogue). Bandwidth
``B = dram_gbps * 1000 / clock_mhz`` bytes per cycle (GB/s = 1e9 B/s; clock_mhz * 1e6 cycles/s).
``D = ceil(dram_bytes / B)``. The first fold (``min(R, M) * kf + kf * min(C, N)`` bytes) must arrive
before the first slot issues (prologue ``Dh``) and the last tile's int8 outputs (``min(R, M) *
min(C, N)`` bytes) leave after the last result (epilogue ``Dt``); nothing overlaps them (both are
capped so that ``Dh + Dt <= D``). With
double buffering the rest, ``Do = max(0, D - Dh - Dt)``, overlaps the array; without (a buffer holds
one fold but not two) all of D is serial and is the DRAM stall.

Vector unit, per op. ``lanes = vector_lanes`` (config; default ``array_cols *
drain_rows_per_cycle``, one lane per output value drained per cycle, the area model's size), each
doing one fp16 add and one fp16 multiply per cycle: ``V(adds, mults) = max(ceil(adds / lanes),
ceil(mults / lanes))``. Work before the GEMM (LayerNorm + modulation of the input of qkv, cross_q
and ffn1; RoPE of qk's Q and K) is dependent: the first position tile's rows (share ``min(R, M) /
M`` of it) must be done before the first slot, head ``Vh``. Work after the GEMM (requantise,
softmax numerators, 1/rowsum, GELU, residual) streams on the drained results (softmax taken as
streaming, with a running row max); the last tile's share ``min(R, M) * min(C, N) / (M * N)`` runs
after the last result, tail ``Vt``. The rest, ``Vo = max(0, V_total - Vh - Vt)``, overlaps the array.

Similarity unit, per op, Kaleido only (docs/decisions.md D31). It decides every (token, group) in
its own pass over X, ahead of the array (D23): ``lanes = similarity_lanes`` channels per cycle
(config; default ``array_rows``, the area model's size), ``S = ceil(batch * M * K / lanes)``. The
first tile's decisions must exist before its first slot, head ``Sh = ceil(min(R, M) * K / lanes)``
(a lower bound: with the scheduler, the first window's positions in every frame are decided before
its first tile); the rest, ``So = S - Sh``, overlaps the array. For ``pv`` (K = M keys, N = d_h
= 128 = C) the pass is as long as the dense array's op, so reuse cannot shorten pv unless the unit
is wider than R lanes.

Combination. With A = the array's cycles: ``vector stall = Vh + Vt + max(0, Vo - A)``;
``similarity stall = Sh + max(0, So - max(A, Vo))``; ``dram stall = Dh + Dt + max(0, Do - max(A,
Vo, So))`` (double-buffered) or ``D`` (not): overlapped work longer than the array is charged to
the vector unit up to its own excess, then to the similarity unit, the remainder to DRAM, so that
``total_cycles = A + dram + vector + similarity stalls`` = ``Dh + Vh + Sh + max(A, Vo, So, Do) + Vt
+ Dt``. Ops run one after another (no overlap between ops, as in `sim.engines.model`).
"""

from __future__ import annotations

import math

from hw.config import AcceleratorConfig
from sim.cost.actions import kaleido_dram, value_bytes, vector_work
from sim.results import OpActions, OpMemory, OpTiming


def vector_lanes(cfg: AcceleratorConfig) -> int:
    """Vector-unit lanes: ``cfg.vector_lanes``, or ``array_cols * drain_rows_per_cycle`` when unset."""
    return cfg.vector_lanes if cfg.vector_lanes is not None else cfg.array_cols * cfg.drain_rows_per_cycle


def similarity_lanes(cfg: AcceleratorConfig) -> int:
    """Similarity-unit lanes: ``cfg.similarity_lanes``, or ``array_rows`` when unset."""
    return cfg.similarity_lanes if cfg.similarity_lanes is not None else cfg.array_rows


def fold_bytes(cfg: AcceleratorConfig, K: int) -> dict[str, int]:  # noqa: N803
    """Bytes one fold needs in each buffer (``input``, ``weight``, ``output``) for reduction depth K."""
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    kf = min(K, R)
    return {"input": R * kf, "weight": kf * C, "output": R * C * value_bytes(cfg)}


def fold_shortfall(cfg: AcceleratorConfig, K: int) -> tuple[str, int, int] | None:  # noqa: N803
    """The first buffer that cannot hold one fold: ``(buffer, required_bytes, sram_kib)``, else None."""
    for buf, need in fold_bytes(cfg, K).items():
        kib = getattr(cfg, f"{buf}_sram_kib")
        if need > kib * 1024:
            return buf, need, kib
    return None


def double_buffered(cfg: AcceleratorConfig, K: int) -> bool:  # noqa: N803
    """Every buffer holds two folds, so DRAM transfers overlap compute."""
    return all(2 * need <= getattr(cfg, f"{buf}_sram_kib") * 1024 for buf, need in fold_bytes(cfg, K).items())


def bytes_per_cycle(cfg: AcceleratorConfig) -> float:
    """DRAM bytes per clock cycle: ``dram_gbps * 1000 / clock_mhz``."""
    return cfg.dram_gbps * 1000.0 / cfg.clock_mhz


def dram_cycles(cfg: AcceleratorConfig, nbytes: float) -> int:
    """Cycles to move ``nbytes`` at the DRAM bandwidth, rounded up."""
    return math.ceil(nbytes / bytes_per_cycle(cfg) - 1e-9) if nbytes > 0 else 0


def _vcycles(adds: float, mults: float, lanes: int) -> int:
    return max(math.ceil(adds / lanes - 1e-9), math.ceil(mults / lanes - 1e-9), 0)


def kaleido_dram_bytes(cfg: AcceleratorConfig, batch: int, M: int, K: int, N: int, grid) -> int:  # noqa: N803
    """DRAM bytes (read + write) of one op under Kaleido reuse: `sim.cost.actions.kaleido_dram` (the action
    counts' rules, docs/decisions.md D23, D24), taking every channel group as temporal."""
    d = kaleido_dram(cfg, M, K, N, grid)
    return batch * (d["read"] + d["write"])


def op_memory_timing(name: str, batch: int, M: int, K: int, N: int, cycles: int,  # noqa: N803
                     dram_bytes: float, cfg: AcceleratorConfig, similarity: bool = False) -> dict:
    """Stalls of one op beyond the array's ``cycles`` (module docstring rules).

    Args:
        name: op type (vector work depends on it).
        batch, M, K, N: the op's shape per batch element.
        cycles: the array's cycles for the whole op (`sim.timing.cycle_model`).
        dram_bytes: DRAM read + write bytes of the whole op (`sim.cost.actions`).
        similarity: the op's decisions come from the similarity unit (Kaleido; not the dense array).

    Returns:
        ``stall_cycles`` (``dram``, ``vector``, ``similarity``), ``total_cycles``, ``dram_cycles``
        (D), ``vector_cycles`` (V_total), ``similarity_cycles`` (S, 0 without `similarity`),
        ``double_buffered``; all cycles are ints.
    """
    if cycles <= 0:
        return {"stall_cycles": {"dram": 0, "vector": 0, "similarity": 0}, "total_cycles": 0, "dram_cycles": 0,
                "vector_cycles": 0, "similarity_cycles": 0, "double_buffered": True}
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    lanes = vector_lanes(cfg)
    r0, c0, kf = min(R, M), min(C, N), min(K, R)
    pa, pm, qa, qm = vector_work(name, M, K, N)
    v_total = _vcycles(batch * (pa + qa), batch * (pm + qm), lanes)
    vh = _vcycles(pa * r0 / M, pm * r0 / M, lanes)
    vt = _vcycles(qa * r0 * c0 / (M * N), qm * r0 * c0 / (M * N), lanes)
    vo = max(0, v_total - vh - vt)
    s_total = _vcycles(batch * M * K, 0, similarity_lanes(cfg)) if similarity else 0
    sh = _vcycles(r0 * K, 0, similarity_lanes(cfg)) if similarity else 0
    so = max(0, s_total - sh)
    d_total = dram_cycles(cfg, dram_bytes)
    db = double_buffered(cfg, K)
    if db:
        dh = min(d_total, dram_cycles(cfg, r0 * kf + kf * c0))
        dt = min(d_total - dh, dram_cycles(cfg, r0 * c0))
        do = max(0, d_total - dh - dt)
        dram_stall = dh + dt + max(0, do - max(cycles, vo, so))
    else:
        dram_stall = d_total
    vec_stall = vh + vt + max(0, vo - cycles)
    sim_stall = sh + max(0, so - max(cycles, vo))
    return {"stall_cycles": {"dram": int(dram_stall), "vector": int(vec_stall), "similarity": int(sim_stall)},
            "total_cycles": int(cycles + dram_stall + vec_stall + sim_stall), "dram_cycles": int(d_total),
            "vector_cycles": int(v_total), "similarity_cycles": int(s_total), "double_buffered": db}


def op_memory(timing: OpTiming, actions: OpActions, cfg: AcceleratorConfig) -> OpMemory:
    """The memory and vector timing of one op (module docstring rules), Kaleido and dense.

    Reads the op's shape, ``cycles``, ``dense_cycles`` and combine stall (`OpTiming`) and the DRAM bytes of
    ``actions`` and ``dense_actions`` (`OpActions`); gives the ``dram``, ``vector`` and ``similarity``
    (Kaleido's similarity unit; 0 for dense) stalls, ``total_cycles`` and ``dense_total_cycles`` (array
    cycles + those stalls; the drain stall is already inside the array cycles), ``total_speedup`` and
    ``memory`` (``dram_cycles``, ``vector_cycles``, ``similarity_cycles``, ``double_buffered``,
    ``dense_dram_cycles``).
    """
    t = timing
    shape = (t.batch, t.M, t.K, t.N)
    out = {}
    for prefix, a, cycles, st in (("", actions.actions, t.cycles, t.stall_cycles),
                                  ("dense_", actions.dense_actions, t.dense_cycles, t.dense_stall_cycles)):
        # the compact organisation's combine unit (sim.timing.compact) extends the array's time
        a_cycles = cycles + st.get("combine", 0)
        out[prefix] = op_memory_timing(t.name, *shape, a_cycles, a["dram_read_bytes"] + a["dram_write_bytes"], cfg,
                                       similarity=prefix == "")
    k, d = out[""], out["dense_"]
    return OpMemory(
        stall_cycles=k["stall_cycles"], dense_stall_cycles=d["stall_cycles"],
        total_cycles=k["total_cycles"], dense_total_cycles=d["total_cycles"],
        total_speedup=d["total_cycles"] / k["total_cycles"] if k["total_cycles"] else 0.0,
        memory={"dram_cycles": k["dram_cycles"], "vector_cycles": k["vector_cycles"],
                "similarity_cycles": k["similarity_cycles"], "double_buffered": k["double_buffered"],
                "dense_dram_cycles": d["dram_cycles"]})
