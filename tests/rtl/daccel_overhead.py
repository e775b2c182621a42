"""What the delta controller's gather costs over the array alone (docs/decisions.md D91): `accel_cycles` of
`sim.timing.delta_accel` against `band_cycles` + 1 (the start cycle), on tests/test_rtl_delta.py's tiny cases and on
two seeded synthetic ops at the balanced preset's 128 x 128 (grid 4 x 16 x 16, N = 256, frame-axis groups of
64/32/32 and 4 x 128 channels), for several lanes P and staging entries S; and with the controller's queues
(``queues=True``, D93: `queue_steps` in `accel_cycles`) at S = 2 B, P = 32.

``python -m tests.rtl.daccel_overhead`` prints one line per (op, S, P): controller cycles, array cycles, ratio.
"""

from __future__ import annotations

import numpy as np

from algo.reuse.golden import COMPUTE
from hw.config import load_config
from sim.engines.band_stimulus import band_op
from sim.timing.compact import band_cycles
from sim.timing.delta_accel import accel_cycles, gather_rounds, queue_steps
from tests.rtl.cases import make_case


def overhead(case, cfg, fw, s, entries: int, lanes: int, queues: bool = False) -> tuple[int, int]:
    """``(controller cycles, band_cycles + 1)`` of ``case``'s band-tiles in the delta issue order (``queues``: the
    controller forms them with its queues)."""
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s)
    w = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles])
    u = gather_rounds([t.tokens for t in op.tiles], cfg.array_rows // cfg.compact_bands)
    q = None
    if queues:
        q = queue_steps(case.decisions, case.grid, cfg.array_rows, cfg.array_rows // cfg.compact_bands,
                        fw or case.grid[0], -(-case.W.shape[1] // cfg.array_cols), s, bool(cfg.diff_sram_kib))
    return accel_cycles(op.s_seq, op.rows, w, u, cfg, entries, lanes, q), band_cycles(op.s_seq, op.rows, cfg)[0] + 1


def balanced_cases():
    """The overhead scripts' two seeded ops on the balanced preset's shapes: ``(K, case)`` for K = 128 (groups of
    64, 32, 32 channels) and K = 512 (four of 128), grid 4 x 16 x 16 (1,024 tokens), N = 256, every group on ``f``
    and the first frame COMPUTE (it has no predecessor along ``f``)."""
    for seed, (K, sizes) in enumerate([(128, [64, 32, 32]), (512, [128] * 4)]):  # noqa: N806
        grid = (4, 16, 16)
        c = make_case("big", 900 + seed, grid, K, 256, sizes)
        c.groups = [(k0, k1, "f") for k0, k1, _ in c.groups]
        c.decisions[np.unravel_index(np.arange(c.X.shape[0]), grid)[0] == 0] = COMPUTE
        yield K, c


def main() -> None:
    from tests.test_rtl_delta import CASES, delta_cfg

    for ci, (case, fw, s) in enumerate(CASES):
        a, b = overhead(case, delta_cfg(8, 8, 2, 2), fw, s, 4, 32)
        q, _ = overhead(case, delta_cfg(8, 8, 2, 2), fw, s, 4, 32, queues=True)
        print(f"tiny case {ci} (8x8, B 2, d 2) S 4 P 32: {a} / {b} = {a / b:.3f}; with its queues {q / b:.3f}")
    cfg = load_config("kaleido-16nm-128x128-balanced")
    for K, c in balanced_cases():  # noqa: N806
        share = " / ".join(f"{(c.decisions == v).mean():.2f}" for v in range(3))
        for S, P in [(16, 8), (16, 16), (32, 16), (16, 32)]:  # noqa: N806
            a, b = overhead(c, cfg, None, 1, S, P)
            print(f"128x128 balanced K {K} (C/P/R {share}) S {S} P {P}: {a} / {b} = {a / b:.3f}")
        a, b = overhead(c, cfg, None, 1, 16, 32, queues=True)
        print(f"128x128 balanced K {K} (C/P/R {share}) S 16 P 32 with its queues: {a} / {b} = {a / b:.3f}")


if __name__ == "__main__":
    main()
