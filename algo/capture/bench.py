"""Capture speed and memory at real size (``make bench-capture``): one Wan2.1-T2V-1.3B block at 480p.

Each part runs in its own subprocess so that its peak resident memory (``ru_maxrss``) is its own:

- ``bare``: the model built with block 0 only (seeded, bf16; `algo.models.build_model`), its inputs
  to block 0 recorded at 480p (21x30x52 = 32,760 tokens, docs/spec.md §1; step 49 latents), then one
  bare ``model.blocks[0](...)`` call timed (no hooks). Its linears run as `capture` runs them: on a
  CPU without oneDNN bf16 (AVX2 only) as float32 GEMMs of the bf16 operands
  (`algo.capture.bf16_gemm_in_fp32`; PyTorch's reference bf16 GEMM is 7-15x slower there);
- ``capture``: `algo.capture.capture` of that block, ``--size full --blocks 0 --resolution 480p
  --ops qkv,qk,o_proj,ffn1,ffn2 --decisions-only --thetas '2,6;4,12;8,24' --dtype bf16``, streamed to
  a temporary file; reports block 0's time with its hooks (``blocks_s``: quantisation and
  decisions included; the figure set against ``bare``), the whole forward (``forward_s``: the
  embeddings too) and ``decide_s`` (`algo.reuse.kernels.decide_multi`);
- ``pv``: the same capture with ``--ops pv --thetas 4,12``: P (`algo.reuse.softmax`, from the int8
  Q and K) one latent frame of queries (1,560 rows) at a time per head, and its decisions
  (`algo.capture.pv_decisions`; the attention states come from the model's own attention call, D72);
  ``pv_s`` is reported separately (P never fits whole, 12 x 32,760^2 bytes = 12.9 GB), and
  within it the P chunks (12 heads x 21 frames = 252 chunks): time computing them and time deciding
  on them, total and per chunk (`pv_chunk_line`).

- ``pv-probe`` (what ``make bench-capture`` runs instead of ``pv``, which takes about half an hour):
  `algo.capture.pv_decisions` on 3 frame chunks of one head at 480p (1,560 queries x 32,760 keys,
  d_h 128, seeded normal Q and K; the compiled kernels loaded beforehand on a tiny grid), reporting
  the same per-chunk times, extrapolated to the block's 252 chunks.

- ``exact``: the exact capture of block 0 (``--ops`` default: qkv, qk, pv, o_proj, ffn1, ffn2; attention
  states on; ``--dtype bf16``) to a temporary file, format version 5 (pv's P derived from qk's int8 Q
  and K, not stored); ``simulate-exact``: `sim.sweep.video.simulate_trace_file` of that file on
  ``kaleido-16nm-128x128``, as ``kaleido simulate`` runs it (P regenerated a slice of positions of one
  frame of one head at a time, D81).
- ``synth-exact OUT.npz [RES]``: an exact trace of block 0 (step 49, the six self-attention/FFN ops) at
  ``RES`` (default 480p; ``720p``: 75,600 tokens) with the shapes and groups of `algo.capture.plan_ops` and
  seeded uniform int8 operands (scales 0.02; pv's P derived from qk's Q and K), written through
  `algo.trace.TraceWriter` in seconds instead of an hour's capture: what ``simulate-exact`` needs to measure
  the simulation's time and memory, which depend on the shapes, not the values (docs/decisions.md D81).
- ``exact-vs-bare OUT.npz``: ``bare`` then ``exact``, back to back in their own subprocesses, and the
  ratio of the exact capture's block time (``blocks_s``) to the bare block (the issue's 1.5x target
  without the half-hour ``simulate-exact``), with the load average before and after.

Targets: the decision capture of every op but pv within 1.3x of the bare forward, peak memory < 8 GB;
the exact capture within 1.5x of the bare forward, peak <= 4 GB, file <= 1 GB, and its
simulation peak <= 4 GB.
Run: ``python -m algo.capture.bench`` (several minutes on 2 cores).
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

RES, STEP, SEED = "480p", 49, 0
OPS = "qkv,qk,o_proj,ffn1,ffn2"
THETAS = "2,6;4,12;8,24"


def _peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


def part_bare(frames: int | None = None, fp32_gemm: bool = True) -> dict:
    """The bare block forward; ``frames`` latent frames instead of 480p's 21 (scaled check:
    ``python -m algo.capture.bench bare 3`` is 3x30x52 = 4,680 tokens); ``fp32_gemm=False``
    (argument ``ref``) keeps PyTorch's own bf16 GEMM (docs/capture.md, "Speed at 480p")."""
    from algo import latents as lat
    from algo.capture import TEXT_TOKENS, bf16_gemm_in_fp32, native_bf16_gemm, resolution_grid
    from algo.models import build_model, model_config

    cfg = model_config("wan2.1-t2v-1.3b", "full")
    f, h, w = resolution_grid(RES, cfg["patch_size"])
    f = f if frames is None else int(frames)
    net, _ = build_model("wan2.1-t2v-1.3b", "full", SEED, dtype=torch.bfloat16, num_layers=1)
    x0 = lat.image_latents((f, 2 * h, 2 * w))
    sigma = float(lat.flow_sigmas(50)[STEP])
    x_t = torch.from_numpy(lat.noisy_latents(x0, sigma, lat.noise_like(x0, SEED))).to(torch.bfloat16)
    text = torch.from_numpy(np.random.default_rng([SEED, 1]).standard_normal((1, TEXT_TOKENS, cfg["text_dim"]))
                            .astype(np.float32)).to(torch.bfloat16)
    grabbed = {}

    class Stop(Exception):
        pass

    def grab(_m, args, kwargs):
        grabbed["a"], grabbed["k"] = args, kwargs
        raise Stop

    hd = net.blocks[0].register_forward_pre_hook(grab, with_kwargs=True)
    with torch.inference_mode():
        try:
            net(hidden_states=x_t, timestep=torch.tensor([1000 * sigma]), encoder_hidden_states=text,
                return_dict=False)
        except Stop:
            pass
        hd.remove()
        with bf16_gemm_in_fp32(torch.bfloat16 if fp32_gemm else torch.float32):  # as `capture` runs it (fp32 GEMMs without oneDNN bf16)
            t0 = time.perf_counter()
            net.blocks[0](*grabbed["a"], **grabbed["k"])
            t = time.perf_counter() - t0
    return {"bare_block_s": t, "tokens": f * h * w, "peak_gb": _peak_gb(), "native_bf16_gemm": native_bf16_gemm(),
            "threads": torch.get_num_threads(), "cpu": torch.backends.cpu.get_cpu_capability()}


