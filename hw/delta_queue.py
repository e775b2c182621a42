"""The delta organisation's band-tile queues (docs/decisions.md D93): `DeltaQueue`, Verilog module
``kaleido_dqueue``, forms one op's band-tiles from the per-token decision codes and hands out their descriptor words
(`hw.delta_accel.DeltaAccel.fields`) in the model's delta issue order, one a cycle at most, to ``kaleido_daccel``
(which takes them instead of its host-written descriptor buffer when built with ``queues=True``).

What the host gives it: the **decision buffer** ``dec``, one word per token (raster order ``f H W + h W + w``) of G
2-bit codes (group g at bits ``[2 g, 2 g + 2)``; `algo.reuse.golden`'s COMPUTE 0, PARTIAL 1, REUSE 2), written
through ``wr_*`` while idle (address: the token); ``V = lanes`` single-port `hw.sram` macros (bank ``t mod V`` holds
token t at ``t // V``; each split by depth past `hw.sram.MACRO_MAX_BITS`), so a step reads any V consecutive
tokens, one word of every bank; and the op's
sizes on ports stable from ``start`` to ``done``: ``c_frames`` F, ``c_hw`` H W, ``c_fw`` frames per chunk
(`sim.timing.compact.chunk_frames`), ``c_groups`` G, ``c_ncb`` column blocks, ``c_s`` column blocks per group
(`sim.timing.delta.plan`), ``c_cm`` the issue order (0: D68's, 1: D84's chunk-major), ``c_layout`` per group its
``(width, xoff, xwords, woff)`` (`hw.delta_accel_host.group_layout`), group g's fields at `layout_bits` g.

The queues are `sim.timing.compact.band_tile_sequence`'s (module docstring of `sim.timing.compact`, "Queues"):
pools of R positions, frames inside a pool, per group a COMPUTE and a PARTIAL queue of ``R / B`` token registers
each. Its schedule, one **step** a cycle (a step that emits waits while the output register is full):

- per column-block group (first block ``c0``, ``k = min(s, ncb - c0)`` blocks), pool, chunk of frames, and with
  ``c_cm`` per column block of the group (the chunk rerun: its queues start and end empty), per frame of the chunk:
  for each group g, one **scan** pass over the pool's positions for COMPUTE tokens of g, then one for PARTIAL
  ones, a step per V positions (``V = lanes``, default ``R / B``; their codes are read the cycle before): the
  step's tokens of that kind join the queue in position order, and when they fill it the step emits a full
  band-tile of its first ``R / B`` tokens, the rest staying queued (``V <= R / B``: at most one a step);
- after the chunk's last frame, per group one **flush** step (two when the rest makes two band-tiles): the rest
  of the COMPUTE queue (c tokens) and the PARTIAL queue (p) as one band-tile of ``c + p`` rows, or when
  ``c + p > R / B`` a full one (the c COMPUTE tokens, then PARTIAL ones) and one of the remaining PARTIAL tokens.

The order is the model's: a pass emits its band-tiles in the order the model's ``while`` issues them, groups in
order, COMPUTE before PARTIAL. An emitted band-tile sits in the output register (``out_valid``, ``out_desc``)
until taken (``out_ready``): with ``c_cm`` = 0 it is handed out k times, column blocks ``c0 .. c0 + k - 1``
(D68: each band-tile once per column block of the group), else once (column block ``c0 + rep``). Its fields:
rows, COMPUTE rows (the COMPUTE tokens first), the group's width and word offsets, paired (no COMPUTE row and a
group wider than one channel: the half-width slots), column block, each row's token.

Timing (`sim.timing.delta_accel.queue_steps`, `queue_times`): cycle 0 the cycle after ``start`` (which reads the
first step's code) runs step 0; each step one cycle; a step that emits runs no earlier than the cycle the
previous band-tile's last copy is taken (the register is loaded in that cycle); an emitted band-tile is
``out_valid`` from the next cycle. ``done`` pulses once every step has run and the register is empty. The word the
register loads is shown the cycle of the load (``load_valid``, ``load_desc``: every field but the column block,
zero there; docs/decisions.md D137), so ``kaleido_dcore``'s issue gate reads its segment a cycle ahead.

**Replay** (``replay`` entries > 0, docs/decisions.md D120; compact's queues, ``c_cm`` = 0): what a scan finds is
the same for every column-block group, so the first group's scan also writes each band-tile it emits (cb field
zero) into a **descriptor buffer** of ``replay`` words (one 1r1w macro), and each later group, instead of its
scan, reads them back in order, one **replay step** a cycle (each emits; its word is read the cycle before, the
output register loaded as a scan's emission, handed out ``k`` times). A first group of more band-tiles than
``replay`` (an overflow flag) is rescanned for each later group as without the buffer; one of none ends the op
with its scan. `sim.timing.delta_accel.queue_steps`' ``replay`` is this rule. A word written the cycle its
read is issued (the first replay step reads entry 0 during the scan's last step) is forwarded from a register
(the macro reads before it writes).

**Wider scan** (``reach`` L, docs/decisions.md D124; compact's queues, `hw.compact_accel.CompactAccel.QUEUE_REACH`):
a scan step reads the pass's next L positions (the decision buffer in L banks, token mod L; L may exceed ``R /
B``) and, where its tokens of the pass's kind fill the queue, stops at the lane whose token fills it: it emits the
queued tokens and the lanes' up to that one, the queue empties and the next step starts at the position after it
(the lanes past it are read again); a step that does not fill queues its matches and moves on by L. So at most one
band-tile a step, no tokens carried past a fill (the queue's ``R / B`` registers, no ``V`` more places), and a
pass of mostly REUSE positions takes L of them a step. Per lane: its match, its place ``q_n + Σ`` matches before it,
the fill lane (the one matching lane whose place is ``R / B - 1``, one-hot: the places rise by at most one a lane)
and the next step's start ``p + fill + 1`` or ``p + L``. `sim.timing.delta_accel.queue_steps`' ``reach`` is this
rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.sram import index_bits as _bits
from hw.sram import macro, split_banks

if TYPE_CHECKING:
    from hw.delta_accel import DeltaAccel

#: Verilog module name of `DeltaQueue` (hw/rtl.py).
DQUEUE_MODULE_NAME = "kaleido_dqueue"
#: Bits of one decision code (COMPUTE 0, PARTIAL 1, REUSE 2; `algo.reuse.golden`).
CODE_BITS = 2


def layout_fields(acc: DeltaAccel) -> list[tuple[str, int]]:
    """One group's ``c_layout`` fields, least significant first: ``(name, bits)`` (the descriptor's)."""
    return [(n, b) for n, b in acc.fields if n in ("width", "xoff", "xwords", "woff")]


def layout_bits(acc: DeltaAccel) -> int:
    """Bits of one group's ``c_layout`` entry."""
    return sum(b for _, b in layout_fields(acc))


