"""Speed benchmarks (``make bench``): golden-model decisions and the cycle model at full size.

Prints wall-clock seconds for:

- `algo.golden.decide` on a 4,096-token x 1,536-channel int8 operand (target: < 2 s on a 2-core
  machine, issue 3), with spatially coherent content so every decision kind occurs;
- `sim.cycle_model` on one Wan2.1-T2V-1.3B block at 480p (32,760 tokens = 21x30x52, SPEC section 1)
  on the 128x128 preset, from synthetic decisions (timing only; no operands at this size);
- SCALE-Sim 3.0.0 against `sim.dataflow` (``timing="scalesim"``, identical cycle counts) on dense
  GEMMs of about 2k to 50k cycles on an 8x8 array, and the wall-time ratio (skipped with a reason
  when scalesim is not installed).
"""

from __future__ import annotations

import time

import numpy as np

from algo.golden import block_groups, decide
from hw.config import load_config
from sim.cycle_model import dense_slot_sequence, op_cycles, reuse_slot_sequence


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


def bench_cycle_model() -> tuple[float, dict]:
    cfg = load_config("kaleido-16nm-128x128")
    R, C, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    grid = (21, 30, 52)
    M = 21 * 30 * 52  # noqa: N806
    rng = np.random.default_rng(1)
    # Synthetic decisions, coherent over blocks of 64 positions (SPEC section 3 Monte-Carlo setting).
    shapes = {"qkv": (1536, 4608, 1), "qk": (128, M, 12), "pv": (M, 128, 12), "o_proj": (1536, 1536, 1),
              "ffn1": (1536, 8960, 1), "ffn2": (8960, 1536, 1)}
    out = {}
    reuse_slot_sequence(np.zeros((256, 8), np.int8), (1, 16, 16), block_groups(64), 8, 8, 8, 4)  # compile
    t0 = time.perf_counter()
    for name, (K, N, batch) in shapes.items():  # noqa: N806
        groups = block_groups(K) if name != "qk" else [(0, 44, "w"), (44, 86, "f"), (86, 128, "f")]
        cyc = dense = 0
        for _ in range(batch):
            blocks = rng.choice(3, size=(M // 64 + 1, len(groups)), p=[0.4, 0.3, 0.3]).astype(np.int8)
            dec = np.repeat(blocks, 64, axis=0)[:M]
            dec[: 30 * 52] = 0
            s = reuse_slot_sequence(dec, grid, groups, N, R, C, 4)
            cyc += op_cycles(s, R, C, d)[0]
            dense += op_cycles(dense_slot_sequence(M, K, N, R, C), R, C, d)[0]
        out[name] = (dense, cyc)
    return time.perf_counter() - t0, out


#: Dense GEMMs (M, K, N, dataflow) for the SCALE-Sim comparison on 8x8: ~1.8k to ~52k SCALE-Sim cycles.
SCALESIM_BENCH = [(32, 100, 32, "os"), (64, 256, 64, "os"), (128, 256, 96, "os"),
                  (64, 256, 64, "ws"), (64, 256, 64, "is")]


def bench_scalesim(rows: int = 8, cols: int = 8) -> list[tuple] | str:
    """Wall time of SCALE-Sim 3.0.0 and of `sim.dataflow.gemm_cycles` on the same dense GEMMs.

    Returns rows ``(M, K, N, dataflow, scalesim_cycles, our_cycles, scalesim_s, ours_s)``, or the
    reason the comparison was skipped.
    """
    import timeit

    from sim.dataflow import gemm_cycles, run_scalesim

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


def main() -> None:
    g = bench_golden()
    print(f"golden decide, 4096 tokens x 1536 channels: {g:.3f} s (target < 2 s)")
    t, ops = bench_cycle_model()
    print(f"cycle model, one Wan2.1-1.3B block at 480p on 128x128 (synthetic decisions): {t:.2f} s")
    for name, (dense, cyc) in ops.items():
        print(f"  {name:7s} dense {dense:>12,} cycles, reuse {cyc:>12,} cycles, {dense / cyc:.2f}x")
    rows = bench_scalesim()
    if isinstance(rows, str):
        print(f"SCALE-Sim comparison skipped: {rows}")
        return
    print("SCALE-Sim 3.0.0 vs sim.dataflow (timing='scalesim'), dense GEMMs on 8x8:")
    bad = 0
    for M, K, N, df, ref, ours, t_ref, t_ours in rows:  # noqa: N806
        same = "identical" if ref == ours else f"MISMATCH (ours {ours:,})"
        bad += ref != ours
        print(f"  {M}x{K}x{N} {df}: {ref:>7,} cycles {same}; SCALE-Sim {t_ref:.2f} s, ours {t_ours * 1e6:.1f} us "
              f"-> {t_ref / t_ours:,.0f}x faster")
    if bad:
        raise SystemExit(f"{bad} SCALE-Sim cycle mismatches")


if __name__ == "__main__":
    main()
