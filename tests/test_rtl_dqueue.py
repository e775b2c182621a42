"""The delta organisation's band-tile queues (hw/delta_queue.py, ``kaleido_dqueue``, docs/decisions.md D93) under
Amaranth's simulator, alone and inside ``kaleido_daccel`` (``queues=True``).

Cases: tests/test_rtl_delta.py's seeded cases (every decision mix incl. paired half-width band-tiles and chunk
flushes mixing COMPUTE and PARTIAL rows, scattered and frame-coherent decisions, ``f``/``w``/``h`` groups, partial
pools, N = 11 and 5 against C = 8 with one and two column blocks per group) and its qk-like cases (two and three
axis classes, pools splitting image rows, the hand case), plus seeded random ops (grids, 1-3 groups of 1-6
channels, N 3-17, chunk frames, column-block groups), in D68's and D84's issue orders, on 8 x 8 with 2 and 4
bands, 2 bands on 4 ports and 4 x 8 with 2 bands (R / B = 4, 2, 2). Checked:

- alone, the descriptor words it hands out equal, in order, those the host path writes for the same op
  (`sim.engines.band_stimulus.band_op`'s band-tiles, from `sim.timing.compact_reference.band_tiles` and
  `band_tile_sequence`, through `hw.delta_accel_host.descriptor_word`), each in the cycle and ``done`` in the cycle
  `sim.timing.delta_accel.queue_times` gives (taken as soon as valid; several ops back to back on one queue);
- inside ``kaleido_daccel``, every row, tag, cycle and Y as tests/test_rtl_daccel.py checks them on the host path,
  against `accel_schedule` / `accel_cycles` with the queues (the golden values and the model's cycles);
- `queue_steps` and `queue_times` against a hand count.
"""

from __future__ import annotations

import numpy as np
import pytest

from algo.reuse.golden import REUSE
from hw import discard
from hw.config import load_config
from hw.delta_accel import LANES, DeltaAccel
from hw.delta_accel_host import dec_words, descriptor_word, queue_ports
from sim.engines.band_stimulus import band_op
from sim.timing.delta_accel import queue_steps, queue_times
from tests.rtl.daccel_bench import host_tiles, run_daccel
from tests.rtl.dqueue_bench import run_dqueue
from tests.test_rtl_daccel import check_run
from tests.test_rtl_delta import CASES, QK_CASES, SHAPES, _case, delta_cfg


