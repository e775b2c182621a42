"""Time a workload (`algo.workloads.format`) on P identical devices: results per step and per device.

Compute: each device runs, per step, the ops of its rank (``rank`` null: every rank) one after
another; an op copy takes the device's time (`sim.workload.device`: timed once per shape; the two
ops of an attention pair timed together, fused where the chip's score buffer holds the keys), times
its ``repeat``. Per step and device: ``compute_us`` = that sum.

Communication (P > 1; `sim.workload.collectives` on `sim.workload.network`): every event's time
(collective time x ``repeat``) is charged to every rank. Overlap rule: the events of one (step,
block) that name an ``overlap`` phase hide behind that rank's compute of the ops of that phase in
the same (step, block): ``exposed = max(0, C - X)`` with C the events' summed time and X the
ops' summed time (x repeat); an event with no overlap phase is exposed in full. Per step and
device: ``time = compute_us + exposed_comm_us``. The step's time is the slowest device's; the run's ``total_time_us`` the sum over steps. The reference run (the workload's
``reference``, e.g. DDiT at the base patch on every step) is timed the same way; ``speedup`` =
reference time / workload time. On Kaleido chips ``dense_*`` fields give the same ops with reuse
off, so reuse and the generator's own saving can be told apart.

Results (``format`` `RESULTS_FORMAT`, ``version`` `RESULTS_VERSION`): ``workload`` (path,
generator, model, resolution, grid, devices, params, notes), ``device`` (kind, name, config or
roofline parameters, ``count`` P), ``total_time_us``, ``dense_total_time_us``,
``reference_total_time_us``, ``speedup``, ``dense_speedup``, ``per_step`` (one row per step: step
fields of the workload such as the patch size and tokens, ``time_us``, ``dense_time_us``,
``reference_time_us``, ``comm_us``/``exposed_comm_us`` (slowest rank), ``comm_bytes`` and
``reference_comm_bytes`` (payload per rank, `comm_volume`) and ``per_device`` ``[{"rank",
"compute_us", "dense_compute_us", "comm_us", "exposed_comm_us"}]``), ``comm`` (run totals: payload
bytes per rank, communication and exposed time, both by pattern, and the reference's bytes),
``by_op_type`` (time per op type over the run) and ``unique_ops_timed`` (how many distinct op
shapes were timed).
"""

from __future__ import annotations

from collections.abc import Callable

from algo.workloads.format import Workload, WorkloadOp
from sim.engines.model import SimError

RESULTS_FORMAT = "kaleido-workload-results"
RESULTS_VERSION = 1


def _rank_compute(ops: list[WorkloadOp], device, devices: int, progress=None, label: str = "") -> tuple[dict, dict, dict]:
    """``({(step, rank): (t, dense_t)}, {op type: t}, {op type: dense t})`` over the ops."""
    from sim.workload.device import pair_partners

    per: dict[tuple[int, int], list[float]] = {}
    by_type: dict[str, float] = {}
    by_type_dense: dict[str, float] = {}
    partners = pair_partners(ops)
    for i, op in enumerate(ops):
        if progress is not None:
            progress(i, len(ops), f"{label}{op.name} step {op.step}")
        r = device.time(op, ops[partners[i]] if i in partners else None)
        t, td = r["time_us"] * op.repeat, r["dense_time_us"] * op.repeat
        for rank in (range(devices) if op.rank is None else (op.rank,)):
            acc = per.setdefault((op.step, rank), [0.0, 0.0])
            acc[0] += t
            acc[1] += td
        k = 1 if op.rank is None else devices  # per-device time: a rank-specific op counts 1/P of the fleet
        by_type[op.name] = by_type.get(op.name, 0.0) + t / k
        by_type_dense[op.name] = by_type_dense.get(op.name, 0.0) + td / k
    return per, by_type, by_type_dense


def _phase_compute(ops: list[WorkloadOp], device, devices: int) -> dict:
    """``{(step, block, phase, rank): compute time}`` (x repeat) of the ops."""
    from sim.workload.device import pair_partners

    out: dict[tuple, float] = {}
    partners = pair_partners(ops)
    for i, op in enumerate(ops):
        t = device.time(op, ops[partners[i]] if i in partners else None)["time_us"] * op.repeat
        for rank in (range(devices) if op.rank is None else (op.rank,)):
            k = (op.step, op.block, op.phase, rank)
            out[k] = out.get(k, 0.0) + t
    return out


