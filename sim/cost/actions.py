"""Action counts of one op: the events the energy model charges (docs/spec.md §5).

Counts come from what the cycle model knows per op: the reuse tiling and the matcher's slots per
tile (the choices of `sim.timing.dispatch.match_tile`, the function the RTL stream uses, counted by runs of
equal group pairs in ``O(rows x G^2)`` per tile by `sim.timing.dispatch.pair_runs`, the walk the cycle model's
`sim.timing.dispatch.count_slots` sums;
`tile_stats`), or, without the dispatcher (``--no-dispatcher``), raster order and one slot per needed
channel, as the cycle model then times it; the per-(token, group) decisions, the GEMM shape, the array size R x C, b_msb and the config's SRAM
sizes. They are summed over the op's batch (heads). Every rule is stated here; the per-action
energies live in `sim/cost/tech/*.toml` (`sim.cost.energy`), so counts and energies stay apart (Accelergy
style). Counts are exact integers except where a rule says "upper bound" or "estimate".

Notation per batch element: M tokens, K channels, N outputs, G groups, grid (F, H, W), HW = H*W,
``n_cb = ceil(N / C)`` column blocks, ``acc = cfg.acc_bits``, ``ob = ceil(acc / 8)`` bytes per stored
partial or output value. A *row-slot* is one valid tile row during one issued slot; each row-slot
is seen by every valid column of the tile, and since all column blocks of an op repeat the same
position tiles, summing over column blocks multiplies row-slot counts by exactly N.

Kaleido array (reuse tiling, output-stationary, docs/architecture.md)
- Mode of a row-slot carrying channels (a, b): COMPUTE if either channel's group is COMPUTE for the
  row, PAIRED if both are PARTIAL, PARTIAL if one is, else REUSE (`hw.pe.MODE_OF`).
- ``mac8`` = COMPUTE row-slots x N = COMPUTE (token, channel) pairs x N (both multiplier halves).
- ``mac4`` = (PARTIAL + 2 PAIRED row-slots) x N = PARTIAL (token, channel) pairs x N (low half).
  ``mac5`` (the high half alone) is 0 here; only the delta PE uses it (`sim.cost.compact_actions`).
  (The hardware supports b_msb = 4 only, docs/decisions.md D6; the counts assume it.)
- ``pe_add`` (acc-bit adds) and register updates, per row-slot and column, following hw/pe.py:
  COMPUTE updates msb[g], lsb[g] and acc (3), PARTIAL lsb[g] and acc (2), PAIRED lsb[g_a], lsb[g_b]
  and acc (3), REUSE nothing (the registers already hold the neighbour's sums). Each update is one
  add and one acc-bit register write. The subtraction of an overwritten value on a group's first
  slot is folded into the same add (under-counts by at most one add per group per tile).
- ``pe_reg_bits`` = acc x (register updates + one ``out`` write per valid PE per tile), plus the
  partial registers' valid bits (docs/decisions.md D64): one set per partial-register update
  (updates less the accumulator's, one per active row-slot) and 2 P cleared per valid PE per tile.
- ``pe_mux_bits``: each non-REUSE row-slot switches the PE's operand selects (`hw.pe.OPERAND_MUX_BITS`:
  x_sel 9, w_sel 8, lo_x 4, lo_w 8, hi_x 5, hi_w 8 bits, g_sel/g_lo 2 x group_bits, first_sel/first_lo
  2), and each partial-register update reads the old value through the P:1 read mux, charged as
  acc x log2(P) 2:1 mux bits (the selected path only): every update reads the register it
  accumulates into (``new_lo = old_lo + ...``) or, on a first slot, the value it overwrites, so
  this is the RTL's work per update; reads on slots without an update are not charged (their
  inputs do not change).
- ``pipe_reg_bits`` = R x C x (issued slots x pass-through register bits of a PE (`pe_pipe_bits`)
  less the second-channel lanes, + pair slots x those lanes' bits (`pe_pipe_b_bits`: x_b, w_b,
  g_b, first_b, sp_b)): every issued slot, bubble slots included, passes every PE once (fill, drain and
  stall cycles carry no new slot and are taken as clock-gated: no clock-tree energy is modelled,
  the same rule as the dense array's). The second-channel lanes carry data only on slots with two
  channels; on single-channel slots they hold a constant and are taken as clock-gated by that
  slot's pair flag (docs/decisions.md D24: charging them every slot charged the no-dispatcher
  tiling, which never pairs, for lanes it never uses).
- ``idle_pe_cycles`` = R x C x cycles - mac8 - mac4 / 2 (PE-cycles without a full multiply:
  (1 - utilization) of the array; reported, charged only through leakage).
- Input SRAM: the array reads ``Σ_tiles rows_t x channels_t`` bytes per column block (channels_t =
  the channels the tile's slots carry, 2 for a paired slot; the stationary operand X is refetched
  for every column block), the similarity unit reads X (M K bytes) and the neighbour's effective
  operand X_eff (M K, upper bound: tokens without a neighbour counted too) and writes X_eff (M K),
  and writes the decision codes (2 bits per (token, group): ``ceil(M G / 4)`` bytes) that the
  dispatcher reads back once. Writes also include every byte loaded from DRAM. (The X_eff state
  lives in a slice of the input SRAM, so its accesses are charged at the input SRAM's size.)
- Weight SRAM: each tile reads ``columns_t x channels_t`` bytes (W refetched per tile); writes = DRAM fill.
- Output SRAM: each tile writes rows x columns results of ob bytes; the vector unit reads them back once.
- Partial-result SRAM: zero for temporal (axis ``f``) groups, whose partials stay in PE registers,
  and for ``w``-axis groups, whose neighbour is the PE row above: the row-to-row link passes its
  effective increments (docs/decisions.md D4). A (token, group) on axis ``h`` that REUSEs reads the
  neighbour's msb and lsb partials (2 values) and one that is PARTIAL reads the msb partial (1), per
  output column, ob bytes each; each value read was written once (writes = reads). The added
  neighbour partial (buffer or link, axes ``h`` and ``w``) costs one ``pe_add`` per value.
- Link registers (``w``-axis groups, hw/pe.py): every (token, channel) of a ``w`` group passes its
  effective (msb, lsb) increments, `hw.pe.LINK_BITS` register bits, to the PE below, per output column:
  charged as ``pe_reg_bits`` (``w`` groups never skip a tile: its ``w = 0`` rows COMPUTE).
- Dispatcher: similarity unit ``sim_add8`` = 3 M K (subtract, absolute value as a conditional negate,
  accumulate) + 4 M G (two 16-bit threshold compares per (token, group), 2 add8 each); matcher
  ``dispatch_add8`` = G^2 x rows per tile and column block (2-bit demand sums for every group pair
  and row, an estimate of the compatibility logic's work; 0 without the dispatcher).
- Similarity unit order and X_eff state (docs/decisions.md D23). The scheduler sorts the positions
  of a window by their decisions over *all* frames before the window's first tile issues, so the
  similarity unit runs ahead of the array in its own pass over X. A (token, group)'s decision needs
  only X of the token and X_eff of its neighbour along the group's axis, so the pass walks
  position-major (h, w outer, frames inner) and keeps as X_eff state, per group of width k_g:
  k_g bytes on axis ``f`` (the previous frame of the same position), F k_g on axis ``w`` (the
  previous position, every frame), W F k_g on axis ``h`` (the previous row of positions) --
  `xeff_state_bytes`, a few KiB (never a frame of HW K bytes: the array never needs X_eff, only
  X and the decisions, since PARTIAL uses lsb(X) = lsb(X_eff)). The state stays on chip if it fits
  half the input SRAM, else X_eff is written (M K) and read back (M K) through DRAM. The pass reads
  X once more from DRAM (M K bytes) unless X stays resident for the whole op (below).
- DRAM (bytes), the same rule for both designs (`dram_bytes`, D24): Y is written once as int8 (M N
  bytes, requantised by the vector unit). If X (plus the X_eff state) fits the input SRAM it is read
  once, and W once if a column block (``K x min(N, C)``) fits the weight SRAM, else once per tile.
  Otherwise the design takes the cheaper of two loop orders, each filling its SRAM with as many
  blocks of the stationary-in-SRAM operand as fit (Timeloop-style blocking over two permutations):
  (A) column blocks outer: ``s_w = floor(weight SRAM / (K min(N, C)))`` column blocks stay
  resident while the position blocks stream past, so X is read ``ceil(n_cb / s_w)`` times if one
  *row block* of X fits the input SRAM (X is then reused across the s_w column blocks), else n_cb
  times; W once (per tile if ``s_w = 0``); (B) position blocks outer: ``s_x = floor((input SRAM -
  state) / row block)`` row blocks stay resident, so X is read once (n_cb times if ``s_x = 0``)
  and W once if it all fits, else ``ceil(row_blocks / s_x)`` times (per tile if ``s_w = 0``).
  A *row block* is what a column-block change must keep to reuse X: dense, ``min(R, M) x K``;
  Kaleido, ``min(R, HW) x F x K`` -- a position block over all its frames, because the temporal
  partial sums live in the PE registers of one column block, so frames are the innermost loop of
  a column block (a true cost of D4: it can forbid X reuse across column blocks that the dense
  array gets). Row blocks: dense ``ceil(M / R)``, Kaleido ``ceil(HW / R)`` position blocks; tiles:
  dense ``ceil(M / R)``, Kaleido ``ceil(HW / R) x F`` per column block (D5: a partly filled last
  position block per frame). For an op with a ``w``-axis group, R reads ``floor(R / W) * W`` here
  (a Kaleido position block holds whole image rows, D4).
  Kaleido also has a window order (`kaleido_dram`; docs/decisions.md D34): when one scheduler
  window's X over all frames (``w x R x F x K`` bytes, plus the X_eff state; the op's window w is
  the largest up to ``scheduler_window_tiles`` that fits, `scheduler_window`)
  fits the input SRAM and ``s_w >= 1``, the similarity pass decides the window from the SRAM (no
  second DRAM read of X; the decision codes stay on chip) and the array runs its tiles for each
  group of ``s_w`` resident column blocks: X read ``ceil(n_cb / s_w)`` times, W once. It is taken
  when cheaper than the better of A and B plus the similarity pass.

Vector unit (same for both designs; fp16 adds and multiplies, per batch element):
- every op: requantise each output (1 mult + 1 add, M N);
- qkv, cross_q, ffn1 (ops fed by a norm): LayerNorm + adaLN modulation of the input, 4 adds and
  3 mults per input element (mean, variance, normalise, scale/shift) (M K);
- qk: RoPE on Q (M K) and K (K N) elements, 2 mults + 1 add each; qk, cross_qk: softmax numerators
  per score (M N): row max 1 add, subtract 1 add, exp 4 mults + 4 adds (range reduction + cubic
  polynomial, an estimate), dequantise 1 mult, scale to 255 1 mult, row sum 1 add: 7 adds, 6 mults;
- pv, cross_pv: normalise each output by 1/rowsum (1 mult, M N) + one reciprocal per row (4 mults
  Newton-Raphson, M);
- ffn1: GELU (tanh form) per output: 14 mults + 6 adds (x^3, two constants, tanh as exp + reciprocal,
  1 + t, 0.5 x) (M N);
- o_proj, cross_o, ffn2: residual add, 1 add per output (M N).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from algo.reuse.golden import COMPUTE, PARTIAL, REUSE
from hw.config import AcceleratorConfig
from hw.pe import LINK_BITS, OPERAND_MUX_BITS
from sim.cost.controllers import ACTIONS as CONTROLLER_ACTIONS
from sim.cost.tiling import TiledDecisions, group_code_counts, tile_stats
from sim.timing.delta import plan as delta_plan
from sim.timing.dispatch import position_block

#: Pass-through register bits of a plain int8 output-stationary MAC PE: x (8), w (8), valid, last.
PLAIN_PIPE_BITS = 8 + 8 + 1 + 1

ARRAY_ACTIONS = ("mac8", "mac5", "mac4", "mac8_plain", "pe_add", "pe_add_half", "pe_add_corr", "pe_reg_bits", "pe_mux_bits",
                 "pipe_reg_bits")
SRAM_BUFFERS = ("input", "weight", "output", "partial", "score", "psum", "peff", "state", "diff", "wstage")


def pe_pipe_bits(cfg: AcceleratorConfig) -> int:
    """Pass-through register bits of one Kaleido PE: the widths of its ``o_*`` lane ports (hw/pe.py),
    less the row link's (``o_lk_*``, not a pass-through: charged by `hw.pe.LINK_BITS` where it loads)."""
    from hw.pe import pe_signature

    return sum(m.shape.width for name, m in pe_signature(cfg).members.items()
               if name.startswith("o_") and not name.startswith("o_lk_"))


