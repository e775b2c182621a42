"""An op's plan: what every stage of its pipeline (`sim.engines.model.simulate_ops`: plan -> timing -> cost
-> result, docs/architecture.md) needs to know about its tiling, computed once per op.

`plan_op` gives the op's channel groups, the groups whose tiling it follows (a fused attention pair's P op
follows its score op's tiles, `sim.timing.attention`), the scheduler window (`sim.cost.actions.scheduler_window`,
position blocks) and the column blocks ``ceil(N / C)``. The tile walks themselves (`sim.cost.tiling.tile_pass`)
run once per batch element and tiling inside `sim.engines.model.simulate_op`.
"""

from __future__ import annotations

from dataclasses import dataclass

from algo.trace import OpRecord
from hw.config import AcceleratorConfig
from sim.cost.actions import scheduler_window


@dataclass(frozen=True)
class OpPlan:
    """The tiling facts of one op on one config (`plan_op`)."""

    groups: list  #: the op's channel groups ``(k0, k1, axis)``, channels
    tile_like: list | None  #: the groups whose tiling the op follows instead of its own (fused P op), or None
    fused: bool  #: the op is half of a fused attention pair (`sim.timing.attention.fused_pairs`)
    window: int  #: scheduler window, position blocks (`sim.cost.actions.scheduler_window`)
    n_cb: int  #: column blocks, ``ceil(N / array_cols)``

    @property
    def tiling(self) -> list:
        """The groups that set the op's position tiles: ``tile_like`` if given, else ``groups``."""
        return self.groups if self.tile_like is None else self.tile_like


def plan_op(op: OpRecord, grid, cfg: AcceleratorConfig, tile_like=None, fused: bool = False) -> OpPlan:
    """The plan of ``op`` on ``cfg`` over the token grid ``(F, H, W)``. ``tile_like``: the partner's groups
    for the P op of a fused pair (None otherwise); ``fused``: either op of a fused pair."""
    groups = [g.as_tuple() for g in op.groups]
    return OpPlan(groups=groups, tile_like=tile_like, fused=fused,
                  window=scheduler_window(cfg, op.K, grid, groups), n_cb=-(-op.N // cfg.array_cols))
