"""What the compact controller costs over the array alone (docs/decisions.md D97): `caccel_cycles` of
`sim.timing.compact_accel` against `band_cycles` + 1 (the start cycle), on tests/test_rtl_caccel.py's tiny cases (8 x 8,
2 bands on 2 ports, S = 4, P = 32) and on two seeded synthetic ops at the balanced preset's 128 x 128 with
``organisation = "compact"`` (grid 4 x 16 x 16, N = 256, frame-axis groups of 64/32/32 and 4 x 128 channels, the
model's chunk frames `sim.timing.compact.chunk_frames`), S = 2 B, P = 32, with the host's band-tile list and with the
queues (``kaleido_dqueue``).

``python -m tests.rtl.caccel_overhead`` prints one line per op: controller cycles, array cycles, ratio.
"""

from __future__ import annotations

import numpy as np

from algo.reuse.golden import COMPUTE
from hw.config import AcceleratorConfig, load_config
from sim.engines.band_stimulus import band_op
from sim.timing.compact import band_cycles, chunk_frames
from sim.timing.compact_accel import caccel_cycles, queue_steps
from tests.rtl.cases import make_case


def overhead(case, cfg, fw, entries: int, lanes: int = 32) -> tuple[int, int, int]:
    """``(controller cycles with the host list, with its queues, band_cycles + 1)`` of ``case``'s band-tiles in
    compact's issue order."""
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw)
    q = queue_steps(case.decisions, case.grid, cfg, fw or case.grid[0], -(-case.W.shape[1] // cfg.array_cols))
    return (caccel_cycles(op, case.groups, cfg, entries, lanes), caccel_cycles(op, case.groups, cfg, entries, lanes, q),
            band_cycles(op.s_seq, op.rows, cfg)[0] + 1)


def main() -> None:
    from tests.test_rtl_caccel import ALL
    from tests.test_rtl_compact import compact_cfg

    for ci, (case, fw) in enumerate(ALL):
        a, q, b = overhead(case, compact_cfg(8, 8, 2, 2), fw, 4)
        print(f"tiny case {ci} (8x8, B 2, d 2) S 4 P 32: host list {a} / {b} = {a / b:.3f}; with its queues "
              f"{q} / {b} = {q / b:.3f}")
    cfg = AcceleratorConfig.model_validate(load_config("kaleido-16nm-128x128-balanced").model_dump()
                                           | {"organisation": "compact"})
    for seed, (K, sizes) in enumerate([(128, [64, 32, 32]), (512, [128] * 4)]):  # noqa: N806
        grid = (4, 16, 16)
        c = make_case("big", 900 + seed, grid, K, 256, sizes)
        c.groups = [(k0, k1, "f") for k0, k1, _ in c.groups]
        c.decisions[np.unravel_index(np.arange(c.X.shape[0]), grid)[0] == 0] = COMPUTE
        fw = chunk_frames(cfg, grid[0], K, 256, c.groups)
        share = " / ".join(f"{(c.decisions == v).mean():.2f}" for v in range(3))
        a, q, b = overhead(c, cfg, fw, 2 * cfg.compact_bands)
        print(f"128x128 balanced as compact, K {K} (C/P/R {share}, fw {fw}) S 16 P 32: host list {a} / {b} = "
              f"{a / b:.3f}; with its queues {q} / {b} = {q / b:.3f}")


if __name__ == "__main__":
    main()
