"""Seeded random RTL regression on the compiled engine (`sim.engines.verilator`), and its replay.

`regression_cases` draws GEMMs for one preset from a seed: every organisation the RTL has (today the
lock-step array: one slot stream, every PE row on the same channel pair), random mode mixes
(scattered and coherent decisions per group, row-complementary groups that pair across groups and
select lane b, ``w``-axis groups on the PE row link, dense ops), shapes that are no multiple of the
array (grid, K, N), int8 and uint8 operands, and the accumulator-width corners at the longest K the
preset allows (every operand -128; uint8 255 against -128). `check_case` holds one case's engine
result against `algo.reuse.golden.apply_decisions` (bit-exact) and against the cycle model (per-tile
slots, op cycles, and every tile's finish cycle ``L_t + R + C + 1`` from the timing contract).

Replay one case with waveforms (the command a failure prints)::

    KALEIDO_WAVES=1 .venv/bin/python -m tests.rtl.regression --seed S --case I [--tile T] [--preset P]

writes ``rtl-regression-<preset>-s<S>-c<I>.fst`` (FST, GTKWave) over the case, or over tile T's
issue and drain only.
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import numpy as np

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE, apply_decisions
from hw.config import AcceleratorConfig, load_config
from sim.engines.verilator import RESET_TICKS, Gemm, RunResult
from sim.timing.cycle_model import PIPELINE_CYCLES, op_cycles, reuse_slot_sequence

#: Default regression seed (tests/test_rtl_regression.py; ``KALEIDO_RTL_SEED`` overrides it).
DEFAULT_SEED = 2026
#: Default number of cases: about 1,300 tiles on tiny-8x8 at the default seed.
DEFAULT_CASES = 240
KINDS = ("temporal", "complementary", "spatial", "dense", "corner_int8", "corner_uint8")


@dataclass
class RegressionCase:
    index: int
    kind: str
    gemm: Gemm
    x_unsigned: bool

    def describe(self) -> str:
        g = self.gemm
        return (f"{self.kind}, grid {g.grid}, K {g.X.shape[1]}, N {g.W.shape[1]}, "
                f"{'uint8' if self.x_unsigned else 'int8'}, groups {[(a, b, x) for a, b, x in g.groups]}")


def _groups(rng, K: int, axes) -> list[tuple[int, int, str]]:  # noqa: N803
    n = len(axes)
    cuts = np.sort(rng.choice(np.arange(1, K), size=n - 1, replace=False)) if n > 1 else np.array([], int)
    bounds = [0, *cuts.tolist(), K]
    return [(bounds[i], bounds[i + 1], axes[i]) for i in range(n)]


def _valid(dec: np.ndarray, grid, groups) -> np.ndarray:
    """Make decisions valid: a token without a neighbour (frame 0 for ``f``, ``w = 0`` for ``w``) COMPUTEs."""
    f_i, _, w_i = np.unravel_index(np.arange(dec.shape[0]), grid)
    for gi, (_, _, a) in enumerate(groups):
        dec[(w_i if a == "w" else f_i) == 0, gi] = COMPUTE
    return dec


def _decisions(rng, grid, n_groups: int) -> np.ndarray:
    """Per group and frame either scattered (per token) or coherent (one decision for the frame)."""
    F, H, W = grid  # noqa: N806
    dec = np.zeros((F, H * W, n_groups), dtype=np.int8)
    p = rng.dirichlet([1.0, 1.0, 1.0])
    for f in range(F):
        for g in range(n_groups):
            if rng.random() < 0.5:
                dec[f, :, g] = rng.choice([COMPUTE, PARTIAL, REUSE], size=H * W, p=p)
            else:
                dec[f, :, g] = rng.choice([COMPUTE, PARTIAL, REUSE], p=p)
    return dec.reshape(F * H * W, n_groups)


def make_case(seed: int, index: int, cfg: AcceleratorConfig) -> RegressionCase:
    """Case `index` of the regression of `seed` on `cfg` (deterministic)."""
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    rng = np.random.default_rng([seed, index])
    kind = KINDS[index % len(KINDS)] if index < len(KINDS) else str(
        rng.choice(KINDS, p=[0.42, 0.2, 0.25, 0.05, 0.04, 0.04]))
    x_unsigned = bool(rng.random() < 0.3)
    max_k = max(cfg.max_k, cfg.max_tokens)  # hw.config.AcceleratorConfig.acc_bits
    if kind in ("corner_int8", "corner_uint8"):
        x_unsigned = kind == "corner_uint8"
        grid = (int(rng.integers(1, 3)), 1, int(rng.integers(1, R + 1)))
        K, N = max_k, int(rng.integers(1, C + 1))  # noqa: N806
        axes = ["f"] * int(rng.integers(1, cfg.partial_regs + 1))
    else:
        F = int(rng.integers(1, 5))  # noqa: N806
        Wd = int(rng.integers(1, R + 1)) if kind == "spatial" else int(rng.integers(1, 2 * R + 4))  # noqa: N806
        grid = (F, int(rng.integers(1, 4)), Wd)
        n_groups = int(rng.integers(2 if kind == "complementary" else 1, cfg.partial_regs + 1))
        K = int(rng.integers(n_groups, max(n_groups, 40) + 1))  # noqa: N806
        N = int(rng.integers(1, 2 * C + 4))  # noqa: N806
        if kind == "spatial":
            axes = [str(a) for a in rng.choice(["w", "f"], size=n_groups)]
        else:
            axes = ["f"] * n_groups
    groups = _groups(rng, K, axes)
    M = int(np.prod(grid))  # noqa: N806
    if kind == "corner_int8":
        X = np.full((M, K), -128, np.int8)  # noqa: N806
        W = np.full((K, N), -128, np.int8)  # noqa: N806
    elif kind == "corner_uint8":
        X = np.full((M, K), 255, np.uint8)  # noqa: N806
        W = np.full((K, N), -128, np.int8)  # noqa: N806
    else:
        X = (rng.integers(0, 256, size=(M, K)).astype(np.uint8) if x_unsigned  # noqa: N806
             else rng.integers(-128, 128, size=(M, K)).astype(np.int8))
        W = rng.integers(-128, 128, size=(K, N)).astype(np.int8)  # noqa: N806
    if kind == "dense":
        dec = np.zeros((M, len(groups)), np.int8)
    elif kind == "complementary":  # pairs across groups, lane-b selects: halves of every frame swap roles
        dec = _decisions(rng, grid, len(groups))
        hw = grid[1] * grid[2]
        upper = (np.arange(M) % hw) < hw // 2
        pairs = [(COMPUTE, REUSE), (PARTIAL, REUSE), (PARTIAL, PARTIAL), (COMPUTE, PARTIAL)]
        for g in range(0, len(groups) - 1, 2):
            a, b = pairs[int(rng.integers(len(pairs)))]
            dec[:, g] = np.where(upper, a, b)
            dec[:, g + 1] = np.where(upper, b, a)
    else:
        dec = _decisions(rng, grid, len(groups))
    dec = _valid(dec, grid, groups)
    return RegressionCase(index, kind, Gemm(X, W, grid, groups, dec, 4), x_unsigned)


def regression_cases(seed: int, cfg: AcceleratorConfig, n: int = DEFAULT_CASES) -> list[RegressionCase]:
    return [make_case(seed, i, cfg) for i in range(n)]


def tile_finish(s_seq: np.ndarray, rows: int, cols: int, ports: int) -> np.ndarray:
    """Per tile, the cycle (from the first issue) at which its last row leaves: ``L_t + R + C + 1``
    with ``L_t = max(L_{t-1} + S_t, L_{t-d} + R)`` (docs/architecture.md, "Timing contract")."""
    last = [-(1 << 40)] * ports
    prev, out = -1, []
    for t, s in enumerate(s_seq.tolist()):
        lt = max(prev + max(1, s), last[t % ports] + rows)
        last[t % ports] = prev = lt
        out.append(lt + rows + cols + PIPELINE_CYCLES - 1)
    return np.array(out, dtype=np.int64)


def check_case(case: RegressionCase, r: RunResult, cfg: AcceleratorConfig) -> list[str]:
    """What differs between the engine's run of `case` and the golden and cycle models (empty: equal)."""
    g = case.gemm
    R, C, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    errs = []
    want = apply_decisions(g.X, g.W, g.grid, list(g.groups), g.decisions, g.b_msb)
    bad = np.argwhere(r.ys[0] != want)
    if bad.size:
        i, j = bad[0]
        errs.append(f"{len(bad)} outputs differ from algo.reuse.golden, first Y[{i}, {j}] = {r.ys[0][i, j]} "
                    f"(golden {want[i, j]})")
    seq = reuse_slot_sequence(g.decisions, g.grid, list(g.groups), g.W.shape[1], R, C, g.b_msb)
    if np.maximum(seq, 1).tolist() != r.slots_per_tile.tolist():  # S_t = max(1, slots_t): a bubble slot
        errs.append("the stream's slots per tile differ from the cycle model's")
        return errs
    cycles, _ = op_cycles(seq, R, C, d)
    if r.cycles != cycles:
        errs.append(f"{r.cycles} cycles, cycle model {cycles}")
    fin = tile_finish(seq, R, C, d)
    late = np.flatnonzero(fin != r.tile_done)
    if late.size:
        t = late[0]
        errs.append(f"tile {t} finished at cycle {r.tile_done[t]}, cycle model {fin[t]} ({late.size} tiles differ)")
    return errs


