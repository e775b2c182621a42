"""Per-device op timing for workloads: one Kaleido chip (cycle model + memory) or one A100 (roofline).

Each device times one `algo.workloads.format.WorkloadOp` copy and caches the result by the op's
shape signature (type, batch, M, K, N, grid, groups): identical ops — every block of a step, every
rank of a multi-device run, every step at the same patch size — are timed once. An attention pair
(`pair_partners`: ``qk`` then ``pv``, or ``cross_qk`` then ``cross_pv``, of one step, block and rank
with equal repeat and matching shapes) is timed together, as a trace's pair is: on a Kaleido chip
whose score buffer holds the keys it runs fused (`sim.timing.attention`, P never in DRAM); the pair
is cached by both signatures.

Kaleido (`KaleidoDevice`): the op becomes a decision `algo.trace.OpRecord` and runs through
`sim.engines.model.simulate_op`, `sim.cost.energy.EnergyModel.op_actions` and `sim.timing.memory.op_memory`,
exactly as a trace op (through `sim.engines.model.simulate_ops`, the trace path, so a pair fuses
under the same rule): ``dense_time_us`` is the array with reuse off (``dense_total_cycles``),
``time_us`` the array with reuse (``total_cycles``, similarity unit included). The decisions are
synthetic when a field is given (``reuse``: `algo.workloads.synth.SynthField` — shares r and p, regions of
positions, frame persistence; `algo.workloads.synth.field_decisions`, one generator seeded by ``seed`` and
the op signature), and all COMPUTE otherwise (then ``time_us`` = ``dense_time_us``: no reuse is
claimed). An op without a token grid runs dense. Synthetic decisions say what given shares buy on
the array, not what a model's activations would decide (docs/workloads.md).

A100 (`A100Device`): `sim.baselines.a100.op_time_us` (roofline, stated efficiencies).
"""

from __future__ import annotations

import zlib

import numpy as np

from algo.reuse.golden import block_groups
from algo.trace import Group, OpRecord, Trace, pack_decisions
from algo.workloads.format import WorkloadOp
from algo.workloads.synth import SynthField, field_decisions
from hw.config import AcceleratorConfig
from sim.baselines import a100
from sim.cost.actions import FUSED_PAIRS
from sim.cost.energy import EnergyModel
from sim.engines.model import SimError, check_compatible, simulate_ops


def op_signature(op: WorkloadOp) -> tuple:
    """What makes two ops time the same: type, shape, token grid and channel groups."""
    return (op.name, op.batch, op.M, op.K, op.N, op.grid, op.groups, op.x_signed)


def pair_partners(ops: list[WorkloadOp]) -> dict[int, int]:
    """``{i: j}`` both ways for the attention pairs of ``ops`` (module docstring): op i a score op
    (``qk``, ``cross_qk``), j the first later op of its partner type in the same (step, block, rank)
    with the same ``repeat``, ``batch``, ``M`` and ``grid`` and ``K`` equal to i's ``N`` (the keys)."""
    out: dict[int, int] = {}
    open_: dict[tuple, list[int]] = {}
    for i, op in enumerate(ops):
        if op.name in FUSED_PAIRS:
            open_.setdefault((op.step, op.block, op.rank, FUSED_PAIRS[op.name]), []).append(i)
            continue
        for j, q in enumerate(open_.get((op.step, op.block, op.rank, op.name), [])):
            s = ops[q]
            if (s.repeat, s.batch, s.M, s.grid, s.N) == (op.repeat, op.batch, op.M, op.grid, op.K):
                out[q], out[i] = i, q
                del open_[(op.step, op.block, op.rank, op.name)][j]
                break
    return out


