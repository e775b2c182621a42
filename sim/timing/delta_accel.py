"""Cycles of the delta organisation's op-level controller (`hw.delta_accel.DeltaAccel`, ``kaleido_daccel``,
docs/decisions.md D91): `sim.timing.compact.band_schedule`'s list schedule and drain rule over the band-tiles in
issue order, with each band-tile's first slot no earlier than the controller's gather has staged its operands.

Gather rule (hw/delta_accel.py's docstring), cycle 0 the cycle after ``start``: band-tile n's gather starts
(its descriptor read) at

    g_n = max(g_{n-1} + 1 + u_{n-1} x xw_{n-1},  L_{n-S} + 1),   g_0 = 0,

``xw = ceil(width / P)`` X words per row (``P = lanes``), ``S = entries`` staging entries (band-tile n - S held
entry n mod S until its last slot issued at ``L_{n-S}``). The difference buffer is banked by token mod ``R / B``
(one bank per band row), each bank read once a cycle, so a band-tile's rows are read in ``u`` rounds
(`gather_rounds`: the most of its tokens in one bank; 1 when its tokens fall in distinct banks, as consecutive
tokens do), ``xw`` words each: its words are read on the ``u x xw`` cycles after ``g_n`` and written one cycle
later, so its first slot issues no earlier than ``g_n + u x xw + 3`` (a synchronous read of the last written
word the cycle after the write). Bands as `band_schedule` (the band whose
last slot issued first, ties to the lowest; back to back; a last slot waits for its drain port). Rows drain as
`sim.timing.compact.drain_reads` and leave ``C + 1`` cycles after their read; ``done`` pulses the cycle after
the last row leaves, so the op takes ``max read + C + 3`` cycles counted from the ``start`` cycle (one more than
`band_cycles`, whose cycle 0 is the array's first: here the start cycle comes first).

With its band-tile queues (``queues=True``, `hw.delta_queue`, docs/decisions.md D93) band-tile n's gather also
waits for its descriptor: ``g_n >= e + 1``, e the cycle the queues emit it (`queue_steps`: one step a cycle, an
emitting step no earlier than the cycle the previous descriptor is taken, `queue_times`), and ``done`` no
earlier than 2 cycles after the queues' ``done``.

Plain Python over the band-tiles (the RTL benches' sizes); the cycle model of whole traces does not call it.
"""

from __future__ import annotations

import numpy as np

from hw.config import AcceleratorConfig
from sim.timing.compact import drain_reads


def gather_rounds(tokens, banks: int) -> np.ndarray:
    """int64 ``[T]``: per band-tile (``tokens``: each band-tile's row tokens), the most of its tokens in one bank
    of the difference buffer (``token mod banks``, ``banks = R / B``): the rounds its gather takes."""
    return np.array([np.bincount(np.asarray(t, dtype=np.int64) % banks).max() for t in tokens], dtype=np.int64)


