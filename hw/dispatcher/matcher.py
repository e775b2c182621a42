"""The channel matcher in hardware: one tile's decisions in, one cycle slot per cycle out.

Same algorithm as the reference `sim.timing.dispatch.match_tile` (docs/spec.md §3), so both make identical
choices (tests/test_matcher_rtl.py compares the slot lists):

1. On ``start`` the unit latches the tile's decisions (``R x G`` two-bit codes, COMPUTE = 0,
   PARTIAL = 1, REUSE = 2; rows outside ``row_mask`` count as REUSE), each group's channel range
   ``[k0, k1)`` and computes, per row and group, the demand in half slots (COMPUTE 2, PARTIAL 1,
   REUSE 0: the hardware split is b_msb = 4, docs/decisions.md D6), each group's activity (some row
   needs it) and the compatibility of every pair of groups (every row's demands sum to <= 2).
2. Then, one slot per cycle while ``slot_ready``: channel ``a`` = the lowest unconsumed channel of
   the first active group with one left; channel ``b`` = the lowest unconsumed channel, after ``a``,
   of any active group compatible with a's group (a group is compatible with itself when every row
   needs it at most at half width). Per group a pointer holds its lowest unconsumed channel, since
   both rules consume each group's channels in index order. ``first_a``/``first_b`` mark the first
   slot carrying a group; ``last`` the tile's last slot. A tile whose rows REUSE every group emits a
   single bubble slot (``a_valid = 0``) with ``last`` set, as the array expects.
"""

from __future__ import annotations

import operator
from functools import reduce

from amaranth.hdl import Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig

#: Verilog module name of `Matcher` (hw/rtl.py), instantiated by name in `hw.core.TileCore`.
MATCHER_MODULE_NAME = "kaleido_matcher"


def channel_bits(cfg: AcceleratorConfig) -> int:
    """Bits of a channel index or bound (0..max(max_k, max_tokens))."""
    return max(cfg.max_k, cfg.max_tokens).bit_length()


def matcher_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    """The ports of `Matcher` (see its docstring)."""
    R, G, cb, gb = cfg.array_rows, cfg.partial_regs, channel_bits(cfg), cfg.group_bits  # noqa: N806
    return wiring.Signature({
        "start": In(1), "dec": In(unsigned(R * G * 2)), "row_mask": In(unsigned(R)),
        "k0": In(unsigned(G * cb)), "k1": In(unsigned(G * cb)), "n_groups": In(range(G + 1)),
        "slot_ready": In(1),
        "busy": Out(1), "slot_valid": Out(1),
        "a_valid": Out(1), "a": Out(unsigned(cb)), "b_valid": Out(1), "b": Out(unsigned(cb)),
        "g_a": Out(unsigned(gb)), "g_b": Out(unsigned(gb)),
        "first_a": Out(1), "first_b": Out(1), "last": Out(1),
    })


