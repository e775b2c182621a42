"""Seeded random RTL regression of the banded organisations (compact, delta) on the compiled band engine
(`sim.engines.verilator_band`, docs/decisions.md D86), and its replay.

Configs (`band_config`): tiny-8x8 with the organisation overridden, in two shapes (`SHAPES`): 4 bands of 2 rows on
2 output ports (B > d: two bands time-share a port, the balanced preset's ratio of 8 bands on 4 ports) and 2 bands
of 4 rows on 4 ports (B < d: each band uses two ports round robin); a partial-sum SRAM, and for delta a
difference-sum buffer, so the default issue order is D84's chunk-major one. Every shape runs the same cases.

`make_case` draws one GEMM per (organisation, seed, index): groups on ``f``, ``w``, ``h`` or several axes (several
axis classes for delta), scattered and frame-coherent decisions with random mixes, PARTIAL-heavy mixes (paired
half-width band-tiles), dense ops, shapes that are no multiple of the array (grid with partial pools, K, N),
int8 and uint8 operands, chunks of random frames (flushes that mix COMPUTE and PARTIAL rows), for delta random
column blocks per group and both issue orders (D84 and D68), and the accumulator-width corners at the longest K
the config allows: every operand -128 (int8) and X = 255 against W = -128 (uint8); for delta also the 9-bit
differences' extreme (+-255 against -128 over K - 1 channels). `check_case` holds the engine's run against:

- every drained word against the band-tile's expected words (`sim.engines.band_stimulus`, from X and W);
- ``Y`` from the drained rows by the organisation's combine rule (`tests.rtl.combine_rules`) against
  `algo.reuse.golden.apply_decisions`, bit for bit (delta also against `sim.timing.delta_reference.delta_gemm`);
- every band-tile's band and last-slot cycle against `sim.timing.compact.band_schedule` over the issue order,
  and the run's last row against `sim.timing.compact.band_cycles`;
- delta: the drained rows through the compiled combine unit ``kaleido_dcombine`` (`sim.engines.verilator_stream`,
  `dcombine_cycles`): every output row against Y of the golden model, 2 cycles after its token's last command.

Replay one case with waveforms (the command a failure prints)::

    KALEIDO_WAVES=1 .venv/bin/python -m tests.rtl.band_regression --organisation ORG --shape SHAPE --seed S --case I [--tile T]

writes ``rtl-band-<organisation>-<shape>-s<S>-c<I>.fst`` (FST of the array top) over the case, or over band-tile
T's issue and drain; for delta it also runs the combine unit on the drained rows (no waveforms of it).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import numpy as np

from algo.reuse.golden import AXIS_INDEX, COMPUTE, PARTIAL, REUSE, apply_decisions
from hw.config import AcceleratorConfig, load_config
from sim.engines.band_stimulus import BandOp, band_op
from sim.engines.verilator_band import BAND_RESET_TICKS, BandRunResult

#: Default seed (tests/test_rtl_band_regression.py; ``KALEIDO_RTL_SEED`` overrides it).
DEFAULT_SEED = 2026
#: Default cases per organisation: about 2,000 band-tiles each at the default seed.
DEFAULT_CASES = 160
KINDS = ("temporal", "spatial", "axes", "partial", "dense", "corner_int8", "corner_uint8", "corner_diff")
ORGS = ("compact", "delta")
#: Band shapes on tiny-8x8: name -> (bands, output ports).
SHAPES = {"b4-d2": (4, 2), "b2-d4": (2, 4)}


def band_config(organisation: str, shape: str = "b4-d2") -> AcceleratorConfig:
    """tiny-8x8 as ``organisation`` (module docstring) with the bands and ports of `SHAPES` [shape], 64 KiB
    partial-sum SRAM, delta with a 16 KiB difference-sum buffer (chunk-major order)."""
    bands, ports = SHAPES[shape]
    d = load_config("tiny-8x8").model_dump() | {
        "name": f"{organisation}-8x8-{shape}", "organisation": organisation, "psum_sram_kib": 64,
        "compact_bands": bands, "drain_rows_per_cycle": ports, "diff_sram_kib": 16 if organisation == "delta" else 0}
    return AcceleratorConfig.model_validate(d)


@dataclass
class BandCase:
    organisation: str
    index: int
    kind: str
    X: np.ndarray  # noqa: N815
    W: np.ndarray  # noqa: N815
    grid: tuple[int, int, int]
    groups: list[tuple[int, int, str]]
    decisions: np.ndarray
    x_unsigned: bool
    fw: int
    s: int
    chunk_major: bool

    def describe(self) -> str:
        order = (f", {'chunk-major' if self.chunk_major else 'D68'} order, s {self.s}"
                 if self.organisation == "delta" else "")
        return (f"{self.kind}, grid {self.grid}, K {self.X.shape[1]}, N {self.W.shape[1]}, "
                f"{'uint8' if self.x_unsigned else 'int8'}, groups {self.groups}, fw {self.fw}{order}")

    def op(self, cfg: AcceleratorConfig) -> BandOp:
        return band_op(self.X, self.W, self.grid, self.groups, self.decisions, cfg, self.fw, self.s, self.chunk_major)


def _groups(rng, K: int, axes) -> list[tuple[int, int, str]]:  # noqa: N803
    cuts = np.sort(rng.choice(np.arange(1, K), size=len(axes) - 1, replace=False)) if len(axes) > 1 else []
    bounds = [0, *[int(c) for c in cuts], K]
    return [(bounds[i], bounds[i + 1], axes[i]) for i in range(len(axes))]


def _decisions(rng, grid, groups, p) -> np.ndarray:
    """Per (frame, group) scattered (per token) or coherent (one decision for the frame); a token without a
    neighbour along its group's axis COMPUTEs (the golden model's rule)."""
    F, H, W = grid  # noqa: N806
    dec = np.zeros((F, H * W, len(groups)), dtype=np.int8)
    for f in range(F):
        for g in range(len(groups)):
            scattered = rng.random() < 0.6
            dec[f, :, g] = rng.choice([COMPUTE, PARTIAL, REUSE], size=H * W if scattered else 1, p=p)
    dec = dec.reshape(F * H * W, len(groups))
    idx = np.unravel_index(np.arange(F * H * W), grid)
    for g, (_k0, _k1, ax) in enumerate(groups):
        dec[idx[AXIS_INDEX[ax]] == 0, g] = COMPUTE
    return dec


def make_case(organisation: str, seed: int, index: int, cfg: AcceleratorConfig) -> BandCase:
    """Case ``index`` of the regression of ``seed`` for ``organisation`` on ``cfg`` (deterministic)."""
    C = cfg.array_cols  # noqa: N806
    rng = np.random.default_rng([seed, ORGS.index(organisation), index])
    kinds = [k for k in KINDS if organisation == "delta" or k != "corner_diff"]
    kind = kinds[index] if index < len(kinds) else str(rng.choice(kinds, p=_probs(kinds)))
    x_unsigned = bool(rng.random() < 0.35)
    max_k = max(cfg.max_k, cfg.max_tokens)  # hw.config.AcceleratorConfig.acc_bits
    if kind.startswith("corner"):
        x_unsigned = kind != "corner_int8" and (kind == "corner_uint8" or bool(rng.random() < 0.5))
        F = 3 if kind == "corner_diff" else int(rng.integers(1, 3))  # noqa: N806
        grid = (F, 1, int(rng.integers(1, 5)))
        K, N = max_k, int(rng.integers(1, C + 1))  # noqa: N806
        groups = [(0, K - 1, "f"), (K - 1, K, "f")] if kind == "corner_diff" else [(0, K, "f")]
        M = int(np.prod(grid))  # noqa: N806
        W = np.full((K, N), -128, np.int8)  # noqa: N806
        dec = np.zeros((M, len(groups)), np.int8)
        if kind == "corner_diff":  # frames 0, hi, 0 (group 0 COMPUTE, group 1 REUSE: not direct): diff +-255
            hi_v, lo_v = (255, 0) if x_unsigned else (127, -128)
            X = np.full((M, K), lo_v, np.uint8 if x_unsigned else np.int8)  # noqa: N806
            X[grid[2]:2 * grid[2]] = hi_v
            dec[grid[2]:, 1] = REUSE
        else:
            X = np.full((M, K), 255 if x_unsigned else -128, np.uint8 if x_unsigned else np.int8)  # noqa: N806
        return BandCase(organisation, index, kind, X, W, grid, groups, dec, x_unsigned, F, 1,
                        organisation == "delta")
    F = int(rng.integers(1, 5))  # noqa: N806
    grid = (F, int(rng.integers(1, 4)), int(rng.integers(1, 6)))
    n_groups = int(rng.integers(1, 5))
    if kind == "spatial":  # one spatial axis for every group (one class)
        axes = [str(rng.choice(["w", "h"]))] * n_groups
    elif kind == "axes":  # several axes: several axis classes for delta (qk's RoPE groups, D71)
        n_groups = max(2, n_groups)
        axes = [str(a) for a in rng.choice(["f", "w", "h"], size=n_groups)]
    else:
        axes = ["f"] * n_groups
    K = int(rng.integers(max(2, n_groups), 33))  # noqa: N806
    N = int(rng.integers(1, 2 * C + 4))  # noqa: N806
    groups = _groups(rng, K, axes)
    M = int(np.prod(grid))  # noqa: N806
    X = (rng.integers(0, 256, size=(M, K)).astype(np.uint8) if x_unsigned  # noqa: N806
         else rng.integers(-128, 128, size=(M, K)).astype(np.int8))
    W = rng.integers(-128, 128, size=(K, N)).astype(np.int8)  # noqa: N806
    p = [0.1, 0.75, 0.15] if kind == "partial" else rng.dirichlet([1.0, 1.0, 1.0])
    dec = np.zeros((M, n_groups), np.int8) if kind == "dense" else _decisions(rng, grid, groups, p)
    n_cb = -(-N // C)
    return BandCase(organisation, index, kind, X, W, grid, groups, dec, x_unsigned, int(rng.integers(1, F + 1)),
                    int(rng.integers(1, n_cb + 1)) if organisation == "delta" else 1,
                    organisation == "delta" and bool(rng.random() < 0.75))


def _probs(kinds) -> np.ndarray:
    """Draw weights of the kinds after the first ``len(kinds)`` cases (each kind once first)."""
    w = {"temporal": 0.3, "spatial": 0.2, "axes": 0.2, "partial": 0.15, "dense": 0.05, "corner_int8": 0.03,
         "corner_uint8": 0.03, "corner_diff": 0.04}
    p = np.array([w[k] for k in kinds])
    return p / p.sum()


def regression_cases(organisation: str, seed: int, cfg: AcceleratorConfig, n: int = DEFAULT_CASES) -> list[BandCase]:
    return [make_case(organisation, seed, i, cfg) for i in range(n)]


def check_case(case: BandCase, op: BandOp, r: BandRunResult, cfg: AcceleratorConfig) -> list[str]:
    """What differs between the engine's run of ``case`` and the golden and cycle models (empty: equal)."""
    from sim.timing.delta_reference import delta_gemm
    from tests.rtl.combine_rules import compact_y, delta_y

    errs = []
    for t, (bt, got) in enumerate(zip(op.tiles, r.drained, strict=True)):
        if not np.array_equal(got, bt.want):
            errs.append(f"band-tile {t} (group {bt.group}, n0 {bt.n0}): drained words differ from X W")
            break
    bad = np.flatnonzero((r.band != op.band) | (r.last != op.last))
    if bad.size:
        t = bad[0]
        errs.append(f"band-tile {t} ran on band {r.band[t]}, last slot at cycle {r.last[t]}; band_schedule: band "
                    f"{op.band[t]}, cycle {op.last[t]} ({bad.size} band-tiles differ)")
    if r.end + 1 != op.cycles:
        errs.append(f"last row at cycle {r.end}: {r.end + 1} cycles, band_cycles {op.cycles}")
    rows = ((int(t), bt.group, bt.n0, w) for bt, got in zip(op.tiles, r.drained, strict=True)
            for t, w in zip(bt.tokens, got, strict=True))
    N = case.W.shape[1]  # noqa: N806
    rule = delta_y if cfg.organisation == "delta" else compact_y
    y = rule(case.decisions, case.grid, case.groups, N, rows)
    want = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    bad = np.argwhere(y != want)
    if bad.size:
        i, j = bad[0]
        errs.append(f"{len(bad)} outputs differ from algo.reuse.golden, first Y[{i}, {j}] = {y[i, j]} "
                    f"(golden {want[i, j]})")
    if cfg.organisation == "delta":
        ref = delta_gemm(case.X, case.W, case.grid, case.groups, case.decisions, cfg.array_rows,
                         cfg.array_rows // cfg.compact_bands, case.fw)
        if not np.array_equal(ref, want):
            errs.append("sim.timing.delta_reference.delta_gemm differs from algo.reuse.golden")
    return errs


def dcombine_cycles(case: BandCase, op: BandOp, r: BandRunResult, cfg: AcceleratorConfig) -> tuple[list[dict], list]:
    """The delta combine unit's inputs per cycle for ``case``'s drained rows (`tests.rtl.delta_bench.dcombine_program`:
    the accumulate commands into D buffer 1 in drain order, one idle cycle, then ``c_sel`` flipped and the output
    commands, then 3 idle cycles, as `tests.rtl.delta_bench.run_dcombine` drives it), and per output command
    ``(cycle, token, column block, last)``."""
    from types import SimpleNamespace

    from tests.rtl.delta_bench import dcombine_program

    runs = [SimpleNamespace(drained_at=[tuple(int(v) for v in a) for a in at], tokens=bt.tokens.tolist(),
                            group=bt.group, n0=bt.n0, drained=list(got))
            for bt, got, at in zip(op.tiles, r.drained, r.drained_at, strict=True)]
    acc, out = dcombine_program(case, runs, cfg)
    cyc = [{"c_sel": 1, "a_valid": 1, **a} for a in acc] + [{"c_sel": 1}]
    cmds = [(len(cyc) + k, c["_token"], c["_cb"], c["c_last"]) for k, c in enumerate(out)]
    cyc += [{"c_sel": 0, "c_valid": 1, **{k: v for k, v in c.items() if not k.startswith("_")}} for c in out]
    return cyc + [{"c_sel": 0}] * 3, cmds


def check_dcombine(case: BandCase, cmds: list, got: dict, cfg: AcceleratorConfig) -> list[str]:
    """Every output row of the delta combine unit's run (``got``: `sim.engines.verilator_stream.StreamEngine.run`'s
    outputs per cycle) against ``Y`` of `algo.reuse.golden.apply_decisions`, 2 cycles after its token's last output
    command (``cmds``: `dcombine_cycles`); empty when equal."""
    from tests.rtl.compact_bench import unpack_signed

    C, N = cfg.array_cols, case.W.shape[1]  # noqa: N806
    want = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    last = [(k + 2, t, cb) for k, t, cb, is_last in cmds if is_last]
    valid = np.flatnonzero(got["y_valid"])
    if valid.tolist() != [k for k, _t, _cb in last]:
        return [f"the combine unit's rows left at cycles {valid.tolist()[:6]}..., expected 2 cycles after each "
                f"token's last command ({[k for k, *_ in last][:6]}...)"]
    for k, t, cb in last:
        n = min(C, N - cb * C)
        row = unpack_signed(int(got["y_data"][k]), cfg.acc_bits, C)[:n]
        if row != want[t, cb * C:cb * C + n].tolist():
            return [f"the combine unit's Y[{t}] (column block {cb}) = {row} differs from algo.reuse.golden "
                    f"{want[t, cb * C:cb * C + n].tolist()}"]
    return []


def replay_command(organisation: str, shape: str, seed: int, index: int, tile: int | None = None) -> str:
    t = f" --tile {tile}" if tile is not None else ""
    return (f"KALEIDO_WAVES=1 .venv/bin/python -m tests.rtl.band_regression --organisation {organisation} "
            f"--shape {shape} --seed {seed} --case {index}{t}")


def main(argv: list[str] | None = None) -> int:
    from sim.engines.verilator_band import BandEngine, RtlEngineError

    ap = argparse.ArgumentParser(prog="python -m tests.rtl.band_regression", description=__doc__.splitlines()[0])
    ap.add_argument("--organisation", choices=ORGS, required=True)
    ap.add_argument("--shape", choices=list(SHAPES), default="b4-d2", help="bands and output ports")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--case", type=int, required=True, help="case index")
    ap.add_argument("--tile", type=int, default=None, help="dump only this band-tile's issue and drain")
    ap.add_argument("--out", default=None, help="FST file (default rtl-band-<organisation>-<shape>-s<seed>-c<case>.fst)")
    args = ap.parse_args(argv)
    cfg = band_config(args.organisation, args.shape)
    case = make_case(args.organisation, args.seed, args.case, cfg)
    print(f"{cfg.name} case {args.case} (seed {args.seed}): {case.describe()}")
    op = case.op(cfg)
    if args.tile is not None and not 0 <= args.tile < len(op.tiles):
        print(f"error: --tile {args.tile}: the case has {len(op.tiles)} band-tiles", file=sys.stderr)
        return 2
    waves = os.environ.get("KALEIDO_WAVES") == "1"
    out = args.out or f"rtl-band-{args.organisation}-{args.shape}-s{args.seed}-c{args.case}.fst"
    try:
        eng = BandEngine(cfg, waves=waves, log=lambda s: print(s, file=sys.stderr))
        r = eng.run([(op, case.x_unsigned)])[0]
        start, stop = r.start_tick, r.last_tick + 1
        if args.tile is not None:
            t = args.tile
            start = r.first_tick + int(op.first[t]) - 2
            stop = min(r.first_tick + int(r.drained_at[t][:, 0].max(initial=r.last[t])) + 2, r.last_tick + 1)
        if waves:
            eng.run([(op, case.x_unsigned)], fst=out, waves_from=start, waves_cycles=stop - start)
            print(f"waveforms: {out} (ticks {start}..{stop - 1}; cycle 0 of the run is tick {r.first_tick}, "
                  f"after {BAND_RESET_TICKS} reset ticks)")
    except RtlEngineError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    errs = check_case(case, op, r, cfg)
    if cfg.organisation == "delta":  # the drained rows through the compiled combine unit too (no waveforms)
        from sim.engines.verilator_stream import StreamEngine

        cyc, cmds = dcombine_cycles(case, op, r, cfg)
        errs += check_dcombine(case, cmds, StreamEngine(cfg, log=lambda s: print(s, file=sys.stderr)).run([cyc])[0],
                               cfg)
    print("\n".join(errs) if errs else "equal to algo.reuse.golden and the cycle model")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
