"""The Kaleido processing element: output-stationary, four modes, per-group partial registers.

Each PE accumulates one output ``Y[token, n]``. Per channel group g it keeps the group's partial
sum split into an MSB part ``msb[g] = sum msb(X_eff) * W`` and an LSB part
``lsb[g] = sum lsb(X_eff) * W`` (SPEC.md section 3). A tile processes R spatial positions frame
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

The output accumulator keeps the invariant ``acc == sum_g (msb[g] + lsb[g])``: each update adds
the new products and subtracts the register values it overwrites, so REUSE costs nothing and
the tile's result is ``acc`` after its last slot. That result moves to the ``out`` register (the
second accumulator buffer) while ``acc`` continues into the next tile, so tiles overlap.

Operands arrive registered from the left (x lanes, per-row mode) and from above (w lanes,
per-slot control) and leave registered to the right and below: the PE is one systolic cell.
"""

from __future__ import annotations

import enum

from amaranth.hdl import Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig

#: Operand width inside the array: int8 sign-extended or uint8 zero-extended (pv's P) to 9 bits.
X_BITS = 9
#: Stationary operand width (int8, SPEC section 1).
W_BITS = 8
#: Low-half width of the split multiplier: b_lsb = 8 - b_msb with b_msb = 4 (SPEC section 3).
LO_BITS = 4


class PEMode(enum.IntEnum):
    """Per-row, per-slot PE mode (2 bits on the row lane)."""

    REUSE = 0
    COMPUTE = 1
    PARTIAL = 2
    PAIRED = 3


def pe_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    """Flat port list of the PE (flat so the emitted Verilog port names are plain)."""
    gb, pb, ab = cfg.group_bits, cfg.port_bits, cfg.acc_bits
    members = {}
    # Row lane, from the left neighbour (registered there), and to the right.
    for d, pre in ((In, "i_"), (Out, "o_")):
        members[pre + "x_a"] = d(signed(X_BITS))
        members[pre + "x_b"] = d(signed(X_BITS))
        members[pre + "mode"] = d(unsigned(2))
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
        members[pre + "last"] = d(unsigned(1))
        members[pre + "clear"] = d(unsigned(1))
        members[pre + "port"] = d(unsigned(pb))
    # Result (second accumulator buffer), valid for the cycle after a tile's last slot.
    members["out"] = Out(signed(ab))
    members["out_valid"] = Out(unsigned(1))
    members["out_port"] = Out(unsigned(pb))
    return wiring.Signature(members)


