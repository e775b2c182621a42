"""Emit Verilog for a preset: ``rtl_out/<preset>/kaleido_{pe,column,top,similarity,matcher,scheduler,core,accel}.v``
(``kaleido_accel``: the op-level controller, hw/accel.py) and one ``kaleido_sram_*.v`` per SRAM macro
the controller's banked buffers use (hw/sram.py; replace those files by a memory compiler's macros of
the same names and ports, docs/decisions.md D53). The vector unit and the fused-attention control
are modelled only (sim/): no RTL.

A preset whose ``organisation`` is ``compact`` also gets the compact organisation's datapath
(docs/decisions.md D65): ``kaleido_cpe`` (hw/compact_pe.py), ``kaleido_ccolumn`` and ``kaleido_ctop``
(hw/compact_array.py), ``kaleido_combine`` (hw/combine.py) and its partial-sum SRAM macros; one whose
``organisation`` is ``delta`` the delta organisation's (D73): ``kaleido_dpe``, ``kaleido_dcolumn``,
``kaleido_dtop`` (the same modules on a delta config) and ``kaleido_dcombine`` (hw/delta_combine.py) with
its macros, and the delta op-level controller ``kaleido_daccel`` (hw/delta_accel.py, D91: banked SRAM buffers,
gather of each band-tile's difference rows, issue onto ``kaleido_dtop``, tagged drain) with its macros, built with
its band-tile queues ``kaleido_dqueue`` (hw/delta_queue.py, D93: band-tiles formed from host-written decision
codes; instantiated by name), ``kaleido_daccel_gate`` (``kaleido_daccel`` with the issue gate, D126), and
``kaleido_dcore`` (hw/delta_core.py, D95: ``kaleido_daccel_gate`` since D126, with the combine
stage's command generation and ``kaleido_dcombine_w<W>_v<V>_b3``, the delta combine unit on W accumulate ways, D107,
W = d by default, D108, with V output lanes, D112, V = `hw.delta_combine.default_out_ways` = W by default, D113, and
3 D buffers, D115, `hw.delta_combine.default_d_buffers`, emitted beside it; its row FIFO bypassed, D118; final ``Y`` rows, V a cycle) with its macros, the similarity front
``kaleido_dfront`` (hw/delta_front.py, D103: decisions and differences from raw X through ``kaleido_daccel``'s write
port) with its macros and ``kaleido_dcore_front`` (``kaleido_dcore`` with it, one output lane on
``kaleido_dcombine_w<W>``: final ``Y`` rows from raw X); a delta
config with a
weight stage also ``kaleido_daccel_stage_gate`` (``kaleido_daccel_stage`` with the issue gate, D129; the gateless
``kaleido_daccel_stage`` only on request, `OPTIONAL_ROLES`; D96: the controller on the host's band-tile list with D85's weight
stage, one weight buffer, the stage's 1r1w macros per column bank and three word registers per band) with its
macros, and ``kaleido_dcore_stage`` (D119: ``kaleido_dcore`` on ``kaleido_daccel_stage``, the weight stage and the
combine in one top, the organisation such a preset models; its combine ``kaleido_dcombine_w<W>_v<V>`` as
``kaleido_dcore``'s; since D129 with its issue hold, on ``kaleido_daccel_stage_gate``). A compact preset also gets
the compact organisation's op-level controller ``kaleido_caccel`` (hw/compact_accel.py, D97: the delta controller's
buffers, gather, band issue and tagged drain, X bytes; D109: one weight buffer read by band turn into three word
registers per band, on ``kaleido_ctop_ext`` with the early band choice) with its macros and its band-tile queues,
``kaleido_dqueue`` as the delta organisation's (instantiated by name), and ``kaleido_ccore`` (D97: ``kaleido_caccel``
with the combine stage's staged writes and command generation and ``kaleido_combine_w<W>``, the combine unit with
W ways, D104, emitted beside it; final ``Y`` rows), and the similarity front ``kaleido_cfront`` with
``kaleido_ccore_front`` (D103: ``kaleido_ccore`` from raw X).
The lockstep core and ``kaleido_accel`` are emitted for every preset.

The PE and the column are converted once each and instantiated by name (`hw.array`), so the
128x128 preset does not flatten 16,384 PE copies. Output is reproducible: no source attributes (absolute
paths) and no timestamps; files are written atomically. `main` runs the conversions through
`hw.rtl_build` (docs/decisions.md D80): in ``--jobs`` worker processes, each distinct module once across
the presets (the 128x128 presets share most of theirs), and a file whose inputs (the ``hw`` sources, the
toolchain versions, the config) and bytes are unchanged since the last run is kept (``--force``: convert
everything). The Verilog is the same bytes either way.

Usage: ``python -m hw.rtl [PRESET ...] [--out rtl_out] [--jobs N] [--force] [--verbose]`` (default: every
shipped preset).
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path

from amaranth.back import rtlil, verilog

from hw import discard
from hw.accel import ACCEL_MODULE_NAME, Accel
from hw.array import COLUMN_MODULE_NAME, DELAY_VERILOG, PE_MODULE_NAME, Column
from hw.combine import COMBINE_MODULE_NAME, Combine, combine_module_name
from hw.compact_accel import CACCEL_MODULE_NAME, CompactAccel
from hw.compact_array import CompactColumn, CompactTop, column_module_name, top_module_name
from hw.compact_core import CCORE_FRONT_MODULE_NAME, CCORE_MODULE_NAME, CompactCore, default_ways
from hw.compact_pe import CompactPE, pe_module_name
from hw.config import AcceleratorConfig, ConfigError, load_config, preset_names
from hw.core import CORE_MODULE_NAME, OPBUF_VERILOG, TileCore
from hw.delta_accel import (
    DACCEL_MODULE_NAME,
    DGATE_MODULE_NAME,
    DSGATE_MODULE_NAME,
    DSTAGE_MODULE_NAME,
    DeltaAccel,
)
from hw.delta_combine import (
    DCOMBINE_MODULE_NAME,
    DeltaCombine,
    dcombine_module_name,
    default_d_buffers,
    default_out_ways,
    delta_combine_sizes,
)
from hw.delta_combine import default_ways as default_dways
from hw.delta_core import (
    CLKGATE_MODULE_NAME,
    CLKGATE_VERILOG,
    DCORE_FRONT_MODULE_NAME,
    DCORE_MODULE_NAME,
    DCORE_STAGE_MODULE_NAME,
    DeltaCore,
    default_fifo_bypass,
    default_seg_local,
)
from hw.delta_front import CFRONT_MODULE_NAME, DFRONT_MODULE_NAME, DeltaFront
from hw.delta_queue import DQUEUE_MODULE_NAME
from hw.dispatcher.matcher import MATCHER_MODULE_NAME, Matcher
from hw.dispatcher.scheduler import Scheduler
from hw.pe import PE
from hw.rtl_build import HOW, build, default_jobs
from hw.similarity import SimilarityUnit
from hw.sram import emit_macro, macro_name
from hw.top import TOP_MODULE_NAME, Top

SIMILARITY_MODULE_NAME = "kaleido_similarity"
SCHEDULER_MODULE_NAME = "kaleido_scheduler"


#: Verilator -Wall waivers for patterns of Amaranth/Yosys-generated Verilog, each with its reason.
#: They are written inline at the top of every emitted file, so a bare ``verilator --lint-only -Wall``
#: run is clean; every other warning class stays enabled.
LINT_WAIVERS = (
    ("PROCASSINIT", "Amaranth declares each register with its reset value as initial value and "
                    "assigns it in the clocked process; the two agree by construction."),
    ("UNUSEDSIGNAL", "Amaranth keeps every named signal as a wire for debug visibility even where "
                     "Yosys routed the logic through another net, and PE/column outputs at the array "
                     "edge (last row's w lane, last column's x lane) have no consumer by design."),
    ("WIDTHEXPAND", "Amaranth sizes arithmetic results to hold every value (Python integer "
                    "semantics) and Yosys emits operands at their own widths; the extension is the "
                    "specified behaviour, checked bit-exactly by tests/test_pe.py and tests/test_rtl.py."),
    ("WIDTHTRUNC", "as WIDTHEXPAND: assignments to narrower signals are Amaranth's specified "
                   "truncation (accumulators are sized by hw.config.acc_bits to never overflow)."),
    ("CASEINCOMPLETE", "Amaranth FSMs (hw/dispatcher/scheduler.py) encode n states in ceil(log2 n) "
                       "bits and Yosys lists only the reachable codes; every case is preceded by the "
                       "default assignment of its outputs, so an unlisted code keeps the default."),
    ("DECLFILENAME", "each file holds one emitted module and its private submodules (named "
                     "parent.child by Amaranth)."),
)


def _header(cfg: AcceleratorConfig, what: str) -> str:
    lines = [
        f"// {what} for accelerator preset {cfg.name!r} ({cfg.array_rows}x{cfg.array_cols}, "
        f"acc {cfg.acc_bits} bits, {cfg.partial_regs} partial register pairs, "
        f"{cfg.drain_rows_per_cycle} output ports per column).",
        "// Generated by hw/rtl.py from the Amaranth description; do not edit.",
        "// Lint waivers for generated code (verilator --lint-only -Wall), with reasons:",
    ]
    for code, why in LINT_WAIVERS:
        lines.append(f"//   {code}: {why}")
        lines.append(f"/* verilator lint_off {code} */")
    return "\n".join(lines) + "\n"


#: The emitted modules by role: ``role: (module name or None, description, component factory)``. ``None``:
#: the organisation's own name (`hw.compact_pe.pe_module_name` and its siblings). A factory is given only
#: the config, so a conversion reads no more of it than the module does (`hw.rtl_build.recorded_reads`).
_MODULES = {
    "pe": (PE_MODULE_NAME, "Kaleido PE", lambda cfg: PE(cfg)),
    "column": (COLUMN_MODULE_NAME, "Kaleido array column (R PEs and output ports)",
               lambda cfg: Column(cfg, pe="instance")),
    "top": (TOP_MODULE_NAME, "Kaleido array top level", lambda cfg: Top(cfg, pe="instance")),
    "similarity": (SIMILARITY_MODULE_NAME, "Kaleido similarity unit (SAD and thresholds, R lanes)",
                   lambda cfg: SimilarityUnit(cfg)),
    "matcher": (MATCHER_MODULE_NAME, "Kaleido dispatcher: channel matcher", lambda cfg: Matcher(cfg)),
    "scheduler": (SCHEDULER_MODULE_NAME, "Kaleido dispatcher: tile scheduler (radix sort of reuse patterns)",
                  lambda cfg: Scheduler(cfg)),
    # The core's operand buffers are instances of the behavioural kaleido_opbuf (no initial
    # values, docs/decisions.md D25), appended to kaleido_core.v.
    "core": (CORE_MODULE_NAME, "Kaleido core: two banks of operand buffers and matchers + slot former + kaleido_top",
             lambda cfg: TileCore(cfg, pe="instance")),
    # The controller instantiates kaleido_core and its buffers' SRAM macros by name.
    "accel": (ACCEL_MODULE_NAME, "Kaleido op-level controller: banked SRAM buffers + similarity pass + scheduler + "
              "kaleido_core", lambda cfg: Accel(cfg, pe="instance")),
    # The banded datapath of the compact (D65) and delta (D73) organisations.
    "org_pe": (None, "Kaleido {org}-organisation PE", lambda cfg: CompactPE(cfg)),
    "org_column": (None, "Kaleido {org} array column (R PEs in bands, read-strobed output ports)",
                   lambda cfg: CompactColumn(cfg, pe="instance")),
    "org_top": (None, "Kaleido {org} array top level (bands, weight lanes, drain sequencers)",
                lambda cfg: CompactTop(cfg, pe="instance")),
    # The same top with the band choice from outside (D99): kaleido_daccel_stage hands out the numbers ahead.
    "org_top_ext": (None, "Kaleido {org} array top level (bands, weight lanes, drain sequencers; band-tile numbers "
                    "from the controller)", lambda cfg: CompactTop(cfg, pe="instance", choice="ext")),
    "combine": (COMBINE_MODULE_NAME, "Kaleido combine unit + partial-sum SRAM macros",
                lambda cfg: Combine(cfg, instance=True)),
    # The combine unit with W ways, as kaleido_ccore instantiates it (D104; W = hw.compact_core.default_ways).
    "combine_ways": (None, "Kaleido combine unit, {ways} ways (a command takes {ways} of a token's groups) + partial-sum "
                     "SRAM macros", lambda cfg: Combine(cfg, instance=True, ways=default_ways(cfg))),
    "dcombine": (DCOMBINE_MODULE_NAME, "Kaleido delta combine unit per axis class (D_a accumulate, S_a = S_a[nb] + "
                 "D_a, Y = sum S_a) + D, state-buffer and state-SRAM macros", lambda cfg: DeltaCombine(cfg, instance=True)),
    # The delta combine unit on W accumulate ways, as kaleido_dcore instantiates it (D107, D108; W =
    # hw.delta_combine.default_ways).
    "dcombine_ways": (None, "Kaleido delta combine unit per axis class, {dways} accumulate ways (D banked by (class, "
                      "token)) + D, state-buffer and state-SRAM macros",
                      lambda cfg: DeltaCombine(cfg, instance=True, ways=default_dways(cfg))),
    # The same unit with V output lanes and n D buffers, as kaleido_dcore instantiates it (D112, D113; V =
    # hw.delta_combine.default_out_ways; D115: n = default_d_buffers); kaleido_dcore_front keeps the unit above.
    "dcombine_lanes": (None, "Kaleido delta combine unit per axis class, {dways} accumulate ways (D banked by (class, "
                       "token)), {dlanes} output lanes (carried stores in position banks), {dbufs} D buffers + D, "
                       "state-buffer and state-SRAM macros",
                       lambda cfg: DeltaCombine(cfg, instance=True, ways=default_dways(cfg),
                                                out_ways=default_out_ways(cfg), buffers=default_d_buffers(cfg))),
    # The delta organisation's op-level controller (D91): instantiates kaleido_dtop and its macros by name.
    # With its queues (D93): it instantiates kaleido_dqueue by name, which forms the band-tiles from the decisions.
    "daccel": (DACCEL_MODULE_NAME, "Kaleido delta op-level controller: banked SRAM buffers (differences, weights, "
               "staging) + kaleido_dqueue + gather + band issue onto kaleido_dtop + tagged drain",
               lambda cfg: DeltaAccel(cfg, pe="instance", queues=True)),
    # The delta controller with its weight stage (D96): the host's band-tile list with stage fields, one weight
    # buffer, the stage's 1r1w macros per column bank, serial fills, three word registers per band (configs with a
    # weight stage and a difference-sum buffer).
    "dstage": (DSTAGE_MODULE_NAME, "Kaleido delta op-level controller with its weight stage: banked SRAM buffers "
               "(differences, one weight buffer, band-tile list, staging) + weight stage (1r1w half-word macros per "
               "column bank, serial fills per segment) + three word registers per band and column (reads deferred to "
               "a lagging band) + gather + band issue onto kaleido_dtop_ext (bands chosen ahead) + tagged drain",
               lambda cfg: DeltaAccel(cfg, pe="instance", stage=True)),
    # The same controller with the issue gate (D126): its next descriptor out, the take gated by the core's issue_ok
    # (kaleido_dcore's issue hold).
    "daccel_gate": (DGATE_MODULE_NAME, "Kaleido delta op-level controller with the issue gate: kaleido_daccel with its "
                    "next descriptor out (the queues' output register) and its take gated by issue_ok",
                    lambda cfg: DeltaAccel(cfg, pe="instance", queues=True, issue_gate=True)),
    # The staged controller with the issue gate (D126; kaleido_dcore_stage's issue hold, the default since D129,
    # as the compiled engine's CoreEngine(stage=True)): the host's list read ahead, the take gated by issue_ok.
    "dstage_gate": (DSGATE_MODULE_NAME, "Kaleido delta op-level controller with its weight stage and the issue gate: "
                    "kaleido_daccel_stage with its next descriptor read ahead and its take gated by issue_ok",
                    lambda cfg: DeltaAccel(cfg, pe="instance", stage=True, issue_gate=True)),
    "dqueue": (DQUEUE_MODULE_NAME, "Kaleido delta band-tile queues: decision-buffer SRAM macro + per-group COMPUTE/"
               "PARTIAL queues + flushes, descriptors in the delta issue order",
               lambda cfg: discard(DeltaAccel(cfg, pe="instance", queues=True)).queue),
    # The compact organisation's op-level controller (D97): instantiates kaleido_ctop, kaleido_dqueue and its macros
    # by name; kaleido_dqueue is the delta organisation's queue module, sized by this controller.
    "caccel": (CACCEL_MODULE_NAME, "Kaleido compact op-level controller: banked SRAM buffers (X bytes, one weight "
               "buffer read by band turn into three word registers per band, staging) + kaleido_dqueue + gather + "
               "band issue onto kaleido_ctop_ext (bands chosen ahead) + tagged drain",
               lambda cfg: CompactAccel(cfg, pe="instance", queues=True)),
    "cqueue": (DQUEUE_MODULE_NAME, "Kaleido band-tile queues (compact issue order with c_s = 1): decision-buffer SRAM "
               "macro + per-group COMPUTE/PARTIAL queues + flushes",
               lambda cfg: discard(CompactAccel(cfg, pe="instance", queues=True)).queue),
    # The compact controller with its combine stage (D97): kaleido_caccel + staged writes and commands +
    # kaleido_combine, both instantiated by name, with its own macros (tile table, decision copies, where and head tables).
    "ccore": (CCORE_MODULE_NAME, "Kaleido compact controller with its combine stage: kaleido_caccel + tile table + "
              "staged writes + output command walk + kaleido_combine, final Y rows",
              lambda cfg: CompactCore(cfg, pe="instance")),
    # The delta controller with its combine stage (D95): kaleido_daccel + command generation + kaleido_dcombine,
    # both instantiated by name, with its own macros (tile table, decision copies, row FIFO, seen bits).
    "dcore": (DCORE_MODULE_NAME, "Kaleido delta controller with its combine stage: kaleido_daccel + tile table + "
              "row FIFO + accumulate and output command generation + kaleido_dcombine on its accumulate ways, final Y rows",
              lambda cfg: DeltaCore(cfg, pe="instance", out_ways=default_out_ways(cfg),
                                    d_buffers=default_d_buffers(cfg), fifo_bypass=default_fifo_bypass(cfg),
                                    array_hold=True, issue_hold=True)),
    # The same core on the staged controller (D119): kaleido_daccel_stage (the host's band-tile list with stage
    # fields) + the same command generation + kaleido_dcombine on its ways and lanes (configs with a weight stage),
    # on the same D buffers (D115) and FIFO bypass (D118) as kaleido_dcore; its issue hold by default (D129:
    # kaleido_daccel_stage_gate, the cycle model's sim.timing.delta_core.stage_core); its D buffers addressed per
    # segment (D125, D132: default_seg_local), a ring of segment slots (D138: the issue hold's bound the op's o_slots).
    "dcore_stage": (DCORE_STAGE_MODULE_NAME, "Kaleido delta controller with its weight stage and combine stage: "
                    "kaleido_daccel_stage_gate + tile table + row FIFO + accumulate and output command generation "
                    "+ kaleido_dcombine on its accumulate ways and output lanes, the issue hold, final Y rows",
                    lambda cfg: DeltaCore(cfg, pe="instance", stage=True, out_ways=default_out_ways(cfg),
                                          d_buffers=default_d_buffers(cfg), fifo_bypass=default_fifo_bypass(cfg),
                                          array_hold=True, seg_local=default_seg_local(cfg), issue_hold=True)),
    # The similarity pass in front of kaleido_daccel (D103): decisions and differences from raw X, written through
    # the controller's write port; and kaleido_dcore with it (the host writes raw X), both instantiating by name.
    "dfront": (DFRONT_MODULE_NAME, "Kaleido similarity front of the delta controller: X and effective-value SRAM "
               "macros + similarity unit (SAD, thresholds) + effective values, differences and decision codes through "
               "kaleido_daccel's write port",
               lambda cfg: DeltaFront(discard(DeltaAccel(cfg, pe="instance", queues=True)), pe="instance")),
    "dcore_front": (DCORE_FRONT_MODULE_NAME, "Kaleido delta controller with its similarity front and combine stage: "
                    "kaleido_dfront + kaleido_daccel + tile table + row FIFO + command generation + kaleido_dcombine on its ways, "
                    "final Y rows from raw X", lambda cfg: DeltaCore(cfg, pe="instance", front=True)),
    # The same front before kaleido_caccel (D103: decisions and X bytes), and kaleido_ccore with it.
    "cfront": (CFRONT_MODULE_NAME, "Kaleido similarity front of the compact controller: X and effective-value SRAM "
               "macros + similarity unit (SAD, thresholds) + effective values, X bytes and decision codes through "
               "kaleido_caccel's write port",
               lambda cfg: DeltaFront(discard(CompactAccel(cfg, pe="instance", queues=True)), pe="instance")),
    "ccore_front": (CCORE_FRONT_MODULE_NAME, "Kaleido compact controller with its similarity front and combine "
                    "stage: kaleido_cfront + kaleido_caccel + tile table + staged writes + output command walk + "
                    "kaleido_combine, final Y rows from raw X",
                    lambda cfg: CompactCore(cfg, pe="instance", front=True)),
}
_ORG_NAMES = {"org_pe": pe_module_name, "org_column": column_module_name, "org_top": top_module_name,
              "org_top_ext": lambda cfg: top_module_name(cfg, ext=True),
              "combine_ways": lambda cfg: combine_module_name(default_ways(cfg)),
              "dcombine_ways": lambda cfg: dcombine_module_name(default_dways(cfg)),
              "dcombine_lanes": lambda cfg: dcombine_module_name(default_dways(cfg), default_out_ways(cfg),
                                                                 default_d_buffers(cfg))}


#: Roles built only on request (`plan`'s ``optional``): modules no default core instantiates, which the compiled
#: engine may still build (``kaleido_daccel_stage`` without the issue gate: `CoreEngine(stage=True,
#: issue_hold=False)`, D129). `make rtl` leaves them out: 32.9 s of CPU on the balanced preset, and all four presets
#: in 149 s instead of 181 s (docs/decisions.md D129, "After the merge").
OPTIONAL_ROLES = ("dstage",)


def plan(cfg: AcceleratorConfig, optional: bool = False) -> list[tuple[str, tuple, str]]:
    """The files `emit` writes for `cfg`, in order: ``(module name, spec, description)`` (`hw.rtl_build`):
    PE, column, top, similarity unit, matcher, scheduler, core, the op-level controller, the organisation's
    PE, column, top and combine unit (compact and delta presets), the compact controller and its queues (compact
    presets) or the delta controller (delta presets, with and without the issue gate, D126; with a weight stage also
    `kaleido_dtop_ext`, `kaleido_daccel_stage_gate`, D96, D99, D129, and `kaleido_dcore_stage`, D119), then the
    SRAM macros in `hw.sram.macro_name` order (the lockstep controller's, then the combine unit's, then the
    organisation's controller's). A module's spec is
    ``("module", role)``, a macro's ``("macro", kind, depth, width, lane)``, the delta core's clock gate's
    ``("clkgate",)`` (`hw.delta_core.CLKGATE_VERILOG`, after the modules, docs/decisions.md D123). ``optional``:
    also `OPTIONAL_ROLES`' modules."""
    roles = ["pe", "column", "top", "similarity", "matcher", "scheduler", "core", "accel"]
    macros = list(discard(Accel(cfg, pe="instance")).macros())
    if cfg.organisation in ("compact", "delta"):
        combine = "dcombine" if cfg.organisation == "delta" else "combine"
        roles += ["org_pe", "org_column", "org_top", combine]
        unit = Combine if combine == "combine" else DeltaCombine
        macros += [mc for mc in discard(unit(cfg)).macros() if mc not in macros]
    if cfg.organisation == "compact":
        if default_ways(cfg) > 1:  # kaleido_ccore's combine (D104)
            roles += ["combine_ways"]
            macros += [mc for mc in discard(Combine(cfg, ways=default_ways(cfg))).macros() if mc not in macros]
        roles += ["org_top_ext", "caccel", "cqueue", "ccore", "cfront", "ccore_front"]  # caccel on ctop_ext (D109)
        acc = discard(CompactAccel(cfg, pe="instance", queues=True))
        macros += [mc for mc in acc.macros() if mc not in macros]
        macros += [mc for mc in discard(CompactCore(cfg, pe="instance")).macros() if mc not in macros]
        macros += [mc for mc in discard(DeltaFront(acc, pe="instance")).macros() if mc not in macros]
    if cfg.organisation == "delta":
        if default_dways(cfg) > 1:  # kaleido_dcore's combine (D107, D108)
            roles += ["dcombine_ways"]
            macros += [mc for mc in discard(DeltaCombine(cfg, ways=default_dways(cfg))).macros() if mc not in macros]
        if default_out_ways(cfg) > 1:  # kaleido_dcore's combine with output lanes (D112, D113)
            roles += ["dcombine_lanes"]
            macros += [mc for mc in discard(DeltaCombine(cfg, ways=default_dways(cfg), out_ways=default_out_ways(cfg),
                                                         buffers=default_d_buffers(cfg))).macros() if mc not in macros]
        roles += ["daccel", "daccel_gate", "dqueue", "dcore", "dfront", "dcore_front"]
        acc = discard(DeltaAccel(cfg, pe="instance", queues=True))
        macros += [mc for mc in acc.macros() if mc not in macros]
        macros += [mc for mc in discard(DeltaCore(cfg, pe="instance", out_ways=default_out_ways(cfg),
                                                  d_buffers=default_d_buffers(cfg),
                                                  fifo_bypass=default_fifo_bypass(cfg))).macros() if mc not in macros]
        macros += [mc for mc in discard(DeltaCore(cfg, pe="instance")).macros() if mc not in macros]  # the front's
        macros += [mc for mc in discard(DeltaFront(acc, pe="instance")).macros() if mc not in macros]
        if cfg.wstage_sram_kib and cfg.diff_sram_kib:  # the weight stage (D96)
            roles += ["org_top_ext", *(["dstage"] if optional else []), "dstage_gate", "dcore_stage"]
            macros += [mc for mc in discard(DeltaAccel(cfg, pe="instance", stage=True)).macros() if mc not in macros]
            macros += [mc for mc in discard(DeltaCore(cfg, pe="instance", stage=True, out_ways=default_out_ways(cfg),
                                                      d_buffers=default_d_buffers(cfg),
                                                      fifo_bypass=default_fifo_bypass(cfg),
                                                      seg_local=default_seg_local(cfg), issue_hold=True)).macros()
                       if mc not in macros]  # kaleido_dcore_stage's own (D119; its D buffers and bypass, D115, D118;
            # the token chunks and tile table wider by seg_local's first tokens, D125, D132)
    parts = []
    for role in roles:
        name, what, _ = _MODULES[role]
        parts.append((name or _ORG_NAMES[role](cfg), ("module", role),
                      what.format(org=cfg.organisation, ways=default_ways(cfg),
                                  dways=default_dways(cfg) if cfg.organisation == "delta" else 1,
                                  dlanes=default_out_ways(cfg) if cfg.organisation == "delta" else 1,
                                  dbufs=default_d_buffers(cfg) if cfg.organisation == "delta" else 2)))
    if cfg.organisation == "delta":  # kaleido_dcore's array hold: the clock gate of its controller (D123)
        parts.append((CLKGATE_MODULE_NAME, ("clkgate",), ""))
    parts += [(macro_name(*mc), ("macro", *mc), "") for mc in macros]
    return parts


