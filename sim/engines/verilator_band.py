"""The compiled RTL engine of the banded array tops: ``kaleido_ctop`` (compact) or ``kaleido_dtop`` (delta),
`hw.compact_array.CompactTop`, Verilated with the C++ driver ``verilator_band_driver.cpp`` (docs/decisions.md
D86).

The build, its cache (content hash; stale or half-built folders rebuilt) and the toolchain checks are
`sim.engines.verilator_build`'s, shared with the lock-step engine (`sim.engines.verilator`); this module gives
them the design (`band_design`: the top's emitted modules, ``kaleido_delay`` and the wrapper `band_wrapper`) and
runs jobs. A job holds runs (one GEMM's band-tiles each, `sim.engines.band_stimulus.band_op`, from reset): per
slot the byte images of a band's ports, per band-tile where its slots and drained rows lie. The driver runs each
band on the band-tile its ``b{b}_tile`` output names, honouring ``b{b}_ready``, and records every drained row
(words, cycle, port), every band-tile's band and last-slot cycle, and the run's last row, with no Python per cycle.

The cache folder is ``build/verilator/<config>-band-<key>[-waves]/`` (beside the lock-step engine's folders of
the same config). Waveforms: as `sim.engines.verilator` (an FST window of ticks; every run starts with `BAND_RESET_TICKS` reset
ticks).

Errors are `sim.engines.verilator_build.RtlEngineError` with one line naming what is wrong.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hw.config import AcceleratorConfig
from sim.engines.band_stimulus import BandOp, pack_bits
from sim.engines.verilator_build import BUILD_ROOT, TOP, Design, RtlEngineError, build, run_job

DRIVER = Path(__file__).with_name("verilator_band_driver.cpp")
#: Job file format the driver reads (``JOB_VERSION`` in verilator_band_driver.cpp).
BAND_JOB_VERSION = 1
#: Ticks of every run before its cycle 0: 3 with the wrapper's reset input high, 1 low, so the design leaves reset
#: at cycle 0 (its drain time-share counter then 0, the phase `sim.timing.compact.drain_reads` counts from).
BAND_RESET_TICKS = 4
#: Bits of a band's ``b{b}_tile`` output in the wrapper's ``out_tile`` (`hw.compact_array.TILE_BITS` padded to a word).
TILE_WORD = 32


def _sizes(cfg: AcceleratorConfig) -> dict:
    """Per band: ``xbits`` (bits of one row's operand: 9 delta, 8 compact), ``xa`` (bytes of a band's operand
    image), ``mb`` (bytes of its mode image); ``brows``, ``B``, ``nw`` (words per drained column)."""
    from hw.compact_array import band_geometry, drain_words
    from hw.pe import X_BITS

    brows = band_geometry(cfg)["brows"]
    xbits = X_BITS if cfg.organisation == "delta" else 8
    return {"brows": brows, "B": cfg.compact_bands, "xbits": xbits, "xa": -(-brows * xbits // 8),
            "mb": -(-brows * 2 // 8), "nw": len(drain_words(cfg))}


def band_wrapper(cfg: AcceleratorConfig) -> str:
    """Verilog of the engine's top ``kaleido_engine`` around the banded top (`hw.compact_array.top_module_name`):
    a registered reset (as `sim.engines.verilator_build.engine_wrapper`, for the same reason) and the per-band
    ports gathered into vectors, band b's field at a whole byte: ``in_x_a``/``in_x_b`` (``xa`` bytes per band),
    ``in_mode`` (``mb``), ``in_w_a``/``in_w_b`` (C), ``in_rows`` (one byte), ``in_valid``/``in_first``/``in_last``
    (a bit), ``out_ready`` (a bit), ``out_tile`` (`TILE_WORD` bits); ``x_unsigned`` (compact only; unconnected on
    delta) and the drain ports ``out_valid``/``out_row``/``out_data`` as the top has them (the top's drained-row
    tags, its ``out_tile``, go to a wire the driver does not read: it places rows by its own bookkeeping)."""
    from amaranth.hdl import Shape

    from hw.compact_array import ctop_signature, top_module_name

    z = _sizes(cfg)
    B, C = z["B"], cfg.array_cols  # noqa: N806
    sig = ctop_signature(cfg).members
    w = {n: Shape.cast(m.shape).width for n, m in sig.items()}
    vec = {"in_x_a": 8 * z["xa"], "in_x_b": 8 * z["xa"], "in_mode": 8 * z["mb"], "in_w_a": 8 * C, "in_w_b": 8 * C,
           "in_rows": 8, "in_valid": 1, "in_first": 1, "in_last": 1}
    decl = ["  input clk;", "  input rst;", "  input x_unsigned;"]
    decl += [f"  input [{B * n - 1}:0] {name};" for name, n in vec.items()]
    decl += [f"  output [{B - 1}:0] out_ready;", f"  output [{B * TILE_WORD - 1}:0] out_tile;"]
    outs = ("out_valid", "out_row", "out_data")
    decl += [f"  output [{w[n] - 1}:0] {n};" for n in outs]
    conn = [".clk(clk)", ".rst(rst_q)", *(f".{n}({n})" for n in outs), ".out_tile(drain_tile)"]
    if "x_unsigned" in sig:
        conn.append(".x_unsigned(x_unsigned)")
    body = [f"  wire [{w['out_tile'] - 1}:0] drain_tile;  // the drained rows' band-tile tags (D91): not read here"]
    for b in range(B):
        for f, name in (("x_a", "in_x_a"), ("x_b", "in_x_b"), ("mode", "in_mode"), ("w_a", "in_w_a"),
                        ("w_b", "in_w_b"), ("rows", "in_rows"), ("valid", "in_valid"), ("first", "in_first"),
                        ("last", "in_last")):
            conn.append(f".b{b}_{f}({name}[{b * vec[name]} +: {w[f'b{b}_{f}']}])")
        body.append(f"  wire [{w[f'b{b}_tile'] - 1}:0] tile{b};")
        body.append(f"  assign out_tile[{b * TILE_WORD} +: {TILE_WORD}] = "
                    f"{{{TILE_WORD - w[f'b{b}_tile']}'b0, tile{b}}};")
        conn += [f".b{b}_ready(out_ready[{b}])", f".b{b}_tile(tile{b})"]
    ports = ", ".join(["clk", "rst", "x_unsigned", *vec, "out_ready", "out_tile", *outs])
    return (f"// Engine wrapper of {top_module_name(cfg)} (sim/engines/verilator_band.py, band_wrapper); "
            "not part of the design.\n"
            f"module {TOP}({ports});\n" + "\n".join(decl) + "\n"
            "  reg rst_q = 1'b1;\n  always @(posedge clk) rst_q <= rst;\n" + "\n".join(body) + "\n"
            f"  {top_module_name(cfg)} dut({', '.join(conn)});\nendmodule\n")


def band_design(cfg: AcceleratorConfig) -> Design:
    """The banded top's emitted modules (`hw.rtl.emit`: PE, column, top), ``kaleido_delay`` (`hw.array.DELAY_VERILOG`)
    and `band_wrapper`, driven by ``verilator_band_driver.cpp``.

    Raises:
        RtlEngineError: ``cfg`` is not the compact or delta organisation.
    """
    from hw.array import DELAY_VERILOG
    from hw.compact_array import column_module_name, top_module_name
    from hw.compact_pe import pe_module_name
    from hw.rtl import emit

    if cfg.organisation not in ("compact", "delta"):
        raise RtlEngineError(f"the band engine runs the compact or delta organisation; {cfg.name} is "
                             f"{cfg.organisation!r}")
    names = (pe_module_name(cfg), column_module_name(cfg), top_module_name(cfg))
    with tempfile.TemporaryDirectory(prefix="kaleido-rtl-") as tmp:
        emit(cfg, Path(tmp), only=names)
        verilog = {name: (Path(tmp) / f"{name}.v").read_bytes() for name in names}
    verilog["kaleido_delay"] = DELAY_VERILOG.encode()
    verilog[TOP] = band_wrapper(cfg).encode()
    return Design("band", verilog, DRIVER)


def band_records(op: BandOp, cfg: AcceleratorConfig) -> np.ndarray:
    """uint8 ``[slots, rec]``: the slot records of ``op``'s band-tiles in issue order (verilator_band_driver.cpp):
    operand images (x_a, x_b), mode image, w_a, w_b, flags (first | last << 1), valid rows."""
    z = _sizes(cfg)
    if not op.tiles:
        return np.zeros((0, 2 * z["xa"] + z["mb"] + 2 * cfg.array_cols + 2), np.uint8)
    cat = {f: np.concatenate([getattr(t, f) for t in op.tiles]) for f in ("x_a", "x_b", "mode", "w_a", "w_b")}
    flags = np.concatenate([np.r_[1, np.zeros(t.slots - 1, np.int64)] | (np.arange(t.slots) == t.slots - 1) * 2
                            for t in op.tiles])
    rows = np.concatenate([np.full(t.slots, len(t.tokens)) for t in op.tiles])
    return np.ascontiguousarray(np.concatenate([
        pack_bits(cat["x_a"], z["xbits"]), pack_bits(cat["x_b"], z["xbits"]), pack_bits(cat["mode"], 2),
        (cat["w_a"] & 0xFF).astype(np.uint8), (cat["w_b"] & 0xFF).astype(np.uint8),
        flags.astype(np.uint8)[:, None], rows.astype(np.uint8)[:, None]], axis=1))


@dataclass
class BandRunResult:
    """One run (one GEMM's band-tiles from reset).

    Attributes:
        band, last: int64 ``[T]``: the band that ran each band-tile (the RTL's choice) and the cycle its last slot
            was accepted, counted from the run's cycle 0 (band b presents band-tile b).
        drained: per band-tile int64 ``[rows, C, words]``, its drained rows in order.
        drained_at: per band-tile int64 ``[rows, 2]``: each row's cycle on the output ports and its port.
        end: the cycle of the run's last drained row (the op's array cycles are ``end + 1``).
        start_tick, first_tick, last_tick: ticks of the run's first reset cycle, its cycle 0, its last row.
    """

    band: np.ndarray
    last: np.ndarray
    drained: list[np.ndarray]
    drained_at: list[np.ndarray]
    end: int
    start_tick: int
    first_tick: int
    last_tick: int


class BandEngine:
    """The compiled banded top of one compact or delta config (`build` with `band_design`), running jobs.

    Args:
        cfg: accelerator config (organisation compact or delta; at most
            `sim.engines.verilator_build.MAX_RTL_PES` PEs).
        waves: build with FST tracing (`run` then takes ``fst``).
        build_root, log: as `sim.engines.verilator.Engine`.

    Raises:
        RtlEngineError: as `sim.engines.verilator_build.build`, or a lock-step config.
    """

    def __init__(self, cfg: AcceleratorConfig, waves: bool = False, build_root: Path = BUILD_ROOT,
                 log: Callable[[str], None] | None = None):
        self.cfg, self.waves = cfg, waves
        self.exe = build(cfg, waves, build_root, log, design=band_design)
        #: Clock-loop figures of the last `run` (``perf.bin``): ``loop_s``, ``loop_cpu_s``, ``ticks``.
        self.last_perf: dict = {}

    def run(self, runs: Sequence[tuple[BandOp, bool]], fst: Path | None = None, waves_from: int = 0,
            waves_cycles: int = 0, records: Sequence[np.ndarray] | None = None) -> list[BandRunResult]:
        """Run each ``(op, x_unsigned)`` from reset (``x_unsigned`` is ignored by the delta top).

        Args:
            fst: waveform file (needs ``waves``), ticks ``[waves_from, waves_from + waves_cycles)``; written
                atomically.
            records: `band_records` of each op, when already built.

        Raises:
            RtlEngineError: the driver failed (its message).
            AssertionError: the RTL broke the drain protocol (a hardware bug).
        """
        from hw.compact_array import _idx_bits, band_geometry

        cfg = self.cfg
        z, C = _sizes(cfg), cfg.array_cols  # noqa: N806
        geo = band_geometry(cfg)
        ports = np.array([[p for (band, p, _ph) in geo["seqs"] if band == b] for b in range(z["B"])], dtype="<i8")
        recs = list(records) if records is not None else [band_records(op, cfg) for op, _ in runs]
        tin, nrows, run_rows, slot0, row0, tile0 = [], [], [], 0, 0, 0
        for op, x_unsigned in runs:
            for t in op.tiles:
                tin.append((slot0, t.slots, row0))
                nrows.append(len(t.tokens))
                slot0 += t.slots
                row0 += len(t.tokens)
            run_rows.append((tile0, len(op.tiles), int(x_unsigned), 0))
            tile0 += len(op.tiles)
        rec_bytes = 2 * z["xa"] + z["mb"] + 2 * C + 2
        with tempfile.TemporaryDirectory(prefix="kaleido-bjob-") as tmp:
            job = Path(tmp)
            meta = np.array([BAND_JOB_VERSION, len(runs), slot0, tile0, row0, rec_bytes, z["B"], z["brows"], C,
                             cfg.drain_rows_per_cycle, cfg.acc_bits, z["nw"], _idx_bits(cfg.array_rows), z["xa"],
                             z["mb"], ports.shape[1]], dtype="<i8")
            meta.tofile(job / "meta.bin")
            ports.tofile(job / "ports.bin")
            np.array(run_rows, dtype="<i8").reshape(-1, 4).tofile(job / "runs.bin")
            np.array(tin, dtype="<i8").reshape(-1, 3).tofile(job / "tiles_in.bin")
            (np.concatenate(recs) if recs else np.zeros((0, rec_bytes), np.uint8)).tofile(job / "stim.bin")
            run_job(self.exe, job, self.waves, fst, waves_from, waves_cycles, protocol="drain")
            rows = np.fromfile(job / "rows.bin", dtype="<i8").reshape(-1, C, z["nw"])
            rowat = np.fromfile(job / "rowat.bin", dtype="<i8").reshape(-1, 2)
            tiles = np.fromfile(job / "tiles.bin", dtype="<i8").reshape(-1, 2)
            result = np.fromfile(job / "result.bin", dtype="<i8").reshape(-1, 4)
            perf = np.fromfile(job / "perf.bin", dtype="<i8")
        self.last_perf = {"loop_s": perf[0] * 1e-9, "loop_cpu_s": perf[1] * 1e-9, "ticks": int(perf[2])}
        out = []
        for (t0, nt, _, _), r in zip(run_rows, result, strict=True):
            drained = [rows[tin[t][2]:tin[t][2] + nrows[t]] for t in range(t0, t0 + nt)]
            at = [rowat[tin[t][2]:tin[t][2] + nrows[t]] for t in range(t0, t0 + nt)]
            out.append(BandRunResult(tiles[t0:t0 + nt, 0].copy(), tiles[t0:t0 + nt, 1].copy(), drained, at,
                                     int(r[0]), int(r[1]), int(r[2]), int(r[3])))
        return out
