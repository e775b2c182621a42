"""The Kaleido processing element: output-stationary, four modes, per-group partial registers.

Each PE accumulates one output ``Y[token, n]``. Per channel group g it keeps the group's partial
sum split into an MSB part ``msb[g] = sum msb(X_eff) * W`` and an LSB part
``lsb[g] = sum lsb(X_eff) * W`` (docs/spec.md §3). A tile processes R spatial positions frame
after frame, so at the start of a tile the registers hold the *previous frame's* partials of the
same position, i.e. the temporal neighbour's. Per slot and row the PE runs in one of four modes:

======== =============================================================== ====================
mode     work                                                            multiplier use
======== =============================================================== ====================
REUSE    none: the group's registers already hold the neighbour's sums   idle
COMPUTE  ``msb[g] += hi(x)*w << 4``, ``lsb[g] += lo(x)*w`` (channel sel)  both halves
PARTIAL  ``lsb[g] += lo(x)*w`` (the msb part stays the neighbour's)       low half
PAIRED   ``lsb[g_a] += lo(x_a)*w_a`` and ``lsb[g_b] += lo(x_b)*w_b``        both halves
======== =============================================================== ====================

with ``hi(x) = x >> 4`` (signed) and ``lo(x) = x & 15`` (b_msb = 4: the multiplier is split into
two 5x8 / 4x8 halves). The first slot of a tile that carries group g (``first_a``/``first_b``)
overwrites the register instead of adding to it; a ``clear`` slot zeroes every register first.
The registers are two small register files (``lsb``: P words, two write ports for lanes a and b;
``msb``: P words, one write port; three asynchronous read ports) with one valid bit per word: a
word whose valid bit is clear reads 0, and ``clear`` resets the 2P valid bits rather than 2P
acc-bit words (the same values, cycle for cycle; docs/decisions.md D64). Of the other registers only
``valid``, ``out_valid``, the accumulator and the valid bits are reset: the lane fields beside ``valid``,
the row link, ``out`` and ``out_port`` are read only on a valid slot or with ``out_valid`` (D78).

The output accumulator keeps the invariant ``acc == sum_g (msb[g] + lsb[g])``: each update adds
the new products and subtracts the register values it overwrites, so REUSE costs nothing and
the tile's result is ``acc`` after its last slot. That result moves to the ``out`` register (the
second accumulator buffer) while ``acc`` continues into the next tile, so tiles overlap.

Operands arrive registered from the left (x lanes, per-row mode) and from above (w lanes,
per-slot control) and leave registered to the right and below: the PE is one systolic cell.

Spatial reuse along ``w`` (the row link, docs/decisions.md D4). A tile of an op with a ``w``-axis
group holds whole image rows in raster order, so a token's ``w``-neighbour sits in the PE row
above. The slot flags ``sp_a``/``sp_b`` mark a channel whose group reuses along ``w``. For such a
lane the PE forms the channel's *effective* increments

======== ======================================= ==============================
decision msb increment                           lsb increment
======== ======================================= ==============================
COMPUTE  ``hi(x)*w << 4`` (own, high half)         ``lo(x)*w`` (own)
PARTIAL  the link's msb increment                 ``lo(x)*w`` (own, low/high half)
REUSE    the link's msb increment                 the link's lsb increment
======== ======================================= ==============================

adds their sum to ``lsb[g]`` (a ``w`` group keeps its tile sum there; ``msb[g]`` stays 0 from the
``clear``, the msb/lsb split travels on the link) and registers both onto its link output
``o_lk_m``/``o_lk_l`` (only on slots with a spatial lane). The PE below sees the same slot one
cycle later, exactly when the registered link arrives (the one-cycle row skew). This is exact by
docs/spec.md §2: the neighbour's effective msb increment is ``msb(X_eff[nb])*w`` and its whole one
``X_eff[nb]*w``; chains hold because the link carries effective values. The top PE's link input is 0
(its row is a ``w = 0`` token, which COMPUTEs).

One link lane suffices for paired slots: every tile holds a ``w = 0`` row, which COMPUTEs every
``w`` group (demand 1), so the matcher never puts two ``w``-group channels in one slot (demand 2 > 1
there); a pair is at most one spatial lane beside a temporal one (`sim.timing.stream` asserts it).
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import enum, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig

#: Operand width inside the array: int8 sign-extended or uint8 zero-extended (pv's P) to 9 bits.
X_BITS = 9
#: Stationary operand width (int8, docs/spec.md §1).
W_BITS = 8
#: Low-half width of the split multiplier: b_lsb = 8 - b_msb with b_msb = 4 (docs/spec.md §3).
LO_BITS = 4
#: High-half operand width of the split multiplier: ``hi(x) = x >> LO_BITS``, signed (5 bits).
HI_BITS = X_BITS - LO_BITS
#: Link increment widths: msb ``hi(x)*w << 4`` (5-bit signed x 8-bit signed, shifted: 17 bits signed),
#: lsb ``lo(x)*w`` (4-bit unsigned x 8-bit signed: 13 bits signed).
LINK_MSB_BITS = X_BITS + W_BITS
LINK_LSB_BITS = LO_BITS + W_BITS + 1
#: Link fields (PE row i -> row i + 1): (name, width) of the spatial lane's msb and lsb increments.
LINK_FIELDS = (("lk_m", LINK_MSB_BITS), ("lk_l", LINK_LSB_BITS))
#: Link register bits of one PE (``o_lk_m`` + ``o_lk_l``: 17 + 13 = 30), charged by `sim.cost`.
LINK_BITS = sum(w for _, w in LINK_FIELDS)
#: The PE's operand selects, (name, width) as `PE.elaborate` declares them (it records them in
#: ``PE.operand_selects``; tests/test_pe.py checks the widths): the lane select of x (9) and w (8),
#: the low multiplier half's inputs lo_x (4) and lo_w (8), the high half's hi_x (5) and hi_w (8)
#: (``lo(x_b)``, ``w_b`` when PAIRED). The group and first selects (2 x group_bits + 2) depend on the config.
OPERAND_SELECTS = (("x_sel", X_BITS), ("w_sel", W_BITS), ("lo_x", LO_BITS), ("lo_w", W_BITS),
                   ("hi_x", HI_BITS), ("hi_w", W_BITS))
#: Operand-select mux bits switched per active row-slot: the sum of `OPERAND_SELECTS` (42).
OPERAND_MUX_BITS = sum(w for _, w in OPERAND_SELECTS)
#: Partial-product bits of the split multiplier (``HI_BITS x W_BITS`` + ``LO_BITS x W_BITS``) relative
#: to a plain int8 PE's 8x8 multiplier: (5x8 + 4x8) / 64 = 1.125.
SPLIT_MULT_FRACTION = (HI_BITS * W_BITS + LO_BITS * W_BITS) / (8 * 8)


#: Reuse decision codes, as in `algo.reuse.golden` (docs/spec.md §2), the one copy in `hw`
#: (tests/test_pe.py checks them against algo.reuse.golden's; `hw` does not import `algo`).
COMPUTE, PARTIAL, REUSE = 0, 1, 2


class PEMode(enum.IntEnum, shape=2):
    """Per-row, per-slot PE mode: an Amaranth enum of shape ``unsigned(2)``, the width of the row
    lane's ``mode`` field (`pe_signature` takes it from ``PEMode.as_shape()``). An ``IntEnum``, so
    the members are also the integer codes the cycle model's streams (`sim.timing.stream`) carry."""

    REUSE = 0
    COMPUTE = 1
    PARTIAL = 2
    PAIRED = 3


