"""Synthetic decision workloads: a deterministic decision trace for every op of chosen blocks and steps.

`synth_trace` answers "what reuse does this design need to reach X x": it writes a decision trace
(the same file format as ``kaleido capture --decisions-only``, `algo.trace`) whose ops are those a
capture of the model at that resolution records (`algo.capture.plan_ops`: shapes and channel groups
from the model's published config on the meta device; no weights, no forward pass) and whose
decisions are drawn from a stated field instead of computed from operands, so ``kaleido simulate``
runs it like any trace.

The field (per op, per batch element = head, per channel group independently):

- positions are cut into regions of ``region = (rh, rw)`` positions (h, w); every token of a region
  in one frame shares one decision per group (spatial coherence, as real reuse comes in patches);
- frame 0 draws each region's code with probabilities ``(COMPUTE, PARTIAL, REUSE) = (1 - r - p, p,
  r)``; each later frame keeps the previous frame's code of the region with probability ``persist``
  and redraws it (same probabilities) otherwise, so every frame's codes have the stated shares and
  ``persist`` sets how long a region keeps its kind (temporal coherence);
- then every token without a neighbour along a group's reuse axis (index 0 on that axis: frame 0
  for ``f`` groups, ``w = 0`` for ``w`` groups, ``h = 0`` for ``h`` groups) is COMPUTE, as the
  golden model decides it (`algo.reuse.golden.decide`; `algo.trace` rejects anything else). Hence the
  trace's measured REUSE share is below ``r``: for ``f`` groups by the frame-0 share ``1/F``
  (1/21 at 480p); the simulator reports the measured fractions.

Draw order (determinism): one ``numpy.random.default_rng(seed)``; for each op in trace order, one
``choice`` of shape ``[batch, F, nh, nw, G]`` (``nh = ceil(H/rh)``, ``nw = ceil(W/rw)``), one
``random`` of the same shape (the keep test), in that order. Same arguments and library versions:
byte-identical files (`algo.trace.TraceWriter` fixes member timestamps).

Cross-attention ops (Wan) use `TEXT_TOKENS` = 512 text tokens, Wan2.1's UMT5 context length
(the capture's seeded stand-in uses 8, `algo.capture.TEXT_TOKENS`): the shapes of a real run.
Thresholds are not meaningful for synthetic decisions; every op stores ``thetas = ((0, 0),)``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from algo.trace import OpRecord, Trace, TraceWriter, pack_decisions

#: Text tokens of Wan2.1's cross-attention (UMT5 context padded to 512; the published pipeline's
#: ``max_sequence_length``).
TEXT_TOKENS = 512
#: Threshold pair stored on synthetic ops (no thresholds were applied).
SYNTH_THETA = (0.0, 0.0)


class SynthError(ValueError):
    """Bad synthetic-workload parameters (fractions, region, model, resolution, blocks, steps)."""


@dataclass(frozen=True)
class SynthField:
    """Parameters of the synthetic decision field (module docstring).

    Attributes:
        reuse: r, share of REUSE codes per frame, in [0, 1].
        partial: p, share of PARTIAL codes, in [0, 1], r + p <= 1 (COMPUTE = 1 - r - p).
        region: ``(rh, rw)`` positions per region along h and w, each >= 1.
        persist: q, chance that a region keeps its previous frame's code, in [0, 1].
    """

    reuse: float
    partial: float
    region: tuple[int, int] = (8, 8)
    persist: float = 0.9

    def check(self) -> None:
        """Raises `SynthError` naming the first bad parameter."""
        for name, v in (("reuse", self.reuse), ("partial", self.partial), ("persist", self.persist)):
            if not (0.0 <= float(v) <= 1.0):
                raise SynthError(f"--{name} must be a fraction in [0, 1], got {v}")
        if self.reuse + self.partial > 1.0 + 1e-12:
            raise SynthError(f"--reuse + --partial must be <= 1 (COMPUTE = 1 - r - p), got "
                             f"{self.reuse} + {self.partial} = {self.reuse + self.partial:g}")
        if len(self.region) != 2 or min(self.region) < 1:
            raise SynthError(f"--region must be HxW with both sides >= 1 positions, got {self.region}")

    @property
    def probabilities(self) -> tuple[float, float, float]:
        """``(COMPUTE, PARTIAL, REUSE)`` probabilities of one draw."""
        c = max(0.0, 1.0 - self.reuse - self.partial)
        return (c, float(self.partial), float(self.reuse))


def parse_region(text: str) -> tuple[int, int]:
    """``"8x8"`` -> ``(8, 8)`` (h, w positions). Raises `SynthError`."""
    try:
        a, b = (int(v) for v in str(text).lower().split("x"))
    except ValueError:
        raise SynthError(f"--region must be HxW positions, e.g. 8x8, got {text!r}") from None
    if min(a, b) < 1:
        raise SynthError(f"--region sides must be >= 1, got {text!r}")
    return (a, b)


def field_decisions(rng: np.random.Generator, grid: tuple[int, int, int], groups, batch: int,
                    fld: SynthField) -> np.ndarray:
    """Decisions of one op drawn from the field (module docstring): int8 ``[batch, F*H*W, G]``,
    raster token order, codes 0 COMPUTE, 1 PARTIAL, 2 REUSE.

    Args:
        groups: ``(k_start, k_stop, axis)`` per group (only the axes are used).
    """
    F, H, W = grid  # noqa: N806
    G = len(groups)  # noqa: N806
    rh, rw = fld.region
    nh, nw = -(-H // rh), -(-W // rw)
    codes = rng.choice(3, size=(batch, F, nh, nw, G), p=fld.probabilities).astype(np.int8)
    keep = rng.random((batch, F, nh, nw, G)) < fld.persist
    for f in range(1, F):
        codes[:, f] = np.where(keep[:, f], codes[:, f - 1], codes[:, f])
    d = codes.repeat(rh, axis=2)[:, :, :H].repeat(rw, axis=3)[:, :, :, :W]
    for gi, g in enumerate(groups):
        ax = g[2]
        if ax == "f":
            d[:, 0, :, :, gi] = 0
        elif ax == "h":
            d[:, :, 0, :, gi] = 0
        else:
            d[:, :, :, 0, gi] = 0
    return np.ascontiguousarray(d.reshape(batch, F * H * W, G))


def weights_text(fld: SynthField, seed: int) -> str:
    """The ``weights`` text a synthetic trace carries (and its results JSON's ``trace.weights``): names the
    field; `field_of_weights` reads it back."""
    return (f"none (synthetic decisions: reuse {fld.reuse:g}, partial {fld.partial:g}, region "
            f"{fld.region[0]}x{fld.region[1]}, persist {fld.persist:g}, seed {seed})")


_WEIGHTS_RE = re.compile(r"synthetic decisions: reuse ([0-9.e+-]+), partial ([0-9.e+-]+), region (\d+)x(\d+), "
                         r"persist ([0-9.e+-]+), seed (\d+)\)")


def field_of_weights(weights: str | None) -> tuple[SynthField, int] | None:
    """``(field, seed)`` of a `weights_text`, or None when ``weights`` names no synthetic field (a captured trace)."""
    m = _WEIGHTS_RE.search(weights or "")
    if m is None:
        return None
    r, p, rh, rw, q, seed = m.groups()
    return SynthField(float(r), float(p), (int(rh), int(rw)), float(q)), int(seed)


def synth_ops(model: str, resolution: str, blocks: Sequence[int] | None, steps: Sequence[int]):
    """``(grid, ops)``: the shape ops a capture of every op type records (`algo.capture.plan_ops`,
    size ``full``), cross-attention with `TEXT_TOKENS` text tokens. Raises `SynthError`."""
    from algo.models.families import unknown_model

    if (msg := unknown_model(model)) is not None:  # answered before the registry and capture load torch
        raise SynthError(msg)
    from algo.capture import CROSS_OPS, SELF_OPS, plan_ops
    from algo.models import CaptureError, family_of, get_spec

    try:
        spec = get_spec(model, "full")
        names = SELF_OPS + (CROSS_OPS if family_of(spec).has_cross else ())
        grid, ops = plan_ops(spec.name, "full", resolution=resolution, blocks=blocks, steps=steps,
                             ops=",".join(names), text_tokens=TEXT_TOKENS)
    except CaptureError as err:
        raise SynthError(str(err)) from None
    return grid, ops


def synth_trace(out: str | Path, model: str, resolution: str, fld: SynthField, blocks: Sequence[int] | None = None,
                steps: Sequence[int] = (0,), seed: int = 0,
                progress: Callable[[int, int, str], None] | None = None) -> Trace:
    """Write a synthetic decision trace to ``out`` (atomic: nothing is left on error).

    Args:
        model: `algo.models` registry name; resolution: ``480p``, ``720p`` or ``WxHxF``.
        blocks: block indices (None: all); steps: denoising step indices (labels only: every step
            draws a fresh field).
        seed: seed of the one generator (module docstring's draw order).

    Returns:
        The trace's metadata and op shapes (decisions stay on disk).

    Raises:
        SynthError: bad field parameters, unknown model or resolution, bad blocks or steps.
    """
    fld.check()
    grid, ops = synth_ops(model, resolution, blocks, steps)
    rng = np.random.default_rng(seed)
    notes = json.dumps({"synthetic": {"reuse": fld.reuse, "partial": fld.partial, "region": list(fld.region),
                                      "persist": fld.persist, "seed": seed}}, sort_keys=True)
    weights = weights_text(fld, seed)
    out_ops = []
    with TraceWriter(out, grid, "decisions", b_msb=4, model=model, size="full", weights=weights,
                     seed=seed, notes=notes, steps=[{"index": s} for s in sorted(set(steps))]) as wr:
        for i, op in enumerate(ops):
            if progress:
                progress(i, len(ops), f"{op.name} block {op.block} step {op.step}")
            groups = [g.as_tuple() for g in op.groups]
            dec = field_decisions(rng, grid, groups, op.batch, fld)
            packed = np.stack([pack_decisions(dec[b]) for b in range(op.batch)])[None]
            rec = OpRecord(op.name, op.block, op.step, None, None, list(op.groups), SYNTH_THETA,
                           x_signed=op.x_signed, dims=op.dims, decisions=packed, thetas=(SYNTH_THETA,))
            wr.add(rec)
            out_ops.append(OpRecord(op.name, op.block, op.step, None, None, list(op.groups), SYNTH_THETA,
                                    x_signed=op.x_signed, dims=op.dims))
        if progress:
            progress(len(ops), len(ops), "done")
    return Trace(grid=grid, ops=out_ops, b_msb=4, model=model, size="full", weights=weights, seed=seed, notes=notes)
