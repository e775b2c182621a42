"""Speed benchmarks (``make bench``): golden-model decisions and the cycle model at full size.

Prints wall-clock seconds for:

- `algo.reuse.golden.decide` on a 4,096-token x 1,536-channel int8 operand (target: < 2 s on a 2-core
  machine), with spatially coherent content so every decision kind occurs;
- one whole denoising step of Wan2.1-T2V-1.3B at 480p (30 blocks x every op of docs/spec.md §1:
  qkv, qk and pv per head, o_proj, cross_q, cross_qk and cross_pv per head, cross_o, ffn1, ffn2;
  32,760 tokens = 21x30x52, 512 text tokens) on the 128x128 preset, timed from per-(token, group)
  decisions (target: < 60 s on a 2-core machine), and the same for 720p and Wan2.1-T2V-14B.
  The decisions come from `coherent_decisions`, a seeded spatially and temporally coherent
  generator: this is a speed benchmark, its cycle counts are not results;
- the same Wan2.1-T2V-1.3B 480p step through `sim.engines.model.simulate_trace` (`simulate_step_energy`:
  what `kaleido simulate` runs, energy action counts and dispatcher statistics included; target < 60 s);
- a scaling table: CPU time of one qkv op over token counts x widths (`bench_scaling`: linear in
  tokens, flat in channels, and why it is CPU time);
- the staged delta controller's loop (`bench_stage_run`, docs/decisions.md D128): one head's qk at 480p on the
  balanced preset, D128's runs against D121's cycle-stepped loop on the same arguments, CPU seconds and the ratio,
  every result key equal;
- the balance targets of docs/decisions.md D41 as ratios (`bench_balance`): total/array speedup,
  energy saving at r = 0.8 and 0.3, ops whose Kaleido DRAM bytes exceed dense, and the dense block
  time of the balanced preset against the reference preset's;
- the paper's headline figures (`bench_paper`, docs/results.md): end to end against dense, energy saving, PE
  utilization and the A100 roofline normalised three ways, per organisation and combine timing at r = 0.8, 8x8;
- sweeps and whole videos (`sim.sweep.bench`): a sweep on 1 vs 2 local Dask workers (target >= 1.8x),
  one 480p step with and without the op memo (`sim.engines.model.OP_MEMO`; target >= 2.5x on a derived
  step), and 50-step derived videos of Wan2.1-1.3B 480p (target < 3 min) and Wan2.1-14B 720p (< 30 min);
- the compiled RTL engines (`sim.bench_rtl`): simulated cycles per second on tiny-8x8 beside the
  pyverilator-mm path on the same op, the delta organisation's banded top on the same op beside the lock-step
  top, and the demo trace through the engine (targets >= 1,000,000 cycles/s and >= 100x; docs/decisions.md D51, D64, D78, D86, D87);
- a 50-step Wan2.1-14B 720p DiTango workload (`algo.workloads.ditango`) on 32 simulated A100s and
  on 32 Kaleido chips (`bench_ditango`: generation + `sim.workload.simulate`, each op shape timed
  once; target < 2 min each);
- SCALE-Sim 3.0.0 against `sim.timing.dataflow` (``timing="scalesim"``, identical cycle counts) on dense
  GEMMs of about 2k to 50k cycles on an 8x8 array, and the wall-time ratio (skipped with a reason
  when scalesim is not installed).
"""

from __future__ import annotations

import time

import numpy as np

from algo.reuse.golden import block_groups, decide
from algo.trace import Group, OpRecord, pack_decisions
from hw.config import BALANCED_PRESET, DEFAULT_PRESET, load_config
from sim.bench_rtl import bench_rtl, print_rtl
from sim.engines.model import simulate_op
from sim.timing.memory import kaleido_dram_bytes, op_memory_timing


def _coherent_operand(rng, grid, K):  # noqa: N803
    F, H, W = grid  # noqa: N806
    base = rng.normal(0, 30, size=(1, H, W, K))
    drift = rng.normal(0, 3, size=(F, H, W, K)).cumsum(axis=0)
    return np.clip(np.rint(base + drift), -128, 127).astype(np.int8).reshape(F * H * W, K)


def bench_golden() -> float:
    rng = np.random.default_rng(0)
    grid = (16, 16, 16)
    X = _coherent_operand(rng, grid, 1536)  # noqa: N806
    groups = block_groups(1536)
    decide(X[:256], (1, 16, 16), groups, (2, 6))  # warm up
    t0 = time.perf_counter()
    decide(X, grid, groups, (2.0, 6.0))
    return time.perf_counter() - t0


#: Published configurations (docs/spec.md §1): d = heads x d_h, layers, d_ffn, RoPE t/h/w split of d_h.
MODELS = {
    "wan2.1-t2v-1.3b": {"d": 1536, "heads": 12, "dh": 128, "layers": 30, "ffn": 8960, "rope": (44, 42, 42)},
    "wan2.1-t2v-14b": {"d": 5120, "heads": 40, "dh": 128, "layers": 40, "ffn": 13824, "rope": (44, 42, 42)},
}
#: Latent token grids (F, H, W) after the VAE (4x time, 8x8 space) and 1x2x2 patches, 81 frames (docs/spec.md §1).
GRIDS = {"480p": (21, 30, 52), "720p": (21, 45, 80)}
#: Text tokens of the cross-attention (Wan2.1's T5 context length, 512).
TEXT_TOKENS = 512
#: Decision generator (a speed benchmark, not a workload model): P(COMPUTE, PARTIAL, REUSE) per region.
DECISION_P = (0.4, 0.3, 0.3)
#: Region side in positions (h and w) over which a decision is shared, and the chance per frame that a
#: region's decision is redrawn rather than kept from the previous frame.
REGION, REDRAW = 8, 0.1


