"""`kaleido_dcore` (hw/delta_core.py, docs/decisions.md D95) as `hw.rtl` emits it: reproducible, without paths and
Verilator -Wall clean per file and over its whole hierarchy, on its default ways, lanes and buffers and on the
variants the tests build (D107, D112, D115, D118, D123); two D buffers' Verilog pinned by hash (D115).

Split from tests/test_rtl_dcore.py so that `make test`'s workers (pytest-xdist, ``--dist loadfile``: one file a
worker) share the core's slow emissions and lints with its simulations instead of running them one after the other.
"""

from __future__ import annotations

import pytest

from hw import discard
from hw.delta_core import DeltaCore
from hw.sram import macro_name
from tests.test_rtl_delta import delta_cfg


def test_dcore_emits_reproducibly_and_lints_clean(tmp_path):
    # kaleido_dcore and everything below it (kaleido_daccel with kaleido_dqueue, kaleido_dcombine, kaleido_dtop and
    # its modules, every macro) on an 8 x 8 delta config, as `hw.rtl` emits it: on d = 2 accumulate ways by default
    # (D108) and V = 2 output lanes by default (D113: 2 = d divides R = 8) on 3 D buffers (D115), so with
    # kaleido_dcombine_w2_v2_b3 (and kaleido_dcombine_w2 beside it, the front's): the same bytes twice, no paths,
    # Verilator -Wall clean per file and over the whole hierarchy from kaleido_dcore; with the array hold (D123) and
    # the issue hold (D126: kaleido_daccel_gate, the chunk table's second copy).
    import re
    from pathlib import Path

    from hw.lint import lint_folder
    from hw.rtl import emit, plan

    cfg = delta_cfg(8, 8, 2, 2, state_kib=2)
    core_macros = [macro_name(*mc) for mc in discard(DeltaCore(cfg, pe="instance", out_ways=2, d_buffers=3)).macros()]
    roles = {spec[1] for _n, spec, _ in plan(cfg) if spec[0] == "module"}
    assert {"dcombine_ways", "dcombine_lanes", "dcore", "dcore_front"} <= roles
    names = [n for n, spec, _ in plan(cfg) if spec[0] in ("macro", "clkgate") or spec[1] in
             ("dcore", "daccel", "daccel_gate", "dqueue", "dcombine", "dcombine_ways", "dcombine_lanes", "org_pe", "org_column",
              "org_top", "top", "column", "pe")]
    a = emit(cfg, tmp_path / "a", only=tuple(names))
    b = emit(cfg, tmp_path / "b", only=("kaleido_dcore",))
    assert (tmp_path / "a" / "kaleido_dcore.v").read_bytes() == b[0].read_bytes()
    text = b[0].read_text()
    assert str(Path.cwd()) not in text and str(tmp_path) not in text
    assert "kaleido_daccel_gate " in text and "kaleido_dcombine_w2_v2_b3 " in text  # the issue gate's (D126)
    assert not re.search(r"^\s*kaleido_daccel \S+\s+\(", text, re.M)
    assert "kaleido_clkgate " in text  # the array hold (D123), as hw.rtl builds it
    assert not re.search(r"^\s*kaleido_dcombine(_w2|_w2_v2)? \S+\s+\(", text, re.M)  # not the one-way, one-lane, 2-buffer unit
    for name in core_macros:
        assert re.search(rf"^\s*{name} \S+\s+\(", text, re.M), name
    assert "kaleido_dcore.v" in {p.name for p in a}
    runs = lint_folder(tmp_path / "a", full=True, jobs=2, tops=("kaleido_dcore",))
    assert all(ok for _, ok, _, _ in runs), [(label, out[:600]) for label, ok, _, out in runs if not ok]
    assert "kaleido_dcore.v whole hierarchy" in {label for label, *_ in runs}


#: The variants linted here. Two D buffers on (W, V) = (2, 2) and (4, 1) are not among them: their Verilog is pinned
#: byte for byte (`test_two_d_buffers_verilog_unchanged`) to the text these tests linted before D115, so a lint of
#: it again would check the same bytes (it saved about 100 s of one `make test` worker).
EMIT_VARIANTS = [(1, 1, 2, False, False), (4, 4, 2, False, False), (4, 4, 3, True, False), (4, 4, 3, True, True)]


@pytest.fixture(scope="module")
def ways_hierarchy(tmp_path_factory):
    """The d = 4 config's hierarchy below `kaleido_dcore` and its combine unit, as `hw.rtl` emits it (controller,
    queues, top and its modules, every macro), emitted once for all of `EMIT_VARIANTS` (about 20 s each)."""
    from hw.rtl import emit, plan

    cfg = delta_cfg(8, 8, 2, 4, state_kib=2)
    names = [n for n, spec, _ in plan(cfg) if (spec[0] == "macro" or spec[0] == "module" and spec[1] in
             ("daccel", "dqueue", "org_pe", "org_column", "org_top", "top", "column", "pe"))]
    folder = tmp_path_factory.mktemp("dcore_ways")
    emit(cfg, folder, only=tuple(names))
    return cfg, folder


