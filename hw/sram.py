"""Behavioural SRAM macros: the port counts a memory compiler offers, one Verilog module per kind.

The op-level controller's buffers (`hw.accel`) are register files with R + 1 asynchronous read
ports today (docs/decisions.md D26), which no memory compiler builds. This module is the first
step towards buffers as banked single- or dual-port SRAM macros (D53): the two macro kinds a
compiled SRAM offers, as behavioural models with the same ports and timing:

- ``"1rw"`` single-port: one address; per cycle either a write (``we``, lane write mask ``wmask``)
  or a read (``re``). Synchronous read: ``rdata`` is the word at the address of a read cycle from
  the next cycle on, and holds until the next read (a write cycle does not change it).
- ``"1r1w"`` simple dual-port: one write port (``waddr``/``wdata``/``we``/``wmask``) and one read
  port (``raddr``/``re``), usable in the same cycle. A read of the word written in the same cycle
  returns the old word (read-before-write), the common compiled-macro behaviour.

The lane write mask has ``width // lane`` bits (one per ``lane``-bit lane; ``lane = width`` for a
word-only write). A macro's Verilog module is named `macro_name` (``kaleido_sram_<kind>_<depth>x
<width>`` plus ``_l<lane>`` with a lane mask), so a user can replace the file `emit_macro` writes
by a memory compiler's macro of the same name and ports. `macro` gives one macro to a parent
design, inline (Amaranth simulation) or as an instance of the emitted module by name (Verilog);
`hw.accel.Accel` banks its buffers over these macros (docs/decisions.md D53).
"""

from __future__ import annotations

from amaranth.back import verilog
from amaranth.hdl import ClockSignal, Instance, Module, ResetSignal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from hw import discard

#: The macro kinds (module docstring).
KINDS = ("1rw", "1r1w")

#: Bits of one SRAM macro at most: a buffer larger than this is banked over macros of ``2^k`` words (a
#: compiled macro is of this order; and Amaranth converts a behavioural macro in time growing with its bits,
#: docs/decisions.md D73: one 5,295 x 4,224-bit macro took minutes).
MACRO_MAX_BITS = 1 << 20


def index_bits(n: int) -> int:
    """Bits of an index (an address) 0 .. n - 1, at least 1."""
    return max(1, (n - 1).bit_length())


def pow2ceil(n: int) -> int:
    """The smallest power of two >= n (1 for n <= 1): a macro depth that a whole address range fills."""
    return 1 << (max(1, n) - 1).bit_length()


