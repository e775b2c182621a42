"""The compact organisation's combine unit and partial-sum SRAM (`sim.timing.compact` "Combine unit",
`sim.timing.compact_reference.compact_gemm`, docs/decisions.md D50, D58, D65).

Each row the compact array drains (`hw.compact_array.CompactTop`) is one token's partial sums of one
group for C outputs: ``out`` (COMPUTE: msb + lsb; PARTIAL: the new lsb partial) and ``out_m`` (a
COMPUTE's msb partial). The drain writes it into a *staging* macro of the partial-sum SRAM, one macro
per output port (``st_we[p]``, ``st_waddr``, ``st_wdata``: port p's word, at the address the controller
chose). The combine unit then walks the tokens in raster order, one (token, group) command per cycle
(``c_*``), and per output column j:

========= ============================================ ====================================== ==========
decision  adds to the token's output                   neighbour state written at ``c_waddr``   adds
========= ============================================ ====================================== ==========
COMPUTE   the staged total                             (staged msb, staged total)              1
PARTIAL   state msb + the staged lsb                   (state msb, state msb + staged lsb)     2
REUSE     the state total                              none (the state stays where it is)      1
========= ============================================ ====================================== ==========

reading the neighbour state at ``c_raddr`` from the *state* macro (one word per (position, group):
C msb and C total partials). The state is written only where ``c_keep`` (the (token, group)'s successor
along its axis reads it, `sim.cost.compact_actions.successor_reads`), and a REUSE writes nothing: for an
``f`` group its state is its own position's, in place; for a ``w`` or ``h`` group the controller points
the successor's ``c_raddr`` at the chain's last written state (a REUSE run shares its head's word).
``c_first`` starts the token's output from 0, ``c_last`` (the token's last group) moves it to ``y_data``,
valid the cycle after next (``y_valid``).

Pipeline: a command's reads issue in its cycle (synchronous-read macros, `hw.sram`), only those it uses (a COMPUTE
reads no state word, a REUSE no staged word: their read enables are off, docs/decisions.md D127); the cycle after,
the adds happen and the state word is written. A command reading the word the previous command writes
gets it forwarded (the macro reads before it writes). So a command issued at cycle k writes its state
at k + 1 and a token whose last command issues at k has ``y_data`` valid at k + 2.

One command per cycle is one way of the combine unit: 2 C acc-bit adders (the PARTIAL's state msb +
lsb and the output accumulate, per column). `sim.timing.compact.combine_lanes` counts 4 C d adders,
2 d such ways; `Combine` builds one (D65) or, with ``ways`` = W > 1 (docs/decisions.md D104), W: way w takes
group w of a token's G = W groups in the same cycle (``c_*`` per way, ``c_first`` / ``c_last`` shared), with its
own state macro (``R`` words: group w of each position) and a staging macro per drain port (``st_way[p]`` names
the way of port p's row), and the token's output adds the W ways' totals (a way not valid adds 0): a token a
cycle. Verilog module ``kaleido_combine`` (W = 1), ``kaleido_combine_w<W>``.

Sizes (`combine_sizes`): the state holds ``R x partial_regs`` words (each position of one pool x
each group, the model's neighbour state; W macros of ``R partial_regs / W``); the staging macros (d W of them)
share the rest of ``psum_sram_kib``, a power-of-two depth each.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig
from hw.pe import COMPUTE, PARTIAL, REUSE
from hw.sram import macro

COMBINE_MODULE_NAME = "kaleido_combine"


def combine_module_name(ways: int = 1) -> str:
    """Verilog module name of `Combine` with ``ways`` ways (module docstring)."""
    return COMBINE_MODULE_NAME if ways == 1 else f"{COMBINE_MODULE_NAME}_w{ways}"


def combine_sizes(cfg: AcceleratorConfig, ways: int = 1) -> dict:
    """``{"word": bits, "state_depth": words per way, "stage_depth": words per (port, way)}`` (module docstring).

    A word is C msb + C total partials of ``acc_bits`` each. Raises `ValueError` when ``ways`` does not divide
    ``partial_regs`` or ``psum_sram_kib`` cannot hold the state and one staged word per port and way."""
    if ways < 1 or cfg.partial_regs % ways:
        raise ValueError(f"{cfg.name}: {ways} combine ways must divide partial_regs = {cfg.partial_regs}")
    word = 2 * cfg.array_cols * cfg.acc_bits
    state = cfg.array_rows * cfg.partial_regs
    spare = cfg.psum_sram_kib * 8192 - state * word
    per_port = spare // (cfg.drain_rows_per_cycle * ways * word)
    if per_port < 1:
        raise ValueError(f"{cfg.name}: psum_sram_kib = {cfg.psum_sram_kib} holds no staged partials beside the "
                         f"state ({state} words of {word} bits)")
    return {"word": word, "state_depth": state // ways, "stage_depth": 1 << (per_port.bit_length() - 1)}


def _abits(depth: int) -> int:
    return max(1, (depth - 1).bit_length())


def combine_signature(cfg: AcceleratorConfig, ways: int = 1) -> wiring.Signature:
    C, d, ab, W = cfg.array_cols, cfg.drain_rows_per_cycle, cfg.acc_bits, ways  # noqa: N806
    sz = combine_sizes(cfg, ways)
    sa, ra = _abits(sz["stage_depth"]), _abits(sz["state_depth"])
    pb = 1 if d == 1 else (d - 1).bit_length()
    ports = {
        "st_we": In(unsigned(d)), "st_waddr": In(unsigned(d * sa)), "st_wdata": In(unsigned(d * sz["word"])),
        "c_valid": In(W), "c_dec": In(unsigned(2 * W)),
        "c_port": (In(range(d)) if d > 1 else In(1)) if W == 1 else In(unsigned(W * pb)),
        "c_saddr": In(unsigned(W * sa)), "c_raddr": In(unsigned(W * ra)), "c_waddr": In(unsigned(W * ra)),
        "c_keep": In(W), "c_first": In(1), "c_last": In(1),
        "y_valid": Out(1), "y_data": Out(unsigned(C * ab)),
    }
    if W > 1:
        ports["st_way"] = In(unsigned(d * _abits(W)))
    return wiring.Signature(ports)


class Combine(wiring.Component):
    """The combine unit with its partial-sum SRAM macros (module docstring).

    Ports: a staged word (as `hw.compact_array.CompactTop` drains it) holds column j's ``out`` at bits
    ``[2 j acc, (2 j + 1) acc)`` and ``out_m`` after it; a state word column j's msb then total the same
    way; ``y_data`` column j at ``[j acc, (j + 1) acc)``. ``c_dec``: the decision code (`hw.pe.COMPUTE`,
    `PARTIAL`, `REUSE`). With W ways each ``c_*`` field but ``c_first`` / ``c_last`` holds W fields, way w's at
    the w-th slice (``c_port``: ``ceil(log2 d)`` bits a way).

    Args:
        instance: the SRAM macros as instances of their emitted modules (Verilog) or inline (simulation).
        ways: W (module docstring; default 1).
    """

    def __init__(self, cfg: AcceleratorConfig, instance: bool = False, ways: int = 1):
        self.cfg, self.instance, self.ways = cfg, instance, ways
        super().__init__(combine_signature(cfg, ways))

    def macros(self) -> list[tuple[str, int, int, None]]:
        """The distinct SRAM macros ``(kind, depth, width, lane)`` it instantiates (staging, then state)."""
        sz = combine_sizes(self.cfg, self.ways)
        return sorted({("1r1w", sz["stage_depth"], sz["word"], None), ("1r1w", sz["state_depth"], sz["word"], None)})

    def elaborate(self, platform):
        m = Module()
        cfg, W = self.cfg, self.ways  # noqa: N806
        C, d, ab = cfg.array_cols, cfg.drain_rows_per_cycle, cfg.acc_bits  # noqa: N806
        sz = combine_sizes(cfg, W)
        word, sa, ra = sz["word"], _abits(sz["stage_depth"]), _abits(sz["state_depth"])
        pb, lw = len(self.c_port) // W, _abits(W)
        #: For test benches: the read enables of the staging macros (per way, per port) and of the state macros (per
        #: way), set on elaboration (docs/decisions.md D127).
        self.read_enables = {"staging": [], "state": []}

        def nm(base, w):  # one way keeps D65's names (its Verilog unchanged)
            return base if W == 1 else f"{base}{w}"

        def way(sig, w, bits):
            return sig if W == 1 else sig[w * bits:(w + 1) * bits]

        b_valid, totals, y = [], [], None
        for w in range(W):
            c_valid, c_port = self.c_valid[w], way(self.c_port, w, pb)
            c_raddr, c_waddr = way(self.c_raddr, w, ra), way(self.c_waddr, w, ra)
            c_dec = self.c_dec[2 * w:2 * w + 2]
            stage = []
            s_re = [c_valid & (c_port == p) & (c_dec != REUSE) for p in range(d)]
            self.read_enables["staging"] += s_re
            self.read_enables["state"].append(c_valid & (c_dec != COMPUTE))
            for p in range(d):
                ports, mac = macro("1r1w", sz["stage_depth"], word, instance=self.instance)
                m.submodules[nm(f"stage{p}", f"_{w}")] = mac
                we = self.st_we[p] if W == 1 else self.st_we[p] & (self.st_way[p * lw:(p + 1) * lw] == w)
                m.d.comb += [ports.we.eq(we), ports.wmask.eq(1),
                             ports.waddr.eq(self.st_waddr[p * sa:(p + 1) * sa]),
                             ports.wdata.eq(self.st_wdata[p * word:(p + 1) * word]),
                             # a REUSE command uses no staged word: no read (docs/decisions.md D127)
                             ports.re.eq(s_re[p]),
                             ports.raddr.eq(way(self.c_saddr, w, sa))]
                stage.append(ports)
            state, mac = macro("1r1w", sz["state_depth"], word, instance=self.instance)
            m.submodules[nm("state", w)] = mac

            # Stage B registers: the command of the previous cycle.
            bv, b_dec = Signal(name=nm("b_valid", w)), Signal(2, name=nm("b_dec", w))
            b_port = Signal.like(self.c_port, name="b_port") if W == 1 else Signal(pb, name=f"b_port{w}")
            b_waddr, b_we = Signal(ra, name=nm("b_waddr", w)), Signal(name=nm("b_we", w))
            if w == 0:
                b_first, b_last = Signal(name="b_first"), Signal(name="b_last")
            b_fwd = Signal(name=nm("b_fwd", w))
            wdata, last_w = Signal(word, name=nm("wdata", w)), Signal(word, name=nm("last_wdata", w))
            we = Signal(name=nm("we", w))
            m.d.comb += we.eq(bv & b_we)
            m.d.sync += [bv.eq(c_valid), b_dec.eq(c_dec), b_port.eq(c_port),
                         b_waddr.eq(c_waddr), b_we.eq(self.c_keep[w] & (c_dec != REUSE)),
                         *([b_first.eq(self.c_first), b_last.eq(self.c_last)] if w == 0 else []),
                         b_fwd.eq(we & (b_waddr == c_raddr)), last_w.eq(wdata)]
            # a COMPUTE command uses no state word: no read (D127)
            m.d.comb += [state.re.eq(self.read_enables["state"][w]), state.raddr.eq(c_raddr),
                         state.we.eq(we), state.wmask.eq(1), state.waddr.eq(b_waddr), state.wdata.eq(wdata)]

            # Named signals: Amaranth re-emits an expression at every use, and each column slices these words.
            staged_e = stage[0].rdata
            for p in range(1, d):
                staged_e = Mux(b_port == p, stage[p].rdata, staged_e)
            staged, st = Signal(word, name=nm("staged", w)), Signal(word, name=nm("state_word", w))
            m.d.comb += [staged.eq(staged_e), st.eq(Mux(b_fwd, last_w, state.rdata))]
            is_c, is_p = Signal(name=nm("is_compute", w)), Signal(name=nm("is_partial", w))
            m.d.comb += [is_c.eq(b_dec == COMPUTE), is_p.eq(b_dec == PARTIAL)]
            if W == 1:
                y = Signal(unsigned(C * ab), name="y_acc")
            ts = []
            for j in range(C):
                s_t, s_m = staged[2 * j * ab:(2 * j + 1) * ab].as_signed(), staged[(2 * j + 1) * ab:(2 * j + 2) * ab].as_signed()
                n_m, n_t = st[2 * j * ab:(2 * j + 1) * ab].as_signed(), st[(2 * j + 1) * ab:(2 * j + 2) * ab].as_signed()
                new_t = Signal(signed(ab), name=f"new_t{j}" if W == 1 else f"new_t{w}_{j}")
                m.d.comb += new_t.eq(Mux(is_c, s_t, Mux(is_p, n_m + s_t, n_t)))
                m.d.comb += [wdata[2 * j * ab:(2 * j + 1) * ab].eq(Mux(is_c, s_m, n_m)),
                             wdata[(2 * j + 1) * ab:(2 * j + 2) * ab].eq(new_t)]
                ts.append(new_t)
                if W == 1:  # D65's order of statements (its Verilog unchanged)
                    self._out(m, y, j, b_first, b_last, bv, new_t)
            b_valid.append(bv)
            totals.append(ts)
        any_v = b_valid[0]
        if W > 1:
            any_v = Signal(name="b_any")
            m.d.comb += any_v.eq(Cat(*b_valid).any())
            y = Signal(unsigned(C * ab), name="y_acc")
            for j in range(C):
                self._out(m, y, j, b_first, b_last, any_v, sum(Mux(b_valid[w], totals[w][j], 0) for w in range(W)))
        m.d.sync += self.y_valid.eq(any_v & b_last)
        return m

    def _out(self, m, y, j, b_first, b_last, valid, add):
        """Column j of the token's output: ``y_next = (b_first ? 0 : y) + add``, kept while ``valid``, handed out
        with ``b_last``."""
        ab = self.cfg.acc_bits
        y_next = Signal(signed(ab), name=f"y_next{j}")
        m.d.comb += y_next.eq(Mux(b_first, 0, y[j * ab:(j + 1) * ab].as_signed()) + add)
        with m.If(valid):
            m.d.sync += y[j * ab:(j + 1) * ab].eq(y_next)
        with m.If(valid & b_last):
            m.d.sync += self.y_data[j * ab:(j + 1) * ab].eq(y_next)
