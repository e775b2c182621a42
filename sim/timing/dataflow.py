"""Dense GEMM timing on an R x C systolic array for output-, weight- and input-stationary dataflows.

The GEMM is ``Y[M, N] = X[M, K] @ W[K, N]`` (M tokens, K reduction channels, N output channels),
run with reuse off on an array of ``rows`` (R) x ``cols`` (C) PEs. All results are clock cycles
(ints); ``ceil(a/b)`` is written ``⌈a/b⌉``. Two timing modes (docs/spec.md §4):

``timing="scalesim"`` -- exactly the compute cycles SCALE-Sim 3.0.0 reports ("Total Cycles" column of
its COMPUTE_REPORT.csv, GEMM input mode, CALC bandwidth, no stalls). SCALE-Sim runs the folds of
a GEMM one after another with no overlap, each fold paying its own fill and drain, and reports the
0-indexed cycle of the last output write, hence the ``- 1``. Measured on SCALE-Sim 3.0.0
(docs/toolchain.md; re-checked live by tests/test_scalesim.py on 4x4, 8x8, 8x4 and 4x8
arrays, and once by hand on 216 random shapes on arrays from 3x5 to 16x8 plus 15 larger runs up to
128x128 and 58k cycles):

- OS (one output tile of R tokens x C channels per fold): ``⌈M/R⌉·⌈N/C⌉·(R + C + K − 2) − 1``
- WS (one R x C block of W per fold, M rows of X streamed): ``⌈K/R⌉·⌈N/C⌉·(2R + C + M − 2) − 1``
- IS (one R x C block of Xᵀ per fold, N columns of W streamed): ``⌈K/R⌉·⌈M/C⌉·(2R + C + N − 2) − 1``

``timing="native"`` -- our accelerator's own timing, where successive folds (tiles) overlap:

- OS is the Kaleido array's contract (docs/architecture.md, "Timing contract"; `sim.timing.cycle_model`):
  ``op_cycles(dense_slot_sequence(M, K, N, R, C), R, C, ports)``. Tiles of K slots issue back to
  back, limited only by the ``ports`` (``drain_rows_per_cycle``) output ports per column; the array
  fill/drain (R + C + 2 with the PE and port registers) is paid once per op, not once per tile.
  Without drain stalls (``K·ports ≥ R``) this is ``T·K + R + C + 1`` for ``T = ⌈M/R⌉·⌈N/C⌉`` tiles,
  against SCALE-Sim's ``T·(R + C + K − 2) − 1``.
- WS and IS are not built in our RTL; native timing is the same overlapped analogue of SCALE-Sim's
  per-fold schedule. A fold preloads its stationary block in R cycles (one row per cycle), streams
  S operand vectors (S = M for WS, N for IS) and drains through R + C − 2 skew cycles. With the
  stationary operand double-buffered (shadow registers loaded while the previous fold streams),
  folds issue every ``max(S, R)`` cycles and only the first preload and the last drain are exposed:
  ``R + (F − 1)·max(S, R) + S + R + C − 2`` cycles for F folds (F = ⌈K/R⌉·⌈N/C⌉ for WS,
  ⌈K/R⌉·⌈M/C⌉ for IS). It counts cycles (a one-fold GEMM is SCALE-Sim's count + 1, the 0-index
  offset), and ignores ``ports``: WS/IS outputs leave every column every cycle. Partial sums across
  K-folds are accumulated outside the array at no cycle cost, as in SCALE-Sim.

So native and scalesim differ by the overlap of folds (SCALE-Sim pays fill + drain per fold) and,
for OS, by the RTL's two pipeline registers and one-based cycle count (a one-tile OS GEMM is
``K + R + C + 1`` native against ``K + R + C − 3`` in SCALE-Sim).
"""

from __future__ import annotations

import contextlib
import csv
import io
import numbers
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

