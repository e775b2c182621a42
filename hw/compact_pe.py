"""The compact organisation's PE (docs/architecture.md "Array organisations", docs/decisions.md D50, D65).

A band-tile (`sim.timing.compact`) runs R/B tokens x C outputs of ONE channel group g, so the PE needs
no per-group registers: a band-tile row accumulates its token's partial sum of g, and the combine unit
(`hw.combine`) adds the group partials of a token. Per slot and row the PE runs one of four modes
(`hw.pe.PEMode`, the same 2-bit code):

======== ================================================= ===========================
mode     work                                              multiplier use
======== ================================================= ===========================
REUSE    none (an idle row: the band-tile has no token in it) idle
COMPUTE  ``acc += hi(x_a) w_a << 4 + lo(x_a) w_a``;          both halves
         ``accm += hi(x_a) w_a << 4``
PARTIAL  ``acc += lo(x_a) w_a``                             low half
PAIRED   ``acc += lo(x_a) w_a + lo(x_b) w_b``               both halves (two channels)
======== ================================================= ===========================

``hi(x) = x >> 4`` (signed), ``lo(x) = x & 15`` (b_msb = 4, the split multiplier of `hw.pe`). The
first slot of a band-tile (``first``) starts both accumulators from 0; on its last slot (``last``)
``acc`` and ``accm`` move to the ``out`` / ``out_m`` registers (the second buffer), where they stay
until the PE's next band-tile ends, so the band's drain reads a row whenever its port's turn comes
(`hw.compact_array`). ``out`` is the token's group partial (COMPUTE: msb + lsb; PARTIAL: the new lsb
partial), ``out_m`` a COMPUTE token's msb partial, which the combine unit keeps as the chain's msb
state for a PARTIAL successor (the golden model's rule, docs/spec.md §2). That second accumulator is
what the RTL needs beyond D50's count (docs/decisions.md D65; `sim.cost.area.compact_pe_extra`).

Operands arrive registered from the left (row lane: ``x_a``, ``x_b``, ``mode``) and from above (the
band's weight lane: ``w_a``, ``w_b``, ``valid``, ``first``, ``last``) and leave registered to the right
and below: one systolic cell, as `hw.pe.PE`.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig
from hw.pe import LO_BITS, W_BITS, X_BITS, PEMode

#: Verilog module name of `CompactPE` (emitted once by `hw.rtl`, instantiated by name in the column).
CPE_MODULE_NAME = "kaleido_cpe"
#: Row-lane fields (left to right) and band weight-lane fields (top to bottom) of the compact PE.
CROW_FIELDS = ("x_a", "x_b", "mode")
CCOL_FIELDS = ("w_a", "w_b", "valid", "first", "last")


def cpe_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    """Flat port list of `CompactPE`: ``i_*``/``o_*`` lanes (`CROW_FIELDS`, `CCOL_FIELDS`), ``out``, ``out_m``."""
    shapes = {"x_a": signed(X_BITS), "x_b": signed(X_BITS), "mode": unsigned(2), "w_a": signed(W_BITS),
              "w_b": signed(W_BITS), "valid": unsigned(1), "first": unsigned(1), "last": unsigned(1)}
    members = {}
    for d, pre in ((In, "i_"), (Out, "o_")):
        for f in (*CROW_FIELDS, *CCOL_FIELDS):
            members[pre + f] = d(shapes[f])
    members["out"] = Out(signed(cfg.acc_bits))
    members["out_m"] = Out(signed(cfg.acc_bits))
    return wiring.Signature(members)


def cpe_lane_bits(cfg: AcceleratorConfig, fields: tuple[str, ...]) -> int:
    """Bits of the compact PE's ``i_`` lane fields ``fields`` (e.g. `CROW_FIELDS`: 9 + 9 + 2 = 20)."""
    mem = cpe_signature(cfg).members
    return sum(mem["i_" + f].shape.width for f in fields)


class CompactPE(wiring.Component):
    """One compact-organisation PE (module docstring).

    Raises:
        ValueError: the config's ``b_msb`` is not the split the PE is built for (4).
    """

    def __init__(self, cfg: AcceleratorConfig):
        if cfg.b_msb != 8 - LO_BITS:
            raise ValueError(f"the PE is built for b_msb = {8 - LO_BITS}, config asks {cfg.b_msb}")
        self.cfg = cfg
        super().__init__(cpe_signature(cfg))

    def elaborate(self, platform):
        m = Module()
        ab = self.cfg.acc_bits
        for f in (*CROW_FIELDS, *CCOL_FIELDS):
            m.d.sync += getattr(self, "o_" + f).eq(getattr(self, "i_" + f))
        valid, mode = self.i_valid, self.i_mode
        is_compute = Signal(name="is_compute")
        is_paired = Signal(name="is_paired")
        is_active = Signal(name="is_active")
        m.d.comb += [is_compute.eq(mode == PEMode.COMPUTE), is_paired.eq(mode == PEMode.PAIRED),
                     is_active.eq(mode != PEMode.REUSE)]

        # Split multiplier: low half lo(x_a) x w_a; high half hi(x_a) x w_a, or lo(x_b) x w_b when PAIRED.
        lo_a = self.i_x_a[:LO_BITS].as_unsigned()
        hi_x = Signal(signed(X_BITS - LO_BITS), name="hi_x")
        hi_w = Signal(signed(W_BITS), name="hi_w")
        m.d.comb += [hi_x.eq(Mux(is_paired, self.i_x_b[:LO_BITS].as_unsigned(), (self.i_x_a >> LO_BITS).as_signed())),
                     hi_w.eq(Mux(is_paired, self.i_w_b, self.i_w_a))]
        p_lo = Signal(signed(LO_BITS + W_BITS + 1), name="p_lo")
        p_hi = Signal(signed(X_BITS - LO_BITS + W_BITS), name="p_hi")
        m.d.comb += [p_lo.eq(lo_a * self.i_w_a), p_hi.eq(hi_x * hi_w)]
        # The high half's product: shifted into the msb position (COMPUTE), as is (PAIRED), or none.
        p_msb = Signal(signed(X_BITS + W_BITS), name="p_msb")
        hi_term = Signal(signed(X_BITS + W_BITS), name="hi_term")
        m.d.comb += [p_msb.eq(Mux(is_compute, p_hi << LO_BITS, 0)),
                     hi_term.eq(Mux(is_paired, p_hi, p_msb))]
        add = Signal(signed(X_BITS + W_BITS + 1), name="add")  # the halves' adder
        m.d.comb += add.eq(hi_term + Mux(is_active, p_lo, 0))

        acc, accm = Signal(signed(ab), name="acc"), Signal(signed(ab), name="accm")
        acc_next, accm_next = Signal(signed(ab), name="acc_next"), Signal(signed(ab), name="accm_next")
        m.d.comb += [acc_next.eq(Mux(self.i_first, 0, acc) + add),
                     accm_next.eq(Mux(self.i_first, 0, accm) + p_msb)]
        with m.If(valid):
            m.d.sync += [acc.eq(acc_next), accm.eq(accm_next)]
        with m.If(valid & self.i_last):
            m.d.sync += [self.out.eq(acc_next), self.out_m.eq(accm_next)]
        return m
