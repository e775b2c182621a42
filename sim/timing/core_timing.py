"""Issue timeline of `hw.core.TileCore`, the core with double-buffered operand loading.

`sim.timing.cycle_model` times the array alone: operands are there when a slot issues. `TileCore`
(docs/decisions.md D25) loads each tile's operands into one of two banks while the other bank's
tile issues, P channels per load beat, one beat per cycle. When a tile's load finishes before the
previous tile's last slot, the issue timeline is the cycle model's; otherwise the array waits for
the load. This module predicts that timeline exactly (tests/test_rtl_core.py compares it with the
Amaranth simulation of the core, cycle for cycle). It does not change the cycle model.

Loader policy (what the test benches drive and this model assumes): tiles load in issue order,
tile t into bank ``t mod 2``, its ``n_t`` beats on consecutive cycles from the first cycle the
bank is free and the previous tile's beats are done; its last beat carries the descriptor.
Cycle 0 is the first load beat. With A_t the cycle of tile t's last beat and L_t the cycle of
its last slot (both accepted at the end of that cycle), from the registers of `hw.core`:

- tile t's first beat: ``B_t = max(A_{t-1} + 1, L_{t-2} + 1)`` (bank ``t mod 2`` is freed the
  cycle after tile t-2's last slot; ``A_{-1} = L_{-2} = L_{-1} = -1``), ``A_t = B_t + n_t - 1``;
- tile t's first slot: ``max(L_{t-1}, A_t) + 1`` (the bank's matcher starts on the descriptor beat
  and issues from the next cycle, and not before the other bank's last slot);
- ``L_t = max(max(L_{t-1}, A_t) + S_t, L_{t-d} + R)`` with ``S_t = max(1, slots_t)`` and the drain
  bound of the cycle model (d = ``drain_rows_per_cycle``);
- the last result row leaves at ``L_last + R + C + 1``; the core takes ``L_last + R + C + 2``
  cycles (`sim.timing.cycle_model.PIPELINE_CYCLES`).

The loader keeps up when ``A_t <= L_{t-1}`` for every t >= 1; then ``L_t`` is the cycle model's
plus ``n_0`` (the first tile's load, a prologue) and the core's cycles are
``op_cycles(...) + n_0``. It always keeps up when one beat holds a tile (``P >= K``).

`accel_timeline` adds the phases of the op-level controller `hw.accel.Accel` in front of it
(similarity pass, scheduler windows; docs/decisions.md D26).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.timing.cycle_model import PIPELINE_CYCLES, reuse_slot_sequence


@dataclass
class CoreTimeline:
    """Per-tile cycles of one op on `hw.core.TileCore` (cycle 0 = first load beat)."""

    last_beat: np.ndarray   # int64 [tiles]: A_t, cycle the tile's descriptor beat is accepted
    last_slot: np.ndarray   # int64 [tiles]: L_t, cycle the tile's last slot is accepted
    cycles: int             # L_last + R + C + PIPELINE_CYCLES (0 for no tiles)
    load_stall: int         # cycles the array waited for loads after the first tile: sum of max(0, A_t - L_{t-1})

    @property
    def keeps_up(self) -> bool:
        """True when every tile after the first was loaded before its predecessor's last slot."""
        return self.load_stall == 0