def block_ops(model: str, M: int) -> list[tuple[str, int, int, int, list]]:  # noqa: N803
    """Every op of one block (docs/spec.md §1): ``(name, batch, K, N, groups)`` with M tokens.

    qk's groups are the RoPE t/h/w split of d_h (t reused along w, h and w along frames, docs/spec.md
    §2); every other op uses `algo.reuse.golden.block_groups` (temporal).
    """
    m = MODELS[model]
    d, heads, dh, ffn = m["d"], m["heads"], m["dh"], m["ffn"]
    t, h, _ = m["rope"]
    rope = [(0, t, "w"), (t, t + h, "f"), (t + h, dh, "f")]
    return [
        ("qkv", 1, d, 3 * d, block_groups(d)), ("qk", heads, dh, M, rope), ("pv", heads, M, dh, block_groups(M)),
        ("o_proj", 1, d, d, block_groups(d)), ("cross_q", 1, d, d, block_groups(d)),
        ("cross_qk", heads, dh, TEXT_TOKENS, block_groups(dh)),
        ("cross_pv", heads, TEXT_TOKENS, dh, block_groups(TEXT_TOKENS)), ("cross_o", 1, d, d, block_groups(d)),
        ("ffn1", 1, d, ffn, block_groups(d)), ("ffn2", 1, ffn, d, block_groups(ffn)),
    ]


