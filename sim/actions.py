"""Action counts of one op: the events the energy model charges (SPEC.md section 5, issue 7).

Counts come from what the cycle model knows per op: the reuse tiling and the matcher's slots per
tile (`sim.dispatch.match_tile`, the same function the cycle model and the RTL stream use), the
per-(token, group) decisions, the GEMM shape, the array size R x C, b_msb and the config's SRAM
sizes. They are summed over the op's batch (heads). Every rule is stated here; the per-action
energies live in `sim/tech/*.toml` (`sim.energy`), so counts and energies stay apart (Accelergy
style). Counts are exact integers except where a rule says "upper bound" or "estimate".

Notation per batch element: M tokens, K channels, N outputs, G groups, grid (F, H, W), HW = H*W,
``n_cb = ceil(N / C)`` column blocks, ``acc = cfg.acc_bits``, ``ob = ceil(acc / 8)`` bytes per stored
partial or output value. A *row-slot* is one valid tile row during one issued slot; each row-slot
is seen by every valid column of the tile, and since all column blocks of an op repeat the same
position tiles, summing over column blocks multiplies row-slot counts by exactly N.

Kaleido array (reuse tiling, output-stationary, docs/architecture.md)
- Mode of a row-slot carrying channels (a, b): COMPUTE if either channel's group is COMPUTE for the
  row, PAIRED if both are PARTIAL, PARTIAL if one is, else REUSE (`sim.stream._MODE_OF`).
- ``mac8`` = COMPUTE row-slots x N = COMPUTE (token, channel) pairs x N (both multiplier halves).
- ``mac4`` = (PARTIAL + 2 PAIRED row-slots) x N = PARTIAL (token, channel) pairs x N (low half).
  (The hardware supports b_msb = 4 only, docs/decisions.md D6; the counts assume it.)
- ``pe_add`` (acc-bit adds) and register updates, per row-slot and column, following hw/pe.py:
  COMPUTE updates msb[g], lsb[g] and acc (3), PARTIAL lsb[g] and acc (2), PAIRED lsb[g_a], lsb[g_b]
  and acc (3), REUSE nothing (the registers already hold the neighbour's sums). Each update is one
  add and one acc-bit register write. The subtraction of an overwritten value on a group's first
  slot is folded into the same add (under-counts by at most one add per group per tile).
- ``pe_reg_bits`` = acc x (register updates + one ``out`` write per valid PE per tile).
- ``pe_mux_bits``: each non-REUSE row-slot switches the PE's operand selects (`OPERAND_MUX_BITS`:
  x_sel 9, w_sel 8, lo_x 4, lo_w 8, hi_x 5, hi_w 8 bits, g_sel/g_lo 2 x group_bits, first_sel/first_lo
  2), and each partial-register update reads the old value through the P:1 read mux, charged as
  acc x log2(P) 2:1 mux bits (the selected path only) -- the RTL evaluates these reads every slot and
  uses them on first overwrites; charging every update is an upper bound.
- ``pipe_reg_bits`` = R x C x issued slots x pass-through register bits of a PE (`pe_pipe_bits`):
  every issued slot, bubble slots included, passes every PE once (fill, drain and stall cycles
  carry no new slot and are taken as clock-gated: no clock-tree energy is modelled).
- ``idle_pe_cycles`` = R x C x cycles - mac8 - mac4 / 2 (PE-cycles without a full multiply:
  (1 - utilization) of the array; reported, charged only through leakage).
- Input SRAM: the array reads ``Σ_tiles rows_t x channels_t`` bytes per column block (channels_t =
  the channels the tile's slots carry, 2 for a paired slot; the stationary operand X is refetched
  for every column block), the similarity unit reads X (M K bytes) and the neighbour's effective
  operand X_eff (M K, upper bound: tokens without a neighbour counted too) and writes X_eff (M K).
  Writes also include every byte loaded from DRAM.
- Weight SRAM: each tile reads ``columns_t x channels_t`` bytes (W refetched per tile); writes = DRAM fill.
- Output SRAM: each tile writes rows x columns results of ob bytes; the vector unit reads them back once.
- Partial-result SRAM: zero for temporal (axis ``f``) groups, whose partials stay in PE registers
  (docs/decisions.md D4). A (token, group) on a spatial axis (``h``/``w``) that REUSEs reads the
  neighbour's msb and lsb partials (2 values) and one that is PARTIAL reads the msb partial (1), per
  output column, ob bytes each; each value read was written once (writes = reads). The added
  neighbour partial costs one ``pe_add``.
- Dispatcher: similarity unit ``sim_add8`` = 3 M K (subtract, absolute value as a conditional negate,
  accumulate) + 4 M G (two 16-bit threshold compares per (token, group), 2 add8 each); matcher
  ``dispatch_add8`` = G^2 x rows per tile and column block (2-bit demand sums for every group pair
  and row, an estimate of the compatibility logic's work).
- DRAM (bytes): X is read once if ``M K + HW K`` fits the input SRAM (X plus one frame of X_eff),
  else once per column block; W is read once if one column block of weights (``K x C``) fits the
  weight SRAM (column blocks are the outer loop, so the block stays resident over all its tiles),
  else once per tile; Y is written once as int8 (M N bytes, requantised by the vector unit); X_eff
  stays on chip if one frame (``HW K``) fits half the input SRAM, else it is written (M K) and read
  back (M K) through DRAM.

Dense baseline (the same R x C array of plain int8 MAC PEs: no partial registers, muxes, dispatcher
or similarity unit; raster tiling, ``ceil(M/R) x n_cb`` tiles of K slots): ``mac8_plain`` = M K N,
``pe_add`` = M K N, ``pe_reg_bits`` = acc (M K N + M N), ``pipe_reg_bits`` = R C x issued slots x
`PLAIN_PIPE_BITS`, input SRAM reads M K n_cb, weight reads ceil(M/R) K N, output M N ob each way,
DRAM by the same rules (X fits if M K does), partial SRAM zero.

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

import math

import numba
import numpy as np

from algo.golden import COMPUTE, PARTIAL, REUSE
from hw.config import AcceleratorConfig
from sim.dispatch import match_tile, schedule_positions

#: Operand-select mux bits switched per active row-slot (hw/pe.py): x_sel (9) + w_sel (8) + lo_x (4)
#: + lo_w (8) + hi_x (5) + hi_w (8); the group and first selects (2 x group_bits + 2) are added per config.
OPERAND_MUX_BITS = 9 + 8 + 4 + 8 + 5 + 8
#: Pass-through register bits of a plain int8 output-stationary MAC PE: x (8), w (8), valid, last.
PLAIN_PIPE_BITS = 8 + 8 + 1 + 1

ARRAY_ACTIONS = ("mac8", "mac4", "mac8_plain", "pe_add", "pe_reg_bits", "pe_mux_bits", "pipe_reg_bits")
SRAM_BUFFERS = ("input", "weight", "output", "partial")


def pe_pipe_bits(cfg: AcceleratorConfig) -> int:
    """Pass-through register bits of one Kaleido PE: the widths of its ``o_*`` lane ports (hw/pe.py)."""
    from hw.pe import pe_signature

    return sum(m.shape.width for name, m in pe_signature(cfg).members.items()
               if name.startswith("o_"))


def value_bytes(cfg: AcceleratorConfig) -> int:
    """Bytes of one stored partial or output value: ceil(acc_bits / 8)."""
    return -(-cfg.acc_bits // 8)


@numba.njit(cache=True)
def _tile_counts(dec, F, hw, rows, k0, k1, b_msb, order):  # noqa: N803
    """Sums over the position tiles of one GEMM (one column block).

    Returns int64 ``[8]``: issued slots, Σ rows x channels, Σ channels, Σ rows, and row-slots in
    COMPUTE, PARTIAL, PAIRED and REUSE mode.
    """
    out = np.zeros(8, dtype=np.int64)
    ng = k0.shape[0]
    K = k1[ng - 1]  # noqa: N806
    sa = np.empty(K, dtype=np.int64)
    sb = np.empty(K, dtype=np.int64)
    group_of = np.empty(K, dtype=np.int64)
    for g in range(ng):
        for k in range(k0[g], k1[g]):
            group_of[k] = g
    npb = (hw + rows - 1) // rows
    tile = np.empty((rows, ng), dtype=np.int8)
    for pb in range(npb):
        p0 = pb * rows
        p1 = min(p0 + rows, hw)
        rt = p1 - p0
        for f in range(F):
            for r in range(rt):
                tile[r] = dec[f * hw + order[p0 + r]]
            d = tile[:rt]
            n = match_tile(d, k0, k1, b_msb, sa, sb)
            out[0] += max(1, n)
            ch = 0
            for s in range(n):
                ga = group_of[sa[s]]
                ch += 1
                gb = -1
                if sb[s] >= 0:
                    gb = group_of[sb[s]]
                    ch += 1
                for r in range(rt):
                    da = d[r, ga]
                    db = d[r, gb] if gb >= 0 else 2
                    if da == 0 or db == 0:
                        out[4] += 1
                    elif da == 1 and db == 1:
                        out[6] += 1
                    elif da == 1 or db == 1:
                        out[5] += 1
                    else:
                        out[7] += 1
            out[1] += rt * ch
            out[2] += ch
            out[3] += rt
    return out


def tile_counts(decisions: np.ndarray, grid, groups, rows: int, b_msb: int) -> dict[str, int]:
    """Per-column-block sums over the reuse tiling of one GEMM (see `_tile_counts`), with the
    scheduler's position order (`sim.dispatch.schedule_positions`), as the cycle model tiles it."""
    F, H, W = grid  # noqa: N806
    k0 = np.array([g[0] for g in groups], dtype=np.int64)
    k1 = np.array([g[1] for g in groups], dtype=np.int64)
    dec = np.ascontiguousarray(decisions, dtype=np.int8)
    order = schedule_positions(dec, tuple(grid), rows)
    v = _tile_counts(dec, F, H * W, rows, k0, k1, b_msb, order)
    keys = ("issued", "rows_x_channels", "channels", "rows", "compute", "partial", "paired", "reuse")
    return {k: int(x) for k, x in zip(keys, v, strict=True)}


