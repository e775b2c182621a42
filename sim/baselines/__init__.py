"""Baselines on the same trace, configuration and technology table as Kaleido (docs/spec.md §6).

One module per baseline:

- `sim.baselines.dense`: the same array with reuse off (from `sim.engines.model`'s results);
- `sim.baselines.a100`: NVIDIA A100 roofline (published peaks, stated efficiencies), board energy;
- `sim.baselines.adaptiv`, `sim.baselines.exion`, `sim.baselines.cambricon_d`: accelerators
  modelled by their published ideas as policies on the same decision/operand data, run on the
  Kaleido array through the shared path `sim.baselines.policy` (Kaleido's cycle model, action
  counts and energy table); inter-step operands come from `sim.baselines.history`.

`run_baselines` returns the entries; `attach_baselines` adds them to a Kaleido results object
(``results["baselines"]``), with ``kaleido_speedup`` (baseline time / Kaleido time) and
``kaleido_energy_saving`` (baseline energy / Kaleido energy) in each, so `kaleido report` reads
one file. `measure_quality` adds each policy's measured quality (`algo.quality.run_quality` with
the policy: latent PSNR/SSIM against the exact int8 run, the metric Kaleido's quality uses).
Documentation: docs/baselines.md.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace

from algo.trace import Trace
from hw.config import AcceleratorConfig
from sim.baselines import a100, adaptiv, cambricon_d, dense, exion
from sim.baselines.history import StepHistory
from sim.baselines.policy import run_policy_op
from sim.cost.energy import EnergyModel

POLICY_MODULES = {m.NAME: m for m in (adaptiv, exion, cambricon_d)}
#: Every baseline name, in report order.
BASELINES = ("dense", "a100", *POLICY_MODULES)


class BaselineError(ValueError):
    """Unknown baseline or parameter, or a baseline that cannot run on this input."""


def parse_params(items: list[str] | None) -> dict[str, dict]:
    """``["a100.compute_efficiency=0.5", "exion.p_min=2"]`` -> ``{"a100": {...}, "exion": {...}}``.

    Values are parsed as int, then float, else kept as strings. Raises `BaselineError`.
    """
    out: dict[str, dict] = {}
    for item in items or []:
        key, sep, val = item.partition("=")
        name, dot, par = key.strip().partition(".")
        if not sep or not dot or not par or name not in BASELINES:
            raise BaselineError(f"--param must be BASELINE.KEY=VALUE with BASELINE in {', '.join(BASELINES)}, "
                                f"got {item!r}")
        v: object = val.strip()
        for cast in (int, float):
            try:
                v = cast(val)
                break
            except ValueError:
                continue
        out.setdefault(name, {})[par] = v
    return out


def _policy_entry(mod, trace: Trace, cfg: AcceleratorConfig, energy: EnergyModel, params: dict,
                  theta_index: int) -> dict:
    from algo.reuse.policies import check_policy

    p = check_policy(mod.NAME, params)
    if mod.NEEDS_OPERANDS and trace.kind != "exact":
        return {"name": mod.NAME, "label": mod.LABEL, "kind": "array-policy", "params": p,
                "skipped": "needs operands: run it on an exact trace (this is a decision trace)"}
    ctx = SimpleNamespace(grid=tuple(trace.grid), history=StepHistory(trace), cfg=cfg, theta_index=theta_index)
    per_op, notes = [], set()
    full = half = skip = 0.0
    for op in trace.ops:
        decs, extra, note = mod.decisions(op, ctx, p)
        r = run_policy_op(op, trace.grid, trace.b_msb, cfg, energy, decs, extra)
        w = r["work"]
        macs = op.batch * op.M * op.K * op.N
        full, half, skip = full + w["full"] * macs, half + w["half"] * macs, skip + w["skip"] * macs
        per_op.append(r)
        if note:
            notes.add(note)
    tot = full + half + skip
    eb = {k: sum(r["energy_breakdown_pj"][k] for r in per_op) for k in (per_op[0]["energy_breakdown_pj"] if per_op else ())}
    cycles = sum(r["cycles"] for r in per_op)
    return {"name": mod.NAME, "label": mod.LABEL, "kind": "array-policy", "params": p,
            "cycles": cycles, "time_us": cycles / cfg.clock_mhz, "energy_pj": sum(eb.values()),
            "energy_breakdown_pj": eb, "per_op": per_op,
            "work": {"full": full / tot, "half": half / tot, "skip": skip / tot} if tot else {},
            "notes": "; ".join(sorted(notes))}


def run_baselines(trace: Trace, cfg: AcceleratorConfig, results: dict, names=BASELINES,
                  params: dict[str, dict] | None = None, tech=None, theta_index: int = 0,
                  progress: Callable[[int, int, str], None] | None = None) -> dict[str, dict]:
    """Baseline entries ``{name: entry}`` for `trace` on `cfg` (module docstring).

    Args:
        results: `sim.engines.model.simulate_trace`'s results for the same trace, config and `tech`
            (the dense entry is taken from it).
        names: baselines to run (`BASELINES`).
        params: per-baseline parameters (`parse_params`).
        tech: energy table (as `sim.engines.model.simulate_trace`).

    Each entry: ``name``, ``label``, ``kind`` (array / roofline / array-policy), ``params``,
    ``cycles``, ``time_us``, ``energy_pj``, ``energy_breakdown_pj``, ``per_op`` (name, block, step,
    cycles, time_us, energy_pj; array policies also ``actions``, ``work``), ``notes``; array policies add ``work`` (full/half/skip
    fractions of MACs); a policy that cannot run has ``skipped`` (the reason) instead of numbers.

    Raises:
        BaselineError: unknown baseline or parameter.
    """
    params = params or {}
    unknown = sorted(set(names) - set(BASELINES)) + sorted(set(params) - set(names))
    if unknown:
        raise BaselineError(f"unknown or unselected baselines {unknown}; known: {', '.join(BASELINES)}")
    energy = EnergyModel(cfg, tech)
    out = {}
    for i, name in enumerate(names):
        if progress:
            progress(i, len(names), name)
        try:
            if name == "dense":
                out[name] = dense.from_results(results)
            elif name == "a100":
                out[name] = a100.run(trace, cfg.clock_mhz, params.get(name))
            else:
                out[name] = _policy_entry(POLICY_MODULES[name], trace, cfg, energy, params.get(name, {}),
                                          theta_index)
        except ValueError as err:  # A100Error, ReuseError (bad policy parameters)
            raise BaselineError(str(err)) from None
    if progress:
        progress(len(names), len(names), "done")
    return out


def attach_baselines(results: dict, entries: dict[str, dict]) -> dict:
    """Put `entries` into ``results["baselines"]`` with Kaleido's speedup and energy saving against each.

    ``kaleido_speedup`` = baseline ``time_us`` / Kaleido's array time (``cycles / clock_mhz``, us);
    ``kaleido_energy_saving`` = baseline ``energy_pj`` / Kaleido's ``energy_pj`` (both pJ); 0.0 when
    Kaleido's value is 0. Skipped entries are left as they are. Modifies `results` in place; returns it.
    """
    t_k = results["cycles"] / results["config"]["clock_mhz"]
    e_k = results.get("energy_pj", 0.0)
    for e in entries.values():
        if "skipped" in e:
            continue
        e["kaleido_speedup"] = e["time_us"] / t_k if t_k else 0.0
        e["kaleido_energy_saving"] = e["energy_pj"] / e_k if e_k else 0.0
    results["baselines"] = entries
    return results


def measure_quality(results: dict, trace: Trace, steps: int, names=tuple(POLICY_MODULES),
                    params: dict[str, dict] | None = None,
                    progress: Callable[[int, int, str], None] | None = None) -> dict:
    """Measured quality of Kaleido (the trace's first theta) and each policy baseline, in place.

    Runs `algo.quality.run_quality` on the trace's model, size, seed, grid and weights (the checkpoint
    named in the trace's ``weights``, `algo.models.checkpoint_of`) for the last ``steps``
    sampling steps (consecutive steps: inter-step policies see one-step neighbours), once with
    Kaleido's reuse (``results["quality"]``) and once per policy (``baselines[name]["quality"]``):
    ``latent_psnr_db``, ``latent_ssim``, ``velocity_snr_db``, ``mac_saved_fraction`` (of the
    policy's own ops), ``steps``, ``theta``. Dense and A100 are the exact run (quality = reference).
    """
    from algo.models import checkpoint_of
    from algo.quality import run_quality

    params = params or {}
    theta = tuple(trace.ops[0].theta)
    common = {"model": trace.model, "size": trace.size, "steps": steps, "seed": trace.seed,
              "grid": tuple(trace.grid), "theta": theta, "float_reference": False, "b_msb": trace.b_msb,
              "weights": checkpoint_of(trace.weights)}

    def summary(r: dict) -> dict:
        return {"latent_psnr_db": r["latents"]["psnr_db"], "latent_ssim": r["latents"]["ssim"],
                "velocity_snr_db": r["velocity_snr_db"], "mac_saved_fraction": r["mac_saved_fraction"],
                "steps": steps, "theta": list(theta), "ops": r["ops"], "weights": r["weights"]}

    todo = ["kaleido", *[n for n in names if n in results.get("baselines", {})
                         and "skipped" not in results["baselines"][n]]]
    for i, name in enumerate(todo):
        if progress:
            progress(i, len(todo), f"quality {name}")
        if name == "kaleido":
            results["quality"] = summary(run_quality(**common))
        else:
            results["baselines"][name]["quality"] = summary(
                run_quality(**common, policy=name, policy_params=params.get(name)))
    for name in ("dense", "a100"):
        if name in results.get("baselines", {}):
            results["baselines"][name]["quality"] = {"latent_psnr_db": float("inf"), "latent_ssim": 1.0,
                                                     "note": "the exact int8 run (reference)"}
    if progress:
        progress(len(todo), len(todo), "done")
    return results
