"""The op-level controllers in the area and energy model (sim/cost/controllers.py, docs/decisions.md D101).

`sim.cost.controllers.inventory` writes every macro and register bank of the controllers from the config; these tests
elaborate the Amaranth designs themselves (hw/delta_accel.py, hw/compact_accel.py, hw/delta_queue.py,
hw/delta_core.py, hw/compact_core.py, hw/compact_array.py, hw/delta_front.py) and compare: every `hw.sram.macro` the
elaboration asks for, and the register bits of the named banks in the designs' clocked statements. Then the area and energy rules by
hand, and the lockstep organisation's figures unchanged."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from amaranth.hdl import Fragment, Instance

import hw.combine
import hw.compact_core
import hw.delta_accel
import hw.delta_combine
import hw.delta_core
import hw.delta_front
import hw.delta_queue
import hw.sram
from algo.reuse.golden import COMPUTE, PARTIAL, REUSE
from hw.config import BALANCED_PRESET, config_from_dict, load_config, with_organisation
from sim.cost import controllers
from sim.cost.area import area_breakdown
from sim.cost.tech import load_tech

TINY_DELTA = "hw/presets/examples/tiny-8x8-delta.toml"
TINY_COMPACT = "hw/presets/examples/tiny-8x8-compact.toml"
BALANCED = BALANCED_PRESET
CONFIGS = {"tiny-delta": lambda: load_config(TINY_DELTA), "tiny-compact": lambda: load_config(TINY_COMPACT),
           "balanced": lambda: load_config(BALANCED),
           "balanced-compact": lambda: with_organisation(load_config(BALANCED), "compact"),
           # kaleido_daccel unstaged, with its similarity front (D103)
           "tiny-delta-unstaged": lambda: config_from_dict(load_config(TINY_DELTA).model_dump() | {"wstage_sram_kib": 0},
                                                           "tiny-8x8-delta without a weight stage"),
           # kaleido_dcore on one output lane (D108's core; the emitted one has V = W lanes since D113)
           "tiny-delta-v1": lambda: load_config(TINY_DELTA).model_copy(update={"dcore_out_ways": 1}),
           "balanced-v1": lambda: load_config(BALANCED).model_copy(update={"dcore_out_ways": 1}),
           # the staged controller's descriptor ring and kaleido_dcore's tile table at 8 entries (D134)
           "tiny-delta-ring": lambda: load_config(TINY_DELTA).model_copy(update={"accel_tile_ring": 8})}


def _designs(cfg):
    """module name -> the design that module is, as `hw.rtl` emits it (children instanced by name)."""
    from hw.compact_accel import CompactAccel
    from hw.compact_core import CompactCore
    from hw.delta_accel import DeltaAccel
    from hw.delta_core import DeltaCore
    from hw.delta_front import DeltaFront
    from hw.delta_queue import DeltaQueue

    kind = controllers.controller(cfg)
    if kind == "compact":
        acc = CompactAccel(cfg, queues=True, pe="instance")
        q = DeltaQueue(acc, pe="instance", replay=acc.queue.replay, reach=acc.queue.reach)  # D120, D124
        core = CompactCore(cfg, pe="instance")
        from hw import discard
        from hw.combine import Combine, combine_module_name

        return {"kaleido_caccel": acc, "kaleido_dqueue": q, "kaleido_ccore": core,
                "kaleido_cfront": DeltaFront(acc, pe="instance"),
                # its macros (D127); discard: not every test elaborates it (elaborating still works)
                combine_module_name(core.ways): discard(Combine(cfg, instance=True, ways=core.ways))}
    from hw.delta_combine import DeltaCombine, dcombine_module_name, default_d_buffers, default_out_ways
    from hw.delta_core import default_fifo_bypass, default_seg_local

    fed = DeltaAccel(cfg, queues=True, pe="instance")
    # kaleido_dcore as hw.rtl emits it: its default d accumulate ways (D108) and V output lanes (D113), or the lanes
    # the config names (V = 1: D108's core), and its combine unit on those ways and lanes; on its D buffers (D115)
    # and with its FIFO bypass (D118)
    v = cfg.dcore_out_ways if cfg.dcore_out_ways is not None else default_out_ways(cfg)
    n = default_d_buffers(cfg) if v > 1 else 2
    core = DeltaCore(cfg, pe="instance", ways=None, out_ways=v, d_buffers=n, fifo_bypass=default_fifo_bypass(cfg),
                     array_hold=True, issue_hold=True,  # and its array hold (D123), issue hold (D126, D129)
                     # and on the staged core its segment-local D addresses (D125, the default since D132)
                     seg_local=kind == "delta_stage" and default_seg_local(cfg),
                     stage=bool(cfg.accel_tile_ring))  # with a ring (D134): on the staged controller, whose ring it is
    out = {"kaleido_dqueue": DeltaQueue(fed, pe="instance"), "kaleido_dcore": core,
           dcombine_module_name(core.ways, v, n): DeltaCombine(cfg, instance=True, ways=core.ways, out_ways=v, buffers=n)}
    if kind == "delta_stage":  # no front on the staged controller (D103)
        out["kaleido_daccel_stage"] = DeltaAccel(cfg, stage=True, pe="instance", issue_gate=True)  # D129
        Fragment.get(fed, None)  # elaborated, so that Amaranth does not warn about an unused design
    else:
        out["kaleido_daccel"] = fed
        out["kaleido_dfront"] = DeltaFront(fed, pe="instance")
    return out


def _recorded_macros(design, monkeypatch) -> collections.Counter:
    """``(kind, depth, width) -> count`` of every macro the design's elaboration builds (`hw.sram.macro` calls)."""
    seen = collections.Counter()
    real = hw.sram.macro

    def spy(kind, depth, width, lane=None, **kw):
        seen[kind, depth, width] += 1
        return real(kind, depth, width, lane, **kw)

    for mod in (hw.delta_accel, hw.delta_queue, hw.delta_core, hw.compact_core, hw.delta_front, hw.delta_combine,
                hw.combine):
        monkeypatch.setattr(mod, "macro", spy)
    Fragment.get(design, None)
    return seen


