"""The compact organisation's op-level controller, first slice (docs/decisions.md D97): `CompactAccel`, Verilog
module ``kaleido_caccel``, runs one op's compact band-tiles through ``kaleido_ctop`` (`hw.compact_array` on a
compact config) from banked SRAM buffers and hands out the drained rows with their tags, the inputs of the
combine unit (`hw.combine`).

It is the delta controller (`hw.delta_accel.DeltaAccel`, ``kaleido_daccel``, D91, D93) on the compact array:
the same buffers, gather, band issue, tags and timing, with these differences:

- the **X buffer** holds each token's operand bytes (int8, or uint8 with ``x_unsigned`` high), not 9-bit
  differences: word ``token KW + xoff_g + j`` holds the group's channels ``k0 + P j .. k0 + P j + P - 1`` (lane l
  at bits ``[8 l, 8 l + 8)``; `hw.compact_accel_host.x_words`); the staging buffer likewise;
- ``x_unsigned`` (stable from ``start`` to ``done``) goes to ``kaleido_ctop``;
- a drained row carries two words per column, the group partial ``out`` and the msb partial ``out_m``
  (``out_data`` lane ``p C + c`` of ``2 acc_bits`` bits, ``out`` low), as ``kaleido_ctop`` drains them;
- the band-tiles are compact's issue order (column block outer, `sim.engines.band_stimulus.issue_order`). Built
  with ``queues=True`` (what `hw.rtl` emits) they come from ``kaleido_dqueue`` (`hw.delta_queue.DeltaQueue`)
  instanced as it is: its D68 order with one column block per group (``c_s = 1``, ``c_cm = 0``) is compact's
  order (tested), since compact and delta form the same band-tiles (`sim.timing.compact_reference.band_tiles`)
  and the same PARTIAL pairing (an all-PARTIAL band-tile of a group wider than one channel runs at half width);
- ``x{k}_re`` per X bank (attributes ``x_re``) so a bench counts the gather's reads.

Buffers (single-port 1rw unless named; each split by depth past 1 Mbit, `hw.sram.split_banks`): X bytes in
``R / B`` banks (token mod ``R / B``), weights one copy per band, descriptors (host path only) or the queues'
decision buffer, staging 1r1w per band and band row. The write port, ``start``/``busy``/``done``, the drain
ports' tags (``out_tile`` band-tile in issue order, ``out_row`` its row) and ``desc_valid``/``desc_tile``/``desc``
are `hw.delta_accel.DeltaAccel`'s.

Timing: `sim.timing.compact_accel` (the delta controller's rule, `sim.timing.delta_accel`, on compact's band-tiles:
`sim.timing.compact.band_schedule` with each band-tile's first slot after its gather; tested cycle for cycle).

`CompactAccel.elaborate` is a copy of `hw.delta_accel.DeltaAccel.elaborate` with the three changes above (byte
lanes, ``x_unsigned``, ``x_re``): that module belongs to another work item (D97 "Merge").

The combine stage that turns the tagged rows into ``Y`` is `hw.compact_core` (``kaleido_ccore``). Not in this
slice (D97): the weight stage, the vector unit and fused-attention control (modelled only).
"""

from __future__ import annotations

from amaranth.hdl import (
    Array,
    Cat,
    Const,
    Module,
    Mux,
    Signal,
    unsigned,
)
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.compact_array import TILE_BITS, ctop_signature
from hw.config import AcceleratorConfig
from hw.delta_accel import LANES, MAX_TILES, WEIGHT_LANES, DeltaAccel
from hw.pe import W_BITS, PEMode
from hw.sram import index_bits as _bits
from hw.sram import macro
from hw.sram import pow2ceil as _pow2ceil

#: Verilog module name of `CompactAccel` (hw/rtl.py).
CACCEL_MODULE_NAME = "kaleido_caccel"
#: Bits of one X lane: an int8 or uint8 operand byte (`hw.compact_array.ctop_signature`'s ``b{b}_x_a``).
X_BYTE_BITS = 8


