"""The compiled RTL engine of a module driven by every input per cycle: the delta combine unit ``kaleido_dcombine``
(`hw.delta_combine.DeltaCombine`) with its macros, Verilated with the C++ driver ``verilator_stream_driver.cpp``
(docs/decisions.md D86).

The build and cache are `sim.engines.verilator_build`'s (`stream_design`: the module, its SRAM macros and the wrapper
`stream_wrapper`). A job holds runs, each from reset: per cycle the value of every input port (a dict), and back
per cycle the value of every output port, read after the cycle's inputs settled and before the clock edge. No
Python runs per cycle in the clock loop; the commands are whatever the caller computes (the controller that
would issue them is not RTL yet, D65, D73).

Cache folder: ``build/verilator/<config>-dcombine-<key>/``. Errors are
`sim.engines.verilator_build.RtlEngineError` with one line naming what is wrong.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from hw.config import AcceleratorConfig
from sim.engines.verilator_build import BUILD_ROOT, TOP, Design, RtlEngineError, build, run_job

DRIVER = Path(__file__).with_name("verilator_stream_driver.cpp")
#: Job file format the driver reads (``JOB_VERSION`` in verilator_stream_driver.cpp).
STREAM_JOB_VERSION = 1


def _check(cfg: AcceleratorConfig) -> None:
    if cfg.organisation != "delta":
        raise RtlEngineError(f"the delta combine unit needs the delta organisation; {cfg.name} is {cfg.organisation!r}")


def bus_layout(cfg: AcceleratorConfig) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    """``(inputs, outputs)`` of the delta combine unit's ports: ``(name, width in bits, byte offset in the bus)`` each,
    in signature order, every port at a whole byte."""
    from amaranth.hdl import Shape
    from amaranth.lib.wiring import Flow

    from hw.delta_combine import dcombine_signature

    _check(cfg)
    ins, outs, oi, oo = [], [], 0, 0
    for name, m in dcombine_signature(cfg).members.items():
        w = Shape.cast(m.shape).width
        if m.flow == Flow.In:
            ins.append((name, w, oi))
            oi += -(-w // 8)
        else:
            outs.append((name, w, oo))
            oo += -(-w // 8)
    return ins, outs


def _bytes(layout) -> int:
    return max((off + -(-w // 8) for _n, w, off in layout), default=1)


def stream_wrapper(cfg: AcceleratorConfig) -> str:
    """Verilog of ``kaleido_engine`` around ``kaleido_dcombine``: a registered reset (as
    `sim.engines.verilator_build.engine_wrapper`) and the module's inputs gathered into ``in_bus``, its outputs
    into ``out_bus`` (`bus_layout`)."""
    from hw.delta_combine import DCOMBINE_MODULE_NAME

    ins, outs = bus_layout(cfg)
    conn = [".clk(clk)", ".rst(rst_q)"]
    conn += [f".{n}(in_bus[{8 * off} +: {w}])" for n, w, off in ins]
    conn += [f".{n}(out_bus[{8 * off} +: {w}])" for n, w, off in outs]
    return (f"// Engine wrapper of {DCOMBINE_MODULE_NAME} (sim/engines/verilator_stream.py); not part of the design.\n"
            f"module {TOP}(clk, rst, in_bus, out_bus);\n  input clk;\n  input rst;\n"
            f"  input [{8 * _bytes(ins) - 1}:0] in_bus;\n  output [{8 * _bytes(outs) - 1}:0] out_bus;\n"
            "  reg rst_q = 1'b1;\n  always @(posedge clk) rst_q <= rst;\n"
            f"  {DCOMBINE_MODULE_NAME} dut({', '.join(conn)});\nendmodule\n")


def stream_design(cfg: AcceleratorConfig) -> Design:
    """``kaleido_dcombine`` and its SRAM macros (`hw.rtl.emit`) behind `stream_wrapper`, driven by
    ``verilator_stream_driver.cpp``.

    Raises:
        RtlEngineError: ``cfg`` is not the delta organisation.
    """
    from hw import discard
    from hw.delta_combine import DCOMBINE_MODULE_NAME, DeltaCombine
    from hw.rtl import emit
    from hw.sram import macro_name

    _check(cfg)
    names = (*sorted({macro_name(*mc) for mc in discard(DeltaCombine(cfg)).macros()}), DCOMBINE_MODULE_NAME)
    with tempfile.TemporaryDirectory(prefix="kaleido-rtl-") as tmp:
        emit(cfg, Path(tmp), only=names)
        verilog = {name: (Path(tmp) / f"{name}.v").read_bytes() for name in names}
    verilog[TOP] = stream_wrapper(cfg).encode()
    return Design("dcombine", verilog, DRIVER)


class StreamEngine:
    """The compiled delta combine unit of one delta config (`build` with `stream_design`), running jobs.

    Raises:
        RtlEngineError: as `sim.engines.verilator_build.build`, or a config that is not delta.
    """

    def __init__(self, cfg: AcceleratorConfig, waves: bool = False, build_root: Path = BUILD_ROOT,
                 log: Callable[[str], None] | None = None):
        self.cfg, self.waves = cfg, waves
        self.exe = build(cfg, waves, build_root, log, design=stream_design)
        self.ins, self.outs = bus_layout(cfg)
        #: Clock-loop figures of the last `run` (``perf.bin``): ``loop_s``, ``loop_cpu_s``, ``ticks``.
        self.last_perf: dict = {}

    def run(self, runs: Sequence[Sequence[dict]], fst: Path | None = None, waves_from: int = 0,
            waves_cycles: int = 0) -> list[dict[str, np.ndarray]]:
        """Run each sequence of per-cycle input values (``{port: int}``; a port not named is 0) from reset.

        Returns per run ``{output port: int64 or object [cycles]}`` (unsigned values; object arrays for ports wider
        than 63 bits).

        Raises:
            KeyError: a name that is not an input port.
            RtlEngineError: the driver failed (its message).
        """
        ib, ob = _bytes(self.ins), _bytes(self.outs)
        where = {n: (w, off) for n, w, off in self.ins}
        n = sum(len(r) for r in runs)
        stim = np.zeros((n, ib), dtype=np.uint8)
        rows, c0 = [], 0
        for r in runs:
            for i, cyc in enumerate(r):
                for name, v in cyc.items():
                    w, off = where[name]
                    nb = -(-w // 8)
                    stim[c0 + i, off:off + nb] = np.frombuffer((int(v) & ((1 << w) - 1)).to_bytes(nb, "little"),
                                                              np.uint8)
            rows.append((c0, len(r)))
            c0 += len(r)
        with tempfile.TemporaryDirectory(prefix="kaleido-sjob-") as tmp:
            job = Path(tmp)
            np.array([STREAM_JOB_VERSION, len(runs), n, ib, ob, 0, 0, 0], dtype="<i8").tofile(job / "meta.bin")
            np.array(rows, dtype="<i8").reshape(-1, 2).tofile(job / "runs.bin")
            stim.tofile(job / "stim.bin")
            run_job(self.exe, job, self.waves, fst, waves_from, waves_cycles)
            out = np.fromfile(job / "out.bin", dtype=np.uint8).reshape(n, ob)
            perf = np.fromfile(job / "perf.bin", dtype="<i8")
        self.last_perf = {"loop_s": perf[0] * 1e-9, "loop_cpu_s": perf[1] * 1e-9, "ticks": int(perf[2])}
        res = []
        for c, k in rows:
            d = {}
            for name, w, off in self.outs:
                nb = -(-w // 8)
                vals = [int.from_bytes(out[c + i, off:off + nb].tobytes(), "little") & ((1 << w) - 1)
                        for i in range(k)]
                d[name] = np.array(vals, dtype=object if w > 63 else np.int64)
            res.append(d)
        return res