class DeltaQueue(wiring.Component):
    """The band-tile queues (module docstring).

    Args:
        acc: the `hw.delta_accel.DeltaAccel` it feeds (its config, capacity and descriptor fields; read for its
            sizes only). pe: ``"inline"`` (Amaranth simulation) or ``"instance"`` (macros by name, `hw.rtl`).
        lanes: positions a scan step reads, V: a power of two up to ``R / B`` (default ``R / B``: at 128 x 128 the
            queues keep up with the array on the linear ops, docs/decisions.md D93, not on the score ops, D117).
        replay: the descriptor buffer's entries (module docstring, "Replay"; 0: none, D93's queues).
        reach: the wider scan (module docstring, "Wider scan", docs/decisions.md D124): positions a step reads, a
            power of two (any, also above ``R / B``), instead of ``lanes``; None: D93's steps of ``lanes``.

    Raises:
        ValueError: lanes not a power of two or above ``R / B``; replay below 0; reach not a power of two, or
            given with lanes.
    """

    def __init__(self, acc: DeltaAccel, pe: str = "inline", lanes: int | None = None, replay: int = 0,
                 reach: int | None = None):
        cfg = acc.cfg
        if replay < 0:
            discard(self)
            raise ValueError(f"queue replay = {replay}: the descriptor buffer's entries, 0 (none) or more")
        if reach is not None and (reach < 1 or reach & (reach - 1) or lanes is not None):
            discard(self)
            raise ValueError(f"queue reach = {reach}: a power of two, instead of lanes (lanes = {lanes})")
        self.replay, self.reach = replay, reach
        self.acc, self.cfg, self.pe_kind = acc, cfg, pe
        self.G = cfg.partial_regs
        self.brows, self.tb = acc.brows, acc.tb
        self.V = reach or lanes or acc.brows
        if reach is None and (self.V > acc.brows or self.V & (self.V - 1)):
            discard(self)
            raise ValueError(f"queue lanes = {self.V}: a power of two up to R / B = {acc.brows} (one band-tile a step)")
        depth = 1 << _bits(acc.max_tokens)
        #: The decision buffer: (kind, depth, width, banks): V banks (token mod V), each split by depth
        #: (`hw.sram.split_banks`).
        self.geometry = {"dec": ("1rw", max(1, depth // self.V), CODE_BITS * self.G, self.V)}
        if replay:  # one macro of `replay` descriptor words (module docstring, "Replay")
            self.geometry["replay"] = ("1r1w", replay, acc.desc_bits, 1)
        self.abits = _bits(depth)
        tk = range(acc.max_tokens + 1)
        super().__init__({
            "wr_valid": In(1), "wr_addr": In(unsigned(self.abits)), "wr_data": In(unsigned(CODE_BITS * self.G)),
            "c_frames": In(tk), "c_hw": In(tk), "c_fw": In(tk), "c_groups": In(range(self.G + 1)),
            "c_ncb": In(range(acc.max_nb + 1)), "c_s": In(range(acc.max_nb + 1)), "c_cm": In(1),
            "c_layout": In(unsigned(self.G * layout_bits(acc))),
            "start": In(1), "busy": Out(1), "done": Out(1),
            "out_valid": Out(1), "out_ready": In(1), "out_desc": Out(unsigned(acc.desc_bits)),
            "load_valid": Out(1), "load_desc": Out(unsigned(acc.desc_bits)),
        })

    def macros(self) -> list[tuple[str, int, int, None]]:
        """The distinct macros ``(kind, depth, width, lane)`` of the decision buffer (and the replay buffer)."""
        kind, depth, width, _ = self.geometry["dec"]
        out = [(kind, split_banks(depth, width)[0], width, None)]
        if self.replay:
            out.append(("1r1w", self.replay, self.acc.desc_bits, None))
        return out

    def elaborate(self, platform):  # noqa: C901
        m = Module()
        acc, G, brows, tb = self.acc, self.G, self.brows, self.tb  # noqa: N806
        R = self.cfg.array_rows  # noqa: N806
        lbr = (brows - 1).bit_length()
        tk = range(acc.max_tokens + 1)
        nb = range(acc.max_nb + 1)

        running = Signal(name="running")
        begin = Signal(name="begin")
        m.d.comb += [begin.eq(self.start & ~running), self.busy.eq(running)]

        # ---- the step pointer (current) and its successor (n_*) ----
        names = {"c0": nb, "rep": nb, "p0": tk, "fc0": tk, "f": tk, "g": range(G + 1), "kind": 1, "p": tk,
                 "flush": 1, "second": 1, "fin": 1}
        RP = self.replay  # noqa: N806
        if RP:  # replay steps: the flag and the entry read back
            names |= {"rp": 1, "ri": range(RP + 1)}
        cur = {n: Signal(r if not isinstance(r, int) else unsigned(r), name=f"q_{n}") for n, r in names.items()}
        nxt = {n: Signal.like(s, name=f"q_n_{n}") for n, s in cur.items()}
        k = Signal(nb, name="q_k")  # column blocks of this group
        m.d.comb += k.eq(Mux(cur["c0"] + self.c_s > self.c_ncb, self.c_ncb - cur["c0"], self.c_s))
        p1 = Signal(tk, name="q_p1")
        m.d.comb += p1.eq(Mux(cur["p0"] + R > self.c_hw, self.c_hw, cur["p0"] + R))
        fc1 = Signal(tk, name="q_fc1")
        m.d.comb += fc1.eq(Mux(cur["fc0"] + self.c_fw > self.c_frames, self.c_frames, cur["fc0"] + self.c_fw))

        # ---- decision buffer ----
        V, lv = self.V, (self.V - 1).bit_length()  # noqa: N806
        kind_, depth, width, _ = self.geometry["dec"]
        bank, n = split_banks(depth, width)
        lb = (bank - 1).bit_length()
        raddr = Signal(unsigned(self.abits), name="q_raddr")  # the next step's first token
        on_rd = running | begin
        lo = raddr[:lv] if lv else Const(0, 1)
        words = []
        for v in range(V):  # bank v holds the tokens t = v mod V at t // V
            # bank v's token is the next one at or after the first: one word on when v < first mod V (never for
            # the last bank: a constant comparison Verilator's CMPCONST rejects)
            rd = raddr if not lv else (raddr >> lv) + (Const(v) < lo) if v < V - 1 else raddr >> lv
            addr = Mux(on_rd, rd, self.wr_addr >> lv)
            wsel = (self.wr_addr[:lv] == v) if lv else Const(1)
            sel = addr[lb:] if n > 1 else Const(0, 1)
            sel_q = Signal.like(sel, name=f"q_dec{v}_sel")
            m.d.sync += sel_q.eq(sel)
            word = Const(0, unsigned(width))
            for i in range(n):
                ports, elab = macro(kind_, bank, width, None, instance=self.pe_kind == "instance")
                m.submodules[f"dec{v}_m{i}"] = elab
                on = sel == i
                m.d.comb += [ports.addr.eq(addr[:lb] if lb else 0), ports.re.eq(on_rd & on),
                             ports.we.eq(self.wr_valid & ~running & wsel & on), ports.wmask.eq(1),
                             ports.wdata.eq(self.wr_data)]
                word = Mux(sel_q == i, ports.rdata, word) if n > 1 else ports.rdata
            w_s = Signal(unsigned(width), name=f"q_dec{v}")
            m.d.comb += w_s.eq(word)
            words.append(w_s)
        gsel = cur["g"][:_bits(G)] if G > 1 else Const(0, 1)
        token = Signal(unsigned(tb), name="q_token")  # the step's first token
        m.d.comb += token.eq(cur["f"] * self.c_hw + cur["p"])
        codes = []  # lane j: token + j's code of group g (position p + j; valid while inside the pool)
        for j in range(V):
            wj = Array(words)[(token[:lv] + j)[:lv]] if lv else words[0]
            c = Signal(CODE_BITS, name=f"q_code{j}")
            m.d.comb += c.eq(wj.word_select(gsel, CODE_BITS) if G > 1 else wj[:CODE_BITS])
            codes.append(c)

        # ---- queues: per group and kind, R / B token registers and a count ----
        qt = [[Array(Signal(unsigned(tb), name=f"q{g}_{'cp'[kd]}{i}") for i in range(brows)) for kd in (0, 1)]
              for g in range(G)]
        qn = [[Signal(range(brows + 1), name=f"q{g}_{'cp'[kd]}_n") for kd in (0, 1)] for g in range(G)]
        lay = Array(self.c_layout[i * layout_bits(acc):(i + 1) * layout_bits(acc)] for i in range(G))
        qc_n = Array(qn[g][0] for g in range(G))[gsel]
        qp_n = Array(qn[g][1] for g in range(G))[gsel]
        qc_t = [Array(qt[g][0][i] for g in range(G))[gsel] for i in range(brows)]
        qp_t = [Array(qt[g][1][i] for g in range(G))[gsel] for i in range(brows)]

        # ---- output register ----
        o_valid = Signal(name="q_out_valid")
        o_cb, o_cb_last = Signal(nb, name="q_out_cb"), Signal(nb, name="q_out_cb_last")
        o_rest = Signal(unsigned(acc.desc_bits), name="q_out_desc")  # every field but cb (zero there)
        pop = Signal(name="q_pop")
        free = Signal(name="q_free")
        m.d.comb += [pop.eq(o_valid & self.out_ready), free.eq(~o_valid | (pop & (o_cb == o_cb_last))),
                     self.out_valid.eq(o_valid)]
        pos, cb_pos = 0, 0
        for name, bits in acc.fields:
            if name == "cb":
                cb_pos = pos
                cb_bits = bits
            pos += bits
        m.d.comb += self.out_desc.eq(o_rest | (o_cb[:cb_bits] << cb_pos))

        # ---- the current step: does it emit, and what ----
        is_scan = Signal(name="q_scan")
        is_flush = Signal(name="q_flush_step")
        if RP:
            is_rp = Signal(name="q_replay_step")
            m.d.comb += [is_scan.eq(running & ~cur["fin"] & ~cur["flush"] & ~cur["rp"]),
                         is_flush.eq(running & ~cur["fin"] & cur["flush"] & ~cur["rp"]),
                         is_rp.eq(running & ~cur["fin"] & cur["rp"])]
        else:
            m.d.comb += [is_scan.eq(running & ~cur["fin"] & ~cur["flush"]),
                         is_flush.eq(running & ~cur["fin"] & cur["flush"])]
        match = [Signal(name=f"q_match{j}") for j in range(V)]
        m.d.comb += [match[j].eq(is_scan & (cur["p"] + j < p1) & (codes[j] == cur["kind"])) for j in range(V)]
        q_n = Signal(range(brows + 1), name="q_count")
        m.d.comb += q_n.eq(Mux(cur["kind"], qp_n, qc_n))
        at = []  # lane j's place in the queue (q_n + the lanes before it that match)
        run = q_n + 0
        for j in range(V):
            a = Signal(range(brows + V + 1), name=f"q_at{j}")
            m.d.comb += a.eq(run)
            at.append(a)
            run = a + match[j]
        total = Signal(range(brows + V + 1), name="q_total")
        m.d.comb += total.eq(run)
        RCH = self.reach is not None  # noqa: N806
        lane_tok = []  # per queue place r < brows + V (reach: r < brows): the token of the lane that lands there
        for r in range(brows if RCH else brows + V):
            v = Const(0, unsigned(tb))
            for j in range(V):
                v = Mux(match[j] & (at[j] == r), (token + j)[:tb], v)
            t_r = Signal(unsigned(tb), name=f"q_lane{r}")
            m.d.comb += t_r.eq(v)
            lane_tok.append(t_r)
        fills = Signal(name="q_fills")
        m.d.comb += fills.eq(is_scan & (total >= brows))
        if RCH:  # the wider scan: the lane whose token fills the queue (one-hot: the counts rise by at most one)
            fill_at = Signal(range(V), name="q_fill_lane")
            m.d.comb += fill_at.eq(0)
            for j in range(V):
                with m.If(match[j] & (at[j] == brows - 1)):
                    m.d.comb += fill_at.eq(j)
            p_step = Signal(range(acc.max_tokens + V + 1), name="q_p_step")  # where the next step of the pass starts
            m.d.comb += p_step.eq(Mux(fills, cur["p"] + fill_at + 1, cur["p"] + V))
        c_n, p_n = qc_n, qp_n
        big = Signal(name="q_two")  # the flush makes two band-tiles
        m.d.comb += big.eq(c_n + p_n > brows)
        f_emit = Signal(name="q_flush_emit")
        m.d.comb += f_emit.eq(is_flush & (cur["second"] | (c_n + p_n != 0)))
        emit = Signal(name="q_emit")
        m.d.comb += emit.eq(fills | f_emit | is_rp if RP else fills | f_emit)
        stall = Signal(name="q_stall")
        m.d.comb += stall.eq(emit & ~free)
        adv = Signal(name="q_advance")
        m.d.comb += adv.eq(running & ~cur["fin"] & ~stall)

        # the emitted band-tile's rows and tokens
        rot = [Signal(unsigned(tb), name=f"q_rot{i}") for i in range(brows)]  # PARTIAL queue rotated by c
        for i in range(brows):
            m.d.comb += rot[i].eq(Array(qp_t)[(i - c_n)[:lbr] if lbr else 0])
        e_rows = Signal(range(brows + 1), name="q_e_rows")
        e_comp = Signal(range(brows + 1), name="q_e_comp")
        e_tok = [Signal(unsigned(tb), name=f"q_e_tok{i}") for i in range(brows)]
        with m.If(cur["flush"]):
            with m.If(cur["second"]):
                m.d.comb += [e_rows.eq(c_n + p_n - brows), e_comp.eq(0)]
                m.d.comb += [e_tok[i].eq(Mux(i < c_n + p_n - brows, rot[i], 0)) for i in range(brows)]
            with m.Else():
                m.d.comb += [e_rows.eq(Mux(big, brows, c_n + p_n)), e_comp.eq(c_n)]
                m.d.comb += [e_tok[i].eq(Mux(i < c_n, qc_t[i], Mux(i < c_n + p_n, rot[i], 0))) for i in range(brows)]
        with m.Else():
            m.d.comb += [e_rows.eq(brows), e_comp.eq(Mux(cur["kind"], 0, brows))]
            for i in range(brows):
                qi = Mux(cur["kind"], qp_t[i], qc_t[i])
                m.d.comb += e_tok[i].eq(Mux(i < q_n, qi, lane_tok[i]))
        lay_g = Signal(unsigned(layout_bits(acc)), name="q_layout")
        m.d.comb += lay_g.eq(lay[gsel])
        lf = {n: lay_g[p:p + b] for (n, b), p in zip(layout_fields(acc),
                                                        _offsets(layout_fields(acc)), strict=True)}
        vals = {"nrows": e_rows, "ncomp": e_comp, "width": lf["width"], "paired": (e_comp == 0) & (lf["width"] > 1),
                "cb": Const(0, 1), "xoff": lf["xoff"], "xwords": lf["xwords"], "woff": lf["woff"], "tokens": Cat(*e_tok)}
        parts = []
        for name, bits in acc.fields:
            v = Signal(unsigned(bits), name=f"q_e_{name}")
            m.d.comb += v.eq(vals[name])
            parts.append(v)
        word = Cat(*parts)
        if RP:  # the descriptor buffer: written by the first group's scan, read back by the replay steps
            rp_n = Signal(range(RP + 1), name="q_rp_n")  # words written
            rp_ovf = Signal(name="q_rp_ovf")  # the first group emitted more than RP band-tiles
            rp_raddr = Signal(range(RP + 1), name="q_rp_raddr")
            rports, relab = macro("1r1w", RP, acc.desc_bits, None, instance=self.pe_kind == "instance")
            m.submodules.replay_m = relab
            rp_we = Signal(name="q_rp_we")
            m.d.comb += rp_we.eq(adv & emit & ~cur["rp"] & (cur["c0"] == 0) & (rp_n < RP))
            m.d.comb += [rports.waddr.eq(rp_n), rports.wdata.eq(word), rports.we.eq(rp_we), rports.wmask.eq(1),
                         rports.raddr.eq(rp_raddr), rports.re.eq(running)]
            with m.If(adv & emit & ~cur["rp"] & (cur["c0"] == 0)):
                with m.If(rp_n < RP):
                    m.d.sync += rp_n.eq(rp_n + 1)
                with m.Else():
                    m.d.sync += rp_ovf.eq(1)
            fwd = Signal(name="q_rp_fwd")  # the word read was written in the read's cycle: forward it
            fwd_w = Signal(unsigned(acc.desc_bits), name="q_rp_fwd_word")
            m.d.sync += [fwd.eq(rp_we & (rp_n == rp_raddr)), fwd_w.eq(word)]
            word = Mux(cur["rp"], Mux(fwd, fwd_w, rports.rdata), word)
        reps_cm = Signal(name="q_cm")
        m.d.comb += reps_cm.eq(self.c_cm)
        with m.If(pop):
            with m.If(o_cb == o_cb_last):
                m.d.sync += o_valid.eq(0)
            with m.Else():
                m.d.sync += o_cb.eq(o_cb + 1)
        # the word the output register loads at this edge (docs/decisions.md D137: the issue gate reads its segment
        # a cycle ahead, so an emission is fresh when shown); every field but cb (zero there)
        m.d.comb += [self.load_valid.eq(adv & emit), self.load_desc.eq(word)]
        with m.If(adv & emit):
            m.d.sync += [o_valid.eq(1), o_rest.eq(word), o_cb.eq(Mux(reps_cm, cur["c0"] + cur["rep"], cur["c0"])),
                         o_cb_last.eq(Mux(reps_cm, cur["c0"] + cur["rep"], cur["c0"] + k - 1))]

        # queue updates
        for g in range(G):
            on_g = gsel == g
            for kd in (0, 1):
                with m.If(adv & is_scan & on_g & (cur["kind"] == kd)):
                    m.d.sync += qn[g][kd].eq(Mux(fills, 0 if RCH else total - brows, total))
                    for i in range(brows):
                        keep = Mux(i < q_n, qt[g][kd][i], lane_tok[i])
                        new = keep if RCH else Mux(fills, lane_tok[brows + i] if brows + i < brows + V else 0, keep)
                        m.d.sync += qt[g][kd][i].eq(new)
            with m.If(adv & is_flush & on_g & (cur["second"] | ~big)):
                m.d.sync += [qn[g][0].eq(0), qn[g][1].eq(0)]

        # ---- successor of the current step ----
        m.d.comb += [nxt[n].eq(cur[n]) for n in cur]
        last_g = cur["g"] + 1 >= self.c_groups
        adv_scan = adv
        if RP:
            adv_scan = adv & ~cur["rp"]
            with m.If(adv & cur["rp"]):  # a replay step: the next entry, or the next group's first
                with m.If(cur["ri"] + 1 < rp_n):
                    m.d.comb += nxt["ri"].eq(cur["ri"] + 1)
                with m.Elif(cur["c0"] + k < self.c_ncb):
                    m.d.comb += [nxt["ri"].eq(0), nxt["c0"].eq(cur["c0"] + k)]
                with m.Else():
                    m.d.comb += nxt["fin"].eq(1)
        with m.If(adv_scan):
            with m.If(~cur["flush"]):
                with m.If((p_step if RCH else cur["p"] + V) < p1):
                    m.d.comb += nxt["p"].eq(p_step if RCH else cur["p"] + V)
                with m.Elif(~cur["kind"]):
                    m.d.comb += [nxt["kind"].eq(1), nxt["p"].eq(cur["p0"])]
                with m.Elif(~last_g):
                    m.d.comb += [nxt["g"].eq(cur["g"] + 1), nxt["kind"].eq(0), nxt["p"].eq(cur["p0"])]
                with m.Elif(cur["f"] + 1 < fc1):
                    m.d.comb += [nxt["f"].eq(cur["f"] + 1), nxt["g"].eq(0), nxt["kind"].eq(0), nxt["p"].eq(cur["p0"])]
                with m.Else():
                    m.d.comb += [nxt["flush"].eq(1), nxt["g"].eq(0), nxt["second"].eq(0)]
            with m.Elif(~cur["second"] & big):
                m.d.comb += nxt["second"].eq(1)
            with m.Elif(~last_g):
                m.d.comb += [nxt["g"].eq(cur["g"] + 1), nxt["second"].eq(0)]
            with m.Else():  # the chunk's end
                m.d.comb += [nxt["flush"].eq(0), nxt["second"].eq(0), nxt["g"].eq(0), nxt["kind"].eq(0)]
                with m.If(self.c_cm & (cur["rep"] + 1 < k)):
                    m.d.comb += [nxt["rep"].eq(cur["rep"] + 1), nxt["f"].eq(cur["fc0"]), nxt["p"].eq(cur["p0"])]
                with m.Elif(fc1 < self.c_frames):
                    m.d.comb += [nxt["rep"].eq(0), nxt["fc0"].eq(fc1), nxt["f"].eq(fc1), nxt["p"].eq(cur["p0"])]
                with m.Elif(p1 < self.c_hw):
                    m.d.comb += [nxt["rep"].eq(0), nxt["fc0"].eq(0), nxt["f"].eq(0), nxt["p0"].eq(p1),
                                 nxt["p"].eq(p1)]
                with m.Elif(cur["c0"] + k < self.c_ncb):
                    m.d.comb += [nxt["rep"].eq(0), nxt["fc0"].eq(0), nxt["f"].eq(0), nxt["p0"].eq(0),
                                 nxt["p"].eq(0), nxt["c0"].eq(cur["c0"] + k)]
                    if RP:  # the first group scanned: read its band-tiles back (none: the op ends)
                        wrote = Mux(rp_we, rp_n + 1, rp_n)
                        ovf = rp_ovf | (emit & (cur["c0"] == 0) & (rp_n == RP))
                        with m.If(~self.c_cm & ~ovf):
                            with m.If(wrote == 0):
                                m.d.comb += nxt["fin"].eq(1)
                            with m.Else():
                                m.d.comb += [nxt["rp"].eq(1), nxt["ri"].eq(0)]
                with m.Else():
                    m.d.comb += nxt["fin"].eq(1)
        m.d.comb += raddr.eq(Mux(begin, 0, nxt["f"] * self.c_hw + nxt["p"]))
        if RP:
            m.d.comb += rp_raddr.eq(nxt["ri"])
        m.d.sync += [cur[n].eq(nxt[n]) for n in cur]

        # ---- run state ----
        m.d.comb += self.done.eq(running & cur["fin"] & ~o_valid)
        with m.If(self.done):
            m.d.sync += running.eq(0)
        with m.If(begin):
            m.d.sync += [running.eq(1), o_valid.eq(0)] + [cur[n].eq(0) for n in cur]
            m.d.sync += [qn[g][kd].eq(0) for g in range(G) for kd in (0, 1)]
            if RP:
                m.d.sync += [rp_n.eq(0), rp_ovf.eq(0)]
        return m


def _offsets(fields):
    out, pos = [], 0
    for _, b in fields:
        out.append(pos)
        pos += b
    return out
