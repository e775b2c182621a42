"""Cycles of the delta controller's combine stage (`hw.delta_core.DeltaCore`, ``kaleido_dcore``, docs/decisions.md
D95), cycle 0 the ``start`` cycle, after ``kaleido_daccel``'s rows (`sim.timing.delta_accel.row_out_cycles`) and
``done`` (`sim.timing.delta_accel.accel_cycles`):

- a row leaving ``kaleido_daccel`` at c is written into the row FIFO at ``c + 1``; rows are popped one a cycle
  in the FIFO's order (leaving order, a cycle's rows in port order: `fifo_rows`), from the cycle after their
  write (``j >= c + 2``); a popped row's accumulate command issues 2 cycles later and is counted for its column
  block the cycle after that; with W accumulate ways (``ways``, docs/decisions.md D107) up to W rows a cycle: the
  FIFO's run from its head in distinct ways (`row_ways`), each row under the head's gate;
- the walk goes segment by segment (D104, `segments`), each once whole: with ``seg`` once every row its descriptors
  list is counted and a later segment's descriptor has come (a descriptor is counted 2 cycles after its
  ``desc_valid``: its segment is computed the cycle between) or the controller's ``done`` (``T``); otherwise at
  ``x = max(T, j_last + 3)`` (the whole op accumulated), the segments back to back; with ``seg`` a segment goes at
  the first such cycle g with no row of its parity in the two accumulate stages and the walk free (the cycle after
  the previous segment's last command at least); its i-th command is read at ``g + 1 + i`` and issued a cycle
  later, a token's ``Y`` row leaves 2 cycles after its last class's command; ``done`` pulses 4 cycles after the
  last segment's last command is read;
- a row of the walked segment's parity (or of a whole segment waiting to go) waits at the FIFO's head (``gated``);
- the FIFO holds, after cycle k's writes, the rows written by k less those popped before k; its depth must cover
  the most (`core_schedule`'s ``fifo_max``).
- with V output ways (``out_ways``, docs/decisions.md D111's rule; built opt-in in RTL, D112) the walk's cycles are
  `segment_steps`: a run of V consecutive tokens of one class a cycle, so a segment takes `segment_step_counts`
  cycles; ``buffers`` D buffers (2 as built) make a row wait only while a segment of its residue is walked.
- back-pressure into ``kaleido_daccel`` (docs/decisions.md D116; the cycle model's default): the array runs a cycle
  only while the row FIFO has d free entries (``fifo``, ``ports``; built, D123), and a band-tile issues only while
  its segment is fewer than the count banks past the walked one (``hold``, ``banks``); a held cycle moves the
  array's later events (`core_schedule`; `held_done`, its numba loop). The issue hold as built (D126) is
  ``core_schedule``'s ``gate``: the controller's schedule band-tile by band-tile (`IssueFeed`, `StageFeed`)
  co-simulated with the core's, a held take re-running the band choice and every later gather.

`core_schedule` is plain Python (the RTL benches' sizes); the cycle model of whole traces (`sim.engines.model`, only
with ``combine_timing = "rtl"``, D104) calls its numba loops: `issue_core` (``kaleido_dcore`` with the controller's
schedule and issue gate in one pass, docs/decisions.md D137) and `stage_core` (``kaleido_dcore_stage``, D129);
`ways_done` (D108) and `held_done` (D116) are the core alone on a given schedule. `walk_done` and `blocks_done` are one way's ``done`` in closed
form (D104), `blocks_done` only where no row waits at the FIFO's head for its D buffer (at 480p rows do wait: the
walk lags the array by many segments, D108).
"""

from __future__ import annotations

import heapq

import numba
import numpy as np


def segments(grid, n_cb: int, n_classes: int, R: int, fw: int | None = None,  # noqa: N803
             s: int | None = None) -> list[list[tuple[int, int, int]]]:
    """The output walk's segments in order, each its commands ``(token, column block, class)`` (D104): per group of
    ``s`` column blocks (default all; the last group the rest), per pool of R positions, per chunk of ``fw`` frames
    (default all), per column block of the group, the segment: per frame of the chunk, per position of the pool,
    per class. A segment's ordinal is `hw.delta_core.segment_base` + chunk k. (`segment_steps` with one output way,
    its steps flattened.)"""
    return [[c for step in seg for c in step] for seg in segment_steps(grid, n_cb, n_classes, R, fw, s)]


def commands(grid, n_cb: int, n_classes: int, R: int, fw: int | None = None,  # noqa: N803
             s: int | None = None) -> list[tuple[int, int, int]]:
    """The output walk's commands in order, ``(token, column block, class)``: `segments` one after the other."""
    return [c for sg in segments(grid, n_cb, n_classes, R, fw, s) for c in sg]


def segment_steps(grid, n_cb: int, n_classes: int, R: int, fw: int | None = None, s: int | None = None,  # noqa: N803
                  out_ways: int = 1) -> list[list[tuple[tuple[int, int, int], ...]]]:
    """The output walk's cycles per segment (`segments`' order) with ``out_ways`` V output ways (docs/decisions.md
    D111, the model's rule; the RTL walks one command a cycle, V = 1): per frame of the segment's chunk, per run of
    V consecutive positions of the pool (the pool's last run the rest), per class, one *step*: the run's commands
    ``(token, column block, class)`` in one cycle. A run's tokens are consecutive, so V <= W accumulate ways puts
    their D words ``(a M + t) mod W`` in distinct ways (`row_ways`). V = 1: `segments`' commands, one a step."""
    F, H, W = grid  # noqa: N806
    hw = H * W
    fw, s = fw or F, s or n_cb
    out = []
    for g0 in range(0, n_cb, s):
        for pool in range(0, hw, R):
            pend = min(pool + R, hw)
            for f0 in range(0, F, fw):
                for cb in range(g0, min(g0 + s, n_cb)):
                    out.append([tuple((f * hw + p, cb, a) for p in range(q0, min(q0 + out_ways, pend)))
                                for f in range(f0, min(f0 + fw, F)) for q0 in range(pool, pend, out_ways)
                                for a in range(n_classes)])
    return out


