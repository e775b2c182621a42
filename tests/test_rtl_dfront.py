"""The similarity pass in front of the delta and compact controllers (hw/delta_front.py, ``kaleido_dfront`` /
``kaleido_cfront``, docs/decisions.md D103) under Amaranth's simulator, against the golden model.

Seeded X with near neighbours (`tests.rtl.dfront_bench.smooth_x`) on small grids: groups on ``f``, ``h`` and ``w``
(two axis classes of two groups each, so COMPUTE groups both in and out of the direct form), int8 and uint8,
group widths that are not multiples of the lanes (P = 2, 4, 32), tokens without a neighbour along each axis, 144
tokens on a front of the controller's default capacity (addresses of 12 bits, D103's address fix), two
ops back to back on one front, a one-word token whose successor along w reads the word it writes in the
same cycle. For each op:

- the words written through the output port are exactly what a host writes today: the differences
  (`hw.delta_accel_host.x_words` of `sim.timing.delta_reference.differences`) or, compact, the X bytes
  (`hw.compact_accel_host.x_words`), and the decision words (`hw.delta_accel_host.dec_words`) of
  `algo.reuse.golden.decide`'s decisions, each written once;
- each word leaves at the cycle `sim.timing.delta_front.front_schedule` gives and ``done`` at `front_cycles`,
  checked once against a count by hand.
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE, decide
from hw import discard
from hw.compact_accel import CompactAccel
from hw.compact_accel_host import x_words as compact_x_words
from hw.delta_accel import DeltaAccel
from hw.delta_accel_host import dec_words, group_layout
from hw.delta_accel_host import x_words as delta_x_words
from hw.delta_front import DeltaFront, front_ports
from sim.timing.delta import classes
from sim.timing.delta_front import front_cycles, front_schedule
from sim.timing.delta_reference import differences
from tests.rtl.dfront_bench import run_front, smooth_x
from tests.test_rtl_compact import compact_cfg
from tests.test_rtl_delta import delta_cfg

THETA = (1.5, 3.0)
# (seed, grid, groups, x_unsigned): every case's decisions hold REUSE, PARTIAL and COMPUTE
CASES = {
    "fhwf-int8": (1, (3, 2, 3), [(0, 3, "f"), (3, 8, "h"), (8, 14, "w"), (14, 16, "f")], False),
    "wfw-uint8": (2, (2, 3, 4), [(0, 5, "w"), (5, 7, "f"), (7, 16, "w")], True),
    "h-int8": (3, (2, 4, 3), [(0, 7, "h")], False),
    "ff-uint8": (4, (3, 2, 3), [(0, 6, "f"), (6, 9, "f")], True),
    # one word a token along w: token t + 1 reads the word token t writes in the same cycle (forwarded)
    "w1-int8": (5, (2, 2, 4), [(0, 5, "w")], False),
    # 144 tokens on a front of 256 (KW = 16): addresses past 2,047 (token 128 on), the controller's old address width
    "tall-int8": (6, (2, 8, 9), [(0, 5, "h"), (5, 9, "w")], False),
}
# (organisation, lanes, the cases run one after the other on one front)
RUNS = [("delta", 4, ["fhwf-int8", "h-int8"]), ("delta", 2, ["wfw-uint8"]),
        ("delta", 32, ["ff-uint8", "h-int8", "w1-int8"]),
        ("compact", 4, ["fhwf-int8", "wfw-uint8"]), ("delta-full", 32, ["tall-int8"])]


def _front(org: str, lanes: int) -> DeltaFront:
    if org == "delta-full":  # the controller's default capacity (256 tokens, max_k 64, 8 groups: KW = 16)
        acc = DeltaAccel(delta_cfg(8, 8, 2, 2), lanes=lanes, queues=True)
    elif org == "delta":
        acc = DeltaAccel(delta_cfg(8, 8, 2, 2), max_tokens=32, max_k=16, lanes=lanes, queues=True)
    else:
        acc = CompactAccel(compact_cfg(8, 8, 2, 2), max_tokens=32, max_k=16, lanes=lanes, queues=True)
    discard(acc)  # only its sizes are used here
    return DeltaFront(acc)


def _job(name):
    seed, grid, groups, xu = CASES[name]
    return smooth_x(seed, grid, groups[-1][1], xu, jump=0.05), grid, groups, THETA, xu


def _want(front, X, grid, groups) -> tuple[dict, np.ndarray]:  # noqa: N803
    """The host's words ``{(sel, addr): data}`` for the op and the golden decisions."""
    dec, _ = decide(X, grid, groups, THETA)
    if front.delta:
        words = delta_x_words(front.acc, differences(X, grid, groups, dec).astype(np.int64), groups)
    else:
        words = compact_x_words(front.acc, X, groups)
    return {(0, a): w for a, w in words} | {(3, a): w for a, w in dec_words(front.acc, dec)}, dec


