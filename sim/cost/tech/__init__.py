"""Technology tables: per-action energies and per-unit areas as data, one TOML file per node.

Each file holds ``[energy.<row>]`` and ``[area.<row>]`` tables with ``value``, ``unit`` and a
non-empty ``source``. A derived table (``derived_from = "45nm"``) takes every row of its base,
scaled by its ``[scaling]`` rule, and replaces the rows it lists itself:

- energy rows x ``(a_to V_to^2 + b_to V_to + c_to) / (a_from V_from^2 + b_from V_from + c_from)``
  (Stillmaker & Baas 2017 per-node energy fits; coefficients and voltages are in the file);
- area rows x ``area_factor``.

A scaled row's source is the base row's source followed by the factor and the scaling source.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path


class TechError(ValueError):
    """A technology table is missing or malformed."""


@dataclass(frozen=True)
class Row:
    """One table row: value in `unit`, with its `source`."""

    value: float
    unit: str
    source: str


@dataclass(frozen=True)
class TechTable:
    """A resolved technology table (scaling applied)."""

    name: str
    node_nm: int
    vdd: float
    energy: dict[str, Row]
    area: dict[str, Row]
    energy_factor: float = 1.0
    area_factor: float = 1.0

    def e(self, key: str) -> float:
        return self.energy[key].value

    def a(self, key: str) -> float:
        return self.area[key].value


def table_names() -> list[str]:
    """Names of the shipped tables (``45nm``, ``16nm``)."""
    return sorted(p.name[:-5] for p in resources.files("sim.cost.tech").iterdir() if p.name.endswith(".toml"))


def energy_poly(coeffs, vdd: float) -> float:
    """Stillmaker & Baas energy fit ``a V^2 + b V + c``."""
    a, b, c = coeffs
    return a * vdd * vdd + b * vdd + c


def _rows(data: dict, section: str, name: str) -> dict[str, Row]:
    out = {}
    for key, row in data.get(section, {}).items():
        try:
            out[key] = Row(float(row["value"]), str(row["unit"]), str(row["source"]))
        except (KeyError, TypeError, ValueError):
            raise TechError(f"table {name}: row {section}.{key} needs value, unit and source") from None
        if not out[key].source.strip():
            raise TechError(f"table {name}: row {section}.{key} has an empty source")
    return out


REQUIRED_ENERGY = ("mult8", "add8", "add32", "fp16_add", "fp16_mult", "reg_bit", "mux2_bit", "sram_8kib",
                   "sram_32kib", "sram_1mib", "dram_byte", "leak_mm2_ns", "sram_gated_leak")
REQUIRED_AREA = ("mult8", "add_bit", "reg_bit", "mux2_bit", "sram_bit")


def load_tech(name: str | int | Path) -> TechTable:
    """Load a shipped table by name (``"16nm"``) or node (``16``), or a user table from a ``.toml`` path.

    A user table has the shipped schema (module docstring); ``derived_from`` may name a shipped
    table. Every row `sim.cost.energy` and `sim.cost.area` read (`REQUIRED_ENERGY`, `REQUIRED_AREA`) must be
    present after derivation. Raises `TechError` (unknown name, missing file, bad TOML, missing row).
    """
    if isinstance(name, Path) or str(name).endswith(".toml"):
        path = Path(name)
        if not path.is_file():
            raise TechError(f"technology table file not found: {path}")
        try:
            data = tomllib.loads(path.read_text())
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
            raise TechError(f"{path}: not a valid TOML technology table ({err})") from None
        table = _resolve(data, path.stem)
        missing = [f"energy.{k}" for k in REQUIRED_ENERGY if k not in table.energy] + [
            f"area.{k}" for k in REQUIRED_AREA if k not in table.area]
        if missing:
            raise TechError(f"{path}: missing rows {', '.join(missing)}")
        return table
    name = f"{name}nm" if isinstance(name, int) else str(name)
    if name not in table_names():
        raise TechError(f"no technology table {name!r}; shipped: {', '.join(table_names())} (or give a .toml path)")
    data = tomllib.loads(resources.files("sim.cost.tech").joinpath(f"{name}.toml").read_text())
    return _resolve(data, name)


def _resolve(data: dict, name: str) -> TechTable:
    """Rows of one parsed table, with its base's scaled rows when ``derived_from`` is set."""
    energy, area = _rows(data, "energy", name), _rows(data, "area", name)
    ef = af = 1.0
    try:
        node, vdd = int(data["node_nm"]), float(data["vdd"])
    except (KeyError, TypeError, ValueError):
        raise TechError(f"table {name}: needs node_nm and vdd") from None
    if "derived_from" in data:
        base = load_tech(data["derived_from"])
        sc = data.get("scaling")
        if not isinstance(sc, dict):
            raise TechError(f"table {name}: derived_from needs a [scaling] table")
        ef = energy_poly(sc["energy_poly_to"], sc["to_vdd"]) / energy_poly(sc["energy_poly_from"], sc["from_vdd"])
        af = float(sc["area_factor"])
        tag = f"; scaled from {base.name}"
        energy = {**{k: Row(r.value * ef, r.unit, f"{r.source}{tag} x {ef:.4f} ({sc['source']})")
                     for k, r in base.energy.items()}, **energy}
        area = {**{k: Row(r.value * af, r.unit, f"{r.source}{tag} x {af:g} ({sc['source']})")
                   for k, r in base.area.items()}, **area}
    return TechTable(name, node, vdd, energy, area, ef, af)