def comm_exposure(ops: list[WorkloadOp], comms: list, device, devices: int, net) -> dict:
    """``{(step, rank): (comm_us, exposed_us)}`` under the overlap rule (module docstring)."""
    from sim.workload.collectives import collective_time_us

    if not comms:
        return {}
    comp = _phase_compute(ops, device, devices)
    groups: dict[tuple, float] = {}
    for c in comms:
        t = collective_time_us(c.pattern, c.bytes, c.group, net, c.distance) * c.repeat
        k = (c.step, c.block, c.overlap)
        groups[k] = groups.get(k, 0.0) + t
    out: dict[tuple, list[float]] = {}
    for (step, block, phase), t in groups.items():
        for rank in range(devices):
            hidden = 0.0 if phase is None else min(t, comp.get((step, block, phase, rank), 0.0))
            acc = out.setdefault((step, rank), [0.0, 0.0])
            acc[0] += t
            acc[1] += t - hidden
    return {k: tuple(v) for k, v in out.items()}


def comm_by_layer(comms: list) -> dict[tuple[int, int | None], float]:
    """``{(step, layer): bytes}``: payload bytes each rank puts in per denoising step and transformer
    block (event ``bytes`` x ``repeat``, counted as `comm_volume` does; layer None: events that belong
    to no block, e.g. DiTango's plan all-reduce)."""
    out: dict[tuple[int, int | None], float] = {}
    for c in comms:
        k = (c.step, c.block)
        out[k] = out.get(k, 0.0) + c.bytes * c.repeat
    return out


def _layer_rows(comms: list, ref_comms: list | None) -> list[dict]:
    """Rows ``{"step", "layer", "bytes", "reference_bytes"}`` over the union of both runs' (step, layer)."""
    got, ref = comm_by_layer(comms), comm_by_layer(ref_comms or [])
    keys = sorted(set(got) | set(ref), key=lambda k: (k[0], -1 if k[1] is None else k[1]))
    return [{"step": s, "layer": b, "bytes": got.get((s, b), 0.0),
             "reference_bytes": ref.get((s, b), 0.0) if ref_comms is not None else None} for s, b in keys]


def comm_volume(comms: list, net) -> tuple[dict, dict]:
    """``({step: bytes}, {pattern: {"bytes", "time_us"}})``: payload bytes each rank puts in (event
    ``bytes`` x ``repeat``; an all-to-all's or all-reduce's payload counted once, whatever the
    algorithm forwards) and the collectives' time (`sim.workload.collectives`), per step and pattern."""
    from sim.workload.collectives import collective_time_us

    per_step: dict[int, float] = {}
    by_pattern: dict[str, dict] = {}
    for c in comms:
        n = c.bytes * c.repeat
        per_step[c.step] = per_step.get(c.step, 0.0) + n
        acc = by_pattern.setdefault(c.pattern, {"bytes": 0.0, "time_us": 0.0})
        acc["bytes"] += n
        acc["time_us"] += collective_time_us(c.pattern, c.bytes, c.group, net, c.distance) * c.repeat
    return per_step, {k: by_pattern[k] for k in sorted(by_pattern)}


