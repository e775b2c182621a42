"""The network layer: an interconnect described as ASTRA-sim's analytical backend describes one.

Per dimension: ``topology`` (``Ring``, ``FullyConnected`` or ``Switch``), ``units`` (devices in the
dimension), ``link_gbps`` (bandwidth of one link, one direction, GB/s = 1e9 bytes/s), ``links``
(links per device in the dimension, used together), ``latency_ns`` (per link traversal). This
module only answers "how long does moving n bytes over one step of a collective take"
(`Network.step_time_us`); the collective layer (`sim.workload.collectives`) decides how many
steps and bytes; the workload says which collectives run. A packet-level network could replace
this module behind the same call.

Defaults (`PRESETS`):

- ``a100``: NVLink3 through NVSwitch (DGX A100): 12 NVLink3 links per GPU of 25 GB/s per
  direction, 300 GB/s per direction in total (NVIDIA A100 datasheet, 2021: "NVLink 600 GB/s",
  bidirectional), topology Switch; per-hop latency 1,000 ns (project default, the order of a
  small-message NVLink/NCCL step; docs/decisions.md D38).
- ``kaleido``: a ring of chips, 4 links of 25 GB/s per direction per neighbour pair (100 GB/s),
  500 ns per hop (project default, docs/decisions.md D38: a chip with NVLink3-class SerDes on a third
  of the A100's links).
"""

from __future__ import annotations

from dataclasses import dataclass

TOPOLOGIES = ("Ring", "FullyConnected", "Switch")


class NetworkError(ValueError):
    """Bad interconnect parameters."""


@dataclass(frozen=True)
class Dimension:
    """One network dimension (module docstring)."""

    topology: str
    units: int
    link_gbps: float
    links: int = 1
    latency_ns: float = 0.0

    def check(self) -> None:
        if self.topology not in TOPOLOGIES:
            raise NetworkError(f"topology must be one of {', '.join(TOPOLOGIES)}, got {self.topology!r}")
        if self.units < 1 or self.links < 1 or not self.link_gbps > 0 or self.latency_ns < 0:
            raise NetworkError("units and links must be >= 1, link_gbps > 0 and latency_ns >= 0")

    @property
    def bandwidth_gbps(self) -> float:
        """Bandwidth one device can drive into the dimension per direction: links x link_gbps (GB/s)."""
        return self.links * self.link_gbps


#: Interconnect presets per device kind (module docstring gives sources).
PRESETS = {
    "a100": {"topology": "Switch", "link_gbps": 25.0, "links": 12, "latency_ns": 1000.0},
    "kaleido": {"topology": "Ring", "link_gbps": 25.0, "links": 4, "latency_ns": 500.0},
}


@dataclass(frozen=True)
class Network:
    """A one-dimensional network of ``dim.units`` devices (more dimensions: a later extension)."""

    dim: Dimension

    @classmethod
    def preset(cls, kind: str, units: int) -> Network:
        """The `PRESETS` network of ``kind`` (``a100`` or ``kaleido``) over ``units`` devices."""
        if kind not in PRESETS:
            raise NetworkError(f"no interconnect preset for {kind!r} (known: {', '.join(PRESETS)})")
        d = Dimension(units=int(units), **PRESETS[kind])
        d.check()
        return cls(d)

    def step_time_us(self, nbytes: float) -> float:
        """One step of a collective: ``latency + nbytes / bandwidth`` (microseconds); a device sends
        ``nbytes`` to one peer over all its links into the dimension."""
        return self.dim.latency_ns * 1e-3 + nbytes / (self.dim.bandwidth_gbps * 1e3)

    def describe(self) -> dict:
        d = self.dim
        return {"topology": d.topology, "units": d.units, "link_gbps": d.link_gbps, "links": d.links,
                "latency_ns": d.latency_ns, "bandwidth_gbps": d.bandwidth_gbps}
