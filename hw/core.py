"""Compute core with the hardware dispatcher: tiles' operands and decisions in, result rows out.

`hw.top.Top` takes ready-made cycle slots (the "feed decisions directly" path the RTL tests use,
with the slot stream of `sim.timing.stream`). `TileCore` puts the dispatcher in front of it, with two
banks (0 and 1) so that tile t+1 loads while tile t issues (double buffering). Tile t uses bank
``t mod 2``. Each bank holds one tile: two operand buffers (``kaleido_opbuf``: X rows and W
columns, ``max_k`` channels each), the tile's decisions and a matcher
(`hw.dispatcher.matcher.Matcher`).

1. LOAD (``ld_valid``/``ld_ready``, one beat per cycle): beat ``ld_beat`` carries channels
   ``P*ld_beat .. P*ld_beat + P-1`` of the tile (P = ``load_channels``): lane (p, r) of ``ld_x``
   (bits ``8*(p*R + r)``) is ``X[token r, P*ld_beat + p]``, lane (p, j) of ``ld_w`` (bits
   ``8*(p*C + j)``) is ``W[P*ld_beat + p, n0 + j]``. Lanes past the tile's rows, columns or K are
   don't-care (rows outside ``t_row_mask`` are REUSE and channels past the last group are never
   read). The beat with ``ld_last`` set also carries the tile's descriptor: decisions ``t_dec``
   (row r, group g at bits ``2*(r*G+g)``, codes COMPUTE 0 / PARTIAL 1 / REUSE 2),
   ``t_row_mask``, the groups' channel ranges ``t_k0``/``t_k1``, ``t_n_groups``, ``t_clear``
   (first tile of a position block) and ``t_wgroups`` (bit g: group g reuses along ``w`` through
   the PE row link, D4; the tile then holds whole image rows in raster order, `sim.timing.dispatch`). Accepting it marks the bank full, starts the bank's matcher
   and moves loading to the other bank. ``ld_ready`` is low while the bank being loaded is full
   (its tile has not issued its last slot yet).
2. ISSUE: the full bank whose turn it is issues its matcher's slots into `Top`, one per cycle:
   operands of channels a and b read from its buffers, per row the PE mode and operand select
   from the two groups' decisions (the table of `sim.timing.stream`: (C, R) -> COMPUTE a, (R, C) ->
   COMPUTE b, (P, P) -> PAIRED, (P, R) / (R, P) -> PARTIAL a / b, (R, R) -> REUSE; rows outside
   the mask REUSE), ``clear`` on the tile's first slot. The last slot waits on ``Top.in_ready``
   (drain credits). When it is accepted (cycle L_t) the bank is free again from cycle L_t + 1 and
   the other bank issues from L_t + 1 if its tile is loaded: a tile loaded while the previous one
   issues follows it with no bubble, so the issue timeline is the cycle model's
   (`sim.timing.cycle_model`); when the load is late the stall is `sim.timing.core_timing`'s.

Timing (derived from the registers above; `sim.timing.core_timing.core_timeline` implements it, cycle 0
= the first load beat): tile t's n_t beats start at ``max(A_{t-1} + 1, L_{t-2} + 1)`` and its last
beat is accepted at A_t; its matcher's first slot is at ``A_t + 1`` at the earliest, so
``L_t = max(max(L_{t-1}, A_t) + S_t, L_{t-d} + R)`` (``S_t = max(1, slots_t)``). With
``P >= K`` (one beat per tile) the loader always keeps up and ``L_t`` is the cycle model's plus
the first beat (tests/test_rtl_core.py).

Operand buffers: ``kaleido_opbuf`` is a behavioural register file (one synchronous write port of
one beat, two asynchronous read ports), a stand-in for the banked SRAM macro; in Verilog it is the
hand-written module `OPBUF_VERILOG` without initial values (so 128x128 emits quickly, D25), in the
Amaranth simulator an `amaranth.lib.memory.Memory`. tests/test_rtl_core.py checks under Amaranth's
simulator that the slots reaching `Top` equal `sim.timing.stream.build_stream`'s, slot for slot, the
results equal `algo.reuse.golden.apply_decisions` and the cycles equal `sim.timing.core_timing`'s.

Not in this version (docs/decisions.md D21): the similarity unit and the scheduler are not part of
this module; `hw.accel.Accel` (D26) is the op-level controller that runs them and feeds this core
(frame-axis groups only; other ops are sequenced by the driver); no K folds (K <= ``max_k``).
"""

