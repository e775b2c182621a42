"""What the delta controller's combine stage (``kaleido_dcore``, docs/decisions.md D95) costs over the array alone,
beside the cycle model's op (docs/decisions.md D104): `sim.timing.delta_core.core_schedule`'s ``done`` fed by
`sim.timing.delta_accel` (with the controller's queues, S = 2 B, P = 32) against `band_cycles` + 1 (the start
cycle), and the model's op `band_cycles` + `combine_stall` (`sim.engines.model._compact_timing`'s rule on the delta
organisation: ``combine_adds_delta`` over ``combine_lanes`` adders, overlapped pool by pool) + 1.

Ops: tests/test_rtl_delta.py's four seeded cases (8 x 8, 2 bands on 2 ports) in D68's issue order and in D84's
chunk-major one, its qk-like cases, and two seeded synthetic ops at the balanced preset's 128 x 128 (grid
4 x 16 x 16, N = 256, frame-axis groups of 64/32/32 and 4 x 128 channels, the model's chunks and column blocks per
group `sim.timing.delta.plan`, D84's order). ``kaleido_dcore`` holds one chunk (its D buffer, D95), so the
128 x 128 lines are what its walk would take, not runs it can do.

``python -m tests.rtl.dcore_overhead`` prints one line per op, and for the 128 x 128 ops `what_if`'s estimates and
docs/decisions.md D111's what-if (d output ways, 3 or 4 D buffers: `core_schedule`'s ``out_ways``, ``buffers``).
"""

from __future__ import annotations

import numpy as np

from hw.config import load_config
from hw.delta_core import segment_order
from sim.engines.band_stimulus import band_op
from sim.timing import delta as delta_rules
from sim.timing.compact import band_cycles, combine_stall
from sim.timing.delta_accel import accel_cycles, accel_schedule, gather_rounds, queue_steps, row_out_cycles
from sim.timing.delta_core import (
    blocks_done,
    commands,
    core_schedule,
    fifo_rows,
    row_ways,
    tile_segments,
    walk_done,
)
from tests.rtl.daccel_overhead import balanced_cases


