"""``python -m sim.bench rtl``: the compiled RTL engines' speed, measured in one run (docs/decisions.md D51, D64, D78,
D86).

- The lock-step engine (`sim.engines.verilator`) on tiny-8x8 beside the pyverilator-mm path (`sim.engines.rtl.RtlModel`,
  Python per cycle) on the same op (op 0 of the bench's own trace, `BENCH_TRACE`: the seeded tiny model captured as
  `make demo DEMO_WEIGHTS=seeded` does, the trace issue 21's figures are stated on; its own file, so the figures do
  not depend on which demo the user last ran): simulated cycles per CPU second of the driver's clock loop against `RtlModel.run` (targets >= 1,000,000
  cycles/s and >= 100x) and in wall time.
- The band engine (`sim.engines.verilator_band`) with the delta organisation's top ``kaleido_dtop`` on the same small
  config (tiny-8x8 as delta, `DELTA_TINY`) and the same op (its band-tiles at the model's chunk frames and column
  blocks, D84's chunk-major order), beside the lock-step top's figure: cycles per CPU second of each clock loop.
  The two tops run different cycle counts for the op (the organisations' own timing); the figure compared is
  simulated cycles per CPU second, each equal to its cycle model.
- The demo trace through the lock-step engine on tiny-8x8 (target < 60 s after the build) and small-32x32, both
  equal to the cycle model and the golden outputs.
"""

from __future__ import annotations

import time

import numpy as np

#: tiny-8x8 as the delta organisation for `bench_rtl`'s band engine: 4 bands on tiny's 2 ports (the balanced
#: preset's 8 bands on 4 ports, halved), a 64 KiB partial-sum SRAM and a 16 KiB difference-sum buffer (D84's
#: order); the regression's config (tests/rtl/band_regression.py).
DELTA_TINY = {"name": "delta-8x8-b4-d2", "organisation": "delta", "psum_sram_kib": 64, "compact_bands": 4,
              "drain_rows_per_cycle": 2, "diff_sram_kib": 16}


def bench_band(op, grid, groups, dec, b_msb: int = 4) -> dict:
    """Op ``op`` (its batch index 0) through the delta top on `DELTA_TINY` from reset: ``band_cycles`` (the run's
    cycles, equal to the cycle model's ``band_cycles``, checked: ``band_equal``, which also holds every drained
    word against X and W), ``band_tiles``, ``band_loop_s`` / ``band_loop_cpu_s`` (the driver's clock loop, wall and
    CPU seconds), ``band_ticks``."""
    from hw.config import AcceleratorConfig, load_config
    from sim.engines.band_stimulus import band_op
    from sim.engines.verilator_band import BandEngine
    from sim.timing import delta as delta_rules

    cfg = AcceleratorConfig.model_validate(load_config("tiny-8x8").model_dump() | DELTA_TINY)
    fw, s = delta_rules.plan(cfg, grid[0], op.K, op.N, False, op.name, groups)
    bop = band_op(op.X[0], op.W[0], grid, groups, dec, cfg, fw, s)
    eng = BandEngine(cfg, log=print)
    r = eng.run([(bop, not op.x_signed)])[0]
    equal = (r.end + 1 == bop.cycles and (r.band == bop.band).all() and (r.last == bop.last).all()
             and all(np.array_equal(got, t.want) for got, t in zip(r.drained, bop.tiles, strict=True)))
    return {"band_cycles": r.end + 1, "band_tiles": len(bop.tiles), "band_loop_s": eng.last_perf["loop_s"],
            "band_loop_cpu_s": eng.last_perf["loop_cpu_s"], "band_ticks": eng.last_perf["ticks"],
            "band_equal": bool(equal)}


#: The bench's trace: the seeded tiny Wan2.1-1.3B capture (`make demo DEMO_WEIGHTS=seeded`'s command, 2,040,320
#: cycles on tiny-8x8), kept apart from `make demo`'s traces/demo.npz (the trained small model since D45, about 7x
#: longer), which earlier runs of this bench measured whichever it found.
DEMO_TRACE = "traces/bench-seeded-tiny.npz"


def _demo_trace():
    """`DEMO_TRACE`, captured (deterministic: seeded weights) when it is missing (about a minute)."""
    import subprocess
    import sys
    from pathlib import Path

    from algo.trace import load_trace

    if not Path(DEMO_TRACE).exists():
        print(f"capturing {DEMO_TRACE} (kaleido capture --model wan2.1-t2v-1.3b --size tiny) ...", flush=True)
        subprocess.run([sys.executable, "-m", "sim.cli", "capture", "--model", "wan2.1-t2v-1.3b", "--size", "tiny",
                        "--out", DEMO_TRACE], check=True, capture_output=True)
    return load_trace(DEMO_TRACE)


def _model_side(trace, cfg) -> tuple[int, str, list[int]]:
    """Cycles (total, per op) and output checksum of the cycle model + golden model on `trace`."""
    from sim.engines.model import simulate_trace
    from sim.engines.rtl import golden_checksums

    res = simulate_trace(trace, cfg)
    return res["cycles"], golden_checksums(trace)[0], [r["cycles"] for r in res["per_op"]]