@pytest.mark.parametrize(("ways", "out_ways", "buffers", "bypass", "local"), EMIT_VARIANTS)
def test_dcore_on_ways_emits_reproducibly_and_lints_clean(tmp_path, ways_hierarchy, ways, out_ways, buffers, bypass,
                                                          local):
    # kaleido_dcore on d = 4 ways (D107, the default since D108) with kaleido_dcombine_w4 and their macros, and on one
    # way (``ways=1``, D95's, still built for the tests that pin its schedules) with kaleido_dcombine, and on V output
    # lanes (D112: 4 on 4 ways, 2 on 2, kaleido_dcombine_w<W>_v<V>), and on three D buffers (D115,
    # kaleido_dcombine_w4_v4_b3) with the row FIFO's bypass (D118), that with segment-local D addresses (D125), beside the 8 x 8 hierarchy `hw.rtl` emits: the
    # same bytes twice, Verilator -Wall clean per file and over the whole hierarchy.
    import shutil

    from amaranth.back import verilog

    from hw.delta_combine import DeltaCombine, dcombine_module_name
    from hw.lint import lint_folder
    from hw.rtl import render
    from hw.sram import emit_macro

    cfg, base = ways_hierarchy
    assert discard(DeltaCore(cfg)).ways == 4  # the default: d (D108)
    for f in base.glob("*.v"):
        shutil.copy(f, tmp_path / f.name)

    def texts():
        core = DeltaCore(cfg, pe="instance", ways=ways, out_ways=out_ways, d_buffers=buffers, fifo_bypass=bypass,
                         seg_local=local)
        comb = DeltaCombine(cfg, instance=True, ways=ways, out_ways=out_ways, buffers=buffers)
        return (verilog.convert(core, name="kaleido_dcore", emit_src=False),
                verilog.convert(comb, name=dcombine_module_name(ways, out_ways, buffers), emit_src=False),
                core.macros() + comb.macros())

    a, b = texts(), texts()
    assert a[:2] == b[:2]
    cname = dcombine_module_name(ways, out_ways, buffers)
    assert f"{cname} " in a[0]
    (tmp_path / "kaleido_dcore.v").write_text(render(cfg, "kaleido_dcore", ("module", "dcore"), "dcore", a[0]))
    (tmp_path / f"{cname}.v").write_text(render(cfg, cname, ("module", "dcombine"), "dcombine", a[1]))
    for mc in a[2]:
        (tmp_path / f"{macro_name(*mc)}.v").write_text(emit_macro(*mc))
    runs = lint_folder(tmp_path, full=True, jobs=2, tops=("kaleido_dcore",))
    assert all(ok for _, ok, _, _ in runs), [(label, out[:600]) for label, ok, _, out in runs if not ok]
    assert "kaleido_dcore.v whole hierarchy" in {label for label, *_ in runs}


#: sha256 of `kaleido_dcore`'s and its combine unit's Verilog on two D buffers, converted from main's code at
#: 4af9b65 (before D115 added ``d_buffers``): (d, W, V) -> (kaleido_dcore, kaleido_dcombine_w<W>[_v<V>]). A deliberate
#: change to the n = 2 core (another decision) updates these after checking that its diff is the intended one.
N2_SHA256 = {(2, 2, 2): ("3bb7df0ef6adcd3d", "8088498a3fead2b6"), (4, 4, 1): ("ed5318bc3f8fe1b2", "0ca84217a7dea82a")}


@pytest.mark.parametrize("dwv", list(N2_SHA256))
def test_two_d_buffers_verilog_unchanged(dwv):
    # D115: d_buffers = 2 (the default) is the Verilog of the core before the third buffer, byte for byte
    import hashlib

    from amaranth.back import verilog

    from hw.delta_combine import DeltaCombine, dcombine_module_name

    d, W, V = dwv  # noqa: N806
    cfg = delta_cfg(8, 8, 2, d, state_kib=2)
    core = verilog.convert(DeltaCore(cfg, pe="instance", ways=W, out_ways=V, d_buffers=2), name="kaleido_dcore",
                           emit_src=False)
    comb = verilog.convert(DeltaCombine(cfg, instance=True, ways=W, out_ways=V, buffers=2),
                           name=dcombine_module_name(W, V), emit_src=False)
    got = tuple(hashlib.sha256(t.encode()).hexdigest()[:16] for t in (core, comb))
    assert got == N2_SHA256[dwv]
