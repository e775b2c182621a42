"""Size and memory of a capture from its shape plan, before any weight is built or any block runs.

`estimate_capture` sums the bytes every recorded array will take in the file (exact traces: X and
W of each op, no P for ``pv`` (format version 5: regenerated from ``qk``'s Q and K), the attention
states; decision traces: packed decisions and states), plus the fixed cost of each zip member and
the JSON metadata. The peak memory is this process's resident set now (interpreter, torch) plus
the compiled kernels (`KERNELS_BYTES`, unless this process has loaded them already), the weights that will be built (parameter counts of the model on the meta device, in the run's
dtype), the int8 weights the recorder keeps, and the larger of the two phases of a recorded block
(project rule, docs/decisions.md D46; all float32 except where said):

- feed-forward: hidden state and its norm/residual copies ``6 M d`` values, and the larger of the
  FFN's intermediate with its GELU ``2 M d_ffn`` values and the GELU output with ``ffn2``'s recorded
  operand ``M d_ffn`` int8 (plus a float32 copy for bf16 runs);
- attention: ``6 M d`` floats (hidden, Q, K, V, output, residual), Q/K/V as int8 ``3 M d`` and
  float copies ``3 M d``, the attention output ``M d`` floats, and the states' score buffers
  ``3 chunk L`` floats of one head (`algo.capture.quantise.attention_states`, the fallback pass: a
  plain attention call gives the states from the model's own flash-attention call, D72, but the
  estimate keeps the fallback's buffers, an upper bound) or, for decision traces, one frame of P
  per theta as int16 plus its scores (`pv_decisions`).

`check_fits` compares the figures with what the machine has (free disk in the output's folder,
``MemAvailable``); the environment variables ``KALEIDO_DISK_LIMIT`` and ``KALEIDO_MEM_LIMIT``
(bytes) replace those figures (tests, or a shared machine where less should be used).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from algo.models import CaptureError

#: Bytes of one zip member beyond its data: the ``.npy`` header (128), the local header with its
#: zip64 extra field and data descriptor (30 + 20 + 24 + name) and the central directory entry
#: (46 + 28 + name), names ``op00000_X.npy`` (13 characters); counted from the zip specification.
MEMBER_BYTES = 128 + 30 + 20 + 24 + 46 + 28 + 2 * 13
#: Compiled kernels (numba) loaded on first use: measured +35 MB for the int8 quantiser alone on the
#: tiny capture, 60 MB with the decision kernels; rounded up (project default).
KERNELS_BYTES = 64 * 1000 * 1000
#: Metadata beyond the op records (format fields, notes, steps): a bound measured on tiny traces.
META_FIXED_BYTES = 2048


class CaptureTooLarge(CaptureError):
    """The capture would not fit the disk or the memory of this machine (one-line message)."""


@dataclass(frozen=True)
class CaptureEstimate:
    """Predicted file size and peak resident memory of one capture, in bytes.

    Attributes:
        file_bytes: the trace file. peak_bytes: the process's peak resident set.
        parts: the terms of ``peak_bytes`` (``baseline``, ``weights``, ``weights_int8``, ``block``) and
            ``arrays`` (data bytes of the file).
    """

    file_bytes: int
    peak_bytes: int
    parts: dict

    def summary(self) -> str:
        """One line: ``file 812 MB, peak memory 3.1 GB (baseline ..., weights ..., block ...)``."""
        p = self.parts
        return (f"file {human(self.file_bytes)}, peak memory {human(self.peak_bytes)} (process now "
                f"{human(p['baseline'])}, weights {human(p['weights'] + p['weights_int8'])}, "
                f"one recorded block {human(p['block'])})")


def human(n: int | float) -> str:
    """Bytes in kB/MB/GB (powers of 1000), three significant figures."""
    n = float(n)
    for unit, f in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= f:
            return f"{n / f:.3g} {unit}"
    return f"{int(n)} B"


def kernels_loaded() -> bool:
    """Whether this process has already loaded the compiled capture kernels (`algo.reuse.kernels`: the
    int8 quantiser has a compiled signature), so that their memory is part of the resident set now."""
    mod = sys.modules.get("algo.reuse.kernels")
    return bool(mod is not None and mod._quantize.signatures)


def rss_bytes() -> int:
    """This process's resident set now (``VmRSS`` of /proc/self/status; 0 where unavailable)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def available_memory() -> int:
    """``MemAvailable`` of /proc/meminfo in bytes (or ``KALEIDO_MEM_LIMIT``); a huge number if unknown."""
    env = os.environ.get("KALEIDO_MEM_LIMIT")
    if env:
        return int(float(env))
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


def free_disk(out: str | Path) -> int:
    """Free bytes in the folder that will hold ``out`` (its nearest existing parent), or ``KALEIDO_DISK_LIMIT``."""
    env = os.environ.get("KALEIDO_DISK_LIMIT")
    if env:
        return int(float(env))
    p = Path(out).expanduser().absolute().parent
    while not p.exists():
        p = p.parent
    return shutil.disk_usage(p).free


