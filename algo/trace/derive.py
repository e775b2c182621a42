"""Full-model decision traces from a few captured blocks and steps (docs/decisions.md D14).

A full-model workload (every block of every denoising step) at 480p or 720p cannot be captured on a
CPU: one Wan2.1-1.3B block at 480p takes minutes (docs/capture.md). `derive_trace` captures the
decisions of chosen blocks at chosen steps (`algo.capture.capture`, decision trace) and writes a
decision trace for every requested (step, block, op) by this rule (project choice, measured below):

- **Rule "nearest (step, block)"**: the target's decisions, scales and groups are copied from the
  captured op of the same type at the captured step nearest in *noise level* (``|sigma - sigma'|``,
  ties to the later step, i.e. lower noise) and, at that step, the captured block nearest in index
  (``|b - b'|``, ties to the lower block). HunyuanVideo: blocks of the same stream kind (dual or
  single) are preferred when one was captured. Shapes and groups of the target come from the model's
  own config (`algo.capture.plan_ops`) and must equal the source's (they do inside one model: every
  block of a model has the same op shapes).
- Copying whole decision maps (not just fractions) keeps the spatial structure (which tokens reuse
  which neighbour, frame by frame) that the dispatcher's clustering and the cycle model depend on.
- Every derived op records ``derived_from: [step, block]`` in the trace (`algo.trace.OpRecord`); a
  captured op has ``derived_from`` None.

The output streams op by op (`algo.trace.TraceWriter`): only the captured ops' packed decisions live
in memory (one op of each type per captured (block, step)), not the full-model trace.

How far derived fractions are from captured ones is measured by `held_out_error` (``python -m
algo.trace.derive``): capture every block at a set of steps, derive the held-out blocks and steps from a
subset, and compare per-op reuse fractions; docs/capture.md records the table.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from algo.capture import DEFAULT_MODEL, DEFAULT_SIZE, ProgressFn, capture, plan_ops
from algo.models import CaptureError, blocks_of, family_of, get_spec, meta_model, num_blocks
from algo.reuse.stats import decision_counts
from algo.trace import OpRecord, Trace, TraceWriter

RULE = "nearest (step, block): same op type, nearest captured step in sigma (ties: later), then nearest block"


def parse_index_set(text: str | Sequence[int] | None, n: int, what: str) -> list[int] | None:
    """``"all"`` -> ``0..n-1``; ``"0,4,8"`` or a sequence -> sorted unique indices; ``""``/None -> None.

    Raises:
        CaptureError: not integers, or an index outside ``0..n-1``.
    """
    if text is None or (isinstance(text, str) and not text.strip()):
        return None
    if isinstance(text, str):
        if text.strip().lower() == "all":
            return list(range(n))
        try:
            vals = [int(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise CaptureError(f"{what} must be 'all' or comma-separated integers, got {text!r}") from None
    else:
        vals = [int(v) for v in text]
    vals = sorted(set(vals))
    if not vals or vals[0] < 0 or vals[-1] >= n:
        raise CaptureError(f"{what} must be indices in 0..{n - 1}, got {text!r}")
    return vals


def source_map(target_steps: Sequence[int], target_blocks: Sequence[int], from_steps: Sequence[int],
               from_blocks: Sequence[int], sigmas: dict[int, float], block_kinds: Sequence[str]
               ) -> dict[tuple[int, int], tuple[int, int]]:
    """The rule: ``(step, block) -> (captured step, captured block)`` for every target pair.

    Args:
        sigmas: noise level of every step index involved.
        block_kinds: kind of every block of the model (`algo.models.blocks_of`).
    """
    out = {}
    for s in target_steps:
        src_s = min(from_steps, key=lambda c: (abs(sigmas[c] - sigmas[s]), -c))
        for b in target_blocks:
            same = [c for c in from_blocks if block_kinds[c] == block_kinds[b]] or list(from_blocks)
            src_b = min(same, key=lambda c: (abs(c - b), c))
            out[(s, b)] = (src_s, src_b)
    return out


def _schedule(model: str, size: str, n_steps: int) -> dict[int, tuple[float, float]]:
    """Step index -> ``(sigma, timestep)`` as capture feeds the model (the family's schedule at its
    own shift, `algo.models.families.base.Family.schedule`)."""
    sch = family_of(get_spec(model, size)).schedule(n_steps)
    return {i: (sch.sigma(i), sch.timestep(i)) for i in range(n_steps)}


def derive_trace(out: str | Path | None, *, from_blocks: Sequence[int], from_steps: Sequence[int],
                 thetas: str | Sequence[Sequence[float]], model: str = DEFAULT_MODEL, size: str = DEFAULT_SIZE,
                 derive_blocks: Sequence[int] | None = None, derive_steps: Sequence[int] | None = None,
                 num_inference_steps: int = 50, progress: ProgressFn | None = None,
                 captured: Trace | None = None, **capture_kwargs) -> Trace:
    """Capture ``from_blocks x from_steps`` and write a decision trace for every derived (step, block).

    Args:
        out: trace file (streamed, atomic); None: return the derived trace in memory only.
        from_blocks, from_steps: what is captured (a real forward with hooks).
        thetas: threshold pairs of the decision trace (``"2,6;4,12"`` or pairs).
        derive_blocks, derive_steps: output blocks and steps (None: all of the model / schedule).
        captured: an already captured decision trace of ``from_blocks x from_steps`` (skips the
            capture; used by `held_out_error`).
        **capture_kwargs: passed to `algo.capture.capture` (``grid``, ``resolution``, ``ops``,
            ``seed``, ``weights``, ``dtype``, ``b_msb``, ...).

    Returns:
        The derived `Trace` (ops hold the packed decisions by reference to the captured ones).

    Raises:
        CaptureError: bad indices, or a captured op whose shape differs from the target's plan.
    """
    spec = get_spec(model, size)
    n_b = num_blocks(spec.name, size)
    fb = parse_index_set(from_blocks, n_b, "--from-blocks")
    fs = parse_index_set(from_steps, num_inference_steps, "--from-steps")
    if not fb or not fs:
        raise CaptureError("derivation needs at least one captured block and one captured step")
    db = parse_index_set(derive_blocks, n_b, "--derive-blocks") or list(range(n_b))
    ds = parse_index_set(derive_steps, num_inference_steps, "--derive-steps") or list(range(num_inference_steps))
    if captured is None:
        captured = capture(model=spec.name, size=size, steps=fs, blocks=fb, thetas=thetas,
                           num_inference_steps=num_inference_steps, progress=progress, **capture_kwargs)
    by_key = {(o.step, o.block, o.name): o for o in captured.ops}
    names = sorted({o.name for o in captured.ops}, key=[o.name for o in captured.ops].index)
    kinds = [k for k, _ in blocks_of(meta_model(spec.name, size))]
    sched = _schedule(spec.name, size, num_inference_steps)
    sig = {i: v[0] for i, v in sched.items()}
    src = source_map(ds, db, fs, fb, sig, kinds)
    grid, plan = plan_ops(spec.name, size, captured.grid, ds, db, names, theta=captured.ops[0].theta)
    if tuple(grid) != tuple(captured.grid):
        raise CaptureError(f"captured grid {captured.grid} differs from the plan's {grid}")
    notes = (f"derived trace: rule {RULE}; captured blocks {fb} at steps {fs}; {captured.notes}")
    steps_meta = [{"index": s, "sigma": sched[s][0], "timestep": sched[s][1]} for s in ds]
    ops: list[OpRecord] = []
    writer = None
    if out is not None:
        writer = TraceWriter(out, grid, "decisions", b_msb=captured.b_msb, model=spec.name, size=size,
                             weights=captured.weights, seed=captured.seed, steps=steps_meta, notes=notes)
    try:
        for i, tgt in enumerate(plan):
            ss, sb = src[(tgt.step, tgt.block)]
            o = by_key.get((ss, sb, tgt.name))
            if o is None:
                raise CaptureError(f"no captured {tgt.name} at step {ss}, block {sb}")
            if (o.batch, o.M, o.K, o.N) != (tgt.batch, tgt.M, tgt.K, tgt.N) or o.groups != tgt.groups:
                raise CaptureError(f"{tgt.name} of block {tgt.block}: shape or groups differ from the captured "
                                   f"block {sb}'s")
            d = dataclasses.replace(o, block=tgt.block, step=tgt.step,
                                    derived_from=None if (ss, sb) == (tgt.step, tgt.block) else (ss, sb))
            if d.derived_from is not None:  # attention states are the captured block's own (D28)
                d.attn_out = d.lse = None
            if writer is not None:
                writer.add(d)
            ops.append(d)
            if progress is not None and i % 50 == 0:
                progress(i, len(plan), f"derive step {tgt.step} block {tgt.block}")
        if writer is not None:
            writer.commit()
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    return Trace(grid=grid, ops=ops, b_msb=captured.b_msb, model=spec.name, size=size, weights=captured.weights,
                 seed=captured.seed, steps=steps_meta, notes=notes)


def _fractions(op: OpRecord, ti: int) -> np.ndarray:
    """COMPUTE/PARTIAL/REUSE fractions of one op, weighted by group width (as `algo.reuse.stats`)."""
    dec = op.decisions_for(ti)  # [batch, M, G]
    c = decision_counts(dec, [g.k_stop - g.k_start for g in op.groups]).astype(np.float64)
    return c / c.sum()


def held_out_error(model: str = DEFAULT_MODEL, size: str = "full", grid=(4, 8, 8),
                   all_steps: Sequence[int] = (0, 10, 20, 30, 35, 40, 43, 45, 47, 48, 49),
                   from_steps: Sequence[int] = (0, 40, 49), from_blocks: Sequence[int] = (0, 10, 20, 29),
                   thetas: str = "2,6;4,12;8,24", ops: str = "qkv,qk,o_proj,ffn1,ffn2", seed: int = 0,
                   progress: ProgressFn | None = None, full: Trace | None = None) -> dict:
    """Capture every block at `all_steps`, derive from ``from_blocks x from_steps``, compare held out.

    `full`: an already captured decision trace of every block at `all_steps` (skips the capture).

    Returns:
        ``{"thetas", "captured_s", "table": [{"held_out": "blocks" | "steps" | "both", "theta",
        "op", "n", "mean_abs_err": [C, P, R], "max_abs_err": [C, P, R], "mean_reuse_captured",
        "mean_reuse_derived"}]}``; errors are absolute differences of fractions (0..1) over the
        held-out (step, block) pairs of each class.
    """
    t0 = time.perf_counter()
    n_b = num_blocks(model, size)
    if full is None:
        full = capture(model=model, size=size, grid=grid, steps=all_steps, thetas=thetas, ops=ops, seed=seed,
                       progress=progress)
    cap_s = time.perf_counter() - t0
    sub = dataclasses.replace(full, ops=[o for o in full.ops if o.step in from_steps and o.block in from_blocks])
    der = derive_trace(None, from_blocks=from_blocks, from_steps=from_steps, thetas=thetas, model=model,
                       size=size, derive_steps=all_steps, derive_blocks=list(range(n_b)), captured=sub)
    truth = {(o.step, o.block, o.name): o for o in full.ops}
    rows = []
    n_t = len(full.ops[0].thetas)
    for cls in ("blocks", "steps", "both"):
        for ti in range(n_t):
            for name in ops.split(","):
                errs, rc, rd = [], [], []
                for o in der.ops:
                    if o.name != name:
                        continue
                    hb, hs = o.block not in from_blocks, o.step not in from_steps
                    if (cls == "blocks" and not (hb and not hs)) or (cls == "steps" and not (hs and not hb)) \
                            or (cls == "both" and not (hb and hs)):
                        continue
                    fc, fd = _fractions(truth[(o.step, o.block, name)], ti), _fractions(o, ti)
                    errs.append(np.abs(fc - fd))
                    rc.append(fc[2])
                    rd.append(fd[2])
                if errs:
                    e = np.array(errs)
                    rows.append({"held_out": cls, "theta": list(full.ops[0].thetas[ti]), "op": name, "n": len(errs),
                                 "mean_abs_err": e.mean(0).round(4).tolist(), "max_abs_err": e.max(0).round(4).tolist(),
                                 "mean_reuse_captured": round(float(np.mean(rc)), 4),
                                 "mean_reuse_derived": round(float(np.mean(rd)), 4)})
    return {"model": model, "size": size, "grid": list(grid), "all_steps": list(all_steps),
            "from_steps": list(from_steps), "from_blocks": list(from_blocks), "captured_s": round(cap_s, 1),
            "rule": RULE, "table": rows}


def main(argv: Sequence[str]) -> None:
    """``python -m algo.trace.derive [JSON kwargs of held_out_error] [--from-steps-sets '0,40,49;0,30,43,47,49']``:
    one capture of every block at ``all_steps``, then the held-out table for each set of captured
    steps (one JSON object per line)."""
    import inspect

    args = list(argv)
    sets = None
    if "--from-steps-sets" in args:
        i = args.index("--from-steps-sets")
        sets = [tuple(int(v) for v in part.split(",")) for part in args[i + 1].split(";")]
        del args[i:i + 2]
    kw = json.loads(args[0]) if args else {}
    d = {k: v.default for k, v in inspect.signature(held_out_error).parameters.items()}
    d.update(kw)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    t0 = time.perf_counter()
    with Progress(TextColumn("[bold]held-out capture"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.fields[label]}"), console=Console(stderr=True)) as prog:
        task = prog.add_task("capture", total=None, label="")
        full = capture(model=d["model"], size=d["size"], grid=tuple(d["grid"]), steps=d["all_steps"],
                       thetas=d["thetas"], ops=d["ops"], seed=d["seed"],
                       progress=lambda done, total, label: prog.update(task, completed=done, total=total,
                                                                       label=label))
    cap_s = time.perf_counter() - t0
    for fs in sets or [d["from_steps"]]:
        res = held_out_error(**dict(kw, from_steps=fs), full=full)
        res["captured_s"] = round(cap_s, 1)
        print(json.dumps(res), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
