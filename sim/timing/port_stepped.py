"""The compact and staged delta controllers' port loop as D117 and D121 built it, one cycle an iteration
(`port_run_stepped`): the compiled reference `sim.timing.compact_accel._port_run` (which steps a band's steady slots in
runs, docs/decisions.md D128) is checked against at the cycle model's op sizes, where the plain-Python rule
(`sim.timing.delta_accel.stage_schedule`) takes hours: tests/test_port_run_seeds.py and ``python -m sim.bench
stage-run`` (`sim.timing.compact_accel.port_run(..., stepped=True)` runs it)."""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True)
def port_run_stepped(s_seq, rows, widths, xw, rounds, paired, saddr, emits, bands, ports_b, q, entries, regs, ahead,  # noqa: C901
              limit, tg_lo, tg_hi, stage, seg, sbuf, fcount, nbuf):
    """`sim.timing.compact_accel._port_run`'s arguments and results, one cycle an iteration, every band looked at
    on every cycle (D117's and D121's loop, kept as the compiled reference: docs/decisions.md D128):
    `sim.timing.delta_accel.stage_schedule` with ``early=True`` and ``defer="behind"``, statement for statement.
    ``emits``: `_emit_of`'s steps, or an empty array without the queues; ``limit``: the cycles after which it gives
    up (RuntimeError), as `stage_schedule`'s; ``tg_lo``, ``tg_hi``: per band-tile the band-tiles ``[lo, hi)`` it
    starts together with (`stage_schedule`'s ``barrier``; lo = -1: none). ``stage`` (`stage_schedule`'s,
    docs/decisions.md D121): the weight stage's serial fills, with ``seg``, ``sbuf``, ``fcount`` int64 ``[T]`` its
    fields and ``nbuf`` the stage buffers (sbuf < nbuf); ignored (any arrays) without it."""
    T = s_seq.shape[0]  # noqa: N806
    B = bands  # noqa: N806
    word = 2 * B
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
    need = np.zeros(B, dtype=np.int64)
    nxn = np.zeros(B, dtype=np.bool_)
    free = np.zeros(B, dtype=np.bool_)
    tjt = np.zeros(B, dtype=np.int64)
    tjj = np.zeros(B, dtype=np.int64)
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
    while ndone < T:
        if c > limit:
            raise RuntimeError("port_run did not finish")
        # gather
        if gidx < T and c >= g_free and c >= q2 and (gidx < entries or 0 <= last[gidx - entries] < c):
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
            bs = -1
            for k in range(B):
                if nx[k] >= T and (bt[k] >= T or 0 <= first[bt[k]] < c):
                    if bs < 0 or E[k] < E[bs]:
                        bs = k
            if bs >= 0 and E[bs] <= c + ahead:
                give = bs
        # bands
        for b in range(B):
            acc[b] = False
            pop[b] = 0
            done[b] = False
            t = bt[b]
            if t >= T or c < xready[t]:
                continue
            have = npres[b] - (1 if p1[b] > c else 0) - (1 if p2[b] > c else 0)
            if have <= cw[b]:
                late += 1
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
            k = count[b] % ports_b
            if lastslot and c < pfree[b, k]:
                continue
            acc[b] = True
            if slot[b] == 0:
                first[t] = c
                band[t] = b
                E[b] = max(c + max(1, s_seq[t]) - 1, pact[b, k])
            if paired[t]:
                chan = 2 * slot[b]
                pop[b] = 1 if lastslot or (chan % word) + 2 >= word else 0
            else:
                pop[b] = 1 if lastslot or (slot[b] % word) + 1 >= word else 0
            if lastslot:
                done[b] = True
                last[t] = c
                ndone += 1
                pfree[b, k] = c + rows[t] * q
                pact[b, k] = c + rows[t] * q
                count[b] += 1
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
        b = c % B
        wants = False
        if pw[b] - cw[b] + pn[b] - pop[b] < regs:
            t = bt[b]
            if t < T and pw[b] < nw[t]:
                wants = wready[t] <= c
            elif nx[b] < T and wready[nx[b]] <= c and pn[b] < nw[nx[b]]:
                wants = True
        if wants:
            for k in range(B):
                t = bt[k]
                need[k] = -1
                nxn[k] = False
                if t < T and pw[k] < nw[t]:
                    if wready[t] <= c:
                        need[k] = saddr[t] + 2 * pw[k]
                        tjt[k], tjj[k] = t, pw[k]
                elif nx[k] < T and wready[nx[k]] <= c and pn[k] < nw[nx[k]]:
                    need[k] = saddr[nx[k]] + 2 * pn[k]
                    nxn[k] = True
                    tjt[k], tjj[k] = nx[k], pn[k]
                free[k] = pw[k] - cw[k] + pn[k] - pop[k] < regs
            a = need[b]
            if pw[b] - cw[b] + pn[b] - pop[b] >= 2:
                tb, jb = tjt[b], tjj[b]
                for k in range(B):
                    if k != b and ((need[k] == a and not free[k]) or (
                            need[k] >= 0 and sbuf[tjt[k]] == sbuf[tb] and saddr[tjt[k]] == saddr[tb]
                            and tjj[k] < jb)):
                        deferred += 1
                        a = -1
                        break
            if a >= 0:
                reads += 1
                weights += min(word, widths[tjt[b]] - word * tjj[b])
                for k in range(B):
                    if (k == b or need[k] == a) and free[k]:
                        if nxn[k]:
                            pn[k] += 1
                            npresn[k] += 1
                            p2n[k], p1n[k] = p1n[k], c + 2
                        else:
                            pw[k] += 1
                            npres[k] += 1
                            p2[k], p1[k] = p1[k], c + 2
        # end of cycle
        for k in range(B):
            if acc[k]:
                slot[k] += 1
                cw[k] += pop[k]
        for k in range(B):
            if done[k]:
                if stage:  # its last slot: its buffer is free of it from c + 1
                    inbuf[sbuf[bt[k]]] -= 1
                bt[k], slot[k], cw[k], pw[k] = nx[k], 0, 0, pn[k]
                npres[k], p1[k], p2[k] = npresn[k], p1n[k], p2n[k]
                nx[k], pn[k], npresn[k], p1n[k], p2n[k] = inf, 0, 0, -inf, -inf
                if bt[k] >= T:
                    E[k] = c
        if give >= 0:
            t, k = nxt, give
            if ports_b == 1:
                f_at = E[k] + (rows[bt[k]] * q if bt[k] < T else 0)
            else:
                f_at = pact[k, (count[k] + (1 if bt[k] < T else 0)) % ports_b]
            E[k] = max(E[k] + max(1, s_seq[t]), f_at)
            if bt[k] >= T:
                bt[k] = t
            else:
                nx[k] = t
            nxt += 1
        c += 1
    return (band, first, last, gather, late, reads, weights, deferred, q0, q1, fills[:nfill], fill_wait,
            fill_reads)