def split_banks(words: int, word: int, max_bits: int | None = None) -> tuple[int, int]:
    """``(bank_depth, banks)``: ``words`` words of ``word`` bits as one macro when it holds at most ``max_bits``
    (default `MACRO_MAX_BITS`), else as macros of ``2^k`` words each (the remainder dropped: callers that need
    every word give a multiple of the bank, e.g. a power of two)."""
    cap = MACRO_MAX_BITS if max_bits is None else max_bits
    bank = words if words * word <= cap else 1 << (max(1, cap // word).bit_length() - 1)
    return bank, words // bank


def macro_name(kind: str, depth: int, width: int, lane: int | None = None) -> str:
    """Verilog module name of one macro: ``kaleido_sram_<kind>_<depth>x<width>[_l<lane>]``.

    Raises:
        ValueError: unknown kind, depth or width < 1, or a lane that does not divide width.
    """
    lane = width if lane is None else lane
    if kind not in KINDS:
        raise ValueError(f"SRAM kind {kind!r}: must be one of {', '.join(KINDS)}")
    if depth < 1 or width < 1 or lane < 1 or width % lane:
        raise ValueError(f"SRAM {depth}x{width} lane {lane}: sizes must be >= 1 and lane must divide width")
    return f"kaleido_sram_{kind}_{depth}x{width}" + ("" if lane == width else f"_l{lane}")


class Sram(wiring.Component):
    """One behavioural SRAM macro (module docstring).

    Args:
        kind: ``"1rw"`` or ``"1r1w"``; depth: words; width: bits per word; lane: bits per
            write-mask lane (default width: one mask bit).

    Ports (``a = ceil(log2 depth)`` address bits, at least 1; ``m = width // lane`` mask bits):
        1rw: ``addr`` a, ``re`` 1, ``we`` 1, ``wmask`` m, ``wdata`` width, ``rdata`` width (out);
        1r1w: ``raddr`` a, ``re`` 1, ``waddr`` a, ``we`` 1, ``wmask`` m, ``wdata`` width,
        ``rdata`` width (out). ``re`` and ``we`` together on a 1rw macro: the write wins, no read.

    Raises:
        ValueError: as `macro_name`.
    """

    def __init__(self, kind: str, depth: int, width: int, lane: int | None = None):
        try:
            self.name = macro_name(kind, depth, width, lane)
        except ValueError:
            discard(self)
            raise
        self.kind, self.depth, self.width = kind, depth, width
        self.lane = width if lane is None else lane
        ab, mb = index_bits(depth), width // self.lane
        ports = {"re": In(1), "we": In(1), "wmask": In(mb), "wdata": In(width), "rdata": Out(width)}
        if kind == "1rw":
            ports["addr"] = In(ab)
        else:
            ports.update(raddr=In(ab), waddr=In(ab))
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        #: The storage (an `amaranth.lib.memory.Memory`, for test benches that inspect it), set on elaboration.
        self.mem = mem = Memory(shape=self.width, depth=self.depth, init=[])
        m.submodules.mem = mem
        wp = mem.write_port(granularity=self.lane)
        rp = mem.read_port(domain="sync", transparent_for=())  # read-before-write
        waddr, raddr = (self.addr, self.addr) if self.kind == "1rw" else (self.waddr, self.raddr)
        read = self.re & ~self.we if self.kind == "1rw" else self.re
        m.d.comb += [wp.addr.eq(waddr), wp.data.eq(self.wdata), wp.en.eq(self.wmask & self.we.replicate(len(wp.en))),
                     rp.addr.eq(raddr), rp.en.eq(read), self.rdata.eq(rp.data)]
        return m


def macro(kind: str, depth: int, width: int, lane: int | None = None, instance: bool = False):
    """One macro for a parent design: ``(ports, elaboratable)``.

    ``instance=False``: the `Sram` itself (both items; Amaranth simulation). ``instance=True``: an
    interface with the `Sram` ports and an ``Instance`` of the module `macro_name` wired to it
    (the parent's Verilog instantiates the file `emit_macro` writes by name).

    Raises:
        ValueError: as `macro_name`.
    """
    sram = Sram(kind, depth, width, lane)
    if not instance:
        return sram, sram
    discard(sram)  # only its signature is used
    ports = sram.signature.flip().create()
    kw = {"i_clk": ClockSignal("sync"), "i_rst": ResetSignal("sync")}
    for name, member in sram.signature.members.items():
        kw[("i_" if member.flow == In else "o_") + name] = getattr(ports, name)
    return ports, Instance(sram.name, **kw)


def emit_macro(kind: str, depth: int, width: int, lane: int | None = None) -> str:
    """Verilog text of one macro, module `macro_name` (ports as `Sram`, plus ``clk`` and ``rst``).

    Raises:
        ValueError: as `macro_name`.
    """
    sram = Sram(kind, depth, width, lane)
    header = (f"// Behavioural SRAM macro {sram.name} ({kind}, {depth} words x {width} bits, write lanes of "
              f"{sram.lane} bits), generated by hw/sram.py.\n"
              "// Replace this file by a memory compiler's macro of the same module name and ports.\n"
              "// Lint waiver (verilator --lint-only -Wall): UNUSEDSIGNAL: Amaranth keeps its memory ports' named\n"
              "// wires for debug visibility, and a macro has no reset (rst is the Amaranth domain's, unused).\n"
              "/* verilator lint_off UNUSEDSIGNAL */\n")
    return header + verilog.convert(sram, name=sram.name, emit_src=False)
