"""Op-level controller: one GEMM ``Y = X_eff[M, K] @ W[K, N]`` end to end in hardware (D26).

`Accel` (Verilog module ``kaleido_accel``) joins the similarity unit (`hw.similarity`), the tile
scheduler (`hw.dispatcher.scheduler`) and the compute core (`hw.core.TileCore`: operand banks,
matchers, slot former, array) with on-chip buffers and a sequential controller. It runs one op
whose channel groups all reuse along frames (axis ``"f"``: the neighbour of token
``f*HW + p`` is ``(f-1)*HW + p``); `op_descriptor` rejects ``h``/``w``-axis groups (those ops stay
on the driver-sequenced paths of `hw.core` / `sim.timing.stream`).

Buffers (behavioural register files, `amaranth.lib.memory.Memory`; stand-ins for the SRAMs):

- X buffer: ``max_tokens * KB`` words of P int8/uint8 lanes (P = ``load_channels``, KB = the
  power of two >= ceil(max_k / P)); word ``tok*KB + j`` holds ``X[tok, P*j .. P*j + P-1]``
  (lane p at bits ``[8p+7:8p]``). R + 1 asynchronous read ports (one per array row for the tile
  loader, one for the similarity pass): a register file, not a single-port SRAM (D26).
- W buffer: ``ceil(max_n / C) * KB`` words of P*C lanes; word ``nb*KB + j`` holds lane ``p*C + c``
  = ``W[P*j + p, C*nb + c]`` (the core's ``ld_w`` beat format).
- effective-value buffer: KB words of P 9-bit lanes: the effective operand of the previous
  frame at the current position (the pass is position-major, frames inner, as D23's similarity
  pass), overwritten by the current frame's (per-lane write enables).
- decision buffer: ``max_tokens`` words of ``2 * partial_regs`` bits (group g at bits
  ``[2g+1:2g]``, COMPUTE 0 / PARTIAL 1 / REUSE 2).
- order buffer: the scheduler's position permutation, ``ceil(max_tokens / R) * R`` entries.

Ports:

- write port (``wr_valid``/``wr_ready``, one word per cycle, accepted while idle): ``wr_sel`` 0 =
  X buffer, 1 = W buffer; ``wr_addr`` the word address above; ``wr_data`` the word (X words in
  the low ``8P`` bits). `buffer_words` lists the words of an op.
- config registers (`op_descriptor` gives their values; they must stay stable from ``start``
  until ``done``): ``c_frames`` F, ``c_positions`` HW = H*W, ``c_k`` K, ``c_n`` N, ``c_n_groups``,
  ``c_k0``/``c_k1`` (group g's channel range at bits ``cb*g``, cb = `channel_bits`), ``c_b1``/
  ``c_b2`` (integer SAD bounds, `algo.reuse.golden.theta_bounds`, ``sad_bits`` each), ``x_unsigned``.
- ``start`` (one cycle, while idle), ``busy``, ``done`` (one-cycle pulse when the op's last result
  row has left).
- result port (valid only, no back-pressure, as `hw.core.TileCore`'s; tile t drains on port
  t mod d, rows 0..R-1 in order, as `sim.timing.stream.OutputCollector` reads them): per drain port p of d,
  ``out_valid[p]``, ``out_token`` (``tb`` bits per port: the raster token index of the row),
  ``out_col0`` (first output channel of the row, a multiple of C), ``out_data`` (C accumulators of
  ``acc_bits`` each, port p at lane ``p*C + c``; lanes past N are don't-care). Padding rows of a
  partial position block are not reported.

Controller (sequential; cycle 0 = the ``start`` cycle; `sim.timing.core_timing.accel_timeline` predicts
every phase from these registers):

1. SIM (from cycle 1): for position p in 0..HW-1, frame f in 0..F-1, group g: phase A feeds the group's
   X words ``j0 = k0 >> log2 P .. j1 = (k1-1) >> log2 P`` (lanes outside [k0, k1) masked) and the
   neighbour's effective words to the `SimilarityUnit` (``no_nb`` in frame 0), one per cycle; phase
   B walks the same words, writing the `EffectiveValue` of the decision (registered after A's
   last word) into the effective buffer and, on its first word, the decision. 2 * (j1 - j0 + 1)
   cycles per (token, group).
2. SCHED: per window of ``window`` positions (n of them): one ``start`` cycle, then the
   `Scheduler`'s ``L * (2n + 1) + n`` cycles (L = groups * (F-1) digit columns, read from the
   decision buffer column ``L-1`` .. 0, streamed with no stall); its output goes to the order buffer.
3. TILES: tiles in `sim.timing.dispatch.reuse_tiles` order (column block, position block, frame), each
   loaded into the core in ``ceil(K / P)`` beats presented on consecutive cycles whenever
   ``ld_ready`` (the loader policy of `sim.timing.core_timing.core_timeline`), the last beat with the
   tile's decisions (from the decision buffer), row mask, group ranges and ``clear`` (frame 0).
4. DRAIN: wait until every tile's R result rows have left; ``done`` the cycle after the last.

Not in this version (D26): h/w-axis groups, K folds (K <= max_k), overlap of the phases (the next
window's similarity pass and sort under the previous window's tiles), output back-pressure.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.config import AcceleratorConfig
from hw.core import LOAD_CHANNELS, TileCore, _instance, core_signature, operand_channels
from hw.dispatcher.matcher import channel_bits
from hw.dispatcher.scheduler import WINDOW_TILES, Scheduler
from hw.pe import X_BITS
from hw.similarity import EffectiveValue, SimilarityUnit, sad_bits
from hw.top import row_bits

#: Verilog module name of `Accel` (hw/rtl.py).
ACCEL_MODULE_NAME = "kaleido_accel"

#: Largest array_rows for which hw/rtl.py emits ``kaleido_accel``. Source: the controller's
#: buffers are register files with R + 1 (X, decision, order) asynchronous read ports, one per
#: array row (D26); that is reasonable for tiny-8x8 (9 ports), not for 128 rows, where the X
#: buffer must become R banked SRAMs (not built).
ACCEL_MAX_ROWS = 16


def accel_emitted(cfg: AcceleratorConfig) -> bool:
    """Whether hw/rtl.py emits ``kaleido_accel`` for `cfg` (``array_rows <= ACCEL_MAX_ROWS``)."""
    return cfg.array_rows <= ACCEL_MAX_ROWS


def _bits(n: int) -> int:
    """Bits of an index 0..n-1 (at least 1)."""
    return max(1, (n - 1).bit_length())


def _pow2ceil(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()


class Accel(wiring.Component):
    """The op-level controller (module docstring).

    Args:
        cfg: accelerator config (R, C, partial_regs G, drain ports d, acc_bits).
        max_tokens, max_k, max_n: buffer capacity (tokens M, channels K, output channels N);
            defaults ``cfg.accel_max_tokens`` / ``accel_max_k`` / ``accel_max_n``.
        window: scheduler window in positions (default ``WINDOW_TILES * R``, the reference's
            `sim.timing.dispatch.WINDOW_TILES`); max_frames: most frames F (default ``max_tokens``),
            sets the scheduler's longest pattern ``G * (max_frames - 1)``.
        load_channels: P, channels per buffer word and per core load beat, a power of two
            (default `hw.core.LOAD_CHANNELS`).
        pe: ``"inline"`` elaborates `TileCore` (Amaranth simulation); ``"instance"`` instantiates
            the emitted ``kaleido_core`` by name (Verilog, `hw.rtl`).

    Raises:
        ValueError: load_channels not a power of two, a non-positive size, or (``pe="instance"``)
            load_channels or max_k that the emitted ``kaleido_core`` does not have.
    """

    def __init__(self, cfg: AcceleratorConfig, max_tokens: int | None = None, max_k: int | None = None,
                 max_n: int | None = None, window: int | None = None, max_frames: int | None = None,
                 load_channels: int = LOAD_CHANNELS, pe: str = "inline"):
        R, C, G, d = cfg.array_rows, cfg.array_cols, cfg.partial_regs, cfg.drain_rows_per_cycle  # noqa: N806
        P = load_channels  # noqa: N806
        if P < 1 or P & (P - 1):
            discard(self)  # rejected: never elaborated, so no UnusedElaboratable warning (hw.discard)
            raise ValueError(f"load_channels = {P}: must be a power of two")
        self.cfg, self.P, self.pe_kind = cfg, P, pe
        self.max_tokens = max_tokens or cfg.accel_max_tokens
        self.max_k = max_k or cfg.accel_max_k
        self.max_n = max_n or cfg.accel_max_n
        self.window = window or WINDOW_TILES * R
        self.max_frames = max_frames or self.max_tokens
        if min(self.max_tokens, self.max_k, self.max_n, self.window, self.max_frames) < 1:
            discard(self)
            raise ValueError("Accel sizes must be >= 1")
        self.KB = _pow2ceil(-(-self.max_k // P))
        self.kbb = (self.KB - 1).bit_length()           # 0 when one word holds K
        self.max_nb = -(-self.max_n // C)
        self.max_pb = -(-self.max_tokens // R)
        self.tb = _bits(self.max_tokens + 1)
        #: The core (a `TileCore`, built on elaboration so that an unused Accel leaves nothing
        #: unelaborated) or the interface wired to the ``kaleido_core`` instance.
        self.core = None
        if pe != "inline":
            if P != LOAD_CHANNELS or self.max_k > operand_channels(cfg):
                discard(self)
                raise ValueError(f"pe='instance' wires the emitted kaleido_core (load_channels = {LOAD_CHANNELS}, "
                                 f"max_k = {operand_channels(cfg)}): got load_channels = {P}, max_k = {self.max_k}")
            # The emitted kaleido_core (hw.rtl: default max_k and load_channels): only its ports are used.
            self.core_sig = core_signature(cfg, load_channels=P)
            self.core = self.core_sig.flip().create()
        cb, sb = channel_bits(cfg), sad_bits(cfg)
        self.addr_bits = max(_bits(self.max_tokens * self.KB), _bits(self.max_nb * self.KB))
        super().__init__({
            "wr_valid": In(1), "wr_ready": Out(1), "wr_sel": In(1),
            "wr_addr": In(unsigned(self.addr_bits)), "wr_data": In(unsigned(P * C * 8)),
            "c_frames": In(range(self.max_frames + 1)), "c_positions": In(range(self.max_tokens + 1)),
            "c_k": In(range(self.max_k + 1)), "c_n": In(range(self.max_n + 1)),
            "c_n_groups": In(range(G + 1)), "c_k0": In(unsigned(G * cb)), "c_k1": In(unsigned(G * cb)),
            "c_b1": In(unsigned(G * sb)), "c_b2": In(unsigned(G * sb)), "x_unsigned": In(1),
            "start": In(1), "busy": Out(1), "done": Out(1),
            "out_valid": Out(unsigned(d)), "out_token": Out(unsigned(d * self.tb)),
            "out_col0": Out(unsigned(d * _bits(self.max_nb * C + 1))),
            "out_data": Out(unsigned(d * C * cfg.acc_bits)),
        })

    def elaborate(self, platform):  # noqa: C901, PLR0915
        m = Module()
        cfg, P, KB, kbb = self.cfg, self.P, self.KB, self.kbb  # noqa: N806
        R, C, G, d = cfg.array_rows, cfg.array_cols, cfg.partial_regs, cfg.drain_rows_per_cycle  # noqa: N806
        cb, sb, tb = channel_bits(cfg), sad_bits(cfg), self.tb
        lr, lc, lp = (R - 1).bit_length(), (C - 1).bit_length(), (P - 1).bit_length()
        if self.pe_kind == "inline":
            self.core = core = TileCore(cfg, pe="inline", max_k=self.max_k, load_channels=P)
            m.submodules.core = core
        else:
            from hw.rtl import CORE_MODULE_NAME  # hw.rtl imports this module
            core = self.core
            m.submodules.core = _instance(CORE_MODULE_NAME, self.core_sig, core)
        m.submodules.sim = su = SimilarityUnit(cfg, lanes=P)
        m.submodules.eff = ev = EffectiveValue(P)
        #: The `Scheduler` (built on elaboration).
        self.scheduler = Scheduler(cfg, window=self.window, max_digits=G * max(1, self.max_frames - 1))
        m.submodules.sched = sch = self.scheduler

        def addr(hi, lo):
            return Cat(lo[:kbb], hi) if kbb else hi

        # ---- buffers ----
        m.submodules.xmem = xmem = Memory(shape=unsigned(8 * P), depth=self.max_tokens * KB, init=[])
        m.submodules.wmem = wmem = Memory(shape=unsigned(8 * P * C), depth=self.max_nb * KB, init=[])
        m.submodules.emem = emem = Memory(shape=unsigned(X_BITS * P), depth=KB, init=[])
        m.submodules.dmem = dmem = Memory(shape=unsigned(2 * G), depth=self.max_tokens, init=[])
        m.submodules.omem = omem = Memory(shape=unsigned(tb), depth=self.max_pb * R, init=[])
        xw, ww = xmem.write_port(), wmem.write_port()
        ew, dw = emem.write_port(granularity=X_BITS), dmem.write_port(granularity=2)
        ow = omem.write_port()
        x_rows = [xmem.read_port(domain="comb") for _ in range(R)]
        x_sim, w_rd, e_rd = xmem.read_port(domain="comb"), wmem.read_port(domain="comb"), emem.read_port(domain="comb")
        d_rows = [dmem.read_port(domain="comb") for _ in range(R)]
        d_sch = dmem.read_port(domain="comb")
        o_rows = [omem.read_port(domain="comb") for _ in range(R)]
        o_out = [omem.read_port(domain="comb") for _ in range(d)]
        #: The buffers' `Memory` objects (for test benches that inspect them), set on elaboration.
        self.buffers = {"x": xmem, "w": wmem, "eff": emem, "dec": dmem, "order": omem}

        # ---- config views ----
        F, HW, ng = self.c_frames, self.c_positions, self.c_n_groups  # noqa: N806

        def k0(g):
            return self.c_k0.word_select(g, cb)

        def k1(g):
            return self.c_k1.word_select(g, cb)

        n_kbeats = Signal(range(KB + 1))
        m.d.comb += n_kbeats.eq((self.c_k + (P - 1)) >> lp)
        n_cb = Signal(range(self.max_nb + 1))  # column blocks
        m.d.comb += n_cb.eq((self.c_n + (C - 1)) >> lc)
        n_pb = Signal(range(self.max_pb + 1))  # position blocks
        m.d.comb += n_pb.eq((HW + (R - 1)) >> lr)

        idle = Signal()
        m.d.comb += [self.wr_ready.eq(idle)]
        wr = Signal()
        m.d.comb += wr.eq(self.wr_valid & idle)
        m.d.comb += [xw.addr.eq(self.wr_addr), xw.data.eq(self.wr_data[:8 * P]), xw.en.eq(wr & ~self.wr_sel),
                     ww.addr.eq(self.wr_addr), ww.data.eq(self.wr_data), ww.en.eq(wr & self.wr_sel)]

        # ---- SIM pass counters ----
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
        m.d.comb += [x_sim.addr.eq(addr(tok, j)), e_rd.addr.eq(j)]
        m.d.comb += [su.x.eq(x_sim.data), su.nb.eq(e_rd.data), su.mask.eq(mask), su.x_unsigned.eq(self.x_unsigned),
                     su.no_nb.eq(fr == 0), su.b1.eq(self.c_b1.word_select(g, sb)),
                     su.b2.eq(self.c_b2.word_select(g, sb)), su.first.eq(j == (k0(g) >> lp)), su.last.eq(j == j1)]
        m.d.comb += [ev.dec.eq(su.dec), ev.x.eq(x_sim.data), ev.nb.eq(e_rd.data), ev.x_unsigned.eq(self.x_unsigned)]
        m.d.comb += [ew.addr.eq(j), ew.data.eq(ev.x_eff), dw.addr.eq(tok),
                     dw.data.eq(Cat(*([su.dec] * G)))]

        # ---- SCHED counters ----
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
        m.d.comb += [sch.n_pos.eq(wn), sch.n_digits.eq(n_digits), sch.o_ready.eq(1),
                     d_sch.addr.eq(sfbase + w0 + si), sch.d_code.eq(d_sch.data.word_select(sg, 2)),
                     ow.addr.eq(w0 + so), ow.data.eq(w0 + sch.o_pos)]

        # ---- tile cursor: (column block, position block, frame), frame fastest ----
        def step(cur):
            nb_, pb_, f_, fb_ = cur
            last_f = f_ + 1 >= F
            last_pb = pb_ + 1 >= n_pb
            return (Mux(last_f & last_pb, nb_ + 1, nb_), Mux(last_f, Mux(last_pb, 0, pb_ + 1), pb_),
                    Mux(last_f, 0, f_ + 1), Mux(last_f, 0, fb_ + HW))

        def cursor(name):
            return (Signal(range(self.max_nb + 2), name=f"{name}_nb"), Signal(range(self.max_pb + 2), name=f"{name}_pb"),
                    Signal(range(self.max_frames + 1), name=f"{name}_f"),
                    Signal(range(self.max_tokens + 1), name=f"{name}_fbase"))

        def rows_of(pb_):
            left = Signal(range(self.max_tokens + 1), name="rows_left")
            m.d.comb += left.eq(HW - (pb_ << lr))
            return Mux(left < R, left, R)

        dmask = Signal(2 * G)  # the 2-bit fields of groups < ng
        for gg in range(G):
            m.d.comb += dmask[2 * gg:2 * gg + 2].eq(Mux(gg < ng, 3, 0))
        ld = cursor("ld")
        lj = Signal(range(KB + 1))
        ld_rows = Signal(range(R + 1))
        m.d.comb += ld_rows.eq(rows_of(ld[1]))
        x_lanes, t_dec = [], []
        for r in range(R):
            m.d.comb += [o_rows[r].addr.eq((ld[1] << lr) | r)]
            tr = Signal(range(self.max_tokens + 1), name=f"tok{r}")
            m.d.comb += tr.eq(Mux(r < ld_rows, ld[3] + o_rows[r].data, 0))  # padding rows read token 0
            m.d.comb += [x_rows[r].addr.eq(addr(tr, lj)), d_rows[r].addr.eq(tr)]
            x_lanes.append(x_rows[r].data)
            t_dec.append(Mux(r < ld_rows, d_rows[r].data & dmask, 0))  # stale groups >= ng: 0
        ld_x = Signal(8 * P * R)
        for p in range(P):
            for r in range(R):
                m.d.comb += ld_x[8 * (p * R + r):8 * (p * R + r) + 8].eq(x_lanes[r][8 * p:8 * p + 8])
        m.d.comb += w_rd.addr.eq(addr(ld[0], lj))
        last_beat = Signal()
        m.d.comb += last_beat.eq(lj + 1 >= n_kbeats)
        m.d.comb += [core.ld_beat.eq(lj), core.ld_x.eq(ld_x), core.ld_w.eq(w_rd.data), core.ld_last.eq(last_beat),
                     core.t_dec.eq(Cat(*t_dec)), core.t_row_mask.eq((1 << ld_rows) - 1),
                     core.t_k0.eq(self.c_k0), core.t_k1.eq(self.c_k1), core.t_n_groups.eq(ng),
                     core.t_clear.eq(ld[2] == 0), core.t_wgroups.eq(0),  # frame-axis groups only
                     core.x_unsigned.eq(self.x_unsigned)]
        tiles_loaded = Signal(range(self.max_nb * self.max_pb * self.max_frames + 1))
        tiles_out = Signal.like(tiles_loaded)

        # ---- result side: one cursor per drain port, port p starts at tile p ----
        rb = row_bits(cfg)
        outs = [cursor(f"out{p}") for p in range(d)]
        zero = tuple(Const(0) for _ in range(4))
        drained = []
        for p in range(d):
            oc = outs[p]
            row = core.out_row[p * rb:(p + 1) * rb]
            v = core.out_valid[p]
            m.d.comb += o_out[p].addr.eq((oc[1] << lr) | row)
            m.d.comb += [self.out_valid[p].eq(v & (row < rows_of(oc[1]))),
                         self.out_token.word_select(p, tb).eq(oc[3] + o_out[p].data),
                         self.out_col0.word_select(p, len(self.out_col0) // d).eq(oc[0] << lc)]
            fin = Signal(name=f"fin{p}")
            m.d.comb += fin.eq(v & (row == R - 1))
            drained.append(fin)
            nxt = oc
            for _ in range(d):
                nxt = step(nxt)
            with m.If(fin):
                m.d.sync += [a.eq(b) for a, b in zip(oc, nxt, strict=True)]
        m.d.comb += self.out_data.eq(core.out_data)
        m.d.sync += tiles_out.eq(tiles_out + sum(drained))

        # ---- controller ----
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += idle.eq(1)
                with m.If(self.start):
                    m.d.sync += [pos.eq(0), fr.eq(0), fbase.eq(0), g.eq(0), j.eq(0), phase_b.eq(0),
                                 w0.eq(0), tiles_loaded.eq(0), tiles_out.eq(0), lj.eq(0)]
                    m.d.sync += [a.eq(0) for a in ld]
                    for p in range(d):
                        init = zero
                        for _ in range(p):
                            init = step(init)
                        m.d.sync += [a.eq(b) for a, b in zip(outs[p], init, strict=True)]
                    m.next = "SIM"
            with m.State("SIM"):
                m.d.comb += [self.busy.eq(1), su.valid.eq(~phase_b)]
                with m.If(phase_b):
                    m.d.comb += ew.en.eq(mask)
                    with m.If(j == (k0(g) >> lp)):
                        m.d.comb += dw.en.eq(1 << g)
                with m.If(j != j1):
                    m.d.sync += j.eq(j + 1)
                with m.Elif(~phase_b):
                    m.d.sync += [phase_b.eq(1), j.eq(k0(g) >> lp)]
                with m.Else():  # next (token, group)
                    m.d.sync += phase_b.eq(0)
                    with m.If(g + 1 < ng):
                        m.d.sync += [g.eq(g + 1), j.eq(k0(g + 1) >> lp)]
                    with m.Else():  # position-major: frames inner (D23)
                        m.d.sync += [g.eq(0), j.eq(0)]
                        with m.If(fr + 1 < F):
                            m.d.sync += [fr.eq(fr + 1), fbase.eq(fbase + HW)]
                        with m.Elif(pos + 1 < HW):
                            m.d.sync += [fr.eq(0), fbase.eq(0), pos.eq(pos + 1)]
                        with m.Else():  # fbase stays (F-1)*HW: the scheduler's first digit column
                            m.next = "SCH_START"
            with m.State("SCH_START"):
                m.d.comb += [self.busy.eq(1), sch.start.eq(1)]
                m.d.sync += [si.eq(0), so.eq(0), sg.eq(ng - 1), sf.eq(F - 1), sfbase.eq(fbase)]
                m.next = "SCH_RUN"
            with m.State("SCH_RUN"):
                m.d.comb += [self.busy.eq(1), sch.d_valid.eq(1)]
                with m.If(sch.d_ready):
                    with m.If(si + 1 == wn):
                        m.d.sync += si.eq(0)
                        with m.If(sf > 1):
                            m.d.sync += [sf.eq(sf - 1), sfbase.eq(sfbase - HW)]
                        with m.Else():
                            m.d.sync += [sf.eq(F - 1), sfbase.eq(fbase), sg.eq(sg - 1)]
                    with m.Else():
                        m.d.sync += si.eq(si + 1)
                with m.If(sch.o_valid):
                    m.d.comb += ow.en.eq(1)
                    m.d.sync += so.eq(so + 1)
                    with m.If(sch.o_last):
                        m.d.sync += w0.eq(w0 + self.window)
                        with m.If(w0 + self.window >= HW):
                            m.next = "TILES"
                        with m.Else():
                            m.next = "SCH_START"
            with m.State("TILES"):
                m.d.comb += [self.busy.eq(1), core.ld_valid.eq(1)]
                with m.If(core.ld_ready):
                    with m.If(last_beat):
                        m.d.sync += [lj.eq(0), tiles_loaded.eq(tiles_loaded + 1)]
                        m.d.sync += [a.eq(b) for a, b in zip(ld, step(ld), strict=True)]
                        nb_, pb_, f_, _ = ld
                        with m.If((f_ + 1 >= F) & (pb_ + 1 >= n_pb) & (nb_ + 1 >= n_cb)):
                            m.next = "DRAIN"
                    with m.Else():
                        m.d.sync += lj.eq(lj + 1)
            with m.State("DRAIN"):
                m.d.comb += self.busy.eq(1)
                with m.If(tiles_out == tiles_loaded):
                    m.d.comb += self.done.eq(1)
                    m.next = "IDLE"
        return m


def op_descriptor(accel: Accel, grid, groups, N: int, b1, b2, x_unsigned: bool) -> dict[str, int]:  # noqa: N803
    """The config-register values (`Accel` ports ``c_*`` and ``x_unsigned``) of one op.

    Args:
        accel: the controller (its capacity is checked).
        grid: ``(F, H, W)``; groups: ``(k_start, k_stop, axis)`` partitioning ``0..K``;
        N: output channels; b1, b2: integer SAD bounds per group (`algo.reuse.golden.theta_bounds`).

    Raises:
        ValueError: a group whose axis is not ``"f"`` (h/w reuse stays on the driver-sequenced
            paths, D26), groups that do not partition ``0..K`` in order, more groups than
            ``partial_regs``, a bound outside the SAD width, or sizes beyond the controller's
            capacity (tokens, K, N, frames).
    """
    cfg = accel.cfg
    F, H, W = (int(v) for v in grid)  # noqa: N806
    for gi, (_, _, axis) in enumerate(groups):
        if axis != "f":
            raise ValueError(f"group {gi} reuses along {axis!r}: the op-level controller (hw/accel.py) "
                             "supports frame-axis ('f') groups only")
    pos = 0
    for k0, k1, _ in groups:
        if k0 != pos or k1 <= k0:
            raise ValueError(f"groups must partition 0..K in order; bad group {(k0, k1)}")
        pos = k1
    K = pos  # noqa: N806
    checks = [(len(groups), cfg.partial_regs, "channel groups", "partial_regs"),
              (F * H * W, accel.max_tokens, "tokens", "max_tokens"), (K, accel.max_k, "K", "max_k"),
              (N, accel.max_n, "N", "max_n"), (F, accel.max_frames, "frames", "max_frames")]
    for v, cap, what, name in checks:
        if not 1 <= v <= cap:
            raise ValueError(f"{what} = {v} outside 1..{cap} ({name} of this Accel)")
    cb, sb = channel_bits(cfg), sad_bits(cfg)
    for b in list(b1) + list(b2):
        if not 0 <= int(b) < 1 << sb:
            raise ValueError(f"SAD bound {b} does not fit {sb} bits")
    return {
        "c_frames": F, "c_positions": H * W, "c_k": K, "c_n": int(N), "c_n_groups": len(groups),
        "c_k0": sum(int(g[0]) << (i * cb) for i, g in enumerate(groups)),
        "c_k1": sum(int(g[1]) << (i * cb) for i, g in enumerate(groups)),
        "c_b1": sum(int(b) << (i * sb) for i, b in enumerate(b1)),
        "c_b2": sum(int(b) << (i * sb) for i, b in enumerate(b2)),
        "x_unsigned": int(x_unsigned),
    }


def buffer_words(accel: Accel, X, W) -> list[tuple[int, int, int]]:  # noqa: N803
    """The write-port words of an op's operands: ``(wr_sel, wr_addr, wr_data)`` in write order.

    Args:
        X: ``[M, K]`` int8 or uint8 (numpy); W: ``[K, N]`` int8.

    Returns:
        X words (sel 0, address ``tok*KB + j``) then W words (sel 1, address ``nb*KB + j``),
        lanes packed two's complement, lane i at bits ``[8i+7:8i]`` (module docstring).
    """
    P, C, KB = accel.P, accel.cfg.array_cols, accel.KB  # noqa: N806
    M, K = X.shape  # noqa: N806
    N = W.shape[1]  # noqa: N806
    nbeats = -(-K // P)
    out = []
    for t in range(M):
        for j in range(nbeats):
            word = 0
            for p in range(P):
                if j * P + p < K:
                    word |= (int(X[t, j * P + p]) & 0xFF) << (8 * p)
            out.append((0, t * KB + j, word))
    for nb in range(-(-N // C)):
        for j in range(nbeats):
            word = 0
            for p in range(P):
                for c in range(C):
                    k, n = j * P + p, nb * C + c
                    if k < K and n < N:
                        word |= (int(W[k, n]) & 0xFF) << (8 * (p * C + c))
            out.append((1, nb * KB + j, word))
    return out
