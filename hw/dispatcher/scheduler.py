"""The tile scheduler in hardware: positions of one window in, their clustered order out.

Same result as the reference `sim.timing.dispatch.schedule_positions` (docs/spec.md §3): inside a window
of at most ``window`` consecutive raster positions, the positions are sorted stably by their
reuse pattern, the string of decision codes over (group, frame) group-major (frame 0 excluded),
so positions with alike patterns land in the same tile. tests/test_scheduler_rtl.py compares the
permutations on seeded random decisions.

Algorithm: least-significant-digit radix sort, one digit (a 2-bit decision code, COMPUTE = 0,
PARTIAL = 1, REUSE = 2) per pass. A stable sort on each digit from the last pattern column to the
first is the stable lexicographic sort the reference computes with `numpy.lexsort`. The patterns
arrive one digit column at a time, read from the op's decision buffer (column ``c = g*(F-1) +
(f-1)``: decision of group g at frame f; the caller streams ``c = L-1 .. 0``), so the unit never
stores whole patterns (docs/decisions.md D20):

1. ``start`` latches ``n_pos`` (positions in this window, 1..window) and ``n_digits`` (pattern
   length L = groups * (frames - 1), 0..``max_digits``).
2. LOAD: ``n_pos`` digits of the current column in raster order on ``d_code`` (valid/ready), one
   per cycle, into the digit memory; a histogram of the three codes is kept on the way. In the
   first column the order memory is also initialised to the identity.
3. BASES (1 cycle): bucket bases ``0, c0, c0 + c1``.
4. SCATTER: for i in 0..n_pos-1, position ``p = order[i]`` goes to ``next[base[dig[p]]++]``
   (stable counting sort); the two order memories swap roles after each pass.
5. OUT: the final order, one in-window position index per cycle on ``o_pos`` (valid/ready),
   ``o_last`` on the last. The caller adds the window's first raster position.

Latency per window: ``L * (2 * n_pos + 1) + n_pos`` cycles plus handshake stalls (tiny-8x8,
a 64-position window, L = 6: 838 cycles). Storage: digits ``window x 2`` bits and two order
memories ``window x log2(window)`` bits (asynchronous read, a register file).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig

#: Default longest pattern, in frames after the first: 20 (Wan2.1 at 480p and 81 video frames has
#: 21 latent frames, docs/spec.md §1); the pattern length is partial_regs * this.
MAX_REUSE_FRAMES = 20


class Scheduler(wiring.Component):
    """Radix-sort scheduler for one window of positions (see module docstring).

    Args:
        cfg: accelerator config (rows R, partial_regs G).
        window: positions per window; default ``cfg.scheduler_window_tiles * R`` (the window
            `sim.timing.dispatch.schedule_positions` sorts in for this config).
        max_digits: longest pattern; default ``G * MAX_REUSE_FRAMES``.

    Ports: start, n_pos, n_digits; d_valid, d_code in, d_ready out; o_ready in, o_valid, o_pos,
    o_last, busy out.
    """

    def __init__(self, cfg: AcceleratorConfig, window: int | None = None, max_digits: int | None = None):
        self.cfg = cfg
        self.window = window or cfg.scheduler_window_tiles * cfg.array_rows
        self.max_digits = max_digits if max_digits is not None else cfg.partial_regs * MAX_REUSE_FRAMES
        pb = max(1, (self.window - 1).bit_length())
        self.pos_bits = pb
        super().__init__({
            "start": In(1), "n_pos": In(range(self.window + 1)), "n_digits": In(range(self.max_digits + 1)),
            "d_valid": In(1), "d_code": In(unsigned(2)), "d_ready": Out(1),
            "o_ready": In(1), "o_valid": Out(1), "o_pos": Out(unsigned(pb)), "o_last": Out(1),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        P, pb = self.window, self.pos_bits  # noqa: N806

        m.submodules.digits = dig = Memory(shape=unsigned(2), depth=P, init=[])
        m.submodules.order0 = o0 = Memory(shape=unsigned(pb), depth=P, init=[])
        m.submodules.order1 = o1 = Memory(shape=unsigned(pb), depth=P, init=[])
        dig_w, dig_r = dig.write_port(), dig.read_port(domain="comb")
        o0_w, o0_r = o0.write_port(), o0.read_port(domain="comb")
        o1_w, o1_r = o1.write_port(), o1.read_port(domain="comb")

        n_pos = Signal.like(self.n_pos)
        n_digits = Signal.like(self.n_digits)
        col = Signal.like(self.n_digits)          # passes done
        src = Signal()                            # which order memory holds the current order
        i = Signal(range(P + 1))
        count = [Signal(range(P + 1), name=f"count{k}") for k in range(3)]
        base = [Signal(range(P + 1), name=f"base{k}") for k in range(3)]

        # Current order read at i (SCATTER and OUT), the digit of that position.
        cur = Signal(unsigned(pb))
        m.d.comb += [o0_r.addr.eq(i), o1_r.addr.eq(i), cur.eq(Mux(src, o1_r.data, o0_r.data))]
        m.d.comb += dig_r.addr.eq(cur)
        ident = Signal()  # n_digits == 0: the order is the identity, never written

        with m.FSM():
            with m.State("IDLE"):
                with m.If(self.start):
                    m.d.sync += [n_pos.eq(self.n_pos), n_digits.eq(self.n_digits), col.eq(0), src.eq(0),
                                 i.eq(0), ident.eq(self.n_digits == 0)]
                    m.d.sync += [c.eq(0) for c in count]
                    with m.If(self.n_digits == 0):
                        m.next = "OUT"
                    with m.Else():
                        m.next = "LOAD"
            with m.State("LOAD"):
                m.d.comb += [self.busy.eq(1), self.d_ready.eq(1)]
                with m.If(self.d_valid):
                    m.d.comb += [dig_w.addr.eq(i), dig_w.data.eq(self.d_code), dig_w.en.eq(1)]
                    with m.If(col == 0):  # identity into the source order memory (src = 0)
                        m.d.comb += [o0_w.addr.eq(i), o0_w.data.eq(i), o0_w.en.eq(1)]
                    for k in range(3):
                        with m.If(self.d_code == k):
                            m.d.sync += count[k].eq(count[k] + 1)
                    with m.If(i == n_pos - 1):
                        m.d.sync += i.eq(0)
                        m.next = "BASES"
                    with m.Else():
                        m.d.sync += i.eq(i + 1)
            with m.State("BASES"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [base[0].eq(0), base[1].eq(count[0]), base[2].eq(count[0] + count[1])]
                m.next = "SCATTER"
            with m.State("SCATTER"):
                m.d.comb += self.busy.eq(1)
                k = dig_r.data
                dst = Signal(range(P + 1))
                m.d.comb += dst.eq(Mux(k == 0, base[0], Mux(k == 1, base[1], base[2])))
                for kk in range(3):
                    with m.If(k == kk):
                        m.d.sync += base[kk].eq(base[kk] + 1)
                with m.If(src):
                    m.d.comb += [o0_w.addr.eq(dst), o0_w.data.eq(cur), o0_w.en.eq(1)]
                with m.Else():
                    m.d.comb += [o1_w.addr.eq(dst), o1_w.data.eq(cur), o1_w.en.eq(1)]
                with m.If(i == n_pos - 1):
                    m.d.sync += [i.eq(0), src.eq(~src), col.eq(col + 1)]
                    m.d.sync += [c.eq(0) for c in count]
                    with m.If(col + 1 == n_digits):
                        m.next = "OUT"
                    with m.Else():
                        m.next = "LOAD"
                with m.Else():
                    m.d.sync += i.eq(i + 1)
            with m.State("OUT"):
                m.d.comb += [self.busy.eq(1), self.o_valid.eq(1),
                             self.o_pos.eq(Mux(ident, i, cur)), self.o_last.eq(i == n_pos - 1)]
                with m.If(self.o_ready):
                    with m.If(i == n_pos - 1):
                        m.d.sync += i.eq(0)
                        m.next = "IDLE"
                    with m.Else():
                        m.d.sync += i.eq(i + 1)
        return m
