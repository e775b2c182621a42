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
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.config import AcceleratorConfig
from hw.core import LOAD_CHANNELS, TileCore, _instance, core_signature, operand_channels
from hw.dispatcher.matcher import channel_bits
from hw.dispatcher.scheduler import Scheduler
from hw.pe import X_BITS
from hw.similarity import EffectiveValue, SimilarityUnit, sad_bits
from hw.sram import macro, macro_name
from hw.top import row_bits

#: Verilog module name of `Accel` (hw/rtl.py).
ACCEL_MODULE_NAME = "kaleido_accel"

#: The controller's states, in order (`Accel._controller`).
STATES = ("IDLE", "SIM", "SIM_FLUSH", "SCH_START", "SCH_RUN", "TILES_START", "TILES", "DRAIN")


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
        window: scheduler window in positions (default ``cfg.scheduler_window_tiles * R``, the window
            `sim.plan` gives every op this controller can hold, docs/decisions.md D63); max_frames: most frames F (default ``max_tokens``),
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
        if R & (R - 1):
            discard(self)
            raise ValueError(f"array_rows = {R}: the banked buffers need a power of two (bank = token mod R)")
        if P < 1 or P & (P - 1):
            discard(self)  # rejected: never elaborated, so no UnusedElaboratable warning (hw.discard)
            raise ValueError(f"load_channels = {P}: must be a power of two")
        self.cfg, self.P, self.pe_kind = cfg, P, pe
        self.max_tokens = max_tokens or cfg.accel_max_tokens
        self.max_k = max_k or cfg.accel_max_k
        self.max_n = max_n or cfg.accel_max_n
        self.window = window or cfg.scheduler_window_tiles * R
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
        self.lr, self.lc, self.lp = (R - 1).bit_length(), (C - 1).bit_length(), (P - 1).bit_length()
        rows_per_bank = -(-self.max_tokens // R)
        #: The buffers as SRAM macros (`hw.sram`): name -> (kind, depth, width, lane, banks); module docstring.
        self.geometry = {
            "x": ("1rw", rows_per_bank * self.KB, 8 * P, None, R),
            "w": ("1rw", self.max_nb * self.KB, 8 * P, None, C),
            "eff": ("1r1w", self.KB, X_BITS * P, X_BITS, 1),
            "dec": ("1rw", rows_per_bank, 2 * G, 2, R),
            "order": ("1rw", self.max_pb, self.tb, None, R),
            "order_out": ("1rw", self.max_pb * R, self.tb, None, d),
        }
        self._n_pb = (self.c_positions + (R - 1)) >> self.lr   # position blocks
        self._n_cb = (self.c_n + (C - 1)) >> self.lc           # column blocks

    def macros(self) -> list[tuple[str, int, int, int | None]]:
        """The distinct macros ``(kind, depth, width, lane)`` of the buffers, sorted by `hw.sram.macro_name`."""
        kinds = {(k, dp, w, ln) for k, dp, w, ln, _ in self.geometry.values()}
        return sorted(kinds, key=lambda t: macro_name(*t))

    def _k0(self, g):
        return self.c_k0.word_select(g, channel_bits(self.cfg))

    def _k1(self, g):
        return self.c_k1.word_select(g, channel_bits(self.cfg))

    def elaborate(self, platform):
        m = Module()
        core = self._core(m)
        #: One-hot view of the controller's state (driven by `_controller`, read by the phases).
        st = {name: Signal(name=f"st_{name.lower()}") for name in STATES}
        self._buffers(m)
        self._write_port(m, st)
        sim_last, fbase = self._similarity_pass(m, st)
        windows_done, window_done = self._scheduler_pass(m, st, fbase)
        final_accept, tiles_loaded = self._loader(m, st, core)
        tiles_out = self._drain(m, st, core)
        self._controller(m, st, sim_last, window_done, windows_done, final_accept, tiles_out == tiles_loaded)
        return m

    # ---- structure ----
    def _core(self, m):
        if self.pe_kind == "inline":
            self.core = core = TileCore(self.cfg, pe="inline", max_k=self.max_k, load_channels=self.P)
            m.submodules.core = core
        else:
            from hw.rtl import CORE_MODULE_NAME  # hw.rtl imports this module
            core = self.core
            m.submodules.core = _instance(CORE_MODULE_NAME, self.core_sig, core)
        m.submodules.sim = self.su = SimilarityUnit(self.cfg, lanes=self.P)
        m.submodules.eff = self.ev = EffectiveValue(self.P)
        #: The `Scheduler` (built on elaboration).
        self.scheduler = Scheduler(self.cfg, window=self.window,
                                   max_digits=self.cfg.partial_regs * max(1, self.max_frames - 1))
        m.submodules.sched = self.scheduler
        return core

    def _buffers(self, m):
        """The SRAM macros of `macros` (inline `hw.sram.Sram` or instances by name)."""
        inst = self.pe_kind != "inline"
        #: Bank lists per buffer (``hw.sram.Sram`` ports), set on elaboration.
        self.banks = {}
        for name, (kind, depth, width, lane, count) in self.geometry.items():
            banks = []
            for b in range(count):
                ports, elab = macro(kind, depth, width, lane, instance=inst)
                m.submodules[f"{name}{b}"] = elab
                banks.append(ports)
            self.banks[name] = banks

    def _addr(self, hi, lo):
        """Buffer word address ``hi * KB + lo`` (KB a power of two)."""
        return Cat(lo[:self.kbb], hi) if self.kbb else hi

    def _split(self, tok):
        """``(bank, in-bank index)`` of a token (or order entry): ``tok mod R``, ``tok // R``."""
        lr = self.lr
        return (tok[:lr] if lr else Const(0, 1)), tok[lr:]

    def _write_port(self, m, st):
        P, C, kbb, lr = self.P, self.cfg.array_cols, self.kbb, self.lr  # noqa: N806
        m.d.comb += self.wr_ready.eq(st["IDLE"])
        wr = Signal()
        m.d.comb += wr.eq(self.wr_valid & st["IDLE"])
        a = self.wr_addr
        bank = a[kbb:kbb + lr] if lr else Const(0, 1)
        inner = Cat(a[:kbb], a[kbb + lr:])
        with m.If(st["IDLE"]):
            for b, xb in enumerate(self.banks["x"]):
                m.d.comb += [xb.addr.eq(inner), xb.wdata.eq(self.wr_data[:8 * P]), xb.wmask.eq(1),
                             xb.we.eq(wr & ~self.wr_sel & (bank == b))]
            for c, wb in enumerate(self.banks["w"]):
                m.d.comb += [wb.addr.eq(a), wb.we.eq(wr & self.wr_sel), wb.wmask.eq(1),
                             wb.wdata.eq(Cat(*(self.wr_data[8 * (p * C + c):8 * (p * C + c) + 8] for p in range(P))))]

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

    # ---- result side: one cursor per drain port, port p starts at tile p ----
    def _drain(self, m, st, core):
        cfg, lr, lc, tb = self.cfg, self.lr, self.lc, self.tb
        R, d = cfg.array_rows, cfg.drain_rows_per_cycle  # noqa: N806
        rb = row_bits(cfg)
        tiles_out = Signal(range(self.max_nb * self.max_pb * self.max_frames + 1))
        drained = []
        cw = len(self.out_col0) // d
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
            with m.If(st["IDLE"]):
                init = tuple(Const(0) for _ in range(4))
                for _ in range(p):
                    init = self._step(init)
                m.d.sync += [a.eq(b) for a, b in zip(oc, init, strict=True)]
        m.d.comb += self.out_data.eq(core.out_data)
        m.d.sync += tiles_out.eq(Mux(st["IDLE"], 0, tiles_out + sum(drained)))
        return tiles_out

    # ---- controller ----
    def _controller(self, m, st, sim_last, window_done, windows_done, final_accept, drained):
        with m.FSM():
            for name in STATES:
                with m.State(name):
                    m.d.comb += st[name].eq(1)
                    if name != "IDLE":
                        m.d.comb += self.busy.eq(1)
                    if name == "IDLE":
                        with m.If(self.start):
                            m.next = "SIM"
                    elif name == "SIM":
                        with m.If(sim_last):
                            m.next = "SIM_FLUSH"
                    elif name == "SIM_FLUSH":
                        m.next = "SCH_START"
                    elif name == "SCH_START":
                        m.next = "SCH_RUN"
                    elif name == "SCH_RUN":
                        with m.If(windows_done):
                            m.next = "TILES_START"
                        with m.Elif(window_done):
                            m.next = "SCH_START"
                    elif name == "TILES_START":
                        m.next = "TILES"
                    elif name == "TILES":
                        with m.If(final_accept):
                            m.next = "DRAIN"
                    else:  # DRAIN
                        with m.If(drained):
                            m.d.comb += self.done.eq(1)
                            m.next = "IDLE"

    def peek(self, buffer: str, index: int):
        """The `amaranth.lib.memory.Memory` row of entry `index` of a banked buffer (inline only, after
        elaboration; for test benches): ``"dec"`` token ``index``, ``"order"`` entry ``index``."""
        R = self.cfg.array_rows  # noqa: N806
        return self.banks[buffer][index % R].mem.data[index // R]


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
