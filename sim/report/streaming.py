"""What one op needs on chip: the window the cycle model assumes against what the RTL's delta op-level controller
(``kaleido_daccel_stage`` + ``kaleido_dcore``) would have to hold to run the op whole, and what a streaming
controller's window would hold (docs/decisions.md D130).

`op_needs` computes, for one op of a trace on a delta config, in bits:

- ``model``: what the cycle model assumes is on chip at once (`sim.timing.delta.plan`'s chunk of ``fw`` frames and
  group of ``s`` column blocks): the chunk's X (``fw`` frames of one pool of ``min(R, H W)`` positions, K int8 values,
  which the chunk-major issue order, D84, goes over ``s`` times; since D131 within the input SRAM's window), one
  pool's X beside its X_eff state (D68's input-SRAM need, before D131's window), the column-block group's weights (``s K min(C, N)``
  bytes in the weight SRAM), one segment's difference sums (`sim.timing.delta.diff_need_words` words of ``C
  acc_bits``) and the carried values (one pool's ``R s min(C, N)`` per axis class, `sim.timing.delta.psum_need_bytes`'
  ``outs``; a fused score op's `state_need_bytes`).
- ``whole``: the controller's structures at the op's capacity (`sim.cost.controllers.inventory` with
  ``accel_max_tokens = M``, ``accel_max_k = K``, ``accel_max_n = N``; the tile table and the host's descriptor list
  at the op's issued band-tiles instead of `hw.delta_accel.MAX_TILES`), the D buffers at the op's address (``A M
  n_cb`` words, D125's ``o_local`` 0) and the state buffer at ``A F H W n_cb`` words (`hw.delta_core.core_ports`).
- ``window``: the streaming design's (D130), at the model's frames a chunk (`sim.timing.delta.plan`, capped by
  the input SRAM and the score buffer since D131): X of two chunks (the one issued and the one
  refilled) as 9-bit differences, each group word-aligned; the decisions of two chunks and one frame more (the walk
  reads a token's successor in the next frame) in the queues' buffer and the core's two copies; the tile table and
  the host's descriptor ring at `TILE_RING` entries (bounded by the band-tiles live at once, `inflight_max`); the
  weights of one column-block group; the D buffers segment-local (D125); the carried values of one pool, as the state
  buffer per pool holds them (`hw.delta_combine.pool_state_words`, D133: ``R s`` words of ``C acc_bits`` for one
  ``f`` class).
- ``state_buffer``: words of ``C acc_bits`` (V position banks): the state buffer's at the op's address
  (``op_address_words``, `hw.delta_core.core_ports`' rule), per pool (``per_pool_words``; 0 for a fused score op,
  whose carried values are in the state SRAM) and as built (``built_words``, ``built_bits``: the inventory's
  ``state buffer`` macros, what the cost charges).

Band-tiles are counted on the op's decisions of one batch element (a head: the RTL runs one at a time) with the
model's own rules (`sim.timing.compact.compact_tiles`, `sim.timing.delta.chunk_major`; D88's slices as groups where
the op goes through the weight stage in slices, issued within their (chunk, column block) segment), the same calls
`sim.engines.model` times the op with.

    python -m sim.report.streaming [--preset NAME] [--resolution RES] [--ops a,b] REUSE [REUSE ...]

prints a JSON line of `charged_bits`, then one per (reuse, op) on the synthetic field of `sim.report.organisations.FIELD` (block 0, step 0,
8 x 8 regions). Bad arguments: one line on stderr, exit 2, nothing on stdout. Deterministic (the field's seed).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

from hw.config import BALANCED_PRESET, AcceleratorConfig

#: The usage line printed on bad arguments.
USAGE = ("usage: python -m sim.report.streaming [--preset NAME] [--resolution RES] [--ops a,b] REUSE [REUSE ...] "
         "(REUSE a fraction in [0, 1))")
#: The preset the report runs by default (the one docs/decisions.md D130 measures).
PRESET = BALANCED_PRESET
#: Bits of one queued difference (`hw.pe.X_BITS`, 9: X - X_eff[nb] of int8 and uint8) and of one decision code
#: (`hw.delta_queue.CODE_BITS`, 2), restated as `sim.cost.controllers` does.
DIFF_BITS, CODE_BITS = 9, 2
#: Tile-table and descriptor-ring entries of the streaming design (D130): a power of two above the most band-tiles
#: live at once (`inflight_max`, measured at 26-68 on the balanced block's staged ops at r = 0.8 and 0.3), the gather
#: holding band-tile n until band-tile n - TILE_RING has drained (as the staging entries' rule, D91). Built opt-in
#: since D134 (`hw.config.AcceleratorConfig.accel_tile_ring`); `staged_ring_slack` shows the gate never binds at 128.
TILE_RING = 128


def inflight_max(gather: np.ndarray, last: np.ndarray, lag: int) -> int:
    """The most band-tiles live at once in the tile table (D130): band-tile n from the cycle its descriptor is taken
    (``gather[n]``) to ``last[n] + lag`` (its last slot plus a bound on its rows' drain), both int ``[T]`` in issue
    order; the count at cycle t is the entries with ``gather <= t <= last + lag``. 0 when empty."""
    g = np.asarray(gather, dtype=np.int64)
    e = np.asarray(last, dtype=np.int64) + lag
    if not len(g):
        return 0
    ev = np.concatenate([g, e + 1])
    dv = np.concatenate([np.ones(len(g), np.int64), -np.ones(len(e), np.int64)])
    o = np.lexsort((dv, ev))  # at equal cycles the ends (-1) before the starts
    return int(np.cumsum(dv[o]).max())


def drain_lag(cfg: AcceleratorConfig) -> int:
    """A bound on the cycles from a band-tile's last slot to its last row leaving the array: the skew across the C
    columns and the drain sequencer's 3 (D91's ``max read + C + 3``) and its ``R / B`` rows on one drain port."""
    return cfg.array_cols + 3 + cfg.array_rows // cfg.compact_bands


def staged_inflight(trace, cfg: AcceleratorConfig, ops=None) -> dict[str, int]:
    """Per op name of ``trace`` (its staged delta ops, `sim.engines.model` run on ``cfg`` with the model's combine),
    `inflight_max` of the staged controller's schedule (`sim.timing.delta_accel.stage_run`, what the model times the
    op by, D121) with `drain_lag`; the largest over an op's heads. ``ops``: names to run (None: all). Wraps
    `sim.engines.model._staged_run` for the call (a measurement, not a model path)."""
    return _each_staged(trace, cfg, ops, lambda a, port: inflight_max(port["gather"], port["last"], drain_lag(cfg)),
                        max)


def ring_slack(gather, last, band, rows, cfg: AcceleratorConfig, ring: int) -> int:
    """The least cycles by which the staged controller's takes (``gather``, int ``[T]``, a schedule without a ring)
    come after the descriptor ring's drained gate would allow them (docs/decisions.md D134: band-tile n not before
    `sim.timing.compact_accel.ring_free` of band-tile n - ``ring``, from its ``last`` slot, ``band`` and ``rows``);
    >= 0: the gate never binds, so the schedule with the ring is the same one; a large int when T <= ring."""
    from sim.timing.compact_accel import ring_free

    g, lst, b, v = (np.asarray(x, dtype=np.int64) for x in (gather, last, band, rows))
    if len(g) <= ring:
        return 1 << 40
    B, d = cfg.compact_bands, cfg.drain_rows_per_cycle  # noqa: N806
    q = max(1, B // d)
    phase = b[:-ring] // d if B > d else 0
    free = lst[:-ring] + 1 + np.mod(phase - (lst[:-ring] + 1), q) + (v[:-ring] - 1) * q + cfg.array_cols + 2
    assert int(free[0]) == int(ring_free(lst[0], b[0], v[0], B, d, cfg.array_cols + 2))  # the same rule
    return int((g[ring:] - free).min())


def staged_ring_slack(trace, cfg: AcceleratorConfig, ring: int, ops=None) -> dict[str, int]:
    """Per op name of ``trace`` (as `staged_inflight`), the least `ring_slack` over its heads of the model's staged
    schedule at ``ring`` descriptor-ring entries (D134): >= 0 where the drained gate never binds."""
    return _each_staged(trace, cfg, ops, lambda a, port: ring_slack(port["gather"], port["last"], port["band"], a[1],
                                                                    cfg, ring), min)


def _each_staged(trace, cfg: AcceleratorConfig, ops, fn, pick) -> dict:
    """``fn(args, port)`` of each `sim.engines.model._staged_run` call (its arguments and result) while each op of
    ``trace`` (names in ``ops``, None: all) is simulated on ``cfg``; per op name ``pick`` of the list of values."""
    import sim.engines.model as mdl

    out: dict = {}
    seen: list = []
    orig = mdl._staged_run

    def wrap(*a, **k):
        port = orig(*a, **k)
        seen.append(fn(a, port))
        return port

    mdl._staged_run = wrap
    try:
        from sim.timing.attention import fused_pairs

        pairs = fused_pairs(trace.ops, cfg)
        p_of = {j: i for i, j in pairs.items()}
        for i, op in enumerate(trace.ops):
            if ops and op.name not in ops:
                continue
            like = [g.as_tuple() for g in trace.ops[p_of[i]].groups] if i in p_of else None
            seen.clear()
            mdl.simulate_op(op, trace.grid, trace.b_msb, cfg,
                            plan=mdl.plan_op(op, trace.grid, cfg, like, i in pairs or i in p_of))
            if seen:
                out[op.name] = pick(([out[op.name]] if op.name in out else []) + seen)
    finally:
        mdl._staged_run = orig
    return out


def issued_segments(cfg: AcceleratorConfig, dec: np.ndarray, grid, groups, K: int, N: int, fw: int, s: int,  # noqa: N803
                    b_msb: int = 4) -> tuple[np.ndarray, int]:
    """Band-tiles per walk segment in issue order (int64 ``[segments]``) of one batch element's decisions ``dec``
    (int8 ``[M, G]``), as `sim.engines.model` issues a delta op with a difference-sum buffer: `compact_tiles` per
    chunk (a pool's ``fw`` frames), `chunk_major` over the ``s``-column-block groups; where the op goes through the
    weight stage in slices (D88) its slices' band-tiles issue within their (chunk, column block) segment, which is
    the segment ``kaleido_dcore`` walks and the issue hold counts (D125, D126); and the op's issued band-tiles.
    ``fw``, ``s``: `sim.timing.delta.plan`'s (or a smaller ``fw`` to compare). ``b_msb``: the trace's
    (`algo.trace.format.Trace.b_msb`, default 4 as there; `compact_tiles` pairs PARTIAL slots at 4 or more)."""
    from sim.timing import delta as dr
    from sim.timing.compact import compact_tiles

    n_cb = -(-N // cfg.array_cols)
    cols = None
    if not dr.stages(cfg, K, groups):
        sliced = dr.stage_slices(cfg, groups)
        if sliced is not None:
            groups, cols, _ = sliced
    d = dec if cols is None else dec[:, cols]
    t, chunk = compact_tiles(d, grid, groups, cfg, fw, b_msb, chunks=True)
    order, seg = dr.chunk_major(chunk, n_cb, s)
    per = np.bincount(seg) if len(seg) else np.zeros(0, dtype=np.int64)
    return per.astype(np.int64), int(len(order))


def op_needs(cfg: AcceleratorConfig, name: str, M: int, K: int, N: int, grid, groups,  # noqa: N803
             fused: bool = False, dec: np.ndarray | None = None, b_msb: int = 4, p_op: bool = False) -> dict:
    """The op's on-chip needs (module docstring), bits unless named otherwise. ``groups``: ``[(k0, k1, axis)]``;
    ``fused``: a fused score op (one frame a chunk, carried values in the state SRAM); ``p_op``: the P op of a fused
    pair (its chunk capped by the score buffer, `sim.timing.delta.window_frames`); ``dec``: int8 ``[M, G]`` one batch
    element's decisions (None: no band-tile counts, the tile table and descriptor entries left out); ``b_msb``: as
    `issued_segments`'.

    Raises:
        sim.timing.compact.CompactError: the config cannot run the op (`sim.timing.delta.plan`)."""
    from hw.delta_combine import pool_state_words
    from sim.cost.controllers import inventory, lanes, sizes
    from sim.timing import delta as dr
    from sim.timing.delta_core import core_d_buffers, core_ways

    F, H, W = grid  # noqa: N806
    R, C = cfg.array_rows, cfg.array_cols  # noqa: N806
    acc, G = cfg.acc_bits, len(groups)  # noqa: N806
    axes = [ax for ax, _ in dr.classes(groups)]
    A = len(axes)  # noqa: N806
    V = lanes(cfg)  # noqa: N806  # the output lanes the cost charges and the model times (D113)
    n_cb = -(-N // C)
    c = min(C, N)
    pool = min(R, H * W)
    fw, s = dr.plan(cfg, F, K, N, fused, name, groups, pool, p_op)
    n = core_d_buffers(cfg)
    yb = dr.output_bytes(K)
    staged = dr.stages(cfg, K, groups)
    sl = None if staged else dr.stage_slices(cfg, groups)
    word = C * acc
    out = {"name": name, "M": M, "K": K, "N": N, "classes": A, "n_cb": n_cb, "fw": fw, "s": s, "d_buffers": n,
           "stage": "whole" if staged else (f"{len(sl[0])} slices of <= {sl[2]}" if sl else "none")}
    carried = (8 * dr.state_need_bytes(cfg, grid, K, N, groups) if fused
               else 8 * R * s * c * yb * A)
    out["model"] = {
        "x_chunk": 8 * fw * pool * K,  # the chunk the chunk-major order goes over s times
        "x_pool_and_state": 8 * 2 * pool * K,  # D68's need of the input SRAM (a pool beside X_eff)
        "w_group": 8 * s * K * c,
        "d_segment": dr.diff_need_words(cfg, fw, A) * word,
        "d_all_buffers": n * dr.diff_need_words(cfg, fw, A) * word,
        "carried": carried,
        "input_sram": cfg.input_sram_kib * 8192, "weight_sram": cfg.weight_sram_kib * 8192,
        "diff_sram": cfg.diff_sram_kib * 8192,
        "carried_sram": (cfg.state_sram_kib if fused else cfg.psum_sram_kib) * 8192,
    }
    # the controller at the op's capacity (sizes and the inventory's rules); tables per band-tile where counted
    big = cfg.model_copy(update={"accel_max_tokens": M, "accel_max_k": K, "accel_max_n": N})
    z = sizes(big)
    inv = {p["part"]: p for p in inventory(big)}
    whole = {"x (differences)": inv["x"]["bits"], "weights": inv["w"]["bits"],
             "decision copies": inv["decision copies"]["bits"], "token chunks": inv["token chunks"]["bits"],
             "queue decisions": inv["decisions"]["bits"],
             "D buffers (op address)": core_ways(cfg) * -(-(A * M) // core_ways(cfg)) * n_cb * word,
             "state buffer": A * F * H * W * n_cb * word if not fused else 8 * dr.state_need_bytes(cfg, grid, K, N,
                                                                                                     groups)}
    tile_entry = inv["tile table"]["width"]
    out["tile_entry_bits"], out["desc_bits"] = tile_entry, z["desc_bits"]
    # the streaming window at the model's frames a chunk (what this die's input SRAM or score buffer holds, D131)
    fs = fw
    win_tokens = 2 * fs * pool + pool  # two chunks and the next frame's pool (the walk's successors)
    xw = -(-K // z["P"]) + G  # a token's words of P differences, each group word-aligned (no power-of-two stride)
    window = {"x (differences)": 2 * fs * pool * xw * z["P"] * DIFF_BITS,
              "weights": 8 * s * K * c,
              "decisions (queue + 2 copies)": 3 * win_tokens * CODE_BITS * G,
              "D buffers (segment-local)": n * dr.diff_need_words(cfg, fs, A) * word,
              "carried (per pool)": (8 * dr.state_need_bytes(cfg, grid, K, N, groups) if fused
                                     else pool_state_words(cfg, grid, axes, s, V) * word)}
    # the state buffer per pool (D133) against the partial-sum SRAM's state buffer as built (the inventory's macros,
    # what sim.cost charges as sram_psum, D114, D127): the RTL holds the op's carried values where it fits
    built = {p["part"]: p for p in inventory(cfg)}["state buffer"]["bits"]
    out["state_buffer"] = {"op_address_words": V * A * F * -(-(H * W) // V) * n_cb,
                           "per_pool_words": 0 if fused else pool_state_words(cfg, grid, axes, s, V),
                           "built_words": built // word, "built_bits": built}
    ring = TILE_RING
    window["tile table"] = cfg.drain_rows_per_cycle * ring * tile_entry
    window["descriptor ring"] = ring * z["desc_bits"]
    if dec is not None:
        per_seg, issued = issued_segments(cfg, dec, grid, groups, K, N, fw, s, b_msb)
        out.update(band_tiles=issued, segments=int(len(per_seg)),
                   seg_tiles_max=int(per_seg.max()) if len(per_seg) else 0)
        whole["tile table"] = cfg.drain_rows_per_cycle * issued * tile_entry
        whole["descriptor list"] = issued * z["desc_bits"]
    out["whole"], out["window"] = whole, window
    out["whole_total"], out["window_total"] = sum(whole.values()), sum(window.values())
    return out


def charged_bits(cfg: AcceleratorConfig) -> dict[str, int]:
    """Bits the cost model charges on ``cfg``'s die for what a streaming window would hold (D101, D127): the input,
    weight, partial-sum, difference-sum, state and weight-stage SRAMs at their configured sizes, and the controller
    parts `sim.cost.controllers.inventory` charges, summed by component (``ctrl_tables`` etc.), at the controller's
    capacity as built (``accel_max_*``, `hw.delta_accel.MAX_TILES`)."""
    from sim.cost.controllers import inventory

    out = {k: getattr(cfg, f"{k}_kib") * 8192 for k in ("input_sram", "weight_sram", "psum_sram", "diff_sram",
                                                         "state_sram", "wstage_sram")}
    for p in inventory(cfg):
        if p["charged"] and p["charged"].startswith("ctrl_"):
            out[p["charged"]] = out.get(p["charged"], 0) + p["bits"]
    return out


def _parse(argv: list[str]) -> tuple[str, str | None, list[str] | None, list[float]]:
    args, opts = list(argv), {"--preset": PRESET, "--resolution": None, "--ops": None}
    while args and args[0] in opts:
        if len(args) < 2:
            raise ValueError
        opts[args[0]] = args[1]
        args = args[2:]
    reuses = [float(a) for a in args]
    if not reuses or any(not 0 <= r < 1 for r in reuses):
        raise ValueError
    ops = opts["--ops"].split(",") if opts["--ops"] else None
    return opts["--preset"], opts["--resolution"], ops, reuses


def main(argv: list[str]) -> int:
    """``[--preset NAME] [--resolution RES] [--ops a,b] REUSE ...``: one JSON line per (reuse, op) on stdout; 0, or 2
    with one line on stderr (module docstring)."""
    from algo.trace import load_trace
    from algo.workloads.synth import SynthField, synth_trace
    from hw.config import load_config
    from sim.report.organisations import FIELD
    from sim.timing.attention import fused_pairs
    from sim.timing.compact import CompactError

    if argv[:1] in (["-h"], ["--help"]):  # asked for: the usage on stdout, exit 0
        print(USAGE + "; sizes in bits; one JSON line per (reuse, op), the first the die's charged SRAM bits (module "
              "docstring)")
        return 0
    try:
        preset, resolution, only, reuses = _parse(argv)
    except (ValueError, IndexError):
        print(USAGE, file=sys.stderr)
        return 2
    try:
        cfg = load_config(preset)
    except Exception as err:  # noqa: BLE001  # an unknown preset or a bad file: one line
        print(f"streaming: {err}".splitlines()[0], file=sys.stderr)
        return 2
    if cfg.organisation != "delta":
        print(f"streaming: {cfg.name} runs the {cfg.organisation} organisation, not delta", file=sys.stderr)
        return 2
    f = FIELD
    lines = [json.dumps({"charged": charged_bits(cfg)}, sort_keys=True)]
    for r in reuses:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp, "synth.npz")
            try:
                synth_trace(path, f["model"], resolution or f["resolution"],
                            SynthField(r, f["partial"], (8, 8), f["persist"]), blocks=f["blocks"], steps=f["steps"],
                            seed=f["seed"])
            except Exception as err:  # noqa: BLE001
                print(f"streaming: {err}".splitlines()[0], file=sys.stderr)
                return 2
            tr = load_trace(path)
            pairs = fused_pairs(tr.ops, cfg)
            score, pops = set(pairs), set(pairs.values())
            for i, op in enumerate(tr.ops):
                if only and op.name not in only:
                    continue
                batch, M, K, N = op.dims if op.X is None else op.X.shape[:2] + op.W.shape[2:]  # noqa: N806
                dec = op.decisions_for(0)[0]
                try:
                    rec = op_needs(cfg, op.name, M, K, N, tr.grid, [g.as_tuple() for g in op.groups], i in score,
                                   np.asarray(dec, dtype=np.int8), tr.b_msb, i in pops)
                except CompactError as err:
                    print(f"streaming: {err}", file=sys.stderr)
                    return 2
                lines.append(json.dumps({"reuse": r, "batch": batch, **rec}, sort_keys=True))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
