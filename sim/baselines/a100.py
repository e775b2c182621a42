"""NVIDIA A100 roofline baseline: per-op time and board energy from published figures.

Per GEMM op (batch elements summed): ``FLOPs = 2 batch M K N`` and bytes moved
``batch (M K + K N) x 1`` (int8 operands) ``+ batch M N x out_bytes`` (output; default 2: an INT8
GEMM with an fp16/bf16 epilogue, as int8 kernels hand results to the next fp16 op), each operand
read once (ideal caching, optimistic for the GPU). Time
``t = max(FLOPs / (peak x compute_efficiency), bytes / (bandwidth x memory_efficiency)) + launch_us``;
energy ``= board_power x t`` (1 W x 1 us = 1e6 pJ). The vector work (norms, softmax, GELU) is not
charged to the GPU (optimistic for the GPU). ``cycles`` = ``t x clock_mhz`` of the Kaleido config,
so the column is comparable with the array's cycles.

Published figures (NVIDIA A100 Tensor Core GPU datasheet, 2021, "NVIDIA A100 | Datasheet"):
dense INT8 Tensor Core 624 TOPS, dense FP16/BF16 Tensor Core 312 TFLOPS (twice with 2:4 structured
sparsity, not used: the traces' operands are not 2:4 sparse); HBM2 1,555 GB/s (A100 40GB) and HBM2e
2,039 GB/s (A100 80GB SXM); max TDP 400 W (SXM).

Achieved efficiency (project assumptions, stated, not measured on an A100): compute 0.7 of peak --
large cuBLAS/CUTLASS tensor-core GEMMs run at roughly 70-80 % of peak, the low end taken because
DiT blocks mix in small per-head GEMMs -- and memory 0.8 of the HBM peak (sustained streaming
bandwidth is below the pin rate). Board power at the full 400 W TDP for the op's whole duration
is an upper bound on energy (the GPU draws less on memory-bound kernels). A measured PyTorch run on
an A100 would replace both factors (no A100 is available to this project).
"""

from __future__ import annotations

from algo.trace import Trace

#: GA100 die area, mm^2 (NVIDIA A100 Tensor Core GPU Architecture whitepaper, 2020: 826 mm^2, TSMC 7 nm).
A100_DIE_MM2 = 826.0

NAME = "a100"
LABEL = "NVIDIA A100 (roofline)"

#: Variants: peak dense tensor-core throughput (TOPS or TFLOPS), HBM bandwidth (GB/s), board power (W).
VARIANTS = {
    "80gb-sxm": {"int8_tops": 624.0, "fp16_tflops": 312.0, "hbm_gbps": 2039.0, "board_w": 400.0},
    "40gb-sxm": {"int8_tops": 624.0, "fp16_tflops": 312.0, "hbm_gbps": 1555.0, "board_w": 400.0},
}
DEFAULTS = {"variant": "80gb-sxm", "precision": "int8", "compute_efficiency": 0.7, "memory_efficiency": 0.8,
            "out_bytes": 2, "launch_us": 0.0}


class A100Error(ValueError):
    """Bad A100 roofline parameters."""


def check_params(params: dict | None) -> dict:
    """Defaults filled in and validated. Raises `A100Error`."""
    p = {**DEFAULTS, **(params or {})}
    unknown = sorted(set(p) - set(DEFAULTS))
    if unknown:
        raise A100Error(f"a100: unknown parameters {unknown}; known: {sorted(DEFAULTS)}")
    if p["variant"] not in VARIANTS:
        raise A100Error(f"a100: variant must be one of {', '.join(VARIANTS)}, got {p['variant']!r}")
    if p["precision"] not in ("int8", "fp16"):
        raise A100Error(f"a100: precision must be int8 or fp16, got {p['precision']!r}")
    for k in ("compute_efficiency", "memory_efficiency"):
        if not 0 < float(p[k]) <= 1:
            raise A100Error(f"a100: {k} must be in (0, 1], got {p[k]!r}")
    if float(p["out_bytes"]) <= 0 or float(p["launch_us"]) < 0:
        raise A100Error("a100: out_bytes must be > 0 and launch_us >= 0")
    return p