def pe_pipe_b_bits(cfg: AcceleratorConfig) -> int:
    """Pass-through bits of the PE's second-channel lanes (``o_x_b``, ``o_w_b``, ``o_g_b``, ``o_first_b``,
    ``o_sp_b``)."""
    from hw.pe import pe_signature

    mem = pe_signature(cfg).members
    return sum(mem[f"o_{f}"].shape.width for f in ("x_b", "w_b", "g_b", "first_b", "sp_b"))


@functools.lru_cache(maxsize=64)
def _pipe_bits(cfg: AcceleratorConfig) -> tuple[int, int]:
    """(`pe_pipe_bits`, `pe_pipe_b_bits`) of a config, kept per config (building the PE's signature
    takes about 2 ms, once per op otherwise)."""
    return pe_pipe_bits(cfg), pe_pipe_b_bits(cfg)


def value_bytes(cfg: AcceleratorConfig) -> int:
    """Bytes of one stored partial or output value: ceil(acc_bits / 8)."""
    return -(-cfg.acc_bits // 8)


#: Ops whose input goes through LayerNorm + adaLN modulation on the vector unit (module docstring).
NORM_INPUT_OPS = ("qkv", "cross_q", "ffn1")


def vector_work(name: str, M: int, K: int, N: int) -> tuple[int, int, int, int]:  # noqa: N803
    """fp16 ``(pre_adds, pre_mults, post_adds, post_mults)`` of one batch element (module docstring rules).

    Pre = before the GEMM (norm + modulation of the input, 4 adds + 3 mults per input element;
    RoPE, 1 add + 2 mults per Q and K element), post = on its M x N outputs (requantise 1 + 1;
    softmax 7 + 6 per score; 1/rowsum 1 mult per output + 4 per row; GELU 6 + 14; residual 1 add).
    `sim.timing.memory` splits the vector unit's timing by pre/post.
    """
    pre_a = pre_m = 0
    if name in NORM_INPUT_OPS:
        pre_a, pre_m = 4 * M * K, 3 * M * K
    if name == "qk":
        pre_a, pre_m = M * K + K * N, 2 * (M * K + K * N)
    post_a, post_m = M * N, M * N  # requantise every output
    if name in ("qk", "cross_qk"):
        post_a, post_m = post_a + 7 * M * N, post_m + 6 * M * N
    if name in ("pv", "cross_pv"):
        post_m += M * N + 4 * M
    if name == "ffn1":
        post_a, post_m = post_a + 6 * M * N, post_m + 14 * M * N
    if name in ("o_proj", "cross_o", "ffn2"):
        post_a += M * N
    return pre_a, pre_m, post_a, post_m


def _vector_counts(name: str, M: int, K: int, N: int) -> tuple[int, int]:  # noqa: N803
    """(fp16 adds, fp16 mults) of the vector unit for one batch element: `vector_work`, pre + post."""
    pa, pm, qa, qm = vector_work(name, M, K, N)
    return pa + qa, pm + qm


#: Integer adds per score of fused attention's softmax (`fused_vector_counts`): the max pass's compare, and in
#: the exp pass ``d = rowmax - S``, the clamp ``d < len(T)`` and the row sum ``+= T[d]``.
FUSED_INT_ADDS_PER_SCORE = 4
#: Bits of those integer adds: the exact score width (sim.timing.attention.SCORE_BYTES x 8).
SCORE_BITS = 24


def fused_vector_counts(name: str, M: int, K: int, N: int) -> dict[str, int]:  # noqa: N803
    """Vector-unit actions of one batch element of a fused attention op (sim/timing/attention.py), what the
    hardware does with the exact integer scores (docs/decisions.md D52):

    - score op (``qk``, ``cross_qk``; M queries x N keys): RoPE of Q and K as `vector_work` (fp16); per score
      `FUSED_INT_ADDS_PER_SCORE` integer adds of `SCORE_BITS` bits (running row max; ``d = rowmax - S``;
      clamp to the table; row sum) and one read of the uint8 table ``T = rint(255 exp(-c d))``
      (`algo.reuse.softmax.numerator_table`, the int8 rule of D34): no exp is computed, and the scores are
      not requantised (they stay exact in the score buffer);
    - P op (``pv``, ``cross_pv``): `vector_work` (1/rowsum, normalise, requantise; fp16).

    Returns ``{"vec_fp16_add", "vec_fp16_mult", "vec_int_add", "vec_lut_read"}``.
    """
    if name in FUSED_PAIRS:
        pa, pm, _, _ = vector_work(name, M, K, N)
        return {"vec_fp16_add": pa, "vec_fp16_mult": pm, "vec_int_add": FUSED_INT_ADDS_PER_SCORE * M * N,
                "vec_lut_read": M * N}
    va, vm = _vector_counts(name, M, K, N)
    return {"vec_fp16_add": va, "vec_fp16_mult": vm, "vec_int_add": 0, "vec_lut_read": 0}


def dram_bytes(cfg: AcceleratorConfig, M: int, K: int, N: int, tiles: int, row_blocks: int,  # noqa: N803
               row_block_bytes: int, state: int = 0) -> dict[str, int]:
    """DRAM bytes ``{"x", "w", "y", "order"}`` of one GEMM (one batch element), D24 (module docstring).

    Args:
        tiles: tiles per column block (dense ``ceil(M/R)``, Kaleido ``ceil(HW/R) x F``).
        row_blocks: blocks of rows a resident X block is counted in (dense ``ceil(M/R)``, Kaleido
            ``ceil(HW/R)`` position blocks).
        row_block_bytes: bytes of X one row block holds (dense ``min(R, M) K``, Kaleido
            ``min(R, HW) F K``).
        state: input-SRAM bytes taken by other on-chip state (Kaleido's X_eff state).

    ``order`` is ``"resident"`` (X fits), ``"A"`` (column blocks outer) or ``"B"`` (position blocks
    outer); ties go to A.
    """
    C = cfg.array_cols  # noqa: N806
    n_cb = -(-N // C)
    in_b, w_b = cfg.input_sram_kib * 1024, cfg.weight_sram_kib * 1024
    x1, w1 = M * K, K * N
    s_w = w_b // (K * min(N, C))
    w_tile = w1 * tiles
    if x1 + state <= in_b:
        return {"x": x1, "w": w1 if s_w else w_tile, "y": M * N, "order": "resident"}
    s_x = max(0, in_b - state) // row_block_bytes
    xa = (x1 * -(-n_cb // s_w) if s_x else x1 * n_cb) if s_w else x1 * n_cb
    wa = w1 if s_w else w_tile
    xb = x1 if s_x else x1 * n_cb
    wb = w1 if w1 <= w_b else (w1 * -(-row_blocks // max(1, s_x)) if s_w else w_tile)
    if xb + wb < xa + wa:
        return {"x": xb, "w": wb, "y": M * N, "order": "B"}
    return {"x": xa, "w": wa, "y": M * N, "order": "A"}


def xeff_state_bytes(groups, grid) -> int:
    """Bytes of X_eff state the similarity unit's position-major pass keeps (module docstring, D23):
    per group of width k_g, k_g on axis ``f``, F k_g on ``w``, W F k_g on ``h``."""
    F, _H, W = grid  # noqa: N806
    per = {"f": 1, "w": F, "h": W * F}
    return sum((k1 - k0) * per[ax] for k0, k1, ax in groups)


def scheduler_window(cfg: AcceleratorConfig, K: int, grid, groups=None) -> int:  # noqa: N803
    """Scheduler window (position blocks) of one op: with ``fit_scheduler_window``, the largest ``w <=
    scheduler_window_tiles`` whose X over all frames (``w x R x F x K`` bytes, R = the op's position block)
    plus the X_eff state fits the input SRAM, so that the window order applies (`kaleido_dram`);
    otherwise, or when none fits, ``scheduler_window_tiles``."""
    if not cfg.fit_scheduler_window:
        return cfg.scheduler_window_tiles
    groups = groups if groups is not None else [(0, K, "f")]
    R = position_block(grid, groups, cfg.array_rows)  # noqa: N806
    room = cfg.input_sram_kib * 1024 - xeff_state_bytes(groups, grid)
    per = min(R, grid[1] * grid[2]) * grid[0] * K
    fit = min(cfg.scheduler_window_tiles, room // per) if per else cfg.scheduler_window_tiles
    return int(fit) if fit >= 1 else cfg.scheduler_window_tiles


def kaleido_dram(cfg: AcceleratorConfig, M: int, K: int, N: int, grid, groups=None) -> dict:  # noqa: N803
    """Kaleido's DRAM traffic of one GEMM (one batch element) by the module docstring's rules.

    Returns `dram_bytes`'s ``x``, ``w``, ``y``, ``order`` plus ``sim_pass`` (the similarity unit's
    own read of X, 0 when X stays resident), ``spill`` (X_eff written and read back, each way),
    ``state`` (X_eff state bytes), ``read`` and ``write`` (totals). ``groups`` ``(k0, k1, axis)``;
    None = one temporal group of K channels (state K bytes).
    """
    F, H, W = grid  # noqa: N806
    hw = H * W
    groups = groups if groups is not None else [(0, K, "f")]
    R = position_block(grid, groups, cfg.array_rows)  # noqa: N806  positions per tile (D4)
    state = xeff_state_bytes(groups, grid)
    spill = 0 if state <= cfg.input_sram_kib * 1024 // 2 else M * K
    npb = -(-hw // R)
    d = dram_bytes(cfg, M, K, N, npb * F, npb, min(R, hw) * F * K, 0 if spill else state)
    sim_pass = 0 if d["order"] == "resident" else M * K
    # Window order: one scheduler window of X over all frames stays in the input SRAM, the similarity
    # pass decides it there (codes kept on chip) and the array runs its tiles for every resident column block.
    C = cfg.array_cols  # noqa: N806
    n_cb, s_w = -(-N // C), cfg.weight_sram_kib * 1024 // (K * min(N, C))
    win = min(scheduler_window(cfg, K, grid, groups) * R, hw) * F * K
    if d["order"] != "resident" and s_w and win + (0 if spill else state) <= cfg.input_sram_kib * 1024:
        xw = M * K * -(-n_cb // s_w)
        if xw + K * N < d["x"] + d["w"] + sim_pass:
            d, sim_pass = {"x": xw, "w": K * N, "y": M * N, "order": "window"}, 0
    return {**d, "sim_pass": sim_pass, "spill": spill, "state": state,
            "read": d["x"] + d["w"] + sim_pass + spill, "write": d["y"] + spill}


def delta_dram(cfg: AcceleratorConfig, M: int, K: int, N: int, grid, col_blocks: int) -> dict:  # noqa: N803
    """DRAM traffic of one GEMM on the delta organisation (`sim.timing.delta`, docs/decisions.md D68): its state is
    one carried output per (position, column) in the partial-sum SRAM, so a pool (R positions of one frame, ``R K``
    bytes) is the row block, as dense's ``R K`` is: X is read once if it fits the input SRAM beside the similarity
    unit's X_eff state (the previous frame of the pool's positions, ``R K`` bytes), else once per group of
    ``col_blocks`` column blocks when one frame's chunk fits the input SRAM as the chunk-major order holds it
    (`sim.timing.delta.window_frames` >= 1: two chunks of differences beside the X_eff state, D131; `plan` keeps
    the chunk within it), else once per column block; W once when a column block fits the weight SRAM,
    else once per tile. The similarity unit decides each pool as it arrives (no pass of its own, no spill).
    Returns `kaleido_dram`'s keys, ``order`` = ``"delta"``."""
    from sim.timing.delta import window_frames

    F, H, W = grid  # noqa: N806
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    pool = min(R, H * W) * K
    in_b = cfg.input_sram_kib * 1024
    n_cb = -(-N // C)
    x1 = M * K
    if x1 + pool <= in_b:
        x = x1
    else:
        x = x1 * (-(-n_cb // col_blocks) if window_frames(cfg, min(R, H * W), K) >= 1 else n_cb)
    w = K * N if cfg.weight_sram_kib * 1024 >= K * min(N, C) else K * N * -(-(H * W) // R) * F
    return {"x": x, "w": w, "y": M * N, "order": "delta", "sim_pass": 0, "spill": 0, "state": pool,
            "read": x + w, "write": M * N}


#: Fused attention pairs (sim/timing/attention.py): the score op whose output P stays on chip, and the op consuming it.
FUSED_PAIRS = {"qk": "pv", "cross_qk": "cross_pv"}


def fused_dram(cfg: AcceleratorConfig, name: str, M: int, K: int, N: int, query_tiles: int) -> dict:  # noqa: N803
    """DRAM bytes of one head of a fused attention op (sim/timing/attention.py rules), the same for both designs.

    ``qk``/``cross_qk`` (X = Q ``[M, d_h]``, W = K^T ``[d_h, keys]``): Q read once, no output (the scores
    stay in the score buffer); ``pv``/``cross_pv`` (X = P ``[M, keys]``, W = V ``[keys, d_h]``): no X (P is
    made on chip), O written once as int8. K (and V) are read once per head if both fit the weight SRAM
    (``2 keys d_h`` bytes), else once per query tile (``query_tiles``). Returns `kaleido_dram`'s keys
    (``order`` = ``"fused"``; ``sim_pass``, ``spill`` 0: the similarity unit decides P as it is made).
    """
    qk = name in FUSED_PAIRS
    keys, dh = (N, K) if qk else (K, N)
    per_tile = 2 * keys * dh > cfg.weight_sram_kib * 1024
    w = keys * dh * (query_tiles if per_tile else 1)
    x, y = (M * K, 0) if qk else (0, M * N)
    return {"x": x, "w": w, "y": y, "order": "fused", "sim_pass": 0, "spill": 0, "state": 0,
            "read": x + w, "write": y}


def empty_actions() -> dict[str, float]:
    """Every action key at zero (so that per-op objects all have the same keys)."""
    keys = [*ARRAY_ACTIONS, "idle_pe_cycles", "sim_add8", "dispatch_add8", "gather_mux_bits", "combine_add",
            "combine_reg_bits", "stage_reg_bits", "weight_word_reg_bits", *CONTROLLER_ACTIONS,
            *(f"sram_{b}_{rw}_bytes" for b in SRAM_BUFFERS for rw in ("read", "write")),
            "dram_read_bytes", "dram_write_bytes", "vec_fp16_add", "vec_fp16_mult", "vec_int_add", "vec_lut_read",
            "cycles"]
    return {k: 0 for k in keys}


def op_actions(name: str, decisions: list, grid, groups, M: int, K: int, N: int,  # noqa: N803
               b_msb: int, cfg: AcceleratorConfig, cycles: int, dispatcher: bool = True,
               fused: bool = False, tile_like=None) -> dict[str, float]:
    """Action counts of one op under Kaleido reuse (module docstring), summed over the batch.

    Args:
        decisions: per batch element, an int8 ``[M, G]`` array (`algo.reuse.golden.decide`), tiled here by
            `tile_stats` with ``dispatcher``, or a `TiledDecisions` whose stats are used as given
            (the tiling it was timed under; ``dispatcher`` is then ignored for it).
        groups: ``(k_start, k_stop, axis)`` per group.
        cycles: the op's cycles from the cycle model.
        dispatcher: False = raster tiling without pairing (``--no-dispatcher``): the matcher does
            no work (``dispatch_add8`` = 0); the similarity unit still decides.
        fused: the op is half of a fused attention pair (sim/timing/attention.py): DRAM by `fused_dram`;
            a score op writes and reads its integer scores in the score SRAM (3 + 3 bytes per score) and
            nothing in the output SRAM (the scores are its output, D83); a
            P op's X is written into the input SRAM by the vector unit (M K) instead of a DRAM fill, the
            similarity unit decides each P group on its way from the vector unit (no read of P from the
            input SRAM), and its neighbour state P_eff (read M K, written in place) lives in the P_eff buffer
            (``sram_peff``, `hw.config.AcceleratorConfig.peff_sram_kib`), or in the score SRAM on a config without one.
        tile_like: the groups whose tiling the op follows (`tile_stats`; a fused ``pv``: its ``qk``'s).
    """
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    n_cb = -(-N // C)
    acc, ob, gb = cfg.acc_bits, value_bytes(cfg), cfg.group_bits
    lg = max(1, math.ceil(math.log2(cfg.partial_regs)))
    G = len(groups)  # noqa: N806
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    spatial = np.array([ax != "f" for _, _, ax in groups])   # neighbour partial added (buffer or link)
    buffered = np.array([ax == "h" for _, _, ax in groups])  # neighbour partial from the buffer (D4)
    temporal = np.array([ax == "f" for _, _, ax in groups], dtype=np.int64)  # X_eff entry kept in place on REUSE
    w_channels = int(sum(k1 - k0 for k0, k1, ax in groups if ax == "w"))
    a = empty_actions()
    a["cycles"] = cycles
    pipe, pipe_b = _pipe_bits(cfg)
    if fused:
        block = position_block(grid, tile_like or groups, R) if cfg.organisation == "lockstep" else R
        npb = -(-(grid[1] * grid[2]) // block)
        dram = fused_dram(cfg, name, M, K, N, npb * grid[0])
    elif cfg.organisation == "delta":  # column-block groups (sim.timing.delta, D68)
        dram = delta_dram(cfg, M, K, N, grid, delta_plan(cfg, grid[0], K, N, name=name, groups=groups,
                                                              pool=min(cfg.array_rows, grid[1] * grid[2]))[1])
    else:
        dram = kaleido_dram(cfg, M, K, N, grid, groups)  # D23, D24
    sim_pass = dram["sim_pass"]  # the similarity unit's own pass over X
    p_op = fused and name not in FUSED_PAIRS
    dec_bytes = -(-M * G // 4)  # 2-bit decision codes, written by the similarity unit, read by the dispatcher
    for item in decisions:
        cc = None
        if isinstance(item, TiledDecisions):
            dec, t, disp, cc = item.decisions, item.stats, item.dispatcher, item.code_counts
        else:
            dec, t, disp = item, tile_stats(item, grid, groups, R, b_msb, dispatcher, tile_like), dispatcher
        cc = group_code_counts(dec) if cc is None else cc  # [code, group]
        nc, npart, npair = t["compute"], t["partial"], t["paired"]
        active = nc + npart + npair
        updates = 3 * nc + 2 * npart + 3 * npair
        a["mac8"] += nc * N
        a["mac4"] += (npart + 2 * npair) * N
        # Neighbour partials of spatial groups (buffer for h, link for w; D4): values per (token, group) x N.
        sp_reuse = int(cc[REUSE][spatial].sum())
        sp_partial = int(cc[PARTIAL][spatial].sum())
        part_values = (2 * sp_reuse + sp_partial) * N
        buf_values = (2 * int(cc[REUSE][buffered].sum()) + int(cc[PARTIAL][buffered].sum())) * N
        a["pe_add"] += updates * N + part_values
        a["pe_reg_bits"] += (acc * (updates * N + t["rows"] * N) + LINK_BITS * w_channels * dec.shape[0] * N
                             + (updates - active) * N + 2 * cfg.partial_regs * t["rows"] * N)
        a["pe_mux_bits"] += active * N * (OPERAND_MUX_BITS + 2 * gb + 2) + (2 * nc + npart + 2 * npair) * N * acc * lg
        a["pipe_reg_bits"] += R * C * n_cb * (t["issued"] * (pipe - pipe_b) + t["pair_slots"] * pipe_b)
        a["sram_partial_read_bytes"] += buf_values * ob
        a["sram_partial_write_bytes"] += buf_values * ob
        # X_eff state updated in place: a temporal REUSE leaves its position's entry as it is (D52)
        xeff_w = M * K - int(((dec == REUSE) * (widths * temporal)[None, :]).sum())
        if p_op:  # X_eff (P_eff) state in the score SRAM; P written by the vector unit, decided on its way in (D52)
            a["sram_input_read_bytes"] += t["rows_x_channels"] * n_cb + dec_bytes
            a["sram_input_write_bytes"] += M * K + dec_bytes
            peff = "peff" if cfg.peff_sram_kib else "score"  # its own buffer where the config has one (D58)
            a[f"sram_{peff}_read_bytes"] += M * K
            a[f"sram_{peff}_write_bytes"] += xeff_w
        else:
            a["sram_input_read_bytes"] += t["rows_x_channels"] * n_cb + 2 * M * K + dec_bytes
            a["sram_input_write_bytes"] += dram["x"] + sim_pass + xeff_w + dec_bytes
        if fused and not p_op:  # integer scores of the query tile, written on drain, read by the exp pass
            a["sram_score_write_bytes"] += 3 * M * N  # sim.timing.attention.SCORE_BYTES
            a["sram_score_read_bytes"] += 3 * M * N
        a["sram_weight_read_bytes"] += t["channels"] * N
        a["sram_weight_write_bytes"] += dram["w"]
        if not (fused and not p_op):  # a fused score op's output is its scores, in the score SRAM (D83)
            a["sram_output_write_bytes"] += t["rows"] * N * ob
            a["sram_output_read_bytes"] += t["rows"] * N * ob
        a["dram_read_bytes"] += dram["read"]
        a["dram_write_bytes"] += dram["write"]
        a["sim_add8"] += 3 * M * K + 4 * M * G
        a["dispatch_add8"] += G * G * t["rows"] * n_cb if disp else 0
        if fused:
            for k, v in fused_vector_counts(name, M, K, N).items():
                a[k] += v
        else:
            va, vm = _vector_counts(name, M, K, N)
            a["vec_fp16_add"] += va
            a["vec_fp16_mult"] += vm
        assert nc == int((cc[COMPUTE] * widths).sum()), "row-slot COMPUTE count disagrees with decisions"
    a["idle_pe_cycles"] = R * C * cycles - a["mac8"] - a["mac4"] / 2
    return a


def dense_actions(name: str, batch: int, M: int, K: int, N: int, cfg: AcceleratorConfig,  # noqa: N803
                  cycles: int, fused: bool = False) -> dict[str, float]:
    """Action counts of the dense baseline (plain int8 MAC PEs, raster tiling), summed over the batch.

    ``fused``: half of a fused attention pair (`op_actions`' rules without the similarity unit): DRAM
    by `fused_dram` with ``ceil(M / R)`` query tiles, scores 3 + 3 bytes each in the score SRAM (and none in the
    output SRAM), P
    written into the input SRAM by the vector unit."""
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    n_cb = -(-N // C)
    tiles_cb = -(-M // R)
    acc, ob = cfg.acc_bits, value_bytes(cfg)
    a = empty_actions()
    a["cycles"] = cycles
    dram = (fused_dram(cfg, name, M, K, N, tiles_cb) if fused
            else dram_bytes(cfg, M, K, N, tiles_cb, tiles_cb, min(R, M) * K))
    va, vm = _vector_counts(name, M, K, N)
    vec = fused_vector_counts(name, M, K, N) if fused else {"vec_fp16_add": va, "vec_fp16_mult": vm}
    per = {
        "mac8_plain": M * K * N, "pe_add": M * K * N, "pe_reg_bits": acc * (M * K * N + M * N),
        "pipe_reg_bits": R * C * tiles_cb * n_cb * K * PLAIN_PIPE_BITS,
        "sram_input_read_bytes": M * K * n_cb, "sram_input_write_bytes": dram["x"],
        "sram_weight_read_bytes": tiles_cb * K * N, "sram_weight_write_bytes": dram["w"],
        "sram_output_write_bytes": M * N * ob, "sram_output_read_bytes": M * N * ob,
        "dram_read_bytes": dram["x"] + dram["w"], "dram_write_bytes": dram["y"],
        **vec,
    }
    if fused and name in FUSED_PAIRS:  # the scores go to the score SRAM instead of the output SRAM (D83)
        per["sram_score_write_bytes"] = per["sram_score_read_bytes"] = 3 * M * N  # sim.timing.attention.SCORE_BYTES
        per["sram_output_write_bytes"] = per["sram_output_read_bytes"] = 0
    elif fused:
        per["sram_input_write_bytes"] = M * K
    for k, v in per.items():
        a[k] = v * batch
    a["idle_pe_cycles"] = R * C * cycles - a["mac8_plain"]
    return a


def add_actions(a: dict, b: dict) -> dict:
    """Key-wise sum of two action objects."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in dict.fromkeys([*a, *b])}
