"""Streaming top level of the Kaleido compute core: one slot per cycle in, result rows out.

Input (valid/ready): one cycle slot per accepted cycle, already scheduled by the dispatcher
(`sim.timing.dispatch`; a hardware dispatcher comes later): per row i (packed, lane i at bits
``[8i+7:8i]``) the operands ``x_a``, ``x_b`` (int8, or uint8 when ``x_unsigned``), the PE mode
(2 bits, `hw.pe.PEMode`) and operand select; per column j the weights ``w_a``, ``w_b``; and the
slot control ``g_a``, ``g_b`` (channel-group indices), ``first_a``, ``first_b`` (first slot of the
tile carrying that group), ``sp_a``, ``sp_b`` (that channel's group reuses along ``w``: the PE
row link serves its neighbour, `hw.pe`), ``last`` (last slot of the tile) and ``clear`` (first
slot of a tile that starts a position block: partial registers are reset).

Drain credits: each tile's R result rows leave on one of ``d = drain_rows_per_cycle`` output ports
(round robin), one row per cycle. A slot with ``last`` set is accepted only when its port finished
its previous tile's rows, i.e. at least R cycles after that tile's last slot; ``in_ready`` is low
otherwise. This is the drain bound of the cycle model (`sim.timing.cycle_model`).

Output: per port p, ``out_valid[p]``, ``out_row`` (row index within the tile, ``p*RB``..) and
``out_data`` (C values of ``acc_bits`` each, port p at lane ``p*C + j``). Rows of one tile appear
in order 0..R-1 on consecutive cycles.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.array import Array
from hw.config import AcceleratorConfig
from hw.pe import MODE_BITS, X_BITS

#: Verilog module name of `Top` (hw/rtl.py), instantiated by name in `hw.core.TileCore`.
TOP_MODULE_NAME = "kaleido_top"


def row_bits(cfg: AcceleratorConfig) -> int:
    """Bits of a row index (0..R-1)."""
    return max(1, (cfg.array_rows - 1).bit_length())


def top_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    R, C, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    gb, ab = cfg.group_bits, cfg.acc_bits
    return wiring.Signature({
        "in_valid": In(1), "in_ready": Out(1),
        "in_x_a": In(unsigned(R * 8)), "in_x_b": In(unsigned(R * 8)),
        "in_mode": In(unsigned(R * MODE_BITS)), "in_sel": In(unsigned(R)),
        "in_w_a": In(unsigned(C * 8)), "in_w_b": In(unsigned(C * 8)),
        "in_g_a": In(unsigned(gb)), "in_g_b": In(unsigned(gb)),
        "in_first_a": In(1), "in_first_b": In(1), "in_sp_a": In(1), "in_sp_b": In(1),
        "in_last": In(1), "in_clear": In(1),
        "x_unsigned": In(1),
        "out_valid": Out(unsigned(d)),
        "out_row": Out(unsigned(d * row_bits(cfg))),
        "out_data": Out(unsigned(d * C * ab)),
    })


class Top(wiring.Component):
    """Array + operand extension + drain-credit flow control (see module docstring)."""

    def __init__(self, cfg: AcceleratorConfig, pe: str = "instance"):
        self.cfg, self.pe_kind = cfg, pe
        super().__init__(top_signature(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        R, d = cfg.array_rows, cfg.drain_rows_per_cycle  # noqa: N806
        rb = row_bits(cfg)
        m.submodules.array = arr = Array(cfg, pe=self.pe_kind)

        # Drain credits: per port, cycles until it can take another tile's rows.
        credit = [Signal(range(R), name=f"credit{p}") for p in range(d)]
        port = Signal(range(d) if d > 1 else 1, name="port")
        port_free = Signal()
        free_expr = credit[0] == 0
        for p in range(1, d):
            free_expr = Mux(port == p, credit[p] == 0, free_expr)
        m.d.comb += port_free.eq(free_expr)
        m.d.comb += self.in_ready.eq(~self.in_last | port_free)
        accept = self.in_valid & self.in_ready
        tile_done = accept & self.in_last
        for p in range(d):
            with m.If(tile_done & (port == p)):
                m.d.sync += credit[p].eq(R - 1)
            with m.Elif(credit[p] != 0):
                m.d.sync += credit[p].eq(credit[p] - 1)
        with m.If(tile_done):
            m.d.sync += port.eq(Mux(port == d - 1, 0, port + 1))

        # Operands: int8 sign-extended or uint8 zero-extended to the array's 9-bit lanes.
        def extend(packed):
            lanes = []
            for i in range(R):
                b = packed[i * 8:(i + 1) * 8]
                lanes.append(Mux(self.x_unsigned, b.as_unsigned(), b.as_signed()).as_unsigned()[:X_BITS])
            out = Signal(unsigned(R * X_BITS))
            for i, lane in enumerate(lanes):
                m.d.comb += out[i * X_BITS:(i + 1) * X_BITS].eq(lane)
            return out

        m.d.comb += [
            arr.valid.eq(accept),
            arr.x_a.eq(extend(self.in_x_a)), arr.x_b.eq(extend(self.in_x_b)),
            arr.mode.eq(self.in_mode), arr.sel.eq(self.in_sel),
            arr.w_a.eq(self.in_w_a), arr.w_b.eq(self.in_w_b),
            arr.g_a.eq(self.in_g_a), arr.g_b.eq(self.in_g_b),
            arr.first_a.eq(self.in_first_a), arr.first_b.eq(self.in_first_b),
            arr.sp_a.eq(self.in_sp_a), arr.sp_b.eq(self.in_sp_b),
            arr.last.eq(self.in_last), arr.clear.eq(self.in_clear),
            arr.port.eq(port),
            self.out_valid.eq(arr.out_valid), self.out_data.eq(arr.out_data),
        ]
        # Row index per port: rows of a tile leave in order on consecutive cycles.
        for p in range(d):
            row = Signal(range(R) if R > 1 else 1, name=f"out_row{p}")
            with m.If(arr.out_valid[p]):
                m.d.sync += row.eq(Mux(row == R - 1, 0, row + 1))
            m.d.comb += self.out_row[p * rb:(p + 1) * rb].eq(row)
        return m