def coherent_decisions(rng, grid, groups, batch: int) -> np.ndarray:
    """Seeded, spatially and temporally coherent decisions, int8 ``[batch, F*H*W, G]``.

    Each REGION x REGION patch of positions shares one decision per group, drawn with DECISION_P;
    from frame to frame a patch keeps its decision with probability 1 - REDRAW. Frame 0, and the
    first column (w = 0) of groups reused along w, are COMPUTE (no neighbour). A stand-in for captured
    decisions at sizes where no capture exists: it exercises every code path at realistic tile
    coherence; its speedups are not results.
    """
    F, H, W = grid  # noqa: N806
    G = len(groups)  # noqa: N806
    rh, rw = -(-H // REGION), -(-W // REGION)
    field = rng.choice(3, size=(batch, F, rh, rw, G), p=DECISION_P).astype(np.int8)
    keep = rng.random((batch, F, rh, rw, G)) >= REDRAW
    for f in range(1, F):
        field[:, f] = np.where(keep[:, f], field[:, f - 1], field[:, f])
    field[:, 0] = 0
    d = field.repeat(REGION, axis=2)[:, :, :H].repeat(REGION, axis=3)[:, :, :, :W]
    for gi, g in enumerate(groups):
        if g[2] == "w":
            d[:, :, :, 0, gi] = 0
    return np.ascontiguousarray(d.reshape(batch, F * H * W, G))


def simulate_step(model: str, resolution: str, blocks: int | None = None, seed: int = 1) -> dict:
    """Time one denoising step (every op of every block) on the 128x128 preset from generated decisions.

    The timed path is `sim.engines.model.simulate_op` (decision unpacking, scheduler, matcher, cycle model,
    the dense and no-dispatcher timings) plus `sim.timing.memory.op_memory_timing` (DRAM and vector stalls,
    DRAM bytes by `sim.timing.memory.kaleido_dram_bytes`); the energy model is not part of it, though the
    tile statistics its action counts use are (`simulate_op` makes them for its dispatcher
    statistics); `simulate_step_energy` times the whole `sim.engines.model.simulate_trace`.
    Generating and packing decisions is excluded from ``seconds`` and reported as ``gen_seconds``.
    """
    cfg = load_config("kaleido-16nm-128x128")
    grid = GRIDS[resolution]
    M = grid[0] * grid[1] * grid[2]  # noqa: N806
    n_blocks = MODELS[model]["layers"] if blocks is None else blocks
    rng = np.random.default_rng(seed)
    tot = dict.fromkeys(("cycles", "dense_cycles", "no_dispatcher_cycles", "total_cycles", "gemms"), 0)
    sim_s = gen_s = 0.0
    for blk in range(n_blocks):
        for name, batch, K, N, groups in block_ops(model, M):  # noqa: N806
            t0 = time.perf_counter()
            dec = coherent_decisions(rng, grid, groups, batch)
            packed = np.stack([pack_decisions(dec[b]) for b in range(batch)])[None]
            op = OpRecord(name, blk, 0, None, None, [Group(*g) for g in groups], (4.0, 12.0),
                          dims=(batch, M, K, N), decisions=packed, thetas=((4.0, 12.0),))
            t1 = time.perf_counter()
            r = simulate_op(op, grid, 4, cfg)
            mem = op_memory_timing(name, batch, M, K, N, r.cycles,
                                   kaleido_dram_bytes(cfg, batch, M, K, N, grid), cfg, similarity=True)
            t2 = time.perf_counter()
            gen_s, sim_s = gen_s + t1 - t0, sim_s + t2 - t1
            for k in ("cycles", "dense_cycles", "no_dispatcher_cycles"):
                tot[k] += getattr(r, k)
            tot["total_cycles"] += mem["total_cycles"]
            tot["gemms"] += batch
    return {**tot, "seconds": sim_s, "gen_seconds": gen_s, "blocks": n_blocks, "tokens": M}


def step_trace(model: str, resolution: str, blocks: int | None = None, seed: int = 1):
    """One denoising step as an in-memory decision trace (`algo.trace.Trace`): the ops and the
    decisions `simulate_step` generates with the same seed (the same generator calls in the same order)."""
    from algo.trace import Trace

    grid = GRIDS[resolution]
    M = grid[0] * grid[1] * grid[2]  # noqa: N806
    n_blocks = MODELS[model]["layers"] if blocks is None else blocks
    rng = np.random.default_rng(seed)
    ops = []
    for blk in range(n_blocks):
        for name, batch, K, N, groups in block_ops(model, M):  # noqa: N806
            dec = coherent_decisions(rng, grid, groups, batch)
            packed = np.stack([pack_decisions(dec[b]) for b in range(batch)])[None]
            ops.append(OpRecord(name, blk, 0, None, None, [Group(*g) for g in groups], (4.0, 12.0),
                                dims=(batch, M, K, N), decisions=packed, thetas=((4.0, 12.0),)))
    return Trace(grid=grid, ops=ops, b_msb=4, model=model, size=resolution, weights="none (generated decisions)")


def simulate_step_energy(model: str, resolution: str, blocks: int | None = None, seed: int = 1) -> dict:
    """Time `sim.engines.model.simulate_trace` on `step_trace`: everything `kaleido simulate` does for a
    decision trace (checks, scheduler, matcher, cycle model with and without the dispatcher, dense
    baseline, DRAM/vector stalls, the energy action counts `sim.cost.actions` and energies `sim.cost.energy`,
    dispatcher statistics). Building the trace is excluded from ``seconds`` (``gen_seconds``)."""
    from sim.engines.model import simulate_trace

    cfg = load_config("kaleido-16nm-128x128")
    t0 = time.perf_counter()
    trace = step_trace(model, resolution, blocks, seed)
    t1 = time.perf_counter()
    res = simulate_trace(trace, cfg)
    t2 = time.perf_counter()
    return {"seconds": t2 - t1, "gen_seconds": t1 - t0, "blocks": len({op.block for op in trace.ops}),
            "cycles": res["cycles"], "energy_pj": res["energy_pj"], "dense_energy_pj": res["dense_energy_pj"],
            "dispatcher_stats": res["dispatcher_stats"]}


def _warm_up() -> None:
    """Load the numba caches (or compile) outside the timed runs."""
    cfg = load_config("kaleido-16nm-128x128")
    for name, _batch, K, N, groups in block_ops("wan2.1-t2v-1.3b", 2 * 4 * 4)[:3]:  # noqa: N806
        grid = (2, 4, 4)
        dec = coherent_decisions(np.random.default_rng(0), grid, groups, 1)
        op = OpRecord(name, 0, 0, None, None, [Group(*g) for g in groups], (4.0, 12.0),
                      dims=(1, 32, K, N), decisions=pack_decisions(dec[0])[None, None], thetas=((4.0, 12.0),))
        simulate_op(op, grid, 4, cfg)


#: Scaling table: token grids (F, H, W) and model widths d of a qkv op (K = d, N = 3d).
SCALING_GRIDS = [(21, 15, 26), (21, 30, 52), (21, 45, 80)]
SCALING_WIDTHS = [768, 1536, 3072]


def bench_scaling(repeats: int = 10) -> list[tuple[int, int, float]]:
    """CPU seconds (best of ``repeats``) of `simulate_op` on one qkv op for each token count x width:
    ``(M, d, seconds)``.

    Measured with `time.process_time` (this process's CPU time), not wall time: on a machine shared
    with other processes a run of a few ms is preempted now and then, and the longer the run the
    likelier, so best-of-N *wall* times grew faster than the work (an earlier version of this
    table showed 9.2x the tokens taking 11-17x the wall time on the loaded 2-core machine, while
    the CPU time of the same op grew 6.6-8.8x over repeated measurements; profiled with cProfile:
    no compilation (numba caches load in `_warm_up`), allocation or O(tiles^2) term, every part --
    decision unpacking, scheduler sort, slot counting, tile statistics -- grows with the tokens or
    the tile count). The work is per position tile (F x ceil(H*W / R) tiles per column block), so it is
    linear in tokens, with a partly filled last block per frame costing a whole tile's overhead,
    and flat in channels (O(G^2) per tile, G <= 8 channel groups).
    """
    cfg = load_config("kaleido-16nm-128x128")
    rng = np.random.default_rng(2)
    out = []
    for grid in SCALING_GRIDS:
        M = grid[0] * grid[1] * grid[2]  # noqa: N806
        for d in SCALING_WIDTHS:
            groups = block_groups(d)
            dec = coherent_decisions(rng, grid, groups, 1)
            op = OpRecord("qkv", 0, 0, None, None, [Group(*g) for g in groups], (4.0, 12.0),
                          dims=(1, M, d, 3 * d), decisions=pack_decisions(dec[0])[None, None],
                          thetas=((4.0, 12.0),))
            best = float("inf")
            for _ in range(repeats):
                t0 = time.process_time()
                simulate_op(op, grid, 4, cfg)
                best = min(best, time.process_time() - t0)
            out.append((M, d, best))
    return out


#: Dense GEMMs (M, K, N, dataflow) for the SCALE-Sim comparison on 8x8: ~1.8k to ~52k SCALE-Sim cycles.
SCALESIM_BENCH = [(32, 100, 32, "os"), (64, 256, 64, "os"), (128, 256, 96, "os"),
                  (64, 256, 64, "ws"), (64, 256, 64, "is")]


def bench_ditango() -> list[tuple[str, float, float, int]]:
    """``(device, wall s, simulated total s, distinct op shapes)`` for the 32-device DiTango workload."""
    from algo.workloads.ditango import generate_ditango
    from sim.workload.device import A100Device, KaleidoDevice
    from sim.workload.simulate import simulate_workload

    out = []
    for dev in (A100Device(), KaleidoDevice(load_config("kaleido-16nm-128x128"))):
        t = time.perf_counter()
        res = simulate_workload(generate_ditango("wan2.1-t2v-14b", "720p", 32, 50), dev)
        out.append((f"32 x {dev.name}", time.perf_counter() - t, res["total_time_us"] / 1e6, res["unique_ops_timed"]))
    return out


def bench_scalesim(rows: int = 8, cols: int = 8) -> list[tuple] | str:
    """Wall time of SCALE-Sim 3.0.0 and of `sim.timing.dataflow.gemm_cycles` on the same dense GEMMs.

    Returns rows ``(M, K, N, dataflow, scalesim_cycles, our_cycles, scalesim_s, ours_s)``, or the
    reason the comparison was skipped.
    """
    import timeit

    from sim.timing.dataflow import gemm_cycles, run_scalesim

    try:
        run_scalesim([(1, 1, 1)], rows, cols, "os")  # import SCALE-Sim outside the timed runs
    except ImportError as err:
        return str(err)
    out = []
    for M, K, N, df in SCALESIM_BENCH:  # noqa: N806
        t0 = time.perf_counter()
        (ref,) = run_scalesim([(M, K, N)], rows, cols, df)
        t_ref = time.perf_counter() - t0
        ours = gemm_cycles(M, K, N, rows, cols, df, "scalesim")
        n = 10_000
        t_ours = timeit.timeit(lambda M=M, K=K, N=N, df=df: gemm_cycles(M, K, N, rows, cols, df, "scalesim"),  # noqa: N803
                               number=n) / n
        out.append((M, K, N, df, ref, ours, t_ref, t_ours))
    return out


def _print_step(label: str, r: dict, target: float | None = None, layers: int | None = None) -> None:
    """Print one step's figures; with ``layers`` the run covered ``r['blocks']`` of them (every block has
    the same shapes, so the step's seconds and cycles are the measured ones x layers / blocks)."""
    us = 1.0 / load_config("kaleido-16nm-128x128").clock_mhz
    goal = f" (target < {target:.0f} s on 2 cores)" if target else ""
    if layers:
        k = layers / r["blocks"]
        print(f"{label}: {r['seconds'] * k:.1f} s for the step, extrapolated from {r['seconds']:.1f} s measured on "
              f"{r['blocks']} of {layers} identical blocks ({r['gemms']:,} GEMMs, {r['tokens']:,} tokens)")
        r = {**r, **{c: round(r[c] * k) for c in ("cycles", "dense_cycles", "no_dispatcher_cycles", "total_cycles")}}
    else:
        print(f"{label}: {r['seconds']:.1f} s simulated{goal}, {r['blocks']} blocks, {r['gemms']:,} GEMMs, "
              f"{r['tokens']:,} tokens; decisions generated in {r['gen_seconds']:.1f} s (not timed)")
    print(f"  array {r['cycles']:,} cycles ({r['cycles'] * us / 1e3:.1f} ms at 1 GHz) vs dense {r['dense_cycles']:,} "
          f"-> {r['dense_cycles'] / r['cycles']:.2f}x; without dispatcher {r['no_dispatcher_cycles']:,}; with DRAM and "
          f"vector stalls {r['total_cycles']:,} cycles (generated decisions: not a result)")


#: The balance targets' workload (docs/decisions.md D41): `kaleido synth` arguments, one Wan2.1-1.3B block at 480p.
BALANCE_FIELD = {"model": "wan2.1-t2v-1.3b", "resolution": "480p", "blocks": [0], "steps": [0], "partial": 0.04,
                 "region": (8, 8), "persist": 0.9, "seed": 1}
BALANCED, REFERENCE = BALANCED_PRESET, DEFAULT_PRESET


def bench_balance(reuses=(0.8, 0.3)) -> dict:
    """The balance targets, ratios from one run: for each reuse r, the `BALANCE_FIELD` synthetic trace
    (`algo.workloads.synth`) simulated on the balanced preset (`sim.engines.model.simulate_trace`); the first r
    also on the reference preset, for the dense design's time before the balancing.

    Returns ``{r: {"balanced": results, "reference": results or None}}``.
    """
    import tempfile
    from pathlib import Path

    from algo.trace import load_trace
    from algo.workloads.synth import SynthField, synth_trace
    from sim.engines.model import simulate_trace

    out = {}
    f = BALANCE_FIELD
    with tempfile.TemporaryDirectory() as tmp:
        for i, r in enumerate(reuses):
            path = Path(tmp, f"synth_{r}.npz")
            synth_trace(path, f["model"], f["resolution"], SynthField(r, f["partial"], f["region"], f["persist"]),
                        blocks=f["blocks"], steps=f["steps"], seed=f["seed"])
            tr = load_trace(path)
            out[r] = {"balanced": simulate_trace(tr, load_config(BALANCED)),
                      "reference": simulate_trace(tr, load_config(REFERENCE)) if i == 0 else None}
    return out


def _print_balance(res: dict) -> None:
    f = BALANCE_FIELD
    print(f"Balance targets (docs/decisions.md D41): kaleido synth --model {f['model']} --resolution {f['resolution']} "
          f"--blocks 0 --steps 0 --partial {f['partial']} --region 8x8 --persist {f['persist']} --seed {f['seed']}, "
          f"on {BALANCED} (targets in brackets):")
    for r, runs in res.items():
        b = runs["balanced"]
        over = [f"{o['name']} {(o['actions']['dram_read_bytes'] + o['actions']['dram_write_bytes']) / max(1, o['dense_actions']['dram_read_bytes'] + o['dense_actions']['dram_write_bytes']):.2f}x"
                for o in b["per_op"]
                if o["actions"]["dram_read_bytes"] + o["actions"]["dram_write_bytes"]
                > o["dense_actions"]["dram_read_bytes"] + o["dense_actions"]["dram_write_bytes"]]
        print(f"  r = {r}: speedup {b['speedup']:.3f}, total_speedup {b['total_speedup']:.3f}, total/array "
              f"{b['total_speedup'] / b['speedup']:.3f} [>= 0.9]; energy_saving {b['energy_saving']:.3f} [>= 1.0]; "
              f"ops with Kaleido DRAM bytes > dense: {', '.join(over) or 'none'} [none]")
        ref = runs["reference"]
        if ref is not None:
            print(f"  dense block time: {b['dense_total_cycles']:,} cycles balanced vs {ref['dense_total_cycles']:,} on "
                  f"{REFERENCE} -> {b['dense_total_cycles'] / ref['dense_total_cycles']:.3f} [<= 1]; Kaleido on "
                  f"{REFERENCE}: total/array {ref['total_speedup'] / ref['speedup']:.3f}, energy_saving "
                  f"{ref['energy_saving']:.3f}")
def bench_organisations(reuses=(0.3, 0.6, 0.8, 0.9), regions=((8, 8), (1, 1))) -> dict:
    """Every array organisation on the D50 synthetic field (`sim.report.organisations`), balanced preset:
    ``{(region, r): {organisation: summary}}``; also writes ``reports/organisations/organisations.png``."""
    from sim.report.organisations import compare, plot

    out = {(reg, r): compare(BALANCED, r, reg) for reg in regions for r in reuses}
    rows = [{"region": f"{reg[0]}x{reg[1]}", "reuse": r, "organisation": org,
             **{k: s[k] for k in ("total_speedup", "ideal", "energy_vs_dense", "area_mm2", "dense_area_mm2")}}
            for (reg, r), orgs in out.items() for org, s in orgs.items()]
    plot(rows, "reports/organisations")
    return out


def _print_organisations(res: dict) -> None:
    from sim.report.organisations import LINEAR_OPS

    print(f"Array organisations (docs/decisions.md D50) on {BALANCED}, the field of kaleido synth --model "
          f"{BALANCE_FIELD['model']} --resolution {BALANCE_FIELD['resolution']} --blocks 0 --steps 0 --reuse R "
          f"--partial {BALANCE_FIELD['partial']} --region HxW --persist {BALANCE_FIELD['persist']} --seed "
          f"{BALANCE_FIELD['seed']} (targets in brackets; figure: reports/organisations/organisations.png):")
    for (reg, r), orgs in res.items():
        if r not in (0.3, 0.8):
            continue
        lock = orgs["lockstep"]
        for org, s in orgs.items():
            lin = min(s["per_op"][n]["share"] for n in LINEAR_OPS if n in s["per_op"])
            tgt = "" if r != 0.8 else (" [>= 3.5]" if reg == (8, 8) else "")
            print(f"  {reg[0]}x{reg[1]} r = {r} {org:9s}: total_speedup {s['total_speedup']:.3f}{tgt} (ideal "
                  f"{s['ideal']:.2f}, array {s['speedup']:.3f}); energy {s['energy_vs_dense']:.3f}x dense "
                  f"[<= {1.0 if r == 0.3 else 0.6}] (shared-unit floor {s['floor_vs_dense']:.3f}x, "
                  f"{s['floor_saving_share']:.2f} of the saving it allows [>= 0.9]; ideal design "
                  f"{s['ideal_energy_vs_dense']:.3f}x, {s['ideal_saving_share']:.2f} of its saving); area {s['area_mm2']:.1f} mm^2 = "
                  f"{s['area_mm2'] / lock['area_mm2']:.2f}x lockstep, {s['area_mm2'] / s['dense_area_mm2']:.2f}x dense"
                  + (f"; {s['unsized']} fused score op(s) with unsized temporal state: an upper bound (D70)"
                     if s["unsized"] else ""))
            if r == 0.8:
                lin_t = " [>= 0.8 each linear op]" if reg == (8, 8) else ""
                print("    per op total/ideal (array/ideal): " + ", ".join(
                    f"{n} {v['share']:.2f} ({v['array_share']:.2f})" for n, v in s["per_op"].items())
                    + f"; linear-op minimum {lin:.2f}{lin_t}")
                if reg == (1, 1):
                    low = min(s["per_op"][n]["total"] for n in LINEAR_OPS if n in s["per_op"])
                    print(f"    scattered: slowest linear op {low:.2f}x [>= 3]")


def bench_rtl_combine(reuses=(0.3, 0.8), region=(8, 8), organisations=("compact", "delta")) -> dict:
    """The banded organisations on the D50 field (`sim.report.organisations.compare`, balanced preset) with the
    combine timed as the model's combine unit and as the RTL cores are built (``combine_timing``, docs/decisions.md
    D104): ``{(r, timing): {organisation: summary}}``."""
    from sim.report.organisations import compare

    return {(r, t): compare(BALANCED, r, region, organisations, combine_timing=t)
            for r in reuses for t in ("model", "rtl")}


def _print_rtl_combine(res: dict) -> None:
    print(f"The combine as built in RTL (combine_timing = rtl, docs/decisions.md D104) against the model's combine unit, "
          f"on {BALANCED}, the organisations field (region 8x8):")
    for r in sorted({r for r, _ in res}):
        model, rtl = res[(r, "model")], res[(r, "rtl")]
        for org in model:
            m, t = model[org], rtl[org]
            print(f"  r = {r} {org:7s}: total_speedup {m['total_speedup']:.3f} -> {t['total_speedup']:.3f} as built "
                  f"({t['total_speedup'] / m['total_speedup']:.3f}x; ideal {m['ideal']:.2f}, array {m['speedup']:.3f} "
                  f"-> {t['speedup']:.3f}); energy {m['energy_vs_dense']:.3f}x -> {t['energy_vs_dense']:.3f}x dense")
            print("    per op total/ideal, model -> rtl: " + ", ".join(
                f"{n} {v['share']:.2f} -> {t['per_op'][n]['share']:.2f}" for n, v in m["per_op"].items()))


#: The runs of `bench_paper`: (organisation, combine timing); "model" is the preset's default, "rtl" the combine as
#: the RTL cores are built (docs/decisions.md D104).
PAPER_RUNS = (("lockstep", "model"), ("compact", "model"), ("delta", "model"), ("compact", "rtl"), ("delta", "rtl"))


def bench_paper(reuse: float = 0.8, region=(8, 8), runs=PAPER_RUNS) -> dict:
    """The paper's headline figures against this model (docs/results.md "Paper headline figures"): the D50 field
    (`sim.report.organisations.FIELD`) at ``reuse`` and ``region`` on the balanced preset under each organisation
    and combine timing of ``runs`` (`sim.engines.model.simulate_trace`), and the A100 roofline on the same trace
    (`sim.baselines.a100.run`, the paper's "6.6x over an A100" normalised three ways by
    `sim.baselines.a100.normalised`). Returns ``{(organisation, timing): {"total_speedup", "ideal", "energy_saving"
    (dense / Kaleido energy), "pe_utilization", "dense_pe_utilization", "area_mm2", "dense_area_mm2",
    "time_us" (end to end), "dense_time_us", "a100_time_us", "a100" (Kaleido's `normalised`), "a100_dense"}}``."""
    import tempfile
    from pathlib import Path

    from algo.trace import load_trace
    from algo.workloads.synth import SynthField, synth_trace
    from hw.config import with_organisation
    from sim.baselines.a100 import normalised, peak_tops
    from sim.baselines.a100 import run as a100_run
    from sim.engines.model import simulate_trace
    from sim.report.organisations import FIELD, _ideal

    base = load_config(BALANCED)
    f = FIELD
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "synth.npz")
        synth_trace(path, f["model"], f["resolution"], SynthField(reuse, f["partial"], region, f["persist"]),
                    blocks=f["blocks"], steps=f["steps"], seed=f["seed"])
        tr = load_trace(path)
        a100_us = a100_run(tr, base.clock_mhz)["time_us"]
        for org, timing in runs:
            cfg = with_organisation(base.model_copy(update={"combine_timing": timing}), org)
            res = simulate_trace(tr, cfg)
            em, tops = res["energy_model"], peak_tops(cfg.array_rows, cfg.array_cols, cfg.clock_mhz)
            t, td = res["total_cycles"] / cfg.clock_mhz, res["dense_total_cycles"] / cfg.clock_mhz
            out[(org, timing)] = {
                "total_speedup": res["total_speedup"], "ideal": _ideal(res),
                "energy_saving": res["dense_energy_pj"] / res["energy_pj"], "pe_utilization": res["pe_utilization"],
                "dense_pe_utilization": res["dense_pe_utilization"], "area_mm2": em["area_mm2"],
                "dense_area_mm2": em["dense_area_mm2"], "time_us": t, "dense_time_us": td, "a100_time_us": a100_us,
                "a100": normalised(a100_us, t, em["area_mm2"], tops),
                "a100_dense": normalised(a100_us, td, em["dense_area_mm2"], tops)}
    return out