#: Bits of the row lane's ``mode`` field: the width of `PEMode`'s shape (2).
MODE_BITS = PEMode.as_shape().width


#: The decision -> PE-mode rule, the one copy: ``(decision of channel a's group, decision of channel
#: b's group, or None when the slot carries a alone) -> (PEMode, sel)``; ``sel`` = 1 runs the mode on
#: the b operands. PAIRED packs two PARTIAL channels' low-half products in one PE (docs/spec.md §3); a
#: REUSE channel costs no product, so a pair with one REUSE runs the other's mode. The matcher only
#: forms these pairs (`hw.dispatcher.matcher`, `sim.timing.dispatch`). Users: the cycle model's
#: stream builder (`sim.timing.stream`), the RTL engine's stimulus (`sim.engines.verilator`) and the
#: tests; `hw.core.TileCore`'s slot former implements it as logic (its per-row mux), which the
#: RTL-against-model tests check slot by slot.
MODE_OF: dict[tuple[int, int | None], tuple[PEMode, int]] = {
    (COMPUTE, None): (PEMode.COMPUTE, 0), (PARTIAL, None): (PEMode.PARTIAL, 0), (REUSE, None): (PEMode.REUSE, 0),
    (COMPUTE, REUSE): (PEMode.COMPUTE, 0), (REUSE, COMPUTE): (PEMode.COMPUTE, 1),
    (PARTIAL, PARTIAL): (PEMode.PAIRED, 0),
    (PARTIAL, REUSE): (PEMode.PARTIAL, 0), (REUSE, PARTIAL): (PEMode.PARTIAL, 1),
    (REUSE, REUSE): (PEMode.REUSE, 0),
}


