"""R x C output-stationary array of Kaleido PEs: columns, input skew, output ports, de-skew.

The analogue of Gemmini's ``Tile``/``Mesh`` + ``MeshWithDelays``, in two levels:

- `Column`: R PEs stacked (w and slot control move down one PE per cycle, x lanes pass through
  each PE to the next column; the row link carries w-axis partial increments from each PE to the
  one below, docs/decisions.md D4) plus the column's ``d = drain_rows_per_cycle`` output ports. A PE's
  result is valid for the one cycle after its tile's last slot and is tagged with the tile's port;
  port p is the OR over rows of the results tagged p (the top's drain credits guarantee at most
  one per cycle), registered.
- `Array`: C columns side by side with the input skew (row i's lane passes ``i + 1`` registers,
  column j's ``j + 1``, each lane packed as one shift register, docs/decisions.md D90; so PE(i, j) sees the slot
  issued at cycle c at cycle ``c + 1 + i + j``) and the
  de-skew (column j's ports pass ``C - 1 - j`` more registers, so a whole result row appears at
  once: row i of a tile whose last slot issued at cycle L leaves at ``L + i + C + 2``).

``pe="instance"`` instantiates the PE and the column by module name (``kaleido_pe``,
``kaleido_column``, each emitted once by `hw.rtl`), so large presets convert quickly and the
Verilog stays readable; ``pe="inline"`` elaborates everything in Amaranth, for `amaranth.sim`.
"""

from __future__ import annotations

from amaranth.hdl import Cat, ClockSignal, Const, Instance, Module, ResetSignal, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw.config import AcceleratorConfig
from hw.pe import COL_FIELDS, LINK_FIELDS, MODE_BITS, PE, ROW_FIELDS, W_BITS, X_BITS, pe_signature

PE_MODULE_NAME = "kaleido_pe"
COLUMN_MODULE_NAME = "kaleido_column"
#: Verilog module name of the skew/de-skew shift register (`DELAY_VERILOG`).
DELAY_MODULE_NAME = "kaleido_delay"

#: Behavioural Verilog of a DEPTH-stage (DEPTH >= 2) shift register of WIDTH bits, synchronous reset
#: to 0 and initial value 0, as Amaranth emits a ``sync`` register; appended to kaleido_top.v by
#: `hw.rtl` and instantiated by `Array` for every skew and de-skew chain (D30).
DELAY_VERILOG = """\
module kaleido_delay #(
    parameter WIDTH = 1,
    parameter DEPTH = 2
) (
    input clk,
    input rst,
    input [WIDTH-1:0] d,
    output [WIDTH-1:0] q
);
  reg [WIDTH*DEPTH-1:0] sr = 0;  // zero-extended (no replication: Verilator's WIDTHCONCAT limit)
  always @(posedge clk)
    if (rst) sr <= 0;
    else sr <= {d, sr[WIDTH*DEPTH-1:WIDTH]};
  assign q = sr[WIDTH-1:0];
endmodule
"""


def _field_shapes(cfg: AcceleratorConfig) -> dict:
    return {name: member.shape for name, member in pe_signature(cfg).members.items()}


def row_lane_bits(cfg: AcceleratorConfig) -> int:
    """Bits of one row lane (x_a, x_b, mode, sel) as packed between columns."""
    shapes = _field_shapes(cfg)
    return sum(shapes["i_" + f].width for f in ROW_FIELDS)


def _connect(m, kind, name, module_name, component_factory, inputs, outputs):
    """Instantiate a submodule by name (Verilog emission) or inline (Amaranth simulation)."""
    if kind == "instance":
        kw = {"i_clk": ClockSignal("sync"), "i_rst": ResetSignal("sync")}
        kw.update({f"i_{k}": v for k, v in inputs.items()})
        kw.update({f"o_{k}": v for k, v in outputs.items()})
        m.submodules[name] = Instance(module_name, **kw)
    else:
        sub = component_factory()
        m.submodules[name] = sub
        m.d.comb += [getattr(sub, k).eq(v) for k, v in inputs.items()]
        m.d.comb += [v.eq(getattr(sub, k)) for k, v in outputs.items()]


