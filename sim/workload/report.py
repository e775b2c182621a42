"""Report tables and figures of workload results (`sim.workload.simulate`), for `sim.report.write_report`.

- ``workload_summary.md``: per results file, the workload, device(s), total time, reference time
  and speedup (scheduler alone and with reuse), communication per rank (bytes against the
  reference's, time, exposed time, by pattern) and the schedule per step;
- ``workload_steps.csv``: one row per results file and step: patch size, tokens, time, reference
  time, communication bytes (and the reference's), communication and exposed time;
- ``workload_comm_layers.csv``: one row per results file, step and layer (transformer block):
  bytes each rank sends against the reference's (plain ring context parallelism for DiTango);
- ``workload_schedule.png``/``.pdf``: per results file, step time against the reference's per step
  (bars, ms, log scale) with the patch multiple of each step (steps, right axis) and the speedup in
  the title; a caption line names workload, device and notes;
- ``workload_scaling.png``/``.pdf`` (when results of one generator, model, resolution and device
  kind at two or more device counts are given): speedup against P, ``time(P_min) / time(P)``, for
  the workload and for its reference, with the linear ``P / P_min`` line.
"""

from __future__ import annotations

import csv
import io
import textwrap
from pathlib import Path

import matplotlib.pyplot as plt

TABLES = ("workload_summary.md", "workload_steps.csv", "workload_comm_layers.csv")
FIGURES = ("workload_schedule", "workload_scaling")
STEP_FIELDS = ("results", "generator", "device", "devices", "step", "patch_multiple", "tokens", "time_us",
               "dense_time_us", "reference_time_us", "comm_bytes", "reference_comm_bytes", "comm_us",
               "exposed_comm_us")


def _speed(v) -> str:
    return "-" if v is None else f"{v:.2f}x"


def summary_markdown(items: list[tuple[str, dict]]) -> str:
    """The ``workload_summary.md`` text."""
    lines = ["# Workloads", ""]
    for label, d in items:
        w, dev = d["workload"], d["device"]
        lines += [f"## {label}: {w['generator']} on {dev['count']} x {dev['name']}", "",
                  f"- workload: {w['model']} {w['resolution']}, grid {'x'.join(map(str, w['grid']))}; {w['notes']}",
                  f"- total time: {d['total_time_us'] / 1e6:.4g} s (reuse off: {d['dense_total_time_us'] / 1e6:.4g} s)"]
        if d.get("reference_total_time_us") is not None:
            lines += [f"- reference ({w['reference']}): {d['reference_dense_total_time_us'] / 1e6:.4g} s",
                      f"- speedup: {_speed(d['speedup'])} (scheduler alone {_speed(d['dense_speedup'])}, "
                      f"reuse on top {_speed(d['reuse_speedup'])})"]
        c = d.get("comm")
        if c and (c["bytes_per_rank"] or c.get("reference_bytes_per_rank")):
            ref = c.get("reference_bytes_per_rank")
            pats = ", ".join(f"{k} {v['bytes'] / 1e9:.4g} GB in {v['time_us'] / 1e6:.4g} s" for k, v in c["by_pattern"].items())
            lines.append(f"- communication per rank: {c['bytes_per_rank'] / 1e9:.4g} GB"
                         + (f" (reference {ref / 1e9:.4g} GB, {c['bytes_per_rank'] / ref:.1%})" if ref else "")
                         + f"; time {c['time_us'] / 1e6:.4g} s, exposed {c['exposed_time_us'] / 1e6:.4g} s"
                         + (f" ({pats})" if pats else ""))
        if any("patch_multiple" in r for r in d["per_step"]):
            lines.append("- schedule (patch multiple per step): "
                         + "".join(str(r.get("patch_multiple", "?")) for r in d["per_step"]))
        lines.append("")
    return "\n".join(lines) + "\n"


def step_rows(items) -> list[dict]:
    return [{"results": lb, "generator": d["workload"]["generator"], "device": d["device"]["name"],
             "devices": d["device"]["count"], "step": r["step"], "patch_multiple": r.get("patch_multiple", ""),
             "tokens": r.get("tokens", ""), "time_us": round(r["time_us"], 6),
             "dense_time_us": round(r["dense_time_us"], 6), "reference_time_us": round(r["reference_time_us"], 6),
             "comm_bytes": r.get("comm_bytes", ""), "reference_comm_bytes": r.get("reference_comm_bytes", ""),
             "comm_us": round(r["comm_us"], 6) if "comm_us" in r else "",
             "exposed_comm_us": round(r["exposed_comm_us"], 6) if "exposed_comm_us" in r else ""}
            for lb, d in items for r in d["per_step"]]


LAYER_FIELDS = ("results", "generator", "devices", "step", "layer", "bytes", "reference_bytes", "ratio")


