"""The delta organisation's op-level controller with its combine stage (docs/decisions.md D95): `DeltaCore`,
Verilog module ``kaleido_dcore``, instantiates ``kaleido_daccel`` (`hw.delta_accel.DeltaAccel`, with its band-tile
queues by default, as `hw.rtl` emits it) and ``kaleido_dcombine`` (`hw.delta_combine.DeltaCombine`) and generates
the combine unit's commands in RTL from the tagged drained rows and the op's decisions, so that it hands out final
``Y`` rows (token, column block, C values).

What the host gives it:

- the write port, passed on to ``kaleido_daccel`` (``wr_sel`` 0 differences, 1 weights, 2 descriptors without
  queues, 3 decisions); ``wr_sel`` 3 also writes the core's **decision copies**, one word per token of G 2-bit
  codes (`hw.delta_accel_host.dec_words`; COMPUTE 0, PARTIAL 1, REUSE 2), two 1r1w macros (the walk reads a token
  and its successor in one cycle), and from the word's bits 2 G up the token's **chunk** (a third 1r1w macro:
  `sim.timing.delta_core.token_chunks`, D104);
- ``kaleido_daccel``'s ``c_*`` ports (the queues' op sizes, or ``c_tiles``), passed on;
- the op ports (stable from ``start`` to ``done``), `core_ports` computes them: ``o_f``, ``o_h``, ``o_w`` the
  grid, ``o_ncb`` column blocks, ``o_n`` output channels, ``o_classes`` axis classes A (`sim.timing.delta.classes`),
  ``o_axis`` per class its axis (2 bits each: 0 ``f``, 1 ``h``, 2 ``w``), ``o_gclass`` per group its class (2
  bits each; `NO_GROUP` for a group the op does not have), ``o_gxoff`` per group its difference-word offset
  (`hw.delta_accel_host.group_layout`: how a descriptor names its group), ``o_fused`` (carried values in the
  state SRAM: a fused score op, D79); the walk's segments (D104): ``o_fw`` frames a chunk, ``o_nfc`` chunks of
  frames, ``o_s`` column blocks a group, per column block its segment base and group size (``o_sbase``,
  ``o_sk``: a segment's ordinal is base + chunk k), ``o_seg`` (the controller issues segment by segment:
  `segment_order`).

Each descriptor ``kaleido_daccel``'s gather takes (``desc_valid``, ``desc_tile``, ``desc``) is kept as (class,
column block, row tokens) in a **tile table**, one 1r1w copy per drain port, addressed by band-tile number.

After ``start`` (the same cycle as ``kaleido_daccel``'s), the accumulate and the output walk run together
(docs/decisions.md D104; D95 ran them one after the other). The walk goes *segment* by segment
(`sim.timing.delta_core.segments`): per group of ``o_s`` column blocks, per pool of R positions, per chunk of
``o_fw`` frames, per column block of the group; within a segment the bench program's order restricted to it (per
frame, position, class). That is the controller's issue order in D84's chunk-major order (its chunks are a pool's
frames, `sim.timing.compact.compact_tiles`) and in D68's with one column block a group.

- **Accumulate.** A descriptor's segment ordinal is computed the cycle after the gather takes it (its first
  token's chunk read from the chunk table) and kept with it in the **tile table** (class, column block, row
  tokens, the ordinal's low bits). A row drained at cycle c on port p: its tile-table entry is read at c (address
  ``out_tile``); at c + 1 its D address ``(a M + t) n_cb + cb`` (class a, token t = the entry's token of
  ``out_row``, column block cb; `tests.rtl.delta_bench.dcombine_program`'s layout), segment bits and data are
  written into the **row FIFO** (d 1r1w banks of ``fifo / d`` entries, entry i in bank i mod d, a cycle's valid
  ports on consecutive entries in port order; per entry its segment's parity in flops). One entry is popped a
  cycle, from the cycle after its write: popped at j, the **seen memory** of its D buffer (one bit per D address,
  1r1w, one bank per buffer) is read at j + 1 and the combine's accumulate command issues at j + 2 with
  ``a_first`` = not seen (a back-to-back repeat forwarded), setting the bit. Segment k accumulates into D buffer
  k mod 2 (``c_sel``).
- **Accumulate ways** (``ways`` W > 1, docs/decisions.md D107; W <= d, a power of two; by default d,
  `hw.delta_combine.default_ways`, D108, the one-way path above with ``ways=1``): the D buffers are W ways
  (``kaleido_dcombine_w<W>``), a (token t, class a) in way ``u mod W`` (u = a M + t) at ``(u div W) n_cb + cb``
  there, and the FIFO entry's D address is that way low, that word above it (``c_daddr`` the same); per entry its
  way in flops. A cycle pops the FIFO's longest run from its head of at most W entries, each written, each under
  the head's gate (its parity walked), in distinct ways: W <= d consecutive entries sit in distinct FIFO banks.
  Way w's row goes through its own s1/s2 registers, its own seen banks (one per D buffer) and the combine's way w
  (``a_sel`` its D buffer), so rows of one cycle may go to both buffers; the output reads the walked segment's
  buffer (``c_sel`` its other). `sim.timing.delta_core.core_schedule` with ``ways`` and `row_ways` times it.
- **Output walk**, each segment once it is *whole*: with ``o_seg`` once every row its descriptors list has had its
  accumulate command (per segment the descriptors' ``nrows`` and the accumulate commands counted, `NB_BANKS`
  banks by ordinal) and a later segment's descriptor or ``kaleido_daccel``'s ``done`` has come (a segment without
  band-tiles is whole then); without it the walk starts once ``done`` has come and the accumulate pipeline is
  empty, its segments back to back (D95's timing). A segment goes when it is whole and no row of its parity is in
  the accumulate stages; while a segment is walked (or whole and waiting to go) a row of its parity (a segment
  two or more later) waits at the FIFO's head: the walk reads that D buffer. A command's token and its successor
  along the class's axis are read from the decision copies at cycle k; at k + 1 its flags (``c_direct``,
  ``c_has``, ``c_reg``, ``c_keep``, ``c_hold``) and addresses (the carried store's, the bench's layout) issue,
  ``c_sel`` the other buffer than the segment's, and its seen bit is cleared (so both banks are all zero between
  ops); its ``Y`` row leaves 2 cycles later on ``y_valid`` with ``y_token`` and ``y_cb``. With ``o_seg`` the walk
  waits a cycle at least after a segment's last command. ``done`` pulses the cycle after the last row.

Timing: `sim.timing.delta_core.core_schedule` (tested cycle for cycle, tests/test_rtl_dcore.py).

**Similarity front** (``front=True``, Verilog module ``kaleido_dcore_front``, docs/decisions.md D103): `hw.delta_front.
DeltaFront` (``kaleido_dfront``) sits between the host and ``kaleido_daccel``. The host writes raw X with ``wr_sel`` 0
(`hw.compact_accel_host.x_words`' bytes, into the front's X buffer), the weights as before and each token's chunk
(``wr_sel`` 3, bits 2 G up; the decision bits are the front's to write), sets the op ports plus ``c_b1``, ``c_b2``
(the SAD bounds, `hw.delta_front.front_ports`) and ``x_unsigned``, and pulses ``start``: the front runs first (its
axes from ``o_axis`` by ``o_gclass``, its widths from ``c_layout``), writing the differences and the decision words
into ``kaleido_daccel`` and the decision copies through the same port (the chunk table only from the host), and its
``done`` starts the controller, so every cycle above moves by `sim.timing.delta_front.front_cycles`.

**Weight stage** (``stage=True``, Verilog module ``kaleido_dcore_stage``, docs/decisions.md D119): the controller
is ``kaleido_daccel_stage`` (`hw.delta_accel.DeltaAccel` with ``stage=True``: D96's weight stage, D99's early band
choice, D100's deferred read) on the host's band-tile list, the organisation the balanced preset models. The host
writes ``wr_sel`` 0 the differences, 1 the one weight buffer (`hw.delta_accel_host.stage_w_words`), 2 the band-tile
list with each descriptor's stage fields (`hw.delta_accel_host.stage_op_words`), 3 the decision copies and token
chunks (the core's only: ``kaleido_daccel_stage`` has no ``wr_sel`` 3), and sets ``c_tiles``. The descriptors
the gather takes carry the stage fields above the list's (``desc`` is wider); the tile table reads the same
fields (class from ``xoff``, column block, tokens), so everything after the drain ports is as above. The staged
issue order is D84's chunk-major one (slice by slice within a segment, D88): ``o_seg`` set, each (chunk, column
block) segment walked once whole; D88's slices are the op's groups here (``o_gclass``, ``o_gxoff`` and the
decisions per slice, a slice's decisions its group's). Timing: `core_schedule` fed by
`sim.timing.delta_accel.stage_schedule`'s row-out cycles (tests/test_rtl_dcore_stage.py). Refused: the queues
and the similarity front (``kaleido_daccel_stage`` takes the host's list; D96).

Ways by default (D108): ``ways`` is `hw.delta_combine.default_ways` (d on the shipped configs) unless asked for, and
`hw.rtl`, the compiled engine, the cycle model's ``combine_timing = "rtl"`` and the cost inventory follow it.

**Output lanes** (``out_ways`` V > 1, docs/decisions.md D112, D111's design; the constructor's default stays V = 1,
the one-command walk's Verilog, but `hw.rtl` and the compiled engine build ``kaleido_dcore`` on
`hw.delta_combine.default_out_ways` = W lanes since D113; ``kaleido_dcore_front`` stays at V = 1): the
walk steps V positions of the pool a cycle (lane l: position ``p + l``, ``x + l`` wrapped once at ``o_w``; per frame,
run of V positions, class: `sim.timing.delta_core.segment_steps`), the decision copies banked V ways by token mod V,
each lane's D address in its way ``(a M + t + l) mod W`` (a step's V tokens are consecutive: distinct ways, one seen
clear per way), the carried values in the state buffer's or the state SRAM's V position banks (bank low), and
``kaleido_dcombine_w<W>_v<V>`` (`hw.delta_combine.DeltaCombine` with ``out_ways``) hands out V ``Y`` rows a cycle:
``y_valid`` one bit per lane, ``y_data`` one word per lane, lane l token ``y_token + l``. `core_schedule` with ``out_ways``
times it; the state SRAM (fused score ops) is banked V ways too (D112). Refused (first build): ``o_w < V``, a fused
op with ``o_w`` not a multiple of V, the similarity front.

**D buffers** (``d_buffers`` n, docs/decisions.md D115; 2 by default, the Verilog as before byte for byte; n > 2 needs
W > 1 ways): segment k accumulates into D buffer k mod n (``kaleido_dcombine_..._b<n>``, ``a_sel`` a buffer number
per way, ``c_buf`` the walked segment's buffer), so a row waits at the FIFO's head only while a segment of its
residue is walked (two segments ahead of it with n = 2, n with n). With n > 2 the descriptor's ordinal's residue
mod n is computed the cycle after the gather takes it and kept in the tile table beside its count bank, each FIFO
entry's residue is in flops (log2 n bits, not a parity bit), the walk keeps a residue counter beside its ordinal,
and the seen memory has a bank per buffer and way. `core_schedule`'s ``buffers`` times it.

**Row-FIFO bypass** (``fifo_bypass``, docs/decisions.md D118; W > 1 ways; off by default here, on in `hw.rtl` and the
compiled engine, `default_fifo_bypass`): a cycle's FIFO writes are held a cycle in *stage A* registers (per bank:
valid, address, word) and written into the banks then, unless the pop takes that entry in that cycle (it is still
in stage A: ``(e - wp_A) mod 2^16 < n_A``); such a row skips the bank's read too and reaches its way's s1 through a
*stage B* register (the banks' read latency). Every pop keeps its cycle: `core_schedule` is unchanged, and its
``bypass`` counts the rows that skip the banks (``probes`` ``fifo_we`` / ``fifo_re`` count the banks' accesses).

**Array hold** (``array_hold``, docs/decisions.md D116 item 1, D123; off by default here, on in `hw.rtl` and the
compiled engine): ``kaleido_daccel`` runs a cycle only while the row FIFO has d free entries at the cycle's start,
``run = (fifo_wp + rows registered - fifo_rp) + d <= FIFO`` (registers only; 1 outside the accumulate phase), so the
FIFO never holds more than its entries and ``overflow`` does not rise from it. Inline the controller is elaborated
under ``EnableInserter({"sync": run})`` (its memories' ports gated too, a macro's read data held); as Verilog its
clock is gated by ``kaleido_clkgate`` (`CLKGATE_VERILOG`). Its ``out_valid``, ``desc_valid`` and ``done`` are taken
ANDed with ``run`` (a held cycle shows the cycle it has not run yet). `core_schedule`'s ``fifo`` and ``ports`` time it.

**Segment-local D addresses** (``seg_local``, docs/decisions.md D125; off by default here, the Verilog as before; on
in `hw.rtl`'s ``kaleido_dcore_stage`` since D132, `default_seg_local`, with the issue hold's bound n; W > 1, R a power
of two): with ``o_local`` (`core_ports`: the op issued segment by segment) a D buffer holds one segment,
(token t = f H W + p, class a) at slot ``(a fw + f mod fw) R + t mod R`` (way low), `sim.timing.delta_core.segment_slot`:
the accumulate side takes ``f mod fw`` from ``t - kb`` (kb the chunk's first token, written by the host above the
chunk, `chunk_words`, kept in the tile table) against ``j H W`` (``fw_max - 1`` comparators a drain port), the walk
from its frame counter; a FIFO entry (its count bank in flops) pops only while its segment is fewer than n past the
walked one (its buffer holds the earlier segment until that is walked). `core_schedule`'s ``local`` times it and
refuses the orders that would deadlock it. Without ``o_local`` the op's address, as before.
*Segment-slot ring* (docs/decisions.md D138): a buffer holds ``k`` segments where they fit; the host sets ``o_slots``
(`op_slots`: ``min(NB_BANKS, n floor(d_depth / A fw R))``), segment j accumulates into buffer j mod n (as before) at
sub-slot ``(j div n) mod k``, ``k = ceil(o_slots / n)``, its slot ``((k' A + a) fw + f mod fw) R + t mod R`` (the
base a multiple of ``A fw R``, unaligned: no power-of-two rounding, so no slot lost; the way ``u mod W`` unchanged as R
is a multiple of W); the count stage computes ``k'`` (a constant division by n, residues mod 2 .. ``ceil(8 / n)``),
kept in the tile table; the walk a sub-slot counter. An entry pops only while ``j < w_seg + o_slots`` and its buffer
is not walked or about to be (the op's-address gate: a buffer's sub-slots share its macros' ports with the walk);
the issue hold's bound for the op is ``o_slots``. ``o_slots = n`` is D132's core, cycle for cycle.

**Issue hold** (``issue_hold``, docs/decisions.md D126; off by default here, on in `hw.rtl`'s ``kaleido_dcore`` and
``kaleido_dcore_stage`` (D129) and the compiled engine): the controller (``issue_gate``: ``kaleido_daccel_gate``) shows its
next descriptor (``next_valid``, ``next_desc``); a second chunk-table copy is read at its first token each cycle the
controller runs, the token and ``next_valid`` registered beside it (``gate_tok``, ``gate_v``), so its segment
``base[cb] + chunk k[cb]`` is *fresh* when the token shown equals the registered one; ``issue_ok = fresh & (~o_seg |
seg - w_seg < issue_bound)`` gates the take. While the next descriptor is held (fresh, out of bound) and no
descriptor is in the count stage, it stands for "a later segment's descriptor has come" in the walk's ``whole``.
`core_schedule`'s ``gate`` (`sim.timing.delta_core.IssueFeed`, `StageFeed`) times it; the cycle model's staged
timing, `sim.timing.delta_core.stage_core` (D129), equals it on the staged core.

**State buffer per pool** (``pool_state``, docs/decisions.md D133; off by default, the Verilog as before): the
partial-sum state buffer's carried values at the state SRAM's regions (D79) over the walked group's column blocks
instead of the op's ``((a F + f) H W + p) n_cb + cb``: an ``f`` class at pool slot ``i s + (cb - g)``, a ``w`` class
(the pool's last position, read by the next pool's first) at ``(R + f) s + (cb - g)``, an ``h`` class at ``(R + F
+ f W + x) s + (cb - g)`` (``cb - g`` the walk's column block within its group; read and write at one word, the
neighbour's being the same slot, frame word or column), in V position banks as the state SRAM's (D112). The
walk's order (per group, pool, chunk, column block, frame, position, class; the same in every issue order) never
writes such a word between its value's write and its successor's read (D133), so the buffer holds
`hw.delta_combine.pool_state_words` (``R s`` for one ``f`` class) whatever the op's length. The fused score ops'
state SRAM is addressed as before.

Not in this slice (D95, D104, D107, D112, D113, D123): D68's order with s > 1 walked per segment (it interleaves
column blocks: the walk waits for the op); without ``issue_hold`` a descriptor `NB_BANKS` or more segments past the
walked one raises ``overflow`` (a sticky flag, raised without the array hold also by a FIFO backlog;
`core_schedule`'s ``ahead`` and ``fifo_max`` give what an op needs).
"""

