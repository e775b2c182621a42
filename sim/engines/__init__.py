"""Simulation engines: `model` (the cycle model over a whole trace: ``kaleido simulate``'s default),
`verilator` (the compiled RTL engine of ``kaleido simulate --engine rtl`` and the random RTL
regression) and `rtl` (the pyverilator-mm adapter: the Verilated top driven from Python, kept for
interactive poke/peek and the speed comparison)."""
