"""Model families as plugins: one module per family (`wan`, `hunyuan`, `cogvideox`), each defining
``FAMILY``, an `algo.models.families.base.Family`. Adding a model family is adding one module here:
every module of this package that defines ``FAMILY`` is found (`FAMILIES`), and its ``models`` join
the registry (`algo.models.registry.MODELS`).
"""

from __future__ import annotations

import importlib
import pkgutil

from algo.models.families.base import Family

__all__ = ["FAMILIES", "Family", "family_of_class", "get_family", "model_names", "unknown_model"]


def _discover() -> dict[str, Family]:
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name == "base":
            continue
        fam = getattr(importlib.import_module(f"{__name__}.{info.name}"), "FAMILY", None)
        if isinstance(fam, Family):
            found[fam.name] = fam
    return dict(sorted(found.items(), key=lambda kv: (kv[1].order, kv[0])))


#: Family name -> family, by `Family.order` then name.
FAMILIES: dict[str, Family] = _discover()
_BY_CLASS = {row.diffusers_class: fam for fam in FAMILIES.values() for row in fam.models}


def get_family(name: str) -> Family:
    """The family called ``name`` (``"wan"``, ``"hunyuan"``, ``"cogvideox"``). Raises KeyError."""
    return FAMILIES[name]


def family_of_class(class_name: str) -> Family | None:
    """The family whose models are of the diffusers class ``class_name``, or None."""
    return _BY_CLASS.get(class_name)


def model_names() -> list[str]:
    """The registry names of every family's models, sorted (the keys of `algo.models.registry.MODELS`),
    read without importing the registry or torch: for answering a bad name at once."""
    return sorted(row.name for fam in FAMILIES.values() for row in fam.models)


def unknown_model(name: str) -> str | None:
    """The one-line error for a model name no family defines, or None for a registry name (matched as
    `algo.models.registry.get_spec` matches it, lower case); torch-free, so callers answer a bad name first."""
    names = model_names()
    if str(name).lower() in names:
        return None
    return f"unknown model {name!r}; supported models: {', '.join(names)}"
