"""Action counts of the compact organisation (`sim.timing.compact`): what differs from the lockstep array.

`sim.cost.actions.op_actions` counts the units both organisations share (similarity unit, DRAM,
vector unit, input-SRAM fills and the similarity pass, output SRAM, score SRAM) and the decision-exact
multiplies (``mac8`` = COMPUTE (token, channel) pairs x N, ``mac4`` = PARTIAL pairs x N, the same
products in either organisation); `compact_actions` replaces the array-side terms, per batch
element, with Cc / Pc = COMPUTE / PARTIAL (token, channel) pairs, Cg / Pg / Rg = COMPUTE / PARTIAL /
REUSE (token, group) pairs, n_cb column blocks, grid (F, H, W):

- PE (hw/compact_pe.py; no per-group partial registers: a band-tile row accumulates one group's partial
  in ``acc``, a COMPUTE row its msb partial in ``accm`` too), with Ps = PARTIAL row-slots (Σ over band-tiles
  of its PARTIAL rows x its slots: a paired slot carries two channels): ``pe_add`` = N (2 Cc + Ps)
  acc-bit adds (a COMPUTE row-slot: ``acc`` and ``accm``; a PARTIAL one: ``acc``) and ``pe_add_half`` =
  N (Cc + Ps) adds of the 18-bit halves' adder (`sim.cost.energy.HALF_ADD_BITS`); ``pe_reg_bits`` = acc x (N (2 Cc + Ps) accumulator writes + one ``out`` write per band-tile row
  and column, and one ``out_m`` write per COMPUTE row and column); ``pe_mux_bits`` =
  `sim.cost.area.COMPACT_PRODUCT_MUX_BITS` per active row-slot and column (the product path's selects and
  gates; the accumulators' ``first`` gates are not charged, as the lockstep PE's ``clear`` gates are not);
  ``pipe_reg_bits`` = Σ_band-tiles slots x R/B x C x the compact PE's lane bits x n_cb (a band's
  slots pass only its R/B rows), where the second channel's lanes (``x_b``, ``w_b``: 17 of the 39 bits) count
  only in PAIRED band-tiles (all rows PARTIAL at half width): elsewhere the controller holds them constant and
  they are taken as clock-gated, the lockstep array's rule (D24, `sim.cost.actions`).
- Gather network (``gather_mux_bits``): every operand byte a band-tile row receives passes an R:1
  byte crossbar from the input SRAM's row ports (any token to any row): 8 log2(R) 2:1 mux bits per
  byte, bytes = n_cb (Cc + Pc).
- Input SRAM read by the array: n_cb (Cc + Pc) bytes (each needed channel of each token once per
  column block; REUSE channels are never read). Weight SRAM: each band-tile reads |g| x C bytes
  (a PARTIAL band-tile carries two channels per slot): Σ_band-tiles |g| x min(C, N) x n_cb, each byte through a
  band's word registers (``weight_word_reg_bits`` = 8 per byte; ``stage_reg_bits`` where the weight stage is
  read instead; `sim.timing.compact` "Weight words", D88). The controllers as built set the read count (D101;
  D92's shared reads on the model's band schedule, `sim.timing.compact.shared_stage_weights`, are no longer
  charged: the rule the staged controller's port is checked against, tests/test_stage_port.py): the staged
  delta controller's stage reads are those it makes on its own schedule (`sim.timing.delta_accel.stage_run`,
  D121, charged since D127); compact's ``kaleido_caccel`` reads its one weight
  buffer by band turn (D109), the reads its port makes on its phased schedule counted per op
  (`sim.timing.compact_accel.op_port`, D117); the delta controller without a stage, ``kaleido_daccel`` (`sim.cost.controllers.weight_copies`
  > 1), has each band read its own weight copy, one word of `sim.cost.controllers.WEIGHT_LANES` = 2 channels x
  min(C, N) a slot (Σ slots x 2 min(C, N) x n_cb bytes), no word registers written, and the weight SRAM's writes
  charged once per copy (all written together, D91).
- The controller's own accesses (`sim.cost.controllers.count_actions`, D101): its staging copies, the queues'
  decision buffer, the core's tables, FIFO and decision copies, its descriptor and queue registers.
- Partial-sum SRAM (``sram_psum``), docs/decisions.md D58: the neighbour state of a (position, group,
  output column) holds what a successor can read, the chain's msb partial (a PARTIAL successor adds its
  own lsb to it) and its total (a REUSE successor takes it). The decisions of a chunk are known before its
  band-tiles issue (the similarity unit runs ahead), so state is written only where the (token, group)'s
  successor along the group's axis (the next frame for ``f``, the next position for ``w``, the next image
  row for ``h``; `successor_reads`) is not COMPUTE (a COMPUTE successor reads nothing). With ``s`` = that
  flag and Cs / Ps = COMPUTE / PARTIAL (token, group) pairs with it set: a COMPUTE stages its total, and its
  msb where ``s`` (``1 + s`` values, written by the drain, read once by the combine unit) and writes the
  state's msb and total where ``s`` (2); a PARTIAL stages its lsb (1), reads the state's msb (1) and
  writes the new total where ``s`` (1; the msb is unchanged, in place); a REUSE reads the total (1) and
  writes nothing (the chain's state stays). Counted as ``kaleido_combine`` (hw/combine.py) accesses its macros
  (docs/decisions.md D127; before it, ``(Cg + Cs + Pg) + (2 Cs + Ps)`` values written and ``(Cg + Cs + Pg) +
  (Pg + Rg)`` read at `sim.timing.compact.partial_bytes` each, priced at ``psum_sram_kib / C``): its words hold a
  column's two partials (staging: ``out`` and ``out_m``; state: msb and total), ``2 acc`` bits a column, read and
  written whole. Per output column: the staging macros (``psum_staging_*``) written by each drained row (``Cg +
  Pg``) and read by its command (``Cg + Pg``: a REUSE command's staging read enable is off); the state macro
  (``sram_psum_*``) read by each PARTIAL and REUSE command (``Pg + Rg``: a COMPUTE's is off) and written ``Cs +
  Ps``. `sim.cost.energy` prices each at a column slice of its own macro. The lockstep array's ``h``-axis
  partial buffer (``sram_partial``) is not used.
- Combine unit (``combine_add``): `sim.timing.compact.combine_adds`, acc-bit adds.
- Dispatcher (``dispatch_add8``): the queues count one (token, group) each (M G); no matcher.

The delta organisation (`sim.timing.delta`, ``delta_blocks`` given: an op whose groups share one axis) has
the same band-tiles, gather network and weight reads, with these rules instead (docs/decisions.md D68):
- PE (one accumulator: a row's result is one difference sum, so no ``accm``/``out_m`` of the compact PE):
  a COMPUTE (token, channel) is one 9 x 8 product through both halves (``mac8``; 2 adds: the halves' sum and
  the accumulate); a PARTIAL pair (`sim.timing.delta.paired_product`) puts one channel on the 5-bit signed
  high half (``mac5``, 40/64 of an 8 x 8 multiply; until D92 this was charged as a whole ``mac8``, 72/64) and the
  other on the 4-bit low half (``mac4``), with 3 adds per PARTIAL row-slot (the halves' sum, the sign correction,
  the accumulate): ``mac8`` = N Cc, ``mac5`` = N ceil(Pc / 2), ``mac4`` = N floor(Pc / 2), ``pe_add`` = N (Cc +
  Ps) acc-bit accumulates, ``pe_add_half`` = N (Cc + Ps), ``pe_add_corr`` = N Ps (13 bits, `sim.cost.energy.CORR_ADD_BITS`)
  with Ps the PARTIAL row-slots; ``pe_reg_bits`` = acc (N (Cc + Ps) accumulator writes + one ``out`` per
  band-tile row and column); ``pe_mux_bits`` = `sim.cost.area.DELTA_PRODUCT_MUX_BITS` per active row-slot and
  column (hw/compact_pe.py's delta product path, docs/decisions.md D73); lanes as compact's.
- Operands: the similarity unit forms each needed (token, channel)'s 9-bit difference once per X pass
  (``passes = ceil(n_cb / s)`` column-block groups) into the queue stash, and each band-tile row reads it once
  per column block: input-SRAM writes ``passes (Cc + Pc) 9/8`` bytes, reads ``n_cb (Cc + Pc) 9/8`` (compact's
  ``n_cb (Cc + Pc)`` X bytes replaced). A pass after the first re-forms X_eff and the differences from the
  stored decisions: ``2 M K`` input-SRAM reads and ``M K`` subtracts (``sim_add8``) each. A fused P op's P
  (``pv``, ``cross_pv``) is not staged in the input SRAM (D76: the ``M K`` bytes of P that the lockstep and
  compact arrays read from there are not written), and neither are its differences (docs/decisions.md D136: one
  480p query tile of them, 128 x 32,760 x 9 bits = 4.5 MiB, exceeds the 4 MiB input SRAM): the similarity unit
  forms them as it decides each P group on its way from the vector unit (D52) and writes them into the score
  buffer, packed within the group in the entries of the scores the exp pass has already read (9 of the 24 bits
  `sim.timing.attention.SCORE_BYTES` gives a key, so the chunk's query tiles that fit the score buffer,
  `sim.timing.delta.window_frames`, hold them); the gather reads them there. The same counts as the stash's, in
  the score SRAM (``sram_score``): writes ``passes (Cc + Pc) 9/8`` bytes, reads ``n_cb (Cc + Pc) 9/8``.
- Partial-sum SRAM, a value per output column and per axis class at the bits the built word gives it (D127:
  ``acc_bits`` in ``kaleido_dcombine``'s D buffers and state buffer, words of C acc-bit values; the state SRAM's
  `hw.delta_combine.STATE_BITS`; before D127 ``yb`` = `sim.timing.delta.output_bytes`, the value's own 3-4 bytes), per axis
  class (`sim.timing.delta.classes`, D71; one class on every op but ``qk``): each drained difference row is
  written into ``D[t]`` (writes = the class's non-REUSE (token, group) pairs; reads = those less one per token
  with any), the chunk's end reads ``D[t]`` (tokens with any) and ``S[nb]`` (tokens that do not COMPUTE every
  group of the class) and writes ``S[t]`` as state where the next token along the class's axis reads it (it
  exists and does not COMPUTE every group of the class): writes ``diffs + state``, reads ``diffs + carried``.
  With a difference-sum buffer (``diff_sram_kib``, D84) the ``D`` traffic (``diffs`` written, ``diffs`` read)
  goes there (``sram_diff``) and only the carried values stay in the partial-sum SRAM. Where ``kaleido_dcore`` is
  built, its D buffers hold ``D`` (thirds of the partial-sum SRAM, `hw.delta_combine`): `sim.cost.energy` prices
  the ``sram_diff`` bytes at a column slice of their macro and books them to ``sram_psum`` (docs/decisions.md D122).
- Weight stage (``wstage_sram_kib``, D85; an op whose ``2 K`` weights of a column fit a bank, with the
  difference-sum buffer's column-block order): the band-tiles' weight reads above go to the stage
  (``sram_wstage``), as ``kaleido_daccel_stage`` makes them on its own schedule (`sim.timing.delta_accel.stage_run`,
  the cycle model's, D121; its ``"reads"``, each shared by the bands that take the same word at the turn, D92):
  a read is a word of 2 B channels from both half-word macros of every column bank, ``2 B C`` bytes; each
  band-tile loads each of its ``ceil(|g| / 2 B)`` words whole into a word register (``stage_reg_bits`` =
  ``n_cb Σ ceil(|g| / 2 B) 2 B C 8``); the fills (its ``"fill_reads"``: per segment the group-aligned half-words
  of B channels, Σ ceil(|g| / B), or its slice's) read a weight-buffer word of ``B C`` bytes (``sram_weight``)
  and write a stage half-word of ``B C`` bytes each (docs/decisions.md D127; before it, D92's count x a measured
  1.58 and ``chunks x K x N`` fill bytes).
  On a fused score op (``state_buffer``) the carried values span every key (D70) and live in the state SRAM
  (``sram_state``): its ``state`` writes and ``carried`` reads go there, the ``D`` traffic stays in the
  partial-sum SRAM (or the difference-sum buffer, D84). The combine unit walks a chunk's tokens in raster order
  per column, so where the neighbour (or the successor) lies in the same pool -- a ``w`` class's previous position
  inside the pool's R positions -- its ``S`` is still in the lane's register (hw/delta_combine.py): that read or
  write is no SRAM access but one acc-bit register write per value (``combine_reg_bits``, `in_pool`; on
  ``kaleido_dcore``'s V output lanes one per run of V positions holding any, the lanes between them chained,
  `lane_writes`, D114); an ``f`` class's neighbour is always in another pool, and an ``h`` class's is read from
  the SRAM (D79: one register per lane).
- Combine unit: `sim.timing.delta.combine_adds_delta` (with ``classes - 1`` adds per token for ``Y = Σ S``).
"""

