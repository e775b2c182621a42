"""Manual check, not part of `make test` (its own Verilator build of the core, about a minute on 2
cores, which no other test reuses): the emitted ``kaleido_core.v`` (two banks of operand buffers
and matchers + slot former + ``kaleido_top``, hw/core.py) under Verilator through
`sim.engines.rtl.RtlModel`, on every case of `tests.rtl.cases.cases_for`: results bit-exact against
`algo.reuse.golden.apply_decisions`, and the cycle at which each tile's last result row leaves, and the
core's total cycles, equal `sim.timing.core_timing.core_timeline`'s prediction (the emitted core loads
``hw.core.LOAD_CHANNELS`` channels per beat). Usage: ``python -m tests.rtl.core_check``; exit
status 1 on a mismatch. The build is cached in ``build/pyverilator/tiny-8x8-kaleido_core/``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from algo.reuse.golden import apply_decisions
from hw.config import load_config
from hw.core import LOAD_CHANNELS
from sim.engines.rtl import RtlModel
from sim.timing.core_timing import core_timeline, load_beats
from sim.timing.stream import OutputCollector, build_stream
from tests.rtl.cases import cases_for, core_load_beats

CORE_SOURCES = ("kaleido_pe", "kaleido_column", "kaleido_top", "kaleido_matcher", "kaleido_core")


class CoreBench:
    """Drives the Verilated core: loads each tile in beats of P channels (the last one with its
    decisions) as fast as ``ld_ready`` allows, collects rows and the cycle each tile completes."""

    def __init__(self, cfg, P: int = LOAD_CHANNELS):  # noqa: N803
        self.cfg, self.P = cfg, P
        self.mdl = RtlModel(cfg, sources=CORE_SOURCES)
        self.sim = self.mdl.sim
        self.cycles = 0
        self.out = None
        self.done_at: list[int] = []

    def tick(self):
        self.sim["clk"] = 1
        self.sim.eval()
        self.sim["clk"] = 0
        self.sim.eval()

    def step(self):
        """One cycle: sample the outputs with the current inputs, then the clock edge."""
        self.sim.eval()
        ov = self.sim["out_valid"]
        if ov and self.out.sample(ov, self.sim["out_data"], self.sim["out_row"]):
            self.done_at.append(self.cycles)
        self.tick()
        self.cycles += 1

    def run_case(self, case) -> bool:
        cfg, sim, P = self.cfg, self.sim, self.P  # noqa: N806
        R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
        stream = build_stream(case.X, case.W, case.grid, case.groups, case.decisions, 4, cfg)
        expected = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
        got = np.full(expected.shape, np.iinfo(np.int64).min, dtype=np.int64)
        self.out = OutputCollector([(t, got) for t in stream.tiles], cfg)
        self.done_at = []
        for name in self.mdl.inputs:
            sim[name] = 0
        sim["rst"] = 1
        sim.eval()
        self.tick()
        self.tick()
        sim["rst"] = 0
        sim.eval()
        self.tick()
        sim["x_unsigned"] = int(case.x_unsigned)
        K = case.X.shape[1]  # noqa: N806
        self.cycles = 0  # cycle 0: the first load beat
        for beat in core_load_beats(case, stream, cfg, P):
            sim["ld_valid"] = 1
            for name, value in beat.items():
                sim[name] = value
            sim.eval()
            while not sim["ld_ready"]:
                self.step()
                sim.eval()
            self.step()
        sim["ld_valid"] = 0
        for _ in range(100 * (len(stream.slots) + R + C)):
            if not self.out.tiles_left:
                break
            self.step()
        pred = core_timeline(stream.slots_per_tile, load_beats(len(stream.tiles), K, P), R, C,
                             cfg.drain_rows_per_cycle)
        # Tile t's last row leaves at L_t + R + C + 1 (docs/architecture.md, timing contract).
        want_done = (pred.last_slot + R + C + 1).tolist()
        ok_bits = self.out.tiles_left == 0 and bool((got == expected).all())
        ok_cycles = self.done_at == want_done and self.done_at[-1] + 1 == pred.cycles
        print(f"{case.name}: {len(stream.tiles)} tiles, {len(stream.slots)} slots, {self.done_at[-1] + 1} cycles "
              f"(predicted {pred.cycles}, load stall {pred.load_stall}): "
              f"{'bit-exact' if ok_bits else 'MISMATCH'}, {'cycle-exact' if ok_cycles else 'CYCLE MISMATCH'}")
        if not ok_cycles:
            print(f"  tile completions {self.done_at}\n  predicted        {want_done}")
        return ok_bits and ok_cycles


def main() -> int:
    cfg = load_config("tiny-8x8")
    t0 = time.time()
    bench = CoreBench(cfg)
    print(f"Verilated kaleido_core ready in {time.time() - t0:.1f} s")
    t0 = time.time()
    ok = all([bench.run_case(c) for c in cases_for(cfg.array_rows, cfg.array_cols)])
    print(f"cases run in {time.time() - t0:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