def simulate_workload(wl: Workload, device, devices: int | None = None, workload_path: str = "",
                      progress: Callable[[int, int, str], None] | None = None, network=None) -> dict:
    """Time `wl` on ``devices`` copies of ``device`` (default: the workload's own device count).

    Args:
        device: `sim.workload.device.KaleidoDevice` or `A100Device`.
        network: `sim.workload.network.Network` (None: the device kind's preset over P devices).

    Raises:
        SimError: ``devices`` differs from the workload's, or an op that does not fit the device.
    """
    from sim.workload.network import Network

    p = wl.devices if devices is None else int(devices)
    if p != wl.devices:
        raise SimError(f"the workload was generated for {wl.devices} device(s); --devices asks for {p} "
                       "(regenerate it with the wanted device count)")
    net = network if network is not None else Network.preset(device.kind, p)
    total_ops = len(wl.ops) + (len(wl.reference["ops"]) if wl.reference else 0)

    def prog(off):
        return None if progress is None else (lambda i, n, s: progress(off + i, total_ops, s))

    per, by_type, by_type_dense = _rank_compute(wl.ops, device, p, prog(0))
    ref = ({}, {}, {}) if wl.reference is None else _rank_compute(wl.reference["ops"], device, p,
                                                                  prog(len(wl.ops)), "reference ")
    comm = comm_exposure(wl.ops, wl.comms, device, p, net)
    ref_comm = {} if wl.reference is None else comm_exposure(wl.reference["ops"], wl.reference["comms"], device, p,
                                                             net)
    vol, vol_by = comm_volume(wl.comms, net)
    ref_vol, ref_vol_by = comm_volume(wl.reference["comms"] if wl.reference else [], net)
    if progress is not None:
        progress(total_ops, total_ops, "done")
    rows = []
    zero = (0.0, 0.0)
    for s in wl.steps:
        t = s["index"]
        pd = [{"rank": r, "compute_us": per.get((t, r), zero)[0], "dense_compute_us": per.get((t, r), zero)[1],
               "comm_us": comm.get((t, r), zero)[0], "exposed_comm_us": comm.get((t, r), zero)[1]} for r in range(p)]
        ref_t = max((ref[0].get((t, r), zero)[0] + ref_comm.get((t, r), zero)[1] for r in range(p)), default=0.0)
        ref_dense = max((ref[0].get((t, r), zero)[1] + ref_comm.get((t, r), zero)[1] for r in range(p)), default=0.0)
        rows.append({**{k: v for k, v in s.items() if k != "percentiles"}, "step": t,
                     "time_us": max(d["compute_us"] + d["exposed_comm_us"] for d in pd),
                     "dense_time_us": max(d["dense_compute_us"] + d["exposed_comm_us"] for d in pd),
                     "comm_us": max(d["comm_us"] for d in pd), "exposed_comm_us": max(d["exposed_comm_us"] for d in pd),
                     "comm_bytes": vol.get(t, 0.0), "reference_comm_bytes": ref_vol.get(t, 0.0),
                     "reference_time_us": ref_t, "reference_dense_time_us": ref_dense, "per_device": pd})
    total = sum(r["time_us"] for r in rows)
    dense_total = sum(r["dense_time_us"] for r in rows)
    ref_total = sum(r["reference_time_us"] for r in rows) if wl.reference else None
    ref_dense = sum(r["reference_dense_time_us"] for r in rows) if wl.reference else None
    return {
        "format": RESULTS_FORMAT, "version": RESULTS_VERSION,
        "workload": {"path": workload_path, "generator": wl.generator, "model": wl.model, "size": wl.size,
                     "resolution": wl.resolution, "grid": list(wl.grid), "devices": wl.devices,
                     "params": wl.params, "notes": wl.notes,
                     "reference": None if wl.reference is None else wl.reference["label"]},
        "device": {**device.describe(), "count": p},
        "network": net.describe(),
        "total_time_us": total, "dense_total_time_us": dense_total,
        "reference_total_time_us": ref_total, "reference_dense_total_time_us": ref_dense,
        # speedup: reference (dense, the model as published) over the workload as run on this device
        "speedup": (ref_dense / total) if ref_total and total else None,
        "dense_speedup": (ref_dense / dense_total) if ref_total and dense_total else None,
        "reuse_speedup": dense_total / total if total else None,
        "comm": {"bytes_per_rank": sum(vol.values()), "time_us": sum(r["comm_us"] for r in rows),
                 "exposed_time_us": sum(r["exposed_comm_us"] for r in rows), "by_pattern": vol_by,
                 "reference_bytes_per_rank": sum(ref_vol.values()) if wl.reference else None,
                 "reference_by_pattern": ref_vol_by if wl.reference else None,
                 # per denoising step and transformer block (layer), against the reference's
                 "by_step_layer": _layer_rows(wl.comms, wl.reference["comms"] if wl.reference else None)},
        "per_step": rows,
        "by_op_type": {k: {"time_us": by_type[k], "dense_time_us": by_type_dense[k]} for k in sorted(by_type)},
        # distinct op shapes timed: an attention pair timed together counts its two shapes
        "unique_ops_timed": sum(2 if k and k[0] == "pair" else 1 for k in device._cache),
    }
