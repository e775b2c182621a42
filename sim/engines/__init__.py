"""Simulation engines: `model` (the cycle model over a whole trace: ``kaleido simulate``'s default)
and `rtl` (the Verilated RTL top driven in-process, ``--engine rtl``)."""
