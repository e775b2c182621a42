"""Energy = Σ action counts (`sim.cost.actions`) x per-action energies (`sim/cost/tech/*.toml`).

Per-action energies derived from table rows (the rule for each; every number used is a table row
or a bit width of the RTL):

- ``mac8``: ``mult8 x 72/64`` -- COMPUTE runs both halves of the split multiplier, 5x8 + 4x8 = 72
  partial-product bits against 64 for an 8x8 multiplier (energy taken proportional to the
  partial-product array). ``mac4``: ``mult8 x 32/64`` (the 4x8 low half alone). ``mac5``: ``mult8 x
  40/64`` (the 5x8 high half alone: the delta PE's PARTIAL channel on the high half, D92). ``mac8_plain``:
  ``mult8`` (the dense baseline's plain multiplier).
- ``pe_add``: ``add32 x acc_bits / 32`` (ripple energy linear in width). The compact and delta PEs' narrower
  adders at their RTL widths (`sim.cost.compact_actions`): ``pe_add_half``, the split multiplier's halves'
  adder, ``add32 x HALF_ADD_BITS / 32`` (hw/compact_pe.py ``add``: X_BITS + W_BITS + 1 = 18 bits);
  ``pe_add_corr``, the delta PE's PAIRED sign correction, ``add32 x CORR_ADD_BITS / 32`` (W_BITS + LO_BITS + 1
  = 13 bits, `sim.cost.area.delta_pe_extra`).
- ``pe_reg_bits``, ``pipe_reg_bits``: ``reg_bit`` each; ``pe_mux_bits``: ``mux2_bit`` each.
- ``sim_add8``, ``dispatch_add8``: ``add8`` each.
- SRAM: bytes / 8 = 64-bit accesses, each at the energy of an array of the buffer's size,
  interpolated log-log between Horowitz's 8 KiB, 32 KiB and 1 MiB points (``sram_8kib``,
  ``sram_32kib``, ``sram_1mib``) and extrapolated with the nearest segment's slope outside them
  (exponents 0.5 below 32 KiB, log 5 / log 32 = 0.464 above). Reads and writes cost the same.
  Column banks (`COLUMN_BANKED`): a buffer each of whose words is only ever read by one array column's
  lanes is built as C column banks and an access is charged at a bank of ``kib / C``: the weight SRAM (W[k, c]
  only ever enters column c, in the dense array, the lockstep array and every band of the compact
  organisation alike; docs/decisions.md D58) and the compact organisation's partial-sum SRAM (a column's
  partials are only touched by its own combine lanes, D50), and the delta organisation's state SRAM (the carried
  value of key column n is only touched by the combine lanes of column n mod C, D71) and difference-sum buffer
  (D[t] of column n likewise, D84) and weight stage (W[k, n] only enters column n, D85). Row banks (D77): Kaleido's
  P_eff buffer holds one query tile's previous-frame P, one row per query position, and row q is only read and
  written by the similarity-unit lanes of tile row q (its lanes are ``R x s_t`` in the balanced preset, s_t per
  row), so it is built as ``min(R, similarity_lanes)`` row banks and charged at a bank. The score buffer likewise
  (D83): it holds one query tile's exact scores, one row per query position; row q's scores reach it from the
  vector unit's row-max lanes of tile row q as they drain, and only the exp lanes of row q read them (the
  vector unit is sized per row, ``7 x R x s_t`` lanes), so it is ``min(R, vector_lanes)`` row banks (also at
  most ``similarity_lanes`` where it holds P_eff too; `row_banks`), for dense and Kaleido alike. The other
  buffers are charged whole (the input SRAM feeds any row through the scheduler's order or the gather network;
  the output SRAM is written through the drain ports and read by the vector unit's lanes across rows and
  columns). As for every banked buffer, the wires between a bank and its lanes are not charged. The delta
  organisation's state SRAM is charged at the macro ``kaleido_dcombine`` builds (`sim.cost.controllers.inventory`'s
  "state SRAM" part, docs/decisions.md D114): each column bank is V position banks on the core's V output lanes
  (D112), so an access is at ``kib / (C V)`` (less the remainder `hw.sram.split_banks` drops). Likewise, where
  ``kaleido_dcore`` is built (docs/decisions.md D122), the partial-sum SRAM at a column slice of its state buffer's
  macro (``depth x acc`` bits: a word is C columns of acc bits, and each column's lanes touch only their own) and
  the difference-sum buffer at a column slice of the D buffers' macro (the D buffers are it, an n-th each). On the
  compact organisation the partial-sum SRAM is ``kaleido_combine``'s macros (docs/decisions.md D127): its state
  traffic at a column slice of the state macro, its staging traffic (``psum_staging_*``) at one of a staging
  macro (`sim.cost.controllers.inventory`'s "partial state" and "partial staging"). The
  weight stage of ``kaleido_daccel_stage`` (docs/decisions.md D96, D127) at one of its macros: each column bank is
  two half-word macros (``B`` channels a word, ``kib / 2 C`` each), and a stage read reads both (its bytes count
  both, `sim.cost.compact_actions`).
- DRAM: ``dram_byte`` per byte read or written.
- vector unit: ``fp16_add``, ``fp16_mult`` each; fused attention's integer adds ``vec_int_add``:
  ``add32 x SCORE_BITS / 32`` (24-bit, `sim.cost.actions.SCORE_BITS`); its table reads ``vec_lut_read``:
  ``8 x reg_bit`` (one uint8 entry of the per-lane numerator table, a latch array read like a register,
  Aladdin's register row charges reads per bit).
- leakage: ``leak_mm2_ns x die area (sim.cost.area) x cycles / clock`` with ``cycles`` the op's wall
  time, ``total_cycles`` (the array's cycles plus the DRAM, vector and similarity stalls,
  `sim.timing.memory`, `sim.timing.attention`; `EnergyModel.op_energy`): the die leaks while
  the array waits too. Each design leaks over its own time and its own die (the dense baseline over
  ``dense_total_cycles`` and ``dense_total_mm2``), docs/decisions.md D52. An on-chip SRAM that the op (and the
  other half of its fused attention pair) neither reads nor writes is power-gated for the op's wall time and
  leaks the technology table's ``sram_gated_leak`` of its share (0.1 in the shipped tables; `gated_sram_mm2`,
  D89), in both designs. Its wake-up is not charged: the op
  sequence is static, so it is woken during the previous op, and the op lasts 10^5 to 10^8 cycles.

- the op-level controllers' accesses (``ctrl_*``, `sim.cost.controllers.action_energies`, D101): their macros at
  ``sram_access_pj`` of the macro's own size, their registers at ``reg_bit``, component ``controller``. The bands'
  weight copies (``ctrl_weight_copies`` in the area) are the weight SRAM's: read and written as ``sram_weight`` and
  power-gated with it.

Components of ``energy_breakdown_pj``: ``array_macs`` (mac8, mac5, mac4, mac8_plain, pe_add),
``pe_registers`` (pe_reg_bits, pipe_reg_bits), ``pe_muxes``, ``dispatcher`` (similarity unit and
matcher), ``controller`` (the banded organisations' op-level controllers, D101), ``sram_input``, ``sram_weight``, ``sram_output``, ``sram_partial``, ``dram``,
``vector_unit``, ``leakage``. Not modelled: clock tree, wires between SRAMs and the array, control
FSMs, DRAM refresh/background power, SRAM leakage apart from the die-area and gating rules, the energy of
waking a gated SRAM.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from hw.config import AcceleratorConfig
from hw.pe import HI_BITS, LO_BITS, SPLIT_MULT_FRACTION, W_BITS, X_BITS
from sim.cost.actions import FUSED_PAIRS, SCORE_BITS, SRAM_BUFFERS, add_actions, dense_actions, op_actions
from sim.cost.area import area_breakdown
from sim.cost.compact_actions import compact_actions
from sim.cost.controllers import action_energies as controller_energies
from sim.cost.controllers import d_buffer_macro
from sim.cost.controllers import inventory as controller_inventory
from sim.cost.tech import TechTable, load_tech
from sim.results import OpActions, OpEnergy, OpMemory, OpTiming
from sim.timing.memory import similarity_lanes, vector_lanes

#: Fraction of an 8x8 multiplier's energy for a PARTIAL (LO_BITS x 8 low half) multiply: the
#: partial-product array scales with the operand bits (hw/pe.py LO_BITS = 4, so 4x8 / 8x8 = 0.5).
MAC4_FRACTION = (LO_BITS * W_BITS) / (8 * W_BITS)
#: Fraction for the high half alone (HI_BITS x 8 = 5 x 8 / 8 x 8 = 0.625, hw/pe.py HI_BITS): the delta PE's
#: PARTIAL channel on the 5-bit signed half (`sim.timing.delta.paired_product`, docs/decisions.md D92).
MAC5_FRACTION = (HI_BITS * W_BITS) / (8 * W_BITS)

#: Bits of the compact and delta PEs' halves' adder (hw/compact_pe.py ``add``) and of the delta PE's sign
#: correction adder (docs/decisions.md D68).
HALF_ADD_BITS = X_BITS + W_BITS + 1
CORR_ADD_BITS = W_BITS + LO_BITS + 1

#: Buffers built as ``array_cols`` column banks, an access charged at one bank's size (module docstring).
COLUMN_BANKED = ("weight", "psum", "state", "diff", "wstage")

#: Buffers built as row banks, one per tile row's lanes (module docstring): P_eff beside the similarity unit's,
#: the score buffer beside the vector unit's.
ROW_BANKED = ("peff", "score")


def row_banks(cfg: AcceleratorConfig, buffer: str) -> int:
    """Row banks of a `ROW_BANKED` buffer: one per tile row, at most one per lane of the unit whose lanes touch
    it (the similarity unit's for ``peff``; the vector unit's for ``score``, and also the similarity unit's
    when the config has no P_eff buffer and P_eff lives in the score buffer)."""
    lanes = similarity_lanes(cfg) if buffer == "peff" else vector_lanes(cfg)
    if buffer == "score" and not cfg.peff_sram_kib:
        lanes = min(lanes, similarity_lanes(cfg))
    return max(1, min(cfg.array_rows, lanes))


COMPONENTS = ("array_macs", "pe_registers", "pe_muxes", "dispatcher", "gather_network", "combine_unit", "controller",
              *(f"sram_{b}" for b in SRAM_BUFFERS),
              "dram", "vector_unit", "leakage")


def sram_access_pj(tech: TechTable, kib: float) -> float:
    """Energy of one 64-bit access to an SRAM array of `kib` KiB (log-log interpolation, module docstring)."""
    pts = [(8.0, tech.e("sram_8kib")), (32.0, tech.e("sram_32kib")), (1024.0, tech.e("sram_1mib"))]
    (s0, e0), (s1, e1) = (pts[0], pts[1]) if kib <= pts[1][0] else (pts[1], pts[2])
    slope = math.log(e1 / e0) / math.log(s1 / s0)
    return e0 * (kib / s0) ** slope


def action_energies(cfg: AcceleratorConfig, tech: TechTable) -> dict[str, tuple[str, float]]:
    """``{action: (component, pJ per action)}`` for every counted action except leakage and cycles."""
    m8, reg, mux, a8 = tech.e("mult8"), tech.e("reg_bit"), tech.e("mux2_bit"), tech.e("add8")
    out = {
        "mac8": ("array_macs", m8 * SPLIT_MULT_FRACTION),
        "mac5": ("array_macs", m8 * MAC5_FRACTION),
        "mac4": ("array_macs", m8 * MAC4_FRACTION),
        "mac8_plain": ("array_macs", m8),
        "pe_add": ("array_macs", tech.e("add32") * cfg.acc_bits / 32),
        "pe_add_half": ("array_macs", tech.e("add32") * HALF_ADD_BITS / 32),
        "pe_add_corr": ("array_macs", tech.e("add32") * CORR_ADD_BITS / 32),
        "pe_reg_bits": ("pe_registers", reg),
        "pipe_reg_bits": ("pe_registers", reg),
        "pe_mux_bits": ("pe_muxes", mux),
        "sim_add8": ("dispatcher", a8),
        "gather_mux_bits": ("gather_network", mux),  # sim.cost.compact_actions
        "combine_add": ("combine_unit", tech.e("add32") * cfg.acc_bits / 32),
        "combine_reg_bits": ("combine_unit", reg),  # sim.cost.compact_actions (delta: a class value kept in a lane)
        "stage_reg_bits": ("sram_wstage", reg),  # the bands' weight words, read from the stage (D88)
        "weight_word_reg_bits": ("sram_weight", reg),  # ... from the weight SRAM (sim.timing.compact, D88)
        "dispatch_add8": ("dispatcher", a8),
        "dram_read_bytes": ("dram", tech.e("dram_byte")),
        "dram_write_bytes": ("dram", tech.e("dram_byte")),
        "vec_fp16_add": ("vector_unit", tech.e("fp16_add")),
        "vec_fp16_mult": ("vector_unit", tech.e("fp16_mult")),
        "vec_int_add": ("vector_unit", tech.e("add32") * SCORE_BITS / 32),
        "vec_lut_read": ("vector_unit", 8 * reg),
    }
    out.update(controller_energies(cfg, tech))  # the op-level controllers' macros and registers (D101)
    state_macro = next((p for p in controller_inventory(cfg) if p["charged"] == "sram_state"), None)
    d_macro = d_buffer_macro(cfg) if cfg.diff_sram_kib else None
    # the state buffer of kaleido_dcombine (delta, D122), the partial state of compact's kaleido_combine (D127)
    psum_macro = next((p for p in controller_inventory(cfg) if p["part"] in ("state buffer", "partial state")), None)
    staging_macro = next((p for p in controller_inventory(cfg) if p["part"] == "partial staging"), None)
    wstage_macro = next((p for p in controller_inventory(cfg) if p["part"] == "wstage"), None)
    for b in SRAM_BUFFERS:
        kib = getattr(cfg, f"{b}_sram_kib")
        if b == "state" and state_macro is not None:  # the built position banks of its column banks (D114)
            kib = state_macro["depth"] * state_macro["width"] / 8192
        elif b == "psum" and psum_macro is not None:  # a column slice of the built state buffer's macro (D122)
            kib = psum_macro["depth"] * psum_macro["width"] / cfg.array_cols / 8192
        elif b in COLUMN_BANKED:  # C column banks: a word is only read by one column's lanes (D50, D58)
            kib = kib / cfg.array_cols
        elif b in ROW_BANKED:  # row banks beside the lanes of each tile row (D77, D83)
            kib = kib / row_banks(cfg, b)
        if b == "diff" and d_macro is not None:  # a column slice of kaleido_dcombine's D buffers' macro (D122)
            kib = d_macro["depth"] * d_macro["width"] / cfg.array_cols / 8192
        if b == "wstage" and wstage_macro is not None:  # one of a column bank's two half-word macros (D96, D127)
            kib = wstage_macro["depth"] * wstage_macro["width"] / 8192
        per_byte = sram_access_pj(tech, kib) / 8
        out[f"sram_{b}_read_bytes"] = (f"sram_{b}", per_byte)
        out[f"sram_{b}_write_bytes"] = (f"sram_{b}", per_byte)
    # compact's staging macros (kaleido_combine, D127), a column slice of one; 0 where there are none (never counted)
    kib = staging_macro["depth"] * staging_macro["width"] / cfg.array_cols / 8192 if staging_macro else 0.0
    per_byte = sram_access_pj(tech, kib) / 8 if staging_macro else 0.0
    out["psum_staging_read_bytes"] = out["psum_staging_write_bytes"] = ("sram_psum", per_byte)
    return out




def gated_sram_mm2(breakdown: dict[str, float], *actions: dict) -> float:
    """mm^2 of the on-chip SRAMs of an area ``breakdown`` (`sim.cost.area.area_breakdown`'s ``breakdown`` or
    ``dense_breakdown``) that none of the action sets ``actions`` reads or writes: power-gated for that op (D89).
    No SRAM holds data from one op to the next (every op reads its operands from DRAM and writes its results
    there, `sim.timing.memory`), so one an op does not touch is off for the op's whole wall time; the two halves
    of a fused attention pair run interleaved, so their union is on for both."""
    def touched(b: str) -> bool:
        keys = (f"sram_{b}_read_bytes", f"sram_{b}_write_bytes") + (
            ("psum_staging_read_bytes", "psum_staging_write_bytes") if b == "psum" else ())
        return any(a.get(k, 0) for a in actions for k in keys)
    gated = sum(breakdown.get(f"sram_{b}", 0.0) for b in SRAM_BUFFERS if not touched(b))
    if not touched("weight"):  # the bands' weight copies (D101) are the weight SRAM's, gated with it
        gated += breakdown.get("ctrl_weight_copies", 0.0)
    return float(gated)


def energy_of(actions: dict, cfg: AcceleratorConfig, tech: TechTable, area_mm2: float) -> dict[str, float]:
    """Energy breakdown in pJ by component for an action set (`COMPONENTS` keys, all present). Leakage: the die's
    ``area_mm2`` over ``cycles``, less ``1 - sram_gated_leak`` (the table's row) of the power-gated SRAM's ``gated_mm2_cycles``
    (mm^2 x cycles, `gated_sram_mm2`; absent: nothing gated)."""
    table = action_energies(cfg, tech)
    out = dict.fromkeys(COMPONENTS, 0.0)
    for k, n in actions.items():
        if k in table:
            comp, pj = table[k]
            out[comp] += n * pj
    ns = actions.get("cycles", 0) * 1000.0 / cfg.clock_mhz
    gated_ns = actions.get("gated_mm2_cycles", 0) * 1000.0 / cfg.clock_mhz
    out["leakage"] += tech.e("leak_mm2_ns") * (area_mm2 * ns - (1 - tech.e("sram_gated_leak")) * gated_ns)
    return out


class EnergyModel:
    """Energy of ops on one config with one technology table (default: the config's node)."""

    def __init__(self, cfg: AcceleratorConfig, tech: TechTable | str | Path | None = None):
        self.cfg = cfg
        self.tech = load_tech(cfg.technology_nm) if tech is None else (
            load_tech(tech) if isinstance(tech, (str, int, Path)) else tech)
        area = area_breakdown(cfg, self.tech)
        self.area_mm2, self.dense_area_mm2 = area["total_mm2"], area["dense_total_mm2"]
        self.breakdown, self.dense_breakdown = area["breakdown"], area["dense_breakdown"]

    def op_actions(self, timing: OpTiming, grid, groups, b_msb: int, fused: bool = False) -> OpActions:
        """Kaleido's and the dense baseline's action counts of one op from its timing (``cycles``: the array's).
        ``fused``: half of a fused attention pair (`sim.cost.actions.op_actions`). A compact timing's
        band-tiles replace the lockstep's array counts (`sim.cost.compact_actions`)."""
        t = timing
        decisions = list(t.tiled)
        a = op_actions(t.name, decisions, grid, groups, t.M, t.K, t.N, b_msb, self.cfg, t.cycles, fused=fused)
        if t.compact is not None:  # the compact organisation's array (sim.timing.compact)
            blocks = t.compact["col_blocks"] if t.compact.get("delta") else None  # sim.timing.delta
            state = bool(fused and t.name in FUSED_PAIRS and self.cfg.state_sram_kib)  # D71: qk's carried values
            p_op = fused and t.name in FUSED_PAIRS.values()  # D76: delta stashes pv's differences, not P
            stage = t.compact["chunks"] if t.compact.get("staged") else None  # D85: weights through the stage
            cgroups, cdec = groups, decisions
            if t.compact.get("slices") is not None:  # D88: band-tiles of stage slices, each its group's decisions
                cgroups, cols = t.compact["slices"]
                cdec = [replace(td, decisions=td.decisions[:, cols], code_counts=None) for td in decisions]
            a = compact_actions(a, cdec, t.compact["band_tiles"], cgroups, t.N, self.cfg, grid, blocks, state,
                                p_op, stage, t.compact.get("port_weights"),
                                fifo_bypass=t.compact.get("fifo_bypass"), stage_run=t.compact.get("stage_run"),
                                queue_cycles=t.compact.get("queue_cycles"), port_reads=t.compact.get("port_reads"))
        d = dense_actions(t.name, t.batch, t.M, t.K, t.N, self.cfg, t.dense_cycles, fused=fused)
        return OpActions(a, d)

    def op_energy(self, actions: OpActions, memory: OpMemory, partner: OpActions | None = None) -> OpEnergy:
        """One op's energy with leakage over its wall time: the ``cycles`` action of ``actions`` and
        ``dense_actions`` becomes ``total_cycles`` and ``dense_total_cycles`` (`sim.timing.memory.op_memory`
        or `sim.timing.attention.fused_memory`), and ``gated_mm2_cycles`` the SRAM it and ``partner`` (the other
        half of a fused attention pair) leave untouched over those cycles (`gated_sram_mm2`, D89). Call once the
        op's stalls are final."""
        a, d = dict(actions.actions), dict(actions.dense_actions)
        a["cycles"], d["cycles"] = memory.total_cycles, memory.dense_total_cycles
        pa, pd = ((partner.actions,), (partner.dense_actions,)) if partner is not None else ((), ())
        a["gated_mm2_cycles"] = gated_sram_mm2(self.breakdown, a, *pa) * a["cycles"]
        d["gated_mm2_cycles"] = gated_sram_mm2(self.dense_breakdown, d, *pd) * d["cycles"]
        return OpEnergy(**self._energies(a, d))

    def totals(self, per_op: list[dict]) -> dict:
        """The results' total actions and energies from the per-op results (JSON objects), and
        ``energy_model`` (technology, die areas in mm2): the keys `sim.engines.model.assemble_results` appends."""
        a, d = {}, {}
        for r in per_op:
            a, d = add_actions(a, r["actions"]), add_actions(d, r["dense_actions"])
        return self._energies(a, d) | {"energy_model": {"technology": self.tech.name, "area_mm2": self.area_mm2,
                                                        "dense_area_mm2": self.dense_area_mm2}}

    def _energies(self, a: dict, d: dict) -> dict:
        eb = energy_of(a, self.cfg, self.tech, self.area_mm2)
        db = energy_of(d, self.cfg, self.tech, self.dense_area_mm2)
        e, de = sum(eb.values()), sum(db.values())
        return {"actions": a, "dense_actions": d, "energy_pj": e, "energy_breakdown_pj": eb,
                "dense_energy_pj": de, "dense_energy_breakdown_pj": db,
                "energy_saving": de / e if e else 0.0}
