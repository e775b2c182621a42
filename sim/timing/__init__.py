"""Timing one op, in pipeline order: `dispatch` (the data dispatcher's tiling, scheduler and
matcher) → `cycle_model` (the array's tile-level timing contract, numba) → `core_timing` (operand
loads of `hw.core` and the op timeline of `hw.accel`) → `memory` (DRAM, vector-unit and
similarity-unit stalls around the array). `dataflow` times dense GEMMs (OS/WS/IS, SCALE-Sim
counts); `stream` is the slot-by-slot input stream of the RTL top for one GEMM."""
