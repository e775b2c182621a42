"""Simulation engines beside the cycle model: `sim.engines.verilator` (the compiled RTL engine of
``kaleido simulate --engine rtl`` and the random RTL regression)."""