def _job(cfg, case, fw, s, cm, lanes=None, replay=0, reach=None):
    """``(op, ports, queue)``: the host path's band-tiles, the queues' ports and `queue_steps` of one op
    (``lanes`` positions a step, default R / B; ``replay`` the descriptor buffer's entries, D120; ``reach`` the
    wider scan's positions a step, D124)."""
    fw = fw or case.grid[0]
    op = band_op(case.X, case.W, case.grid, case.groups, case.decisions, cfg, fw, s, chunk_major=cm)
    n_cb = -(-case.W.shape[1] // cfg.array_cols)
    ports = queue_ports(discard(DeltaAccel(cfg)), case.grid, case.groups, fw, n_cb, s, cm)
    queue = queue_steps(case.decisions, case.grid, cfg.array_rows, cfg.array_rows // cfg.compact_bands, fw, n_cb, s,
                        cm, lanes, replay=replay, reach=reach)
    return op, ports, queue


def _random(rng, k):
    """A seeded random op (tests/test_rtl_delta.py's ``_case``) with its chunk frames, column-block group size
    and issue order."""
    F, H, W = (int(v) for v in rng.integers([2, 1, 2], [5, 4, 7]))  # noqa: N806
    sizes = [int(v) for v in rng.integers(1, 7, size=int(rng.integers(1, 4)))]
    N = int(rng.integers(3, 18))  # noqa: N806
    axis = str(rng.choice(["f", "w", "h"] if H > 1 else ["f", "w"]))
    case, fw, s = _case(60 + k, (F, H, W), sum(sizes), N, sizes, bool(rng.integers(2)), axis,
                        [None, 1, 2][int(rng.integers(3))], int(rng.integers(1, 4)), coherent=bool(rng.integers(2)))
    return case, fw, s, bool(rng.integers(2))


def _all_cases(seed):
    rng = np.random.default_rng(seed)
    out = [(c, fw, s, cm) for c, fw, s in CASES for cm in (False, True)]
    out += [(c, 1, 2, cm) for c in QK_CASES.values() for cm in (False, True)]
    out += [(c, None, 1, cm) for c in QK_CASES.values() for cm in (False, True)]
    return out + [_random(rng, k) for k in range(8)]


@pytest.mark.parametrize(("shape", "lanes"), [(s, None) for s in SHAPES] + [("8x8-B2-d2", 1), ("8x8-B2-d2", 2)])
def test_dqueue_descriptors_equal_the_host_list_and_cycles(shape, lanes):
    cfg = delta_cfg(*SHAPES[shape])
    acc = discard(DeltaAccel(cfg))
    cases = _all_cases(93)
    jobs = [(c, *_job(cfg, c, fw, s, cm, lanes)) for c, fw, s, cm in cases]
    got = run_dqueue(cfg, [(c.decisions, ports) for c, _op, ports, _q in jobs], lanes=lanes)
    for (case, op, _ports, queue), (descs, done) in zip(jobs, got, strict=True):
        want = [descriptor_word(acc, case.groups, *t) for t in host_tiles(op)]
        assert [w for _, w in descs] == want
        _emit, pops, want_done = queue_times(*queue)
        assert [c for c, _ in descs] == pops.tolist()
        assert done == want_done


@pytest.mark.parametrize(("shape", "replay"), [("8x8-B2-d2", 64), ("8x8-B4-d2", 64), ("8x8-B4-d2", 13)])
def test_dqueue_replay_descriptors_and_cycles(shape, replay):
    # D120's replay (D68's order): the same words as the host list, each taken at the cycle `queue_times` gives on
    # `queue_steps(replay=...)`; 13 entries: the ops whose first group emits 13 band-tiles fill the buffer exactly and
    # are replayed, those of 17-30 overflow and are rescanned; s = 1 (compact's one column block a group) and the
    # cases' own s
    cfg = delta_cfg(*SHAPES[shape])
    acc = discard(DeltaAccel(cfg))
    cases = [(c, fw, s_) for c, fw, s, cm in _all_cases(93) if not cm for s_ in sorted({1, s})]
    jobs = [(c, *_job(cfg, c, fw, s, False, replay=replay)) for c, fw, s in cases]
    got = run_dqueue(cfg, [(c.decisions, ports) for c, _op, ports, _q in jobs], replay=replay)
    replayed = 0
    for (case, op, ports, queue), (descs, done) in zip(jobs, got, strict=True):
        _check_queue_run(acc, case, op, queue, descs, done)
        rescan = queue_steps(case.decisions, case.grid, cfg.array_rows, cfg.array_rows // cfg.compact_bands,
                             ports["c_fw"], ports["c_ncb"], ports["c_s"], False)
        replayed += queue[2] < rescan[2]
    assert replayed >= 2  # the replay (fewer steps than the rescans) is exercised


def _check_queue_run(acc, case, op, queue, descs, done) -> None:
    """The queue's descriptors are the host list's words, each taken at the cycle `queue_times` gives, and ``done``."""
    want = [descriptor_word(acc, case.groups, *t) for t in host_tiles(op)]
    assert [w for _, w in descs] == want
    _emit, pops, want_done = queue_times(*queue)
    assert [c for c, _ in descs] == pops.tolist()
    assert done == want_done


@pytest.mark.parametrize(("shape", "reach", "replay"), [("8x8-B2-d2", 8, 0), ("8x8-B4-d2", 4, 0), ("8x8-B4-d2", 8, 13),
                                                        ("8x8-B2-d4", 16, 64)])
def test_dqueue_wider_scan_descriptors_and_cycles(shape, reach, replay):
    # D124's wider scan: a step reads `reach` positions (at or above R / B) and stops at the one whose token fills the
    # queue; the same words as the host list, each taken at the cycle `queue_times` gives on `queue_steps(reach=...)`,
    # in D68's and D84's orders (with the replay: D68's, compact's s = 1 and the cases' own s)
    cfg = delta_cfg(*SHAPES[shape])
    acc = discard(DeltaAccel(cfg))
    cases = [(c, fw, s, cm) for c, fw, s, cm in _all_cases(124)]
    if replay:
        cases = [(c, fw, s_, False) for c, fw, s, cm in cases if not cm for s_ in sorted({1, s})]
    jobs = [(c, *_job(cfg, c, fw, s, cm, replay=replay, reach=reach)) for c, fw, s, cm in cases]
    got = run_dqueue(cfg, [(c.decisions, ports) for c, _op, ports, _q in jobs], replay=replay, reach=reach)
    fewer = 0
    for (case, op, ports, queue), (descs, done) in zip(jobs, got, strict=True):
        _check_queue_run(acc, case, op, queue, descs, done)
        narrow = queue_steps(case.decisions, case.grid, cfg.array_rows, cfg.array_rows // cfg.compact_bands,
                             ports["c_fw"], ports["c_ncb"], ports["c_s"], bool(ports["c_cm"]), replay=replay)
        fewer += queue[2] < narrow[2]
    assert fewer >= len(jobs) // 2  # the wider steps are exercised: most ops take fewer steps than R / B a step


def test_queue_steps_and_times_by_hand():
    # R = 4 positions a pool, 2 tokens a band-tile, one position a step (lanes 1); grid (1, 1, 3): one pool of 3
    # positions, one frame, one group. Codes C P C: the COMPUTE pass (steps 0-2) fills its queue at position 2
    # (step 2: emits tokens 0, 2); the PARTIAL pass (steps 3-5) queues token 1; the flush (step 6) emits it
    # alone. 7 steps.
    dec = np.array([[0], [1], [0]], dtype=np.int8)
    step, reps, n = queue_steps(dec, (1, 1, 3), 4, 2, 1, 1, 1, False, lanes=1)
    assert step.tolist() == [2, 6] and reps.tolist() == [1, 1] and n == 7
    emit, pops, done = queue_times(step, reps, n)
    # emitted at 2 and 6, taken the next cycle; the last step runs at 6, so done at max(7, 7 + 1) = 8
    assert emit.tolist() == [2, 6] and pops.tolist() == [3, 7] and done == 8
    # two column blocks in one group, D68's order: each band-tile handed out twice (taken at 3, 4 and 7, 8)
    step, reps, n = queue_steps(dec, (1, 1, 3), 4, 2, 1, 2, 2, False, lanes=1)
    assert step.tolist() == [2, 6] and reps.tolist() == [2, 2] and n == 7
    assert queue_times(step, reps, n)[1].tolist() == [3, 4, 7, 8]
    # D84's order: the chunk runs once per column block (steps 0-6, then 7-13)
    step, reps, n = queue_steps(dec, (1, 1, 3), 4, 2, 1, 2, 2, True, lanes=1)
    assert step.tolist() == [2, 6, 9, 13] and reps.tolist() == [1] * 4 and n == 14
    # the output register waits: 3 tokens C C C and one token a band-tile (R = 1 pools of one position): each
    # position its own pool; pool 0 emits at step 0 (COMPUTE pass), PARTIAL pass step 1, flush step 2 (empty)
    step, reps, n = queue_steps(np.zeros((3, 1), np.int8), (1, 1, 3), 1, 1, 1, 1, 3, False, lanes=1)
    assert step.tolist() == [0, 3, 6] and n == 9
    # handed out 3 times each (k = 3 column blocks, s = 3): band-tile 0 taken at 1, 2, 3; band-tile 1's step
    # (3) may load the register the cycle the last copy is taken (3): taken at 4, 5, 6; band-tile 2 at 6: 7, 8, 9
    emit, pops, done = queue_times(step, np.array([3, 3, 3]), n)
    assert emit.tolist() == [0, 3, 6] and pops.tolist() == list(range(1, 10)) and done == 10
    # two positions a step (lanes 2, the default R / B): C P C takes steps 0-1 (COMPUTE: {0, 1} queues token 0,
    # {2} fills: emits at step 1), 2-3 (PARTIAL: token 1), the flush at 4
    step, reps, n = queue_steps(dec, (1, 1, 3), 4, 2, 1, 1, 1, False)
    assert step.tolist() == [1, 4] and n == 5
    # P C C C: the COMPUTE step {2, 3} finds the queue at 1 (token 1) and fills it with token 2, token 3 queued
    # (step 1); PARTIAL queues token 0 (steps 2-3); the flush makes one band-tile of 3 (COMPUTE) and 0 (step 4)
    step, reps, n = queue_steps(np.array([[1], [0], [0], [0]], np.int8), (1, 1, 4), 4, 2, 1, 1, 1, False)
    assert step.tolist() == [1, 4] and n == 5


def test_dqueue_replay_forwards_the_word_written_by_the_last_scan_step():
    # One band-tile (token 0 COMPUTE, tokens 1-5 REUSE) over three column blocks, one a group: the scan's last step (the
    # flush) emits it and writes entry 0 in the cycle the first replay step's read of entry 0 is issued, so that word
    # is forwarded (`hw.delta_queue`, "Replay"); the later blocks take it at the cycles `queue_times` gives
    cfg = delta_cfg(*SHAPES["8x8-B4-d2"])
    acc = discard(DeltaAccel(cfg))
    case, _fw, _s = _case(7, (1, 1, 6), 4, 24, [4], False, "w", None, 1)
    case.decisions[1:] = REUSE
    op, ports, queue = _job(cfg, case, None, 1, False, replay=4)
    # 2 positions a step: the C pass steps 0-2, the P pass 3-5, the flush 6 (emits), two replay steps 7, 8
    assert queue[0].tolist() == [6, 7, 8] and queue[2] == 9
    [(descs, done)] = run_dqueue(cfg, [(case.decisions, ports)], replay=4)
    assert [w for _, w in descs] == [descriptor_word(acc, case.groups, *t) for t in host_tiles(op)]
    _emit, pops, want_done = queue_times(*queue)
    assert [c for c, _ in descs] == pops.tolist() and done == want_done


def test_queue_steps_replay_by_hand():
    # D120's replay: the first column block's scan (C P C as above: emissions at steps 2 and 6 of 7), then its two
    # band-tiles read back one a step for each later block (steps 7, 8 and 9, 10): 11 steps, against 3 x 7 = 21
    # rescanning
    dec = np.array([[0], [1], [0]], dtype=np.int8)
    step, reps, n = queue_steps(dec, (1, 1, 3), 4, 2, 1, 3, 1, False, lanes=1)
    assert step.tolist() == [2, 6, 9, 13, 16, 20] and n == 21
    step, reps, n = queue_steps(dec, (1, 1, 3), 4, 2, 1, 3, 1, False, lanes=1, replay=True)
    assert step.tolist() == [2, 6, 7, 8, 9, 10] and reps.tolist() == [1] * 6 and n == 11
    # taken the cycle after each emission; the register is free again the cycle of each take, so each read-back
    # step emits at once: emissions 2, 6, 7, 8, 9, 10, takes one later; done after the last take (11) at 12
    emit, pops, done = queue_times(step, reps, n)
    assert emit.tolist() == [2, 6, 7, 8, 9, 10] and pops.tolist() == [3, 7, 8, 9, 10, 11] and done == 12
    # two groups of two blocks (s = 2): the second group's read-back band-tiles are handed out twice, as the scan's
    step, reps, n = queue_steps(dec, (1, 1, 3), 4, 2, 1, 4, 2, False, lanes=1, replay=True)
    assert step.tolist() == [2, 6, 7, 8] and reps.tolist() == [2] * 4 and n == 9
    # D84's order: the chunk scanned for its first column block (steps 0-6), read back for the second (7, 8)
    step, reps, n = queue_steps(dec, (1, 1, 3), 4, 2, 1, 2, 2, True, lanes=1, replay=True)
    assert step.tolist() == [2, 6, 7, 8] and reps.tolist() == [1] * 4 and n == 9
    # a scan that finds nothing (all REUSE): nothing read back, the later blocks take no steps
    step, reps, n = queue_steps(np.full((3, 1), 2, np.int8), (1, 1, 3), 4, 2, 1, 3, 1, False, lanes=1, replay=True)
    assert step.tolist() == [] and n == 7


def test_queue_steps_reach_by_hand():
    # D120's wider scan (a what-if, not built): a step reads up to `reach` positions and stops at the one that fills
    # the queue. R = 4, 2 tokens a band-tile, reach 4. C P C: the COMPUTE step reads positions 0-2 and fills at 2
    # (step 0 emits tokens 0, 2); the PARTIAL step queues token 1 (step 1); the flush emits it (step 2): 3 steps
    dec = np.array([[0], [1], [0]], dtype=np.int8)
    step, reps, n = queue_steps(dec, (1, 1, 3), 4, 2, 1, 1, 1, False, reach=4)
    assert step.tolist() == [0, 2] and n == 3
    # C C C C: the first step fills at position 1 (emits 0, 1) and the next starts at 2, fills at 3 (emits 2, 3);
    # the PARTIAL pass one step, the empty flush one: 4 steps (5 with two positions a step)
    step, reps, n = queue_steps(np.zeros((4, 1), np.int8), (1, 1, 4), 4, 2, 1, 1, 1, False, reach=4)
    assert step.tolist() == [0, 1] and n == 4
    assert queue_steps(np.zeros((4, 1), np.int8), (1, 1, 4), 4, 2, 1, 1, 1, False)[2] == 5


def test_replay_entries_restated():
    # D124: compact's replay buffer holds the band-tiles one column block of a slice of max_tokens tokens in one
    # chunk can make, floor(max_tokens G / (R / B)) + G (at most MAX_TILES), as the model times it; delta's queues
    # have none (D93's rescans)
    from hw.compact_accel import CompactAccel
    from hw.delta_accel import MAX_TILES
    from sim.timing.compact_accel import REPLAY_ENTRIES, replay_entries
    from tests.test_rtl_compact import compact_cfg

    assert REPLAY_ENTRIES == MAX_TILES
    cfg = compact_cfg(8, 8, 2, 2)  # tiny-8x8's 256 tokens, G = 8, R / B = 4: 512 full + 8
    acc = discard(CompactAccel(cfg, queues=True))
    assert acc.queue.replay == replay_entries(cfg) == 520 and acc.geometry["replay"][:2] == ("1r1w", 520)
    assert discard(CompactAccel(cfg, max_tokens=32, queues=True)).queue.replay == 72  # 32 x 8 / 4 + 8
    assert replay_entries(load_config("kaleido-16nm-128x128-balanced").model_copy(
        update={"organisation": "compact"})) == 136  # 256 x 8 / 16 + 8
    assert discard(DeltaAccel(delta_cfg(8, 8, 2, 2), queues=True)).queue.replay == 0  # delta's: D93's rescans


def test_replay_bound_holds_and_is_reached():
    # the bound: no op of M tokens and G groups in one chunk makes more band-tiles a column block than
    # floor(M G / (R / B)) + G (`hw.compact_accel.replay_bound`); 5 COMPUTE tokens of one group at R / B = 4 make 2
    # (one full, the flush's one), the bound
    from hw.compact_accel import replay_bound
    from tests.test_rtl_compact import compact_cfg

    cfg = compact_cfg(8, 8, 2, 2)
    assert replay_bound(cfg.model_copy(update={"partial_regs": 1}), 5) == 2
    assert len(queue_steps(np.zeros((5, 1), np.int8), (1, 1, 5), 8, 4, 1, 1, 1, False)[0]) == 2
    rng = np.random.default_rng(124)
    for _ in range(200):
        F, H, W, G = (int(v) for v in rng.integers([1, 1, 1, 1], [5, 3, 5, 5]))  # noqa: N806
        if H * W > cfg.array_rows:
            continue
        dec = rng.choice(3, size=(F * H * W, G), p=rng.dirichlet([1, 1, 1])).astype(np.int8)
        n = len(queue_steps(dec, (F, H, W), 8, 4, F, 1, 1, False)[0])
        assert n <= replay_bound(cfg.model_copy(update={"partial_regs": G}), F * H * W)


def test_queue_reach_restated():
    # D124: compact's queues are built with the wider scan the model times (`queue_reach`: min(R, 4 R / B)), delta's
    # without (D93's steps of R / B); the constant restated in sim equals the RTL's
    from hw.compact_accel import CompactAccel
    from sim.timing.compact_accel import QUEUE_REACH, queue_reach
    from tests.test_rtl_compact import compact_cfg

    assert QUEUE_REACH == CompactAccel.QUEUE_REACH
    for shape, want in (((8, 8, 2, 2), 8), ((8, 8, 4, 2), 8), ((16, 4, 8, 4), 8)):  # min(R, 4 R / B) by hand
        cfg = compact_cfg(*shape)
        assert discard(CompactAccel(cfg, queues=True)).queue.reach == queue_reach(cfg) == want
    assert queue_reach(load_config("kaleido-16nm-128x128-balanced").model_copy(
        update={"organisation": "compact"})) == 64
    assert discard(DeltaAccel(delta_cfg(8, 8, 2, 2), queues=True)).queue.reach is None


def test_host_decision_words_and_errors():
    cfg = delta_cfg(8, 8, 2, 2)
    acc = discard(DeltaAccel(cfg))
    assert dec_words(acc, np.array([[0, 1, 2], [2, 2, 1]], np.int8)) == [(0, 0b100100), (1, 0b011010)]
    with pytest.raises(ValueError, match="outside 0 .. 2"):
        dec_words(acc, np.array([[3]], np.int8))
    with pytest.raises(ValueError, match="capacity"):
        queue_ports(acc, (2, 16, 16), [(0, 3, "f")], 1, 1, 1, False)
    from hw.delta_queue import DeltaQueue

    for lanes in (3, 8):  # not a power of two; above R / B = 4
        with pytest.raises(ValueError, match="power of two up to"):
            DeltaQueue(acc, lanes=lanes)
    with pytest.raises(ValueError, match="queue replay = -1"):
        DeltaQueue(acc, replay=-1)
    for bad in (3, 0):  # the wider scan: a power of two, and not with lanes
        with pytest.raises(ValueError, match="reach"):
            DeltaQueue(acc, reach=bad)
    with pytest.raises(ValueError, match="reach"):
        DeltaQueue(acc, lanes=2, reach=8)


# (shape, case, issue order chunk-major); the case: an index of CASES, a QK_CASES name, or "random"
E2E = [("8x8-B2-d2", 0, False), ("8x8-B2-d2", 1, True), ("8x8-B2-d2", 2, False), ("8x8-B2-d2", 3, True),
       ("8x8-B4-d2", 0, True), ("4x8-B2-d1", 1, False), ("8x8-B2-d4", 2, True), ("8x8-B4-d2", "three-axes", False),
       ("8x8-B2-d2", "qk-int8", True)]


@pytest.mark.parametrize(("shape", "ci", "cm"), E2E, ids=[f"{s}-{c}{'-cm' if cm else ''}" for s, c, cm in E2E])
def test_daccel_fed_by_its_queues(shape, ci, cm):
    case, fw, s = (QK_CASES[ci], 1, 2) if isinstance(ci, str) else CASES[ci]
    cfg = delta_cfg(*SHAPES[shape])
    op, ports, queue = _job(cfg, case, fw, s, cm)
    [got] = run_daccel(cfg, [(case, op, ports)], queues=True)
    check_run(cfg, case, op, got, 2 * cfg.compact_bands, LANES, fw, queue)


def test_daccel_fed_by_its_queues_random_ops_back_to_back():
    cfg = delta_cfg(*SHAPES["8x8-B4-d2"])
    rng = np.random.default_rng(193)
    cases = [_random(rng, 10 + k) for k in range(4)]
    jobs = [(c, fw, *_job(cfg, c, fw, s, cm)) for c, fw, s, cm in cases]
    got = run_daccel(cfg, [(c, op, ports) for c, _fw, op, ports, _q in jobs], queues=True)
    for (case, fw, op, _ports, queue), run in zip(jobs, got, strict=True):
        check_run(cfg, case, op, run, 2 * cfg.compact_bands, LANES, fw, queue)