@pytest.mark.parametrize("name", list(CONFIGS))
def test_macros_are_the_designs(name, monkeypatch):
    cfg = CONFIGS[name]()
    inv = [p for p in controllers.inventory(cfg) if p["kind"] in ("1rw", "1r1w")]
    for module, design in _designs(cfg).items():
        want = collections.Counter()
        for p in inv:
            if p["module"] == module:
                want[p["kind"], p["depth"], p["width"]] += p["count"]
        assert _recorded_macros(design, monkeypatch) == want, module


def _clocked_bits(design) -> dict[str, int]:
    """Signal name -> bits of every signal a clocked statement of the elaborated design (and its submodules) drives,
    and of every delay line instanced as `hw.array.DELAY_MODULE_NAME` (WIDTH x DEPTH)."""
    out = {}

    def walk(f):
        if isinstance(f, Instance):
            p = f.parameters
            if "WIDTH" in p and "DEPTH" in p:
                out[f"{f.type}:{id(f)}"] = int(p["WIDTH"]) * int(p["DEPTH"])
            return
        for dom, stmts in f.statements.items():
            if dom != "comb":
                for s in stmts:
                    for sig in s._lhs_signals():
                        out[sig.name] = len(sig)
        for sub, *_ in f.subfragments:
            walk(sub)

    walk(Fragment.get(design, None))
    return out


def _bank_bits(regs: dict[str, int], pattern: str) -> int:
    import re

    return sum(b for n, b in regs.items() if re.fullmatch(pattern, n))


@pytest.mark.parametrize("name", ["tiny-delta", "balanced", "tiny-compact", "tiny-delta-v1", "tiny-delta-unstaged",
                                  "tiny-delta-ring"])
