"""Calibration and pair metrics of the verifier, on numpy arrays.

- :func:`fit_temperature`: the temperature T minimising the negative log-likelihood of
  ``softmax(logits / T)`` on validation pairs (Guo et al., 2017), by golden-section
  search on log T;
- :func:`best_threshold`: the threshold on one class's probability with the best F1 of
  that class against the rest (ties: the higher threshold, fewer false alarms);
- :func:`roc_auc`: the Mann–Whitney form, ties counted half;
- :func:`pair_metrics`: accuracy, macro-F1, per-class precision/recall/F1, the confusion
  matrix and the contradiction ROC AUC (P(REFUTE) against REFUTE vs. the rest).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from factrl.verifier.pairs import VERIFIER_LABELS
from factrl.verifier.scoring import softmax

__all__ = ["best_threshold", "expected_calibration_error", "fit_temperature", "nll", "pair_metrics", "roc_auc"]


def nll(logits: np.ndarray, targets: Sequence[int], temperature: float = 1.0) -> float:
    p = softmax(logits, temperature)
    t = np.asarray(targets, dtype=np.int64)
    return float(-np.mean(np.log(np.clip(p[np.arange(len(t)), t], 1e-12, 1.0))))


def fit_temperature(logits: np.ndarray, targets: Sequence[int], *, low: float = 0.05, high: float = 20.0) -> float:
    """The NLL-minimising temperature in [low, high] (1.0 for no pairs)."""
    if len(targets) == 0:
        return 1.0
    a, b = math.log(low), math.log(high)
    g = (math.sqrt(5) - 1) / 2
    c, d = b - g * (b - a), a + g * (b - a)
    for _ in range(60):
        if nll(logits, targets, math.exp(c)) < nll(logits, targets, math.exp(d)):
            b = d
        else:
            a = c
        c, d = b - g * (b - a), a + g * (b - a)
    return float(math.exp((a + b) / 2))


def roc_auc(scores: Sequence[float], positive: Sequence[bool]) -> float | None:
    """P(score of a random positive > score of a random negative), ties half; None when
    one class is empty."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(positive, dtype=bool)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if not n_pos or not n_neg:
        return None
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s), dtype=np.float64)
    sorted_s = s[order]
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i : j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def best_threshold(probs: Sequence[float], positive: Sequence[bool], *, default: float = 0.5) -> float:
    """The threshold t (a probability seen, or ``default`` with no positives) maximising
    the F1 of ``prob >= t`` for the positive class."""
    p = np.asarray(probs, dtype=np.float64)
    y = np.asarray(positive, dtype=bool)
    if not y.any():
        return default
    best, best_f1 = default, -1.0
    for t in np.unique(p)[::-1]:
        pred = p >= t
        tp = int((pred & y).sum())
        f1 = 2 * tp / (int(pred.sum()) + int(y.sum()))
        if f1 > best_f1 + 1e-12:
            best, best_f1 = float(t), f1
    return best


def expected_calibration_error(probs: np.ndarray, targets: Sequence[int], n_bins: int = 10) -> float | None:
    """ECE of the top-class confidence, equal-width bins."""
    if len(targets) == 0:
        return None
    conf = probs.max(axis=1)
    correct = probs.argmax(axis=1) == np.asarray(targets)
    ece = 0.0
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        mask = (conf > lo) & (conf <= hi) if b else (conf >= lo) & (conf <= hi)
        if mask.any():
            ece += mask.mean() * abs(correct[mask].mean() - conf[mask].mean())
    return float(ece)


def pair_metrics(probs: np.ndarray, targets: Sequence[int]) -> dict[str, Any]:
    """Metrics of argmax predictions (and P(REFUTE) for the ROC AUC) against targets."""
    from factrl.metrics.classification import per_class_prf

    t = [int(x) for x in targets]
    n = len(t)
    if not n:
        return {"n": 0}
    pred = [int(x) for x in probs.argmax(axis=1)]
    names = [label.value for label in VERIFIER_LABELS]
    present = sorted(set(t))
    prf = per_class_prf(t, pred, labels=present)
    confusion = [[sum(1 for g, p in zip(t, pred) if g == i and p == j) for j in range(len(names))]
                 for i in range(len(names))]
    refute = VERIFIER_LABELS.index(VERIFIER_LABELS[1])
    return {
        "n": n,
        "accuracy": sum(g == p for g, p in zip(t, pred)) / n,
        "macro_f1": sum(prf[c].f1 for c in present) / len(present),
        "per_class": {names[c]: {"precision": prf[c].precision, "recall": prf[c].recall, "f1": prf[c].f1,
                                 "support": prf[c].support} for c in present},
        "confusion": {"labels": names, "rows_gold_cols_pred": confusion},
        "contradiction_roc_auc": roc_auc(probs[:, refute], [x == refute for x in t]),
        "ece": expected_calibration_error(probs, t),
    }