def _capture(ops: str, thetas: str) -> dict:
    from algo.capture import capture

    with tempfile.TemporaryDirectory() as d:
        tr = capture(model="wan2.1-t2v-1.3b", size="full", steps=(STEP,), blocks=(0,), resolution=RES, ops=ops,
                     thetas=thetas, dtype="bf16", seed=SEED, out=Path(d) / "t.npz")
        size = (Path(d) / "t.npz").stat().st_size
    return {**tr.timing, "file_bytes": size, "ops": len(tr.ops), "peak_gb": _peak_gb()}


def part_pv_probe(frames: int = 3) -> dict:
    """P chunks and their decisions for one head, ``frames`` latent frames of 480p (see module docstring)."""
    from algo.capture import pv_decisions
    from algo.reuse.golden import block_groups
    from algo.trace import Group

    f_all, h, w = 21, 30, 52  # 480p latent grid (docs/spec.md §1)
    m, d_h = f_all * h * w, 128
    gen = torch.Generator().manual_seed(SEED)
    q = torch.randn(1, frames * h * w, d_h, generator=gen)
    k = torch.randn(1, m, d_h, generator=gen)
    groups = [Group(*g) for g in block_groups(m)]
    # load the compiled kernels on a 2x1x2 grid first, so that no chunk's time includes loading them
    pv_decisions(q[:, :4], k[:, :4], (2, 1, 2), [Group(*g) for g in block_groups(4)], [(4.0, 12.0)], 4)
    timing: dict = {}
    pv_decisions(q, k, (frames, h, w), groups, [(4.0, 12.0)], 4, timing=timing)
    chunks = 12 * f_all
    per = (timing["p_chunk_s"] + timing["p_decide_s"]) / max(1, timing["p_chunks"])
    return {**timing, "block_estimate_s": per * chunks, "block_chunks": chunks, "peak_gb": _peak_gb()}