def test_register_banks_are_the_designs(name):
    from hw.compact_array import CompactTop

    cfg = CONFIGS[name]()
    kind = controllers.controller(cfg)
    designs = _designs(cfg)
    acc_mod = {"compact": "kaleido_caccel", "delta": "kaleido_daccel"}.get(kind, "kaleido_daccel_stage")
    acc = _clocked_bits(designs[acc_mod])
    q = _clocked_bits(designs["kaleido_dqueue"])
    dc = _clocked_bits(designs["kaleido_dcore"]) if kind != "compact" else None
    if kind == "compact":
        Fragment.get(designs["kaleido_ccore"], None)
    for front in ("kaleido_cfront", "kaleido_dfront"):  # elaborated, so that Amaranth does not warn (no banks here)
        if front in designs:
            Fragment.get(designs[front], None)
    part = {(p["module"], p["part"]): p["bits"] for p in controllers.inventory(cfg)}
    if dc is not None:  # kaleido_dcore's registers of the segment walk (D104)
        assert part["kaleido_dcore", "segment counts"] == _bank_bits(dc, r"seg_(rows|acc)\d+")
        # ... and of its accumulate ways (D107, D108; d ways: 2 on tiny-8x8 as delta, 4 on the balanced preset): the
        # entries' ways, the ways' s1 / s2 registers (the first way's uncharged, D101), the combine's per-way ones
        W, V = designs["kaleido_dcore"].ways, designs["kaleido_dcore"].out_ways  # noqa: N806
        assert W == cfg.drain_rows_per_cycle > 1
        assert part["kaleido_dcore", "FIFO ways"] == _bank_bits(dc, r"fifo_way")
        ways = _bank_bits(dc, r"acc_(addr|bank|data|fwd|s1_bank)\d+|acc_s[12]_(v|par|res)")
        assert part["kaleido_dcore", "FIFO bypass"] == _bank_bits(dc, r"fifo_a_\w+|acc_s1_byp\w*")  # D118
        assert part["kaleido_dcore", "accumulate ways"] * W == ways * (W - 1)
        from hw.delta_combine import dcombine_module_name

        name_c = dcombine_module_name(W, V, designs["kaleido_dcore"].d_buffers)  # _b3 on 3 D buffers (D115)
        cmb = _clocked_bits(designs[name_c])
        # the output's way: one register with one lane (D107), one per lane with V (D112, in "output lanes")
        assert part[name_c, "accumulate ways"] == _bank_bits(
            cmb, r"a_(addr|data|first)_q\d+|a_(fwd|v|sel_q)\d+|last_a\d+" + ("|c_way_q" if V == 1 else ""))
        if V > 1:  # the output lanes (D112, D114): V = W = 2 on tiny-8x8 as delta, 4 on the balanced preset
            assert V == W
            assert part["kaleido_dcore", "walk lanes"] == _bank_bits(dc, r"q_lane_(v|succ)|q_(tlow|stlow)")
            lanes = _bank_bits(cmb, r"last_s\d+|y_data|y_valid|c_(waddr_q|rbank_q|fwd|way_q)\d+"
                                    r"|c_(v|direct_q|has_q|reg_q|hold_q|we)")
            assert part[name_c, "output lanes"] * V == lanes * (V - 1)  # the first lane's as the one-lane unit's
        else:
            assert not [p for p in controllers.inventory(cfg) if p["part"] in ("walk lanes", "output lanes")]
        assert part["kaleido_dcore", "latest descriptor"] == _bank_bits(dc, r"desc_seg_max|desc_seen")
        assert part["kaleido_dcore", "walk segment"] == _bank_bits(dc, r"w_(seg|group|rep|fc|seg_res)|waiting")
        assert part["kaleido_dcore", "descriptor register"] == _bank_bits(dc, r"desc1_\w+")
        assert part["kaleido_dcore", "FIFO parity"] == _bank_bits(dc, r"fifo_(parity|residue)")
        # the array hold (D123): two adders and a compare as wide as a FIFO pointer, one clock gate's latch (the
        # core's only kaleido_clkgate; its run is combinational: no register)
        assert part["kaleido_dcore", "array hold"] == 3 * dc["fifo_wp"] == 3 * dc["fifo_rp"]
        gates = [f for f, *_ in Fragment.get(designs["kaleido_dcore"], None).subfragments
                 if isinstance(f, Instance) and f.type == "kaleido_clkgate"]
        assert part["kaleido_dcore", "clock gate"] == len(gates) == 1
        # the issue hold (D126; on the staged core too, D129): the token and valid registered, on the gated controller
        assert part["kaleido_dcore", "issue gate"] == _bank_bits(dc, r"gate_(tok|v)") > 0
        assert designs["kaleido_dcore"].accel.issue_gate
        if kind == "delta_stage":  # the staged controller's list read ahead (D126), its taken descriptor registered
            assert part[acc_mod, "read-ahead register"] == _bank_bits(acc, r"desc_q") > 0
            if cfg.accel_tile_ring:  # D134: the ring's row counts, the count written, the read-ahead's valid bit
                assert part[acc_mod, "ring registers"] == _bank_bits(acc, r"ring\d+_left|desc_written|desc_ahead_ok")
            else:
                assert (acc_mod, "ring registers") not in part
        # segment-local D addresses (D125) on the staged core (the default since D132): the entries' count banks and
        # the walk's frame in the chunk; none on the unstaged core, which keeps the op's address
        assert designs["kaleido_dcore"].seg_local == (kind == "delta_stage")
        assert part.get(("kaleido_dcore", "segment-local banks"), 0) == _bank_bits(dc, r"fifo_bank")
        assert part.get(("kaleido_dcore", "segment-local frame"), 0) == _bank_bits(dc, r"q_fr")
        assert (kind == "delta_stage") == (_bank_bits(dc, r"fifo_bank") > 0)
    assert part[acc_mod, "entry registers"] == _bank_bits(acc, r"e\d+_\w+")
    if kind in ("delta_stage", "compact"):  # the word path: staged delta (D96, D99) and compact (D109)
        early = _bank_bits(acc, r"b\d+_(expect|port\d+_free|next|has_next|idle|started)|cycle")
        assert part[acc_mod, "early choice registers"] == early
        assert part[acc_mod, "word registers"] == _bank_bits(acc, r"b\d+_wreg\d+")
    assert part[acc_mod, "staging read registers"] == _bank_bits(acc, r"b\d+_staging_(addr|held)")
    assert part["kaleido_dqueue", "queue registers"] == _bank_bits(q, r"q\d+_[cp](\d+|_n)")
    assert part["kaleido_dqueue", "output register"] == _bank_bits(q, r"q_out_(desc|valid|cb|cb_last)")
    if kind == "compact":  # the replay (D120): forwarded word and flag, count, entry, overflow, replay flag
        assert part["kaleido_dqueue", "replay registers"] == _bank_bits(q, r"q_rp_(fwd|fwd_word|n|ovf)|q_rp|q_ri")
    else:
        assert ("kaleido_dqueue", "replay registers") not in part
    top = CompactTop(cfg, pe="instance", choice="ext" if kind in ("delta_stage", "compact") else "self")
    name_ = {"delta_stage": "kaleido_dtop_ext", "delta": "kaleido_dtop", "compact": "kaleido_ctop_ext"}[kind]
    frag = Fragment.get(top, None)
    delays = {n: f for f, n, *_ in frag.subfragments if isinstance(f, Instance)}
    sr = delays["out_tile_sr"].parameters
    assert part[name_, "out_tile delay"] == int(sr["WIDTH"]) * int(sr["DEPTH"])


