"""Cycles and gather reads of the compact organisation's op-level controller (`hw.compact_accel.CompactAccel`,
``kaleido_caccel``, docs/decisions.md D97, D109), and the cycles of its combine stage (`hw.compact_core`,
``kaleido_ccore``: `core_cycles`).

The controller is the delta controller's structure on the compact array, so its timing is
`sim.timing.delta_accel`'s rule on compact's band-tiles in compact's issue order (column block outer), cycle 0 the
cycle after ``start``:

- the array: `sim.timing.compact.band_schedule`'s list schedule and drain rule (the model's compact timing,
  `sim.engines.model._compact_timing`'s ``band_cycles``);
- the controller's overheads on top of it: band-tile n's first slot no earlier than ``g_n + u_n xw_n + 3``, its
  gather starting at ``g_n = max(g_{n-1} + 1 + u_{n-1} xw_{n-1}, L_{n-S} + 1)`` (``u`` rounds of the X buffer's
  ``R / B`` banks, `gather_rounds`; ``xw = ceil(width / P)`` words per row; ``S`` staging entries), with its queues
  also no earlier than the cycle after the queues emit its descriptor (`queue_steps`, one step a cycle); the start
  cycle before cycle 0 and ``done`` the cycle after the last row leaves (``max read + C + 3`` from ``start``);
- since D109 the weight port (`port_schedule`): the one weight buffer read by band turn into three word registers
  per band, a slot issuing only once its word is there, the band choice made ahead (the list schedule's choice
  when nothing waits: `sim.timing.delta_accel.stage_schedule` with ``early``, ``defer="behind"`` and no stage).
  A band-tile's word 0 is read at its band's first turn after its fields are held (``g_n + 2``), so the op's first
  band-tiles can wait up to ``B - 1`` cycles more than their gather; later ones have it read during their band's
  previous band-tile (D99). D97's timing without the port (a weight copy per band, no word waits) is
  `sim.timing.delta_accel.accel_schedule` on the same arguments.

So ``caccel_cycles - (band_cycles + 1)`` is the controller's overhead (0 when every gather and word keeps ahead of
the bands); `tests.rtl.caccel_overhead` measures it. `port_schedule` is plain Python over the band-tiles (the RTL
benches' sizes); `port_run` is its rule compiled (numba, equal to it key for key), and `op_port` runs it on a whole op
of the cycle model, whose weight-buffer reads `sim.cost.compact_actions` charges (docs/decisions.md D117).
"""

from __future__ import annotations

import numba
import numpy as np

from algo.reuse.golden import REUSE
from hw.config import AcceleratorConfig
from sim.timing import delta_accel as _da
from sim.timing.compact import band_rows

#: The band-tiles ``kaleido_caccel`` holds, ``max_tiles`` (`hw.delta_accel.MAX_TILES`, restated: sim does not import
#: the RTL; tests/test_rtl_dqueue.py checks it): the cap of its queues' replay buffer (`replay_entries`).
REPLAY_ENTRIES = 1024


