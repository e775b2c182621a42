"""The op-level controllers' memories and register banks as the RTL builds them, and what the cost model charges
for them (docs/decisions.md D101).

The banded organisations' controllers (hw/delta_accel.py ``kaleido_daccel`` / ``kaleido_daccel_stage``,
hw/compact_accel.py ``kaleido_caccel``, hw/delta_queue.py ``kaleido_dqueue``, hw/delta_core.py ``kaleido_dcore``,
hw/compact_core.py ``kaleido_ccore``, and the ``out_tile`` delay of hw/compact_array.py's tops) hold buffers,
tables and registers that `sim.cost.area` and `sim.cost.energy` did not charge before D101. `inventory` lists every
memory macro and every register or comparator bank of them as a function of the config, with the rule the RTL
sizes it by (the formulas are written from the configs' fields here; tests/test_controller_cost.py checks them
against the macros and registers of the elaborated designs), and which model term charges it:

- ``charged`` = a `sim.cost.area` component that already charged it at the model's full size before D101
  (``sram_input``: the difference / X buffer is the input SRAM's role; ``sram_weight``, ``sram_wstage``,
  ``band_weight_lanes``: the weight buffer, the stage, the word registers);
- ``ctrl_staging``, ``ctrl_weight_copies``, ``ctrl_tables``, ``ctrl_registers``: charged since D101 (`area_um2`);
- ``None``: not charged, with the reason in ``note``.

Which controller a config runs (`controller`): the delta organisation with a weight stage and a difference-sum
buffer (the balanced preset) runs ``kaleido_daccel_stage`` (the early band choice of D99 and D100's deferred read,
on ``kaleido_dtop_ext``) with the queues (``kaleido_dqueue``) standing for its host-written band-tile list (D93: the
queues' RTL replaces the list; the staged controller's stage fields are not formed by the queues yet, D96) and
``kaleido_dcore``'s tables; a delta config without a stage runs ``kaleido_daccel`` with its queues; the compact
organisation ``kaleido_caccel`` with its queues and ``kaleido_ccore``'s tables. The lockstep organisation has none
of these (its controller, hw/accel.py, is charged as before).

The similarity front (hw/delta_front.py ``kaleido_dfront`` / ``kaleido_cfront``, D103), which `hw.rtl` emits for the
unstaged delta and the compact controller, is listed with its two buffers and charged ``None``: the model runs the
similarity pass of D23 and D31 instead (X read in the input SRAM, its X_eff state of a few KiB kept there, its lanes
in ``dispatcher``, its time overlapped with the array), not this serial first slice, whose X copy and
effective-value buffer are each as large as the controller's X buffer (256 tokens x 16 words on the examples).

Sizes: the RTL sizes its staging macros, tables and registers by the controller's capacity (``accel_max_tokens``,
``accel_max_k``, ``accel_max_n`` and `hw.delta_accel.MAX_TILES` band-tiles), a slice's capacity, not a 480p op's
(D91, D93: a 480p op needs streaming). They are charged at that size, as built. The one exception is the weight
copies of the unstaged delta controller: a band's copy holds what the weight buffer holds, and the model's weight
buffer is the weight SRAM (``weight_sram_kib``), so a copy is charged as a weight SRAM (`area_um2`). The compact
controller has one weight buffer since D109 (`weight_copies`).

Costs reuse the technology table's rows (`sim.cost.tech`): ``sram_bit`` per macro bit (the rule every SRAM of
`sim.cost.area` follows; a small macro's periphery is a larger share than the table's 0.5 array efficiency, so
the small macros here are if anything under-charged), ``reg_bit`` per register bit, ``add_bit`` per comparator
or adder bit (a comparator is a subtractor's carry chain), ``mux2_bit`` per 2:1 multiplexer bit (an n-to-1 read of b
bits is (n - 1) b of them). Per access, a macro of ``kib`` KiB costs
`sim.cost.energy.sram_access_pj` per 64-bit access (`access_pj_per_byte`), the rule of every SRAM of the model.
"""

from __future__ import annotations

from hw.config import AcceleratorConfig
from hw.sram import index_bits as _bits
from hw.sram import pow2ceil as _pow2ceil
from hw.sram import split_banks

#: The controller's differences (delta, `hw.pe.X_BITS` = 9 bits) or operand bytes (compact, 8) per lane, its lanes
#: P (`hw.delta_accel.LANES` = 32) and weight channels per word of the unstaged weight buffer
#: (`hw.delta_accel.WEIGHT_LANES` = 2), the band-tile number's bits (`hw.compact_array.TILE_BITS` = 24), the early
#: choice's cycle numbers (`hw.delta_accel.EXPECT_BITS` = 32), the row FIFO's entries per drain port
#: (`hw.delta_core.FIFO_PER_PORT` = 8), the compact core's column blocks (`hw.compact_core.MAX_CB` = 4), the
#: band-tiles a controller holds (`hw.delta_accel.MAX_TILES` = 1,024), the bits of a decision code
#: (`hw.delta_queue.CODE_BITS` = 2) and ``kaleido_dcore``'s segment count banks (`hw.delta_core.NB_BANKS` = 8, D104):
#: restated here so that the inventory is written from the config, not read off
#: the designs it is tested against (tests/test_controller_cost.py imports the RTL's and compares).
DELTA_LANE_BITS, COMPACT_LANE_BITS, LANES, WEIGHT_LANES = 9, 8, 32, 2
TILE_BITS, EXPECT_BITS, FIFO_PER_PORT, MAX_CB, MAX_TILES, CODE_BITS = 24, 32, 8, 4, 1024, 2
#: `kaleido_dcore`'s per-segment row-count banks (`hw.delta_core.NB_BANKS` = 8, D104) and a weight's bits
#: (`hw.pe.W_BITS` = 8, int8 weights): restated for the same reason.
NB_BANKS = 8
W_BITS = 8
#: `kaleido_dcore`'s axis classes at most (`hw.delta_core.MAX_CLASSES` = 3), which sizes a segment-local slot
#: (docs/decisions.md D125): restated for the same reason.
MAX_CLASSES = 3
#: `kaleido_dcore`'s row-FIFO pointers' bits (``fifo_wp`` / ``fifo_rp``, 16 in hw/delta_core.py), which the array
#: hold compares (docs/decisions.md D123): restated for the same reason.
PTR_BITS = 16
#: Word registers per band and column of the staged controller (hw/delta_accel.py ``_stage_band``, D94, D96), as
#: `sim.timing.compact.WORD_REGISTERS` charges them.
WORD_REGISTERS = 3

#: (The staged controller's weight-stage reads and fills, charged as D92's count x a measured ratio,
#: ``STAGE_READ_RATIO`` = 1.58, from D101 until D127, are counted per op since D127: `sim.timing.delta_accel.stage_run`,
#: the cycle model's schedule of ``kaleido_daccel_stage``, charged by `sim.cost.compact_actions`.)

#: (The compact controller's weight-buffer reads, D109's measured `PORT_READ_SHARE`, are counted per op since D117:
#: `sim.timing.compact_accel.op_port`, charged by `sim.cost.compact_actions`.)

#: The `sim.cost.area` components D101 added (module docstring).
AREA_COMPONENTS = ("ctrl_staging", "ctrl_weight_copies", "ctrl_tables", "ctrl_registers")