def replay_command(seed: int, index: int, preset: str, tile: int | None = None) -> str:
    t = f" --tile {tile}" if tile is not None else ""
    return f"KALEIDO_WAVES=1 .venv/bin/python -m tests.rtl.regression --seed {seed} --case {index}{t} --preset {preset}"


def main(argv: list[str] | None = None) -> int:
    from sim.engines.verilator import Engine, RtlEngineError

    ap = argparse.ArgumentParser(prog="python -m tests.rtl.regression", description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--case", type=int, required=True, help="case index")
    ap.add_argument("--tile", type=int, default=None, help="dump only this tile's issue and drain")
    ap.add_argument("--preset", default="tiny-8x8")
    ap.add_argument("--out", default=None, help="FST file (default rtl-regression-<preset>-s<seed>-c<case>.fst)")
    args = ap.parse_args(argv)
    cfg = load_config(args.preset)
    case = make_case(args.seed, args.case, cfg)
    print(f"case {args.case} (seed {args.seed}): {case.describe()}")
    waves = os.environ.get("KALEIDO_WAVES") == "1"
    out = args.out or f"rtl-regression-{cfg.name}-s{args.seed}-c{args.case}.fst"
    try:
        eng = Engine(cfg, waves=waves, log=lambda s: print(s, file=sys.stderr))
        r = eng.run([([case.gemm], case.x_unsigned)])[0]
        start, stop = r.start_tick, r.last_tick + 1
        if args.tile is not None:
            seq = r.slots_per_tile
            fin = tile_finish(seq, cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle)
            issue_end = fin - (cfg.array_rows + cfg.array_cols + PIPELINE_CYCLES - 1)
            first = issue_end[args.tile] - max(1, int(seq[args.tile])) + 1
            start = r.start_tick + RESET_TICKS + int(first) - 2
            stop = min(r.start_tick + RESET_TICKS + int(fin[args.tile]) + 2, r.last_tick + 1)  # the run ends there
        if waves:
            eng.run([([case.gemm], case.x_unsigned)], fst=out, waves_from=start, waves_cycles=stop - start)
            print(f"waveforms: {out} (ticks {start}..{stop - 1})")
    except RtlEngineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    errs = check_case(case, r, cfg)
    print("\n".join(errs) if errs else "equal to algo.reuse.golden and the cycle model")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
