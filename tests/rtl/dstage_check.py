"""What the staged controller's rule (`sim.timing.delta_accel.stage_schedule`, docs/decisions.md D96) costs against
the trace model's timing of the same band-tiles on the balanced preset: per op of one Wan2.1-1.3B block (its K,
groups and stage plan at 480p; cross attention left out), on a small token grid (``F`` frames of 16 x 32
positions; N cut to 256, two column blocks), decisions from the D41 field (`algo.workloads.synth.field_decisions`,
``--reuse r``, partial 0.2 at r = 0.3 and 0.04 at r = 0.8, 8 x 8 regions, persist 0.9, seed 1).

Per op it prints the band-tiles, the array cycles of the trace model (`sim.timing.compact.band_schedule` with the
model's fill and buffers: first slot to last read), of the controller without a stage (`accel_schedule`) and with
it (`stage_schedule`; the gather idealised at one round: consecutive tokens), the slot-cycles waiting for a
word (``late``) and for a buffer (``fill_wait``), and the stage's weights read per column against D92's count
(`shared_stage_weights` on the trace model's schedule), and D94's prefetch rule (bands known ahead) on the staged
controller's schedule, as a share of D92's.

``python -m tests.rtl.dstage_check R [F]`` (R the reuse share; F frames, default 3). With ``--regs N``,
``--defer next|behind`` or ``--barrier first|every`` (`stage_schedule`'s options, docs/decisions.md D100) it prints instead, per op, the
model's cycles and the early choice's without and with the option: cycles, late slot-cycles and stage weights as
a share of D92's count on the model's schedule; ``--ops a,b`` keeps only those ops.
"""

from __future__ import annotations

import numpy as np

from algo.workloads.synth import SynthField, field_decisions, synth_ops
from hw import discard
from hw.config import load_config
from hw.delta_accel import DeltaAccel
from hw.delta_accel_host import stage_plan
from sim.plan import plan_op
from sim.timing import delta as rules
from sim.timing.compact import band_schedule, shared_stage_weights
from sim.timing.delta_accel import accel_schedule, stage_schedule, staged_tiles
from tests.rtl.stage_port_check import prefetch