def _vector_counts(name: str, M: int, K: int, N: int) -> tuple[int, int]:  # noqa: N803
    """(fp16 adds, fp16 mults) of the vector unit for one batch element (module docstring)."""
    adds, mults = M * N, M * N  # requantise every output
    if name in ("qkv", "cross_q", "ffn1"):
        adds += 4 * M * K
        mults += 3 * M * K
    if name == "qk":
        adds += M * K + K * N
        mults += 2 * (M * K + K * N)
    if name in ("qk", "cross_qk"):
        adds += 7 * M * N
        mults += 6 * M * N
    if name in ("pv", "cross_pv"):
        mults += M * N + 4 * M
    if name == "ffn1":
        adds += 6 * M * N
        mults += 14 * M * N
    if name in ("o_proj", "cross_o", "ffn2"):
        adds += M * N
    return adds, mults


def _dram(cfg: AcceleratorConfig, M: int, K: int, N: int, x_extra: int, w_tiles: int) -> dict[str, int]:  # noqa: N803
    """DRAM bytes of one batch element by the module docstring's rules."""
    n_cb = -(-N // cfg.array_cols)
    in_b, w_b = cfg.input_sram_kib * 1024, cfg.weight_sram_kib * 1024
    x = M * K if M * K + x_extra <= in_b else M * K * n_cb
    w = K * N if K * min(N, cfg.array_cols) <= w_b else K * N * w_tiles
    return {"x": x, "w": w, "y": M * N}


def empty_actions() -> dict[str, float]:
    """Every action key at zero (so that per-op objects all have the same keys)."""
    keys = [*ARRAY_ACTIONS, "idle_pe_cycles", "sim_add8", "dispatch_add8",
            *(f"sram_{b}_{rw}_bytes" for b in SRAM_BUFFERS for rw in ("read", "write")),
            "dram_read_bytes", "dram_write_bytes", "vec_fp16_add", "vec_fp16_mult", "cycles"]
    return {k: 0 for k in keys}


def op_actions(name: str, decisions: list[np.ndarray], grid, groups, M: int, K: int, N: int,  # noqa: N803
               b_msb: int, cfg: AcceleratorConfig, cycles: int) -> dict[str, float]:
    """Action counts of one op under Kaleido reuse (module docstring), summed over the batch.

    Args:
        decisions: one int8 ``[M, G]`` array per batch element (`algo.golden.decide`).
        groups: ``(k_start, k_stop, axis)`` per group.
        cycles: the op's cycles from the cycle model.
    """
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    F, H, W = grid  # noqa: N806
    hw = H * W
    n_cb = -(-N // C)
    acc, ob, gb = cfg.acc_bits, value_bytes(cfg), cfg.group_bits
    lg = max(1, math.ceil(math.log2(cfg.partial_regs)))
    G = len(groups)  # noqa: N806
    widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
    spatial = np.array([ax != "f" for _, _, ax in groups])
    a = empty_actions()
    a["cycles"] = cycles
    pipe = pe_pipe_bits(cfg)
    for dec in decisions:
        t = tile_counts(dec, grid, groups, R, b_msb)
        nc, npart, npair = t["compute"], t["partial"], t["paired"]
        active = nc + npart + npair
        updates = 3 * nc + 2 * npart + 3 * npair
        a["mac8"] += nc * N
        a["mac4"] += (npart + 2 * npair) * N
        # Partial-result buffer: spatial groups only (D4); values per (token, group) x N.
        sp_reuse = int(((dec == REUSE) & spatial[None, :]).sum())
        sp_partial = int(((dec == PARTIAL) & spatial[None, :]).sum())
        part_values = (2 * sp_reuse + sp_partial) * N
        a["pe_add"] += updates * N + part_values
        a["pe_reg_bits"] += acc * (updates * N + t["rows"] * N)
        a["pe_mux_bits"] += active * N * (OPERAND_MUX_BITS + 2 * gb + 2) + (2 * nc + npart + 2 * npair) * N * acc * lg
        a["pipe_reg_bits"] += R * C * t["issued"] * n_cb * pipe
        a["sram_partial_read_bytes"] += part_values * ob
        a["sram_partial_write_bytes"] += part_values * ob
        x_eff_on_chip = hw * K <= cfg.input_sram_kib * 1024 // 2
        dram = _dram(cfg, M, K, N, hw * K, -(-hw // R) * F)  # W refetch: once per position tile
        a["sram_input_read_bytes"] += t["rows_x_channels"] * n_cb + 2 * M * K
        a["sram_input_write_bytes"] += dram["x"] + M * K
        a["sram_weight_read_bytes"] += t["channels"] * N
        a["sram_weight_write_bytes"] += dram["w"]
        a["sram_output_write_bytes"] += t["rows"] * N * ob
        a["sram_output_read_bytes"] += t["rows"] * N * ob
        a["dram_read_bytes"] += dram["x"] + dram["w"] + (0 if x_eff_on_chip else M * K)
        a["dram_write_bytes"] += dram["y"] + (0 if x_eff_on_chip else M * K)
        a["sim_add8"] += 3 * M * K + 4 * M * G
        a["dispatch_add8"] += G * G * t["rows"] * n_cb
        va, vm = _vector_counts(name, M, K, N)
        a["vec_fp16_add"] += va
        a["vec_fp16_mult"] += vm
        assert nc == int(((dec == COMPUTE) * widths).sum()), "row-slot COMPUTE count disagrees with decisions"
    a["idle_pe_cycles"] = R * C * cycles - a["mac8"] - a["mac4"] / 2
    return a


def dense_actions(name: str, batch: int, M: int, K: int, N: int, cfg: AcceleratorConfig,  # noqa: N803
                  cycles: int) -> dict[str, float]:
    """Action counts of the dense baseline (plain int8 MAC PEs, raster tiling), summed over the batch."""
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    n_cb = -(-N // C)
    tiles_cb = -(-M // R)
    acc, ob = cfg.acc_bits, value_bytes(cfg)
    a = empty_actions()
    a["cycles"] = cycles
    dram = _dram(cfg, M, K, N, 0, tiles_cb)
    va, vm = _vector_counts(name, M, K, N)
    per = {
        "mac8_plain": M * K * N, "pe_add": M * K * N, "pe_reg_bits": acc * (M * K * N + M * N),
        "pipe_reg_bits": R * C * tiles_cb * n_cb * K * PLAIN_PIPE_BITS,
        "sram_input_read_bytes": M * K * n_cb, "sram_input_write_bytes": dram["x"],
        "sram_weight_read_bytes": tiles_cb * K * N, "sram_weight_write_bytes": dram["w"],
        "sram_output_write_bytes": M * N * ob, "sram_output_read_bytes": M * N * ob,
        "dram_read_bytes": dram["x"] + dram["w"], "dram_write_bytes": dram["y"],
        "vec_fp16_add": va, "vec_fp16_mult": vm,
    }
    for k, v in per.items():
        a[k] = v * batch
    a["idle_pe_cycles"] = R * C * cycles - a["mac8_plain"]
    return a


def add_actions(a: dict, b: dict) -> dict:
    """Key-wise sum of two action objects."""
    return {k: a.get(k, 0) + b.get(k, 0) for k in dict.fromkeys([*a, *b])}
