"""Calibration and pair metrics on worked examples."""

from __future__ import annotations

import numpy as np
import pytest

from factrl.verifier.calibration import best_threshold, fit_temperature, nll, pair_metrics, roc_auc
from factrl.verifier.scoring import Thresholds, softmax


def test_roc_auc_worked_example_with_ties():
    # positives 0.9, 0.5; negatives 0.5, 0.1: pairs (0.9>0.5), (0.9>0.1), (0.5=0.5 → ½), (0.5>0.1) = 3.5/4
    assert roc_auc([0.9, 0.5, 0.5, 0.1], [True, True, False, False]) == pytest.approx(0.875)
    assert roc_auc([0.1, 0.9], [True, False]) == 0.0
    assert roc_auc([0.3, 0.4], [True, True]) is None


def test_roc_auc_matches_the_pairwise_definition():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 5, 60).astype(float)  # many ties
    y = rng.random(60) < 0.4
    pos, neg = s[y], s[~y]
    want = np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])
    assert roc_auc(s, y) == pytest.approx(want)


def test_fit_temperature_recovers_the_generating_temperature():
    rng = np.random.default_rng(1)
    logits = rng.normal(0, 3, (4000, 3))
    p = softmax(logits, 2.5)  # labels drawn from the logits at T = 2.5
    targets = [int(rng.choice(3, p=row)) for row in p]
    t = fit_temperature(logits, targets)
    assert t == pytest.approx(2.5, rel=0.1)
    assert nll(logits, targets, t) <= nll(logits, targets, 1.0)


def test_best_threshold_maximises_f1():
    probs = [0.9, 0.8, 0.6, 0.4, 0.2]
    positive = [True, True, False, True, False]
    # t=0.8: P=1, R=2/3 → 0.8; t=0.4: P=3/4, R=1 → 0.857; t=0.6: 2/3·... → 0.667
    assert best_threshold(probs, positive) == pytest.approx(0.4)
    assert best_threshold([0.3], [False], default=0.7) == 0.7


def test_pair_metrics_counts():
    probs = np.array([[0.8, 0.1, 0.1], [0.1, 0.8, 0.1], [0.1, 0.2, 0.7], [0.6, 0.3, 0.1]])
    m = pair_metrics(probs, [0, 1, 2, 1])
    assert m["accuracy"] == 0.75
    assert m["confusion"]["rows_gold_cols_pred"][1] == [1, 1, 0]
    assert m["per_class"]["REFUTE"]["recall"] == 0.5
    assert m["contradiction_roc_auc"] == pytest.approx(1.0)


def test_thresholds_are_checked():
    with pytest.raises(ValueError):
        Thresholds(support=1.5)
