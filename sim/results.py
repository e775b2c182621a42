"""Simulation results: the results file's format name and version, and the diagnostics that explain a
result (`result_notes`). The model engine (`sim.engines.model`), the RTL engine (`sim.engines.verilator`)
and the report (`sim.report`) share these."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

import numpy as np

RESULTS_FORMAT = "kaleido-results"
RESULTS_VERSION = 1


def result_notes(res: dict, tr, cfg, losses: dict | None = None) -> list[str]:
    """One short line per surprising result (Kaleido slower or costlier than dense) naming the likely cause.

    ``losses``: ops per link of the speedup chain where each loses most (`sim.report.explain.loses_on`'s link,
    ``"-"`` none), counted by the caller from the results; without it the slower note names the organisation's
    usual loss."""
    notes = []
    if res["cycles"] > res["dense_cycles"]:
        f, h, w = tr.grid
        org = res.get("organisation", cfg.organisation)
        if losses:
            loss = "ops by the link they lose most on: " + ", ".join(
                f"{'none' if k == '-' else k} {n:,}" for k, n in sorted(losses.items(), key=lambda kv: -kv[1]))
        else:
            loss = {"lockstep": "on the lockstep array a tile's slots are set by its busiest rows"}.get(
                org, "partly filled band-tiles and the drain")
        why = (f"`kaleido explain` on the --json results names where each op loses to dense in its 'loses on' "
               f"column ({loss})")
        if (h * w) % cfg.array_rows:
            tiles = -(-(h * w) // cfg.array_rows)
            empty = (tiles * cfg.array_rows - h * w) / (tiles * cfg.array_rows)
            why += (f"; also, a tile holds one frame's positions (docs/decisions.md D5) and H*W = {h * w} is not a "
                    f"multiple of the {cfg.array_rows} array rows, so {empty:.0%} of the tile rows are empty (dense "
                    "tiles all tokens in raster order and has none)")
        notes.append(f"Kaleido is slower than dense here ({res['speedup']:.2f}x): {why}")
    elif res.get("total_cycles", 0) > res.get("dense_total_cycles", 0):
        st, dst = res["stall_cycles"], res["dense_stall_cycles"]
        extra = max((st.get(k, 0) - dst.get(k, 0), k) for k in st)
        notes.append(f"with stalls Kaleido is slower than dense ({res['total_cycles']:,} vs "
                     f"{res['dense_total_cycles']:,} cycles): mostly {extra[1]} stalls, +{extra[0]:,} cycles "
                     "(docs/architecture.md, 'Beyond the array')")
    notes += res["notes"] if "notes" in res else state_notes(res, tr, cfg)  # stored by `kaleido simulate`
    if "energy_pj" in res and res["energy_pj"] > res["dense_energy_pj"]:
        eb, db = res["energy_breakdown_pj"], res["dense_energy_breakdown_pj"]
        extra = sorted(((eb[k] - db.get(k, 0.0), k) for k in eb), reverse=True)[:2]
        parts = ", ".join(f"{k} +{v / 1e6:,.0f} uJ" for v, k in extra if v > 0)
        notes.append(f"Kaleido spends more energy than dense (mostly {parts}); see docs/energy.md")
    return notes


def state_notes(res: dict, tr, cfg) -> list[str]:
    """One line per fused score op whose cross-frame neighbour state does not fit what the organisation has
    for it (`sim.timing.attention.cross_frame_state`, docs/decisions.md D70): the model counts that op's
    temporal reuse as if it did, so its figures are an upper bound."""
    from sim.cost.actions import FUSED_PAIRS
    from sim.timing.attention import cross_frame_state

    ops = {(o.name, o.step, o.block): o for o in tr.ops}
    out, seen = [], set()
    for r in res.get("per_op", []):
        o = ops.get((r["name"], r["step"], r["block"]))
        if not r.get("fused") or o is None or r["name"] in seen or r["name"] not in FUSED_PAIRS:
            continue
        need, holds = cross_frame_state(cfg, [g.as_tuple() for g in o.groups], r["K"], r["N"], tr.grid)
        if need > holds:
            seen.add(r["name"])
            out.append(f"{r['name']} (fused): its neighbour state over all {r['N']:,} keys needs "
                       f"{need / 2**20:,.1f} MiB, {cfg.organisation} has {holds / 2**20:,.1f} MiB for it; its temporal "
                       "reuse is counted as if it fit, an upper bound (docs/decisions.md D70)")
    return out


# --- Typed per-op results -------------------------------------------------------------------------------
# One op flows plan -> timing -> cost -> result: `sim.engines.model.simulate_op` writes `OpTiming`,
# `sim.cost.energy.EnergyModel.op_actions` `OpActions`, `sim.timing.memory.op_memory` (or, for a fused
# attention pair, `sim.timing.attention.fused_memory`) `OpMemory`, `sim.cost.energy.EnergyModel.op_energy`
# `OpEnergy`; each stage reads the parts before it and no stage changes another's part. `OpResult.to_json`
# is the serialisation: the per-op object of the results file (`sim.engines.model.simulate_trace`), keys in
# the order below. Cycles are clock cycles of the accelerator (``clock_mhz``), energies pJ, counts plain counts.


def _not_json(**kw) -> dict:
    return {"metadata": {"json": False}, "repr": False, "compare": False, **kw}


@dataclass(frozen=True)
class OpTiming:
    """The array's timing of one op (`sim.engines.model.simulate_op`; module docstring there)."""

    name: str  #: op type (``qkv``, ``qk``, ...)
    block: int  #: transformer block index
    step: int  #: denoising step index
    theta: list  #: the (theta_lo, theta_hi) thresholds used
    batch: int  #: batch elements (heads of qk/pv, else 1)
    M: int  #: tokens per batch element  # noqa: N815
    K: int  #: reduction depth (channels)  # noqa: N815
    N: int  #: output channels  # noqa: N815
    tiles: int  #: tiles issued (count; compact: band-tiles)
    slots: int  #: issue slots (cycles of issue, all column blocks)
    cycles: int  #: the array's cycles, drain stall inside (RTL-exact)
    dense_cycles: int  #: the dense baseline's array cycles
    speedup: float  #: dense_cycles / cycles
    stall_cycles: dict  #: cycles by cause inside the array time: ``drain``, ``combine`` (compact only, else 0)
    dense_stall_cycles: dict  #: the same for the dense baseline
    useful_macs: float  #: MAC-equivalents (COMPUTE 1, PARTIAL 1/2 per output)
    dense_macs: int  #: batch x M x K x N MACs
    pe_utilization: float  #: useful_macs / (R x C x cycles)
    dense_pe_utilization: float  #: dense_macs / (R x C x dense_cycles)
    no_dispatcher_cycles: int  #: array cycles without the dispatcher (raster order, no pairing)
    no_dispatcher_pe_utilization: float  #: useful_macs / (R x C x no_dispatcher_cycles)
    reuse_fraction: dict  #: ``compute``/``partial``/``reuse``: fraction of streamed-operand elements
    dispatcher_stats: dict  #: `sim.cost.tiling.dispatcher_stats` of the tiling used (counts)
    #: int64 [3]: X elements under COMPUTE, PARTIAL, REUSE (in memory only, not serialised)
    counts: np.ndarray = field(**_not_json())
    #: the op's tiled decisions per batch element (`sim.cost.tiling.TiledDecisions`; in memory only)
    tiled: tuple = field(default=(), **_not_json())
    #: the compact organisation's timing (`sim.engines.model._compact_timing`; None: lockstep; in memory only)
    compact: dict | None = field(default=None, **_not_json())
    #: delta under ``combine_timing = "rtl"``: ``kaleido_dcore``'s per-op detail (`sim.timing.delta_core.issue_core`'s,
    #: a staged op's `stage_core`'s: ``done``, ``ahead``, ``bypass``; with back-pressure ``held``, ``frozen``,
    #: ``fifo_max``; ints); serialised as
    #: the per-op ``core`` only when set
    core: dict | None = field(default=None, **_not_json())

    def json(self) -> dict:
        """The serialised fields (fresh dicts), in the results file's order."""
        return _json_fields(self)

    def stripped(self) -> OpTiming:
        """This timing without the tiled decisions and compact tiles (what the op memo keeps)."""
        return replace(self, tiled=(), compact=None)