def main(r: float, frames: int = 3, opts: dict | None = None, only: set | None = None) -> None:
    cfg = load_config("kaleido-16nm-128x128-balanced")
    B = cfg.compact_bands  # noqa: N806
    full, ops = synth_ops("wan2.1-t2v-1.3b", "480p", [0], [0])
    grid = (frames, 16, 32)
    fld = SynthField(reuse=r, partial=0.04 if r >= 0.8 else 0.2, region=(8, 8), persist=0.9)
    rng = np.random.default_rng(1)
    for op in ops:
        if op.name.startswith("cross") or op.name == "pv":  # pv: K = 32,760 keys, 176 slices (too slow here)
            continue
        groups = plan_op(op, full, cfg, None, op.name in ("qk", "pv")).groups
        N = min(op.N, 2 * cfg.array_cols)  # noqa: N806
        dec = field_decisions(rng, grid, groups, 1, fld)[0]
        if only and op.name not in only:  # skipped after its draw: the other ops' decisions stay the same
            continue
        st = staged_tiles(dec, grid, groups, cfg, op.K, N)
        if st is None:
            print(f"{op.name}: not through the stage")
            continue
        T = len(st["s_seq"])  # noqa: N806
        sliced = not rules.stages(cfg, op.K, groups)
        gl = [(0, int(w), "f") for w in st["widths"]]
        gl = [(int(np.sum(st["widths"][:g])), int(np.sum(st["widths"][:g + 1])), "f") for g in range(len(gl))]
        big = cfg.model_copy(update={"partial_regs": max(cfg.partial_regs, len(gl))})  # the plan's sizes only
        acc = discard(DeltaAccel(big, max_tokens=dec.shape[0], max_k=int(st["widths"].sum()), max_n=N,
                                 max_tiles=T, stage=True, entries=2 * B))
        tiles = [(int(g), 0) for g in st["group"]]  # column blocks only move the fill's source: timing alone here
        plan, nbuf, size = stage_plan(acc, gl, tiles, st["segment"], sliced)
        ones = np.ones(T, dtype=np.int64)
        band, first, last = band_schedule(st["s_seq"], st["rows"], cfg, st["segment"], st["fill"], st["buffers"])
        model = int(last.max() - first.min() + 1)
        if opts:
            args = (st["s_seq"], st["rows"], st["widths"][st["group"]], ones, st["paired"],
                    *([p[k] for p in plan] for k in ("seg", "sbuf", "fcount", "saddr")), cfg, 2 * B, 32)
            shared = shared_stage_weights(st["segment"], st["group"], st["paired"], band, first, st["widths"], B)
            cols = []
            for name, kw in (("early", {}), ("option", opts)):
                e = stage_schedule(*args, early=True, **kw)
                cyc = int(e["last"].max() - e["first"].min() + 1)
                cols.append(f"{name} {cyc:7d} ({cyc / model - 1:+.2%}) late {e['late']:6d} weights "
                            f"{e['weights'] / max(1, shared):.3f} x D92 deferred {e['deferred']:6d}")
            print(f"{op.name:7s} T {T:5d} model {model:7d}  " + "  ".join(cols), flush=True)
            continue
        _b, f0, l0, _g = accel_schedule(st["s_seq"], st["rows"], st["widths"][st["group"]], ones, cfg, 2 * B, 32)
        m = stage_schedule(st["s_seq"], st["rows"], st["widths"][st["group"]], ones, st["paired"],
                           *([p[k] for p in plan] for k in ("seg", "sbuf", "fcount", "saddr")), cfg, 2 * B, 32)
        e = stage_schedule(st["s_seq"], st["rows"], st["widths"][st["group"]], ones, st["paired"],
                           *([p[k] for p in plan] for k in ("seg", "sbuf", "fcount", "saddr")), cfg, 2 * B, 32,
                           early=True)
        shared = shared_stage_weights(st["segment"], st["group"], st["paired"], band, first, st["widths"], B)
        pre = prefetch(st["segment"], st["group"], st["paired"], m["band"], m["first"], m["last"], st["widths"], B, 3)
        print(f"{op.name:7s} T {T:5d} fill {st['fill']:3d}/{size:3d} buffers {st['buffers']:2d}/{nbuf:2d}  cycles: "
              f"model {model:7d} unstaged {int(l0.max() - f0.min() + 1):7d} staged "
              f"{int(m['last'].max() - m['first'].min() + 1):7d}  late {m['late']:7d} fill_wait {m['fill_wait']:6d}"
              f"  weights {m['weights']:8d} / D92 {shared:8d} = {m['weights'] / max(1, shared):.3f}, / prefetch on "
              f"this schedule {pre['weights'] / max(1, shared):.3f} x D92", flush=True)
        shared_e = shared_stage_weights(st["segment"], st["group"], st["paired"], e["band"], e["first"], st["widths"], B)
        same = bool(np.array_equal(e["band"], band) and np.array_equal(e["first"] - e["first"].min(),
                                                                       first - first.min()))
        print(f"{'':7s} early choice: cycles {int(e['last'].max() - e['first'].min() + 1):7d} "
              f"({(e['last'].max() - e['first'].min() + 1) / model - 1:+.2%} vs model)  late {e['late']:6d} "
              f"fill_wait {e['fill_wait']:6d}  weights {e['weights']:8d} = {e['weights'] / max(1, shared):.3f} x D92, "
              f"{e['weights'] / max(1, shared_e):.3f} x D92's count on this schedule"
              f"  bands and first slots as the model's: {same}", flush=True)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.rtl.dstage_check")
    ap.add_argument("reuse", type=float)
    ap.add_argument("frames", type=int, nargs="?", default=3)
    ap.add_argument("--regs", type=int, default=None, help="word registers per band (default 3)")
    ap.add_argument("--defer", choices=("next", "behind"), default=None, help="stage_schedule(defer=...)")
    ap.add_argument("--barrier", choices=("first", "every"), default=None, help="stage_schedule(barrier=...)")
    ap.add_argument("--ops", default="", help="comma-separated op names to keep")
    a = ap.parse_args()
    o = {k: v for k, v in (("regs", a.regs), ("defer", a.defer), ("barrier", a.barrier)) if v}
    main(a.reuse, a.frames, o, set(filter(None, a.ops.split(","))))
