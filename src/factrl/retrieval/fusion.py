"""Rank fusion: pure functions over ranked runs (lists of ``(id, score)``, best first).

* :func:`rrf` — reciprocal-rank fusion (Cormack et al., 2009):
  ``fused(d) = Σ_runs w_r / (k + rank_r(d))`` with ranks starting at 1 and ``k = 60``;
  a run contributes only its first ``depth`` items.
* :func:`score_fusion` — a weighted sum of per-run normalised scores (``"minmax"`` to
  [0, 1] or ``"zscore"``); an id missing from a run gets that run's lowest normalised
  score there, so being absent never beats being retrieved last.

Ties in the fused score keep the order in which ids were first seen (run by run, rank
by rank), so results are deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["FUSION_METHODS", "NORMALISATIONS", "Run", "minmax", "rrf", "score_fusion", "zscore"]

Run = Sequence[tuple[str, float]]
FUSION_METHODS = ("rrf", "score")
NORMALISATIONS = ("minmax", "zscore")


def _weights(n_runs: int, weights: Sequence[float] | None) -> list[float]:
    if weights is None:
        return [1.0] * n_runs
    if len(weights) != n_runs:
        raise ValueError(f"got {len(weights)} weights for {n_runs} runs")
    out = [float(w) for w in weights]
    if any(w < 0 or math.isnan(w) for w in out):
        raise ValueError(f"weights must be >= 0, got {list(weights)}")
    return out


def _ranked(order: list[str], fused: dict[str, float]) -> list[tuple[str, float]]:
    first_seen = {d: i for i, d in enumerate(order)}
    return sorted(fused.items(), key=lambda kv: (-kv[1], first_seen[kv[0]]))


def _dedup(run: Run, depth: int | None) -> list[tuple[str, float]]:
    """First occurrence of each id, at most ``depth`` of them."""
    seen: set[str] = set()
    out: list[tuple[str, float]] = []
    for doc, score in run:
        if doc in seen:
            continue
        seen.add(doc)
        out.append((doc, float(score)))
        if depth is not None and len(out) >= depth:
            break
    return out


def rrf(runs: Sequence[Run], *, k: float = 60.0, depth: int | None = None,
        weights: Sequence[float] | None = None) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion of ``runs``; scores of the input runs are ignored."""
    if k < 0:
        raise ValueError(f"the RRF constant k must be >= 0, got {k}")
    if depth is not None and depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    ws = _weights(len(runs), weights)
    fused: dict[str, float] = {}
    order: list[str] = []
    for run, w in zip(runs, ws):
        for rank, (doc, _) in enumerate(_dedup(run, depth), start=1):
            if doc not in fused:
                fused[doc] = 0.0
                order.append(doc)
            fused[doc] += w / (k + rank)
    return _ranked(order, fused)


def minmax(scores: Sequence[float]) -> list[float]:
    """Scale to [0, 1]; all-equal scores map to 1 (each is as good as the best)."""
    if not scores:
        return []
    lo, hi = min(scores), max(scores)
    if hi == lo:
        return [1.0] * len(scores)
    return [(s - lo) / (hi - lo) for s in scores]


def zscore(scores: Sequence[float]) -> list[float]:
    """Subtract the mean, divide by the (population) standard deviation; all-equal → 0."""
    if not scores:
        return []
    mean = sum(scores) / len(scores)
    sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    if sd == 0:
        return [0.0] * len(scores)
    return [(s - mean) / sd for s in scores]


def score_fusion(runs: Sequence[Run], *, weights: Sequence[float] | None = None, norm: str = "minmax",
                 depth: int | None = None) -> list[tuple[str, float]]:
    """Weighted sum of normalised scores over the first ``depth`` items of each run."""
    if norm not in NORMALISATIONS:
        raise ValueError(f"unknown normalisation {norm!r}; choose from {', '.join(NORMALISATIONS)}")
    if depth is not None and depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    ws = _weights(len(runs), weights)
    normalise = minmax if norm == "minmax" else zscore
    per_run: list[dict[str, float]] = []
    floors: list[float] = []
    order: list[str] = []
    seen: set[str] = set()
    for run in runs:
        items = _dedup(run, depth)
        values = normalise([s for _, s in items])
        per_run.append(dict(zip((d for d, _ in items), values)))
        floors.append(min(values) if values else 0.0)
        for d, _ in items:
            if d not in seen:
                seen.add(d)
                order.append(d)
    fused = {d: sum(w * scores.get(d, floor) for scores, floor, w in zip(per_run, floors, ws)) for d in order}
    return _ranked(order, fused)