class KaleidoDevice:
    """One Kaleido chip (module docstring). ``reuse``: None (dense) or an `algo.workloads.synth.SynthField`."""

    kind = "kaleido"

    def __init__(self, cfg: AcceleratorConfig, reuse: SynthField | None = None, seed: int = 0,
                 b_msb: int = 4, tech=None):
        self.cfg, self.reuse, self.seed, self.b_msb = cfg, reuse, int(seed), int(b_msb)
        self.energy = EnergyModel(cfg, tech)
        self.name = cfg.name
        self._cache: dict[tuple, dict] = {}

    def describe(self) -> dict:
        return {"kind": self.kind, "name": self.name, "config": self.cfg.model_dump(mode="json"),
                "reuse": None if self.reuse is None else {
                    "reuse": self.reuse.reuse, "partial": self.reuse.partial, "region": list(self.reuse.region),
                    "persist": self.reuse.persist},
                "decisions": (f"synthetic field (algo.workloads.synth.field_decisions), seed {self.seed}" if self.reuse
                              else "all COMPUTE (reuse off)")}

    def time(self, op: WorkloadOp, partner: WorkloadOp | None = None) -> dict:
        """``{"time_us", "dense_time_us", "cycles", "dense_cycles", "energy_pj", "dense_energy_pj",
        "reuse_fraction", "fused"}`` of one copy; ``partner``: the other op of its attention pair
        (`pair_partners`), timed together with it (``fused``: whether the pair ran fused).

        Raises:
            SimError: the op does not fit the config (`sim.engines.model.check_compatible`).
        """
        if partner is None:
            key = op_signature(op)
            if key not in self._cache:
                self._cache[key] = self._time([op])[0]
            return self._cache[key]
        pair = (op, partner) if op.name in FUSED_PAIRS else (partner, op)
        key = ("pair", op_signature(pair[0]), op_signature(pair[1]))
        if key not in self._cache:
            self._cache[key] = self._time(list(pair))
        return self._cache[key][0 if op is pair[0] else 1]

    def _record(self, op: WorkloadOp) -> tuple[OpRecord, tuple]:
        grid = op.grid if op.grid is not None else (1, 1, op.M)
        groups = [tuple(g[:3]) for g in op.groups] or list(block_groups(op.K))
        kinds = [g[3] for g in op.groups] or ["block"] * len(groups)
        if self.reuse is not None and op.grid is not None:
            rng = np.random.default_rng([self.seed, zlib.crc32(repr(op_signature(op)).encode())])
            decs = field_decisions(rng, tuple(grid), groups, op.batch, self.reuse)
        else:
            decs = np.zeros((op.batch, op.M, len(groups)), dtype=np.int8)
        packed = np.stack([pack_decisions(d) for d in decs])[None]
        rec = OpRecord(name=op.name, block=0, step=0, X=None, W=None,
                       groups=[Group(*g, k) for g, k in zip(groups, kinds, strict=True)], theta=(0.0, 0.0),
                       x_signed=op.x_signed, dims=(op.batch, op.M, op.K, op.N), decisions=packed,
                       thetas=((0.0, 0.0),))
        return rec, tuple(grid)

    def _time(self, ops: list[WorkloadOp]) -> list[dict]:
        """Results of one op, or of an attention pair run as a trace's (step, block) would run it."""
        recs = [self._record(op) for op in ops]
        grid = recs[0][1]
        for rec, g in recs:
            check_compatible(Trace(grid=g, ops=[rec], b_msb=self.b_msb), self.cfg)
        per_op, _ = simulate_ops([r for r, _ in recs], grid, self.b_msb, self.cfg, self.energy)
        us = 1.0 / self.cfg.clock_mhz
        out = []
        for op, r in zip(ops, per_op, strict=True):
            dense = {"time_us": r["dense_total_cycles"] * us, "cycles": r["dense_total_cycles"],
                     "energy_pj": r["dense_energy_pj"], "fused": "fused" in r}
            if not (self.reuse is not None and op.grid is not None):
                out.append({**dense, "dense_time_us": dense["time_us"], "dense_cycles": dense["cycles"],
                            "dense_energy_pj": dense["energy_pj"], "reuse_fraction": None})
                continue
            out.append({"time_us": r["total_cycles"] * us, "cycles": r["total_cycles"], "energy_pj": r["energy_pj"],
                        "dense_time_us": dense["time_us"], "dense_cycles": dense["cycles"],
                        "dense_energy_pj": dense["energy_pj"], "reuse_fraction": r["reuse_fraction"],
                        "fused": "fused" in r})
        return out


class A100Device:
    """One NVIDIA A100 on the roofline (`sim.baselines.a100`); ``params`` as `a100.check_params`."""

    kind = "a100"

    def __init__(self, params: dict | None = None):
        self.params = a100.check_params(params)
        self.name = f"a100-{self.params['variant']}"
        self._cache: dict[tuple, dict] = {}

    def describe(self) -> dict:
        return {"kind": self.kind, "name": self.name, "params": self.params, "label": a100.LABEL}

    def time(self, op: WorkloadOp, partner: WorkloadOp | None = None) -> dict:
        """Roofline time of one copy (reuse never applies: ``dense_time_us`` = ``time_us``); ``partner``
        is ignored (the roofline times each GEMM alone, `sim.baselines.a100`)."""
        key = op_signature(op)
        if key not in self._cache:
            t, tc, tm = a100.op_time_us(op.batch, op.M, op.K, op.N, self.params)
            e = a100.VARIANTS[self.params["variant"]]["board_w"] * t * 1e6
            self._cache[key] = {"time_us": t, "dense_time_us": t, "cycles": None, "dense_cycles": None,
                                "energy_pj": e, "dense_energy_pj": e, "reuse_fraction": None,
                                "bound": "compute" if tc >= tm else "memory"}
        return self._cache[key]


A100_NAME = "a100"


def make_device(preset: str, reuse: SynthField | None = None, seed: int = 0, b_msb: int = 4,
                a100_params: dict | None = None):
    """A device from a preset name: ``"a100"`` or an accelerator preset / TOML (`hw.config.load_config`).

    Raises:
        hw.config.ConfigError: unknown preset; `sim.baselines.a100.A100Error`: bad A100 parameters;
        SimError: ``reuse`` given for the A100.
    """
    if preset == A100_NAME:
        if reuse is not None:
            raise SimError("--reuse applies to Kaleido chips; the A100 roofline has no reuse")
        return A100Device(a100_params)
    from hw.config import load_config

    return KaleidoDevice(load_config(preset), reuse, seed, b_msb)


def parse_devices(text: str) -> tuple[str, int]:
    """``"PRESET:P"`` or ``"PRESET"`` -> ``(preset, P)``. Raises `SimError` on a malformed count."""
    preset, sep, count = str(text).rpartition(":")
    if not sep:
        return str(text), 1
    try:
        p = int(count)
    except ValueError:
        raise SimError(f"--devices must be PRESET or PRESET:P with P a positive integer, got {text!r}") from None
    if p < 1 or not preset:
        raise SimError(f"--devices must be PRESET or PRESET:P with P a positive integer, got {text!r}")
    return preset, p