def _print_paper(res: dict) -> None:
    from sim.report.organisations import FIELD as f
    print(f"Paper headline figures (docs/results.md) on {BALANCED}, kaleido synth --model {f['model']} --resolution "
          f"{f['resolution']} --blocks 0 --steps 0 --reuse 0.8 --partial {f['partial']} --region 8x8 --persist "
          f"{f['persist']} --seed {f['seed']}; A100 80 GB roofline (sim/baselines/a100.py, assumed efficiencies):")
    for (org, timing), r in res.items():
        a, d = r["a100"], r["a100_dense"]
        print(f"  {org:8s} combine {timing:5s}: end to end {r['total_speedup']:.3f}x dense (ideal {r['ideal']:.2f}); "
              f"energy saving {r['energy_saving']:.3f}x; PE utilization {r['pe_utilization']:.3f} (dense "
              f"{r['dense_pe_utilization']:.3f}); {r['time_us'] / 1e3:.2f} ms on {r['area_mm2']:.1f} mm^2 against the "
              f"A100's {r['a100_time_us'] / 1e3:.2f} ms: raw {a['raw']:.3f}x, per mm^2 {a['per_mm2']:.2f}x, per peak "
              f"TOPS {a['per_peak_tops']:.2f}x (dense: {r['dense_time_us'] / 1e3:.2f} ms, {r['dense_area_mm2']:.1f} "
              f"mm^2, {d['raw']:.3f}x, {d['per_mm2']:.2f}x, {d['per_peak_tops']:.2f}x)")