def pe_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    """Flat port list of the PE (flat so the emitted Verilog port names are plain)."""
    gb, pb, ab = cfg.group_bits, cfg.port_bits, cfg.acc_bits
    members = {}
    # Row lane, from the left neighbour (registered there), and to the right.
    for d, pre in ((In, "i_"), (Out, "o_")):
        members[pre + "x_a"] = d(signed(X_BITS))
        members[pre + "x_b"] = d(signed(X_BITS))
        members[pre + "mode"] = d(PEMode.as_shape())
        members[pre + "sel"] = d(unsigned(1))
    # Column lane (weights and slot control), from above and to below.
    for d, pre in ((In, "i_"), (Out, "o_")):
        members[pre + "w_a"] = d(signed(W_BITS))
        members[pre + "w_b"] = d(signed(W_BITS))
        members[pre + "valid"] = d(unsigned(1))
        members[pre + "g_a"] = d(unsigned(gb))
        members[pre + "g_b"] = d(unsigned(gb))
        members[pre + "first_a"] = d(unsigned(1))
        members[pre + "first_b"] = d(unsigned(1))
        members[pre + "sp_a"] = d(unsigned(1))
        members[pre + "sp_b"] = d(unsigned(1))
        members[pre + "last"] = d(unsigned(1))
        members[pre + "clear"] = d(unsigned(1))
        members[pre + "port"] = d(unsigned(pb))
    # Row link (w-axis reuse): effective increments from the PE above, registered to the PE below.
    for d, pre in ((In, "i_"), (Out, "o_")):
        for f, w in LINK_FIELDS:
            members[pre + f] = d(signed(w))
    # Result (second accumulator buffer), valid for the cycle after a tile's last slot.
    members["out"] = Out(signed(ab))
    members["out_valid"] = Out(unsigned(1))
    members["out_port"] = Out(unsigned(pb))
    return wiring.Signature(members)


#: Names of the row-lane and column-lane fields that pass through the PE unchanged.
ROW_FIELDS = ("x_a", "x_b", "mode", "sel")
COL_FIELDS = ("w_a", "w_b", "valid", "g_a", "g_b", "first_a", "first_b", "sp_a", "sp_b", "last", "clear", "port")
#: Pass-through fields whose registers are reset: ``valid`` only. Every other lane field, the row link and
#: the result are read only on a valid slot or with ``out_valid`` (docs/decisions.md D78).
RESET_FIELDS = ("valid",)


