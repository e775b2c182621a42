"""The compact (and delta) organisation's array: R rows in B bands, a weight lane per band and column, drain per
band (docs/architecture.md "Array organisations", `sim.timing.compact`, docs/decisions.md D50, D65).

- `CompactColumn` (``kaleido_ccolumn``): R `hw.compact_pe.CompactPE` in B bands of ``brows = R / B``
  rows. Band b's top PE (row ``b brows``) takes the band's own weight lane, which moves down the
  band's rows only; the row lanes pass through each PE to the next column. The column's ``d`` output
  ports read the PEs' ``out``/``out_m`` registers by a read strobe per port (``rd_valid``, ``rd_idx``
  over the rows the port serves), registered.
- `CompactArray`: C columns; band b's weight lane enters column j through ``j + 1`` registers, the row
  lane of the band's local row i through ``i + 1`` (so PE(b brows + i, j) sees the band's slot issued
  at cycle c at cycle ``c + 1 + i + j``, each band a small skewed array of its own); the read strobes
  take the band lanes' ``j + 1`` and the ports' results the ``C - 1 - j`` de-skew of `hw.array`.
- `CompactTop` (``kaleido_ctop``): per band a slot stream (valid/ready; operands int8 or uint8, modes
  `hw.pe.PEMode`, ``first``/``last`` of a band-tile, ``rows`` = its valid rows) and the drain rule of
  `sim.timing.compact.band_cycles`: ``d_b = max(1, d / B)`` ports per band, used round robin, a band-tile
  holding its port for ``rows x q`` cycles after its last slot, ``q = max(1, B / d)`` (a last slot is
  accepted only when its port is free: ``ready`` low otherwise). With ``B > d`` a port serves ``q``
  bands, band ``p + d k`` on the cycles ``c`` with ``c mod q = k`` (its *drain sequencer*); with ``B <= d``
  band b owns ports ``b d_b .. b d_b + d_b - 1``. A sequencer armed by a last slot at cycle L reads the
  band-tile's rows 0 .. rows - 1, one per turn from L + 1 on (row i no earlier than L + 1 + i, when the
  last slot has reached it), each before the port's next band-tile overwrites it (its last slot comes
  ``rows x q`` cycles later at the earliest). A row read at cycle T leaves at ``T + C + 1`` on its port
  with ``out_row`` its array row and ``out_tile`` its band-tile's number (the ``b{b}_tile`` the band ran it
  under, kept by the sequencer when armed: the tag a controller places the row by, docs/decisions.md D91); with B = d = 1 and full band-tiles this is `hw.top.Top`'s timing.

- *Band choice* (`sim.timing.compact.band_schedule`'s list schedule): band-tiles are numbered in issue
  order; band b starts with band-tile b, and a band whose last slot is accepted takes the next unnumbered
  one (several in one cycle: in band order), shown on ``b{b}_tile`` from the next cycle, when its first
  slot is due. This is the model's rule (the band whose last slot issued first, ties to the lowest band)
  in event order: the model's picks come at non-decreasing last-slot cycles.

*Delta organisation* (docs/decisions.md D73): on a config whose organisation is ``delta`` the same modules are
``kaleido_dcolumn`` / ``kaleido_dtop`` with the delta PE (`hw.compact_pe`): the ``b{b}_x_a`` / ``b{b}_x_b``
ports carry 9-bit two's-complement differences per row (no ``x_unsigned``: the similarity unit forms them),
and a drained row is one ``out`` word per column (``drain_words``); bands, band choice, drain sequencers and
credits are unchanged (`sim.timing.delta` issues its band-tiles through `sim.timing.compact.band_cycles`).

The queues that form band-tiles and the gather of each band-tile row's token operands from the input
SRAM (what the ``b{b}_*`` operand ports carry) are the controller's (the compact organisation's: not built yet,
D65; the delta organisation's: `hw.delta_accel` and its queues `hw.delta_queue`, D91, D93); the combine unit is
`hw.combine`.
"""

