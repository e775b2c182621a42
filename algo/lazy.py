"""A module imported on first use: `lazy_module`.

The model-family plugins (`algo.models.families`) and the noise schedules use torch only inside
functions; binding ``torch = lazy_module("torch")`` instead of ``import torch`` lets a caller read the
registry's model names without loading torch (seconds on 2 cores), so ``kaleido synth --model nosuch``
answers at once. The first attribute read imports the real module; later reads are a dictionary lookup.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class _LazyModule:
    """Stands for the module ``name``: every attribute read is the real module's (imported then)."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str) -> ModuleType:
    """A stand-in for ``import name`` that imports the module on its first attribute read."""
    return _LazyModule(name)  # type: ignore[return-value]
