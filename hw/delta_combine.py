"""The delta organisation's combine unit and partial-sum SRAM (`sim.timing.delta` "Combine unit",
`sim.timing.delta_reference.delta_gemm`, docs/decisions.md D68, D73).

Each row the delta array drains (`hw.compact_array.CompactTop` on a delta config, ``kaleido_dtop``) is
one token's difference sum of one group for C outputs (one ``acc_bits`` word per column). The unit has
two command streams, each one command per cycle (one *way*, as `hw.combine`):

- *Accumulate* (``a_*``, as rows drain): ``D[a_addr] = (a_first ? 0 : D[a_addr]) + a_data`` -- the
  token's first row writes, the others read, add and write (`sim.cost.compact_actions`' delta rule: one
  write per difference row, one read per row after a token's first).
- *Output* (``c_*``, at the chunk's end, tokens in raster order): ``Y = (c_direct ? 0 : Y[nb]) +
  (c_has ? D[c_daddr] : 0)`` with ``Y[nb]`` read from the state macro at ``c_raddr`` (a token that
  COMPUTEs every group is *direct*: its differences are X itself; one that REUSEs every group has no
  D); ``Y`` leaves on ``y_data`` and is written to the state macro at ``c_waddr`` where ``c_keep`` (the
  next token along the axis reads it, `sim.cost.compact_actions.delta_successor_reads`).

Macros (`hw.sram`, behavioural, replaceable by a memory compiler's of the same name): ``D`` double-
buffered as two macros (``c_sel`` picks the one the accumulate stream writes; the output stream reads
the other, the previous chunk's), and the *state* macro of carried ``Y`` (``kaleido_sram_1r1w_<depth>x
<C acc>``, one word per (position, column block)). The addresses are the controller's (not RTL yet).

Pipeline (both streams): a command's reads issue in its cycle (synchronous-read macros); the cycle
after, the add happens and the word is written. A command reading the word the previous command of its
stream writes gets it forwarded (the macros read before write): two rows of one token in a row, and a
``w`` token reading the ``Y`` its left neighbour wrote. So an output command issued at cycle k has
``y_data`` valid at k + 2 (``y_valid``).

Adders: C acc-bit adders per stream (2 C per way, as compact's way); `sim.timing.compact.combine_lanes`
counts 4 C d adders, 2 d ways; one way is built (D65's gap: ways need the macros banked by way).

Sizes (`delta_combine_sizes`): the state macro and the two D macros take a third of ``psum_sram_kib``
each, in words of C acc bits (the model's need at one frame per chunk is ``R s`` state and ``2 R s`` D
words for ``s`` column blocks, `sim.timing.delta.psum_need_bytes`; the model's own split varies per op).
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.combine import _abits
from hw.config import AcceleratorConfig
from hw.sram import macro

DCOMBINE_MODULE_NAME = "kaleido_dcombine"


def delta_combine_sizes(cfg: AcceleratorConfig) -> dict:
    """``{"word": bits, "state_depth": words, "d_depth": words per D buffer}`` (module docstring).

    Raises:
        ValueError: ``psum_sram_kib`` holds fewer than ``array_rows`` words per macro (one pool's state)."""
    word = cfg.array_cols * cfg.acc_bits
    third = cfg.psum_sram_kib * 8192 // word // 3
    if third < cfg.array_rows:
        raise ValueError(f"{cfg.name}: psum_sram_kib = {cfg.psum_sram_kib} holds {third} words of {word} bits per "
                         f"delta combine macro, fewer than array_rows = {cfg.array_rows}")
    return {"word": word, "state_depth": third, "d_depth": third}


def dcombine_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    sz = delta_combine_sizes(cfg)
    da, ra = _abits(sz["d_depth"]), _abits(sz["state_depth"])
    return wiring.Signature({
        "c_sel": In(1),
        "a_valid": In(1), "a_first": In(1), "a_addr": In(unsigned(da)), "a_data": In(unsigned(sz["word"])),
        "c_valid": In(1), "c_direct": In(1), "c_has": In(1), "c_daddr": In(unsigned(da)),
        "c_raddr": In(unsigned(ra)), "c_waddr": In(unsigned(ra)), "c_keep": In(1),
        "y_valid": Out(1), "y_data": Out(unsigned(sz["word"])),
    })


class DeltaCombine(wiring.Component):
    """The delta combine unit with its partial-sum SRAM macros (module docstring).

    Words: column j's value at bits ``[j acc, (j + 1) acc)``, signed (``a_data`` as the delta array drains
    it, ``y_data``, the macros' words).

    Args:
        instance: the SRAM macros as instances of their emitted modules (Verilog) or inline (simulation).
    """

    def __init__(self, cfg: AcceleratorConfig, instance: bool = False):
        self.cfg, self.instance = cfg, instance
        super().__init__(dcombine_signature(cfg))

    def macros(self) -> list[tuple[str, int, int, None]]:
        """The distinct SRAM macros ``(kind, depth, width, lane)`` it instantiates."""
        sz = delta_combine_sizes(self.cfg)
        return sorted({("1r1w", sz["d_depth"], sz["word"], None), ("1r1w", sz["state_depth"], sz["word"], None)})

    def elaborate(self, platform):
        m = Module()
        C, ab = self.cfg.array_cols, self.cfg.acc_bits  # noqa: N806
        sz = delta_combine_sizes(self.cfg)
        word = sz["word"]
        dbuf = []
        for i in range(2):
            ports, mac = macro("1r1w", sz["d_depth"], word, instance=self.instance)
            m.submodules[f"d{i}"] = mac
            dbuf.append(ports)
        state, mac = macro("1r1w", sz["state_depth"], word, instance=self.instance)
        m.submodules.state = mac

        # Second-stage registers of both streams (the commands of the previous cycle).
        a_v, a_first, a_addr = Signal(name="a_v"), Signal(name="a_first_q"), Signal.like(self.a_addr, name="a_addr_q")
        a_data, a_fwd, a_sum = Signal(word, name="a_data_q"), Signal(name="a_fwd"), Signal(word, name="a_sum")
        sel = Signal(name="sel_q")
        c_v, c_direct, c_has = Signal(name="c_v"), Signal(name="c_direct_q"), Signal(name="c_has_q")
        c_waddr, c_we = Signal.like(self.c_waddr, name="c_waddr_q"), Signal(name="c_we")
        c_fwd, y = Signal(name="c_fwd"), Signal(word, name="y")
        last_a, last_y = Signal(word, name="last_a"), Signal(word, name="last_y")
        m.d.sync += [a_v.eq(self.a_valid), a_first.eq(self.a_first), a_addr.eq(self.a_addr), a_data.eq(self.a_data),
                     a_fwd.eq(a_v & (a_addr == self.a_addr) & (sel == self.c_sel)), last_a.eq(a_sum),
                     sel.eq(self.c_sel),
                     c_v.eq(self.c_valid), c_direct.eq(self.c_direct), c_has.eq(self.c_has), c_waddr.eq(self.c_waddr),
                     c_we.eq(self.c_valid & self.c_keep), c_fwd.eq(c_v & c_we & (c_waddr == self.c_raddr)),
                     last_y.eq(y)]
        for i, ports in enumerate(dbuf):  # buffer c_sel: accumulate; the other: output
            acc_here = self.c_sel == i
            m.d.comb += [ports.re.eq(Mux(acc_here, self.a_valid & ~self.a_first, self.c_valid & self.c_has)),
                         ports.raddr.eq(Mux(acc_here, self.a_addr, self.c_daddr)),
                         ports.we.eq(a_v & (sel == i)), ports.wmask.eq(1), ports.waddr.eq(a_addr),
                         ports.wdata.eq(a_sum)]
        m.d.comb += [state.re.eq(self.c_valid & ~self.c_direct), state.raddr.eq(self.c_raddr),
                     state.we.eq(c_v & c_we), state.wmask.eq(1), state.waddr.eq(c_waddr), state.wdata.eq(y)]

        # Named words: Amaranth re-emits an expression at every use, and each column slices these.
        d_old, d_out, y_nb = Signal(word, name="d_old"), Signal(word, name="d_out"), Signal(word, name="y_nb")
        m.d.comb += [d_old.eq(Mux(a_fwd, last_a, Mux(sel, dbuf[1].rdata, dbuf[0].rdata))),
                     d_out.eq(Mux(sel, dbuf[0].rdata, dbuf[1].rdata)),
                     y_nb.eq(Mux(c_fwd, last_y, state.rdata))]
        for j in range(C):
            lane = slice(j * ab, (j + 1) * ab)
            a_new = Signal(signed(ab), name=f"a_new{j}")  # D[t] += the drained row
            m.d.comb += [a_new.eq(Mux(a_first, 0, d_old[lane].as_signed()) + a_data[lane].as_signed()),
                         a_sum[lane].eq(a_new)]
            y_new = Signal(signed(ab), name=f"y_new{j}")  # Y[t] = Y[nb] + D[t]
            m.d.comb += [y_new.eq(Mux(c_direct, 0, y_nb[lane].as_signed()) + Mux(c_has, d_out[lane].as_signed(), 0)),
                         y[lane].eq(y_new)]
        with m.If(c_v):
            m.d.sync += self.y_data.eq(y)
        m.d.sync += self.y_valid.eq(c_v)
        return m
