"""Held-out evaluation of a verifier on pairs: per-source metrics with 95 % intervals.

For each source: accuracy, macro-F1, per-class precision/recall/F1, the confusion
matrix, the contradiction ROC AUC (P(REFUTE), REFUTE against the rest) and the ECE, over
all its held-out pairs; for SciFact also over the *rationale* pairs (a SUPPORT/REFUTE
claim with its gold rationale sentences, an NEI claim with the best sentences of the
abstracts it cites: SciFact's label-prediction setting, without the gold abstract's
other sentences; ``scifact_titled`` likewise). Intervals: percentile bootstrap over
claims (1,000 resamples, seeded), since one claim's pairs are not independent.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from factrl.verifier.calibration import pair_metrics, roc_auc
from factrl.verifier.pairs import Pair
from factrl.verifier.scoring import PairVerifier

__all__ = ["RATIONALE_KINDS", "RATIONALE_SOURCES", "bootstrap_intervals", "evaluate_pairs"]

RATIONALE_KINDS = frozenset({"gold", "cited"})
RATIONALE_SOURCES = frozenset({"scifact", "scifact_titled"})  # sources whose rationale subset is reported


def _macro_f1(probs: np.ndarray, targets: np.ndarray) -> float:
    pred = probs.argmax(axis=1)
    f1s = []
    for c in np.unique(targets):
        tp = float(((pred == c) & (targets == c)).sum())
        denom = float((pred == c).sum() + (targets == c).sum())
        f1s.append(2 * tp / denom if denom else 0.0)
    return float(np.mean(f1s)) if f1s else float("nan")


def bootstrap_intervals(probs: np.ndarray, targets: Sequence[int], groups: Sequence[str], *, rounds: int = 1000,
                        seed: int = 0) -> dict[str, list[float] | None]:
    """95 % percentile intervals of macro-F1, accuracy and contradiction ROC AUC,
    resampling groups (claims) with replacement."""
    t = np.asarray(targets)
    names = sorted(set(groups))
    if not names:
        return {"macro_f1": None, "accuracy": None, "contradiction_roc_auc": None}
    rows = {g: [] for g in names}
    for i, g in enumerate(groups):
        rows[g].append(i)
    index = [np.asarray(rows[g]) for g in names]
    rng = np.random.default_rng(seed)
    f1s, accs, aucs = [], [], []
    for _ in range(rounds):
        pick = np.concatenate([index[j] for j in rng.integers(0, len(names), len(names))])
        p, y = probs[pick], t[pick]
        f1s.append(_macro_f1(p, y))
        accs.append(float((p.argmax(axis=1) == y).mean()))
        auc = roc_auc(p[:, 1], y == 1)
        if auc is not None:
            aucs.append(auc)

    def ci(xs: list[float]) -> list[float] | None:
        return [float(np.percentile(xs, 2.5)), float(np.percentile(xs, 97.5))] if xs else None

    return {"macro_f1": ci(f1s), "accuracy": ci(accs), "contradiction_roc_auc": ci(aucs)}


def _block(probs: np.ndarray, pairs: Sequence[Pair], rounds: int) -> dict[str, Any]:
    targets = [p.target for p in pairs]
    out = pair_metrics(probs, targets)
    out["ci95"] = bootstrap_intervals(probs, targets, [f"{p.source}:{p.claim_id}" for p in pairs], rounds=rounds)
    out["claims"] = len({(p.source, p.claim_id) for p in pairs})
    return out


def evaluate_pairs(verifier: PairVerifier, pairs: Sequence[Pair], *, rounds: int = 1000) -> dict[str, Any]:
    """Metrics per source (and SciFact's rationale subset) and over all pairs, plus the
    scoring throughput of this call."""
    pairs = list(pairs)
    t0 = time.perf_counter()
    probs = verifier.predict([p.claim for p in pairs], [p.evidence for p in pairs]) if pairs else np.zeros((0, 3))
    seconds = time.perf_counter() - t0
    out: dict[str, Any] = {"n": len(pairs), "pairs_per_s": len(pairs) / seconds if seconds > 0 else None,
                           "sources": {}}
    for source in sorted({p.source for p in pairs}):
        idx = [i for i, p in enumerate(pairs) if p.source == source]
        block = {"all": _block(probs[idx], [pairs[i] for i in idx], rounds)}
        if source in RATIONALE_SOURCES:
            rat = [i for i in idx if pairs[i].kind in RATIONALE_KINDS]
            block["rationale"] = _block(probs[rat], [pairs[i] for i in rat], rounds)
        out["sources"][source] = block
    out["all"] = _block(probs, pairs, rounds) if pairs else {"n": 0}
    return out
