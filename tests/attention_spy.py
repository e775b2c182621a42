"""The float Q, K, V of every self-attention call a capture takes its attention states from.

Since D72 capture runs a plain self-attention call itself (`algo.capture.quantise.flash_states`,
which returns the output and the log-sum-exp) instead of the model's original attention function,
so a spy on that function no longer sees self-attention; this one wraps `flash_states` where the
recorder calls it (`algo.capture.record`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def self_attention_operands() -> Iterator[list]:
    """Yields a list that collects ``(query, key, value)`` (detached copies, the call's layout, e.g.
    Wan's ``[1, S, heads, d_h]``) of each self-attention call during the ``with`` block."""
    import algo.capture.record as record

    seen: list = []
    original = record.flash_states

    def spy(query, key, value, layout):
        seen.append(tuple(t.detach().clone() for t in (query, key, value)))
        return original(query, key, value, layout)

    record.flash_states = spy
    try:
        yield seen
    finally:
        record.flash_states = original
