"""HARIS's run metrics: accuracy with unanswered episodes wrong, their count, the
released code's coin-flip fill, and support-weighted P/R/F1 (its metric.json's)."""

import json

import pytest

from factrl.labels import Label
from factrl.metrics.haris_eval import haris_accuracy, write_haris_metrics
from factrl.types import Claim, Trajectory, Verdict


def traj(i, gold, pred, error=None, **meta):
    return Trajectory(claim_id=str(i), env="haris", claim=Claim(id=str(i), text="c", label=gold), prompt=[],
                      verdict=Verdict(label=pred, answered=pred is not None), error=error, meta=meta)


S, R = Label.SUPPORT, Label.REFUTE


def test_unanswered_counted_wrong_and_filled_by_a_fair_coin():
    trajs = [traj(0, S, S), traj(1, S, None), traj(2, R, R), traj(3, "NOT ENOUGH INFO", S),
             traj(4, R, R, error="generate failed"), traj(5, "CONFLICTING", S)]
    m = haris_accuracy(trajs)
    assert m["n"] == 5 and m["unscoreable"] == 1
    assert m["accuracy"] == pytest.approx(2 / 5)  # NEI reads as Refute; the failed episode is wrong
    assert m["unanswered"] == 2 and m["accuracy_random_fill"] == pytest.approx(3 / 5)
    assert m["recall"] == pytest.approx(m["accuracy"])  # support-weighted recall is accuracy


def test_weighted_scores_equal_sklearns():
    sklearn = pytest.importorskip("sklearn.metrics")
    gold = [S, S, S, R, R, R, R, S]
    pred = [S, R, None, R, R, S, None, S]
    m = haris_accuracy([traj(i, g, p) for i, (g, p) in enumerate(zip(gold, pred))])
    y, yhat = [g.value for g in gold], [p.value if p else "" for p in pred]
    p, r, f, _ = sklearn.precision_recall_fscore_support(y, yhat, labels=["SUPPORT", "REFUTE"], average="weighted",
                                                         zero_division=0)
    assert (m["precision"], m["recall"], m["f1"]) == pytest.approx((p, r, f))
    assert m["accuracy"] == pytest.approx(sklearn.accuracy_score(y, yhat))
    # the coin's expected scores: the mean over every way of filling the two gaps
    fills = []
    for a in ("SUPPORT", "REFUTE"):
        for b in ("SUPPORT", "REFUTE"):
            filled = [a if i == 2 else b if i == 6 else v for i, v in enumerate(yhat)]
            fills.append(sklearn.accuracy_score(y, filled))
    assert m["accuracy_random_fill"] == pytest.approx(sum(fills) / 4)


def test_released_outcomes_and_the_file(tmp_path):
    trajs = [traj(0, S, S, released_outcome="SUPPORT", reruns=0), traj(1, R, None, released_outcome="RERUN", reruns=3)]
    out = write_haris_metrics(tmp_path, trajs, lms={}, reward=None)
    assert out["released_outcomes"] == {"RERUN": 1, "SUPPORT": 1} and out["reruns"] == 3
    assert json.loads((tmp_path / "haris.json").read_text()) == out
    assert "released_outcomes" not in haris_accuracy([traj(0, S, S)])
