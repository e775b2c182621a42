"""The compact organisation's op-level controller, first slice (docs/decisions.md D97): `CompactAccel`, Verilog
module ``kaleido_caccel``, runs one op's compact band-tiles through ``kaleido_ctop`` (`hw.compact_array` on a
compact config) from banked SRAM buffers and hands out the drained rows with their tags, the inputs of the
combine unit (`hw.combine`).

It is the delta controller (`hw.delta_accel.DeltaAccel`, ``kaleido_daccel``, D91, D93) on the compact array:
the same buffers, gather, band issue, tags and timing, with these differences:

- the **X buffer** holds each token's operand bytes (int8, or uint8 with ``x_unsigned`` high), not 9-bit
  differences: word ``token KW + xoff_g + j`` holds the group's channels ``k0 + P j .. k0 + P j + P - 1`` (lane l
  at bits ``[8 l, 8 l + 8)``; `hw.compact_accel_host.x_words`); the staging buffer likewise;
- ``x_unsigned`` (stable from ``start`` to ``done``) goes to ``kaleido_ctop``;
- a drained row carries two words per column, the group partial ``out`` and the msb partial ``out_m``
  (``out_data`` lane ``p C + c`` of ``2 acc_bits`` bits, ``out`` low), as ``kaleido_ctop`` drains them;
- the band-tiles are compact's issue order (column block outer, `sim.engines.band_stimulus.issue_order`). Built
  with ``queues=True`` (what `hw.rtl` emits) they come from ``kaleido_dqueue`` (`hw.delta_queue.DeltaQueue`)
  instanced as it is: its D68 order with one column block per group (``c_s = 1``, ``c_cm = 0``) is compact's
  order (tested), since compact and delta form the same band-tiles (`sim.timing.compact_reference.band_tiles`)
  and the same PARTIAL pairing (an all-PARTIAL band-tile of a group wider than one channel runs at half width);
  with its replay (``QUEUE_REPLAY``, docs/decisions.md D120) the queues scan the first column block only and read
  its band-tiles back from a descriptor buffer for the others (``max_tiles`` entries in D120, sized by a slice's
  bound since D124, `replay_bound`) (one scan per column block
  was slower than the array on the score ops at high reuse, D117); and their scan is the wider one
  (``QUEUE_REACH``, D124: ``min(R, 4 R / B)`` positions a step, stopping at the one that fills a queue), since the
  first column block's scan still bound the ops of one or few column blocks (cross_qk, cross_pv);
- ``x{k}_re`` per X bank (attributes ``x_re``) so a bench counts the gather's reads;
- the **weight port** (``WEIGHT_PORT``, docs/decisions.md D109; D88's weight path): one weight buffer instead of a
  copy per band. The host writes half-words of ``B`` channels x C (`hw.delta_accel_host.stage_w_words`' layout,
  each group on a half-word; the descriptor's ``woff`` counts half-words), into two 1rw banks, even and odd
  half-words, so a word of ``2 B`` channels starting on any half-word is one read of each bank. The bands take their
  weights through three word registers per band and column read by band turn, the early band choice on
  ``kaleido_ctop_ext`` and the deferred read: the staged delta controller's band path (D94, D96, D99, D100) with
  the weight buffer as its stage, readable from ``start`` (no fills, no segments). ``w_re`` is its read enable.

Buffers (single-port 1rw unless named; each split by depth past 1 Mbit, `hw.sram.split_banks`): X bytes in
``R / B`` banks (token mod ``R / B``), weights in two half-word banks, descriptors (host path only) or the queues'
decision buffer, staging 1r1w per band and band row. The write port, ``start``/``busy``/``done``, the drain
ports' tags (``out_tile`` band-tile in issue order, ``out_row`` its row) and ``desc_valid``/``desc_tile``/``desc``
are `hw.delta_accel.DeltaAccel`'s.

Timing: `sim.timing.compact_accel` (`port_schedule`: `sim.timing.delta_accel.stage_schedule` without a stage on
compact's band-tiles, the band choice of `sim.timing.compact.band_schedule` made ahead, each band-tile's first slot
after its gather and its first weight word; tested cycle for cycle, and the weight buffer's reads).

`CompactAccel` is `hw.delta_accel.DeltaAccel` with the changes above as that class's variant parameters
(``X_LANE_BITS``, ``X_UNSIGNED``, ``X_READ_ENABLES``, ``WEIGHT_PORT``; ``ORGANISATION``): the controller's logic exists
once.

The combine stage that turns the tagged rows into ``Y`` is `hw.compact_core` (``kaleido_ccore``). Not in this
slice (D97): the vector unit and fused-attention control (modelled only).
"""

