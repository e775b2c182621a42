"""The delta organisation's op-level controller, first slice (docs/decisions.md D91): `DeltaAccel`, Verilog
module ``kaleido_daccel``, runs one op's band-tiles through ``kaleido_dtop`` (`hw.compact_array` on a delta
config) from banked SRAM buffers and hands out the drained rows with their tags.

What the host gives it (written through the write port while idle; `hw.delta_accel_host` packs the words):

- the **difference buffer** ``x``: per token its 9-bit differences (`sim.timing.delta_reference.differences`:
  ``X - X_eff[nb]``, X itself in the direct form; `hw.delta_front` forms them on chip, D103), group by
  group, each group starting on a word of ``P = lanes`` differences: word ``token KW + xoff_g + j`` holds the
  group's channels ``k0 + P j .. k0 + P j + P - 1`` (lane l at bits ``[9 l, 9 l + 9)``);
- the **weight buffer** ``w``: per column block and group, word ``cb KWW + woff_g + j`` holds the group's
  channels ``k0 + 2 j`` and ``k0 + 2 j + 1`` for the C columns of the block (lane ``h C + c`` at bits
  ``[8 (h C + c), 8 (h C + c) + 8)``); written into B copies at once, one per band (each band reads its own;
  with the weight stage or the weight port, below, one buffer of half-words instead);
- the **descriptor buffer** ``desc``: one word per band-tile in the model's delta issue order
  (`sim.engines.band_stimulus.issue_order`, the order `sim.engines.model` times), fields `DeltaAccel.fields`:
  valid rows, COMPUTE rows (rows 0 .. ncomp - 1 COMPUTE, the rest PARTIAL), group width, paired (a half-width
  all-PARTIAL band-tile: two channels a slot), column block, the group's word offsets and X words per row,
  and the token of each row. Built with ``queues=True`` (D93; what `hw.rtl` emits) the controller has no
  descriptor buffer: its band-tile queues, `hw.delta_queue.DeltaQueue` (``kaleido_dqueue``), form the same words
  from the host-written decision codes (``wr_sel`` 3, address the token) and the op's ``c_*`` ports (which then
  replace ``c_tiles``), and the gather takes each descriptor from the queues' output register instead of the
  buffer, in the same cycle pattern (the word registered the cycle it is taken).

Ports: the write port ``wr_valid``/``wr_ready`` (one word a cycle, accepted while idle), ``wr_sel`` (0 differences,
1 weights, 2 descriptors; `hw.delta_accel_host.SEL_X` ...), ``wr_addr`` (difference word ``token KW + word``,
weight word ``cb KWW + word``, descriptor = band-tile number), ``wr_data`` (the word in its low bits);
``c_tiles`` the op's band-tiles (stable from ``start`` to ``done``); ``start`` (one cycle, while idle), ``busy``,
``done``; per drain port p of d: ``out_valid[p]``, ``out_tile`` (24 bits at ``[24 p, 24 p + 24)``), ``out_row``
(``ceil(log2(R / B))`` bits), ``out_data`` (C signed ``acc_bits`` words at lane ``p C + c``). No back-pressure
on the drain ports (as ``kaleido_dtop``'s). ``desc_valid`` marks the cycle the gather reads a band-tile's descriptor,
``desc_tile`` its number and ``desc`` the word (`DeltaAccel.fields`; host list or queues alike): what a combine
stage keeps to place the rows (`hw.delta_core`, D95).

What it does after ``start`` (one cycle; cycle 0 of the timing below is the cycle after it; ``kaleido_dtop``
is reset in the ``start`` cycle, so its drain phase and band choice start with the op):

- **Gather** (one band-tile at a time, in issue order): band-tile n takes staging entry ``n mod S``
  (``S = entries``) once the band-tile that held it (n - S) has issued its last slot; one cycle reads its
  descriptor, then the difference buffer, banked by token mod ``R / B`` (``NB`` single-port banks, the host's
  address ``token KW + word`` split into bank and in-bank word), is read one word of every bank a cycle: the
  band-tile's rows in *rounds* (a row's round is the number of earlier rows in its bank), ``ceil(width / P)``
  words each, ``rounds x ceil(width / P)`` cycles (`sim.timing.delta_accel.gather_rounds`); each word is written
  the next cycle into the **staging buffer**: per band and band row a 1r1w macro of ``S x XW`` words (the B
  bands' copies written together, each row's from its token's bank), so a band reads every row of a slot in one
  cycle.
- **Bands**: band b runs the band-tile numbers ``kaleido_dtop`` gives it (band b starts with b, a band whose
  last slot is accepted takes the next number; mirrored here so the next slot's staging and weight words are
  read the cycle before it is presented; with the weight stage the controller chooses instead, "Early band
  choice" below). A band presents its band-tile's first slot once the gather has
  written it (the cycle after the cycle after the last write); each slot's operands, modes, weights,
  ``first``/``last``/``rows`` as `sim.engines.band_stimulus.BandTile` gives them. **Staging reads** (D105): a
  band reads its row macros only when its next cycle's slot needs a word their outputs do not hold (a macro's
  output holds its last read, `hw.sram`): a new band-tile (its band-tile number changed, and gathered; with the
  early choice, not while the band is idle) or a new word of P channels; only the rows its band-tile lists. Per
  band a held read address and flag (``b{b}_staging_addr``, ``b{b}_staging_held``); so each band-tile row's words
  are read once, none on idle or stalled cycles (`staging_re`, `staging_ports` for benches).
- **Collect**: per drain port, ``out_valid``, ``out_tile`` (the band-tile's number in issue order),
  ``out_row`` (its row: the descriptor's token of that row) and ``out_data`` (C difference sums, ``acc_bits``
  each): the tags a host or combine stage places the row by. ``done`` pulses the cycle after the op's last row
  has left (the rows the descriptors list all counted).

Timing: `sim.timing.delta_accel` (`accel_schedule`, `accel_cycles`): `sim.timing.compact.band_schedule`'s list
schedule and drain rule with each band-tile's first slot no earlier than its gather allows; tested cycle for
cycle (tests/test_rtl_daccel.py).

**Weight stage** (``stage=True``, docs/decisions.md D96; Verilog module ``kaleido_daccel_stage``; the host's
band-tile list only): D85's stage instead of a weight copy per band.

- The host writes **one weight buffer** (`hw.delta_accel_host.stage_w_words`): per column block and group,
  half-words of ``B`` channels x C columns (``B C`` bytes, what the weight SRAM gives a cycle; each group starts
  on a half-word), word ``cb KWH + hoff + j``. Each descriptor carries six more fields
  (`hw.delta_accel_host.stage_plan`): ``seg`` (the first band-tile of a stage segment: a chunk's band-tiles of one
  column block, or of one slice, D88), ``sbuf`` (its buffer, segment number mod the buffers a bank holds),
  ``fsrc``/``fcount``/``fdst`` (the segment's fill: weight-buffer word, half-words, stage half-word) and
  ``saddr`` (the stage half-word of its group's word 0).
- **The stage**: per column bank two 1r1w macros of ``B``-byte half-words (even and odd half-words;
  ``wstage_sram_kib x 1024 / C / B`` half-words a bank), so a word of ``2 B`` channels starting on any half-word
  is one read of each.
- **Fills**, serial: a fill pointer walks the band-tiles in order once their fields are held; a band-tile that
  is not first of its segment passes; a first one waits until the fill is idle and no passed band-tile of its
  buffer is still held (D85: segment i's fill after segment i - buffers' last slot), then reads ``fcount``
  half-words on consecutive cycles, each written into the stage the next cycle, and passes at its last read. A
  band-tile's words are readable from the cycle after the cycle after it passed.
- **Word registers**: three per band (``2 B`` channels x C each, `sim.timing.compact.WORD_REGISTERS`), filled in
  order with the words of the band's band-tile. The port has one reader a cycle: band ``turn`` (cycle after
  ``start`` = 0, then round robin). At its turn a band whose band-tile's words are readable reads its next word
  when fewer than three of its words are in use after the cycle; every other band whose next word is the same
  stage address and that has a register free loads it too (D94's prefetch rule). The word lands in its register
  the cycle after the read (from the macro), usable the cycle after; a slot issues only when its word is there,
  and a word is freed by the slot that last takes it.
- **Early band choice** (``early``, the default with the stage; docs/decisions.md D99, D94's plan item 3): the
  controller hands out the band-tile numbers ahead and presents each band's number with its slots on
  ``kaleido_dtop_ext`` (`hw.compact_array.CompactTop` with ``choice="ext"``; the rows' tags). Each band keeps the
  cycle it expects its latest band-tile's last slot, ``E`` (a cycle counter of `EXPECT_BITS`): at its band-tile's
  first slot f, ``max(f + s - 1, its drain port's free cycle)``; when it goes idle, that cycle. A band is a
  candidate when it has no next band-tile and its band-tile has issued its first slot (or it has none); each cycle
  the next number whose descriptor fields are held goes to the candidate with the least ``E`` (ties to the lower
  band) if that ``E`` is at most ``EARLY_AHEAD x B`` cycles ahead, as its next band-tile (its band-tile if idle),
  and its ``E`` becomes ``max(E + s, port free)`` (`sim.timing.compact.band_schedule`'s rule). A band's word
  registers read on past its band-tile's last word into its next band-tile's (a ring of three), so the next
  band-tile's word 0 is read during the current one's last slots. With ``early=False`` the band choice is
  ``kaleido_dtop``'s (a band takes its next number when its last slot is accepted, D96), and each band-tile's
  first slot waits for its band's next turn and the register.
- **Deferred read** (``defer``, the default with the early choice; docs/decisions.md D100's ``defer="behind"``):
  at its turn a band skips its read when two or more of its words are in use after the cycle and another band
  that needs a word will still take this one: its next word is the same stage address and its registers are
  full, or its next word's band-tile has the same stage buffer (``sbuf``) and group word 0 (``saddr``) and it is
  on an earlier word (a lagging band of the same group; its own read at its turn loads the leader too). The turn's
  (buffer, word 0, word index) against each other band's: B equality and less-than comparators, no storage.
  ``stage_defer`` marks a skipped read.

Timing and counts of this path: `sim.timing.delta_accel.stage_schedule` (``defer="behind"`` when built with
``defer``), tested cycle for cycle
(tests/test_rtl_dstage.py).

**Weight port** (``WEIGHT_PORT``, the compact controller `hw.compact_accel.CompactAccel`, docs/decisions.md D109; D88's
weight path without a stage): the weight buffer holds the op's weights as half-words of ``B`` channels x C
(`hw.delta_accel_host.stage_w_words`' layout; a group's word 0 at half-word ``cb KWH + woff``, ``woff`` then in
half-words) in two 1rw banks, even and odd half-words, read at the turn's address (half-words a and a + 1: the
even bank at (a + 1) // 2, the odd one at a // 2), so it is the bands' "stage": the word registers, the early band
choice and the deferred read above, with no fills; a band-tile's words are readable once its descriptor's fields
are held, and the host's queues may feed it (``queues=True``: the band choice then does not know the op's
band-tile count T; a band b >= T waits for its first band-tile and is no candidate, which changes nothing, since
no band-tile is left to hand out). ``w_re`` is the buffer's read enable (both
banks). Timing and counts: `sim.timing.compact_accel.port_schedule` (``stage_schedule(stage=False)``).

**Ring** (``ring``, docs/decisions.md D134, D130 item 4; the staged controller only, default
``cfg.accel_tile_ring``, 0: none): the host's band-tile list is a 1r1w ring of ``ring`` entries (a power of two) and
the op may have any number of band-tiles (``c_tiles`` `hw.compact_array.TILE_BITS` wide). ``max_tiles`` is then the
ring, so `hw.delta_core`'s tile table (addressed by the band-tile number's low bits) is a ring of as many entries.

- *Host*: descriptor writes (``wr_sel`` 2) go into entry ``written mod ring`` in the order written (``wr_addr``
  ignored), accepted (``wr_ready``) while ``written < ring`` idle and ``written < gidx + ring`` running (``gidx`` the
  band-tiles taken: an entry is free once its band-tile's descriptor was taken); every other write only while idle.
  `hw.delta_accel_host.ring_split`: the first ``ring`` before ``start``, the rest while the op runs. ``written``
  returns to 0 with ``done``.
- *Take*: band-tile n only once its descriptor is written (``n < written``) and band-tile ``n - ring`` has drained
  its last row: per entry a count of its band-tile's rows not yet drained (``ring{e}_left``), set to its rows at the
  take's first cycle, less one for each row a drain port hands out whose band-tile number's low bits name the entry;
  the take needs entry ``n mod ring``'s count 0 (``ring_ok``), so the gather takes n from the cycle after n - ring's
  last row left (`sim.timing.compact_accel.ring_free`). With the issue gate the read-ahead reads entry ``gidx + 1`` at
  each take as before; if that descriptor was not yet written it reads it again once it is (``desc_ahead_ok``).
- Timing: `sim.timing.delta_accel.stage_schedule` / `stage_run` with ``ring``, and `sim.timing.delta_core.stage_core`
  for ``kaleido_dcore_stage``: equal row for row with the host ahead of the gather (tests/test_rtl_dring.py); a host
  behind it delays takes the model does not time.

Not in this slice (D91, D93, D96): the similarity unit's differences (`hw.delta_front.DeltaFront` in front of it,
D103), the combine stage
(`hw.delta_combine` takes the tagged rows; `hw.delta_core` generates its commands), the staged controller's
queues (the segment flag would come from them), the vector unit and fused-attention control (modelled only).
"""