from __future__ import annotations

from amaranth.hdl import (
    Array,
    Cat,
    ClockSignal,
    Const,
    EnableInserter,
    Instance,
    Module,
    Mux,
    ResetSignal,
    Signal,
    unsigned,
)
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.compact_array import TILE_BITS
from hw.config import AcceleratorConfig
from hw.core import add_child
from hw.delta_accel import (
    DACCEL_MODULE_NAME,
    DGATE_MODULE_NAME,
    DSGATE_MODULE_NAME,
    DSTAGE_MODULE_NAME,
    DeltaAccel,
)
from hw.delta_combine import (
    DeltaCombine,
    dcombine_module_name,
    dcombine_signature,
    default_ways,
    delta_combine_sizes,
)
from hw.sram import index_bits as _bits
from hw.sram import macro

#: Verilog module name of `DeltaCore`.
DCORE_MODULE_NAME = "kaleido_dcore"
#: Verilog module name of `DeltaCore` built with its similarity front (``front=True``, docs/decisions.md D103).
DCORE_FRONT_MODULE_NAME = "kaleido_dcore_front"
#: Verilog module name of `DeltaCore` built on the staged controller (``stage=True``, docs/decisions.md D119).
DCORE_STAGE_MODULE_NAME = "kaleido_dcore_stage"
#: Axis classes the ports carry (`sim.timing.delta.classes`: f, h, w).
MAX_CLASSES = 3
#: Axis codes of ``o_axis``.
AXIS_CODE = {"f": 0, "h": 1, "w": 2}
#: ``o_gclass``'s code of a group the op does not have (its decision bits are not read).
NO_GROUP = 3
#: Row-FIFO entries by default, per drain port (docs/decisions.md D95; kept by D116's pricing). With the array hold
#: (``array_hold``, D123) any depth of at least d works; without it the depth an op needs is
#: `sim.timing.delta_core.core_schedule`'s ``fifo_max``: the seeded test cases reach 39 rows on 8 x 8 with d = 2 (the
#: tests without the hold use 64), above this default.
FIFO_PER_PORT = 8
#: Segments whose row counts are held at once (banks by ordinal mod this): the segment walked or waited for and the
#: next seven; a descriptor of a segment further ahead raises ``overflow`` (docs/decisions.md D104: the tests' ops
#: run up to 6 ahead, with one-frame chunks).
NB_BANKS = 8
#: Verilog module name of the clock gate of the array hold's Verilog (`CLKGATE_VERILOG`, docs/decisions.md D123).
CLKGATE_MODULE_NAME = "kaleido_clkgate"
#: The array hold's clock gate (``array_hold`` with ``pe="instance"``, docs/decisions.md D123): a latch open while
#: ``clk`` is low (``en`` settles after the rising edge, from registers) and ``gclk = clk & en_l``, the integrated
#: clock-gating cell's behaviour; replace it by the library's ICG cell. ``kaleido_daccel`` on ``gclk`` does
#: nothing on a cycle with ``en`` low: its registers, skew lines and SRAM macros keep their state and read data.
CLKGATE_VERILOG = """\
// Clock gate of kaleido_dcore's array hold (hw/delta_core.py, docs/decisions.md D123): the behaviour of an
// integrated clock-gating cell (latch open while clk is low, gclk = clk & latched en). Replace it by the library's
// ICG cell of the same ports.
module kaleido_clkgate (
  input wire clk,
  input wire en,
  output wire gclk
);
  reg en_l;
  always_latch if (!clk) en_l = en;
  assign gclk = clk & en_l;
endmodule
"""