def layer_rows(items) -> list[dict]:
    """One row per results file, denoising step and layer (transformer block; empty: events of no
    block) with the bytes each rank sends and the reference's (plain ring context parallelism for
    DiTango), from the results' ``comm.by_step_layer``."""
    rows = []
    for lb, d in items:
        for r in (d.get("comm") or {}).get("by_step_layer", []):
            ref = r["reference_bytes"]
            rows.append({"results": lb, "generator": d["workload"]["generator"], "devices": d["device"]["count"],
                         "step": r["step"], "layer": "" if r["layer"] is None else r["layer"],
                         "bytes": r["bytes"], "reference_bytes": "" if ref is None else ref,
                         "ratio": round(r["bytes"] / ref, 6) if ref else ""})
    return rows


def schedule_figure(items):
    """Per results file: time per step vs the reference (bars) and the patch multiple (steps)."""
    fig, axes = plt.subplots(len(items), 1, figsize=(11.0, 3.8 * len(items)), squeeze=False)
    for ax, (label, d) in zip(axes[:, 0], items, strict=True):
        steps = [r["step"] for r in d["per_step"]]
        ax.bar([s - 0.2 for s in steps], [r["reference_time_us"] / 1e3 for r in d["per_step"]], 0.4,
               color="#c8c8c8", label=f"reference ({d['workload']['reference']})")
        ax.bar([s + 0.2 for s in steps], [r["time_us"] / 1e3 for r in d["per_step"]], 0.4, color="#3c3c3c",
               label=f"{d['workload']['generator']} schedule")
        ax.set_yscale("log")
        ax.set_xlabel("denoising step")
        ax.set_ylabel("time per step (ms, log)")
        ax.set_title(f"{label}: {d['workload']['model']} {d['workload']['resolution']} on {d['device']['count']} x "
                     f"{d['device']['name']}, speedup {_speed(d['speedup'])}", fontsize=10)
        if any("patch_multiple" in r for r in d["per_step"]):
            ax2 = ax.twinx()
            ax2.step(steps, [r.get("patch_multiple", 1) for r in d["per_step"]], where="mid", color="#d62728",
                     label="patch multiple (p, 2p, 4p)")
            ax2.set_ylabel("patch size (multiple of p)", color="#d62728")
            ax2.set_yticks([1, 2, 4], ["p", "2p", "4p"])
            ax2.set_ylim(0.5, 4.5)
            ax2.legend(fontsize=7, loc="upper right")
        ax.legend(fontsize=7, loc="upper left")
    cap = "; ".join(f"{lb}: {Path(d['workload']['path']).name or '?'}, device {d['device']['name']}"
                    for lb, d in items)
    fig.text(0.01, 0.005, "\n".join(textwrap.wrap(cap, 170)), fontsize=6, va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return fig


def scaling_groups(items) -> dict[str, list[tuple[str, dict]]]:
    """Results by (generator, model, resolution, device name) with two or more device counts, sorted by P."""
    groups: dict[str, dict] = {}
    for lb, d in items:
        w = d["workload"]
        key = f"{w['generator']} {w['model']} {w['resolution']} on {d['device']['name']}"
        groups.setdefault(key, {}).setdefault(d["device"]["count"], (lb, d))
    return {k: [v[p] for p in sorted(v)] for k, v in groups.items() if len(v) >= 2}


def scaling_figure(groups):
    fig, ax = plt.subplots(figsize=(8.0, 5.0))
    p_all = set()
    for i, (name, its) in enumerate(groups.items()):
        ps = [d["device"]["count"] for _, d in its]
        p_all.update(ps)
        t0, r0 = its[0][1]["total_time_us"], its[0][1].get("reference_total_time_us")
        c = plt.get_cmap("tab10")(i)
        ax.plot(ps, [t0 / d["total_time_us"] for _, d in its], "o-", color=c, label=name)
        if r0:
            ax.plot(ps, [r0 / d["reference_total_time_us"] for _, d in its], "s--", color=c,
                    label=f"reference ({its[0][1]['workload']['reference']})")
    pmin = min(p_all)
    ax.plot(sorted(p_all), [p / pmin for p in sorted(p_all)], ":", color="#808080", label="linear")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xticks(sorted(p_all), [str(p) for p in sorted(p_all)])
    ax.set_xlabel("devices P")
    ax.set_ylabel(f"speedup over P = {pmin} (x, log)")
    ax.set_title("Scaling with the device count", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def write(items, out: Path, written: list[Path], save_figure, atomic_write_bytes) -> None:
    """Write the workload tables and figures into ``out`` (paths appended to ``written``)."""
    written.append(atomic_write_bytes(out / "workload_summary.md", summary_markdown(items).encode()))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=STEP_FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(step_rows(items))
    written.append(atomic_write_bytes(out / "workload_steps.csv", buf.getvalue().encode()))
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=LAYER_FIELDS, lineterminator="\n")
    w.writeheader()
    w.writerows(layer_rows(items))
    written.append(atomic_write_bytes(out / "workload_comm_layers.csv", buf.getvalue().encode()))
    save_figure(schedule_figure(items), out, "workload_schedule", written)
    groups = scaling_groups(items)
    if groups:
        save_figure(scaling_figure(groups), out, "workload_scaling", written)
