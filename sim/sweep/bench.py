"""`make bench` lines for sweeps and whole videos (called from `sim.bench.main`; ``python -m sim.sweep.bench``).

- `bench_workers`: one sweep (12 points: vector-lane counts on a 12-block Wan2.1-1.3B 480p step trace,
  a file) on a local cluster of 1 and of 2 worker processes: wall time with and without cluster
  start, and each worker process's CPU time, whose ratio (1 worker's over the busiest of 2) is what
  two idle cores would give on a machine whose other load makes wall ratios meaningless (the load
  average is printed beside; on a quiet machine the wall ratio is the target's figure). The sweep is
  sized (about 30 s of one worker's CPU) so that what does not divide -- the cluster's start, a few
  seconds of scheduler and worker processes loading the numba caches, in parallel -- is a small part,
  as in a real sweep of minutes; with 6 points of 6 blocks (11 s) it was a fifth of the 2-worker run.
- `bench_serial_step`: one whole 480p step of 30 distinct blocks (op memo off) through
  `simulate_trace` with this tree's code and with `BASELINE_COMMIT`'s (extracted by ``git archive``),
  each in a fresh interpreter, CPU time, and whether both give the same results.
- `bench_step_memo`: one 480p step through `sim.engines.model.simulate_trace` without `OP_MEMO` (the old
  path), and with it on the same step derived from 3 captured blocks (the README's
  ``--blocks 0,15,29 --derive-blocks all``) and on a step whose 30 blocks are all distinct.
- `bench_video`: a 50-step video derived from captured steps `CAPTURED_STEPS` x blocks
  `CAPTURED_BLOCKS` by `algo.trace.derive.source_map` (the rule `kaleido capture --derive-blocks all
  --derive-steps all` writes), every (step, block) simulated in this process through `simulate_ops`
  (one core: an upper bound of a 2-worker run). The video is held in memory (its captured maps are
  shared by the derived ops, as a derived file repeats them), since the file would take 4.5 GB (1.3B
  480p) or 42 GB (14B 720p). A video of all-distinct maps (e.g. `kaleido synth`) gets no memo hits:
  its time is printed from the measured per-block cost, as an estimate.

Decisions come from `sim.bench.coherent_decisions` (a speed workload, not a result).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np

#: Captured steps and blocks of the derived video (the README's capture example: steps 0,40,47,49).
CAPTURED_STEPS = (0, 40, 47, 49)
CAPTURED_BLOCKS = (0, 15, 29)
STEPS = 50


def _block_ops(model, grid, blk, step, rng):
    from algo.trace import Group, OpRecord, pack_decisions
    from sim.bench import block_ops, coherent_decisions

    M = grid[0] * grid[1] * grid[2]  # noqa: N806
    ops = []
    for name, batch, K, N, groups in block_ops(model, M):  # noqa: N806
        dec = coherent_decisions(rng, grid, groups, batch)
        packed = np.stack([pack_decisions(dec[b]) for b in range(batch)])[None]
        ops.append(OpRecord(name, blk, step, None, None, [Group(*g) for g in groups], (4.0, 12.0),
                            dims=(batch, M, K, N), decisions=packed, thetas=((4.0, 12.0),)))
    return ops


def derived_video(model: str, resolution: str, steps=None, blocks=None, seed: int = 1):
    """``(trace, captured)``: a decision `Trace` of every (step, block) whose maps are the captured
    (step, block)'s by `algo.trace.derive.source_map` (ops share the captured arrays), and the number
    of captured (step, block) pairs."""
    import dataclasses

    from algo.latents import flow_sigmas
    from algo.trace import Trace
    from algo.trace.derive import source_map
    from sim.bench import GRIDS, MODELS

    grid = GRIDS[resolution]
    n_blocks = MODELS[model]["layers"]
    steps = list(range(STEPS)) if steps is None else list(steps)
    blocks = list(range(n_blocks)) if blocks is None else list(blocks)
    from_steps = [s for s in CAPTURED_STEPS if s < STEPS]
    from_blocks = [b for b in CAPTURED_BLOCKS if b < n_blocks] or [0]
    sig = flow_sigmas(STEPS)
    smap = source_map(steps, blocks, from_steps, from_blocks, {s: float(sig[s]) for s in range(STEPS)},
                      [""] * n_blocks)
    rng = np.random.default_rng(seed)
    captured = {}
    ops = []
    for s in steps:
        for b in blocks:
            src = smap[(s, b)]
            if src not in captured:
                captured[src] = _block_ops(model, grid, src[1], src[0], rng)
            ops += [dataclasses.replace(o, block=b, step=s, derived_from=None if src == (s, b) else src)
                    for o in captured[src]]
    return Trace(grid=grid, ops=ops, b_msb=4, model=model, size=resolution, weights="none (generated)"), len(captured)


def bench_step_memo() -> dict:
    """CPU seconds of one Wan2.1-1.3B 480p step: ``plain`` (memo off), ``derived`` (3 captured blocks, memo on),
    ``distinct`` (30 distinct blocks, memo on)."""
    from hw.config import load_config
    from sim.bench import step_trace
    from sim.engines.model import OP_MEMO, simulate_trace

    cfg = load_config("kaleido-16nm-128x128")
    out = {}
    distinct = step_trace("wan2.1-t2v-1.3b", "480p")
    derived, _ = derived_video("wan2.1-t2v-1.3b", "480p", steps=[0])
    for label, tr, memo in (("plain", distinct, False), ("derived", derived, True), ("distinct", distinct, True)):
        OP_MEMO.clear()
        OP_MEMO.enabled = memo
        t0 = time.process_time()  # CPU time: the machine may be shared (as bench_serial_step)
        res = simulate_trace(tr, cfg)
        out[label] = time.process_time() - t0
        out[f"{label}_cycles"] = res["cycles"]
    OP_MEMO.enabled = True
    OP_MEMO.clear()
    return out


def bench_video(model: str, resolution: str) -> dict:
    """Seconds to simulate a 50-step derived video (module docstring) in this process, and its sizes."""
    from hw.config import load_config
    from sim.cost.energy import EnergyModel
    from sim.engines.model import OP_MEMO, simulate_ops

    cfg = load_config("kaleido-16nm-128x128")
    t0 = time.perf_counter()
    tr, n_captured = derived_video(model, resolution)
    t1 = time.perf_counter()
    OP_MEMO.clear()
    energy = EnergyModel(cfg)
    per_op, fresh_s, fresh_cpu = [], 0.0, 0.0
    c1 = time.process_time()
    for i in range(0, len(tr.ops), len(tr.ops) // (STEPS * len({o.block for o in tr.ops}))):
        ops = tr.ops[i:i + len(tr.ops) // (STEPS * len({o.block for o in tr.ops}))]
        m0, ta, ca = OP_MEMO.misses, time.perf_counter(), time.process_time()
        per_op += simulate_ops(ops, tr.grid, tr.b_msb, cfg, energy)[0]
        if OP_MEMO.misses > m0:  # a captured (step, block): computed, not recalled
            fresh_s += time.perf_counter() - ta
            fresh_cpu += time.process_time() - ca
    t2, c2 = time.perf_counter(), time.process_time()
    hits, misses = OP_MEMO.hits, OP_MEMO.misses
    OP_MEMO.clear()
    n_pairs = len({(o.step, o.block) for o in tr.ops})
    return {"seconds": t2 - t1, "cpu_seconds": c2 - c1, "gen_seconds": t1 - t0, "fresh_seconds": fresh_s,
            "fresh_cpu_seconds": fresh_cpu, "pairs": n_pairs, "captured": n_captured,
            "hits": hits, "misses": misses, "cycles": sum(r["cycles"] for r in per_op)}


#: The code the serial-speed target compares with: main when the serial-speed target was set (D55), before
#: the one-walk tiling (`sim.cost.tiling.tile_pass`), the bit-mask matcher and the packed scheduler sort.
BASELINE_COMMIT = "c82929810264806990313d42beccc340d1ca9b42"

#: Runs in a fresh interpreter on a source tree (cwd): warms the numba caches on a 1-block step, then times
#: one whole step through `simulate_trace` with the op memo off; prints one JSON line.
_STEP_SCRIPT = """
import json, sys, time
from hw.config import load_config
from sim.bench import step_trace
import sim.engines.model as m
if hasattr(m, "OP_MEMO"):
    m.OP_MEMO.enabled = False