def unpack_lane(m, word, pos: int, fields, shapes: dict, prefix: str) -> dict:
    """The row lane at bit ``pos`` of ``word`` as named signals ``{prefix}_{field}_in``, keyed ``i_<field>``
    (a PE's inputs), fields packed in ``fields`` order with the widths of ``shapes["i_<field>"]``."""
    ins = {}
    for f in fields:
        w = shapes["i_" + f].width
        sig = Signal(shapes["i_" + f], name=f"{prefix}_{f}_in")
        m.d.comb += sig.eq(word[pos:pos + w])
        ins["i_" + f] = sig
        pos += w
    return ins


def _pack(m, values, widths, name):
    total = sum(widths)
    out = Signal(unsigned(total), name=name)
    pos = 0
    for v, w in zip(values, widths, strict=True):
        m.d.comb += out[pos:pos + w].eq(v)
        pos += w
    return out


def column_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    R, d, ab = cfg.array_rows, cfg.drain_rows_per_cycle, cfg.acc_bits  # noqa: N806
    shapes = _field_shapes(cfg)
    members = {
        "x_in": In(unsigned(R * row_lane_bits(cfg))),
        "x_out": Out(unsigned(R * row_lane_bits(cfg))),
    }
    for f in COL_FIELDS:
        members["c_" + f] = In(shapes["i_" + f])
    members["out_valid"] = Out(unsigned(d))
    members["out_data"] = Out(unsigned(d * ab))
    return wiring.Signature(members)


