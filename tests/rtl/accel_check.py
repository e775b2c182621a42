"""Manual check, not part of `make test` (its own Verilator build, minutes on 2 cores, which no
other test reuses): the emitted ``kaleido_accel.v`` (hw/accel.py, D26; it instantiates the emitted
``kaleido_core`` and its buffers' SRAM macros by name) on tiny-8x8 under Verilator through `sim.engines.rtl.RtlModel`, on
seeded ops run back to back on one build: operands written through the write port, ``start``,
results bit-exact against `algo.reuse.golden.reuse_gemm`, and the cycle of ``done`` (one after the last
result row) equal to `sim.timing.core_timing.accel_timeline`'s. Usage: ``python -m tests.rtl.accel_check``;
exit status 1 on a mismatch. The build is cached in ``build/pyverilator/tiny-8x8-kaleido_accel/``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from algo.reuse.golden import decide, reuse_gemm, theta_bounds
from hw import discard
from hw.accel import Accel, buffer_words, op_descriptor
from hw.config import load_config
from hw.sram import macro_name
from sim.engines.rtl import RtlModel
from sim.timing.core_timing import accel_timeline
from sim.timing.stream import unpack_lanes
from tests.test_rtl_accel import make_op

CORE_SOURCES = ("kaleido_pe", "kaleido_column", "kaleido_top", "kaleido_matcher", "kaleido_core")

#: Ops sized for tiny-8x8 (R = C = 8, window 64 positions): partial position blocks, two windows,
#: two column blocks, K not a multiple of the group size, int8 and uint8, mixed and REUSE-heavy.
OPS = {
    "mixed": lambda: make_op(11, (3, 3, 4), 20, 12, [6, 6, 4, 4], (2.5, 4.0)),
    "uint8_reuse": lambda: make_op(12, (4, 2, 5), 13, 8, [5, 4, 4], (1.2, 2.0), unsigned=True, noise=1),
    "two_windows": lambda: make_op(13, (2, 7, 10), 9, 5, [4, 5], (2.0, 3.5)),
}


def main() -> int:
    cfg = load_config("tiny-8x8")
    R, C, d, ab = cfg.array_rows, cfg.array_cols, cfg.drain_rows_per_cycle, cfg.acc_bits  # noqa: N806
    ref = discard(Accel(cfg, pe="instance"))  # the emitted configuration: only its port widths and capacity are read
    macros = tuple(macro_name(*k) for k in ref.macros())  # the banked buffers' SRAM macros (hw/sram.py)
    t0 = time.time()
    mdl = RtlModel(cfg, sources=CORE_SOURCES + macros + ("kaleido_accel",))
    sim = mdl.sim
    print(f"Verilated kaleido_accel ready in {time.time() - t0:.1f} s")

    def tick():
        sim["clk"] = 1
        sim.eval()
        sim["clk"] = 0
        sim.eval()

    for name in mdl.inputs:
        sim[name] = 0
    sim["rst"] = 1
    sim.eval()
    tick()
    tick()
    sim["rst"] = 0
    sim.eval()
    tb, cw = ref.tb, len(ref.out_col0) // d
    ok = True
    for name, make in OPS.items():
        X, Wt, grid, groups, theta, unsigned = make()  # noqa: N806
        N = Wt.shape[1]  # noqa: N806
        b1, b2 = theta_bounds(theta, [k1 - k0 for k0, k1, _ in groups])
        for port, v in op_descriptor(ref, grid, groups, N, b1, b2, unsigned).items():
            sim[port] = v
        for sel, addr, data in buffer_words(ref, X, Wt):
            sim["wr_valid"], sim["wr_sel"], sim["wr_addr"], sim["wr_data"] = 1, sel, addr, data
            sim.eval()
            assert sim["wr_ready"]
            tick()
        sim["wr_valid"] = 0
        sim["start"] = 1
        Y = np.full((X.shape[0], N), np.iinfo(np.int64).min, dtype=np.int64)  # noqa: N806
        done = None
        for cycle in range(200_000):  # cycle 0: the start cycle
            if cycle == 1:
                sim["start"] = 0
            sim.eval()
            ov = sim["out_valid"]
            for p in range(d):
                if ov >> p & 1:
                    tok = sim["out_token"] >> (p * tb) & ((1 << tb) - 1)
                    c0 = sim["out_col0"] >> (p * cw) & ((1 << cw) - 1)
                    vals = unpack_lanes(sim["out_data"] >> (p * C * ab), C, ab)
                    n = min(C, N - c0)
                    Y[tok, c0:c0 + n] = vals[:n]
            if sim["done"]:
                done = cycle
                tick()
                break
            tick()
        dec, _ = decide(X, grid, groups, theta, 4)
        want, _ = reuse_gemm(X, Wt, grid, groups, theta, 4)
        tl = accel_timeline(grid, groups, dec, N, R, C, d, ref.P, ref.window)
        bit = bool((Y == want).all())
        cyc = done == tl.done
        print(f"{name}: M = {X.shape[0]}, K = {X.shape[1]}, N = {N}, decisions {np.bincount(dec.ravel(), minlength=3)}"
              f": done at {done} (predicted {tl.done}): {'bit-exact' if bit else 'MISMATCH'}, "
              f"{'cycle-exact' if cyc else 'CYCLE MISMATCH'}")
        ok &= bit and cyc
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