from __future__ import annotations

from hw.config import AcceleratorConfig
from hw.delta_accel import LANES, MAX_TILES, DeltaAccel

#: Verilog module name of `CompactAccel` (hw/rtl.py).
CACCEL_MODULE_NAME = "kaleido_caccel"
#: Bits of one X lane: an int8 or uint8 operand byte (`hw.compact_array.ctop_signature`'s ``b{b}_x_a``).
X_BYTE_BITS = 8


class CompactAccel(DeltaAccel):
    """The compact op-level controller (module docstring); `hw.delta_accel.DeltaAccel`'s arguments (without
    ``stage``, ``early`` and ``defer``: built with the early choice and the deferred read), attributes and buffers (``geometry``), with ``X_BYTE_BITS``
    lanes in the X and staging buffers, the ``x_unsigned`` input, ``x_re`` (per X bank its read enable ``x{k}_re``)
    and the weight port (``w_re`` its read enable).

    Raises:
        ValueError: not the compact organisation, R / B or B not a power of two, lanes or entries not a power of
            two (lanes at least 2), or a size below 1.
    """

    ORGANISATION = "compact"
    X_LANE_BITS = X_BYTE_BITS
    X_UNSIGNED = True
    X_READ_ENABLES = True
    WEIGHT_PORT = True
    QUEUE_REPLAY = True
    #: The queues' wider scan (docs/decisions.md D124): ``min(R, 4 R / B)`` positions a step (64 at 128 x 128 with
    #: B = 8), `sim.timing.compact_accel.queue_reach`; measured on the balanced preset's block at r = 0.8: 4 R / B
    #: gains 0.020x dense (8 x 8), 2 R / B 0.0175x.
    QUEUE_REACH = 4

    def __init__(self, cfg: AcceleratorConfig, max_tokens: int | None = None, max_k: int | None = None,
                 max_n: int | None = None, max_tiles: int = MAX_TILES, entries: int | None = None,
                 lanes: int = LANES, pe: str = "inline", queues: bool = False):
        super().__init__(cfg, max_tokens, max_k, max_n, max_tiles, entries, lanes, pe, queues)

    def replay_entries(self) -> int:
        """The queues' replay buffer's entries (docs/decisions.md D124): the band-tiles one column block of a slice
        the host hands the controller can make, ``min(max_tiles, floor(max_tokens G / (R / B)) + G)`` (`replay_bound`);
        `sim.engines.verilator_core.slices` gives a slice more than one column block only where its column block's
        band-tiles fit (a slice of one column block reads nothing back)."""
        return replay_bound(self.cfg, self.max_tokens, self.max_tiles)


def replay_bound(cfg: AcceleratorConfig, max_tokens: int, max_tiles: int = MAX_TILES) -> int:
    """Band-tiles of one column block of an op of ``max_tokens`` tokens and ``G = partial_regs`` groups in one chunk
    of frames (docs/decisions.md D124), at most ``max_tiles``: every band-tile but a flush's last holds R / B rows
    (`sim.timing.compact.band_tile_sequence`: a queue emits when it holds R / B tokens; the flush emits the rest of
    a group's COMPUTE and PARTIAL queues, a full band-tile first when they exceed R / B; `hw.delta_queue`), so of
    its at most ``max_tokens G`` rows at most ``floor(max_tokens G / (R / B))`` band-tiles are full and at most one
    per group is not. 136 on the balanced preset (256 tokens, G = 8, R / B = 16), 520 on tiny-8x8's compact
    example (R / B = 4), against D120's ``max_tiles`` = 1,024."""
    G, brows = cfg.partial_regs, cfg.array_rows // cfg.compact_bands  # noqa: N806
    return min(max_tiles, max_tokens * G // brows + G)