cfg = load_config("kaleido-16nm-128x128")
m.simulate_trace(step_trace(sys.argv[1], sys.argv[2], blocks=1), cfg)
tr = step_trace(sys.argv[1], sys.argv[2])
c0, w0 = time.process_time(), time.perf_counter()
res = m.simulate_trace(tr, cfg)
print(json.dumps({"cpu": time.process_time() - c0, "wall": time.perf_counter() - w0, "file": m.__file__,
                  "digest": [res["cycles"], res["total_cycles"], res["energy_pj"], res["dense_energy_pj"],
                             res["dispatcher_stats"]]}))
"""


#: Names of the fields in `_STEP_SCRIPT`'s digest, in order.
_DIGEST_FIELDS = ("cycles", "total_cycles", "energy_pj", "dense_energy_pj", "dispatcher_stats")


def _baseline_tree(root: Path) -> Path | str:
    """``build/bench-baseline-<commit>/`` holding `BASELINE_COMMIT`'s algo, hw and sim (extracted once with
    ``git archive``), or a line saying why it cannot be made."""
    import subprocess
    import tarfile

    dest = root / "build" / f"bench-baseline-{BASELINE_COMMIT[:12]}"
    if (dest / ".complete").is_file():
        return dest
    try:
        proc = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", BASELINE_COMMIT, "algo", "hw", "sim"],
                              capture_output=True, check=False)
    except OSError as err:
        return f"git not available ({err})"
    if proc.returncode:
        return f"commit {BASELINE_COMMIT[:12]} not in this checkout ({proc.stderr.decode().strip()[:120]})"
    import io

    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(proc.stdout), mode="r:") as tf:
        tf.extractall(dest, filter="data")
    (dest / ".complete").write_text(BASELINE_COMMIT + "\n")
    return dest


def _time_step(tree: Path, model: str, resolution: str) -> dict:
    import json
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(tree))
    proc = subprocess.run([sys.executable, "-c", _STEP_SCRIPT, model, resolution], cwd=tree, env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"step timing in {tree} failed: {proc.stderr.strip().splitlines()[-1:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if not Path(out["file"]).resolve().is_relative_to(tree.resolve()):
        raise RuntimeError(f"step timing in {tree} imported {out['file']}")
    return out


def bench_serial_step(model: str = "wan2.1-t2v-1.3b", resolution: str = "480p", repeats: int = 2) -> dict | str:
    """CPU seconds of one whole step (30 distinct blocks of generated decisions, op memo off) through
    `simulate_trace` with this tree's code and with `BASELINE_COMMIT`'s, each in a fresh interpreter,
    interleaved, best of ``repeats``; and whether both give the same cycles, energies and dispatcher
    statistics. CPU time (`time.process_time`), not wall time: the machine may be shared (the load
    average is returned beside). Returns a line saying why when the baseline cannot be extracted."""
    root = Path(__file__).resolve().parents[2]
    base = _baseline_tree(root)
    if isinstance(base, str):
        return base
    runs: dict[str, list[dict]] = {"baseline": [], "current": []}
    load0 = os.getloadavg()[0]
    for _ in range(repeats):
        runs["baseline"].append(_time_step(base, model, resolution))
        runs["current"].append(_time_step(root, model, resolution))
    best = {k: min(v, key=lambda r: r["cpu"]) for k, v in runs.items()}
    return {"baseline_cpu": best["baseline"]["cpu"], "current_cpu": best["current"]["cpu"],
            "baseline_wall": best["baseline"]["wall"], "current_wall": best["current"]["wall"],
            "same_results": best["baseline"]["digest"] == best["current"]["digest"],
            "differing": [name for name, a, b in zip(_DIGEST_FIELDS, best["baseline"]["digest"],
                                                     best["current"]["digest"], strict=False) if a != b],
            "load": (load0, os.getloadavg()[0])}


def bench_workers(points: int = 12, blocks: int = 12) -> dict:
    """One sweep on local clusters of 1 and 2 workers.

    Returns ``w1``, ``w2``: wall seconds including the cluster's start; ``w1_tasks``, ``w2_tasks``: from
    the cluster being up to the table written; ``w1_cpu``, ``w2_cpu``: each worker process's CPU seconds
    over the sweep (`time.process_time` in the worker, before and after, by ``Client.run``: the tasks,
    loading the numba caches, and the worker's own scheduling work), a list per run. ``cpu_ratio`` =
    the 1-worker run's CPU over the busiest worker's of the 2-worker run: the speedup two idle cores
    would give (work balance and per-worker overheads, not contention for memory or a shared core);
    ``load``: the 1-minute load average before and after. ``same_table``: both tables byte-identical.
    """
    from algo.trace import save_trace
    from sim.bench import step_trace
    from sim.sweep.engine import Engine
    from sim.sweep.runner import run_sweep
    from sim.sweep.spec import load_sweep

    out = {"load": [os.getloadavg()[0]]}
    with tempfile.TemporaryDirectory(prefix="kaleido-bench-") as d:
        d = Path(d)
        save_trace(step_trace("wan2.1-t2v-1.3b", "480p", blocks=blocks), d / "t.npz")
        lanes = ", ".join(str(64 * (i + 1)) for i in range(points))
        (d / "s.toml").write_text(f'trace = "t.npz"\n[axes]\nvector_lanes = [{lanes}]\n')
        sw = load_sweep(d / "s.toml")
        for n in (1, 2):
            t0 = time.perf_counter()
            with Engine(n) as eng:
                client = eng._client
                c0 = client.run(time.process_time)
                t1 = time.perf_counter()
                run_sweep(sw, d / f"o{n}", scheduler=eng.address)  # the cluster is up: the sweep on it
                t2 = time.perf_counter()
                c1 = client.run(time.process_time)
            t3 = time.perf_counter()
            out[f"w{n}"], out[f"w{n}_tasks"] = t3 - t0, t2 - t1
            out[f"w{n}_cpu"] = sorted(c1[k] - c0[k] for k in c0)
        out["same_table"] = (d / "o1" / "results.parquet").read_bytes() == (d / "o2" / "results.parquet").read_bytes()
    out["cpu_ratio"] = sum(out["w1_cpu"]) / max(out["w2_cpu"])
    out["load"].append(os.getloadavg()[0])
    out["points"], out["blocks"] = points, blocks
    return out


def main() -> None:
    w = bench_workers()
    print(f"Sweep of {w['points']} points ({w['blocks']}-block Wan2.1-1.3B 480p step each) on a local Dask cluster: "
          f"1 worker {w['w1']:.1f} s, 2 workers {w['w2']:.1f} s wall -> {w['w1'] / w['w2']:.2f}x (target >= 1.8x); "
          f"without cluster start {w['w1_tasks']:.1f} s vs {w['w2_tasks']:.1f} s -> "
          f"{w['w1_tasks'] / w['w2_tasks']:.2f}x; worker CPU {sum(w['w1_cpu']):.1f} s vs "
          f"{' + '.join(f'{c:.1f}' for c in w['w2_cpu'])} s -> {w['cpu_ratio']:.2f}x on two idle cores "
          f"(per point {sum(w['w1_cpu']) / w['points']:.2f} s CPU alone, {sum(w['w2_cpu']) / w['points']:.2f} s "
          f"with both workers busy; work balance {sum(w['w2_cpu']) / max(w['w2_cpu']):.2f}x); "
          f"load average {w['load'][0]:.1f} -> {w['load'][1]:.1f} on {os.cpu_count()} cores (wall ratios need a "
          f"quiet machine); tables byte-identical: {w['same_table']}")
    st = bench_serial_step()
    if isinstance(st, str):
        print(f"Serial step against commit {BASELINE_COMMIT[:12]}: skipped ({st})")
    else:
        print(f"One Wan2.1-1.3B 480p step (30 distinct blocks, op memo off) through simulate_trace: "
              f"{st['current_cpu']:.1f} s CPU now, {st['baseline_cpu']:.1f} s with commit {BASELINE_COMMIT[:12]}'s code "
              f"-> {st['baseline_cpu'] / st['current_cpu']:.2f}x (target >= 2.5x; wall {st['current_wall']:.1f} s vs "
              f"{st['baseline_wall']:.1f} s at load average {st['load'][0]:.1f} -> {st['load'][1]:.1f}); "
              + ("same cycles, energies and dispatcher statistics" if st["same_results"] else
                 f"results differ in {', '.join(st['differing'])} (the model has changed since that commit; "
                 "the speed comparison is of the same work: same trace, same ops, same tiles)"))
    m = bench_step_memo()
    print(f"One Wan2.1-1.3B 480p step through simulate_trace: {m['plain']:.1f} s CPU without the op memo; with it "
          f"{m['derived']:.1f} s on the step derived from blocks {list(CAPTURED_BLOCKS)} -> "
          f"{m['plain'] / m['derived']:.2f}x (target >= 2.5x), {m['distinct']:.1f} s on 30 distinct blocks "
          f"({m['plain'] / m['distinct']:.2f}x: nothing repeats; load average {os.getloadavg()[0]:.1f})")
    for model, res, target in (("wan2.1-t2v-1.3b", "480p", 180), ("wan2.1-t2v-14b", "720p", 1800)):
        v = bench_video(model, res)
        per_unique = v["fresh_cpu_seconds"] / v["captured"]
        est = per_unique * v["pairs"] / 2
        print(f"{STEPS}-step {model} {res} video on kaleido-16nm-128x128, derived from steps {list(CAPTURED_STEPS)} x "
              f"blocks {list(CAPTURED_BLOCKS)} ({v['captured']} captured of {v['pairs']} (step, block)): "
              f"{v['seconds']:.1f} s wall, {v['cpu_seconds']:.1f} s CPU in one process (target < {target} s on 2 "
              f"cores; {v['hits']:,} op memo hits, {v['misses']:,} misses; generated in {v['gen_seconds']:.1f} s, "
              f"not timed; load average {os.getloadavg()[0]:.1f}); all-distinct maps would take about {est:,.0f} s "
              f"CPU per worker on 2 workers (estimate: {per_unique:.2f} s CPU per (step, block) x {v['pairs']:,} / 2)")


if __name__ == "__main__":
    import argparse

    argparse.ArgumentParser(prog="python -m sim.sweep.bench", description=__doc__.split("\n\n")[0]).parse_args()
    main()
