"""The op-level controller's first two phases (hw/accel.py's docstring, Controller 1 and 2).

`FrontPhases` is a mixin of `hw.accel.Accel`: the similarity pass (position-major, frames inner,
two pipeline stages: the buffer reads, then the `hw.similarity` units and the writes of the
effective-value and decision buffers) and the scheduler windows (the decision buffer's digit
columns streamed into `hw.dispatcher.scheduler.Scheduler`, its order into the order buffers).
The methods read the `Accel`'s configuration, buffers (``self.banks``) and submodules.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal

from hw.dispatcher.matcher import channel_bits
from hw.pe import X_BITS
from hw.similarity import sad_bits


class FrontPhases:
    """Phases 1 (similarity pass) and 2 (scheduler windows) of `hw.accel.Accel`."""

    # ---- phase 1: similarity pass, two stages (reads, then the unit and the writes) ----
    def _similarity_pass(self, m, st):
        cfg, P, KB, lp = self.cfg, self.P, self.KB, self.lp  # noqa: N806
        G, cb, sb = cfg.partial_regs, channel_bits(cfg), sad_bits(cfg)  # noqa: N806
        su, ev, eff = self.su, self.ev, self.banks["eff"][0]
        F, HW, ng = self.c_frames, self.c_positions, self.c_n_groups  # noqa: N806
        k0, k1 = self._k0, self._k1
        pos = Signal(range(self.max_tokens + 1))
        fr = Signal(range(self.max_frames + 1))
        fbase = Signal(range(self.max_tokens + 1))
        g = Signal(range(G + 1))
        j = Signal(range(KB + 1))
        phase_b = Signal()
        tok = Signal(range(self.max_tokens + 1))
        m.d.comb += tok.eq(fbase + pos)
        j1 = Signal.like(j)
        m.d.comb += j1.eq((k1(g) - 1) >> lp)
        mask = Signal(P)
        for p in range(P):
            ch = Signal(cb + 1, name=f"ch{p}")
            m.d.comb += [ch.eq(Cat(Const(p, lp), j) if lp else j),
                         mask[p].eq((ch >= k0(g)) & (ch < k1(g)))]
        first = Signal()
        m.d.comb += first.eq(j == (k0(g) >> lp))
        # stage 1: the token's X word (bank tok mod R) and the neighbour's effective word
        xbank, xrow = self._split(tok)
        with m.If(st["SIM"]):
            for b, xb in enumerate(self.banks["x"]):
                m.d.comb += [xb.addr.eq(self._addr(xrow, j)), xb.re.eq(xbank == b)]
            m.d.comb += [eff.raddr.eq(j), eff.re.eq(1)]
        # stage 2: the registered controls of the word read in stage 1
        v2, feed2, b2, first2, last2, nonb2, dwen2 = (Signal(name=n) for n in
                                                        ("v2", "feed2", "b2", "first2", "last2", "nonb2", "dwen2"))
        mask2, g2, j2, tok2 = Signal(P), Signal.like(g), Signal.like(j), Signal.like(tok)
        xbank2 = Signal.like(xbank)
        m.d.sync += [v2.eq(st["SIM"]), feed2.eq(st["SIM"] & ~phase_b), b2.eq(phase_b), first2.eq(first),
                     last2.eq(j == j1), nonb2.eq(fr == 0), dwen2.eq(phase_b & first), mask2.eq(mask), g2.eq(g),
                     j2.eq(j), tok2.eq(tok), xbank2.eq(xbank)]
        xdata = Signal(8 * P)
        m.d.comb += xdata.eq(Cat(*(xb.rdata for xb in self.banks["x"])).word_select(xbank2, 8 * P))
        # a stage-1 read of the word stage 2 writes in the same cycle reads the old word
        # (read-before-write): the written lanes are forwarded to the next cycle
        fwd_hit, fwd_data, fwd_mask = Signal(), Signal(X_BITS * P), Signal(P)
        nb = Signal(X_BITS * P)
        for p in range(P):
            lane = slice(X_BITS * p, X_BITS * (p + 1))
            m.d.comb += nb[lane].eq(Mux(fwd_hit & fwd_mask[p], fwd_data[lane], eff.rdata[lane]))
        m.d.comb += [su.x.eq(xdata), su.nb.eq(nb), su.mask.eq(mask2), su.x_unsigned.eq(self.x_unsigned),
                     su.no_nb.eq(nonb2), su.b1.eq(self.c_b1.word_select(g2, sb)),
                     su.b2.eq(self.c_b2.word_select(g2, sb)), su.first.eq(first2), su.last.eq(last2),
                     su.valid.eq(feed2)]
        m.d.comb += [ev.dec.eq(su.dec), ev.x.eq(xdata), ev.nb.eq(nb), ev.x_unsigned.eq(self.x_unsigned)]
        ew = Signal()
        m.d.comb += ew.eq(v2 & b2)
        m.d.comb += [eff.waddr.eq(j2), eff.wdata.eq(ev.x_eff), eff.we.eq(ew), eff.wmask.eq(mask2)]
        m.d.sync += [fwd_hit.eq(ew & st["SIM"] & (j == j2)), fwd_data.eq(ev.x_eff), fwd_mask.eq(mask2)]
        dbank2, drow2 = self._split(tok2)
        with m.If(v2 & dwen2):  # the decision, on phase B's first word
            for b, db in enumerate(self.banks["dec"]):
                m.d.comb += [db.addr.eq(drow2), db.we.eq(dbank2 == b), db.wmask.eq(1 << g2),
                             db.wdata.eq(Cat(*([su.dec] * G)))]
        # stage-1 counters: position-major, frames inner (D23), groups, words; phase A then B
        last = Signal()
        with m.If(st["IDLE"]):
            m.d.sync += [pos.eq(0), fr.eq(0), fbase.eq(0), g.eq(0), j.eq(0), phase_b.eq(0)]
        with m.If(st["SIM"]):
            with m.If(j != j1):
                m.d.sync += j.eq(j + 1)
            with m.Elif(~phase_b):
                m.d.sync += [phase_b.eq(1), j.eq(k0(g) >> lp)]
            with m.Else():  # next (token, group)
                m.d.sync += phase_b.eq(0)
                with m.If(g + 1 < ng):
                    m.d.sync += [g.eq(g + 1), j.eq(k0(g + 1) >> lp)]
                with m.Else():
                    m.d.sync += [g.eq(0), j.eq(0)]
                    with m.If(fr + 1 < F):
                        m.d.sync += [fr.eq(fr + 1), fbase.eq(fbase + HW)]
                    with m.Elif(pos + 1 < HW):
                        m.d.sync += [fr.eq(0), fbase.eq(0), pos.eq(pos + 1)]
                    with m.Else():  # fbase stays (F-1)*HW: the scheduler's first digit column
                        m.d.comb += last.eq(1)
        return last, fbase

    # ---- phase 2: scheduler windows ----
    def _scheduler_pass(self, m, st, fbase):
        cfg, R, tb = self.cfg, self.cfg.array_rows, self.tb  # noqa: N806
        G = cfg.partial_regs  # noqa: N806
        sch = self.scheduler
        F, HW, ng = self.c_frames, self.c_positions, self.c_n_groups  # noqa: N806
        w0 = Signal(range(self.max_tokens + self.window + 1))
        wn = Signal(range(self.window + 1))
        m.d.comb += wn.eq(Mux(HW - w0 < self.window, HW - w0, self.window))
        si = Signal(range(self.window + 1))     # digit index within the column
        so = Signal(range(self.window + 1))     # output index
        sg = Signal(range(G + 1))
        sf = Signal(range(self.max_frames + 1))
        sfbase = Signal(range(self.max_tokens + 1))
        n_digits = Signal(range(G * self.max_frames + 1))
        m.d.comb += n_digits.eq(Mux(F > 1, ng * (F - 1), 0))
        # the digit after the current one (read one cycle ahead: synchronous SRAM reads)
        col_end, more_f = Signal(), Signal()
        m.d.comb += [col_end.eq(si + 1 == wn), more_f.eq(sf > 1)]
        nx_si, nx_sf, nx_sg, nx_sfbase = Signal.like(si), Signal.like(sf), Signal.like(sg), Signal.like(sfbase)
        m.d.comb += [nx_si.eq(Mux(col_end, 0, si + 1)), nx_sf.eq(Mux(col_end, Mux(more_f, sf - 1, F - 1), sf)),
                     nx_sfbase.eq(Mux(col_end, Mux(more_f, sfbase - HW, fbase), sfbase)),
                     nx_sg.eq(Mux(col_end & ~more_f, sg - 1, sg))]
        rtok, rd = Signal(tb), Signal()
        with m.If(st["SCH_START"]):
            m.d.comb += [rtok.eq(fbase + w0), rd.eq(1)]
        with m.If(st["SCH_RUN"] & sch.d_ready):
            m.d.comb += [rtok.eq(nx_sfbase + w0 + nx_si), rd.eq(1)]
        rbank, rrow = self._split(rtok)
        sbank = Signal.like(rbank)
        with m.If(rd):
            m.d.sync += sbank.eq(rbank)
            for b, db in enumerate(self.banks["dec"]):
                m.d.comb += [db.addr.eq(rrow), db.re.eq(rbank == b)]
        word = Signal(2 * G)
        m.d.comb += word.eq(Cat(*(db.rdata for db in self.banks["dec"])).word_select(sbank, 2 * G))
        m.d.comb += [sch.n_pos.eq(wn), sch.n_digits.eq(n_digits), sch.o_ready.eq(1), sch.d_code.eq(word.word_select(sg, 2)),
                     sch.start.eq(st["SCH_START"]), sch.d_valid.eq(st["SCH_RUN"])]
        with m.If(st["IDLE"]):
            m.d.sync += w0.eq(0)
        with m.If(st["SCH_START"]):
            m.d.sync += [si.eq(0), so.eq(0), sg.eq(ng - 1), sf.eq(F - 1), sfbase.eq(fbase)]
        with m.If(st["SCH_RUN"] & sch.d_ready):
            m.d.sync += [si.eq(nx_si), sf.eq(nx_sf), sg.eq(nx_sg), sfbase.eq(nx_sfbase)]
        # order entry i: loader bank i mod R at i // R, and one copy per drain port at i
        idx = Signal(range(self.max_pb * R + self.window + 1))
        m.d.comb += idx.eq(w0 + so)
        obank, orow = self._split(idx)
        with m.If(st["SCH_RUN"] & sch.o_valid):
            for b, ob in enumerate(self.banks["order"]):
                m.d.comb += [ob.addr.eq(orow), ob.wdata.eq(w0 + sch.o_pos), ob.wmask.eq(1), ob.we.eq(obank == b)]
            for ob in self.banks["order_out"]:
                m.d.comb += [ob.addr.eq(idx), ob.wdata.eq(w0 + sch.o_pos), ob.wmask.eq(1), ob.we.eq(1)]
            m.d.sync += so.eq(so + 1)
            with m.If(sch.o_last):
                m.d.sync += w0.eq(w0 + self.window)
        last_window, all_done = Signal(), Signal()
        m.d.comb += [last_window.eq(st["SCH_RUN"] & sch.o_valid & sch.o_last),
                     all_done.eq(last_window & (w0 + self.window >= HW))]
        return all_done, last_window & ~all_done