def controller(cfg: AcceleratorConfig) -> str | None:
    """The controller the config's organisation runs (module docstring): ``"delta_stage"``, ``"delta"``,
    ``"compact"`` or None (lockstep)."""
    if cfg.organisation == "compact":
        return "compact"
    if cfg.organisation == "delta":
        return "delta_stage" if staged(cfg) else "delta"
    return None


def staged(cfg: AcceleratorConfig) -> bool:
    """The delta organisation with a weight stage and a difference-sum buffer (D85, D96): `kaleido_daccel_stage`."""
    return cfg.organisation == "delta" and cfg.wstage_sram_kib > 0 and cfg.diff_sram_kib > 0


def weight_copies(cfg: AcceleratorConfig) -> int:
    """Weight buffers the controller reads: one per band on the delta controller without a weight stage (D91: each
    band reads its own copy every slot), one with the stage (D96) and on the compact controller (D109: the one
    weight buffer read by band turn into the bands' word registers, D88)."""
    return cfg.compact_bands if controller(cfg) == "delta" else 1


def word_path(cfg: AcceleratorConfig) -> bool:
    """The controller's bands take their weights through word registers read by band turn, with the early band
    choice and the deferred read (D94, D99, D100): the staged delta controller (from its stage, D96) and the compact
    controller (from its weight buffer, D109)."""
    return controller(cfg) in ("delta_stage", "compact")