def convert(cfg: AcceleratorConfig, name: str, spec: tuple) -> str:
    """Verilog of one part of `plan` (without the file header of `render`): Amaranth's conversion with no
    source attributes, plus the behavioural `OPBUF_VERILOG` after the core and `DELAY_VERILOG` after the top
    (the skew/de-skew shift registers, hw.array D30; kaleido_ctop uses them too). A macro reads nothing of
    `cfg` (`hw.sram.emit_macro`)."""
    if spec[0] == "macro":
        return emit_macro(*spec[1:])
    if spec[0] == "clkgate":  # hand-written (hw.delta_core.CLKGATE_VERILOG, D123)
        return CLKGATE_VERILOG
    text = verilog.convert(_MODULES[spec[1]][2](cfg), name=name, emit_src=False)
    if name == CORE_MODULE_NAME:
        text += "\n" + OPBUF_VERILOG
    if name == TOP_MODULE_NAME:
        text += "\n" + DELAY_VERILOG
    return text


def rtlil_text(cfg: AcceleratorConfig, name: str) -> str:
    """RTLIL of the emitted module `name` (``kaleido_pe``, ``kaleido_column``, ...): the same Amaranth
    conversion, without source attributes, that `convert` hands to Yosys for its Verilog (Amaranth's
    ``verilog.convert`` is this RTLIL through ``proc -nomux -norom; memory_collect; write_verilog``). For
    tools that derive another form of the design from it (`sim.engines.verilator_build`, D87).

    Raises:
        KeyError: `name` is not one of `_MODULES`' fixed names (the organisation's own modules and the SRAM
            macros have none).
    """
    roles = [role for role, (n, _, _) in _MODULES.items() if n == name]
    if not roles:
        raise KeyError(f"no emitted module named {name!r}")
    return rtlil.convert(_MODULES[roles[0]][2](cfg), name=name, emit_src=False)


