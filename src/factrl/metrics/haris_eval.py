"""HARIS's run metrics (``factrl eval --agent haris``): accuracy on the paper's two-way
labels with the episodes that gave no verdict counted, and what the released code would
have scored them.

The released code (``haris_infer.py``) never leaves a claim unanswered: after its
re-runs it picks Support or Refute at random, so its published accuracies (its
``exp_results/*/metric.json``, Table 1) include coin flips. factrl scores an unanswered
episode wrong. Both are reported, side by side:

- ``accuracy``: correct / n, an unanswered episode wrong;
- ``unanswered``: episodes with no verdict (no label, or a failed episode);
- ``accuracy_random_fill``: (correct + unanswered / 2) / n, the expected accuracy when
  each unanswered claim gets a fair coin, as the released code does;
- ``precision`` / ``recall`` / ``f1``: averaged over the two gold classes weighted by
  their support (the released results' metric.json; recall then equals accuracy), an
  unanswered episode a miss; ``*_random_fill`` the same with the coin's expected counts;
- ``released_outcomes`` / ``reruns``: under the released convention, how the first runs
  ended (SUPPORT, REFUTE, EMPTY, RERUN) and how many re-runs were made.

A claim whose gold label has no two-way reading (CONFLICTING) is counted in
``unscoreable`` and left out of every rate.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from factrl.protocol.haris import binary_gold
from factrl.labels import Label
from factrl.metrics.run_metrics import RUN_METRICS
from factrl.types import Trajectory

__all__ = ["haris_accuracy", "write_haris_metrics", "SUMMARY_FILE"]

SUMMARY_FILE = "haris.json"
_CLASSES = (Label.SUPPORT, Label.REFUTE)


def _weighted(gold: Sequence[Label], counts: Mapping[tuple[Label, Label], float]) -> dict[str, float | None]:
    """Support-weighted precision, recall and F1 over the gold classes from (gold,
    predicted) → count (fractional for the coin's expected counts)."""
    n = len(gold)
    if not n:
        return {"precision": None, "recall": None, "f1": None}
    out = {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    support = Counter(gold)
    for c in _CLASSES:
        if not support[c]:
            continue
        tp = counts.get((c, c), 0.0)
        predicted = sum(v for (g, p), v in counts.items() if p is c)
        p = tp / predicted if predicted else 0.0
        r = tp / support[c]
        f = 2 * p * r / (p + r) if p + r else 0.0
        w = support[c] / n
        out["precision"] += w * p
        out["recall"] += w * r
        out["f1"] += w * f
    return out


def haris_accuracy(trajectories: Sequence[Trajectory]) -> dict[str, Any]:
    """The summary described in the module doc."""
    scored = [(g, t) for t in trajectories if (g := binary_gold(t.claim.label)) is not None]
    gold = [g for g, _ in scored]
    pred = [None if t.error is not None else t.verdict.label for _, t in scored]
    n = len(scored)
    correct = sum(p is g for g, p in zip(gold, pred))
    unanswered = sum(p not in _CLASSES for p in pred)
    plain: Counter = Counter((g, p) for g, p in zip(gold, pred) if p in _CLASSES)
    filled: dict[tuple[Label, Label], float] = dict(plain)
    for g, p in zip(gold, pred):
        if p not in _CLASSES:
            for c in _CLASSES:
                filled[(g, c)] = filled.get((g, c), 0.0) + 0.5
    out: dict[str, Any] = {
        "n": n,
        "unscoreable": len(trajectories) - n,
        "accuracy": correct / n if n else None,
        "unanswered": unanswered,
        "accuracy_random_fill": (correct + unanswered / 2) / n if n else None,
        **_weighted(gold, plain),
        **{f"{k}_random_fill": v for k, v in _weighted(gold, filled).items()},
    }
    outcomes = Counter(str(t.meta["released_outcome"]) for _, t in scored if t.meta.get("released_outcome"))
    if outcomes:
        out["released_outcomes"] = dict(sorted(outcomes.items()))
        out["reruns"] = sum(int(t.meta.get("reruns") or 0) for _, t in scored)
    return out


def write_haris_metrics(out_dir: Path, trajectories: Sequence[Trajectory], *, lms: Mapping[str, Any],
                        reward: Any) -> dict[str, Any]:
    """The run-level hook of ``factrl eval --agent haris``: writes ``haris.json``."""
    del lms, reward  # rule-based
    summary = haris_accuracy(trajectories)
    (Path(out_dir) / SUMMARY_FILE).write_text(json.dumps(summary, indent=2) + "\n")
    return summary


RUN_METRICS.register("haris")(write_haris_metrics)