def _param_bytes(net, n_built: int, itemsize: int, streamed: bool) -> int:
    """Bytes of the weights built: every parameter outside the blocks plus ``n_built`` blocks (the
    largest block twice when streamed: one filled while the previous one is freed)."""
    from algo.models import blocks_of

    blocks = [sum(p.numel() for p in blk.parameters()) for _, blk in blocks_of(net)]
    rest = sum(p.numel() for p in net.parameters()) - sum(blocks)
    built = 2 * max(blocks) if streamed else sum(blocks[:n_built])
    return int((rest + built) * itemsize)


def estimate_capture(model: str, size: str, grid: tuple[int, int, int], steps: Sequence[int],
                     blocks: Sequence[int], ops: Sequence[str], *, thetas: Sequence | None = None,
                     attn_states: bool = True, itemsize: int = 4, stream_blocks: bool = False,
                     n_built: int | None = None, chunk: int = 1024, net=None) -> CaptureEstimate:
    """Estimate a capture (`algo.capture.capture`'s arguments, already checked) from its shape plan.

    Args:
        grid: token grid (F, H, W); steps, blocks: the recorded ones; ops: op types (`parse_ops`).
        thetas: None for an exact trace, else the decision trace's threshold pairs.
        itemsize: bytes per weight and activation of the run's dtype (4 float32, 2 bf16).
        n_built: blocks built (default: up to the last recorded one).
        net: the model on the meta device (`algo.models.meta_model`), if already built.

    Returns:
        A `CaptureEstimate`.
    """
    from algo.capture.plan import plan_ops
    from algo.capture.request import SELF_OPS
    from algo.models import meta_model
    from algo.trace import packed_length

    net = meta_model(model, size) if net is None else net
    _, plan = plan_ops(model, size, grid, steps, blocks, ops, net=net)
    ops = set(ops)
    arrays, members = 0, 0
    for op in plan:
        b, m, k, n = op.dims
        if thetas is not None:
            arrays += len(thetas) * b * packed_length(m * len(op.groups))
            members += 1
        elif op.name in ("pv", "cross_pv"):
            arrays += b * k * n  # V; P is derived
            members += 1
            if ("qk" if op.name == "pv" else "cross_qk") not in ops:
                arrays += b * m * n + b * n * k  # the op's own Q and K^T
                members += 2
        else:
            arrays += b * m * k + b * k * n
            members += 2
        if op.name == "pv" and attn_states:
            arrays += b * m * n * 4 + b * m * 4
            members += 2
    meta = META_FIXED_BYTES + sum(len(json.dumps(op.meta())) + 80 for op in plan)
    file_bytes = arrays + members * MEMBER_BYTES + meta + MEMBER_BYTES

    _, one = plan_ops(model, size, grid, [min(steps)], [min(blocks)], SELF_OPS, net=net)
    dims = {op.name: op.dims for op in one}
    heads, m, d_h, n_keys = dims["qk"]
    d, d_ffn = dims["qkv"][2], dims["ffn1"][3]
    f = itemsize
    copy = 4 if itemsize != 4 else 0  # quantise: a float32 copy of a bf16 operand
    ffn_phase = 6 * m * d * f + max(2 * m * d_ffn * f, m * d_ffn * (f + 1 + copy))
    if thetas is None:
        score = 3 * min(chunk, m) * n_keys * 4
    else:
        hw = grid[1] * grid[2]
        score = (len(thetas) * 2 + 1 + 3) * hw * n_keys + 3 * hw * n_keys * 4
    attn_phase = 6 * m * d * f + 3 * m * d * (1 + 4) + (m * d * 4 if attn_states else 0) + score
    weights = _param_bytes(net, max(blocks) + 1 if n_built is None else n_built, itemsize, stream_blocks)
    w_int8 = 0 if thetas is not None else sum(op.dims[0] * op.dims[2] * op.dims[3] for op in plan
                                              if op.name in ("qkv", "o_proj", "ffn1", "ffn2", "cross_q", "cross_o"))
    block = max(ffn_phase, attn_phase)
    baseline = rss_bytes()
    kernels = 0 if kernels_loaded() else KERNELS_BYTES  # already in ``baseline`` once loaded
    parts = dict(baseline=baseline, kernels=kernels, weights=weights, weights_int8=w_int8, block=block,
                 arrays=arrays)
    return CaptureEstimate(file_bytes=int(file_bytes),
                           peak_bytes=int(baseline + kernels + weights + w_int8 + block),
                           parts=parts)


def check_fits(est: CaptureEstimate, out: str | Path) -> None:
    """Raise `CaptureTooLarge` (one line: both figures and the options that fit) when the file is larger
    than the free disk at ``out``'s folder or the peak larger than the available memory."""
    disk, mem = free_disk(out), available_memory()
    over = []
    if est.file_bytes > disk:
        over.append(f"file {human(est.file_bytes)} > free disk {human(disk)}")
    if est.peak_bytes > mem:
        over.append(f"peak memory {human(est.peak_bytes)} > available {human(mem)}")
    if over:
        raise CaptureTooLarge(
            f"capture would not fit: {'; '.join(over)} (estimate: {est.summary()}); record less: "
            "--decisions-only (packed decisions, no operands), --ops (fewer op types, e.g. qkv,ffn1), "
            "--blocks (fewer blocks), --no-attn-states, or a smaller --resolution")


__all__ = ["CaptureEstimate", "CaptureTooLarge", "available_memory", "check_fits", "estimate_capture", "free_disk",
           "human", "rss_bytes"]
