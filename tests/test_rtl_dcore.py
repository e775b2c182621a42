"""The delta controller with its combine stage in RTL (hw/delta_core.py, ``kaleido_dcore``, docs/decisions.md D95)
under Amaranth's simulator, against the golden model and the model of its cycles (`sim.timing.delta_core`).

Seeded cases of tests/test_rtl_delta.py (every decision mix incl. paired half-width band-tiles and chunk flushes,
scattered and coherent decisions, int8 and uint8, ``f``/``w``/``h`` groups, N = 11 and 5 against C = 8, odd
widths, direct tokens) and its qk-like cases over two and three axis classes (pools splitting image rows), with the
carried values in the partial-sum state buffer and in the state SRAM, on 8 x 8 with 2 bands on 2 ports, 4 bands on
2, 2 bands on 4, and 4 x 8 with 2 bands on 1, in D68's and D84's issue orders. The 8 x 8, 2-band, 2-port cases
without the state SRAM (but case 0) and the seeded random ops back to back run on the compiled engine instead
(tests/test_rtl_core_engine.py, D102), which checks their Y rows and cycles, not the commands and accesses below.
For each op:

- every token's ``Y`` row of every column block leaves once, tagged (token, column block), equal to
  `algo.reuse.golden.apply_decisions` bit for bit (and so to `sim.timing.delta_reference.delta_gemm`, which
  tests/test_rtl_delta.py checks equal on these cases);
- every row leaves at the cycle `sim.timing.delta_core.core_schedule` gives from the controller's model
  (`sim.timing.delta_accel.row_out_cycles`, `accel_cycles`, computed apart from the RTL), and ``done`` too;
- every output command equals `tests.rtl.delta_bench.dcombine_program`'s (the bench's program that specified
  ``kaleido_dcombine``'s commands, D79), field for field;
- the combine unit's state-SRAM, state-buffer and lane-register accesses equal the model's counts
  (`sim.cost.compact_actions`' delta rules, tests/test_rtl_delta.py ``model_counts``).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from algo.reuse.golden import COMPUTE, REUSE, apply_decisions
from hw import discard
from hw.delta_accel import DeltaAccel
from hw.delta_accel_host import queue_ports
from hw.delta_combine import delta_combine_sizes, pool_state_words
from hw.delta_core import DeltaCore, core_ports, segment_order
from sim.engines.band_stimulus import band_op
from sim.timing.delta import classes
from sim.timing.delta_accel import (
    AccelRun,
    accel_cycles,
    accel_schedule,
    gather_rounds,
    queue_steps,
    row_out_cycles,
)
from sim.timing.delta_core import (
    IssueFeed,
    commands,
    core_schedule,
    fifo_order_deadlocks,
    fifo_rows,
    row_ways,
    row_ways_local,
    segment_slot,
    segment_steps,
    segments,
    tile_segments,
)
from tests.rtl.cases import make_case
from tests.rtl.dcore_bench import CMD_PORTS, run_dcore
from tests.rtl.delta_bench import dcombine_program
from tests.test_rtl_delta import CASES, QK_CASES, SHAPES, _case, delta_cfg, model_counts
from tests.test_rtl_dqueue import _random

FIFO = 64  # rows; the most these cases queue is 39 (core_schedule's fifo_max, checked below)

# (shape, case, chunk-major issue order, fused, queues)
# The 8 x 8, 2 bands on 2 ports cases without the state SRAM and the seeded random ops back to back
# (`ENGINE_RUNS`, `random_ops`) run on the compiled engine (tests/test_rtl_core_engine.py, D102: Y rows and their
# cycles); case 0 stays here, with the command and access checks below.
ENGINE_RUNS = [("8x8-B2-d2", c, False, False, True) for c in range(1, 4)] + [
    ("8x8-B2-d2", 0, True, False, False), ("8x8-B2-d2", "qk-int8", False, False, True),
    ("8x8-B2-d2", "three-axes", False, False, False)]
RUNS = [("8x8-B2-d2", 0, False, False, True),
        ("8x8-B4-d2", 1, True, False, True), ("4x8-B2-d1", 2, False, False, True), ("8x8-B2-d4", 3, True, False, True),
        ("4x8-B2-d1", 1, False, False, False), ("8x8-B2-d2", "qk-int8", True, True, True),
        ("8x8-B4-d2", "three-axes", True, True, True), ("8x8-B2-d2", "hand", False, True, False),
        ("8x8-B2-d4", "qk-uint8-coherent", False, True, True)]


def _job(cfg, case, fw, s, cm, fused, queues=True):
    """``(case, op, fused, ports, (seg, fw, s))`` for `tests.rtl.dcore_bench.run_dcore` and the queues'
    `queue_steps` (None without queues)."""
    fw = fw or case.grid[0]
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s, chunk_major=cm)
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    walk = (segment_order(cm, s, n_cb), fw, s)
    if not queues:
        return (case, op, fused, None, walk), None
    ports = queue_ports(discard(DeltaAccel(cfg)), case.grid, case.groups, fw, n_cb, s, cm)
    R = cfg.array_rows  # noqa: N806
    return ((case, op, fused, ports, walk),
            queue_steps(case.decisions, case.grid, R, R // cfg.compact_bands, fw, n_cb, s, cm))


def _model(cfg, case, op, queue, fw=None, s=None, ways=1, local=False):
    """The controller's row cycles and ``done`` by `sim.timing.delta_accel` (2 B staging entries, 32 lanes), and
    the rows in the FIFO's order with their segments and the descriptors (`sim.timing.delta_core.core_schedule`),
    and with ``ways`` > 1 each row's accumulate way (`sim.timing.delta_core.row_ways`) fourth."""
    widths = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles], dtype=np.int64)
    rounds = gather_rounds([t.tokens for t in op.tiles], cfg.array_rows // cfg.compact_bands)
    S = 2 * cfg.compact_bands  # noqa: N806
    band, _first, last, g = accel_schedule(op.s_seq, op.rows, widths, rounds, cfg, S, 32, queue)
    rows = np.concatenate(row_out_cycles(band, last, op.rows, cfg))
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    sgs = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, cfg.array_rows, n_cb, fw, s)
    descs = [(int(g[n]) + 2, sgs[n], int(op.rows[n])) for n in range(len(sgs))]
    of_class = {g: a for a, (_ax, idx) in enumerate(classes(case.groups)) for g in idx}
    if local:  # segment-local D addresses (D125): the way from the slot
        rw = row_ways_local([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.grid,
                            cfg.array_rows, fw or case.grid[0], ways)
    else:
        rw = row_ways([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.X.shape[0], ways)
    cyc, rsg, way = fifo_rows(band, last, op.rows, sgs, cfg, rw)
    return (rows, accel_cycles(op.s_seq, op.rows, widths, rounds, cfg, S, 32, queue),
            (cyc, rsg, descs) if ways == 1 else (cyc, rsg, descs, way))


def way_daddr(addr: int, n_cb: int, ways: int) -> int:
    """The bench program's D address ``u n_cb + cb`` (u = a M + t) in `hw.delta_core.DeltaCore`'s layout on W
    ``ways`` (docs/decisions.md D107): way u mod W low, ``(u div W) n_cb + cb`` above it."""
    u, cb = divmod(addr, n_cb)
    return ((u // ways) * n_cb + cb) * ways + u % ways


def pool_store(cfg, grid, axis: str, t: int, cb: int, s: int) -> int:
    """The word of token t's carried value of column block cb in the state buffer per pool (docs/decisions.md D133),
    one output lane, by hand: the state SRAM's regions (D79, `tests.rtl.delta_bench.dcombine_program`'s fused
    ``store``) over a group's ``s`` column blocks, ``cb mod s`` the block in its group: ``f`` the pool slot ``p mod R``,
    ``w`` the frame word ``R + f``, ``h`` the (frame, column) word ``R + F + f W + p mod W``."""
    F, H, W = grid  # noqa: N806
    R = cfg.array_rows  # noqa: N806
    f, p = divmod(t, H * W)
    u = {"f": p % R, "w": R + f, "h": R + F + f * W + p % W}[axis]
    return u * s + cb % s


def pool_program(prog, case, cfg, n_cb: int, s: int) -> None:
    """The bench program's partial-sum state-buffer addresses (``((a F + f) H W + p) n_cb + cb``, each command's own
    token for the write, its neighbour for the read) moved, in place, to the per-pool layout (`pool_store`)."""
    F, H, W = case.grid  # noqa: N806
    M, hw = case.X.shape[0], H * W  # noqa: N806
    axes = [ax for ax, _ in classes(case.groups)]
    for c in prog:
        a = (c["c_daddr"] // n_cb - c["_token"]) // M
        af, p = divmod(c["c_raddr"] // n_cb, hw)  # the neighbour the bench reads: frame af - a F, position p
        nb = (af - a * F) * hw + p
        c["c_waddr"] = pool_store(cfg, case.grid, axes[a], c["_token"], c["_cb"], s)
        c["c_raddr"] = pool_store(cfg, case.grid, axes[a], nb, c["_cb"], s)


def lane_program(prog, case, cfg, n_cb: int, A: int, fw, s, V: int, fused: bool = False,  # noqa: N803
                 blocks: int | None = None) -> list[dict]:
    """The bench program's output commands (`tests.rtl.delta_bench.dcombine_program`, one a cycle) as V output
    lanes issue them (docs/decisions.md D112): in `sim.timing.delta_core.segment_steps`' order (per step its
    lanes), the carried store's addresses moved to the position banks' layout (bank low, log2 V bits): the
    partial-sum state buffer's ``((a F + f) H W + p) n_cb + cb`` to bank p mod V, ``((a F + f) ceil(H W / V) +
    p div V) n_cb + cb``; the state SRAM's (``fused``) pool slot i (f axis) to bank i mod V, ``(i div V) n_cb + cb``,
    frame word R + f (w) to bank 0, ``(R / V + f) n_cb + cb``, and h word R + F + f W + x to bank x mod V,
    ``(R / V + F + f W / V + x div V) n_cb + cb``; ``blocks``: the state buffer per pool's region addresses over
    ``blocks`` column blocks (`pool_program`, docs/decisions.md D133), banked as the state SRAM's."""
    from sim.timing.delta_core import segment_steps

    F, H, W = case.grid  # noqa: N806
    hw, M, lv = H * W, F * H * W, (V - 1).bit_length()  # noqa: N806

    R = cfg.array_rows  # noqa: N806

    def banked(addr):
        nb = blocks or n_cb
        u, cb = divmod(addr, nb)
        if fused or blocks:
            if u < R:
                return ((u // V) * nb + cb) << lv | u % V
            if u < R + F:
                return ((R // V + u - R) * nb + cb) << lv
            f, x = divmod(u - R - F, W)
            return ((R // V + F + f * W // V + x // V) * nb + cb) << lv | x % V
        af, p = divmod(u, hw)
        return ((af * -(-hw // V) + p // V) * n_cb + cb) << lv | p % V

    key = {(c["_token"], c["_cb"], (c["c_daddr"] // n_cb - c["_token"]) // M): c for c in prog}
    out = []
    for sg in segment_steps(case.grid, n_cb, A, cfg.array_rows, fw, s, V):
        for step in sg:
            for cmd in step:
                c = dict(key[cmd])
                c["c_waddr"], c["c_raddr"] = banked(c["c_waddr"]), banked(c["c_raddr"])
                out.append(c)
    return out


def row_tiles(cfg, case, op, queue) -> np.ndarray:
    """Each drained row's band-tile (an index into `_model`'s descriptors), int64 ``[rows]`` in the FIFO's order
    (`sim.timing.delta_core.fifo_rows`), from the controller's model as `_model`: `core_schedule`'s ``row_tile``
    for the array hold (docs/decisions.md D116, D123)."""
    widths = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles], dtype=np.int64)
    rounds = gather_rounds([t.tokens for t in op.tiles], cfg.array_rows // cfg.compact_bands)
    band, _first, last, _g = accel_schedule(op.s_seq, op.rows, widths, rounds, cfg, 2 * cfg.compact_bands, 32, queue)
    tiles = [np.full(int(r), n, dtype=np.int64) for n, r in enumerate(op.rows)]
    return fifo_rows(band, last, op.rows, np.zeros(len(op.rows), dtype=np.int64), cfg, tiles)[2]


def gate_feed(cfg, case, op, queue, fw=None, s=None, ways=1, local=False) -> IssueFeed:
    """The controller with the issue gate (docs/decisions.md D126) for `core_schedule`'s ``gate``: a resumable
    `sim.timing.delta_accel.AccelRun` (2 B staging entries, 32 lanes, as `_model`), each band-tile's segment and its
    rows' ways (`_model`'s)."""
    widths = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles], dtype=np.int64)
    rounds = gather_rounds([t.tokens for t in op.tiles], cfg.array_rows // cfg.compact_bands)
    run = AccelRun(op.s_seq, op.rows, widths, rounds, cfg, 2 * cfg.compact_bands, 32, queue, gate=True)
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    sgs = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, cfg.array_rows, n_cb, fw, s)
    of_class = {g: a for a, (_ax, idx) in enumerate(classes(case.groups)) for g in idx}
    if local:
        rw = row_ways_local([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.grid,
                            cfg.array_rows, fw or case.grid[0], ways)
    else:
        rw = row_ways([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.X.shape[0], ways)
    return IssueFeed(run, sgs, rw, cfg)


def check(cfg, job, queue, got, fifo=FIFO, ways=1, out_ways=1, model=None, buffers=2, hold=False, row_tile=None,
          local=False, bound=None, feed=None, pool=False, slots=None, slot_cap=8):
    """``got`` (`tests.rtl.dcore_bench.run_dcore`'s run of ``job``) against the golden model, `core_schedule` fed by
    the controller's model (``model``: `_model`'s result for another controller, the staged one's, else `_model`)
    on ``buffers`` D buffers (D115) and the bench program's commands (module docstring); with ``hold`` (the core
    built with ``array_hold``, D123) `core_schedule`'s array hold on ``fifo`` entries and d rows a cycle (``row_tile``
    each row's band-tile, default `row_tiles`): the rows' and the controller's ``done`` cycles after the holds and
    the held cycles; ``local``: the core's segment-local D addresses (D125: the model's ways, its wait, the commands'
    D address the token's `segment_slot`); ``pool``: the core's state buffer per pool (D133: the commands' carried-store
    addresses `pool_store`'s); ``slots``: D138's segment-slot ring, the wait on it and the address a sub-slot
    ``(k div buffers) mod ceil(slots / buffers)`` of ``A fw R`` words above, k the walked segment; by default with
    ``local`` the op's, by hand: ``min(slot_cap, buffers floor(D buffer words / A fw R))``, the count banks 8 or the
    core's explicit issue bound; the gate's ``bound`` is then the slots, as the core's). Returns the schedule."""
    case, op, fused, _ports, (seg, fw, s) = job
    C, N = cfg.array_cols, case.W.shape[1]  # noqa: N806
    n_cb = -(-N // C)
    want = apply_decisions(case.X, case.W, case.grid, case.groups, case.decisions, 4)
    A = len(classes(case.groups))  # noqa: N806
    if local and slots is None:  # D138: the op's segment slots, as the host sets o_slots
        from hw.delta_combine import delta_combine_sizes

        words = delta_combine_sizes(cfg, ways, out_ways, buffers)["d_depth"]
        slots = min(slot_cap, buffers * (words // (A * (fw or case.grid[0]) * cfg.array_rows)))
    if local and bound is not None:
        bound = slots
    if bound is not None:  # the issue hold (D126): the controller's schedule co-simulated with the core's
        gate = feed or gate_feed(cfg, case, op, queue, fw, s, ways, local)
        bp = {"fifo": fifo, "ports": cfg.drain_rows_per_cycle} if hold else {}
        sch = core_schedule(None, None, case.grid, n_cb, A, cfg.array_rows, seg, None, None, fw, s, ways, None,
                            out_ways, buffers, **bp, local=local, gate=gate, bound=bound, slots=slots)
        rows, done = sch["out"], sch["accel_done"]
    else:
        rows, done, (cyc, rsg, descs, *way) = model or _model(cfg, case, op, queue, fw, s, ways, local)
        bp = {"fifo": fifo, "ports": cfg.drain_rows_per_cycle, "row_tile": row_tiles(cfg, case, op, queue) if row_tile is None else row_tile} if hold else {}
        sch = core_schedule(cyc, done, case.grid, n_cb, A, cfg.array_rows, seg, rsg, descs, fw, s, ways,
                            way[0] if way else None, out_ways, buffers, **bp, local=local, slots=slots)
    if hold:
        rows, done = sch["out"], sch["accel_done"]
        assert got.held == sch["frozen"]
    assert sorted(got.row_cycles) == sorted(rows.tolist()) and got.accel_done == done
    assert sch["fifo_max"] <= fifo and not got.overflow and not sch["overflow"]
    assert not got.twice
    assert sorted(got.rows) == sorted(sch["rows"])
    for (t, cb), (cycle, values) in got.rows.items():
        n = min(C, N - cb * C)
        assert np.array_equal(values[:n], want[t, cb * C:cb * C + n]), (t, cb)
        assert cycle == sch["rows"][(t, cb)], (t, cb)
    assert got.cycles == sch["done"]
    # the output commands, field for field, against tests.rtl.delta_bench's program (the combine's specification,
    # D79), the carried-store read address only where it is read
    _acc, prog = dcombine_program(case, [], cfg, fused)
    where = {(t, b): k for k, sg in enumerate(segments(case.grid, n_cb, A, cfg.array_rows, fw, s)) for t, b, _a in sg}
    prog = sorted(prog, key=lambda c: where[(c["_token"], c["_cb"])])  # the walk goes segment by segment (D104)
    pooled = pool and not fused
    if pooled:  # the state buffer per pool (D133): the writer's and the neighbour's words in the region layout
        pool_program(prog, case, cfg, n_cb, s or n_cb)
    if out_ways > 1:  # the lanes' order: per step, its lanes (segment_steps), addresses in the lanes' layouts
        prog = lane_program(prog, case, cfg, n_cb, A, fw, s, out_ways, fused, (s or n_cb) if pooled else None)
    M = case.X.shape[0]  # noqa: N806
    for c in prog:
        if local:  # the bench's (a M + t) n_cb + cb to the token's slot in its segment's buffer (way low already)
            a, t = divmod(c["c_daddr"] // n_cb, M)
            c["c_daddr"] = int(segment_slot(t, a, case.grid, cfg.array_rows, fw or case.grid[0]))
            if slots:  # D138: segment k's sub-slot in buffer k mod n, A fw R words each
                sub = where[(c["_token"], c["_cb"])] // buffers % -(-slots // buffers)
                c["c_daddr"] += sub * A * (fw or case.grid[0]) * cfg.array_rows
        else:
            c["c_daddr"] = way_daddr(c["c_daddr"], n_cb, ways)
    assert len(got.cmds) == len(prog)
    for k, (mine, spec) in enumerate(zip(got.cmds, prog, strict=True)):
        keys = [n for n in CMD_PORTS if n != "c_raddr" or not (spec["c_direct"] or spec["c_reg"])]
        assert {n: mine[n] for n in keys} == {n: spec[n] for n in keys}, (k, spec["_token"], spec["_cb"])
    if len(classes(case.groups)) > 1:  # the qk-like cases: the combine's carried traffic against the model
        m = model_counts(case, cfg, fused, out_ways)
        c = got.counts
        assert (c["st_re"], c["st_we"]) == (m["state_read"], m["state_write"])
        assert c["ps_re"] * N == m["psum_carried_read"] * n_cb and c["ps_we"] * N == m["psum_carried_write"] * n_cb
        # the lane register: with lanes the chain carries a run's w neighbours, the register is written once per
        # step holding any (D112; counted so since D114)
        assert c["lane_we"] == m["lane"]
    return sch


def _run_case(ci):
    """``(case, frames a chunk, column blocks a group)`` of a run's case: a qk-like case by name (one frame a chunk,
    two column blocks a group) or a seeded case by index (its own)."""
    return (QK_CASES[ci], 1, 2) if isinstance(ci, str) else CASES[ci]


@pytest.mark.parametrize(("shape", "ci", "chunk_major", "fused", "queues"), RUNS,
                         ids=[f"{s}-{c}{'-cm' if cm else ''}{'-sram' if fu else ''}{'' if q else '-host'}"
                              for s, c, cm, fu, q in RUNS])
def test_dcore_y_rows_and_cycles(shape, ci, chunk_major, fused, queues):
    case, fw, s = _run_case(ci)
    cfg = delta_cfg(*SHAPES[shape], state_kib=2)
    job, queue = _job(cfg, case, fw, s, chunk_major, fused, queues)
    [got] = run_dcore(cfg, [job], fifo=FIFO, queues=queues, ways=1)  # D95's one way, its schedules pinned
    check(cfg, job, queue, got)


#: The runs on d accumulate ways (docs/decisions.md D107; the core's default, D108): d = 2 and 4, both issue orders,
#: fused and not, host and queues, three axis classes (a token's classes in distinct ways).
WAY_RUNS = [("8x8-B2-d2", 0, False, False, True), ("8x8-B2-d4", 3, True, False, True),
            ("8x8-B4-d2", "three-axes", True, True, True), ("8x8-B2-d4", "qk-uint8-coherent", False, True, True),
            ("8x8-B2-d2", "hand", False, True, False)]


@pytest.mark.parametrize(("shape", "ci", "chunk_major", "fused", "queues"), WAY_RUNS,
                         ids=[f"{s}-{c}{'-cm' if cm else ''}{'-sram' if fu else ''}{'' if q else '-host'}"
                              for s, c, cm, fu, q in WAY_RUNS])
def test_dcore_on_d_ways(shape, ci, chunk_major, fused, queues):
    case, fw, s = _run_case(ci)
    cfg = delta_cfg(*SHAPES[shape], state_kib=2)
    d = cfg.drain_rows_per_cycle
    job, queue = _job(cfg, case, fw, s, chunk_major, fused, queues)
    [got] = run_dcore(cfg, [job], fifo=FIFO, queues=queues)  # the default ways: d (D108)
    check(cfg, job, queue, got, ways=d)


#: The runs on V output lanes (docs/decisions.md D112, opt-in): ``(shape, case, chunk-major, queues, V, fused)`` on
#: d accumulate ways, V = d = 2 (two and three axis classes, the w axis's lane chain broken by direct tokens, both
#: issue orders, host and queues, the state buffer and the state SRAM) and V = 4 and 2 on d = 4 (case 3: the h axis
#: at o_w = V; three-axes fused: the state SRAM's h words at o_w = V).
LANE_RUNS = [("8x8-B2-d2", 0, False, True, 2, False), ("8x8-B2-d2", 1, False, True, 2, False),
             ("8x8-B2-d2", "hand", False, False, 2, True), ("8x8-B2-d2", "hand", False, True, 2, False),
             ("8x8-B2-d2", "qk-int8", True, True, 2, False), ("8x8-B4-d2", "three-axes", True, True, 2, True),
             ("8x8-B2-d4", "qk-uint8-coherent", False, True, 4, False), ("8x8-B2-d4", "three-axes", False, True, 4, True),
             ("8x8-B2-d4", 3, True, True, 2, False)]


@pytest.mark.parametrize(("shape", "ci", "chunk_major", "queues", "out_ways", "fused"), LANE_RUNS,
                         ids=[f"{s}-{c}{'-cm' if cm else ''}{'-sram' if fu else ''}{'' if q else '-host'}-v{v}"
                              for s, c, cm, q, v, fu in LANE_RUNS])
def test_dcore_on_output_lanes(shape, ci, chunk_major, queues, out_ways, fused):
    # every Y row against apply_decisions, its cycle and done against core_schedule(ways=d, out_ways=V), every
    # lane's output command against the bench program in segment_steps' order (the carried store's addresses in
    # the position banks' layout); on the qk-like ops the carried store's accesses against the model's counts
    case, fw, s = _run_case(ci)
    cfg = delta_cfg(*SHAPES[shape], state_kib=2)
    job, queue = _job(cfg, case, fw, s, chunk_major, fused, queues)
    [got] = run_dcore(cfg, [job], fifo=FIFO, queues=queues, out_ways=out_ways)
    check(cfg, job, queue, got, ways=cfg.drain_rows_per_cycle, out_ways=out_ways)


def test_output_lanes_refusals():
    cfg = delta_cfg(*SHAPES["8x8-B2-d4"], state_kib=2)
    for kw in ({"out_ways": 3}, {"out_ways": 4, "ways": 2}, {"out_ways": 2, "front": True}):
        with pytest.raises(ValueError, match="out_ways"):
            DeltaCore(cfg, **kw)
    core = discard(DeltaCore(cfg, out_ways=4))
    with pytest.raises(ValueError, match="neither o_w = 2 < 4"):
        core_ports(core, (1, 2, 2), [(0, 4, "w")], 8)
    with pytest.raises(ValueError, match="fused score op with o_w not a multiple of 4"):
        core_ports(core, (1, 2, 6), [(0, 4, "w")], 8, fused=True)
    core_ports(core, (1, 2, 4), [(0, 4, "w")], 8)  # o_w = V: built
    core_ports(core, (1, 2, 8), [(0, 4, "w")], 8, fused=True)
    # the state SRAM's position banks: 2 KiB / (8 x 24 bits) = 85 words a column bank, 21 a position bank on 4
    # lanes (84 in all): grid 2 x 1 x 8, 3 column blocks: 4 x (8 / 4 + 2 + 2 x 8 / 4) x 3 = 96 > 84; one lane
    # needs (8 + 2 + 16) x 3 = 78 <= 85
    with pytest.raises(ValueError, match="state SRAM: the op needs 96 words.*holds 84"):
        core_ports(core, (2, 1, 8), [(0, 4, "w")], 24, fused=True)
    core_ports(discard(DeltaCore(cfg)), (2, 1, 8), [(0, 4, "w")], 24, fused=True)
    # the state buffer's position banks: 64 KiB / 3 / (8 x 28 bits) = 780 words, 195 a bank on 4 lanes; grid
    # 3 x 1 x 5, classes w and f, 20 column blocks (N = 160): the D sums take 4 ceil(2 x 15 / 4) x 20 = 640 words
    # (they fit), the carried values 4 banks x 2 classes x 3 frames x ceil(5 / 4) positions x 20 = 960 (they do not)
    with pytest.raises(ValueError, match="state buffer: the op needs 960 words.*holds 780"):
        core_ports(core, (3, 1, 5), [(0, 4, "w"), (4, 8, "f")], 160)
    core_ports(discard(DeltaCore(cfg)), (3, 1, 5), [(0, 4, "w"), (4, 8, "f")], 160)  # one lane: 600 words fit


def _three_axes(seed, grid, N, p):  # noqa: N803
    """A seeded case of three axis classes (groups of 2 channels on h, w, f), each (token, group) REUSE with
    chance ``p`` where its neighbour exists (else COMPUTE); one column block at a time (s = 1), one chunk."""
    c = make_case(f"wide{seed}", 400 + seed, grid, 6, N, [2, 2, 2])
    c.groups = [(0, 2, "h"), (2, 4, "w"), (4, 6, "f")]
    rng = np.random.default_rng(seed)
    c.decisions = np.where(rng.random(c.decisions.shape) < p, REUSE, COMPUTE).astype(np.int8)
    idx = np.unravel_index(np.arange(c.X.shape[0]), grid)
    for g, ax in enumerate((1, 2, 0)):
        c.decisions[idx[ax] == 0, g] = COMPUTE
    return c, None, 1


#: Column blocks outer (s = 1) on 5 and 3 column blocks (N = 37, 20 on C = 8): blocks walked while later ones
#: accumulate, block 4 on block 0's count bank; on the three-axis case (a block's walk 3 M = 108 commands against
#: few rows a block) rows of block b + 2 wait while b is walked (the same D buffer).
WIDE = [(_case(7, (2, 2, 4), 6, 37, [3, 3], False, "f", None, 1), "8x8-B2-d2"),
        (_case(8, (2, 2, 3), 5, 20, [2, 3], True, "w", 1, 1), "8x8-B4-d2"),
        (_case(9, (3, 2, 2), 4, 37, [4], False, "f", None, 1), "4x8-B2-d1"),
        (_three_axes(0, (3, 3, 4), 37, 0.7), "8x8-B2-d2")]


@pytest.mark.parametrize("wi", range(len(WIDE)))
def test_dcore_walks_each_column_block_once_whole(wi):
    case, shape = WIDE[wi]
    c, fw, s = case
    cfg = delta_cfg(*SHAPES[shape], state_kib=2)
    job, queue = _job(cfg, c, fw, s, False, False)
    assert job[4][0]  # walked segment by segment
    [got] = run_dcore(cfg, [job], fifo=2 * FIFO, ways=1)  # the three-axis case holds 105 rows
    check(cfg, job, queue, got, 2 * FIFO)


def test_dcore_lanes_on_wide_and_random_ops():
    # V = d = 2 output lanes (D112) on the WIDE ops of d = 2 shapes (several column blocks walked one at a time,
    # rows waiting at the head's gate) and the six seeded random ops (random grids, groups and axes, both orders),
    # each op alone: as test_dcore_on_output_lanes
    runs = [(c, fw, s, False, shape, 2 * FIFO) for (c, fw, s), shape in WIDE if SHAPES[shape][3] == 2]
    runs += [(c, fw, s, cm, "8x8-B2-d2", FIFO) for c, fw, s, cm in random_ops()]
    assert len(runs) == 9 and all(c.grid[2] >= 2 for c, *_ in runs)
    for c, fw, s, cm, shape, fifo in runs:
        cfg = delta_cfg(*SHAPES[shape], state_kib=2)
        job, queue = _job(cfg, c, fw, s, cm, False)
        [got] = run_dcore(cfg, [job], fifo=fifo, out_ways=2)
        check(cfg, job, queue, got, fifo, ways=2, out_ways=2)


#: The runs on three D buffers (docs/decisions.md D115): ``(case, shape, chunk-major, V, fused, FIFO entries)``: the
#: three-axis WIDE op (rows of segment k + 2 wait while k is walked on two buffers; on three its V = 2 schedule has no
#: row waiting and ends at 379 against 395, on V = 1 rows of k + 3 still wait), three-axes fused on 4 bands (V = 1),
#: qk-uint8-coherent on d = 4 ways (V = 1: its rows wait on two buffers, not on three), three-axes fused on d = 4
#: with V = 4, and seeded random op 3 (D68's order, not walked segment by segment).
D3_RUNS = [("wide3", "8x8-B2-d2", False, 2, False, 2 * FIFO), ("wide3", "8x8-B2-d2", False, 1, False, 2 * FIFO),
           ("three-axes", "8x8-B4-d2", True, 1, True, FIFO), ("qk-uint8-coherent", "8x8-B2-d4", False, 1, False, FIFO),
           ("three-axes", "8x8-B2-d4", False, 4, True, FIFO), ("random3", "8x8-B2-d2", None, 2, False, FIFO)]


def _named_case(ci, chunk_major: bool) -> tuple:
    """A run's op by name: ``"wide3"`` (WIDE's fourth case), ``"random3"`` (the fourth seeded random op, with its own
    issue order) or a seeded case number; returns ``(case, fw, s, chunk_major)``."""
    if ci == "wide3":
        return (*WIDE[3][0], chunk_major)
    if ci == "random3":
        return random_ops()[3]
    return (*_run_case(ci), chunk_major)


@pytest.mark.parametrize(("ci", "shape", "chunk_major", "out_ways", "fused", "fifo"), D3_RUNS,
                         ids=[f"{s}-{c}{'-sram' if fu else ''}-v{v}" for c, s, _cm, v, fu, _f in D3_RUNS])
def test_dcore_on_three_d_buffers(ci, shape, chunk_major, out_ways, fused, fifo):
    # every Y row against apply_decisions, its cycle and done against core_schedule(ways=d, out_ways=V, buffers=3)
    # (the controller's model), every output command against the bench program
    case, fw, s, chunk_major = _named_case(ci, chunk_major)
    cfg = delta_cfg(*SHAPES[shape], state_kib=2)
    job, queue = _job(cfg, case, fw, s, chunk_major, fused)
    [got] = run_dcore(cfg, [job], fifo=fifo, out_ways=out_ways, d_buffers=3)
    check(cfg, job, queue, got, fifo, ways=cfg.drain_rows_per_cycle, out_ways=out_ways, buffers=3)


#: The runs with the row FIFO's bypass (docs/decisions.md D118), on 3 D buffers and V = d lanes (the default core):
#: ``(case, shape, chunk-major, fused, FIFO entries)``.
BYPASS_RUNS = [(0, "8x8-B2-d2", False, False, FIFO), ("wide3", "8x8-B2-d2", False, False, 2 * FIFO),
               ("qk-uint8-coherent", "8x8-B2-d4", False, False, FIFO), ("three-axes", "8x8-B4-d2", True, True, FIFO)]


@pytest.mark.parametrize(("ci", "shape", "chunk_major", "fused", "fifo"), BYPASS_RUNS,
                         ids=[f"{s}-{c}{'-sram' if fu else ''}" for c, s, _cm, fu, _f in BYPASS_RUNS])
def test_dcore_fifo_bypass(ci, shape, chunk_major, fused, fifo):
    # the same Y rows, cycles and commands as core_schedule gives (the bypass keeps every pop's cycle); the FIFO's
    # banks written and read once per row less the rows core_schedule counts as popped the cycle after their write
    # ("bypass"); without the bypass once per row
    case, fw, s = WIDE[3][0] if ci == "wide3" else _run_case(ci)
    cfg = delta_cfg(*SHAPES[shape], state_kib=2)
    d = cfg.drain_rows_per_cycle
    job, queue = _job(cfg, case, fw, s, chunk_major, fused)
    runs = {}
    for byp in (False, True):
        [got] = run_dcore(cfg, [job], fifo=fifo, out_ways=d, d_buffers=3, fifo_bypass=byp)
        runs[byp] = (got, check(cfg, job, queue, got, fifo, ways=d, out_ways=d, buffers=3))
    rows = len(runs[False][0].row_cycles)
    assert runs[False][0].counts["fifo_we"] == runs[False][0].counts["fifo_re"] == rows
    got, sch = runs[True]
    assert 0 < sch["bypass"] < rows
    assert got.counts["fifo_we"] == got.counts["fifo_re"] == rows - sch["bypass"]


#: The array hold's runs (docs/decisions.md D116 item 1, D123) on FIFOs of 1-2 entries a port, each held: ``(case, shape,
#: chunk-major, core options, FIFO entries)``; the defaults' core (d ways, 3 D buffers, V = d lanes, the bypass) and
#: D95's one way, D68's and D84's orders, the host's list and the queues, the state SRAM.
DEFAULT_CORE = {"out_ways": 2, "d_buffers": 3, "fifo_bypass": True}
HOLD_RUNS = [(0, "8x8-B2-d2", False, {"ways": 1}, 4), (0, "8x8-B2-d2", False, DEFAULT_CORE, 4),
             ("wide3", "8x8-B2-d2", False, DEFAULT_CORE, 4), (3, "8x8-B2-d4", True, {}, 4),
             (1, "8x8-B4-d2", True, {"queues": False}, 4),
             ("qk-int8", "8x8-B2-d2", True, {"fused": True, "queues": False, "d_buffers": 3, "fifo_bypass": True}, 4),
             ("qk-uint8-coherent", "8x8-B2-d4", False, {"d_buffers": 3, "fifo_bypass": True}, 8)]


@pytest.mark.parametrize(("ci", "shape", "chunk_major", "opts", "fifo"), HOLD_RUNS,
                         ids=[f"{s}-{c}{'-cm' if cm else ''}-{'-'.join(f'{k}{v}' for k, v in o.items())}-q{f}"
                              for c, s, cm, o, f in HOLD_RUNS])
def test_dcore_array_hold(ci, shape, chunk_major, opts, fifo):
    # a FIFO of one or two entries a port: the controller held (run low) while fewer than d entries are free;
    # every Y row against apply_decisions, its cycle, the controller's rows, done and held cycles against
    # core_schedule(fifo=..., ports=d) on the controller's model (accel_schedule), every command against the bench
    # program; overflow never rises (without the hold it does: test_fifo_overflow_flagged_and_errors)
    case, fw, s = WIDE[3][0] if ci == "wide3" else _run_case(ci)
    cfg = delta_cfg(*SHAPES[shape], state_kib=2)
    d, opts = cfg.drain_rows_per_cycle, dict(opts)
    queues, fused = opts.pop("queues", True), opts.pop("fused", False)
    job, queue = _job(cfg, case, fw, s, chunk_major, fused, queues)
    [got] = run_dcore(cfg, [job], fifo=fifo, queues=queues, array_hold=True, **opts)
    sch = check(cfg, job, queue, got, fifo, ways=opts.get("ways", d), out_ways=opts.get("out_ways", 1),
                buffers=opts.get("d_buffers", 2), hold=True)
    assert got.held > 0 and not got.overflow and sch["fifo_max"] <= fifo


def test_array_hold_ports_and_clock_gate():
    # the constructor's default has no hold and no run port (its Verilog unchanged: test_two_d_buffers_verilog_unchanged);
    # with it the Verilog instantiates kaleido_clkgate feeding kaleido_daccel's clk (and nothing else), the same bytes
    # twice; the gate's own file lints clean (Verilator -Wall; the hierarchy in the test below)
    import re

    from amaranth.back import verilog

    from hw.delta_core import CLKGATE_MODULE_NAME

    cfg = delta_cfg(*SHAPES["8x8-B2-d2"])
    assert "run" not in discard(DeltaCore(cfg)).signature.members
    assert "run" in discard(DeltaCore(cfg, array_hold=True)).signature.members
    a, b = (verilog.convert(DeltaCore(cfg, pe="instance", array_hold=True), name="kaleido_dcore", emit_src=False)
            for _ in range(2))
    assert a == b
    assert len(re.findall(rf"^\s*{CLKGATE_MODULE_NAME} \S+\s+\(", a, re.M)) == 1
    gate = re.search(r"\.gclk\((\S+)\)", a)[1]
    assert re.search(rf"^\s*kaleido_daccel \S+\s+\([^;]*\.clk\({re.escape(gate)}\)", a, re.M | re.S)
    assert len(re.findall(rf"\.clk\({re.escape(gate)}\)", a)) == 1


#: Segment-local D addresses (docs/decisions.md D125): ``(case, shape, V, fused, FIFO entries, diff_sram_kib)`` on
#: three D buffers of the difference-sum buffer (8 KiB: 96 words a buffer; 2 KiB: 24), each op's whole D (``A M
#: n_cb`` words: 540, 144, 48) beyond it and each segment's (``A fw R``: 72, 24, 16) within, so the op's address
#: would not fit (three-axes in D84's chunk-major order, the others D68's walked segment by segment: s = 1 or one
#: column block); and seeded random op 3 in
#: D68's order (``o_local`` 0: the op's address, 64 KiB).
LOCAL_RUNS = [("wide3", "8x8-B2-d2", 1, False, 2 * FIFO, 8), ("three-axes", "8x8-B2-d4", 4, True, FIFO, 2),
              ("qk-uint8-coherent", "8x8-B2-d4", 1, False, FIFO, 2), ("random3", "8x8-B2-d2", 2, False, FIFO, 64)]


def _diff_cfg(shape, kib):
    from hw.config import AcceleratorConfig

    return AcceleratorConfig.model_validate(delta_cfg(*SHAPES[shape], state_kib=2).model_dump() | {"diff_sram_kib": kib})


@pytest.mark.parametrize(("ci", "shape", "out_ways", "fused", "fifo", "kib"), LOCAL_RUNS,
                         ids=[f"{s}-{c}{'-sram' if fu else ''}-v{v}-{k}k" for c, s, v, fu, _f, k in LOCAL_RUNS])
def test_dcore_segment_local_d_addresses(ci, shape, out_ways, fused, fifo, kib):
    # every Y row against apply_decisions, its cycle and done against core_schedule(local=True) with the ways from
    # the slots, every output command (its D address the token's segment_slot) against the bench program
    chunk_major = ci == "three-axes"  # D84's order (two column blocks a group); the others one block a group
    case, fw, s, chunk_major = _named_case(ci, chunk_major)
    cfg = _diff_cfg(shape, kib)
    job, queue = _job(cfg, case, fw, s, chunk_major, fused)
    local = job[4][0]
    core = discard(DeltaCore(cfg, fifo=fifo, out_ways=out_ways, d_buffers=3, seg_local=True))
    if local:  # the op's address would not fit: core_ports refuses it without seg_local
        plain = discard(DeltaCore(cfg, fifo=fifo, out_ways=out_ways, d_buffers=3))
        with pytest.raises(ValueError, match="difference sums"):
            core_ports(plain, case.grid, case.groups, case.W.shape[1], fused, True, fw, s)
    ports = core_ports(core, case.grid, case.groups, case.W.shape[1], fused, *job[4])
    assert ports["o_local"] == int(local) == int(ci != "random3")
    [got] = run_dcore(cfg, [job], fifo=fifo, out_ways=out_ways, d_buffers=3, seg_local=True)
    check(cfg, job, queue, got, fifo, ways=cfg.drain_rows_per_cycle, out_ways=out_ways, buffers=3, local=local)


#: The state buffer per pool (docs/decisions.md D133): ``(case, shape, chunk-major, V, FIFO entries)`` on the
#: segment-local D buffers (D125, three of them) of an 8 KiB difference-sum buffer and a 2 KiB partial-sum SRAM, whose
#: state buffer (2 x 8192 / 224 = 73 words) holds neither op at its address (wide3: 3 classes x 3 frames x 12
#: positions x 5 column blocks = 540 words; fpools: 4 frames x 12 x 5 = 240): wide3 (classes h, w, f on two pools of a
#: 3 x 4 image, 4 positions of the second pool reading the first's h words, s = 1: 23 words) on one lane and two;
#: fpools (one f class, 2 pools, 2 chunks of 2 frames, N = 37: 3 groups of s = 2 column blocks reusing the pool slots,
#: 16 words), D84's order, on one lane and two.
POOL_RUNS = [("wide3", "8x8-B2-d2", False, 1, 2 * FIFO), ("wide3", "8x8-B2-d2", False, 2, 2 * FIFO),
             ("fpools", "8x8-B2-d2", True, 1, FIFO), ("fpools", "8x8-B2-d2", True, 2, FIFO)]


def _pool_case(ci: str) -> tuple:
    """A `POOL_RUNS` op by name: ``(case, fw, s)``."""
    if ci == "wide3":
        return WIDE[3][0]
    return _case(10, (4, 3, 4), 6, 37, [3, 3], False, "f", 2, 2)


def _pool_cfg(shape, psum_kib=2, diff_kib=8):
    from hw.config import AcceleratorConfig

    return AcceleratorConfig.model_validate(delta_cfg(*SHAPES[shape], state_kib=2).model_dump()
                                            | {"diff_sram_kib": diff_kib, "psum_sram_kib": psum_kib})


@pytest.mark.parametrize(("ci", "shape", "chunk_major", "out_ways", "fifo"), POOL_RUNS,
                         ids=[f"{s}-{c}{'-cm' if cm else ''}-v{v}" for c, s, cm, v, _f in POOL_RUNS])
def test_dcore_state_buffer_per_pool(ci, shape, chunk_major, out_ways, fifo):
    # the op's carried values do not fit the state buffer at the op's address (core_ports refuses the plain core);
    # with pool_state every Y row equals apply_decisions, its cycle and done core_schedule's (the layout does not
    # change the timing), every command the bench program's with the carried store's addresses pool_store's
    case, fw, s = _pool_case(ci)
    cfg = _pool_cfg(shape)
    job, queue = _job(cfg, case, fw, s, chunk_major, False)
    assert job[4][0]  # walked segment by segment: segment-local D buffers
    opts = {"fifo": fifo, "out_ways": out_ways, "d_buffers": 3, "seg_local": True}
    plain = discard(DeltaCore(cfg, **opts))
    with pytest.raises(ValueError, match="state buffer: the op needs"):
        core_ports(plain, case.grid, case.groups, case.W.shape[1], False, *job[4])
    [got] = run_dcore(cfg, [job], pool_state=True, **opts)
    check(cfg, job, queue, got, fifo, ways=cfg.drain_rows_per_cycle, out_ways=out_ways, buffers=3, local=True,
          pool=True)


def pool_replay(R, grid, axes, n_cb, fw, s, V, store_at) -> int:  # noqa: N803
    """Replays the output walk (`sim.timing.delta_core.segment_steps`' order, V lanes a step) on a carried store
    addressed by ``store_at(axis, token, cb)``, every token taken as reading its neighbour where it has one (none
    direct: the most reads): each read must find its neighbour's value of that column block and class (the last
    write to the word), a step's reads before its writes (the combine reads at issue, writes a cycle later); an ``f``
    or ``h`` value is written by every token, a ``w`` value only at the pool's last position (``c_keep``; the pool's
    other w neighbours ride the lane register and the lanes' chain), read by the pool's first position where x > 0.
    A step's reads, and its writes, go to distinct words and distinct position banks (``f``: pool slot mod V, ``w``:
    0, ``h``: x mod V, `hw.delta_core.DeltaCore._lane_regions`). Returns the
    store reads checked; raises AssertionError on the first value overwritten before its read."""
    F, H, W = grid  # noqa: N806
    hw, store, reads = H * W, {}, 0
    for seg in segment_steps(grid, n_cb, len(axes), R, fw, s, V):
        for step in seg:
            rd, wr = [], []
            for t, cb, a in step:
                ax = axes[a]
                f, p = divmod(t, hw)
                y, x = divmod(p, W)
                nb = {"f": t - hw if f else None, "h": t - W if y else None, "w": t - 1 if x else None}[ax]
                bank = {"f": p % R % V, "w": 0, "h": x % V}[ax]  # the writer's and its successor's (D112's banks)
                if nb is not None and (ax != "w" or p % R == 0):
                    rd.append((store_at(ax, nb, cb), bank, (nb, cb, a)))
                if ax != "w" or p % R == R - 1:
                    wr.append((store_at(ax, t, cb), bank, (t, cb, a)))
            for batch in (rd, wr):
                assert len({w for w, _b, _v in batch}) == len({b for _w, b, _v in batch}) == len(batch), step
            for word, _bank, want in rd:
                assert store.get(word) == want, (word, want, store.get(word))
            store.update((w, v) for w, _b, v in wr)
            reads += len(rd)
    return reads


def test_state_per_pool_sizes_and_refusals_by_hand():
    # pool_state_words (D133): wide3's grid 3 x 3 x 4, classes h, w, f, s = 1 on R = 8: (8 + 3 + 3 x 4) x 1 = 23
    # words; on 2 lanes each bank 8 / 2 + 3 + 3 x 4 / 2 = 13, so 26; one f class: R s (fpools: 8 x 2 = 16)
    cfg = _pool_cfg("8x8-B2-d2")
    assert pool_state_words(cfg, (3, 3, 4), ["h", "w", "f"], 1) == 23
    assert pool_state_words(cfg, (3, 3, 4), ["h", "w", "f"], 1, 2) == 26
    assert pool_state_words(cfg, (4, 3, 4), ["f"], 2) == pool_state_words(cfg, (4, 3, 4), ["f"], 2, 2) == 16
    assert pool_state_words(cfg, (4, 3, 4), ["w", "f"], 2) == (8 + 4) * 2
    # the state buffer: 2 KiB x 8192 / (8 x 28 bits) = 73 words (36 a bank on 2 lanes: 72); fpools' N = 37 with
    # s = 5 column blocks a group needs 8 x 5 = 40 words (fits), a 12 x 4 image with an h class on 2 lanes and s = 1
    # (8 / 2 + 3 + 3 x 4 / 2) x 2 = 26 (fits) but o_w = 3 is no multiple of V = 2: refused
    # (segment-local D buffers, D125, issued segment by segment, 2 frames a chunk)
    opts = {"d_buffers": 3, "seg_local": True}
    core = discard(DeltaCore(cfg, pool_state=True, out_ways=2, **opts))
    assert delta_combine_sizes(cfg, 2, 2, 3)["lane_words"] == 36
    core_ports(core, (4, 3, 4), [(0, 3, "f")], 37, seg=True, fw=2, s=5)
    with pytest.raises(ValueError, match="state buffer: the op needs 80 words.*holds 72"):  # s = 10: 8 x 10 = 80
        core_ports(core, (4, 3, 4), [(0, 3, "f")], 80, seg=True, fw=2, s=10)
    with pytest.raises(ValueError, match="pool_state with out_ways = 2: an h class needs o_w = 3"):
        core_ports(core, (3, 4, 3), [(0, 3, "h")], 8, seg=True, fw=2, s=1)
    core_ports(discard(DeltaCore(cfg, pool_state=True, **opts)), (3, 4, 3), [(0, 3, "h")], 8, seg=True, fw=2,
               s=1)  # one lane: built


#: Walk orders the per-pool store is replayed on: ``(R, grid, axes, n_cb, fw, s, V)``: at 480p (Wan2.1-1.3B's 21 x 30
#: x 52 latent on R = 128: 12 full pools and one of 24, chunks of 5 frames and a last of 1, three column blocks in
#: groups of 2 and 1) one f class on one lane and four; on R = 8, h, w and f classes where a row is wider than a pool
#: (W = 10: an h neighbour two pools back), partial pools and chunks, on one lane and two.
REPLAYS = [(128, (21, 30, 52), ("f",), 3, 5, 2, 1), (128, (21, 30, 52), ("f",), 3, 5, 2, 4),
           (8, (3, 3, 10), ("h", "w", "f"), 3, 2, 2, 1), (8, (3, 3, 10), ("h", "w", "f"), 3, 2, 2, 2),
           (8, (5, 2, 6), ("w", "f"), 5, 3, 2, 2), (8, (4, 3, 4), ("f",), 5, 2, 2, 1), (8, (2, 5, 3), ("h",), 1, 1, 1, 1)]


@pytest.mark.parametrize("rp", REPLAYS, ids=[f"R{r[0]}-{'x'.join(map(str, r[1]))}-{''.join(r[2])}-v{r[6]}"
                                             for r in REPLAYS])
def test_state_per_pool_never_overwritten_before_read(rp):
    # D133's argument replayed: on the walk's order (segment_steps: per group, pool, chunk, column block, frame,
    # position run, class) the per-pool layout (pool_store, by hand) gives every read its neighbour's value; the
    # same replay without the column block in the word (all blocks of a group on one word) fails
    R, grid, axes, n_cb, fw, s, V = rp  # noqa: N806
    cfg = SimpleNamespace(array_rows=R)
    F, H, W = grid  # noqa: N806
    reads = pool_replay(R, grid, axes, n_cb, fw, s, V, lambda ax, t, cb: pool_store(cfg, grid, ax, t, cb, s))
    # the reads by hand: f: tokens past frame 0; h: past row 0; w: a pool's first position with x > 0
    want = {"f": (F - 1) * H * W, "h": F * (H - 1) * W,
            "w": F * sum(1 for p in range(0, H * W, R) if p % W)}
    assert reads == n_cb * sum(want[ax] for ax in axes)
    if s > 1:
        with pytest.raises(AssertionError):
            pool_replay(R, grid, axes, n_cb, fw, s, V, lambda ax, t, cb: pool_store(cfg, grid, ax, t, 0, s))


#: The issue hold's runs (docs/decisions.md D126), each built to hold (its descriptors run ``bound`` or more segments
#: past the walk without the gate): ``(case, shape, chunk-major, core options, FIFO entries or None, bound,
#: diff_sram_kib or None)``; D68's order walked segment by segment (wide3: s = 1) and D84's, the queues and the host's
#: list, one way and the defaults' core, with and without the array hold (4 entries), bound 1 (only the walked
#: segment's descriptors issue: the held descriptor stands for the later one) and 2, and D125's segment-local buffers
#: on their default bound n = 3 and on 1.
ISSUE_RUNS = [("wide3", "8x8-B2-d2", False, {"ways": 1}, None, 2, None),
              ("wide3", "8x8-B2-d2", False, {"queues": False, **DEFAULT_CORE}, 4, 2, None),
              ("wide3", "8x8-B2-d2", False, {"ways": 1}, 4, 1, None),
              (3, "8x8-B2-d4", True, {}, 4, 1, None),
              (1, "8x8-B4-d2", True, {"queues": False, "ways": 1}, 4, 1, None),
              ("wide3", "8x8-B2-d2", False, {"out_ways": 1, "d_buffers": 3, "seg_local": True}, None, None, 8),
              ("three-axes", "8x8-B2-d4", True, {"out_ways": 4, "d_buffers": 3, "seg_local": True, "fused": True},
               4, 1, 2)]


@pytest.mark.parametrize(("ci", "shape", "chunk_major", "opts", "fifo", "bound", "kib"), ISSUE_RUNS,
                         ids=[f"{s}-{c}{'-cm' if cm else ''}-{'-'.join(f'{k}{v}' for k, v in o.items())}-q{f}-b{b}"
                              for c, s, cm, o, f, b, _k in ISSUE_RUNS])
def test_dcore_issue_hold(ci, shape, chunk_major, opts, fifo, bound, kib):
    # kaleido_daccel takes its next descriptor only while its segment is fewer than the bound past the walk:
    # every Y row against apply_decisions, its cycle, the controller's rows and done (and the array hold's held
    # cycles) against core_schedule co-simulating the controller's schedule (gate=IssueFeed), every command against
    # the bench program; no overflow, no descriptor counted the bound or more ahead, and the gate held takes
    case, fw, s, chunk_major = _named_case(ci, chunk_major)
    cfg = _diff_cfg(shape, kib) if kib else delta_cfg(*SHAPES[shape], state_kib=2)
    d, opts = cfg.drain_rows_per_cycle, dict(opts)
    queues, fused = opts.pop("queues", True), opts.pop("fused", False)
    job, queue = _job(cfg, case, fw, s, chunk_major, fused, queues)
    seg, local = job[4][0], job[4][0] and opts.get("seg_local", False)
    n = bound or opts.get("d_buffers", 2)  # the core's default bound with seg_local: n D buffers
    ways, V, nbuf = opts.get("ways", d), opts.get("out_ways", 1), opts.get("d_buffers", 2)
    assert seg  # walked segment by segment
    core = discard(DeltaCore(cfg, fifo=fifo or 2 * FIFO, queues=queues, issue_hold=True,
                             **({"issue_bound": bound} if bound else {}), **opts))
    assert core.issue_bound == n and core.accel.issue_gate
    [got] = run_dcore(cfg, [job], fifo=fifo or 2 * FIFO, queues=queues, array_hold=fifo is not None,
                      issue_hold=True, **({"issue_bound": bound} if bound else {}), **opts)
    sch = check(cfg, job, queue, got, fifo or 2 * FIFO, ways=ways, out_ways=V, buffers=nbuf, hold=fifo is not None,
                local=local, bound=n, slot_cap=bound or 8)
    assert sch["held"] > 0 and sch["ahead"] < n and not got.overflow
    if fifo is not None:
        assert got.held == sch["frozen"] > 0
    # built to hold: without the gate its descriptors run the bound or more ahead
    rows, done, (cyc, rsg, descs, *way) = _model(cfg, case, job[1], queue, job[4][1], job[4][2], ways, local)
    A, n_cb = len(classes(case.groups)), -(-case.W.shape[1] // cfg.array_cols)  # noqa: N806
    free = core_schedule(cyc, done, case.grid, n_cb, A, cfg.array_rows, seg, rsg, descs, job[4][1], job[4][2],
                         ways, way[0] if way else None, V, nbuf, banks=16)
    assert free["ahead"] >= n


def test_three_d_buffers_refusals():
    cfg = delta_cfg(*SHAPES["8x8-B2-d2"])
    for kw in ({"d_buffers": 1}, {"d_buffers": 3, "ways": 1}, {"d_buffers": 9}):
        with pytest.raises(ValueError, match="d_buffers"):
            DeltaCore(cfg, **kw)
    with pytest.raises(ValueError, match="fifo_bypass"):  # D118
        DeltaCore(cfg, ways=1, fifo_bypass=True)


def test_wide_cases_hold_rows_for_their_buffer():
    """The WIDE runs reach the pop's gate (a row of the walked block's parity waits) at least once, so the RTL tests
    above check it; computed by `core_schedule` from the controller's model."""
    gated = 0
    for (c, fw, s), shape in WIDE:
        cfg = delta_cfg(*SHAPES[shape], state_kib=2)
        job, queue = _job(cfg, c, fw, s, False, False)
        _rows, done, (cyc, rsg, descs) = _model(cfg, c, job[1], queue, *job[4][1:])
        n_cb = -(-c.W.shape[1] // cfg.array_cols)
        gated += core_schedule(cyc, done, c.grid, n_cb, len(classes(c.groups)), cfg.array_rows, True, rsg,
                               descs, *job[4][1:])["gated"]
    assert gated > 0


def random_ops() -> list:
    """Six seeded random ops (tests/test_rtl_dqueue.py's: random grids, 1-3 groups of 1-6 channels on f, w or h,
    N 3-17, int8/uint8, scattered or coherent, chunk frames, s 1-3, both issue orders), ``(case, fw, s,
    chunk_major)``: run back to back on one core by tests/test_rtl_core_engine.py (the seen bits the walk clears and
    the flipped D buffer carry over from op to op)."""
    rng = np.random.default_rng(95)
    return [_random(rng, k) for k in range(6)]


def test_core_schedule_by_hand():
    # rows leaving at 5, 5, 6 (two ports), done at 9: written at 6, 6, 7; popped at 7, 8, 9 (one a cycle, each
    # from the cycle after its write); accumulate commands at 9, 10, 11; the FIFO holds 2 after cycle 6's writes
    # and 3 after cycle 7's (3 written, none popped before 7: the pop at 7 reads as the third is written). The
    # walk starts at
    # max(9, 9 + 3) = 12. Grid 1 x 1 x 3, one column block, 2 classes, R = 2: pool 0 (positions 0, 1), then pool
    # 1 (position 2), two segments (D104) back to back (the op is all accumulated): commands at 14 .. 19, each
    # token's row 2 cycles after its second class: 17, 19, 21; done at 12 + 6 + 4 = 22.
    assert commands((1, 1, 3), 1, 2, 2) == [(0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1), (2, 0, 0), (2, 0, 1)]
    sch = core_schedule([6, 5, 5], 9, (1, 1, 3), 1, 2, 2)
    assert sch["acc"].tolist() == [9, 10, 11] and sch["start"] == 12 and sch["fifo_max"] == 3
    assert sch["rows"] == {(0, 0): 17, (1, 0): 19, (2, 0): 21} and sch["done"] == 22
    # two accumulate ways (D107), the rows' ways 0, 1, 1 as given (leaving at 6, 5, 5), 1, 1, 0 in the FIFO's
    # order: at 7 the two written rows share way 1 (one pops), at 8 the second and the third (ways 1, 0) pop
    # together; accumulate commands at 9, 10, 10, the pipeline empty at 11: the walk starts there (a cycle earlier),
    # rows at 16, 18, 20, done at 11 + 6 + 4 = 21
    sch = core_schedule([6, 5, 5], 9, (1, 1, 3), 1, 2, 2, ways=2, row_way=[0, 1, 1])
    assert sch["acc"].tolist() == [9, 10, 10] and sch["start"] == 11 and sch["fifo_max"] == 3
    assert sch["rows"] == {(0, 0): 16, (1, 0): 18, (2, 0): 20} and sch["done"] == 21
    # ways 1, 0, 1 in the FIFO's order: the first two pop at 7, the third at 8 (written at 7): the same end
    sch = core_schedule([6, 5, 5], 9, (1, 1, 3), 1, 2, 2, ways=2, row_way=[1, 1, 0])
    assert sch["acc"].tolist() == [9, 9, 10] and sch["done"] == 21
    with pytest.raises(ValueError, match="needs row_way"):
        core_schedule([6], 9, (1, 1, 3), 1, 2, 2, ways=2)
    # no rows (every token REUSEs): the walk starts at done
    assert core_schedule([], 4, (1, 1, 1), 1, 1, 8)["done"] == 4 + 1 + 4


def test_segment_slot_by_hand():
    # D125: u = (a fw + f mod fw) R + t mod R. grid (2, 3, 4): H W = 12, R = 8, fw = 1, class 2, token 13 (frame 1,
    # position 1): (2 + 0) 8 + 5 = 21; fw = 2, class 1, token 13: (2 + 1) 8 + 5 = 29; token 20 (frame 1, position 8,
    # pool 1): (2 + 1) 8 + 4 = 28
    assert int(segment_slot(13, 2, (2, 3, 4), 8, 1)) == 21
    assert segment_slot([13, 20], [1, 1], (2, 3, 4), 8, 2).tolist() == [29, 28]
    # every segment's (token, class) in distinct slots below A fw R, on grids with pools shorter than R, frames
    # of fewer positions than R, several chunks
    for grid, R, fw, A in (((3, 3, 4), 8, 2, 3), ((4, 2, 2), 8, 3, 2), ((2, 5, 7), 16, 1, 1), ((5, 2, 8), 4, 2, 2)):  # noqa: N806
        for sg in segments(grid, 1, A, R, fw):
            u = segment_slot([t for t, _b, _a in sg], [a for _t, _b, a in sg], grid, R, fw)
            assert len(set(u.tolist())) == len(sg) and u.max() < A * fw * R and u.min() >= 0


def test_core_schedule_local_by_hand():
    # D125: grid (1, 1, 3) with R = 1: three segments of one command each (tokens 0, 1, 2), one class, one column
    # block, 2 D buffers; rows leave at 4, 5, 6 (written by 6, 7, 8), of segments 0, 2, 1 in the FIFO's order.
    # Segment-local: the row of segment 2 waits at the head until segment 0 is walked (2 >= 0 + 2), and the row of
    # segment 1 behind it. Segment 0's row pops at 6, accumulates at 8; its descriptor was counted at 3 and segment
    # 1's at 4, so it is whole at 9 with no row of its buffer in the stages: walked at 9 (Y at 9 + 4 = 13), its last
    # command at 10; sg = 1 from 11, so segment 2's row pops at 11 (acc 13), segment 1's at 12 (acc 14); held at the
    # head k = 7..10 (4 cycles). Segment 1 whole at 15 (Y 19), segment 2 at 17 (Y 21), done 17 + 1 + 4 = 22.
    descs = [(2, 0, 1), (3, 1, 1), (3, 2, 1)]
    sch = core_schedule([4, 5, 6], 12, (1, 1, 3), 1, 1, 1, True, [0, 2, 1], descs, buffers=2, local=True)
    assert sch["acc"].tolist() == [8, 13, 14] and sch["start"] == 9 and sch["gated"] == 4
    assert sch["rows"] == {(0, 0): 13, (1, 0): 19, (2, 0): 21} and sch["done"] == 22
    # the op's address (D122): segment 2's row accumulates at once (another address of buffer 0), and segment 0
    # waits while it is in the stages
    old = core_schedule([4, 5, 6], 12, (1, 1, 3), 1, 1, 1, True, [0, 2, 1], descs, buffers=2)
    assert old["acc"].tolist() == [8, 9, 10] and old["gated"] == 0
    # a row of segment 0 after one of segment 2 would deadlock the RTL: refused
    assert fifo_order_deadlocks([1, 2, 0], 2) and not fifo_order_deadlocks([0, 2, 1], 2)
    assert not fifo_order_deadlocks([1, 2, 0], 3) and not fifo_order_deadlocks([], 2)
    with pytest.raises(ValueError, match="deadlock"):
        core_schedule([4, 5, 10], 12, (1, 1, 3), 1, 1, 1, True, [1, 2, 0], descs, buffers=2, local=True)
    with pytest.raises(ValueError, match="segment order"):
        core_schedule([4, 5, 6], 12, (1, 1, 3), 1, 1, 1, False, local=True)


def test_fifo_overflow_flagged_and_errors():
    # a 2-entry FIFO under case 0's 39-row backlog: the sticky overflow flag rises (no back-pressure on
    # kaleido_daccel's drain ports, D95)
    case, fw, s = CASES[0]
    cfg = delta_cfg(*SHAPES["8x8-B2-d2"])
    job, _queue = _job(cfg, case, fw, s, False, False)
    [got] = run_dcore(cfg, [job], fifo=2, ways=1)
    assert got.overflow
    with pytest.raises(ValueError, match="multiple of d"):
        DeltaCore(cfg, fifo=3)
    # 64 KiB of partial-sum SRAM: 780 words of 8 x 28 bits per buffer; 1 class x 4 x 8 x 8 tokens x 13 column
    # blocks (N = 100) = 3,328 difference-sum words do not fit one buffer
    core = discard(DeltaCore(cfg))
    with pytest.raises(ValueError, match="difference sums: the op needs 3328 words.*holds 780"):
        core_ports(core, (4, 8, 8), [(0, 4, "f")], 100)
    with pytest.raises(ValueError, match="state SRAM: the op needs"):
        core_ports(core, (1, 1, 2), [(0, 4, "f")], 8, fused=True)  # no state SRAM on this config


def test_issue_gate_model_without_holds_is_the_controllers_schedule():
    # core_schedule(gate=...) with a bound no op reaches takes every band-tile at AccelRun's earliest: the same rows,
    # descriptors and done as the plain path fed by the gated controller's whole schedule (accel_schedule's rule with
    # the gate's freshness: host list from cycle 1, a queue's descriptor the cycle it is shown, D137), on the six
    # seeded random ops and the WIDE ops, queues and host list, one way and d ways
    from sim.timing.compact import drain_reads

    ops = [(c, fw, s, cm, "8x8-B2-d2") for c, fw, s, cm in random_ops()] + [(*w[0], False, w[1]) for w in WIDE]
    for k, (case, fw, s, cm, shape) in enumerate(ops):
        cfg = delta_cfg(*SHAPES[shape], state_kib=2)
        queues, ways = k % 2 == 0, cfg.drain_rows_per_cycle if k % 3 else 1
        job, queue = _job(cfg, case, fw, s, cm, False, queues)
        _c, op, _f, _p, (seg, fw_, s_) = job
        n_cb, A = -(-case.W.shape[1] // cfg.array_cols), len(classes(case.groups))  # noqa: N806
        feed = gate_feed(cfg, case, op, queue, fw_, s_, ways)
        got = core_schedule(None, None, case.grid, n_cb, A, cfg.array_rows, seg, None, None, fw_, s_, ways, None,
                            banks=16, gate=feed, bound=10 ** 6)
        # the gated controller's whole schedule, taken at each earliest
        widths = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles], dtype=np.int64)
        rounds = gather_rounds([t.tokens for t in op.tiles], cfg.array_rows // cfg.compact_bands)
        run = AccelRun(op.s_seq, op.rows, widths, rounds, cfg, 2 * cfg.compact_bands, 32, queue, gate=True)
        for _t in range(run.T):
            run.take(run.earliest())
        plain = accel_schedule(op.s_seq, op.rows, widths, rounds, cfg, 2 * cfg.compact_bands, 32, queue)[3]
        if queue is None:  # from the host's list the read-ahead: the first take a cycle later
            assert (run.gather >= plain).all() and (run.gather[:1] > plain[:1]).all()
        else:  # the queues: the gate reads the word they load at the load (D137), so it costs no cycle
            assert np.array_equal(run.gather, plain)
        done = int(drain_reads(run.band, run.last, op.rows, cfg).max()) + cfg.array_cols + 3
        if queue is not None:
            from sim.timing.delta_accel import queue_done

            done = max(done, queue_done(run.gather, queue) + 2)
        sgs = tile_segments([(t.cb, t.tokens[0]) for t in op.tiles], case.grid, cfg.array_rows, n_cb, fw_, s_)
        descs = [(int(run.gather[n]) + 2, sgs[n], int(op.rows[n])) for n in range(len(sgs))]
        of_class = {g: a for a, (_ax, idx) in enumerate(classes(case.groups)) for g in idx}
        rw = row_ways([t.tokens for t in op.tiles], [of_class[t.group] for t in op.tiles], case.X.shape[0], ways)
        cyc, rsg, way = fifo_rows(run.band, run.last, op.rows, sgs, cfg, rw)
        want = core_schedule(cyc, done, case.grid, n_cb, A, cfg.array_rows, seg, rsg, descs, fw_, s_, ways, way,
                             banks=16)
        assert got["accel_done"] == done and got["issue"].tolist() == [x[0] for x in descs]
        assert sorted(got["out"].tolist()) == sorted(cyc.tolist())
        assert got["rows"] == want["rows"] and got["done"] == want["done"] and got["held"] == 0


def test_issue_hold_refusals_and_ports():
    # the issue hold (D126): refused with the similarity front and a bound outside 1 .. NB_BANKS; its controller has
    # next_valid / next_desc out and issue_ok in, the plain controller none of them; the bound n with seg_local
    from hw.delta_core import NB_BANKS, accel_module_name

    cfg = delta_cfg(*SHAPES["8x8-B2-d2"], state_kib=2)
    for kw in ({"front": True}, {"issue_bound": 0}, {"issue_bound": NB_BANKS + 1}):
        with pytest.raises(ValueError, match="issue_hold"):
            DeltaCore(cfg, issue_hold=True, **kw)
    core = discard(DeltaCore(cfg, issue_hold=True))
    assert core.issue_bound == NB_BANKS and accel_module_name(core.accel) == "kaleido_daccel_gate"
    assert {"next_valid", "next_desc", "issue_ok"} <= set(core.accel.signature.members)
    plain = discard(DeltaCore(cfg))
    assert plain.issue_bound is None and accel_module_name(plain.accel) == "kaleido_daccel"
    assert not {"next_valid", "next_desc", "issue_ok"} & set(plain.accel.signature.members)
    assert discard(DeltaCore(cfg, issue_hold=True, seg_local=True, d_buffers=3)).issue_bound == 3


def test_issue_gate_model_holds_within_the_bound():
    # core_schedule(gate=...) on the six seeded random ops and the WIDE ops, queues or host list, bounds 1-3, with
    # and without the array hold on 2 entries a port, one way and d ways (d ways with segment-local buffers where the
    # op is walked segment by segment): it finishes, no descriptor is counted the bound or more past the walk, no
    # overflow, the FIFO within its entries; bound 1 takes only the walked segment's descriptors
    ops = [(c, fw, s, cm, "8x8-B2-d2") for c, fw, s, cm in random_ops()] + [(*w[0], False, w[1]) for w in WIDE]
    held = 0
    for k, (case, fw, s, cm, shape) in enumerate(ops):
        cfg = delta_cfg(*SHAPES[shape], state_kib=2)
        d = cfg.drain_rows_per_cycle
        for bound in (1, 2, 3):
            for fifo in (None, 2 * d):
                queues, ways = (k + bound) % 2 == 0, d if (k + bound) % 3 else 1
                job, queue = _job(cfg, case, fw, s, cm, False, queues)
                _c, op, _f, _p, (seg, fw_, s_) = job
                local = seg and ways > 1 and cfg.array_rows & (cfg.array_rows - 1) == 0
                n_cb, A = -(-case.W.shape[1] // cfg.array_cols), len(classes(case.groups))  # noqa: N806
                bp = {"fifo": fifo, "ports": d} if fifo else {}
                sch = core_schedule(None, None, case.grid, n_cb, A, cfg.array_rows, seg, None, None, fw_, s_, ways,
                                    None, buffers=3 if ways > 1 else 2, **bp, local=local,
                                    gate=gate_feed(cfg, case, op, queue, fw_, s_, ways, local), bound=bound)
                assert not sch["overflow"] and (sch["ahead"] < bound or not seg)
                assert sch["fifo_max"] <= (fifo or 10 ** 9)
                held += sch["held"]
    assert held > 0
