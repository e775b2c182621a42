"""Kaleido hardware: accelerator configuration and the Amaranth description of the compute core.

`hw.config` holds the frozen accelerator configuration shared by `hw/` and `sim/`;
`hw.pe`, `hw.array` and `hw.top` describe the PE, the R x C output-stationary array and the
streaming top level; `hw.compact_pe`, `hw.compact_array` and `hw.combine` the compact organisation's
PE, banded array and combine unit (docs/decisions.md D65), `hw.compact_accel` and `hw.compact_core` its
op-level controller and combine stage (D97), `hw.delta_combine`, `hw.delta_accel` and `hw.delta_queue` the delta
organisation's combine unit, op-level controller and its band-tile queues (D73, D79, D91, D93); `hw.rtl` emits
Verilog to `rtl_out/<preset>/`.
"""


def discard(elaboratable):
    """Mark an Amaranth ``Elaboratable`` that will never be elaborated, and return it.

    Amaranth warns (``UnusedElaboratable``) when an elaboratable is garbage-collected without
    having been elaborated. Two kinds of object here are never elaborated on purpose: one whose
    constructor rejected its parameters (the half-built object lives on in the exception's
    traceback), and one built only to read its parameters (port widths, buffer capacity).
    Silencing goes through the attribute Amaranth's ``MustUse`` mixin reads
    (``amaranth/_unused.py``: ``_MustUse__silence``).
    """
    elaboratable._MustUse__silence = True
    return elaboratable