def segment_step_counts(grid, n_cb: int, n_classes: int, R: int, fw: int | None = None,  # noqa: N803
                        s: int | None = None, out_ways: int = 1) -> np.ndarray:
    """int64 ``[segments]``: each segment's walk cycles, `segment_steps`' lengths, without the commands: frames x
    ``ceil(pool positions / out_ways)`` x classes (the cycle model's `ways_done` ``per_seg``)."""
    F, H, W = grid  # noqa: N806
    hw = H * W
    fw, s = fw or F, s or n_cb
    out = []
    for g0 in range(0, n_cb, s):
        for pool in range(0, hw, R):
            runs = -(-(min(pool + R, hw) - pool) // out_ways)
            for f0 in range(0, F, fw):
                out += [(min(f0 + fw, F) - f0) * runs * n_classes] * min(s, n_cb - g0)
    return np.asarray(out, dtype=np.int64)


def segment_base(cb: int, s: int, n_cb: int, chunks: int) -> int:
    """The walk's ordinal of column block ``cb``'s segment of chunk 0 (`segments`; ``s`` column blocks a group,
    ``chunks`` chunks of a pool's frames in all); the segment of chunk c is this + c k, k the group's column blocks."""
    g0 = cb // s * s
    return g0 * chunks + cb - g0


def token_chunks(grid, R: int, fw: int) -> list[int]:  # noqa: N803
    """Each token's chunk, as `sim.timing.compact.compact_tiles` numbers its band-tiles' chunks: pool (R positions)
    outer, ``fw`` frames a chunk: ``(p // R) ceil(F / fw) + f // fw`` for token ``f H W + p``."""
    F, H, W = grid  # noqa: N806
    nfc = -(-F // fw)
    return [(p // R) * nfc + f // fw for f in range(F) for p in range(H * W)]


def tile_segments(tiles, grid, R: int, n_cb: int, fw: int | None = None, s: int | None = None) -> list[int]:  # noqa: N803
    """Each band-tile's segment ordinal (`segments`) from its column block and its first token's chunk; ``tiles``
    ``[(cb, first token)]``."""
    F, H, W = grid  # noqa: N806
    fw, s = fw or F, s or n_cb
    nch = -(-F // fw) * -(-(H * W) // R)
    ch = token_chunks(grid, R, fw)
    return [segment_base(cb, s, n_cb, nch) + ch[t0] * min(s, n_cb - cb // s * s) for cb, t0 in tiles]


#: Segments whose row counts ``kaleido_dcore`` holds at once (`hw.delta_core.NB_BANKS`).
NB_BANKS = 8
#: Bits of one SRAM macro at most (`hw.sram.MACRO_MAX_BITS`, restated so that the cycle model needs no Amaranth;
#: tests/test_combine_timing.py checks `core_ways` equal to `hw.delta_combine.default_ways`).
MACRO_MAX_BITS = 1 << 20


def core_ways(cfg) -> int:
    """``kaleido_dcore``'s accumulate ways by default (`hw.delta_combine.default_ways`, docs/decisions.md D108), plain
    Python: the largest power of two W <= d whose D buffer, in words of C ``acc_bits`` split into W ways of
    ``2^k``-word macros (`hw.sram.split_banks`, the remainder below a macro dropped), holds at least ``array_rows``
    words; 1 where a buffer holds fewer than that (the core refuses such a config). A D buffer is a third of
    ``psum_sram_kib``, or with a difference-sum buffer a third of ``diff_sram_kib`` (n = 3, the most D buffers the
    default gives; the state buffer all of ``psum_sram_kib``; `hw.delta_combine.delta_combine_sizes`, D122)."""
    word = cfg.array_cols * cfg.acc_bits
    diff = getattr(cfg, "organisation", "delta") == "delta" and getattr(cfg, "diff_sram_kib", 0) > 0
    state = cfg.psum_sram_kib * 8192 // word // (1 if diff else 3)
    third = cfg.diff_sram_kib * 8192 // word // 3 if diff else state
    if min(state, third) < cfg.array_rows:
        return 1

    def depth(w: int) -> int:
        words = third // w
        bank = words if words * word <= MACRO_MAX_BITS else 1 << (max(1, MACRO_MAX_BITS // word).bit_length() - 1)
        return w * bank * (words // bank)

    w = 1 << (max(1, cfg.drain_rows_per_cycle).bit_length() - 1)
    while w > 1 and depth(w) < cfg.array_rows:
        w //= 2
    return w


def core_out_ways(cfg) -> int:
    """``kaleido_dcore``'s output lanes V by default (`hw.delta_combine.default_out_ways`, docs/decisions.md D112,
    D113), plain Python: `core_ways` W halved until it divides ``array_rows`` (a run's next x is the next pool's
    first); W on every shipped delta config."""
    v = core_ways(cfg)
    while v > 1 and cfg.array_rows % v:
        v //= 2
    return v


def core_d_buffers(cfg) -> int:
    """``kaleido_dcore``'s D buffers as the model times and charges them: ``cfg.dcore_d_buffers``, or where None the
    core's default (`hw.delta_combine.default_d_buffers`, docs/decisions.md D115), plain Python: 3 where the core
    has output lanes (the config's ``dcore_out_ways``, or where None `core_out_ways`, V > 1), else 2."""
    if getattr(cfg, "dcore_d_buffers", None) is not None:
        return cfg.dcore_d_buffers
    v = getattr(cfg, "dcore_out_ways", None)
    return 3 if (core_out_ways(cfg) if v is None else v) > 1 else 2


#: ``kaleido_dcore``'s row-FIFO bypass by default (`hw.delta_core.default_fifo_bypass`, docs/decisions.md D118).
FIFO_BYPASS = True


def core_fifo_bypass(cfg) -> bool:
    """Whether ``kaleido_dcore`` has its row-FIFO bypass as the model charges it: ``cfg.dcore_fifo_bypass``, or where
    None the core's default (`FIFO_BYPASS` on W > 1 ways, where it is built; docs/decisions.md D118)."""
    if getattr(cfg, "dcore_fifo_bypass", None) is not None:
        return bool(cfg.dcore_fifo_bypass) and core_ways(cfg) > 1
    return FIFO_BYPASS and core_ways(cfg) > 1


def core_seg_local(cfg) -> bool:
    """Whether ``kaleido_dcore_stage`` addresses its D buffers per segment as `hw.rtl` builds it and the model times
    it (docs/decisions.md D125, D132; `hw.delta_core.default_seg_local`, restated in plain Python): on a delta config
    with a weight stage and a difference-sum buffer (the staged core; the unstaged ``kaleido_dcore`` keeps the op's
    address, D132), `core_ways` W > 1 and ``array_rows`` a power of two (where the RTL builds it). The issue hold's
    bound is then the op's segment slots (`segment_slots`, D138; D132: the D buffers n), so no row waits for the
    segment-local rule."""
    staged = getattr(cfg, "organisation", "delta") == "delta" and bool(getattr(cfg, "diff_sram_kib", 0)) \
        and bool(getattr(cfg, "wstage_sram_kib", 0))
    r = cfg.array_rows
    return staged and core_ways(cfg) > 1 and r & (r - 1) == 0


def fifo_rows(band, last, rows, tile_cb, cfg, tile_vals=None) -> tuple[np.ndarray, ...]:
    """The drained rows in the row FIFO's order, ``(cycles, column blocks)`` int64 ``[rows]`` each: by the cycle
    they leave ``kaleido_daccel`` (`sim.timing.delta_accel.row_out_cycles`), a cycle's rows in port order. A
    band-tile's port (`hw.compact_array.band_geometry`): band b's ``b d_b + k`` with ``d_b = max(1, d / B)``
    ports per band taken round robin by the band's band-tiles (k its count there mod d_b); with ``B > d`` band b's
    ``b mod d``. ``tile_vals`` (optional): per band-tile a sequence of per-row values (its rows in drain order,
    e.g. `row_ways`' input): returned third, int64 ``[rows]`` in the FIFO's order."""
    from sim.timing.delta_accel import row_out_cycles

    B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    pb = max(1, d // B)
    count = np.zeros(B, dtype=np.int64)
    port = np.empty(len(band), dtype=np.int64)
    for t, b in enumerate(np.asarray(band, dtype=np.int64)):
        port[t] = b * pb + count[b] % pb if B <= d else b % d
        count[b] += 1
    outs = row_out_cycles(band, last, rows, cfg)
    cyc = np.concatenate(outs) if outs else np.zeros(0, dtype=np.int64)
    prt = np.concatenate([np.full(len(o), port[t]) for t, o in enumerate(outs)]) if outs else cyc
    cbs = np.concatenate([np.full(len(o), tile_cb[t]) for t, o in enumerate(outs)]) if outs else cyc
    order = np.lexsort((prt, cyc))
    if tile_vals is None:
        return cyc[order].astype(np.int64), cbs[order].astype(np.int64)
    vals = np.concatenate([np.asarray(tile_vals[t], dtype=np.int64)[:len(o)] for t, o in enumerate(outs)]) if outs \
        else cyc
    return cyc[order].astype(np.int64), cbs[order].astype(np.int64), vals[order].astype(np.int64)


def row_ways(tile_tokens, tile_class, M: int, ways: int) -> list[np.ndarray]:  # noqa: N803
    """Per band-tile, int64 ``[rows]``: each row's accumulate way (docs/decisions.md D107): ``(a M + t) mod W``
    for a row of token t in axis class a (the D buffer's word ``(a M + t) n_cb + cb`` is in way ``(a M + t) mod
    W``, at ``((a M + t) div W) n_cb + cb`` there: a (token, class)'s rows of every group and column block share a
    way, so a read-modify-write never meets another way's). ``tile_tokens``: per band-tile its row tokens (row
    order); ``tile_class``: its class; W a power of two."""
    return [(int(a) * M + np.asarray(t, dtype=np.int64)) % ways for t, a in zip(tile_tokens, tile_class, strict=True)]


def segment_slot(t, a, grid, R: int, fw: int):  # noqa: N803
    """The slot of (token ``t``, class ``a``) in its segment's D buffer (docs/decisions.md D125): with
    t = f H W + p (frame f), ``u = (a fw + f mod fw) R + t mod R``, ``0 <= u < A fw R`` for A classes; way
    ``u mod W``, word ``u div W``. D122's ``p - P R`` is replaced by ``t mod R``: a segment's positions are at most
    R consecutive ones of one frame, so their tokens' residues mod R are distinct (one slot each) and the RTL takes
    them as the token's low bits (R a power of two). ``t``, ``a``: ints or int64 arrays of one shape (returned so);
    grid ``(F, H, W)``; R the array's rows; ``fw`` the op's frames a chunk (``o_fw``)."""
    f = np.asarray(t, dtype=np.int64) // (grid[1] * grid[2])
    return (np.asarray(a, dtype=np.int64) * fw + f % fw) * R + np.asarray(t, dtype=np.int64) % R


def segment_slots(buffers: int, d_words: int, seg_words: int, cap: int = NB_BANKS) -> int:
    """The segment-slot ring's slots (docs/decisions.md D138): ``min(cap, n floor(d_words / seg_words))``, at least
    1. Segment j accumulates into D buffer j mod n at sub-slot ``(j div n) mod k``, ``k = ceil(slots / n)`` (at most
    ``floor(d_words / seg_words)``: the slots fit), base ``k' A fw R`` words; consecutive ``slots`` segments are in
    distinct slots, so a row of segment j may accumulate while ``j < walked + slots`` (and its buffer is not walked).
    ``buffers`` n the D buffers (`core_d_buffers`); ``d_words`` one buffer's words (`sim.timing.delta.
    diff_buffer_words`); ``seg_words`` one segment's (`sim.timing.delta.diff_need_words`, ``A fw R`` on W | R ways);
    ``cap`` the count banks (`NB_BANKS`: a segment in flight needs its own bank) or a smaller issue bound.

    Raises:
        ValueError: ``seg_words`` above ``d_words`` (the segment does not fit one buffer) or non-positive sizes."""
    if buffers < 1 or seg_words < 1 or cap < 1:
        raise ValueError(f"segment_slots: buffers = {buffers}, seg_words = {seg_words}, cap = {cap} must be >= 1")
    if seg_words > d_words:
        raise ValueError(f"a segment of {seg_words} D words does not fit a D buffer of {d_words}")
    return max(1, min(cap, buffers * (d_words // seg_words)))


def row_ways_local(tile_tokens, tile_class, grid, R: int, fw: int, ways: int) -> list[np.ndarray]:  # noqa: N803
    """`row_ways` for segment-local D addresses (docs/decisions.md D125): each row's way ``u mod W``, u its
    `segment_slot`. Same arguments as `row_ways` but the op's token count M, for which the grid, R and the op's
    frames a chunk ``fw``."""
    return [segment_slot(np.asarray(t, dtype=np.int64), int(a), grid, R, fw) % ways
            for t, a in zip(tile_tokens, tile_class, strict=True)]


def fifo_order_deadlocks(row_seg, buffers: int) -> bool:
    """Whether segment-local D buffers (docs/decisions.md D125) deadlock on rows in this FIFO order: some row of
    segment j comes after a row of segment ``j + buffers`` or later (that row waits at the head until j is walked,
    j waits for the row behind it). ``row_seg``: int64 ``[rows]`` each row's segment ordinal, in the FIFO's
    order."""
    r = np.asarray(row_seg, dtype=np.int64)
    return bool(r.size) and bool((np.maximum.accumulate(r) - r >= buffers).any())


_DEADLOCK = ("segment-local D buffers deadlock: a row waits for a walk that needs a row behind it (a row of "
             "segment j after one of j + buffers or later, or held in the array behind a full FIFO) or a descriptor "
             "counted in the walked segment's count bank (docs/decisions.md D125)")


class IssueFeed:
    """``kaleido_daccel`` with the issue gate (docs/decisions.md D126) for `core_schedule`'s ``gate``: a resumable
    `sim.timing.delta_accel.AccelRun` (built with ``gate=True``) and per band-tile (issue order) its segment ordinal
    ``seg`` and ``vals`` (its rows' values in drain order, e.g. their accumulate ways, `row_ways`). `take` commits the
    next band-tile's gather and returns its rows' cycles (counted from ``start``, `row_out_cycles`' rule) and drain
    port (`fifo_rows`' rule); `done` the controller's ``done`` once all are taken (`accel_cycles`' rule)."""

    def __init__(self, run, seg, vals, cfg):
        self.run, self.seg, self.vals, self.cfg = run, [int(x) for x in seg], vals, cfg
        self.T = run.T
        self.nrows = [int(x) for x in run.v]
        B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
        self.pb, self.count = max(1, d // B), [0] * B
        self.end: list[int] = []

    def take(self, g: int) -> tuple[np.ndarray, int]:
        """Commit the next band-tile's gather at cycle ``g`` (`AccelRun.take`, at least its `earliest`); returns its
        rows' out cycles (int64 ``[rows]``, counted from ``start``, `row_out_cycles`' rule) and its drain port
        (`fifo_rows`' rule)."""
        cfg, t = self.cfg, self.run.t
        B, d, C = cfg.compact_bands, cfg.drain_rows_per_cycle, cfg.array_cols  # noqa: N806
        b = self.run.take(g)
        port = b * self.pb + self.count[b] % self.pb if B <= d else b % d
        self.count[b] += 1
        q, v, lt = max(1, B // d), self.nrows[t], int(self.run.last[t])
        phase = b // d if B > d else 0
        end = lt + 1 + (phase - (lt + 1)) % q + (v - 1) * q
        self.end.append(end)
        return end - q * (v - 1 - np.arange(v, dtype=np.int64)) + C + 2, port

    def fresh(self, t: int) -> int:
        """The first cycle the next band-tile ``t`` (the next to take) is shown fresh to the gate."""
        self.run.earliest()
        return int(self.run.fresh[t])

    def finished(self) -> bool:
        """Whether every band-tile is taken."""
        return self.run.t == self.T

    def run_cycle(self, c: int, allowed) -> tuple[list, list, bool]:
        """The controller's cycle ``c``: ``(band-tiles taken, [(band-tile, its rows' cycles, port)] whose rows became
        known, whether the gate held a take)``; ``allowed(t)``: the gate's bound lets band-tile t go."""
        if self.run.t < self.T and self.run.earliest() <= c:
            t = self.run.t
            if not allowed(t):
                return [], [], True
            cyc, port = self.take(c)
            return [t], [(t, cyc, port)], False
        return [], [], False

    def done(self) -> int:
        """The controller's ``done`` (cycles from ``start``) once every band-tile is taken: its last row's drain read
        + C + 3 (`sim.timing.delta_accel.accel_cycles`' rule, D91), with the queues no earlier than their ``done`` + 2
        (`queue_done`); an empty op 1, or the queues' ``done`` + 2."""
        from sim.timing.delta_accel import queue_done

        queue = self.run.queue
        if not self.T:
            return 1 if queue is None else queue[2] + 2
        out = max(self.end) + self.cfg.array_cols + 3
        return out if queue is None else max(out, queue_done(self.run.gather, queue) + 2)


class StageFeed:
    """`IssueFeed` for the staged controller with the issue gate (``kaleido_daccel_stage`` with ``issue_gate``,
    docs/decisions.md D126): `sim.timing.delta_accel.stage_schedule`'s loop run one cycle at a time (its generator),
    the gate asked at each take; a band-tile's rows become known at its last slot. ``args``/``kw``: `stage_schedule`'s
    arguments; ``seg``, ``vals``, ``cfg`` as `IssueFeed`'s."""

    def __init__(self, args: tuple, kw: dict, seg, vals, cfg):
        from sim.timing.delta_accel import _stage_cycles

        self.seg, self.vals, self.cfg = [int(x) for x in seg], vals, cfg
        self.nrows = [int(x) for x in args[1]]
        self.T = len(self.nrows)
        self._allowed, self._blocked = None, False
        self.gen = _stage_cycles(*args, **kw, gate=self._gate)
        self.band, self.last, self.gather, self.c = None, None, None, -1
        self.pending: list[int] = []  # taken band-tiles whose last slot is not yet known
        B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
        self.pb, self.count, self.end, self.ntaken, self.over = max(1, d // B), [0] * B, {}, 0, False
        self.known = [False] * self.T

    def _gate(self, c: int, t: int) -> bool:
        if c < self.fresh(t):
            return False
        if self._allowed(t):
            return True
        self._blocked = True
        return False

    def fresh(self, t: int) -> int:
        """The first cycle band-tile ``t``'s descriptor is shown fresh to the gate: 1 for the first (the host list's
        read-ahead, D126), else its predecessor's gather + 2; ``1 << 40`` (a cycle no op reaches: not yet) while the
        predecessor is not gathered."""
        if t == 0:
            return 1
        g = -1 if self.gather is None else int(self.gather[t - 1])
        return g + 2 if g >= 0 else 1 << 40

    def finished(self) -> bool:
        """Whether the loop has ended and every taken band-tile's rows are known."""
        return self.over

    def run_cycle(self, c: int, allowed) -> tuple[list, list, bool]:
        """As `IssueFeed.run_cycle`, stepping `stage_schedule`'s loop one cycle; a band-tile's rows become known at
        its last slot, so they may come cycles after its take. Raises RuntimeError if the loop is not at cycle ``c``."""
        if self.over:
            return [], [], False
        self._allowed, self._blocked = allowed, False
        try:
            cc, self.band, self.last, self.gather = next(self.gen)
        except StopIteration as e:  # every last slot known: the loop ended after its last cycle
            self.over, r = True, e.value
            self.band, self.last, self.gather = list(r["band"]), list(r["last"]), list(r["gather"])
            cc = c
        if cc != c:
            raise RuntimeError(f"stage feed at cycle {cc}, the core's controller at {c}")
        taken = []
        while self.ntaken < self.T and self.gather[self.ntaken] >= 0:
            taken.append(self.ntaken)
            self.pending.append(self.ntaken)
            self.ntaken += 1
        rows, cfg = [], self.cfg
        B, d, C = cfg.compact_bands, cfg.drain_rows_per_cycle, cfg.array_cols  # noqa: N806
        for t in sorted(t for t in self.pending if self.last[t] >= 0):
            self.pending.remove(t)
            b, lt, v = int(self.band[t]), int(self.last[t]), self.nrows[t]
            port = b * self.pb + self.count[b] % self.pb if B <= d else b % d
            self.count[b] += 1
            q = max(1, B // d)
            phase = b // d if B > d else 0
            end = lt + 1 + (phase - (lt + 1)) % q + (v - 1) * q
            self.end[t] = end
            rows.append((t, end - q * (v - 1 - np.arange(v, dtype=np.int64)) + C + 2, port))
        if not self.over and self.ntaken == self.T and not self.pending:
            self.over = True
        return taken, rows, self._blocked

    def done(self) -> int:
        """As `IssueFeed.done` without queues (the staged controller takes the host's list): 1 for an empty op."""
        return (max(self.end.values()) + self.cfg.array_cols + 3) if self.end else 1


def core_schedule(row_cycles, accel_done: int, grid, n_cb: int, n_classes: int, R: int,  # noqa: N803, C901
                  seg: bool = False, row_seg=None, descs=None, fw: int | None = None, s: int | None = None,
                  ways: int = 1, row_way=None, out_ways: int = 1, buffers: int = 2, fifo: int | None = None,
                  hold: bool = False, row_tile=None, row_tie=None, banks: int = NB_BANKS, ports: int = 1,
                  local: bool = False, gate: IssueFeed | None = None, bound: int | None = None,
                  slots: int | None = None) -> dict:
    """The combine stage's timing (module docstring), cycle by cycle.

    Args:
        row_cycles: the cycle each drained row leaves ``kaleido_daccel``; accel_done: its ``done`` cycle; grid,
            n_cb, n_classes, R, fw, s: the walk's sizes and segments (`segments`).
        seg: the op issues segment by segment (``o_seg``): each segment is walked once whole; then ``row_seg``
            (int64 ``[rows]``, each row's segment ordinal, rows in the FIFO's order, `fifo_rows`) and ``descs``
            (``[(desc_valid cycle, segment ordinal, rows)]`` per band-tile) are needed. Without it the walk starts
            once the whole op is accumulated (the rows in any order).
        ways: accumulate ways W (docs/decisions.md D107; 1 is D95's one row a cycle); then ``row_way`` (int64
            ``[rows]``, each row's way, `row_ways`, in the same order as ``row_cycles``) is needed. A cycle pops the
            FIFO's longest run from its head of at most W rows, each written, none waiting for its D buffer (the
            head's rule, row by row) and in W distinct ways.
        out_ways: V, the output walk's tokens a cycle (`segment_steps`; docs/decisions.md D111, the model's rule,
            built opt-in in RTL: `hw.delta_core.DeltaCore`'s ``out_ways``, D112), a power of two <= ``ways``.
        buffers: D buffers (docs/decisions.md D111's what-if; the RTL has 2): segment k accumulates into buffer
            k mod ``buffers``, and a row waits at the FIFO's head while a segment of its residue is walked.
        fifo, ports, hold, banks, row_tile, row_tie: back-pressure into ``kaleido_daccel`` (docs/decisions.md
            D116). *Array hold*: the array (``kaleido_daccel`` with its array, one enable) runs a cycle only when the
            row FIFO has ``ports`` (d, the most rows that leave it a cycle) free entries at the cycle's start
            (``fifo`` entries less the rows written by then and not popped before; None: always); a held cycle
            moves every later event of the array (rows, descriptors, ``done``) a cycle later. *Issue hold* (with
            ``hold`` and ``seg``): band-tile n (``descs[n]``, issue order) issues at the first array cycle ``a >=
            its desc_valid + H`` at which its segment is fewer than ``banks`` (the segment count banks, `NB_BANKS`
            as built) past the walked one; each array cycle it cannot, H grows by one, so it and every later
            band-tile and their rows and ``done`` move a cycle later (rows already issued do not). Needs ``descs``
            and ``row_tile`` (int64 ``[rows]``: each row's band-tile, an index into ``descs``; its rows leave
            after its ``desc_valid``); the FIFO's order is then the rows' cycles after the moves, ties by
            ``row_tie`` (int64 ``[rows]``; default the given order: ports, as `fifo_rows`; `held_done` breaks them
            by band-tile, the cycle model's order). A descriptor the issue hold keeps counts as "a later segment's
            descriptor has come" for the walked segment.
        local: segment-local D addresses (docs/decisions.md D125; needs ``seg``): a buffer holds one segment, so a
            row of segment j waits at the FIFO's head (and ends a pop's run) until segment ``j - buffers`` is
            walked, ``j < walked + buffers``; refused (ValueError) where the FIFO's order would deadlock the RTL
            (`fifo_order_deadlocks`). ``slots`` (default ``buffers``): the segment-slot ring (docs/decisions.md
            D138, `segment_slots`): segment j in buffer j mod ``buffers`` at slot j mod ``slots``, so the wait is
            ``j < walked + slots`` and, as with the op's address, a row also waits while its buffer (residue) is
            walked or whole and about to be (a buffer's slots share its ports with the walk); with ``slots =
            buffers`` the latter never binds.
        gate, bound: the issue hold as built (docs/decisions.md D126; replaces ``hold``'s rigid move): ``gate`` an
            `IssueFeed`, the controller's schedule band-tile by band-tile; ``row_cycles``, ``accel_done``,
            ``row_seg``, ``descs``, ``row_way``, ``row_tile`` and ``row_tie`` are then ignored (rows numbered in issue
            order, drain order within a band-tile). At each cycle the controller runs, the next band-tile is taken
            at its `AccelRun.earliest` or later, once (with ``seg``) its segment is fewer than ``bound`` (default
            ``banks``) past the walked one; its descriptor is counted 2 cycles later, its rows leave as the feed
            says. While it is held (shown fresh, out of bound, no descriptor in the count stage) it stands for "a
            later segment's descriptor has come".
    Returns:
        ``{"acc": int64 [rows] accumulate-command cycles, "start": the first segment's walk start, "rows":
        {(token, cb): cycle of its Y row}, "done": cycle, "fifo_max": the most rows the FIFO holds,
        "overflow": a descriptor named a segment NB_BANKS or more past the walked one, "gated": cycles a row waited
        at the FIFO's head for its D buffer (its segment's parity walked), "ahead": the most segments a counted
        descriptor was past the walked one, "bypass": rows popped the cycle after their write (the earliest: a
        FIFO bypass could skip their write and read, docs/decisions.md D111), "held": H at the end (D116),
        "frozen": the cycles the array was held, "out":
        int64 [rows] the cycle each row leaves ``kaleido_daccel`` after the holds (the given order), "issue": int64
        [band-tiles] each descriptor's cycle after the holds, "accel_done": its ``done`` cycle after the holds}``.
    """
    feed = gate
    if feed is not None:  # D126: rows numbered in issue order; their cycles filled in as the band-tiles are taken
        starts_t = np.cumsum([0, *feed.nrows])
        row_cycles = np.zeros(int(starts_t[-1]), dtype=np.int64)
        row_seg = np.repeat(np.asarray(feed.seg, dtype=np.int64), feed.nrows)
        row_way = (np.concatenate([np.asarray(feed.vals[t], dtype=np.int64)[:feed.nrows[t]] for t in range(feed.T)])
                   if feed.T else np.zeros(0, dtype=np.int64))
        row_tile = np.repeat(np.arange(feed.T, dtype=np.int64), feed.nrows)
        row_tie, descs, accel_done, hold = np.zeros(len(row_cycles), dtype=np.int64), [], 0, False
        bound = banks if bound is None else bound
    c = np.asarray(row_cycles, dtype=np.int64)
    rw = np.zeros(len(c), dtype=np.int64) if ways == 1 or row_way is None else np.asarray(row_way, dtype=np.int64)
    if ways > 1 and row_way is None:
        raise ValueError(f"ways = {ways} needs row_way")
    if out_ways < 1 or out_ways & (out_ways - 1) or out_ways > ways:
        raise ValueError(f"out_ways = {out_ways}: a power of two, at most ways = {ways}")
    if buffers < 2:
        raise ValueError(f"buffers = {buffers}: at least 2")
    bp = fifo is not None or (hold and seg) or feed is not None
    if bp and (row_tile is None or descs is None):
        raise ValueError("back-pressure (fifo, hold) needs descs and row_tile")
    if fifo is not None and fifo < ports:
        raise ValueError(f"fifo = {fifo}: fewer entries than the {ports} rows a cycle can write")
    if local and not seg:
        raise ValueError("segment-local D addresses need the segment order (seg): D68's order walks the whole op")
    slots = buffers if slots is None else int(slots)
    if slots < 1:
        raise ValueError(f"slots = {slots}: at least 1")
    if not seg and feed is None:
        order = np.argsort(c, kind="stable")
        c, rw = c[order], rw[order]
        rsg = np.zeros(len(c), dtype=np.int64)
        rt = None if row_tile is None else np.asarray(row_tile, dtype=np.int64)[order]
        tie = None if row_tie is None else np.asarray(row_tie, dtype=np.int64)[order]
    else:
        rsg = np.asarray(row_seg, dtype=np.int64)
        rt = None if row_tile is None else np.asarray(row_tile, dtype=np.int64)
        tie = None if row_tie is None else np.asarray(row_tie, dtype=np.int64)
    segs = segment_steps(grid, n_cb, n_classes, R, fw, s, out_ways)
    dl = list(descs or [])
    di_order = sorted(range(len(dl)), key=lambda i: dl[i][0])  # issue order (stable)
    T = int(accel_done)  # noqa: N806
    n = len(c)
    acc = np.empty(n, dtype=np.int64)
    out = c.copy()  # each row's cycle out of kaleido_daccel after the holds (D116)
    issue = np.array([int(x[0]) for x in dl], dtype=np.int64) if feed is None else np.zeros(feed.T, dtype=np.int64)
    if feed is not None:
        fq, cy, heap, pdesc = [], [], [], []  # pdesc: taken descriptors (controller cycle of desc_valid, segment, rows)
        tie = np.zeros(n, dtype=np.int64)
    elif bp:  # each band-tile's rows, in the given order; they leave once it has issued (a heap of (cycle, row))
        of_tile = [[] for _ in dl]
        for r in range(n):
            of_tile[int(rt[r])].append(r)
        if any(c[r] <= dl[int(rt[r])][0] for r in range(n)):
            raise ValueError("a row leaves kaleido_daccel no later than its band-tile's desc_valid")
        fq: list[int] = []  # the FIFO's rows in the order they leave
        cy: list[int] = []  # ... and their cycles
        heap: list[tuple[int, int, int]] = []
    else:
        fq, cy = list(range(n)), out
        if local and fifo_order_deadlocks(rsg, slots):
            raise ValueError(_DEADLOCK)
    fmax, fz, stall = -1, False, 0
    NB = int(banks)  # noqa: N806
    exp, got = [0] * NB, [0] * NB
    hi, anyd, over = 0, False, False
    nw = rp = di = 0
    s1: list[int] = []  # the FIFO positions in each accumulate stage
    s2: list[int] = []
    sg, walking, waiting, wend, starts = 0, False, True, -1, []
    fifo_max = gated = ahead = 0
    ni, H = 0, 0  # band-tiles issued, array cycles the issue was held  # noqa: N806
    pend = None  # the segment of a descriptor the issue hold keeps, once at the count stage (all before counted)
    bseg, bsince = None, 0  # ... and since when
    dq: list[tuple[int, int, int]] = []  # issued descriptors (cycle, segment, rows), in issue order
    if not bp:
        dq = sorted((int(x[0]), int(x[1]), int(x[2])) for x in dl)
        ni = len(dl)
    frozen, ar, tdone, nl = 0, 1, None if bp else T, 0  # the array's own cycle ar, done after the moves
    k = 1  # cycle 0 is start's
    # D126: a co-simulation that never ends is a deadlock of the RTL (none is known: the bound keeps every row
    # poppable); refused rather than looped on
    limit = None if feed is None else 64 * (n + sum(len(x) for x in segs) + 16 * feed.T) + 10_000
    while True:
        gpend = False  # D126: the held next descriptor standing for a later segment's
        if feed is not None:
            if k > limit:
                raise RuntimeError(f"core_schedule(gate=...) did not finish in {limit} cycles: a deadlock")
            while nl < len(fq) and cy[nl] <= k - 1:
                nl += 1
            if seg and ni < feed.T and not pdesc and di == len(dq) and feed.fresh(ni) <= ar - 1 \
                    and feed.seg[ni] >= sg + bound:
                gpend = True
            if ni < feed.T or heap or tdone is None:
                if fifo is not None and nl - rp + ports > fifo:
                    frozen += 1
                    fz = True
                else:  # the controller runs its cycle ar - 1 (counted from the cycle after start)
                    lim = sg + bound
                    taken, known, blocked = feed.run_cycle(ar - 1, lambda t, lim=lim: not seg or feed.seg[t] < lim)
                    for t in taken:
                        pdesc.append((ar + 1, feed.seg[t], feed.nrows[t], t))
                        ni += 1
                    for t, cyc_r, port in known:
                        for j, cr in enumerate(cyc_r):
                            r = int(starts_t[t]) + j
                            c[r], tie[r] = int(cr), port
                            heapq.heappush(heap, (int(cr), port, r))
                    H += int(blocked)  # noqa: N806  (cycles a take was held by the gate)
                    while pdesc and pdesc[0][0] <= ar:
                        _, dsg, nr, t = pdesc.pop(0)
                        issue[t] = k
                        dq.append((k, dsg, nr))
                    while heap and heap[0][0] <= ar:  # rows leaving this cycle
                        cyc, _, r = heapq.heappop(heap)
                        out[r] = cyc + k - ar
                        fq.append(r)
                        if local:
                            fmax = max(fmax, int(rsg[r]))
                            if fmax - rsg[r] >= slots:
                                raise ValueError(_DEADLOCK)
                        cy.append(int(out[r]))
                    if ni == feed.T and tdone is None and feed.finished() and feed.done() <= ar:
                        tdone = feed.done() + k - ar
                    ar += 1
        elif bp:
            while nl < len(fq) and cy[nl] <= k - 1:
                nl += 1
            if ni < len(dl) or heap or tdone is None:  # the array still has events: does it run this cycle?
                if fifo is not None and nl - rp + ports > fifo:
                    frozen += 1
                    fz = True
                else:
                    while ni < len(dl) and int(dl[di_order[ni]][0]) + H <= ar:
                        t = di_order[ni]
                        dsg, nr = int(dl[t][1]), int(dl[t][2])
                        if hold and seg and dsg >= sg + NB:  # too far past the walk: held with every later one
                            if bseg is None:
                                bseg, bsince = dsg, k
                            H += 1  # noqa: N806
                            break
                        issue[t] = int(dl[t][0]) + H + k - ar
                        bseg = None
                        dq.append((int(issue[t]), dsg, nr))
                        for r in of_tile[t]:
                            heapq.heappush(heap, (int(c[r]) + H, r if tie is None else int(tie[r]), r))
                        ni += 1
                    while heap and heap[0][0] <= ar:  # rows leaving this cycle
                        cyc, _, r = heapq.heappop(heap)
                        out[r] = cyc + k - ar
                        fq.append(r)
                        if local:
                            fmax = max(fmax, int(rsg[r]))
                            if fmax - rsg[r] >= slots:
                                raise ValueError(_DEADLOCK)
                        cy.append(int(out[r]))
                    if ni == len(dl) and tdone is None and T + H <= ar:
                        tdone = T + H + k - ar
                    ar += 1
        while nw < len(fq) and cy[nw] + 2 <= k:
            nw += 1
        wr = nl if bp else int(np.searchsorted(c, k - 1, side="right")) if n else 0  # written by k
        held = wr - rp  # written by k, less popped before
        fifo_max = max(fifo_max, held)
        bank = sg % NB
        if seg:
            whole = ((tdone is not None and tdone <= k) or (anyd and hi > sg) or (pend is not None and pend > sg)
                     or gpend) and exp[bank] == got[bank]
        else:
            whole = tdone is not None and tdone <= k and nw == rp and not s1 and not s2 and wr == nw
        par = sg % buffers
        gate = walking or (waiting and whole)
        # a row waits for its D buffer: D125's segment-local rule (its buffer holds an earlier segment until that
        # one is walked), else a segment of its residue walked or whole and about to be
        lim = sg + slots  # D125, D138 (local): a row waits until its slot's earlier segment is walked
        blocked = rp < nw and ((local and rsg[fq[rp]] >= lim) or (rsg[fq[rp]] % buffers == par and gate))
        pops = []
        if rp < nw and not blocked:
            used = set()
            for r in range(rp, min(nw, rp + ways)):
                if ((local and rsg[fq[r]] >= lim) or (rsg[fq[r]] % buffers == par and gate)) or rw[fq[r]] in used:
                    break
                used.add(rw[fq[r]])
                pops.append(r)
        gated += bool(blocked)
        # D125: the array held by a full FIFO whose head waits for a walk that needs rows still in the array: no
        # state changes but descriptors counted and the issue hold's pending segment (a cycle each), so a few
        # cycles of it are a deadlock of the RTL
        if local and fz and blocked and not walking and not s1 and not s2 and not (waiting and whole):
            stall += 1
            if stall > 4:
                raise ValueError(_DEADLOCK)
        else:
            stall = 0
        fz = False
        go = (waiting and whole and not any(rsg[fq[r]] % buffers == par for r in s1)
              and not any(rsg[fq[r]] % buffers == par for r in s2))
        # end of cycle k: the registers
        for r in s2:
            acc[fq[r]] = k
            b2 = rsg[fq[r]] % NB
            if not (go and b2 == bank):
                got[b2] += 1
        while di < len(dq) and dq[di][0] + 1 <= k:  # a descriptor is counted the cycle after its desc_valid
            _, dsg, nr = dq[di]
            if not (go and dsg % NB == bank):
                exp[dsg % NB] += nr
            anyd, hi = True, max(hi, dsg)
            ahead = max(ahead, dsg - sg)
            over = over or (seg and dsg >= sg + NB)
            if local and dsg >= sg + NB:  # its count bank is the walked segment's: that one never gets whole
                raise ValueError(_DEADLOCK)
            di += 1
        if go:
            exp[bank] = got[bank] = 0
        pend = bseg if bseg is not None and bsince + 1 <= k and di == ni else None
        s2, s1 = s1, pops
        rp += len(pops)
        if walking and k == wend:  # the segment's last command read
            if sg == len(segs) - 1:
                break
            sg += 1
            if seg:  # wait for the next segment to be whole
                walking, waiting = False, True
            else:  # the op is all accumulated: the next segment's commands follow at once
                wend = k + len(segs[sg])
                starts.append(k)
        elif go:
            walking, waiting, wend = True, False, k + len(segs[sg])
            starts.append(k)
        k += 1
    rows = {}
    for start, steps in zip(starts, segs, strict=True):
        for j, step in enumerate(steps):
            for t, b, a in step:
                if a == n_classes - 1:
                    rows[(t, b)] = start + 4 + j
    return {"acc": acc, "start": starts[0], "rows": rows, "done": starts[-1] + len(segs[-1]) + 4,
            "fifo_max": fifo_max, "overflow": over, "gated": gated, "ahead": ahead,
            "bypass": int((acc - 4 == out).sum()) if n else 0, "held": H, "frozen": frozen, "out": out,
            "issue": issue, "accel_done": tdone}


def walk_done(row_cycles, accel_done: int, n_commands: int) -> int:
    """`core_schedule`'s ``done`` in closed form when the walk waits for the whole op (``seg`` False), without the
    command list (the cycle model's ``combine_timing = "rtl"``, docs/decisions.md D104; tests check it equal to
    `core_schedule`).

    Args:
        row_cycles: int64 ``[rows]``, the cycle each drained row leaves ``kaleido_daccel`` (any order); accel_done:
            its ``done`` cycle; n_commands: the output walk's commands (tokens x column blocks x axis classes).

    With the rows sorted, ``c_0 <= ... <= c_{n-1}``, the pop rule ``j_k = max(c_k + 2, j_{k-1} + 1)`` gives
    ``j_{n-1} = max_k (c_k + 2 + n - 1 - k)``; the walk starts at ``x = max(accel_done, j_{n-1} + 3)``, its
    segments back to back, and ``done`` is ``x + n_commands + 4``.
    """
    c = np.sort(np.asarray(row_cycles, dtype=np.int64))
    n = len(c)
    x = int(accel_done) if not n else max(int(accel_done), int((c + (n + 1) - np.arange(n)).max()) + 3)
    return x + int(n_commands) + 4


def blocks_done(row_cycles, row_seg, accel_done: int, per_seg, desc_first, desc_last) -> int:
    """`core_schedule`'s ``done`` for an op issued segment by segment (``seg``) in closed form, where no row waits
    at the FIFO's head for its D buffer (``gated`` 0: tests check it equal to `core_schedule` then; a row that
    waits makes the op later than this).

    Args:
        row_cycles, row_seg: int64 ``[rows]`` in the FIFO's order (`fifo_rows`): the cycle each row leaves
            ``kaleido_daccel`` and its segment's ordinal. accel_done: the controller's ``done``. per_seg: commands
            of each segment (int64 ``[segments]``, or one int for all). desc_first, desc_last: int64 ``[segments]``,
            the ``desc_valid`` cycle of each segment's first and last descriptor (-1: a segment without band-tiles).

    Row k pops at ``j_k = max(c_k + 2, j_{k-1} + 1)`` and is counted at ``j_k + 3``; a descriptor is counted 2
    cycles after its ``desc_valid``; segment b is whole from ``max(its last row counted, its last descriptor + 2,
    min(a later segment's first descriptor + 2, accel_done))`` and goes at ``g_b = max(whole_b, g_{b-1} + L_{b-1}
    + 1)``; ``done`` is ``g_last + L_last + 4``.
    """
    c = np.asarray(row_cycles, dtype=np.int64)
    blk = np.asarray(row_seg, dtype=np.int64)
    first, last = np.asarray(desc_first, dtype=np.int64), np.asarray(desc_last, dtype=np.int64)
    nb = len(first)
    L = np.broadcast_to(np.asarray(per_seg, dtype=np.int64), (nb,))  # noqa: N806
    k = np.arange(len(c), dtype=np.int64)
    counted = np.maximum.accumulate(c - k) + k + 5 if len(c) else c  # j_k + 3
    row_done = np.full(nb, -1, dtype=np.int64)
    np.maximum.at(row_done, blk, counted)
    nxt, ahead = np.empty(nb, dtype=np.int64), int(accel_done)
    for b in range(nb - 1, -1, -1):
        nxt[b] = ahead
        if first[b] >= 0:
            ahead = min(int(accel_done), int(first[b]) + 2)
    g, free = 0, 1
    for b in range(nb):
        g = max(int(row_done[b]), int(last[b]) + 2 if last[b] >= 0 else 0, min(int(nxt[b]), int(accel_done)), free)
        free = g + int(L[b]) + 1
    return g + int(L[-1]) + 4


def ways_done(row_cycles, row_seg, row_way, accel_done: int, seg: bool, per_seg, descs, ways: int,
              banks: int | None = None, buffers: int = 2, detail: bool = False, local: bool = False,
              slots: int | None = None):
    """`core_schedule`'s ``done`` on W accumulate ways (docs/decisions.md D107, D108), without its per-row and per-Y
    outputs: the same cycle-by-cycle rule (the pop's run of at most W written rows in distinct ways under the head's
    gate, the segment counts, the walk segment by segment once whole or, without ``seg``, after the whole op) as a
    numba loop, for the cycle model's ``combine_timing = "rtl"`` on whole ops (no closed form: way conflicts and the
    gate depend on the rows' order; tests check it equal to `core_schedule`).

    Args:
        row_cycles, row_seg, row_way: int64 ``[rows]`` in the FIFO's order (`fifo_rows`; without ``seg`` any order,
            sorted here, ``row_seg`` ignored): the cycle each row leaves ``kaleido_daccel``, its segment's ordinal,
            its way (`row_ways`). accel_done: the controller's ``done``. seg: the op issues segment by segment.
        per_seg: walk cycles of each segment in walk order (int64 ``[segments]``; `segments`' lengths, or with
            output ways `segment_step_counts`', docs/decisions.md D111).
        descs: ``(desc_valid cycles, segment ordinals, rows)``, int64 ``[band-tiles]`` each (with ``seg``).
        ways: W, a power of two (1: D95's one row a cycle).
        banks: segment count banks (default `NB_BANKS`, the RTL's: a descriptor `NB_BANKS` or more segments ahead
            of the walk then shares its bank, where the RTL raises ``overflow``; the cycle model passes the op's
            segments, so that no two share one: what the walk would take with the banks it needs, as it takes the
            row FIFO as deep as the op needs).
        buffers: D buffers (`core_schedule`'s; 2 as built).
        detail: return ``{"done", "ahead", "bypass"}`` (`core_schedule`'s) instead of ``done``.
        local: segment-local D addresses (`core_schedule`'s ``local``, docs/decisions.md D125; needs ``seg``);
            slots: its segment slots (`core_schedule`'s, D138; default ``buffers``).
    """
    c = np.asarray(row_cycles, dtype=np.int64)
    rw = np.asarray(row_way) if row_way is not None else np.zeros(len(c), dtype=np.int8)  # its dtype kept (int8)
    if seg:
        rsg = np.asarray(row_seg, dtype=np.int64)
    else:
        order = np.argsort(c, kind="stable")
        c, rw, rsg = c[order], rw[order], np.zeros(len(c), dtype=np.int64)
    if local and not seg:
        raise ValueError("segment-local D addresses need the segment order (seg): D68's order walks the whole op")
    slots = int(buffers if slots is None else slots)
    if local and fifo_order_deadlocks(rsg, slots):
        raise ValueError(_DEADLOCK)
    dc, ds, dr = (np.asarray(x, dtype=np.int64) for x in descs) if descs is not None else (np.zeros(0, np.int64),) * 3
    o = np.argsort(dc, kind="stable")
    done, ahead, byp = _ways_done(c, rsg, rw, int(accel_done), bool(seg), np.asarray(per_seg, dtype=np.int64), dc[o],
                                  ds[o], dr[o], int(ways), int(banks or NB_BANKS), int(buffers), bool(local), slots)
    if done < 0:
        raise ValueError(_DEADLOCK)
    return {"done": int(done), "ahead": int(ahead), "bypass": int(byp)} if detail else int(done)


@numba.njit(cache=True)
def _ways_done(c, rsg, rw, T, seg, seg_len, dcyc, dseg, drows, ways, nbanks, nbuf, local, slots):  # noqa: N803, C901
    """`ways_done`'s loop: `core_schedule`'s, state for state (its ``s1`` / ``s2`` stages as runs of the FIFO)."""
    n = c.shape[0]
    nd = dcyc.shape[0]
    nseg = seg_len.shape[0]
    exp = np.zeros(nbanks, dtype=np.int64)
    got = np.zeros(nbanks, dtype=np.int64)
    used = np.empty(ways, dtype=rw.dtype)
    hi, anyd = 0, False
    nw = rp = di = 0
    s1a = s1n = s2a = s2n = 0  # each stage's rows: FIFO indices [a, a + n)
    sg, walking, waiting, wend, start = 0, False, True, -1, -1
    ahead = byp = 0
    k = 1
    while True:
        while nw < n and c[nw] + 2 <= k:
            nw += 1
        bank = sg % nbanks
        if seg:
            whole = (T <= k or (anyd and hi > sg)) and exp[bank] == got[bank]
        else:
            fresh = nw < n and c[nw] <= k - 1
            whole = T <= k and nw == rp and s1n == 0 and s2n == 0 and not fresh
        par = sg % nbuf
        gate = walking or (waiting and whole)
        lim = sg + slots  # D125, D138 (local): a row waits until its slot's earlier segment is walked
        blocked = rp < nw and ((local and rsg[rp] >= lim) or (rsg[rp] % nbuf == par and gate))
        npop = 0
        if rp < nw and not blocked:
            r = rp
            while r < nw and r < rp + ways:
                if (local and rsg[r] >= lim) or (rsg[r] % nbuf == par and gate):
                    break
                dup = False
                for u in range(npop):
                    if used[u] == rw[r]:
                        dup = True
                if dup:
                    break
                used[npop] = rw[r]
                if c[r] + 2 == k:
                    byp += 1
                npop += 1
                r += 1
        go = waiting and whole
        if go:
            for r in range(s1a, s1a + s1n):
                if rsg[r] % nbuf == par:
                    go = False
            for r in range(s2a, s2a + s2n):
                if rsg[r] % nbuf == par:
                    go = False
        for r in range(s2a, s2a + s2n):
            b2 = rsg[r] % nbanks
            if not (go and b2 == bank):
                got[b2] += 1
        while di < nd and dcyc[di] + 1 <= k:
            b2 = dseg[di] % nbanks
            if not (go and b2 == bank):
                exp[b2] += drows[di]
            anyd = True
            hi = max(hi, dseg[di])
            ahead = max(ahead, dseg[di] - sg)
            if local and dseg[di] >= sg + nbanks:  # D125: shares the walked segment's count bank
                return -1, 0, 0
            di += 1
        if go:
            exp[bank] = 0
            got[bank] = 0
        s2a, s2n = s1a, s1n
        s1a, s1n = rp, npop
        rp += npop
        if walking and k == wend:
            if sg == nseg - 1:
                break
            sg += 1
            if seg:
                walking, waiting = False, True
            else:
                wend = k + seg_len[sg]
                start = k
        elif go:
            walking, waiting, wend = True, False, k + seg_len[sg]
            start = k
        k += 1
    return start + seg_len[nseg - 1] + 4, ahead, byp


def held_done(row_cycles, row_seg, row_way, accel_done: int, seg: bool, per_seg, descs, ways: int,
              fifo: int | None, hold: bool, buffers: int = 2, detail: bool = False, banks: int = NB_BANKS,
              ports: int = 1, local: bool = False, slots: int | None = None):
    """`core_schedule`'s ``done`` with back-pressure into ``kaleido_daccel`` (``fifo``: the array hold, ``hold``: the
    issue hold; docs/decisions.md D116) on W accumulate ways, as a numba loop: `ways_done` for the held array (the
    cycle model's ``combine_timing = "rtl"``; tests check it equal to `core_schedule`).

    Args:
        row_cycles, row_seg, row_way: ``[rows]`` *band-tile by band-tile* in issue order (each band-tile's rows in
            drain order, ``descs``' row counts each): the cycle each row leaves the unheld array (after its
            band-tile's ``desc_valid``), its segment's ordinal (ignored without ``seg``), its way. The FIFO's
            order is the rows' cycles after the holds, ties in this order (the cycle model's: a cycle's rows in
            band-tile order).
        accel_done: the unheld controller's ``done``. seg, per_seg, ways, buffers: `ways_done`'s.
        descs: ``(desc_valid cycles, segment ordinals, rows)``, int64 ``[band-tiles]`` in issue order
            (non-decreasing cycles), with or without ``seg``.
        fifo, ports, hold, banks: `core_schedule`'s back-pressure: the row FIFO's entries (None: the array never
            held) and the most rows a cycle leaves the array (d); the issue hold (with ``seg``) on ``banks``
            segment count banks (`NB_BANKS` as built).
        detail: ``{"done", "ahead", "bypass", "held", "fifo_max", "frozen"}`` instead of ``done``.
        local: segment-local D addresses (`core_schedule`'s ``local``, docs/decisions.md D125; needs ``seg``): a
            FIFO order that would deadlock the RTL raises ValueError as it forms; slots: its segment slots
            (`core_schedule`'s, docs/decisions.md D138; default ``buffers``).
    """
    c = np.asarray(row_cycles, dtype=np.int64)
    n = len(c)
    rw = np.asarray(row_way) if row_way is not None else np.zeros(n, dtype=np.int8)
    rsg = np.asarray(row_seg, dtype=np.int64) if seg else np.zeros(n, dtype=np.int64)
    dc, ds, dr = (np.asarray(x, dtype=np.int64) for x in descs)
    if int(dr.sum()) != n:
        raise ValueError(f"the descriptors list {int(dr.sum())} rows, {n} given")
    if len(dc) > 1 and bool((np.diff(dc) < 0).any()):
        raise ValueError("the descriptors' cycles must not decrease (issue order)")
    if fifo is not None and fifo < ports:
        raise ValueError(f"fifo = {fifo}: fewer entries than the {ports} rows a cycle can write")
    off = np.zeros(len(dr) + 1, dtype=np.int64)
    np.cumsum(dr, out=off[1:])
    cap = 1 << max(1, (max(64, 0 if fifo is None else int(fifo)) + 2 * int(ways) + int(ports)).bit_length())
    if local and not seg:
        raise ValueError("segment-local D addresses need the segment order (seg): D68's order walks the whole op")
    out = _held_done(c, rsg, rw, int(accel_done), bool(seg), np.asarray(per_seg, dtype=np.int64), dc, ds, dr, off,
                     int(ways), int(buffers), -1 if fifo is None else int(fifo), int(ports), bool(hold and seg),
                     cap, int(banks), bool(local), int(buffers if slots is None else slots))
    if out[0] < 0:
        raise ValueError(_DEADLOCK)
    keys = ("done", "ahead", "bypass", "held", "fifo_max", "frozen")
    return {kk: int(v) for kk, v in zip(keys, out, strict=True)} if detail else int(out[0])


@numba.njit(cache=True)
def _ring_grow(fq, fc, lo, hi, cap):
    """The FIFO ring's positions ``[lo, hi)`` in a ring of twice ``cap``."""
    nq = np.empty(2 * cap, dtype=np.int64)
    nc = np.empty(2 * cap, dtype=np.int64)
    for p in range(lo, hi):
        nq[p & (2 * cap - 1)] = fq[p & (cap - 1)]
        nc[p & (2 * cap - 1)] = fc[p & (cap - 1)]
    return nq, nc


@numba.njit(cache=True)
def _heap_push(h, m, x):
    """Push ``x`` on the binary min-heap ``h[:m]``; returns the new size."""
    i = m
    h[i] = x
    while i > 0:
        p = (i - 1) >> 1
        if h[p] <= h[i]:
            break
        h[p], h[i] = h[i], h[p]
        i = p
    return m + 1


@numba.njit(cache=True)
def _heap_pop(h, m):
    """Pop the least of ``h[:m]`` (returned first) and the new size."""
    top = h[0]
    m -= 1
    h[0] = h[m]
    i = 0
    while True:
        a, b, j = 2 * i + 1, 2 * i + 2, i
        if a < m and h[a] < h[j]:
            j = a
        if b < m and h[b] < h[j]:
            j = b
        if j == i:
            break
        h[i], h[j] = h[j], h[i]
        i = j
    return top, m


@numba.njit(cache=True)
def _held_done(c, rsg, rw, T, seg, seg_len, dcyc, dseg, drows, off, ways, nbuf, fifo, ports, hold, cap, nb, local,
               slots):  # noqa: N803, C901, E501
    """`held_done`'s loop: `core_schedule`'s with ``fifo`` / ``hold``, state for state. The FIFO is a ring of
    ``cap`` positions (row index and cycle, grown when full), the rows issued and not yet left a heap keyed
    ``cycle << 32 | row``."""
    nt = dcyc.shape[0]
    nseg = seg_len.shape[0]
    exp = np.zeros(nb, dtype=np.int64)
    got = np.zeros(nb, dtype=np.int64)
    used = np.empty(ways, dtype=rw.dtype)
    heap = np.empty(1024, dtype=np.int64)  # grown as needed
    hm = 0
    fq = np.empty(cap, dtype=np.int64)  # ring: FIFO position p at p & (cap - 1)
    fc = np.empty(cap, dtype=np.int64)
    msk = cap - 1
    nf = 0  # FIFO positions written (rows that left by k - 1)
    dq = np.empty(nt, dtype=np.int64)  # issued band-tiles in order, their cycle after the holds
    hi, anyd = 0, False
    nw = rp = di = 0
    s1a = s1n = s2a = s2n = 0
    sg, walking, waiting, wend, start = 0, False, True, -1, -1
    ahead = byp = fifo_max = 0
    ni = 0
    H = 0  # noqa: N806
    pend = -1
    bseg, bsince = -1, 0
    frozen, ar, nl = 0, 1, 0
    tk = -1  # done after the moves, once known
    fmax, fz, stall = -1, False, 0
    k = 1
    while True:
        while nl < nf and fc[nl & msk] <= k - 1:
            nl += 1
        if ni < nt or hm > 0 or tk < 0:
            if fifo >= 0 and nl - rp + ports > fifo:
                frozen += 1
                fz = True
            else:
                while ni < nt and dcyc[ni] + H <= ar:
                    if hold and dseg[ni] >= sg + nb:
                        if bseg < 0:
                            bseg, bsince = dseg[ni], k
                        H += 1  # noqa: N806
                        break
                    dq[ni] = dcyc[ni] + H + k - ar
                    bseg = -1
                    if hm + off[ni + 1] - off[ni] > heap.shape[0]:
                        grown = np.empty(2 * (hm + off[ni + 1] - off[ni]), dtype=np.int64)
                        grown[:hm] = heap[:hm]
                        heap = grown
                    for r in range(off[ni], off[ni + 1]):
                        hm = _heap_push(heap, hm, ((c[r] + H) << 32) | r)
                    ni += 1
                while hm > 0 and (heap[0] >> 32) <= ar:
                    x, hm = _heap_pop(heap, hm)
                    if nf - min(s2a, rp) >= cap:  # the ring is full: twice its size, positions kept
                        fq, fc = _ring_grow(fq, fc, min(s2a, rp), nf, cap)
                        cap *= 2
                        msk = cap - 1
                    fq[nf & msk] = x & 0xFFFFFFFF
                    fc[nf & msk] = (x >> 32) + k - ar
                    nf += 1
                    if local:  # D125: a row of segment j after one of j + nbuf or later deadlocks the RTL
                        fmax = max(fmax, rsg[x & 0xFFFFFFFF])
                        if fmax - rsg[x & 0xFFFFFFFF] >= slots:
                            return -1, 0, 0, 0, 0, 0
                if ni == nt and tk < 0 and T + H <= ar:
                    tk = T + H + k - ar
                ar += 1
        tin = tk >= 0
        while nw < nf and fc[nw & msk] + 2 <= k:
            nw += 1
        fifo_max = max(fifo_max, nl - rp)
        bank = sg % nb
        if seg:
            whole = ((tin and tk <= k) or (anyd and hi > sg) or (pend >= 0 and pend > sg)) \
                and exp[bank] == got[bank]
        else:
            whole = tin and tk <= k and nw == rp and s1n == 0 and s2n == 0 and nl == nw
        par = sg % nbuf
        gate = walking or (waiting and whole)
        lim = sg + slots  # D125, D138 (local): a row waits until its slot's earlier segment is walked
        q0 = fq[rp & msk]
        blocked = rp < nw and ((local and rsg[q0] >= lim) or (rsg[q0] % nbuf == par and gate))
        npop = 0
        if rp < nw and not blocked:
            r = rp
            while r < nw and r < rp + ways:
                q = fq[r & msk]
                if (local and rsg[q] >= lim) or (rsg[q] % nbuf == par and gate):
                    break
                dup = False
                for u in range(npop):
                    if used[u] == rw[q]:
                        dup = True
                if dup:
                    break
                used[npop] = rw[q]
                if fc[r & msk] + 2 == k:
                    byp += 1
                npop += 1
                r += 1
        if local and fz and blocked and not walking and s1n == 0 and s2n == 0 and not (waiting and whole):
            stall += 1  # D125: `core_schedule`'s deadlock under the array hold
            if stall > 4:
                return -1, 0, 0, 0, 0, 0
        else:
            stall = 0
        fz = False
        go = waiting and whole
        if go:
            for r in range(s1a, s1a + s1n):
                if rsg[fq[r & msk]] % nbuf == par:
                    go = False
            for r in range(s2a, s2a + s2n):
                if rsg[fq[r & msk]] % nbuf == par:
                    go = False
        for r in range(s2a, s2a + s2n):
            b2 = rsg[fq[r & msk]] % nb
            if not (go and b2 == bank):
                got[b2] += 1
        while di < ni and dq[di] + 1 <= k:
            b2 = dseg[di] % nb
            if not (go and b2 == bank):
                exp[b2] += drows[di]
            anyd = True
            hi = max(hi, dseg[di])
            ahead = max(ahead, dseg[di] - sg)
            if local and dseg[di] >= sg + nb:  # D125: shares the walked segment's count bank
                return -1, 0, 0, 0, 0, 0
            di += 1
        if go:
            exp[bank] = 0
            got[bank] = 0
        pend = bseg if bseg >= 0 and bsince + 1 <= k and di == ni else -1
        s2a, s2n = s1a, s1n
        s1a, s1n = rp, npop
        rp += npop
        if walking and k == wend:
            if sg == nseg - 1:
                break
            sg += 1
            if seg:
                walking, waiting = False, True
            else:
                wend = k + seg_len[sg]
                start = k
        elif go:
            walking, waiting, wend = True, False, k + seg_len[sg]
            start = k
        k += 1
    return start + seg_len[nseg - 1] + 4, ahead, byp, H, fifo_max, frozen


def stage_core(s_seq, rows, widths, rounds, paired, seg, sbuf, fcount, saddr, cfg, entries: int, lanes: int,
               tile_seg, row_way, per_seg, ordered: bool, ways: int, fifo: int | None, bound: int | None,
               buffers: int = 2, banks: int = NB_BANKS, local: bool = False, slots: int | None = None,
               ring: int = 0) -> dict:
    """``kaleido_dcore_stage`` with the issue hold (docs/decisions.md D126, D129): the staged controller
    (`sim.timing.delta_accel.stage_run`'s loop, ``kaleido_daccel_stage_gate``) and the core (`held_done`'s loop)
    stepped together in one numba pass, each take of the gather asked of the gate on the core's walked segment of that
    cycle; equal key for key to `core_schedule` with ``gate=StageFeed`` (tests/test_stage_core.py).

    Args:
        s_seq ... lanes: `sim.timing.delta_accel.stage_run`'s (int ``[T]`` per band-tile in issue order; entries S,
            lanes P); its rules unchanged but the take: band-tile t is taken only once it is shown fresh (cycle >= 1
            for t = 0, else its predecessor's gather + 2: the read-ahead's register) and, with ``ordered``, its
            segment ordinal ``tile_seg[t]`` is fewer than ``bound`` (default ``banks``) past the walked one.
        tile_seg: int ``[T]`` each band-tile's segment ordinal (the walk's, `_dcore_segments`); row_way: int
            ``[rows]`` each row's accumulate way, band-tile by band-tile in issue order (drain order within one);
            per_seg: int ``[segments]`` each segment's walk cycles; ordered: the op issues segment by segment
            (``o_seg``; else the gate only waits for freshness and the walk for the whole op).
        ways, buffers, banks: `held_done`'s; fifo: the row FIFO's entries (None: the array never held), d rows a
            cycle (``cfg.drain_rows_per_cycle``) leave the array.
        local: segment-local D addresses (`core_schedule`'s ``local``, docs/decisions.md D125, D132; needs
            ``ordered``): a row of segment j waits at the FIFO's head (and ends a pop's run) until ``j < walked +
            buffers``; the three deadlocks `core_schedule` refuses are refused here (ValueError). With ``bound`` at
            most ``buffers`` (``kaleido_dcore_stage`` as `hw.rtl` built it in D132) no row ever waits for this rule.
            slots: the segment-slot ring (`core_schedule`'s, docs/decisions.md D138; default ``buffers``): the wait
            is ``j < walked + slots``, and a row also waits while its buffer is walked or about to be;
            ``kaleido_dcore_stage`` takes ``bound = slots`` (`segment_slots`).
        ring: the descriptor ring's entries (`sim.timing.delta_accel.stage_schedule`'s, docs/decisions.md D134; 0:
            none): a take also waits for band-tile t - ring's last row to have left the controller's drain port.

    Returns `stage_run`'s dict (the gated controller's own cycles) and the core's ``"done"``, ``"ahead"``,
    ``"bypass"``, ``"held"`` (cycles the gate held a take), ``"fifo_max"``, ``"frozen"`` (cycles the array was
    held), ``"overflow"`` (a counted descriptor ``banks`` or more past the walk) and ``"accel_done"`` (the
    controller's ``done`` after the array's holds), plain ints. Cycle 0 is ``start``'s (the controller's cycle c runs
    on the core's cycle c + 1 plus the held cycles before it).

    Raises:
        ValueError: inconsistent sizes; with ``local``, an order that deadlocks segment-local D buffers (`_DEADLOCK`,
            as `core_schedule`); RuntimeError: no end within a bound on the cycles (a deadlock)."""
    from sim.timing.compact import WORD_REGISTERS
    from sim.timing.delta_accel import EARLY_AHEAD, gather_words

    B, d, C = cfg.compact_bands, cfg.drain_rows_per_cycle, cfg.array_cols  # noqa: N806
    a = [np.ascontiguousarray(x, dtype=np.int64) for x in (s_seq, rows, widths, rounds, paired, saddr, seg, sbuf,
                                                             fcount, tile_seg)]
    T = len(a[0])  # noqa: N806
    if any(len(x) != T for x in a):
        raise ValueError(f"every per band-tile field needs {T} entries")
    rw = np.ascontiguousarray(row_way, dtype=np.int64) if row_way is not None else np.zeros(int(a[1].sum()), np.int64)
    n = int(a[1].sum())
    if len(rw) != n:
        raise ValueError(f"row_way has {len(rw)} rows, the band-tiles {n}")
    if n >= 1 << 32:
        raise ValueError(f"{n} rows: the row heap keys hold 32 bits of row index")
    if fifo is not None and fifo < d:
        raise ValueError(f"fifo = {fifo}: fewer entries than the {d} rows a cycle can write")
    if T and a[7].min() < 0:
        raise ValueError("stage buffers must be numbered from 0")
    if local and not ordered:
        raise ValueError("segment-local D addresses need the segment order (ordered): D68's order walks the whole op")
    off = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(a[1], out=off[1:])
    rsg = np.repeat(a[9], a[1]) if ordered else np.zeros(n, dtype=np.int64)
    xw = gather_words(a[2], lanes)
    ps = np.asarray(per_seg, dtype=np.int64)
    # deadlock cut-off: 4 x sim.timing.delta_accel.stage_limit (derived there) less its drain term, in 64 n; no queues
    limit = 50 * (int(np.maximum(a[0], 1).sum()) + int(a[8].sum()) + T * (B + 8 + int(a[3].max(initial=1)) * int(
        xw.max(initial=1)))) + 1000
    limit = 64 * (n + int(ps.sum()) + 16 * T) + 10_000 + 4 * limit
    cap = 1 << max(1, (max(64, 0 if fifo is None else int(fifo)) + 2 * int(ways) + d).bit_length())
    out = _stage_core(a[0], a[1], a[2], xw, a[3], a[4].astype(np.bool_), a[5], B, max(1, d // B), max(1, B // d),
                      int(entries), WORD_REGISTERS, EARLY_AHEAD * B, a[6], a[7], a[8], int(a[7].max(initial=0)) + 1,
                      a[9], rsg, rw, off, ps, bool(ordered), int(ways), int(buffers), -1 if fifo is None else int(fifo),
                      d, int(banks), int(banks if bound is None else bound), C, max(1, d), cap, limit, bool(local),
                      int(buffers if slots is None else slots), int(ring))
    (band, first, last, gather, late, reads, weights, deferred, fills, fill_wait, fill_reads, done, ahead, byp, held,
     fifo_max, frozen, over, tk, err) = out
    if err == 3:
        raise ValueError(_DEADLOCK)
    if err:
        raise RuntimeError(f"stage_core did not finish in {limit} cycles: a deadlock" if err == 1 else
                           "stage_core: a row's cycle outgrew the heap key")
    return {"band": band, "first": first, "last": last, "gather": gather, "late": int(late), "reads": int(reads),
            "weights": int(weights), "deferred": int(deferred), "fills": fills, "fill_wait": int(fill_wait),
            "fill_reads": int(fill_reads), "done": int(done), "ahead": int(ahead), "bypass": int(byp),
            "held": int(held), "fifo_max": int(fifo_max), "frozen": int(frozen), "overflow": bool(over),
            "accel_done": int(tk)}


@numba.njit(cache=True)
def _stage_core(s_seq, rows, widths, xw, rounds, paired, saddr, bands, ports_b, q, entries, regs, ahead,  # noqa: C901
                seg, sbuf, fcount, nbuf, tseg, rsg, rw, off, seg_len, ordered, ways, nbuf_d, fifo, ports, nb,
                bound, C, nport, cap, limit, local, slots, ring):  # noqa: N803
    """`stage_core`'s loop: `_held_done`'s core cycle by cycle (the array's part as `core_schedule`'s with
    ``gate``), and on each cycle the array runs, one cycle of `sim.timing.compact_accel._port_run` with ``stage``
    (no queues, no barrier; its runs and sleeping bands, statement for statement) whose take asks the gate.
    ``local``: D125's segment-local wait and its three deadlocks (err 3), as `_held_done`'s."""
    T = s_seq.shape[0]  # noqa: N806
    B = bands  # noqa: N806
    word = 2 * B
    pow2 = (B & (B - 1)) == 0
    inf = np.int64(1) << 40
    band = np.full(T, -1, dtype=np.int64)
    first = np.full(T, -1, dtype=np.int64)
    last = np.full(T, -1, dtype=np.int64)
    gather = np.full(T, -1, dtype=np.int64)
    xready = np.full(T, inf, dtype=np.int64)
    wready = np.full(T, inf, dtype=np.int64)
    nw_ = (widths + word - 1) // word
    late = reads = weights = deferred = 0
    freed = np.full(T if ring else 0, inf, dtype=np.int64)  # D134: per band-tile its ring entry's first free cycle
    gidx = 0
    g_free = 0
    bt = np.arange(B).astype(np.int64)
    slot = np.zeros(B, dtype=np.int64)
    cw = np.zeros(B, dtype=np.int64)
    pw = np.zeros(B, dtype=np.int64)
    count = np.zeros(B, dtype=np.int64)
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
    shr = np.zeros(B, dtype=np.int64)
    nev = np.zeros(B, dtype=np.int64)
    proc = np.zeros(B, dtype=np.int64)
    lz = np.full(B, -1, dtype=np.int64)
    bs = -1
    rescan = True
    passed = np.full(T, inf, dtype=np.int64)
    inbuf = np.zeros(max(nbuf, 1), dtype=np.int64)
    fills = np.zeros(T, dtype=np.int64)
    nfill = fill_wait = fill_reads = 0
    fp, f_end = 0, -1
    nxt = B
    ndone = 0
    c = 0  # the controller's cycle
    turn = 0
    maxend = -inf  # the latest band-tile's last row's drain (StageFeed's end)
    # the core (`_held_done`'s state; the descriptors taken, their array cycle of desc_valid, counted from dqc)
    nseg = seg_len.shape[0]
    exp = np.zeros(nb, dtype=np.int64)
    got = np.zeros(nb, dtype=np.int64)
    used = np.empty(ways, dtype=rw.dtype)
    heap = np.empty(1024, dtype=np.int64)
    hm = 0
    fq = np.empty(cap, dtype=np.int64)
    fc = np.empty(cap, dtype=np.int64)
    msk = cap - 1
    nf = 0
    due = np.zeros(T, dtype=np.int64)  # per taken band-tile the array cycle its desc_valid reaches the core
    dqc = np.zeros(T, dtype=np.int64)  # ... and the core's cycle it did
    pdh = 0  # band-tiles whose desc_valid reached the core
    hi, anyd = 0, False
    nw = rp = di = 0
    s1a = s1n = s2a = s2n = 0
    sg, walking, waiting, wend, start = 0, False, True, -1, -1
    ahead_ = byp = fifo_max = 0
    ni = 0
    H = 0  # noqa: N806
    frozen, ar, nl = 0, 1, 0
    tk = -1
    over = False
    fmax, fz, stall = -1, False, 0  # D125 (local): the FIFO's highest segment so far, the array held, deadlock count
    k = 1
    err = 0
    while True:
        if k > limit:
            err = 1
            break
        while nl < nf and fc[nl & msk] <= k - 1:
            nl += 1
        gpend = False
        if ordered and ni < T and pdh == ni and di == pdh and (1 if ni == 0 else gather[ni - 1] + 2) <= ar - 1 \
                and tseg[ni] >= sg + bound:
            gpend = True
        if ni < T or hm > 0 or tk < 0:
            if fifo >= 0 and nl - rp + ports > fifo:
                frozen += 1
                fz = True
            else:
                if ndone < T:  # the controller's cycle c = ar - 1
                    # gather, asking the gate
                    if gidx < T and c >= g_free and (gidx < entries or 0 <= last[gidx - entries] < c) and (
                            ring == 0 or gidx < ring or freed[gidx - ring] <= c):  # D134's drained gate
                        if c >= (1 if gidx == 0 else gather[gidx - 1] + 2):
                            if ordered and tseg[gidx] >= sg + bound:
                                H += 1  # noqa: N806
                            else:
                                gather[gidx] = c
                                xready[gidx] = c + rounds[gidx] * xw[gidx] + 3
                                g_free = c + rounds[gidx] * xw[gidx] + 1
                                due[gidx] = ar + 1
                                gidx += 1
                                ni += 1
                    give = -1
                    if nxt < T and 0 <= gather[nxt] <= c - 2:
                        if rescan:
                            bs = -1
                            for kb in range(B):
                                if nx[kb] >= T and (bt[kb] >= T or 0 <= first[bt[kb]] < c):
                                    if bs < 0 or E[kb] < E[bs]:
                                        bs = kb
                            rescan = False
                        if bs >= 0 and E[bs] <= c + ahead:
                            give = bs
                    npr = 0
                    for b in range(B):
                        if c < nev[b]:
                            continue
                        proc[npr] = b
                        npr += 1
                        if lz[b] >= 0:
                            late += c - lz[b] - 1
                            lz[b] = -1
                        t = bt[b]
                        if t >= T:
                            nev[b] = inf
                            continue
                        if c < xready[t]:
                            if xready[t] < inf:
                                nev[b] = xready[t]
                            continue
                        have = npres[b] - (1 if p1[b] > c else 0) - (1 if p2[b] > c else 0)
                        if have <= cw[b]:
                            late += 1
                            w = inf
                            if p1[b] > c:
                                w = p1[b]
                            if c < p2[b] < w:
                                w = p2[b]
                            nev[b] = w
                            lz[b] = c
                            continue
                        lastslot = slot[b] == max(1, s_seq[t]) - 1
                        kp = 0
                        if lastslot:
                            kp = 0 if ports_b == 1 else count[b] % ports_b
                            if c < pfree[b, kp]:
                                nev[b] = pfree[b, kp]
                                continue
                        acc[b] = True
                        if slot[b] == 0:
                            first[t] = c
                            band[t] = b
                            E[b] = max(c + max(1, s_seq[t]) - 1, pact[b, 0 if ports_b == 1 else count[b] % ports_b])
                            if not rescan and (bs < 0 or E[b] < E[bs] or (E[b] == E[bs] and b < bs)):
                                bs = b
                        per = B if paired[t] else word
                        r = slot[b] & (per - 1) if pow2 else slot[b] % per
                        pop[b] = 1 if lastslot or r == per - 1 else 0
                        if lastslot:
                            done[b] = True
                            last[t] = c
                            ndone += 1
                            pfree[b, kp] = c + rows[t] * q
                            pact[b, kp] = c + rows[t] * q
                            count[b] += 1
                            # its rows become known (StageFeed): their cycles out of the array and drain port
                            port = b * ports_b + kp if B <= nport else b % nport
                            phase = b // nport if B > nport else 0
                            v = rows[t]
                            end = c + 1 + (phase - (c + 1)) % q + (v - 1) * q
                            if ring:  # D134: its ring entry free the cycle after its last row leaves
                                freed[t] = end + C + 2
                            maxend = max(maxend, end)
                            if hm + v > heap.shape[0]:
                                grown = np.empty(2 * (hm + v), dtype=np.int64)
                                grown[:hm] = heap[:hm]
                                heap = grown
                            for j in range(v):
                                cyc = end - q * (v - 1 - j) + C + 2
                                kk = cyc * nport + port
                                if kk >= np.int64(1) << 31:
                                    err = 2
                                hm = _heap_push(heap, hm, (kk << 32) | (off[t] + j))
                    if c > f_end and fp < T and gather[fp] >= 0 and c >= gather[fp] + 2:
                        if seg[fp] == 0:
                            passed[fp] = c
                            wready[fp] = c + 2
                            fp += 1
                        elif inbuf[sbuf[fp]] != 0:
                            fill_wait += 1
                        else:
                            fills[nfill] = c
                            nfill += 1
                            f_end = c + fcount[fp] - 1
                            fill_reads += fcount[fp]
                            passed[fp] = f_end
                            wready[fp] = f_end + 2
                            fp += 1
                    if fp > 0 and passed[fp - 1] == c:
                        inbuf[sbuf[fp - 1]] += 1
                    b = turn
                    wants = False
                    if pw[b] - cw[b] + pn[b] - pop[b] < regs:
                        t = bt[b]
                        if t < T and pw[b] < nw_[t]:
                            wants = wready[t] <= c
                        elif nx[b] < T and wready[nx[b]] <= c and pn[b] < nw_[nx[b]]:
                            wants = True
                    if wants:
                        t = bt[b]
                        if t < T and pw[b] < nw_[t]:
                            tb, jb = t, pw[b]
                        else:
                            tb, jb = nx[b], pn[b]
                        addr = saddr[tb] + 2 * jb
                        check = pw[b] - cw[b] + pn[b] - pop[b] >= 2
                        nsh = 0
                        for kb in range(B):
                            if kb == b:
                                continue
                            t = bt[kb]
                            tkb = -1
                            jk = 0
                            if t < T and pw[kb] < nw_[t]:
                                if wready[t] <= c:
                                    tkb, jk = t, pw[kb]
                                    nxn[kb] = False
                            elif nx[kb] < T and wready[nx[kb]] <= c and pn[kb] < nw_[nx[kb]]:
                                tkb, jk = nx[kb], pn[kb]
                                nxn[kb] = True
                            if tkb < 0:
                                continue
                            same = saddr[tkb] + 2 * jk == addr
                            freek = pw[kb] - cw[kb] + pn[kb] - pop[kb] < regs
                            if check and ((same and not freek) or (sbuf[tkb] == sbuf[tb] and saddr[tkb] == saddr[tb]
                                                                   and jk < jb)):
                                deferred += 1
                                addr = -1
                                break
                            if same and freek:
                                shr[nsh] = kb
                                nsh += 1
                        if addr >= 0:
                            reads += 1
                            weights += min(word, widths[tb] - word * jb)
                            nxn[b] = tb != bt[b]
                            shr[nsh] = b
                            nsh += 1
                            for i in range(nsh):
                                kb = shr[i]
                                if nxn[kb]:
                                    pn[kb] += 1
                                    npresn[kb] += 1
                                    p2n[kb], p1n[kb] = p1n[kb], c + 2
                                else:
                                    pw[kb] += 1
                                    npres[kb] += 1
                                    p2[kb], p1[kb] = p1[kb], c + 2
                                    if lz[kb] >= 0 and nev[kb] > c + 2:
                                        nev[kb] = c + 2
                    for i in range(npr):
                        kb = proc[i]
                        if acc[kb]:
                            slot[kb] += 1
                            cw[kb] += pop[kb]
                    for i in range(npr):
                        kb = proc[i]
                        if done[kb]:
                            inbuf[sbuf[bt[kb]]] -= 1
                            bt[kb], slot[kb], cw[kb], pw[kb] = nx[kb], 0, 0, pn[kb]
                            npres[kb], p1[kb], p2[kb] = npresn[kb], p1n[kb], p2n[kb]
                            nx[kb], pn[kb], npresn[kb], p1n[kb], p2n[kb] = inf, 0, 0, -inf, -inf
                            if bt[kb] >= T:
                                E[kb] = c
                                if kb == bs:
                                    rescan = True
                                elif not rescan and (bs < 0 or E[kb] < E[bs] or (E[kb] == E[bs] and kb < bs)):
                                    bs = kb
                    if give >= 0:
                        t, kb = nxt, give
                        if ports_b == 1:
                            f_at = E[kb] + (rows[bt[kb]] * q if bt[kb] < T else 0)
                        else:
                            f_at = pact[kb, (count[kb] + (1 if bt[kb] < T else 0)) % ports_b]
                        E[kb] = max(E[kb] + max(1, s_seq[t]), f_at)
                        if bt[kb] >= T:
                            bt[kb] = t
                            nev[kb] = c + 1
                        else:
                            nx[kb] = t
                        nxt += 1
                        rescan = True
                    for i in range(npr):
                        kb = proc[i]
                        if acc[kb] and not done[kb]:
                            t = bt[kb]
                            s1 = slot[kb]
                            per = B if paired[t] else word
                            e = min(max(1, s_seq[t]) - 1, s1 + per - 1 - (s1 & (per - 1) if pow2 else s1 % per))
                            if e > s1 and npres[kb] - (1 if p1[kb] > c + 1 else 0) - (1 if p2[kb] > c + 1 else 0) \
                                    > cw[kb]:
                                slot[kb] = e
                                nev[kb] = c + 1 + e - s1
                        acc[kb] = False
                        pop[kb] = 0
                        done[kb] = False
                    c += 1
                    turn += 1
                    if turn == B:
                        turn = 0
                # the core's array part (`core_schedule` with gate): descriptors at desc_valid, rows leaving now
                while pdh < ni and due[pdh] <= ar:
                    dqc[pdh] = k
                    pdh += 1
                while hm > 0 and ((heap[0] >> 32) // nport) <= ar:
                    x, hm = _heap_pop(heap, hm)
                    if nf - min(s2a, rp) >= cap:
                        fq, fc = _ring_grow(fq, fc, min(s2a, rp), nf, cap)
                        cap *= 2
                        msk = cap - 1
                    fq[nf & msk] = x & 0xFFFFFFFF
                    fc[nf & msk] = ((x >> 32) // nport) + k - ar
                    nf += 1
                    if local:  # D125: a row of segment j after one of j + nbuf_d or later deadlocks the RTL
                        fmax = max(fmax, rsg[x & 0xFFFFFFFF])
                        if fmax - rsg[x & 0xFFFFFFFF] >= slots:
                            err = 3
                if ni == T and tk < 0 and ndone == T:
                    adone = maxend + C + 3 if T > 0 else 1
                    if adone <= ar:
                        tk = adone + k - ar
                ar += 1
        if err:
            break
        tin = tk >= 0
        while nw < nf and fc[nw & msk] + 2 <= k:
            nw += 1
        fifo_max = max(fifo_max, nl - rp)
        bank = sg % nb
        if ordered:
            whole = ((tin and tk <= k) or (anyd and hi > sg) or gpend) and exp[bank] == got[bank]
        else:
            whole = tin and tk <= k and nw == rp and s1n == 0 and s2n == 0 and nl == nw
        par = sg % nbuf_d
        gate = walking or (waiting and whole)
        lim = sg + slots  # D125, D138 (local): a row waits until its slot's earlier segment is walked
        q0 = fq[rp & msk]
        blocked = rp < nw and ((local and rsg[q0] >= lim) or (rsg[q0] % nbuf_d == par and gate))
        npop = 0
        if rp < nw and not blocked:
            r = rp
            while r < nw and r < rp + ways:
                qq = fq[r & msk]
                if (local and rsg[qq] >= lim) or (rsg[qq] % nbuf_d == par and gate):
                    break
                dup = False
                for u in range(npop):
                    if used[u] == rw[qq]:
                        dup = True
                if dup:
                    break
                used[npop] = rw[qq]
                if fc[r & msk] + 2 == k:
                    byp += 1
                npop += 1
                r += 1
        if local and fz and blocked and not walking and s1n == 0 and s2n == 0 and not (waiting and whole):
            stall += 1  # D125: `core_schedule`'s deadlock under the array hold
            if stall > 4:
                err = 3
                break
        else:
            stall = 0
        fz = False
        go = waiting and whole
        if go:
            for r in range(s1a, s1a + s1n):
                if rsg[fq[r & msk]] % nbuf_d == par:
                    go = False
            for r in range(s2a, s2a + s2n):
                if rsg[fq[r & msk]] % nbuf_d == par:
                    go = False
        for r in range(s2a, s2a + s2n):
            b2 = rsg[fq[r & msk]] % nb
            if not (go and b2 == bank):
                got[b2] += 1
        while di < pdh and dqc[di] + 1 <= k:
            b2 = tseg[di] % nb if ordered else 0
            if not (go and b2 == bank):
                exp[b2] += rows[di]
            anyd = True
            dsg = tseg[di] if ordered else 0
            hi = max(hi, dsg)
            ahead_ = max(ahead_, dsg - sg)
            over = over or (ordered and dsg >= sg + nb)
            if local and dsg >= sg + nb:  # D125: shares the walked segment's count bank
                err = 3
            di += 1
        if err:
            break
        if go:
            exp[bank] = 0
            got[bank] = 0
        s2a, s2n = s1a, s1n
        s1a, s1n = rp, npop
        rp += npop
        if walking and k == wend:
            if sg == nseg - 1:
                break
            sg += 1
            if ordered:
                walking, waiting = False, True
            else:
                wend = k + seg_len[sg]
                start = k
        elif go:
            walking, waiting, wend = True, False, k + seg_len[sg]
            start = k
        k += 1
    return (band, first, last, gather, late, reads, weights, deferred, fills[:nfill], fill_wait, fill_reads,
            start + seg_len[nseg - 1] + 4, ahead_, byp, H, fifo_max, frozen, over, tk, err)


def issue_core(s_seq, rows, widths, rounds, cfg, entries: int, lanes: int, tile_seg, row_way, per_seg,
               ordered: bool, ways: int, fifo: int | None, bound: int | None, buffers: int = 2,
               banks: int = NB_BANKS, queue: tuple | None = None) -> dict:
    """``kaleido_dcore`` with the issue hold (docs/decisions.md D126, D137): the unstaged controller
    (`sim.timing.delta_accel.AccelRun`'s list schedule with ``gate=True``, ``kaleido_daccel_gate``) and the core
    (`held_done`'s loop) stepped together in one numba pass, each take of the gather asked of the gate on the core's
    walked segment of that cycle; equal key for key to `core_schedule` with ``gate=IssueFeed`` (tests/test_issue_core.py).
    `stage_core`'s construction (D129) on the list schedule.

    Args:
        s_seq, rows, widths, rounds: int ``[T]`` per band-tile in issue order (slots, valid rows, its group's
            channels, its gather rounds `sim.timing.delta_accel.gather_rounds`); cfg: B, d and C; entries: S, the
            staging entries; lanes: P, the X lanes (`AccelRun`'s). The take: band-tile t no earlier than
            `AccelRun.earliest` (its gather bounds and its freshness: cycle >= 1 for t = 0 from the host's list, else
            its predecessor's gather + 2, with ``queue`` also its emission + 1) and, with ``ordered``, only while its
            segment ordinal ``tile_seg[t]`` is fewer than ``bound`` (default ``banks``) past the walked one.
        tile_seg: int ``[T]`` each band-tile's segment ordinal (None: all 0; without ``ordered`` it only numbers the
            rows' D buffers and ``ahead``, as `core_schedule`'s ``seg`` False); row_way: int ``[rows]``
            each row's accumulate way, band-tile by band-tile in issue order (drain order within one), or None (all
            0); per_seg: int ``[segments]`` each segment's walk cycles; ordered: the op issues segment by segment
            (``o_seg``; else the gate only waits for freshness and the walk for the whole op).
        ways, buffers, banks: `held_done`'s; fifo: the row FIFO's entries (None: the array never held), d rows a
            cycle (``cfg.drain_rows_per_cycle``) leave the array.
        queue: the controller's band-tile queues (`sim.timing.delta_accel.queue_steps`' ``(step, reps, steps)``;
            None: the host's list), as `AccelRun`'s.

    Returns ``{"band", "first", "last", "gather"}`` (int64 ``[T]``, the gated controller's schedule, its cycle 0 the
    cycle after ``start``) and the core's ``"done"``, ``"ahead"``, ``"bypass"``, ``"held"`` (cycles the gate held a
    take), ``"fifo_max"``, ``"frozen"`` (cycles the array was held), ``"overflow"`` (a counted descriptor ``banks``
    or more past the walk) and ``"accel_done"`` (the controller's ``done`` after the array's holds), plain ints,
    counted from ``start``; with ``queue`` also ``"queue_done"`` (`sim.timing.delta_accel.queue_done`'s cycle, the
    array's clock: cycle 0 the cycle after ``start``).

    Raises:
        ValueError: inconsistent sizes; RuntimeError: no end within a bound on the cycles (a deadlock) or a row's
        cycle past the heap key's 31 bits."""
    from sim.timing.delta_accel import _emit_of, gather_words

    B, d, C = cfg.compact_bands, cfg.drain_rows_per_cycle, cfg.array_cols  # noqa: N806
    a = [np.ascontiguousarray(x, dtype=np.int64) for x in (s_seq, rows, widths, rounds)]
    T = len(a[0])  # noqa: N806
    tseg = np.ascontiguousarray(tile_seg, dtype=np.int64) if tile_seg is not None else np.zeros(T, dtype=np.int64)
    if any(len(x) != T for x in (*a, tseg)):
        raise ValueError(f"every per band-tile field needs {T} entries")
    n = int(a[1].sum())
    rw = np.ascontiguousarray(row_way, dtype=np.int64) if row_way is not None else np.zeros(n, np.int64)
    if len(rw) != n:
        raise ValueError(f"row_way has {len(rw)} rows, the band-tiles {n}")
    if n >= 1 << 32:
        raise ValueError(f"{n} rows: the row heap keys hold 32 bits of row index")
    if fifo is not None and fifo < d:
        raise ValueError(f"fifo = {fifo}: fewer entries than the {d} rows a cycle can write")
    emits = _emit_of(queue, T)
    steps = int(queue[2]) if queue is not None else 0
    off = np.zeros(T + 1, dtype=np.int64)
    np.cumsum(a[1], out=off[1:])
    rsg = np.repeat(tseg, a[1])
    xw = gather_words(a[2], lanes)
    ps = np.asarray(per_seg, dtype=np.int64)
    q = max(1, B // d)
    ctrl = int((a[3] * xw + 1).sum()) + int(np.maximum(a[0], 1).sum()) + n * q + steps + T * (B + 8)
    limit = 64 * (n + int(ps.sum()) + 16 * T) + 10_000 + 4 * ctrl
    cap = 1 << max(1, (max(64, 0 if fifo is None else int(fifo)) + 2 * int(ways) + d).bit_length())
    out = _issue_core(a[0], a[1], a[3] * xw, B, max(1, d // B), q, int(entries),
                      np.full(0, -1, np.int64) if emits is None else emits, emits is not None, steps, tseg, rsg, rw,
                      off, ps, bool(ordered), int(ways), int(buffers), -1 if fifo is None else int(fifo), d,
                      int(banks), int(banks if bound is None else bound), C, max(1, d), cap, limit)
    band, first, last, gather, done, ahead, byp, held, fifo_max, frozen, over, tk, err, qd = out
    if err:
        raise RuntimeError(f"issue_core did not finish in {limit} cycles: a deadlock" if err == 1 else
                           "issue_core: a row's cycle outgrew the heap key")
    return {"band": band, "first": first, "last": last, "gather": gather, "done": int(done), "ahead": int(ahead),
            "bypass": int(byp), "held": int(held), "fifo_max": int(fifo_max), "frozen": int(frozen),
            "overflow": bool(over), "accel_done": int(tk), **({"queue_done": int(qd)} if queue is not None else {})}


@numba.njit(cache=True)
def _issue_core(s_seq, rows, gw, bands, ports_b, q, entries, emits, hasq, steps, tseg, rsg, rw, off, seg_len,  # noqa: C901
                ordered, ways, nbuf_d, fifo, ports, nb, bound, C, nport, cap, limit):  # noqa: N803
    """`issue_core`'s loop: `_held_done`'s core cycle by cycle (the array's part as `core_schedule`'s with ``gate``),
    and on each cycle the array runs, `sim.timing.delta_accel.AccelRun`'s take of the next band-tile once its
    `AccelRun.earliest` has come, asking the gate (`IssueFeed.run_cycle`). ``gw``: each band-tile's gather cycles
    (rounds x X words)."""
    T = s_seq.shape[0]  # noqa: N806
    B = bands  # noqa: N806
    band = np.full(T, -1, dtype=np.int64)
    first = np.full(T, -1, dtype=np.int64)
    last = np.full(T, -1, dtype=np.int64)
    gather = np.full(T, -1, dtype=np.int64)
    prev = np.full(B, -1, dtype=np.int64)  # AccelRun's state
    free = np.full((B, ports_b), -(np.int64(1) << 40), dtype=np.int64)
    count = np.zeros(B, dtype=np.int64)
    g_end, c_prev, i_prev = -1, -1, -1
    e_ok, e_g, e_cp, e_ip, e_fr = False, 0, 0, 0, 0  # the next band-tile's earliest, cached
    maxend = -1
    adone = 1 if T == 0 else -1
    if T == 0 and hasq:
        adone = steps + 2
    # the core (`_held_done`'s state; the descriptors taken, their array cycle of desc_valid, counted from dqc)
    nseg = seg_len.shape[0]
    exp = np.zeros(nb, dtype=np.int64)
    got = np.zeros(nb, dtype=np.int64)
    used = np.empty(ways, dtype=rw.dtype)
    heap = np.empty(1024, dtype=np.int64)
    hm = 0
    fq = np.empty(cap, dtype=np.int64)
    fc = np.empty(cap, dtype=np.int64)
    msk = cap - 1
    nf = 0
    due = np.zeros(T, dtype=np.int64)  # per taken band-tile the array cycle its desc_valid reaches the core
    dqc = np.zeros(T, dtype=np.int64)  # ... and the core's cycle it did
    pdh = 0  # band-tiles whose desc_valid reached the core
    hi, anyd = 0, False
    nw = rp = di = 0
    s1a = s1n = s2a = s2n = 0
    sg, walking, waiting, wend, start = 0, False, True, -1, -1
    ahead_ = byp = fifo_max = 0
    ni = 0
    H = 0  # noqa: N806
    frozen, ar, nl = 0, 1, 0
    tk = -1
    over = False
    k = 1
    err = 0
    while True:
        if k > limit:
            err = 1
            break
        while nl < nf and fc[nl & msk] <= k - 1:
            nl += 1
        if ni < T and not e_ok:  # AccelRun.earliest of band-tile ni
            g = g_end + 1
            if ni >= entries:
                g = max(g, last[ni - entries] + 1)
            e_fr = 1 if ni == 0 else gather[ni - 1] + 2
            e_cp, e_ip = c_prev, i_prev
            if hasq:
                if emits[ni] >= 0:
                    e_cp = max(e_cp + emits[ni] - e_ip, gather[ni - 1] if ni > 0 else -1)
                    e_ip = emits[ni]
                    e_fr = max(e_fr, e_cp + 1)
                g = max(g, e_cp + 1)
            e_g = max(g, e_fr)
            e_ok = True
        gpend = ordered and ni < T and pdh == ni and di == pdh and e_fr <= ar - 1 and tseg[ni] >= sg + bound
        if ni < T or hm > 0 or tk < 0:
            if fifo >= 0 and nl - rp + ports > fifo:
                frozen += 1
            else:
                c = ar - 1  # the controller's cycle
                if ni < T and e_g <= c:
                    if ordered and tseg[ni] >= sg + bound:
                        H += 1  # noqa: N806
                    else:  # AccelRun.take(c) and IssueFeed.take's rows
                        t = ni
                        c_prev, i_prev = e_cp, e_ip
                        e_ok = False
                        g_end = c + gw[t]
                        b = 0
                        for j in range(1, B):
                            if prev[j] < prev[b]:
                                b = j
                        base = max(prev[b], g_end + 2)
                        kp = count[b] % ports_b
                        lt = max(base + max(1, s_seq[t]), free[b, kp])
                        free[b, kp] = lt + rows[t] * q
                        band[t], first[t], last[t], gather[t] = b, base + 1, lt, c
                        prev[b] = lt
                        count[b] += 1
                        port = b * ports_b + kp if B <= nport else b % nport
                        phase = b // nport if B > nport else 0
                        v = rows[t]
                        end = lt + 1 + (phase - (lt + 1)) % q + (v - 1) * q
                        maxend = max(maxend, end)
                        if hm + v > heap.shape[0]:
                            grown = np.empty(2 * (hm + v), dtype=np.int64)
                            grown[:hm] = heap[:hm]
                            heap = grown
                        for j in range(v):
                            kk = (end - q * (v - 1 - j) + C + 2) * nport + port
                            if kk >= np.int64(1) << 31:
                                err = 2
                            hm = _heap_push(heap, hm, (kk << 32) | (off[t] + j))
                        due[t] = ar + 1
                        ni += 1
                        if ni == T:  # IssueFeed.done: the last drain + C + 3, with the queues their done + 2
                            adone = maxend + C + 3
                            if hasq:
                                adone = max(adone, max(c_prev + steps - i_prev, c + 1) + 2)
                # the core's array part (`core_schedule` with gate): descriptors at desc_valid, rows leaving now
                while pdh < ni and due[pdh] <= ar:
                    dqc[pdh] = k
                    pdh += 1
                while hm > 0 and ((heap[0] >> 32) // nport) <= ar:
                    x, hm = _heap_pop(heap, hm)
                    if nf - min(s2a, rp) >= cap:
                        fq, fc = _ring_grow(fq, fc, min(s2a, rp), nf, cap)
                        cap *= 2
                        msk = cap - 1
                    fq[nf & msk] = x & 0xFFFFFFFF
                    fc[nf & msk] = ((x >> 32) // nport) + k - ar
                    nf += 1
                if ni == T and tk < 0 and adone <= ar:
                    tk = adone + k - ar
                ar += 1
        if err:
            break
        tin = tk >= 0
        while nw < nf and fc[nw & msk] + 2 <= k:
            nw += 1
        fifo_max = max(fifo_max, nl - rp)
        bank = sg % nb
        if ordered:
            whole = ((tin and tk <= k) or (anyd and hi > sg) or gpend) and exp[bank] == got[bank]
        else:
            whole = tin and tk <= k and nw == rp and s1n == 0 and s2n == 0 and nl == nw
        par = sg % nbuf_d
        gate = walking or (waiting and whole)
        q0 = fq[rp & msk]
        blocked = rp < nw and rsg[q0] % nbuf_d == par and gate
        npop = 0
        if rp < nw and not blocked:
            r = rp
            while r < nw and r < rp + ways:
                qq = fq[r & msk]
                if rsg[qq] % nbuf_d == par and gate:
                    break
                dup = False
                for u in range(npop):
                    if used[u] == rw[qq]:
                        dup = True
                if dup:
                    break
                used[npop] = rw[qq]
                if fc[r & msk] + 2 == k:
                    byp += 1
                npop += 1
                r += 1
        go = waiting and whole
        if go:
            for r in range(s1a, s1a + s1n):
                if rsg[fq[r & msk]] % nbuf_d == par:
                    go = False
            for r in range(s2a, s2a + s2n):
                if rsg[fq[r & msk]] % nbuf_d == par:
                    go = False
        for r in range(s2a, s2a + s2n):
            b2 = rsg[fq[r & msk]] % nb
            if not (go and b2 == bank):
                got[b2] += 1
        while di < pdh and dqc[di] + 1 <= k:
            b2 = tseg[di] % nb
            if not (go and b2 == bank):
                exp[b2] += rows[di]
            anyd = True
            dsg = tseg[di]
            hi = max(hi, dsg)
            ahead_ = max(ahead_, dsg - sg)
            over = over or (ordered and dsg >= sg + nb)
            di += 1
        if go:
            exp[bank] = 0
            got[bank] = 0
        s2a, s2n = s1a, s1n
        s1a, s1n = rp, npop
        rp += npop
        if walking and k == wend:
            if sg == nseg - 1:
                break
            sg += 1
            if ordered:
                walking, waiting = False, True
            else:
                wend = k + seg_len[sg]
                start = k
        elif go:
            walking, waiting, wend = True, False, k + seg_len[sg]
            start = k
        k += 1
    qd = max(c_prev + steps - i_prev, gather[T - 1] + 1) if hasq and T > 0 else steps  # `queue_done`
    return (band, first, last, gather, start + seg_len[nseg - 1] + 4, ahead_, byp, H, fifo_max, frozen, over, tk,
            err, qd)


def queue_scan(dec, grid, R: int, brows: int, fw: int, n_cb: int, s: int, chunk_major: bool,  # noqa: N803
               lanes: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """`sim.timing.delta_accel.queue_steps` without ``replay`` and ``reach`` (``kaleido_dqueue`` as ``kaleido_daccel``
    builds it, D93: scan steps of ``lanes`` positions, default ``brows``), compiled (numba) for the cycle model's whole
    ops (docs/decisions.md D137); the same ``(step, reps, steps)`` (tests/test_issue_core.py).

    Args:
        dec: int ``[F H W, G]`` decisions (COMPUTE 0, PARTIAL 1, REUSE 2); grid ``(F, H, W)``; R, brows (R / B), fw,
            n_cb, s, chunk_major: `queue_steps`'."""
    F, H, W = grid  # noqa: N806
    d = np.ascontiguousarray(dec, dtype=np.int8)
    step, reps, n, e = _queue_scan(d, int(F), int(H * W), int(R), int(brows), int(fw), int(n_cb), int(s),
                                   bool(chunk_major), int(lanes or brows))
    return step[:e], reps[:e], int(n)


@numba.njit(cache=True)
def _queue_scan(dec, F, hw, R, brows, fw, n_cb, s, cm, V):  # noqa: N803, C901
    """`queue_scan`'s loop, `queue_steps`' statement for statement (its plain path)."""
    G = dec.shape[1]  # noqa: N806
    cap = 1024
    step = np.empty(cap, dtype=np.int64)
    reps = np.empty(cap, dtype=np.int64)
    e = 0
    n = 0
    qn = np.zeros((G, 2), dtype=np.int64)
    c0 = 0
    while c0 < n_cb:
        k = min(s, n_cb - c0)
        r_out = 1 if cm else k
        for p0 in range(0, hw, R):
            p1 = min(p0 + R, hw)
            for fc0 in range(0, F, fw):
                for _rep in range(k if cm else 1):
                    qn[:, :] = 0
                    for f in range(fc0, min(fc0 + fw, F)):
                        for g in range(G):
                            for kind in range(2):
                                for p in range(p0, p1, V):
                                    cnt = 0
                                    for t in range(f * hw + p, f * hw + min(p + V, p1)):
                                        if dec[t, g] == kind:
                                            cnt += 1
                                    qn[g, kind] += cnt
                                    if qn[g, kind] >= brows:
                                        qn[g, kind] -= brows
                                        if e == cap:
                                            cap *= 2
                                            ns = np.empty(cap, dtype=np.int64)
                                            nr = np.empty(cap, dtype=np.int64)
                                            ns[:e] = step[:e]
                                            nr[:e] = reps[:e]
                                            step, reps = ns, nr
                                        step[e] = n
                                        reps[e] = r_out
                                        e += 1
                                    n += 1
                    for g in range(G):
                        rest = qn[g, 0] + qn[g, 1]
                        m = (1 if rest > 0 else 0) + (1 if rest > brows else 0)
                        for _ in range(m):
                            if e == cap:
                                cap *= 2
                                ns = np.empty(cap, dtype=np.int64)
                                nr = np.empty(cap, dtype=np.int64)
                                ns[:e] = step[:e]
                                nr[:e] = reps[:e]
                                step, reps = ns, nr
                            step[e] = n
                            reps[e] = r_out
                            e += 1
                            n += 1
                        if rest == 0:
                            n += 1
        c0 += k
    return step, reps, n, e
