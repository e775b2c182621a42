"""What the compact controller's weight port (`sim.timing.compact_accel.port_schedule`, docs/decisions.md D109) reads
and costs in cycles against the trace model, on the balanced preset as compact: per op of one Wan2.1-1.3B block (its
K and groups at 480p as `sim.plan.plan_op` gives them on that config; cross attention and pv left out, as
`tests.rtl.dstage_check`), on a small token grid (``F`` frames of 16 x 32 positions; N cut to 256, two column
blocks), decisions from the D41 field (`algo.workloads.synth.field_decisions`, ``--reuse r``, partial 0.2 at r = 0.3
and 0.04 at r = 0.8, 8 x 8 regions, persist 0.9, seed 1), the model's chunk frames.

The band-tiles are the trace model's (`sim.timing.compact.compact_tiles`, each column block in turn, as
`sim.engines.model._compact_timing` issues them); the gather is idealised at one round (consecutive tokens).
Per op it prints the band-tiles, the array cycles of the trace model (`band_schedule`, first slot to last), of the
controller with D97's weight copies (`sim.timing.delta_accel.accel_schedule`) and with the weight port, the
slot-cycles the port's bands waited for a word (``late``), and the weights per column the port reads against D92's
count on the trace model's schedule (`shared_stage_weights`, what `sim.engines.model` charges) and against one read
per band-tile word.

``python -m tests.rtl.cport_check R [F]`` (R the reuse share; F frames, default 3); ``--ops a,b`` keeps only those
ops (the others' decisions are still drawn); ``--barrier first`` or ``every`` runs the port with the bands started
together (`port_schedule`'s segment barrier, not built: the op's first B band-tiles, or each column block's;
docs/decisions.md D117).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from algo.workloads.synth import SynthField, field_decisions, synth_ops
from hw.config import load_config, with_organisation
from sim.plan import plan_op
from sim.timing.compact import band_schedule, chunk_frames, compact_tiles, paired_tiles, shared_stage_weights
from sim.timing.compact_accel import port_schedule
from sim.timing.delta_accel import accel_schedule


def main(r: float, frames: int = 3, only: set | None = None, barrier: str = "off") -> dict:
    """Print one line per op (module docstring); returns ``{op: (port weights, D92 weights, no-sharing weights)}``."""
    cfg = with_organisation(load_config("kaleido-16nm-128x128-balanced"), "compact")
    B = cfg.compact_bands  # noqa: N806
    full, ops = synth_ops("wan2.1-t2v-1.3b", "480p", [0], [0])
    grid = (frames, 16, 32)
    fld = SynthField(reuse=r, partial=0.04 if r >= 0.8 else 0.2, region=(8, 8), persist=0.9)
    rng = np.random.default_rng(1)
    out = {}
    for op in ops:
        if op.name.startswith("cross") or op.name == "pv":
            continue
        groups = plan_op(op, full, cfg, None, op.name in ("qk", "pv")).groups
        N = min(op.N, 2 * cfg.array_cols)  # noqa: N806
        dec = field_decisions(rng, grid, groups, 1, fld)[0]
        if only and op.name not in only:
            continue
        n_cb = -(-N // cfg.array_cols)
        fw = chunk_frames(cfg, grid[0], op.K, N, groups, op.name == "qk", op.name)
        t = compact_tiles(dec, grid, groups, cfg, fw, 4)
        s_seq, rows = np.tile(t[0], n_cb), np.tile(t[2] + t[3], n_cb)
        grp, paired = np.tile(t[1], n_cb), np.tile(paired_tiles(t, groups), n_cb)
        cbs = np.repeat(np.arange(n_cb), len(t[0]))
        widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
        bop = SimpleNamespace(s_seq=s_seq, rows=rows, tiles=[SimpleNamespace(group=int(g), cb=int(c),
                                                                             tokens=np.arange(int(v)))
                                                             for g, c, v in zip(grp, cbs, rows, strict=True)])
        band, first, last = band_schedule(s_seq, rows, cfg)
        model = int(last.max() - first.min() + 1)
        ones = np.ones(len(s_seq), dtype=np.int64)
        _b, f0, l0, _g = accel_schedule(s_seq, rows, widths[grp], ones, cfg, 2 * B, 32)
        seg = np.r_[1, np.diff(cbs) != 0].astype(np.int64) if barrier == "every" else np.r_[1, np.zeros(len(cbs) - 1,
                                                                                                        dtype=np.int64)]
        p = port_schedule(bop, groups, cfg, 2 * B, 32, None, barrier, seg)
        d92 = shared_stage_weights(cbs, grp, paired, band, first, widths, B)
        every = int(widths[grp].sum())
        cyc = int(p["last"].max() - p["first"].min() + 1)
        out[op.name] = (p["weights"], d92, every)
        print(f"{op.name:7s} T {len(s_seq):5d} fw {fw}  cycles: model {model:7d} copies {int(l0.max() - f0.min() + 1):7d}"
              f" port {cyc:7d} ({cyc / model - 1:+.2%} vs model)  late {p['late']:6d}  weights {p['weights']:8d} = "
              f"{p['weights'] / max(1, d92):.3f} x D92 ({d92}), {p['weights'] / max(1, every):.3f} x no sharing "
              f"({every}); deferred {p['deferred']}", flush=True)
    if out:
        pw, d9, ev = (sum(v[i] for v in out.values()) for i in range(3))
        print(f"all: weights {pw} = {pw / max(1, d9):.3f} x D92 ({d9}), {pw / max(1, ev):.3f} x no sharing ({ev})")
    return out


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m tests.rtl.cport_check")
    ap.add_argument("reuse", type=float)
    ap.add_argument("frames", type=int, nargs="?", default=3)
    ap.add_argument("--ops", default="", help="comma-separated op names to keep")
    ap.add_argument("--barrier", default="off", choices=("off", "first", "every"))
    a = ap.parse_args()
    main(a.reuse, a.frames, set(filter(None, a.ops.split(","))), a.barrier)