def bench_stage_run(model: str = "wan2.1-t2v-1.3b", grid=(21, 30, 52), op_name: str = "qk",
                    repeats: int = 2) -> dict:
    """The staged delta controller's loop (`sim.timing.delta_accel.stage_run`) on one op, D128's runs against D121's
    cycle-stepped loop (`sim.timing.compact_accel.port_run` with ``stepped``) on the same arguments: one batch
    element (a head) of ``op_name`` at ``grid`` (480p) on the balanced preset as delta, decisions from
    `coherent_decisions`, its `stage_run` arguments taken from `simulate_op`. Returns ``{"tiles", "cycles",
    "stepped", "runs"}`` (CPU seconds, best of ``repeats``, `time.process_time`) and ``"equal"`` (every key)."""
    import sim.timing.delta_accel as da
    from hw.config import with_organisation
    from sim.timing.compact_accel import port_run

    cfg = with_organisation(load_config(BALANCED), "delta")
    M = grid[0] * grid[1] * grid[2]  # noqa: N806
    name, _batch, K, N, groups = next(o for o in block_ops(model, M) if o[0] == op_name)  # noqa: N806
    dec = coherent_decisions(np.random.default_rng(3), grid, groups, 1)
    op = OpRecord(name, 0, 0, None, None, [Group(*g) for g in groups], (4.0, 12.0), dims=(1, M, K, N),
                  decisions=pack_decisions(dec[0])[None, None], thetas=((4.0, 12.0),))
    taken, run = [], da.stage_run
    da.stage_run = lambda *a, **k: taken.append(a) or run(*a, **k)  # `_staged_run` looks it up per call (ring: D134)
    try:
        simulate_op(op, grid, 4, cfg)
    finally:
        da.stage_run = run
    s_seq, rows, widths, rounds, paired, seg, sbuf, fcount, saddr, c, entries, lanes = taken[0]
    out, best = {}, {}
    for stepped in (True, False):
        best[stepped] = float("inf")
        for _ in range(repeats):
            t0 = time.process_time()
            out[stepped] = port_run(s_seq, rows, widths, rounds, paired, saddr, c, entries, lanes, seg=seg,
                                    stage=(sbuf, fcount), stepped=stepped)
            best[stepped] = min(best[stepped], time.process_time() - t0)
    equal = all(np.array_equal(out[True][k], out[False][k]) for k in out[True])
    return {"op": op_name, "tiles": len(s_seq), "cycles": int(out[False]["last"].max()) + 1,
            "stepped": best[True], "runs": best[False], "equal": equal}


