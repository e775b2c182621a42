"""The balanced block with ``kaleido_dcore``'s back-pressure into ``kaleido_daccel`` (docs/decisions.md D116): the
delta organisation on `sim.report.organisations`' synthetic field (8 x 8 region), ``combine_timing = "rtl"``, per
variant of the row FIFO's entries per drain port and the segment count banks (0 = no such rule), one JSON line each:
total speedup and energy against dense, and per op name (its ops summed) the core's ``done``, the cycles the issue
was held (``held``), the cycles the array was held (``frozen``), the largest ``ahead`` and ``fifo_max``: the per-op
``core`` the model publishes (`sim.timing.delta_core.issue_core` on unstaged ops since D137, before it `held_done` /
`ways_done`; `sim.timing.delta_core.stage_core` on staged ones since D129; ``held``, ``frozen`` and ``fifo_max`` 0
where neither rule is on).

    python -m sim.report.backpressure 0.8 0:0 8:8 0:8 64:8
    python -m sim.report.backpressure --preset tiny-8x8 --resolution 64x64x5 0.8 8:8

``--preset`` (default the balanced preset) and ``--resolution`` (default the field's 480p; `algo.workloads.synth`'s
``WxHxF`` too) change the field's hardware and size. Bad arguments, an unknown preset, a field or variant the
hardware cannot run: one line on stderr, exit 2, nothing on stdout. Deterministic (the field's seed); one
`synth_trace`, then `simulate_trace` per variant (about 30 s and 4 GB at r = 0.8, 2 min and 11 GB at r = 0.3 on the
balanced preset at 480p)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from hw.config import BALANCED_PRESET

#: The usage line printed on bad arguments.
USAGE = ("usage: python -m sim.report.backpressure [--preset NAME] [--resolution RES] REUSE FIFO_PER_PORT:BANKS [...] "
         "(REUSE a fraction; FIFO_PER_PORT, BANKS non-negative ints)")
#: The preset the report runs by default (the one docs/decisions.md D116 measures).
PRESET = BALANCED_PRESET


def per_op(res: dict) -> dict[str, dict]:
    """Per op name of a delta ``combine_timing = "rtl"`` result (`sim.engines.model.simulate_trace`), the core's
    detail over its ops (each op's ``core``): ``done``, ``held`` and ``frozen`` summed (cycles), ``ahead`` and
    ``fifo_max`` the largest (segments, rows). Raises ValueError naming the first op without a ``core`` (another
    organisation or the model's combine timing)."""
    out: dict[str, dict] = {}
    for o in res["per_op"]:
        d = o.get("core")
        if d is None:
            raise ValueError(f"op {o['name']} (block {o['block']}, step {o['step']}) has no core detail: the report "
                             "needs the delta organisation with combine_timing = rtl")
        p = out.setdefault(o["name"], {"done": 0, "held": 0, "frozen": 0, "ahead": 0, "fifo_max": 0})
        p["done"] += d["done"]
        p["held"] += d.get("held", 0)
        p["frozen"] += d.get("frozen", 0)
        p["ahead"] = max(p["ahead"], d["ahead"])
        p["fifo_max"] = max(p["fifo_max"], d.get("fifo_max", 0))
    return out


def _parse(argv: list[str]) -> tuple[str, str | None, float, list[tuple[int, int]]]:
    """``(preset, resolution or None, reuse, [(fifo_per_port, banks)])``; ValueError on anything else."""
    args, opts = list(argv), {"--preset": PRESET, "--resolution": None}
    while args and args[0] in opts:
        if len(args) < 2:
            raise ValueError
        opts[args[0]] = args[1]
        args = args[2:]
    reuse = float(args[0])
    variants = [tuple(int(x) for x in v.split(":")) for v in args[1:]]
    if not variants or any(len(v) != 2 or min(v) < 0 for v in variants):
        raise ValueError
    return opts["--preset"], opts["--resolution"], reuse, variants


def main(argv: list[str]) -> int:
    """``[--preset NAME] [--resolution RES] REUSE FIFO_PER_PORT:BANKS ...``: one JSON line a variant on stdout;
    0, or 2 with one line on stderr on bad arguments (module docstring)."""
    from algo.trace import load_trace
    from algo.workloads.synth import SynthField, synth_trace
    from hw.config import config_from_dict, load_config, with_organisation
    from sim.engines.model import check_simulable, simulate_trace
    from sim.report.organisations import FIELD, summary
    from sim.results import state_notes

    try:
        preset, resolution, reuse, variants = _parse(argv)
    except (ValueError, IndexError):
        print(USAGE, file=sys.stderr)
        return 2
    f = FIELD
    with tempfile.TemporaryDirectory() as tmp:
        try:  # everything checked before the first line is printed
            base = load_config(preset).model_dump()
            cfgs = [with_organisation(config_from_dict(base | {"combine_timing": "rtl", "dcore_fifo_per_port": fp,
                                                               "dcore_count_banks": nb}), "delta")
                    for fp, nb in variants]
            path = Path(tmp, "synth.npz")
            synth_trace(path, f["model"], resolution or f["resolution"],
                        SynthField(reuse, f["partial"], (8, 8), f["persist"]), blocks=f["blocks"], steps=f["steps"],
                        seed=f["seed"])
            tr = load_trace(path)
            for cfg in cfgs:
                check_simulable(tr, cfg)
        except ValueError as err:  # ConfigError, SynthError, SimError, TraceError
            print(f"sim.report.backpressure: {err}".splitlines()[0], file=sys.stderr)
            return 2
        for (fp, nb), cfg in zip(variants, cfgs, strict=True):
            res = simulate_trace(tr, cfg)
            s = summary(res, len(state_notes(res, tr, cfg)))
            print(json.dumps({"reuse": reuse, "fifo_per_port": fp, "banks": nb, "total": s["total_speedup"],
                              "energy": s["energy_vs_dense"], "per": per_op(res)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
