"""The compact organisation's op-level controller with its combine stage (docs/decisions.md D97): `CompactCore`,
Verilog module ``kaleido_ccore``, instantiates ``kaleido_caccel`` (`hw.compact_accel.CompactAccel`, with its
band-tile queues) and ``kaleido_combine`` (`hw.combine.Combine`) and generates the combine unit's staged writes and
commands in RTL from the tagged drained rows and the op's decisions, so that it hands out final ``Y`` rows (token,
column block, C values). The compact counterpart of `hw.delta_core` (D95).

What the host gives it:

- the write port, passed on to ``kaleido_caccel`` (``wr_sel`` 0 X bytes, 1 weights, 3 decisions); ``wr_sel`` 3 also
  writes the core's two **decision copies** (1r1w, one word of G 2-bit codes per token: the walk reads a token and
  its successor in one cycle);
- ``kaleido_caccel``'s ``c_*`` ports and ``x_unsigned``, passed on;
- the op ports (`core_ports`): ``o_w`` the grid's width, ``o_axes`` per group its axis (2 bits each: 0 ``f``,
  1 ``h``, 2 ``w``).

After ``start`` two phases, one after the other:

- **Stage.** Each descriptor ``kaleido_caccel``'s gather takes is kept in a **tile table** (a 1r1w copy per drain
  port, addressed by band-tile number). A row drained at cycle c on port p reads its entry at c; at c + 1 its word
  (``out``, ``out_m`` per column, as ``kaleido_combine`` stages them) is written into port p's staging macro at the
  port's next address, and that address into port p's **where table** (1r1w, one entry of address + valid bit per
  (column block, token, group)); the token is the entry's token of ``out_row``, the group the one whose X word
  offset (``c_layout``) the descriptor names.
- **Walk.** From the second cycle after ``kaleido_caccel``'s ``done`` (`sim.timing.compact_accel.core_cycles`), one
  command a cycle in `tests.rtl.compact_bench.combine_program`'s order: per column block, token (raster), group.
  At cycle k the decision copies are read at the token and at its successor along the group's axis, the where
  tables at (column block, token, group), the **head table** (one state address per (position, group), 1r1w) at
  the neighbour's; at k + 1 the command issues: ``c_dec``, the port whose where entry is valid and its address
  (that entry is cleared, so the tables are empty between ops), ``c_waddr`` = position x ``partial_regs`` + group,
  ``c_raddr`` the same for ``f`` groups and, for ``w``/``h`` groups, the neighbour's head (its chain's last written
  state; a REUSE's head is its ``c_raddr``, anything else its own word; forwarded when written the cycle it is
  read), ``c_keep`` when the successor exists and is not COMPUTE (`sim.cost.compact_actions.successor_reads`).
  A token's ``Y`` row leaves 2 cycles after its last group's command on ``y_valid`` with ``y_token`` and ``y_cb``;
  ``done`` pulses the cycle after the last.

Sizes: the staging macros and the state macro are ``kaleido_combine``'s (`hw.combine.combine_sizes`: the state
holds one pool, ``R x partial_regs`` words, so an op's positions H W must fit R, D65's limit); the where tables
``max_cb`` column blocks (default `MAX_CB`) x ``max_tokens`` x ``partial_regs`` entries. `core_ports` refuses an op
beyond them.

**Similarity front** (``front=True``, Verilog module ``kaleido_ccore_front``, docs/decisions.md D103): `hw.delta_front.
DeltaFront` (``kaleido_cfront``) between the host and ``kaleido_caccel``, as in `hw.delta_core` (`hw.delta_front.
front_through`): the host writes raw X (``wr_sel`` 0) and the weights, sets ``c_b1``, ``c_b2`` (the SAD bounds,
`hw.delta_front.front_ports`) with the op ports, and pulses ``start``; the front (axes ``o_axes``) writes the X bytes
and the decision words into ``kaleido_caccel`` and the decision copies, and its ``done`` starts the controller: every
cycle above moves by `sim.timing.delta_front.front_cycles`.

Not in this slice (D97): the combine unit's second way and the walk overlapping the drain (the op's rows are all
staged first), streaming beyond one pool of positions.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.combine import COMBINE_MODULE_NAME, Combine, combine_sizes
from hw.compact_accel import CACCEL_MODULE_NAME, CompactAccel
from hw.compact_array import TILE_BITS
from hw.config import AcceleratorConfig
from hw.core import add_child
from hw.delta_core import host_through
from hw.pe import COMPUTE, REUSE
from hw.sram import index_bits as _bits
from hw.sram import macro
from hw.sram import pow2ceil as _pow2ceil

#: Verilog module name of `CompactCore`.
CCORE_MODULE_NAME = "kaleido_ccore"
#: Verilog module name of `CompactCore` built with its similarity front (``front=True``, docs/decisions.md D103).
CCORE_FRONT_MODULE_NAME = "kaleido_ccore_front"
#: Axis codes of ``o_axes``.
AXIS_CODE = {"f": 0, "h": 1, "w": 2}
#: Column blocks per op the where tables hold by default: chosen, not derived (the tests' ops have up to 3; each
#: doubling doubles the tables; docs/decisions.md D97).
MAX_CB = 4


class CompactCore(wiring.Component):
    """``kaleido_caccel`` + staged writes and command generation + ``kaleido_combine`` (module docstring).

    Args:
        cfg: a compact-organisation config. max_cb: column blocks per op (default `MAX_CB`, at most the
            controller's). pe: ``"inline"`` (Amaranth simulation) or ``"instance"`` (submodules by name).
        front: the similarity front (module docstring, "Similarity front").
        **accel: `CompactAccel`'s keyword arguments (sizes, entries, lanes); the queues are always built.

    Raises:
        ValueError: as `CompactAccel`, `hw.combine.combine_sizes` or `hw.delta_front.DeltaFront`.
    """

    def __init__(self, cfg: AcceleratorConfig, max_cb: int | None = None, pe: str = "inline", front: bool = False,
                 **accel):
        self.cfg, self.pe_kind, self.front = cfg, pe, front
        self.accel = discard(CompactAccel(cfg, pe=pe, queues=True, **accel))
        #: With ``front``: the similarity pass (`hw.delta_front.DeltaFront`, ``kaleido_cfront``), else None.
        self.front_unit, fports, abits = None, {}, self.accel.abits
        if front:
            from hw.delta_front import DeltaFront

            self.front_unit = fu = discard(DeltaFront(self.accel, pe=pe))
            fports = {n: fu.signature.members[n] for n in ("c_b1", "c_b2")}
            abits = max(abits, fu.xabits)
        self.combine = discard(Combine(cfg, instance=pe == "instance"))
        acc = self.accel
        self.max_cb = min(max_cb or MAX_CB, acc.max_nb)
        self.cnames = [n for n in acc.signature.members if n.startswith("c_")]
        G, C = cfg.partial_regs, cfg.array_cols  # noqa: N806
        self.tb, self.cbb = acc.tb, _bits(acc.max_nb)
        sz = combine_sizes(cfg)
        self.sa, self.ra = _bits(sz["stage_depth"]), _bits(sz["state_depth"])
        self.lg, self.lcb = _bits(G), _bits(self.max_cb)
        self.where_depth = _pow2ceil(self.max_cb) * (1 << self.tb) * (1 << self.lg)
        self.head_depth = sz["state_depth"]
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
        cmb = add_child(m, "comb", self.combine, COMBINE_MODULE_NAME, inst)

        # --- host writes, start, phases
        dec_we, dec_addr, dec_data = self.wr_valid & (self.wr_sel == 3), self.wr_addr, self.wr_data[:2 * G]
        # phase: 0 idle, 1 stage, 2 walk, 3 the similarity front (front=True)
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

        # --- stage: rows into kaleido_combine's staging macros, their addresses into the where tables
        r_v = Signal(d, name="row_v")
        r_row = Signal(d * rb, name="row_row")
        r_data = Signal(d * word, name="row_data")
        m.d.sync += [r_v.eq(ap.out_valid), r_row.eq(ap.out_row), r_data.eq(ap.out_data)]
        where = []
        for p in range(d):
            ports, mac = macro("1r1w", self.where_depth, sa + 1, instance=inst)
            m.submodules[f"where{p}"] = mac
            m.d.comb += ports.wmask.eq(1)
            where.append(ports)
        nxt = [Signal(sa + 1, name=f"stage_next{p}") for p in range(d)]
        st_we, st_addr = [], []
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
            waddr = Cat(grp, tok, fld["cb"][:lcb])
            with m.If(phase == 1):
                m.d.comb += [where[p].we.eq(r_v[p]), where[p].waddr.eq(waddr), where[p].wdata.eq(Cat(nxt[p][:sa], 1))]
            with m.If(r_v[p]):
                m.d.sync += nxt[p].eq(nxt[p] + 1)
            st_we.append(r_v[p])
            st_addr.append(nxt[p][:sa])
        m.d.comb += [cmb.st_we.eq(Cat(*st_we)), cmb.st_waddr.eq(Cat(*st_addr)), cmb.st_wdata.eq(r_data)]

        # --- decision copies
        decs = []
        for i in range(2):
            ports, mac = macro("1r1w", acc.max_tokens, 2 * G, instance=inst)
            m.submodules[f"dec{i}"] = mac
            m.d.comb += [ports.we.eq(dec_we), ports.waddr.eq(dec_addr), ports.wmask.eq(1), ports.wdata.eq(dec_data)]
            decs.append(ports)

        # --- walk: per column block, token, group
        tk = range(2 * acc.max_tokens + 1)
        hw_ = Signal(range(acc.max_tokens + 1), name="op_hw")
        m.d.comb += hw_.eq(self.c_hw)
        walking = Signal(name="walking")
        cb, t, f, p_, x, g = (Signal(range(acc.max_nb + 1), name="w_cb"), Signal(tk, name="w_t"), Signal(tk, name="w_f"),
                              Signal(tk, name="w_p"), Signal(tk, name="w_x"), Signal(range(G + 1), name="w_g"))
        axis = Signal(2, name="w_axis")
        m.d.comb += axis.eq(self.o_axes.word_select(g[:lg] if lg else Const(0, 1), 2))
        last_g = g == self.c_groups - 1
        last_x = x == self.o_w - 1
        last_p = p_ == hw_ - 1
        last_f = f == self.c_frames - 1
        last_cb = cb == self.c_ncb - 1
        succ_ex = Signal(name="w_succ_exists")
        succ_t = Signal(tk, name="w_succ_t")
        nb_ex = Signal(name="w_nb_exists")
        m.d.comb += [succ_ex.eq(Mux(axis == 2, ~last_x, Mux(axis == 1, p_ + self.o_w < hw_, ~last_f))),
                     succ_t.eq(t + Mux(axis == 2, 1, Mux(axis == 1, self.o_w, hw_))),
                     nb_ex.eq(Mux(axis == 2, x != 0, Mux(axis == 1, p_ >= self.o_w, 0)))]
        own = Signal(ra, name="w_own")
        nb_own = Signal(ra, name="w_nb_own")
        m.d.comb += [own.eq(p_ * G + g), nb_own.eq(own - Mux(axis == 2, G, self.o_w * G))]
        w_addr = Cat(g[:lg], t[:tb], cb[:lcb])
        m.d.comb += [decs[0].re.eq(walking), decs[0].raddr.eq(t), decs[1].re.eq(walking & succ_ex),
                     decs[1].raddr.eq(succ_t)]
        for p in range(d):
            m.d.comb += [where[p].re.eq(walking), where[p].raddr.eq(w_addr)]
        head, hmac = macro("1r1w", self.head_depth, ra, instance=inst)
        m.submodules.head = hmac
        m.d.comb += [head.re.eq(walking & nb_ex), head.raddr.eq(nb_own), head.wmask.eq(1)]
        # the issue stage (registered walk fields)
        q = {n: Signal(len(s), name=f"q_{n}") for n, s in (("v", walking), ("g", g), ("t", t), ("cb", cb),
                                                              ("own", own), ("succ", succ_ex), ("nb", nb_ex),
                                                              ("waddr", w_addr), ("first", walking),
                                                              ("last", walking), ("end", walking))}
        m.d.sync += [q["v"].eq(walking), q["g"].eq(g), q["t"].eq(t), q["cb"].eq(cb), q["own"].eq(own),
                     q["succ"].eq(succ_ex), q["nb"].eq(nb_ex & (axis != 0)), q["waddr"].eq(w_addr),
                     q["first"].eq(g == 0), q["last"].eq(last_g),
                     q["end"].eq(walking & last_g & last_p & last_f & last_cb)]
        qg = q["g"][:lg] if lg else Const(0, 1)
        code = Signal(2, name="c_dec_w")
        scode = Signal(2, name="c_succ_dec_w")
        m.d.comb += [code.eq(decs[0].rdata.word_select(qg, 2)), scode.eq(decs[1].rdata.word_select(qg, 2))]
        h_fwd, h_last = Signal(name="head_fwd"), Signal(ra, name="head_last")
        raddr = Signal(ra, name="c_raddr_w")
        m.d.comb += raddr.eq(Mux(q["nb"], Mux(h_fwd, h_last, head.rdata), q["own"]))
        h_wdata = Signal(ra, name="head_wdata")
        m.d.comb += h_wdata.eq(Mux(code == REUSE, raddr, q["own"]))
        m.d.comb += [head.we.eq(q["v"]), head.waddr.eq(q["own"]), head.wdata.eq(h_wdata)]
        m.d.sync += [h_fwd.eq(q["v"] & walking & nb_ex & (q["own"] == nb_own)), h_last.eq(h_wdata)]
        port = Const(0, 1) if d == 1 else Const(0, range(d))
        saddr = where[0].rdata[:sa]
        for p in range(1, d):
            port = Mux(where[p].rdata[sa], p, port)
            saddr = Mux(where[p].rdata[sa], where[p].rdata[:sa], saddr)
        with m.If(phase == 2):  # the walk clears every entry it reads
            for p in range(d):
                m.d.comb += [where[p].we.eq(q["v"]), where[p].waddr.eq(q["waddr"]), where[p].wdata.eq(0)]
        m.d.comb += [cmb.c_valid.eq(q["v"]), cmb.c_dec.eq(code), cmb.c_port.eq(port), cmb.c_saddr.eq(saddr),
                     cmb.c_raddr.eq(raddr), cmb.c_waddr.eq(q["own"]),
                     cmb.c_keep.eq(q["succ"] & (scode != COMPUTE)), cmb.c_first.eq(q["first"]),
                     cmb.c_last.eq(q["last"])]
        # tags and done: the combine's row leaves 2 cycles after its command
        t1, t2 = Signal(tb, name="tag_t1"), Signal(tb, name="tag_t2")
        c1, c2 = Signal(self.cbb, name="tag_cb1"), Signal(self.cbb, name="tag_cb2")
        e1, e2 = Signal(name="tag_end1"), Signal(name="tag_end2")
        m.d.sync += [t1.eq(q["t"]), c1.eq(q["cb"]), t2.eq(t1), c2.eq(c1), e1.eq(q["v"] & q["end"]), e2.eq(e1)]
        m.d.comb += [self.y_valid.eq(cmb.y_valid), self.y_data.eq(cmb.y_data), self.y_token.eq(t2),
                     self.y_cb.eq(c2)]
        m.d.sync += self.done.eq(e2)

        fin = Signal(name="accel_done_seen")
        with m.If(ap.done):
            m.d.sync += fin.eq(1)
        with m.Switch(phase):
            with m.Case(0):
                with m.If(self.start):
                    m.d.sync += [phase.eq(3 if self.front else 1), fin.eq(0)] + [n.eq(0) for n in nxt]
            if self.front:
                with m.Case(3):  # the similarity front: the controller starts with its done pulse
                    with m.If(fr.done):
                        m.d.sync += phase.eq(1)
            with m.Case(1):
                with m.If(fin & (r_v == 0)):
                    m.d.sync += [phase.eq(2), walking.eq(1), cb.eq(0), t.eq(0), f.eq(0), p_.eq(0), x.eq(0), g.eq(0)]
            with m.Case(2):
                with m.If(walking):
                    with m.If(~last_g):
                        m.d.sync += g.eq(g + 1)
                    with m.Else():
                        m.d.sync += [g.eq(0), t.eq(t + 1), x.eq(Mux(last_x, 0, x + 1)), p_.eq(Mux(last_p, 0, p_ + 1))]
                        with m.If(last_p):
                            m.d.sync += f.eq(f + 1)
                            with m.If(last_f):
                                m.d.sync += [f.eq(0), t.eq(0), cb.eq(cb + 1)]
                                with m.If(last_cb):
                                    m.d.sync += walking.eq(0)
                with m.If(e2):
                    m.d.sync += phase.eq(0)
        return m


def core_ports(core: CompactCore, case_grid, groups, N: int, rows: int) -> dict[str, int]:  # noqa: N803
    """The op's ``o_*`` port values (module docstring) for grid ``(F, H, W)``, ``groups`` ``[(k0, k1, axis)]``, N
    output channels, after checking what the op needs: ``rows`` its band-tile rows over all column blocks (each a
    staging word; a port's macro holds ``stage_depth``, so the op's total is checked against it).

    Raises:
        ValueError: H W above R (the state macro holds one pool), more column blocks than ``max_cb``, more groups
            than ``partial_regs``, or more rows than a staging macro holds."""
    F, H, W = case_grid  # noqa: N806
    cfg = core.cfg
    n_cb = -(-N // cfg.array_cols)
    stage = combine_sizes(cfg)["stage_depth"]
    if H * W > cfg.array_rows or n_cb > core.max_cb or len(groups) > cfg.partial_regs or rows > stage:
        raise ValueError(f"grid {case_grid}, {n_cb} column blocks, {len(groups)} groups, {rows} rows: kaleido_ccore "
                         f"holds H W <= {cfg.array_rows}, {core.max_cb} column blocks, {cfg.partial_regs} groups, "
                         f"{stage} staged rows")
    return {"o_w": W, "o_axes": sum(AXIS_CODE[ax] << 2 * g for g, (_k0, _k1, ax) in enumerate(groups))}