#: Names of the row-lane and column-lane fields that pass through the PE unchanged.
ROW_FIELDS = ("x_a", "x_b", "mode", "sel")
COL_FIELDS = ("w_a", "w_b", "valid", "g_a", "g_b", "first_a", "first_b", "last", "clear", "port")


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
        msb = [Signal(signed(ab), name=f"msb{r}") for r in range(P)]
        lsb = [Signal(signed(ab), name=f"lsb{r}") for r in range(P)]

        # Systolic pass-through.
        for f in ROW_FIELDS:
            m.d.sync += getattr(self, "o_" + f).eq(getattr(self, "i_" + f))
        for f in COL_FIELDS:
            m.d.sync += getattr(self, "o_" + f).eq(getattr(self, "i_" + f))

        valid, mode, sel = self.i_valid, self.i_mode, self.i_sel
        is_compute = valid & (mode == PEMode.COMPUTE)
        is_partial = valid & (mode == PEMode.PARTIAL)
        is_paired = valid & (mode == PEMode.PAIRED)

        x_sel = Mux(sel, self.i_x_b, self.i_x_a)
        w_sel = Mux(sel, self.i_w_b, self.i_w_a)
        g_sel = Mux(sel, self.i_g_b, self.i_g_a)
        first_sel = Mux(sel, self.i_first_b, self.i_first_a)

        def lo(v):
            return v[:LO_BITS].as_unsigned()

        def hi(v):
            return (v >> LO_BITS).as_signed()

        # Split multiplier. Low half: lo(x) x w. High half: hi(x) x w, or lo(x_b) x w_b when PAIRED.
        lo_x = Mux(is_paired, lo(self.i_x_a), lo(x_sel))
        lo_w = Mux(is_paired, self.i_w_a, w_sel)
        hi_x = Signal(signed(X_BITS - LO_BITS))
        m.d.comb += hi_x.eq(Mux(is_paired, lo(self.i_x_b), hi(x_sel)))
        hi_w = Mux(is_paired, self.i_w_b, w_sel)
        p_lo = Signal(signed(LO_BITS + W_BITS + 1))
        p_hi = Signal(signed(X_BITS - LO_BITS + W_BITS))
        m.d.comb += [p_lo.eq(lo_x * lo_w), p_hi.eq(hi_x * hi_w)]
        p_msb = Signal(signed(X_BITS + W_BITS))
        m.d.comb += p_msb.eq(p_hi << LO_BITS)

        # Register targets this slot.
        lo_active = is_compute | is_partial | is_paired
        g_lo = Mux(is_paired, self.i_g_a, g_sel)
        first_lo = Mux(is_paired, self.i_first_a, first_sel)
        g_b = self.i_g_b
        same = g_b == g_lo
        clear = valid & self.i_clear

        def rd(regs, idx):
            v = Const(0, signed(ab))
            for r, reg in enumerate(regs):
                v = Mux(idx == r, reg, v)
            return Mux(clear, 0, v)

        # Overwrite ("first") flags per distinct register, and the old values they drop.
        clr_lo = lo_active & (first_lo | (is_paired & same & self.i_first_b))
        clr_hi = is_paired & ~same & self.i_first_b
        clr_msb = is_compute & first_sel
        old_lo, old_hi, old_msb = Signal(signed(ab)), Signal(signed(ab)), Signal(signed(ab))
        m.d.comb += [old_lo.eq(rd(lsb, g_lo)), old_hi.eq(rd(lsb, g_b)), old_msb.eq(rd(msb, g_sel))]

        add = Signal(signed(ab))
        m.d.comb += add.eq(
            Mux(lo_active, p_lo, 0) + Mux(is_compute, p_msb, 0) + Mux(is_paired, p_hi, 0)
            - Mux(clr_lo, old_lo, 0) - Mux(clr_hi, old_hi, 0) - Mux(clr_msb, old_msb, 0)
        )
        acc_next = Signal(signed(ab))
        m.d.comb += acc_next.eq(Mux(clear, 0, acc) + add)
        with m.If(valid):
            m.d.sync += acc.eq(acc_next)

        # Shared register adders (three per PE, not one per register): the new value of the group
        # the low lane writes, of the group the high lane writes when PAIRED across groups, and of
        # the MSB register COMPUTE writes; each register takes one of them through a write enable.
        new_lo, new_hi, new_msb = Signal(signed(ab)), Signal(signed(ab)), Signal(signed(ab))
        m.d.comb += [
            new_lo.eq(Mux(clr_lo, 0, old_lo) + p_lo + Mux(is_paired & same, p_hi, 0)),
            new_hi.eq(Mux(clr_hi, 0, old_hi) + p_hi),
            new_msb.eq(Mux(clr_msb, 0, old_msb) + p_msb),
        ]
        for r in range(P):
            with m.If(lo_active & (g_lo == r)):
                m.d.sync += lsb[r].eq(new_lo)
            with m.Elif(is_paired & ~same & (g_b == r)):
                m.d.sync += lsb[r].eq(new_hi)
            with m.Elif(clear):
                m.d.sync += lsb[r].eq(0)
            with m.If(is_compute & (g_sel == r)):
                m.d.sync += msb[r].eq(new_msb)
            with m.Elif(clear):
                m.d.sync += msb[r].eq(0)

        m.d.sync += [
            self.out_valid.eq(valid & self.i_last),
            self.out_port.eq(self.i_port),
        ]
        with m.If(valid & self.i_last):
            m.d.sync += self.out.eq(acc_next)
        return m


