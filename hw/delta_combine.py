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


#: Bits of one SRAM macro at most: a buffer larger than this is banked over macros of ``2^k`` words (a
#: compiled macro is of this order; and Amaranth converts a behavioural macro in time growing with its bits,
#: docs/decisions.md D73: one 5,295 x 4,224-bit macro took minutes).
MACRO_MAX_BITS = 1 << 20


def delta_combine_sizes(cfg: AcceleratorConfig) -> dict:
    """``{"word": bits, "bank_depth": words per macro, "banks": macros per buffer, "state_depth": words,
    "d_depth": words per D buffer}`` (module docstring): each buffer (the state, each D) takes a third of
    ``psum_sram_kib`` in words of C acc bits, as ``banks`` macros of ``bank_depth`` words (one macro of the
    whole third when it holds at most `MACRO_MAX_BITS`, else ``2^k`` words each, the high address bits
    choosing the macro).

    Raises:
        ValueError: ``psum_sram_kib`` holds fewer than ``array_rows`` words per buffer (one pool's state)."""
    word = cfg.array_cols * cfg.acc_bits
    third = cfg.psum_sram_kib * 8192 // word // 3
    if third < cfg.array_rows:
        raise ValueError(f"{cfg.name}: psum_sram_kib = {cfg.psum_sram_kib} holds {third} words of {word} bits per "
                         f"delta combine buffer, fewer than array_rows = {cfg.array_rows}")
    bank = third if third * word <= MACRO_MAX_BITS else 1 << (max(1, MACRO_MAX_BITS // word).bit_length() - 1)
    banks = third // bank
    return {"word": word, "bank_depth": bank, "banks": banks, "state_depth": banks * bank, "d_depth": banks * bank}


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
        """The distinct SRAM macros ``(kind, depth, width, lane)`` it instantiates (one: every buffer's banks)."""
        sz = delta_combine_sizes(self.cfg)
        return [("1r1w", sz["bank_depth"], sz["word"], None)]

    def elaborate(self, platform):
        m = Module()
        C, ab = self.cfg.array_cols, self.cfg.acc_bits  # noqa: N806
        sz = delta_combine_sizes(self.cfg)
        word = sz["word"]
        dbuf = [_banked(m, f"d{i}", sz, self.instance) for i in range(2)]
        state = _banked(m, "state", sz, self.instance)

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


class _Ports:
    """The ports of one buffer (`hw.sram.Sram`'s 1r1w names), wired to its banks by `_banked`."""


def _banked(m: Module, name: str, sz: dict, instance: bool) -> _Ports:
    """One buffer of ``sz["banks"]`` 1r1w macros of ``sz["bank_depth"]`` words (`delta_combine_sizes`): the
    address's high bits pick the macro; the read data is the macro read the cycle before (its bank registered)."""
    banks, depth, word = sz["banks"], sz["bank_depth"], sz["word"]
    ab = _abits(banks * depth)
    p = _Ports()
    for f, w in (("raddr", ab), ("waddr", ab), ("re", 1), ("we", 1), ("wmask", 1), ("wdata", word), ("rdata", word)):
        setattr(p, f, Signal(w, name=f"{name}_{f}"))
    if banks == 1:
        ports, mac = macro("1r1w", depth, word, instance=instance)
        m.submodules[name] = mac
        m.d.comb += [ports.raddr.eq(p.raddr), ports.waddr.eq(p.waddr), ports.re.eq(p.re), ports.we.eq(p.we),
                     ports.wmask.eq(p.wmask), ports.wdata.eq(p.wdata), p.rdata.eq(ports.rdata)]
        return p
    lo = _abits(depth)
    rbank = Signal(range(banks), name=f"{name}_rbank")
    with m.If(p.re):
        m.d.sync += rbank.eq(p.raddr[lo:])
    rdata = 0
    for k in range(banks):
        ports, mac = macro("1r1w", depth, word, instance=instance)
        m.submodules[f"{name}_b{k}"] = mac
        m.d.comb += [ports.raddr.eq(p.raddr[:lo]), ports.waddr.eq(p.waddr[:lo]),
                     ports.re.eq(p.re & (p.raddr[lo:] == k)), ports.we.eq(p.we & (p.waddr[lo:] == k)),
                     ports.wmask.eq(p.wmask), ports.wdata.eq(p.wdata)]
        rdata = ports.rdata if k == 0 else Mux(rbank == k, ports.rdata, rdata)
    m.d.comb += p.rdata.eq(rdata)
    return p