from __future__ import annotations

import math

import numpy as np

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE
from hw.compact_pe import CCOL_FIELDS, CROW_FIELDS, cpe_lane_bits
from hw.config import AcceleratorConfig
from hw.delta_combine import STATE_BITS
from sim.cost.area import COMPACT_PRODUCT_MUX_BITS, DELTA_PRODUCT_MUX_BITS
from sim.cost.controllers import ACTIONS as CONTROLLER_ACTIONS
from sim.cost.controllers import WEIGHT_LANES, bypass_actions, lanes, queue_read_actions, weight_copies
from sim.cost.controllers import count_actions as count_controller
from sim.timing.compact import band_rows, combine_adds, paired_tiles
from sim.timing.delta import DIFF_BITS, class_terms, classes, combine_adds_delta


def successor_reads(dec: np.ndarray, grid, groups) -> np.ndarray:
    """bool ``[M, G]``: the (token, group)'s successor along the group's axis exists and is not COMPUTE, so it
    reads the neighbour state (module docstring): the same position of the next frame (axis ``f``), the next
    position of the row (``w``), the same column of the next image row (``h``); raster token order."""
    F, H, W = grid  # noqa: N806
    d = np.asarray(dec).reshape(F, H, W, -1)
    out = np.zeros(d.shape, dtype=bool)
    for g, (_k0, _k1, ax) in enumerate(groups):
        nxt = d[..., g] != COMPUTE
        if ax == "f":
            out[:-1, :, :, g] = nxt[1:]
        elif ax == "h":
            out[:, :-1, :, g] = nxt[:, 1:]
        else:
            out[:, :, :-1, g] = nxt[:, :, 1:]
    return out.reshape(F * H * W, -1)


