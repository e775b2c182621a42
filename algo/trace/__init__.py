"""Trace files: the format (`algo.trace.format`: versions, op records, decision packing), its checks
(`algo.trace.validate`), writing (`algo.trace.writer`) and reading (`algo.trace.reader`), and full-model
derivation (`algo.trace.derive`, imported on its own: it runs a capture).

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
    pack_decisions,
    packed_length,
    unpack_decisions,
)
from algo.trace.reader import TraceReader, load_trace
from algo.trace.validate import validate_groups
from algo.trace.writer import TraceWriter, save_trace

__all__ = [
    "AXES", "BASE_WRITE_VERSION", "DERIVED_P_VERSION", "GROUP_KINDS", "OP_TYPES", "READABLE_VERSIONS", "STATES_ON_DECISIONS_VERSION",
    "TRACE_FORMAT", "TRACE_KINDS", "TRACE_VERSION", "Group", "OpRecord", "Trace", "TraceError", "TraceReader", "TraceWriter",
    "load_trace", "pack_decisions", "packed_length", "save_trace", "unpack_decisions", "validate_groups",
]