@dataclass(frozen=True)
class OpActions:
    """Action counts of one op (`sim.cost.actions`; `sim.cost.energy.EnergyModel.op_actions`): counts per
    action name, bytes for the SRAM and DRAM entries; ``cycles`` is the array's cycles (leakage is charged
    over the wall time by `OpEnergy`)."""

    actions: dict  #: Kaleido's action counts
    dense_actions: dict  #: the dense baseline's


@dataclass(frozen=True)
class OpMemory:
    """Memory, vector and similarity timing of one op beyond the array (`sim.timing.memory.op_memory`, or
    `sim.timing.attention.fused_memory` for both ops of a fused attention pair)."""

    stall_cycles: dict  #: cycles by cause: ``dram``, ``vector``, ``similarity`` (Kaleido)
    dense_stall_cycles: dict  #: the same for the dense baseline (similarity 0)
    total_cycles: int  #: wall time: array cycles + combine + these stalls
    dense_total_cycles: int  #: the dense baseline's wall time
    total_speedup: float  #: dense_total_cycles / total_cycles
    memory: dict  #: ``dram_cycles``, ``vector_cycles``, ``similarity_cycles``, ``double_buffered``, ...
    fused: str | None = None  #: the partner op's name when the op runs fused (serialised only when set)


@dataclass(frozen=True)
class OpEnergy:
    """Energy of one op over its wall time (`sim.cost.energy.EnergyModel.op_energy`), pJ."""

    actions: dict  #: Kaleido's action counts with ``cycles`` = the wall time (``total_cycles``)
    dense_actions: dict  #: the dense baseline's, ``cycles`` = ``dense_total_cycles``
    energy_pj: float  #: Kaleido's energy, pJ
    energy_breakdown_pj: dict  #: pJ by component (`sim.cost.energy.COMPONENTS`)
    dense_energy_pj: float  #: the dense baseline's energy, pJ
    dense_energy_breakdown_pj: dict  #: pJ by component
    energy_saving: float  #: dense_energy_pj / energy_pj