from __future__ import annotations

from amaranth.hdl import ClockSignal, Instance, Module, Mux, ResetSignal, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.config import AcceleratorConfig
from hw.dispatcher.matcher import MATCHER_MODULE_NAME, Matcher, channel_bits, matcher_signature
from hw.pe import COMPUTE, MODE_BITS, PARTIAL, REUSE, PEMode
from hw.top import TOP_MODULE_NAME, Top, row_bits, top_signature

#: Default channels per load beat. Source: a matcher slot carries at most two channels (docs/spec.md
#: §3), so a tile whose n active channels need at least ceil(n / 2) slots is loaded in
#: ceil(K / 2) beats, within the previous tile's issue time whenever no group is skipped by every
#: row; tiles that skip groups (or bubble tiles) can issue faster than the load and stall
#: (`sim.timing.core_timing`).
LOAD_CHANNELS = 2

#: Verilog module name of `TileCore` (hw/rtl.py emits it; `hw.accel.Accel` instantiates it by name).
CORE_MODULE_NAME = "kaleido_core"

#: Verilog module name of the operand buffer (`OPBUF_VERILOG`).
OPBUF_MODULE_NAME = "kaleido_opbuf"

#: Behavioural Verilog of the operand buffer: a register file with one write port and two
#: asynchronous read ports, no reset and no initial value (a stand-in for the SRAM macro; the
#: contents are written before they are read). Parameters: WIDTH (bits of a beat), DEPTH (beats),
#: ABITS (address bits).
OPBUF_VERILOG = """\
module kaleido_opbuf #(
    parameter WIDTH = 16,
    parameter DEPTH = 4,
    parameter ABITS = 2
) (
    input  wire             clk,
    input  wire             we,
    input  wire [ABITS-1:0] waddr,
    input  wire [WIDTH-1:0] wdata,
    input  wire [ABITS-1:0] raddr_a,
    input  wire [ABITS-1:0] raddr_b,
    output wire [WIDTH-1:0] rdata_a,
    output wire [WIDTH-1:0] rdata_b
);
    reg [WIDTH-1:0] words [0:DEPTH-1];
    always @(posedge clk) begin
        if (we) words[waddr] <= wdata;
    end
    assign rdata_a = words[raddr_a];
    assign rdata_b = words[raddr_b];
endmodule
"""