class CompactAccel(DeltaAccel):
    """The compact op-level controller (module docstring); `hw.delta_accel.DeltaAccel`'s arguments, attributes and
    buffers (``geometry``), with ``X_BYTE_BITS`` lanes in the X and staging buffers.

    Raises:
        ValueError: not the compact organisation, R / B not a power of two, lanes or entries not a power of two
            (lanes at least 2), or a size below 1.
    """

    def __init__(self, cfg: AcceleratorConfig, max_tokens: int | None = None, max_k: int | None = None,
                 max_n: int | None = None, max_tiles: int = MAX_TILES, entries: int | None = None,
                 lanes: int = LANES, pe: str = "inline", queues: bool = False):
        R, C, B, d, G = (cfg.array_rows, cfg.array_cols, cfg.compact_bands,  # noqa: N806
                         cfg.drain_rows_per_cycle, cfg.partial_regs)
        P, S = lanes, entries or 2 * B  # noqa: N806
        brows = R // B
        err = None
        if cfg.organisation != "compact":
            err = f"{cfg.name}: the compact controller needs the compact organisation, not {cfg.organisation!r}"
        elif brows & (brows - 1):
            err = f"{cfg.name}: R / B = {brows} rows per band must be a power of two (a row's tag is its low bits)"
        elif P < 2 or P & (P - 1) or S < 1 or S & (S - 1):
            err = f"lanes = {P} (a power of two >= 2) and entries = {S} (a power of two) required"
        self.max_tokens = max_tokens or cfg.accel_max_tokens
        self.max_k = max_k or cfg.accel_max_k
        self.max_n = max_n or cfg.accel_max_n
        self.max_tiles = max_tiles
        if err is None and min(self.max_tokens, self.max_k, self.max_n, self.max_tiles) < 1:
            err = "CompactAccel sizes must be >= 1"
        if err is not None:
            discard(self)
            raise ValueError(err)
        self.cfg, self.pe_kind, self.P, self.S, self.brows, self.queues = cfg, pe, P, S, brows, queues
        self.XW = _pow2ceil(-(-self.max_k // P))
        self.KW = _pow2ceil(-(-self.max_k // P) + G)
        self.KWW = _pow2ceil(-(-self.max_k // WEIGHT_LANES) + G)
        self.max_nb = -(-self.max_n // C)
        self.tb = _bits(self.max_tokens)
        self.NB = brows
        #: The descriptor word's fields (`hw.delta_accel.DeltaAccel.fields`, the same layout).
        self.fields = [("nrows", _bits(brows + 1)), ("ncomp", _bits(brows + 1)), ("width", _bits(self.max_k + 1)),
                       ("paired", 1), ("cb", _bits(self.max_nb)), ("xoff", _bits(self.KW)),
                       ("xwords", _bits(self.XW + 1)), ("woff", _bits(self.KWW)), ("tokens", brows * self.tb)]
        self.desc_bits = sum(b for _, b in self.fields)
        self.geometry = {
            "x": ("1rw", _pow2ceil(-(-self.max_tokens // brows)) * self.KW, X_BYTE_BITS * P, brows),
            "w": ("1rw", _pow2ceil(self.max_nb * self.KWW), WEIGHT_LANES * C * W_BITS, B),
            "desc": ("1rw", _pow2ceil(self.max_tiles), self.desc_bits, 1),
            "stage": ("1r1w", S * self.XW, X_BYTE_BITS * P, R),
        }
        port_names = ["c_tiles"]
        if queues:  # kaleido_dqueue as it is (module docstring)
            from hw.delta_queue import DeltaQueue

            del self.geometry["desc"]
            self.queue = discard(DeltaQueue(self, pe=pe))
            self.geometry["dec"] = self.queue.geometry["dec"]
            port_names = [n for n in self.queue.signature.members if n.startswith("c_")]
        self.abits = max(_bits(dp) for _, dp, _, _ in self.geometry.values())
        if queues:
            self.abits = max(self.abits, self.queue.abits)
        self.dbits = max(w for name, (_, _, w, _) in self.geometry.items() if name != "stage")
        rb = _bits(brows)
        cports = ({n: self.queue.signature.members[n] for n in port_names} if queues
                  else {"c_tiles": In(range(self.max_tiles + 1))})
        out_bits = ctop_signature(cfg).members["out_data"].shape.width  # d C 2 acc_bits: out, out_m
        wiring.Component.__init__(self, {
            "wr_valid": In(1), "wr_ready": Out(1), "wr_sel": In(2), "wr_addr": In(unsigned(self.abits)),
            "wr_data": In(unsigned(self.dbits)), **cports, "x_unsigned": In(1),
            "start": In(1), "busy": Out(1), "done": Out(1),
            "out_valid": Out(unsigned(d)), "out_tile": Out(unsigned(d * TILE_BITS)), "out_row": Out(unsigned(d * rb)),
            "out_data": Out(unsigned(out_bits)),
            "desc_valid": Out(1), "desc_tile": Out(unsigned(TILE_BITS)), "desc": Out(unsigned(self.desc_bits)),
        })

    def elaborate(self, platform):  # noqa: C901
        m = Module()
        cfg = self.cfg
        R, C, B, d = cfg.array_rows, cfg.array_cols, cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
        P, S, XW, brows, XB = self.P, self.S, self.XW, self.brows, X_BYTE_BITS  # noqa: N806
        lp, ls, lxw = (P - 1).bit_length(), (S - 1).bit_length(), (XW - 1).bit_length()
        lkw, lkww = (self.KW - 1).bit_length(), (self.KWW - 1).bit_length()
        Q = self.queues  # noqa: N806
        T = None if Q else self.c_tiles  # noqa: N806

        running = Signal(name="running")
        begin = Signal(name="begin")  # the start cycle: every run register takes its start value
        m.d.comb += [begin.eq(self.start & ~running), self.busy.eq(running), self.wr_ready.eq(~running)]
        wr = Signal(name="wr")
        m.d.comb += wr.eq(self.wr_valid & ~running)
        top = self._top(m, begin)
        #: The top's ports (inline: the `CompactTop` itself), for test benches.
        self.top = top
        m.d.comb += top.x_unsigned.eq(self.x_unsigned)

        # ---- descriptor buffer and per-entry descriptor registers ----
        gidx = Signal(unsigned(TILE_BITS), name="gather_tile")   # next band-tile to gather
        in_rows = Signal(name="gather_rows")                      # reading X words
        g_first = Signal(name="gather_first")                     # the first X-word cycle (descriptor data valid)
        g_word = Signal(range(max(2, XW)), name="gather_word")
        g_entry = Signal(range(max(2, S)), name="gather_entry")
        held = Signal(unsigned(S), name="entry_held")            # staging entries held by a band-tile
        gdone = Signal(unsigned(TILE_BITS), name="gathered")      # band-tiles whose staging writes are done
        avail = Signal(unsigned(TILE_BITS), name="available")     # gathered, one cycle later (readable)
        rmax = self.max_tiles * brows + 1
        rowsum = Signal(range(rmax), name="rows_listed")
        drained = Signal(range(rmax), name="rows_drained")

        entry_of = (lambda n: n[:ls]) if ls else (lambda n: Const(0, 1))
        free = ~(held >> entry_of(gidx))[0]
        can_desc = Signal(name="gather_desc")
        q_fin = Signal(name="queue_finished")  # the queues' done seen (sticky until the next start)
        if Q:
            q = self._queue(m, begin, wr & (self.wr_sel == 3))
            m.d.comb += [can_desc.eq(running & ~in_rows & q.out_valid & free), q.out_ready.eq(can_desc)]
            dq = Signal(unsigned(self.desc_bits), name="desc_q")  # the taken descriptor, as the buffer's read
            with m.If(can_desc):
                m.d.sync += dq.eq(q.out_desc)
            with m.If(q.done):
                m.d.sync += q_fin.eq(1)
        else:
            m.d.comb += can_desc.eq(running & ~in_rows & (gidx < T) & free)
            dq = self._bank_1rw(m, "desc", Mux(running, gidx, self.wr_addr), can_desc, wr & (self.wr_sel == 2),
                                self.wr_data[:self.desc_bits])
        f, pos = {}, 0
        for name, bits in self.fields:
            f[name] = dq[pos:pos + bits]
            pos += bits
        regs = {n: Array(Signal(unsigned(b), name=f"e{e}_{n}") for e in range(S))
                for n, b in self.fields if n not in ("tokens", "xoff", "xwords")}

        # ---- gather: X words into the staging entry, one word of every bank a cycle ----
        NB, lnb = self.NB, (self.NB - 1).bit_length()  # noqa: N806
        toks = [f["tokens"][i * self.tb:(i + 1) * self.tb] for i in range(brows)]
        live = [Signal(name=f"gather_live{i}") for i in range(brows)]
        bank = [t[:lnb] if lnb else Const(0, 1) for t in toks]
        rank = []  # rows before row i (valid ones) in the same bank: row i's round
        for i in range(brows):
            m.d.comb += live[i].eq(i < f["nrows"])
            r = Signal(range(brows), name=f"gather_rank{i}")
            m.d.comb += r.eq(sum((bank[j] == bank[i] for j in range(i)), Const(0, unsigned(_bits(brows)))))
            rank.append(r)
        top_rank = Const(0, unsigned(_bits(brows)))
        for i in range(brows):  # a signal per step: the expression reads its input twice
            step = Signal(unsigned(_bits(brows)), name=f"gather_top{i}")
            m.d.comb += step.eq(Mux(live[i] & (rank[i] > top_rank), rank[i], top_rank))
            top_rank = step
        g_round = Signal(range(brows), name="gather_round")
        xw_sum = (f["xoff"] + g_word)[:lkw] if lkw else Const(0, 1)
        hb = self.geometry["x"][1].bit_length() - 1 - lkw  # in-bank token bits
        on = [Signal(name=f"gather_on{i}") for i in range(brows)]
        for i in range(brows):
            m.d.comb += on[i].eq(in_rows & live[i] & (rank[i] == g_round))
        # the host's address token KW + word: bank = token mod NB, in-bank word (token // NB) KW + word
        h_bank = self.wr_addr[lkw:lkw + lnb] if lnb else Const(0, 1)
        h_addr = Cat(self.wr_addr[:lkw], self.wr_addr[lkw + lnb:]) if lkw else self.wr_addr[lnb:]
        xq = []
        #: Per X bank its read enable (a bench counts the buffer's reads).
        self.x_re = []
        for k in range(NB):
            addr = Const(0, unsigned(lkw + hb))
            rd = Const(0, 1)
            for i in range(brows):
                mine = on[i] & (bank[i] == k)
                row_addr = Cat(xw_sum, toks[i][lnb:lnb + hb]) if lkw else toks[i][lnb:lnb + hb]
                addr = Mux(mine, row_addr, addr)
                rd = rd | mine
            x_re = Signal(name=f"x{k}_re")
            m.d.comb += x_re.eq(running & rd)
            self.x_re.append(x_re)
            xq.append(self._bank_1rw(m, f"x{k}", Mux(running, addr, h_addr), x_re,
                                     wr & (self.wr_sel == 0) & (h_bank == k), self.wr_data[:XB * P]))
        last_word = g_word == f["xwords"] - 1
        last_round = g_round == top_rank
        w_last = Signal(name="stage_last")
        w_on = [Signal(name=f"stage_we{i}") for i in range(brows)]
        w_bank = [Signal(range(max(2, NB)), name=f"stage_bank{i}") for i in range(brows)]
        w_addr = Signal(unsigned(max(1, ls + lxw)), name="stage_waddr")
        with m.If(can_desc):
            m.d.sync += [in_rows.eq(1), g_first.eq(1), g_round.eq(0), g_word.eq(0), g_entry.eq(entry_of(gidx)),
                         gidx.eq(gidx + 1)]
        with m.If(in_rows):
            m.d.sync += g_first.eq(0)
            with m.If(g_first):
                for n, arr in regs.items():
                    m.d.sync += arr[g_entry].eq(f[n])
                m.d.sync += rowsum.eq(rowsum + f["nrows"])
            with m.If(last_word):
                m.d.sync += [g_word.eq(0), g_round.eq(g_round + 1)]
                with m.If(last_round):
                    m.d.sync += in_rows.eq(0)
            with m.Else():
                m.d.sync += g_word.eq(g_word + 1)
        stage_w = Cat(g_word[:lxw], g_entry[:ls]) if ls + lxw else Const(0, 1)
        m.d.sync += [w_last.eq(in_rows & last_word & last_round), w_addr.eq(stage_w), avail.eq(gdone)]
        m.d.sync += [w_on[i].eq(on[i]) for i in range(brows)] + [w_bank[i].eq(bank[i]) for i in range(brows)]
        with m.If(w_last):
            m.d.sync += gdone.eq(gdone + 1)
        stage_data = []
        for i in range(brows):
            data = xq[0]
            for k in range(1, NB):
                data = Mux(w_bank[i] == k, xq[k], data)
            stage_data.append(data)

        # ---- bands ----
        nxt = Signal(unsigned(TILE_BITS), name="next_tile", init=B)
        taken = Const(0, unsigned(TILE_BITS))
        release = Const(0, unsigned(S))
        inst = self.pe_kind == "instance"
        #: Per band the band-tile number it runs (mirrors ``kaleido_dtop``'s ``b{b}_tile``), for test benches.
        self.band_tile, slots_of = [], []
        for b in range(B):
            tile = Signal(unsigned(TILE_BITS), name=f"b{b}_tile", init=b)
            slot = Signal(range(self.max_k + 1), name=f"b{b}_slot")
            self.band_tile.append(tile)
            slots_of.append(slot)
            e = entry_of(tile)
            cur = {n: arr[e] for n, arr in regs.items()}
            slots = Mux(cur["paired"], (cur["width"] + 1) >> 1, cur["width"])
            valid, last, acc, done_b = (Signal(name=f"b{b}_{n}") for n in ("valid", "last", "accept", "done"))
            m.d.comb += [valid.eq(running & (tile < avail) & (Const(1) if Q else tile < T)), last.eq(slot == slots - 1),
                         acc.eq(valid & getattr(top, f"b{b}_ready")), done_b.eq(acc & last)]
            ntile = Mux(done_b, nxt + taken, tile)
            taken = taken + done_b
            nslot = Mux(done_b, 0, Mux(acc, slot + 1, slot))
            m.d.sync += [tile.eq(ntile), slot.eq(nslot)]
            release = release | Mux(done_b, Const(1, unsigned(S)) << e, 0)
            # the next cycle's slot: its staging and weight words are read now (synchronous macros)
            ne = entry_of(ntile)
            nd = {n: arr[ne] for n, arr in regs.items()}
            nchan = Mux(nd["paired"], nslot << 1, nslot)
            s_raddr = Cat(nchan[lp:lp + lxw], ne) if ls + lxw else Const(0, 1)
            wsum = (nd["woff"] + (nchan >> 1))[:lkww]
            wq = self._bank_1rw(m, f"w{b}", Mux(running, Cat(wsum, nd["cb"]), self.wr_addr), running,
                                wr & (self.wr_sel == 1), self.wr_data[:WEIGHT_LANES * C * W_BITS])
            chan = Mux(cur["paired"], slot << 1, slot)
            has_b = Signal(name=f"b{b}_has_b")
            m.d.comb += has_b.eq(cur["paired"] & (chan + 1 < cur["width"]))
            xa, xb, modes = [], [], []
            for i in range(brows):
                ports, elab = macro("1r1w", S * XW, XB * P, None, instance=inst)
                m.submodules[f"stage_b{b}_r{i}"] = elab
                m.d.comb += [ports.waddr.eq(w_addr), ports.wdata.eq(stage_data[i]), ports.we.eq(w_on[i]),
                             ports.wmask.eq(1), ports.raddr.eq(s_raddr), ports.re.eq(running)]
                live = i < cur["nrows"]
                lane = chan[:lp]
                xa.append(Mux(live, ports.rdata.word_select(lane, XB), 0))
                xb.append(Mux(live & has_b, ports.rdata.word_select(lane | 1, XB), 0))
                modes.append(Mux(i < cur["ncomp"], int(PEMode.COMPUTE),
                                 Mux(live, Mux(has_b, int(PEMode.PAIRED), int(PEMode.PARTIAL)), int(PEMode.REUSE))))
            lane0, lane1 = wq[:C * W_BITS], wq[C * W_BITS:]
            m.d.comb += [getattr(top, f"b{b}_valid").eq(valid), getattr(top, f"b{b}_first").eq(slot == 0),
                         getattr(top, f"b{b}_last").eq(last), getattr(top, f"b{b}_rows").eq(cur["nrows"]),
                         getattr(top, f"b{b}_x_a").eq(Cat(*xa)), getattr(top, f"b{b}_x_b").eq(Cat(*xb)),
                         getattr(top, f"b{b}_mode").eq(Cat(*(Const(0, 2) | md for md in modes))),
                         getattr(top, f"b{b}_w_a").eq(Mux(cur["paired"] | ~chan[0], lane0, lane1)),
                         getattr(top, f"b{b}_w_b").eq(Mux(has_b, lane1, 0))]
        m.d.sync += [nxt.eq(nxt + taken), held.eq((held | Mux(can_desc, Const(1, unsigned(S)) << entry_of(gidx), 0))
                                                  & ~release)]

        # ---- collect: the drained rows with their tags ----
        rb, tr = _bits(R), _bits(brows)
        m.d.comb += [self.out_valid.eq(top.out_valid), self.out_tile.eq(top.out_tile), self.out_data.eq(top.out_data)]
        for p in range(d):
            m.d.comb += self.out_row[p * tr:(p + 1) * tr].eq(top.out_row[p * rb:p * rb + tr] if brows > 1 else 0)
        count = sum((top.out_valid[p] for p in range(1, d)), top.out_valid[0] + 0) if d > 1 else top.out_valid[0]
        m.d.sync += drained.eq(drained + count)

        # ---- run state ----
        finished = Signal(name="finished")
        m.d.comb += finished.eq(running & (q_fin if Q else gidx >= T) & ~in_rows & (drained == rowsum))
        m.d.comb += self.done.eq(finished)
        # the descriptor the gather took, with its band-tile number, the cycle it is read (for a combine stage, D95)
        m.d.comb += [self.desc_valid.eq(g_first), self.desc_tile.eq(gidx - 1), self.desc.eq(dq)]
        with m.If(finished):
            m.d.sync += running.eq(0)
        with m.If(begin):  # the start values (last assignment wins)
            m.d.sync += [running.eq(1), gidx.eq(0), in_rows.eq(0), held.eq(0), gdone.eq(0), avail.eq(0),
                         rowsum.eq(0), drained.eq(0), nxt.eq(B), w_last.eq(0), q_fin.eq(0)]
            m.d.sync += [w.eq(0) for w in w_on]
            m.d.sync += [t.eq(b) for b, t in enumerate(self.band_tile)] + [s.eq(0) for s in slots_of]
        return m
