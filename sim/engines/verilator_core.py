"""Ops through the compiled op-level controllers with their combine stage (docs/decisions.md D102): ``kaleido_dcore``
(delta, `hw.delta_core`) and ``kaleido_ccore`` (compact, `hw.compact_core`) on `sim.engines.verilator_stream`'s
engine, so that the host's side is a per-cycle record stream and Python runs no cycle.

An op's records are what the Amaranth benches do (tests/rtl/dcore_bench.py, caccel_bench.py): one host write a
cycle (``wr_valid``, ``wr_sel``, ``wr_addr``, ``wr_data``: the differences or X bytes, the weights and the decision
codes, `hw.delta_accel_host` / `hw.compact_accel_host`; ``kaleido_dcore``'s with each token's chunk above them,
docs/decisions.md D104), then the ``start`` cycle with the queues' and the core's op ports (`queue_ports`,
`core_ports`, ``kaleido_dcore``'s with its walk's segments), then those ports held until ``done`` (the segment's
wait, bounded by `bound`). Back come the ``Y`` rows (``y_valid``, ``y_token``, ``y_cb``, ``y_data``; ``kaleido_dcore``
on V = `hw.delta_combine.default_out_ways` output lanes, D112, D113: V valid bits and V words, lane l token
``y_token + l``) and the ``done``
cycle, both counted from the ``start`` cycle (cycle 0), as the benches count them. Ops run back to back on one core
without a reset between them, as the benches' multi-op tests do.

Capacity: the controllers hold one op of at most ``accel_max_tokens`` tokens (256), ``accel_max_k`` channels (64),
``partial_regs`` groups and `hw.delta_accel.MAX_TILES` band-tiles; ``kaleido_dcore`` holds the op's difference sums
and carried values in one buffer each (`hw.delta_core.core_ports`), ``kaleido_ccore`` one pool of positions (H W
<= R), `hw.compact_core.MAX_CB` column blocks and its staging macros' rows. `slices` cuts a bigger op on the host:
channels by whole groups (each slice's Y is ``X_eff[:, slice] @ W[slice]``, the host adds them), then output column
blocks (every slice keeps all tokens) for ``kaleido_dcore``; ``kaleido_ccore`` also needs its tokens cut into
sub-grids of whole image rows (``F x H' x W`` with ``H' W <= R``), which keeps every ``f`` and ``w`` neighbour
inside the slice, and ``h`` neighbours only when ``H' = H`` (an op with an ``h`` group and ``H W > R`` is refused).
On ``kaleido_dcore_stage`` a group wider than ``accel_max_k`` is first cut at the weight stage's slices (D88,
`CoreEngine.staged_form`; each slice's Y is its channels' part of the group's, at the group's decisions), where the
stage slices the op (docs/decisions.md D121).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hw.config import AcceleratorConfig
from sim.engines.verilator_build import BUILD_ROOT, RtlEngineError
from sim.engines.verilator_stream import StreamEngine, encode
from sim.engines.verilator_stream import field as port_field

#: The core each organisation runs.
CORE_MODULE = {"delta": "dcore", "compact": "ccore"}
#: ``kaleido_dcore``'s row FIFO built into the engine, entries (`hw.delta_core.DeltaCore`'s ``fifo``; `hw.rtl`
#: emits `hw.delta_core.FIFO_PER_PORT` d = 16 on tiny-8x8, tests/test_rtl_dcore.py uses 64): chosen for the captured
#: trace, whose one-column-block slices of qkv back up 106 rows (`sim.timing.delta_core.core_schedule`'s
#: ``fifo_max``), two column blocks 205 (D102). Without the array hold (``CoreEngine(array_hold=False)``) the FIFO
#: has no back-pressure (D95), so `slices` keeps a slice's ``fifo_max`` within it and `CoreRun` reports ``overflow``;
#: with it (the default since D123) the engine builds `hw.rtl`'s FIFO, `hw.delta_core.FIFO_PER_PORT` d entries.
DCORE_FIFO = 256
#: `bound`'s cycles per (token, column block, group) and its constant: chosen, about 10x what the cores need on the
#: tests' ops and the captured trace's slices (docs/decisions.md D102).
BOUND_PER_ITEM, BOUND_BASE = 20, 20_000


@dataclass
class CoreOp:
    """One op as a core runs it: X int8 or uint8 ``[M, K]``, W int8 ``[K, N]``, ``grid`` ``(F, H,
    W)`` with ``F H W = M``, ``groups`` ``[(k0, k1, axis)]`` covering ``0 .. K``, ``decisions`` int8 ``[M, G]``
    (`algo.reuse.golden` codes), ``x_unsigned`` (uint8 X), ``fused`` (``kaleido_dcore``: carried values in the state
    SRAM, D79), ``p_op`` (the P op of a fused attention pair, `sim.timing.attention.fused_pairs`: its chunk is capped
    by the score buffer, not the input SRAM, `sim.timing.delta.plan`, D131)."""

    X: np.ndarray
    W: np.ndarray
    grid: tuple
    groups: list
    decisions: np.ndarray
    x_unsigned: bool = False
    fused: bool = False
    #: ``(Fw, s, chunk_major)`` to run instead of the model's plan (`CoreEngine.plan`; compact: ``s`` 1, no order)
    plan: tuple | None = None
    p_op: bool = False


@dataclass
class CoreRun:
    """What one op through a core gave: ``y`` int64 ``[M, N]`` (each (token, column block) row written once),
    ``rows`` ``{(token, cb): cycle}``, ``twice`` rows handed out more than once, ``done`` the ``done`` cycle (cycles
    counted from the ``start`` cycle, cycle 0), ``writes`` the host-write cycles before ``start``, ``overflow``
    (``kaleido_dcore``'s sticky FIFO flag; False for ``kaleido_ccore``)."""

    y: np.ndarray
    rows: dict = field(default_factory=dict)
    twice: list = field(default_factory=list)
    done: int = -1
    writes: int = 0
    overflow: bool = False


def bound(op: CoreOp) -> int:
    """The most cycles after ``start`` a run waits for ``done`` (`BOUND_PER_ITEM` per (token, column block, group)
    plus `BOUND_BASE`): a run past it is an error, not a hang."""
    M, N = op.X.shape[0], op.W.shape[1]  # noqa: N806
    return BOUND_PER_ITEM * M * -(-N // 8) * len(op.groups) + BOUND_BASE


def _unpack_rows(data: np.ndarray, n: int, bits: int) -> np.ndarray:
    """int64 ``[rows, n]``: each byte row of ``data`` (uint8 ``[rows, bytes]``, little-endian) as ``n`` signed
    ``bits``-bit lanes."""
    b = np.unpackbits(data, axis=1, bitorder="little")[:, :n * bits].reshape(len(data), n, bits).astype(np.int64)
    v = (b << np.arange(bits, dtype=np.int64)).sum(axis=2)
    return v - ((v >> (bits - 1)) << bits)


class CoreEngine:
    """The compiled core of a delta or compact config (`CORE_MODULE`), running `CoreOp` lists.

    Args:
        cfg: a delta or compact config. fifo: ``kaleido_dcore``'s row FIFO (default: `hw.delta_core.FIFO_PER_PORT` d
            with the array hold, as `hw.rtl` builds it; `DCORE_FIFO` without).
        waves, build_root, log: as `sim.engines.verilator_build.build`.
        stage: ``kaleido_dcore_stage`` (docs/decisions.md D119) instead of ``kaleido_dcore``: the delta core on the
            staged controller (a config with a weight stage and a difference-sum buffer); the host writes the
            staged controller's words (`hw.delta_accel_host.stage_op_words`) in D84's order, D88's slices where the
            stage cannot hold the op's K (`CoreEngine.staged_form`). Opt-in (default False).
        array_hold: the delta core's array hold (docs/decisions.md D116 item 1, D123; default True, as `hw.rtl`
            builds it): the controller runs a cycle only while the row FIFO has d free entries, `expected` times it
            (`core_schedule`'s ``fifo``, ``ports``) and `slices` no longer cuts an op for the FIFO's backlog.
        seg_local: the delta core's segment-local D addresses (docs/decisions.md D125; default: on the staged core
            where it is built, `hw.delta_core.default_seg_local`, as `hw.rtl` builds ``kaleido_dcore_stage`` since
            D132; off on ``kaleido_dcore``, which keeps the op's address): a D buffer holds one segment, so `slices`
            checks a segment's D words, not the op's.
        issue_hold: the delta core's issue hold (docs/decisions.md D126; default on, as `hw.rtl` builds both cores:
            on ``kaleido_dcore_stage`` since D129, `expected` then stepping `stage_schedule`'s loop; False: the
            ungated controller): the controller takes a descriptor only while its segment is fewer than the core's bound
            (`hw.delta_core.NB_BANKS`, with ``seg_local`` its D buffers) past the walked one; `expected` co-simulates
            the controller's schedule with the core's (`core_schedule`'s ``gate``), so no descriptor overflows the
            count banks and `slices` no longer cuts an op for them. issue_bound: its bound (default the core's).
        pool_state: the delta core's state buffer addressed per pool (docs/decisions.md D133; opt-in): `slices` then
            checks the op's carried values against the state buffer per pool (`hw.delta_combine.pool_state_words`).

    Raises:
        RtlEngineError: another organisation, ``stage`` on a config without a weight stage, or as
            `sim.engines.verilator_stream.StreamEngine`.
    """

    def __init__(self, cfg: AcceleratorConfig, fifo: int | None = None, waves: bool = False,
                 build_root: Path = BUILD_ROOT, log=None, stage: bool = False, array_hold: bool = True,
                 seg_local: bool | None = None, issue_hold: bool | None = None, issue_bound: int | None = None,
                 pool_state: bool = False):
        from hw import discard

        if cfg.organisation not in CORE_MODULE:
            raise RtlEngineError(f"the core engine runs the delta or compact organisation; {cfg.name} is "
                                 f"{cfg.organisation!r}")
        if stage and not (cfg.organisation == "delta" and cfg.wstage_sram_kib and cfg.diff_sram_kib):
            raise RtlEngineError(f"kaleido_dcore_stage needs a delta config with a weight stage and a difference-sum "
                                 f"buffer (wstage_sram_kib, diff_sram_kib); {cfg.name} has none")
        if stage and cfg.accel_tile_ring:  # D134: the ring takes the list while running; this driver writes it first
            raise RtlEngineError(f"{cfg.name}: accel_tile_ring = {cfg.accel_tile_ring}: the compiled engine writes an "
                                 "op's whole descriptor list before start, and a descriptor ring needs the host to "
                                 "stream it while running (docs/decisions.md D134; D130's build-plan step 5, not built "
                                 "in the engine): set accel_tile_ring = 0 for --engine rtl")
        self.cfg, self.module = cfg, "dcore_stage" if stage else CORE_MODULE[cfg.organisation]
        #: The delta core (``kaleido_dcore`` or ``kaleido_dcore_stage``), not ``kaleido_ccore``.
        self.delta = self.module != "ccore"
        opts = {}
        if self.delta:  # hw.rtl's kaleido_dcore: V output lanes (D112, D113), n D buffers (D115), bypass (D118)
            from hw.delta_combine import default_d_buffers, default_out_ways
            from hw.delta_core import FIFO_PER_PORT

            d = cfg.drain_rows_per_cycle
            opts["fifo"] = fifo or (FIFO_PER_PORT * d if array_hold else DCORE_FIFO)
            if array_hold:  # the array hold (D123)
                opts["array_hold"] = True

            if default_out_ways(cfg) > 1:
                opts["out_ways"] = default_out_ways(cfg)
            if default_d_buffers(cfg) != 2:
                opts["d_buffers"] = default_d_buffers(cfg)
            from hw.delta_core import default_fifo_bypass

            if default_fifo_bypass(cfg):  # the row FIFO's bypass (D118): the same cycles
                opts["fifo_bypass"] = True
            from hw.delta_core import default_seg_local

            # segment-local D addresses (D125): a D buffer holds one segment; by default on the staged core where
            # it is built (D132, as hw.rtl builds kaleido_dcore_stage), opt-in on kaleido_dcore
            if seg_local or (seg_local is None and stage and default_seg_local(cfg)):
                opts["seg_local"] = True
            if pool_state:  # the state buffer per pool (D133, opt-in): it holds a group's pool, not the op
                opts["pool_state"] = True
            if issue_hold is None or issue_hold:  # the issue hold (D126, on the staged core D129): gated controller
                opts["issue_hold"] = True
                if issue_bound is not None:  # a bound below the core's default (tests: holds on small ops)
                    opts["issue_bound"] = issue_bound
        self.engine = StreamEngine(cfg, self.module, waves, build_root, log, **opts)
        if self.delta:
            from hw.delta_core import DeltaCore

            self.core = discard(DeltaCore(cfg, pe="instance", stage=stage, **opts))
        else:
            from hw.compact_core import CompactCore

            self.core = discard(CompactCore(cfg, pe="instance"))

    # ---- records ---------------------------------------------------------------------------------------------

    def plan(self, op: CoreOp) -> tuple[int, int, bool]:
        """``(Fw, s, chunk_major)``: the model's frames per chunk, column blocks per group and delta issue order
        (`sim.timing.delta.plan`, D84's order with a difference-sum buffer; compact: `sim.timing.compact.chunk_frames`,
        s = 1)."""
        K, N = op.W.shape  # noqa: N806
        if op.plan is not None:
            return op.plan
        if self.delta:
            from sim.timing import delta as rules

            pool = min(self.cfg.array_rows, op.grid[1] * op.grid[2])  # as sim.engines.model passes them (D131)
            fw, s = rules.plan(self.cfg, op.grid[0], K, N, False, "op", op.groups, pool, op.p_op)
            return fw, s, bool(self.cfg.diff_sram_kib)
        from sim.timing.compact import chunk_frames

        return chunk_frames(self.cfg, op.grid[0], K, N, op.groups, False, "op"), 1, False

    def staged_form(self, op: CoreOp) -> tuple[CoreOp, bool]:
        """``(op, sliced)`` as ``kaleido_dcore_stage`` runs it: ``op`` itself where the stage holds its K (D85,
        `sim.timing.delta.stages`), else with D88's slices as its groups and each slice's decisions its group's
        (`sim.timing.delta.stage_slices`; Y is the same, tests/test_rtl_dcore_stage.py). Only for the staged core.

        Raises:
            ValueError: the stage cannot hold one slice a band."""
        from sim.timing import delta as rules

        if rules.stages(self.cfg, op.W.shape[0], op.groups):
            return op, False
        sl = rules.stage_slices(self.cfg, op.groups)
        if sl is None:
            raise ValueError(f"the weight stage of {self.cfg.name} cannot hold one channel a band")
        groups, cols, _width = sl
        return CoreOp(op.X, op.W, op.grid, groups, np.ascontiguousarray(op.decisions[:, cols]), op.x_unsigned,
                      op.fused, op.plan, op.p_op), True

    def records(self, op: CoreOp, bop=None) -> tuple[np.ndarray, int]:
        """uint8 ``[writes + 2, in bytes]``: the op's host writes, its ``start`` cycle and the held op ports (module
        docstring); and the number of writes.

        Raises:
            ValueError: the op exceeds the core (`hw.delta_core.core_ports` / `hw.compact_core.core_ports`)."""
        acc, core = self.core.accel, self.core
        N = op.W.shape[1]  # noqa: N806
        n_cb = -(-N // self.cfg.array_cols)
        fw, s, cm = self.plan(op)
        X, W = op.X, np.asarray(op.W, np.int64)  # noqa: N806
        if self.module == "dcore_stage":  # the host's band-tile list with its stage fields (D96, D119)
            from hw.delta_accel_host import SEL_DEC, dec_words, stage_op_words
            from hw.delta_core import chunk_words, core_ports, segment_order
            from sim.timing.delta_reference import differences

            bop = bop if bop is not None else tile_list(self, op)
            sop, sliced = self.staged_form(op)
            ports = core_ports(core, op.grid, sop.groups, N, op.fused, segment_order(cm, s, n_cb), fw, s)
            ports |= {"c_tiles": len(bop.tiles)}
            diffs = differences(X, op.grid, sop.groups, sop.decisions).astype(np.int64)
            words = stage_op_words(acc, diffs, W, sop.groups, host_tiles(bop), bop.segment, sliced)
            hi, chunks = 2 * self.cfg.partial_regs, chunk_words(core, op.grid, fw)
            words += [(SEL_DEC, a, w | int(chunks[a]) << hi) for a, w in dec_words(acc, sop.decisions)]
        elif self.module == "dcore":
            from hw.delta_accel_host import SEL_DEC, dec_words, op_words, queue_ports
            from hw.delta_core import chunk_words, core_ports, segment_order
            from sim.timing.delta_reference import differences

            ports = core_ports(core, op.grid, op.groups, N, op.fused, segment_order(cm, s, n_cb), fw, s)
            diffs = differences(X, op.grid, op.groups, op.decisions).astype(np.int64)
            words = op_words(acc, diffs, W, op.groups, [])
            ports |= queue_ports(acc, op.grid, op.groups, fw, n_cb, s, cm)
            # each token's chunk above its decision codes (the walk's segments, docs/decisions.md D104)
            hi, chunks = 2 * self.cfg.partial_regs, chunk_words(core, op.grid, fw)
            words += [(SEL_DEC, a, w | int(chunks[a]) << hi) for a, w in dec_words(acc, op.decisions)]
        else:
            from hw.compact_accel_host import SEL_DEC, dec_words, op_words, queue_ports
            from hw.compact_core import core_ports

            bop = bop if bop is not None else tile_list(self, op)
            ports = core_ports(core, op.grid, op.groups, N, rows_per_group(bop, op.groups))
            words = op_words(acc, X, W, op.groups, [])
            ports |= queue_ports(acc, op.grid, op.groups, fw, n_cb) | {"x_unsigned": int(op.x_unsigned)}
            words += [(SEL_DEC, a, w) for a, w in dec_words(acc, op.decisions)]
        nw = len(words)
        vals = {"wr_valid": [1] * nw + [0, 0], "wr_sel": [w[0] for w in words] + [0, 0],
                "wr_addr": [w[1] for w in words] + [0, 0], "wr_data": [int(w[2]) for w in words] + [0, 0],
                "start": [0] * nw + [1, 0]}
        vals |= {k: [0] * nw + [int(v), int(v)] for k, v in ports.items()}
        return encode(self.engine.ins, nw + 2, vals), nw

    # ---- runs ------------------------------------------------------------------------------------------------

    def run(self, ops: list[CoreOp], bops: list | None = None) -> list[CoreRun]:
        """Run ``ops`` back to back on one core (one run from reset; ``bops`` their `tile_list`, optional).

        Raises:
            ValueError: an op exceeds the core. RtlEngineError: an op did not finish within `bound`, or the core was
                not ready for a host write (``wr_ready`` low)."""
        bops = bops or [None] * len(ops)
        recs = [self.records(op, b) for op, b in zip(ops, bops, strict=True)]
        [outs] = self.engine.run_segments([[(r, bound(op)) for (r, _n), op in zip(recs, ops, strict=True)]],
                                          stop="done")
        C, ab, lay = self.cfg.array_cols, self.cfg.acc_bits, self.engine.outs  # noqa: N806
        res = []
        for op, (_r, nw), out in zip(ops, recs, outs, strict=True):
            M, N = op.X.shape[0], op.W.shape[1]  # noqa: N806
            ready = port_field(lay, out[:nw], "wr_ready")
            if not ready.all():  # the benches assert it before every write; here the run is over, so say where
                raise RtlEngineError(f"{self.module}: wr_ready low at host write {int(np.argmin(ready))} of an op")
            run = CoreRun(np.zeros((M, N), np.int64), done=len(out) - 1 - nw, writes=nw)
            if self.delta:
                run.overflow = bool(port_field(lay, out[-1:], "overflow")[0])
            # V output lanes (D112): y_valid V bits, y_data V words (lane 0 low), lane l is token y_token + l
            V = getattr(self.core, "out_ways", 1)  # noqa: N806
            yv = port_field(lay, out, "y_valid")
            vr = np.flatnonzero(yv)
            toks, cbs = port_field(lay, out, "y_token", vr), port_field(lay, out, "y_cb", vr)
            w, off = next((w, o) for n, w, o in lay if n == "y_data")
            words = _unpack_rows(out[vr, off:off + -(-w // 8)], V * C, ab).reshape(len(vr), V, C)
            lane = [(i, t + ln, cb, words[k, ln]) for k, (i, t, cb) in enumerate(zip(vr, toks, cbs, strict=True))
                    for ln in range(V) if (int(yv[i]) >> ln) & 1]
            for i, t, cb, v in lane:
                key = (int(t), int(cb))
                if key in run.rows:
                    run.twice.append(key)
                run.rows[key] = int(i) - nw
                n = min(C, N - cb * C)
                if t < M and n > 0:
                    run.y[t, cb * C:cb * C + n] = v[:n]
            res.append(run)
        return res

    # ---- the controllers' timing models ------------------------------------------------------------------------

    def _slots(self, A: int, fw, local: bool) -> int | None:  # noqa: N803
        """A segment-local op's segment slots as the host sets them (`hw.delta_core.op_slots`, docs/decisions.md
        D138: the issue hold's bound and the pop's wait), else None (the core's bound, its D buffers)."""
        if not local:
            return None
        from hw.delta_core import op_slots

        return op_slots(self.core, A, fw)

    def _ways(self, bop, grid, of_class, M: int, W: int, fw, local: bool) -> list:  # noqa: N803
        """Each band-tile's rows' accumulate ways: ``(a M + t) mod W`` (`sim.timing.delta_core.row_ways`, D107), or
        with segment-local D addresses the slot's (`row_ways_local`, D125)."""
        from sim.timing.delta_core import row_ways, row_ways_local

        toks, cls = [t.tokens for t in bop.tiles], [of_class[t.group] for t in bop.tiles]
        if local:
            return row_ways_local(toks, cls, grid, self.cfg.array_rows, fw or grid[0], W)
        return row_ways(toks, cls, M, W)

    def expected(self, op: CoreOp, bop=None) -> dict:
        """The core's cycles by its timing functions, computed apart from the RTL: ``rows`` ``{(token, cb): cycle}``,
        ``done``, and for ``kaleido_dcore`` ``fifo_max`` and ``overflow`` (`sim.timing.delta_accel` into
        `sim.timing.delta_core.core_schedule`, the walk segment by segment where the op issues so, D104, on the
        core's accumulate ways with each row's way, `sim.timing.delta_core.row_ways`, D107, D108; compact:
        `sim.timing.compact_accel.caccel_cycles` into `core_cycles`), with the staging entries and lanes `hw.rtl`
        builds (2 B, `hw.delta_accel.LANES`)."""
        from hw.delta_accel import LANES

        cfg = self.cfg
        bop = bop if bop is not None else tile_list(self, op)
        R, B, C = cfg.array_rows, cfg.compact_bands, cfg.array_cols  # noqa: N806
        M, N = op.X.shape[0], op.W.shape[1]  # noqa: N806
        n_cb = -(-N // C)
        fw, s, cm = self.plan(op)
        if self.module == "dcore_stage":
            return self._expected_staged(op, bop)
        if self.module == "dcore":
            from hw.delta_core import segment_order
            from sim.timing.delta import classes
            from sim.timing.delta_accel import accel_cycles, accel_schedule, gather_rounds, queue_steps
            from sim.timing.delta_core import core_schedule, fifo_rows, tile_segments

            widths = np.array([op.groups[t.group][1] - op.groups[t.group][0] for t in bop.tiles], dtype=np.int64)
            rounds = gather_rounds([t.tokens for t in bop.tiles], R // B)
            q = queue_steps(op.decisions, op.grid, R, R // B, fw, n_cb, s, cm)
            # each band-tile's segment; its descriptor taken at the gather's cycle + 2 (desc_valid, D104)
            sgs = tile_segments([(t.cb, int(t.tokens[0])) for t in bop.tiles], op.grid, R, n_cb, fw, s)
            # each row's accumulate way (a M + t) mod W on the core's W ways (D107; W = d by default, D108)
            cls, W = classes(op.groups), self.core.ways  # noqa: N806
            of_class = {g: a for a, (_ax, idx) in enumerate(cls) for g in idx}
            seg = segment_order(cm, s, n_cb)
            local = bool(self.core.seg_local and seg)  # D125: the way from the segment slot, its wait
            rw = self._ways(bop, op.grid, of_class, M, W, fw, local)
            if self.core.issue_hold:  # D126: the controller's schedule co-simulated with the core's (its takes held)
                from sim.timing.delta_accel import AccelRun
                from sim.timing.delta_core import IssueFeed

                feed = IssueFeed(AccelRun(bop.s_seq, bop.rows, widths, rounds, cfg, 2 * B, LANES, q, gate=True), sgs,
                                 rw, cfg)
                hold = {"fifo": self.core.fifo, "ports": cfg.drain_rows_per_cycle} if self.core.array_hold else {}
                sl = self._slots(len(cls), fw or op.grid[0], local)
                sch = core_schedule(None, None, op.grid, n_cb, len(cls), R, seg, None, None, fw, s, W, None,
                                    out_ways=self.core.out_ways, buffers=self.core.d_buffers, **hold, local=local,
                                    gate=feed, bound=sl or self.core.issue_bound, slots=sl)
                return {k: sch[k] for k in ("rows", "done", "fifo_max", "overflow")}
            band, _first, last, g = accel_schedule(bop.s_seq, bop.rows, widths, rounds, cfg, 2 * B, LANES, q)
            done = accel_cycles(bop.s_seq, bop.rows, widths, rounds, cfg, 2 * B, LANES, q)
            descs = [(int(g[k]) + 2, sgs[k], int(bop.rows[k])) for k in range(len(sgs))]
            rows, rsg, way = (fifo_rows(band, last, bop.rows, sgs, cfg, rw) if bop.tiles
                              else (np.zeros(0, np.int64),) * 3)
            sch = core_schedule(rows, done, op.grid, n_cb, len(cls), R, seg, rsg, descs, fw,
                                s, W, way, out_ways=self.core.out_ways, buffers=self.core.d_buffers,
                                **self._hold(band, last, bop), local=local, slots=self._slots(len(cls), fw or op.grid[0], local))
            return {"rows": sch["rows"], "done": sch["done"], "fifo_max": sch["fifo_max"],
                    "overflow": sch["overflow"]}
        from sim.timing.compact_accel import (
            block_times,
            caccel_cycles,
            caccel_schedule,
            core_cycles,
            queue_steps,
        )

        q = queue_steps(op.decisions, op.grid, cfg, fw, n_cb)
        args = (bop, op.groups, cfg, 2 * B, LANES, q)
        blocks = block_times(bop, caccel_schedule(*args), cfg, n_cb)
        y_at, done = core_cycles(caccel_cycles(*args), M, -(-len(op.groups) // self.core.ways), blocks)
        return {"rows": {(t, cb): int(y_at[cb, t]) for cb in range(n_cb) for t in range(M)}, "done": int(done)}

    def _hold(self, band, last, bop) -> dict:
        """`core_schedule`'s array-hold arguments for the engine's core (docs/decisions.md D123): its FIFO entries,
        d rows a cycle and each row's band-tile in the FIFO's order (`fifo_rows`); none without the hold or rows."""
        from sim.timing.delta_core import fifo_rows

        if not self.core.array_hold or not bop.tiles:
            return {}
        tiles = [np.full(int(n), k, dtype=np.int64) for k, n in enumerate(bop.rows)]
        tile = fifo_rows(band, last, bop.rows, np.zeros(len(tiles), dtype=np.int64), self.cfg, tiles)[2]
        return {"fifo": self.core.fifo, "ports": self.cfg.drain_rows_per_cycle, "row_tile": tile}

    def _expected_staged(self, op: CoreOp, bop) -> dict:
        """`expected` of ``kaleido_dcore_stage`` (D119): `sim.timing.delta_accel.stage_schedule` (the early band
        choice and the deferred read, as built; the stage fields `hw.delta_accel_host.stage_plan`'s) into
        `core_schedule`, every segment walked once whole where the order is segment by segment (D84's),
        descriptors counted at gather + 2."""
        from hw.delta_accel import LANES
        from hw.delta_accel_host import stage_plan
        from hw.delta_core import segment_order
        from sim.timing.compact import drain_reads
        from sim.timing.delta import classes
        from sim.timing.delta_accel import gather_rounds, stage_schedule
        from sim.timing.delta_core import core_schedule, fifo_rows, tile_segments

        cfg, acc = self.cfg, self.core.accel
        R, B, C = cfg.array_rows, cfg.compact_bands, cfg.array_cols  # noqa: N806
        M, N = op.X.shape[0], op.W.shape[1]  # noqa: N806
        n_cb = -(-N // C)
        fw, s, cm = self.plan(op)
        seg = segment_order(cm, s, n_cb)
        sop, sliced = self.staged_form(op)
        cls, W = classes(sop.groups), self.core.ways  # noqa: N806
        if not bop.tiles:  # no band-tiles: the controller's done the cycle after start (`accel_cycles`)
            sch = core_schedule(np.zeros(0, np.int64), 1, op.grid, n_cb, len(cls), R, seg, np.zeros(0, np.int64), [],
                                fw, s, W, np.zeros(0, np.int64), out_ways=self.core.out_ways, buffers=self.core.d_buffers)
            return {k: sch[k] for k in ("rows", "done", "fifo_max", "overflow")}
        plan, _nbuf, _size = stage_plan(acc, sop.groups, host_tiles(bop), bop.segment, sliced)
        widths = np.array([sop.groups[t.group][1] - sop.groups[t.group][0] for t in bop.tiles], dtype=np.int64)
        paired = [t.ncomp == 0 and t.slots < w for t, w in zip(bop.tiles, widths, strict=True)]
        rounds = gather_rounds([t.tokens for t in bop.tiles], R // B)
        r = stage_schedule(bop.s_seq, bop.rows, widths, rounds, paired, *([p[k] for p in plan] for k in (
            "seg", "sbuf", "fcount", "saddr")), cfg, 2 * B, LANES, early=acc.early,
            defer="behind" if acc.defer else "off")
        done = int(drain_reads(r["band"], r["last"], bop.rows, cfg).max()) + C + 3
        sgs = tile_segments([(t.cb, int(t.tokens[0])) for t in bop.tiles], op.grid, R, n_cb, fw, s)
        descs = [(int(r["gather"][k]) + 2, sgs[k], int(bop.rows[k])) for k in range(len(sgs))]
        of_class = {g: a for a, (_ax, idx) in enumerate(cls) for g in idx}
        local = bool(self.core.seg_local and seg)  # D125
        rw = self._ways(bop, op.grid, of_class, M, W, fw, local)
        rows, rsg, way = fifo_rows(r["band"], r["last"], bop.rows, sgs, cfg, rw)
        if self.core.issue_hold:  # D126: stage_schedule's loop stepped inside the core's (its takes held)
            from sim.timing.delta_core import StageFeed

            args = (bop.s_seq, bop.rows, widths, rounds, paired, *([p[k] for p in plan] for k in (
                "seg", "sbuf", "fcount", "saddr")), cfg, 2 * B, LANES)
            feed = StageFeed(args, {"early": acc.early, "defer": "behind" if acc.defer else "off"}, sgs, rw, cfg)
            hold = {"fifo": self.core.fifo, "ports": cfg.drain_rows_per_cycle} if self.core.array_hold else {}
            sl = self._slots(len(cls), fw or op.grid[0], local)
            sch = core_schedule(None, None, op.grid, n_cb, len(cls), R, seg, None, None, fw, s, W, None,
                                out_ways=self.core.out_ways, buffers=self.core.d_buffers, **hold, local=local,
                                gate=feed, bound=sl or self.core.issue_bound, slots=sl)
            return {k: sch[k] for k in ("rows", "done", "fifo_max", "overflow")}
        sch = core_schedule(rows, done, op.grid, n_cb, len(cls), R, seg, rsg, descs, fw, s, W, way,
                            out_ways=self.core.out_ways, buffers=self.core.d_buffers,
                            **self._hold(r["band"], r["last"], bop), local=local,
                            slots=self._slots(len(cls), fw or op.grid[0], local))
        return {k: sch[k] for k in ("rows", "done", "fifo_max", "overflow")}


def rows_per_group(bop, groups) -> np.ndarray:
    """A band-tile list's rows per group (float64 ``[G]``): what `hw.compact_core.core_ports` checks against a
    way's staging macro (docs/decisions.md D104)."""
    return np.bincount([t.group for t in bop.tiles], weights=bop.rows, minlength=len(groups))


# ---- host slicing --------------------------------------------------------------------------------------------

@dataclass
class Slice:
    """One piece of an op (module docstring): ``tokens`` int64 (rows of X and Y), ``grid`` its sub-grid,
    ``groups`` indices of the op's groups (its channels), ``cols`` ``(n0, n1)`` its output columns."""

    tokens: np.ndarray
    grid: tuple
    groups: list
    cols: tuple


@dataclass
class Piece:
    """A `Slice` planned: ``op`` its `CoreOp` (`sub_op`), ``tiles`` its band-tiles (`tile_list`), ``want`` the core's
    cycles by its timing functions (`CoreEngine.expected`)."""

    slice: Slice
    op: CoreOp
    tiles: object
    want: dict


@dataclass
class _Tile:
    group: int
    tokens: np.ndarray
    cb: int
    ncomp: int = 0  # its COMPUTE rows (the first ones)
    slots: int = 0


@dataclass
class TileList:
    """An op's band-tiles in the core's issue order, only what the timing functions read (``tiles`` with ``group``
    and ``tokens``, ``s_seq`` slots, ``rows``): `sim.engines.band_stimulus.band_op` without the slot images and
    expected words (about 10x faster); a tile's ``cb`` is its column block (`sim.timing.compact_accel.block_times`).
    ``segment``: on ``kaleido_dcore_stage`` (D119) each band-tile's stage segment (a run of one chunk, column block
    and, sliced, slice: `hw.delta_accel_host.stage_plan`'s), else None."""

    tiles: list
    s_seq: np.ndarray
    rows: np.ndarray
    segment: np.ndarray | None = None


def host_tiles(bop: TileList) -> list[tuple]:
    """`hw.delta_accel_host.op_words`' band-tile list of a `TileList`: ``(group, cb, tokens, COMPUTE rows, slots)``
    (as `tests.rtl.daccel_bench.host_tiles` of a `sim.engines.band_stimulus.BandOp`)."""
    return [(t.group, t.cb, t.tokens.tolist(), t.ncomp, t.slots) for t in bop.tiles]


def tile_list(engine: CoreEngine, op: CoreOp) -> TileList:
    """`TileList` of ``op`` on `engine`'s core: `sim.timing.compact_reference.band_tiles` in
    `sim.engines.band_stimulus.issue_order` at `CoreEngine.plan`'s ``Fw``, ``s`` and order (as ``band_op``); on
    ``kaleido_dcore_stage`` (D119) of its `CoreEngine.staged_form`, with each band-tile's stage segment and, sliced,
    a segment's band-tiles slice by slice (D88; as `sim.timing.delta_accel.staged_tiles`)."""
    from sim.engines.band_stimulus import issue_order
    from sim.timing.compact import band_rows, compact_tiles
    from sim.timing.compact_reference import band_tiles

    cfg = engine.cfg
    fw, s, cm = engine.plan(op)
    sliced = False
    if engine.module == "dcore_stage":
        op, sliced = engine.staged_form(op)
    widths = [k1 - k0 for k0, k1, _ in op.groups]
    bts = band_tiles(op.decisions, op.grid, widths, cfg.array_rows, band_rows(cfg), fw)
    _t, chunk = compact_tiles(op.decisions, op.grid, op.groups, cfg, fw, 4, chunks=True)
    n_cb = -(-op.W.shape[1] // cfg.array_cols)
    order = issue_order(chunk, n_cb, cfg, s, cm)
    seg = None
    if engine.module == "dcore_stage":  # a stage segment: a run of one (chunk, column block), then of one slice
        keys = [(int(chunk[t]), cb) for t, cb in order]
        seg = np.cumsum([i == 0 or keys[i] != keys[i - 1] for i in range(len(keys))], dtype=np.int64) - 1
        if sliced and order:
            grp = np.array([bts[t].group for t, _cb in order], dtype=np.int64)
            idx = np.lexsort((grp, seg))
            order, g2, s2 = [order[i] for i in idx], grp[idx], seg[idx]
            seg = np.cumsum(np.r_[True, (np.diff(s2) != 0) | (np.diff(g2) != 0)]) - 1
    tiles = [_Tile(bts[t].group, np.array(list(bts[t].compute) + list(bts[t].partial), dtype=np.int64), cb,
                   len(bts[t].compute), bts[t].slots) for t, cb in order]
    return TileList(tiles, np.array([bts[t].slots for t, _cb in order], dtype=np.int64),
                    np.array([len(t.tokens) for t in tiles], dtype=np.int64), seg)


def _group_runs(cfg: AcceleratorConfig, groups, max_k: int) -> list[list[int]]:
    """The op's groups in order, cut into runs of at most ``max_k`` channels and ``partial_regs`` groups.

    Raises:
        RtlEngineError: a group wider than ``max_k``."""
    runs, cur, width = [], [], 0
    for g, (k0, k1, _ax) in enumerate(groups):
        w = k1 - k0
        if w > max_k:
            raise RtlEngineError(f"a group of {w} channels exceeds the controller's {max_k}")
        if cur and (width + w > max_k or len(cur) == cfg.partial_regs):
            runs.append(cur)
            cur, width = [], 0
        cur.append(g)
        width += w
    return runs + ([cur] if cur else [])


def sub_op(op: CoreOp, sl: Slice) -> CoreOp:
    """The `CoreOp` of one slice: its tokens, channels (groups renumbered from 0) and columns."""
    ks = [op.groups[g] for g in sl.groups]  # a run of consecutive groups (`_group_runs`)
    k0 = ks[0][0]
    kidx = np.arange(k0, ks[-1][1])
    groups = [(a - k0, b - k0, ax) for a, b, ax in ks]
    X = np.ascontiguousarray(op.X[np.ix_(sl.tokens, kidx)])  # noqa: N806
    W = np.ascontiguousarray(op.W[kidx, sl.cols[0]:sl.cols[1]])  # noqa: N806
    dec = np.ascontiguousarray(op.decisions[np.ix_(sl.tokens, sl.groups)])
    return CoreOp(X, W, sl.grid, groups, dec, op.x_unsigned, op.fused, op.plan, op.p_op)


def _plan_piece(engine: CoreEngine, full: CoreOp, sl: Slice) -> Piece | str:
    """`Piece` of ``sl``, or why the core cannot hold it (one phrase): its ports' capacity (`core_ports`), more than
    `hw.delta_accel.MAX_TILES` band-tiles, ``kaleido_ccore``'s queues' replay buffer against one column block's
    band-tiles where the slice has several (D124: its queues read the first back for the others), ``kaleido_dcore``'s row FIFO against the model's ``fifo_max``, its segment
    count banks against the model's ``overflow`` (a descriptor `hw.delta_core.NB_BANKS` segments ahead of the walk,
    D104)."""
    from hw.delta_accel import MAX_TILES

    op = sub_op(full, sl)
    try:
        tl = tile_list(engine, op)
        if len(tl.tiles) > MAX_TILES:
            return f"{len(tl.tiles)} band-tiles, more than the controller's {MAX_TILES}"
        if engine.module == "ccore":
            from hw.compact_core import core_ports

            core_ports(engine.core, op.grid, op.groups, op.W.shape[1], rows_per_group(tl, op.groups))
        else:
            from hw.delta_core import core_ports, segment_order

            groups = engine.staged_form(op)[0].groups if engine.module == "dcore_stage" else op.groups
            # the D words per segment where the core addresses them so (D125: seg_local, the op issued segment by
            # segment), else the op's
            fw, s, cm = engine.plan(op)
            n_cb = -(-op.W.shape[1] // engine.cfg.array_cols)
            core_ports(engine.core, op.grid, groups, op.W.shape[1], op.fused, segment_order(cm, s, n_cb), fw, s)
        want = engine.expected(op, tl)
    except ValueError as err:
        return str(err)
    if not engine.delta and sl.cols[1] - sl.cols[0] > engine.cfg.array_cols:  # kaleido_caccel's replay (D124)
        per, room = len(tl.tiles) // -(-(sl.cols[1] - sl.cols[0]) // engine.cfg.array_cols), engine.core.accel.queue.replay
        if per > room:
            return f"{per} band-tiles a column block, more than its queues' replay buffer's {room}"
    if engine.delta and want["fifo_max"] > engine.core.fifo:  # only without the array hold (D123)
        return f"a row FIFO backlog of {want['fifo_max']} rows, more than its {engine.core.fifo} entries"
    if engine.delta and want["overflow"]:
        return "a descriptor more segments ahead of the walk than its segment count banks"
    return Piece(sl, op, tl, want)


def slices(engine: CoreEngine, op: CoreOp) -> list[Piece]:
    """The pieces `engine`'s core runs ``op`` in (module docstring): channel runs of whole groups (`_group_runs`),
    for ``kaleido_ccore`` sub-grids of whole image rows, then the most output column blocks per slice that the core
    holds (`_plan_piece`; the band-tiles and FIFO backlog grow with the column blocks, so the first slice's count,
    found from one column block's, is tried first and lowered where a slice does not fit; ``kaleido_ccore``: one column
    block a slice where one column block's band-tiles exceed its queues' replay buffer, D124). A run of groups that does
    not fit even with one column block is halved (fewer channels a slice, added on the host) down to one group.

    On ``kaleido_dcore_stage`` an op with a group wider than the controller's ``max_k`` channels whose weights the
    stage slices (D88: `CoreEngine.staged_form` gives the slices as groups, each at its group's decisions) is cut at
    those slices instead of refused (docs/decisions.md D121): its slices then are the op's groups here.

    Raises:
        RtlEngineError: a piece of one group and one column block the core cannot hold (the message says why), or a
            compact op whose ``h`` groups would lose their neighbours."""
    from hw.delta_accel import MAX_TILES

    cfg, acc = engine.cfg, engine.core.accel
    if engine.module == "dcore_stage" and max((k1 - k0 for k0, k1, _ in op.groups), default=0) > acc.max_k:
        try:
            op = engine.staged_form(op)[0]  # the stage's slices as groups (itself where the stage holds its K)
        except ValueError as err:
            raise RtlEngineError(str(err)) from None
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    F, H, W = op.grid  # noqa: N806
    M, N = op.X.shape[0], op.W.shape[1]  # noqa: N806
    n_cb = -(-N // C)
    if M > acc.max_tokens and engine.delta:
        raise RtlEngineError(f"{M} tokens exceed kaleido_dcore's {acc.max_tokens} (slicing tokens would cut "
                             "neighbours; the controller does not stream, D91)")
    tok_sets = [(np.arange(M), tuple(op.grid))]
    if engine.module == "ccore" and H * W > R:
        if W > R or any(ax == "h" for _a, _b, ax in op.groups):
            raise RtlEngineError(f"grid {op.grid}: kaleido_ccore holds H W <= R = {R} positions; cutting it into "
                                 "whole image rows would lose " + ("a row's w neighbours" if W > R else
                                                                    "the h neighbours"))
        hp = max(h for h in range(1, H + 1) if H % h == 0 and h * W <= R)
        idx = np.arange(M).reshape(F, H, W)
        tok_sets = [(idx[:, h0:h0 + hp, :].reshape(-1), (F, hp, W)) for h0 in range(0, H, hp)]
    out = []
    runs = [(gs, toks, grid) for gs in _group_runs(cfg, op.groups, acc.max_k) for toks, grid in tok_sets]
    while runs:
        gs, toks, grid = runs.pop(0)
        one = _plan_piece(engine, op, Slice(toks, grid, gs, (0, min(N, C))))
        if isinstance(one, str) and len(gs) > 1:  # fewer groups a slice: a smaller backlog and fewer band-tiles
            half = len(gs) // 2
            runs[:0] = [(gs[:half], toks, grid), (gs[half:], toks, grid)]
            continue
        if isinstance(one, str):
            raise RtlEngineError(f"a slice of one group and one column block (group {gs[0]}, grid {grid}) does "
                                 f"not fit {engine.module} on {cfg.name}: {one}")
        per = max(1, len(one.tiles.tiles))
        fifo = 0 if engine.delta and engine.core.array_hold else one.want.get("fifo_max", 0)  # the hold: any (D123)
        nb = min(acc.max_nb, MAX_TILES // per, engine.core.fifo // max(1, fifo) if fifo else acc.max_nb)
        if not engine.delta and per > acc.queue.replay:  # kaleido_caccel reads one column block back (D124)
            nb = 1
        cb0 = 0
        while cb0 < n_cb:
            for k in range(min(nb, n_cb - cb0), 0, -1):
                piece = (one if (cb0, k) == (0, 1) else
                         _plan_piece(engine, op, Slice(toks, grid, gs, (cb0 * C, min(N, (cb0 + k) * C)))))
                if not isinstance(piece, str):
                    break
            else:
                raise RtlEngineError(f"a slice of one column block (groups {gs}, grid {grid}, column block "
                                     f"{cb0}) does not fit {engine.module} on {cfg.name}: {piece}")
            out.append(piece)
            nb = k if cb0 + k < n_cb else nb
            cb0 += k
    return out


# ---- a trace through a core -------------------------------------------------------------------------------------

def trace_through_core(trace, cfg: AcceleratorConfig, engine: CoreEngine | None = None, log=None,
                       built_s: float = 0.0) -> dict:
    """Every op of an exact trace through `cfg`'s core (`CoreEngine`), each batch element cut by `slices` and its
    slices run back to back on one core, the decisions `algo.reuse.golden.decide` makes at the op's theta (as
    `sim.engines.rtl.golden_checksums`). ``log`` gets a line per op with the seconds simulating so far, the engine's
    build (``built_s``: seconds the caller spent building ``engine``; or this call's own build) and the seconds left,
    estimated by the MACs still to run.

    Returns:
        ``{"outputs_sha256": str, "per_op": [...]}``: the checksum (`sim.engines.rtl.outputs_checksum`) of the Y the
        core gave, ops and batch elements in trace order (slices added on the host where channels were cut); per op
        ``name``, ``batch``, ``M``, ``K``, ``N``, ``slices``, ``cycles`` (every slice's ``start`` to ``done``,
        inclusive: ``done + 1``, summed), ``timing_cycles`` (the same from the core's timing functions, `expected`),
        ``writes`` (host-write cycles), ``outputs_sha256`` and ``errors`` (rows missing, twice, off their modelled
        cycle, a FIFO overflow: each one line; empty when the op is right).

    Raises:
        RtlEngineError: as `slices` and `CoreEngine.run`.
    """
    import time

    from algo.reuse.golden import decide
    from sim.engines.rtl import outputs_checksum
    from sim.timing.attention import fused_pairs

    p_ops = set(fused_pairs(trace.ops, cfg).values())  # the model caps their chunks by the score buffer (D131)
    t_build = time.perf_counter()
    eng = engine or CoreEngine(cfg, log=log)
    built = built_s + time.perf_counter() - t_build  # the caller's build of ``engine`` (``built_s``) or this one
    ys, per_op = [], []
    macs = [op.batch * op.M * op.K * op.N for op in trace.ops]  # the log's ETA: the core's time goes with the MACs
    t0, done_macs = time.perf_counter(), 0
    for i, op in enumerate(trace.ops):
        groups = [g.as_tuple() for g in op.groups]
        rec = {"name": op.name, "batch": op.batch, "M": op.M, "K": op.K, "N": op.N, "slices": 0, "cycles": 0,
               "timing_cycles": 0, "writes": 0, "errors": []}
        op_ys = []
        for b in range(op.batch):
            dec = decide(op.X[b], trace.grid, groups, op.theta, trace.b_msb)[0]
            full = CoreOp(op.X[b], op.W[b], tuple(trace.grid), groups, dec, op.X.dtype == np.uint8,
                          p_op=i in p_ops)
            pieces = slices(eng, full)
            runs = eng.run([p.op for p in pieces], [p.tiles for p in pieces])
            y = np.zeros((op.M, op.N), np.int64)
            for k, (piece, run) in enumerate(zip(pieces, runs, strict=True)):
                sl, want = piece.slice, piece.want
                y[sl.tokens[:, None], np.arange(sl.cols[0], sl.cols[1])[None, :]] += run.y
                rec["cycles"] += run.done + 1
                rec["timing_cycles"] += want["done"] + 1
                rec["writes"] += run.writes
                where = f"{op.name} batch {b} slice {k}"
                if run.twice or run.overflow:
                    rec["errors"].append(f"{where}: rows twice {run.twice[:3]}, overflow {run.overflow}")
                if set(run.rows) != set(want["rows"]):
                    rec["errors"].append(f"{where}: {len(set(want['rows']) - set(run.rows))} rows missing")
                elif run.rows != want["rows"] or run.done != want["done"]:
                    off = sum(run.rows[r] != c for r, c in want["rows"].items())
                    rec["errors"].append(f"{where}: {off} rows off their modelled cycle; done {run.done}, "
                                         f"modelled {want['done']}")
            rec["slices"] += len(pieces)
            op_ys.append(y)
        rec["outputs_sha256"] = outputs_checksum(op_ys)
        ys += op_ys
        per_op.append(rec)
        done_macs += macs[i]
        if log:
            spent = time.perf_counter() - t0
            left = spent * (sum(macs) - done_macs) / done_macs if done_macs else 0.0
            log(f"step {op.step} block {op.block} {op.name} (op {len(per_op)} of {len(trace.ops)}): "
                f"{rec['slices']} slices, {rec['cycles']:,} cycles; {spent:,.0f} s simulating so far (after "
                f"{built:,.0f} s building the engine), about {left:,.0f} s left (by MACs)")
    return {"outputs_sha256": outputs_checksum(ys), "per_op": per_op}


def simulate_trace_core(trace, cfg: AcceleratorConfig, trace_path: str = "", log=None, timings: dict | None = None
                        ) -> dict:
    """``kaleido simulate T.npz --engine rtl`` on a delta or compact config: `trace_through_core`, as the results
    object of `sim.engines.verilator.simulate_trace_rtl` (``format``, ``version``, ``engine`` ``"rtl"``, ``config``,
    ``trace``, ``cycles``, ``outputs_sha256``, ``per_op``), plus ``core`` (the Verilog module run: on a delta config
    with a weight stage and a difference-sum buffer the organisation it models, ``kaleido_dcore_stage``, D119). ``cycles`` are the
    controller's (``start`` to ``done`` per slice, summed), not the cycle model's op cycles (docs/decisions.md D102
    gives both); per op also ``slices``, ``writes`` (host-write cycles, not in ``cycles``) and ``timing_cycles`` (its
    timing functions'). For comparison, the cycle model on the same trace and config
    (`sim.engines.model.simulate_trace`, the config's ``combine_timing``): ``model_cycles`` and ``dense_cycles``
    (its array cycles with reuse, and dense), at the top and per op. `timings` receives ``run_s`` (wall seconds,
    build included).

    Raises:
        sim.engines.model.SimError: the trace does not fit the config or is not exact.
        RtlEngineError: an op the core cannot run even sliced, a build or run failure, or a slice whose rows or cycles
            differ from the controller's timing functions (a hardware bug: its first lines).
    """
    import time

    from sim.engines.model import RESULTS_FORMAT, RESULTS_VERSION, SimError, check_compatible

    check_compatible(trace, cfg)
    if trace.kind != "exact":
        raise SimError(f"--engine rtl needs an exact trace (operands X and W); this one is a {trace.kind!r} trace")
    t0 = time.perf_counter()
    staged = cfg.organisation == "delta" and bool(cfg.wstage_sram_kib and cfg.diff_sram_kib)
    eng = CoreEngine(cfg, log=log, stage=staged)
    res = trace_through_core(trace, cfg, eng, log=log, built_s=time.perf_counter() - t0)
    errors = [e for r in res["per_op"] for e in r.pop("errors")]
    if errors:
        raise RtlEngineError(f"{len(errors)} slices differ from the controller's timing functions: "
                             + "; ".join(errors[:3]))
    if timings is not None:
        timings["run_s"] = time.perf_counter() - t0
    from sim.engines.model import simulate_trace

    model = simulate_trace(trace, cfg)  # the cycle model beside the controller (seconds on a tiny trace)
    per_op = [{"block": op.block, "step": op.step} | r | {"model_cycles": m["cycles"], "dense_cycles": m["dense_cycles"]}
              for op, r, m in zip(trace.ops, res["per_op"], model["per_op"], strict=True)]
    return {
        "format": RESULTS_FORMAT, "version": RESULTS_VERSION, "engine": "rtl", "core": eng.module,
        "config": cfg.model_dump(mode="json"),
        "trace": {"path": trace_path, "model": trace.model, "size": trace.size, "weights": trace.weights,
                  "grid": list(trace.grid), "b_msb": trace.b_msb, "ops": len(trace.ops), "kind": trace.kind},
        "cycles": sum(r["cycles"] for r in per_op),
        "model_cycles": model["cycles"], "dense_cycles": model["dense_cycles"],
        "outputs_sha256": res["outputs_sha256"],
        "per_op": per_op,
    }
