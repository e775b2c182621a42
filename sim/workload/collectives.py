"""The collective layer: how many network steps a collective takes and how many bytes each moves.

``S`` = the event's ``bytes`` (payload per rank, `algo.workloads.format.CommEvent`), ``P`` = ranks
in the group, α = one step's latency and B = one device's bandwidth into the dimension
(`sim.workload.network.Network.step_time_us`: a step moving n bytes takes ``α + n/B``).

Ring algorithms (topology ``Ring``):

- ``ring_p2p`` (every rank sends S to the rank ``k`` = ``distance`` positions along, all at once:
  each link carries k of the messages, store-and-forward): ``k (α + S/B)``;
- ``all_gather`` (each rank contributes S): ``P − 1`` steps of S: ``(P−1)(α + S/B)``;
- ``all_reduce`` (each rank holds S; reduce-scatter then all-gather of S/P chunks):
  ``2(P−1)(α + S/(P B))``;
- ``all_to_all`` (each rank holds S, S/P for every rank; store-and-forward on the ring, step j
  forwards the ``P − j`` chunks still in transit): ``Σ_{j=1}^{P−1} (α + (P−j) S/(P B)) =
  (P−1) α + (P−1) S / (2B)``.

Direct algorithms (``Switch``, ``FullyConnected``: every peer one hop away, the device's bandwidth
shared by its concurrent sends):

- ``ring_p2p``: ``α + S/B`` whatever the distance;
- ``all_gather``: one step sending S to each of P − 1 peers: ``α + (P−1) S/B``;
- ``all_reduce``: direct reduce-scatter + direct all-gather of S/P chunks: ``2(α + (P−1) S/(P B))``;
- ``all_to_all``: one step of ``(P−1) S/P``: ``α + (P−1) S/(P B)``.

A group of one rank costs 0 (nothing moves) except ``ring_p2p``, which is a send to itself and also 0.
"""

from __future__ import annotations

from sim.workload.network import Network


def collective_time_us(pattern: str, nbytes: float, group: int, net: Network, distance: int = 1) -> float:
    """Time of one collective in microseconds (module docstring). Raises ValueError on an unknown pattern."""
    p, s = int(group), float(nbytes)
    if p <= 1:
        return 0.0
    def step(n: float) -> float:
        return net.step_time_us(n)

    ring = net.dim.topology == "Ring"
    if pattern == "ring_p2p":
        return int(distance) * step(s) if ring else step(s)
    if pattern == "all_gather":
        return (p - 1) * step(s) if ring else step((p - 1) * s)
    if pattern == "all_reduce":
        return 2 * (p - 1) * step(s / p) if ring else 2 * step((p - 1) * s / p)
    if pattern == "all_to_all":
        if ring:
            return sum(step((p - j) * s / p) for j in range(1, p))
        return step((p - 1) * s / p)
    raise ValueError(f"unknown collective pattern {pattern!r}")
