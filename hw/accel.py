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
  (p0 + t) mod d, rows 0..R-1 in order, as `sim.timing.stream.OutputCollector` reads them, where p0 =
  the tiles of the ops run since reset, mod d: the core's round robin runs on across ops, so the
  controller keeps p0 (``port0``, docs/decisions.md D63)): per drain port p of d,
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

from amaranth.hdl import Cat, Const, Module, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.accel_front import FrontPhases
from hw.accel_host import buffer_words, op_descriptor
from hw.accel_tiles import TilePhases
from hw.config import AcceleratorConfig
from hw.core import CORE_MODULE_NAME, LOAD_CHANNELS, TileCore, _instance, core_signature, operand_channels
from hw.dispatcher.matcher import channel_bits
from hw.dispatcher.scheduler import Scheduler
from hw.pe import X_BITS
from hw.similarity import EffectiveValue, SimilarityUnit, sad_bits
from hw.sram import index_bits as _bits
from hw.sram import macro, macro_name
from hw.sram import pow2ceil as _pow2ceil

__all__ = ["ACCEL_MODULE_NAME", "STATES", "Accel", "buffer_words", "op_descriptor"]

#: Verilog module name of `Accel` (hw/rtl.py).
ACCEL_MODULE_NAME = "kaleido_accel"

#: The controller's states, in order (`Accel._controller`).
STATES = ("IDLE", "SIM", "SIM_FLUSH", "SCH_START", "SCH_RUN", "TILES_START", "TILES", "DRAIN")


class Accel(FrontPhases, TilePhases, wiring.Component):
    """The op-level controller (module docstring); its phases live in the mixins `hw.accel_front.FrontPhases`
    (similarity pass, scheduler windows) and `hw.accel_tiles.TilePhases` (tile loader, drain).

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
