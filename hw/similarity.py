"""The similarity unit: SAD per (token, channel group) against the neighbour's effective value.

docs/spec.md §2, in hardware form. For one token and one channel group, the group's channels arrive
``lanes`` at a time (beats; ``first``/``last`` mark the group's first and last beat, ``mask`` the
active lanes of a short last beat) with the neighbour's *effective* values (9-bit: int8 or uint8).
The unit accumulates ``SAD = sum |x - nb|`` and, one cycle after the last beat, compares it with the
integer bounds ``b1 = ceil(theta1 * |g|)``, ``b2 = ceil(theta2 * |g|)`` that software precomputes
(`algo.reuse.golden.theta_bounds`): ``SAD < b1`` -> REUSE, else ``SAD < b2`` -> PARTIAL, else COMPUTE; a
token without a neighbour (``no_nb``) always COMPUTEs.

`EffectiveValue` turns a decision back into the token's effective operand lanes (REUSE: the
neighbour's value; PARTIAL: the neighbour's top 4 bits + the token's low 4 bits; COMPUTE: the
token's value), which is what the next token along the reuse axis compares against. The buffer that
holds the previous frame's effective operand is outside this unit (docs/decisions.md D4).

Throughput: ``lanes`` channels per cycle; with ``lanes = R`` it keeps pace with an R x C array
whose tiles take K slots for R tokens.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig
from hw.pe import COMPUTE, LO_BITS, PARTIAL, REUSE, X_BITS


def sad_bits(cfg: AcceleratorConfig) -> int:
    """Width of SAD and bounds: a group has at most K <= max_k channels of |x - nb| <= 255."""
    return (max(cfg.max_k, cfg.max_tokens) * 255).bit_length()


class SimilarityUnit(wiring.Component):
    """SAD accumulator and threshold comparator (see module docstring).

    Ports (packed lanes, lane i at bits ``[w*i, w*i + w)``):
        valid, first, last: beat control; x: ``lanes`` x 8 bits (int8 or uint8 by ``x_unsigned``);
        nb: ``lanes`` x 9 bits signed (neighbour's effective values); mask: active lanes;
        b1, b2: bounds; no_nb: the token has no neighbour in this group.
        dec_valid, dec (2 bits), sad: the result, one cycle after the ``last`` beat.
    """

    def __init__(self, cfg: AcceleratorConfig, lanes: int | None = None):
        self.cfg = cfg
        self.lanes = lanes or cfg.array_rows
        sb = sad_bits(cfg)
        super().__init__({
            "valid": In(1), "first": In(1), "last": In(1),
            "x": In(unsigned(8 * self.lanes)), "nb": In(unsigned(X_BITS * self.lanes)),
            "mask": In(unsigned(self.lanes)), "x_unsigned": In(1), "no_nb": In(1),
            "b1": In(unsigned(sb)), "b2": In(unsigned(sb)),
            "dec_valid": Out(1), "dec": Out(unsigned(2)), "sad": Out(unsigned(sb)),
        })

    def elaborate(self, platform):
        m = Module()
        L, sb = self.lanes, sad_bits(self.cfg)  # noqa: N806
        beat = 0
        for i in range(L):
            b = self.x[8 * i:8 * i + 8]
            x9 = Signal(signed(X_BITS), name=f"x{i}")
            m.d.comb += x9.eq(Mux(self.x_unsigned, b.as_unsigned(), b.as_signed()))
            nb = self.nb[X_BITS * i:X_BITS * (i + 1)].as_signed()
            diff = Signal(signed(X_BITS + 1), name=f"diff{i}")
            m.d.comb += diff.eq(x9 - nb)
            ad = Signal(unsigned(X_BITS), name=f"absdiff{i}")
            m.d.comb += ad.eq(Mux(self.mask[i], Mux(diff < 0, -diff, diff), 0))
            beat = beat + ad
        acc = Signal(unsigned(sb))
        total = Signal(unsigned(sb))
        m.d.comb += total.eq(Mux(self.first, 0, acc) + beat)
        with m.If(self.valid):
            m.d.sync += acc.eq(total)
        m.d.sync += self.dec_valid.eq(self.valid & self.last)
        with m.If(self.valid & self.last):
            m.d.sync += [
                self.sad.eq(total),
                self.dec.eq(Mux(self.no_nb, COMPUTE,
                                Mux(total < self.b1, REUSE, Mux(total < self.b2, PARTIAL, COMPUTE)))),
            ]
        return m


class EffectiveValue(wiring.Component):
    """Effective operand lanes from a decision (combinational; b_msb = 4, hw.pe.LO_BITS)."""

    def __init__(self, lanes: int):
        self.lanes = lanes
        super().__init__({
            "dec": In(unsigned(2)), "x": In(unsigned(8 * lanes)), "x_unsigned": In(1),
            "nb": In(unsigned(X_BITS * lanes)), "x_eff": Out(unsigned(X_BITS * lanes)),
        })

    def elaborate(self, platform):
        m = Module()
        low = (1 << LO_BITS) - 1
        for i in range(self.lanes):
            b = self.x[8 * i:8 * i + 8]
            x9 = Signal(signed(X_BITS), name=f"x{i}")
            m.d.comb += x9.eq(Mux(self.x_unsigned, b.as_unsigned(), b.as_signed()))
            nb = self.nb[X_BITS * i:X_BITS * (i + 1)]
            partial = Signal(unsigned(X_BITS), name=f"partial{i}")
            m.d.comb += partial.eq((nb & ~low & ((1 << X_BITS) - 1)) | (x9.as_unsigned() & low))
            m.d.comb += self.x_eff[X_BITS * i:X_BITS * (i + 1)].eq(
                Mux(self.dec == REUSE, nb, Mux(self.dec == PARTIAL, partial, x9.as_unsigned())))
        return m