def sizes(cfg: AcceleratorConfig) -> dict[str, int]:
    """The controller's size parameters (hw/delta_accel.py ``DeltaAccel.__init__``'s rules, restated): P, S = 2 B
    staging entries, ``brows`` = R / B, XW / KW / KWW / KWH words, ``max_nb`` column blocks, ``tb`` token bits,
    ``halves`` stage half-words per column bank, and ``desc_bits`` (the descriptor word; with the stage fields
    where `staged`)."""
    R, C, B, G = cfg.array_rows, cfg.array_cols, cfg.compact_bands, cfg.partial_regs  # noqa: N806
    P, S, brows = LANES, 2 * B, R // B  # noqa: N806
    mt, mk, mn = cfg.accel_max_tokens, cfg.accel_max_k, cfg.accel_max_n
    z = {"P": P, "S": S, "brows": brows, "XW": _pow2ceil(-(-mk // P)), "KW": _pow2ceil(-(-mk // P) + G),
         "KWW": _pow2ceil(-(-mk // WEIGHT_LANES) + G), "KWH": _pow2ceil(-(-mk // B) + G), "max_nb": -(-mn // C),
         "tb": _bits(mt), "halves": cfg.wstage_sram_kib * 1024 // C // B if cfg.organisation == "delta" else 0}
    # woff: a word of 2 channels in KWW, or on the compact controller's weight port a half-word in KWH (D109)
    fields = [_bits(brows + 1), _bits(brows + 1), _bits(mk + 1), 1, _bits(z["max_nb"]), _bits(z["KW"]),
              _bits(z["XW"] + 1), _bits(z["KWH"] if controller(cfg) == "compact" else z["KWW"]), brows * z["tb"]]
    z["queue_desc_bits"] = sum(fields)  # the queues' descriptor (hw/delta_queue.py: no stage fields)
    z["entry_bits"] = sum(fields) - fields[5] - fields[6] - fields[8]  # held per entry: all but xoff, xwords, tokens
    if staged(cfg):  # seg, sbuf, fsrc, fcount, fdst, saddr (D96)
        h = z["halves"]
        fields += [1, _bits(h), _bits(_pow2ceil(z["max_nb"] * z["KWH"])), _bits(z["KWH"] + 1), _bits(h), _bits(h)]
        z["entry_bits"] += sum(fields[-6:])
    z["desc_bits"] = sum(fields)
    return z


def _macro(module: str, part: str, kind: str, depth: int, width: int, copies: int, charged: str | None,
           note: str = "") -> dict:
    bank, n = split_banks(depth, width)
    return {"module": module, "part": part, "kind": kind, "depth": bank, "width": width, "count": copies * n,
            "bits": copies * n * bank * width, "charged": charged, "note": note}


def _bank(module: str, part: str, kind: str, bits: int, charged: str | None, note: str = "") -> dict:
    return {"module": module, "part": part, "kind": kind, "depth": 1, "width": bits, "count": 1, "bits": bits,
            "charged": charged, "note": note}


def inventory(cfg: AcceleratorConfig) -> list[dict]:
    """Every memory macro (``kind`` ``"1rw"`` / ``"1r1w"``: ``count`` macros of ``depth`` x ``width`` bits, split by
    depth past 1 Mbit as `hw.sram.split_banks`) and register (``"reg"``, bits), comparator / adder (``"cmp"``, bits)
    or multiplexer (``"mux"``, 2:1 mux bits)
    bank of the config's controller (module docstring), each ``{"module", "part", "kind", "depth", "width",
    "count", "bits", "charged", "note"}``; ``[]`` for the lockstep organisation."""
    from sim.timing.compact_accel import queue_reach, replay_entries

    kind = controller(cfg)
    if kind is None:
        return []
    R, C, B, d, G, acc = (cfg.array_rows, cfg.array_cols, cfg.compact_bands,  # noqa: N806
                          cfg.drain_rows_per_cycle, cfg.partial_regs, cfg.acc_bits)
    z = sizes(cfg)
    P, S, brows, tb = z["P"], z["S"], z["brows"], z["tb"]  # noqa: N806
    ring = cfg.accel_tile_ring if kind == "delta_stage" else 0  # the staged controller's descriptor ring (D134)
    lane = COMPACT_LANE_BITS if kind == "compact" else DELTA_LANE_BITS
    acc_mod = {"delta_stage": "kaleido_daccel_stage", "delta": "kaleido_daccel", "compact": "kaleido_caccel"}[kind]
    top = {"delta_stage": "kaleido_dtop_ext", "delta": "kaleido_dtop", "compact": "kaleido_ctop_ext"}[kind]
    out = [_macro(acc_mod, "x", "1rw", _pow2ceil(-(-cfg.accel_max_tokens // brows)) * z["KW"], lane * P, brows,
                  "sram_input", "the input SRAM's role (differences / operands, R / B banks)"),
           _macro(acc_mod, "staging", "1r1w", S * z["XW"], lane * P, R, "ctrl_staging",
                  "per band and band row; the gather writes every band's copy (D91)")]
    if kind == "delta_stage":
        out += [_macro(acc_mod, "w", "1rw", _pow2ceil(z["max_nb"] * z["KWH"]), B * C * W_BITS, 1, "sram_weight",
                       "the one weight buffer (D96)"),
                _macro(acc_mod, "wstage", "1r1w", -(-z["halves"] // 2), B * W_BITS, 2 * C, "sram_wstage",
                       "two half-word macros per column bank (D96)"),
                _macro(acc_mod, "desc", "1r1w" if ring else "1rw", ring or _pow2ceil(MAX_TILES), z["desc_bits"], 1,
                       None, "the host's band-tile list, standing for the queues (D93, D96); the queues are charged"
                       + ("; a ring of accel_tile_ring entries written while the op runs (D134)" if ring else "")),
                _bank(acc_mod, "read-ahead register", "reg", z["desc_bits"], "ctrl_registers",
                      "the issue gate's (D126, the default since D129: kaleido_daccel_stage_gate): the list is read "
                      "a descriptor ahead, the taken one registered (desc_q)")]
        if ring:  # D134: per entry its rows not yet drained; the host's count written and the read-ahead's valid bit
            lr, lc = (ring - 1).bit_length(), _bits(brows + 1)
            out += [_bank(acc_mod, "ring registers", "reg", ring * lc + TILE_BITS + 1, "ctrl_registers",
                          "per ring entry its band-tile's rows not yet drained, the descriptors written, the "
                          "read-ahead's valid bit (D134)"),
                    _bank(acc_mod, "ring comparators", "cmp", ring * (d * lr + lc) + 3 * TILE_BITS, "ctrl_registers",
                          "per ring entry a drain port's band-tile number against it and its count's decrement; the "
                          "room (written < taken + ring), the take's written and read-ahead compares (D134)")]
    elif kind == "compact":
        out.append(_macro(acc_mod, "w", "1rw", max(1, _pow2ceil(z["max_nb"] * z["KWH"]) // 2), B * C * W_BITS, 2,
                          "sram_weight", "the one weight buffer, half-words of B channels x C in two banks (even, "
                          "odd): a word of 2 B channels is one read of each, at the turn's band (D109)"))
    else:
        w = _macro(acc_mod, "w", "1rw", _pow2ceil(z["max_nb"] * z["KWW"]), WEIGHT_LANES * C * W_BITS, B,
                   "sram_weight", "one copy per band (D91)")
        out.append(w)
    held = "S descriptor words held for the bands, but their X offsets and tokens"
    out.append(_bank(acc_mod, "entry registers", "reg", S * z["entry_bits"], "ctrl_registers",
                     held + (" (incl. the stage fields, D96)" if staged(cfg) else "")))
    sab = _bits(S * z["XW"])  # a staging macro's read address
    out += [_bank(acc_mod, "staging read registers", "reg", B * (sab + 1), "ctrl_registers",
                  "per band the address of its last staging read and a held flag (D105)"),
            _bank(acc_mod, "staging read comparators", "cmp", B * (2 * TILE_BITS + sab), "ctrl_registers",
                  "per band: next band-tile gathered (less-than), band-tile changed, address changed (D105)")]
    if word_path(cfg):
        ports_b = max(1, d // B)
        if kind == "delta_stage":  # (buffer, word 0) equality, word index less-than, stage address equality
            defer = B * (2 * _bits(z["halves"]) + _bits(z["KWH"] + 1) + _bits(z["halves"]))
        else:  # word 0 (column block, half-word) equality, index less-than, address equality; one buffer (D109)
            sab = (_pow2ceil(z["max_nb"] * z["KWH"]) - 1).bit_length()
            defer = B * ((z["KWH"] - 1).bit_length() + _bits(z["max_nb"]) + _bits(z["KWH"] + 1) + sab)
        regs = B * (EXPECT_BITS * (1 + ports_b) + TILE_BITS + 3) + EXPECT_BITS
        cmps = EXPECT_BITS * ((B - 1) + 2 + 5 * B)  # read off _early_choice / _early_band; not tested
        out += [_bank(acc_mod, "early choice registers", "reg", regs, "ctrl_registers",
                      "per band E, its ports' free cycles, next number, 3 flags; the cycle counter (D99)"),
                _bank(acc_mod, "early choice comparators", "cmp", cmps, "ctrl_registers",
                      "the least-E chain, the window, per band 5 cycle sums / compares (D99)"),
                _bank(acc_mod, "defer comparators", "cmp", defer, "ctrl_registers",
                      "per band (buffer, word 0) equality, word index less-than, read address equality (D100)"),
                _bank(acc_mod, "word registers", "reg", WORD_REGISTERS * 2 * B * C * W_BITS * B, "band_weight_lanes",
                      "three words of 2 B channels per band and column (D94)")]
    out.append(_bank(top, "out_tile delay", "reg", d * TILE_BITS * (C + 1), "ctrl_registers",
                     "each drain port's band-tile number delayed with its row (D91)"))
    # the queues (hw/delta_queue.py): the decision buffer, per group a COMPUTE and a PARTIAL queue, the output
    # register; compact's on its wider scan's L banks (D124)
    V = queue_reach(cfg) if kind == "compact" else brows  # noqa: N806
    out += [_macro("kaleido_dqueue", "decisions", "1rw", max(1, (1 << _bits(cfg.accel_max_tokens)) // V),
                   CODE_BITS * G, V, "ctrl_tables",
                   "L = min(R, 4 R / B) banks, token mod L (D124)" if kind == "compact" else
                   "V = R / B banks, token mod V (D93)"),
            _bank("kaleido_dqueue", "queue registers", "reg", 2 * G * (brows * tb + _bits(brows + 1)), "ctrl_registers",
                  "per group a COMPUTE and a PARTIAL queue of R / B tokens and a count (D93)"),
            _bank("kaleido_dqueue", "output register", "reg", z["queue_desc_bits"] + 1 + 2 * _bits(z["max_nb"] + 1),
                  "ctrl_registers", "the emitted descriptor, its valid bit and column blocks (D93)")]
    if kind == "compact":  # kaleido_caccel's queues read the first column block's band-tiles back (D120)
        E = replay_entries(cfg)  # noqa: N806  # sized by a slice's bound (D124)
        out += [_macro("kaleido_dqueue", "replay buffer", "1r1w", E, z["queue_desc_bits"], 1, "ctrl_tables",
                       "the first column block's band-tiles, read back one a step for the others (D120; "
                       "a slice's bound, D124)"),
                _bank("kaleido_dqueue", "replay registers", "reg",
                      z["queue_desc_bits"] + 2 + 2 * _bits(E + 1) + 1, "ctrl_registers",
                      "the forwarded word and its flag, the count written, the entry read, overflow, replay (D120)"),
                # the wider scan's logic as hw/delta_queue.py builds it (D124; delta's R / B lanes are not listed):
                # per lane an L:1 word mux of the banks (2 G bits) and the group's 2-bit code; per queue place an
                # L:1 token mux; per lane its prefix count and fill compare (log2(R / B + L + 1) bits each), the
                # code compare (2) and the pool bound (token bits)
                _bank("kaleido_dqueue", "scan lane muxes", "mux",
                      V * ((V - 1) * CODE_BITS * G + (G - 1) * CODE_BITS) + brows * (V - 1) * tb, "ctrl_registers",
                      "per lane an L:1 bank-word mux and a G:1 code mux; per queue place an L:1 token mux (D124)"),
                _bank("kaleido_dqueue", "scan counts", "cmp", V * (2 * _bits(brows + V + 1) + CODE_BITS + tb),
                      "ctrl_registers", "per lane its prefix count, fill compare, code compare, pool bound (D124)")]
    if kind != "delta_stage" and cfg.accel_max_k <= max(cfg.max_k, cfg.max_tokens):
        # the similarity front (hw/delta_front.py, D103; hw.rtl emits it for these controllers, none for the staged
        # one): raw X and the effective values, token-addressed as the controller's X buffer; the model does not run
        # it (module docstring, "The similarity front")
        front = "kaleido_cfront" if kind == "compact" else "kaleido_dfront"
        depth = _pow2ceil(cfg.accel_max_tokens) * z["KW"]
        why = ("not charged: the model's similarity pass (D23, D31) reads X in the input SRAM and keeps its X_eff "
               "state there (a few KiB); this RTL first slice (D103) is not what the model runs")
        out += [_macro(front, "front x", "1rw", depth, COMPACT_LANE_BITS * P, 1, None,
                       "raw X bytes, the host's copy; " + why),
                _macro(front, "effective values", "1r1w", depth, DELTA_LANE_BITS * P, 1, None,
                       "one 9-bit lane per byte of X; " + why)]
    if kind == "compact":
        from hw.combine import combine_sizes
        from hw.compact_core import default_ways

        W = default_ways(cfg)  # noqa: N806
        try:
            cs = combine_sizes(cfg, W)
        except ValueError:  # a partial-sum SRAM too small for kaleido_combine: no core (the model refuses its ops)
            return out
        sa, ra = _bits(cs["stage_depth"]), _bits(cs["state_depth"])
        max_cb = min(MAX_CB, z["max_nb"])
        where = (1 << tb) * (1 << _bits(G // W))
        out += [_macro("kaleido_ccore", "tile table", "1r1w", MAX_TILES, z["desc_bits"], d, "ctrl_tables",
                       "per drain port, by band-tile number (D97)"),
                _macro("kaleido_ccore", "where table", "1r1w", where, sa + 1, d * W * max_cb, "ctrl_tables",
                       "per drain port, combine way and column block, (token, command) -> staging address (D97, D104)"),
                _macro("kaleido_ccore", "decision copies", "1r1w", cfg.accel_max_tokens, CODE_BITS * G, 1 + W,
                       "ctrl_tables", "the token's, and per way its group's successor's decisions (D97, D104)"),
                _macro("kaleido_ccore", "head table", "1r1w", cs["state_depth"], ra, W, "ctrl_tables",
                       "per way, one state address per (position, group of the way) (D97, D104)")]
        # kaleido_combine's own macros (hw/combine.py: not split by depth), the partial-sum SRAM as built (D127)
        from hw.combine import combine_module_name

        cmb, word = combine_module_name(W), cs["word"]
        out += [{"module": cmb, "part": "partial state", "kind": "1r1w", "depth": cs["state_depth"], "width": word,
                 "count": W, "bits": W * cs["state_depth"] * word, "charged": "sram_psum",
                 "note": "per way the neighbour state of its groups, C msb and C total partials a word (D65, D104)"},
                {"module": cmb, "part": "partial staging", "kind": "1r1w", "depth": cs["stage_depth"], "width": word,
                 "count": d * W, "bits": d * W * cs["stage_depth"] * word, "charged": "sram_psum",
                 "note": "per drain port and way the drained rows' out and out_m (D65, D104); the rest of "
                         "psum_sram_kib below a power-of-two depth is not built"}]
    else:
        from hw.delta_combine import dcombine_module_name, delta_combine_sizes
        from sim.timing.delta_core import core_d_buffers, core_ways

        W, V = core_ways(cfg), lanes(cfg)  # noqa: N806  # accumulate ways (D107, D108), output lanes (D112, D113)
        lw, lv = (W - 1).bit_length(), (V - 1).bit_length()
        try:
            sz = delta_combine_sizes(cfg, W, V, core_d_buffers(cfg))
        except ValueError:  # a partial-sum SRAM too small for kaleido_dcombine: no core (the model refuses its ops)
            return out
        daw = _bits(sz["d_depth"] // W)  # a D address within a way
        da = lw + daw  # the controller's D address: the way low, the word in it above (D107)
        mt, nb = cfg.accel_max_tokens, z["max_nb"]
        cbb, ob, chb = _bits(nb), _bits(nb * mt), _bits(mt)  # column block, segment ordinal, chunk (D104)
        # the FIFO's entries per port and the count banks the model times (D116's fields; 0 there = its unlimited
        # what-if, charged at the RTL's sizes), so a sweep over them prices what it times
        per_port, nbk = cfg.dcore_fifo_per_port or FIFO_PER_PORT, cfg.dcore_count_banks or NB_BANKS
        obk = (nbk - 1).bit_length()  # a segment's count bank: the ordinal's low bits
        nbuf = core_d_buffers(cfg)  # D buffers (D115): n > 2 keeps each segment's residue mod n (rb bits)
        rb = 0 if nbuf == 2 else (nbuf - 1).bit_length()
        entry = 2 + cbb + brows * tb
        fifo = per_port * d
        fifo_bits = da + obk + C * acc
        # kaleido_dcore_stage's D buffers addressed per segment (D125; hw.rtl's default since D132, the unstaged
        # kaleido_dcore keeps the op's address): each token's chunk's first token (tb bits) in the chunk table and
        # the tile table
        from sim.timing.delta_core import core_seg_local

        kbb = tb if kind == "delta_stage" and core_seg_local(cfg) else 0
        # ... and the segment-slot ring (D138): segment j at sub-slot (j div n) mod k of its buffer, k <= ceil(8 / n)
        sub_max = -(-NB_BANKS // nbuf) if kbb else 1
        subb = (sub_max - 1).bit_length()
        out += [_macro("kaleido_dcore", "tile table", "1r1w", ring or MAX_TILES, entry + obk + rb + kbb + subb, d,
                       "ctrl_tables", "per drain port: class, column block, row tokens (D95), the segment's bank "
                       "(D104), with n > 2 D buffers its residue mod n (D115), with segment-local D its chunk's first "
                       "token (D125) and its segment's sub-slot (D138)"),
                _macro("kaleido_dcore", "row FIFO", "1r1w", per_port, fifo_bits, d, "ctrl_tables",
                       f"d banks of the drained rows waiting for the combine's {W} accumulate ways (D95, D107), with "
                       "the segment's bank (D104)"),
                _macro("kaleido_dcore", "seen bits", "1r1w", 1 << daw, 1, nbuf * W, "ctrl_tables",
                       "one per D-buffer word (D95), a bank per D buffer (D104, D115) and way (D107)"),
                _macro("kaleido_dcore", "decision copies", "1r1w", -(-mt // V), CODE_BITS * G, 2 * V,
                       "ctrl_tables", "the token's and its successor's decisions (D95), each copy V banks by token "
                       "mod V (D112)"),
                _macro("kaleido_dcore", "token chunks", "1r1w", mt, chb + kbb, 1, "ctrl_tables",
                       "each token's chunk, written by the host with the decisions (D104); with segment-local D "
                       "above it the chunk's first token (D125, D132)"),
                _bank("kaleido_dcore", "segment counts", "reg", 2 * nbk * _bits(mt * G + 1), "ctrl_registers",
                      "per count bank the rows its descriptors list and the rows accumulated (D104)"),
                _bank("kaleido_dcore", "latest descriptor", "reg", ob + 1, "ctrl_registers",
                      "the largest segment ordinal a descriptor named and a flag (D104)"),
                _bank("kaleido_dcore", "walk segment", "reg", ob + 2 * (cbb + 1) + _bits(mt + 1) + 1 + rb,
                      "ctrl_registers", "the walk's segment ordinal, group, column block in it, chunk; waiting (D104); "
                      "with n > 2 D buffers its residue counter (D115)"),
                _bank("kaleido_dcore", "descriptor register", "reg",
                      1 + TILE_BITS + entry + cbb + _bits(brows + 1), "ctrl_registers",
                      "the descriptor the gather took, held a cycle for its segment (D104)"),
                _bank("kaleido_dcore", "FIFO parity", "reg", fifo * max(1, rb), "ctrl_registers",
                      "per row-FIFO entry its segment's D buffer (D104; n > 2 buffers: its residue, D115)"),
                _bank("kaleido_dcore", "segment ordinal", "cmp", ob + chb * _bits(nb + 1), "ctrl_registers",
                      "base + chunk k: an adder and a chunk x k multiplier (D104); read off, not tested"),
                _bank("kaleido_dcore", "array hold", "cmp", 3 * PTR_BITS, "ctrl_registers",
                      "run = (wp + rows registered - rp) + d <= FIFO on the 16-bit FIFO pointers: two adders and a "
                      "compare (D116 item 1, D123); no enable fan-out: kaleido_daccel's clock is gated"),
                _bank("kaleido_dcore", "clock gate", "reg", 1, "ctrl_registers",
                      "kaleido_clkgate's latch (an ICG cell, its AND gate uncharged; D123)")]
        if kind in ("delta", "delta_stage"):  # the issue hold (D126): hw.rtl's kaleido_dcore on kaleido_daccel_gate,
            # kaleido_dcore_stage on kaleido_daccel_stage_gate (D129)
            out += [_macro("kaleido_dcore", "issue gate chunks", "1r1w", mt, chb, 1, "ctrl_tables",
                           "the chunk table's second copy, read at the next descriptor's first token each cycle the "
                           "controller runs (D126); its reads' energy not charged"),
                    _bank("kaleido_dcore", "issue gate", "reg", tb + 1, "ctrl_registers",
                          "the token read and next_valid, registered (gate_tok, gate_v; D126)"),
                    _bank("kaleido_dcore", "issue gate compare", "cmp", ob + chb * _bits(nb + 1) + tb + ob + 1,
                          "ctrl_registers", "the next descriptor's segment base + chunk k (an adder and the chunk x k "
                          "multiplier, as the count stage's), the token compare (fresh) and seg - w_seg < bound "
                          "(D126); the next descriptor is the queues' output register, or on the staged "
                          "controller its list's read-ahead (charged there)")]
            if kind == "delta":  # D137: the read at the word the queues load (kaleido_dqueue's load_desc)
                out.append(_bank("kaleido_dcore", "issue gate load select", "mux", tb, "ctrl_registers",
                                 "the token read and registered: the queues' loaded word's in the cycle of the load, "
                                 "else the shown one's (D137: a queue's emission fresh when shown)"))
        if kbb:  # segment-local D addresses (D125, D132): the FIFO entries' count banks, the walk's frame in the
            # chunk, the slot arithmetic and the pop's wait
            fw_max = max(1, min(mt, sz["d_depth"] // R))  # frames a chunk one D buffer holds (hw: DeltaCore.fw_max)
            slot = _bits(sub_max * MAX_CLASSES * fw_max * R + 1)  # a slot ((k' A + a) fw + f mod fw) R + t mod R
            out += [_bank("kaleido_dcore", "segment-local banks", "reg", fifo * obk, "ctrl_registers",
                          "per row-FIFO entry its segment's count bank, for the pop's wait j < w_seg + n (fifo_bank; "
                          "D125)"),
                    _bank("kaleido_dcore", "segment-local frame", "reg", (fw_max - 1).bit_length(), "ctrl_registers",
                          "the walk's frame within the chunk, f - f0 (q_fr; D125)"),
                    _bank("kaleido_dcore", "segment-local compare", "cmp",
                          d * ((tb + 1) * fw_max + slot) + V * slot + W * obk, "ctrl_registers",
                          "per drain port t - the chunk's first token and fw_max - 1 compares against j H W (tb + 1 "
                          "bits each) and the slot's multiply-add; per output lane the walk's slot; per accumulate way "
                          "the pop's (bank - w_seg) mod 8 (D125); read off, not tested"),
                    _bank("kaleido_dcore", "segment slots", "reg", 2 * max(1, subb), "ctrl_registers",
                          "the walk's sub-slot counter and its copy with the command (w_sub, q_sub; D138)"),
                    _bank("kaleido_dcore", "segment slots compare", "cmp",
                          ob * sub_max + (d + V) * (subb + 2) + W * 4 + 4, "ctrl_registers",
                          "the count stage's sub-slot (the ordinal's constant division by n and its residues mod 2 .. "
                          "k_max, ob bits each), per drain port and output lane the sub-slot x A multiply-add, per "
                          "accumulate way the pop's distance against o_slots (4 bits), the gate's bound mux (D138); "
                          "read off, not tested")]
        from sim.timing.delta_core import core_fifo_bypass

        if core_fifo_bypass(cfg):  # the row FIFO's bypass (D118)
            wa = _bits(per_port)  # a bank's address
            out += [_bank("kaleido_dcore", "FIFO bypass", "reg", d * (1 + wa + fifo_bits) + W * (1 + fifo_bits) + 16
                          + _bits(d + 1), "ctrl_registers",
                          "stage A (per FIFO bank a cycle's write: valid, address, word), per way stage B (the "
                          "bypassed row and its flag), stage A's first entry and count (D118)")]
        if rb:  # n > 2 D buffers (D115)
            out += [_bank("kaleido_dcore", "residue mod n", "cmp", ob, "ctrl_registers",
                          "the descriptor ordinal's residue mod n, about one adder bit per ordinal bit (D115); "
                          "read off, not tested"),
                    _bank(dcombine_module_name(W, V, nbuf), "buffer selects", "mux", (nbuf - 2) * 2 * W * C * acc,
                          "ctrl_registers", "per way one more 2:1 word select per extra buffer for the output's read "
                          "and the accumulate's old word (D115); read off, not tested")]
        if W > 1:  # the accumulate ways (D107, D108)
            lg = (d - 1).bit_length()
            # s1: valid, parity, bank; s2: valid, parity, fwd, ...; n > 2 D buffers: a residue for each parity (D115)
            way = 2 + max(1, lg) + 3 + obk + daw + C * acc + 2 * max(0, rb - 1)
            # kaleido_dcombine_w<W>'s per way: row, forwarded word, address, 4 flags (a_sel: a buffer number, D115)
            dway = 2 * C * acc + daw + 4 + max(0, rb - 1)
            cmb = dcombine_module_name(W, V, nbuf)
            out += [_bank("kaleido_dcore", "FIFO ways", "reg", fifo * lw, "ctrl_registers",
                          "per row-FIFO entry its accumulate way (D107)"),
                    _bank("kaleido_dcore", "accumulate ways", "reg", (W - 1) * way, "ctrl_registers",
                          "per extra way its s1 (valid, parity, FIFO bank) and s2 (valid, parity, forward, count bank, "
                          "address in the way, the row) registers (D107); the first way's, D95's, uncharged as in D101"),
                    _bank("kaleido_dcore", "pop comparators", "cmp", W * (W - 1) // 2 * lw, "ctrl_registers",
                          "the pop's pairwise distinct-way compares (D107); read off, not tested"),
                    _bank("kaleido_dcore", "pop muxes", "mux", (W - 1) * (d - 1) * fifo_bits, "ctrl_registers",
                          "per extra way a d-to-1 read of the FIFO's banks, 2:1 mux bits (D107); read off, not tested"),
                    _bank(cmb, "accumulate ways", "reg", W * dway + (lw if V == 1 else 0), "combine_unit",
                          "per way its row, forwarded word, address and flags, and (V = 1) the output's way (D107); the "
                          "model's combine_unit charges 2 d ways of 3 C adders and 5 C registers (`sim.cost.area`), "
                          "more than these"),
                    _bank(cmb, "accumulate adders", "cmp", W * C * acc, "combine_unit",
                          "a C acc-bit adder per way (D107); in the model's combine_unit as above")]
            if V == 1:
                out.append(_bank(cmb, "output read mux", "mux", (W - 1) * C * acc, "ctrl_registers",
                                 "the output's W-to-1 read of the walked buffer's ways, 2:1 mux bits (D107); read "
                                 "off, not tested"))
        out += _combine_macros(cfg, sz, W, V)
        if V > 1:
            out += _lanes(cfg, sz, W, V, lw, lv, daw)
    return out


def lanes(cfg: AcceleratorConfig) -> int:
    """``kaleido_dcore``'s output lanes V that the cost charges (docs/decisions.md D112-D114): the config's
    ``dcore_out_ways``, or where None (the default) the lanes `hw.rtl` builds (`sim.timing.delta_core.core_out_ways`,
    `hw.delta_combine.default_out_ways`: W on every shipped delta config), as the cycle model times them
    (`sim.engines.model.out_ways`)."""
    from sim.timing.delta_core import core_out_ways

    return cfg.dcore_out_ways if cfg.dcore_out_ways is not None else core_out_ways(cfg)


def _combine_macros(cfg: AcceleratorConfig, sz: dict, W: int, V: int) -> list[dict]:  # noqa: N803
    """``kaleido_dcombine``'s macros (hw/delta_combine.py ``DeltaCombine`` with W ways and V lanes): the n D
    buffers of W ways (`sim.timing.delta_core.core_d_buffers`, D115), the state buffer (V position banks where V > 1), the state SRAM's C column banks (V position
    banks each). The partial-sum SRAM's and the state SRAM's built bits: `sim.cost.area` charges ``sram_psum`` and
    ``sram_state`` by them (docs/decisions.md D114), less than ``psum_sram_kib`` / ``state_sram_kib`` where a
    buffer's remainder below a macro is dropped (`hw.sram.split_banks`)."""
    from hw.delta_combine import dcombine_module_name, diff_layout, state_sram_sizes
    from sim.timing.delta_core import core_d_buffers

    n = core_d_buffers(cfg)  # D buffers (D115)
    cmb, word = dcombine_module_name(W, V, n), sz["word"]
    st = state_sram_sizes(cfg, V)
    lanes_ = V > 1
    diff = diff_layout(cfg)  # D122: the D buffers are the difference-sum buffer, the state buffer all of psum
    out = [_macro(cmb, "D buffers", "1r1w", sz["way_depth"], word, n * W * sz["way_banks"],
                  "sram_diff" if diff else "sram_psum",
                  "n D buffers (D95, D104; n = 3 by default since D115) of W ways (D107), each "
                  + ("an n-th of diff_sram_kib (D122)" if diff else "a third of psum_sram_kib")),
           _macro(cmb, "state buffer", "1r1w", sz["lane_depth" if lanes_ else "bank_depth"], word,
                  V * sz["lane_banks"] if lanes_ else sz["banks"], "sram_psum",
                  "the carried values, " + ("all of psum_sram_kib (D122)" if diff else "a third of psum_sram_kib")
                  + (", in V position banks (D112)" if lanes_ else ""))]
    if st:
        out.append(_macro(cmb, "state SRAM", "1r1w", st["lane_depth" if lanes_ else "bank_depth"], st["word"],
                          cfg.array_cols * (V * st["lane_banks"] if lanes_ else st["banks"]), "sram_state",
                          "C column banks (D71, D79)" + (", each V position banks (D112)" if lanes_ else "")))
    return out


def _lanes(cfg: AcceleratorConfig, sz: dict, W: int, V: int, lw: int, lv: int, daw: int) -> list[dict]:  # noqa: N803
    """The V > 1 output lanes' registers, adders, comparators and selects (hw/delta_core.py ``_walk_lanes`` /
    ``_issue_lanes``, hw/delta_combine.py ``_elaborate_lanes``; docs/decisions.md D111 item 7, D112, D114)."""
    from hw.delta_combine import STATE_BITS, dcombine_module_name, state_sram_sizes
    from sim.timing.delta_core import core_d_buffers

    C, acc = cfg.array_cols, cfg.acc_bits  # noqa: N806
    cmb, word, st = dcombine_module_name(W, V, core_d_buffers(cfg)), sz["word"], state_sram_sizes(cfg, V)
    ra = max(_bits(sz["lane_words"]), _bits(st["lane_words"]) if st else 1) + lv  # a carried-store address
    lane = 2 * word + ra + max(1, lv) + V + max(1, lw) + 7  # S forward, Y; write address, read bank, fwd, way, flags
    sel = V * (V - 1) * (2 * word + 2 * (ra - lv)) + V * V * word  # store read / write routes, forward selects
    if st:
        sel += C * V * (V - 1) * 2 * (STATE_BITS + ra - lv)
    return [_bank("kaleido_dcore", "walk lanes", "reg", 2 * V + 2 * lv, "ctrl_registers",
                  "per lane valid and successor flags, the token's and its successor's bank (D112)"),
            _bank(cmb, "output lanes", "reg", (V - 1) * lane, "combine_unit",
                  "per extra lane its S forward and Y words (the output side's V rows), its carried-store write "
                  "address, read bank, forward flags, way and 7 flags (valid, direct, has, reg, hold, write, "
                  "y_valid; D112); the model's combine_unit charges 2 d ways of 5 C registers (`sim.cost.area`), "
                  "more than these; the first lane's as D108's"),
            _bank(cmb, "output lane adders", "cmp", (V - 1) * 2 * C * acc, "combine_unit",
                  "per extra lane the S and Y adders (the w axis's ripple chain feeds lane l's S adder from lane "
                  "l - 1's S, D112); in the model's combine_unit as above"),
            _bank(cmb, "forward comparators", "cmp", (V * V - 1) * (ra + 1), "ctrl_registers",
                  "V x V carried-store address compares (and the store's select) against the previous step's "
                  "writes (D112); the one lane's one uncharged as in D101; read off, not tested"),
            _bank(cmb, "D-read select", "mux", V * (W - 1) * word + W * (V - 1) * daw, "ctrl_registers",
                  "per lane a W-to-1 read of the walked buffer's ways, per way a V-to-1 of the lanes' in-way "
                  "addresses, 2:1 mux bits (D112); read off, not tested"),
            _bank(cmb, "carried-store selects", "mux", sel, "ctrl_registers",
                  "per position bank a V-to-1 of the lanes' write words and addresses, per lane a V-to-1 of the "
                  "banks' read words and a V-way forward select; the state SRAM's column banks likewise; 2:1 mux "
                  "bits (D112); read off, not tested")]


#: The SRAMs whose area follows the macros ``kaleido_dcombine`` builds on the delta organisation (`built_sram_bits`,
#: docs/decisions.md D114; ``sram_diff`` since D122: the D buffers where the config has a difference-sum buffer).
BUILT_SRAMS = ("sram_psum", "sram_state", "sram_diff")


def built_sram_bits(cfg: AcceleratorConfig) -> dict[str, int]:
    """``{"sram_psum": bits, "sram_state": bits, "sram_diff": bits}`` of the macros ``kaleido_dcombine`` builds for
    the delta core (`inventory`'s parts charged to them: the state buffer, and the D buffers -- ``sram_diff`` where
    the config has a difference-sum buffer, docs/decisions.md D122, else ``sram_psum``, 0 bits of ``sram_diff``;
    the state SRAM's column banks), for the roles the inventory lists; on the compact organisation ``{"sram_psum":
    bits}`` of ``kaleido_combine``'s state and staging macros (docs/decisions.md D127); ``{}`` on the lockstep
    organisation and where the core is not built (a buffer too small for it). `sim.cost.area` charges these SRAMs by these bits
    (docs/decisions.md D114): a buffer's remainder below a macro is not built (`hw.sram.split_banks`), so it is not
    charged, and each SRAM is counted once."""
    out: dict[str, int] = {}
    if cfg.organisation == "compact":  # kaleido_combine's state and staging macros (D127)
        bits = sum(p["bits"] for p in inventory(cfg) if p["module"].startswith("kaleido_combine"))
        return {"sram_psum": bits} if bits else out
    if cfg.organisation != "delta":
        return out
    for p in inventory(cfg):
        if p["charged"] in BUILT_SRAMS:
            out[p["charged"]] = out.get(p["charged"], 0) + p["bits"]
    if out:
        out.setdefault("sram_diff", 0)
    return out


def d_buffer_macro(cfg: AcceleratorConfig) -> dict | None:
    """The `inventory` part of ``kaleido_dcombine``'s D buffers (one macro: ``depth`` words of ``width`` = C acc bits,
    ``count`` of them over the n buffers and W ways), where the delta core is built; None elsewhere. With a
    difference-sum buffer the delta organisation's D traffic (`sim.cost.compact_actions`' ``sram_diff_*`` bytes) is
    priced at one column slice of it (`sim.cost.energy.action_energies`, docs/decisions.md D122)."""
    if cfg.organisation != "delta":
        return None
    return next((p for p in inventory(cfg) if p["part"] == "D buffers"), None)


def area_um2(cfg: AcceleratorConfig, tech) -> dict[str, float]:
    """um^2 of the controllers' parts charged since D101, by `AREA_COMPONENTS` key (all present; zeros for the
    lockstep organisation): macros at ``sram_bit`` per bit, registers at ``reg_bit``, comparators at ``add_bit``,
    multiplexers at ``mux2_bit``
    (module docstring); ``ctrl_weight_copies`` is ``weight_copies - 1`` copies of the weight SRAM
    (``weight_sram_kib``), the buffer a band's copy stands for."""
    out = dict.fromkeys(AREA_COMPONENTS, 0.0)
    unit = {"1rw": tech.a("sram_bit"), "1r1w": tech.a("sram_bit"), "reg": tech.a("reg_bit"), "cmp": tech.a("add_bit"),
            "mux": tech.a("mux2_bit")}
    for p in inventory(cfg):
        if p["charged"] in out:
            out[p["charged"]] += p["bits"] * unit[p["kind"]]
    out["ctrl_weight_copies"] = (weight_copies(cfg) - 1) * cfg.weight_sram_kib * 8192 * tech.a("sram_bit")
    return out


def part(cfg: AcceleratorConfig, module: str, name: str) -> dict:
    """The `inventory` entry of ``module``'s ``name``; KeyError if the config's controller has none."""
    for p in inventory(cfg):
        if p["module"] == module and p["part"] == name:
            return p
    raise KeyError(f"{cfg.name}: no {module} {name}")


def access_pj_per_byte(tech, depth: int, width: int) -> float:
    """pJ per byte read or written of a macro of ``depth`` x ``width`` bits: `sim.cost.energy.sram_access_pj` of its
    KiB per 64-bit access, / 8."""
    from sim.cost.energy import sram_access_pj

    return sram_access_pj(tech, depth * width / 8192) / 8


#: The controllers' per-access actions (`count_actions`), all charged to the ``controller`` energy component.
ACTIONS = ("ctrl_staging_write_bytes", "ctrl_staging_read_bytes", "ctrl_dec_bytes", "ctrl_tile_bytes",
           "ctrl_fifo_bytes", "ctrl_copy_bytes", "ctrl_replay_bytes",
           "ctrl_where_bytes", "ctrl_head_bytes", "ctrl_reg_bits")

_ACTION_PART = {"ctrl_staging_write_bytes": (None, "staging"), "ctrl_staging_read_bytes": (None, "staging"),
                "ctrl_dec_bytes": ("kaleido_dqueue", "decisions"),
                "ctrl_replay_bytes": ("kaleido_dqueue", "replay buffer"),
                "ctrl_tile_bytes": (None, "tile table"), "ctrl_fifo_bytes": ("kaleido_dcore", "row FIFO"),
                "ctrl_copy_bytes": (None, "decision copies"), "ctrl_where_bytes": ("kaleido_ccore", "where table"),
                "ctrl_head_bytes": ("kaleido_ccore", "head table")}


def action_energies(cfg: AcceleratorConfig, tech) -> dict[str, tuple[str, float]]:
    """``{action: ("controller", pJ)}`` for `ACTIONS`: a macro's bytes at `access_pj_per_byte` of its macro (one
    bank of its part in `inventory`), ``ctrl_reg_bits`` at the table's ``reg_bit``; a part the config's controller
    does not have costs 0 (it is never counted)."""
    out = {"ctrl_reg_bits": ("controller", tech.e("reg_bit"))}
    parts = inventory(cfg)
    for act, (module, name) in _ACTION_PART.items():
        p = next((p for p in parts if p["part"] == name and module in (None, p["module"])), None)
        out[act] = ("controller", access_pj_per_byte(tech, p["depth"], p["width"]) if p else 0.0)
    return out


def bypass_actions(a: dict, rows: int, bypass: int | None, cfg: AcceleratorConfig) -> dict:
    """``kaleido_dcore``'s row-FIFO bypass (docs/decisions.md D118) on one op's counts ``a`` (in place; returns it):
    ``rows`` drained rows (`count_actions` charged each a FIFO write and read), ``bypass`` of them popped the cycle
    after their write (the cycle model's, `sim.timing.delta_core.ways_done`; None: not timed, nothing changes).
    With the core's bypass (`sim.timing.delta_core.core_fifo_bypass`) each row is written into stage A's registers
    (a FIFO word), and a bypassed row skips the FIFO's write and read and is written into its way's stage-B register
    (a FIFO word) instead."""
    from sim.timing.delta_core import core_fifo_bypass

    if bypass is None or not core_fifo_bypass(cfg) or controller(cfg) is None:
        return a
    width = part(cfg, "kaleido_dcore", "row FIFO")["width"]
    a["ctrl_fifo_bytes"] -= width / 8 * 2 * bypass
    a["ctrl_reg_bits"] += width * (rows + bypass)
    return a


def queue_read_actions(a: dict, cycles: int, cfg: AcceleratorConfig) -> dict:
    """The queues' reads of one op (in place; returns ``a``) as ``kaleido_dqueue`` makes them (docs/decisions.md D127):
    every decision bank is read on every cycle the queues run (its read enable is ``running | begin``, hw/delta_queue.py;
    D93), and compact's replay buffer likewise (``re`` = ``running``, D120), whether or not the step uses the word.
    ``cycles``: the cycles the queues run, the ``start`` cycle and cycles 0 .. their ``done`` (compact:
    `sim.timing.compact_accel.op_port`'s ``queue_done`` + 2; the staged delta controller's queues, which stand for
    its host list, run as long as the controller, its op cycles + 1). V banks of ``2 G`` bits a cycle: ``R / B``
    on delta, compact's wider scan's L (`sim.timing.compact_accel.queue_reach`, D124)."""
    from sim.timing.compact_accel import queue_reach

    kind = controller(cfg)
    if kind is None:
        return a
    V = queue_reach(cfg) if kind == "compact" else sizes(cfg)["brows"]  # noqa: N806
    a["ctrl_dec_bytes"] += cycles * V * CODE_BITS * cfg.partial_regs / 8
    if kind == "compact":
        a["ctrl_replay_bytes"] += cycles * sizes(cfg)["queue_desc_bits"] / 8
    return a


def count_actions(a: dict, dec, tiles, groups, N: int, cfg: AcceleratorConfig,  # noqa: N803
                  queue_reads: bool = True) -> dict:
    """Add one batch element's controller accesses to ``a`` (in place; returns it). ``dec``: its decisions ``[M,
    G]``; ``tiles``: its band-tiles ``(slots, group, n_compute, n_partial)`` (`sim.timing.compact.compact_tiles`),
    each issued once per column block (n_cb = ceil(N / C)). Rules (module docstring; D101):

    - staging: the gather writes each band-tile row's ``ceil(|g| / P)`` words into the row's macro of every band
      (B copies, D91); the band running it reads each of those words once from each live row's macro (D105: a read
      only when the next slot needs a word the macros' outputs do not hold: a new band-tile or a new word), so the
      reads are the writes of one copy; the band's held read address (and its flag) written per read;
    - the queues' decision buffer: each token's word written once, read by the two scan passes (COMPUTE, then
      PARTIAL) once per column block (D93: delta's D84 order reruns the chunk per column block of its group);
      compact's queues scan the first column block only and write its band-tiles to their replay buffer, read
      back once per later column block (D120; the host gives a slice several column blocks only where one column
      block's band-tiles fit it, D124), their wider scan reading again at most L - 1 words after each fill (D124).
      With ``queue_reads`` False only the writes are counted here: the caller charges the reads the RTL makes, every
      bank every running cycle (`queue_read_actions`, D127);
    - the tile table: an entry written per band-tile, read per drained row; delta's row FIFO: each drained row
      written and read once; the decision copies: both written per token, both read per combine command (delta:
      per column block, token and axis class, D95; compact: per column block, token and group, D97); compact's
      where table: written per drained row and cleared per command, read per command; its head table read and
      written per command;
    - registers: a band-tile's entry registers written once per column block, each queued (token, group) a token
      register; with the word path (`word_path`: staged delta, compact): each band-tile's expected last slot and its
      port's free cycle (2 x `EXPECT_BITS`); delta on W accumulate ways: each drained row's way (log2 W bits) into
      its FIFO entry's flops (D107, D108).
    """
    import numpy as np

    from algo.reuse.golden import REUSE
    from sim.timing.delta import classes

    kind = controller(cfg)
    if kind is None:
        return a
    z = sizes(cfg)
    C, B, G = cfg.array_cols, cfg.compact_bands, cfg.partial_regs  # noqa: N806
    n_cb = -(-N // C)
    slots, grp, nc, npart = tiles
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    rows = nc + npart
    lane = COMPACT_LANE_BITS if kind == "compact" else DELTA_LANE_BITS
    word = z["P"] * lane / 8
    n_tiles, rows_out = len(slots) * n_cb, int(rows.sum()) * n_cb
    M = dec.shape[0]  # noqa: N806
    words = -(-widths[grp] // z["P"])  # per band-tile the staging words of each of its rows
    a["ctrl_staging_write_bytes"] += n_cb * word * B * int((rows * words).sum())
    a["ctrl_staging_read_bytes"] += n_cb * word * int((rows * words).sum())
    dec_bytes = CODE_BITS * G / 8
    if kind == "compact":  # one scan, the band-tiles written once and read back per later column block (D120)
        from sim.timing.compact_accel import queue_reach

        # the wider scan's steps read L words each: a step that fills the queue ends at its fill lane and the next
        # reads the rest again, at most L - 1 words a band-tile (D124; an upper count)
        reads = M * 2 + len(slots) * (queue_reach(cfg) - 1) if queue_reads else 0
        a["ctrl_dec_bytes"] += dec_bytes * (M + reads)
        a["ctrl_replay_bytes"] += z["queue_desc_bits"] / 8 * len(slots) * (n_cb if queue_reads else 1)
    else:
        a["ctrl_dec_bytes"] += dec_bytes * M * (1 + (2 * n_cb if queue_reads else 0))
    core = {(p["module"], p["part"]): p["width"] / 8 for p in inventory(cfg)}
    if kind == "compact" and ("kaleido_ccore", "tile table") in core:
        commands = n_cb * M * len(groups)
        a["ctrl_where_bytes"] += core["kaleido_ccore", "where table"] * (rows_out + 2 * commands)
        a["ctrl_head_bytes"] += core["kaleido_ccore", "head table"] * 2 * commands
        a["ctrl_tile_bytes"] += core["kaleido_ccore", "tile table"] * (n_tiles + rows_out)
        a["ctrl_copy_bytes"] += dec_bytes * 2 * (M + commands)
    elif ("kaleido_dcore", "tile table") in core:
        commands = n_cb * M * len(classes(groups))
        a["ctrl_fifo_bytes"] += core["kaleido_dcore", "row FIFO"] * 2 * rows_out
        from sim.timing.delta_core import core_ways

        a["ctrl_reg_bits"] += rows_out * (core_ways(cfg) - 1).bit_length()  # each row's way into its entry (D107)
        a["ctrl_tile_bytes"] += core["kaleido_dcore", "tile table"] * (n_tiles + rows_out)
        a["ctrl_copy_bytes"] += dec_bytes * 2 * (M + commands)
    queued = int((np.asarray(dec) != REUSE).sum()) * n_cb
    a["ctrl_reg_bits"] += n_tiles * (z["entry_bits"] + (2 * EXPECT_BITS if word_path(cfg) else 0)) \
        + queued * z["tb"] + n_cb * int(words.sum()) * (_bits(z["S"] * z["XW"]) + 1)
    return a
