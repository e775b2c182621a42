"""Seeded random RTL regression on the compiled engine (tests/rtl/regression.py): at least 1,000
tiles of tiny-8x8, each bit-exact against `algo.reuse.golden` and cycle-exact (per tile) against the
cycle model. ``KALEIDO_RTL_SEED`` picks another seed; a failure prints the seed and the command
that replays the case with waveforms.

The engine build is cached in build/verilator/ (shared with tests/test_rtl_engine.py).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from hw.config import load_config
from hw.pe import PEMode
from sim.engines.verilator import Engine, gemm_records, record_layout
from tests.rtl.regression import DEFAULT_SEED, check_case, regression_cases, replay_command

CFG = load_config("tiny-8x8")
SEED = int(os.environ.get("KALEIDO_RTL_SEED", DEFAULT_SEED))


@pytest.fixture(scope="module")
def regression():
    cases = regression_cases(SEED, CFG)
    records = [gemm_records(c.gemm, CFG) for c in cases]
    results = Engine(CFG).run([([c.gemm], c.x_unsigned) for c in cases], records=records)
    return cases, records, results


def test_regression_bit_and_cycle_exact(regression):
    cases, _, results = regression
    tiles = sum(r.slots_per_tile.size for r in results)
    assert tiles >= 1000, tiles
    failures = []
    for c, r in zip(cases, results, strict=True):
        for e in check_case(c, r, CFG):
            failures.append(f"seed {SEED} case {c.index} ({c.describe()}): {e}\n  replay: "
                            f"{replay_command(SEED, c.index, CFG.name)}")
    assert not failures, f"{len(failures)} failures:\n" + "\n".join(failures[:10])


def test_regression_covers_every_mode_mix(regression):
    """The regression's slots use every PE mode, lane-b selects, the row link on both lanes, uint8
    operands, and the longest K at both accumulator corners."""
    cases, records, _ = regression
    R = CFG.array_rows  # noqa: N806
    lay = dict(record_layout(CFG))
    o_m, o_s = 2 * R, 2 * R + lay["in_mode"]
    o_f = sum(n for _, n in record_layout(CFG)) - 1
    allrec = np.concatenate([r[0] for r in records])
    modes = np.unpackbits(allrec[:, o_m:o_s], axis=1, bitorder="little").reshape(len(allrec), -1, 2)
    mode_codes = set((modes[..., 0] + 2 * modes[..., 1]).ravel().tolist())
    assert mode_codes == {int(m) for m in PEMode}, mode_codes
    assert allrec[:, o_s:o_s + lay["in_sel"]].any()  # lane b selected somewhere
    flags = allrec[:, o_f]
    for bit, what in ((4, "sp_a"), (8, "sp_b"), (2, "first_b"), (32, "clear")):
        assert (flags & bit).any(), what
    assert any(c.x_unsigned for c in cases) and not all(c.x_unsigned for c in cases)
    kmax = max(CFG.max_k, CFG.max_tokens)
    corners = {c.kind for c in cases if c.gemm.X.shape[1] == kmax}
    assert corners == {"corner_int8", "corner_uint8"}
    # The int8 corner's outputs are K * (-128)^2 = 2^26 on tiny-8x8: computed by hand, not by the model.
    c, r = next((c, r) for c, r in zip(cases, regression[2], strict=True) if c.kind == "corner_int8")
    assert (r.ys[0] == kmax * 128 * 128).all()
    # Shapes that are no multiple of the array: partial position blocks and column blocks.
    assert any(c.gemm.W.shape[1] % CFG.array_cols for c in cases)
    assert any((c.gemm.grid[1] * c.gemm.grid[2]) % R for c in cases)