def overhead(case, cfg, fw, s, cm, ways: int = 1, out_ways: int = 1, buffers: int = 2) -> tuple[int, int, int, int]:
    """``(kaleido_dcore's done, band_cycles + 1, the model's op + 1, its done with the whole-op walk (D95))`` of
    ``case`` (``fw`` frames a chunk, ``s`` column blocks a group, ``cm`` D84's chunk-major order), the core's
    accumulate on ``ways`` ways (`sim.timing.delta_core.core_schedule`'s rule, docs/decisions.md D107); with
    ``out_ways`` output ways and ``buffers`` D buffers (docs/decisions.md D111's what-if, the model's rule, not
    built)."""
    fw = fw or case.grid[0]
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s, chunk_major=cm)
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    n_cb = -(-case.W.shape[1] // C)
    q = queue_steps(case.decisions, case.grid, R, R // cfg.compact_bands, fw, n_cb, s, cm)
    widths = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles], dtype=np.int64)
    rounds = gather_rounds([t.tokens for t in op.tiles], R // cfg.compact_bands)
    S = 2 * cfg.compact_bands  # noqa: N806
    band, _first, last, g = accel_schedule(op.s_seq, op.rows, widths, rounds, cfg, S, 32, q)
    rows = np.concatenate(row_out_cycles(band, last, op.rows, cfg))
    done = accel_cycles(op.s_seq, op.rows, widths, rounds, cfg, S, 32, q)
    sgs = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, R, n_cb, fw, s)
    cls = delta_rules.classes(case.groups)
    of_group = {gi: a for a, (_ax, idx) in enumerate(cls) for gi in idx}
    rw = row_ways([t.tokens for t in op.tiles], [of_group[t.group] for t in op.tiles], case.X.shape[0], ways)
    cyc, rsg, way = fifo_rows(band, last, op.rows, sgs, cfg, rw)
    descs = [(int(g[n]) + 2, sgs[n], int(op.rows[n])) for n in range(len(sgs))]
    A = len(cls)  # noqa: N806
    core = core_schedule(cyc, done, case.grid, n_cb, A, R, segment_order(cm, s, n_cb), rsg, descs, fw, s, ways,
                         way, out_ways, buffers)["done"]
    # D95's walk: after the whole op
    old = walk_done(rows, done, len(commands(case.grid, n_cb, A, R)))
    array = band_cycles(op.s_seq, op.rows, cfg)[0]
    F, H, W = case.grid  # noqa: N806
    pools = n_cb * -(-(H * W) // R) * F
    adds = delta_rules.combine_adds_delta(case.decisions, case.W.shape[1], case.groups)
    return core, array + 1, array + combine_stall(adds, pools, array, cfg) + 1, old


def what_if(case, cfg, fw, s) -> dict[str, int]:
    """Estimates, not built (docs/decisions.md D104): ``kaleido_dcore``'s ``done`` on ``case`` (chunk-major) with d
    accumulate ways (rows popped up to d a cycle, no way conflicts: a lower bound), with the walk after the op and
    with the walk per (chunk, column block) segment as built (`blocks_done` over the segments: runs of one column
    block in issue order, the chunk's tokens a segment); ``segments``: as built, without ways (`blocks_done`,
    beside ``now``, `core_schedule`)."""
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s, chunk_major=True)
    R, d, M = cfg.array_rows, cfg.drain_rows_per_cycle, case.X.shape[0]  # noqa: N806
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    A = len(delta_rules.classes(case.groups))  # noqa: N806
    q = queue_steps(case.decisions, case.grid, R, R // cfg.compact_bands, fw, n_cb, s, True)
    widths = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles], dtype=np.int64)
    rounds = gather_rounds([t.tokens for t in op.tiles], R // cfg.compact_bands)
    band, _first, last, g = accel_schedule(op.s_seq, op.rows, widths, rounds, cfg, 2 * cfg.compact_bands, 32, q)
    T = accel_cycles(op.s_seq, op.rows, widths, rounds, cfg, 2 * cfg.compact_bands, 32, q)  # noqa: N806
    cbs = [t.cb for t in op.tiles]
    seg = np.cumsum([0] + [int(a != b) for a, b in zip(cbs, cbs[1:], strict=False)])
    cyc, sg = fifo_rows(band, last, op.rows, list(seg), cfg)
    nseg = int(seg[-1]) + 1
    f0 = np.array([int(g[np.flatnonzero(seg == k)[0]]) + 2 for k in range(nseg)])
    f1 = np.array([int(g[np.flatnonzero(seg == k)[-1]]) + 2 for k in range(nseg)])
    per = M * n_cb * A // nseg
    k = np.arange(len(cyc))
    counted = np.maximum.accumulate(cyc - k // d) + k // d + 5  # accumulated d a cycle, counted 3 cycles after the pop
    ways = max(T, int(counted.max()) - 2) + M * n_cb * A + n_cb - 1 + 4
    row_done = np.full(nseg, -1, dtype=np.int64)
    np.maximum.at(row_done, sg, counted)
    go = -(1 << 62)
    for b in range(nseg):
        go = max(int(row_done[b]), int(f1[b]) + 1, min(T, int(f0[b + 1]) + 1) if b + 1 < nseg else T, go + per + 1)
    return {"now": core_schedule(cyc, T, case.grid, n_cb, A, R)["done"],
            "segments": blocks_done(cyc, sg, T, per, f0, f1), "ways": ways, "both": go + per + 4}


def main() -> None:
    from tests.test_rtl_delta import CASES, QK_CASES, delta_cfg

    cfg = delta_cfg(8, 8, 2, 2)
    for ci, (case, fw, s) in enumerate(CASES):
        for cm in (False, True):
            k, b, mo, o = overhead(case, cfg, fw, s, cm)
            kw = overhead(case, cfg, fw, s, cm, 2)[0]
            ko = overhead(case, cfg, fw, s, cm, 2, 2)[0]
            print(f"tiny case {ci}{' chunk-major' if cm else ''} (8x8, B 2, d 2): kaleido_dcore {k} / {b} = "
                  f"{k / b:.3f}, 2 ways {kw / b:.3f}, 2 output ways too (D111) {ko / b:.3f} (D95's whole-op walk "
                  f"{o / b:.3f}); the model's op with its combine stall {mo} / {b} = {mo / b:.3f}")
    for name, case in QK_CASES.items():
        k, b, mo, o = overhead(case, cfg, 1, 2, False)
        kw = overhead(case, cfg, 1, 2, False, 2)[0]
        ko = overhead(case, cfg, 1, 2, False, 2, 2)[0]
        print(f"tiny qk-like {name} (8x8, B 2, d 2): kaleido_dcore {k} / {b} = {k / b:.3f}, 2 ways {kw / b:.3f}, "
              f"2 output ways too (D111) {ko / b:.3f} (D95's {o / b:.3f}); the model's op {mo} / {b} = {mo / b:.3f}")
    cfg = load_config("kaleido-16nm-128x128-balanced")
    for K, c in balanced_cases():  # noqa: N806
        fw, s = delta_rules.plan(cfg, c.grid[0], K, 256, False, "op", c.groups)
        share = " / ".join(f"{(c.decisions == v).mean():.2f}" for v in range(3))
        k, b, mo, o = overhead(c, cfg, fw, s, bool(cfg.diff_sram_kib))
        print(f"128x128 balanced K {K} (C/P/R {share}, fw {fw}, s {s}): kaleido_dcore's walk would take {k} / {b} = "
              f"{k / b:.3f} (D95's {o / b:.3f}); the model's op {mo} / {b} = {mo / b:.3f}")
        kw = overhead(c, cfg, fw, s, bool(cfg.diff_sram_kib), cfg.drain_rows_per_cycle)[0]
        print(f"  {cfg.drain_rows_per_cycle} accumulate ways by (a M + t) mod W (core_schedule, D107): {kw} / {b} = "
              f"{kw / b:.3f}")
        d = cfg.drain_rows_per_cycle
        kg = {nb: overhead(c, cfg, fw, s, bool(cfg.diff_sram_kib), d, 1, nb)[0] for nb in (3, 4)}
        ko = {nb: overhead(c, cfg, fw, s, bool(cfg.diff_sram_kib), d, d, nb)[0] for nb in (2, 3, 4)}
        print(f"  D111's what-if (core_schedule, not built): {d} output ways {ko[2]} / {b} = {ko[2] / b:.3f}; the "
              f"head's gate lifted by 3 / 4 D buffers {kg[3] / b:.3f} / {kg[4] / b:.3f}, with the output ways "
              f"{ko[3] / b:.3f} / {ko[4] / b:.3f}")
        w = what_if(c, cfg, fw, s)
        print(f"  d accumulate ways (estimates, not built): {w['ways'] / b:.2f} with the walk after the op, "
              f"{w['both'] / b:.2f} with the segment walk (its closed form without ways {w['segments'] / b:.2f})")


if __name__ == "__main__":
    main()
