"""Simulation results: the results file's format name and version, and the diagnostics that explain a
result (`result_notes`). The model engine (`sim.engines.model`), the RTL engine (`sim.engines.rtl`)
and the report (`sim.report`) share these."""

from __future__ import annotations

RESULTS_FORMAT = "kaleido-results"
RESULTS_VERSION = 1


def result_notes(res: dict, tr, cfg) -> list[str]:
    """One short line per surprising result (Kaleido slower or costlier than dense) naming the likely cause."""
    notes = []
    if res["cycles"] > res["dense_cycles"]:
        f, h, w = tr.grid
        if (h * w) % cfg.array_rows:
            which = "every" if h * w < cfg.array_rows else "each frame's last"
            why = (f"a reuse tile holds one frame's positions (docs/decisions.md D5) and H*W = {h * w} is not a "
                   f"multiple of the {cfg.array_rows} array rows, so {which} tile is partly empty")
        else:
            why = "reuse slots cost more than they save on these ops (per-op cycles in the --json results)"
        notes.append(f"Kaleido is slower than dense here ({res['speedup']:.2f}x): {why}")
    elif res.get("total_cycles", 0) > res.get("dense_total_cycles", 0):
        st, dst = res["stall_cycles"], res["dense_stall_cycles"]
        extra = max((st.get(k, 0) - dst.get(k, 0), k) for k in st)
        notes.append(f"with stalls Kaleido is slower than dense ({res['total_cycles']:,} vs "
                     f"{res['dense_total_cycles']:,} cycles): mostly {extra[1]} stalls, +{extra[0]:,} cycles "
                     "(docs/architecture.md, 'Beyond the array')")
    if "energy_pj" in res and res["energy_pj"] > res["dense_energy_pj"]:
        eb, db = res["energy_breakdown_pj"], res["dense_energy_breakdown_pj"]
        extra = sorted(((eb[k] - db.get(k, 0.0), k) for k in eb), reverse=True)[:2]
        parts = ", ".join(f"{k} +{v / 1e6:.3g} uJ" for v, k in extra if v > 0)
        notes.append(f"Kaleido spends more energy than dense (mostly {parts}); see docs/energy.md")
    return notes