def _json_fields(obj) -> dict:
    out = {}
    for f in fields(obj):
        if f.metadata.get("json", True):
            v = getattr(obj, f.name)
            out[f.name] = dict(v) if isinstance(v, dict) else list(v) if isinstance(v, list) else v
    return out


@dataclass(frozen=True)
class OpResult:
    """One op's result: each stage's typed part (module comment above)."""

    timing: OpTiming
    actions: OpActions  #: the counts at the array's cycles (the energy part holds them at the wall time)
    memory: OpMemory
    energy: OpEnergy
    outputs_sha256: str | None = None  #: `sim.engines.rtl.outputs_checksum` of the golden outputs (--checksum)

    def to_json(self) -> dict:
        """The per-op object of the results file (fresh dicts: changing it changes no part)."""
        out = self.timing.json()
        out["stall_cycles"] = out["stall_cycles"] | self.memory.stall_cycles
        out["dense_stall_cycles"] = out["dense_stall_cycles"] | self.memory.dense_stall_cycles
        out.update(_json_fields(self.energy))
        m = self.memory
        out.update({"total_cycles": m.total_cycles, "dense_total_cycles": m.dense_total_cycles,
                    "total_speedup": m.total_speedup, "memory": dict(m.memory)})
        if m.fused is not None:
            out["fused"] = m.fused
        if self.timing.core is not None:
            out["core"] = dict(self.timing.core)
        if self.outputs_sha256 is not None:
            out["outputs_sha256"] = self.outputs_sha256
        return out