class Column(wiring.Component):
    """One column of R PEs with its output ports (see module docstring). Ports are packed:
    row lane i at bits ``[i*LB, (i+1)*LB)`` with LB = `row_lane_bits`, fields in `ROW_FIELDS` order."""

    def __init__(self, cfg: AcceleratorConfig, pe: str = "instance"):
        self.cfg, self.pe_kind = cfg, pe
        super().__init__(column_signature(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        R, d, ab = cfg.array_rows, cfg.drain_rows_per_cycle, cfg.acc_bits  # noqa: N806
        shapes = _field_shapes(cfg)
        lb = row_lane_bits(cfg)
        widths = [shapes["i_" + f].width for f in ROW_FIELDS]
        pes = []
        for i in range(R):
            ins = unpack_lane(m, self.x_in, i * lb, ROW_FIELDS, shapes, f"r{i}")
            for f in COL_FIELDS:
                ins["i_" + f] = getattr(self, "c_" + f) if i == 0 else pes[i - 1]["o_" + f]
            for f, w in LINK_FIELDS:  # the row link (w-axis reuse, hw/pe.py); the top PE's is 0
                ins["i_" + f] = Const(0, signed(w)) if i == 0 else pes[i - 1]["o_" + f]
            outs = {name: Signal(shapes[name], name=f"r{i}_{name}")
                    for name in shapes if not name.startswith("i_")}
            pes.append(outs)
            _connect(m, self.pe_kind, f"pe{i}", PE_MODULE_NAME, lambda: PE(cfg), ins, outs)
            m.d.comb += self.x_out[i * lb:(i + 1) * lb].eq(
                _pack(m, [outs["o_" + f] for f in ROW_FIELDS], widths, f"r{i}_x_out"))
        for p in range(d):
            data, hit = 0, 0
            for i in range(R):
                sel = pes[i]["out_valid"] & (pes[i]["out_port"] == p)
                data = data | (pes[i]["out"].as_unsigned() & sel.replicate(ab))
                hit = hit | sel
            m.d.sync += [self.out_data[p * ab:(p + 1) * ab].eq(data), self.out_valid[p].eq(hit)]
        return m


def delay(m, src, n: int, name: str, instance: bool):
    """``src`` delayed by ``n`` cycles (``src`` itself when n == 0), built into module ``m``.

    One shift register of ``n * width`` bits rather than n signals. For Verilog emission
    (``instance``) a chain of two or more stages is an instance of the hand-written
    `DELAY_VERILOG` module (the same registers, reset to 0 like Amaranth's), so Amaranth does
    not build a netlist of every flip-flop: the 128x128 skew and de-skew hold 1.7 Mbit and
    took most of the conversion time (docs/decisions.md D30).
    """
    if n == 0:
        return src
    w = len(src)
    out = Signal.like(src, name=f"{name}_d")
    if n == 1:
        m.d.sync += out.eq(src)
        return out
    if instance:
        m.submodules[f"{name}_sr"] = Instance(
            DELAY_MODULE_NAME, p_WIDTH=w, p_DEPTH=n, i_clk=ClockSignal("sync"), i_rst=ResetSignal("sync"),
            i_d=src, o_q=out)
        return out
    sr = Signal(unsigned(n * w), name=f"{name}_sr")
    m.d.sync += sr.eq(Cat(sr[w:], src))
    m.d.comb += out.eq(sr[:w])
    return out


def array_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    R, C, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    gb, pb, ab = cfg.group_bits, cfg.port_bits, cfg.acc_bits
    return wiring.Signature({
        "valid": In(1),
        "x_a": In(unsigned(R * X_BITS)), "x_b": In(unsigned(R * X_BITS)),
        "mode": In(unsigned(R * MODE_BITS)), "sel": In(unsigned(R)),
        "w_a": In(unsigned(C * W_BITS)), "w_b": In(unsigned(C * W_BITS)),
        "g_a": In(unsigned(gb)), "g_b": In(unsigned(gb)),
        "first_a": In(1), "first_b": In(1), "sp_a": In(1), "sp_b": In(1), "last": In(1), "clear": In(1),
        "port": In(unsigned(pb)),
        "out_valid": Out(unsigned(d)),
        "out_data": Out(unsigned(d * C * ab)),
    })


class Array(wiring.Component):
    """C columns with input skew and output de-skew; ports packed (lane i at bits [w*i, w*i + w))."""

    def __init__(self, cfg: AcceleratorConfig, pe: str = "instance"):
        if pe not in ("instance", "inline"):
            raise ValueError(f"pe must be 'instance' or 'inline', got {pe!r}")
        self.cfg, self.pe_kind = cfg, pe
        super().__init__(array_signature(cfg))

    def _delay(self, m, src, n, name):
        """``src`` delayed by ``n`` cycles (`delay`)."""
        return delay(m, src, n, name, self.pe_kind == "instance")

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        R, C, d, ab = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle, cfg.acc_bits  # noqa: N806
        shapes = _field_shapes(cfg)
        lb = row_lane_bits(cfg)
        widths = [shapes["i_" + f].width for f in ROW_FIELDS]

        # Row lanes: pack each row's fields, skew row i by i + 1 registers.
        lanes = Signal(unsigned(R * lb), name="row_lanes")
        for i in range(R):
            packed = _pack(m, [
                self.x_a[i * X_BITS:(i + 1) * X_BITS], self.x_b[i * X_BITS:(i + 1) * X_BITS],
                self.mode.word_select(i, MODE_BITS), self.sel[i],
            ], widths, f"row{i}_lane")
            m.d.comb += lanes[i * lb:(i + 1) * lb].eq(self._delay(m, packed, i + 1, f"row{i}_skew"))

        x = lanes
        col_widths = [shapes["i_" + f].width for f in COL_FIELDS]
        for j in range(C):
            heads = []
            for f in COL_FIELDS:
                if f in ("w_a", "w_b"):
                    src = getattr(self, f)[j * W_BITS:(j + 1) * W_BITS]
                else:
                    src = getattr(self, f)
                head = Signal(shapes["i_" + f], name=f"col{j}_{f}")
                m.d.comb += head.eq(src)
                heads.append(head)
            # Column j's lane skewed by j + 1 registers as one packed chain (the same flip-flops as one chain per
            # field; docs/decisions.md D90: one chain a column instead of one a field in the compiled engine).
            lane = self._delay(m, _pack(m, heads, col_widths, f"col{j}_lane"), j + 1, f"col{j}_skew")
            col_in = {"c" + k[1:]: v for k, v in unpack_lane(m, lane, 0, COL_FIELDS, shapes, f"col{j}").items()}
            x_out = Signal(unsigned(R * lb), name=f"col{j}_x_out")
            ov = Signal(unsigned(d), name=f"col{j}_out_valid")
            od = Signal(unsigned(d * ab), name=f"col{j}_out_data")
            _connect(m, self.pe_kind, f"col{j}", COLUMN_MODULE_NAME, lambda: Column(cfg, pe="inline"),
                     {"x_in": x, **col_in}, {"x_out": x_out, "out_valid": ov, "out_data": od})
            x = x_out
            od_d = self._delay(m, od, C - 1 - j, f"col{j}_deskew")
            ov_d = self._delay(m, ov, C - 1 - j, f"col{j}_vdeskew")
            for p in range(d):
                m.d.comb += self.out_data[(p * C + j) * ab:(p * C + j + 1) * ab].eq(od_d[p * ab:(p + 1) * ab])
            if j == 0:
                m.d.comb += self.out_valid.eq(ov_d)
        return m
