"""Workload generators: per-device workload files built from traces, and synthetic decision traces
(`synth`); one module per generator."""