def test_area_by_hand_and_what_is_new():
    """tiny-8x8 as delta (R = C = 8, B = 2, d = 2, G = 8, 256 tokens, K = 64, N = 256, a 1 KiB stage): staging 8
    macros (per band and band row) of S x XW = 4 x 2 words of 32 x 9 bits; no weight copy (the stage's one buffer);
    tables: the queues' 4 x 64 x 16 decisions, dcore's tile tables 2 x 1,024 x 54 (2 class + 5 column-block + 4 x 8
    token bits + 3 bits of the segment's count bank, D104, + 2 of its residue mod 3, D115, + 8 of the chunk's first
    token, the staged core's segment-local D addresses, D125, the default since D132, + 2 of its sub-slot, 0 .. 2 =
    ceil(8 / 3) - 1, D138's segment-slot ring), row FIFO 2 x 8 x 237 (10
    address: the way's bit and 9 in the way, D107, + 3 bank + 8 x 28), seen bits 6 x 512 (a bank per D buffer, D104,
    3 since D115, and per way of d = 2, D108), decision copies 2 x 256 x 16 (on V = 2 lanes 2 x 2 banks of 128,
    D112), token chunks 256 x 16 (8 chunk bits, D104, and 8 of the chunk's first token, D125, D132) and the issue
    gate's copy of the chunks, 256 x 8 (D126, on the staged core since D129)."""
    cfg, tech = load_config(TINY_DELTA), load_tech(16)
    b = area_breakdown(cfg, tech)["breakdown"]
    um = 1e-6
    assert b["ctrl_staging"] == pytest.approx(8 * 8 * 288 * tech.a("sram_bit") * um)
    assert b["ctrl_weight_copies"] == 0
    tables = 4 * 64 * 16 + 2 * 1024 * 54 + 2 * 8 * 237 + 6 * 512 + 2 * 256 * 16 + 256 * 16 + 256 * 8
    seen = controllers.part(cfg, "kaleido_dcore", "seen bits")
    assert (seen["count"], seen["depth"]) == (6, 512)
    assert b["ctrl_tables"] == pytest.approx(tables * tech.a("sram_bit") * um)
    # compact (D109): one weight buffer, no copy; its bands' word registers in band_weight_lanes: 3 words of
    # 2 B = 4 channels x C = 8 columns x 8 bits per band, 2 bands = 1,536 bits, which the register test finds in
    # the design (b{b}_wreg{i})
    tc = load_config(TINY_COMPACT)
    c = area_breakdown(tc, tech)["breakdown"]
    assert c["ctrl_weight_copies"] == 0 and controllers.weight_copies(tc) == 1
    assert controllers.part(tc, "kaleido_caccel", "word registers")["bits"] == 3 * 4 * 8 * 8 * 2
    assert controllers.part(tc, "kaleido_caccel", "w")["charged"] == "sram_weight"
    # unstaged delta keeps a copy per band (D91), each charged as the weight SRAM it stands for (16 KiB)
    ud = CONFIGS["tiny-delta-unstaged"]()
    u = area_breakdown(ud, tech)["breakdown"]
    assert u["ctrl_weight_copies"] == pytest.approx((ud.compact_bands - 1) * ud.weight_sram_kib * 8192
                                                    * tech.a("sram_bit") * um)
    # what was charged before D101 stays where it was: the X buffer is the input SRAM's role, the stage's weight
    # buffer the weight SRAM's, the word registers band_weight_lanes'
    old = {p["part"]: p["charged"] for p in controllers.inventory(load_config(BALANCED))}
    assert old["x"] == "sram_input" and old["w"] == "sram_weight" and old["wstage"] == "sram_wstage"
    assert old["word registers"] == "band_weight_lanes" and old["desc"] is None
    # the similarity front (D103), listed, not charged: on tiny-8x8 as compact 256 tokens x KW = 16 words (K = 64
    # over P = 32 lanes, 2 words, + G = 8 word-aligned groups -> 16), raw X 32 x 8 bits, effective values 32 x 9
    # bits (4,096 x 288 = 1.125 Mbit: two macros of 2,048 words); no front on the staged controllers (tiny-8x8 as
    # delta has a stage, as balanced)
    fr = {p["part"]: p for p in controllers.inventory(load_config(TINY_COMPACT)) if p["module"] == "kaleido_cfront"}
    assert {n: (p["kind"], p["count"], p["depth"], p["width"], p["charged"]) for n, p in fr.items()} == {
        "front x": ("1rw", 1, 4096, 256, None), "effective values": ("1r1w", 2, 2048, 288, None)}
    for staged in (cfg, load_config(BALANCED)):
        assert not [p for p in controllers.inventory(staged) if p["module"].endswith("front")]


def test_lockstep_figures_unchanged():
    """The lockstep organisation has none of these controllers: its die and energy are the figures before D101
    (values of the commit before it, on the same inputs)."""
    for name, total in (("tiny-8x8", 0.18007821714999997), ("kaleido-16nm-128x128", 36.75478250079999)):
        assert area_breakdown(load_config(name))["total_mm2"] == pytest.approx(total, rel=1e-12)
    lock = with_organisation(load_config(BALANCED), "lockstep")
    assert controllers.inventory(lock) == []
    assert area_breakdown(lock)["total_mm2"] == pytest.approx(69.68826340679998, rel=1e-12)
    import tempfile
    from pathlib import Path

    from algo.trace.reader import load_trace
    from sim.engines.model import simulate_trace
    from tests.test_cli import small_trace

    with tempfile.TemporaryDirectory() as tmp:
        tr = load_trace(small_trace(Path(tmp) / "t.npz"))
    for cfg, pj in ((load_config("tiny-8x8"), 58103.324485333476), (lock, 407968.7231850052)):
        r = simulate_trace(tr, cfg)
        assert r["energy_pj"] == pytest.approx(pj, rel=1e-12)
        assert r["energy_breakdown_pj"]["controller"] == 0


