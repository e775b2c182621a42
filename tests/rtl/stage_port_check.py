"""Whether one read port per weight-stage column bank and two word registers per band can give the bands their
weights as the model times and counts them (docs/decisions.md D94).

For each op of one Wan2.1-1.3B block at 480p (``F`` frames of its grid, pv's and qk's keys cut to 1,024; cross
attention left out), decisions drawn from the D41 field (`algo.workloads.synth.field_decisions`: ``--reuse r``,
``--partial`` 0.2 at r = 0.3 and 0.04 at r = 0.8, 8 x 8 regions, persist 0.9, seed 1) on the balanced preset, it
prints:

- the model's rule (`sim.timing.delta_accel.stage_port`, whose count is `shared_stage_weights`): its reads, the
  turns at which one band wants two reads (``busy``: one port serves one), the most words a band holds at once
  (``regs``; D88 builds two) and the band-tiles whose word 0 is read before the cycle their band's previous
  band-tile issues its last slot (``early``: when ``kaleido_dtop`` hands a band its next number today);
- a buildable rule (`prefetch`): at its turn a band reads the next word it needs (its band-tiles' words in order,
  the schedule's band assignment known ahead) when one of its ``regs`` registers is free by the end of the cycle;
  the read is loaded into every other band whose next needed word is the same (segment, group, word) and that has
  a free register. ``late`` counts words loaded at or after their first use (the slot would wait: the model's
  timing would not hold), ``weights`` the bytes per column read (against the model's).

``python -m tests.rtl.stage_port_check R [F]`` (R the reuse share, 0.3 or 0.8; F frames, default 3).
"""

from __future__ import annotations

import sys

import numpy as np

from algo.workloads.synth import SynthField, field_decisions, synth_ops
from hw.config import load_config
from sim.plan import plan_op
from sim.timing.compact import band_schedule
from sim.timing.delta_accel import stage_port, staged_tiles


def prefetch(segment, group, paired, band, first, last, widths, bands: int, regs: int) -> dict:
    """The buildable rule of the module docstring: ``{"weights", "reads", "late"}``."""
    B, word = bands, 2 * bands  # noqa: N806
    T = len(first)  # noqa: N806
    need = [[] for _ in range(B)]  # per band its words in order: (t, j, first use, last use, bytes)
    for t in range(T):
        w = int(widths[group[t]])
        L = B if paired[t] else word  # noqa: N806
        slots = -(-w // 2) if paired[t] else w
        nw = -(-w // word)
        for j in range(nw):
            end = int(last[t]) if j == nw - 1 else int(first[t]) + min((j + 1) * L, slots) - 1
            need[int(band[t])].append((t, j, int(first[t]) + j * L, end, min(word, w - j * word)))
    ptr = [0] * B
    held = [[] for _ in range(B)]  # last-use cycles of the words a band holds
    weights = reads = late = 0
    c0 = int(min(first)) - 4 * word
    for c in range(c0, int(max(last)) + 1):
        b = c % B
        for k in range(B):
            held[k] = [e for e in held[k] if e >= c]  # a register whose word's last use was before c is free
        if ptr[b] >= len(need[b]):
            continue
        # a register is free by the end of c when fewer than regs words are still in use after c
        free = [len([e for e in held[k] if e > c]) < regs for k in range(B)]
        if not free[b]:
            continue
        t, j, use, end, size = need[b][ptr[b]]
        reads += 1
        weights += size
        key = (int(segment[t]), int(group[t]), j)
        for k in range(B):
            if ptr[k] >= len(need[k]) or not free[k]:
                continue
            t2, j2, use2, end2, _ = need[k][ptr[k]]
            if k == b or (int(segment[t2]), int(group[t2]), j2) == key:
                late += use2 <= c
                held[k].append(end2)
                ptr[k] += 1
    late += sum(len(need[k]) - ptr[k] for k in range(B))
    return {"weights": weights, "reads": reads, "late": late}


def main(r: float, frames: int = 3) -> None:
    cfg = load_config("kaleido-16nm-128x128-balanced")
    grid, ops = synth_ops("wan2.1-t2v-1.3b", "480p", [0], [0])
    g2 = (frames, grid[1], grid[2])
    fld = SynthField(reuse=r, partial=0.04 if r >= 0.8 else 0.2, region=(8, 8), persist=0.9)
    rng = np.random.default_rng(1)
    for op in ops:
        if op.name.startswith("cross"):
            continue
        groups = plan_op(op, grid, cfg, None, op.name in ("qk", "pv")).groups
        N = min(op.N, 1024) if op.name in ("qk", "pv") else op.N  # noqa: N806
        dec = field_decisions(rng, g2, groups, 1, fld)[0]
        st = staged_tiles(dec, g2, groups, cfg, op.K, N, fused=op.name == "qk")
        if st is None:
            print(f"{op.name}: not through the stage")
            continue
        band, first, last = band_schedule(st["s_seq"], st["rows"], cfg, st["segment"], st["fill"], st["buffers"])
        args = (st["segment"], st["group"], st["paired"], band, first, last, st["widths"], cfg.compact_bands)
        m = stage_port(*args)
        line = (f"{op.name:7s} T {len(first):6d}  model: weights {m['weights']:8d} reads {m['reads']:7d} busy "
                f"{m['busy_turns']:5d} regs {m['max_regs']} early {m['early']:6d}")
        for regs in (2, 3):
            p = prefetch(*args, regs=regs)
            line += f" | prefetch {regs}: weights {p['weights'] / max(1, m['weights']):.4f}x late {p['late']}"
        print(line, flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 3)