def load_beats(n_tiles: int, K: int, load_channels: int) -> np.ndarray:  # noqa: N803
    """Beats per tile when the loader writes all K channels of every tile: ``ceil(K / P)``; int64 ``[n_tiles]``.

    Raises:
        ValueError: K or load_channels below 1.
    """
    if K < 1 or load_channels < 1:
        raise ValueError(f"K = {K} and load_channels = {load_channels} must be >= 1")
    return np.full(n_tiles, -(-K // load_channels), dtype=np.int64)


def core_timeline(s_seq: np.ndarray, beats: np.ndarray, rows: int, cols: int, ports: int,
                  beat_cycles: np.ndarray | None = None) -> CoreTimeline:
    """Timeline of one op on `hw.core.TileCore` (module docstring).

    Args:
        s_seq: int64 ``[tiles]`` matcher slots per tile in issue order (0 = bubble tile, 1 cycle),
            e.g. `sim.timing.stream.Stream.slots_per_tile` or `sim.timing.cycle_model.reuse_slot_sequence`.
        beats: int64 ``[tiles]`` load beats per tile (>= 1), e.g. `load_beats`.
        rows, cols: array size R, C; ports: ``drain_rows_per_cycle`` d.
        beat_cycles: int64 ``[tiles]`` cycles between a beat's acceptance and the next beat's offer
            (default 1: beats on consecutive cycles). `hw.accel.Accel`'s banked loader offers tile
            t's beats every ``c_t`` cycles (`bank_conflicts`): ``A_t = max(A_{t-1} + c_t, L_{t-2} + 1)
            + (n_t - 1) * c_t``, which is the module docstring's rule for ``c_t = 1``.

    Returns:
        `CoreTimeline`: per-tile A_t and L_t (int64 ``[tiles]``, cycles) and the op's total cycles.

    Raises:
        ValueError: mismatched lengths or a tile with no beat.
    """
    s_seq, beats = np.asarray(s_seq, dtype=np.int64), np.asarray(beats, dtype=np.int64)
    if s_seq.shape != beats.shape or s_seq.ndim != 1:
        raise ValueError(f"s_seq {s_seq.shape} and beats {beats.shape} must be equal-length vectors")
    cyc = np.ones_like(beats) if beat_cycles is None else np.asarray(beat_cycles, dtype=np.int64)
    if cyc.shape != beats.shape or (cyc.size and cyc.min() < 1):
        raise ValueError(f"beat_cycles {cyc.shape} must match beats {beats.shape} and be >= 1")
    if beats.size and beats.min() < 1:
        raise ValueError("every tile needs at least one load beat (its descriptor)")
    n = s_seq.size
    A, L = np.zeros(n, np.int64), np.zeros(n, np.int64)  # noqa: N806
    stall = 0
    for t in range(n):
        prev_a = A[t - 1] if t >= 1 else -1
        prev_l = L[t - 1] if t >= 1 else -1
        bank_free = L[t - 2] + 1 if t >= 2 else 0
        A[t] = max(prev_a + cyc[t], bank_free) + (beats[t] - 1) * cyc[t]
        if t >= 1:
            stall += max(0, int(A[t] - prev_l))
        drain = L[t - ports] + rows if t >= ports else -(1 << 40)
        L[t] = max(max(prev_l, A[t]) + max(1, int(s_seq[t])), drain)
    cycles = int(L[-1]) + rows + cols + PIPELINE_CYCLES if n else 0
    return CoreTimeline(A, L, cycles, stall)


def bank_conflicts(tiles, rows: int) -> np.ndarray:
    """Cycles per load beat of each tile on `hw.accel.Accel`'s banked X buffer: the most rows of the
    tile whose tokens fall in one bank (bank = token mod R; one read per bank and cycle); int64 ``[tiles]``.

    Args:
        tiles: `sim.timing.dispatch.Tile` list (their ``tokens``) in issue order; rows: R (the banks).
    """
    return np.array([int(np.bincount(np.asarray(t.tokens) % rows, minlength=1).max()) for t in tiles], dtype=np.int64)


@dataclass
class AccelTimeline:
    """Phase boundaries of one op on `hw.accel.Accel` (cycle 0 = the ``start`` cycle)."""

    sim_cycles: int          # similarity pass: cycles 1 .. sim_cycles (the last one drains its two-stage pipeline)
    sched_cycles: int        # scheduler windows, from sim_cycles + 1
    tiles_start: int         # T0: the TILES_START cycle (order read of tile 0); tile 0's first bank reads at T0 + 1
    core: CoreTimeline       # the tiles on `hw.core.TileCore`, relative to T0 + 2 (core cycle 0)
    cycles: int              # T0 + 2 + core.cycles: the last result row leaves at cycle cycles - 1
    done: int                # cycle of the ``done`` pulse (= cycles: one cycle after the last row)
    bank_cycles: np.ndarray  # int64 [tiles]: cycles per load beat (`bank_conflicts`); 1 = no conflict


def accel_timeline(grid, groups, decisions: np.ndarray, N: int, rows: int, cols: int, ports: int,  # noqa: N803
                   load_channels: int, window: int) -> AccelTimeline:
    """Timeline of one op on `hw.accel.Accel`, derived from its controller's registers.

    - SIM (cycles 1 .. S + 1): per token and group, ``2 * nw_g`` cycles (phase A feeds the group's
      ``nw_g = (k1-1)//P - k0//P + 1`` buffer words to the similarity unit, phase B writes their
      effective values); ``S = M * sum_g 2 * nw_g``, plus one cycle: the pass is two stages (the
      SRAM read, then the unit and the writes), the last word's second stage runs after the counters.
    - SCHED: per window of n positions, 1 start cycle + ``L * (2n + 1) + n`` (the scheduler's
      latency, `hw.dispatcher.scheduler`; L = groups * (F - 1)), digits streamed with no stall
      (each digit's decision is read from its bank one cycle ahead, the first in the start cycle).
    - TILES from ``T0 = 1 + (S + 1) + sum(windows)``: T0 reads tile 0's positions from the order
      banks; from T0 + 1 the loader reads each beat's R rows from the X and decision banks, one read
      per bank and cycle, so a beat takes ``c_t`` cycles (`bank_conflicts`: the most rows of tile t in
      one bank) and is offered ``c_t`` cycles after the previous beat's acceptance. That is
      `core_timeline` with ``beat_cycles = c_t`` and its cycle 0 at T0 + 2 (tiles:
      `sim.timing.dispatch.reuse_tiles` in the scheduler's order, `sim.timing.cycle_model.reuse_slot_sequence`'s
      slots, ``ceil(K / P)`` beats each); the last row leaves at ``T0 + 2 + core.cycles - 1`` and
      ``done`` pulses one cycle later.

    Args:
        grid ``(F, H, W)``; groups ``(k0, k1, axis)``; decisions int8 ``[M, len(groups)]``
        (`algo.reuse.golden.decide`); N output channels; rows, cols, ports: R, C, d; load_channels P;
        window: scheduler window in positions.

    Returns:
        `AccelTimeline` (cycles). Slots use b_msb = 4, the only split the hardware has
        (`hw.config.AcceleratorConfig.msb_splits`).

    Raises:
        ValueError: a window that is not a whole number of tiles (``sim.timing.dispatch`` windows are
            ``window_tiles * rows`` positions).
    """
    from sim.timing.dispatch import reuse_tiles, schedule_positions  # dispatch imports the cycle model

    if window < rows or window % rows:
        raise ValueError(f"window = {window} positions must be a multiple of rows = {rows} (whole tiles)")
    F, H, W = (int(v) for v in grid)  # noqa: N806
    hw = H * W
    P = load_channels  # noqa: N806
    K = int(groups[-1][1])  # noqa: N806
    words = sum((k1 - 1) // P - k0 // P + 1 for k0, k1, _ in groups)
    sim_cycles = F * hw * 2 * words + 1
    L = len(groups) * (F - 1)  # noqa: N806
    sched = sum(1 + L * (2 * min(window, hw - w0) + 1) + min(window, hw - w0) for w0 in range(0, hw, window))
    t0 = 1 + sim_cycles + sched
    s = reuse_slot_sequence(decisions, (F, H, W), groups, N, rows, cols, 4, window_tiles=window // rows)
    order = schedule_positions(decisions, (F, H, W), rows, window_tiles=window // rows)
    conflicts = bank_conflicts(reuse_tiles((F, H, W), N, rows, cols, order), rows)
    core = core_timeline(s, load_beats(len(s), K, P), rows, cols, ports, beat_cycles=conflicts)
    return AccelTimeline(sim_cycles, sched, t0, core, t0 + 2 + core.cycles, t0 + 2 + core.cycles, conflicts)