def test_compact_queue_replay_accesses_by_hand():
    """The compact controller's queues (D120) on tiny-8x8 as compact: 8 tokens, one group, N = 24 (three column
    blocks), two band-tiles. The decision words (2 bytes a token, G = 8) written once and read by the two passes
    of the one scan, and at most L - 1 = 7 words again after each of the two fills (D124's wider scan, L = min(R,
    4 R / B) = 8); the replay buffer written per band-tile once and read per band-tile for the two later blocks:
    2 x 3 words of the queues' descriptor; its 520 entries (D124: 256 tokens x G = 8 / (R / B = 4) + 8)."""
    cfg = with_organisation(load_config(TINY_DELTA), "compact")
    dec = np.array([[COMPUTE]] * 4 + [[PARTIAL]] * 2 + [[REUSE]] * 2, dtype=np.int8)
    tiles = (np.array([40, 20]), np.array([0, 0]), np.array([4, 0]), np.array([0, 2]))
    a = collections.defaultdict(float)
    controllers.count_actions(a, dec, tiles, [(0, 40, "f")], 24, cfg)
    assert a["ctrl_dec_bytes"] == 2 * (8 * (1 + 2) + 2 * 7)  # not 2 x 8 x (1 + 2 x 3): no rescans
    desc = controllers.sizes(cfg)["queue_desc_bits"]
    assert a["ctrl_replay_bytes"] == pytest.approx(desc / 8 * 2 * 3)
    part = {p["part"]: p for p in controllers.inventory(cfg) if p["module"] == "kaleido_dqueue"}
    assert (part["replay buffer"]["kind"], part["replay buffer"]["depth"], part["replay buffer"]["width"]) == (
        "1r1w", 520, desc)
    assert (part["decisions"]["count"], part["decisions"]["depth"]) == (8, 32)  # L = 8 banks of 256 / 8 tokens
    e = controllers.action_energies(cfg, load_tech(16))
    from sim.cost.energy import sram_access_pj

    assert e["ctrl_replay_bytes"][1] == pytest.approx(sram_access_pj(load_tech(16), 520 * desc / 8192) / 8)
    delta = collections.defaultdict(float)
    controllers.count_actions(delta, dec, tiles, [(0, 40, "f")], 24, load_config(TINY_DELTA))
    assert delta["ctrl_replay_bytes"] == 0 and delta["ctrl_dec_bytes"] == 2 * 8 * (1 + 2 * 3)
    # D127: as built, every decision bank (and compact's replay buffer) is read on every cycle the queues run, used
    # or not (hw/delta_queue.py: re = running | begin): the writes per token and band-tile, then, for 50 cycles,
    # 50 x L = 8 banks x 2 bytes and 50 replay words; delta's queues 50 x R / B = 4 banks x 2 bytes, no replay
    b = collections.defaultdict(float)
    controllers.count_actions(b, dec, tiles, [(0, 40, "f")], 24, cfg, queue_reads=False)
    assert b["ctrl_dec_bytes"] == 2 * 8 and b["ctrl_replay_bytes"] == pytest.approx(desc / 8 * 2)
    controllers.queue_read_actions(b, 50, cfg)
    assert b["ctrl_dec_bytes"] == 2 * 8 + 50 * 8 * 2 and b["ctrl_replay_bytes"] == pytest.approx(desc / 8 * (2 + 50))
    d = collections.defaultdict(float)
    controllers.count_actions(d, dec, tiles, [(0, 40, "f")], 24, load_config(TINY_DELTA), queue_reads=False)
    controllers.queue_read_actions(d, 50, load_config(TINY_DELTA))
    assert d["ctrl_dec_bytes"] == 2 * 8 + 50 * 4 * 2 and d["ctrl_replay_bytes"] == 0


