"""Reuse thresholds per denoising step and op type ("step-sensitive thresholds", docs/spec.md §2).

A threshold pair ``(theta1, theta2)`` (mean absolute difference per channel, int8 units,
``0 <= theta1 <= theta2``) can be given as

- one pair for everything: ``(4, 12)``;
- a mapping op type -> pair, with an optional ``"default"`` entry: ``{"ffn1": (2, 8), "default": (4, 12)}``;
- a callable ``(step, op) -> pair``;
- a `ThetaSchedule`: an ordered list of rules, the last matching rule wins, parsed from the text
  form the CLI takes: ``"4,12; ffn1=2,8; qk@47-49=8,24"`` (a bare pair sets the default; ``OP=``
  restricts to an op type, ``@A-B`` or ``@A`` to denoising steps A..B).

`resolve_theta(spec, step, op)` turns any of them into a validated pair; bad specs raise
`ValueError` naming the op and step.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

ThetaPair = tuple[float, float]

#: Project default (theta1, theta2), int8 units per channel: on the default tiny capture the late
#: steps show a mix of COMPUTE / PARTIAL / REUSE on every op (measured; table in docs/capture.md).
DEFAULT_THETA: ThetaPair = (4.0, 12.0)


def check_pair(t, where: str = "") -> ThetaPair:
    """Validate one pair; raises `ValueError` (naming `where`) unless ``0 <= theta1 <= theta2``, finite."""
    try:
        t1, t2 = float(t[0]), float(t[1])
        if len(t) != 2:
            raise ValueError
    except (TypeError, ValueError, IndexError):
        raise ValueError(f"theta{where} must be a pair (theta1, theta2), got {t!r}") from None
    if not (math.isfinite(t1) and math.isfinite(t2)) or t1 < 0 or t1 > t2:
        raise ValueError(f"theta{where} must satisfy 0 <= theta1 <= theta2, got ({t1}, {t2})")
    return (t1, t2)


@dataclass(frozen=True)
class ThetaRule:
    """``theta`` applies to op type `op` (None: all) at steps `first`..`last` (None: all)."""

    theta: ThetaPair
    op: str | None = None
    first: int | None = None
    last: int | None = None

    def matches(self, step: int, op: str) -> bool:
        if self.op is not None and self.op != op:
            return False
        if self.first is not None and not (self.first <= step <= self.last):
            return False
        return True


@dataclass(frozen=True)
class ThetaSchedule:
    """Ordered rules; the last rule that matches (step, op) wins; `default` when none does."""

    rules: tuple[ThetaRule, ...] = ()
    default: ThetaPair = DEFAULT_THETA

    def __call__(self, step: int, op: str) -> ThetaPair:
        out = self.default
        for r in self.rules:
            if r.matches(step, op):
                out = r.theta
        return out


_RULE = re.compile(r"^\s*(?:(?P<op>[a-z_0-9]+)?(?:@(?P<a>\d+)(?:-(?P<b>\d+))?)?\s*=)?\s*(?P<t1>[^,=]+),(?P<t2>[^,=]+)$")


def parse_theta(text: str, op_types: tuple[str, ...] | None = None,
                num_steps: int | None = None) -> ThetaSchedule:
    """Parse ``"4,12; ffn1=2,8; qk@47-49=8,24"`` into a `ThetaSchedule`.

    ``num_steps`` is the length of the denoising schedule (steps ``0..num_steps-1``); when given, a
    rule naming a step outside it is rejected (it would silently never apply).

    Raises:
        ValueError: malformed rule, unknown op type (when `op_types` is given), bad pair, A > B,
            a step outside ``0..num_steps-1``.
    """
    rules: list[ThetaRule] = []
    default = DEFAULT_THETA
    for part in (p for p in text.split(";") if p.strip()):
        m = _RULE.match(part)
        if not m:
            raise ValueError(f"cannot parse theta rule {part.strip()!r}; expected 't1,t2', 'OP=t1,t2' or 'OP@A-B=t1,t2'")
        op = m["op"]
        if op is not None and op_types is not None and op not in op_types:
            raise ValueError(f"theta rule {part.strip()!r}: unknown op type {op!r}; op types: {', '.join(op_types)}")
        pair = check_pair((m["t1"], m["t2"]), f" in rule {part.strip()!r}")
        if op is None and m["a"] is None:
            default = pair
            continue
        first = int(m["a"]) if m["a"] is not None else None
        last = int(m["b"]) if m["b"] is not None else first
        if first is not None and last < first:
            raise ValueError(f"theta rule {part.strip()!r}: step range {first}-{last} is empty")
        if first is not None and num_steps is not None and last >= num_steps:
            bad = f"{max(first, num_steps)}-{last}" if last > max(first, num_steps) else f"{last}"
            raise ValueError(f"theta rule {part.strip()!r}: step(s) {bad} outside the schedule of {num_steps} "
                             f"denoising steps (0..{num_steps - 1})")
        rules.append(ThetaRule(pair, op, first, last))
    return ThetaSchedule(tuple(rules), default)


ThetaSpec = ThetaPair | Mapping[str, ThetaPair] | Callable[[int, str], ThetaPair] | ThetaSchedule


def resolve_theta(spec: ThetaSpec, step: int, op: str) -> ThetaPair:
    """The validated ``(theta1, theta2)`` for op type `op` at denoising step `step`.

    Raises:
        ValueError: the spec gives no valid pair for (step, op).
    """
    where = f" for {op} at step {step}"
    if isinstance(spec, Mapping):
        t = spec.get(op, spec.get("default", DEFAULT_THETA))
    elif callable(spec):
        t = spec(step, op)
    else:
        t = spec
    return check_pair(t, where)
