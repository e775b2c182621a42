"""Decision statistics of a trace: fractions per op, group kind, block and step; histograms of Δ.

Δ is the similarity the decision compares, per channel: ``SAD(i, g) / |g|``, the mean absolute
difference between a token and its neighbour's effective value over the group, in int8 units (the
unit of theta, docs/spec.md §2). Tokens without a neighbour have no Δ and always COMPUTE.

Fractions count streamed-operand elements (a (token, group) decision weighs |g| channels), so
they are the share of X's values computed, partially reused or reused.

Decision traces (`algo.trace`, kind ``"decisions"``) hold no operands: their fractions come from the
stored decisions for ``thetas[theta_index]`` and they contribute nothing to the Δ histograms.

Exact ops are decided in row chunks (`algo.reuse.chunked.decision_chunks`): a ``pv`` op whose P is
derived (a trace read with ``derive_p=False``) one latent frame of one head at a time, P never whole;
counts and histogram bins are integer sums over the chunks, so the statistics equal those of the
whole operand exactly (tests/test_chunked.py).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from algo.reuse.chunked import decision_chunks
from algo.reuse.golden import COMPUTE, DECISION_NAMES, PARTIAL, REUSE
from algo.trace import Trace

#: Histogram bin edges of Δ in int8 units per channel: 0.5-unit bins up to 32, then one overflow bin.
#: 32 = a quarter of the int8 range; thresholds in use are well below (docs/capture.md).
DELTA_EDGES = np.concatenate([np.arange(0.0, 32.0 + 1e-9, 0.5), [np.inf]])


def decision_counts(dec: np.ndarray, widths: np.ndarray) -> np.ndarray:
    """Streamed-operand elements per decision code: int64 ``[3]`` (COMPUTE, PARTIAL, REUSE).

    Args:
        dec: int8 decision codes ``[..., G]`` (last axis: channel groups).
        widths: ``[G]`` channels per group; a (token, group) decision weighs ``widths[g]`` elements.
    """
    w = np.asarray(widths, dtype=np.int64)
    return np.array([int(((dec == code) * w).sum()) for code in (COMPUTE, PARTIAL, REUSE)], dtype=np.int64)


def _fractions(counts: np.ndarray) -> dict[str, float]:
    total = counts.sum()
    return {n: float(counts[i] / total) if total else 0.0 for i, n in enumerate(DECISION_NAMES)}


def trace_statistics(trace: Trace, theta_index: int = 0) -> dict:
    """Decision fractions and Δ histograms of every op of `trace` under its recorded thresholds.

    Returns:
        ``{"ops": [...], "by_op_type": {...}, "by_group_kind": {...}, "by_block": {...},
        "by_step": {...}, "total": {...}, "delta_histogram": {"edges": [...], "counts": {kind: [...]}}}``
        where every fraction entry is ``{"compute", "partial", "reuse"}`` summing to 1, ``ops`` items
        carry ``name``, ``block``, ``step``, ``batch``, ``M``, ``K``, ``N``, ``groups``, ``theta``,
        ``reuse_fraction`` and ``by_group_kind``; histogram counts are (token, group) pairs per bin.
        For a decision op ``theta`` is ``thetas[theta_index]`` and ``thetas`` lists every stored pair.

    Raises:
        algo.trace.TraceError: theta_index out of range for a decision op.
    """
    agg: dict[str, dict] = {k: defaultdict(lambda: np.zeros(3, np.int64)) for k in
                            ("op_type", "group_kind", "block", "step")}
    total = np.zeros(3, np.int64)
    hist: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(len(DELTA_EDGES) - 1, np.int64))
    ops = []
    for op in trace.ops:
        groups = [g.as_tuple() for g in op.groups]
        widths = np.array([k1 - k0 for k0, k1, _ in groups], dtype=np.int64)
        kind_groups: dict[str, list[int]] = {}  # kind -> its group indices, kinds in order of first appearance
        for gi, g in enumerate(op.groups):
            kind_groups.setdefault(g.kind, []).append(gi)
        by_kind = {k: np.array(v, dtype=np.int64) for k, v in kind_groups.items()}
        op_counts = np.zeros(3, np.int64)
        kind_counts: dict[str, np.ndarray] = defaultdict(lambda: np.zeros(3, np.int64))
        stored = op.decisions_for(theta_index) if op.kind != "exact" else None
        for b in range(op.batch):
            if stored is None:  # (rows, decisions, SAD) chunks: one for an op with X, one per frame for derived P
                chunks = ((dec, sad) for _, dec, sad in decision_chunks(op, b, trace.grid, op.theta, trace.b_msb))
            else:
                chunks = iter([(stored[b], None)])
            for dec, sad in chunks:
                for kind, idx in by_kind.items():  # all groups of one kind at once: the same sums and bins
                    c = decision_counts(dec[:, idx], widths[idx])
                    kind_counts[kind] += c
                    op_counts += c
                    if sad is not None:
                        s = sad[:, idx]
                        delta = (s / widths[idx])[s >= 0]
                        hist[kind] += np.histogram(delta, bins=DELTA_EDGES)[0]
        for kind, c in kind_counts.items():
            agg["group_kind"][kind] += c
        agg["op_type"][op.name] += op_counts
        agg["block"][str(op.block)] += op_counts
        agg["step"][str(op.step)] += op_counts
        total += op_counts
        item = {
            "name": op.name, "block": op.block, "step": op.step, "batch": op.batch,
            "M": op.M, "K": op.K, "N": op.N, "groups": len(groups),
            "theta": list(op.theta if stored is None else op.thetas[theta_index]),
            "reuse_fraction": _fractions(op_counts),
            "by_group_kind": {k: _fractions(c) for k, c in kind_counts.items()},
        }
        if stored is not None:
            item["thetas"] = [list(t) for t in op.thetas]
        ops.append(item)
    return {
        "ops": ops,
        "by_op_type": {k: _fractions(v) for k, v in agg["op_type"].items()},
        "by_group_kind": {k: _fractions(v) for k, v in agg["group_kind"].items()},
        "by_block": {k: _fractions(v) for k, v in sorted(agg["block"].items(), key=lambda kv: int(kv[0]))},
        "by_step": {k: _fractions(v) for k, v in sorted(agg["step"].items(), key=lambda kv: int(kv[0]))},
        "total": _fractions(total),
        "delta_histogram": {
            "unit": "mean |X - X_eff[nb]| per channel, int8 units",
            "edges": [float(e) if np.isfinite(e) else "inf" for e in DELTA_EDGES],
            "counts": {k: v.tolist() for k, v in sorted(hist.items())},
        },
    }
