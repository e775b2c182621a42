"""The compact organisation's op-level controller with its combine stage (docs/decisions.md D97, D104):
`CompactCore`, Verilog module ``kaleido_ccore``, instantiates ``kaleido_caccel`` (`hw.compact_accel.CompactAccel`, with
its band-tile queues) and the combine unit with W ways (`hw.combine.Combine`, ``kaleido_combine_w<W>``; W =
`default_ways`, d) and generates the combine unit's staged writes and commands in RTL from the tagged drained rows
and the op's decisions, so that it hands out final ``Y`` rows (token, column block, C values). The compact
counterpart of `hw.delta_core` (D95).

What the host gives it:

- the write port, passed on to ``kaleido_caccel`` (``wr_sel`` 0 X bytes, 1 weights, 3 decisions); ``wr_sel`` 3 also
  writes the core's 1 + W **decision copies** (1r1w, one word of G 2-bit codes per token: the walk reads a token
  and, per way, its group's successor in one cycle);
- ``kaleido_caccel``'s ``c_*`` ports and ``x_unsigned``, passed on;
- the op ports (`core_ports`): ``o_w`` the grid's width, ``o_axes`` per group its axis (2 bits each: 0 ``f``,
  1 ``h``, 2 ``w``).

Group g is on way ``g mod W``, in command ``k = g // W`` of its token. After ``start`` two stages run at once, the
walk one column block behind the drain (D104):

- **Stage.** Each descriptor ``kaleido_caccel``'s gather takes is kept in a **tile table** (a 1r1w copy per drain
  port, addressed by band-tile number). A row drained at cycle c on port p reads its entry at c; at c + 1 its word
  (``out``, ``out_m`` per column, as the combine stages them) is written into the staging macro of port p and the
  row's way at that pair's next address, and that address into the **where table** of (port p, way, column block)
  (1r1w, one entry of address + valid bit per (token, command)); the token is the entry's token of ``out_row``,
  the group the one whose X word offset (``c_layout``) the descriptor names. Banked per column block (``max_cb``
  banks), the walk's clears of one block never meet the stage's writes of a later one. Per column block three
  counts: the rows its descriptors list (``nrows`` of each descriptor the gather takes), the rows staged, and
  whether a later block's descriptor has been taken. A block is *whole* when the counts are equal and a later
  block's descriptor (or ``kaleido_caccel``'s ``done``) has been seen.
- **Walk.** One command a cycle, per column block, token (raster), command k (`tests.rtl.compact_bench.
  combine_program`'s order with W groups a command), block c while block c is whole
  (`sim.timing.compact_accel.core_cycles`): compact issues column blocks outer, so block c is walked while block
  c + 1 accumulates. At cycle k the decision copies are read at the token and, per way, at its group's successor
  along the group's axis, the where tables at (token, k) of the block, each way's **head table** (one state
  address per (position, command), 1r1w) at the neighbour's; at the next cycle the command issues, per way w
  (group k W + w, valid while below the op's groups): ``c_dec``, the port whose where entry is valid and its
  address (that entry is cleared, so the tables are empty between ops), ``c_waddr`` = position x ``partial_regs /
  W`` + k, ``c_raddr`` the same for ``f`` groups and, for ``w``/``h`` groups, the neighbour's head (its chain's last
  written state; a REUSE's head is its ``c_raddr``, anything else its own word; forwarded when written the cycle
  it is read), ``c_keep`` when the successor exists and is not COMPUTE
  (`sim.cost.compact_actions.successor_reads`); ``c_first`` on command 0, ``c_last`` on the token's last. A
  token's ``Y`` row leaves 2 cycles after its last command on ``y_valid`` with ``y_token`` and ``y_cb``; ``done``
  pulses the cycle after the last.

Sizes: the staging macros and the state macros are the combine's (`hw.combine.combine_sizes`: the state holds one
pool, ``R x partial_regs`` words over the W ways, so an op's positions H W must fit R, D65's limit); the where
tables ``max_cb`` column blocks (default `MAX_CB`) x ``max_tokens`` x ``partial_regs / W`` entries per port and
way. `core_ports` refuses an op beyond them.

**Similarity front** (``front=True``, Verilog module ``kaleido_ccore_front``, docs/decisions.md D103): `hw.delta_front.
DeltaFront` (``kaleido_cfront``) between the host and ``kaleido_caccel``, as in `hw.delta_core` (`hw.delta_front.
front_through`): the host writes raw X (``wr_sel`` 0) and the weights, sets ``c_b1``, ``c_b2`` (the SAD bounds,
`hw.delta_front.front_ports`) with the op ports, and pulses ``start``; the front (axes ``o_axes``) writes the X bytes
and the decision words into ``kaleido_caccel`` and the decision copies, and its ``done`` starts the controller: every
cycle above moves by `sim.timing.delta_front.front_cycles`.

Not in this slice (D97, D104): a walk overlapping the drain finer than column blocks (chunks, pools), more than
one token a command (the model's 4 d command rate), streaming beyond one pool of positions.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.combine import Combine, combine_module_name, combine_sizes
from hw.compact_accel import CACCEL_MODULE_NAME, CompactAccel
from hw.compact_array import TILE_BITS
from hw.config import AcceleratorConfig
from hw.core import add_child
from hw.delta_core import host_through
from hw.pe import COMPUTE, REUSE
from hw.sram import index_bits as _bits
from hw.sram import macro

#: Verilog module name of `CompactCore`.
CCORE_MODULE_NAME = "kaleido_ccore"
#: Verilog module name of `CompactCore` built with its similarity front (``front=True``, docs/decisions.md D103).
CCORE_FRONT_MODULE_NAME = "kaleido_ccore_front"
#: Axis codes of ``o_axes``.
AXIS_CODE = {"f": 0, "h": 1, "w": 2}
#: Column blocks per op the where tables hold by default: chosen, not derived (the tests' ops have up to 3; each
#: doubling doubles the tables; docs/decisions.md D97).
MAX_CB = 4


def default_ways(cfg: AcceleratorConfig) -> int:
    """The combine's ways by default: d (``drain_rows_per_cycle``, a command slot per drained row a cycle), or
    the largest power of two below it that divides ``partial_regs`` (docs/decisions.md D104)."""
    w = 1
    while 2 * w <= cfg.drain_rows_per_cycle and cfg.partial_regs % (2 * w) == 0:
        w *= 2
    return w


class CompactCore(wiring.Component):
    """``kaleido_caccel`` + staged writes and command generation + ``kaleido_combine`` (module docstring).

    Args:
        cfg: a compact-organisation config. max_cb: column blocks per op (default `MAX_CB`, at most the
            controller's). pe: ``"inline"`` (Amaranth simulation) or ``"instance"`` (submodules by name).
        ways: the combine's ways W (default `default_ways`; docs/decisions.md D104).
        front: the similarity front (module docstring, "Similarity front").
        **accel: `CompactAccel`'s keyword arguments (sizes, entries, lanes); the queues are always built.

    Raises:
        ValueError: ``ways`` not a power of two dividing ``partial_regs``; as `CompactAccel`,
            `hw.combine.combine_sizes` or `hw.delta_front.DeltaFront`.
    """

    def __init__(self, cfg: AcceleratorConfig, max_cb: int | None = None, pe: str = "inline",
                 ways: int | None = None, front: bool = False, **accel):
        self.cfg, self.pe_kind, self.front = cfg, pe, front
        self.accel = discard(CompactAccel(cfg, pe=pe, queues=True, **accel))
        #: The combine's ways W (docs/decisions.md D104): a command takes W of a token's groups.
        self.ways = default_ways(cfg) if ways is None else ways
        if self.ways & (self.ways - 1) or cfg.partial_regs % self.ways:
            discard(self.accel)
            raise ValueError(f"{self.ways} combine ways: a power of two dividing partial_regs = {cfg.partial_regs}")
        #: With ``front``: the similarity pass (`hw.delta_front.DeltaFront`, ``kaleido_cfront``), else None.
        self.front_unit, fports, abits = None, {}, self.accel.abits
        if front:
            from hw.delta_front import DeltaFront

            self.front_unit = fu = discard(DeltaFront(self.accel, pe=pe))
            fports = {n: fu.signature.members[n] for n in ("c_b1", "c_b2")}
            abits = max(abits, fu.xabits)
        self.combine = discard(Combine(cfg, instance=pe == "instance", ways=self.ways))
        acc = self.accel
        self.max_cb = min(max_cb or MAX_CB, acc.max_nb)
        self.cnames = [n for n in acc.signature.members if n.startswith("c_")]
        G, C = cfg.partial_regs, cfg.array_cols  # noqa: N806
        self.tb, self.cbb = acc.tb, _bits(acc.max_nb)
        sz = combine_sizes(cfg, self.ways)
        self.sa, self.ra = _bits(sz["stage_depth"]), _bits(sz["state_depth"])
        self.lg, self.lcb = _bits(G), _bits(self.max_cb)
        self.gw = G // self.ways  # groups per way
        self.where_depth = (1 << self.tb) * (1 << _bits(self.gw))  # a bank per (port, way, block): (token, command)
        self.head_depth = sz["state_depth"]  # per way: one pool's positions x its groups
        super().__init__({
            "wr_valid": In(1), "wr_ready": Out(1), "wr_sel": In(2), "wr_addr": In(unsigned(abits)),
            "wr_data": In(unsigned(max(acc.dbits, 2 * G))), **{n: acc.signature.members[n] for n in self.cnames},
            **fports, "x_unsigned": In(1), "o_w": In(range(acc.max_tokens + 1)), "o_axes": In(unsigned(2 * G)),
            "start": In(1), "busy": Out(1), "done": Out(1),
            "y_valid": Out(1), "y_token": Out(unsigned(self.tb)), "y_cb": Out(unsigned(self.cbb)),
            "y_data": Out(unsigned(C * cfg.acc_bits)),
        })

    def macros(self) -> list[tuple[str, int, int, None]]:
        """The distinct SRAM macros ``(kind, depth, width, lane)`` it instantiates itself: tile table, decision
        copies, where tables, head table (``kaleido_caccel``'s and ``kaleido_combine``'s are theirs)."""
        acc, out = self.accel, []
        for mc in (("1r1w", acc.max_tiles, acc.desc_bits, None), ("1r1w", acc.max_tokens, 2 * self.cfg.partial_regs, None),
                   ("1r1w", self.where_depth, self.sa + 1, None), ("1r1w", self.head_depth, self.ra, None)):
            if mc not in out:
                out.append(mc)
        return out

    def elaborate(self, platform):  # noqa: C901
        from hw.delta_queue import layout_bits, layout_fields

        m = Module()
        cfg, acc = self.cfg, self.accel
        C, d, G = cfg.array_cols, cfg.drain_rows_per_cycle, cfg.partial_regs  # noqa: N806
        ab, tb, brows, sa, ra = cfg.acc_bits, self.tb, acc.brows, self.sa, self.ra
        rb, lg, lcb = _bits(brows), self.lg, self.lcb
        word = 2 * C * ab
        inst = self.pe_kind == "instance"
        ap = add_child(m, "accel", acc, CACCEL_MODULE_NAME, inst)
        cmb = add_child(m, "comb", self.combine, combine_module_name(self.ways), inst)

        # --- host writes, start, phases
        dec_we, dec_addr, dec_data = self.wr_valid & (self.wr_sel == 3), self.wr_addr, self.wr_data[:2 * G]
        # phase: 0 idle, 1 running (stage and walk), 3 the similarity front (front=True)
        if self.front:
            from hw.delta_front import front_through

            phase, fr, dec_we, dec_addr, dec_data = front_through(m, self, ap, inst, self.o_axes,
                                                                  ap.x_unsigned.eq(self.x_unsigned))
        else:
            phase = host_through(m, self, ap, self.wr_valid, ap.x_unsigned.eq(self.x_unsigned))

        # --- descriptor fields and the op's group offsets
        pos, off = {}, 0
        for name, bits in acc.fields:
            pos[name] = (off, bits)
            off += bits
        lb, xo = layout_bits(acc), 0
        for name, bits in layout_fields(acc):
            if name == "xoff":
                break
            xo += bits
        xb = dict(acc.fields)["xoff"]
        gxoff = [self.c_layout[g * lb + xo:g * lb + xo + xb] for g in range(G)]

        # --- tile table: the descriptor per band-tile number, one copy per drain port
        tables = []
        for p in range(d):
            ports, mac = macro("1r1w", acc.max_tiles, acc.desc_bits, instance=inst)
            m.submodules[f"tiles{p}"] = mac
            m.d.comb += [ports.we.eq(ap.desc_valid), ports.waddr.eq(ap.desc_tile[:len(ports.waddr)]),
                         ports.wmask.eq(1), ports.wdata.eq(ap.desc), ports.re.eq(ap.out_valid[p]),
                         ports.raddr.eq(ap.out_tile[p * TILE_BITS:p * TILE_BITS + len(ports.raddr)])]
            tables.append(ports)

        # --- stage: rows into the combine's staging macros (one per port and way: the row's group mod W), their
        # addresses into the where tables (a bank per port, way and column block, one entry per (token, command))
        Wy, GW = self.ways, self.gw  # noqa: N806
        lw, lk = (Wy - 1).bit_length(), _bits(GW)
        r_v = Signal(d, name="row_v")
        r_row = Signal(d * rb, name="row_row")
        r_data = Signal(d * word, name="row_data")
        m.d.sync += [r_v.eq(ap.out_valid), r_row.eq(ap.out_row), r_data.eq(ap.out_data)]
        ncb = self.max_cb
        where = []  # where[p][w][c]
        for p in range(d):
            where.append([])
            for w in range(Wy):
                banks = []
                for c in range(ncb):
                    ports, mac = macro("1r1w", self.where_depth, sa + 1, instance=inst)
                    m.submodules[f"where{p}_{w}_{c}"] = mac
                    m.d.comb += ports.wmask.eq(1)
                    banks.append(ports)
                where[p].append(banks)
        nxt = [[Signal(sa + 1, name=f"stage_next{p}_{w}") for w in range(Wy)] for p in range(d)]
        st_we, st_addr, st_way, row_cb = [], [], [], []
        for p in range(d):
            e = tables[p].rdata
            fld = {n: e[o:o + b] for n, (o, b) in pos.items()}
            tok = Signal(tb, name=f"row_token{p}")
            m.d.comb += tok.eq(fld["tokens"].word_select(r_row[p * rb:(p + 1) * rb] if brows > 1 else Const(0, 1), tb))
            grp = Signal(lg, name=f"row_group{p}")
            expr = Const(0, lg)
            for g in range(G):
                expr = Mux((fld["xoff"] == gxoff[g]) & (g < self.c_groups), g, expr)
            m.d.comb += grp.eq(expr)
            rway = grp[:lw] if lw else Const(0, 1)
            rk = grp[lw:lw + lk] if GW > 1 else Const(0, 1)
            rcb = Signal(range(acc.max_nb), name=f"row_cb{p}")
            m.d.comb += rcb.eq(fld["cb"])
            row_cb.append(rcb)
            addr = Signal(sa, name=f"row_saddr{p}")
            a_e = nxt[p][0][:sa]
            for w in range(1, Wy):
                a_e = Mux(rway == w, nxt[p][w][:sa], a_e)
            m.d.comb += addr.eq(a_e)
            for w in range(Wy):
                with m.If(r_v[p] & (rway == w)):
                    m.d.sync += nxt[p][w].eq(nxt[p][w] + 1)
                for c in range(ncb):  # the walk clears bank (w, c) only once block c is whole: no clash
                    with m.If(r_v[p] & (rway == w) & (rcb == c)):
                        m.d.comb += [where[p][w][c].we.eq(1), where[p][w][c].waddr.eq(Cat(rk, tok)),
                                     where[p][w][c].wdata.eq(Cat(addr, 1))]
            st_we.append(r_v[p])
            st_addr.append(addr)
            st_way.append(rway)
        m.d.comb += [cmb.st_we.eq(Cat(*st_we)), cmb.st_waddr.eq(Cat(*st_addr)), cmb.st_wdata.eq(r_data)]
        if Wy > 1:
            m.d.comb += cmb.st_way.eq(Cat(*st_way))

        # --- per column block: rows its descriptors list, rows staged, a later block's descriptor taken
        cnt_w = _bits(acc.max_tokens * G + 1)
        exp = [Signal(cnt_w, name=f"cb_rows{c}") for c in range(ncb)]
        got = [Signal(cnt_w, name=f"cb_staged{c}") for c in range(ncb)]
        past = [Signal(name=f"cb_past{c}") for c in range(ncb)]
        dfl = {n: ap.desc[o:o + b] for n, (o, b) in pos.items()}
        fin = Signal(name="accel_done_seen")
        start_now = (phase == 0) & self.start
        # the controller's start: the host's, or with the front its done pulse (`hw.delta_front.front_through`)
        ctrl_start = (phase == 3) & fr.done if self.front else start_now
        for c in range(ncb):
            with m.If(ctrl_start):
                m.d.sync += [exp[c].eq(0), got[c].eq(0), past[c].eq(0)]
            with m.Else():
                with m.If(ap.desc_valid & (dfl["cb"] == c)):
                    m.d.sync += exp[c].eq(exp[c] + dfl["nrows"])
                if c < (1 << len(dfl["cb"])) - 1:  # a later block exists in the field's range
                    with m.If(ap.desc_valid & (dfl["cb"] > c)):
                        m.d.sync += past[c].eq(1)
                m.d.sync += got[c].eq(got[c] + sum((r_v[p] & (row_cb[p] == c)).as_unsigned() for p in range(d)))
        whole = Signal(ncb, name="cb_whole")  # every row of column block c staged: its walk may run
        m.d.comb += whole.eq(Cat(*[(past[c] | fin) & (got[c] == exp[c]) for c in range(ncb)]))

        # --- decision copies: the token's, and per way its group's successor's along the group's axis
        decs = []
        for i in range(1 + Wy):
            ports, mac = macro("1r1w", acc.max_tokens, 2 * G, instance=inst)
            m.submodules[f"dec{i}"] = mac
            m.d.comb += [ports.we.eq(dec_we), ports.waddr.eq(dec_addr), ports.wmask.eq(1), ports.wdata.eq(dec_data)]
            decs.append(ports)

        # --- walk: per column block, token, command k (groups k W .. k W + W - 1 on the W ways)
        tk = range(2 * acc.max_tokens + 1)
        hw_ = Signal(range(acc.max_tokens + 1), name="op_hw")
        m.d.comb += hw_.eq(self.c_hw)
        active, walking = Signal(name="walk_active"), Signal(name="walking")
        cb, t, f, p_, x, k = (Signal(range(acc.max_nb + 1), name="w_cb"), Signal(tk, name="w_t"),
                              Signal(tk, name="w_f"), Signal(tk, name="w_p"), Signal(tk, name="w_x"),
                              Signal(range(GW + 1), name="w_k"))
        last_k = ((k + 1) * Wy) >= self.c_groups
        last_x = x == self.o_w - 1
        last_p = p_ == hw_ - 1
        last_f = f == self.c_frames - 1
        last_cb = cb == self.c_ncb - 1
        cb_whole = Const(0, 1)
        for c in range(ncb):
            cb_whole = Mux(cb == c, whole[c], cb_whole)
        m.d.comb += walking.eq(active & cb_whole)
        own = Signal(ra, name="w_own")  # the state word of way w's group k W + w at this position: p GW + k
        m.d.comb += own.eq(p_ * GW + k)
        kq = k[:lk] if GW > 1 else Const(0, 1)
        m.d.comb += [decs[0].re.eq(walking), decs[0].raddr.eq(t)]
        for p in range(d):
            for w in range(Wy):
                for c in range(ncb):
                    m.d.comb += [where[p][w][c].re.eq(walking & (cb == c)), where[p][w][c].raddr.eq(Cat(kq, t[:tb]))]
        q = {n: Signal(len(sig), name=f"q_{n}") for n, sig in (("v", walking), ("t", t), ("cb", cb), ("own", own),
                                                                ("k", k), ("waddr", Cat(kq, t[:tb])),
                                                                ("first", walking), ("last", walking),
                                                                ("end", walking))}
        m.d.sync += [q["v"].eq(walking), q["t"].eq(t), q["cb"].eq(cb), q["own"].eq(own), q["k"].eq(k),
                     q["waddr"].eq(Cat(kq, t[:tb])), q["first"].eq(k == 0), q["last"].eq(last_k),
                     q["end"].eq(walking & last_k & last_p & last_f & last_cb)]
        qcb = q["cb"][:lcb]
        c_valid, c_dec, c_port, c_saddr, c_raddr, c_keep = [], [], [], [], [], []
        pb = len(cmb.c_port) // Wy
        for w in range(Wy):
            gw_ = Signal(range(G + Wy), name=f"w_group{w}")  # way w's group in this command
            m.d.comb += gw_.eq(k * Wy + w)
            axis = Signal(2, name=f"w_axis{w}")
            m.d.comb += axis.eq(self.o_axes.word_select(gw_[:lg], 2))
            succ_ex, succ_t, nb_ex = (Signal(name=f"w_succ_exists{w}"), Signal(tk, name=f"w_succ_t{w}"),
                                      Signal(name=f"w_nb_exists{w}"))
            m.d.comb += [succ_ex.eq(Mux(axis == 2, ~last_x, Mux(axis == 1, p_ + self.o_w < hw_, ~last_f))),
                         succ_t.eq(t + Mux(axis == 2, 1, Mux(axis == 1, self.o_w, hw_))),
                         nb_ex.eq(Mux(axis == 2, x != 0, Mux(axis == 1, p_ >= self.o_w, 0)))]
            nb_own = Signal(ra, name=f"w_nb_own{w}")
            m.d.comb += nb_own.eq(own - Mux(axis == 2, GW, self.o_w * GW))
            m.d.comb += [decs[1 + w].re.eq(walking & succ_ex), decs[1 + w].raddr.eq(succ_t)]
            head, hmac = macro("1r1w", self.head_depth, ra, instance=inst)
            m.submodules[f"head{w}"] = hmac
            m.d.comb += [head.re.eq(walking & nb_ex), head.raddr.eq(nb_own), head.wmask.eq(1)]
            q_succ, q_nb, q_g = Signal(name=f"q_succ{w}"), Signal(name=f"q_nb{w}"), Signal(lg, name=f"q_group{w}")
            m.d.sync += [q_succ.eq(succ_ex), q_nb.eq(nb_ex & (axis != 0)), q_g.eq(gw_[:lg])]
            vg = Signal(name=f"c_valid_w{w}")
            m.d.comb += vg.eq(q["v"] & (q["k"] * Wy + w < self.c_groups))
            code, scode = Signal(2, name=f"c_dec_w{w}"), Signal(2, name=f"c_succ_dec_w{w}")
            m.d.comb += [code.eq(decs[0].rdata.word_select(q_g, 2)), scode.eq(decs[1 + w].rdata.word_select(q_g, 2))]
            h_fwd, h_last = Signal(name=f"head_fwd{w}"), Signal(ra, name=f"head_last{w}")
            raddr = Signal(ra, name=f"c_raddr_w{w}")
            m.d.comb += raddr.eq(Mux(q_nb, Mux(h_fwd, h_last, head.rdata), q["own"]))
            h_wdata = Signal(ra, name=f"head_wdata{w}")
            m.d.comb += h_wdata.eq(Mux(code == REUSE, raddr, q["own"]))
            m.d.comb += [head.we.eq(vg), head.waddr.eq(q["own"]), head.wdata.eq(h_wdata)]
            m.d.sync += [h_fwd.eq(vg & walking & nb_ex & (q["own"] == nb_own)), h_last.eq(h_wdata)]
            wrd = []
            for p in range(d):
                e = where[p][w][0].rdata
                for c in range(1, ncb):
                    e = Mux(qcb == c, where[p][w][c].rdata, e)
                wrd.append(e)
            port = Const(0, pb)
            saddr = wrd[0][:sa]
            for p in range(1, d):
                port = Mux(wrd[p][sa], p, port)
                saddr = Mux(wrd[p][sa], wrd[p][:sa], saddr)
            for p in range(d):  # the walk clears every entry it reads (its column block's rows are all staged)
                for c in range(ncb):
                    with m.If(q["v"] & (qcb == c)):
                        m.d.comb += [where[p][w][c].we.eq(1), where[p][w][c].waddr.eq(q["waddr"]),
                                     where[p][w][c].wdata.eq(0)]
            c_valid.append(vg)
            c_dec.append(code)
            c_port.append(port[:pb])
            c_saddr.append(saddr)
            c_raddr.append(raddr)
            c_keep.append(q_succ & (scode != COMPUTE))
        m.d.comb += [cmb.c_valid.eq(Cat(*c_valid)), cmb.c_dec.eq(Cat(*c_dec)), cmb.c_port.eq(Cat(*c_port)),
                     cmb.c_saddr.eq(Cat(*c_saddr)), cmb.c_raddr.eq(Cat(*c_raddr)),
                     cmb.c_waddr.eq(Cat(*[q["own"][:ra]] * Wy)), cmb.c_keep.eq(Cat(*c_keep)),
                     cmb.c_first.eq(q["first"]), cmb.c_last.eq(q["last"])]
        # tags and done: the combine's row leaves 2 cycles after its command
        t1, t2 = Signal(tb, name="tag_t1"), Signal(tb, name="tag_t2")
        c1, c2 = Signal(self.cbb, name="tag_cb1"), Signal(self.cbb, name="tag_cb2")
        e1, e2 = Signal(name="tag_end1"), Signal(name="tag_end2")
        m.d.sync += [t1.eq(q["t"]), c1.eq(q["cb"]), t2.eq(t1), c2.eq(c1), e1.eq(q["v"] & q["end"]), e2.eq(e1)]
        m.d.comb += [self.y_valid.eq(cmb.y_valid), self.y_data.eq(cmb.y_data), self.y_token.eq(t2),
                     self.y_cb.eq(c2)]
        m.d.sync += self.done.eq(e2)

        with m.If(ap.done):
            m.d.sync += fin.eq(1)
        if self.front:  # the similarity front first: the controller starts with its done pulse
            with m.If(start_now):
                m.d.sync += phase.eq(3)
        with m.If(ctrl_start):
            m.d.sync += [phase.eq(1), fin.eq(0), active.eq(1), cb.eq(0), t.eq(0), f.eq(0), p_.eq(0), x.eq(0), k.eq(0)]
            m.d.sync += [n.eq(0) for row in nxt for n in row]
        with m.If(walking):
            with m.If(~last_k):
                m.d.sync += k.eq(k + 1)
            with m.Else():
                m.d.sync += [k.eq(0), t.eq(t + 1), x.eq(Mux(last_x, 0, x + 1)), p_.eq(Mux(last_p, 0, p_ + 1))]
                with m.If(last_p):
                    m.d.sync += f.eq(f + 1)
                    with m.If(last_f):
                        m.d.sync += [f.eq(0), t.eq(0), cb.eq(cb + 1)]
                        with m.If(last_cb):
                            m.d.sync += active.eq(0)
        with m.If((phase == 1) & e2):
            m.d.sync += phase.eq(0)
        return m


def core_ports(core: CompactCore, case_grid, groups, N: int, rows) -> dict[str, int]:  # noqa: N803
    """The op's ``o_*`` port values (module docstring) for grid ``(F, H, W)``, ``groups`` ``[(k0, k1, axis)]``, N
    output channels, after checking what the op needs: ``rows`` (int ``[G]``) its band-tile rows per group over all
    column blocks (each a staging word; way w's macro of a port holds ``stage_depth``, so the rows of way w's groups,
    g mod W = w, are checked against it).

    Raises:
        ValueError: H W above R (the state macro holds one pool), more column blocks than ``max_cb``, more groups
            than ``partial_regs``, or more rows than a way's staging macro holds."""
    F, H, W = case_grid  # noqa: N806
    cfg = core.cfg
    n_cb = -(-N // cfg.array_cols)
    stage = combine_sizes(cfg, core.ways)["stage_depth"]
    per_way = max(sum(int(r) for g, r in enumerate(rows) if g % core.ways == w) for w in range(core.ways))
    if H * W > cfg.array_rows or n_cb > core.max_cb or len(groups) > cfg.partial_regs or per_way > stage:
        raise ValueError(f"grid {case_grid}, {n_cb} column blocks, {len(groups)} groups, {per_way} rows on a way: "
                         f"kaleido_ccore holds H W <= {cfg.array_rows}, {core.max_cb} column blocks, "
                         f"{cfg.partial_regs} groups, {stage} staged rows a way")
    return {"o_w": W, "o_axes": sum(AXIS_CODE[ax] << 2 * g for g, (_k0, _k1, ax) in enumerate(groups))}
