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

Pipeline: a command's reads issue in its cycle (synchronous-read macros, `hw.sram`); the cycle after,
the adds happen and the state word is written. A command reading the word the previous command writes
gets it forwarded (the macro reads before it writes). So a command issued at cycle k writes its state
at k + 1 and a token whose last command issues at k has ``y_data`` valid at k + 2.

One command per cycle is one way of the combine unit: 2 C acc-bit adders (the PARTIAL's state msb +
lsb and the output accumulate, per column). `sim.timing.compact.combine_lanes` counts 4 C d adders,
2 d such ways; the RTL builds one (D65).

Sizes (`combine_sizes`): the state macro holds ``R x partial_regs`` words (each position of one pool x
each group, the model's neighbour state); the staging macros share the rest of ``psum_sram_kib``, a
power-of-two depth each.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig
from hw.pe import COMPUTE, PARTIAL, REUSE
from hw.sram import macro

COMBINE_MODULE_NAME = "kaleido_combine"


def combine_sizes(cfg: AcceleratorConfig) -> dict:
    """``{"word": bits, "state_depth": words, "stage_depth": words per port}`` (module docstring).

    A word is C msb + C total partials of ``acc_bits`` each. Raises `ValueError` when
    ``psum_sram_kib`` cannot hold the state and one staged word per port."""
    word = 2 * cfg.array_cols * cfg.acc_bits
    state = cfg.array_rows * cfg.partial_regs
    spare = cfg.psum_sram_kib * 8192 - state * word
    per_port = spare // (cfg.drain_rows_per_cycle * word)
    if per_port < 1:
        raise ValueError(f"{cfg.name}: psum_sram_kib = {cfg.psum_sram_kib} holds no staged partials beside the "
                         f"state ({state} words of {word} bits)")
    return {"word": word, "state_depth": state, "stage_depth": 1 << (per_port.bit_length() - 1)}


def _abits(depth: int) -> int:
    return max(1, (depth - 1).bit_length())


def combine_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    C, d, ab = cfg.array_cols, cfg.drain_rows_per_cycle, cfg.acc_bits  # noqa: N806
    sz = combine_sizes(cfg)
    sa, ra = _abits(sz["stage_depth"]), _abits(sz["state_depth"])
    return wiring.Signature({
        "st_we": In(unsigned(d)), "st_waddr": In(unsigned(d * sa)), "st_wdata": In(unsigned(d * sz["word"])),
        "c_valid": In(1), "c_dec": In(unsigned(2)), "c_port": In(range(d)) if d > 1 else In(1),
        "c_saddr": In(unsigned(sa)), "c_raddr": In(unsigned(ra)), "c_waddr": In(unsigned(ra)),
        "c_keep": In(1), "c_first": In(1), "c_last": In(1),
        "y_valid": Out(1), "y_data": Out(unsigned(C * ab)),
    })


class Combine(wiring.Component):
    """The combine unit with its partial-sum SRAM macros (module docstring).

    Ports: a staged word (as `hw.compact_array.CompactTop` drains it) holds column j's ``out`` at bits
    ``[2 j acc, (2 j + 1) acc)`` and ``out_m`` after it; a state word column j's msb then total the same
    way; ``y_data`` column j at ``[j acc, (j + 1) acc)``. ``c_dec``: the decision code (`hw.pe.COMPUTE`,
    `PARTIAL`, `REUSE`).

    Args:
        instance: the SRAM macros as instances of their emitted modules (Verilog) or inline (simulation).
    """

    def __init__(self, cfg: AcceleratorConfig, instance: bool = False):
        self.cfg, self.instance = cfg, instance
        super().__init__(combine_signature(cfg))

    def macros(self) -> list[tuple[str, int, int, None]]:
        """The distinct SRAM macros ``(kind, depth, width, lane)`` it instantiates (staging, then state)."""
        sz = combine_sizes(self.cfg)
        return sorted({("1r1w", sz["stage_depth"], sz["word"], None), ("1r1w", sz["state_depth"], sz["word"], None)})

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        C, d, ab = cfg.array_cols, cfg.drain_rows_per_cycle, cfg.acc_bits  # noqa: N806
        sz = combine_sizes(cfg)
        word, sa = sz["word"], _abits(sz["stage_depth"])
        stage = []
        for p in range(d):
            ports, mac = macro("1r1w", sz["stage_depth"], word, instance=self.instance)
            m.submodules[f"stage{p}"] = mac
            m.d.comb += [ports.we.eq(self.st_we[p]), ports.wmask.eq(1),
                         ports.waddr.eq(self.st_waddr[p * sa:(p + 1) * sa]),
                         ports.wdata.eq(self.st_wdata[p * word:(p + 1) * word]),
                         ports.re.eq(self.c_valid & (self.c_port == p)), ports.raddr.eq(self.c_saddr)]
            stage.append(ports)
        state, mac = macro("1r1w", sz["state_depth"], word, instance=self.instance)
        m.submodules.state = mac

        # Stage B registers: the command of the previous cycle.
        b_valid, b_dec, b_port = Signal(name="b_valid"), Signal(2, name="b_dec"), Signal.like(self.c_port, name="b_port")
        b_waddr, b_we = Signal.like(self.c_waddr, name="b_waddr"), Signal(name="b_we")
        b_first, b_last, b_fwd = Signal(name="b_first"), Signal(name="b_last"), Signal(name="b_fwd")
        wdata, last_w = Signal(word, name="wdata"), Signal(word, name="last_wdata")
        we = Signal(name="we")
        m.d.comb += we.eq(b_valid & b_we)
        m.d.sync += [b_valid.eq(self.c_valid), b_dec.eq(self.c_dec), b_port.eq(self.c_port),
                     b_waddr.eq(self.c_waddr), b_we.eq(self.c_keep & (self.c_dec != REUSE)),
                     b_first.eq(self.c_first), b_last.eq(self.c_last),
                     b_fwd.eq(we & (b_waddr == self.c_raddr)), last_w.eq(wdata)]
        m.d.comb += [state.re.eq(self.c_valid), state.raddr.eq(self.c_raddr),
                     state.we.eq(we), state.wmask.eq(1), state.waddr.eq(b_waddr), state.wdata.eq(wdata)]

        # Named signals: Amaranth re-emits an expression at every use, and each column slices these words.
        staged_e = stage[0].rdata
        for p in range(1, d):
            staged_e = Mux(b_port == p, stage[p].rdata, staged_e)
        staged, st = Signal(word, name="staged"), Signal(word, name="state_word")
        m.d.comb += [staged.eq(staged_e), st.eq(Mux(b_fwd, last_w, state.rdata))]
        is_c, is_p = Signal(name="is_compute"), Signal(name="is_partial")
        m.d.comb += [is_c.eq(b_dec == COMPUTE), is_p.eq(b_dec == PARTIAL)]
        y = Signal(unsigned(C * ab), name="y_acc")
        for j in range(C):
            s_t, s_m = staged[2 * j * ab:(2 * j + 1) * ab].as_signed(), staged[(2 * j + 1) * ab:(2 * j + 2) * ab].as_signed()
            n_m, n_t = st[2 * j * ab:(2 * j + 1) * ab].as_signed(), st[(2 * j + 1) * ab:(2 * j + 2) * ab].as_signed()
            new_t = Signal(signed(ab), name=f"new_t{j}")
            m.d.comb += new_t.eq(Mux(is_c, s_t, Mux(is_p, n_m + s_t, n_t)))
            m.d.comb += [wdata[2 * j * ab:(2 * j + 1) * ab].eq(Mux(is_c, s_m, n_m)),
                         wdata[(2 * j + 1) * ab:(2 * j + 2) * ab].eq(new_t)]
            y_next = Signal(signed(ab), name=f"y_next{j}")
            m.d.comb += y_next.eq(Mux(b_first, 0, y[j * ab:(j + 1) * ab].as_signed()) + new_t)
            with m.If(b_valid):
                m.d.sync += y[j * ab:(j + 1) * ab].eq(y_next)
            with m.If(b_valid & b_last):
                m.d.sync += self.y_data[j * ab:(j + 1) * ab].eq(y_next)
        m.d.sync += self.y_valid.eq(b_valid & b_last)
        return m
