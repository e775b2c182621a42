"""What the compact controller costs over the array alone (docs/decisions.md D97): `caccel_cycles` of
`sim.timing.compact_accel` against `band_cycles` + 1 (the start cycle), on tests/test_rtl_caccel.py's tiny cases (8 x 8,
2 bands on 2 ports, S = 4, P = 32) and on two seeded synthetic ops at the balanced preset's 128 x 128 with
``organisation = "compact"`` (grid 4 x 16 x 16, N = 256, frame-axis groups of 64/32/32 and 4 x 128 channels, the
model's chunk frames `sim.timing.compact.chunk_frames`), S = 2 B, P = 32, with the host's band-tile list and with the
queues (``kaleido_dqueue``).

``python -m tests.rtl.caccel_overhead`` prints one line per op: controller cycles, array cycles, ratio; and what
``kaleido_ccore``'s op (`core_cycles`: per column block and token ``ceil(G / W)`` commands on its W = d combine
ways, a column block's walk once its rows are all staged, docs/decisions.md D104; the 128 x 128 ops' H W = 256 positions are beyond its one-pool
state, so that line is what the walk would take, not a run it can do).

Since D109 the controller reads one weight buffer by band turn (`sim.timing.compact_accel.port_schedule`); each line
also gives the cycles with the queues under D97's rule (a weight copy per band, `sim.timing.delta_accel.
accel_schedule`'s timing: no word waits) and the weights per column the port reads, against D92's count on the
array's own schedule (`sim.timing.compact.shared_stage_weights` on `band_schedule`, what the trace model charges)
and against one read per band-tile word (no sharing).
"""

from __future__ import annotations

import numpy as np

from algo.reuse.golden import COMPUTE
from hw.compact_core import default_ways
from hw.config import AcceleratorConfig, load_config
from sim.engines.band_stimulus import band_op
from sim.timing import delta_accel as _da
from sim.timing.compact import (
    band_cycles,
    band_schedule,
    chunk_frames,
    combine_adds,
    combine_stall,
    shared_stage_weights,
)
from sim.timing.compact_accel import (
    _args,
    block_times,
    caccel_cycles,
    caccel_schedule,
    core_cycles,
    port_fields,
    port_schedule,
    queue_steps,
)
from tests.rtl.cases import make_case


def overhead(case, cfg, fw, entries: int, lanes: int = 32) -> tuple[int, int, int, int, int]:
    """``(controller cycles with the host list, with its queues, band_cycles + 1, kaleido_ccore's cycles, the model's
    op cycles + 1)`` of ``case``'s band-tiles in compact's issue order; the model's op is `band_cycles` + its
    `combine_stall` (`sim.engines.model._compact_timing`'s rule: ``combine_lanes`` adders, overlapped pool by pool)."""
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw)
    q = queue_steps(case.decisions, case.grid, cfg, fw or case.grid[0], -(-case.W.shape[1] // cfg.array_cols))
    withq = caccel_cycles(op, case.groups, cfg, entries, lanes, q)
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    blocks = block_times(op, caccel_schedule(op, case.groups, cfg, entries, lanes, q), cfg, n_cb)
    core = core_cycles(withq, case.X.shape[0], -(-len(case.groups) // default_ways(cfg)), blocks)[1]
    array = band_cycles(op.s_seq, op.rows, cfg)[0]
    F, H, W = case.grid  # noqa: N806
    pools = n_cb * -(-(H * W) // cfg.array_rows) * F
    model = array + combine_stall(combine_adds(case.decisions, case.W.shape[1]), pools, array, cfg)
    return caccel_cycles(op, case.groups, cfg, entries, lanes), withq, array + 1, core, model + 1


def weight_reads(case, cfg, fw, entries: int, lanes: int = 32) -> tuple[int, int, int, int, int]:
    """``(port weights, D92's weights, weights without sharing, cycles with the queues under D97's rule, with the
    port)``: weights per column the controller's reads carry (module docstring)."""
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw)
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    q = queue_steps(case.decisions, case.grid, cfg, fw or case.grid[0], n_cb)
    port = port_schedule(op, case.groups, cfg, entries, lanes, q)
    paired, _ = port_fields(op, case.groups, cfg)
    band, first, _last = band_schedule(op.s_seq, op.rows, cfg)
    widths = np.array([k1 - k0 for k0, k1, _ in case.groups], dtype=np.int64)
    grp = np.array([t.group for t in op.tiles], dtype=np.int64)
    d92 = shared_stage_weights(np.array([t.cb for t in op.tiles]), grp, paired.astype(bool), band, first, widths,
                               cfg.compact_bands)
    old = _da.accel_cycles(*_args(op, case.groups, cfg), entries, lanes, q)
    return port["weights"], d92, int(widths[grp].sum()), old, caccel_cycles(op, case.groups, cfg, entries, lanes, q)


def _reads_line(case, cfg, fw, entries) -> str:
    pw, d92, every, old, new = weight_reads(case, cfg, fw, entries)
    return (f"  weight port: {pw} weights per column read = {pw / d92:.3f} x D92's count {d92} (no sharing: {every}); "
            f"cycles with the queues {new} (D97's copies: {old}, {new / old:.4f})")


def main() -> None:
    from tests.test_rtl_caccel import ALL
    from tests.test_rtl_compact import compact_cfg

    for ci, (case, fw) in enumerate(ALL):
        a, q, b, k, mo = overhead(case, compact_cfg(8, 8, 2, 2), fw, 4)
        print(f"tiny case {ci} (8x8, B 2, d 2) S 4 P 32: host list {a} / {b} = {a / b:.3f}; with its queues "
              f"{q} / {b} = {q / b:.3f}; kaleido_ccore {k} / {b} = {k / b:.3f} (the model's op with its combine "
              f"stall: {mo})")
        print(_reads_line(case, compact_cfg(8, 8, 2, 2), fw, 4))
    cfg = AcceleratorConfig.model_validate(load_config("kaleido-16nm-128x128-balanced").model_dump()
                                           | {"organisation": "compact"})
    for seed, (K, sizes) in enumerate([(128, [64, 32, 32]), (512, [128] * 4)]):  # noqa: N806
        grid = (4, 16, 16)
        c = make_case("big", 900 + seed, grid, K, 256, sizes)
        c.groups = [(k0, k1, "f") for k0, k1, _ in c.groups]
        c.decisions[np.unravel_index(np.arange(c.X.shape[0]), grid)[0] == 0] = COMPUTE
        fw = chunk_frames(cfg, grid[0], K, 256, c.groups)
        share = " / ".join(f"{(c.decisions == v).mean():.2f}" for v in range(3))
        a, q, b, k, mo = overhead(c, cfg, fw, 2 * cfg.compact_bands)
        print(f"128x128 balanced as compact, K {K} (C/P/R {share}, fw {fw}) S 16 P 32: host list {a} / {b} = "
              f"{a / b:.3f}; with its queues {q} / {b} = {q / b:.3f}; kaleido_ccore's walk would take {k} / {b} = "
              f"{k / b:.3f} (the model's op with its combine stall: {mo})")
        print(_reads_line(c, cfg, fw, 2 * cfg.compact_bands))


if __name__ == "__main__":
    main()
