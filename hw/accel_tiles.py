"""The op-level controller's tile side (hw/accel.py's docstring, Controller 3 and 4).

`TilePhases` is a mixin of `hw.accel.Accel`: the tile cursor (column block, position block,
frame), the tile loader (each tile's rows read from the banked X and decision buffers, bank
conflicts served over several cycles, the beats offered to the core) and the result side (one
cursor per drain port, the token of each result row read from the order buffer's copies).
The methods read the `Accel`'s configuration, buffers (``self.banks``) and config registers.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Mux, Signal

from hw.top import row_bits


class TilePhases:
    """The tile cursor, phase 3 (loader) and the drain of `hw.accel.Accel`."""

    # ---- tile cursor: (column block, position block, frame, frame * HW), frame fastest ----
    def _step(self, cur):
        nb_, pb_, f_, fb_ = cur
        last_f = f_ + 1 >= self.c_frames
        last_pb = pb_ + 1 >= self._n_pb
        return (Mux(last_f & last_pb, nb_ + 1, nb_), Mux(last_f, Mux(last_pb, 0, pb_ + 1), pb_),
                Mux(last_f, 0, f_ + 1), Mux(last_f, 0, fb_ + self.c_positions))

    def _cursor(self, name):
        return (Signal(range(self.max_nb + 2), name=f"{name}_nb"), Signal(range(self.max_pb + 2), name=f"{name}_pb"),
                Signal(range(self.max_frames + 1), name=f"{name}_f"),
                Signal(range(self.max_tokens + 1), name=f"{name}_fbase"))

    def _rows_of(self, m, pb_, name):
        R, lr = self.cfg.array_rows, self.lr  # noqa: N806
        left = Signal(range(self.max_tokens + 1), name=f"{name}_left")
        m.d.comb += left.eq(self.c_positions - (pb_ << lr))
        rows = Signal(range(R + 1), name=f"{name}_rows")
        m.d.comb += rows.eq(Mux(left < R, left, R))
        return rows

    # ---- phase 3: the tile loader over the banks ----
    def _loader(self, m, st, core):  # noqa: PLR0915
        cfg, P, KB, tb = self.cfg, self.P, self.KB, self.tb  # noqa: N806
        R, C, G = cfg.array_rows, cfg.array_cols, cfg.partial_regs  # noqa: N806
        F, ng = self.c_frames, self.c_n_groups  # noqa: N806
        xbanks, dbanks, obanks, wbanks = self.banks["x"], self.banks["dec"], self.banks["order"], self.banks["w"]
        ld = self._cursor("ld")
        lj = Signal(range(KB + 1))
        ld_rows = self._rows_of(m, ld[1], "ld")
        first = Signal()                     # the tile's positions are on the order banks' rdata
        served = Signal(R)                   # rows of the current beat read in earlier cycles
        last_g = Signal(R)                   # rows read in the previous cycle (their word on the bank's rdata)
        beat_full = Signal()                 # a read beat waits on the core (registers pres_*)
        reads_done = Signal()                # every tile's beats read
        pres_j, pres_last, pres_final = Signal.like(lj), Signal(), Signal()
        pres_rows, pres_clear = Signal(range(R + 1)), Signal()
        tiles_loaded = Signal(range(self.max_nb * self.max_pb * self.max_frames + 1))
        accept, rd_en, complete = Signal(), Signal(), Signal()
        m.d.comb += [accept.eq(st["TILES"] & beat_full & core.ld_ready),
                     rd_en.eq(st["TILES"] & ~reads_done & (~beat_full | accept))]
        valid = Signal(R)
        m.d.comb += valid.eq((1 << ld_rows) - 1)
        want = Signal(R)
        m.d.comb += want.eq(Mux(rd_en, valid & ~served, 0))
        # per row: its token, bank (token mod R) and word; the lowest wanting row of each bank reads it
        granted = Signal(R)
        blocked = Const(0, R)
        onehots, rows_at, pos_reg, dbank = [], [], [], []
        for r in range(R):
            pr = Signal(tb, name=f"pos{r}")
            pos_reg.append(pr)
            cur = Mux(first, obanks[r].rdata, pr)
            tr = Signal(tb, name=f"tok{r}")
            m.d.comb += tr.eq(ld[3] + cur)
            bank, row = self._split(tr)
            oh = Signal(R, name=f"onehot{r}")
            m.d.comb += oh.eq(1 << bank)
            m.d.comb += granted[r].eq(want[r] & ~blocked.bit_select(bank, 1))
            nxt = Signal(R, name=f"blocked{r + 1}")
            m.d.comb += nxt.eq(blocked | Mux(want[r], oh, 0))
            blocked = nxt
            onehots.append(oh)
            rows_at.append(row)
            db_r = Signal.like(bank, name=f"dbank{r}")
            m.d.sync += db_r.eq(bank)
            dbank.append(db_r)
        m.d.comb += complete.eq(rd_en & ((valid & ~served & ~granted) == 0))
        rbits = len(rows_at[0])
        for b in range(R):
            sel = Signal(R, name=f"sel{b}")
            m.d.comb += sel.eq(granted & Cat(*(oh[b] for oh in onehots)))
            row = Cat(*((sel & Cat(*(ra[k] for ra in rows_at))).any() for k in range(rbits)))
            with m.If(st["TILES"]):
                m.d.comb += [xbanks[b].addr.eq(self._addr(row, lj)), xbanks[b].re.eq(sel.any()),
                             dbanks[b].addr.eq(row), dbanks[b].re.eq(sel.any())]
        with m.If(complete):  # the beat's W word (one read per beat)
            for wb in wbanks:
                m.d.comb += [wb.addr.eq(self._addr(ld[0], lj)), wb.re.eq(1)]
        # the beat: rows read in the previous cycle straight from the banks, earlier ones from staging
        xcat = Cat(*(xb.rdata for xb in xbanks))
        dcat = Cat(*(db.rdata for db in dbanks))
        dmask = Signal(2 * G)  # the 2-bit fields of groups < ng
        for gg in range(G):
            m.d.comb += dmask[2 * gg:2 * gg + 2].eq(Mux(gg < ng, 3, 0))
        ld_x, t_dec = Signal(8 * P * R), []
        for r in range(R):
            xd, dd = Signal(8 * P, name=f"xrd{r}"), Signal(2 * G, name=f"drd{r}")
            m.d.comb += [xd.eq(xcat.word_select(dbank[r], 8 * P)), dd.eq(dcat.word_select(dbank[r], 2 * G))]
            sx, sd = Signal(8 * P, name=f"stage_x{r}"), Signal(2 * G, name=f"stage_d{r}")
            with m.If(last_g[r]):
                m.d.sync += [sx.eq(xd), sd.eq(dd)]
            bx = Mux(last_g[r], xd, sx)
            for p in range(P):
                m.d.comb += ld_x[8 * (p * R + r):8 * (p * R + r) + 8].eq(bx[8 * p:8 * p + 8])
            t_dec.append(Mux(r < pres_rows, Mux(last_g[r], dd, sd) & dmask, 0))  # stale groups >= ng: 0
        ld_w = Signal(8 * P * C)
        for c, wb in enumerate(wbanks):
            for p in range(P):
                m.d.comb += ld_w[8 * (p * C + c):8 * (p * C + c) + 8].eq(wb.rdata[8 * p:8 * p + 8])
        m.d.comb += [core.ld_valid.eq(st["TILES"] & beat_full), core.ld_beat.eq(pres_j), core.ld_x.eq(ld_x),
                     core.ld_w.eq(ld_w), core.ld_last.eq(pres_last), core.t_dec.eq(Cat(*t_dec)),
                     core.t_row_mask.eq((1 << pres_rows) - 1), core.t_k0.eq(self.c_k0), core.t_k1.eq(self.c_k1),
                     core.t_n_groups.eq(ng), core.t_clear.eq(pres_clear),
                     core.t_wgroups.eq(0),  # frame-axis groups only
                     core.x_unsigned.eq(self.x_unsigned)]
        # the tile's positions: order banks read at TILES_START (tile 0) and on each tile's first read
        # cycle (the next tile's), latched into pos_reg on that cycle
        step = self._step(ld)
        with m.If(st["TILES_START"]):
            for ob in obanks:
                m.d.comb += [ob.addr.eq(ld[1]), ob.re.eq(1)]
        with m.If(rd_en & first):
            for ob in obanks:
                m.d.comb += [ob.addr.eq(step[1]), ob.re.eq(1)]
            m.d.sync += [pr.eq(ob.rdata) for pr, ob in zip(pos_reg, obanks, strict=True)]
            m.d.sync += first.eq(0)
        m.d.sync += last_g.eq(granted)
        last_beat, final = Signal(), Signal()
        m.d.comb += [last_beat.eq(lj + 1 >= (self.c_k + (P - 1)) >> self.lp),
                     final.eq(last_beat & (ld[2] + 1 >= F) & (ld[1] + 1 >= self._n_pb) & (ld[0] + 1 >= self._n_cb))]
        with m.If(st["IDLE"]):
            m.d.sync += [a.eq(0) for a in ld]
            m.d.sync += [lj.eq(0), first.eq(1), served.eq(0), beat_full.eq(0), reads_done.eq(0), tiles_loaded.eq(0)]
        with m.If(accept & ~complete):
            m.d.sync += beat_full.eq(0)
        with m.If(accept & pres_last):
            m.d.sync += tiles_loaded.eq(tiles_loaded + 1)
        with m.If(complete):
            m.d.sync += [served.eq(0), beat_full.eq(1), pres_j.eq(lj), pres_last.eq(last_beat), pres_final.eq(final),
                         pres_rows.eq(ld_rows), pres_clear.eq(ld[2] == 0)]
            with m.If(last_beat):
                m.d.sync += [lj.eq(0), first.eq(1)]
                m.d.sync += [a.eq(b) for a, b in zip(ld, step, strict=True)]
                with m.If(final):
                    m.d.sync += reads_done.eq(1)
            with m.Else():
                m.d.sync += lj.eq(lj + 1)
        with m.Elif(rd_en):
            m.d.sync += served.eq(served | granted)
        return accept & pres_final, tiles_loaded

    # ---- result side: one cursor per drain port, the op's tile k on port (port0 + k) mod d ----
    def _drain(self, m, st, core):
        cfg, lr, lc, tb = self.cfg, self.lr, self.lc, self.tb
        R, d = cfg.array_rows, cfg.drain_rows_per_cycle  # noqa: N806
        rb = row_bits(cfg)
        tiles_out = Signal(range(self.max_nb * self.max_pb * self.max_frames + 1))
        drained = []
        cw = len(self.out_col0) // d
        # The core's drain-port round robin (hw.top) runs on from op to op: tile t of this op drains on
        # port (port0 + t) mod d, port0 = the earlier ops' tiles mod d, kept here (a mirror of the core's).
        pbits = (d - 1).bit_length()
        port0 = Signal(range(d), name="port0") if d > 1 else None
        if d > 1:
            with m.If(self.done):
                m.d.sync += port0.eq((port0 + tiles_out)[:pbits])
        for p in range(d):
            oc = self._cursor(f"out{p}")
            ob = self.banks["order_out"][p]
            row = core.out_row[p * rb:(p + 1) * rb]
            v = core.out_valid[p]
            rows = self._rows_of(m, oc[1], f"out{p}")
            m.d.comb += [self.out_valid[p].eq(v & (row < rows)),
                         self.out_token.word_select(p, tb).eq(oc[3] + ob.rdata),
                         self.out_col0.word_select(p, cw).eq(oc[0] << lc)]
            fin = Signal(name=f"fin{p}")
            m.d.comb += fin.eq(v & (row == R - 1))
            drained.append(fin)
            nxt = oc
            for _ in range(d):
                nxt = self._step(nxt)
            # the token of the port's next row, read one cycle ahead (held until the next read)
            with m.If(st["TILES_START"]):
                m.d.comb += [ob.addr.eq(Cat(Const(0, lr), oc[1]) if lr else oc[1]), ob.re.eq(1)]
            with m.Elif(v):
                nrow = Cat((row + 1)[:lr], oc[1]) if lr else oc[1]
                m.d.comb += [ob.addr.eq(Mux(fin, Cat(Const(0, lr), nxt[1]) if lr else nxt[1], nrow)), ob.re.eq(1)]
            with m.If(fin):
                m.d.sync += [a.eq(b) for a, b in zip(oc, nxt, strict=True)]
            with m.If(st["IDLE"]):  # the port's first tile: the op's k-th, k = (p - port0) mod d
                init = tuple(Const(0) for _ in range(4))
                for k in range(d):
                    first_k = Const(1) if d == 1 else ((p - port0)[:pbits] == k)
                    with m.If(first_k):
                        m.d.sync += [a.eq(b) for a, b in zip(oc, init, strict=True)]
                    init = self._step(init)
        m.d.comb += self.out_data.eq(core.out_data)
        m.d.sync += tiles_out.eq(Mux(st["IDLE"], 0, tiles_out + sum(drained)))
        return tiles_out
