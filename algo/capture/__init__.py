"""Trace capture: a real diffusers video DiT run with hooks, its int8 GEMM operands (or their reuse
decisions) written as a trace (`algo.capture.run`; `algo.capture.bench`: ``make bench-capture``).

The names below are the package's public API.
"""

from algo.capture.run import (
    CROSS_OPS,
    DEFAULT_MODEL,
    DEFAULT_SIZE,
    DEFAULT_STEPS,
    DEFAULT_THETA,
    RESOLUTIONS,
    SELF_OPS,
    TEXT_TOKENS,
    CaptureError,
    ProgressFn,
    attention_states,
    bf16_gemm_in_fp32,
    capture,
    capture_to_file,
    native_bf16_gemm,
    parse_ops,
    parse_resolution,
    patch_of,
    plan_ops,
    pv_decisions,
    quantize_int8,
    record_trajectory,
    resolution_grid,
    write_shape_trace,
)

__all__ = [
    "CROSS_OPS", "DEFAULT_MODEL", "DEFAULT_SIZE", "DEFAULT_STEPS", "DEFAULT_THETA", "RESOLUTIONS", "SELF_OPS",
    "TEXT_TOKENS", "CaptureError", "ProgressFn", "attention_states", "bf16_gemm_in_fp32", "capture", "capture_to_file",
    "native_bf16_gemm", "parse_ops", "parse_resolution", "patch_of", "plan_ops", "pv_decisions", "quantize_int8",
    "record_trajectory", "resolution_grid", "write_shape_trace",
]