def operand_channels(cfg: AcceleratorConfig) -> int:
    """Channels one bank's operand buffers hold: what the input and weight SRAMs hold for R rows
    and C columns, capped at ``max_k`` (tiny-8x8: 16 KiB / 8 = 2,048; 128x128: 512 KiB / 128 =
    4,096). Ops with a longer K need K folds, which this core does not sequence (D21)."""
    return min(cfg.max_k, cfg.input_sram_kib * 1024 // cfg.array_rows, cfg.weight_sram_kib * 1024 // cfg.array_cols)


def _instance(module_name: str, signature: wiring.Signature, iface) -> Instance:
    """An instance of a separately emitted module, its ports wired to `iface` (the flipped signature)."""
    kw = {"i_clk": ClockSignal("sync"), "i_rst": ResetSignal("sync")}
    for name, member in signature.members.items():
        kw[("i_" if member.flow == In else "o_") + name] = getattr(iface, name)
    return Instance(module_name, **kw)


def add_child(m: Module, name: str, component: wiring.Component, module_name: str, instance: bool):
    """Add ``component`` to ``m`` as submodule ``name``: the component itself (``instance`` False: Amaranth's
    simulation), or ``module_name``, emitted on its own, instantiated by name (`_instance`; Verilog) on a new
    interface of the component's flipped signature. Returns what the parent wires to: the component or that
    interface (shared by `hw.delta_core` and `hw.compact_core`)."""
    if not instance:
        m.submodules[name] = component
        return component
    ports = component.signature.flip().create()
    m.submodules[name] = _instance(module_name, component.signature, ports)
    return ports


class OperandBuffer(wiring.Component):
    """``depth`` words of ``width`` bits; write port (we, waddr, wdata), two asynchronous read
    ports. ``kind="inline"``: an Amaranth `Memory` (simulation); ``"instance"``: ``kaleido_opbuf``."""

    def __init__(self, width: int, depth: int, kind: str = "inline"):
        self.width, self.depth, self.kind = width, depth, kind
        self.abits = max(1, (depth - 1).bit_length())
        super().__init__({"we": In(1), "waddr": In(unsigned(self.abits)), "wdata": In(unsigned(width)),
                          "raddr_a": In(unsigned(self.abits)), "raddr_b": In(unsigned(self.abits)),
                          "rdata_a": Out(unsigned(width)), "rdata_b": Out(unsigned(width))})

    def elaborate(self, platform):
        m = Module()
        if self.kind == "instance":
            m.submodules.mem = Instance(
                OPBUF_MODULE_NAME, p_WIDTH=self.width, p_DEPTH=self.depth, p_ABITS=self.abits,
                i_clk=ClockSignal("sync"), i_we=self.we, i_waddr=self.waddr, i_wdata=self.wdata,
                i_raddr_a=self.raddr_a, i_raddr_b=self.raddr_b, o_rdata_a=self.rdata_a, o_rdata_b=self.rdata_b)
            return m
        m.submodules.mem = mem = Memory(shape=unsigned(self.width), depth=self.depth, init=[])
        wp, ra, rb = mem.write_port(), mem.read_port(domain="comb"), mem.read_port(domain="comb")
        m.d.comb += [wp.en.eq(self.we), wp.addr.eq(self.waddr), wp.data.eq(self.wdata),
                     ra.addr.eq(self.raddr_a), rb.addr.eq(self.raddr_b),
                     self.rdata_a.eq(ra.data), self.rdata_b.eq(rb.data)]
        return m


def core_signature(cfg: AcceleratorConfig, max_k: int | None = None,
                   load_channels: int = LOAD_CHANNELS) -> wiring.Signature:
    """The ports of `TileCore` (module docstring) for `cfg`, ``max_k`` channels per bank (default
    `operand_channels`) and P = ``load_channels`` channels per load beat."""
    R, C, G, d = cfg.array_rows, cfg.array_cols, cfg.partial_regs, cfg.drain_rows_per_cycle  # noqa: N806
    cb, P = channel_bits(cfg), load_channels  # noqa: N806
    depth = -(-(max_k or operand_channels(cfg)) // P)
    return wiring.Signature({
        "ld_valid": In(1), "ld_ready": Out(1), "ld_beat": In(unsigned(max(1, (depth - 1).bit_length()))),
        "ld_x": In(unsigned(P * R * 8)), "ld_w": In(unsigned(P * C * 8)),
        "ld_last": In(1),
        "t_dec": In(unsigned(R * G * 2)), "t_row_mask": In(unsigned(R)),
        "t_k0": In(unsigned(G * cb)), "t_k1": In(unsigned(G * cb)), "t_n_groups": In(range(G + 1)),
        "t_clear": In(1), "t_wgroups": In(unsigned(G)), "x_unsigned": In(1),
        "busy": Out(1),
        "out_valid": Out(unsigned(d)), "out_row": Out(unsigned(d * row_bits(cfg))),
        "out_data": Out(unsigned(d * C * cfg.acc_bits)),
    })


class TileCore(wiring.Component):
    """Two banks of (operand buffers, decisions, matcher) + slot former + `Top` (module docstring).

    Args:
        cfg: accelerator config.
        pe: ``"inline"`` elaborates `Top`, the matchers and `Memory` buffers for `amaranth.sim`;
            ``"instance"`` instantiates ``kaleido_top``, ``kaleido_matcher`` and ``kaleido_opbuf``
            by name (Verilog emission, `hw.rtl`).
        max_k: channels per bank (default `operand_channels`).
        load_channels: channels per load beat P, a power of two (default `LOAD_CHANNELS`).

    Raises:
        ValueError: ``load_channels`` not a power of two.
    """

    def __init__(self, cfg: AcceleratorConfig, pe: str = "inline", max_k: int | None = None,
                 load_channels: int = LOAD_CHANNELS):
        R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
        if load_channels < 1 or load_channels & (load_channels - 1):
            discard(self)  # rejected: never elaborated, so no UnusedElaboratable warning
            raise ValueError(f"load_channels = {load_channels}: must be a power of two")
        self.cfg, self.pe_kind, self.P = cfg, pe, load_channels
        self.max_k = max_k or operand_channels(cfg)
        self.depth = -(-self.max_k // load_channels)
        kind = "inline" if pe == "inline" else "instance"
        #: The array top: a `Top` (inline) or the interface wired to the ``kaleido_top`` instance.
        self.top = Top(cfg, pe=pe) if pe == "inline" else top_signature(cfg).flip().create()
        #: Per bank: the matcher (a `Matcher`, or the interface wired to a ``kaleido_matcher``).
        self.matchers = [Matcher(cfg) if pe == "inline" else matcher_signature(cfg).flip().create()
                         for _ in range(2)]
        #: Per bank: X and W operand buffers (beats of P channels).
        self.xbuf = [OperandBuffer(load_channels * R * 8, self.depth, kind) for _ in range(2)]
        self.wbuf = [OperandBuffer(load_channels * C * 8, self.depth, kind) for _ in range(2)]
        super().__init__(core_signature(cfg, self.max_k, load_channels))

    def elaborate(self, platform):
        m = Module()
        cfg, P = self.cfg, self.P  # noqa: N806
        R, C, G = cfg.array_rows, cfg.array_cols, cfg.partial_regs  # noqa: N806
        top = self.top
        if self.pe_kind == "inline":
            m.submodules.top = top
        else:
            m.submodules.top = _instance(TOP_MODULE_NAME, top_signature(cfg), top)
        for b in range(2):
            mt = self.matchers[b]
            if self.pe_kind == "inline":
                m.submodules[f"matcher{b}"] = mt
            else:
                m.submodules[f"matcher{b}"] = _instance(MATCHER_MODULE_NAME, matcher_signature(cfg), mt)
            m.submodules[f"xbuf{b}"] = self.xbuf[b]
            m.submodules[f"wbuf{b}"] = self.wbuf[b]

        full = Signal(2)          # bank holds a loaded tile that has not issued its last slot
        lb = Signal()             # bank being loaded
        ib = Signal()             # bank whose turn it is to issue
        dec = [Signal.like(self.t_dec, name=f"dec{b}") for b in range(2)]
        row_mask_b = [Signal.like(self.t_row_mask, name=f"row_mask{b}") for b in range(2)]
        clear_b = [Signal(name=f"clear{b}") for b in range(2)]  # pending clear for the tile's first slot
        wgrp_b = [Signal.like(self.t_wgroups, name=f"wgroups{b}") for b in range(2)]  # w-axis groups (row link)

        # Load side.
        m.d.comb += [self.ld_ready.eq(~full.bit_select(lb, 1)), self.busy.eq(full.any())]
        beat = Signal()
        m.d.comb += beat.eq(self.ld_valid & self.ld_ready)
        accept = Signal()
        m.d.comb += accept.eq(beat & self.ld_last)
        for b in range(2):
            for buf, data in ((self.xbuf[b], self.ld_x), (self.wbuf[b], self.ld_w)):
                m.d.comb += [buf.we.eq(beat & (lb == b)), buf.waddr.eq(self.ld_beat), buf.wdata.eq(data)]
            mt = self.matchers[b]
            m.d.comb += [mt.start.eq(accept & (lb == b)), mt.dec.eq(self.t_dec), mt.row_mask.eq(self.t_row_mask),
                         mt.k0.eq(self.t_k0), mt.k1.eq(self.t_k1), mt.n_groups.eq(self.t_n_groups)]
            with m.If(accept & (lb == b)):
                m.d.sync += [dec[b].eq(self.t_dec), row_mask_b[b].eq(self.t_row_mask), clear_b[b].eq(self.t_clear),
                             wgrp_b[b].eq(self.t_wgroups)]
        with m.If(accept):
            m.d.sync += lb.eq(~lb)

        # Issue side: the current bank's matcher outputs, operands and decisions.
        mts = self.matchers

        def cur(name):
            return Mux(ib, getattr(mts[1], name), getattr(mts[0], name))

        sv, a_valid, b_valid = Signal(), Signal(), Signal()
        a, bch = Signal.like(mts[0].a), Signal.like(mts[0].b)
        g_a, g_b = Signal.like(mts[0].g_a), Signal.like(mts[0].g_b)
        first_a, first_b, last = Signal(), Signal(), Signal()
        m.d.comb += [sv.eq(full.bit_select(ib, 1) & cur("slot_valid")), a_valid.eq(cur("a_valid")),
                     b_valid.eq(cur("b_valid")), a.eq(cur("a")), bch.eq(cur("b")), g_a.eq(cur("g_a")),
                     g_b.eq(cur("g_b")), first_a.eq(cur("first_a")), first_b.eq(cur("first_b")), last.eq(cur("last"))]
        cur_dec, cur_mask, cur_clear = Signal.like(self.t_dec), Signal.like(self.t_row_mask), Signal()
        cur_wgrp = Signal.like(self.t_wgroups)
        m.d.comb += [cur_dec.eq(Mux(ib, dec[1], dec[0])), cur_mask.eq(Mux(ib, row_mask_b[1], row_mask_b[0])),
                     cur_clear.eq(Mux(ib, clear_b[1], clear_b[0])), cur_wgrp.eq(Mux(ib, wgrp_b[1], wgrp_b[0]))]
        lane_bits = (P - 1).bit_length()
        for b in range(2):
            mt = mts[b]
            for buf in (self.xbuf[b], self.wbuf[b]):
                m.d.comb += [buf.raddr_a.eq(mt.a >> lane_bits), buf.raddr_b.eq(mt.b >> lane_bits)]
            m.d.comb += mt.slot_ready.eq(full[b] & (ib == b) & top.in_ready)

        def channel(rdata0, rdata1, ch, width):
            """Channel `ch`'s lanes from the current bank's beat word."""
            word = Mux(ib, rdata1, rdata0)
            return word.word_select(ch[:lane_bits], width) if P > 1 else word

        xa_w = channel(self.xbuf[0].rdata_a, self.xbuf[1].rdata_a, a, R * 8)
        xb_w = channel(self.xbuf[0].rdata_b, self.xbuf[1].rdata_b, bch, R * 8)
        wa_w = channel(self.wbuf[0].rdata_a, self.wbuf[1].rdata_a, a, C * 8)
        wb_w = channel(self.wbuf[0].rdata_b, self.wbuf[1].rdata_b, bch, C * 8)
        xa_d, xb_d = Signal(unsigned(R * 8)), Signal(unsigned(R * 8))
        m.d.comb += [xa_d.eq(xa_w), xb_d.eq(xb_w)]

        # Slot former.
        slot = Signal()
        m.d.comb += slot.eq(sv)
        x_a, x_b = Signal(unsigned(R * 8)), Signal(unsigned(R * 8))
        mode, sel = Signal(unsigned(R * MODE_BITS)), Signal(unsigned(R))
        for r in range(R):
            live = cur_mask[r]
            m.d.comb += [
                x_a[8 * r:8 * r + 8].eq(Mux(live & a_valid, xa_d[8 * r:8 * r + 8], 0)),
                x_b[8 * r:8 * r + 8].eq(Mux(live & b_valid, xb_d[8 * r:8 * r + 8], 0)),
            ]
            da, db = Signal(2, name=f"da{r}"), Signal(2, name=f"db{r}")
            row = cur_dec[2 * G * r:2 * G * (r + 1)]  # row r's G codes: a G-way mux per row and lane
            m.d.comb += [da.eq(row.word_select(g_a, 2)), db.eq(row.word_select(g_b, 2))]
            md, sl = Signal(MODE_BITS, name=f"mode{r}"), Signal(name=f"sel{r}")
            with m.If(~live | ~a_valid):
                m.d.comb += md.eq(PEMode.REUSE)
            with m.Elif(~b_valid):
                m.d.comb += md.eq(Mux(da == COMPUTE, PEMode.COMPUTE, Mux(da == PARTIAL, PEMode.PARTIAL, PEMode.REUSE)))
            with m.Elif(da == COMPUTE):
                m.d.comb += md.eq(PEMode.COMPUTE)
            with m.Elif(da == PARTIAL):
                m.d.comb += md.eq(Mux(db == PARTIAL, PEMode.PAIRED, PEMode.PARTIAL))
            with m.Else():  # a REUSEs: b's decision picks the mode, on the b operands
                m.d.comb += [md.eq(Mux(db == COMPUTE, PEMode.COMPUTE, Mux(db == PARTIAL, PEMode.PARTIAL, PEMode.REUSE))),
                             sl.eq(db != REUSE)]
            m.d.comb += [mode.word_select(r, MODE_BITS).eq(md), sel[r].eq(sl)]

        m.d.comb += [
            top.in_valid.eq(slot),
            top.in_x_a.eq(x_a), top.in_x_b.eq(x_b), top.in_mode.eq(mode), top.in_sel.eq(sel),
            top.in_w_a.eq(Mux(a_valid, wa_w, 0)), top.in_w_b.eq(Mux(b_valid, wb_w, 0)),
            top.in_g_a.eq(g_a), top.in_g_b.eq(g_b),
            top.in_first_a.eq(first_a), top.in_first_b.eq(first_b),
            # w-axis groups use the PE row link (D4): flag a lane whose channel's group is one.
            top.in_sp_a.eq(a_valid & cur_wgrp.bit_select(g_a, 1)), top.in_sp_b.eq(b_valid & cur_wgrp.bit_select(g_b, 1)),
            top.in_last.eq(last), top.in_clear.eq(cur_clear),
            top.x_unsigned.eq(self.x_unsigned),
            self.out_valid.eq(top.out_valid), self.out_row.eq(top.out_row), self.out_data.eq(top.out_data),
        ]
        done = Signal()
        m.d.comb += done.eq(slot & top.in_ready & last)
        for b in range(2):
            with m.If(slot & top.in_ready & (ib == b)):
                m.d.sync += clear_b[b].eq(0)
        # full: set on the descriptor beat (bank lb, which is not full), cleared after the last slot.
        set_mask = Mux(accept, Mux(lb, 0b10, 0b01), 0)
        clr_mask = Mux(done, Mux(ib, 0b10, 0b01), 0)
        m.d.sync += full.eq((full | set_mask) & ~clr_mask)
        with m.If(done):
            m.d.sync += ib.eq(~ib)
        return m