def render(cfg: AcceleratorConfig, name: str, spec: tuple, what: str, text: str) -> str:
    """The file text of one part: `_header` and `text`; a macro's file is its own (`hw.sram.emit_macro`)."""
    return text if spec[0] in ("macro", "clkgate") else _header(cfg, what) + text


def emit(cfg: AcceleratorConfig, out_dir: Path, only: tuple[str, ...] | None = None,
         optional: bool = False) -> list[Path]:
    """Write one ``<module>.v`` per part of `plan` for `cfg` into `out_dir`, converting in this process
    (module docstring); returns the paths written, in `plan` order.
    ``only``: module names to emit (default: all); names not listed here are ignored. ``optional``: `plan`'s.

    Raises:
        OSError: a file cannot be written.
    """
    [files] = build([(cfg, out_dir)], functools.partial(plan, optional=optional), convert, render, only=only)
    return [path for path, _ in files]


def organisation_note(cfg: AcceleratorConfig) -> str:
    """The note `main` prints after emitting a compact or delta config: which of its modules are what, one line per
    top (every ``kaleido_*`` module it names is in `plan`, tests/test_rtl_build.py), the first line the datapath."""
    if cfg.organisation == "delta":
        lanes = dcombine_module_name(default_dways(cfg), default_out_ways(cfg), default_d_buffers(cfg))
        bufs = (f"{default_d_buffers(cfg)} D buffers" + (f" of diff_sram_kib / {default_d_buffers(cfg)} each, the "
                "state buffer all of psum_sram_kib" if cfg.diff_sram_kib else ""))
        staged = bool(cfg.wstage_sram_kib and cfg.diff_sram_kib)
        engine = "kaleido_dcore_stage" if staged else "kaleido_dcore"
        lines = [
            f"its PE, array and combine unit: {pe_module_name(cfg)}, {column_module_name(cfg)}, "
            f"{top_module_name(cfg)}, {DCOMBINE_MODULE_NAME} (D73, D79; {DCOMBINE_MODULE_NAME}, the one-way unit, "
            "is emitted on its own" + (", in no core" if default_dways(cfg) > 1 else "") + ")",
            "kaleido_daccel: the op-level controller (banked buffers written by a host port, band-tiles formed by its "
            "queues kaleido_dqueue from host-written decisions, gather, band issue, tagged drain; D91, D93); "
            "kaleido_daccel_gate the same with the issue gate (D126)",
            f"kaleido_dcore: kaleido_daccel_gate + the combine stage on {lanes} ({default_dways(cfg)} accumulate "
            f"ways, {default_out_ways(cfg)} output lanes, {bufs}), final Y rows; each segment walked while later "
            "ones accumulate" + ("; the row FIFO bypassed" if default_fifo_bypass(cfg) else "")
            + "; the controller's clock gated by kaleido_clkgate while the row FIFO is short of room (D123), its "
            "take held while the next descriptor's segment is NB_BANKS or more past the walk (D126); D95-D126",
        ]
        if staged:
            lines.append("kaleido_dcore_stage: the same combine stage and both holds on kaleido_daccel_stage_gate "
                         "(the controller on the host's band-tile list with the weight stage, on kaleido_dtop_ext, "
                         "its take gated; D96-D100, D119, D129)"
                         + (", its D buffers addressed per segment, a ring of segment slots (as many segments a "
                            f"buffer as fit, at most 8, on its {default_d_buffers(cfg)} buffers; the take held while the "
                            "next descriptor's segment is the op's slots past the walk; D125, D132, D138)"
                            if default_seg_local(cfg) else "") + ", combine "
                         f"{lanes} (the staged controller without the gate is built only by the compiled engine's "
                         "issue_hold=False)")
        lines.append("kaleido_dcore_front: kaleido_dfront (the similarity unit: decisions and differences from raw X) "
                     f"before kaleido_daccel, combine {dcombine_module_name(default_dways(cfg))} (one output lane, "
                     "2 D buffers" + (" of diff_sram_kib / 2 each" if cfg.diff_sram_kib else "")
                     + "; no holds; D103)")
        lines.append(f"`kaleido simulate T.npz -c <this config> --engine rtl` runs {engine}")
    else:
        lines = [
            f"its PE, array and combine unit: {pe_module_name(cfg)}, {column_module_name(cfg)}, "
            f"{top_module_name(cfg)}, {COMBINE_MODULE_NAME} (D65)",
            "kaleido_caccel: the op-level controller (band-tiles formed by its queues kaleido_dqueue from "
            "host-written decisions; X bytes host-written; one weight buffer read by band turn; tagged drained rows; "
            "D97, D109)",
            "kaleido_ccore: kaleido_caccel + the combine stage's staged writes and commands (one pool of positions, a "
            "column block walked once staged, on d combine ways; D97, D104), final Y rows",
            "kaleido_ccore_front: kaleido_cfront (decisions from raw X) before kaleido_ccore (D103)",
            "`kaleido simulate T.npz -c <this config> --engine rtl` runs kaleido_ccore",
        ]
    lines.append("kaleido_core and kaleido_accel beside them are the lockstep organisation's")
    return f"{cfg.name}'s array organisation is {cfg.organisation!r}:\n" + "\n".join(f"  {ln}" for ln in lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hw.rtl", description=__doc__.splitlines()[0])
    ap.add_argument("presets", nargs="*", help=f"presets or TOML files (default: {', '.join(preset_names())})")
    ap.add_argument("--out", default="rtl_out", type=Path, help="output root (default rtl_out)")
    ap.add_argument("--jobs", "-j", type=int, default=default_jobs(),
                    help=f"worker processes converting modules in parallel (default {default_jobs()}: this "
                         "machine's CPUs, at most 3: each takes up to about 1 GB)")
    ap.add_argument("--verbose", "-v", action="store_true", help="print each conversion's CPU seconds")
    ap.add_argument("--force", action="store_true",
                    help="convert every module again, even where the folder's cache manifest (.kaleido-rtl.json) "
                         "says the file is up to date")
    args = ap.parse_args(argv)
    try:
        cfgs = [load_config(p) for p in (args.presets or preset_names())]
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    seen: dict[str, AcceleratorConfig] = {}
    for cfg, arg in zip(cfgs, args.presets or [c.name for c in cfgs], strict=True):
        if seen.setdefault(cfg.name, cfg) != cfg:
            print(f"error: two configs are named {cfg.name!r} and would write into the same folder "
                  f"{args.out / cfg.name}: give each TOML its own `name`", file=sys.stderr)
            return 2
        if arg != cfg.name and cfg.name in preset_names() and cfg != load_config(cfg.name):
            print(f"error: {arg} is named {cfg.name!r}, a shipped preset, but differs from it: its Verilog would "
                  f"mix with the preset's in {args.out / cfg.name}; give it its own `name`", file=sys.stderr)
            return 2
    for parent in (args.out, *args.out.parents):  # the nearest existing ancestor must be a folder
        if parent.exists():
            if not parent.is_dir():
                print(f"error: cannot write Verilog under {args.out}: {parent} is a file, not a folder",
                      file=sys.stderr)
                return 2
            break
    if args.jobs < 1:
        print(f"error: --jobs must be at least 1, got {args.jobs}", file=sys.stderr)
        return 2
    for cfg in cfgs:  # the delta combine's buffers (D73, D122): refused before anything is written
        if cfg.organisation == "delta":
            try:
                w = default_dways(cfg)
                for ways, lanes, n in ((1, 1, 2), (w, 1, 2), (w, default_out_ways(cfg), default_d_buffers(cfg))):
                    delta_combine_sizes(cfg, ways, lanes, n)
            except ValueError as err:
                print(f"error: {err}", file=sys.stderr)
                return 2
    t0 = time.perf_counter()
    try:
        files = build([(cfg, args.out / cfg.name) for cfg in cfgs], plan, convert, render,
                      jobs=args.jobs, cache=True, force=args.force, log=print if args.verbose else None)
    except OSError as err:
        print(f"error: cannot write Verilog under {args.out}: {err.strerror or err}", file=sys.stderr)
        return 2
    for cfg, paths in zip(cfgs, files, strict=True):
        if args.verbose:
            sizes = ", ".join(f"{p} ({p.stat().st_size / 1e3:,.0f} kB{'' if how == 'converted' else ', ' + how})"
                              for p, how in paths)
            print(f"{cfg.name}: {sizes}")
        else:
            hows = ", ".join(f"{n} {how}" for how in HOW if (n := sum(h == how for _, h in paths)))
            kb = sum(p.stat().st_size for p, _ in paths) / 1e3
            print(f"{cfg.name} ({cfg.organisation}): {len(paths)} files, {kb:,.0f} kB in {args.out / cfg.name} "
                  f"({hows}; -v lists them)")
        if cfg.organisation in ("compact", "delta"):
            print(f"note: {organisation_note(cfg)}")
    count = {how: sum(h == how for paths in files for _, h in paths) for how in HOW}
    print(f"{sum(map(len, files))} files in {time.perf_counter() - t0:.1f} s with {args.jobs} worker "
          f"process{'es' if args.jobs > 1 else ''}: {count['converted']} converted, {count['reused']} the same "
          f"module as another preset's (reused), {count['kept']} unchanged since the last run (kept)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