def test_controller_accesses_by_hand():
    """One batch element on tiny-8x8 as delta (staged): 8 tokens, one group of 40 channels on ``f``, N = 8 (one column
    block). Decisions: tokens 0-3 COMPUTE, 4-5 PARTIAL, 6-7 REUSE. Band-tiles (given): one of 4 COMPUTE rows x 40
    slots, one PAIRED of 2 PARTIAL rows x 20 slots."""
    cfg = load_config(TINY_DELTA)
    dec = np.array([[COMPUTE]] * 4 + [[PARTIAL]] * 2 + [[REUSE]] * 2, dtype=np.int8)
    tiles = (np.array([40, 20]), np.array([0, 0]), np.array([4, 0]), np.array([0, 2]))
    a = collections.defaultdict(float)
    controllers.count_actions(a, dec, tiles, [(0, 40, "f")], 8, cfg)
    # staging: each row's ceil(40 / 32) = 2 words of 32 x 9 bits = 36 bytes, written into both bands' copies:
    # 2 x 6 rows x 2 words x 36; read (D105): by the band running the band-tile, each live row's 2 words once,
    # 6 rows x 2 words x 36 (not per slot: 60 slots x 4 row macros x 36 before)
    assert a["ctrl_staging_write_bytes"] == 2 * 6 * 2 * 36 and a["ctrl_staging_read_bytes"] == 6 * 2 * 36
    # decisions (2 bytes a token): written once, read by 2 passes per column block
    assert a["ctrl_dec_bytes"] == 2 * 8 * (1 + 2)
    # dcore: tile table entries of 54 bits (42 + the segment's residue mod 3, D115, + the chunk's first token's 8,
    # segment-local D, D125, D132, + its sub-slot's 2, D138), written per band-tile (2) and read per drained row (6); row FIFO 237 bits in and
    # out per row; decision copies: both written per token, both read per command (8 tokens x 1 class)
    assert a["ctrl_tile_bytes"] == pytest.approx(54 / 8 * (2 + 6))
    assert a["ctrl_fifo_bytes"] == pytest.approx(237 / 8 * 2 * 6)
    assert a["ctrl_copy_bytes"] == 2 * 2 * (8 + 8)
    # registers: the entry (its fields but the X offsets and tokens: nrows 3, ncomp 3, width 7, paired 1, cb 5,
    # woff 6, and the stage's seg 1, sbuf 6, fsrc 11, fcount 7, fdst 6, saddr 6 = 62 bits) and the early choice's
    # E and port cycle (64) per band-tile, a token register (8 bits) per queued (token, group): 6, and (D105) the
    # band's staging read address (4 entries x 2 words: 3 bits) and held flag per read: 2 band-tiles x 2 words;
    # on d = 2 accumulate ways (D108) each drained row's way bit into its FIFO entry: 6
    assert a["ctrl_reg_bits"] == 2 * (62 + 64) + 6 * 8 + 2 * 2 * (3 + 1) + 6 * 1
    e = controllers.action_energies(cfg, load_tech(16))
    from sim.cost.energy import sram_access_pj

    assert e["ctrl_staging_read_bytes"][1] == e["ctrl_staging_write_bytes"][1] == pytest.approx(sram_access_pj(load_tech(16), 8 * 288 / 8192) / 8)
    assert e["ctrl_where_bytes"] == ("controller", 0.0)  # delta has no where table


