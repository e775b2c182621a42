"""Kaleido hardware: accelerator configuration and the Amaranth description of the compute core.

`hw.config` holds the frozen accelerator configuration shared by `hw/` and `sim/`;
`hw.pe`, `hw.array` and `hw.top` describe the PE, the R x C output-stationary array and the
streaming top level; `hw.rtl` emits Verilog to `rtl_out/<preset>/`.
"""