from __future__ import annotations

from amaranth.hdl import (
    Array,
    Cat,
    ClockSignal,
    Const,
    Instance,
    Module,
    Mux,
    ResetInserter,
    ResetSignal,
    Signal,
    unsigned,
)
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from hw import discard
from hw.compact_array import TILE_BITS, CompactTop, ctop_signature, top_module_name
from hw.config import AcceleratorConfig
from hw.pe import W_BITS, X_BITS, PEMode
from hw.sram import index_bits as _bits
from hw.sram import macro, macro_name, split_banks
from hw.sram import pow2ceil as _pow2ceil
from sim.timing.delta_accel import EARLY_AHEAD

#: Bits of the early band choice's cycle numbers (`DeltaAccel` with ``early``, D99): ops of up to 2^32 cycles
#: (chosen, not derived).
EXPECT_BITS = 32
#: Verilog module name of `DeltaAccel` (hw/rtl.py).
DACCEL_MODULE_NAME = "kaleido_daccel"
#: Verilog module name of `DeltaAccel` built with its weight stage (``stage=True``, the host's band-tile list; D96).
DSTAGE_MODULE_NAME = "kaleido_daccel_stage"
#: ``kaleido_daccel`` with the issue gate (``issue_gate``, docs/decisions.md D126): its next descriptor out, the
#: take gated by ``issue_ok``.
DGATE_MODULE_NAME = "kaleido_daccel_gate"
#: ``kaleido_daccel_stage`` with the issue gate (D126; `kaleido_dcore_stage`'s issue hold, the default since D129).
DSGATE_MODULE_NAME = "kaleido_daccel_stage_gate"
#: Differences per word of the difference and staging buffers (``P``): a row of a group of 32 or fewer channels is
#: one gather cycle. A power of two, at least 2 (a PAIRED slot's two channels are in one word). 32: on 128 x 128
#: balanced band-tiles of 32-128-channel groups the gather then keeps up with the bands (`accel_cycles` within
#: 0.6 % of `band_cycles`; 16 lanes: 8-24 % over; docs/decisions.md D91).
LANES = 32
#: Weight channels per word of the weight buffer: a slot uses at most two (PAIRED), read in one cycle.
WEIGHT_LANES = 2
#: Band-tile numbers the descriptor buffer holds by default (``max_tiles``): a slice's capacity, chosen, not derived
#: (docs/decisions.md D91 "Capacity"; beside the 256-token `accel_max_tokens` default, one 1rw_1024 macro). An op
#: with more band-tiles is refused by `hw.delta_accel_host.op_words`.
MAX_TILES = 1024