class DeltaCore(wiring.Component):
    """``kaleido_daccel`` + command generation + ``kaleido_dcombine`` (module docstring).

    Args:
        cfg: a delta-organisation config. fifo: row-FIFO entries (a multiple of d; default `FIFO_PER_PORT` d).
        pe: as `DeltaAccel`'s. queues: `DeltaAccel`'s band-tile queues (default without ``stage``; False: the
            host's band-tile list).
        stage: ``kaleido_daccel_stage`` instead of ``kaleido_daccel`` (module docstring, "Weight stage"; the
            host's band-tile list with its stage fields, docs/decisions.md D119).
        front: the similarity front (module docstring, "Similarity front"; needs ``queues``).
        ways: accumulate ways W (module docstring, "Accumulate ways"; default `hw.delta_combine.default_ways`: d on
            the shipped delta configs, docs/decisions.md D108; 1 is D95's one row a cycle).
        out_ways: output lanes V (module docstring, "Output lanes"; docs/decisions.md D112): a power of two
            at most W dividing ``array_rows``; 1 (default here) is the one-command walk, the same Verilog as before;
            `hw.rtl` and the compiled engine pass `hw.delta_combine.default_out_ways` (W, D113).
        d_buffers: D buffers n (module docstring, "D buffers"; docs/decisions.md D115): 2 to `NB_BANKS`, above 2
            only on W > 1 ways; 2 (default here) is the core as before.
        fifo_bypass: the row FIFO's bypass (module docstring, "Row-FIFO bypass"; docs/decisions.md D118), W > 1
            ways only; False (default here) is the core as before.
        issue_hold, issue_bound: the issue hold (module docstring, "Issue hold"; docs/decisions.md D126): the
            controller (built with ``issue_gate``) takes a descriptor only while its segment is fewer than
            ``issue_bound`` (default `NB_BANKS`, with ``seg_local`` n) past the walked one; not with ``front``.
            With ``seg_local`` an op with ``o_local`` is bounded by its ``o_slots`` instead (docs/decisions.md D138),
            which `core_ports` caps at ``issue_bound`` where one is given (``slot_cap``), else at `NB_BANKS`.
        array_hold: the array hold (module docstring, "Array hold"; docs/decisions.md D116 item 1, D123): the
            controller runs a cycle only while the row FIFO has d free entries; adds the output ``run``. Inline
            (Amaranth's simulation) the controller is enabled by ``run`` (`EnableInserter`, its memories' ports
            too); as Verilog (``pe="instance"``) its clock is gated (`CLKGATE_VERILOG`). False (default) is the core
            as before, byte for byte.
        pool_state: the partial-sum state buffer addressed per pool (module docstring, "State buffer per pool";
            docs/decisions.md D133): it holds the walked group's window (`hw.delta_combine.pool_state_words`) instead
            of the op's ``A F H W n_cb`` words. False (default) is the core as before.
        **accel: `DeltaAccel`'s other keyword arguments (sizes, entries, lanes).

    Raises:
        ValueError: as `DeltaAccel` or `hw.delta_front.DeltaFront`, ``fifo`` not a positive multiple of d,
            ``front`` without ``queues``, ``stage`` with ``queues`` or ``front``, ``ways`` not a power of two at
            most d, ``out_ways`` not a power of two at most ``ways`` dividing ``array_rows``, ``out_ways`` > 1 with
            ``front`` (not built, D112), ``d_buffers`` outside 2 .. `NB_BANKS` or above 2 on one way (D115),
            ``fifo_bypass`` on one way (D118), ``seg_local`` on one way or a non-power-of-two ``array_rows`` (D125),
            or ``issue_hold`` with ``front`` or its bound outside 1 .. `NB_BANKS` (D126).
    """

    def __init__(self, cfg: AcceleratorConfig, fifo: int | None = None, pe: str = "inline", queues: bool | None = None,
                 front: bool = False, ways: int | None = None, out_ways: int = 1, stage: bool = False,
                 d_buffers: int = 2, fifo_bypass: bool = False, array_hold: bool = False, seg_local: bool = False,
                 issue_hold: bool = False, issue_bound: int | None = None, pool_state: bool = False, **accel):
        d = cfg.drain_rows_per_cycle
        queues = not stage if queues is None else queues
        if stage and (queues or front):  # D119: the staged controller takes the host's list, the front needs queues
            discard(self)
            raise ValueError("the weight stage (stage=True) runs on the host's band-tile list with its stage fields: "
                             "neither the queues nor the similarity front (docs/decisions.md D96, D119)")
        fifo = fifo or FIFO_PER_PORT * d
        try:
            ways = default_ways(cfg) if ways is None else ways
        except ValueError:
            discard(self)
            raise
        if ways < 1 or ways & (ways - 1) or ways > d:
            discard(self)
            raise ValueError(f"ways = {ways}: a power of two at most d = {d} (the row FIFO's banks)")
        V = out_ways  # noqa: N806
        if V < 1 or V & (V - 1) or V > ways or cfg.array_rows % V or (V > 1 and front):
            discard(self)
            raise ValueError(f"out_ways = {V}: a power of two at most ways = {ways} dividing array_rows = "
                             f"{cfg.array_rows}, without the similarity front (docs/decisions.md D112)")
        if d_buffers < 2 or d_buffers > NB_BANKS or (d_buffers > 2 and ways == 1):
            discard(self)
            raise ValueError(f"d_buffers = {d_buffers}: 2 to {NB_BANKS}, more than 2 only on ways > 1 (docs/decisions.md "
                             "D115)")
        if seg_local and (ways == 1 or cfg.array_rows & (cfg.array_rows - 1)):
            discard(self)
            raise ValueError("seg_local: built on ways > 1 with array_rows a power of two (docs/decisions.md D125)")
        bound = (d_buffers if seg_local else NB_BANKS) if issue_bound is None else issue_bound
        if issue_hold and (front or not 1 <= bound <= NB_BANKS):
            discard(self)
            raise ValueError(f"issue_hold: not with the similarity front, issue_bound = {bound} within 1 .. "
                             f"{NB_BANKS} (docs/decisions.md D126)")
        if fifo_bypass and ways == 1:
            discard(self)
            raise ValueError("fifo_bypass: built on ways > 1 only (docs/decisions.md D118)")
        if fifo < d or fifo % d or d & (d - 1):
            discard(self)  # rejected: never elaborated, so no UnusedElaboratable warning (hw.discard)
            raise ValueError(f"fifo = {fifo} entries must be a positive multiple of d = {d} (a power of two)")
        if front and not queues:
            discard(self)
            raise ValueError("the similarity front (front=True) writes decisions: it needs the queues (queues=True)")
        self.cfg, self.fifo, self.pe_kind, self.queues, self.front = cfg, fifo, pe, queues, front
        #: Accumulate ways W (docs/decisions.md D107): up to W FIFO rows a cycle, in distinct ways.
        self.ways = ways
        #: Output lanes V (docs/decisions.md D112): the walk's tokens a step, V Y rows a cycle.
        self.out_ways = out_ways
        #: D buffers n (docs/decisions.md D115): segment k accumulates into buffer k mod n.
        self.d_buffers = d_buffers
        #: The row FIFO's bypass (docs/decisions.md D118): a row popped the cycle after its write skips the macros.
        self.fifo_bypass = fifo_bypass
        #: The array hold (docs/decisions.md D116 item 1, D123): ``kaleido_daccel`` enabled by ``run``.
        self.array_hold = array_hold
        #: Segment-local D addresses (docs/decisions.md D125): with ``o_local`` a D buffer holds one segment.
        self.seg_local = seg_local
        #: The issue hold (docs/decisions.md D126): ``kaleido_daccel`` takes its next descriptor only while its segment
        #: is fewer than ``issue_bound`` past the walked one (default `NB_BANKS`; with ``seg_local`` n).
        self.issue_hold, self.issue_bound = issue_hold, bound if issue_hold else None
        #: The state buffer addressed per pool (docs/decisions.md D133): a carried value at its region's word over the
        #: walked group's column blocks (`hw.delta_combine.pool_state_words`), not at ``((a F + f) H W + p) n_cb + cb``.
        self.pool_state = pool_state
        #: The segment-slot ring's cap (docs/decisions.md D138): with ``seg_local`` a local op's slots (``o_slots``,
        #: `core_ports`) are at most this: `NB_BANKS` (the count banks), or an ``issue_bound`` given explicitly.
        self.slot_cap = (NB_BANKS if issue_bound is None else issue_bound) if seg_local else 0
        #: With ``seg_local``: the most segment slots one D buffer holds (``ceil(NB_BANKS / n)``), and the bits of a
        #: slot's number within its buffer (D138: segment j in buffer j mod n at sub-slot ``(j div n) mod k``).
        self.sub_max = -(-NB_BANKS // d_buffers) if seg_local else 1
        self.subb = (self.sub_max - 1).bit_length()
        #: After elaboration: the FIFO banks' write and read enables (``"fifo_we"``, ``"fifo_re"``, d bits each).
        self.probes: dict = {}
        #: Bits of a segment's residue mod n (0 with n = 2: the count bank's bit 0 is it).
        self.resb = 0 if d_buffers == 2 else (d_buffers - 1).bit_length()
        # Marked with `discard` always, as DeltaAccel marks its queue: a core built only for its ports, sizes or
        # capacity checks is never elaborated, and neither are they (pe="instance": only their signatures and
        # sizes are used); an elaborated core still elaborates both as its submodules.
        try:
            self.accel = discard(DeltaAccel(cfg, pe=pe, queues=queues, stage=stage,
                                            **({"issue_gate": True} if issue_hold else {}), **accel))
        except ValueError:
            discard(self)  # refused by the controller: never elaborated (hw.discard)
            raise
        self.combine = discard(DeltaCombine(cfg, instance=pe == "instance", ways=ways,
                                            **({"out_ways": out_ways} if out_ways > 1 else {}),
                                            **({"buffers": d_buffers} if d_buffers != 2 else {})))
        acc = self.accel
        #: With ``front``: the similarity pass (`hw.delta_front.DeltaFront`, ``kaleido_dfront``), else None.
        self.front_unit = None
        fports, abits = {}, acc.abits
        if front:
            from hw.delta_front import DeltaFront

            self.front_unit = fu = discard(DeltaFront(acc, pe=pe))
            fports = {n: fu.signature.members[n] for n in ("c_b1", "c_b2", "x_unsigned")}
            abits = max(abits, fu.xabits)
        self.cnames = [n for n in acc.signature.members if n.startswith("c_")]
        G, C = cfg.partial_regs, cfg.array_cols  # noqa: N806
        self.tb, self.cbb = acc.tb, _bits(acc.max_nb)
        cs = dcombine_signature(cfg, ways, out_ways, d_buffers).members
        self.da, self.ra = cs["c_daddr"].shape.width // out_ways, cs["c_raddr"].shape.width // out_ways
        self.chb = _bits(acc.max_tokens)  # a chunk's number (docs/decisions.md D104: chunks of a pool's frames)
        self.ob = _bits(acc.max_nb * acc.max_tokens)  # a segment's ordinal
        self.obk = (NB_BANKS - 1).bit_length()  # its count bank (the low bits; bit 0 the D buffer)
        #: With ``seg_local``: the chunk table also holds each token's chunk's first token ``(f div fw) fw H W``
        #: (tb bits above the chunk, `chunk_words`), kept in the tile table per band-tile.
        self.kbb = self.tb if seg_local else 0
        self.entry_bits = 2 + self.cbb + acc.brows * self.tb + self.obk + self.resb + self.kbb + self.subb
        #: With ``seg_local``: the most frames a chunk whose segment one D buffer holds (``d_depth`` // R, at least
        #: 1; `core_ports` checks the op's): the accumulate side's ``fw_max - 1`` comparators a drain port.
        self.fw_max = max(1, min(acc.max_tokens, delta_combine_sizes(cfg, ways, out_ways, d_buffers)["d_depth"]
                                 // cfg.array_rows)) if seg_local else 0
        self.fifo_bits = self.da + self.obk + C * cfg.acc_bits
        self.seen_depth = 1 << (self.da - (ways - 1).bit_length())  # per way
        super().__init__({
            "wr_valid": In(1), "wr_ready": Out(1), "wr_sel": In(2), "wr_addr": In(unsigned(abits)),
            "wr_data": In(unsigned(max(acc.dbits, 2 * G + self.chb + self.kbb))), **{n: acc.signature.members[n] for n in self.cnames},
            **fports,
            "o_f": In(range(acc.max_tokens + 1)), "o_h": In(range(acc.max_tokens + 1)),
            "o_w": In(range(acc.max_tokens + 1)), "o_ncb": In(range(acc.max_nb + 1)),
            "o_n": In(range(acc.max_n + 1)), "o_classes": In(range(MAX_CLASSES + 1)), "o_axis": In(2 * MAX_CLASSES),
            "o_gclass": In(2 * G), "o_gxoff": In(unsigned(G * _bits(acc.KW))), "o_fused": In(1), "o_seg": In(1),
            "o_fw": In(range(acc.max_tokens + 1)), "o_nfc": In(range(acc.max_tokens + 1)), "o_s": In(range(acc.max_nb + 1)),
            "o_sbase": In(unsigned(acc.max_nb * self.ob)), "o_sk": In(unsigned(acc.max_nb * _bits(acc.max_nb + 1))),
            **({"o_local": In(1), "o_slots": In(range(NB_BANKS + 1))} if seg_local else {}),
            "start": In(1), "busy": Out(1), "done": Out(1), "overflow": Out(1), **({"run": Out(1)} if array_hold else {}),
            "y_valid": Out(out_ways), "y_token": Out(unsigned(self.tb)), "y_cb": Out(unsigned(self.cbb)),
            "y_data": Out(unsigned(out_ways * C * cfg.acc_bits)),
        })

    def elaborate(self, platform):  # noqa: C901
        m = Module()
        cfg, acc = self.cfg, self.accel
        R, C, d, G = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle, cfg.partial_regs  # noqa: N806
        ab, tb, cbb, brows, Q = cfg.acc_bits, self.tb, self.cbb, self.accel.brows, self.fifo  # noqa: N806
        rb, lg = _bits(brows), (d - 1).bit_length()
        inst = self.pe_kind == "instance"
        if self.array_hold:  # D123: the controller's synchronous logic and its memories' ports enabled by run
            if not inst:
                m.submodules.accel = EnableInserter({"sync": self.run})(acc)
                ap = acc
            else:  # its modules (top, queues, macros, skew lines) on a gated clock: one clock gate, no port added
                gclk = Signal(name="accel_clk")
                m.submodules.accel_clkgate = Instance(CLKGATE_MODULE_NAME, i_clk=ClockSignal("sync"), i_en=self.run,
                                                      o_gclk=gclk)
                ap = acc.signature.flip().create()
                kw = {"i_clk": gclk, "i_rst": ResetSignal("sync")}
                for name, member in acc.signature.members.items():
                    kw[("i_" if member.flow == In else "o_") + name] = getattr(ap, name)
                m.submodules.accel = Instance(accel_module_name(acc), **kw)
            # nothing leaves it on a held cycle (its outputs show the cycle it has not run yet)
            a_out_v, a_desc_v, a_done = Signal(d, name="accel_out_valid"), Signal(name="accel_desc_valid"), \
                Signal(name="accel_done")
            m.d.comb += [a_out_v.eq(ap.out_valid & self.run.replicate(d)), a_desc_v.eq(ap.desc_valid & self.run),
                         a_done.eq(ap.done & self.run)]
        else:
            ap = add_child(m, "accel", acc, accel_module_name(acc), inst)
            a_out_v, a_desc_v, a_done = ap.out_valid, ap.desc_valid, ap.done
        cmb = add_child(m, "comb", self.combine, dcombine_module_name(self.ways, self.out_ways, self.d_buffers), inst)
        W, lw = self.ways, (self.ways - 1).bit_length()  # noqa: N806
        V, lv = self.out_ways, (self.out_ways - 1).bit_length()  # noqa: N806
        desc_bits = self.accel.desc_bits

        # --- host writes, start, the run's phases
        dec_we = host_dec = self.wr_valid & (self.wr_sel == 3)  # the chunk table: the host's writes only
        dec_addr, dec_data = self.wr_addr, self.wr_data[:2 * G]
        # phase: 0 idle, 1 accumulate, 2 output, 3 the similarity front (front=True)
        if self.front:  # the front's axes: each group's class's axis
            from hw.delta_front import front_through

            axes = Cat(*(self.o_axis.word_select(self.o_gclass[2 * g:2 * g + 2], 2) for g in range(G)))
            phase, fr, dec_we, dec_addr, dec_data = front_through(m, self, ap, inst, axes)
        else:
            phase = host_through(m, self, ap, self.wr_valid & ((self.wr_sel != 3) if not self.queues else 1))

        # --- tile table: (class, cb, tokens) per band-tile, one copy per drain port
        pos, off = {}, 0
        for name, bits in acc.fields:
            pos[name] = (off, bits)
            off += bits
        field = {n: ap.desc[o:o + b] for n, (o, b) in pos.items()}
        assert off == desc_bits
        xb = _bits(acc.KW)
        cls_w = Signal(2, name="desc_class")
        expr = Const(0, 2)
        for g in range(G):
            gc = self.o_gclass[2 * g:2 * g + 2]
            expr = Mux((field["xoff"] == self.o_gxoff[g * xb:(g + 1) * xb]) & (gc != NO_GROUP), gc, expr)
        m.d.comb += cls_w.eq(expr)
        entry_w = Cat(cls_w, field["cb"][:cbb], field["tokens"])
        # each descriptor's segment (D104): its column block's and its first token's chunk's ordinal in the walk's
        # order, base[cb] + chunk k[cb] (host tables); the chunk from a table the host writes with the decisions
        chunks, cmac = macro("1r1w", acc.max_tokens, self.chb + self.kbb, instance=inst)
        m.submodules.chunks = cmac
        m.d.comb += [chunks.we.eq(host_dec), chunks.waddr.eq(self.wr_addr), chunks.wmask.eq(1),
                     chunks.wdata.eq(self.wr_data[2 * G:2 * G + self.chb + self.kbb]), chunks.re.eq(a_desc_v),
                     chunks.raddr.eq(field["tokens"][:tb])]
        d1_v, d1_tile = Signal(name="desc1_valid"), Signal.like(ap.desc_tile, name="desc1_tile")
        d1_entry, d1_cb = Signal(len(entry_w), name="desc1_entry"), Signal(cbb, name="desc1_cb")
        d1_nrows = Signal.like(field["nrows"], name="desc1_nrows")
        m.d.sync += [d1_v.eq(a_desc_v), d1_tile.eq(ap.desc_tile), d1_entry.eq(entry_w),
                     d1_cb.eq(field["cb"][:cbb]), d1_nrows.eq(field["nrows"])]
        kw = _bits(acc.max_nb + 1)
        bases = Array(self.o_sbase[c * self.ob:(c + 1) * self.ob] for c in range(acc.max_nb))
        ks = Array(self.o_sk[c * kw:(c + 1) * kw] for c in range(acc.max_nb))
        d1_ord = Signal(self.ob, name="desc1_ord")
        m.d.comb += d1_ord.eq(bases[d1_cb] + chunks.rdata[:self.chb] * ks[d1_cb])
        res_w = []  # n > 2 D buffers (D115): the segment's residue mod n, kept beside its count bank
        if self.resb:
            d1_res = Signal(self.resb, name="desc1_res")
            m.d.comb += d1_res.eq(d1_ord % self.d_buffers)
            res_w = [d1_res]
        if self.seg_local:  # D125: the band-tile's chunk's first token, beside its ordinal
            res_w = [*res_w, chunks.rdata[self.chb:]]
            # D138: the segment-slot ring; segment j in D buffer j mod n at sub-slot (j div n) mod k, k = ceil(slots
            # / n) (the host's o_slots; a constant divider by n, then a mux of constant residues mod 2 .. k_max)
            kslot = Signal(range(self.sub_max + 1), name="slot_k")
            m.d.comb += kslot.eq(Array(Const(-(-v // self.d_buffers), kslot.shape())
                                       for v in range(NB_BANKS + 1))[self.o_slots])
            if self.subb:
                d1_sub = Signal(self.subb, name="desc1_sub")
                qd = d1_ord // self.d_buffers
                sub = Const(0, self.subb)
                for kv in range(2, self.sub_max + 1):
                    sub = Mux(kslot == kv, qd % kv, sub)
                m.d.comb += d1_sub.eq(sub)
                res_w = [*res_w, d1_sub]
        tables = []
        for p in range(d):
            ports, mac = macro("1r1w", self.accel.max_tiles, self.entry_bits, instance=inst)
            m.submodules[f"tiles{p}"] = mac
            m.d.comb += [ports.we.eq(d1_v), ports.waddr.eq(d1_tile), ports.wmask.eq(1),
                         ports.wdata.eq(Cat(d1_entry, d1_ord[:self.obk], *res_w)), ports.re.eq(a_out_v[p]),
                         ports.raddr.eq(ap.out_tile[p * TILE_BITS:(p + 1) * TILE_BITS])]
            tables.append(ports)

        # --- decision buffer: two copies (token, successor)
        decs = []
        for i in range(2):
            if V > 1:  # banked V ways by token mod V (D112): a step's V tokens, and their successors, in distinct banks
                banks = []
                for b in range(V):
                    ports, mac = macro("1r1w", -(-self.accel.max_tokens // V), 2 * G, instance=inst)
                    m.submodules[f"dec{i}_v{b}"] = mac
                    m.d.comb += [ports.we.eq(dec_we & (dec_addr[:lv] == b)), ports.waddr.eq(dec_addr[lv:]),
                                 ports.wmask.eq(1), ports.wdata.eq(dec_data)]
                    banks.append(ports)
                decs.append(banks)
                continue
            ports, mac = macro("1r1w", self.accel.max_tokens, 2 * G, instance=inst)
            m.submodules[f"dec{i}"] = mac
            m.d.comb += [ports.we.eq(dec_we), ports.waddr.eq(dec_addr), ports.wmask.eq(1), ports.wdata.eq(dec_data)]
            decs.append(ports)

        hw_ = Signal(range(acc.max_tokens + 1), name="op_hw")
        m_tok = Signal(range(acc.max_tokens + 1), name="op_m")
        m.d.comb += [hw_.eq(self.o_h * self.o_w), m_tok.eq(self.o_f * hw_)]

        # --- accumulate: rows into the FIFO
        r_v = Signal(d, name="row_v")
        r_row = Signal(d * rb, name="row_row")
        r_data = Signal(d * C * ab, name="row_data")
        m.d.sync += [r_v.eq(a_out_v), r_row.eq(ap.out_row), r_data.eq(ap.out_data)]
        wp, rp = Signal(16, name="fifo_wp"), Signal(16, name="fifo_rp")
        qb = (Q - 1).bit_length()
        nb, rs = self.d_buffers, max(1, self.resb)  # the D buffers; bits of a buffer's number
        # per entry its segment's D buffer (the ordinal's parity, or its residue mod n > 2, D115), in flops
        parb = Signal(Q * rs, name="fifo_parity" if nb == 2 else "fifo_residue")
        if W > 1:
            wayb = Signal(Q * lw, name="fifo_way")  # per entry its way (D107), in flops
        bankb = Signal(Q * self.obk, name="fifo_bank") if self.seg_local else None  # D125: its count bank, in flops
        fifo = []
        for b in range(d):
            ports, mac = macro("1r1w", Q // d, self.fifo_bits, instance=inst)
            m.submodules[f"fifo{b}"] = mac
            m.d.comb += ports.wmask.eq(1)
            fifo.append(ports)
        self.probes = {"fifo_we": Cat(*(f.we for f in fifo)), "fifo_re": Cat(*(f.re for f in fifo))}
        wport, byp = fifo, None
        if self.fifo_bypass:  # D118: each cycle's writes held a cycle in stage A, then written unless popped
            from types import SimpleNamespace

            wport = [SimpleNamespace(we=Signal(name=f"fifo_in_we{b}"), waddr=Signal.like(fifo[b].waddr,
                     name=f"fifo_in_addr{b}"), wdata=Signal(self.fifo_bits, name=f"fifo_in_data{b}")) for b in range(d)]
            stage = [SimpleNamespace(we=Signal(name=f"fifo_a_we{b}"), waddr=Signal.like(fifo[b].waddr,
                     name=f"fifo_a_addr{b}"), wdata=Signal(self.fifo_bits, name=f"fifo_a_data{b}")) for b in range(d)]
            byp = {"stage": stage, "wp": Signal(16, name="fifo_a_wp"), "n": Signal(range(d + 1), name="fifo_a_n"),
                   "hit": [Signal(name=f"fifo_bypass{b}") for b in range(d)]}
            for b in range(d):
                m.d.sync += [stage[b].we.eq(wport[b].we), stage[b].waddr.eq(wport[b].waddr)]
                with m.If(wport[b].we):
                    m.d.sync += stage[b].wdata.eq(wport[b].wdata)
                m.d.comb += [fifo[b].we.eq(stage[b].we & ~byp["hit"][b]), fifo[b].waddr.eq(stage[b].waddr),
                             fifo[b].wdata.eq(stage[b].wdata)]
        rank = Const(0, 16)
        for p in range(d):
            e = tables[p].rdata
            a_cls, cb = e[:2], e[2:2 + cbb]
            obank = e[2 + cbb + brows * tb:2 + cbb + brows * tb + self.obk]
            ores = obank[0] if nb == 2 else e[2 + cbb + brows * tb + self.obk:]
            toks = Array(e[2 + cbb + i * tb:2 + cbb + (i + 1) * tb] for i in range(brows))
            tok = toks[r_row[p * rb:(p + 1) * rb]]
            addr = Signal(self.da, name=f"row_addr{p}")
            if W == 1:
                m.d.comb += addr.eq((a_cls * m_tok + tok) * self.o_ncb + cb)
            else:  # way (a M + t) mod W low, ((a M + t) div W) n_cb + cb in the way (D107)
                u = Signal(range(MAX_CLASSES * acc.max_tokens + 1), name=f"row_u{p}")
                m.d.comb += [u.eq(a_cls * m_tok + tok), addr.eq(Cat(u[:lw], u[lw:] * self.o_ncb + cb))]
                if self.seg_local:  # D125: o_local, the segment's slot (a fw + f mod fw) R + t mod R, way low
                    kb = e[2 + cbb + brows * tb + self.obk + self.resb:][:self.kbb]
                    # D138: the segment's sub-slot in its buffer, a slot (classes fw R words) above
                    sub_e = e[2 + cbb + brows * tb + self.obk + self.resb + self.kbb:][:self.subb] if self.subb \
                        else Const(0, 1)
                    dl = Signal(tb + 1, name=f"row_dt{p}")  # t - the chunk's first token: (f mod fw) H W + p
                    m.d.comb += dl.eq(tok - kb)
                    fr = Signal(range(self.fw_max), name=f"row_fr{p}")  # f mod fw: the j H W it reaches
                    m.d.comb += fr.eq(sum((dl >= hw_ * j for j in range(1, self.fw_max)), Const(0, 1)))
                    ul = Signal(range(self.sub_max * MAX_CLASSES * self.fw_max * R + 1), name=f"row_ul{p}")
                    m.d.comb += ul.eq(((sub_e * self.o_classes + a_cls) * self.o_fw + fr) * R
                                      + tok[:(R - 1).bit_length()])
                    with m.If(self.o_local):
                        m.d.comb += addr.eq(ul)
            slot = Signal(16, name=f"row_slot{p}")
            m.d.comb += slot.eq(wp + rank)
            for b in range(d):
                with m.If(r_v[p] & (slot[:lg] == b) if d > 1 else r_v[p]):
                    m.d.comb += [wport[b].we.eq(1), wport[b].waddr.eq(slot[lg:]),
                                 wport[b].wdata.eq(Cat(addr, obank, r_data[p * C * ab:(p + 1) * C * ab]))]
            with m.If(r_v[p]):
                m.d.sync += parb.word_select(slot[:qb] if Q > 1 else 0, rs).eq(ores)
                if W > 1:
                    m.d.sync += wayb.word_select(slot[:qb], lw).eq(addr[:lw])
                if bankb is not None:
                    m.d.sync += bankb.word_select(slot[:qb], self.obk).eq(obank)
            rank = rank + r_v[p]
        if byp:  # stage A's entries next cycle: [wp, wp + rank)
            m.d.sync += [byp["wp"].eq(wp), byp["n"].eq(rank)]
        count = Signal(16, name="fifo_count")
        m.d.comb += count.eq(wp - rp)
        m.d.sync += wp.eq(wp + rank)
        over = Signal(name="overflow_q")
        with m.If((phase == 1) & (wp + rank - rp > Q)):
            m.d.sync += over.eq(1)
        m.d.comb += self.overflow.eq(over)
        if self.array_hold:  # D116's rule: d free entries at the cycle's start (written by the cycle before: wp and
            # this cycle's writes, the rows registered from the cycle before; popped before it: rp); all registers
            free_n = Signal(16, name="fifo_written")
            m.d.comb += [free_n.eq(wp + rank - rp), self.run.eq((phase != 1) | (free_n + d <= Q))]
        pop = Signal(name="fifo_pop")
        # --- the walk's state (used by the pop's gate): the block walked or waited for, and its parity
        sord = Signal(self.ob, name="w_seg")  # the walk's segment ordinal
        # its D buffer: the ordinal's parity, or with n > 2 buffers a residue counter mod n (D115)
        wres = sord[0] if nb == 2 else Signal(self.resb, name="w_seg_res")
        walking, waiting = Signal(name="walking"), Signal(name="waiting")
        whole = Signal(name="cb_whole")
        headpar = Signal(rs, name="fifo_head_parity" if nb == 2 else "fifo_head_residue")
        m.d.comb += headpar.eq(parb.word_select(rp[:qb] if Q > 1 else 0, rs))
        # a row of the walked block's parity waits while that block is walked or about to be (its D buffer is read)
        if W == 1:
            m.d.comb += pop.eq((phase == 1) & (count != 0) & ~((headpar == sord[0]) & (walking | (waiting & whole))))
            rbank = Signal(range(max(2, d)), name="fifo_rbank")
            for b in range(d):
                m.d.comb += [fifo[b].re.eq(pop & ((rp[:lg] == b) if d > 1 else 1)), fifo[b].raddr.eq(rp[lg:])]
            with m.If(pop):
                m.d.sync += rp.eq(rp + 1)
            m.d.sync += rbank.eq(rp[:lg] if d > 1 else 0)
            s1 = Signal(name="acc_s1")
            m.d.sync += s1.eq(pop)
            popped = Signal(self.fifo_bits, name="fifo_out")
            sel_data = fifo[0].rdata
            for b in range(1, d):
                sel_data = Mux(rbank == b, fifo[b].rdata, sel_data)
            m.d.comb += popped.eq(sel_data)
            p_cb = popped[self.da:self.da + self.obk]  # the row's segment's count bank
            seen = []  # one bank per D buffer (column-block parity): the accumulate sets one while the walk clears the other
            for b in range(2):
                ports, mac = macro("1r1w", self.seen_depth, 1, instance=inst)
                m.submodules[f"seen{b}"] = mac
                m.d.comb += [ports.re.eq(s1 & (p_cb[0] == b)), ports.raddr.eq(popped[:self.da]), ports.wmask.eq(1)]
                seen.append(ports)
            s2, s2_addr, s2_data = Signal(name="acc_s2"), Signal(self.da, name="acc_addr"), Signal(C * ab, name="acc_data")
            s2_cb = Signal(self.obk, name="acc_bank")
            s2_fwd = Signal(name="acc_fwd")
            m.d.sync += [s2.eq(s1), s2_addr.eq(popped[:self.da]), s2_cb.eq(p_cb), s2_data.eq(popped[self.da + self.obk:]),
                         s2_fwd.eq(s1 & s2 & (s2_addr == popped[:self.da]))]
            seen_rd = Mux(s2_cb[0], seen[1].rdata[0], seen[0].rdata[0])
            m.d.comb += [cmb.a_valid.eq(s2), cmb.a_first.eq(~(seen_rd | s2_fwd)), cmb.a_addr.eq(s2_addr),
                         cmb.a_data.eq(s2_data)]
            s1_par, s2_par = p_cb[0], s2_cb[0]
            s1_in, s2_in = s1 & (s1_par == sord[0]), s2 & (s2_par == sord[0])  # a row of the walked parity
        else:
            s1h, s2h, s2p, seen, s2v, s2_cb = self._ways_accumulate(
                m, cmb, fifo, parb, wayb, headpar, rp, count, phase, wres, walking, waiting, whole, inst, byp,
                bankb, sord)
            s1, s2 = s1h[0] | s1h[1], s2h[0] | s2h[1]
            s1_in, s2_in = Mux(wres, s1h[1], s1h[0]), Mux(wres, s2h[1], s2h[0])
            for b in range(2, nb):  # n > 2 buffers (D115)
                s1, s2 = s1 | s1h[b], s2 | s2h[b]
                s1_in, s2_in = Mux(wres == b, s1h[b], s1_in), Mux(wres == b, s2h[b], s2_in)

        # --- per column block (banked by cb mod NB_BANKS): rows its descriptors list, rows accumulated; the
        # largest column block a descriptor has named (a later block's descriptor: this one's are all taken)
        nbk = NB_BANKS
        cnt_w = _bits(acc.max_tokens * G + 1)
        exp = [Signal(cnt_w, name=f"seg_rows{k}") for k in range(nbk)]
        got = [Signal(cnt_w, name=f"seg_acc{k}") for k in range(nbk)]
        hi, anyd = Signal(self.ob, name="desc_seg_max"), Signal(name="desc_seen")
        kb = self.obk
        # --- output walk
        fin = Signal(name="accel_done_seen")
        g0, rp_, fc = (Signal(cbb + 1, name="w_group"), Signal(cbb + 1, name="w_rep"),
                       Signal(range(acc.max_tokens + 1), name="w_fc"))
        cb = Signal(cbb + 1, name="w_cb")
        gk = Signal(cbb + 1, name="w_group_k")  # column blocks of the walked group: min(s, n_cb - g0)
        m.d.comb += [cb.eq(g0 + rp_), gk.eq(Mux(g0 + self.o_s > self.o_ncb, self.o_ncb - g0, self.o_s))]
        pool, f, i, a = (Signal(range(acc.max_tokens + 1), name="w_pool"), Signal(range(acc.max_tokens + 1),
                         name="w_f"), Signal(range(R), name="w_i"), Signal(2, name="w_a"))
        x, x0 = Signal(range(acc.max_tokens + 1), name="w_x"), Signal(range(acc.max_tokens + 1), name="w_x0")
        f0 = Signal(range(2 * acc.max_tokens + 1), name="w_f0")  # the chunk's first frame
        m.d.comb += f0.eq(fc * self.o_fw)
        bank = sord[:kb]
        e_cur, g_cur = exp[0], got[0]
        for k in range(1, nbk):
            e_cur, g_cur = Mux(bank == k, exp[k], e_cur), Mux(bank == k, got[k], g_cur)
        done_now = fin | a_done
        # whole: issued segment by segment (o_seg): every row the segment's descriptors list accumulated and a later
        # segment's descriptor taken (or the controller done); otherwise the whole op accumulated (the walk after it)
        later = anyd & (hi > sord)  # a later segment's descriptor counted
        if self.issue_hold:  # D126: or the next one held by the issue gate once the earlier ones are counted
            later = later | self._issue_gate(m, ap, sord, d1_v, bases, ks, host_dec, inst)
        m.d.comb += whole.eq(Mux(self.o_seg, (done_now | later) & (e_cur == g_cur),
                                 done_now & (count == 0) & ~s1 & ~s2 & (rank == 0) & (r_v == 0)))
        go = Signal(name="walk_go")
        m.d.comb += go.eq(waiting & whole & ~s1_in & ~s2_in)
        p_ = Signal(range(acc.max_tokens + 1), name="w_p")
        t = Signal(range(2 * acc.max_tokens + 1), name="w_t")
        axes = Array(self.o_axis[2 * k:2 * k + 2] for k in range(MAX_CLASSES))
        axis = Signal(2, name="w_axis")
        m.d.comb += [p_.eq(pool + i), t.eq(f * hw_ + p_), axis.eq(axes[a])]
        last_a = a == self.o_classes - 1
        last_i = (i == R - 1) | (p_ + 1 == hw_) if V == 1 else (i + V >= R) | (p_ + V >= hw_)
        last_rep = rp_ + 1 >= gk
        last_fc = fc == self.o_nfc - 1
        last_g = g0 + gk >= self.o_ncb
        last_f = f == self.o_f - 1
        last_fch = last_f | (f + 1 == f0 + self.o_fw)  # the chunk's last frame
        last_pool = pool + R >= hw_
        # (with V lanes, o_w >= V: one wrap, core_ports; V divides R, so a pool's last full run ends at its end)
        x_next = Mux(x == self.o_w - 1, 0, x + 1) if V == 1 else Mux(x + V >= self.o_w, x + V - self.o_w, x + V)
        succ_ex = Signal(name="w_succ_exists")
        succ_t = Signal(range(3 * acc.max_tokens + 1), name="w_succ_t")
        m.d.comb += [succ_ex.eq(Mux(axis == 2, x != self.o_w - 1,
                                    Mux(axis == 1, p_ + self.o_w < hw_, ~last_f))),
                     succ_t.eq(t + Mux(axis == 2, 1, Mux(axis == 1, self.o_w, hw_)))]
        if V == 1:
            m.d.comb += [decs[0].re.eq(walking), decs[0].raddr.eq(t), decs[1].re.eq(walking & succ_ex),
                         decs[1].raddr.eq(succ_t)]
        else:
            lanes = self._walk_lanes(m, decs, walking, t, succ_t, p_, x, i, axis, last_f, hw_)
        # registered command fields (the issue stage)
        q = {n: Signal(len(s), name=f"q_{n}") for n, s in (("v", walking), ("a", a), ("axis", axis), ("t", t),
                                                              ("p", p_), ("f", f), ("cb", cb), ("i", i), ("x", x),
                                                              *((("rep", rp_),) if self.pool_state else ()),
                                                              ("succ", succ_ex), ("first", walking),
                                                              ("last", walking), ("end", walking),
                                                              ("ord0", wres))}
        m.d.sync += [q["v"].eq(walking), q["a"].eq(a), q["axis"].eq(axis), q["t"].eq(t), q["p"].eq(p_),
                     q["f"].eq(f), q["cb"].eq(cb), q["i"].eq(i), q["x"].eq(x), q["succ"].eq(succ_ex),
                     q["first"].eq(a == 0), q["last"].eq(last_a),
                     q["ord0"].eq(wres), *((q["rep"].eq(rp_),) if self.pool_state else ()),
                     q["end"].eq(walking & last_a & last_i & last_fch & last_rep & last_fc & last_pool & last_g)]
        if self.seg_local:  # D125: the frame within the chunk, f - f0 (the slot's f mod fw)
            q["fr"] = Signal(range(self.fw_max), name="q_fr")
            m.d.sync += q["fr"].eq(f - f0)
            # D138: the walked segment's sub-slot (w_seg div n) mod k, a counter stepped where its buffer wraps
            w_sub = Signal(max(1, self.subb), name="w_sub")
            q["sub"] = Signal(max(1, self.subb), name="q_sub")
            m.d.sync += q["sub"].eq(w_sub)
        gcls = [self.o_gclass[2 * g:2 * g + 2] for g in range(G)]
        if V > 1:  # V lanes a step (D112)
            self._issue_lanes(m, cmb, seen, s2v, s2p, decs, lanes, q, gcls, m_tok, hw_)
        else:
            code = [decs[0].rdata[2 * g:2 * g + 2] for g in range(G)]
            scode = [decs[1].rdata[2 * g:2 * g + 2] for g in range(G)]
            direct, has, sdirect = Const(1, 1), Const(0, 1), Const(1, 1)
            for g in range(G):
                mine = gcls[g] == q["a"]
                direct = direct & (~mine | (code[g] == 0))
                has = has | (mine & (code[g] != 2))
                sdirect = sdirect & (~mine | (scode[g] == 0))
            dir_s, has_s, succ = Signal(name="c_direct_w"), Signal(name="c_has_w"), Signal(name="c_succ_w")
            m.d.comb += [dir_s.eq(direct), has_s.eq(has), succ.eq(q["succ"] & ~sdirect)]
            is_w = q["axis"] == 2
            near = is_w & (q["x"] != 0) & (q["i"] != 0)
            succ_near = is_w & (q["i"] != R - 1)
            ncb = self.o_ncb
            waddr_ps = Signal(self.ra + 8, name="c_waddr_ps")
            m.d.comb += waddr_ps.eq((((q["a"] * self.o_f + q["f"]) * hw_) + q["p"]) * ncb + q["cb"])
            back = Mux(q["axis"] == 2, ncb, Mux(q["axis"] == 1, self.o_w * ncb, hw_ * ncb))
            waddr_st = Signal(self.ra + 8, name="c_waddr_st")
            m.d.comb += waddr_st.eq(self._regions(q, q["i"], q["x"], ncb, q["cb"]))
            raddr_ps, waddr_ps_ = waddr_ps - back, waddr_ps
            if self.pool_state:  # the state buffer per pool (D133): the regions over the group's column blocks
                waddr_pool = Signal(self.ra + 8, name="c_waddr_pool")
                m.d.comb += waddr_pool.eq(self._regions(q, q["i"], q["x"], self.o_s, q["rep"]))
                raddr_ps = waddr_ps_ = waddr_pool
            cols = Signal(range(C + 1), name="c_cols_w")
            rest = Signal(range(acc.max_n + 1), name="c_rest")
            m.d.comb += [rest.eq(self.o_n - q["cb"] * C), cols.eq(Mux(rest >= C, C, rest))]
            daddr = Signal(self.da, name="c_daddr_w")
            if W == 1:
                m.d.comb += daddr.eq((q["a"] * m_tok + q["t"]) * ncb + q["cb"])
            else:  # the accumulate's layout (D107): way (a M + t) mod W low
                wu = Signal(range(MAX_CLASSES * acc.max_tokens + 1), name="c_u_w")
                m.d.comb += [wu.eq(q["a"] * m_tok + q["t"]), daddr.eq(Cat(wu[:lw], wu[lw:] * ncb + q["cb"]))]
                if self.seg_local:  # D125: the segment's slot (a fw + f mod fw) R + t mod R
                    with m.If(self.o_local):
                        m.d.comb += daddr.eq(self._slot(q, 0))
            m.d.comb += [cmb.c_valid.eq(q["v"]), cmb.c_first.eq(q["first"]), cmb.c_last.eq(q["last"]),
                         cmb.c_direct.eq(dir_s), cmb.c_has.eq(has_s), cmb.c_daddr.eq(daddr),
                         cmb.c_reg.eq(near & ~dir_s), cmb.c_sram.eq(self.o_fused),
                         cmb.c_raddr.eq(Mux(self.o_fused, waddr_st, raddr_ps)),
                         cmb.c_waddr.eq(Mux(self.o_fused, waddr_st, waddr_ps_)),
                         cmb.c_keep.eq(succ & ~succ_near), cmb.c_hold.eq(succ & succ_near), cmb.c_cols.eq(cols)]
            # the D buffer the accumulate writes (its row's block parity); the walk reads the other, its block's
            # (ways: the output reads the walked segment's buffer, each way writes its row's, D107)
            if nb == 2:
                m.d.comb += cmb.c_sel.eq(Mux(s2, s2_par, ~q["ord0"]) if W == 1 else ~q["ord0"])
            else:  # n > 2 buffers (D115): the output reads the walked segment's
                m.d.comb += cmb.c_buf.eq(q["ord0"])
            # the seen banks: set by the accumulate stream, cleared by the walk (never the same bank in one cycle)
            for b in range(nb):
                clr = q["v"] & (q["ord0"] == b)
                if W == 1:
                    m.d.comb += [seen[b].we.eq((s2 & (s2_cb[0] == b)) | clr), seen[b].waddr.eq(Mux(clr, daddr, s2_addr)),
                                 seen[b].wdata.eq(~clr)]
                    continue
                for w in range(W):  # way w's bank of buffer b
                    cw = clr & (daddr[:lw] == w)
                    m.d.comb += [seen[b][w].we.eq((s2v[w] & (s2p[w * rs:(w + 1) * rs] == b)) | cw),
                                 seen[b][w].waddr.eq(Mux(cw, daddr[lw:], seen[b][w].s2_addr)), seen[b][w].wdata.eq(~cw)]
        # tags and done: the combine's row leaves 2 cycles after its command
        t1, t2 = Signal(tb, name="tag_t1"), Signal(tb, name="tag_t2")
        c1, c2 = Signal(cbb, name="tag_cb1"), Signal(cbb, name="tag_cb2")
        e1, e2 = Signal(name="tag_end1"), Signal(name="tag_end2")
        m.d.sync += [t1.eq(q["t"]), c1.eq(q["cb"]), t2.eq(t1), c2.eq(c1), e1.eq(q["v"] & q["end"]), e2.eq(e1)]
        m.d.comb += [self.y_valid.eq(cmb.y_valid), self.y_data.eq(cmb.y_data), self.y_token.eq(t2),
                     self.y_cb.eq(c2)]
        m.d.sync += self.done.eq(e2)

        with m.If(a_done):
            m.d.sync += fin.eq(1)
        start_now = (phase == 0) & self.start
        for k in range(nbk):
            with m.If(start_now | (go & (bank == k))):  # a block's bank is free once its walk goes
                m.d.sync += [exp[k].eq(0), got[k].eq(0)]
            with m.Else():
                with m.If(d1_v & (d1_ord[:kb] == k)):
                    m.d.sync += exp[k].eq(exp[k] + d1_nrows)
                if W == 1:
                    with m.If(s2 & ((s2_cb[:kb] == k) if kb else 1)):
                        m.d.sync += got[k].eq(got[k] + 1)
                else:  # the ways accumulated this cycle into segment bank k
                    n_k = sum(s2v[w] & ((s2_cb[w][:kb] == k) if kb else 1) for w in range(W))
                    m.d.sync += got[k].eq(got[k] + n_k)
        with m.If(start_now):
            m.d.sync += [hi.eq(0), anyd.eq(0)]
        with m.Elif(d1_v):
            m.d.sync += anyd.eq(1)
            with m.If(d1_ord > hi):
                m.d.sync += hi.eq(d1_ord)
            with m.If(self.o_seg & (d1_ord >= sord + nbk)):  # its bank still holds a segment not walked
                m.d.sync += over.eq(1)
        with m.Switch(phase):
            with m.Case(0):
                with m.If(self.start):
                    if nb > 2:
                        m.d.sync += wres.eq(0)
                    if self.seg_local:
                        m.d.sync += w_sub.eq(0)
                    m.d.sync += [phase.eq(3 if self.front else 1), fin.eq(0), over.eq(0), wp.eq(0), rp.eq(0),
                                 waiting.eq(1), walking.eq(0), pool.eq(0), f.eq(0), i.eq(0), a.eq(0), x.eq(0),
                                 x0.eq(0), g0.eq(0), rp_.eq(0), fc.eq(0), sord.eq(0)]
            if self.front:
                with m.Case(3):  # the similarity front: the controller starts with its done pulse
                    with m.If(fr.done):
                        m.d.sync += phase.eq(1)
            with m.Case(1):
                with m.If(go):
                    m.d.sync += [walking.eq(1), waiting.eq(0)]
                with m.If(walking):
                    with m.If(~last_a):
                        m.d.sync += a.eq(a + 1)
                    with m.Else():
                        m.d.sync += a.eq(0)
                        with m.If(~last_i):
                            m.d.sync += [i.eq(i + V), x.eq(x_next)]
                        with m.Else():
                            m.d.sync += i.eq(0)
                            with m.If(~last_fch):
                                m.d.sync += [f.eq(f + 1), x.eq(x0)]
                            with m.Else():  # the segment's last command: wait for the next segment to be whole
                                # (without o_seg the op is all accumulated: the next segment follows at once)
                                more = ~(last_rep & last_fc & last_pool & last_g)
                                m.d.sync += [walking.eq(more & ~self.o_seg), sord.eq(sord + 1),
                                             waiting.eq(more & self.o_seg)]
                                if nb > 2:
                                    m.d.sync += wres.eq(Mux(wres == nb - 1, 0, wres + 1))
                                if self.seg_local and self.subb:  # D138: the next buffer round's sub-slot
                                    with m.If(wres == nb - 1):
                                        m.d.sync += w_sub.eq(Mux(w_sub + 1 >= kslot, 0, w_sub + 1))
                                with m.If(~last_rep):  # the chunk again, the group's next column block
                                    m.d.sync += [rp_.eq(rp_ + 1), f.eq(f0), x.eq(x0)]
                                with m.Elif(~last_fc):  # the pool's next chunk of frames
                                    m.d.sync += [rp_.eq(0), fc.eq(fc + 1), f.eq(f0 + self.o_fw), x.eq(x0)]
                                with m.Elif(~last_pool):
                                    m.d.sync += [rp_.eq(0), fc.eq(0), f.eq(0), pool.eq(pool + R), x.eq(x_next),
                                                 x0.eq(x_next)]
                                with m.Elif(~last_g):  # the next column-block group
                                    m.d.sync += [rp_.eq(0), fc.eq(0), f.eq(0), pool.eq(0), g0.eq(g0 + self.o_s),
                                                 x.eq(0), x0.eq(0)]
                with m.If(e2):
                    m.d.sync += phase.eq(0)
        return m

    def _issue_gate(self, m, ap, sord, d1_v, bases, ks, host_dec, inst):
        """The issue hold (docs/decisions.md D126): drives ``kaleido_daccel``'s ``issue_ok`` and returns ``pend``, the
        held next descriptor standing for "a later segment's descriptor has come".

        The next descriptor's segment ``base[cb] + chunk k[cb]`` from a second chunk-table copy (written with the
        first) read at its first token every cycle the controller runs; the read's token is registered beside it
        (``gate_tok``, with ``next_valid`` in ``gate_v``), so the segment is *fresh* when the token shown now is the
        one read: the host list's read-ahead a cycle after it appears (a cycle before the gather can take); with the
        queues the word their output register loads is read at the load (``load_valid``, ``load_desc``, D137), so an
        emission is fresh the cycle it is shown (D126 read the shown one: a cycle later). ``issue_ok = fresh & (~o_seg |
        seg - w_seg < bound)``; ``pend`` = fresh, ``o_seg``, out of bound, no descriptor in the count stage."""
        acc, tb = self.accel, self.tb
        run = self.run if self.array_hold else Const(1, 1)
        pos, off = {}, 0
        for name, bits in acc.fields:
            pos[name] = (off, bits)
            off += bits
        n_tok = ap.next_desc[pos["tokens"][0]:pos["tokens"][0] + tb]
        n_cb = ap.next_desc[pos["cb"][0]:pos["cb"][0] + self.cbb]
        # D137: with the queues the word their output register loads is read in the cycle of the load, so an
        # emission is fresh the cycle it is shown (the host list's read-ahead is fresh before the gather can take)
        loads = "load_valid" in acc.signature.members
        l_v = ap.load_valid if loads else Const(0, 1)
        r_tok = Mux(l_v, ap.load_desc[pos["tokens"][0]:pos["tokens"][0] + tb], n_tok) if loads else n_tok
        ch, cmac = macro("1r1w", acc.max_tokens, self.chb, instance=inst)
        m.submodules.gate_chunks = cmac
        G = self.cfg.partial_regs  # noqa: N806
        m.d.comb += [ch.we.eq(host_dec), ch.waddr.eq(self.wr_addr), ch.wmask.eq(1),
                     ch.wdata.eq(self.wr_data[2 * G:2 * G + self.chb]), ch.re.eq(run), ch.raddr.eq(r_tok)]
        s_tok, s_v = Signal(tb, name="gate_tok"), Signal(name="gate_v")
        with m.If(run):
            m.d.sync += [s_tok.eq(r_tok), s_v.eq(ap.next_valid | l_v)]
        seg_n = Signal(self.ob, name="gate_seg")
        m.d.comb += seg_n.eq(bases[n_cb] + ch.rdata * ks[n_cb])
        fresh, near = Signal(name="gate_fresh"), Signal(name="gate_near")
        dist = Signal(self.ob + 1, name="gate_dist")
        m.d.comb += [fresh.eq(ap.next_valid & s_v & (s_tok == n_tok)), dist.eq(seg_n - sord),
                     near.eq(dist < (Mux(self.o_local, self.o_slots, self.issue_bound) if self.seg_local
                                     else self.issue_bound)), ap.issue_ok.eq(fresh & (~self.o_seg | near))]
        pend = Signal(name="gate_pend")
        m.d.comb += pend.eq(fresh & self.o_seg & ~near & ~ap.desc_valid & ~d1_v)
        return pend

    def _ways_accumulate(self, m, cmb, fifo, parb, wayb, headpar, rp, count, phase, wres, walking, waiting, whole,
                         inst, byp=None, bankb=None, sord=None):  # noqa: N803
        """The accumulate path on W > 1 ways (docs/decisions.md D107; `elaborate` builds one way inline): pops the
        FIFO's longest run from its head of at most W entries, none waiting for its D buffer, all of the head's
        parity, in distinct ways (each entry's way in flops), reading each from its FIFO bank (W <= d: distinct);
        way w's row is registered at s1 (its bank), its seen bit read from way w's seen bank, and at s2 its
        command issues on the combine's way w. Returns ``(per parity p whether s1 holds a row of it, the same for s2,
        s2 parity per way, seen banks [buffer][way] (each with its ``s2_addr``), s2 valid per way, s2 count bank
        per way)``."""
        cfg, W = self.cfg, self.ways  # noqa: N806
        d, C, ab, Q = cfg.drain_rows_per_cycle, cfg.array_cols, cfg.acc_bits, self.fifo  # noqa: N806
        lg, lw, qb = (d - 1).bit_length(), (W - 1).bit_length(), (Q - 1).bit_length()
        da, daw = self.da, self.da - lw
        nb, rs = self.d_buffers, max(1, self.resb)
        gate = (headpar == wres) & (walking | (waiting & whole))
        if bankb is not None:  # D125, o_local: an entry waits while its segment is o_slots or more past the walked
            # one (its slot holds that earlier segment until it is walked; D138: o_slots segment slots, n with one a
            # buffer), from the count banks: (bank - walked) mod 8; and, as with the op's address, while its buffer
            # is walked or about to be (D138: a buffer's other slots share its ports with the walk)
            def waits(e_idx):
                dist = Signal(self.obk, name=f"pop_dist{len(waits.made)}")
                waits.made.append(dist)
                m.d.comb += dist.eq(bankb.word_select(e_idx, self.obk) - sord[:self.obk])
                return dist >= self.o_slots
            waits.made = []
        takes, ways_j, banks_j, pars_j, inas = [], [], [], [], []
        for j in range(W):
            e = Signal(16, name=f"pop_e{j}")
            m.d.comb += e.eq(rp + j)
            par_j, way_j = parb.word_select(e[:qb], rs), wayb.word_select(e[:qb], lw)
            t = Signal(name=f"pop_take{j}")
            g_j = gate if j == 0 else (par_j == wres) & (walking | (waiting & whole))
            if bankb is not None:
                g_j = g_j | (self.o_local & waits(e[:qb]))
            if j == 0:
                m.d.comb += t.eq((phase == 1) & (count != 0) & ~g_j)
            else:
                distinct = Const(1, 1)
                for w_i in ways_j:
                    distinct = distinct & (way_j != w_i)
                m.d.comb += t.eq(takes[-1] & (count > j) & ~g_j & distinct)
            ina = Const(0, 1)
            if byp:  # D118: entry e still in stage A (written last cycle): popped from there, the macros untouched
                ina = Signal(name=f"pop_bypass{j}")
                m.d.comb += ina.eq((e - byp["wp"])[:16] < byp["n"])
            for b in range(d):
                with m.If(t & ((e[:lg] == b) if d > 1 else 1)):
                    m.d.comb += [fifo[b].re.eq(~ina if byp else 1), fifo[b].raddr.eq(e[lg:])]
                    if byp:
                        m.d.comb += byp["hit"][b].eq(ina)
            inas.append(ina)
            takes.append(t)
            pars_j.append(par_j)
            ways_j.append(way_j)
            banks_j.append(e[:lg] if d > 1 else Const(0, 1))
        npop = Signal(range(W + 1), name="pop_n")
        m.d.comb += npop.eq(sum(takes))
        m.d.sync += rp.eq(rp + npop)
        # per way: valid, parity (n > 2 buffers: residue, rs bits a way, D115)
        s1v, s1p = Signal(W, name="acc_s1_v"), Signal(W * rs, name="acc_s1_par" if nb == 2 else "acc_s1_res")
        s1src = [Signal(max(1, lg), name=f"acc_s1_bank{w}") for w in range(W)]
        if byp:  # D118: per way whether its row came from stage A, and that row
            s1byp = Signal(W, name="acc_s1_byp")
            s1bd = [Signal(self.fifo_bits, name=f"acc_s1_bypd{w}") for w in range(W)]
            sdata = Array(st.wdata for st in byp["stage"])
        for w in range(W):
            hit = Const(0, 1)
            for j in range(W):
                hj = takes[j] & (ways_j[j] == w)
                hit = hit | hj
                with m.If(hj):
                    m.d.sync += [s1src[w].eq(banks_j[j]), s1p[w * rs:(w + 1) * rs].eq(pars_j[j])]
                    if byp:
                        m.d.sync += s1byp[w].eq(inas[j])
                        with m.If(inas[j]):
                            m.d.sync += s1bd[w].eq(sdata[banks_j[j]])
            m.d.sync += s1v[w].eq(hit)
        seen = [[None] * W for _ in range(nb)]
        for b in range(nb):
            for w in range(W):
                ports, mac = macro("1r1w", self.seen_depth, 1, instance=inst)
                m.submodules[f"seen{b}_w{w}"] = mac
                m.d.comb += ports.wmask.eq(1)
                seen[b][w] = ports
        s2v, s2p = Signal(W, name="acc_s2_v"), Signal(W * rs, name="acc_s2_par" if nb == 2 else "acc_s2_res")
        m.d.sync += [s2v.eq(s1v), s2p.eq(s1p)]
        s2_cbs, a_first, a_addr, a_data = [], [], [], []
        for w in range(W):
            popped = Signal(self.fifo_bits, name=f"fifo_out{w}")
            sel_data = fifo[0].rdata
            for b in range(1, d):
                sel_data = Mux(s1src[w] == b, fifo[b].rdata, sel_data)
            m.d.comb += popped.eq(Mux(s1byp[w], s1bd[w], sel_data) if byp else sel_data)
            p_cb = popped[da:da + self.obk]
            s1r, s2r = s1p[w * rs:(w + 1) * rs], s2p[w * rs:(w + 1) * rs]
            for b in range(nb):
                m.d.comb += [seen[b][w].re.eq(s1v[w] & (s1r == b)), seen[b][w].raddr.eq(popped[lw:da])]
            s2_addr, s2_data = Signal(daw, name=f"acc_addr{w}"), Signal(C * ab, name=f"acc_data{w}")
            s2_cb, s2_fwd = Signal(self.obk, name=f"acc_bank{w}"), Signal(name=f"acc_fwd{w}")
            m.d.sync += [s2_addr.eq(popped[lw:da]), s2_cb.eq(p_cb), s2_data.eq(popped[da + self.obk:]),
                         s2_fwd.eq(s1v[w] & s2v[w] & (s2_addr == popped[lw:da]))]
            for b in range(nb):
                seen[b][w].s2_addr = s2_addr
            seen_rd = Mux(s2r, seen[1][w].rdata[0], seen[0][w].rdata[0])
            for b in range(2, nb):
                seen_rd = Mux(s2r == b, seen[b][w].rdata[0], seen_rd)
            s2_cbs.append(s2_cb)
            a_first.append(~(seen_rd | s2_fwd))
            a_addr.append(s2_addr)
            a_data.append(s2_data)
        m.d.comb += [cmb.a_valid.eq(s2v), cmb.a_first.eq(Cat(*a_first)), cmb.a_addr.eq(Cat(*a_addr)),
                     cmb.a_data.eq(Cat(*a_data)), cmb.a_sel.eq(s2p)]
        # per stage, whether it holds a row of parity 0, of parity 1 (the walk's go); n > 2: of each residue (D115)
        if nb == 2:
            s1h = [(s1v & ~s1p).any(), (s1v & s1p).any()]
            s2h = [(s2v & ~s2p).any(), (s2v & s2p).any()]
        else:
            s1h = [Cat(*(s1v[w] & (s1p[w * rs:(w + 1) * rs] == b) for w in range(W))).any() for b in range(nb)]
            s2h = [Cat(*(s2v[w] & (s2p[w * rs:(w + 1) * rs] == b) for w in range(W))).any() for b in range(nb)]
        return s1h, s2h, s2p, seen, s2v, s2_cbs

    def _slot(self, q, lane: int):
        """The walk's D address with ``o_local`` (docs/decisions.md D125): lane ``lane``'s token's slot
        ``(a fw + f - f0) R + (t + lane) mod R`` (way low), `sim.timing.delta_core.segment_slot`."""
        R = self.cfg.array_rows  # noqa: N806
        return ((q["sub"] * self.o_classes + q["a"]) * self.o_fw + q["fr"]) * R + (q["t"] + lane)[:(R - 1).bit_length()]

    def _regions(self, q, i, x, nblk, blk):
        """A carried value's word in a store of regions (docs/decisions.md D79's state-SRAM layout; D133's state buffer
        per pool): by the command's axis, the pool slot i (``f``), the frame's word ``R + f`` (``w``: the pool's last
        position, read by the next pool's first) or the (frame, column) word ``R + F + f W + x`` (``h``), each times
        ``nblk`` column blocks plus the block ``blk``."""
        R = self.cfg.array_rows  # noqa: N806
        return Mux(q["axis"] == 0, i * nblk + blk,
                   Mux(q["axis"] == 2, (R + q["f"]) * nblk + blk,
                       (R + self.o_f + q["f"] * self.o_w + x) * nblk + blk))

    def _lane_regions(self, q, il, xl, nblk, blk):
        """`_regions` in V position banks (docs/decisions.md D112; bank low, log2 V bits): the pool slot ``il`` in bank
        ``il mod V``, the frame's word in bank 0, the (frame, column ``xl``) word in bank ``xl mod V`` (``o_w`` a
        multiple of V, `core_ports`), ``R / V + ...`` the regions within a bank."""
        R, V = self.cfg.array_rows, self.out_ways  # noqa: N806
        lv = (V - 1).bit_length()
        return Mux(q["axis"] == 0, Cat(il[:lv], il[lv:] * nblk + blk),
                   Mux(q["axis"] == 2, Cat(Const(0, lv), (R // V + q["f"]) * nblk + blk),
                       Cat(xl[:lv], (R // V + self.o_f + q["f"] * self.o_w[lv:] + xl[lv:]) * nblk + blk)))

    def _walk_lanes(self, m, decs, walking, t, succ_t, p_, x, i, axis, last_f, hw_) -> dict:  # noqa: N803
        """The walk stage's V lanes (docs/decisions.md D112, D111's items 1-2): lane l is position ``p + l`` of the
        pool (valid while ``i + l < R`` and ``p + l < H W``; lane 0 always), ``x + l`` wrapped once at ``o_w``; its
        token and its successor along the class's axis read from the decision copies' V banks (token mod V: a step's
        V tokens and their V successors are consecutive, so each bank is read once, bank b at
        ``t div V + (b < t mod V)``). Returns the issue stage's registers ``{"lv": lanes valid, "succ": lanes with
        a successor, "tlow": t mod V, "stlow": the successor's}``."""
        R, V = self.cfg.array_rows, self.out_ways  # noqa: N806
        lv = (V - 1).bit_length()
        lane_v, succ_v = Signal(V, name="w_lane_v"), Signal(V, name="w_lane_succ")
        for lane in range(V):
            xl = x + lane
            xw = Mux(xl >= self.o_w, xl - self.o_w, xl)
            ok = Const(1, 1) if lane == 0 else (i + lane < R) & (p_ + lane < hw_)
            sx = Mux(axis == 2, xw != self.o_w - 1, Mux(axis == 1, p_ + lane + self.o_w < hw_, ~last_f))
            m.d.comb += [lane_v[lane].eq(ok), succ_v[lane].eq(ok & sx)]
        for copy, base, need in ((0, t, lane_v), (1, succ_t, succ_v)):
            for b in range(V):
                re = Const(0, 1)
                for lane in range(V):
                    re = re | (need[lane] & ((base + lane)[:lv] == b))
                word = base[lv:] + (base[:lv] > b) if b < V - 1 else base[lv:]
                m.d.comb += [decs[copy][b].re.eq(walking & re), decs[copy][b].raddr.eq(word)]
        out = {"lv": Signal(V, name="q_lane_v"), "succ": Signal(V, name="q_lane_succ"),
               "tlow": Signal(lv, name="q_tlow"), "stlow": Signal(lv, name="q_stlow")}
        m.d.sync += [out["lv"].eq(lane_v), out["succ"].eq(succ_v), out["tlow"].eq(t[:lv]),
                     out["stlow"].eq(succ_t[:lv])]
        return out

    def _issue_lanes(self, m, cmb, seen, s2v, s2p, decs, lanes, q, gcls, m_tok, hw_):  # noqa: N803
        """The issue stage's V lanes (docs/decisions.md D112, D111's items 2-5): per lane its decision codes
        (from bank ``(t + l) mod V``), flags, D address (way ``(a M + t + l) mod W`` low, as the accumulate's), the
        state buffer's addresses (position bank ``p mod V`` low, ``((a F + f) ceil(H W / V) + p div V) n_cb + cb``
        above: its own ``p`` for the write, its neighbour's for the read), the walked buffer's seen bits cleared in
        the lanes' ways; lane l > 0 takes ``c_reg`` from lane l - 1 (the w axis's chain)."""
        cfg, acc = self.cfg, self.accel
        R, C, G, W, V = cfg.array_rows, cfg.array_cols, cfg.partial_regs, self.ways, self.out_ways  # noqa: N806
        lw, lv, ncb = (W - 1).bit_length(), (V - 1).bit_length(), self.o_ncb
        is_w = q["axis"] == 2
        hwv = Signal(range(acc.max_tokens + V), name="c_hw_lanes")  # ceil(H W / V): a position bank's words a frame
        m.d.comb += hwv.eq((hw_ + V - 1)[lv:])
        cols = Signal(range(C + 1), name="c_cols_w")
        rest = Signal(range(acc.max_n + 1), name="c_rest")
        m.d.comb += [rest.eq(self.o_n - q["cb"] * C), cols.eq(Mux(rest >= C, C, rest))]
        step = Mux(is_w, 1, Mux(q["axis"] == 1, self.o_w, 0))  # the neighbour's position, back
        fields = {n: [] for n in ("valid", "direct", "has", "daddr", "reg", "raddr", "waddr", "keep", "hold")}
        for lane in range(V):
            word = decs[0][0].rdata
            sword = decs[1][0].rdata
            bt, sbt = (lanes["tlow"] + lane)[:lv], (lanes["stlow"] + lane)[:lv]
            for b in range(1, V):
                word, sword = Mux(bt == b, decs[0][b].rdata, word), Mux(sbt == b, decs[1][b].rdata, sword)
            direct, has, sdirect = Const(1, 1), Const(0, 1), Const(1, 1)
            for g in range(G):
                mine = gcls[g] == q["a"]
                direct = direct & (~mine | (word[2 * g:2 * g + 2] == 0))
                has = has | (mine & (word[2 * g:2 * g + 2] != 2))
                sdirect = sdirect & (~mine | (sword[2 * g:2 * g + 2] == 0))
            dir_s, has_s, succ = (Signal(name=f"c_direct_w{lane}"), Signal(name=f"c_has_w{lane}"),
                                  Signal(name=f"c_succ_w{lane}"))
            m.d.comb += [dir_s.eq(direct), has_s.eq(has), succ.eq(lanes["succ"][lane] & ~sdirect)]
            xl = Signal(range(acc.max_tokens + 1), name=f"c_x{lane}")
            m.d.comb += xl.eq(q["x"] + lane if lane == 0 else Mux(q["x"] + lane >= self.o_w, q["x"] + lane - self.o_w,
                                                                  q["x"] + lane))
            near = is_w & (q["x"] != 0) & (q["i"] != 0) if lane == 0 else is_w & (xl != 0)
            succ_near = is_w & (q["i"] + lane != R - 1)
            pl = Signal(range(acc.max_tokens + V), name=f"c_p{lane}")
            pn = Signal(range(acc.max_tokens + V), name=f"c_pn{lane}")  # the neighbour's (unread where none)
            fn = Signal(range(acc.max_tokens + 1), name=f"c_fn{lane}")
            m.d.comb += [pl.eq(q["p"] + lane), pn.eq(pl - step), fn.eq(q["f"] - (q["axis"] == 0))]
            waddr, raddr = Signal(self.ra, name=f"c_waddr_w{lane}"), Signal(self.ra, name=f"c_raddr_w{lane}")
            for sig, ff, pp in ((waddr, q["f"], pl), (raddr, fn, pn)):
                m.d.comb += sig.eq(Cat(pp[:lv], (((q["a"] * self.o_f + ff) * hwv + pp[lv:]) * ncb + q["cb"])))
            # the state SRAM (fused, D112): f axis the pool position i + l, bank (i + l) mod V; w axis one word a
            # frame in bank 0 (lane 0 reads it at the pool's start, the pool's last lane writes it); h axis per
            # (frame, x) in bank x mod V (o_w a multiple of V, core_ports); R / V + ... the regions in a bank
            st = Signal(self.ra, name=f"c_st_w{lane}")
            il = q["i"] + lane
            m.d.comb += st.eq(self._lane_regions(q, il, xl, ncb, q["cb"]))
            if self.pool_state:  # the state buffer per pool (D133): the regions over the group's column blocks
                pool_a = Signal(self.ra, name=f"c_pool_w{lane}")
                m.d.comb += pool_a.eq(self._lane_regions(q, il, xl, self.o_s, q["rep"]))
                waddr, raddr = pool_a, pool_a
            wu, daddr = Signal(range(MAX_CLASSES * acc.max_tokens + V), name=f"c_u_w{lane}"), Signal(
                self.da, name=f"c_daddr_w{lane}")
            m.d.comb += [wu.eq(q["a"] * m_tok + q["t"] + lane), daddr.eq(Cat(wu[:lw], wu[lw:] * ncb + q["cb"]))]
            if self.seg_local:  # D125: the segment's slot; a step's V tokens are consecutive in one frame's pool
                with m.If(self.o_local):
                    m.d.comb += daddr.eq(self._slot(q, lane))
            for n, v in (("valid", q["v"] & lanes["lv"][lane]), ("direct", dir_s), ("has", has_s), ("daddr", daddr),
                         ("reg", near & ~dir_s), ("raddr", Mux(self.o_fused, st, raddr)),
                         ("waddr", Mux(self.o_fused, st, waddr)), ("keep", succ & ~succ_near),
                         ("hold", succ & succ_near)):
                fields[n].append(v)
        m.d.comb += [cmb.c_valid.eq(Cat(*fields["valid"])), cmb.c_first.eq(q["first"]), cmb.c_last.eq(q["last"]),
                     cmb.c_cols.eq(cols), cmb.c_sram.eq(self.o_fused)]
        nb, rs = self.d_buffers, max(1, self.resb)
        # the output reads the walked segment's buffer: 2 buffers, c_sel the other; n > 2, c_buf it (D115)
        m.d.comb += cmb.c_sel.eq(~q["ord0"]) if nb == 2 else cmb.c_buf.eq(q["ord0"])
        m.d.comb += [getattr(cmb, f"c_{n}").eq(Cat(*fields[n])) for n in ("direct", "has", "daddr", "reg", "raddr",
                                                                          "waddr", "keep", "hold")]
        for b in range(nb):  # the walked buffer's seen bits: one clear per way, the lanes' ways distinct
            clr = q["ord0"] == b
            for w in range(W):
                cw, ca = Const(0, 1), Const(0, self.da - lw)
                for lane in range(V):
                    hit = clr & fields["valid"][lane] & (fields["daddr"][lane][:lw] == w)
                    cw, ca = cw | hit, Mux(hit, fields["daddr"][lane][lw:], ca)
                m.d.comb += [seen[b][w].we.eq((s2v[w] & (s2p[w * rs:(w + 1) * rs] == b)) | cw),
                             seen[b][w].waddr.eq(Mux(cw, ca, seen[b][w].s2_addr)), seen[b][w].wdata.eq(~cw)]

    def macros(self) -> list[tuple[str, int, int, None]]:
        """The distinct SRAM macros ``(kind, depth, width, lane)`` it instantiates itself: the tile table's copies,
        the decision copies, the FIFO banks, the seen memory's banks, the token chunks (with ``seg_local`` each
        token's chunk's first token too, ``chb + kbb`` bits, docs/decisions.md D125, D132) and the issue gate's copy of
        the chunks (``chb`` bits, D126) (``kaleido_daccel``'s and ``kaleido_dcombine``'s are theirs)."""
        acc, out = self.accel, []
        for mc in (("1r1w", acc.max_tiles, self.entry_bits, None), ("1r1w", -(-acc.max_tokens // self.out_ways),
                   2 * self.cfg.partial_regs, None), ("1r1w", self.fifo // self.cfg.drain_rows_per_cycle, self.fifo_bits, None),
                   ("1r1w", self.seen_depth, 1, None), ("1r1w", acc.max_tokens, self.chb + self.kbb, None),
                   *([("1r1w", acc.max_tokens, self.chb, None)] if self.issue_hold else [])):
            if mc not in out:
                out.append(mc)
        return out


def accel_module_name(acc: DeltaAccel) -> str:
    """The Verilog module a core instantiates for its controller: `DSTAGE_MODULE_NAME` (the weight stage),
    `DGATE_MODULE_NAME` (the issue gate, docs/decisions.md D126; staged `DSGATE_MODULE_NAME`) or
    `DACCEL_MODULE_NAME`."""
    if acc.stage:
        return DSGATE_MODULE_NAME if acc.issue_gate else DSTAGE_MODULE_NAME
    return DGATE_MODULE_NAME if acc.issue_gate else DACCEL_MODULE_NAME


def default_fifo_bypass(cfg: AcceleratorConfig) -> bool:
    """``kaleido_dcore``'s row-FIFO bypass by default (docs/decisions.md D118): on wherever it accumulates on W > 1
    ways (`hw.delta_combine.default_ways`; every shipped delta config), where it is built;
    `sim.timing.delta_core.core_fifo_bypass` is the model's copy of this rule. ``kaleido_dcore_front`` goes without.

    Raises:
        ValueError: as `hw.delta_combine.default_ways`."""
    return default_ways(cfg) > 1


def default_seg_local(cfg: AcceleratorConfig) -> bool:
    """``kaleido_dcore_stage``'s segment-local D addresses by default (docs/decisions.md D125, D132): on wherever it
    is built (W > 1 accumulate ways, `hw.delta_combine.default_ways`, and ``array_rows`` a power of two; every
    shipped config with a weight stage), with the issue hold's bound at the op's segment slots (`op_slots`, D138;
    D132: the D buffers n). The unstaged ``kaleido_dcore`` keeps the op's address (D132).
    `sim.timing.delta_core.core_seg_local` is the model's copy of this rule (with the staged condition).

    Raises:
        ValueError: as `hw.delta_combine.default_ways`."""
    r = cfg.array_rows
    return default_ways(cfg) > 1 and r & (r - 1) == 0


def host_through(m, core, ap, wr_valid, *also) -> Signal:
    """A combine core's (`DeltaCore`, `hw.compact_core.CompactCore`) host side through to its controller ``ap``
    (ports): the write port (``wr_valid`` the controller's write valid; ``also`` further statements, driven with
    it) and the ``c_*`` op ports (``core.cnames``); the core's ``wr_ready``, ``busy`` and the controller's
    ``start`` from the core's ``phase`` (a 2-bit signal, 0 idle, which the core drives): returns ``phase``."""
    m.d.comb += [ap.wr_valid.eq(wr_valid), ap.wr_sel.eq(core.wr_sel), ap.wr_addr.eq(core.wr_addr),
                 ap.wr_data.eq(core.wr_data[:len(core.accel.wr_data)]), *also]
    m.d.comb += [getattr(ap, n).eq(getattr(core, n)) for n in core.cnames]
    phase = Signal(2, name="phase")
    # the staged controller's descriptor ring takes the host's list while running (docs/decisions.md D134), on the
    # cycles its clock runs (the array hold gates it, D123)
    idle = phase == 0
    if getattr(core.accel, "ring", 0):  # (without a ring the expression, and so the Verilog, as before D134)
        idle = idle | ((core.wr_sel == 2) & (core.run if getattr(core, "array_hold", False) else 1))
    m.d.comb += [core.wr_ready.eq(idle & ap.wr_ready), core.busy.eq(phase != 0),
                 ap.start.eq(core.start & (phase == 0))]
    return phase


def core_ports(core: DeltaCore, grid, groups, N: int, fused: bool = False, seg: bool = False,  # noqa: N803
               fw: int | None = None, s: int | None = None) -> dict[str, int]:
    """The op's values of `DeltaCore`'s ``o_*`` ports (module docstring): grid ``(F, H, W)``, ``groups``
    ``[(k0, k1, axis)]``, N output channels, ``fused`` (carried values in the state SRAM); the walk's segments
    (docs/decisions.md D104): ``fw`` frames a chunk (default F), ``s`` column blocks a group (default all), ``seg``
    (the controller issues the band-tiles segment by segment, `segment_order`: each segment is walked once whole).
    The host writes each token's chunk (`sim.timing.delta_core.token_chunks`) with its decisions.

    Raises:
        ValueError: more axis classes than `MAX_CLASSES` or more groups than ``partial_regs``; the op's difference
            sums (``A M n_cb`` words; ``A fw R`` with ``o_local``, docs/decisions.md D125) or carried values (``A F H W n_cb`` words in the state buffer; the state
            SRAM's regions, `tests.rtl.delta_bench.dcombine_program`; with ``pool_state`` the state buffer's regions
            per pool, `hw.delta_combine.pool_state_words`, D133) beyond their buffer (`delta_combine_sizes`,
            `state_sram_sizes`): the op is one chunk here (docs/decisions.md D95); with ``pool_state`` and V > 1
            output lanes, an ``h`` class on ``o_w`` not a multiple of V."""
    from hw.delta_accel_host import group_layout
    from hw.delta_combine import delta_combine_sizes, pool_state_words, state_sram_sizes
    from sim.timing.delta import classes
    from sim.timing.delta_core import segment_base

    cls = classes(groups)
    V = core.out_ways  # noqa: N806
    if V > 1 and (grid[2] < V or (fused and grid[2] % V)):
        raise ValueError(f"out_ways = {V}: kaleido_dcore's output lanes take neither o_w = {grid[2]} < {V} nor a fused "
                         f"score op with o_w not a multiple of {V} (not built, docs/decisions.md D112)")
    if len(cls) > MAX_CLASSES or len(groups) > core.cfg.partial_regs:
        raise ValueError(f"{len(cls)} axis classes, {len(groups)} groups: kaleido_dcore holds {MAX_CLASSES} and "
                         f"{core.cfg.partial_regs}")
    F, H, W = grid  # noqa: N806
    n_cb, A, R = -(-N // core.cfg.array_cols), len(cls), core.cfg.array_rows  # noqa: N806
    ways = core.ways
    sz, st = delta_combine_sizes(core.cfg, ways, V, core.d_buffers), state_sram_sizes(core.cfg, V)
    # with W ways (D107) each way holds its tokens' sums: ceil(A M / W) n_cb words of a W-th of the buffer; with
    # segment-local addresses (D125, a core built with seg_local, ops issued segment by segment) one segment's
    # A fw R slots
    local = bool(core.seg_local and seg)
    if local:
        need = {"difference sums": (ways * -(-(A * (fw or F) * R) // ways), sz["d_depth"])}
    else:
        need = {"difference sums": (ways * -(-(A * F * H * W) // ways) * n_cb, sz["d_depth"])}
    if fused and V > 1:  # per position bank: R / V pool slots, F frame words (bank 0), F o_w / V h words (D112)
        need["state SRAM"] = (V * (R // V + F + F * W // V) * n_cb, V * st["lane_words"] if st else 0)
    elif fused:
        need["state SRAM"] = ((R + F + F * W) * n_cb, st["depth"] if st else 0)
    elif core.pool_state:  # per pool (D133): the regions over a group's s column blocks
        if V > 1 and "h" in [ax for ax, _ in cls] and W % V:
            raise ValueError(f"pool_state with out_ways = {V}: an h class needs o_w = {W} a multiple of {V} (its "
                             "(frame, column) words in bank x mod V, docs/decisions.md D133)")
        need["state buffer"] = (pool_state_words(core.cfg, grid, [ax for ax, _ in cls], s or n_cb, V),
                                V * sz["lane_words"] if V > 1 else sz["state_depth"])
    elif V > 1:  # V position banks, each ceil(H W / V) positions a frame (D112)
        need["state buffer"] = (V * A * F * -(-(H * W) // V) * n_cb, V * sz["lane_words"])
    else:
        need["state buffer"] = (A * F * H * W * n_cb, sz["state_depth"])
    for what, (words, have) in need.items():
        if words > have:
            raise ValueError(f"{what}: the op needs {words} words, kaleido_dcore's buffer holds {have} (one chunk "
                             "per op, D95)")
    of_group = {g: a for a, (_ax, idx) in enumerate(cls) for g in idx}
    fw, s = fw or F, s or n_cb
    nfc = -(-F // fw)
    nch = nfc * -(-(H * W) // R)
    kw = _bits(core.accel.max_nb + 1)
    xb = _bits(core.accel.KW)
    lay = group_layout(core.accel, groups)
    return {"o_f": F, "o_h": H, "o_w": W, "o_ncb": n_cb, "o_n": N, "o_classes": A,
            "o_axis": sum(AXIS_CODE[ax] << 2 * a for a, (ax, _idx) in enumerate(cls)),
            "o_gclass": sum(of_group.get(g, NO_GROUP) << 2 * g for g in range(core.cfg.partial_regs)),
            "o_gxoff": sum(lay[g][0] << xb * g for g in range(len(groups))), "o_fused": int(fused),
            "o_seg": int(seg), "o_fw": fw, "o_nfc": nfc, "o_s": s,
            "o_sbase": sum(segment_base(c, s, n_cb, nch) << core.ob * c for c in range(n_cb)),
            "o_sk": sum(min(s, n_cb - c // s * s) << kw * c for c in range(n_cb)),
            **({"o_local": int(local), "o_slots": op_slots(core, A, fw) if local else 1}
               if core.seg_local else {})}


def op_slots(core: DeltaCore, A: int, fw: int) -> int:  # noqa: N803
    """A segment-local op's ``o_slots`` (docs/decisions.md D138; `core_ports` sets it): `sim.timing.delta_core.
    segment_slots` of the core's n D buffers (`hw.delta_combine.delta_combine_sizes`' ``d_depth`` words each)
    against a segment's ``W ceil(A fw R / W)`` words (A axis classes, ``fw`` frames a chunk), capped at
    ``core.slot_cap`` (`NB_BANKS`, or an ``issue_bound`` given to the core). The issue hold's bound and the pop's
    wait for the op are this count.

    Raises:
        ValueError: the segment exceeds a D buffer."""
    from hw.delta_combine import delta_combine_sizes
    from sim.timing.delta_core import segment_slots

    W, R = core.ways, core.cfg.array_rows  # noqa: N806
    d_words = delta_combine_sizes(core.cfg, W, core.out_ways, core.d_buffers)["d_depth"]
    return segment_slots(core.d_buffers, d_words, W * -(-(A * fw * R) // W), core.slot_cap)


def chunk_words(core: DeltaCore, grid, fw: int | None = None) -> list[int]:
    """The chunk table's word per token that the host writes with the decisions (above their 2 G bits): its chunk
    (`sim.timing.delta_core.token_chunks`), and on a core built with ``seg_local`` (docs/decisions.md D125) above
    it (``chb`` bits up) its chunk's first token ``(f div fw) fw H W`` (token ``f H W + p``)."""
    from sim.timing.delta_core import token_chunks

    F, H, W = grid  # noqa: N806
    fw = fw or F
    ch = token_chunks(grid, core.cfg.array_rows, fw)
    if not core.seg_local:
        return ch
    return [c | ((t // (H * W)) // fw * fw * H * W) << core.chb for t, c in enumerate(ch)]


def segment_order(chunk_major: bool, s: int, n_cb: int) -> bool:
    """Whether the controller issues band-tiles segment by segment (the walk's order): D84's chunk-major order
    (`sim.timing.delta.chunk_major`), or D68's with one column block a group (`sim.timing.delta.issue_order`)."""
    return bool(chunk_major) or s == 1 or n_cb == 1