class PE(wiring.Component):
    """One Kaleido PE for the given configuration (see the module docstring)."""

    def __init__(self, cfg: AcceleratorConfig):
        if cfg.b_msb != 8 - LO_BITS:
            raise ValueError(f"the PE is built for b_msb = {8 - LO_BITS}, config asks {cfg.b_msb}")
        self.cfg = cfg
        super().__init__(pe_signature(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        ab, P = cfg.acc_bits, cfg.partial_regs  # noqa: N806
        acc = Signal(signed(ab))

        def wire(name, expr, shape=None):
            """A named comb signal driven by `expr`. Amaranth re-emits an expression at every use,
            so a term used in several places (the write enables of all 2P registers) would be
            rebuilt each time in the Verilog; behind a signal it is written once and is visible by
            name in waveforms (docs/decisions.md D51: kaleido_pe.v 2,582 to 996 lines on tiny-8x8)."""
            s = Signal(shape if shape is not None else expr.shape(), name=name)
            m.d.comb += s.eq(expr)
            return s

        def data_reg(port):
            """A reset-less register behind output `port` (docs/decisions.md D78): what it holds is
            only read on a valid slot (the lanes, the row link) or with ``out_valid`` (``out``,
            ``out_port``), and those are reset, so a reset need not clear it."""
            q = Signal.like(port, name=port.name + "_q", reset_less=True)
            m.d.comb += port.eq(q)
            return q

        # Systolic pass-through: ``valid`` keeps its reset, the data beside it does not.
        for f in ROW_FIELDS + COL_FIELDS:
            o, i = getattr(self, "o_" + f), getattr(self, "i_" + f)
            m.d.sync += (o if f in RESET_FIELDS else data_reg(o)).eq(i)

        valid, mode, sel = self.i_valid, self.i_mode, self.i_sel
        is_compute = wire("is_compute", valid & (mode == PEMode.COMPUTE))
        is_partial = wire("is_partial", valid & (mode == PEMode.PARTIAL))
        is_paired = wire("is_paired", valid & (mode == PEMode.PAIRED))

        x_sel = wire("x_sel", Mux(sel, self.i_x_b, self.i_x_a))
        w_sel = wire("w_sel", Mux(sel, self.i_w_b, self.i_w_a))
        g_sel = wire("g_sel", Mux(sel, self.i_g_b, self.i_g_a))
        first_sel = wire("first_sel", Mux(sel, self.i_first_b, self.i_first_a))

        def lo(v):
            return v[:LO_BITS].as_unsigned()

        def hi(v):
            return (v >> LO_BITS).as_signed()

        # Split multiplier. Low half: lo(x) x w. High half: hi(x) x w, or lo(x_b) x w_b when PAIRED.
        lo_x = Mux(is_paired, lo(self.i_x_a), lo(x_sel))
        lo_w = Mux(is_paired, self.i_w_a, w_sel)
        hi_x = Signal(signed(HI_BITS))
        m.d.comb += hi_x.eq(Mux(is_paired, lo(self.i_x_b), hi(x_sel)))
        hi_w = Mux(is_paired, self.i_w_b, w_sel)
        #: The operand selects by name (`OPERAND_SELECTS`), for the tests that check their widths.
        self.operand_selects = {"x_sel": x_sel, "w_sel": w_sel, "lo_x": lo_x, "lo_w": lo_w, "hi_x": hi_x, "hi_w": hi_w}
        # p_lo at the product's own width (4-bit unsigned x 8-bit signed: 12 bits signed); its users widen it
        # (docs/decisions.md D87: a 13-bit p_lo made Yosys alias its top two bits, which Verilator expands bit by bit).
        p_lo = Signal(signed(LO_BITS + W_BITS))
        p_hi = Signal(signed(HI_BITS + W_BITS))
        m.d.comb += [p_lo.eq(lo_x * lo_w), p_hi.eq(hi_x * hi_w)]
        p_msb = Signal(signed(X_BITS + W_BITS))
        m.d.comb += p_msb.eq(p_hi << LO_BITS)

        # Per-lane decisions, decoded from (mode, sel) as `MODE_OF` encodes them.
        a_c = wire("a_c", is_compute & ~sel)
        a_p = wire("a_p", (is_partial & ~sel) | is_paired)
        a_r = wire("a_r", ~a_c & ~a_p)
        b_c = wire("b_c", is_compute & sel)
        b_p = wire("b_p", (is_partial & sel) | is_paired)
        b_r = wire("b_r", ~b_c & ~b_p)
        sp_a, sp_b = wire("sp_a", valid & self.i_sp_a), wire("sp_b", valid & self.i_sp_b)
        sp_sel = wire("sp_sel", Mux(sel, self.i_sp_b, self.i_sp_a))
        own_lsb_b = wire("own_lsb_b", Mux(is_paired, p_hi, p_lo))

        # The spatial lane's effective increments (module docstring): own products or the link's.
        # At most one lane of a slot is spatial (sim.timing.stream asserts it), so one link serves both.
        sp_c = wire("sp_c", Mux(self.i_sp_b, b_c, a_c))
        sp_r = wire("sp_r", Mux(self.i_sp_b, b_r, a_r))
        eff_m, eff_l = Signal(signed(LINK_MSB_BITS)), Signal(signed(LINK_LSB_BITS))
        m.d.comb += [
            eff_m.eq(Mux(sp_c, p_msb, self.i_lk_m)),
            eff_l.eq(Mux(sp_r, self.i_lk_l, Mux(self.i_sp_b, own_lsb_b, p_lo))),
        ]
        lk_m, lk_l = data_reg(self.o_lk_m), data_reg(self.o_lk_l)
        with m.If(sp_a | sp_b):
            m.d.sync += [lk_m.eq(eff_m), lk_l.eq(eff_l)]
        inc_sp = Signal(signed(LINK_MSB_BITS + 1))
        m.d.comb += inc_sp.eq(eff_m + eff_l)

        # Register targets this slot: lane a adds inc_a to lsb[g_a], lane b inc_b to lsb[g_b] (one
        # write when both lanes hit the same group), a temporal COMPUTE lane p_msb to msb[g_sel].
        inc_a, inc_b = Signal(signed(LINK_MSB_BITS + 1)), Signal(signed(LINK_MSB_BITS + 1))
        m.d.comb += [
            inc_a.eq(Mux(self.i_sp_a, inc_sp, p_lo)),
            inc_b.eq(Mux(self.i_sp_b, inc_sp, own_lsb_b)),
        ]
        wl_a = wire("wl_a", valid & (self.i_sp_a | a_c | a_p))
        wl_b = wire("wl_b", valid & (self.i_sp_b | b_c | b_p))
        wm = wire("wm", is_compute & ~sp_sel)
        g_a, g_b = self.i_g_a, self.i_g_b
        merge = wire("merge", wl_a & wl_b & (g_a == g_b))
        wr_b = wire("wr_b", wl_b & ~merge)
        clear = wire("clear", valid & self.i_clear)

        # The partial registers: two register files of P acc-bit words (lsb: two write ports, lanes
        # a and b; msb: one), read asynchronously, plus one valid bit per word. A word whose valid bit
        # is clear reads as 0, so ``clear`` resets the 2P valid bits instead of 2P acc-bit words
        # (docs/decisions.md D64).
        m.submodules.lsb = lsb = Memory(shape=signed(ab), depth=P, init=[])
        m.submodules.msb = msb = Memory(shape=signed(ab), depth=P, init=[])
        vl, vm = Signal(P, name="lsb_valid"), Signal(P, name="msb_valid")

        def rd(mem, vbits, idx, name):
            port = mem.read_port(domain="comb")
            m.d.comb += port.addr.eq(idx)
            return wire(name, Mux(clear | ~vbits.bit_select(idx, 1), 0, port.data), signed(ab))

        # Overwrite ("first") flags per distinct register, and the old values they drop.
        clr_a = wire("clr_a", wl_a & (self.i_first_a | (merge & self.i_first_b)))
        clr_b = wire("clr_b", wr_b & self.i_first_b)
        clr_msb = wire("clr_msb", wm & first_sel)
        old_a, old_b = rd(lsb, vl, g_a, "old_a"), rd(lsb, vl, g_b, "old_b")
        old_msb = rd(msb, vm, g_sel, "old_msb")

        add = Signal(signed(ab))
        m.d.comb += add.eq(
            Mux(wl_a, inc_a, 0) + Mux(wl_b, inc_b, 0) + Mux(wm, p_msb, 0)
            - Mux(clr_a, old_a, 0) - Mux(clr_b, old_b, 0) - Mux(clr_msb, old_msb, 0)
        )
        acc_next = Signal(signed(ab))
        m.d.comb += acc_next.eq(Mux(clear, 0, acc) + add)
        with m.If(valid):
            m.d.sync += acc.eq(acc_next)

        # Shared register adders (three per PE, not one per register): the new value of lane a's
        # LSB word (lane b's increment too when both lanes hit one group), of lane b's, and of
        # the MSB word a temporal COMPUTE writes; each goes to its register file's write port.
        for mem, addr, en, data in (
            (lsb, g_a, wl_a, Mux(clr_a, 0, old_a) + inc_a + Mux(merge, inc_b, 0)),
            (lsb, g_b, wr_b, Mux(clr_b, 0, old_b) + inc_b),
            (msb, g_sel, wm, Mux(clr_msb, 0, old_msb) + p_msb),
        ):
            port = mem.write_port()
            m.d.comb += [port.addr.eq(addr), port.en.eq(en), port.data.eq(data)]
        one = Const(1, P)
        m.d.sync += [
            vl.eq(Mux(clear, 0, vl) | Mux(wl_a, one << g_a, 0) | Mux(wr_b, one << g_b, 0)),
            vm.eq(Mux(clear, 0, vm) | Mux(wm, one << g_sel, 0)),
        ]

        last = wire("last", valid & self.i_last)
        m.d.sync += [
            self.out_valid.eq(last),
            data_reg(self.out_port).eq(self.i_port),
        ]
        out = data_reg(self.out)
        with m.If(last):
            m.d.sync += out.eq(acc_next)
        return m
