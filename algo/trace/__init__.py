"""Trace files: the format (`algo.trace.format`: op records, packing, validation, save and load)
and full-model derivation (`algo.trace.derive`, imported on its own: it runs a capture).

The names below are the package's public API; the simulator reads traces through them.
"""

from algo.trace.format import (
    AXES,
    BASE_WRITE_VERSION,
    DERIVED_P_VERSION,
    GROUP_KINDS,
    OP_TYPES,
    READABLE_VERSIONS,
    STATES_ON_DECISIONS_VERSION,
    TRACE_FORMAT,
    TRACE_KINDS,
    TRACE_VERSION,
    Group,
    OpRecord,
    Trace,
    TraceError,
    TraceReader,
    TraceWriter,
    load_trace,
    pack_decisions,
    packed_length,
    save_trace,
    unpack_decisions,
    validate_groups,
)

__all__ = [
    "AXES", "BASE_WRITE_VERSION", "DERIVED_P_VERSION", "GROUP_KINDS", "OP_TYPES", "READABLE_VERSIONS", "STATES_ON_DECISIONS_VERSION",
    "TRACE_FORMAT", "TRACE_KINDS", "TRACE_VERSION", "Group", "OpRecord", "Trace", "TraceError", "TraceReader", "TraceWriter",
    "load_trace", "pack_decisions", "packed_length", "save_trace", "unpack_decisions", "validate_groups",
]
