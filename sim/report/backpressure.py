"""The balanced block with ``kaleido_dcore``'s back-pressure into ``kaleido_daccel`` (docs/decisions.md D116): the
delta organisation on `sim.report.organisations`' synthetic field (8 x 8 region), ``combine_timing = "rtl"``, per
variant of the row FIFO's entries per drain port and the segment count banks (0 = no such rule), one JSON line each:
total speedup and energy against dense, and per op the core's ``done``, the cycles the issue was held (``held``), the
cycles the array was held (``frozen``), ``ahead`` and ``fifo_max`` (`sim.timing.delta_core.held_done` /
`ways_done` with ``detail``).

    python -m sim.report.backpressure 0.8 0:0 8:8 0:8 64:8

Deterministic (the field's seed); one `synth_trace`, then `simulate_trace` per variant (about 30 s and 4 GB at
r = 0.8, 2 min and 11 GB at r = 0.3 on the balanced preset)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    """``REUSE FIFO_PER_PORT:BANKS ...``; exit 2 with one line on bad arguments."""
    import sim.engines.model as model
    import sim.timing.delta_core as dcore
    from algo.trace import load_trace
    from algo.workloads.synth import SynthField, synth_trace
    from hw.config import load_config, with_organisation
    from sim.report.organisations import FIELD, summary
    from sim.results import state_notes

    try:
        reuse = float(argv[0])
        variants = [tuple(int(x) for x in v.split(":")) for v in argv[1:]]
        if not variants or any(len(v) != 2 or min(v) < 0 for v in variants):
            raise ValueError
    except (ValueError, IndexError):
        print("usage: python -m sim.report.backpressure REUSE FIFO_PER_PORT:BANKS [...] (non-negative ints)",
              file=sys.stderr)
        return 2
    cur: dict = {"op": None}
    detail: list = []
    sim_op, held, ways = model.simulate_op, dcore.held_done, dcore.ways_done

    def op_named(op, *a, **k):
        cur["op"] = op.name
        return sim_op(op, *a, **k)

    def detailed(fn):
        def run(*a, **k):
            d = fn(*a, **(k | {"detail": True}))
            detail.append((cur["op"], d))
            return d if k.get("detail") else d["done"]  # the model asks for the detail itself (D118's bypass count)
        return run

    model.simulate_op, dcore.held_done, dcore.ways_done = op_named, detailed(held), detailed(ways)
    try:
        f = FIELD
        base = load_config("kaleido-16nm-128x128-balanced")
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "synth.npz")
            synth_trace(path, f["model"], f["resolution"], SynthField(reuse, f["partial"], (8, 8), f["persist"]),
                        blocks=f["blocks"], steps=f["steps"], seed=f["seed"])
            tr = load_trace(path)
            for fp, nb in variants:
                detail.clear()
                cfg = with_organisation(base.model_copy(update={"combine_timing": "rtl", "dcore_fifo_per_port": fp,
                                                                "dcore_count_banks": nb}), "delta")
                res = model.simulate_trace(tr, cfg)
                s = summary(res, len(state_notes(res, tr, cfg)))
                per: dict = {}
                for name, d in detail:
                    p = per.setdefault(name, {"done": 0, "held": 0, "frozen": 0, "ahead": 0, "fifo_max": 0})
                    p["done"] += d["done"]
                    p["held"] += d.get("held", 0)
                    p["frozen"] += d.get("frozen", 0)
                    p["ahead"] = max(p["ahead"], d["ahead"])
                    p["fifo_max"] = max(p["fifo_max"], d.get("fifo_max", 0))
                print(json.dumps({"reuse": reuse, "fifo_per_port": fp, "banks": nb, "total": s["total_speedup"],
                                  "energy": s["energy_vs_dense"], "per": per}), flush=True)
    finally:
        model.simulate_op, dcore.held_done, dcore.ways_done = sim_op, held, ways
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
