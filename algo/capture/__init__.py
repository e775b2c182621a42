"""Trace capture: a real diffusers video DiT run with hooks, its int8 GEMM operands (or their reuse
decisions) written as a trace. `request` (`CaptureRequest`: every option, validated), `quantise`
(int8, attention states, multi-θ decisions), `record` (the hooks and their state), `plan` (the op
list from the meta model; shape traces), `run` (`capture`: build, feed, hook, write), `trajectory`
(the latents of a sampling run); `bench`: ``make bench-capture``.

The names below are the package's public API.
"""

from algo.capture.plan import plan_ops, write_shape_trace
from algo.capture.quantise import (
    attention_states,
    bf16_gemm_in_fp32,
    native_bf16_gemm,
    pv_decisions,
    quantize_int8,
)
from algo.capture.request import (
    CROSS_OPS,
    DEFAULT_MODEL,
    DEFAULT_SIZE,
    DEFAULT_STEPS,
    RESOLUTIONS,
    SELF_OPS,
    TEXT_TOKENS,
    CaptureRequest,
    ProgressFn,
    parse_ops,
    parse_resolution,
    patch_of,
    resolution_grid,
)
from algo.capture.run import capture, capture_request, capture_to_file
from algo.capture.trajectory import record_trajectory
from algo.models import CaptureError
from algo.reuse.thresholds import DEFAULT_THETA

__all__ = [
    "CROSS_OPS", "DEFAULT_MODEL", "DEFAULT_SIZE", "DEFAULT_STEPS", "DEFAULT_THETA", "RESOLUTIONS", "SELF_OPS",
    "TEXT_TOKENS", "CaptureError", "CaptureRequest", "ProgressFn", "attention_states", "bf16_gemm_in_fp32", "capture",
    "capture_request", "capture_to_file", "native_bf16_gemm", "parse_ops", "parse_resolution", "patch_of", "plan_ops",
    "pv_decisions", "quantize_int8", "record_trajectory", "resolution_grid", "write_shape_trace",
]
