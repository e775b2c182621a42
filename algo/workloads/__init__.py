"""Workload generators: per-device workload files built from traces (one module per generator)."""