def bench_rtl() -> dict:
    """The compiled RTL engine against the pyverilator path and the models (module docstring).

    Returns a dict of the measured figures: for op 0 of the demo trace on tiny-8x8 from reset, the
    same slots through both drivers, ``op_cycles``; ``engine_op_s`` (wall, `Engine.run`: job
    files, process start, clock loop), ``engine_loop_s`` / ``engine_loop_cpu_s`` (the driver's
    clock loop, wall and CPU seconds); ``pyverilator_op_s`` / ``pyverilator_cpu_s`` (wall and
    ``time.process_time`` of `RtlModel.run`, whose clock loop is Python); ``op_equal``. For the whole
    demo trace on tiny-8x8 and small-32x32 (prefix ``s32_``): ``trace_cycles``, ``trace_s`` (whole
    call after the build), ``trace_run_s`` (engine runs), ``trace_loop_s`` / ``trace_loop_cpu_s``
    (clock loops), ``equal`` (cycles per op and outputs against the cycle and golden models), ``ops``. The
    delta top on op 0: `bench_band`'s figures.
    """
    from algo.reuse.golden import decide
    from hw.config import load_config
    from sim.engines.rtl import RtlModel
    from sim.engines.verilator import Engine, Gemm, simulate_trace_rtl
    from sim.timing.stream import build_stream

    trace = _demo_trace()
    cfg = load_config("tiny-8x8")
    out: dict = {}
    # Side by side on op 0 (qkv), from reset: the same slots through both drivers.
    op = trace.ops[0]
    groups = [g.as_tuple() for g in op.groups]
    dec = decide(op.X[0], trace.grid, groups, op.theta, trace.b_msb)[0]
    eng = Engine(cfg, log=print)
    t0 = time.perf_counter()
    r = eng.run([([Gemm(op.X[0], op.W[0], tuple(trace.grid), groups, dec, trace.b_msb)], not op.x_signed)])[0]
    out["engine_op_s"] = time.perf_counter() - t0
    out["engine_loop_s"], out["engine_loop_cpu_s"] = eng.last_perf["loop_s"], eng.last_perf["loop_cpu_s"]
    out["op_cycles"] = r.cycles
    stream = build_stream(op.X[0], op.W[0], trace.grid, groups, dec, trace.b_msb, cfg)
    y = np.zeros((op.M, op.N), dtype=np.int64)
    mdl = RtlModel(cfg)
    t0, c0 = time.perf_counter(), time.process_time()
    py_cycles = mdl.run(stream.slots, [(t, y) for t in stream.tiles], not op.x_signed)
    out["pyverilator_op_s"], out["pyverilator_cpu_s"] = time.perf_counter() - t0, time.process_time() - c0
    out["op_equal"] = py_cycles == r.cycles and bool((y == r.ys[0]).all())
    out.update(bench_band(op, tuple(trace.grid), groups, dec, trace.b_msb))
    for name, c in (("", cfg), ("s32_", load_config("small-32x32"))):
        Engine(c, log=print)  # build first: the trace time is after the one-time build
        timings: dict = {}
        t0 = time.perf_counter()
        res = simulate_trace_rtl(trace, c, timings=timings)
        out[f"{name}trace_s"] = time.perf_counter() - t0
        out[f"{name}trace_run_s"] = timings["run_s"]
        out[f"{name}trace_loop_s"], out[f"{name}trace_loop_cpu_s"] = timings["loop_s"], timings["loop_cpu_s"]
        out[f"{name}trace_cycles"] = res["cycles"]
        cycles, sha, per_op = _model_side(trace, c)
        out[f"{name}equal"] = (res["cycles"] == cycles and res["outputs_sha256"] == sha
                               and [p["cycles"] for p in res["per_op"]] == per_op)
        out[f"{name}ops"] = sorted({o.name for o in trace.ops})
    return out


def print_rtl(r: dict) -> None:
    """Print `bench_rtl`'s figures as ratios of one run."""
    n = r["op_cycles"]
    loop_cpu, py_cpu = n / r["engine_loop_cpu_s"], n / r["pyverilator_cpu_s"]
    wall, py_wall = n / r["engine_op_s"], n / r["pyverilator_op_s"]
    print(f"RTL engine on tiny-8x8, op 0 of {DEMO_TRACE} ({n:,} cycles from reset, the same slots through both "
          f"drivers; {'same cycles and outputs' if r['op_equal'] else 'MISMATCH between the two drivers'}):")
    print(f"  per CPU second: compiled clock loop {loop_cpu:,.0f} cycles/s vs pyverilator-mm {py_cpu:,.0f} "
          f"-> {loop_cpu / py_cpu:,.1f}x (targets >= 1,000,000 cycles/s, >= 100x)")
    print(f"  wall: compiled loop {n / r['engine_loop_s']:,.0f} cycles/s; whole call (job files, process start) "
          f"{wall:,.0f} vs pyverilator-mm {py_wall:,.0f} -> {wall / py_wall:,.1f}x")
    bn = r["band_cycles"]
    band_cpu = bn / r["band_loop_cpu_s"]
    same = "equal to band_cycles, band_schedule and X W" if r["band_equal"] else "MISMATCH with the cycle model"
    print(f"  the delta organisation's top (kaleido_dtop, tiny-8x8 as delta: 4 bands, 2 ports) on the same op: "
          f"{bn:,} cycles, {r['band_tiles']:,} band-tiles ({same}); "
          f"compiled clock loop {band_cpu:,.0f} cycles per CPU second vs the lock-step top's {loop_cpu:,.0f} -> "
          f"{band_cpu / loop_cpu:.2f}x")
    for name, label in (("", "tiny-8x8"), ("s32_", "small-32x32")):
        c = r[name + "trace_cycles"]
        print(f"  {DEMO_TRACE} through the RTL on {label}: {c:,} cycles in {r[name + 'trace_s']:.1f} s after the "
              f"build (target < 60 s on tiny-8x8); clock loop {r[name + 'trace_loop_s']:.1f} s wall, "
              f"{c / r[name + 'trace_loop_cpu_s']:,.0f} cycles per CPU second; ops {', '.join(r[name + 'ops'])}: "
              f"{'cycles per op and outputs equal to the cycle and golden models' if r[name + 'equal'] else 'MISMATCH'}")
