"""What the reuse hooks (`algo.reuse.torch_hooks`) are built from: op names and pass modes, thresholds per
(step, op), the fake-quantised effective operand of one GEMM (`quantize_reuse`: golden decisions,
``X_eff * scale``), SNR helpers and the decision and error statistics of a run (`ReuseStats`)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from algo.capture.request import CROSS_OPS, SELF_OPS
from algo.models import CaptureError
from algo.reuse.golden import DECISION_NAMES, GroupSpec, decide
from algo.reuse.thresholds import ThetaSpec, check_pair, resolve_theta

__all__ = [
    "ALL_OPS", "CROSS_OPS", "LINEAR_OPS", "MODES", "SELF_OPS", "QuantReuse", "ReuseError", "ReuseStats", "ThetaSpec",
    "dequantize", "parse_ops", "quantize_reuse", "snr_db", "snr_db_energy", "theta_for",
]

ALL_OPS = SELF_OPS + CROSS_OPS


MODES = ("float", "exact", "reuse")


#: Ops whose GEMM is an nn.Linear (the others are computed in the wrapped attention function).
LINEAR_OPS = ("qkv", "o_proj", "ffn1", "ffn2", "cross_q", "cross_o")


Pair = tuple[float, float]


class ReuseError(CaptureError):
    """Reuse inside the model cannot run as asked: unknown op, bad theta, unsupported model or input."""


# -- small helpers ---------------------------------------------------------------------------------

def snr_db_energy(signal_energy: float, noise_energy: float) -> float:
    """``10 log10(signal_energy / noise_energy)`` in dB; ``inf`` when the noise energy is 0.

    Both energies are sums of squares (>= 0). Signal 0 with noise > 0 gives ``-inf``.
    """
    s, n = float(signal_energy), float(noise_energy)
    if n <= 0.0:
        return math.inf
    if s <= 0.0:
        return -math.inf
    return 10.0 * math.log10(s / n)


def snr_db(signal, noise) -> float:
    """SNR in dB of ``signal`` against the error ``noise`` (arrays or tensors, any equal shape).

    ``10 log10(sum signal^2 / sum noise^2)``, in float64; ``inf`` for zero noise.
    Example: signal ``[3, 4]``, noise ``[0.3, 0.4]`` -> 25 / 0.25 = 100 -> 20 dB.
    """
    s = np.asarray(signal.detach().cpu() if isinstance(signal, torch.Tensor) else signal, dtype=np.float64)
    n = np.asarray(noise.detach().cpu() if isinstance(noise, torch.Tensor) else noise, dtype=np.float64)
    return snr_db_energy(float(np.sum(s * s)), float(np.sum(n * n)))


def _energy(t: torch.Tensor) -> float:
    return float(torch.sum(t.to(torch.float64) ** 2))


def parse_ops(ops: str | Iterable[str]) -> tuple[str, ...]:
    """Op types from ``"all"``, ``"self"``, ``"none"``, a comma list or an iterable; in `ALL_OPS` order.

    Raises:
        ReuseError: an unknown op name.
    """
    if isinstance(ops, str):
        key = ops.strip().lower()
        if key in ("all",):
            return ALL_OPS
        if key in ("self", ""):
            return SELF_OPS if key == "self" else ()
        if key == "none":
            return ()
        names = [v.strip() for v in ops.split(",") if v.strip()]
    else:
        names = [str(v) for v in ops]
    unknown = sorted(set(names) - set(ALL_OPS))
    if unknown:
        raise ReuseError(f"unknown op types {unknown}; valid: {', '.join(ALL_OPS)}")
    return tuple(op for op in ALL_OPS if op in set(names))


def _check_pair(t, what: str) -> Pair:
    try:
        return check_pair(t, f" for {what}")
    except ValueError as err:
        raise ReuseError(str(err)) from None


def theta_for(theta: ThetaSpec, step: int, op: str) -> Pair:
    """Resolve ``theta`` for one (step, op) with `algo.reuse.thresholds.resolve_theta` (the project's rules).

    ``theta`` is a pair, a mapping op -> pair (missing ops take its ``"default"`` entry, else
    `algo.reuse.thresholds.DEFAULT_THETA`), a ``callable(step, op)`` or an `algo.reuse.thresholds.ThetaSchedule`.
    ``step`` is the index in the sampling schedule (``0 .. num_inference_steps - 1``). Thresholds are
    mean |difference| per channel in int8 units (docs/spec.md §2).

    Raises:
        ReuseError: the resolved pair is not finite with ``0 <= theta1 <= theta2``.
    """
    try:
        return resolve_theta(theta, int(step), op)
    except ValueError as err:
        raise ReuseError(str(err)) from None


def dequantize(x_int: np.ndarray, scale: float) -> torch.Tensor:
    """``x_int * scale`` computed in float64, rounded once to a float32 tensor of ``x_int``'s shape."""
    return torch.from_numpy((np.asarray(x_int, dtype=np.float64) * float(scale)).astype(np.float32))


@dataclass
class QuantReuse:
    """One fake-quantised (and possibly reused) streamed operand.

    Attributes:
        x_q: ``[B, M, K]`` int8 (uint8 for P) quantised operand.
        scale: float, ``x ~ x_q * scale``.
        x_eff: ``[B, M, K]`` int16 effective operand (``x_q`` itself when reuse is off).
        decisions: ``[B, M, n_groups]`` int8 or None (reuse off).
        groups: the channel groups used.
    """

    x_q: np.ndarray
    scale: float
    x_eff: np.ndarray
    decisions: np.ndarray | None
    groups: list[GroupSpec]


def quantize_reuse(
    x_q: np.ndarray,
    scale: float,
    grid: tuple[int, int, int],
    groups: Sequence[GroupSpec],
    theta: Pair | None,
    b_msb: int = 4,
) -> QuantReuse:
    """Apply the golden reuse algorithm to every batch entry (head) of a quantised operand.

    Args:
        x_q: ``[B, M, K]`` int8 or uint8 (B heads, or 1), raster token order, ``M = F*H*W``.
        scale: its quantisation scale.
        grid: ``(F, H, W)``.
        groups: ``(k_start, k_stop, axis)`` partitioning ``0..K``.
        theta: ``(theta1, theta2)`` or None for reuse off (``x_eff = x_q``).
        b_msb: reused high bits of PARTIAL (1..7).

    Returns:
        `QuantReuse`; ``x_eff[b] = algo.reuse.golden.decide(x_q[b], grid, groups, theta, b_msb)[1]``.
    """
    groups = [tuple(g) for g in groups]
    if theta is None:
        return QuantReuse(x_q, float(scale), x_q.astype(np.int16), None, groups)
    decs, effs = [], []
    for b in range(x_q.shape[0]):
        d, e = decide(x_q[b], grid, groups, theta, b_msb)
        decs.append(d)
        effs.append(e)
    return QuantReuse(x_q, float(scale), np.stack(effs), np.stack(decs), groups)


# -- statistics ------------------------------------------------------------------------------------

@dataclass
class ReuseStats:
    """What the reuse passes did.

    Attributes:
        elements: ``(op, step) -> float64[3]``: elements of X under COMPUTE/PARTIAL/REUSE (each
            token's group decision counted once per channel of the group), summed over blocks and heads.
        macs: ``(op, step) -> float64[3]``: the same weighted by N (multiply-accumulates).
        local: ``(op, step) -> [signal, noise]`` energies of the op's own reuse error: signal
            ``sum (X W)^2``, noise ``sum ((X_eff - X) W)^2``, on the reuse pass's own input.
        vs_exact: ``(op, step) -> [signal, noise]``: ``sum Y_exact^2`` and ``sum (Y_reuse - Y_exact)^2``
            against the exact pass of the same step (same block, same op).
        calls: one dict per recorded op call of a reuse pass: step, block, op and its four energies
            (``local_signal``, ``local_noise``, ``signal``, ``noise``; NaN where not measured).
    """

    elements: dict = field(default_factory=dict)
    macs: dict = field(default_factory=dict)
    local: dict = field(default_factory=dict)
    vs_exact: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)

    @staticmethod
    def _sum(d: dict, op: str | None, steps=None, size: int = 3) -> np.ndarray:
        out = np.zeros(size)
        for (o, s), v in d.items():
            if (op is None or o == op) and (steps is None or s in steps):
                out += v
        return out

    def ops(self) -> list[str]:
        """Op types with recorded decisions, in `ALL_OPS` order."""
        seen = {o for o, _ in self.elements}
        return [o for o in ALL_OPS if o in seen]

    def fractions(self, op: str | None = None, steps=None, weight: str = "elements") -> dict[str, float]:
        """``{"compute", "partial", "reuse"}`` fractions of one op (None: all recorded ops).

        ``weight="elements"`` counts streamed-operand elements; ``"macs"`` weights each by N.
        All zero when nothing was recorded.
        """
        c = self._sum(self.elements if weight == "elements" else self.macs, op, steps)
        tot = c.sum()
        return {n: (float(c[i] / tot) if tot else 0.0) for i, n in enumerate(DECISION_NAMES)}

    def local_snr_db(self, op: str, steps=None) -> float:
        """Pooled local SNR (dB) of ``op``: total signal energy over total noise energy of all calls."""
        s, n = self._sum(self.local, op, steps, 2)
        return snr_db_energy(s, n)

    def snr_db(self, op: str, steps=None) -> float:
        """Pooled SNR (dB) of ``op``'s output against the exact pass's over all recorded calls (NaN: none)."""
        if not any(o == op for o, _ in self.vs_exact):
            return math.nan
        s, n = self._sum(self.vs_exact, op, steps, 2)
        return snr_db_energy(s, n)

    def mean_call_snr_db(self, op: str) -> float:
        """Mean over calls of the per-call SNR (dB) against the exact pass; inf if any call is exact."""
        vals = [snr_db_energy(c["signal"], c["noise"]) for c in self.calls
                if c["op"] == op and not math.isnan(c["signal"])]
        return float(np.mean(vals)) if vals else math.nan

    def _add(self, d: dict, key, vals) -> None:
        d[key] = d.get(key, 0) + np.asarray(vals, dtype=np.float64)