class Matcher(wiring.Component):
    """Greedy channel matcher for one tile at a time (see module docstring).

    Ports: start, dec (``R*G*2`` bits, row r group g at bit ``2*(r*G + g)``), row_mask (R bits),
    k0, k1 (``G`` x `channel_bits` each), n_groups; slot_ready in; busy, slot_valid, a_valid, a,
    b_valid, b, g_a, g_b, first_a, first_b, last out.
    """

    def __init__(self, cfg: AcceleratorConfig):
        self.cfg = cfg
        super().__init__(matcher_signature(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        R, G, cb = cfg.array_rows, cfg.partial_regs, channel_bits(cfg)  # noqa: N806

        # Latched tile state.
        ptr = [Signal(unsigned(cb), name=f"ptr{g}") for g in range(G)]
        end = [Signal(unsigned(cb), name=f"end{g}") for g in range(G)]
        active = Signal(G)
        compat = [Signal(G, name=f"compat{g}") for g in range(G)]
        seen = Signal(G)
        emitted = Signal()

        # Demand and compatibility from the inputs (latched on start).
        dem = [[Signal(unsigned(2), name=f"dem{r}_{g}") for g in range(G)] for r in range(R)]
        for r in range(R):
            for g in range(G):
                code = self.dec[2 * (r * G + g):2 * (r * G + g) + 2]
                in_use = self.row_mask[r] & (g < self.n_groups)
                m.d.comb += dem[r][g].eq(Mux(in_use, Mux(code == 0, 2, Mux(code == 1, 1, 0)), 0))
        act_in = Signal(G)
        for g in range(G):
            m.d.comb += act_in[g].eq(reduce(operator.or_, (dem[r][g] != 0 for r in range(R))))
        compat_in = [Signal(G, name=f"compat_in{g}") for g in range(G)]
        for g in range(G):
            for h in range(G):
                fits = Const(1, 1)
                for r in range(R):
                    fits = fits & ((dem[r][g] + dem[r][h]) <= 2)
                m.d.comb += compat_in[g][h].eq(fits)

        with m.If(self.start):
            m.d.sync += [active.eq(act_in), seen.eq(0), emitted.eq(0)]
            m.d.sync += [c.eq(ci) for c, ci in zip(compat, compat_in, strict=True)]
            for g in range(G):
                m.d.sync += [ptr[g].eq(self.k0[g * cb:(g + 1) * cb]), end[g].eq(self.k1[g * cb:(g + 1) * cb])]

        # Slot selection (combinational on the latched state).
        free = [Signal(name=f"free{g}") for g in range(G)]
        for g in range(G):
            m.d.comb += free[g].eq(active[g] & (ptr[g] < end[g]))
        any_free = Signal()
        m.d.comb += any_free.eq(reduce(operator.or_, free))
        ga = Signal(range(G))
        # priority: lowest-index group with a free channel
        sel = Const(0, range(G))
        for g in reversed(range(G)):
            sel = Mux(free[g], g, sel)
        m.d.comb += ga.eq(sel)
        a = Signal(unsigned(cb))
        a_compat = Signal(G)
        ptr_a = Const(0, unsigned(cb))
        compat_a = Const(0, G)
        for g in range(G):
            ptr_a = Mux(ga == g, ptr[g], ptr_a)
            compat_a = Mux(ga == g, compat[g], compat_a)
        m.d.comb += [a.eq(ptr_a), a_compat.eq(compat_a)]

        # Partner: min candidate channel over compatible groups.
        best = Const((1 << cb) - 1, unsigned(cb))
        best_g = Const(0, range(G))
        found = Const(0, 1)
        for h in range(G):
            cand = Signal(unsigned(cb), name=f"cand{h}")
            m.d.comb += cand.eq(Mux(ga == h, ptr[h] + 1, ptr[h]))
            ok = Signal(name=f"ok{h}")
            m.d.comb += ok.eq(any_free & active[h] & a_compat[h] & (cand < end[h]))
            better = ok & (~found | (cand < best))
            best = Mux(better, cand, best)
            best_g = Mux(better, h, best_g)
            found = found | ok
        b_valid = Signal()
        b = Signal(unsigned(cb))
        gb = Signal(range(G))
        m.d.comb += [b_valid.eq(found), b.eq(best), gb.eq(best_g)]

        # Does a channel remain after this slot?
        remain = Const(0, 1)
        for g in range(G):
            used = Mux(ga == g, 1, 0) + Mux(b_valid & (gb == g), 1, 0)
            remain = remain | (active[g] & (ptr[g] + used < end[g]))

        running = Signal()
        m.d.comb += running.eq(~self.start & (any_free | ~emitted) & self.busy)
        m.d.comb += [
            self.slot_valid.eq(running),
            self.a_valid.eq(any_free), self.a.eq(a), self.g_a.eq(Mux(any_free, ga, 0)),
            self.b_valid.eq(b_valid), self.b.eq(Mux(b_valid, b, 0)), self.g_b.eq(Mux(b_valid, gb, 0)),
            self.first_a.eq(any_free & ~seen.bit_select(ga, 1)),
            self.first_b.eq(b_valid & ~seen.bit_select(gb, 1) & (gb != ga)),
            self.last.eq(~remain),
        ]
        with m.If(self.start):
            m.d.sync += self.busy.eq(1)
        with m.Elif(running & self.slot_ready):
            m.d.sync += emitted.eq(1)
            for g in range(G):
                inc = Mux(any_free & (ga == g), 1, 0) + Mux(b_valid & (gb == g), 1, 0)
                m.d.sync += ptr[g].eq(ptr[g] + inc)
            new_seen = seen | Mux(any_free, Const(1, G) << ga, 0) | Mux(b_valid, Const(1, G) << gb, 0)
            m.d.sync += seen.eq(new_seen)
            with m.If(~remain):
                m.d.sync += self.busy.eq(0)
        return m