def _bench_stage_run() -> None:
    r = bench_stage_run()
    print(f"stage_run (the staged delta controller, docs/decisions.md D121, D128), one head's {r['op']} of Wan2.1-1.3B "
          f"480p on {BALANCED} as delta, coherent seeded decisions ({r['tiles']:,} band-tiles, {r['cycles']:,} "
          f"cycles), CPU s best of 2: the reference loop stepping every cycle (D121) {r['stepped']:.2f} s, the "
          f"event-driven loop the model runs (D128) {r['runs']:.2f} s -> "
          f"{r['stepped'] / r['runs']:.2f}x faster ({r['runs'] / r['cycles'] * 1e9:.0f} ns a cycle); every key equal: "
          f"{'yes' if r['equal'] else 'NO'}")
    if not r["equal"]:
        raise SystemExit("stage_run: D128's loop differs from D121's")


def _bench_golden() -> None:
    g = bench_golden()
    print(f"golden decide, 4096 tokens x 1536 channels: {g:.3f} s (target < 2 s)")


def _bench_step() -> None:
    _warm_up()
    print("One denoising step, every op of every block (docs/spec.md §1), kaleido-16nm-128x128, decisions from the "
          f"seeded coherent generator ({REGION}x{REGION}-position regions, P(C,P,R) = {DECISION_P}, redraw "
          f"{REDRAW:.0%} per frame):")
    _print_step("  Wan2.1-T2V-1.3B 480p", simulate_step("wan2.1-t2v-1.3b", "480p"), target=60)
    e = simulate_step_energy("wan2.1-t2v-1.3b", "480p")
    ds = e["dispatcher_stats"]
    print(f"  the same step through sim.engines.model.simulate_trace (as `kaleido simulate`: + energy action counts, "
          f"energies, dispatcher statistics): {e['seconds']:.1f} s (target < 60 s on 2 cores); trace built in "
          f"{e['gen_seconds']:.1f} s (not timed); {e['cycles']:,} cycles (same decisions as above); "
          f"{ds['tiles']:,} tiles, {ds['pair_slots']:,} paired slots, {ds['skipped_groups']:,} skipped groups, "
          f"{ds['rows_moved']:,} rows moved")
    _print_step("  Wan2.1-T2V-1.3B 720p", simulate_step("wan2.1-t2v-1.3b", "720p"))
    layers = MODELS["wan2.1-t2v-14b"]["layers"]
    _print_step("  Wan2.1-T2V-14B 480p", simulate_step("wan2.1-t2v-14b", "480p", blocks=4), layers=layers)
    _print_step("  Wan2.1-T2V-14B 720p", simulate_step("wan2.1-t2v-14b", "720p", blocks=2), layers=layers)