def part_exact(out: str) -> dict:
    """Exact capture of block 0 at 480p (every self-attention/FFN op, attention states on, bf16) to ``out``."""
    from algo.capture import capture

    t0 = time.perf_counter()
    tr = capture(model="wan2.1-t2v-1.3b", size="full", steps=(STEP,), blocks=(0,), resolution=RES, dtype="bf16",
                 seed=SEED, out=Path(out))
    return {**tr.timing, "wall_s": time.perf_counter() - t0, "file_bytes": Path(out).stat().st_size,
            "ops": len(tr.ops), "peak_gb": _peak_gb()}


def part_synth_exact(out: str, res: str = RES) -> dict:
    """``synth-exact`` (module docstring): write the seeded random exact trace to ``out``; its size in bytes."""
    import dataclasses

    from algo.capture import plan_ops
    from algo.trace import TraceWriter

    rng = np.random.default_rng(SEED)
    grid, plan = plan_ops("wan2.1-t2v-1.3b", "full", steps=(STEP,), blocks=(0,), resolution=res,
                          ops="qkv,qk,pv,o_proj,ffn1,ffn2")
    qk = None
    with TraceWriter(out, grid, "exact", model="wan2.1-t2v-1.3b", size="full", seed=SEED,
                     weights=f"seeded uniform int8 operands (algo.capture.bench synth-exact, seed {SEED})") as wr:
        for op in plan:
            batch, m, k, n = op.dims
            w = rng.integers(-128, 128, (batch, k, n), dtype=np.int8)
            if op.name == "pv":
                new = dataclasses.replace(op, X=None, W=w, dims=None, x_scale=1.0, w_scale=0.02,
                                          scores=(qk.X, qk.W, qk.x_scale, qk.w_scale))
            else:
                x = rng.integers(-128, 128, (batch, m, k), dtype=np.int8)
                new = dataclasses.replace(op, X=x, W=w, dims=None, x_scale=0.02, w_scale=0.02)
            if op.name == "qk":
                qk = new
            wr.add(new)
            del new, w
    return {"file_bytes": Path(out).stat().st_size, "grid": list(grid), "peak_gb": _peak_gb()}


def part_simulate_exact(path: str) -> dict:
    """`kaleido simulate` of the exact trace at ``path`` (cycle model, default config), as the CLI runs it:
    one (step, block) at a time, pv's P regenerated a slice of one frame of one head at a time
    (`algo.reuse.chunked`)."""
    from hw.config import load_config
    from sim.sweep.video import simulate_trace_file

    t0 = time.perf_counter()
    res = simulate_trace_file(path, load_config("kaleido-16nm-128x128"), workers=0)
    return {"simulate_s": time.perf_counter() - t0, "cycles": res["cycles"], "dense_cycles": res["dense_cycles"],
            "peak_gb": _peak_gb()}


def run_part(name: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "algo.capture.bench", name, *args], capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def exact_lines(bare: dict, ex: dict, sim: dict) -> list[str]:
    """The exact-trace figures against their targets (module docstring)."""
    ratio = ex["blocks_s"] / bare["bare_block_s"]
    return [
        f"  exact capture (qkv,qk,pv,o_proj,ffn1,ffn2, attention states, P derived not stored): block with hooks "
        f"{ex['blocks_s']:.1f} s ({ratio:.2f}x bare; target <= 1.5x), whole forward {ex['forward_s']:.1f} s, "
        f"wall {ex['wall_s']:.1f} s; peak {ex['peak_gb']:.2f} GB (target <= 4 GB); trace "
        f"{ex['file_bytes'] / 1e6:,.0f} MB (target <= 1,000 MB)",
        f"  simulate that exact trace (cycle model, kaleido-16nm-128x128): {sim['simulate_s']:.1f} s, "
        f"{sim['cycles']:,} cycles vs {sim['dense_cycles']:,} dense; peak {sim['peak_gb']:.2f} GB (target <= 4 GB)",
    ]