DATAFLOWS = ("os", "ws", "is")
TIMINGS = ("native", "scalesim")
#: The SCALE-Sim release whose reported cycles `timing="scalesim"` reproduces.
SCALESIM_VERSION = "3.0.0"
#: Column of SCALE-Sim's COMPUTE_REPORT.csv holding the compute cycles (stalls are 0 in CALC mode).
SCALESIM_CYCLES_COLUMN = "Total Cycles"


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def _check_positive(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _check_choice(name: str, value, choices: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value.lower() not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    return value.lower()


def scalesim_cycles(M: int, K: int, N: int, rows: int, cols: int, dataflow: str) -> int:  # noqa: N803
    """SCALE-Sim 3.0.0's reported compute cycles for a dense ``[M, K] @ [K, N]`` GEMM on rows x cols.

    Formulas in the module docstring (measured, docs/toolchain.md). Inputs are not validated
    here; use `gemm_cycles`.
    """
    R, C = rows, cols  # noqa: N806
    if dataflow == "os":
        return _ceil(M, R) * _ceil(N, C) * (R + C + K - 2) - 1
    if dataflow == "ws":
        return _ceil(K, R) * _ceil(N, C) * (2 * R + C + M - 2) - 1
    return _ceil(K, R) * _ceil(M, C) * (2 * R + C + N - 2) - 1


def native_cycles(M: int, K: int, N: int, rows: int, cols: int, dataflow: str, ports: int) -> int:  # noqa: N803
    """Our overlapped timing of a dense GEMM (module docstring): OS from `sim.timing.cycle_model`, WS/IS analogue.

    Inputs are not validated here; use `gemm_cycles`.
    """
    R, C = rows, cols  # noqa: N806
    if dataflow == "os":
        from sim.timing.cycle_model import dense_slot_sequence, op_cycles  # numba: imported only when needed

        return op_cycles(dense_slot_sequence(M, K, N, R, C), R, C, ports)[0]
    if dataflow == "ws":
        folds, stream = _ceil(K, R) * _ceil(N, C), M
    else:
        folds, stream = _ceil(K, R) * _ceil(M, C), N
    return R + (folds - 1) * max(stream, R) + stream + R + C - 2


def gemm_cycles(
    M: int, K: int, N: int, rows: int, cols: int,  # noqa: N803
    dataflow: str = "os", timing: str = "native", ports: int = 1,
) -> int:
    """Cycles of one dense ``[M, K] @ [K, N]`` GEMM on a rows x cols array (module docstring).

    Args:
        M, K, N: GEMM sizes (tokens, reduction channels, output channels), positive ints.
        rows, cols: array size R x C, positive ints.
        dataflow: ``"os"``, ``"ws"`` or ``"is"`` (output-, weight-, input-stationary).
        timing: ``"native"`` (tile/fold overlap; OS = the Kaleido RTL contract) or ``"scalesim"``
            (SCALE-Sim 3.0.0's reported compute cycles).
        ports: output ports per column (``drain_rows_per_cycle``); only native OS uses it.

    Returns:
        cycles (int).

    Raises:
        ValueError: a size is not a positive integer, or the dataflow/timing is unknown; the
            message names the argument.
    """
    M, K, N = (_check_positive(n, v) for n, v in (("M", M), ("K", K), ("N", N)))  # noqa: N806
    rows, cols, ports = (_check_positive(n, v) for n, v in (("rows", rows), ("cols", cols), ("ports", ports)))
    dataflow = _check_choice("dataflow", dataflow, DATAFLOWS)
    timing = _check_choice("timing", timing, TIMINGS)
    if timing == "scalesim":
        return scalesim_cycles(M, K, N, rows, cols, dataflow)
    return native_cycles(M, K, N, rows, cols, dataflow, ports)


def gemm_result(M: int, K: int, N: int, cfg, dataflow: str = "os", timing: str = "native") -> dict:  # noqa: N803
    """Timing of one dense GEMM on an `hw.config.AcceleratorConfig`, as written by ``kaleido simulate --gemm``.

    Keys: ``format`` (``"kaleido-gemm"``), ``version``, ``config`` (preset name), ``array`` [R, C],
    ``ports``, ``clock_mhz``, ``gemm`` {M, K, N}, ``dataflow``, ``timing``, ``cycles``, ``time_us`` (cycles at
    ``clock_mhz``), ``macs`` (M·K·N) and ``pe_utilization`` = M·K·N / (R·C·cycles).
    """
    R, C, d = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle  # noqa: N806
    cycles = gemm_cycles(M, K, N, R, C, dataflow, timing, d)
    macs = M * K * N
    return {
        "format": "kaleido-gemm", "version": 1, "config": cfg.name, "array": [R, C], "ports": d,
        "clock_mhz": cfg.clock_mhz,
        "gemm": {"M": M, "K": K, "N": N}, "dataflow": dataflow.lower(), "timing": timing.lower(),
        "cycles": cycles, "time_us": cycles / cfg.clock_mhz, "macs": macs,
        "pe_utilization": macs / (R * C * cycles),
    }


# ---- SCALE-Sim 3.0.0 as a live reference (tests, `make bench`) ----------------------------------

_SCALESIM_CFG = """\
[general]
run_name = {run_name}

[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: 1024
FilterSramSzkB: 1024
OfmapSramSzkB: 1024
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: 10
Dataflow: {dataflow}
ReadRequestBuffer: 32
WriteRequestBuffer: 32

[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2

[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40

[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""


def run_scalesim(
    shapes: Sequence[tuple[int, int, int]], rows: int, cols: int, dataflow: str, workdir: str | Path | None = None,
) -> list[int]:
    """Run SCALE-Sim 3.0.0 (Python API, in-process) on dense GEMMs; return its compute cycles per shape.

    All shapes ``(M, K, N)`` go into one run as rows ``Layer, M, N, K,`` of a GEMM topology file
    (SCALE-Sim's column order; trailing comma required). The config has every section SCALE-Sim
    reads, CALC interface bandwidth (no memory stalls) and 1 MiB SRAMs; the layout file is a header
    only (custom layout off). Cycles are the ``Total Cycles`` column of ``COMPUTE_REPORT.csv``; its
    ``Stall Cycles`` must be 0 or a RuntimeError is raised. SCALE-Sim simulates cycle by cycle in
    Python (~0.1-0.8 ms per cycle), so keep shapes small.

    Args:
        workdir: folder for inputs and reports (default: a temporary folder, removed afterwards).

    Raises:
        ImportError: scalesim is not installed, or is not version 3.0.0.
    """
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("scalesim")
    except PackageNotFoundError:
        raise ImportError(f"scalesim is not installed (pip install scalesim=={SCALESIM_VERSION})") from None
    if ver != SCALESIM_VERSION:
        raise ImportError(f"scalesim {ver} is installed; the formulas are for {SCALESIM_VERSION}")
    from scalesim.scale_sim import scalesim

    dataflow = _check_choice("dataflow", dataflow, DATAFLOWS)
    with contextlib.ExitStack() as stack:
        if workdir is None:
            workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="kaleido-scalesim-"))
        wd = Path(workdir)
        wd.mkdir(parents=True, exist_ok=True)
        cfg, topo, layout = wd / "scale.cfg", wd / "topology.csv", wd / "layout.csv"
        cfg.write_text(_SCALESIM_CFG.format(run_name="run", rows=rows, cols=cols, dataflow=dataflow))
        topo.write_text("Layer, M, N, K,\n" + "".join(f"g{i}, {M}, {N}, {K},\n" for i, (M, K, N) in enumerate(shapes)))
        layout.write_text("Layer name,\n")
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            # 3.0.0 calls int() on a 1-element array: a DeprecationWarning on numpy 1.25-2.3 (numpy 2.4
            # crashes in the same file, docs/toolchain.md; hence the numpy < 2.4 pin)
            warnings.simplefilter("ignore", DeprecationWarning)
            sim = scalesim(save_disk_space=True, verbose=False, config=str(cfg), topology=str(topo),
                           layout=str(layout), input_type_gemm=True)
            sim.run_scale(top_path=str(wd / "out"))
        with open(wd / "out" / "run" / "COMPUTE_REPORT.csv", newline="") as fh:
            reader = csv.DictReader(fh, skipinitialspace=True)
            report = [{k.strip(): v.strip() for k, v in r.items() if k} for r in reader]
    if len(report) != len(shapes):
        raise RuntimeError(f"SCALE-Sim reported {len(report)} layers for {len(shapes)} shapes")
    for shape, r in zip(shapes, report, strict=True):
        if int(r["Stall Cycles"]) != 0:
            raise RuntimeError(f"SCALE-Sim reported {r['Stall Cycles']} stall cycles for {shape}")
    return [int(r[SCALESIM_CYCLES_COLUMN]) for r in report]