def _bench_scaling() -> None:
    print("Scaling: one qkv op (K = d, N = 3d) from decisions, CPU seconds (best of 10, time.process_time) and ns "
          "per token x channel (M d):")
    rows = bench_scaling()
    print("  " + "tokens".rjust(8) + "".join(f"{'d = ' + str(d):>22}" for d in SCALING_WIDTHS))
    for i in range(0, len(rows), len(SCALING_WIDTHS)):
        M = rows[i][0]  # noqa: N806
        cells = "".join(f"{t:>9.4f} s {t / (M * d) * 1e9:>6.3f} ns" for _, d, t in rows[i:i + len(SCALING_WIDTHS)])
        print(f"  {M:>8,}{cells}")
    n = len(SCALING_WIDTHS)
    t_ratio = sum(r[2] for r in rows[-n:]) / sum(r[2] for r in rows[:n])
    tiles = [g[0] * -(-g[1] * g[2] // 128) for g in (SCALING_GRIDS[0], SCALING_GRIDS[-1])]
    print(f"  {rows[-1][0] / rows[0][0]:.1f}x the tokens -> {t_ratio:.1f}x the CPU time; position tiles "
          f"(F x ceil(HW/R)) grow {tiles[1] / tiles[0]:.1f}x. The work is O(tiles x R x G^2) (scheduler sort, "
          f"matcher runs, tile statistics; G <= 8 channel groups per op): linear in tokens, flat in channels. "
          f"CPU time, not wall time: best-of-N wall times of ms-long runs grow faster than the work on a shared "
          f"machine (longer runs are preempted more often)")


def _bench_sweep() -> None:
    from sim.sweep.bench import main as sweep_bench  # sweeps on Dask, the op memo, whole videos

    sweep_bench()


def _bench_ditango() -> None:
    print("DiTango, Wan2.1-14B 720p, 50 steps, 32 devices (generate + simulate; target < 120 s each):")
    for name, wall, total, shapes in bench_ditango():
        print(f"  {name}: {wall:.2f} s wall ({wall / 120:.3f} of the target), simulated {total:.4g} s, "
              f"{shapes} distinct op shapes timed")


def _bench_scalesim() -> None:
    rows = bench_scalesim()
    if isinstance(rows, str):
        print(f"SCALE-Sim comparison skipped: {rows}")
        return
    print("SCALE-Sim 3.0.0 vs sim.timing.dataflow (timing='scalesim'), dense GEMMs on 8x8:")
    bad = 0
    for M, K, N, df, ref, ours, t_ref, t_ours in rows:  # noqa: N806
        same = "identical" if ref == ours else f"MISMATCH (ours {ours:,})"
        bad += ref != ours
        print(f"  {M}x{K}x{N} {df}: {ref:>7,} cycles {same}; SCALE-Sim {t_ref:.2f} s, ours {t_ours * 1e6:.1f} us "
              f"-> {t_ref / t_ours:,.0f}x faster")
    if bad:
        raise SystemExit(f"{bad} SCALE-Sim cycle mismatches")


#: The bench's sections in the order `make bench` runs them (`python -m sim.bench [SECTION ...]`).
SECTIONS = {
    "golden": (_bench_golden, "the golden model's decide on 4,096 tokens x 1,536 channels"),
    "step": (_bench_step, "one denoising step of Wan2.1-1.3B/14B at 480p/720p through the cycle model"),
    "scaling": (_bench_scaling, "CPU time of one qkv op against tokens and width"),
    "stage-run": (_bench_stage_run, "the staged delta controller's loop: D128's runs against D121's stepped loop"),
    "balance": (lambda: _print_balance(bench_balance()), "issue 14's balance targets on the balanced preset"),
    "organisations": (lambda: _print_organisations(bench_organisations()),
                      "lockstep, compact and delta on the synthetic field (and the figure)"),
    "paper": (lambda: _print_paper(bench_paper()), "the paper's headline figures: organisations, energy, A100"),
    "rtl-combine": (lambda: _print_rtl_combine(bench_rtl_combine()),
                    "compact and delta with the combine timed as the RTL cores are built (D104)"),
    "sweep": (_bench_sweep, "sweeps on Dask (1 vs 2 workers), the serial step, whole videos"),
    "rtl": (lambda: print_rtl(bench_rtl()), "the compiled RTL engine against pyverilator; the delta top beside"),
    "ditango": (_bench_ditango, "DiTango workloads, Wan2.1-14B 720p on 32 devices"),
    "scalesim": (_bench_scalesim, "dense timing against SCALE-Sim 3.0.0"),
}


def main(argv: list[str] | None = None) -> None:
    """``python -m sim.bench [SECTION ...]``: every section (`make bench`) or the named ones, in order."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m sim.bench", description="Kaleido's speed and target benchmarks "
                                 "(`make bench` runs every section); ratios are measured in one run.",
                                 epilog="sections: " + "; ".join(f"{k}: {v[1]}" for k, v in SECTIONS.items()))
    ap.add_argument("sections", nargs="*", metavar="SECTION", help=f"one of {', '.join(SECTIONS)} (default: all)")
    args = ap.parse_args(argv)
    unknown = [x for x in args.sections if x not in SECTIONS]
    if unknown:
        ap.exit(2, f"error: unknown bench section {unknown[0]!r}; known: {', '.join(SECTIONS)}\n")
    for name in args.sections or SECTIONS:
        SECTIONS[name][0]()


if __name__ == "__main__":
    main()