def replay_entries(cfg: AcceleratorConfig) -> int:
    """``kaleido_caccel``'s queues' replay buffer entries (docs/decisions.md D120, sized in D124): the band-tiles of
    one column block of a slice of ``accel_max_tokens`` tokens and G = ``partial_regs`` groups in one chunk,
    ``min(REPLAY_ENTRIES, floor(accel_max_tokens G / (R / B)) + G)`` (`hw.compact_accel.replay_bound`, restated):
    136 on the balanced preset."""
    G = cfg.partial_regs  # noqa: N806
    return min(REPLAY_ENTRIES, cfg.accel_max_tokens * G // band_rows(cfg) + G)
#: ``kaleido_caccel``'s queues' wider scan (docs/decisions.md D124): a step reads ``min(R, QUEUE_REACH x R / B)``
#: positions (`queue_reach`); `hw.compact_accel.CompactAccel.QUEUE_REACH`, restated (tests/test_rtl_dqueue.py checks).
QUEUE_REACH = 4


def queue_reach(cfg: AcceleratorConfig) -> int:
    """Positions a step of ``kaleido_caccel``'s queues reads (`sim.timing.delta_accel.queue_steps`' ``reach``,
    docs/decisions.md D124): ``min(R, QUEUE_REACH x R / B)``, 64 at 128 x 128 with B = 8."""
    return min(cfg.array_rows, QUEUE_REACH * band_rows(cfg))

#: Re-exported: rows' out cycles (`sim.timing.delta_accel.row_out_cycles`) and gather rounds.
row_out_cycles = _da.row_out_cycles
gather_rounds = _da.gather_rounds


def tile_widths(op, groups) -> np.ndarray:
    """int64 ``[T]``: each band-tile's group width (``op`` a `sim.engines.band_stimulus.BandOp`)."""
    return np.array([groups[t.group][1] - groups[t.group][0] for t in op.tiles], dtype=np.int64)


def queue_steps(dec: np.ndarray, grid, cfg: AcceleratorConfig, fw: int, n_cb: int,
                replay: bool | int | None = None, reach: int | None = -1) -> tuple:
    """``kaleido_dqueue``'s steps in compact's issue order: `sim.timing.delta_accel.queue_steps` with one column block
    per group and D68's order (`hw.compact_accel_host.queue_ports`), with ``kaleido_caccel``'s replay buffer of
    `replay_entries` (``replay`` None; D120, D124; False: D93's rescans) and its wider scan of `queue_reach` positions a
    step (``reach`` -1; D124; None: D93's steps of R / B)."""
    replay = replay_entries(cfg) if replay is None else replay
    reach = queue_reach(cfg) if reach == -1 else reach
    return _da.queue_steps(dec, grid, cfg.array_rows, band_rows(cfg), fw, n_cb, 1, False, replay=replay, reach=reach)


def _args(op, groups, cfg):
    return (op.s_seq, op.rows, tile_widths(op, groups), gather_rounds([t.tokens for t in op.tiles], band_rows(cfg)),
            cfg)


def port_fields(op, groups, cfg: AcceleratorConfig) -> tuple[np.ndarray, np.ndarray]:
    """``(paired, saddr)`` int64 ``[T]`` per band-tile of ``op``: PAIRED (fewer slots than channels: all rows
    PARTIAL at half width, `hw.delta_accel_host.descriptor_word`'s rule) and the weight buffer's half-word of its group's word 0
    in its column block, ``cb H + hoff_g`` (groups on consecutive half-words of ``B`` channels, ``H`` their
    half-words + 1: the RTL's ``cb KWH + hoff_g`` up to the gap between column blocks, which no comparison sees)."""
    B = cfg.compact_bands  # noqa: N806
    hoff, h = [], 0
    for k0, k1, _ in groups:
        hoff.append(h)
        h += -(-(k1 - k0) // B)
    widths = tile_widths(op, groups)
    paired = (np.asarray(op.s_seq, dtype=np.int64) < widths).astype(np.int64)  # half the slots: two channels a slot
    saddr = np.array([t.cb * (h + 1) + hoff[t.group] for t in op.tiles], dtype=np.int64)
    return paired, saddr


def port_schedule(op, groups, cfg: AcceleratorConfig, entries: int, lanes: int, queue: tuple | None = None,
                  barrier: str = "off", seg=None) -> dict:
    """The controller's cycles and weight reads for ``op`` (`sim.engines.band_stimulus.BandOp` in compact's issue
    order; cycle 0 the cycle after ``start``): `sim.timing.delta_accel.stage_schedule` with no stage segment (the
    weight buffer read by band turn into three word registers per band, docs/decisions.md D109), the early band
    choice and the deferred read (``defer="behind"``), as `hw.compact_accel.CompactAccel` builds them. ``"reads"``
    counts the weight buffer's reads (one word of ``2 B`` channels x C a read). ``barrier``, ``seg``: `stage_schedule`'s
    segment barrier (not built; ``seg`` 1 on a segment's first band-tile), to measure the bands in phase (D117)."""
    T = len(op.tiles)  # noqa: N806
    paired, saddr = port_fields(op, groups, cfg)
    zero = np.zeros(T, dtype=np.int64)
    s_seq, rows, widths, rounds, _ = _args(op, groups, cfg)
    return _da.stage_schedule(s_seq, rows, widths, rounds, paired, zero if seg is None else seg, zero, zero, saddr,
                              cfg, entries, lanes, early=True, defer="behind", queue=queue, stage=False,
                              barrier=barrier)


def port_run(s_seq, rows, widths, rounds, paired, saddr, cfg: AcceleratorConfig, entries: int, lanes: int,
             queue: tuple | None = None, barrier: str = "off", seg=None, stage: tuple | None = None,
             stepped: bool = False, ring: int = 0) -> dict:
    """`port_schedule`'s rule compiled (numba): `sim.timing.delta_accel.stage_schedule` with ``stage=False``,
    ``early=True``, ``defer="behind"`` and `sim.timing.compact.WORD_REGISTERS` word registers, on arrays, equal to it
    key for key (tests/test_caccel_port.py); fast enough for the cycle model's whole ops (docs/decisions.md D117).

    Args (int ``[T]`` per band-tile in issue order): s_seq slots, rows valid rows, widths its group's channels,
    rounds its gather rounds (`gather_rounds`), paired PAIRED (two channels a slot), saddr the weight buffer's
    half-word of its group's word 0 (`port_fields`); entries S, lanes P; queue `accel_schedule`'s; barrier and seg
    (1 on a segment's first band-tile) `stage_schedule`'s segment barrier (``"off"``: `kaleido_caccel` as built).
    stage: ``(sbuf, fcount)`` int ``[T]``: `stage_schedule` with ``stage=True`` instead (the staged delta controller,
    ``kaleido_daccel_stage``; docs/decisions.md D121; `sim.timing.delta_accel.stage_run`): ``seg`` then marks each
    stage segment's first band-tile, ``sbuf`` its buffer, ``fcount`` its fill's half-words, ``saddr`` the stage
    half-word of the group's word 0.

    Returns ``{"band", "first", "last", "gather"}`` int64 ``[T]``, ``"late"``, ``"reads"``, ``"weights"`` (weights
    per column those reads carry) and ``"deferred"``, as `stage_schedule`; with ``queue`` also ``"queue_done"``
    (`sim.timing.delta_accel.queue_done`); with ``stage`` also ``"fills"`` (int64 ``[fills]``), ``"fill_wait"`` and
    ``"fill_reads"``.

    ``ring``: the descriptor ring's entries (`hw.delta_accel.DeltaAccel`'s ``ring``, docs/decisions.md D134; 0: none):
    the gather takes band-tile n only from the cycle after band-tile n - ring's last row left its drain port
    (`ring_free`).

    ``stepped``: run D117's and D121's loop instead (`sim.timing.port_stepped.port_run_stepped`, one cycle an
    iteration, every band every cycle), the same results more slowly: the reference docs/decisions.md D128's runs
    are checked against at the model's op sizes."""
    from sim.timing.compact import WORD_REGISTERS

    B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    a = [np.ascontiguousarray(x, dtype=np.int64) for x in (s_seq, rows, widths, rounds, paired, saddr)]
    T = len(a[0])  # noqa: N806
    emits = _da._emit_of(queue, T) if queue is not None else np.zeros(0, dtype=np.int64)
    tg_lo, tg_hi = np.full(T, -1, dtype=np.int64), np.zeros(T, dtype=np.int64)
    if barrier not in ("off", "first", "every"):
        raise ValueError(f"barrier must be 'off', 'first' or 'every', not {barrier!r}")
    if barrier != "off":
        starts = [*np.flatnonzero(np.asarray(seg)).tolist(), T]
        if barrier == "first":
            starts = starts[:2]
        for a0, a1 in zip(starts[:-1], starts[1:], strict=True):
            tg_lo[a0:min(a1, a0 + B)], tg_hi[a0:min(a1, a0 + B)] = a0, min(a1, a0 + B)
    zero = np.zeros(T, dtype=np.int64)
    if stage is None:
        sg, sb, fc = zero, zero, zero
    else:
        sg = np.ascontiguousarray(seg, dtype=np.int64)
        sb, fc = (np.ascontiguousarray(x, dtype=np.int64) for x in stage)
        if not (len(sg) == len(sb) == len(fc) == T):
            raise ValueError(f"the stage fields must have one entry per band-tile ({T})")
        if T and sb.min() < 0:
            raise ValueError("stage buffers must be numbered from 0")
    xw = _da.gather_words(a[2], lanes)
    limit = _da.stage_limit(a[0], a[1], a[3], xw, fc, cfg, queue)  # a deadlock past it (the bound derived there)
    args = (a[0], a[1], a[2], xw, a[3], a[4].astype(np.bool_), a[5], emits, B, max(1, d // B), max(1, B // d),
            int(entries), WORD_REGISTERS, _da.EARLY_AHEAD * B, limit, tg_lo, tg_hi, stage is not None, sg, sb, fc,
            int(sb.max(initial=0)) + 1)
    if stepped:
        from sim.timing.port_stepped import port_run_stepped

        if ring:
            raise ValueError("the stepped reference loop has no descriptor ring (ring=0)")
        res = port_run_stepped(*args)
    else:
        res = _port_run(*args, int(ring), d, cfg.array_cols + 2)
    band, first, last, gather, late, reads, weights, deferred, q0, q1, fills, fill_wait, fill_reads = res
    out = {"band": band, "first": first, "last": last, "gather": gather, "late": int(late), "reads": int(reads),
           "weights": int(weights), "deferred": int(deferred)}
    if queue is not None:  # `sim.timing.delta_accel.queue_done` from the last emission's cycle and step
        out["queue_done"] = int(max(q0 + queue[2] - q1, gather[-1] + 1)) if len(queue[0]) else int(queue[2])
    if stage is not None:
        out |= {"fills": fills, "fill_wait": int(fill_wait), "fill_reads": int(fill_reads)}
    return out


def op_port(decs, tiles: list, grid, groups, cfg: AcceleratorConfig, fw: int, n_cb: int,
            entries: int | None = None, lanes: int = 32, barrier: str = "off", queues: bool = True,
            replay: bool = True, reach: int | None = -1) -> dict:
    """`port_run` on one op of the cycle model (`sim.engines.model._compact_timing`, docs/decisions.md D117): its
    band-tiles in compact's issue order (batch element, column block, band-tile), the whole op as one run of the
    controller on its one weight buffer (every batch element reads the same weights: the same half-words).

    Args:
        decs: per batch element the int ``[F H W, G]`` decisions; tiles: per batch element its
            `sim.timing.compact.compact_tiles` ``(slots, group, n_compute, n_partial)``; grid ``(F, H, W)``;
            groups ``(k0, k1, axis)``; fw: `sim.timing.compact.chunk_frames`; n_cb column blocks; entries: staging
            entries S (default 2 B, `hw.delta_accel.DeltaAccel`'s); lanes: X lanes P (`hw.delta_accel.LANES` = 32,
            restated as `sim.cost.controllers.LANES`).

    Each band-tile's gather rounds come from its tokens (`sim.timing.compact.band_tile_tokens`, banks ``R / B``).
    ``queues`` (default, what `hw.rtl` emits): each descriptor also waits for ``kaleido_dqueue`` to emit it
    (`queue_steps` of each batch element, one column block's steps repeated for each block, the batch's runs one
    after the other; ``"queue_done"`` in the result); False: the host's band-tile list. ``replay`` (default, D120,
    as `hw.compact_accel.CompactAccel` builds its queues): the queues scan each batch element's first column block
    only and read its band-tiles back for the others (`sim.timing.delta_accel.queue_steps`' ``replay``, a buffer
    that holds them: the host gives a slice more than one column block only where one column block's band-tiles fit
    its `replay_entries`, `sim.engines.verilator_core.slices`, D124); False: D93's rescan per column block. ``reach``: `queue_steps`' wider scan,
    positions a step (default -1: `queue_reach`, as built, D124; None: D93's steps of R / B). ``barrier="first"``:
    the op's first B band-tiles start together, ``"every"`` each column block's of each batch element (`port_run`'s
    barrier; not built, D117 measures it). Returns
    `port_run`'s dict."""
    from sim.timing.compact import band_tile_tokens, paired_tiles

    B, brows = cfg.compact_bands, band_rows(cfg)  # noqa: N806
    reach = queue_reach(cfg) if reach == -1 else reach
    F, H, W = grid  # noqa: N806
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    hoff = np.r_[0, np.cumsum(-(-widths // B))].astype(np.int64)  # each group's first half-word, `port_fields`
    span = int(hoff[-1]) + 1
    parts, qstep, qn = [], [], 0
    for dec, t in zip(decs, tiles, strict=True):
        if queues and replay:  # the first column block scanned, its band-tiles read back for the others
            st, _reps, n1 = _da.queue_steps(dec, grid, cfg.array_rows, brows, fw, n_cb, 1, False, replay=True,
                                            reach=reach)
            qstep.append(st + qn)
            qn += n1
        elif queues:  # the scan is the same for every column block (one block per group: c_s = 1)
            st, _reps, n1 = _da.queue_steps(dec, grid, cfg.array_rows, brows, fw, 1, 1, False, reach=reach)
            qstep += [st + qn + c * n1 for c in range(n_cb)]
            qn += n_cb * n1
        toks, offs = band_tile_tokens(np.ascontiguousarray(dec, dtype=np.int8), F, H * W, cfg.array_rows, brows, fw)
        rounds = _tile_rounds(toks, offs, brows)
        grp = t[1]
        one = (t[0], t[2] + t[3], widths[grp], rounds, paired_tiles(t, groups).astype(np.int64))
        for cb in range(n_cb):
            parts.append((*one, cb * span + hoff[grp]))
    cols = [np.concatenate([p[i] for p in parts]) if parts else np.zeros(0, dtype=np.int64) for i in range(6)]
    seg = np.zeros(len(cols[0]), dtype=np.int64)
    starts = np.cumsum([0] + [len(p[0]) for p in parts[:-1]]) if barrier == "every" else np.zeros(1, dtype=np.int64)
    seg[starts[starts < len(seg)]] = 1
    queue = None
    if queues:
        step = np.concatenate(qstep) if qstep else np.zeros(0, dtype=np.int64)
        queue = (step, np.ones(len(step), dtype=np.int64), qn)  # one descriptor an emission (one column block)
    return port_run(*cols, cfg, entries or 2 * B, lanes, queue, barrier, seg)


@numba.njit(cache=True)
def _tile_rounds(toks, offs, banks):
    """int64 ``[T]``: `gather_rounds` of each band-tile's tokens ``toks[offs[t]:offs[t + 1]]``."""
    T = offs.shape[0] - 1  # noqa: N806
    out = np.zeros(T, dtype=np.int64)
    cnt = np.zeros(banks, dtype=np.int64)
    for t in range(T):
        cnt[:] = 0
        m = 0
        for i in range(offs[t], offs[t + 1]):
            k = toks[i] % banks
            cnt[k] += 1
            m = max(m, cnt[k])
        out[t] = m
    return out


def caccel_schedule(op, groups, cfg: AcceleratorConfig, entries: int, lanes: int, queue: tuple | None = None):
    """``(band, first, last, gather)`` int64 ``[T]`` per band-tile of ``op`` (`port_schedule`)."""
    if not len(op.tiles):
        return tuple(np.zeros(0, dtype=np.int64) for _ in range(4))
    sch = port_schedule(op, groups, cfg, entries, lanes, queue)
    return sch["band"], sch["first"], sch["last"], sch["gather"]


def caccel_cycles(op, groups, cfg: AcceleratorConfig, entries: int, lanes: int, queue: tuple | None = None) -> int:
    """Cycles of one op from ``start`` to ``done``: the last row's drain read + C + 3 (as
    `sim.timing.delta_accel.accel_cycles`) on `caccel_schedule`; 1 without band-tiles; with ``queue`` no earlier
    than 2 cycles after the queues' `sim.timing.delta_accel.queue_done`."""
    if not len(op.tiles):
        return 1 if queue is None else queue[2] + 2
    band, _first, last, g = caccel_schedule(op, groups, cfg, entries, lanes, queue)
    out = int(_da.drain_reads(band, last, op.rows, cfg).max()) + cfg.array_cols + 3
    return out if queue is None else max(out, _da.queue_done(g, queue) + 2)


def gather_reads(dec: np.ndarray, groups, n_cb: int, lanes: int) -> tuple[int, int]:
    """``(words, bytes)`` the controller's gather reads from the X buffer for one op, from the decisions alone: every
    (token, group) not REUSE is a band-tile row once per column block, read as ``ceil(|g| / P)`` words carrying
    ``|g|`` bytes. The bytes are the model's input-SRAM reads of the array (`sim.cost.compact_actions`:
    ``n_cb (cc + pc)``, the needed channels of COMPUTE and PARTIAL tokens per column block).

    Args:
        dec: int ``[M, G]`` decisions (`algo.reuse.golden` codes); groups ``(k0, k1, axis)``; n_cb column blocks; lanes P.
    """
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    need = np.asarray(dec) != REUSE
    words = int((need * -(-widths // lanes)).sum()) * n_cb
    return words, int((need * widths).sum()) * n_cb


def block_times(op, schedule: tuple, cfg: AcceleratorConfig, n_cb: int) -> tuple[np.ndarray, np.ndarray]:
    """Per column block of ``op`` (a `sim.engines.band_stimulus.BandOp`), counted from the ``start`` cycle:
    ``(last_row, first_desc)`` int64 ``[n_cb]``, the cycle its last row leaves the controller's drain ports
    (`row_out_cycles`) and the cycle the gather takes its first descriptor (``desc_valid``: its gather cycle
    ``g`` of `caccel_schedule` + 2, one for the start cycle and one for the descriptor read); -1 for a block
    without band-tiles. ``schedule``: `caccel_schedule` of ``op``."""
    band, _first, last, gather = schedule
    last_row = np.full(n_cb, -1, dtype=np.int64)
    first_desc = np.full(n_cb, -1, dtype=np.int64)
    outs = row_out_cycles(band, last, op.rows, cfg)
    for n, tile in enumerate(op.tiles):
        last_row[tile.cb] = max(last_row[tile.cb], int(outs[n].max()))
        if first_desc[tile.cb] < 0:
            first_desc[tile.cb] = int(gather[n]) + 2
    return last_row, first_desc


def core_ways(cfg: AcceleratorConfig) -> int:
    """``kaleido_ccore``'s combine ways by default (`hw.compact_core.default_ways`, docs/decisions.md D104): d
    (``drain_rows_per_cycle``), or the largest power of two below it that divides ``partial_regs``."""
    w = 1
    while 2 * w <= cfg.drain_rows_per_cycle and cfg.partial_regs % (2 * w) == 0:
        w *= 2
    return w


def core_done(accel_done: int, M: int, commands: int, blocks: tuple) -> int:  # noqa: N803
    """`core_cycles`' ``done`` alone, without the ``[n_cb, M]`` rows (the cycle model's ``combine_timing = "rtl"``,
    docs/decisions.md D104; tests check it equal to `core_cycles`): block c's walk reads from ``W_c`` (`core_cycles`'
    rule) and ``done`` is ``W_last + M n + 3``."""
    last_row, first_desc = (np.asarray(a, dtype=np.int64) for a in blocks)
    n_cb = len(last_row)
    if not M or not n_cb:
        return int(accel_done) + 1
    # per block, the first descriptor of the next block with band-tiles, + 1 (or T + 1 when none follows)
    nxt = np.full(n_cb, int(accel_done) + 1, dtype=np.int64)
    ahead = int(accel_done) + 1
    for c in range(n_cb - 1, -1, -1):
        nxt[c] = ahead
        if first_desc[c] >= 0:
            ahead = int(first_desc[c]) + 1
    w = -(1 << 62)
    for c in range(n_cb):
        w = max(int(last_row[c]) + 2, min(int(nxt[c]), int(accel_done) + 1), w + M * commands if c else w)
    return w + M * commands + 3


def core_cycles(accel_done: int, M: int, commands: int, blocks: tuple) -> tuple[np.ndarray, int]:  # noqa: N803
    """``kaleido_ccore``'s combine stage (`hw.compact_core`, docs/decisions.md D97, D104), counted from the
    ``start`` cycle: ``(y, done)`` with ``y`` int64 ``[n_cb, M]`` the cycle each (column block, token) ``Y`` row
    leaves and ``done`` the cycle ``done`` pulses.

    Args:
        accel_done: `caccel_cycles` (the controller's ``done``, T). M: tokens.
        commands: commands per token, ``ceil(G / ways)``: 1 with ``kaleido_ccore``'s G ways (a token's groups in one
            command, D104); G with one way (D97's walk, a command per group).
        blocks: `block_times`' ``(last_row, first_desc)``, int64 ``[n_cb]`` each.

    The walk runs column block by column block, each once it is whole: block c's rows are all staged and counted
    at ``last_row_c + 2`` (a row leaving at o is staged at o + 1), and its descriptors are all known once the
    gather has taken a later block's first descriptor (counted the cycle after, ``first_desc + 1``) or the
    controller's ``done`` has come (seen at T + 1): ``ready_c = max(last_row_c + 2, min(first_desc_{c'} + 1,
    T + 1))``, c' the next block with band-tiles. Block c's walk reads its first command at ``W_c = max(ready_c,
    W_{c-1} + M n)`` (n = ``commands``) and one command a cycle after it; a command issues the cycle after its read
    and the combine hands out a token's row 2 cycles after its last command, ``W_c + t n + n + 2``; ``done`` follows
    the last row by one cycle."""
    last_row, first_desc = (np.asarray(a, dtype=np.int64) for a in blocks)
    n_cb = len(last_row)
    y = np.empty((n_cb, M), dtype=np.int64)
    walk_free = 0  # the first cycle the walk may read a command of the next block
    for c in range(n_cb):
        later = [int(v) + 1 for v in first_desc[c + 1:] if v >= 0]
        ready = max(int(last_row[c]) + 2, min(later[:1] + [accel_done + 1]))
        w = max(ready, walk_free)
        y[c] = w + np.arange(M, dtype=np.int64) * commands + commands + 2
        walk_free = w + M * commands
    return y, int(y[-1, -1]) + 1 if M and n_cb else accel_done + 1


@numba.njit(cache=True)
def ring_free(last, band, rows, bands, dports, lag):
    """The first cycle the gather may take band-tile n + ring (docs/decisions.md D134, `hw.delta_accel.DeltaAccel`'s
    drained gate): band-tile n's last slot at ``last`` on band ``band`` with ``rows`` valid rows; its last row is read
    `sim.timing.compact.drain_reads`' way (``q = max(1, B / d)`` turns a row, band b's port turn ``b // d`` when
    B > d), leaves its drain port ``C + 1`` cycles later (`sim.timing.delta_accel.row_out_cycles`) and the ring's
    row count reaches 0 the cycle after that: ``lag = C + 2`` cycles after the read."""
    q = max(1, bands // dports)
    phase = band // dports if bands > dports else 0
    return last + 1 + (phase - (last + 1)) % q + (rows - 1) * q + lag


@numba.njit(cache=True)
def _port_run(s_seq, rows, widths, xw, rounds, paired, saddr, emits, bands, ports_b, q, entries, regs, ahead,  # noqa: C901
              limit, tg_lo, tg_hi, stage, seg, sbuf, fcount, nbuf, ring, dports, lag):
    """`port_run`'s loop: `sim.timing.delta_accel.stage_schedule` with ``early=True`` and ``defer="behind"``, one
    cycle an iteration, its rules statement for statement, with the bands' steady slots stepped in runs
    (docs/decisions.md D128). ``emits``: `_emit_of`'s steps, or an empty array without the queues; ``limit``: the
    cycles after which it gives up (RuntimeError), as `stage_schedule`'s; ``tg_lo``, ``tg_hi``: per band-tile the
    band-tiles ``[lo, hi)`` it starts together with (`stage_schedule`'s ``barrier``; lo = -1: none). ``stage``
    (`stage_schedule`'s, docs/decisions.md D121): the weight stage's serial fills, with ``seg``, ``sbuf``, ``fcount``
    int64 ``[T]`` its fields and ``nbuf`` the stage buffers (sbuf < nbuf); ignored (any arrays) without it. ``ring``
    (`port_run`'s; 0: none), ``dports`` (d) and ``lag`` (C + 2): the drained gate, `ring_free`'s rule.

    The runs (D128): a band that issued a slot at c, is not past its last, has its word for c + 1 (``have > cw``)
    and whose slot at c + 1 neither pops a word nor is its band-tile's last, issues a slot on every cycle until the
    next such slot (its band-tile's last, or its next pop: slot ``mod P = P - 1``, P = B PAIRED, else 2 B): nothing
    it reads changes meanwhile (its band-tile, its gather; ``have`` only grows, ``cw`` moves only at a pop), and
    nothing else reads its slot. So its slot is stepped to that slot at once and the band is looked at again only on
    that cycle (``nev``); on the cycles between it accepts a slot that pops nothing, as the rule would. A band
    that waits sleeps (``nev``) to the cycle it can move: for its word, until its next word in flight lands or a
    word read for it lands (its ``late`` cycles counted when it wakes); for its gather, to ``xready``; at its last
    slot, to its drain port's free cycle; idle, until it is handed a band-tile. The early choice's least-``E``
    candidate is kept between cycles: compared in as a band becomes a candidate, rescanned when it leaves (it is
    handed a band-tile) or its ``E`` moves."""
    T = s_seq.shape[0]  # noqa: N806
    B = bands  # noqa: N806
    word = 2 * B
    pow2 = (B & (B - 1)) == 0  # slot mod B or 2 B as a mask
    inf = np.int64(1) << 40
    band = np.full(T, -1, dtype=np.int64)
    first = np.full(T, -1, dtype=np.int64)
    last = np.full(T, -1, dtype=np.int64)
    gather = np.full(T, -1, dtype=np.int64)
    xready = np.full(T, inf, dtype=np.int64)
    wready = np.full(T, inf, dtype=np.int64)
    nw = (widths + word - 1) // word
    late = reads = weights = deferred = 0
    gidx = 0
    g_free = 0
    bt = np.arange(B).astype(np.int64)
    slot = np.zeros(B, dtype=np.int64)
    cw = np.zeros(B, dtype=np.int64)
    pw = np.zeros(B, dtype=np.int64)
    count = np.zeros(B, dtype=np.int64)
    # the words loaded for a band's band-tile (and its next): how many, and the cycles the last two land (a word
    # read at c lands at c + 2, so only the last two can still be in flight)
    npres = np.zeros(B, dtype=np.int64)
    p1 = np.full(B, -inf, dtype=np.int64)
    p2 = np.full(B, -inf, dtype=np.int64)
    nx = np.full(B, inf, dtype=np.int64)
    pn = np.zeros(B, dtype=np.int64)
    npresn = np.zeros(B, dtype=np.int64)
    p1n = np.full(B, -inf, dtype=np.int64)
    p2n = np.full(B, -inf, dtype=np.int64)
    E = np.full(B, -1, dtype=np.int64)  # noqa: N806
    pfree = np.full((B, ports_b), -inf, dtype=np.int64)
    pact = np.full((B, ports_b), -inf, dtype=np.int64)
    acc = np.zeros(B, dtype=np.bool_)
    pop = np.zeros(B, dtype=np.int64)
    done = np.zeros(B, dtype=np.bool_)
    nxn = np.zeros(B, dtype=np.bool_)
    shr = np.zeros(B, dtype=np.int64)  # the bands a read loads into
    # the runs (D128): per band the next cycle it is looked at; the bands looked at this cycle
    nev = np.zeros(B, dtype=np.int64)
    proc = np.zeros(B, dtype=np.int64)
    lz = np.full(B, -1, dtype=np.int64)  # a band waiting for its word: the cycle its wait was last counted
    # the early choice's scan, kept between cycles: the candidate with the least E (-1: none), updated as bands
    # become candidates; rescanned when the least leaves or its E moves
    bs = -1
    rescan = True
    # the weight stage (stage=True): the fill pointer, the running fill's last read, per band-tile the cycle the
    # pointer passes it, per stage buffer its passed band-tiles not yet past their last slot; each fill's first read
    passed = np.full(T, inf, dtype=np.int64)
    inbuf = np.zeros(max(nbuf, 1), dtype=np.int64)
    fills = np.zeros(T, dtype=np.int64)
    nfill = fill_wait = fill_reads = 0
    fp, f_end = 0, -1
    queues = emits.shape[0] > 0
    q0, q1, q2 = -1, -1, 0  # the queues: the last emission's cycle and step, the next take's first cycle
    if queues and T > 0 and emits[0] >= 0:
        q0, q1, q2 = max(q0 + emits[0] - q1, -1), emits[0], max(q0 + emits[0] - q1, -1) + 1
    nxt = B
    ndone = 0
    c = 0
    turn = 0  # c mod B
    freed = np.full(T if ring else 0, inf, dtype=np.int64)  # the ring: per band-tile its entry's first free cycle
    while ndone < T:
        if c > limit:
            raise RuntimeError("port_run did not finish")
        # gather
        if gidx < T and c >= g_free and c >= q2 and (gidx < entries or 0 <= last[gidx - entries] < c) and (
                ring == 0 or gidx < ring or freed[gidx - ring] <= c):
            gather[gidx] = c
            xready[gidx] = c + rounds[gidx] * xw[gidx] + 3
            g_free = c + rounds[gidx] * xw[gidx] + 1
            if not stage:  # the weight port: readable once its fields are held
                wready[gidx] = c + 2
            gidx += 1
            if queues and gidx < T:
                if emits[gidx] >= 0:
                    e = max(q0 + emits[gidx] - q1, gather[gidx - 1])
                    q0, q1, q2 = e, emits[gidx], e + 1
                else:
                    q2 = q0 + 1
        # early choice on the cycle's registered state
        give = -1
        if nxt < T and 0 <= gather[nxt] <= c - 2:
            if rescan:
                bs = -1
                for k in range(B):
                    if nx[k] >= T and (bt[k] >= T or 0 <= first[bt[k]] < c):
                        if bs < 0 or E[k] < E[bs]:
                            bs = k
                rescan = False
            if bs >= 0 and E[bs] <= c + ahead:
                give = bs
        # bands (those in a run accept a slot that pops nothing: stepped already)
        npr = 0
        for b in range(B):
            if c < nev[b]:
                continue
            proc[npr] = b
            npr += 1
            if lz[b] >= 0:  # the cycles it waited for its word, uncounted
                late += c - lz[b] - 1
                lz[b] = -1
            t = bt[b]
            if t >= T:  # idle until it is handed a band-tile
                nev[b] = inf
                continue
            if c < xready[t]:
                if xready[t] < inf:  # its gather's rounds
                    nev[b] = xready[t]
                continue
            have = npres[b] - (1 if p1[b] > c else 0) - (1 if p2[b] > c else 0)
            if have <= cw[b]:
                late += 1
                # its word comes no earlier than its next word in flight lands, or a word read for it lands
                w = inf
                if p1[b] > c:
                    w = p1[b]
                if c < p2[b] < w:
                    w = p2[b]
                nev[b] = w
                lz[b] = c
                continue
            if slot[b] == 0 and tg_lo[t] >= 0:  # the barrier: its band-tiles start together
                ok = True
                for m in range(tg_lo[t], tg_hi[t]):
                    km = -1
                    for k2 in range(B):
                        if bt[k2] == m:
                            km = k2
                    if km < 0 or c < xready[m] or npres[km] - (1 if p1[km] > c else 0) - (1 if p2[km] > c else 0) < 1:
                        ok = False
                        break
                if not ok:
                    continue
            lastslot = slot[b] == max(1, s_seq[t]) - 1
            if lastslot:
                k = 0 if ports_b == 1 else count[b] % ports_b
                if c < pfree[b, k]:  # its drain port
                    nev[b] = pfree[b, k]
                    continue
            acc[b] = True
            if slot[b] == 0:
                first[t] = c
                band[t] = b
                E[b] = max(c + max(1, s_seq[t]) - 1, pact[b, 0 if ports_b == 1 else count[b] % ports_b])
                # a candidate from c + 1 (it has no next: only a candidate is handed one)
                if not rescan and (bs < 0 or E[b] < E[bs] or (E[b] == E[bs] and b < bs)):
                    bs = b
            # a pop: its last slot, or the slot that takes its word's last channels (slot mod P = P - 1, P = B
            # PAIRED: (2 slot mod 2 B) + 2 >= 2 B, else 2 B: (slot mod 2 B) + 1 >= 2 B)
            per = B if paired[t] else word
            r = slot[b] & (per - 1) if pow2 else slot[b] % per
            pop[b] = 1 if lastslot or r == per - 1 else 0
            if lastslot:
                done[b] = True
                last[t] = c
                ndone += 1
                pfree[b, k] = c + rows[t] * q
                pact[b, k] = c + rows[t] * q
                count[b] += 1
                if ring:
                    freed[t] = ring_free(c, b, rows[t], bands, dports, lag)
        # fill unit (stage=True)
        if stage and c > f_end and fp < T and gather[fp] >= 0 and c >= gather[fp] + 2:
            if seg[fp] == 0:  # its segment's buffer is the one just filled
                passed[fp] = c
                wready[fp] = c + 2
                fp += 1
            elif inbuf[sbuf[fp]] != 0:  # a passed band-tile of its buffer is still held
                fill_wait += 1
            else:
                fills[nfill] = c
                nfill += 1
                f_end = c + fcount[fp] - 1
                fill_reads += fcount[fp]
                passed[fp] = f_end
                wready[fp] = f_end + 2
                fp += 1
        if stage and fp > 0 and passed[fp - 1] == c:  # held in its buffer from c + 1 to its last slot
            inbuf[sbuf[fp - 1]] += 1
        # word loads: band c mod B's turn; the other bands' wants matter only when it reads (most turns it does not:
        # its registers are full), so they are looked at only then
        b = turn
        wants = False
        if pw[b] - cw[b] + pn[b] - pop[b] < regs:
            t = bt[b]
            if t < T and pw[b] < nw[t]:
                wants = wready[t] <= c
            elif nx[b] < T and wready[nx[b]] <= c and pn[b] < nw[nx[b]]:
                wants = True
        if wants:  # its word (a): of its band-tile, or on into its next
            t = bt[b]
            if t < T and pw[b] < nw[t]:
                tb, jb = t, pw[b]
            else:
                tb, jb = nx[b], pn[b]
            a = saddr[tb] + 2 * jb
            check = pw[b] - cw[b] + pn[b] - pop[b] >= 2  # it may defer: a word beyond the one in use
            nsh = 0
            for k in range(B):  # the others' next words: one that defers this read, or those it loads into
                if k == b:
                    continue
                t = bt[k]
                tk = -1
                if t < T and pw[k] < nw[t]:
                    if wready[t] <= c:
                        tk, jk = t, pw[k]
                        nxn[k] = False
                elif nx[k] < T and wready[nx[k]] <= c and pn[k] < nw[nx[k]]:
                    tk, jk = nx[k], pn[k]
                    nxn[k] = True
                if tk < 0:
                    continue
                same = saddr[tk] + 2 * jk == a
                freek = pw[k] - cw[k] + pn[k] - pop[k] < regs
                if check and ((same and not freek) or (sbuf[tk] == sbuf[tb] and saddr[tk] == saddr[tb] and jk < jb)):
                    deferred += 1
                    a = -1
                    break
                if same and freek:
                    shr[nsh] = k
                    nsh += 1
            if a >= 0:
                reads += 1
                weights += min(word, widths[tb] - word * jb)
                nxn[b] = tb != bt[b]
                shr[nsh] = b
                nsh += 1
                for i in range(nsh):
                    k = shr[i]
                    if nxn[k]:
                        pn[k] += 1
                        npresn[k] += 1
                        p2n[k], p1n[k] = p1n[k], c + 2
                    else:
                        pw[k] += 1
                        npres[k] += 1
                        p2[k], p1[k] = p1[k], c + 2
                        if lz[k] >= 0 and nev[k] > c + 2:  # waiting for its word: it lands at c + 2
                            nev[k] = c + 2
        # end of cycle (the bands looked at this cycle; the others are in a run)
        for i in range(npr):
            k = proc[i]
            if acc[k]:
                slot[k] += 1
                cw[k] += pop[k]
        for i in range(npr):
            k = proc[i]
            if done[k]:
                if stage:  # its last slot: its buffer is free of it from c + 1
                    inbuf[sbuf[bt[k]]] -= 1
                bt[k], slot[k], cw[k], pw[k] = nx[k], 0, 0, pn[k]
                npres[k], p1[k], p2[k] = npresn[k], p1n[k], p2n[k]
                nx[k], pn[k], npresn[k], p1n[k], p2n[k] = inf, 0, 0, -inf, -inf
                if bt[k] >= T:  # idle: a candidate with E = c (it was one before, with its old E)
                    E[k] = c
                    if k == bs:
                        rescan = True
                    elif not rescan and (bs < 0 or E[k] < E[bs] or (E[k] == E[bs] and k < bs)):
                        bs = k
        if give >= 0:
            t, k = nxt, give
            if ports_b == 1:
                f_at = E[k] + (rows[bt[k]] * q if bt[k] < T else 0)
            else:
                f_at = pact[k, (count[k] + (1 if bt[k] < T else 0)) % ports_b]
            E[k] = max(E[k] + max(1, s_seq[t]), f_at)
            if bt[k] >= T:
                bt[k] = t
                nev[k] = c + 1
            else:
                nx[k] = t
            nxt += 1
            rescan = True
        # the runs: a band that issued a slot, not its last, and holds the word of its next slot steps to its next
        # slot that pops or is last; it is looked at again on that slot's cycle
        for i in range(npr):
            k = proc[i]
            if acc[k] and not done[k]:
                t = bt[k]
                s1 = slot[k]
                per = B if paired[t] else word
                e = min(max(1, s_seq[t]) - 1, s1 + per - 1 - (s1 & (per - 1) if pow2 else s1 % per))
                if e > s1 and npres[k] - (1 if p1[k] > c + 1 else 0) - (1 if p2[k] > c + 1 else 0) > cw[k]:
                    slot[k] = e
                    nev[k] = c + 1 + e - s1
            acc[k] = False
            pop[k] = 0
            done[k] = False
        c += 1
        turn += 1
        if turn == B:
            turn = 0
    return (band, first, last, gather, late, reads, weights, deferred, q0, q1, fills[:nfill], fill_wait,
            fill_reads)