def gather_words(widths: np.ndarray, lanes: int) -> np.ndarray:
    """int64 ``[T]``: X words per row of each band-tile, ``ceil(width / lanes)``."""
    return -(-np.asarray(widths, dtype=np.int64) // lanes)


def accel_schedule(s_seq: np.ndarray, rows: np.ndarray, widths: np.ndarray, rounds: np.ndarray, cfg: AcceleratorConfig,
                   entries: int, lanes: int, queue: tuple | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                                   np.ndarray]:
    """Per band-tile in issue order: ``(band, first, last, gather)`` int64 ``[T]`` (module docstring; cycle 0 the
    cycle after ``start``).

    Args:
        s_seq: slots per band-tile; rows: its valid rows; widths: its group's channels; rounds: its gather rounds
            (`gather_rounds`); entries: S; lanes: P.
        queue: the controller built with its queues (``queues=True``, docs/decisions.md D93): `queue_steps`'
            ``(step, reps, steps)``. Band-tile n's gather then also waits for its descriptor: ``g_n >= e_m + 1``,
            ``e_m`` the cycle its band-tile m is emitted, `queue_times`' rule with the gather taking each
            descriptor at ``g_n`` (an emitting step no earlier than the previous band-tile's last ``g``).
    """
    run = AccelRun(s_seq, rows, widths, rounds, cfg, entries, lanes, queue)
    for _t in range(run.T):
        run.take(run.earliest())
    return run.band, run.first, run.last, run.gather


class AccelRun:
    """`accel_schedule`'s list schedule one band-tile at a time, resumable (docs/decisions.md D126): `earliest` is
    the next band-tile's first possible gather cycle given the earlier ones, `take` commits it at any cycle no
    earlier, so a caller can hold a take (``kaleido_dcore``'s issue hold) and the band choice and every later
    gather follow from the held one, as the RTL's do. Arguments as `accel_schedule`'s; ``gate``: the controller
    built with the issue gate (``DeltaAccel(issue_gate=True)``), whose take also needs the next descriptor's
    segment *fresh* (read the cycle before, `hw.delta_core.DeltaCore`'s ``gate_tok``): no take at cycle 0 from the
    host list; a queue's descriptor fresh the cycle it is shown, 1 after its emission (the gate reads the word the
    queues load at the load, docs/decisions.md D137; D126 read the shown one: 2 after).
    Attributes after the takes: ``band``, ``first``, ``last``, ``gather`` int64 ``[T]`` and ``fresh`` (each
    band-tile's first cycle its descriptor is shown and fresh; with ``gate``)."""

    def __init__(self, s_seq, rows, widths, rounds, cfg: AcceleratorConfig, entries: int, lanes: int,
                 queue: tuple | None = None, gate: bool = False):
        B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
        self.B, self.q, self.ports_b = B, max(1, B // d), max(1, d // B)
        self.s = np.asarray(s_seq, dtype=np.int64)
        self.v = np.asarray(rows, dtype=np.int64)
        self.xw = gather_words(widths, lanes)
        self.u = np.asarray(rounds, dtype=np.int64)
        self.T = T = len(self.s)  # noqa: N806
        self.entries, self.gate, self.queue = entries, gate, queue
        self.band, self.first, self.last, self.gather, self.fresh = (np.zeros(T, dtype=np.int64) for _ in range(5))
        self.prev = [-1] * B
        self.free = [[-(1 << 40)] * self.ports_b for _ in range(B)]
        self.count = [0] * B
        self.g_end = -1  # the last X-word cycle of the previous gather
        self.emits = _emit_of(queue, T)
        self.c_prev = self.i_prev = -1
        self.t = 0  # band-tiles taken
        self._e: tuple | None = None  # the next band-tile's (earliest, c_prev, i_prev), cached

    def earliest(self) -> int:
        """The next band-tile's first possible gather cycle (cycle 0 the cycle after ``start``)."""
        if self._e is not None:
            return self._e[0]
        t, c_prev, i_prev = self.t, self.c_prev, self.i_prev
        g = max(self.g_end + 1, int(self.last[t - self.entries]) + 1 if t >= self.entries else 0)
        fresh = 1 if t == 0 else int(self.gather[t - 1]) + 2
        if self.emits is not None:
            if self.emits[t] >= 0:  # the first descriptor of a band-tile: its emission
                c_prev = max(c_prev + int(self.emits[t]) - i_prev, int(self.gather[t - 1]) if t else -1)
                i_prev = int(self.emits[t])
                fresh = max(fresh, c_prev + 1)  # the gate reads the loaded word at the load (D137)
            g = max(g, c_prev + 1)
        if self.gate:
            g = max(g, fresh)
            self.fresh[t] = fresh
        self._e = (g, c_prev, i_prev)
        return g

    def take(self, g: int) -> int:
        """Commit the next band-tile's gather at cycle ``g`` (at least `earliest`); returns its band."""
        if self._e is None:
            self.earliest()
        e, self.c_prev, self.i_prev = self._e
        self._e = None
        if g < e:
            raise ValueError(f"band-tile {self.t}: gather at {g}, before its earliest {e}")
        t, B = self.t, self.B  # noqa: N806
        self.g_end = g + int(self.u[t] * self.xw[t])
        ready = self.g_end + 3
        b = min(range(B), key=lambda j: (self.prev[j], j))
        base = max(self.prev[b], ready - 1)
        k = self.count[b] % self.ports_b
        lt = max(base + max(1, int(self.s[t])), self.free[b][k])
        self.free[b][k] = lt + int(self.v[t]) * self.q
        self.band[t], self.first[t], self.last[t], self.gather[t] = b, base + 1, lt, g
        self.prev[b] = lt
        self.count[b] += 1
        self.t += 1
        return b


def _emit_of(queue, T):  # noqa: N803
    """Per descriptor the step index of its band-tile's emission when it is the band-tile's first descriptor, else
    -1 (`accel_schedule`); None without ``queue``."""
    if queue is None:
        return None
    step, reps, _ = queue
    if int(np.sum(reps)) != T:
        raise ValueError(f"the queues hand out {int(np.sum(reps))} descriptors, the schedule has {T} band-tiles")
    out = np.full(T, -1, dtype=np.int64)
    if T:  # an op of no band-tiles: its queues emit nothing (D137: it indexed entry 0 of none)
        out[np.r_[0, np.cumsum(reps)[:-1]].astype(np.int64)] = step
    return out


def queue_done(gather: np.ndarray, queue: tuple) -> int:
    """The cycle the queues' ``done`` pulses inside the controller (cycle 0 the cycle after ``start``): after the
    last step (`queue_times`' rule with each descriptor taken at its ``gather`` cycle) and the last take."""
    step, reps, steps = queue
    if not len(step):
        return steps
    emits = _emit_of(queue, len(gather))
    c_prev = i_prev = -1
    for t in range(len(gather)):
        if emits[t] >= 0:
            c_prev = max(c_prev + emits[t] - i_prev, int(gather[t - 1]) if t else -1)
            i_prev = emits[t]
    return max(c_prev + steps - i_prev, int(gather[-1]) + 1)


def accel_cycles(s_seq: np.ndarray, rows: np.ndarray, widths: np.ndarray, rounds: np.ndarray, cfg: AcceleratorConfig,
                 entries: int, lanes: int, queue: tuple | None = None) -> int:
    """Cycles of one op from the ``start`` cycle to the ``done`` pulse (module docstring): ``max read + C + 3``;
    1 without band-tiles (``done`` the cycle after ``start``). With ``queue`` (`accel_schedule`): also no earlier
    than 2 cycles after the queues' `queue_done` (its flag is registered; ``done`` comes the cycle after)."""
    if len(s_seq) == 0:
        return 1 if queue is None else queue[2] + 2
    band, _first, last, g = accel_schedule(s_seq, rows, widths, rounds, cfg, entries, lanes, queue)
    out = int(drain_reads(band, last, rows, cfg).max()) + cfg.array_cols + 3
    return out if queue is None else max(out, queue_done(g, queue) + 2)


def row_out_cycles(band: np.ndarray, last: np.ndarray, rows: np.ndarray, cfg: AcceleratorConfig) -> list[np.ndarray]:
    """Per band-tile, int64 ``[rows]``: the cycle (counted from ``start``) each row leaves the controller's drain
    ports: read as `sim.timing.compact.drain_reads` (row i ``max(1, B / d)`` turns after row i - 1), out
    ``C + 1`` cycles later, plus the start cycle."""
    B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    q = max(1, B // d)
    end = drain_reads(band, last, rows, cfg)
    return [end[t] - q * (int(rows[t]) - 1 - np.arange(int(rows[t]))) + cfg.array_cols + 2 for t in range(len(end))]


def queue_steps(dec: np.ndarray, grid, R: int, brows: int, fw: int, n_cb: int, s: int,  # noqa: N803
                chunk_major: bool, lanes: int | None = None, replay: bool | int = False,
                reach: int | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """The band-tile queues' steps (`hw.delta_queue`, ``kaleido_dqueue``, docs/decisions.md D93): ``(step, reps,
    steps)`` -- per emitted band-tile (issue order of distinct band-tiles) the index of the step that emits it and
    how many descriptors it is handed out as (``k`` column blocks in D68's order, 1 in D84's), int64 ``[E]``
    each, and the op's step count.

    Steps (one a cycle when nothing waits): per column-block group (``k = min(s, n_cb - c0)`` blocks), pool of
    R positions, chunk of ``fw`` frames, with ``chunk_major`` per column block of the group, per frame of the chunk
    and group: a pass over the pool's positions for COMPUTE tokens, then one for PARTIAL ones (a step per
    ``lanes`` positions, default ``brows``; the step whose tokens fill its queue of ``brows`` emits, the rest
    staying queued: at most one band-tile a step, as ``lanes <= brows``); after the chunk's last frame one flush step
    per group, two when the rest of its queues exceeds ``brows`` tokens (each emits; an empty flush emits
    nothing). The queue contents follow `sim.timing.compact.band_tile_sequence`.

    ``replay`` (docs/decisions.md D120; a what-if, not built): what a scan finds is the same for every column block,
    so the queues scan once and keep the band-tiles in a descriptor buffer: in D68's order the first column-block
    group is scanned and each later group's band-tiles are its band-tiles again, read back one a step (each step
    emits, handed out ``k`` times as the scan's); in D84's order a chunk is scanned for its first column block and
    replayed, one step a band-tile, for the others. The steps and emissions are otherwise the scan's; the order
    and contents of the band-tiles do not change (the buffer holds one run's first group, or one chunk).
    ``replay`` True: a buffer that holds them all; an int: its entries (D68's order, as `hw.delta_queue` builds
    it: a first group of more band-tiles than that is rescanned for each later group, as without ``replay``).

    ``reach`` (D120; built for compact's queues since D124, `hw.delta_queue` "Wider scan"; instead of ``lanes``): a step reads the pass's next ``reach`` positions
    and stops at the one whose token fills the queue: it emits, the queue empties and the next step starts after
    that position; a step whose tokens do not fill the queue queues them and moves on by ``reach``. At most one
    band-tile a step, so a pass of mostly REUSE positions takes about ``reach`` positions a step.

    Args:
        dec: int ``[F H W, G]`` decisions (COMPUTE 0, PARTIAL 1, REUSE 2); grid ``(F, H, W)``.
    """
    F, H, W = grid  # noqa: N806
    hw = H * W
    G = dec.shape[1]  # noqa: N806
    V = lanes or brows  # noqa: N806
    step, reps, n = [], [], 0
    c0 = 0
    first = e_chunk = 0  # replay: the first group's band-tiles (D68's order), the chunk's (D84's)
    while c0 < n_cb:
        k = min(s, n_cb - c0)
        if replay and not chunk_major and c0 and (replay is True or first <= replay):  # read back, one a step
            step += range(n, n + first)
            reps += [k] * first
            n += first
            c0 += k
            continue
        for p0 in range(0, hw, R):
            p1 = min(p0 + R, hw)
            for fc0 in range(0, F, fw):
                for _rep in range(k if chunk_major else 1):
                    if replay and chunk_major and _rep:  # the chunk's band-tiles read back, one a step
                        step += range(n, n + e_chunk)
                        reps += [1] * e_chunk
                        n += e_chunk
                        continue
                    e0 = len(step)
                    qn = np.zeros((G, 2), dtype=np.int64)
                    for f in range(fc0, min(fc0 + fw, F)):
                        for g in range(G):
                            for kind in (0, 1):
                                if reach:  # steps of up to `reach` positions, each ending at a fill
                                    em, n, qn[g, kind] = _reach_pass(dec[f * hw + p0:f * hw + p1, g] == kind,
                                                                     int(qn[g, kind]), brows, reach, n)
                                    step += em
                                    reps += [1 if chunk_major else k] * len(em)
                                    continue
                                for p in range(p0, p1, V):
                                    qn[g, kind] += int(np.sum(dec[f * hw + p:f * hw + min(p + V, p1), g] == kind))
                                    if qn[g, kind] >= brows:
                                        qn[g, kind] -= brows
                                        step.append(n)
                                        reps.append(1 if chunk_major else k)
                                    n += 1
                    for g in range(G):
                        rest = int(qn[g].sum())
                        for _ in range((rest > 0) + (rest > brows)):
                            step.append(n)
                            reps.append(1 if chunk_major else k)
                            n += 1
                        n += rest == 0
                    e_chunk = len(step) - e0
        first = first or len(step)
        c0 += k
    return np.array(step, dtype=np.int64), np.array(reps, dtype=np.int64), n


def _reach_pass(hit: np.ndarray, q0: int, brows: int, reach: int, n: int) -> tuple[list, int, int]:
    """One pass of `queue_steps`' wider scan over a pool's positions (``hit`` bool ``[positions]``: the pass's kind
    and group), its queue holding ``q0`` tokens, from step ``n``: ``(emitting steps, next step, tokens left
    queued)``. A step starting at position s either fills the queue at position e (the ``(brows - q)``-th match from
    s, ``e - s < reach``: it emits and the next step starts at e + 1) or queues its matches and moves on by
    ``reach``; so the fill at e after a start s takes ``(e - s) // reach + 1`` steps, and the positions after the
    last fill ``ceil(rest / reach)``."""
    m = np.flatnonzero(hit)
    fills = m[np.arange(brows - q0 - 1, len(m), brows)]  # the matches that fill the queue
    starts = np.r_[0, fills[:-1] + 1]
    ends = n + np.cumsum((fills - starts) // reach + 1) - 1  # each fill's step
    s = int(fills[-1]) + 1 if len(fills) else 0
    n_next = (int(ends[-1]) + 1 if len(fills) else n) + -(-(len(hit) - s) // reach)
    left = len(m) - (int(np.searchsorted(m, s)) if len(fills) else -q0)
    return ends.tolist(), n_next, left


def queue_times(step: np.ndarray, reps: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray, int]:
    """``(emit, pop, done)``: the cycle (cycle 0 the cycle after ``start``) each band-tile of `queue_steps` is
    emitted (int64 ``[E]``), the cycle each descriptor is taken (int64 ``[sum reps]``) and the cycle ``done``
    pulses. Rule (`hw.delta_queue` docstring): step i runs one cycle after step i - 1, an emitting step no earlier
    than the cycle the previous band-tile's last descriptor is taken; a consumer always ready takes a descriptor the
    cycle after its emission or after the previous take, whichever is later (`accel_schedule` with ``queue``: the
    controller's gather takes them); ``done`` the cycle after both the last step and the last take.
    """
    E = len(step)  # noqa: N806
    emit = np.zeros(E, dtype=np.int64)
    pops = np.zeros(int(np.sum(reps)), dtype=np.int64)
    c_prev, i_prev, last_pop, j = -1, -1, -1, 0
    for m_ in range(E):
        c = max(c_prev + int(step[m_]) - i_prev, last_pop)
        emit[m_] = c
        for _ in range(int(reps[m_])):
            last_pop = max(c + 1, last_pop + 1)
            pops[j] = last_pop
            j += 1
        c_prev, i_prev = c, int(step[m_])
    end = c_prev + steps - i_prev  # the cycle after the last step
    return emit, pops, max(end, last_pop + 1)


def stage_port(segment, group, paired, band, first, last, widths, bands: int) -> dict:
    """One column bank of the weight stage, cycle by cycle: its single read port, arbitrated by band turn, and each
    band's word registers, under the rule `sim.timing.compact.shared_stage_weights` counts (docs/decisions.md D88,
    D92, D94). The executable form of what the RTL must build; plain Python over the band-tiles.

    Args:
        segment, group, band, first, last: int ``[T]`` per issued band-tile (issue order): its stage segment, its
            group (or slice), its band, the cycles its first and last slots issue (`sim.timing.compact.
            band_schedule`, or the controller's `accel_schedule`); paired: bool ``[T]``; widths: int ``[G]``
            channels per group; bands: B.

    Rule, per cycle c, on band ``b = c mod B`` (its turn): band-tile t of band b whose window for word j
    (``[first - B, first)`` for j = 0, else ``[first + (j - 1) L, first + j L)``, ``L = 2 B``, ``B`` when PAIRED)
    holds c and whose word j is not in its registers reads it; the read is loaded into every band-tile of the same
    segment and group on another band whose window for word j holds c. Word j of t is in use on its slots
    ``[j L, (j + 1) L)``, i.e. until cycle ``first + min((j + 1) L, slots) - 1`` (the last word until ``last``:
    a drain stall holds the last slot); a word read at cycle c is in its register from cycle ``c + 1`` (written at
    the end of c, as the window's end ``first + j L`` for its first use implies) to its last use.

    Returns: ``{"weights": weights read per column (bytes; equals `shared_stage_weights`), "reads": reads,
    "busy_turns": turns at which one band wanted two reads (two band-tiles on the band each reading a word: one
    port cannot serve both), "max_regs": the most words a band held at once (D88 builds two), "early": band-tiles
    whose word 0 was loaded before the cycle their band's previous band-tile issued its last slot (the cycle
    ``kaleido_dtop`` hands a band its next band-tile number: a controller that keeps the model's timing must know
    the band of a band-tile earlier than that)}``.
    """
    B = int(bands)  # noqa: N806
    word = 2 * B
    T = len(first)  # noqa: N806
    if not T:
        return {"weights": 0, "reads": 0, "busy_turns": 0, "max_regs": 0, "early": 0}
    seg = [int(x) for x in segment]
    grp = [int(x) for x in group]
    bnd = [int(x) for x in band]
    fst = [int(x) for x in first]
    lst = [int(x) for x in last]
    pr = [bool(x) for x in paired]
    w = [int(widths[g]) for g in grp]
    nw = [-(-w[t] // word) for t in range(T)]
    L = [B if pr[t] else word for t in range(T)]  # noqa: N806
    slots = [-(-w[t] // 2) if pr[t] else w[t] for t in range(T)]

    def window(t, j):
        return (fst[t] - B, fst[t]) if j == 0 else (fst[t] + (j - 1) * L[t], fst[t] + j * L[t])

    def use_end(t, j):
        return lst[t] if j == nw[t] - 1 else fst[t] + min((j + 1) * L[t], slots[t]) - 1

    loaded = [[None] * nw[t] for t in range(T)]  # the cycle each word was loaded
    c0 = min(fst) - B
    c1 = max(lst)
    by_start = sorted(range(T), key=lambda t: fst[t])
    nxt, active = 0, []  # band-tiles whose windows or slots hold the cycle: first - B <= c <= last
    weights = reads = busy = 0
    for c in range(c0, c1 + 1):
        while nxt < T and fst[by_start[nxt]] - B <= c:
            active.append(by_start[nxt])
            nxt += 1
        active = [t for t in active if lst[t] >= c]
        b = c % B
        want = []  # (t, j) on band b whose window holds c, word not loaded, in issue order
        for t in sorted(active):
            if bnd[t] != b:
                continue
            for j in range(nw[t]):
                lo, hi = window(t, j)
                if lo <= c < hi and loaded[t][j] is None:
                    want.append((t, j))
        busy += len({(seg[t], grp[t], j) for t, j in want}) > 1
        for t, j in want:
            if loaded[t][j] is not None:  # loaded by an earlier read of this turn (same word, same run)
                continue
            reads += 1
            weights += min(word, w[t] - j * word)
            loaded[t][j] = c
            for m in active:
                if m != t and bnd[m] != b and seg[m] == seg[t] and grp[m] == grp[t] and loaded[m][j] is None:
                    lo, hi = window(m, j)
                    if lo <= c < hi:
                        loaded[m][j] = c
    max_regs = 0
    for b in range(B):  # words held: +1 the cycle after the load, -1 the cycle after the last use
        ev = sorted(e for t in range(T) if bnd[t] == b for j in range(nw[t])
                    for e in ((loaded[t][j] + 1, 1), (use_end(t, j) + 1, -1)))
        held = 0
        for _c, dv in sorted(ev, key=lambda e: (e[0], e[1])):
            held += dv
            max_regs = max(max_regs, held)
    early, prev_last = 0, {}
    for t in range(T):
        if bnd[t] in prev_last and loaded[t][0] < prev_last[bnd[t]]:
            early += 1
        prev_last[bnd[t]] = lst[t]
    return {"weights": weights, "reads": reads, "busy_turns": busy, "max_regs": max_regs, "early": early}


def staged_tiles(dec: np.ndarray, grid, groups, cfg: AcceleratorConfig, K: int, N: int, b_msb: int = 4,  # noqa: N803
                 fused: bool = False, p_op: bool = False) -> dict | None:
    """One op's (one batch element's) band-tiles through the weight stage, as `sim.engines.model` issues and times
    them on a delta config with a difference-sum buffer and a stage (D84's order, D85's segments, D88's slices):
    ``{"s_seq", "rows", "segment", "group", "paired"}`` int64 / bool ``[T]`` in issue order, ``"widths"`` (the
    groups' or slices' channels), ``"fill"``, ``"buffers"``, ``"held"`` (channels one stage buffer holds: K or
    the widest slice), ``"chunks"`` (chunks with band-tiles); None when the op does not go through the stage.

    Args:
        dec: int8 ``[M, G]`` decisions; grid ``(F, H, W)``; groups ``(k0, k1, axis)``; fused: a fused score op;
        p_op: the P op of a fused attention pair (its chunk capped by the score buffer, `sim.timing.delta.plan`).
    """
    from sim.timing import delta as rules
    from sim.timing.compact import compact_tiles, paired_tiles

    if not (cfg.organisation == "delta" and cfg.diff_sram_kib and cfg.wstage_sram_kib):
        return None
    n_cb = -(-N // cfg.array_cols)
    fw, s = rules.plan(cfg, grid[0], K, N, fused, "op", groups,  # pool and P op as sim.engines.model passes them
                       min(cfg.array_rows, grid[1] * grid[2]), p_op)
    cols = None
    if not rules.stages(cfg, K, groups):
        sliced = rules.stage_slices(cfg, groups)
        if sliced is None:
            return None
        groups, cols, held = sliced
        dec = dec[:, cols]
        hgroups = None  # a slice per buffer, filled as the widest slice (D88)
    else:
        held, hgroups = K, groups  # whole K, group-aligned (D96)
    t, chunk = compact_tiles(np.ascontiguousarray(dec, dtype=np.int8), grid, groups, cfg, fw, b_msb, chunks=True)
    order, seg = rules.chunk_major(chunk, n_cb, s)
    if cols is not None:
        order, seg = rules.slice_order(order, seg, t[1])
    return {"s_seq": t[0][order], "rows": (t[2] + t[3])[order], "segment": seg, "group": t[1][order],
            "paired": paired_tiles(t, groups)[order], "widths": np.array([k1 - k0 for k0, k1, _ in groups]),
            "fill": rules.stage_fill_cycles(cfg, held, hgroups), "buffers": rules.stage_buffers(cfg, held, hgroups),
            "held": held,
            "chunks": len(np.unique(chunk))}


#: How far ahead the early band choice hands a band its next band-tile, in units of B cycles
#: (`stage_schedule` with ``early``, docs/decisions.md D99): ``E <= c + 2 B``. At least one turn of the band (B
#: cycles) and the read's 2 cycles are needed for its next band-tile's word 0 to be there at the first slot; 2 B
#: chosen: on the balanced preset's qkv and qk (`tests.rtl.dstage_check` 0.3) any window of 10-32 cycles gives
#: the same cycles, no window (hand out at once) 0.25 % more on qkv (a band's next chosen before others can bid).
EARLY_AHEAD = 2


def stage_limit(s_seq, rows, rounds, xw, fcount, cfg: AcceleratorConfig, queue: tuple | None = None) -> int:
    """The cycle after which `stage_schedule` (and `sim.timing.compact_accel.port_run`, its rules compiled) gives up
    with RuntimeError: a run past it is a deadlock (a wait that no later cycle ends), not a long op. Arguments as
    `stage_schedule`'s (per band-tile ``[T]``; ``xw`` its `gather_words`); ``queue``: its queues (its step count).

    The bound, derived from the rules (`stage_schedule`'s docstring), serially: let ``C_t`` be the cycle by which
    band-tiles 0 .. t have all issued their last slot. Bands take band-tiles in order, so at ``C_{t-1} + 1`` every
    band is past its band-tiles before t, band-tile t has a band (in-order hand-out; with the early choice by
    ``max(C_{t-1}, g_t + 2) + 1``, every band then a candidate with ``E <= C_{t-1}``), the fill unit is idle and t's
    stage buffer holds no earlier band-tile. Band-tile t then waits at most: its emission by the queues, ``Δ_t``
    steps after t - 1's (``Σ Δ_t <=`` the op's step count, ``queue[2]``), and its gather ``g_t <= C_{t-1} + Δ_t + 1``;
    its X ``u_t xw_t + 3`` after it; its fill ``fc_t`` reads from ``g_t + 2`` and 2 more to land; its ``nw_t = ceil(w_t
    / 2 B)`` words, one at each turn of its band (every B cycles; a deferred read is skipped only while 2 words are
    loaded, so a slot can issue), in place 2 cycles after the read: ``nw_t (B + 2)``; its ``s_t`` slots; and its last
    slot the drain port's ``v q`` (``q = max(1, B / d)``) after the band's previous band-tile's last (one before t).
    With ``w_t <= 2 s_t`` (at most two channels a slot), ``nw_t (B + 2) <= (s_t / B + 1)(B + 2) <= 3 s_t + B + 2``, so
    ``C_t - C_{t-1} <= Δ_t + 4 s_t + fc_t + u_t xw_t + q v + B + 11`` and the op ends by ``steps + 4 Σ s + Σ fc + T (B
    + 11 + max u max xw) + q Σ v`` (with the segment barrier, not built, the same sum over a barrier group at
    once). The limit is 50 x ``(Σ s + Σ fc + T (B + 8 + max u max xw) + q Σ v) + 1,000`` plus the steps: at least
    that bound for any op (``50 x (B + 8) >= B + 11``), so no run that ends is cut; the factor only lengthens the
    wait before a deadlock is reported. (Before this derivation the queues' steps and the drain term were missing:
    an op of very few band-tiles among many scanned REUSE positions could be cut while running.)"""
    B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    q = max(1, B // d)
    s = np.maximum(np.asarray(s_seq, dtype=np.int64), 1)
    u, x = np.asarray(rounds, dtype=np.int64), np.asarray(xw, dtype=np.int64)
    T = len(s)  # noqa: N806
    terms = int(s.sum()) + int(np.sum(fcount)) + T * (B + 8 + int(u.max(initial=1)) * int(x.max(initial=1))) \
        + q * int(np.sum(rows))
    return 50 * terms + 1000 + (int(queue[2]) if queue is not None else 0)


def stage_schedule(s_seq, rows, widths, rounds, paired, seg, sbuf, fcount, saddr, cfg: AcceleratorConfig,
                   entries: int, lanes: int, regs: int | None = None, early: bool = False, defer: str = "off",
                   barrier: str = "off", queue: tuple | None = None, stage: bool = True, ring: int = 0) -> dict:
    """Cycles and counts of the controller with its weight stage (`hw.delta_accel.DeltaAccel` with ``stage=True``,
    docs/decisions.md D96), cycle by cycle; cycle 0 the cycle after ``start``. Plain Python over the band-tiles.

    Args (per band-tile in issue order, int ``[T]``): s_seq slots, rows valid rows, widths its group's (or
    slice's) channels, rounds its gather rounds (`gather_rounds`), paired (PAIRED: two channels a slot), seg 1 on
    the first band-tile of a stage segment, sbuf the segment's stage buffer, fcount the segment's fill
    half-words (on its first band-tile), saddr the stage half-word of its group's word 0; entries S, lanes P;
    regs the word registers per band (default `sim.timing.compact.WORD_REGISTERS`); queue: the controller's
    queues (`accel_schedule`'s ``queue``: each descriptor also waits for its emission; the compact controller's
    weight port, docs/decisions.md D109).

    ``ring`` (docs/decisions.md D134; `hw.delta_accel.DeltaAccel`'s ``ring``, 0: none): the host's band-tile list a
    ring of that many entries: band-tile n's gather also waits for band-tile n - ring's last row to have left its
    drain port (from the cycle after: `sim.timing.compact_accel.ring_free`). The host writes the list ahead of the
    gather (`hw.delta_accel_host.ring_split`), so its writes never hold a take.

    ``stage=False`` (the compact controller's weight port, `hw.compact_accel.CompactAccel`, docs/decisions.md
    D109): no stage and no fills (``seg``, ``sbuf``, ``fcount`` ignored); the "stage" is the weight buffer itself,
    which holds the op's weights from ``start``, so a band-tile's words are readable once its fields are held
    (from ``g_n + 2``); the word registers, bands, early choice and deferred reads as below.

    Rules (what the RTL does; hw/delta_accel.py's docstring):

    - *Gather*: as `accel_schedule` (band-tile n's descriptor read at ``g_n``, its first slot no earlier than
      ``g_n + u xw + 3``); its descriptor's fields are held from ``g_n + 2``.
    - *Fills* (serial, one weight-buffer read of ``B`` channels x C a cycle): a fill pointer walks the band-tiles
      in order, one a cycle once its fields are held; a band-tile not first of its segment passes (its segment's
      buffer is the one just filled); a first one waits until the fill port is idle and no passed band-tile of its
      buffer is still running (all issued their last slot by the cycle before: D85's ``i - buffers`` wait), then
      reads its ``fcount`` half-words on consecutive cycles and passes at the last read. A band-tile's words are
      readable from 2 cycles after it passes (the last write lands the cycle after its read).
    - *Word registers* (``regs`` per band, the prefetch rule of tests/rtl/stage_port_check.py): band ``c mod B``
      has the turn at cycle c. At its turn a band whose band-tile's words are readable reads its next word (half-
      words ``saddr + 2 j`` and ``+ 1``) when fewer than ``regs`` of its words are in use after c (a word is in use
      from its read to the slot that last takes it); the read is loaded into every other band whose next word is
      the same stage address and that has a register free by the same rule. A word read at c is in its register
      (latched from the macro) from ``c + 2``; a slot issues only when its word is there.
    - *Bands* as `kaleido_dtop` chooses them (``early=False``, D96): a band takes the next band-tile number the
      cycle its last slot is accepted (ties to the lower band), so it knows its next band-tile only then: word 0
      of each band-tile is read after its band's previous last slot. A last slot waits for its drain port
      (`accel_schedule`).
    - *Early band choice* (``early=True``, D94's plan item 3, docs/decisions.md D99): the controller hands out
      the numbers ahead and passes each band its next one. Each band keeps ``E``, the cycle it expects the last
      slot of its latest band-tile: set when the band's band-tile issues its first slot at f to
      ``max(f + s - 1, port free)`` (the port's free cycle: the band's band-tile ``ports_b`` back on the same
      drain port, its last slot + its rows x ``max(1, B / d)``), and to the cycle of the last slot when a band
      goes idle. A band is a *candidate* when it has no next band-tile and its band-tile issued its first slot
      before this cycle (or it has none). At a cycle when band-tile n's fields are held (from ``g_n + 2``), the
      candidate with the least ``E`` (ties to the lower band) is handed n if its ``E`` is at most
      ``EARLY_AHEAD x B`` cycles ahead: n becomes its next (its band-tile if idle) from the next cycle, and its
      ``E`` becomes ``max(E + s_n, F)``, F the port free cycle n will wait for
      (`sim.timing.compact.band_schedule`'s ``max(base + s, port free)`` with the first slot right after the
      last: ``E + rows x q`` with one port per band, else the last slot + rows x q of the band-tile ``ports_b``
      back). One number a cycle. Bands start with band-tiles 0 .. B - 1 as before. When ``E`` holds (no word,
      gather or fill wait) the numbers go where `band_schedule` puts them. A band reads on past its band-tile's
      last word into its next band-tile's words (the same three registers, in order), so word 0 is read during
      the current band-tile's last slots.

    - *Deferred reads* (``defer="next"`` or ``"behind"``, docs/decisions.md D100; ``"off"`` by default;
      ``"behind"`` is `DeltaAccel`'s ``defer``): at its turn a band skips its read when it still has a loaded word beyond the one in use (two or more
      in use after c) and another band will still take the same word: with ``"next"``, one whose next word is the
      same stage address but whose registers are full; with ``"behind"``, also one whose band-tile reads the same
      group's words from the same stage buffer and whose next word is an earlier one. It reads at a later turn,
      or the lagging band reads at its own turn and the read loads into both. The reader keeps the word in use
      and one more, so its slots rarely wait (with PAIRED words of B slots the read at its next turn can land up
      to 2 cycles late); its reads move, its band choice does not.
    - *Segment barrier* (``barrier="first"`` or ``"every"``, D100; ``"off"`` by default, not built): the first
      ``min(B, n)`` band-tiles of the op's first segment (``"first"``) or of every segment (``"every"``), n its
      band-tiles, issue their first slot together: none before all of them are some band's band-tile, past their
      gather and hold word 0. Band-tiles of one group have the same slots, so bands started together stay together
      until a wait parts them.

    Returns ``{"band", "first", "last", "gather"}`` int64 ``[T]`` (as `accel_schedule`), ``"fills"`` int64
    ``[segments]`` each fill's first read cycle, ``"fill_wait"`` cycles fills waited for their buffer,
    ``"late"`` slot-cycles a staged band-tile waited for its word, ``"reads"`` stage reads, ``"weights"`` weights
    per column those reads carry (``min(2 B, width - 2 B j)`` a word), ``"fill_reads"`` weight-buffer reads,
    ``"deferred"`` reads skipped by ``defer``.
    """
    gen = _stage_cycles(s_seq, rows, widths, rounds, paired, seg, sbuf, fcount, saddr, cfg, entries, lanes, regs, early,
                        defer, barrier, queue, stage, ring=ring)
    try:
        while True:
            next(gen)
    except StopIteration as done:
        return done.value


def _stage_cycles(s_seq, rows, widths, rounds, paired, seg, sbuf, fcount, saddr, cfg: AcceleratorConfig,
                   entries: int, lanes: int, regs: int | None = None, early: bool = False, defer: str = "off",
                   barrier: str = "off", queue: tuple | None = None, stage: bool = True, gate=None, ring: int = 0):
    """`stage_schedule`'s loop as a generator (docs/decisions.md D126): with ``gate`` (``gate(c, t) -> bool``, asked
    at a cycle c the gather would take band-tile t) it yields ``(c, band, last, gather)`` at the end of each
    cycle (the lists as they stand) and returns `stage_schedule`'s dict; without it, it yields nothing."""
    from sim.timing.compact import WORD_REGISTERS
    from sim.timing.compact_accel import ring_free

    regs = regs or WORD_REGISTERS
    B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    q, ports_b = max(1, B // d), max(1, d // B)
    word = 2 * B
    ahead = EARLY_AHEAD * B
    s = [max(1, int(v)) for v in s_seq]
    v = [int(x) for x in rows]
    w = [int(x) for x in widths]
    pr = [bool(x) for x in paired]
    sg, sb, fc, sa = ([int(x) for x in a] for a in (seg, sbuf, fcount, saddr))
    xw = gather_words(widths, lanes)
    u = [int(x) for x in rounds]
    T = len(s)  # noqa: N806
    nw = [-(-w[t] // word) for t in range(T)]
    inf = 1 << 40
    band, first, last, gather = ([-1] * T for _ in range(4))
    freed = [inf] * T  # the ring (D134): per band-tile the first cycle the gather may take band-tile + ring
    xready = [inf] * T
    wready = [inf] * T
    passed = [inf] * T  # the cycle the fill pointer passes a band-tile (held as passed from the next)
    fills, fill_wait, late, reads, weights, fill_reads = [], 0, 0, 0, 0, 0
    gidx, g_free = 0, 0  # next band-tile to gather, the first cycle the gather may take it
    fp, f_end = 0, -1  # fill pointer, last read cycle of the running fill
    bt = list(range(B))
    slot, cw, pw, count = [0] * B, [0] * B, [0] * B, [0] * B
    present = [[] for _ in range(B)]  # per band the cycles its loaded words become usable (this band-tile)
    pfree = [[-inf] * ports_b for _ in range(B)]
    inbuf = {}  # per stage buffer: passed band-tiles not yet past their last slot
    nxt = B
    # early band choice (early=True): per band its next band-tile (inf: none), the words read of it and the cycles
    # they land, the expected last-slot cycle E and the port free cycles from the last slots that ran
    nx, pn, presentn, E = [inf] * B, [0] * B, [[] for _ in range(B)], [-1] * B
    pact = [[-inf] * ports_b for _ in range(B)]
    # segment barrier (barrier=True): per band-tile the band-tiles that start together with it (or none)
    if barrier not in ("off", "first", "every"):
        raise ValueError(f"barrier must be 'off', 'first' or 'every', not {barrier!r}")
    together = [()] * T
    if barrier != "off":
        starts = [t for t in range(T) if sg[t]] + [T]
        if barrier == "first":
            starts = starts[:2]
        for a0, a1 in zip(starts[:-1], starts[1:], strict=True):
            grp_ = tuple(range(a0, min(a1, a0 + B)))
            for t in grp_:
                together[t] = grp_
    if defer not in ("off", "next", "behind"):
        raise ValueError(f"defer must be 'off', 'next' or 'behind', not {defer!r}")
    deferred = 0
    emits = _emit_of(queue, T)
    q_state = [-1, -1, 0]  # queues: the emission cycle and step of the last band-tile, the next take's first cycle

    def queued(t):  # band-tile t's emission (`accel_schedule`'s rule), once gather[t - 1] is known
        if emits is not None and t < T and emits[t] >= 0:
            e = max(q_state[0] + int(emits[t]) - q_state[1], gather[t - 1] if t else -1)
            q_state[:] = [e, int(emits[t]), e + 1]
        elif emits is not None and t < T:
            q_state[2] = q_state[0] + 1
    queued(0)
    limit = stage_limit(s, v, u, xw, fc, cfg, queue)  # a deadlock past it (derived there)
    c = 0
    while min(last, default=0) < 0:
        if gate is None and c > limit:
            raise RuntimeError("stage_schedule did not finish")
        # gather: a descriptor read when the gather is idle and the entry's band-tile n - S issued its last slot
        if gidx < T and c >= g_free and c >= q_state[2] and (gidx < entries or 0 <= last[gidx - entries] < c) \
                and (not ring or gidx < ring or freed[gidx - ring] <= c) and (gate is None or gate(c, gidx)):
            g = c
            gather[gidx], xready[gidx] = g, g + u[gidx] * int(xw[gidx]) + 3
            g_free = g + u[gidx] * int(xw[gidx]) + 1
            if not stage:  # the weight port: readable once its fields are held
                wready[gidx] = g + 2
            gidx += 1
            queued(gidx)
        # early choice: decided on the cycle's registered state, taken at its end
        give = None
        if early and nxt < T and 0 <= gather[nxt] <= c - 2:
            cands = [k for k in range(B) if nx[k] >= T and (bt[k] >= T or 0 <= first[bt[k]] < c)]
            if cands:
                bs = min(cands, key=lambda k: (E[k], k))
                if E[bs] <= c + ahead:
                    give = bs
        # bands: slots accepted this cycle
        acc, pop, done = [False] * B, [False] * B, [False] * B
        for b in range(B):
            t = bt[b]
            if t >= T or c < xready[t]:
                continue
            if len([p for p in present[b] if p <= c]) <= cw[b]:
                late += 1
                continue
            if slot[b] == 0 and together[t]:
                at = {bt[k]: k for k in range(B)}
                if not all(m in at and c >= xready[m] and any(p <= c for p in present[at[m]])
                           for m in together[t]):
                    continue
            lastslot = slot[b] == s[t] - 1
            k = count[b] % ports_b
            if lastslot and c < pfree[b][k]:
                continue
            acc[b] = True
            if slot[b] == 0:
                first[t], band[t] = c, b
                E[b] = max(c + s[t] - 1, pact[b][count[b] % ports_b])
            chan = 2 * slot[b] if pr[t] else slot[b]
            pop[b] = lastslot or (chan % word) + (2 if pr[t] else 1) >= word
            if lastslot:
                done[b] = True
                last[t] = c
                pfree[b][k] = c + v[t] * q
                pact[b][k] = c + v[t] * q
                count[b] += 1
                if ring:
                    freed[t] = int(ring_free(c, b, v[t], B, d, cfg.array_cols + 2))
        # fill unit
        if stage and c > f_end and fp < T and gather[fp] >= 0 and c >= gather[fp] + 2:
            if not sg[fp]:
                passed[fp] = c
                wready[fp] = c + 2
                fp += 1
            else:
                if inbuf.get(sb[fp], 0):  # a passed band-tile of its buffer is still held
                    fill_wait += 1
                else:
                    fills.append(c)
                    f_end = c + fc[fp] - 1
                    fill_reads += fc[fp]
                    passed[fp] = f_end
                    wready[fp] = f_end + 2
                    fp += 1
        if fp and passed[fp - 1] == c:  # passed at the end of c: held in its buffer from c + 1 to its last slot
            inbuf[sb[fp - 1]] = inbuf.get(sb[fp - 1], 0) + 1
        # word loads: band c mod B's turn
        need, nxn = [None] * B, [False] * B
        for k in range(B):
            t = bt[k]
            if t < T and pw[k] < nw[t]:
                need[k] = sa[t] + 2 * pw[k] if wready[t] <= c else None
            elif nx[k] < T and wready[nx[k]] <= c and pn[k] < nw[nx[k]]:  # early: on into the next band-tile
                need[k], nxn[k] = sa[nx[k]] + 2 * pn[k], True
        free = [pw[k] - cw[k] + pn[k] - pop[k] < regs for k in range(B)]
        b = c % B
        a = need[b]
        if a is not None and free[b] and defer != "off" and pw[b] - cw[b] + pn[b] - pop[b] >= 2:
            tj = [((nx[k], pn[k]) if nxn[k] else (bt[k], pw[k])) if need[k] is not None else None for k in range(B)]
            tb, jb = tj[b]
            if any(k != b and ((need[k] == a and not free[k]) or (
                    defer == "behind" and tj[k] is not None and sb[tj[k][0]] == sb[tb] and sa[tj[k][0]] == sa[tb]
                    and tj[k][1] < jb)) for k in range(B)):
                deferred += 1
                a = None
        if a is not None and free[b]:
            t, j = (nx[b], pn[b]) if nxn[b] else (bt[b], pw[b])
            reads += 1
            weights += min(word, w[t] - word * j)
            for k in range(B):
                if (k == b or need[k] == a) and free[k]:
                    if nxn[k]:
                        pn[k] += 1
                        presentn[k].append(c + 2)
                    else:
                        pw[k] += 1
                        present[k].append(c + 2)
        # end of cycle
        for k in range(B):
            if acc[k]:
                slot[k] += 1
                cw[k] += pop[k]
        for k in range(B):
            if done[k]:
                if stage:
                    inbuf[sb[bt[k]]] -= 1  # its last slot: its buffer is free of it from c + 1
                if not early:
                    bt[k], slot[k], cw[k], pw[k], present[k] = nxt, 0, 0, 0, []
                    nxt += 1
                    continue
                bt[k], slot[k], cw[k], pw[k], present[k] = nx[k], 0, 0, pn[k], presentn[k]
                nx[k], pn[k], presentn[k] = inf, 0, []
                if bt[k] >= T:
                    E[k] = c
        if give is not None:
            t, k = nxt, give
            if ports_b == 1:  # the port's last band-tile is the band's own: its expected last slot
                f_at = E[k] + (v[bt[k]] * q if bt[k] < T else 0)
            else:  # the band-tile ports_b back on that port has run
                f_at = pact[k][(count[k] + (1 if bt[k] < T else 0)) % ports_b]
            E[k] = max(E[k] + s[t], f_at)
            if bt[k] >= T:
                bt[k] = t
            else:
                nx[k] = t
            nxt += 1
        if gate is not None:
            yield c, band, last, gather
        c += 1
    return {"band": np.array(band, dtype=np.int64), "first": np.array(first, dtype=np.int64),
            "last": np.array(last, dtype=np.int64), "gather": np.array(gather, dtype=np.int64),
            "fills": np.array(fills, dtype=np.int64), "fill_wait": fill_wait, "late": late, "reads": reads,
            "weights": weights, "fill_reads": fill_reads, "deferred": deferred}


def stage_fields(segment, group, groups, cfg: AcceleratorConfig, sliced: bool) -> dict:
    """The stage fields of each band-tile's descriptor as the host writes them (`hw.delta_accel_host.stage_plan`'s
    rule, restated: sim does not import the RTL; tests/test_dstage_run.py checks it equal): ``{"seg", "sbuf",
    "fcount", "saddr"}`` int64 ``[T]`` and ``"buffers"``, ``"size"`` (a buffer's half-words).

    Args:
        segment: int ``[T]`` each band-tile's stage segment in issue order, non-decreasing; group: int ``[T]`` its
            group (or slice) in ``groups`` ``[(k0, k1, axis), ...]``; sliced: the groups are D88's slices (a segment
            fills its own slice) rather than the op's groups (a segment fills the whole K, D85).

    Layout: groups on consecutive half-words of ``B`` channels (``hoff_g``, ``ceil(|g| / B)`` each); a buffer
    holds ``size`` half-words (the whole K's ``Σ ceil(|g| / B)``, or with ``sliced`` the widest slice that heads a
    segment), a column bank ``wstage_sram_kib x 1024 / C / B`` half-words, so ``buffers = bank // size``; segment
    n fills buffer ``n mod buffers`` from half-word ``(n mod buffers) size``: its first band-tile has ``seg`` 1;
    ``fcount`` (on every band-tile, read on the first) is ``size`` (``sliced``: its slice's half-words); ``saddr`` is the buffer's base plus the group's
    ``hoff`` (``sliced``: the base).

    Raises:
        ValueError: segments not non-decreasing by 0 or 1 from 0, a sliced segment of two slices, or a buffer larger
            than a column bank."""
    B, C = cfg.compact_bands, cfg.array_cols  # noqa: N806
    sg = np.asarray(segment, dtype=np.int64)
    grp = np.asarray(group, dtype=np.int64)
    T = len(sg)  # noqa: N806
    if len(grp) != T or (T and (sg[0] != 0 or np.any((np.diff(sg) != 0) & (np.diff(sg) != 1)))):
        raise ValueError("segments must be numbered 0, 1, ... in issue order, one per band-tile")
    halves = np.array([-(-(k1 - k0) // B) for k0, k1, _ in groups], dtype=np.int64)
    hoff = np.r_[0, np.cumsum(halves)[:-1]].astype(np.int64)
    head = np.r_[True, np.diff(sg) != 0] if T else np.zeros(0, dtype=bool)
    first_g = grp[head][sg]  # each band-tile's segment's first group
    if sliced and np.any(first_g != grp):
        raise ValueError("a stage segment mixes slices")
    size = int(halves[grp[head]].max(initial=1)) if sliced else int(halves.sum())
    bank = cfg.wstage_sram_kib * 1024 // C // B
    if size > bank:
        raise ValueError(f"a stage buffer of {size} half-words: a column bank holds {bank}")
    nbuf = bank // size
    base = (sg % nbuf) * size
    fcount = halves[first_g] if sliced else np.full(T, size, dtype=np.int64)
    return {"seg": head.astype(np.int64), "sbuf": sg % nbuf, "fcount": fcount,
            "saddr": base if sliced else base + hoff[grp], "buffers": nbuf, "size": size}


def stage_run(s_seq, rows, widths, rounds, paired, seg, sbuf, fcount, saddr, cfg: AcceleratorConfig, entries: int,
              lanes: int, ring: int = 0) -> dict:
    """`stage_schedule` with its weight stage, ``early=True`` and ``defer="behind"`` (``kaleido_daccel_stage`` as
    `hw.rtl` builds it), compiled (numba: `sim.timing.compact_accel.port_run` with ``stage``, docs/decisions.md
    D121), equal to it key for key (tests/test_dstage_run.py); the same arguments and keys. Fast enough for the
    cycle model's whole ops. ``ring``: the descriptor ring's entries (`stage_schedule`'s, docs/decisions.md D134)."""
    from sim.timing.compact_accel import port_run

    return port_run(s_seq, rows, widths, rounds, paired, saddr, cfg, entries, lanes, seg=seg,
                    stage=(sbuf, fcount), ring=ring)