@pytest.mark.parametrize(("org", "lanes", "names"), RUNS, ids=[f"{o}-P{p}-{'+'.join(n)}" for o, p, n in RUNS])
def test_front_words_and_cycles(org, lanes, names):
    front = _front(org, lanes)
    jobs = [_job(n) for n in names]
    for got, (X, grid, groups, _th, _xu) in zip(run_front(front, jobs), jobs, strict=True):  # noqa: N806
        want, dec = _want(front, X, grid, groups)
        assert not got.twice and not got.overrun
        assert {k: v[1] for k, v in got.words.items()} == want
        M = X.shape[0]  # noqa: N806
        cyc, dec_cyc, done = front_schedule(M, groups, lanes)
        xo = [xo for xo, _xw, _wo in group_layout(front.acc, groups)]
        for (t, g, j), c in cyc.items():
            assert got.words[(0, t * front.KW + xo[g] + j)][0] == c, (t, g, j)
        assert [got.words[(3, t)][0] for t in range(M)] == dec_cyc
        assert got.cycles == done == front_cycles(M, groups, lanes)
        assert {COMPUTE, PARTIAL, REUSE} <= set(np.unique(dec).tolist()), "the case should hold every decision"


def test_cycles_by_hand():
    """fhwf-int8 on P = 4: widths 3, 5, 6, 2 take 1 + 2 + 2 + 1 = 6 words a token, each walked twice (phases A
    and B) for 18 tokens = 216 stage-1 cycles (1 .. 216); the last word's stage 2 at 217, its decision word at 218,
    ``done`` at 219."""
    _seed, grid, groups, _xu = CASES["fhwf-int8"]
    assert front_cycles(int(np.prod(grid)), groups, 4) == 219


def test_direct_form_and_edges_covered():
    """The cases reach the differences' every form: a COMPUTE group of a two-group class in the direct form and out
    of it (``X - X_eff[nb]``), PARTIAL and REUSE, and tokens without a neighbour along f, h and w."""
    seen = set()
    for seed, grid, groups, xu in CASES.values():
        X = smooth_x(seed, grid, groups[-1][1], xu, jump=0.05)  # noqa: N806
        dec, _ = decide(X, grid, groups, THETA)
        F, H, W = grid  # noqa: N806
        coord = np.unravel_index(np.arange(F * H * W), grid)
        for axis, idx in classes(groups):
            first = coord["fhw".index(axis)] == 0
            seen.add(("edge", axis)) if first.any() else None
            if len(idx) > 1:
                direct = (dec[:, idx] == COMPUTE).all(axis=1)
                carried_compute = (~direct[:, None] & (dec[:, idx] == COMPUTE) & ~first[:, None]).any()
                seen |= {("direct", bool((direct & ~first).any())), ("carried-compute", bool(carried_compute))}
    assert {("edge", "f"), ("edge", "h"), ("edge", "w"), ("direct", True), ("carried-compute", True)} <= seen


def test_front_refusals():
    acc = discard(DeltaAccel(delta_cfg(8, 8, 2, 2), max_tokens=32, max_k=16, lanes=4, queues=False))
    with pytest.raises(ValueError, match="queues"):
        DeltaFront(acc)
    front = _front("delta", 4)
    with pytest.raises(ValueError, match="holds 32 tokens"):
        front_ports(front, (3, 3, 4), [(0, 4, "f")], THETA)
    with pytest.raises(ValueError, match="axis"):
        front_ports(front, (2, 2, 2), [(0, 4, "t")], THETA)
    with pytest.raises(ValueError, match="at least one"):
        front_ports(front, (2, 2, 2), [], THETA)
    discard(front)


