"""Macro precision/recall (FFRR, HARIS) and scores per hop count, by hand."""

from __future__ import annotations

import pytest

from factrl.labels import Label
from factrl.metrics import compute_metrics
from factrl.metrics.classification import macro_f1, macro_precision, macro_recall, scores_by_group
from factrl.types import Claim, Verdict

S, R, N = Label.SUPPORT, Label.REFUTE, Label.NEI

# gold S S R R N N, predicted S S R S N (unparsed):
#   S: TP 2 FP 1 FN 0 → P 2/3, R 1;  R: TP 1 FP 0 FN 1 → P 1, R 1/2;
#   N: TP 1 FP 0 FN 1 (the unparsed one) → P 1, R 1/2.
GOLD = [S, S, R, R, N, N]
PRED = [S, S, R, S, N, None]


def test_macro_precision_and_recall_by_hand() -> None:
    assert macro_precision(GOLD, PRED) == pytest.approx((2 / 3 + 1 + 1) / 3)  # 8/9
    assert macro_recall(GOLD, PRED) == pytest.approx((1 + 1 / 2 + 1 / 2) / 3)  # 2/3
    # Macro-F1 averages per-class F1 (0.8, 2/3, 2/3); it is not 2PR/(P+R) of the macros.
    assert macro_f1(GOLD, PRED) == pytest.approx((0.8 + 2 / 3 + 2 / 3) / 3)
    assert macro_f1(GOLD, PRED) != pytest.approx(2 * (8 / 9) * (2 / 3) / (8 / 9 + 2 / 3))
    assert macro_precision([], []) is None and macro_recall([], []) is None


def test_a_class_only_predicted_counts_with_zero() -> None:
    # gold S S, predicted S R: classes {S, R}; S P 1 R 1/2, R P 0 R 0.
    assert macro_precision([S, S], [S, R]) == pytest.approx(0.5)
    assert macro_recall([S, S], [S, R]) == pytest.approx(0.25)


def test_matches_scikit_learn() -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    labels = [S, R, N]
    g = [x.value for x in GOLD]
    p = [x.value if x is not None else "UNPARSED" for x in PRED]
    names = [x.value for x in labels]
    p_sk, r_sk, f_sk, _ = metrics.precision_recall_fscore_support(
        g, p, labels=names, average="macro", zero_division=0
    )
    assert (macro_precision(GOLD, PRED), macro_recall(GOLD, PRED), macro_f1(GOLD, PRED)) == pytest.approx(
        (p_sk, r_sk, f_sk)
    )


def test_scores_by_group_by_hand() -> None:
    hops = [2, 2, 3, 3, 3, 4]
    out = scores_by_group(GOLD, PRED, hops)
    assert list(out) == [2, 3, 4]
    # 2 hops: S→S, S→S: all right, one class.
    assert out[2] == {"n": 2, "accuracy": 1.0, "macro_precision": 1.0, "macro_recall": 1.0, "macro_f1": 1.0}
    # 3 hops: R→R, R→S, N→N. S: P 0 R 0; R: P 1 R 1/2 (F1 2/3); N: P 1 R 1.
    three = out[3]
    assert three["n"] == 3 and three["accuracy"] == pytest.approx(2 / 3)
    assert three["macro_precision"] == pytest.approx(2 / 3)
    assert three["macro_recall"] == pytest.approx(1.5 / 3)
    assert three["macro_f1"] == pytest.approx((0 + 2 / 3 + 1) / 3)
    # 4 hops: N unparsed → accuracy 0, N: P 0 (no predictions), R 0.
    assert out[4] == {"n": 1, "accuracy": 0.0, "macro_precision": 0.0, "macro_recall": 0.0, "macro_f1": 0.0}
    with pytest.raises(ValueError):
        scores_by_group(GOLD, PRED, hops[:-1])


def _pairs(hops: list[object]) -> list[tuple[Claim, Verdict]]:
    out = []
    for i, (g, p, h) in enumerate(zip(GOLD, PRED, hops)):
        meta = {} if h is None else {"num_hops": h}
        out.append((Claim(id=f"c{i}", text=f"claim {i}", label=g, meta=meta),
                    Verdict(label=p, format_ok=p is not None, answered=True)))
    return out


def test_compute_metrics_adds_keys_without_changing_old_ones() -> None:
    m = compute_metrics(_pairs([None] * 6))
    assert "per_hops" not in m
    assert m["accuracy"] == m["label_acc"] == pytest.approx(4 / 6)
    assert m["macro_precision"] == pytest.approx(8 / 9) and m["macro_recall"] == pytest.approx(2 / 3)
    assert m["macro_f1"] == pytest.approx((0.8 + 2 / 3 + 2 / 3) / 3)
    empty = compute_metrics([])
    assert empty["accuracy"] is None and empty["macro_precision"] is None and "per_hops" not in empty


def test_compute_metrics_per_hops() -> None:
    # HoVer writes num_hops as an int; a float or string of the same count is one group.
    m = compute_metrics(_pairs([2, "2", 3.0, 3, 3, None]))
    assert list(m["per_hops"]) == ["2", "3", "unknown"]
    assert m["per_hops"]["2"]["accuracy"] == 1.0 and m["per_hops"]["2"]["n"] == 2
    assert m["per_hops"]["3"]["macro_f1"] == pytest.approx((0 + 2 / 3 + 1) / 3)
    assert m["per_hops"]["unknown"]["n"] == 1
    m = compute_metrics(_pairs([10, 2, 2, 3, 3, 4]))
    assert list(m["per_hops"]) == ["2", "3", "4", "10"]  # numeric order
