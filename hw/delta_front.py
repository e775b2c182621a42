"""The similarity pass in front of the delta and compact op-level controllers (docs/decisions.md D103):
`DeltaFront`, Verilog module ``kaleido_dfront`` (delta) or ``kaleido_cfront`` (compact), takes an op's raw X and
writes what ``kaleido_daccel`` / ``kaleido_caccel`` (`hw.delta_accel.DeltaAccel`, `hw.compact_accel.CompactAccel`,
built with their queues) take from a host today: the decision codes and, for delta, the differences; for compact,
the X bytes.

What the host gives it:

- the **X buffer**, written through the front's write port while idle (``wr_valid``/``wr_ready``, ``wr_addr``,
  ``wr_data``): per token its int8 or uint8 operand bytes in the controller's group layout, word
  ``token KW + xoff_g + j`` = the group's channels ``k0 + P j .. k0 + P j + P - 1`` (lane l at bits ``[8 l, 8 l +
  8)``; lanes past the group zero), exactly `hw.compact_accel_host.x_words` (``P``, ``KW`` the controller's);
- the op ports (stable from ``start`` to ``done``), `front_ports` computes them: ``c_f`` frames, ``c_hw`` positions
  a frame (H W), ``c_w`` the grid's width (tokens in raster order ``f H W + h W + w``), ``c_groups`` the groups, per
  group g its width ``c_gwidth`` (``bits(max_k + 1)`` each), its first word ``c_gxoff``
  (`hw.delta_accel_host.group_layout`), its reuse axis ``c_gaxis`` (2 bits each: 0 ``f``, 1 ``h``, 2 ``w``,
  `hw.delta_core.AXIS_CODE`) and its SAD bounds ``c_b1``, ``c_b2`` (`hw.similarity.sad_bits` each;
  `algo.reuse.golden.theta_bounds`), and ``x_unsigned``. In a combine core built with the front
  (`front_through`) they come from the core's and the queues' ports.

What it does after ``start`` (one cycle, while idle; cycle 0 = the ``start`` cycle): a pass over the tokens in
raster order, two pipeline stages (hw/accel_front.py's: the buffer reads, then the unit and the writes).

- Per token t, **phase A** walks its groups in order and each group's ``xw_g = ceil(|g| / P)`` words: stage 1 reads
  the token's X word and its neighbour's effective word (``nb = t - stride``, stride ``H W``, ``W`` or 1 by the
  group's axis) from the **effective-value buffer** (1r1w, one 9-bit lane per channel, token-addressed as the X
  buffer); stage 2 feeds them to `hw.similarity.SimilarityUnit` (``no_nb`` where the token's coordinate along the
  axis is 0), which decides the group one cycle after its last word (REUSE, PARTIAL, COMPUTE against b1, b2).
- **Phase B** walks the same words again. Stage 2 forms the word's effective value (`hw.similarity.EffectiveValue`
  with the group's decision) and writes it into the effective-value buffer at the token, and writes one word
  through the **output port** (``o_valid``, ``o_sel``, ``o_addr``, ``o_data``: the controller's write port): delta,
  the differences (``wr_sel`` 0, `hw.delta_accel_host.x_words`' word), per lane ``x`` when every group of the
  group's axis class (`sim.timing.delta.classes`) COMPUTEs (the direct form, also every token without a
  neighbour), else ``x_eff - nb`` (COMPUTE: ``x - nb``; PARTIAL: ``lsb(x) - lsb(nb)``; REUSE: 0), lanes past the
  group 0 (`sim.timing.delta_reference.differences`); compact, the X word as read (``wr_sel`` 0). The decisions
  are known for the whole token when phase B starts (phase A decided every group; the last group's decision
  is taken from the unit's output in the cycle it appears), which is why the pass decides a token's groups
  before it writes any: the direct form needs the class's every decision.
- The token's **decision word** (``wr_sel`` 3, address the token, G 2-bit codes, group g at ``[2 g, 2 g + 2)``,
  groups past ``c_groups`` 0: `hw.delta_accel_host.dec_words`) leaves at stage 2 of the next token's first
  phase-A word (a cycle without a word to write), the last token's one cycle after its last word.

Timing (`sim.timing.delta_front.front_cycles`): with ``W = sum_g xw_g``, stage 1 runs cycles 1 .. 2 M W; the word
``j`` of group g of token t is written at cycle ``2 + 2 t W + W + off_g + j`` (``off_g = sum_{g' < g} xw_g'``),
its decision word at ``2 + 2 (t + 1) W``, and ``done`` pulses at ``3 + 2 M W``: one write a cycle, no stall. The
output port has no back-pressure: the controller must be idle (``wr_ready``, as ``kaleido_daccel`` is between
ops) while the front runs; ``overrun`` is a sticky flag of a word written while ``o_ready`` was low.

Not in this slice (D103): overlapping phase B of one token with phase A of the next (two X reads a cycle), the
pass overlapped with the controller's run (its buffers are written while it is idle), the effective-value buffer
as a ring of ``H W + 1`` tokens (here one word per X word), a front for the weight-staged controller.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.pe import COMPUTE, X_BITS
from hw.similarity import EffectiveValue, SimilarityUnit, sad_bits
from hw.sram import index_bits as _bits
from hw.sram import macro, macro_name, split_banks
from hw.sram import pow2ceil as _pow2ceil

#: Verilog module names of `DeltaFront` in front of the delta and the compact controller (hw/rtl.py).
DFRONT_MODULE_NAME = "kaleido_dfront"
CFRONT_MODULE_NAME = "kaleido_cfront"
#: ``c_gaxis`` codes (hw/delta_core.py ``AXIS_CODE``).
AXIS_CODE = {"f": 0, "h": 1, "w": 2}
#: The controller's write-port selects the front drives (`hw.delta_accel_host.SEL_X`, ``SEL_DEC``).
SEL_X, SEL_DEC = 0, 3


class DeltaFront(wiring.Component):
    """The similarity pass in front of a queue-fed delta or compact controller (module docstring).

    Args:
        acc: the `hw.delta_accel.DeltaAccel` or `hw.compact_accel.CompactAccel` it feeds (built with ``queues``):
            its organisation, ``P``, ``KW``, ``max_tokens``, ``max_k``, ``partial_regs`` and write-port widths.
        pe: ``"inline"`` (Amaranth simulation) or ``"instance"`` (the macros instantiated by name, Verilog).

    Attributes: ``geometry`` the buffers (name -> (kind, depth, width)): ``x`` 1rw ``pow2(max_tokens) KW`` words
    of ``8 P`` bits, ``eff`` 1r1w of as many words of ``9 P`` bits; ``module_name``.

    Raises:
        ValueError: the controller without its queues (no decision buffer), or a group wider than the similarity
            unit's SAD holds (``acc.max_k`` above ``max(cfg.max_k, cfg.max_tokens)``).
    """

    def __init__(self, acc, pe: str = "inline"):
        cfg = acc.cfg
        if not acc.queues or acc.max_k > max(cfg.max_k, cfg.max_tokens):
            discard(self)
            raise ValueError("the front feeds a controller with its queues (decision buffer) and max_k within "
                             "the similarity unit's SAD (max(cfg.max_k, cfg.max_tokens))")
        self.acc, self.cfg, self.pe_kind = acc, cfg, pe
        self.delta = cfg.organisation == "delta"
        self.module_name = DFRONT_MODULE_NAME if self.delta else CFRONT_MODULE_NAME
        self.P, self.KW, self.G = acc.P, acc.KW, cfg.partial_regs
        self.tb, self.kwb = _bits(acc.max_tokens), _bits(acc.KW)
        depth = _pow2ceil(acc.max_tokens) * acc.KW
        self.geometry = {"x": ("1rw", depth, 8 * self.P), "eff": ("1r1w", depth, X_BITS * self.P)}
        self.xabits = _bits(depth)
        self.sb = sad_bits(cfg)
        self.wb = _bits(acc.max_k + 1)
        G = self.G  # noqa: N806
        t = range(acc.max_tokens + 1)
        super().__init__({
            "wr_valid": In(1), "wr_ready": Out(1), "wr_addr": In(unsigned(self.xabits)),
            "wr_data": In(unsigned(8 * self.P)),
            "c_f": In(t), "c_hw": In(t), "c_w": In(t), "c_groups": In(range(G + 1)),
            "c_gwidth": In(unsigned(G * self.wb)), "c_gxoff": In(unsigned(G * self.kwb)), "c_gaxis": In(2 * G),
            "c_b1": In(unsigned(G * self.sb)), "c_b2": In(unsigned(G * self.sb)), "x_unsigned": In(1),
            "start": In(1), "busy": Out(1), "done": Out(1),
            "o_valid": Out(1), "o_ready": In(1), "o_sel": Out(2), "o_addr": Out(unsigned(acc.abits)),
            "o_data": Out(unsigned(len(acc.wr_data))), "overrun": Out(1),
        })

    def macros(self) -> list[tuple[str, int, int, None]]:
        """The distinct macros ``(kind, depth, width, lane)`` of the buffers, sorted by `hw.sram.macro_name`."""
        kinds = {(kind, split_banks(depth, width)[0], width, None) for kind, depth, width in self.geometry.values()}
        return sorted(kinds, key=lambda k: macro_name(*k))

    def _buffer(self, m, name, raddr, re, waddr, we, wdata):
        """One buffer of `geometry` over its macros (banked by the high address bits past `hw.sram.MACRO_MAX_BITS`);
        returns the read data (of the bank the last read chose)."""
        kind, depth, width = self.geometry[name]
        bank, n = split_banks(depth, width)
        lb = (bank - 1).bit_length()
        rsel = raddr[lb:] if n > 1 else Const(0, 1)
        wsel = waddr[lb:] if n > 1 else Const(0, 1)
        sel_q = Signal.like(rsel, name=f"{name}_sel")
        with m.If(re):
            m.d.sync += sel_q.eq(rsel)
        rdata = Const(0, unsigned(width))
        for k in range(n):
            ports, elab = macro(kind, bank, width, None, instance=self.pe_kind == "instance")
            m.submodules[f"{name}_m{k}"] = elab
            lo = (lambda a: a[:lb]) if lb else (lambda a: 0)
            if kind == "1rw":  # the host writes while idle, the pass reads: never both
                m.d.comb += [ports.addr.eq(Mux(we, lo(waddr), lo(raddr))), ports.re.eq(re & (rsel == k)),
                             ports.we.eq(we & (wsel == k)), ports.wmask.eq(1), ports.wdata.eq(wdata)]
            else:
                m.d.comb += [ports.raddr.eq(lo(raddr)), ports.re.eq(re & (rsel == k)), ports.waddr.eq(lo(waddr)),
                             ports.we.eq(we & (wsel == k)), ports.wmask.eq(1), ports.wdata.eq(wdata)]
            rdata = Mux(sel_q == k, ports.rdata, rdata) if n > 1 else ports.rdata
        return rdata

    def elaborate(self, platform):  # noqa: C901
        m = Module()
        P, G, tb, kwb, sb, wb = self.P, self.G, self.tb, self.kwb, self.sb, self.wb  # noqa: N806
        lp = (P - 1).bit_length()
        m.submodules.su = su = SimilarityUnit(self.cfg, lanes=P)
        m.submodules.ev = ev = EffectiveValue(P)
        width = Array(self.c_gwidth.word_select(g, wb) for g in range(G))
        xoff = Array(self.c_gxoff.word_select(g, kwb) for g in range(G))
        axis = Array(self.c_gaxis.word_select(g, 2) for g in range(G))

        # ---- control: idle, running (stage 1), then the pipeline's tail
        running, tail = Signal(), Signal(2)
        begin = Signal()
        m.d.comb += [begin.eq(self.start & ~running & (tail == 0)), self.busy.eq(running | (tail != 0)),
                     self.wr_ready.eq(~self.busy)]
        with m.If(begin):
            m.d.sync += running.eq(1)

        # ---- stage-1 counters: token (and its frame, position in the frame, column), phase, group, word
        t, fc, pc, wc = (Signal(tb + 1, name=n) for n in ("t", "fc", "pc", "wc"))
        g = Signal(range(G + 1))
        j = Signal(range(self.KW + 1))
        phase_b = Signal()
        xw = Signal(range(self.KW + 1))
        m.d.comb += xw.eq((width[g] + P - 1) >> lp)
        last_word, last_group, last_tok = Signal(), Signal(), Signal()
        m.d.comb += [last_word.eq(j + 1 == xw), last_group.eq(g + 1 == self.c_groups),
                     last_tok.eq((fc + 1 == self.c_f) & (pc + 1 == self.c_hw))]
        with m.If(begin):
            m.d.sync += [t.eq(0), fc.eq(0), pc.eq(0), wc.eq(0), g.eq(0), j.eq(0), phase_b.eq(0)]
        with m.If(running):
            with m.If(~last_word):
                m.d.sync += j.eq(j + 1)
            with m.Elif(~last_group):
                m.d.sync += [j.eq(0), g.eq(g + 1)]
            with m.Elif(~phase_b):
                m.d.sync += [j.eq(0), g.eq(0), phase_b.eq(1)]
            with m.Else():  # the token's last word: the next token
                m.d.sync += [j.eq(0), g.eq(0), phase_b.eq(0), t.eq(t + 1),
                             wc.eq(Mux(wc + 1 < self.c_w, wc + 1, 0))]
                with m.If(pc + 1 < self.c_hw):
                    m.d.sync += pc.eq(pc + 1)
                with m.Else():
                    m.d.sync += [pc.eq(0), fc.eq(fc + 1), wc.eq(0)]
                with m.If(last_tok):
                    m.d.sync += [running.eq(0), tail.eq(3)]
        with m.If(tail != 0):
            m.d.sync += tail.eq(tail - 1)

        # ---- stage 1: the token's X word and the neighbour's effective word
        ax = axis[g]
        stride = Signal.like(t)
        no_nb = Signal()
        m.d.comb += [stride.eq(Mux(ax == AXIS_CODE["f"], self.c_hw, Mux(ax == AXIS_CODE["h"], self.c_w, 1))),
                     no_nb.eq(Mux(ax == AXIS_CODE["f"], fc == 0, Mux(ax == AXIS_CODE["h"], pc < self.c_w, wc == 0)))]
        nb = Signal.like(t)
        m.d.comb += nb.eq(t - stride)
        word = Signal(kwb)
        m.d.comb += word.eq(xoff[g] + j)
        xaddr, naddr = Signal(self.xabits), Signal(self.xabits)
        m.d.comb += [xaddr.eq(Cat(word, t[:tb])), naddr.eq(Cat(word, nb[:tb]))]
        # stage 2's effective-value write
        e_we, e_addr, e_data = Signal(), Signal(self.xabits), Signal(X_BITS * P)
        xdata = self._buffer(m, "x", xaddr, running, self.wr_addr, self.wr_valid & self.wr_ready, self.wr_data)
        nbdata = self._buffer(m, "eff", naddr, running & ~no_nb, e_addr, e_we, e_data)

        # ---- stage 2: registered controls of the word read in stage 1
        v2, b2, first2, last2, nonb2 = (Signal(name=n) for n in ("v2", "b2", "first2", "last2", "nonb2"))
        g2, j2, t2, addr2 = Signal.like(g), Signal.like(j), Signal.like(t), Signal.like(xaddr)
        mask = Signal(P)
        for p in range(P):
            m.d.comb += mask[p].eq(Cat(Const(p, lp), j) < width[g] if lp else j < width[g])
        mask2 = Signal(P)
        m.d.sync += [v2.eq(running), b2.eq(phase_b), first2.eq(j == 0), last2.eq(last_word), nonb2.eq(no_nb),
                     g2.eq(g), j2.eq(j), t2.eq(t), addr2.eq(xaddr), mask2.eq(mask)]
        # a stage-1 read of the word stage 2 writes in the same cycle reads the old word (read-before-write: token
        # t + 1's first word along w when the token is one word): the written word is forwarded to the next cycle
        fwd_hit, fwd_data = Signal(), Signal(X_BITS * P)
        m.d.sync += [fwd_hit.eq(e_we & running & ~no_nb & (naddr == e_addr)), fwd_data.eq(e_data)]
        nbw = Signal(X_BITS * P)
        m.d.comb += nbw.eq(Mux(nonb2, 0, Mux(fwd_hit, fwd_data, nbdata)))
        feed = Signal()
        m.d.comb += feed.eq(v2 & ~b2)
        b1w = Array(self.c_b1.word_select(k, sb) for k in range(G))
        b2w = Array(self.c_b2.word_select(k, sb) for k in range(G))
        m.d.comb += [su.x.eq(xdata), su.nb.eq(nbw), su.mask.eq(mask2), su.x_unsigned.eq(self.x_unsigned),
                     su.no_nb.eq(nonb2), su.b1.eq(b1w[g2]), su.b2.eq(b2w[g2]), su.first.eq(first2),
                     su.last.eq(last2), su.valid.eq(feed)]
        # the decisions: each group's from the unit, the group that just finished taken from its output
        dgrp = Signal.like(g)
        with m.If(feed & last2):
            m.d.sync += dgrp.eq(g2)
        dq = [Signal(2, name=f"dq{k}") for k in range(G)]
        dcur = [Signal(2, name=f"dcur{k}") for k in range(G)]
        for k in range(G):
            hit = su.dec_valid & (dgrp == k)
            m.d.comb += dcur[k].eq(Mux(hit, su.dec, dq[k]))
            with m.If(hit):
                m.d.sync += dq[k].eq(su.dec)
        dec2 = Signal(2)
        m.d.comb += dec2.eq(Array(dcur)[g2])
        # direct form: every group of g2's axis class COMPUTEs
        direct = Signal()
        m.d.comb += direct.eq(Cat(*((k >= self.c_groups) | (axis[k] != axis[g2]) | (dcur[k] == COMPUTE)
                                    for k in range(G))).all())
        m.d.comb += [ev.dec.eq(dec2), ev.x.eq(xdata), ev.nb.eq(nbw), ev.x_unsigned.eq(self.x_unsigned)]
        wb_ = v2 & b2
        m.d.comb += [e_we.eq(wb_), e_addr.eq(addr2), e_data.eq(ev.x_eff)]
        # the written word: delta's differences or compact's X bytes, lanes past the group 0
        out_word = Signal(len(self.o_data))
        for p in range(P):
            if self.delta:
                x9 = Signal(signed(X_BITS), name=f"x9_{p}")
                byte = xdata[8 * p:8 * p + 8]
                m.d.comb += x9.eq(Mux(self.x_unsigned, byte.as_unsigned(), byte.as_signed()))
                lane = slice(X_BITS * p, X_BITS * (p + 1))
                diff = Signal(signed(X_BITS + 1), name=f"diff{p}")
                m.d.comb += diff.eq(ev.x_eff[lane].as_signed() - nbw[lane].as_signed())
                m.d.comb += out_word[lane].eq(Mux(mask2[p], Mux(direct, x9, diff), 0))
            else:
                m.d.comb += out_word[8 * p:8 * p + 8].eq(Mux(mask2[p], xdata[8 * p:8 * p + 8], 0))
        # the token's decision word, pending from its last word until a cycle without a word
        pend, pend_t, pend_w = Signal(), Signal.like(t), Signal(2 * G)
        decword = Signal(2 * G)
        m.d.comb += decword.eq(Cat(*(Mux(k < self.c_groups, dcur[k], 0) for k in range(G))))
        emit_dec = Signal()
        m.d.comb += emit_dec.eq(pend & ~wb_)
        with m.If(emit_dec):
            m.d.sync += pend.eq(0)
        with m.If(wb_ & last2 & (g2 + 1 == self.c_groups)):
            m.d.sync += [pend.eq(1), pend_t.eq(t2), pend_w.eq(decword)]
        with m.If(wb_):
            m.d.comb += [self.o_valid.eq(1), self.o_sel.eq(SEL_X), self.o_addr.eq(addr2), self.o_data.eq(out_word)]
        with m.Elif(emit_dec):
            m.d.comb += [self.o_valid.eq(1), self.o_sel.eq(SEL_DEC), self.o_addr.eq(pend_t[:tb]),
                         self.o_data.eq(pend_w)]
        with m.If(self.o_valid & ~self.o_ready):
            m.d.sync += self.overrun.eq(1)
        with m.If(begin):
            m.d.sync += self.overrun.eq(0)
        m.d.comb += self.done.eq(tail == 1)
        return m


def front_ports(front: DeltaFront, grid, groups, theta) -> dict[str, int]:
    """The op's values of `DeltaFront`'s op ports (module docstring) but ``x_unsigned``: grid ``(F, H, W)``,
    ``groups`` ``[(k0, k1, axis)]`` and ``theta`` ``(theta1, theta2)`` (bounds by `algo.reuse.golden.theta_bounds`).

    Raises:
        ValueError: more tokens than the controller holds, no group, a bound wider than the unit's SAD, an axis
            outside f, h, w, or as `hw.delta_accel_host.group_layout`.
    """
    from algo.reuse.golden import theta_bounds
    from hw.delta_accel_host import group_layout

    F, H, W = (int(v) for v in grid)  # noqa: N806
    if F * H * W > front.acc.max_tokens or min(F, H, W) < 1:
        raise ValueError(f"grid {grid}: the controller holds {front.acc.max_tokens} tokens")
    if not groups:
        raise ValueError("an op without channel groups: the pass needs at least one")
    lay = group_layout(front.acc, groups)
    b1, b2 = theta_bounds(theta, [k1 - k0 for k0, k1, _ in groups])
    if max(b1.max(), b2.max()) >= 1 << front.sb:
        raise ValueError(f"a SAD bound of {max(b1.max(), b2.max())}: the unit compares {front.sb} bits")
    out = {"c_f": F, "c_hw": H * W, "c_w": W, "c_groups": len(groups), "c_gwidth": 0, "c_gxoff": 0, "c_gaxis": 0,
           "c_b1": 0, "c_b2": 0}
    for k, ((k0, k1, ax), (xo, _xw, _wo)) in enumerate(zip(groups, lay, strict=True)):
        if ax not in AXIS_CODE:
            raise ValueError(f"group {k}: axis {ax!r} is not one of f, h, w")
        out["c_gwidth"] |= (k1 - k0) << (front.wb * k)
        out["c_gxoff"] |= xo << (front.kwb * k)
        out["c_gaxis"] |= AXIS_CODE[ax] << (2 * k)
        out["c_b1"] |= int(b1[k]) << (front.sb * k)
        out["c_b2"] |= int(b2[k]) << (front.sb * k)
    return out


def front_through(m, core, ap, instance: bool, axes, *also):
    """A combine core built with its front (`hw.delta_core.DeltaCore`, `hw.compact_core.CompactCore`, ``front=True``):
    ``core.front_unit`` between the host and the controller ``ap`` (ports). The host's ``wr_sel`` 0 (raw X) goes to
    the front while idle, the other selects to the controller; while the front runs (``phase`` 3) the controller's
    write port is the front's output. The front's op ports come from the core's: ``c_frames``, ``c_hw``, ``o_w``,
    ``c_groups``, each group's width and word offset from the queues' ``c_layout``, ``axes`` (2 bits per group, a
    value), ``c_b1``, ``c_b2``, ``x_unsigned``. The front's ``done`` is the controller's ``start``. ``also``: further
    statements. Returns ``(phase, front ports, decision write enable, address, data)``: ``phase`` a 2-bit signal (0
    idle, 3 the front), which the caller drives from the front's ``done`` on; the decision-copy write from the host
    (``wr_sel`` 3) or, while the front runs, the front."""
    from hw.core import add_child
    from hw.delta_queue import layout_bits, layout_fields

    fu, acc = core.front_unit, core.accel
    G, P = core.cfg.partial_regs, acc.P  # noqa: N806
    fr = add_child(m, "front", fu, fu.module_name, instance)
    phase = Signal(2, name="phase")
    run = phase == 3
    m.d.comb += [ap.wr_valid.eq(Mux(run, fr.o_valid, core.wr_valid & (core.wr_sel != SEL_X))),
                 ap.wr_sel.eq(Mux(run, fr.o_sel, core.wr_sel)), ap.wr_addr.eq(Mux(run, fr.o_addr, core.wr_addr)),
                 ap.wr_data.eq(Mux(run, fr.o_data, core.wr_data[:len(ap.wr_data)])), fr.o_ready.eq(ap.wr_ready),
                 fr.wr_valid.eq(core.wr_valid & (core.wr_sel == SEL_X) & (phase == 0)),
                 fr.wr_addr.eq(core.wr_addr), fr.wr_data.eq(core.wr_data[:8 * P]), *also]
    m.d.comb += [getattr(ap, n).eq(getattr(core, n)) for n in core.cnames]
    m.d.comb += [core.wr_ready.eq((phase == 0) & ap.wr_ready & fr.wr_ready), core.busy.eq(phase != 0),
                 fr.start.eq(core.start & (phase == 0)), ap.start.eq(fr.done)]
    lb, pos, off = layout_bits(acc), {}, 0
    for name, bits in layout_fields(acc):
        pos[name] = (off, bits)
        off += bits
    (w0, wb), (x0, xb) = pos["width"], pos["xoff"]
    lay = core.c_layout
    m.d.comb += [fr.c_f.eq(core.c_frames), fr.c_hw.eq(core.c_hw), fr.c_w.eq(core.o_w), fr.c_groups.eq(core.c_groups),
                 fr.c_gwidth.eq(Cat(*(lay[g * lb + w0:g * lb + w0 + wb] for g in range(G)))),
                 fr.c_gxoff.eq(Cat(*(lay[g * lb + x0:g * lb + x0 + xb] for g in range(G)))),
                 fr.c_gaxis.eq(axes), fr.c_b1.eq(core.c_b1), fr.c_b2.eq(core.c_b2), fr.x_unsigned.eq(core.x_unsigned)]
    dec_we = Mux(run, fr.o_valid & (fr.o_sel == SEL_DEC), core.wr_valid & (core.wr_sel == SEL_DEC))
    return (phase, fr, dec_we, Mux(run, fr.o_addr, core.wr_addr), Mux(run, fr.o_data[:2 * G], core.wr_data[:2 * G]))
