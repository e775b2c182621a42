"""Workloads on one or P devices (`algo.workloads` writes them).

Layers kept apart, as ASTRA-sim keeps them: the workload (`algo.workloads.format`: per step and
rank, ops and communication events), the device (`sim.workload.device`: one op's time on a
Kaleido chip or an A100, computed once per distinct shape) and the composition
(`sim.workload.simulate`: per-step, per-device time).
"""