# ---- kaleido_dcore with its front (front=True): the host writes raw X ----

def _front_load(ctx, dut, case, op, ports, chunks):
    """The core's host words from raw X: X bytes (``wr_sel`` 0, into the front), weights, each token's chunk
    (``wr_sel`` 3 at bit 2 G, decision bits 0: the front writes them, D104); the op ports with the front's bounds
    and ``x_unsigned``; ``start``."""
    from hw.delta_accel_host import SEL_DEC, SEL_W, SEL_X, w_words
    from tests.rtl.daccel_bench import start_op, write_words

    async def go():
        words = [(SEL_X, a, w) for a, w in compact_x_words(dut.accel, case.X, case.groups)]
        words += [(SEL_W, a, w) for a, w in w_words(dut.accel, case.W.astype(np.int64), case.groups)]
        words += [(SEL_DEC, t, int(k) << 2 * dut.cfg.partial_regs) for t, k in enumerate(chunks)]
        await write_words(ctx, dut, words)
        fp = front_ports(dut.front_unit, case.grid, case.groups, THETA)
        await start_op(ctx, dut, ports | {"c_b1": fp["c_b1"], "c_b2": fp["c_b2"], "x_unsigned": int(case.x_unsigned)})
    return go()


def test_dcore_with_front_from_raw_x():
    """Two ops back to back on ``kaleido_dcore`` built with its front (3 axis classes, int8, N = 11: two column
    blocks worked together; 2 classes, uint8, N = 5, chunk-major), on the core's default d = 2 accumulate ways
    (docs/decisions.md D108): every ``Y`` row equals `algo.reuse.golden.reuse_gemm` from raw X, and every row, the
    controller's rows and ``done`` leave `front_cycles` later than `tests.test_rtl_dcore.check`'s model of the core
    fed with the golden decisions and differences (`sim.timing.delta_core.core_schedule` with ``ways`` = 2 and the
    rows' ways, `row_ways`)."""
    from algo.reuse.golden import reuse_gemm
    from tests.rtl.cases import Case
    from tests.rtl.dcore_bench import run_dcore
    from tests.test_rtl_dcore import FIFO, check
    from tests.test_rtl_dcore import _job as dcore_job

    cfg = delta_cfg(8, 8, 2, 2, state_kib=2)
    rng = np.random.default_rng(103)
    jobs = []
    for name, N, s, cm in (("fhwf-int8", 11, 2, False), ("wfw-uint8", 5, 1, True)):  # noqa: N806
        X, grid, groups, _th, xu = _job(name)  # noqa: N806
        W = rng.integers(-128, 128, size=(X.shape[1], N)).astype(np.int8)  # noqa: N806
        dec, _ = decide(X, grid, groups, THETA)
        jobs.append(dcore_job(cfg, Case(name, X, W, grid, groups, dec, xu), None, s, cm, False))
    got = run_dcore(cfg, [j for j, _q in jobs], fifo=FIFO, load=_front_load, front=True)
    for (job, queue), run in zip(jobs, got, strict=True):
        case = job[0]
        y, _ = reuse_gemm(case.X, case.W, case.grid, case.groups, THETA)
        D = front_cycles(case.X.shape[0], case.groups, 32)  # noqa: N806
        assert run.accel_done > D and min(run.row_cycles) > D
        run.rows = {k: (c - D, v) for k, (c, v) in run.rows.items()}
        run.row_cycles = [c - D for c in run.row_cycles]
        run.accel_done, run.cycles = run.accel_done - D, run.cycles - D
        check(cfg, job, queue, run, ways=2)
        C, N = cfg.array_cols, case.W.shape[1]  # noqa: N806
        assert len(run.rows) == case.X.shape[0] * -(-N // C)
        for (t, cb), (_c, v) in run.rows.items():
            n = min(C, N - C * cb)
            assert np.array_equal(v[:n], y[t, C * cb:C * cb + n]), (t, cb)


def _signature_stub(name: str, signature) -> str:
    """A port-only Verilog module ``name`` with ``clk``, ``rst`` and ``signature``'s members (the ports Amaranth gives
    a component converted on its own and `hw.core.add_child` instantiates), with `hw.lint.STUB_WAIVERS`."""
    from amaranth.hdl import Shape
    from amaranth.lib.wiring import In

    from hw.lint import STUB_WAIVERS

    decl = ["  input clk;", "  input rst;"]
    for n, mem in signature.members.items():
        w = Shape.cast(mem.shape).width
        decl.append(f"  {'input' if mem.flow == In else 'output'} {f'[{w - 1}:0] ' if w > 1 else ''}{n};")
    off = "".join(f"/* verilator lint_off {w} */\n" for w in STUB_WAIVERS)
    ports = ", ".join(["clk", "rst", *signature.members])
    return f"// lint stub\n{off}module {name}({ports});\n" + "\n".join(decl) + "\nendmodule\n"


@pytest.mark.parametrize("org", ["delta", "compact"])
def test_front_emits_reproducibly_and_lints_clean(tmp_path, org):
    """``kaleido_dfront`` and ``kaleido_dcore_front`` of an 8 x 8 delta config (``kaleido_cfront``,
    ``kaleido_ccore_front`` of a compact one): the same bytes twice, no paths, and Verilator -Wall clean each with
    its macros and with port-only stubs of the controller and the combine unit (on its 2 ways: compact D104, delta
    D108), which
    the core instantiates by name (`_signature_stub`: their ports from the components' signatures, as Amaranth
    emits them, so neither is converted here). (The whole hierarchies from the cores lint clean too,
    `hw.lint.lint_folder` with ``full``: D103, not rerun here for time.)"""
    from pathlib import Path

    from hw.combine import combine_module_name
    from hw.compact_core import CompactCore
    from hw.delta_combine import dcombine_module_name
    from hw.delta_core import DeltaCore
    from hw.lint import lint_folder
    from hw.rtl import emit, plan
    from hw.sram import macro_name

    delta = org == "delta"
    cfg = delta_cfg(8, 8, 2, 2, state_kib=2) if delta else compact_cfg(8, 8, 2, 2)
    acc = discard((DeltaAccel if delta else CompactAccel)(cfg, pe="instance", queues=True))
    front = discard(DeltaFront(acc, pe="instance"))
    core = discard((DeltaCore if delta else CompactCore)(cfg, pe="instance", front=True))
    mine = [macro_name(*mc) for mc in front.macros() + core.macros()]
    fname, cname = ("kaleido_dfront", "kaleido_dcore_front") if delta else ("kaleido_cfront", "kaleido_ccore_front")
    # the cores' combine on their ways (D104: kaleido_combine_w2 on d = 2; D108: kaleido_dcombine_w2)
    children = (("kaleido_daccel", dcombine_module_name(core.ways)) if delta
                else ("kaleido_caccel", combine_module_name(core.ways)))
    assert core.ways == 2
    roles = ("dfront", "dcore_front") if delta else ("cfront", "ccore_front")
    names = [n for n, spec, _ in plan(cfg) if n in mine or (spec[0] == "module" and spec[1] in roles)]
    a = emit(cfg, tmp_path / "a", only=tuple(names))
    b = emit(cfg, tmp_path / "b", only=(fname,))
    assert (tmp_path / "a" / f"{fname}.v").read_bytes() == b[0].read_bytes()
    text = (tmp_path / "a" / f"{cname}.v").read_text()
    for t in (b[0].read_text(), text):
        assert str(Path.cwd()) not in t and str(tmp_path) not in t
    assert all(f"{n} " in text for n in (fname, *children))
    assert len(a) == len(names) == len(set(mine)) + len(roles)
    for child, comp in zip(children, (core.accel, core.combine), strict=True):  # port-only stand-ins
        (tmp_path / "a" / f"{child}.v").write_text(_signature_stub(child, comp.signature))
    runs = lint_folder(tmp_path / "a", jobs=2)
    assert all(ok for _, ok, _, _ in runs), [(label, out[:600]) for label, ok, _, out in runs if not ok]
    assert {f"{fname}.v", f"{cname}.v"} <= {label.split(" ")[0] for label, *_ in runs}



def test_ccore_with_front_from_raw_x():
    """Two ops back to back on ``kaleido_ccore`` built with its front, on its d = 2 combine ways (D104; f/h/w groups,
    int8, N = 11: two column blocks, the first walked before the controller's ``done``; two f groups, uint8, N = 5):
    every ``Y`` row equals `algo.reuse.golden.reuse_gemm` from raw X, and every row and ``done`` leave
    `front_cycles` later than `tests.test_rtl_ccore.check_core`'s model of the core fed with the golden decisions
    (`sim.timing.compact_accel.core_cycles` on `block_times`), the partial-sum SRAM's accesses as it counts them."""
    from algo.reuse.golden import reuse_gemm
    from hw.compact_core import default_ways
    from sim.engines.band_stimulus import band_op
    from sim.timing.compact_accel import caccel_cycles, queue_steps
    from tests.rtl.caccel_bench import run_ccore
    from tests.rtl.cases import Case
    from tests.test_rtl_ccore import check_core

    cfg = compact_cfg(8, 8, 2, 2)
    assert default_ways(cfg) == 2  # d = 2 drain ports: the combine's two ways, a command takes 2 groups (D104)
    rng = np.random.default_rng(1031)
    jobs = []
    for name, N in (("fhwf-int8", 11), ("ff-uint8", 5)):  # noqa: N806  (kaleido_ccore holds H W <= R positions)
        X, grid, groups, _th, xu = _job(name)  # noqa: N806
        W = rng.integers(-128, 128, size=(X.shape[1], N)).astype(np.int8)  # noqa: N806
        dec, _ = decide(X, grid, groups, THETA)
        case = Case(name, X, W, grid, groups, dec, xu)
        jobs.append((case, band_op(X, W, grid, groups, dec, cfg, None), None))
    for run, (case, op, fw) in zip(run_ccore(cfg, jobs, theta=THETA), jobs, strict=True):
        y, _ = reuse_gemm(case.X, case.W, case.grid, case.groups, THETA)
        D = front_cycles(case.X.shape[0], case.groups, 32)  # noqa: N806
        assert min(c for c, _v in run.y.values()) > D
        run.y = {k: (c - D, v) for k, (c, v) in run.y.items()}
        run.cycles -= D
        check_core(cfg, case, op, fw, run)
        C, N = cfg.array_cols, case.W.shape[1]  # noqa: N806
        if N > C:  # two column blocks: block 0's rows leave before the controller's done (D104's overlapped walk)
            q = queue_steps(case.decisions, case.grid, cfg, case.grid[0], -(-N // C))
            done = caccel_cycles(op, case.groups, cfg, 2 * cfg.compact_bands, 32, q)
            assert min(c for (cb, _t), (c, _v) in run.y.items() if cb == 0) < done  # 87 < 143 (after the shift)
        for (cb, t), (_c, v) in run.y.items():
            n = min(C, N - C * cb)
            assert np.array_equal(v[:n], y[t, C * cb:C * cb + n]), (cb, t)


@pytest.mark.parametrize("name", ["hw/presets/examples/tiny-8x8-delta.toml", "kaleido-16nm-128x128-balanced",
                                  "hw/presets/examples/tiny-8x8-compact.toml"])
def test_write_port_reaches_every_token(name):
    """The controller's write port (which the front drives) addresses the last token's last X word, ``(max_tokens -
    1) KW + KW - 1`` = 255 x 16 + 15 = 4,095 on these configs (256 tokens, KW = 16): 12 bits. Before D103 it had
    its X banks' bits (balanced: 8, token 15 the last reachable)."""
    from hw.config import load_config

    cfg = load_config(name)
    acc = discard((DeltaAccel if cfg.organisation == "delta" else CompactAccel)(cfg, queues=True))
    assert (acc.max_tokens, acc.KW) == (256, 16)
    assert len(acc.wr_addr) == 12
    front = discard(DeltaFront(acc))
    assert len(front.o_addr) == 12 and len(front.wr_addr) == 12