def part_exact_vs_bare(out: str) -> dict:
    """``bare`` and ``exact`` back to back (module docstring), with ``os.getloadavg`` around them."""
    import os

    load0 = os.getloadavg()
    bare = run_part("bare")
    ex = run_part("exact", out)
    return {"bare": bare, "exact": ex, "ratio": ex["blocks_s"] / bare["bare_block_s"], "load_before": load0,
            "load_after": os.getloadavg()}


def main() -> None:
    bare = run_part("bare")
    cap = run_part("capture")
    pv = run_part("pv-probe")
    with tempfile.TemporaryDirectory() as d:
        exact = run_part("exact", str(Path(d) / "exact.npz"))
        sim = run_part("simulate-exact", str(Path(d) / "exact.npz"))
    ratio = cap["blocks_s"] / bare["bare_block_s"]
    print(f"capture, one Wan2.1-1.3B block at 480p (32,760 tokens), bf16, step {STEP}, 2-core CPU:")
    gemm = "oneDNN bf16" if bare["native_bf16_gemm"] else "float32 GEMMs of bf16 operands (no oneDNN bf16)"
    print(f"  bare block forward: {bare['bare_block_s']:.1f} s (peak {bare['peak_gb']:.2f} GB; linears: {gemm}; "
          f"{bare['threads']} threads, {bare['cpu']})")
    print(f"  capture {OPS}, decisions for thetas {THETAS}: block with hooks {cap['blocks_s']:.1f} s "
          f"({ratio:.2f}x bare; target <= 1.3x), of which decide {cap['decide_s']:.1f} s; whole forward "
          f"(embeddings too) {cap['forward_s']:.1f} s ({cap['forward_s'] / bare['bare_block_s']:.2f}x); model build "
          f"{cap['build_s']:.1f} s; trace {cap['file_bytes'] / 1e6:.2f} MB; peak {cap['peak_gb']:.2f} GB "
          "(target < 8 GB)")
    print(f"  pv probe (one head, {int(pv['p_chunks'])} frame chunks of 1,560 queries x 32,760 keys, theta 4,12; "
          f"peak {pv['peak_gb']:.2f} GB): " + pv_chunk_line(pv))
    print(f"  pv whole block, extrapolated: {pv['block_chunks']} chunks x per-chunk time = "
          f"{pv['block_estimate_s'] / 60:.1f} min (`python -m algo.capture.bench pv` runs it)")
    for line in exact_lines(bare, exact, sim):
        print(line)


def pv_chunk_line(t: dict) -> str:
    """P chunk timing, reported apart from the rest of the capture."""
    n = max(int(t.get("p_chunks", 0)), 1)
    return (f"P chunks: {int(t.get('p_chunks', 0))} (one latent frame of queries x one head each), computing P "
            f"{t.get('p_chunk_s', 0.0):.1f} s ({1e3 * t.get('p_chunk_s', 0.0) / n:.1f} ms per chunk), their "
            f"decisions {t.get('p_decide_s', 0.0):.1f} s ({1e3 * t.get('p_decide_s', 0.0) / n:.1f} ms per chunk)")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        part = {"bare": lambda: part_bare(*(int(a) for a in sys.argv[2:3]), fp32_gemm="ref" not in sys.argv[3:]),
                "capture": lambda: _capture(OPS, THETAS), "pv": lambda: _capture("pv", "4,12"),
                "pv-probe": part_pv_probe, "exact": lambda: part_exact(sys.argv[2]),
                "exact-vs-bare": lambda: part_exact_vs_bare(sys.argv[2]),
                "simulate-exact": lambda: part_simulate_exact(sys.argv[2]),
                "synth-exact": lambda: part_synth_exact(*sys.argv[2:4])}
        print(json.dumps(part[sys.argv[1]]()))
    else:
        main()