@pytest.mark.parametrize(("shape", "ci"), [("8x8-B2-d2", 0), ("8x8-B4-d2", 1), ("8x8-B2-d2", "one-wide")])
def test_staging_accesses_counted_on_the_rtl(shape, ci):
    """`count_actions`' staging rule against ``kaleido_daccel`` run under Amaranth's simulator (tests/rtl/daccel_bench.py
    on tests/test_rtl_delta.py's seeded cases, D68's order, and tests/test_rtl_dstage.py's one group of 64 channels,
    two staging words a row): the staging macros' write and read enables counted every cycle (each a word of P = 32
    differences) equal B copies of each band-tile row's ceil(|g| / 32) words written and one copy read (D105: a read
    only for a new band-tile or word, of its live rows), counted here from the band-tiles; both in bytes equal
    `count_actions`' on the same band-tiles. The slots the bands hand the top are counted too: the reads are fewer."""
    from hw.delta_accel import DeltaAccel
    from sim.engines.band_stimulus import band_op
    from tests.rtl import daccel_bench
    from tests.test_rtl_delta import CASES, SHAPES, delta_cfg
    from tests.test_rtl_dstage import SPECIAL

    cfg = delta_cfg(*SHAPES[shape])
    case, fw, s = (SPECIAL[ci], None, 1) if isinstance(ci, str) else CASES[ci]
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s, chunk_major=False)
    dut = DeltaAccel(cfg)
    count = {"we": 0, "slots": 0}
    B = cfg.compact_bands  # noqa: N806

    def per_cycle(ctx):
        count["we"] += sum(ctx.get(p.we) for p in dut.staging_ports)
        count["slots"] += sum(ctx.get(getattr(dut.top, f"b{b}_valid")) & ctx.get(getattr(dut.top, f"b{b}_ready"))
                              for b in range(B))

    async def run_op(ctx, job, out):
        await daccel_bench.load_and_start(ctx, dut, dut, case, op, None, False, decisions=False)
        await daccel_bench.collect(ctx, cfg, dut, out, 20000, per_cycle)

    [got] = daccel_bench.simulate(dut, [None], [daccel_bench.DaccelRun()], run_op)
    assert len(dut.staging_ports) == cfg.array_rows
    widths = np.array([case.groups[t.group][1] - case.groups[t.group][0] for t in op.tiles])
    rows = np.array([len(t.tokens) for t in op.tiles])
    words = int((rows * -(-widths // 32)).sum())
    assert count["we"] == B * words and got.staging_reads == words
    assert count["slots"] == int(op.s_seq.sum()) and got.staging_reads < count["slots"] * (cfg.array_rows // B)
    # the same band-tiles through count_actions (N = C: each issued band-tile once)
    tiles = (np.array(op.s_seq), np.array([t.group for t in op.tiles]),
             np.array([int((~t.partial).sum()) for t in op.tiles]), np.array([int(t.partial.sum()) for t in op.tiles]))
    a = collections.defaultdict(float)
    controllers.count_actions(a, np.asarray(case.decisions), tiles, case.groups, cfg.array_cols, cfg)
    assert a["ctrl_staging_write_bytes"] == count["we"] * 36
    assert a["ctrl_staging_read_bytes"] == got.staging_reads * 36


def test_lane_register_writes_per_step_by_hand():
    """The combine's lane register on V output lanes (D112, D114): written once per walk step (a run of V positions
    of a frame, one class) whose lanes hold any value, not once per held value (`lane_writes`, through
    `_delta_terms`' ``combine_reg_bits``). Grid (F, H, W) = (1, 2, 4), pools of R = 4 positions (an image row), one
    group on ``w``; decisions t0-t7: COMPUTE, PARTIAL, REUSE, COMPUTE | COMPUTE, REUSE, COMPUTE, REUSE. Tokens
    that read their w neighbour (not COMPUTE, x >= 1, same pool): t1, t2, t5, t7, so the held values are t0, t1, t4,
    t6. One lane: 4 writes. V = 2, runs (t0, t1), (t2, t3), (t4, t5), (t6, t7): runs 0, 2, 3 hold (t0 and t1 in one
    run: the register takes t1's S, t1 reads t0's through the chain): 3 writes. V = 4 (runs = the pools): 2 writes.
    Two frames of the same: twice as many."""
    from sim.cost.compact_actions import _delta_terms, lane_writes

    dec = np.array([[COMPUTE], [PARTIAL], [REUSE], [COMPUTE], [COMPUTE], [REUSE], [COMPUTE], [REUSE]], dtype=np.int8)
    takes = np.zeros(8, dtype=bool)
    takes[[1, 2, 5, 7]] = True
    for v, n in ((1, 4), (2, 3), (4, 2)):
        assert lane_writes(takes, (1, 2, 4), v) == n
        assert lane_writes(np.tile(takes, 2), (2, 2, 4), v) == 2 * n
        a = collections.defaultdict(int)
        _delta_terms(a, dec, [(0, 4, "w")], 8, 0, 0, 1, 1, (1, 2, 4), 4, 28, out_lanes=v)
        assert a["combine_reg_bits"] == n * 8 * 28  # N = 8 columns of 28 acc bits per write
    # the cost's V is the core's lanes (D113): 2 on tiny-8x8 as delta, 4 on the balanced preset, or the config's
    assert [controllers.lanes(CONFIGS[n]()) for n in ("tiny-delta", "balanced", "tiny-delta-v1")] == [2, 4, 1]


def test_lanes_inventory_by_hand():
    """The lanes' macros and the built SRAM bits by hand (D114). tiny-8x8 as delta: 256 tokens, G = 8 (16-bit
    decision words), V = W = 2: the decision copies 2 x 2 banks of 128 words (the same 8,192 bits as D108's 2 x 256).
    Its 64 KiB partial-sum SRAM: words of C x acc = 8 x 28 = 224 bits, a third is 524,288 // 224 // 3 = 780 words;
    the D buffers 2 x 2 ways of 390 words, the state buffer 2 position banks of 390: 3 x 780 x 224 = 524,160 bits
    built (128 below 64 KiB); on three D buffers (D115's default) 4 x 780 x 224 = 698,880. The balanced preset (C = 128, acc = 33: 4,224-bit words; psum 3,072 KiB, state SRAM
    14,336 KiB, V = W = 4): a third is 25,165,824 // 4,224 // 3 = 1,985 words, a way or a position bank 1,985 // 4 =
    496, in macros of 128 words (the largest power of two under 1 Mbit / 4,224 = 248), 3 of them (384 words): D
    2 x 4 x 3 = 24 macros, the state buffer 4 x 3 = 12: 36 x 128 x 4,224 = 19,464,192 bits built against
    25,165,824 (D108's 1,536 of 1,920 words a D buffer; the state buffer now 1,536 too); on three D buffers (D115)
    D 3 x 4 x 3 = 36 macros: 48 x 128 x 4,224. Its state SRAM: 14,336 KiB
    over 128 column banks of 24-bit words is 38,229 words a bank, 9,557 a position bank: 512 macros of 9,557 x 24.
    D122: both configs have a difference-sum buffer, so the D buffers are it (an n-th each) and the state buffer is all
    of psum_sram_kib. tiny: 64 KiB = 2,340 words; D 2,340 // 3 = 780 a buffer, 390 a way: 6 x 390 x 224 = 524,160
    bits; the state buffer 2 position banks of 1,170 (one macro each): 2 x 1,170 x 224 = 524,160. Balanced: D
    1,024 KiB = 1,985 words, 661 a buffer, 165 a way: 12 x 165 x 4,224; the state buffer 3,072 KiB = 5,957 words, 1,489
    a position bank, 11 macros of 128: 44 x 128 x 4,224."""
    tech = load_tech(16)
    for name, copies, psum, diff, state in (
            ("tiny-delta", (4, 128, 16), 2 * 1170 * 224, 6 * 390 * 224, 0),
            ("balanced", (8, 64, 16), 44 * 128 * 4224, 12 * 165 * 4224, 512 * 9557 * 24)):
        cfg = CONFIGS[name]()
        dc = controllers.part(cfg, "kaleido_dcore", "decision copies")
        assert (dc["count"], dc["depth"], dc["width"]) == copies
        assert controllers.built_sram_bits(cfg) == ({"sram_psum": psum, "sram_diff": diff}
                                                    | ({"sram_state": state} if state else {}))
        b = area_breakdown(cfg, tech)["breakdown"]
        for k, bits in (("sram_psum", psum), ("sram_diff", diff), ("sram_state", state)):
            assert b[k] == pytest.approx(bits * tech.a("sram_bit") * 1e-6)
    # compact (D127): kaleido_combine's macros, words of 2 C acc bits, W = the largest power of two <= d dividing G.
    # tiny: 448-bit words, W = 2, state R G / W = 32 words a way, staging (64 KiB - 64 x 448 bits) // (d W x 448) =
    # 276 -> 256 words per port and way. Balanced: 8,448-bit words, W = 4, state 1,024 / 4 = 256 a way, staging
    # (3,072 KiB - 1,024 x 8,448 bits) // (16 x 8,448) = 122 -> 64: 2,112 of the 3,072 KiB.
    assert controllers.built_sram_bits(CONFIGS["tiny-compact"]()) == {"sram_psum": (2 * 32 + 4 * 256) * 448}
    assert controllers.built_sram_bits(CONFIGS["balanced-compact"]()) == {"sram_psum": (4 * 256 + 16 * 64) * 8448}
    # the lanes' datapath is inside the model's combine_unit charge (2 d ways of 3 C adders and 5 C registers,
    # sim.cost.area): on the balanced preset 4 accumulate ways (1 adder, 2 words each) and 4 lanes (2 adders, 2
    # words each) and the lane register: 12 C adders and 17 C words against 24 and 40
    word = 128 * 33
    inv = controllers.inventory(load_config(BALANCED))
    adders = sum(p["bits"] for p in inv if p["charged"] == "combine_unit" and p["kind"] == "cmp")
    assert adders == (4 + 3 * 2) * word and adders + 2 * word <= 24 * word  # + lane 0's S and Y, as D108


def test_state_sram_access_at_the_built_bank():
    """D114: the delta organisation's state SRAM is charged per access at the macro kaleido_dcombine builds: on the
    balanced preset's V = 4 lanes a position bank of 9,557 words x 24 bits (its column bank of 38,229 words over 4,
    test_lanes_inventory_by_hand), 28.0 KiB, not the column bank's 14,336 / 128 = 112 KiB; on one lane the column
    bank as built, 38,229 x 24 bits. Compact has no state SRAM macro: the column-bank rule as before."""
    from sim.cost.energy import action_energies, sram_access_pj

    tech = load_tech(16)
    for cfg, bits in ((load_config(BALANCED), 9557 * 24), (CONFIGS["balanced-v1"](), 38229 * 24)):
        assert action_energies(cfg, tech)["sram_state_read_bytes"] == (
            "sram_state", pytest.approx(sram_access_pj(tech, bits / 8192) / 8))
    comp = with_organisation(load_config(BALANCED), "compact").model_copy(update={"state_sram_kib": 14336})
    assert action_energies(comp, tech)["sram_state_write_bytes"][1] == pytest.approx(sram_access_pj(tech, 112) / 8)


def test_fifo_and_count_banks_priced_as_the_model_times_them():
    """D116's fields size what is charged: the row FIFO's d banks of ``dcore_fifo_per_port`` entries and its per-entry
    residue flops, the segment count banks and the bank bits every tile-table entry and FIFO word carries. Balanced
    preset (d = 4, three D buffers: 2 residue bits an entry). 0 (the unlimited what-if) is charged at the RTL's 8 / 8."""
    base = load_config("kaleido-16nm-128x128-balanced")

    def parts(**kw):
        return {(p["module"], p["part"]): p for p in controllers.inventory(base.model_copy(update=kw))}

    rtl, big, unlimited = parts(), parts(dcore_fifo_per_port=32, dcore_count_banks=16), parts(
        dcore_fifo_per_port=0, dcore_count_banks=0)
    fifo, big_fifo = rtl["kaleido_dcore", "row FIFO"], big["kaleido_dcore", "row FIFO"]
    assert (fifo["depth"], fifo["count"], big_fifo["depth"], big_fifo["count"]) == (8, 4, 32, 4)
    assert big_fifo["width"] == fifo["width"] + 1  # the segment's bank: log2 16 = 4 bits against 3
    assert big["kaleido_dcore", "tile table"]["width"] == rtl["kaleido_dcore", "tile table"]["width"] + 1
    # per FIFO entry its residue mod 3 (2 bits): 4 x 8 x 2 = 64, 4 x 32 x 2 = 256
    assert (rtl["kaleido_dcore", "FIFO parity"]["bits"], big["kaleido_dcore", "FIFO parity"]["bits"]) == (64, 256)
    # two counts per bank (rows listed, rows accumulated): 16 banks hold twice the bits of 8
    assert big["kaleido_dcore", "segment counts"]["bits"] == 2 * rtl["kaleido_dcore", "segment counts"]["bits"]
    assert unlimited == rtl