def delta_successor_reads(dec: np.ndarray, grid, axis: str) -> np.ndarray:
    """bool ``[M]``: the token's successor along ``axis`` (raster order, `successor_reads`' neighbours) exists and
    does not COMPUTE every group, so it reads the token's carried ``Y`` (module docstring, delta rules)."""
    whole = np.where((np.asarray(dec) == COMPUTE).all(axis=1), COMPUTE, REUSE)[:, None]  # one group: the token
    return successor_reads(whole, grid, [(0, 1, axis)])[:, 0]


def in_pool(grid, axis: str, rows: int) -> np.ndarray:
    """bool ``[M]`` (raster tokens of ``grid``): the token's ``w`` neighbour (the previous position) lies in the
    same pool of ``rows`` raster positions of its frame (`sim.timing.compact` pools), so the combine lane's
    register still holds its carried value (module docstring); False on ``f`` and ``h`` (an ``h`` neighbour is W
    tokens back: a line of W words per lane, not built, docs/decisions.md D79) and for tokens without a
    neighbour."""
    F, H, W = grid  # noqa: N806
    p = np.tile(np.arange(H * W), F)
    if axis != "w":
        return np.zeros(F * H * W, dtype=bool)
    return (p % W >= 1) & ((p - 1) // rows == p // rows)


def lane_writes(takes: np.ndarray, grid, out_lanes: int = 1) -> int:
    """Writes of the combine's lane register (hw/delta_combine.py ``lane``) per column for one axis class:
    ``takes`` (bool ``[M]``, raster tokens of ``grid``) marks the tokens that take their ``w`` neighbour's ``S``
    inside the pool (the module docstring's ``reads & in_pool``), so the neighbour t - 1 is *held*. With one output
    lane each held value is one write. With V = ``out_lanes`` > 1 (docs/decisions.md D112, D114) the walk steps
    runs of V consecutive positions of a frame (V divides the pool's R positions, so a pool's runs start at
    multiples of V: a run is ``(f, p div V)``); within a run lane l takes lane l - 1's ``S`` through the chain, and
    the register is written once per run with any held lane (``c_hold.any()``, the highest one's ``S``). Returns
    the writes: held tokens (V = 1), or runs with a held token."""
    held = np.flatnonzero(takes) - 1  # takes[0] is False (no neighbour)
    if out_lanes == 1:
        return len(held)
    F, H, W = grid  # noqa: N806
    hw_ = H * W
    runs = (held // hw_) * -(-hw_ // out_lanes) + (held % hw_) // out_lanes
    return len(np.unique(runs))


def _delta_terms(a: dict, dec: np.ndarray, groups, N: int, cc: int, pc: int, passes: int, n_cb: int,  # noqa: N803
                 grid, cfg_rows: int, acc: int, state_buffer: bool = False, diff_buffer: bool = False,
                 out_lanes: int = 1, p_op: bool = False) -> None:
    """Add the delta organisation's own counts of one batch element to ``a`` (module docstring); ``cfg_rows``:
    positions per pool (the array's rows), ``acc``: accumulator bits, ``diff_buffer``: the config has a
    difference-sum buffer (D84), which takes the ``D`` traffic; ``out_lanes``: ``kaleido_dcore``'s output lanes V
    (`lane_writes`); ``p_op``: a fused P op, whose differences go to the score buffer instead of the input SRAM's
    queue stash (D136)."""
    K = int(sum(k1 - k0 for k0, k1, _ in groups))  # noqa: N806
    M = dec.shape[0]  # noqa: N806
    # bytes a value takes in the built word (D122, D127): kaleido_dcombine's D buffers and state buffer hold words of
    # C acc-bit values, the state SRAM STATE_BITS a value (the value's own bound, `output_bytes`, is at most these)
    vb = acc / 8
    cb = STATE_BITS / 8 if state_buffer else vb
    carry = "sram_state" if state_buffer else "sram_psum"
    dbuf = "sram_diff" if diff_buffer else "sram_psum"
    for (axis, idx), (_ax, diffs, _direct, _carried) in zip(classes(groups), class_terms(dec, groups), strict=True):
        d = dec[:, idx]
        near = in_pool(grid, axis, cfg_rows)  # the neighbour's value is still in the combine lane
        reads = ~(d == COMPUTE).all(axis=1)  # tokens that read S[nb]
        succ = delta_successor_reads(d, grid, axis)  # tokens whose S a successor reads
        succ_near = np.zeros_like(near)  # ... from inside the same pool (the next position: w only)
        succ_near[:-1] = near[1:]
        a[f"{dbuf}_write_bytes"] += diffs * N * vb
        a[f"{dbuf}_read_bytes"] += diffs * N * vb
        a[f"{carry}_write_bytes"] += int((succ & ~succ_near).sum()) * N * cb
        a[f"{carry}_read_bytes"] += int((reads & ~near).sum()) * N * cb
        a["combine_reg_bits"] += lane_writes(reads & near, grid, out_lanes) * N * acc
    a["mac8"] += N * cc
    a["mac5"] += N * -(-pc // 2)
    a["mac4"] += N * (pc // 2)
    a["combine_add"] += combine_adds_delta(dec, N, groups)
    stash = "sram_score" if p_op else "sram_input"  # a fused P op's differences: in the score buffer (D136)
    a[f"{stash}_write_bytes"] += math.ceil(passes * (cc + pc) * DIFF_BITS / 8)
    a[f"{stash}_read_bytes"] += math.ceil(n_cb * (cc + pc) * DIFF_BITS / 8)
    a["sram_input_read_bytes"] += (passes - 1) * 2 * M * K
    a["sim_add8"] += (passes - 1) * M * K


def compact_actions(a: dict, tiled: list, band_tiles: list, groups, N: int,  # noqa: N803
                    cfg: AcceleratorConfig, grid, delta_blocks: int | None = None, state_buffer: bool = False,
                    p_op: bool = False, stage_chunks: list | None = None, port_weights: int | None = None,
                    fifo_bypass: int | None = None, stage_run: dict | None = None, queue_cycles: int | None = None,
                    port_reads: int | None = None) -> dict:
    """Replace the array-side counts of ``a`` (`sim.cost.actions.op_actions`, summed over the batch) by the
    compact organisation's (module docstring); returns ``a``, changed in place.

    Args:
        tiled: per batch element, the `sim.cost.tiling.TiledDecisions` ``a`` was counted from (its
            decisions, and the lockstep tiling's array reads, which are taken out); band_tiles: per batch element the
            ``(slots, group, n_compute, n_partial)`` arrays of `sim.timing.compact.compact_tiles`; grid: the op's
            ``(F, H, W)`` (the neighbour state's successors, `successor_reads`).
        delta_blocks: the delta organisation's column blocks per group ``s`` (`sim.timing.delta.plan`) on an op it
            runs in the delta form; None = the compact rules. state_buffer: a fused score op's carried values go to
            the state SRAM (delta only, module docstring). p_op: the op is a fused P op (``pv``), whose P the
            delta organisation does not stage in the input SRAM, its differences stashed in the score buffer
            (module docstring, D136). stage_chunks: per batch
            element each band-tile's chunk, for an op whose weights go through the weight stage (D85).
        port_weights: compact (``delta_blocks`` None, no stage): weights per column its controller's weight port
            reads (`sim.timing.compact_accel.op_port`'s ``"weights"``, docs/decisions.md D109, D117); None: one read
            per band-tile word (Σ |g|, no read shared).
        fifo_bypass: delta, the op's rows popped from ``kaleido_dcore``'s row FIFO the cycle after their write (the
            cycle model's, ``combine_timing = "rtl"``; None: not timed): with the core's bypass (D118) those skip the
            FIFO's write and read (`sim.cost.controllers.bypass_actions`).
        stage_run: delta with the weight stage (``stage_chunks`` given; required there, else ValueError):
            ``kaleido_daccel_stage``'s schedule of the op (`sim.timing.delta_accel.stage_run`, the cycle model's,
            docs/decisions.md D121), whose ``"reads"`` (stage word reads) and ``"fill_reads"`` (weight-buffer reads
            of the fills) are charged as the RTL makes them (docs/decisions.md D127).
        port_reads: compact, the reads its weight port makes (`sim.timing.compact_accel.op_port`'s ``"reads"``; the
            cycle model passes it): each a word of 2 B channels from both half-word banks of ``B C`` bytes, loaded
            whole into the word registers of the bands that take it (docs/decisions.md D127); overrides
            ``port_weights``.
        queue_cycles: the cycles ``kaleido_dqueue`` runs on this op (the cycle model's; None: not timed): its
            decision banks (and compact's replay buffer) are read on each (`sim.cost.controllers.queue_read_actions`,
            D127); None: the scan's reads only, as before D127.
    """
    C = cfg.array_cols  # noqa: N806
    n_cb = -(-N // C)
    acc = cfg.acc_bits
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    lane_bits = cpe_lane_bits(cfg, CROW_FIELDS + CCOL_FIELDS)
    b_bits = cpe_lane_bits(cfg, ("x_b", "w_b"))  # the second channel's lanes: PAIRED band-tiles only (D24's rule)
    keys = ("pe_add", "pe_add_half", "pe_add_corr", "pe_reg_bits", "pe_mux_bits", "pipe_reg_bits", "gather_mux_bits", "sram_psum_read_bytes",
            "sram_psum_write_bytes", "psum_staging_read_bytes", "psum_staging_write_bytes", "sram_diff_read_bytes", "sram_diff_write_bytes", "sram_partial_read_bytes",
            "sram_partial_write_bytes", "combine_add",
            "combine_reg_bits",
            "dispatch_add8", *CONTROLLER_ACTIONS)
    for k in keys:
        a[k] = 0
    if delta_blocks is not None:
        a["mac8"] = a["mac5"] = a["mac4"] = 0
    array_input = weight = lock_input = lock_weight = fills = slot_words = all_rows = 0
    copies = weight_copies(cfg)
    for td, (slots, grp, nc, npart) in zip(tiled, band_tiles, strict=True):
        dec = td.decisions
        lock_input += td.stats["rows_x_channels"] * n_cb
        lock_weight += td.stats["channels"] * N
        cc = int(((dec == COMPUTE) * widths).sum())
        pc = int(((dec == PARTIAL) * widths).sum())
        cg, pg, rg = (int((dec == v).sum()) for v in (COMPUTE, PARTIAL, REUSE))
        rows_out = int((nc + npart).sum()) * n_cb  # band-tile rows, all column blocks
        ps = int((npart * slots).sum())  # PARTIAL row-slots
        a["pe_add_half"] += N * (cc + ps)  # the halves' adder on every active row-slot
        if delta_blocks is not None:  # one accumulator; a PARTIAL row-slot adds its sign correction (module docstring)
            a["pe_add"] += N * (cc + ps)
            a["pe_add_corr"] += N * ps
            a["pe_reg_bits"] += acc * (N * (cc + ps) + rows_out * min(C, N))
        else:
            a["pe_add"] += N * (2 * cc + ps)
            a["pe_reg_bits"] += acc * (N * (2 * cc + ps) + (rows_out + int(nc.sum()) * n_cb) * min(C, N))
        mux = DELTA_PRODUCT_MUX_BITS if delta_blocks is not None else COMPACT_PRODUCT_MUX_BITS
        a["pe_mux_bits"] += N * (cc + ps) * mux
        paired = paired_tiles((slots, grp, nc, npart), groups)  # two channels a slot
        lane_slots = int(slots.sum()) * (lane_bits - b_bits) + int(slots[paired].sum()) * b_bits
        a["pipe_reg_bits"] += lane_slots * band_rows(cfg) * C * n_cb
        bits = DIFF_BITS if delta_blocks is not None else 8  # a delta operand is a 9-bit difference
        a["gather_mux_bits"] += n_cb * (cc + pc) * bits * max(1, math.ceil(math.log2(cfg.array_rows)))
        weight += int(widths[grp].sum()) * min(C, N) * n_cb
        slot_words += int(slots.sum()) * WEIGHT_LANES * min(C, N) * n_cb  # a band's own copy: a word per slot
        count_controller(a, dec, (slots, grp, nc, npart), groups, N, cfg,  # the controller's accesses (D101)
                         queue_reads=queue_cycles is None)
        all_rows += rows_out
        a["dispatch_add8"] += dec.size
        if delta_blocks is not None:
            if p_op:  # P goes from the vector unit to the similarity unit, not the input SRAM (D76)
                a["sram_input_write_bytes"] -= dec.shape[0] * int(widths.sum())
            _delta_terms(a, dec, groups, N, cc, pc, -(-n_cb // delta_blocks), n_cb, grid, cfg.array_rows, acc,
                         state_buffer, bool(cfg.diff_sram_kib), lanes(cfg), p_op)
            continue
        array_input += n_cb * (cc + pc)
        succ = successor_reads(dec, grid, groups)
        cs, ps = int((succ & (dec == COMPUTE)).sum()), int((succ & (dec == PARTIAL)).sum())
        # kaleido_combine's macros as built (D127): a word is a column's out and out_m (staging) or msb and total
        # (state), 2 acc bits a column, read and written whole; each drained row written into its port's staging
        # macro and read back by its command (a REUSE command reads none); a PARTIAL or REUSE command reads its
        # state word (a COMPUTE none); the state written where a successor reads it and the command is not REUSE
        wb = 2 * acc / 8
        a["psum_staging_write_bytes"] += (cg + pg) * N * wb
        a["psum_staging_read_bytes"] += (cg + pg) * N * wb
        a["sram_psum_read_bytes"] += (pg + rg) * N * wb
        a["sram_psum_write_bytes"] += (cs + ps) * N * wb
        a["combine_add"] += combine_adds(dec, N)
    a["sram_input_read_bytes"] += array_input - lock_input
    a["stage_reg_bits" if stage_chunks is not None else "weight_word_reg_bits"] = 8 * weight  # word registers (D88)
    read = weight  # one read per band-tile word (Σ |g|), unless a controller's own count replaces it below
    if stage_chunks is not None and stage_run is None:
        raise ValueError("a staged op's stage traffic needs its stage_run (sim.timing.delta_accel.stage_run)")
    if stage_chunks is not None:  # kaleido_daccel_stage's own reads and fills on its schedule (D121, D127)
        B = cfg.compact_bands  # noqa: N806
        read = stage_run["reads"] * 2 * B * C  # a read: both half-word macros of every column bank
        fills = stage_run["fill_reads"] * B * C  # a fill read: one weight-buffer word, one stage half-word a column
        loads = n_cb * sum(int((-(-widths[t[1]] // (2 * B))).sum()) for t in band_tiles)  # words a band-tile takes
        a["stage_reg_bits"] = loads * 2 * B * C * 8  # each loads a whole word register of 2 B channels x C (D94)
    elif delta_blocks is None:  # compact's weight port on its phased schedule (D109), counted per op (D117)
        read = weight if port_weights is None else port_weights * min(C, N)
        if port_reads is not None:  # the port's reads as built: whole words, whole word registers (D127)
            B = cfg.compact_bands  # noqa: N806
            read = port_reads * 2 * B * C
            loads = n_cb * sum(int((-(-widths[t[1]] // (2 * B))).sum()) for t in band_tiles)
            a["weight_word_reg_bits"] = loads * 2 * B * C * 8
    if copies > 1:  # no stage: each band reads its own copy, a word per slot, and no word registers (D91, D97)
        read = slot_words
        a["weight_word_reg_bits"] = 0
        a["sram_weight_write_bytes"] *= copies  # every copy written (D91: all B together)
    if stage_chunks is not None:  # the bands read the stage; the weight SRAM only fills it (D85)
        a["sram_wstage_read_bytes"] += read
        a["sram_wstage_write_bytes"] += fills
        a["sram_weight_read_bytes"] += fills - lock_weight
    else:
        a["sram_weight_read_bytes"] += read - lock_weight
    if delta_blocks is not None:
        bypass_actions(a, all_rows, fifo_bypass, cfg)  # kaleido_dcore's row-FIFO bypass (D118)
    if queue_cycles is not None:  # the queues' banks read on every cycle they run (D127)
        queue_read_actions(a, queue_cycles, cfg)
    return a