class DeltaAccel(wiring.Component):
    """The delta op-level controller (module docstring).

    Args:
        cfg: a delta-organisation config (R, C, B = ``compact_bands``, d, ``partial_regs`` G, ``acc_bits``).
        max_tokens, max_k, max_n: capacity (tokens, channels K, output channels N); defaults
            ``cfg.accel_max_tokens`` / ``accel_max_k`` / ``accel_max_n``. max_tiles: band-tiles per op
            (default `MAX_TILES`). entries: staging entries S, a power of two (default 2 B: each band its
            band-tile and the next). lanes: P (default `LANES`).
        pe: ``"inline"`` elaborates ``kaleido_dtop`` and the macros (Amaranth simulation); ``"instance"``
            instantiates them by name (Verilog, `hw.rtl`). queues: take the band-tiles from `hw.delta_queue`
            (module docstring) instead of the host-written descriptor buffer. stage: the weight stage (module
            docstring, D96; the host's descriptor buffer, ``queues=False``). early: the early band choice (module
            docstring, D99; default: ``stage`` or ``WEIGHT_PORT``; only with one of them). defer: the deferred
            stage read (module docstring, D100's ``defer="behind"``; default: ``early``; only with ``stage`` or
            ``WEIGHT_PORT``). issue_gate: the issue gate (docs/decisions.md D126): ``next_valid``, ``next_desc`` out,
            the take ANDed with ``issue_ok`` (the host's list read ahead a descriptor); with ``queues`` also
            ``load_valid``, ``load_desc`` out, the word the queues' output register loads this cycle (D137).
            ring: the descriptor ring's entries (module docstring "Ring", docs/decisions.md D134; default
            ``cfg.accel_tile_ring`` with ``stage``, else 0: none); ``max_tiles`` is then the ring.

    Sizes (attributes): ``XW`` = pow2 >= ceil(max_k / P) staging words per row (a group's channels),
    ``KW`` = pow2 >= ceil(max_k / P) + G X words per token (groups word-aligned), ``KWW`` = pow2 >=
    ceil(max_k / 2) + G weight words per column block, ``KWH`` = pow2 >= ceil(max_k / B) + G weight
    half-words per column block (staged), ``stage_halves`` the stage's half-words per column bank, ``max_nb`` =
    ceil(max_n / C); `geometry` the buffers.

    Raises:
        ValueError: not the delta organisation, R / B not a power of two, lanes or entries not a power of two
            (lanes at least 2), a size below 1, or ``stage`` with the queues, B not a power of two or a stage
            bank under two half-words, B not a power of two with ``WEIGHT_PORT``, ``early`` or ``defer`` without
            ``stage`` or ``WEIGHT_PORT``, or a ring without ``stage`` or not a power of two >= 2.
    """

    #: The variant's parameters, which `hw.compact_accel.CompactAccel` (D97) sets: the organisation it runs
    #: (``cfg.organisation``), the bits of one X (and staging) lane (`hw.pe.X_BITS`: a 9-bit difference), an
    #: ``x_unsigned`` input passed to the top (its operands int8 or uint8) and a named read enable ``x{k}_re`` per X
    #: bank (listed in ``x_re``, for a bench to count the gather's reads).
    ORGANISATION = "delta"
    X_LANE_BITS = X_BITS
    X_UNSIGNED = False
    X_READ_ENABLES = False
    #: D88's weight port without a stage (`hw.compact_accel.CompactAccel`, docs/decisions.md D109): one weight
    #: buffer of ``B``-channel half-words (even and odd half-words in two 1rw banks) read by band turn into three
    #: word registers per band, the staged path's bands, early choice and deferred read on it; False: a weight copy
    #: per band (D91).
    WEIGHT_PORT = False
    #: The queues (``queues=True``) read back the first column-block group's band-tiles for the later groups from a
    #: descriptor buffer of `replay_entries` entries (`hw.delta_queue` "Replay", docs/decisions.md D120, D124); False:
    #: they rescan (D93).
    QUEUE_REPLAY = False
    #: The queues' wider scan (`hw.delta_queue` "Wider scan", docs/decisions.md D124): a step reads
    #: ``min(R, QUEUE_REACH x R / B)`` positions and stops at the one that fills its queue; 0: D93's steps of R / B.
    QUEUE_REACH = 0

    def __init__(self, cfg: AcceleratorConfig, max_tokens: int | None = None, max_k: int | None = None,
                 max_n: int | None = None, max_tiles: int = MAX_TILES, entries: int | None = None,
                 lanes: int = LANES, pe: str = "inline", queues: bool = False, stage: bool = False,
                 early: bool | None = None, defer: bool | None = None, issue_gate: bool = False,
                 ring: int | None = None):
        R, C, B, d, G = (cfg.array_rows, cfg.array_cols, cfg.compact_bands,  # noqa: N806
                         cfg.drain_rows_per_cycle, cfg.partial_regs)
        P, S = lanes, entries or 2 * B  # noqa: N806
        brows = R // B
        err = None
        if cfg.organisation != self.ORGANISATION:
            org = self.ORGANISATION
            err = f"{cfg.name}: the {org} controller needs the {org} organisation, not {cfg.organisation!r}"
        elif brows & (brows - 1):
            err = f"{cfg.name}: R / B = {brows} rows per band must be a power of two (a row's tag is its low bits)"
        elif P < 2 or P & (P - 1) or S < 1 or S & (S - 1):
            err = f"lanes = {P} (a power of two >= 2) and entries = {S} (a power of two) required"
        elif (stage or self.WEIGHT_PORT) and B & (B - 1):
            err = f"{cfg.name}: the weight word registers need B = {B} a power of two (the band turn)"
        elif stage and (queues or cfg.wstage_sram_kib * 1024 // C // B < 2):
            err = (f"{cfg.name}: the weight stage needs the host's band-tile list (queues=False), B a power of two "
                   f"and a stage (wstage_sram_kib) of at least 2 B bytes per column bank")
        self.max_tokens = max_tokens or cfg.accel_max_tokens
        self.max_k = max_k or cfg.accel_max_k
        self.max_n = max_n or cfg.accel_max_n
        #: The descriptor ring's entries (module docstring "Ring", docs/decisions.md D134; default
        #: ``cfg.accel_tile_ring``); 0: the whole list of ``max_tiles`` written before ``start``.
        self.ring = (cfg.accel_tile_ring if stage else 0) if ring is None else ring
        if err is None and self.ring and (self.ring < 2 or self.ring & (self.ring - 1) or not stage):
            err = (f"ring = {self.ring}: the descriptor ring needs the staged controller (stage=True) and a power of "
                   "two >= 2 entries")
        #: Band-tiles the descriptor buffer (and `hw.delta_core`'s tile table) holds: the ring's entries, or the whole
        #: list's ``max_tiles``.
        self.max_tiles = self.ring or max_tiles
        if err is None and min(self.max_tokens, self.max_k, self.max_n, self.max_tiles) < 1:
            err = f"{type(self).__name__} sizes must be >= 1"
        if err is not None:
            discard(self)
            raise ValueError(err)
        self.cfg, self.pe_kind, self.P, self.S, self.brows, self.queues = cfg, pe, P, S, brows, queues
        self.stage = stage
        #: The issue gate (docs/decisions.md D126): outputs ``next_valid`` / ``next_desc`` (the descriptor the gather
        #: takes next: the queues' output register, or the host list's read-ahead), input ``issue_ok`` ANDed into the
        #: take; the Verilog module `DGATE_MODULE_NAME` (staged: `DSGATE_MODULE_NAME`).
        self.issue_gate = issue_gate
        #: The bands take their weights through word registers read by band turn (D94): from the weight stage
        #: (``stage``, D96) or from the one weight buffer (``WEIGHT_PORT``, D109).
        self.wpath = stage or self.WEIGHT_PORT
        #: The early band choice (D99; the default with the word registers): the bands' numbers handed out ahead and
        #: passed to ``kaleido_dtop_ext``; False: ``kaleido_dtop``'s own choice at each last slot (D96).
        self.early = self.wpath if early is None else early
        if self.early and not self.wpath:
            discard(self)
            raise ValueError("the early band choice (early=True) is built for the weight stage (stage=True) or "
                             "the weight port only")
        #: The deferred stage read (D100's ``defer="behind"``; default: ``early``): the turn's band skips its read
        #: while it holds two words in use and another band will still take the word or is behind on its group's.
        self.defer = self.early if defer is None else defer
        if self.defer and not self.wpath:
            discard(self)
            raise ValueError("the deferred stage read (defer=True) is built for the weight stage (stage=True) or "
                             "the weight port only")
        #: Staged (D96): weight-buffer words of B channels x C per column block (groups half-word aligned), and
        #: the stage's half-words (B bytes) per column bank.
        self.KWH = _pow2ceil(-(-self.max_k // B) + G)
        self.stage_halves = cfg.wstage_sram_kib * 1024 // C // B
        self.XW = _pow2ceil(-(-self.max_k // P))
        self.KW = _pow2ceil(-(-self.max_k // P) + G)
        self.KWW = _pow2ceil(-(-self.max_k // WEIGHT_LANES) + G)
        self.max_nb = -(-self.max_n // C)
        self.tb = _bits(self.max_tokens)
        self.NB = brows
        #: The descriptor word's fields, least significant first: ``(name, bits)`` (module docstring).
        self.fields = [("nrows", _bits(brows + 1)), ("ncomp", _bits(brows + 1)), ("width", _bits(self.max_k + 1)),
                       ("paired", 1), ("cb", _bits(self.max_nb)), ("xoff", _bits(self.KW)),
                       ("xwords", _bits(self.XW + 1)),
                       ("woff", _bits(self.KWH if self.WEIGHT_PORT else self.KWW)), ("tokens", brows * self.tb)]
        if stage:  # the stage fields (hw.delta_accel_host.stage_plan)
            wdepth = _pow2ceil(self.max_nb * self.KWH)
            self.fields += [("seg", 1), ("sbuf", _bits(self.stage_halves)), ("fsrc", _bits(wdepth)),
                            ("fcount", _bits(self.KWH + 1)), ("fdst", _bits(self.stage_halves)),
                            ("saddr", _bits(self.stage_halves))]
        self.desc_bits = sum(b for _, b in self.fields)
        #: The buffers: name -> (kind, depth, width, copies); each copy split by depth into `hw.sram` macros of
        #: at most `hw.sram.MACRO_MAX_BITS` (`hw.sram.split_banks`). ``stage``: one copy per band and band row.
        self.geometry = {
            "x": ("1rw", _pow2ceil(-(-self.max_tokens // brows)) * self.KW, self.X_LANE_BITS * P, brows),
            "w": ("1rw", _pow2ceil(self.max_nb * self.KWW), WEIGHT_LANES * C * W_BITS, B),
            "desc": ("1r1w" if self.ring else "1rw", _pow2ceil(self.max_tiles), self.desc_bits, 1),
            "stage": ("1r1w", S * self.XW, self.X_LANE_BITS * P, R),
        }
        if stage:  # one weight buffer of B channels x C a word; the weight stage: two half-word macros per column
            self.geometry["w"] = ("1rw", _pow2ceil(self.max_nb * self.KWH), B * C * W_BITS, 1)
            self.geometry["wstage"] = ("1r1w", -(-self.stage_halves // 2), B * W_BITS, 2 * C)
        elif self.WEIGHT_PORT:  # one weight buffer of B channels x C a half-word: even and odd half-words (D109)
            self.geometry["w"] = ("1rw", _pow2ceil(self.max_nb * self.KWH) // 2 or 1, B * C * W_BITS, 2)
        port_names = ["c_tiles"]
        if queues:  # the queues' decision buffer replaces the descriptor buffer (hw.delta_queue)
            from hw.delta_queue import DeltaQueue

            del self.geometry["desc"]
            # elaborated inside this one (inline) or emitted on its own (hw.rtl): this one's own check suffices
            self.queue = discard(DeltaQueue(self, pe=pe, replay=self.replay_entries() if self.QUEUE_REPLAY else 0,
                                            reach=min(R, self.QUEUE_REACH * brows) if self.QUEUE_REACH else None))
            self.geometry["dec"] = self.queue.geometry["dec"]
            port_names = [n for n in self.queue.signature.members if n.startswith("c_")]
        # The host's X address ``token KW + word`` spans the X buffer's R / B banks (bank = token mod R / B, module
        # docstring): its width is the banks' words together, not one bank's (D102: one bank's width dropped the
        # top token bit, so tokens from 128 on overwrote tokens 0 .. 127 at 256 tokens on tiny-8x8).
        # likewise the weight port's half-word address spans its two banks (D109)
        spans = {"x": brows, "w": 2 if self.WEIGHT_PORT and not stage else 1}
        self.abits = max(_bits(dp * spans.get(name, 1)) for name, (_, dp, _, _) in self.geometry.items())
        if queues:
            self.abits = max(self.abits, self.queue.abits)  # the decision buffer's host address is the token
        self.dbits = max(w for name, (_, _, w, _) in self.geometry.items() if name != "stage")
        if queues and "replay" in self.queue.geometry:  # the queues' descriptor buffer (D120): not host-written
            self.geometry["replay"] = self.queue.geometry["replay"]
        rb = _bits(brows)
        cports = ({n: self.queue.signature.members[n] for n in port_names} if queues
                  else {"c_tiles": In(unsigned(TILE_BITS) if self.ring else range(self.max_tiles + 1))})
        super().__init__({
            "wr_valid": In(1), "wr_ready": Out(1), "wr_sel": In(2), "wr_addr": In(unsigned(self.abits)),
            "wr_data": In(unsigned(self.dbits)), **cports, **({"x_unsigned": In(1)} if self.X_UNSIGNED else {}),
            "start": In(1), "busy": Out(1), "done": Out(1),
            "out_valid": Out(unsigned(d)), "out_tile": Out(unsigned(d * TILE_BITS)), "out_row": Out(unsigned(d * rb)),
            "out_data": Out(unsigned(ctop_signature(cfg).members["out_data"].shape.width)),  # compact: out, out_m
            "desc_valid": Out(1), "desc_tile": Out(unsigned(TILE_BITS)), "desc": Out(unsigned(self.desc_bits)),
            **({"next_valid": Out(1), "next_desc": Out(unsigned(self.desc_bits)), "issue_ok": In(1)}
               if issue_gate else {}),
            # D137: the word the queues' output register loads this cycle, so the gate's read is fresh when shown
            **({"load_valid": Out(1), "load_desc": Out(unsigned(self.desc_bits))} if issue_gate and queues else {}),
        })

    def replay_entries(self) -> int:
        """The queues' replay buffer's entries where ``QUEUE_REPLAY`` (docs/decisions.md D120): ``max_tiles``;
        `hw.compact_accel.CompactAccel` sizes it by a slice's bound (D124)."""
        return self.max_tiles

    def macros(self) -> list[tuple[str, int, int, None]]:
        """The distinct macros ``(kind, depth, width, lane)`` of the buffers, sorted by `hw.sram.macro_name`."""
        kinds = set()
        for kind, depth, width, _ in self.geometry.values():
            bank, _n = split_banks(depth, width)
            kinds.add((kind, bank, width, None))
        return sorted(kinds, key=lambda t: macro_name(*t))

    # ---- structure ----
    def _bank_1rw(self, m, name, addr, re, we, wdata):
        """One copy of a 1rw buffer of `geometry` as its banks: the high address bits choose the bank; returns
        the read data (the bank chosen by the last read)."""
        kind, depth, width, _ = self.geometry[name.rstrip("0123456789")]
        bank, n = split_banks(depth, width)
        lb = (bank - 1).bit_length()
        inst = self.pe_kind == "instance"
        sel = addr[lb:] if n > 1 else Const(0, 1)
        sel_q = Signal.like(sel, name=f"{name}_sel")
        with m.If(re):
            m.d.sync += sel_q.eq(sel)
        rdata = Const(0, unsigned(width))
        for k in range(n):
            ports, elab = macro(kind, bank, width, None, instance=inst)
            m.submodules[f"{name}_m{k}"] = elab
            on = sel == k
            m.d.comb += [ports.addr.eq(addr[:lb] if lb else 0), ports.re.eq(re & on), ports.we.eq(we & on),
                         ports.wmask.eq(1), ports.wdata.eq(wdata)]
            rdata = Mux(sel_q == k, ports.rdata, rdata) if n > 1 else ports.rdata
        return rdata

    def _stage_fill(self, m, regs, regd, held, wr, entry_of, can_desc, gidx, running):
        """The weight buffer, the stage macros and the fill unit (module docstring, "Weight stage"): returns the
        state the bands share (`_stage_band`)."""
        cfg = self.cfg
        C, B, S = cfg.array_cols, cfg.compact_bands, self.S  # noqa: N806
        inst = self.pe_kind == "instance"
        fp = Signal(unsigned(TILE_BITS), name="fill_tile")       # the fill pointer: band-tiles before it passed
        fp_d = Signal(unsigned(TILE_BITS), name="fill_ready")    # fp a cycle later: their words are readable
        filling = Signal(name="filling")
        f_addr = Signal(len(regs["fsrc"][0]), name="fill_src")
        f_left = Signal(len(regs["fcount"][0]), name="fill_left")
        f_dst = Signal(len(regs["fdst"][0]), name="fill_dst")
        assigned = Signal(unsigned(S), name="entry_passed")
        e = entry_of(fp)
        sb = regs["sbuf"][e]
        blocked = Signal(name="fill_blocked")
        m.d.comb += blocked.eq(sum(((held >> k)[0] & (assigned >> k)[0] & (regs["sbuf"][k] == sb)
                                    for k in range(S)), Const(0, 1)) != 0)
        fok = Signal(name="fill_ok")
        m.d.comb += fok.eq(running & ~filling & (fp < regd))
        start = Signal(name="fill_start")
        m.d.comb += start.eq(fok & regs["seg"][e] & ~blocked)
        rd = Signal(name="fill_read")
        m.d.comb += rd.eq(start | filling)
        addr = Mux(filling, f_addr, regs["fsrc"][e])
        dst = Mux(filling, f_dst, regs["fdst"][e])
        left = Mux(filling, f_left, regs["fcount"][e])
        lastr = rd & (left == 1)
        passing = Signal(name="fill_pass")
        m.d.comb += passing.eq((fok & ~regs["seg"][e]) | lastr)
        with m.If(rd):
            m.d.sync += [filling.eq(~lastr), f_addr.eq(addr + 1), f_left.eq(left - 1), f_dst.eq(dst + 1)]
        with m.If(passing):
            m.d.sync += fp.eq(fp + 1)
        m.d.sync += fp_d.eq(fp)
        m.d.sync += assigned.eq((assigned | Mux(passing, Const(1, unsigned(S)) << e, 0))
                                & ~Mux(can_desc, Const(1, unsigned(S)) << entry_of(gidx), 0))
        wq = self._bank_1rw(m, "w", Mux(running, addr, self.wr_addr), running & rd, wr & (self.wr_sel == 1),
                            self.wr_data[:B * C * W_BITS])
        # the write the cycle after the read: half-word dst into macro dst mod 2, word dst // 2
        w_on = Signal(name="stage_fill_we")
        w_at = Signal.like(f_dst, name="stage_fill_at")
        m.d.sync += [w_on.eq(rd), w_at.eq(dst)]
        _, depth, width, _ = self.geometry["wstage"]
        turn_addr = Signal(len(f_dst), name="stage_raddr")  # the half-word a band's turn reads (set by the bands)
        re = Signal(name="stage_re")
        par = Signal(name="stage_rpar")
        m.d.sync += par.eq(turn_addr[0])
        lo_a, hi_a = turn_addr >> 1, (turn_addr >> 1) + turn_addr[0]
        cols = []
        for c in range(C):
            half = []
            for h in range(2):
                ports, elab = macro("1r1w", depth, width, None, instance=inst)
                m.submodules[f"wstage_c{c}_h{h}"] = elab
                wdata = Cat(*(wq[W_BITS * (k * C + c):W_BITS * (k * C + c + 1)] for k in range(B)))
                m.d.comb += [ports.waddr.eq(w_at >> 1), ports.wdata.eq(wdata), ports.we.eq(w_on & (w_at[0] == h)),
                             ports.wmask.eq(1), ports.raddr.eq(hi_a if h == 0 else lo_a), ports.re.eq(re)]
                half.append(ports.rdata)
            # the word's two halves: even first when it started on an even half-word
            col = Signal(2 * B * W_BITS, name=f"stage_col{c}")
            m.d.comb += col.eq(Mux(par, Cat(half[1], half[0]), Cat(half[0], half[1])))
            cols.append(col)
        word = Signal(2 * B * C * W_BITS, name="stage_word")  # the read word, lane h C + c (channel h, column c)
        m.d.comb += word.eq(Cat(*(cols[c][W_BITS * k:W_BITS * (k + 1)] for k in range(2 * B) for c in range(C))))
        turn = Signal(range(max(2, B)), name="stage_turn")
        m.d.sync += turn.eq(Mux(turn == B - 1, 0, turn + 1))
        #: For test benches: a stage read, a fill (weight-buffer) read and a stage write this cycle.
        self.stage_re, self.fill_re, self.fill_we = re, rd, w_on
        return {"fp_d": fp_d, "word": word, "turn": turn, "raddr": turn_addr, "re": re, "fp": fp, "filling": filling,
                "resets": [fp, fp_d, filling, assigned, w_on, turn], "need": [], "free": [], "load": [],
                "defer": []}

    def _port_words(self, m, regd, wr, running):
        """The one weight buffer read by band turn (``WEIGHT_PORT``, module docstring "Weight port"; D109): returns
        the state the bands share (`_stage_band`), as `_stage_fill` does for the stage."""
        cfg = self.cfg
        C, B = cfg.array_cols, cfg.compact_bands  # noqa: N806
        lkh = (_pow2ceil(self.max_nb * self.KWH) - 1).bit_length()
        turn_addr = Signal(max(1, lkh), name="stage_raddr")  # the half-word a band's turn reads (set by the bands)
        re = Signal(name="stage_re")
        par = Signal(name="stage_rpar")
        m.d.sync += par.eq(turn_addr[0])
        # half-words a and a + 1: the even bank at (a + 1) // 2, the odd one at a // 2; the host's half-word h goes
        # into bank h mod 2 at h // 2
        hw_ = self.wr_addr
        we = wr & (self.wr_sel == 1)
        wdata = self.wr_data[:B * C * W_BITS]
        halves = []
        for h in range(2):
            raddr = (turn_addr >> 1) + (turn_addr[0] if h == 0 else 0)
            halves.append(self._bank_1rw(m, f"w{h}", Mux(running, raddr, hw_ >> 1), running & re,
                                         we & (hw_[0] == h), wdata))
        word = Signal(2 * B * C * W_BITS, name="stage_word")  # the read word, lane h C + c (channel h, column c)
        m.d.comb += word.eq(Mux(par, Cat(halves[1], halves[0]), Cat(halves[0], halves[1])))
        turn = Signal(range(max(2, B)), name="stage_turn")
        m.d.sync += turn.eq(Mux(turn == B - 1, 0, turn + 1))
        #: For test benches: a read of the weight buffer (both banks) this cycle.
        self.w_re = self.stage_re = re
        # the buffer holds the op's weights from start: a band-tile's words are readable once its fields are held
        return {"fp_d": regd, "word": word, "turn": turn, "raddr": turn_addr, "re": re,
                "resets": [turn], "need": [], "free": [], "load": [], "defer": []}

    def _stage_band(self, m, stg, b, tile, cur, chan, wok, acc, last, done_b, T, ahead=None):  # noqa: N803
        """Band b's three word registers and their loads (module docstring): returns the slot's two weight lanes
        ``(w_a, w_b)`` (C weights each); sets the band's ``word_ok``. ``ahead`` (early band choice, D99): the
        band's ``(idle, has_next, next fields)``; its loads go on into the next band-tile's words."""
        from sim.timing.compact import WORD_REGISTERS

        C, B = self.cfg.array_cols, self.cfg.compact_bands  # noqa: N806
        nreg, lw = WORD_REGISTERS, (2 * B - 1).bit_length()
        nwmax = -(-self.max_k // (2 * B))
        wregs = [Signal(unsigned(2 * B * C * W_BITS), name=f"b{b}_wreg{i}") for i in range(nreg)]
        pw, cw, pl = (Signal(range(nwmax + 1), name=f"b{b}_{n}") for n in ("words_read", "words_used", "words_in"))
        wr_i, rd_i = Signal(range(nreg), name=f"b{b}_wr_idx"), Signal(range(nreg), name=f"b{b}_rd_idx")
        infl = Signal(name=f"b{b}_inflight")
        nw = (cur["width"] + (2 * B - 1)) >> lw
        need = Signal(name=f"b{b}_need")
        addr = Signal(len(stg["raddr"]), name=f"b{b}_need_addr")
        pop = Signal(name=f"b{b}_pop")
        lane = chan[:lw]
        m.d.comb += pop.eq(acc & (last | (Mux(cur["paired"], lane | 1, lane) == 2 * B - 1)))
        free = Signal(name=f"b{b}_free")
        load = Signal(name=f"b{b}_load")
        stg["need"].append((need, addr, free, load))
        m.d.sync += infl.eq(load)
        for i, r in enumerate(wregs):
            with m.If(infl & (wr_i == i)):
                m.d.sync += r.eq(stg["word"])
        with m.If(infl):
            m.d.sync += wr_i.eq(Mux(wr_i == nreg - 1, 0, wr_i + 1))
        with m.If(pop):
            m.d.sync += [cw.eq(cw + 1), rd_i.eq(Mux(rd_i == nreg - 1, 0, rd_i + 1))]
        if ahead is None:  # D96: the band's band-tile only; its counters start again with the next
            m.d.comb += [need.eq((tile < stg["fp_d"]) & (Const(1) if T is None else tile < T) & (pw < nw)),
                         addr.eq(cur["saddr"] + (pw << 1)), free.eq(pw - cw < nreg + pop)]
            with m.If(infl):
                m.d.sync += pl.eq(pl + 1)
            with m.If(load):
                m.d.sync += pw.eq(pw + 1)
            with m.If(done_b):
                m.d.sync += [pw.eq(0), cw.eq(0), pl.eq(0), wr_i.eq(0), rd_i.eq(0)]
            stg["resets"] += [pw, cw, pl, wr_i, rd_i, infl]
            if self.defer:  # the next word's band-tile (its stage buffer and word 0) and index, two words in use
                stg["defer"].append((cur["sbuf"], cur["saddr"], pw, pw - cw >= 2 + pop))
        else:  # D99: past the band-tile's last word, on into its next band-tile's (the registers a ring)
            idle, has_nx, nd = ahead
            pn, pln = (Signal(range(nwmax + 1), name=f"b{b}_{n}") for n in ("next_read", "next_in"))
            land_nx = Signal(name=f"b{b}_landing_next")
            cur_has = ~idle & (Const(1) if T is None else tile < T)
            use_nx = Signal(name=f"b{b}_reads_next")
            m.d.comb += use_nx.eq(~(cur_has & (pw < nw)))
            nw_nx = (nd["width"] + (2 * B - 1)) >> lw
            m.d.comb += [need.eq(Mux(use_nx, has_nx & (nd["tile"] < stg["fp_d"]) & (pn < nw_nx),
                                     (tile < stg["fp_d"]) & cur_has)),
                         addr.eq(Mux(use_nx, nd["saddr"] + (pn << 1), cur["saddr"] + (pw << 1))),
                         free.eq(pw - cw + pn < nreg + pop)]
            m.d.sync += land_nx.eq(load & use_nx & ~done_b)
            with m.If(infl):
                with m.If(land_nx):
                    m.d.sync += pln.eq(pln + 1)
                with m.Else():
                    m.d.sync += pl.eq(pl + 1)
            with m.If(load):
                with m.If(use_nx):
                    m.d.sync += pn.eq(pn + 1)
                with m.Else():
                    m.d.sync += pw.eq(pw + 1)
            with m.If(done_b):  # the next band-tile's words become the band-tile's
                m.d.sync += [pw.eq(pn + (load & use_nx)), pn.eq(0), cw.eq(0),
                             pl.eq(pln + (infl & land_nx)), pln.eq(0)]
            stg["resets"] += [pw, cw, pl, wr_i, rd_i, infl, pn, pln, land_nx]
            if self.defer:  # as above, of the band-tile its next word belongs to
                stg["defer"].append((Mux(use_nx, nd["sbuf"], cur["sbuf"]), Mux(use_nx, nd["saddr"], cur["saddr"]),
                                     Mux(use_nx, pn, pw), pw - cw + pn >= 2 + pop))
        wword = Signal(unsigned(2 * B * C * W_BITS), name=f"b{b}_wuse")  # the word in use
        sel = wregs[-1]
        for i in range(nreg - 2, -1, -1):
            sel = Mux(rd_i == i, wregs[i], sel)
        m.d.comb += [wword.eq(sel), wok.eq(cw < pl)]
        wa, wb = Signal(C * W_BITS, name=f"b{b}_wsel_a"), Signal(C * W_BITS, name=f"b{b}_wsel_b")
        # a mux per lane, not a variable shift: each bit then depends on 2 B bits, a shift's on all 2 B C W_BITS,
        # which Amaranth's conversion walks bit by bit (the balanced preset's module: 50 s with shifts, 26 s so)
        pick_a, pick_b = (wword.word_select(2 * B - 1, C * W_BITS),) * 2
        for k in range(2 * B - 2, -1, -1):
            pick_a = Mux(lane == k, wword.word_select(k, C * W_BITS), pick_a)
            pick_b = Mux((lane | 1) == k, wword.word_select(k, C * W_BITS), pick_b)
        m.d.comb += [wa.eq(pick_a), wb.eq(pick_b)]
        return wa, wb

    def _early_choice(self, m, regs, regd, running, nxt, entry_of, T):  # noqa: N803
        """The early band choice's shared part (module docstring, "Early band choice"; D99): per band its state
        registers, and the cycle's choice: band-tile ``nxt`` to the band with the least expected last slot."""
        B = self.cfg.compact_bands  # noqa: N806
        tiles = self.band_tile
        ek = {"E": [Signal(EXPECT_BITS, name=f"b{b}_expect") for b in range(B)],
              "idle": [Signal(name=f"b{b}_idle") for b in range(B)],
              "started": [Signal(name=f"b{b}_started") for b in range(B)],
              "nx": [Signal(unsigned(TILE_BITS), name=f"b{b}_next") for b in range(B)],
              "has_nx": [Signal(name=f"b{b}_has_next") for b in range(B)]}
        now = Signal(EXPECT_BITS, name="cycle")  # cycles since the one after start
        m.d.sync += now.eq(now + 1)
        ek["now"] = now
        ek["nd"] = []
        for b in range(B):  # the next band-tile's fields, from its staging entry's registers
            e = entry_of(ek["nx"][b])
            ek["nd"].append({"tile": ek["nx"][b], **{n: regs[n][e] for n in ("width", "paired", "saddr")
                                                      + (("sbuf",) if self.defer else ())}})
        cand = [Signal(name=f"b{b}_candidate") for b in range(B)]  # no next yet, its band-tile started (or none)
        for b in range(B):
            m.d.comb += cand[b].eq(~ek["has_nx"][b] & (ek["idle"][b] | (Const(0) if T is None else tiles[b] >= T) | ek["started"][b]))
        best_v, best_e, best_i = cand[0], ek["E"][0], Const(0, range(max(2, B)))
        for b in range(1, B):  # the candidate with the least E, ties to the lower band: a signal per step
            lt = cand[b] & (~best_v | (ek["E"][b] < best_e))
            v_s, e_s = Signal(name=f"choice_v{b}"), Signal(EXPECT_BITS, name=f"choice_e{b}")
            i_s = Signal(range(max(2, B)), name=f"choice_b{b}")
            m.d.comb += [v_s.eq(best_v | cand[b]), e_s.eq(Mux(lt, ek["E"][b], best_e)), i_s.eq(Mux(lt, b, best_i))]
            best_v, best_e, best_i = v_s, e_s, i_s
        give = Signal(name="choice_give")
        m.d.comb += give.eq(running & (Const(1) if T is None else nxt < T) & (nxt < regd) & best_v & (best_e <= now + EARLY_AHEAD * B))
        en = entry_of(nxt)
        s_n = Signal(range(self.max_k + 1), name="choice_slots")
        m.d.comb += s_n.eq(Mux(regs["paired"][en], (regs["width"][en] + 1) >> 1, regs["width"][en]))
        ek.update(give=give, best=best_i, s_n=s_n, nxt=nxt,
                  resets=[now, *ek["E"], *ek["started"], *ek["has_nx"]])
        return ek

    def _early_band(self, m, ek, b, tile, cur, slots, acc, slot, done_b, top):
        """Band b's part of the early band choice (D99): its expected last slot, port free cycles, next band-tile;
        drives ``kaleido_dtop_ext``'s ``b{b}_tile_in``. Returns the band-tile number it runs from the next cycle."""
        cfg = self.cfg
        B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
        q, ports_b = max(1, B // d), max(1, d // B)
        E, idle, started, nx, has_nx = (ek[n][b] for n in ("E", "idle", "started", "nx", "has_nx"))  # noqa: N806
        now = ek["now"]
        pact = [Signal(EXPECT_BITS, name=f"b{b}_port{k}_free") for k in range(ports_b)]
        cnt = Signal(range(ports_b), name=f"b{b}_port") if ports_b > 1 else Const(0, 1)
        ek["resets"] += pact + ([cnt] if ports_b > 1 else [])
        pact_a = Array(pact)
        mine = ek["give"] & (ek["best"] == b)
        to_cur = mine & (idle | (done_b & ~has_nx))
        rows_q = cur["nrows"] * q
        if ports_b == 1:  # the port's last band-tile is the band's own: its expected last slot
            f_at = E + rows_q
        else:  # the band-tile ports_b back on that port has run
            f_at = pact_a[Mux(cnt == ports_b - 1, 0, cnt + 1)]
        e_give = Signal(EXPECT_BITS, name=f"b{b}_expect_next")
        m.d.comb += e_give.eq(Mux(E + ek["s_n"] > f_at, E + ek["s_n"], f_at))
        first_acc = acc & (slot == 0)
        e_first = now + slots - 1
        with m.If(first_acc):
            m.d.sync += [started.eq(1), E.eq(Mux(e_first > pact_a[cnt], e_first, pact_a[cnt]))]
        with m.If(done_b):
            m.d.sync += [pact_a[cnt].eq(now + rows_q), started.eq(0)]
            if ports_b > 1:
                m.d.sync += cnt.eq(Mux(cnt == ports_b - 1, 0, cnt + 1))
            with m.If(has_nx):
                m.d.sync += has_nx.eq(0)
            with m.Else():
                m.d.sync += [idle.eq(1), E.eq(now)]
        with m.If(mine):
            m.d.sync += E.eq(e_give)
            with m.If(to_cur):
                m.d.sync += [idle.eq(0), started.eq(0)]
            with m.Else():
                m.d.sync += [nx.eq(ek["nxt"]), has_nx.eq(1)]
        m.d.comb += getattr(top, f"b{b}_tile_in").eq(tile)
        # idle from the next cycle on (its number then a stale one, not read from: D105's staging reads)
        idle_nx = Signal(name=f"b{b}_idle_next")
        m.d.comb += idle_nx.eq(~to_cur & (idle | (done_b & ~has_nx)))
        ek.setdefault("idle_next", []).append(idle_nx)
        return Mux(to_cur, ek["nxt"], Mux(done_b, nx, tile))

    def _top(self, m, reset):
        """``kaleido_dtop``, reset by the domain's reset or ``reset``: the ports (inline: the `CompactTop`)."""
        cfg = self.cfg
        if self.pe_kind == "inline":
            top = CompactTop(cfg, pe="inline", choice="ext" if self.early else "self")
            m.submodules.top = ResetInserter(reset)(top)
            return top
        sig = ctop_signature(cfg, self.early)
        ports = sig.flip().create()
        rst = Signal(name="top_rst")
        m.d.comb += rst.eq(ResetSignal("sync") | reset)
        kw = {"i_clk": ClockSignal("sync"), "i_rst": rst}
        for name, member in sig.members.items():
            kw[("i_" if member.flow == In else "o_") + name] = getattr(ports, name)
        m.submodules.top = Instance(top_module_name(cfg, self.early), **kw)
        return ports

    def _queue(self, m, begin, we):
        """``kaleido_dqueue`` (`hw.delta_queue.DeltaQueue`), started by ``begin``, its decision buffer written by
        ``we``, its ``c_*`` ports this controller's: the ports (inline: the `DeltaQueue`)."""
        from hw.delta_queue import DQUEUE_MODULE_NAME

        sig = self.queue.signature
        if self.pe_kind == "inline":
            ports = self.queue
            m.submodules.queue = self.queue
        else:
            ports = sig.flip().create()
            kw = {"i_clk": ClockSignal("sync"), "i_rst": ResetSignal("sync")}
            for name, member in sig.members.items():
                kw[("i_" if member.flow == In else "o_") + name] = getattr(ports, name)
            m.submodules.queue = Instance(DQUEUE_MODULE_NAME, **kw)
        m.d.comb += [ports.start.eq(begin), ports.wr_valid.eq(we), ports.wr_addr.eq(self.wr_addr),
                     ports.wr_data.eq(self.wr_data[:len(ports.wr_data)])]
        m.d.comb += [getattr(ports, n).eq(getattr(self, n)) for n in sig.members if n.startswith("c_")]
        return ports

    def _desc_ring(self, m, running, begin, can_desc, gidx, T, ok, in_rows, free):  # noqa: N803
        """The descriptor ring (module docstring "Ring", docs/decisions.md D134): the host's writes into entry
        ``written mod ring`` while one is free, the take's condition on ``can_desc``; returns the taken
        descriptor (the ring's read, or with the issue gate the read-ahead registered at the take)."""
        ring, lr = self.ring, (self.ring - 1).bit_length()
        inst = self.pe_kind == "instance"
        written = Signal(unsigned(TILE_BITS), name="desc_written")  # descriptors the host wrote this op
        room = Signal(name="desc_room")  # entry written mod ring is free: its last occupant was taken
        m.d.comb += room.eq(Mux(running, written < gidx + ring, written < ring))
        dwr = Signal(name="desc_wr")
        m.d.comb += [dwr.eq(self.wr_valid & (self.wr_sel == 2) & room),
                     self.wr_ready.eq(Mux(self.wr_sel == 2, room, ~running))]
        with m.If(dwr):
            m.d.sync += written.eq(written + 1)
        with m.If(self.done):
            m.d.sync += written.eq(0)
        #: Per ring entry the rows of its band-tile not yet drained (`_ring_drain`), for test benches.
        self.ring_left = Array(Signal(range(self.brows + 1), name=f"ring{e}_left") for e in range(ring))
        self.ring_ok = Signal(name="ring_ok")  # band-tile gidx - ring has drained its last row
        m.d.comb += self.ring_ok.eq(self.ring_left[gidx[:lr]] == 0)
        ports, mac = macro("1r1w", ring, self.desc_bits, None, instance=inst)
        m.submodules.desc = mac
        m.d.comb += [ports.waddr.eq(written[:lr]), ports.we.eq(dwr), ports.wmask.eq(1),
                     ports.wdata.eq(self.wr_data[:self.desc_bits])]
        take = running & ~in_rows & (gidx < T) & free & self.ring_ok
        #: For test benches: a take held by the drained gate alone (the next band-tile's descriptor written, the gather
        #: idle, its staging entry free, band-tile gidx - ring not drained).
        self.ring_wait = Signal(name="ring_wait")
        m.d.comb += self.ring_wait.eq(running & ~in_rows & (gidx < T) & free & ~self.ring_ok & (gidx < written))
        if not self.issue_gate:  # read at the take, the output held through the gather (hw.sram)
            m.d.comb += [can_desc.eq(take & (gidx < written)), ports.raddr.eq(gidx[:lr]), ports.re.eq(can_desc)]
            return ports.rdata
        # D126's read-ahead: descriptor 0 at begin, gidx + 1 at each take; a read of an entry not yet written (the
        # host behind) is repeated once it is
        ahead = Signal(name="desc_ahead_ok")
        again = Signal(name="desc_reread")
        m.d.comb += [can_desc.eq(take & ok & ahead), again.eq(running & ~ahead & (gidx < written)),
                     ports.raddr.eq(Mux(begin, 0, Mux(can_desc, gidx + 1, gidx))[:lr]),
                     ports.re.eq(begin | can_desc | again)]
        with m.If(begin):
            m.d.sync += ahead.eq(written != 0)
        with m.Elif(can_desc):
            m.d.sync += ahead.eq(gidx + 1 < written)
        with m.Elif(again):
            m.d.sync += ahead.eq(1)
        dq = Signal(unsigned(self.desc_bits), name="desc_q")  # the taken descriptor, registered at the take
        with m.If(can_desc):
            m.d.sync += dq.eq(ports.rdata)
        m.d.comb += [self.next_valid.eq(running & (gidx < T) & ahead), self.next_desc.eq(ports.rdata)]
        return dq

    def _ring_drain(self, m, top, g_first, gidx, nrows):
        """Each ring entry's rows not yet drained (docs/decisions.md D134): set to the band-tile's rows at its take's
        first cycle (the descriptor's fields valid), less one per row a drain port hands out with its band-tile
        number's low bits; 0 after an op (``done`` needs every row drained)."""
        d, lr = self.cfg.drain_rows_per_cycle, (self.ring - 1).bit_length()
        slot = (gidx - 1)[:lr]  # the band-tile taken the cycle before (gidx has counted it)
        for e, left in enumerate(self.ring_left):
            hits = [top.out_valid[p] & (top.out_tile[p * TILE_BITS:p * TILE_BITS + lr] == e) for p in range(d)]
            n = sum(hits[1:], hits[0] + 0) if d > 1 else hits[0]
            with m.If(g_first & (slot == e)):
                m.d.sync += left.eq(nrows)
            with m.Elif(n != 0):
                m.d.sync += left.eq(left - n)

    def elaborate(self, platform):  # noqa: C901
        m = Module()
        cfg = self.cfg
        R, C, B, d = cfg.array_rows, cfg.array_cols, cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
        P, S, XW, brows, XB = self.P, self.S, self.XW, self.brows, self.X_LANE_BITS  # noqa: N806
        lp, ls, lxw = (P - 1).bit_length(), (S - 1).bit_length(), (XW - 1).bit_length()
        lkw, lkww = (self.KW - 1).bit_length(), (self.KWW - 1).bit_length()
        Q = self.queues  # noqa: N806
        T = None if Q else self.c_tiles  # noqa: N806

        running = Signal(name="running")
        begin = Signal(name="begin")  # the start cycle: every run register takes its start value
        m.d.comb += [begin.eq(self.start & ~running), self.busy.eq(running)]
        if not self.ring:
            m.d.comb += self.wr_ready.eq(~running)
        wr = Signal(name="wr")
        m.d.comb += wr.eq(self.wr_valid & ~running)
        top = self._top(m, begin)
        #: The top's ports (inline: the `CompactTop` itself), for test benches.
        self.top = top
        if self.X_UNSIGNED:
            m.d.comb += top.x_unsigned.eq(self.x_unsigned)

        # ---- descriptor buffer and per-entry descriptor registers ----
        gidx = Signal(unsigned(TILE_BITS), name="gather_tile")   # next band-tile to gather
        in_rows = Signal(name="gather_rows")                      # reading X words
        g_first = Signal(name="gather_first")                     # the first X-word cycle (descriptor data valid)
        g_word = Signal(range(max(2, XW)), name="gather_word")
        g_entry = Signal(range(max(2, S)), name="gather_entry")
        held = Signal(unsigned(S), name="entry_held")            # staging entries held by a band-tile
        gdone = Signal(unsigned(TILE_BITS), name="gathered")      # band-tiles whose staging writes are done
        avail = Signal(unsigned(TILE_BITS), name="available")     # gathered, one cycle later (readable)
        rmax = ((1 << TILE_BITS) if self.ring else self.max_tiles) * brows + 1
        rowsum = Signal(range(rmax), name="rows_listed")
        drained = Signal(range(rmax), name="rows_drained")

        entry_of = (lambda n: n[:ls]) if ls else (lambda n: Const(0, 1))
        free = ~(held >> entry_of(gidx))[0]
        can_desc = Signal(name="gather_desc")
        q_fin = Signal(name="queue_finished")  # the queues' done seen (sticky until the next start)
        ok = self.issue_ok if self.issue_gate else Const(1, 1)  # D126: the core's issue gate
        if Q:
            q = self._queue(m, begin, wr & (self.wr_sel == 3))
            m.d.comb += [can_desc.eq(running & ~in_rows & q.out_valid & free & ok), q.out_ready.eq(can_desc)]
            dq = Signal(unsigned(self.desc_bits), name="desc_q")  # the taken descriptor, as the buffer's read
            with m.If(can_desc):
                m.d.sync += dq.eq(q.out_desc)
            with m.If(q.done):
                m.d.sync += q_fin.eq(1)
            if self.issue_gate:  # the next descriptor: the queues' output register, and the word it loads (D137)
                m.d.comb += [self.next_valid.eq(q.out_valid), self.next_desc.eq(q.out_desc),
                             self.load_valid.eq(q.load_valid), self.load_desc.eq(q.load_desc)]
        elif self.ring:  # D134: the host's list a FIFO ring, the take gated by the drained rows
            dq = self._desc_ring(m, running, begin, can_desc, gidx, T, ok, in_rows, free)
        elif self.issue_gate:  # D126: the buffer reads ahead (descriptor 0 at begin, gidx + 1 at each take)
            m.d.comb += can_desc.eq(running & ~in_rows & (gidx < T) & free & ok)
            nd = self._bank_1rw(m, "desc", Mux(running, gidx + 1, Mux(begin, 0, self.wr_addr)), can_desc | begin,
                                wr & (self.wr_sel == 2), self.wr_data[:self.desc_bits])
            dq = Signal(unsigned(self.desc_bits), name="desc_q")  # the taken descriptor, registered at the take
            with m.If(can_desc):
                m.d.sync += dq.eq(nd)
            m.d.comb += [self.next_valid.eq(running & (gidx < T)), self.next_desc.eq(nd)]
        else:
            m.d.comb += can_desc.eq(running & ~in_rows & (gidx < T) & free)
            dq = self._bank_1rw(m, "desc", Mux(running, gidx, self.wr_addr), can_desc, wr & (self.wr_sel == 2),
                                self.wr_data[:self.desc_bits])
        f, pos = {}, 0
        for name, bits in self.fields:
            f[name] = dq[pos:pos + bits]
            pos += bits
        if self.ring:  # each ring entry's rows not yet drained: set at the take's first cycle, counted down
            self._ring_drain(m, top, g_first, gidx, f["nrows"])
        regs = {n: Array(Signal(unsigned(b), name=f"e{e}_{n}") for e in range(S))
                for n, b in self.fields if n not in ("tokens", "xoff", "xwords")}
        regd = Signal(unsigned(TILE_BITS), name="desc_held")  # band-tiles whose entry registers hold their fields

        # ---- gather: X words into the staging entry, one word of every bank a cycle ----
        NB, lnb = self.NB, (self.NB - 1).bit_length()  # noqa: N806
        toks = [f["tokens"][i * self.tb:(i + 1) * self.tb] for i in range(brows)]
        live = [Signal(name=f"gather_live{i}") for i in range(brows)]
        bank = [t[:lnb] if lnb else Const(0, 1) for t in toks]
        rank = []  # rows before row i (valid ones) in the same bank: row i's round
        for i in range(brows):
            m.d.comb += live[i].eq(i < f["nrows"])
            r = Signal(range(brows), name=f"gather_rank{i}")
            m.d.comb += r.eq(sum((bank[j] == bank[i] for j in range(i)), Const(0, unsigned(_bits(brows)))))
            rank.append(r)
        top_rank = Const(0, unsigned(_bits(brows)))
        for i in range(brows):  # a signal per step: the expression reads its input twice
            step = Signal(unsigned(_bits(brows)), name=f"gather_top{i}")
            m.d.comb += step.eq(Mux(live[i] & (rank[i] > top_rank), rank[i], top_rank))
            top_rank = step
        g_round = Signal(range(brows), name="gather_round")
        xw_sum = (f["xoff"] + g_word)[:lkw] if lkw else Const(0, 1)
        hb = self.geometry["x"][1].bit_length() - 1 - lkw  # in-bank token bits
        on = [Signal(name=f"gather_on{i}") for i in range(brows)]
        for i in range(brows):
            m.d.comb += on[i].eq(in_rows & live[i] & (rank[i] == g_round))
        # the host's address token KW + word: bank = token mod NB, in-bank word (token // NB) KW + word
        h_bank = self.wr_addr[lkw:lkw + lnb] if lnb else Const(0, 1)
        h_addr = Cat(self.wr_addr[:lkw], self.wr_addr[lkw + lnb:]) if lkw else self.wr_addr[lnb:]
        xq = []
        #: Per X bank its read enable (``X_READ_ENABLES``: a named signal ``x{k}_re``).
        self.x_re = []
        for k in range(NB):
            addr = Const(0, unsigned(lkw + hb))
            rd = Const(0, 1)
            for i in range(brows):
                mine = on[i] & (bank[i] == k)
                row_addr = Cat(xw_sum, toks[i][lnb:lnb + hb]) if lkw else toks[i][lnb:lnb + hb]
                addr = Mux(mine, row_addr, addr)
                rd = rd | mine
            x_re = running & rd
            if self.X_READ_ENABLES:
                x_re = Signal(name=f"x{k}_re")
                m.d.comb += x_re.eq(running & rd)
            self.x_re.append(x_re)
            xq.append(self._bank_1rw(m, f"x{k}", Mux(running, addr, h_addr), x_re,
                                     wr & (self.wr_sel == 0) & (h_bank == k), self.wr_data[:XB * P]))
        last_word = g_word == f["xwords"] - 1
        last_round = g_round == top_rank
        w_last = Signal(name="stage_last")
        w_on = [Signal(name=f"stage_we{i}") for i in range(brows)]
        w_bank = [Signal(range(max(2, NB)), name=f"stage_bank{i}") for i in range(brows)]
        w_addr = Signal(unsigned(max(1, ls + lxw)), name="stage_waddr")
        with m.If(can_desc):
            m.d.sync += [in_rows.eq(1), g_first.eq(1), g_round.eq(0), g_word.eq(0), g_entry.eq(entry_of(gidx)),
                         gidx.eq(gidx + 1)]
        with m.If(in_rows):
            m.d.sync += g_first.eq(0)
            with m.If(g_first):
                for n, arr in regs.items():
                    m.d.sync += arr[g_entry].eq(f[n])
                m.d.sync += rowsum.eq(rowsum + f["nrows"])
                if self.wpath:
                    m.d.sync += regd.eq(regd + 1)
            with m.If(last_word):
                m.d.sync += [g_word.eq(0), g_round.eq(g_round + 1)]
                with m.If(last_round):
                    m.d.sync += in_rows.eq(0)
            with m.Else():
                m.d.sync += g_word.eq(g_word + 1)
        stage_w = Cat(g_word[:lxw], g_entry[:ls]) if ls + lxw else Const(0, 1)
        m.d.sync += [w_last.eq(in_rows & last_word & last_round), w_addr.eq(stage_w), avail.eq(gdone)]
        m.d.sync += [w_on[i].eq(on[i]) for i in range(brows)] + [w_bank[i].eq(bank[i]) for i in range(brows)]
        with m.If(w_last):
            m.d.sync += gdone.eq(gdone + 1)
        stage_data = []
        for i in range(brows):
            data = xq[0]
            for k in range(1, NB):
                data = Mux(w_bank[i] == k, xq[k], data)
            stage_data.append(data)

        # ---- weight stage (stage=True, D96): fills from the one weight buffer, then per band word registers ----
        if self.stage:
            stg = self._stage_fill(m, regs, regd, held, wr, entry_of, can_desc, gidx, running)
        elif self.wpath:  # the weight port (D109): a group's word 0 at half-word cb KWH + woff, one "buffer"
            lkh = (self.KWH - 1).bit_length()
            regs["saddr"] = Array(Cat(regs["woff"][e][:lkh], regs["cb"][e]) for e in range(S))
            regs["sbuf"] = Array(Const(0, 1) for _ in range(S))
            stg = self._port_words(m, regd, wr, running)
        # ---- bands ----
        nxt = Signal(unsigned(TILE_BITS), name="next_tile", init=B)
        taken = Const(0, unsigned(TILE_BITS))
        release = Const(0, unsigned(S))
        inst = self.pe_kind == "instance"
        #: Per band the band-tile number it runs (mirrors ``kaleido_dtop``'s ``b{b}_tile``), for test benches.
        self.band_tile, slots_of = [Signal(unsigned(TILE_BITS), name=f"b{b}_tile", init=b) for b in range(B)], []
        #: Per band its staging read enable (its live rows read together, D105) and per band and band row the
        #: staging macro's ports, for test benches to count the reads.
        self.staging_re, self.staging_ports, s_resets = [], [], []
        if self.early:
            ek = self._early_choice(m, regs, regd, running, nxt, entry_of, T)
        for b in range(B):
            tile = self.band_tile[b]
            slot = Signal(range(self.max_k + 1), name=f"b{b}_slot")
            slots_of.append(slot)
            e = entry_of(tile)
            cur = {n: arr[e] for n, arr in regs.items()}
            slots = Mux(cur["paired"], (cur["width"] + 1) >> 1, cur["width"])
            valid, last, acc, done_b = (Signal(name=f"b{b}_{n}") for n in ("valid", "last", "accept", "done"))
            wok = Signal(name=f"b{b}_word_ok")  # staged: the slot's weight word is in its register
            m.d.comb += [valid.eq(running & (tile < avail) & (Const(1) if Q else tile < T) & wok
                                  & (~ek["idle"][b] if self.early else 1)),
                         last.eq(slot == slots - 1),
                         acc.eq(valid & getattr(top, f"b{b}_ready")), done_b.eq(acc & last)]
            if self.early:
                ntile = self._early_band(m, ek, b, tile, cur, slots, acc, slot, done_b, top)
            else:
                ntile = Mux(done_b, nxt + taken, tile)
                taken = taken + done_b
            nslot = Mux(done_b, 0, Mux(acc, slot + 1, slot))
            m.d.sync += [tile.eq(ntile), slot.eq(nslot)]
            release = release | Mux(done_b, Const(1, unsigned(S)) << e, 0)
            # the next cycle's slot: its staging and weight words are read now (synchronous macros)
            ne = entry_of(ntile)
            nd = {n: arr[ne] for n, arr in regs.items()}
            nchan = Mux(nd["paired"], nslot << 1, nslot)
            s_raddr = Cat(nchan[lp:lp + lxw], ne) if ls + lxw else Const(0, 1)
            # the staging read (D105): only when the next cycle's slot needs a word the band's row macros do not hold
            # (their outputs hold the last read's word, `hw.sram`), and only of its band-tile's live rows
            s_held_addr = Signal(unsigned(_bits(S * XW)), name=f"b{b}_staging_addr")  # the band's last staging read
            s_held = Signal(name=f"b{b}_staging_held")  # its live rows' outputs hold that word of the band's band-tile
            s_re = Signal(name=f"b{b}_staging_re")
            m.d.comb += s_re.eq(running & (ntile < gdone) & (~ek["idle_next"][b] if self.early else 1)
                                & (~s_held | (ntile != tile) | (s_raddr != s_held_addr)))
            with m.If(s_re):
                m.d.sync += s_held_addr.eq(s_raddr)
            m.d.sync += s_held.eq(s_re | (s_held & (ntile == tile)))
            self.staging_re.append(s_re)
            s_resets.append(s_held)
            if not self.wpath:
                wsum = (nd["woff"] + (nchan >> 1))[:lkww]
                wq = self._bank_1rw(m, f"w{b}", Mux(running, Cat(wsum, nd["cb"]), self.wr_addr), running,
                                    wr & (self.wr_sel == 1), self.wr_data[:WEIGHT_LANES * C * W_BITS])
            chan = Mux(cur["paired"], slot << 1, slot)
            has_b = Signal(name=f"b{b}_has_b")
            m.d.comb += has_b.eq(cur["paired"] & (chan + 1 < cur["width"]))
            if self.wpath:
                ahead = (ek["idle"][b], ek["has_nx"][b], ek["nd"][b]) if self.early else None
                wsel = self._stage_band(m, stg, b, tile, cur, chan, wok, acc, last, done_b, T, ahead)
            else:
                m.d.comb += wok.eq(1)
            xa, xb, modes = [], [], []
            for i in range(brows):
                ports, elab = macro("1r1w", S * XW, XB * P, None, instance=inst)
                m.submodules[f"stage_b{b}_r{i}"] = elab
                self.staging_ports.append(ports)
                m.d.comb += [ports.waddr.eq(w_addr), ports.wdata.eq(stage_data[i]), ports.we.eq(w_on[i]),
                             ports.wmask.eq(1), ports.raddr.eq(s_raddr), ports.re.eq(s_re & (i < nd["nrows"]))]
                live = i < cur["nrows"]
                lane = chan[:lp]
                xa.append(Mux(live, ports.rdata.word_select(lane, XB), 0))
                xb.append(Mux(live & has_b, ports.rdata.word_select(lane | 1, XB), 0))
                modes.append(Mux(i < cur["ncomp"], int(PEMode.COMPUTE),
                                 Mux(live, Mux(has_b, int(PEMode.PAIRED), int(PEMode.PARTIAL)), int(PEMode.REUSE))))
            if self.wpath:
                lane0, lane1 = wsel
                wa, wb = lane0, Mux(has_b, lane1, 0)
            else:
                lane0, lane1 = wq[:C * W_BITS], wq[C * W_BITS:]
                wa, wb = Mux(cur["paired"] | ~chan[0], lane0, lane1), Mux(has_b, lane1, 0)
            m.d.comb += [getattr(top, f"b{b}_valid").eq(valid), getattr(top, f"b{b}_first").eq(slot == 0),
                         getattr(top, f"b{b}_last").eq(last), getattr(top, f"b{b}_rows").eq(cur["nrows"]),
                         getattr(top, f"b{b}_x_a").eq(Cat(*xa)), getattr(top, f"b{b}_x_b").eq(Cat(*xb)),
                         getattr(top, f"b{b}_mode").eq(Cat(*(Const(0, 2) | md for md in modes))),
                         getattr(top, f"b{b}_w_a").eq(wa), getattr(top, f"b{b}_w_b").eq(wb)]
        if self.wpath:  # the turn's band reads its next word; every band whose next word is that one loads it
            go = Signal(name="stage_go")
            need_t = Array(n for n, _, _, _ in stg["need"])
            free_t = Array(f for _, _, f, _ in stg["need"])
            addr_t = Array(a for _, a, _, _ in stg["need"])
            turn = stg["turn"]
            skip = Const(0, 1)
            if self.defer:  # D100's defer="behind": the turn's band leaves the read to a band that will take it
                sb_t, sa_t, j_t, many_t = (Array(x[i] for x in stg["defer"])[turn] for i in range(4))
                later = Const(0, 1)
                for k, ((need, addr, free, _), (sb_k, sa_k, j_k, _)) in enumerate(zip(stg["need"], stg["defer"],
                                                                                       strict=True)):
                    hit = Signal(name=f"b{k}_takes_later")
                    m.d.comb += hit.eq((turn != k) & need & (((addr == stg["raddr"]) & ~free)
                                                             | ((sb_k == sb_t) & (sa_k == sa_t) & (j_k < j_t))))
                    later = later | hit
                skip = Signal(name="stage_defer")
                m.d.comb += skip.eq(running & need_t[turn] & free_t[turn] & many_t & later)
                #: For test benches: a read the turn's band deferred this cycle.
                self.stage_defer = skip
            m.d.comb += [go.eq(running & need_t[turn] & free_t[turn] & ~skip), stg["re"].eq(go),
                         stg["raddr"].eq(addr_t[turn])]
            for k, (need, addr, free, load) in enumerate(stg["need"]):
                m.d.comb += load.eq(go & need & free & ((stg["turn"] == k) | (addr == stg["raddr"])))
        m.d.sync += [nxt.eq(nxt + (ek["give"] if self.early else taken)), held.eq((held | Mux(can_desc, Const(1, unsigned(S)) << entry_of(gidx), 0))
                                                  & ~release)]

        # ---- collect: the drained rows with their tags ----
        rb, tr = _bits(R), _bits(brows)
        m.d.comb += [self.out_valid.eq(top.out_valid), self.out_tile.eq(top.out_tile), self.out_data.eq(top.out_data)]
        for p in range(d):
            m.d.comb += self.out_row[p * tr:(p + 1) * tr].eq(top.out_row[p * rb:p * rb + tr] if brows > 1 else 0)
        count = sum((top.out_valid[p] for p in range(1, d)), top.out_valid[0] + 0) if d > 1 else top.out_valid[0]
        m.d.sync += drained.eq(drained + count)

        # ---- run state ----
        finished = Signal(name="finished")
        m.d.comb += finished.eq(running & (q_fin if Q else gidx >= T) & ~in_rows & (drained == rowsum))
        m.d.comb += self.done.eq(finished)
        # the descriptor the gather took, with its band-tile number, the cycle it is read (for a combine stage, D95)
        m.d.comb += [self.desc_valid.eq(g_first), self.desc_tile.eq(gidx - 1), self.desc.eq(dq)]
        with m.If(finished):
            m.d.sync += running.eq(0)
        with m.If(begin):  # the start values (last assignment wins)
            m.d.sync += [running.eq(1), gidx.eq(0), in_rows.eq(0), held.eq(0), gdone.eq(0), avail.eq(0),
                         rowsum.eq(0), drained.eq(0), nxt.eq(B), w_last.eq(0), q_fin.eq(0)]
            m.d.sync += [w.eq(0) for w in w_on]
            if self.wpath:
                m.d.sync += [r.eq(0) for r in stg["resets"]] + [regd.eq(0)]
            if self.early:
                m.d.sync += [r.eq(0) for r in ek["resets"]] + [i.eq(Const(0) if T is None else T <= b) for b, i in enumerate(ek["idle"])]
            m.d.sync += [t.eq(b) for b, t in enumerate(self.band_tile)] + [s.eq(0) for s in slots_of]
            m.d.sync += [h.eq(0) for h in s_resets]
        return m