from __future__ import annotations

from amaranth.hdl import Const, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.array import _connect, _pack, delay, unpack_lane
from hw.compact_pe import (
    CCOL_FIELDS,
    CROW_FIELDS,
    CompactPE,
    cpe_lane_bits,
    cpe_signature,
    is_delta,
    pe_module_name,
)
from hw.config import AcceleratorConfig
from hw.pe import W_BITS, X_BITS

CCOLUMN_MODULE_NAME = "kaleido_ccolumn"
CTOP_MODULE_NAME = "kaleido_ctop"
#: The delta organisation's column and top (the same modules with one-word drain ports and difference operands).
DCOLUMN_MODULE_NAME = "kaleido_dcolumn"
DTOP_MODULE_NAME = "kaleido_dtop"
#: Bits of a band-tile number (``b{b}_tile``): 16 M band-tiles per op (a 480p ffn1 at 128 x 128 has
#: about 1.1 M: 32,760 tokens x 8 groups / 16 rows x 70 column blocks).
TILE_BITS = 24


def band_geometry(cfg: AcceleratorConfig) -> dict:
    """Drain geometry: ``brows`` rows per band, ``q`` bands per port (``max(1, B / d)``), ``ports_b``
    ports per band (``max(1, d / B)``), ``seqs`` drain sequencers (``max(B, d)``) and per sequencer its
    ``(band, port, phase)``, and per port the array rows it reads (in ``rd_idx`` order)."""
    R, B, d = cfg.array_rows, cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    brows, q, ports_b = R // B, max(1, B // d), max(1, d // B)
    seqs = []
    for s in range(max(B, d)):
        band = s // ports_b if B <= d else s
        seqs.append((band, s % d, 0 if B <= d else s // d))
    rows = [[b * brows + i for (b, p, _ph) in sorted(seqs, key=lambda t: t[2]) if p == port for i in range(brows)]
            for port in range(d)]
    return {"brows": brows, "q": q, "ports_b": ports_b, "seqs": seqs, "port_rows": rows}


def column_module_name(cfg: AcceleratorConfig) -> str:
    """`DCOLUMN_MODULE_NAME` for the delta organisation, else `CCOLUMN_MODULE_NAME`."""
    return DCOLUMN_MODULE_NAME if is_delta(cfg) else CCOLUMN_MODULE_NAME


def top_module_name(cfg: AcceleratorConfig, ext: bool = False) -> str:
    """`DTOP_MODULE_NAME` for the delta organisation, else `CTOP_MODULE_NAME`; with ``ext`` (the band choice from
    outside, `CompactTop`'s ``choice="ext"``) that name + ``_ext``."""
    return (DTOP_MODULE_NAME if is_delta(cfg) else CTOP_MODULE_NAME) + ("_ext" if ext else "")


def drain_words(cfg: AcceleratorConfig) -> tuple[str, ...]:
    """The PE result registers a drained row carries per column: ``("out", "out_m")`` (compact) or
    ``("out",)`` (delta: one difference sum)."""
    return ("out",) if is_delta(cfg) else ("out", "out_m")


def _idx_bits(n: int) -> int:
    return max(1, (n - 1).bit_length())


def ccolumn_signature(cfg: AcceleratorConfig) -> wiring.Signature:
    """Ports of one column of the compact/delta array (`CompactColumn`): the R row lanes in and out (``x_in``,
    ``x_out``), each band's column-lane fields (``c{b}_*``), and the d read-strobed drain ports (``rd_valid``,
    ``rd_idx``, ``out_valid``, ``out_data``: `drain_words` words of ``acc_bits`` per port)."""
    R, B, d, ab = cfg.array_rows, cfg.compact_bands, cfg.drain_rows_per_cycle, cfg.acc_bits  # noqa: N806
    shapes = {n: mem.shape for n, mem in cpe_signature(cfg).members.items()}
    lb = cpe_lane_bits(cfg, CROW_FIELDS)
    members = {"x_in": In(unsigned(R * lb)), "x_out": Out(unsigned(R * lb))}
    for b in range(B):
        for f in CCOL_FIELDS:
            members[f"c{b}_{f}"] = In(shapes["i_" + f])
    ib = _idx_bits(len(band_geometry(cfg)["port_rows"][0]))
    members["rd_valid"] = In(unsigned(d))
    members["rd_idx"] = In(unsigned(d * ib))
    members["out_valid"] = Out(unsigned(d))
    members["out_data"] = Out(unsigned(d * len(drain_words(cfg)) * ab))
    return wiring.Signature(members)


class CompactColumn(wiring.Component):
    """One column of R compact PEs in B bands with its read-strobed output ports (module docstring).
    Row lane i at bits ``[i LB, (i + 1) LB)``, LB = 20, fields in `CROW_FIELDS` order; port p's word is
    ``out`` then ``out_m`` (``acc_bits`` each) at bits ``[2 p acc, 2 (p + 1) acc)``."""

    def __init__(self, cfg: AcceleratorConfig, pe: str = "instance"):
        self.cfg, self.pe_kind = cfg, pe
        super().__init__(ccolumn_signature(cfg))

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        R, d, ab = cfg.array_rows, cfg.drain_rows_per_cycle, cfg.acc_bits  # noqa: N806
        geo = band_geometry(cfg)
        brows, words = geo["brows"], drain_words(cfg)
        nw = len(words)
        shapes = {n: mem.shape for n, mem in cpe_signature(cfg).members.items()}
        lb = cpe_lane_bits(cfg, CROW_FIELDS)
        widths = [shapes["i_" + f].width for f in CROW_FIELDS]
        pes = []
        for r in range(R):
            b, i = divmod(r, brows)
            ins = unpack_lane(m, self.x_in, r * lb, CROW_FIELDS, shapes, f"r{r}")
            for f in CCOL_FIELDS:  # a band's top row takes the band's lane: no mux at the boundary
                ins["i_" + f] = getattr(self, f"c{b}_{f}") if i == 0 else pes[r - 1]["o_" + f]
            outs = {n: Signal(shapes[n], name=f"r{r}_{n}") for n in shapes if not n.startswith("i_")}
            pes.append(outs)
            _connect(m, self.pe_kind, f"pe{r}", pe_module_name(cfg), lambda: CompactPE(cfg), ins, outs)
            m.d.comb += self.x_out[r * lb:(r + 1) * lb].eq(
                _pack(m, [outs["o_" + f] for f in CROW_FIELDS], widths, f"r{r}_x_out"))
        ib = _idx_bits(len(geo["port_rows"][0]))
        for p in range(d):
            idx = self.rd_idx[p * ib:(p + 1) * ib]
            data = Const(0, unsigned(nw * ab))
            for k, r in enumerate(geo["port_rows"][p]):
                word = _pack(m, [pes[r][w] for w in words], [ab] * nw, f"p{p}_r{r}_word")
                data = Mux(idx == k, word, data)
            m.d.sync += [self.out_data[nw * p * ab:nw * (p + 1) * ab].eq(Mux(self.rd_valid[p], data, 0)),
                         self.out_valid[p].eq(self.rd_valid[p])]
        return m


def ctop_signature(cfg: AcceleratorConfig, ext: bool = False) -> wiring.Signature:
    """Ports of ``kaleido_ctop`` / ``kaleido_dtop`` (`CompactTop`): per band its slot lanes, the drain ports'
    ``out_*`` words (``acc_bits`` each) with their row and band-tile tags; with ``ext`` (``kaleido_dtop_ext``,
    docs/decisions.md D99) an input ``b{b}_tile_in`` per band carrying the band-tile number the controller chose."""
    C, B, d, ab = cfg.array_cols, cfg.compact_bands, cfg.drain_rows_per_cycle, cfg.acc_bits  # noqa: N806
    brows, nw = band_geometry(cfg)["brows"], len(drain_words(cfg))
    xb = X_BITS if is_delta(cfg) else 8  # delta: 9-bit differences from the similarity unit; compact: X bytes
    members = {} if is_delta(cfg) else {"x_unsigned": In(1)}
    for b in range(B):
        members.update({
            f"b{b}_valid": In(1), f"b{b}_ready": Out(1),
            f"b{b}_x_a": In(unsigned(brows * xb)), f"b{b}_x_b": In(unsigned(brows * xb)),
            f"b{b}_mode": In(unsigned(brows * 2)),
            f"b{b}_w_a": In(unsigned(C * W_BITS)), f"b{b}_w_b": In(unsigned(C * W_BITS)),
            f"b{b}_first": In(1), f"b{b}_last": In(1), f"b{b}_rows": In(range(brows + 1)),
            f"b{b}_tile": Out(unsigned(TILE_BITS), init=b),
        })
        if ext:  # the band choice from outside: the band-tile number of the slots presented
            members[f"b{b}_tile_in"] = In(unsigned(TILE_BITS))
    members.update({"out_valid": Out(unsigned(d)), "out_row": Out(unsigned(d * _idx_bits(cfg.array_rows))),
                    "out_tile": Out(unsigned(d * TILE_BITS)), "out_data": Out(unsigned(d * C * nw * ab))})
    return wiring.Signature(members)


class CompactTop(wiring.Component):
    """Compact array + operand extension + per-band drain sequencers and credits (module docstring).

    Ports: per band b ``b{b}_*`` (operands of row i at bits ``[8 i, 8 i + 8)``, mode at ``[2 i, 2 i + 2)``,
    weights of column j at ``[8 j, 8 j + 8)``); per port p ``out_valid[p]``, ``out_row`` (array row, at
    ``[p rb, (p + 1) rb)``), ``out_tile`` (its band-tile's number, at ``[p TILE_BITS, (p + 1) TILE_BITS)``) and
    ``out_data`` (column j's ``out`` then ``out_m`` at lane ``p C + j`` of
    ``2 acc_bits`` bits).

    ``choice="ext"`` (Verilog module `top_module_name` + ``_ext``; docs/decisions.md D99): the band choice is the
    controller's. Per band an input ``b{b}_tile_in`` gives the band-tile number of the slots presented (stable
    from its first slot to its last; a controller that hands out the numbers ahead, `hw.delta_accel` with
    ``early``), the drain sequencer keeps it as the rows' tag, and ``b{b}_tile`` shows it. The default
    (``"self"``) is the module docstring's own choice, unchanged.

    Raises:
        ValueError: ``pe`` is neither ``"instance"`` nor ``"inline"``, or ``choice`` neither ``"self"`` nor
            ``"ext"``.
    """

    def __init__(self, cfg: AcceleratorConfig, pe: str = "instance", choice: str = "self"):
        if pe not in ("instance", "inline"):
            discard(self)
            raise ValueError(f"pe must be 'instance' or 'inline', got {pe!r}")
        if choice not in ("self", "ext"):
            discard(self)
            raise ValueError(f"choice must be 'self' or 'ext', got {choice!r}")
        self.cfg, self.pe_kind, self.ext = cfg, pe, choice == "ext"
        super().__init__(ctop_signature(cfg, self.ext))

    def elaborate(self, platform):  # noqa: C901
        m = Module()
        cfg = self.cfg
        R, C, B, d, ab = (cfg.array_rows, cfg.array_cols, cfg.compact_bands,  # noqa: N806
                          cfg.drain_rows_per_cycle, cfg.acc_bits)
        geo = band_geometry(cfg)
        brows, q, ports_b, seqs = geo["brows"], geo["q"], geo["ports_b"], geo["seqs"]
        inst = self.pe_kind == "instance"
        ib, rb = _idx_bits(len(geo["port_rows"][0])), _idx_bits(R)
        delta, nw = is_delta(cfg), len(drain_words(cfg))

        # ---- drain sequencers and port credits (sim.timing.compact.band_cycles's rule) ----
        tdm = Signal(range(q), name="tdm") if q > 1 else None
        if tdm is not None:
            m.d.sync += tdm.eq(Mux(tdm == q - 1, 0, tdm + 1))
        credit = [Signal(range(brows * q), name=f"credit{s}") for s in range(len(seqs))]
        left = [Signal(range(brows + 1), name=f"left{s}") for s in range(len(seqs))]
        row = [Signal(range(brows), name=f"row{s}") for s in range(len(seqs))]
        stile = [Signal(unsigned(TILE_BITS), name=f"seq_tile{s}") for s in range(len(seqs))]
        ptr = [Signal(range(ports_b), name=f"ptr{b}") if ports_b > 1 else Const(0, 1) for b in range(B)]
        accept, dones = [], []
        for b in range(B):
            mine = [s for s, (band, _p, _ph) in enumerate(seqs) if band == b]
            free = credit[mine[0]] == 0
            for k in range(1, len(mine)):
                free = Mux(ptr[b] == k, credit[mine[k]] == 0, free)
            valid, last = getattr(self, f"b{b}_valid"), getattr(self, f"b{b}_last")
            m.d.comb += getattr(self, f"b{b}_ready").eq(~last | free)
            acc_b = Signal(name=f"accept{b}")
            m.d.comb += acc_b.eq(valid & (~last | free))
            accept.append(acc_b)
            done = acc_b & last
            nrows = getattr(self, f"b{b}_rows")
            for k, s in enumerate(mine):
                turn = left[s].any() if tdm is None else (tdm == seqs[s][2]) & left[s].any()
                arm = done & (ptr[b] == k)
                with m.If(arm):
                    m.d.sync += [credit[s].eq(nrows * q - 1), left[s].eq(nrows), row[s].eq(0),
                                 stile[s].eq(getattr(self, f"b{b}_tile_in" if self.ext else f"b{b}_tile"))]
                with m.Else():
                    with m.If(credit[s] != 0):
                        m.d.sync += credit[s].eq(credit[s] - 1)
                    with m.If(turn):
                        m.d.sync += [left[s].eq(left[s] - 1), row[s].eq(row[s] + 1)]
            if ports_b > 1:
                with m.If(done):
                    m.d.sync += ptr[b].eq(Mux(ptr[b] == ports_b - 1, 0, ptr[b] + 1))
            dones.append(done)
        # Band choice (module docstring): the bands done this cycle take the next band-tile numbers in band order.
        if self.ext:  # the controller's choice (D99)
            m.d.comb += [getattr(self, f"b{b}_tile").eq(getattr(self, f"b{b}_tile_in")) for b in range(B)]
        else:
            nxt = Signal(unsigned(TILE_BITS), name="next_tile", init=B)
            taken = Const(0, unsigned(TILE_BITS))
            for b in range(B):
                with m.If(dones[b]):
                    m.d.sync += getattr(self, f"b{b}_tile").eq(nxt + taken)
                taken = taken + dones[b]
            m.d.sync += nxt.eq(nxt + taken)
        # Read strobes per port: the sequencer whose turn it is (one per port and cycle).
        rd_valid = Signal(unsigned(d), name="rd_valid")
        rd_idx = Signal(unsigned(d * ib), name="rd_idx")
        rd_row = Signal(unsigned(d * rb), name="rd_row")
        rd_tile = Signal(unsigned(d * TILE_BITS), name="rd_tile")
        for p in range(d):
            v, ix, ar, tl = Const(0, 1), Const(0, unsigned(ib)), Const(0, unsigned(rb)), Const(0, unsigned(TILE_BITS))
            for s, (band, port, phase) in enumerate(seqs):
                if port != p:
                    continue
                on = left[s].any() if tdm is None else (tdm == phase) & left[s].any()
                v = v | on
                ix = Mux(on, phase * brows + row[s], ix)
                ar = Mux(on, band * brows + row[s], ar)
                tl = Mux(on, stile[s], tl)
            m.d.comb += [rd_valid[p].eq(v), rd_idx[p * ib:(p + 1) * ib].eq(ix), rd_row[p * rb:(p + 1) * rb].eq(ar),
                         rd_tile[p * TILE_BITS:(p + 1) * TILE_BITS].eq(tl)]

        # ---- row lanes (operands extended to 9 bits, local skew i + 1) and band lanes (skew j + 1) ----
        shapes = {n: mem.shape for n, mem in cpe_signature(cfg).members.items()}
        lb = cpe_lane_bits(cfg, CROW_FIELDS)
        widths = [shapes["i_" + f].width for f in CROW_FIELDS]
        lanes = Signal(unsigned(R * lb), name="row_lanes")
        for r in range(R):
            b, i = divmod(r, brows)
            ext = []
            for f in ("x_a", "x_b"):
                if delta:  # a difference is already the PE's 9-bit signed operand
                    ext.append(getattr(self, f"b{b}_{f}")[X_BITS * i:X_BITS * (i + 1)])
                    continue
                byte = getattr(self, f"b{b}_{f}")[8 * i:8 * i + 8]
                ext.append(Mux(self.x_unsigned, byte.as_unsigned(), byte.as_signed()).as_unsigned()[:X_BITS])
            mode = getattr(self, f"b{b}_mode")[2 * i:2 * i + 2]
            packed = _pack(m, [*ext, mode], widths, f"row{r}_lane")
            m.d.comb += lanes[r * lb:(r + 1) * lb].eq(delay(m, packed, i + 1, f"row{r}_skew", inst))
        x = lanes
        for j in range(C):
            col_in = {}
            for b in range(B):
                for f in CCOL_FIELDS:
                    if f in ("w_a", "w_b"):
                        src = getattr(self, f"b{b}_{f}")[j * W_BITS:(j + 1) * W_BITS].as_signed()
                    elif f == "valid":
                        src = accept[b]
                    else:
                        src = getattr(self, f"b{b}_{f}")
                    head = Signal(shapes["i_" + f], name=f"col{j}_b{b}_{f}")
                    m.d.comb += head.eq(src)
                    col_in[f"c{b}_{f}"] = delay(m, head, j + 1, f"col{j}_b{b}_{f}_skew", inst)
            col_in["rd_valid"] = delay(m, rd_valid, j + 1, f"col{j}_rdv_skew", inst)
            col_in["rd_idx"] = delay(m, rd_idx, j + 1, f"col{j}_rdi_skew", inst)
            x_out = Signal(unsigned(R * lb), name=f"col{j}_x_out")
            ov = Signal(unsigned(d), name=f"col{j}_out_valid")
            od = Signal(unsigned(d * nw * ab), name=f"col{j}_out_data")
            _connect(m, self.pe_kind, f"col{j}", column_module_name(cfg), lambda: CompactColumn(cfg, pe="inline"),
                     {"x_in": x, **col_in}, {"x_out": x_out, "out_valid": ov, "out_data": od})
            x = x_out
            od_d = delay(m, od, C - 1 - j, f"col{j}_deskew", inst)
            for p in range(d):
                m.d.comb += self.out_data[(p * C + j) * nw * ab:(p * C + j + 1) * nw * ab].eq(
                    od_d[nw * p * ab:nw * (p + 1) * ab])
            if j == 0:
                m.d.comb += self.out_valid.eq(delay(m, ov, C - 1, "col0_vdeskew", inst))
        m.d.comb += self.out_row.eq(delay(m, rd_row, C + 1, "out_row", inst))
        m.d.comb += self.out_tile.eq(delay(m, rd_tile, C + 1, "out_tile", inst))
        return m