def op_time_us(batch: int, M: int, K: int, N: int, params: dict) -> tuple[float, float, float]:  # noqa: N803
    """``(time_us, compute_us, memory_us)`` of one GEMM op, microseconds (module docstring).

    ``batch``, ``M``, ``K``, ``N``: GEMM shape (batch elements of ``[M, K] x [K, N]``); ``params``:
    `check_params`'s output.
    """
    v = VARIANTS[params["variant"]]
    in_bytes = 1 if params["precision"] == "int8" else 2
    peak = (v["int8_tops"] if params["precision"] == "int8" else v["fp16_tflops"]) * 1e12
    flops = 2.0 * batch * M * K * N
    nbytes = batch * ((M * K + K * N) * in_bytes + M * N * float(params["out_bytes"]))
    compute_us = flops / (peak * float(params["compute_efficiency"])) * 1e6
    memory_us = nbytes / (v["hbm_gbps"] * 1e9 * float(params["memory_efficiency"])) * 1e6
    return max(compute_us, memory_us) + float(params["launch_us"]), compute_us, memory_us


def run(trace: Trace, clock_mhz: float, params: dict | None = None) -> dict:
    """Roofline per op of the trace and totals: the baseline entry (`sim.baselines.run_baselines`).

    ``time_us`` in microseconds, ``energy_pj`` in pJ (board power x time), ``cycles`` = time x
    `clock_mhz` (the Kaleido config's clock, MHz; float). Raises `A100Error` on bad `params`.
    """
    p = check_params(params)
    watts = VARIANTS[p["variant"]]["board_w"]
    per_op = []
    for op in trace.ops:
        t, tc, tm = op_time_us(op.batch, op.M, op.K, op.N, p)
        per_op.append({"name": op.name, "block": op.block, "step": op.step, "time_us": t,
                       "cycles": t * clock_mhz, "energy_pj": watts * t * 1e6,
                       "bound": "compute" if tc >= tm else "memory"})
    t = sum(r["time_us"] for r in per_op)
    return {"name": NAME, "label": LABEL, "kind": "roofline", "params": p,
            "time_us": t, "cycles": t * clock_mhz, "energy_pj": watts * t * 1e6,
            "energy_breakdown_pj": {"board": watts * t * 1e6}, "per_op": per_op,
            "notes": "roofline with assumed efficiencies (sim/baselines/a100.py); not measured"}


def peak_tops(rows: int, cols: int, clock_mhz: float) -> float:
    """Peak int8 TOPS of an R x C MAC array: ``2 R C clock`` (one multiply and one add per PE per cycle)."""
    return 2.0 * rows * cols * clock_mhz * 1e6 / 1e12


def normalised(a100_time_us: float, time_us: float, die_mm2: float, tops: float, variant: str = "80gb-sxm") -> dict:
    """A design's speedup over the A100 three ways (the paper's "6.6x over an A100" does not say which):

    - ``raw``: ``a100_time / time`` (the same work, chip against chip);
    - ``per_mm2``: throughput per mm^2 of die, ``raw x A100_DIE_MM2 / die_mm2`` (the design's die from the area
      model, at its own node; the A100 is 7 nm, so this favours the A100 when the design is at 16 nm);
    - ``per_peak_tops``: throughput per peak int8 TOPS, ``raw x A100 int8 peak / tops``: how well each chip
      uses what it has (a 128 x 128 int8 array at 1 GHz has 32.8 TOPS, 1/19 of the A100's 624).

    Also returns the two ratios used (``area_ratio``, ``peak_ratio``). Raises `A100Error` on a non-positive input.
    """
    if min(a100_time_us, time_us, die_mm2, tops) <= 0:
        raise A100Error("a100: times, die area and peak TOPS must be > 0")
    raw = a100_time_us / time_us
    area_ratio, peak_ratio = A100_DIE_MM2 / die_mm2, VARIANTS[variant]["int8_tops"] / tops
    return {"raw": raw, "per_mm2": raw * area_ratio, "per_peak_tops": raw * peak_ratio,
            "area_ratio": area_ratio, "peak_ratio": peak_ratio}
