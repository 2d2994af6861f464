from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrl.labels import Label
from factrl.metrics.classification import (
    PRF,
    MajorityBaseline,
    accuracy,
    confusion_matrix,
    macro_f1,
    majority_baseline,
    ordered_labels,
    per_class_prf,
)

S, R, N, C = Label.SUPPORT, Label.REFUTE, Label.NEI, Label.CONFLICTING

# Six items used throughout: gold S S R R N N, predicted S S R S N (unparsed)
GOLD = [S, S, R, R, N, N]
PRED = [S, S, R, S, N, None]


def test_accuracy() -> None:
    # correct at positions 0, 1, 2, 4 → 4/6
    assert accuracy(GOLD, PRED) == pytest.approx(4 / 6)
    assert accuracy([], []) is None


def test_per_class_and_macro_f1_by_hand() -> None:
    prf = per_class_prf(GOLD, PRED)
    assert list(prf) == [S, R, N]  # enum order; None is not a class
    # S: TP 2, FP 1 (gold R predicted S), FN 0 → P 2/3, R 1, F1 = 2·(2/3)·1/(5/3) = 0.8
    assert prf[S] == PRF(precision=pytest.approx(2 / 3), recall=1.0, f1=pytest.approx(0.8),
                         support=2)
    # R: TP 1, FP 0, FN 1 → P 1, R 1/2, F1 = 2·0.5/1.5 = 2/3
    assert (prf[R].precision, prf[R].recall) == (1.0, 0.5)
    assert prf[R].f1 == pytest.approx(2 / 3)
    # N: TP 1, FP 0, FN 1 (the unparsed answer) → P 1, R 1/2, F1 2/3
    assert (prf[N].precision, prf[N].recall) == (1.0, 0.5)
    # macro = (0.8 + 2/3 + 2/3) / 3 = 0.71111
    assert macro_f1(GOLD, PRED) == pytest.approx((0.8 + 4 / 3) / 3)


def test_macro_f1_counts_a_class_only_the_model_predicts() -> None:
    # gold S S R, pred S N R → classes S, R, N
    # S: TP 1, FN 1 → P 1, R 1/2, F1 2/3; R: F1 1; N: TP 0, FP 1 → F1 0 (undefined → 0)
    # macro = (2/3 + 1 + 0) / 3 = 5/9
    assert macro_f1([S, S, R], [S, N, R]) == pytest.approx(5 / 9)
    # with the label set fixed to gold's classes only: (2/3 + 1) / 2 = 5/6
    assert macro_f1([S, S, R], [S, N, R], labels=[S, R]) == pytest.approx(5 / 6)


def test_all_unparsed_gives_zero_f1_not_a_crash() -> None:
    assert macro_f1([S, R], [None, None]) == 0.0
    assert macro_f1([], []) is None


def test_confusion_matrix() -> None:
    cm = confusion_matrix(GOLD, PRED)
    assert cm.labels == (S, R, N)
    assert cm.counts == ((2, 0, 0), (1, 1, 0), (0, 0, 1))
    assert cm.unparsed == (0, 0, 1)
    assert cm.count(R, S) == 1 and cm.count(N, None) == 1
    d = cm.to_dict()
    assert d["REFUTE"] == {"SUPPORT": 1, "REFUTE": 1, "NOT ENOUGH INFO": 0, "UNPARSED": 0}


def test_majority_baseline() -> None:
    # R appears 3 times of 5 → always-R is right 3/5
    assert majority_baseline([S, R, R, N, R]) == MajorityBaseline(label=R, acc=0.6)
    # tie S/R/N (2 each) → first in enum order, 2/6
    assert majority_baseline(GOLD) == MajorityBaseline(label=S, acc=pytest.approx(1 / 3))
    assert majority_baseline([]) == MajorityBaseline(label=None, acc=None)


def test_graded_string_labels_are_supported() -> None:
    gold = ["true", "half", "false", "false"]
    pred = ["true", "false", "false", "half"]
    assert ordered_labels(gold) == ["false", "half", "true"]
    # false: TP1 FP1 FN1 → F1 .5; half: TP0 → 0; true: 1 → macro 1.5/3
    assert macro_f1(gold, pred) == pytest.approx(0.5)
    assert majority_baseline(gold) == MajorityBaseline(label="false", acc=0.5)


def test_bad_input() -> None:
    with pytest.raises(ValueError, match="length"):
        accuracy([S], [])
    with pytest.raises(ValueError, match="position 1"):
        accuracy([S, None], [S, S])  # type: ignore[list-item]


label_st = st.sampled_from([S, R, N, C])


@settings(max_examples=60, deadline=None)
@given(pairs=st.lists(st.tuples(label_st, st.none() | label_st), min_size=1, max_size=12))
def test_parity_with_scikit_learn(pairs: list[tuple[Label, Label | None]]) -> None:
    metrics = pytest.importorskip("sklearn.metrics")
    gold = [g for g, _ in pairs]
    pred = [p for _, p in pairs]
    labels = ordered_labels([*gold, *pred])
    # scikit-learn sees the unparsed answer as an extra label that is left out of the average
    g_s = [g.value for g in gold]
    p_s = ["UNPARSED" if p is None else p.value for p in pred]
    ref = metrics.f1_score(g_s, p_s, labels=[x.value for x in labels], average="macro",
                           zero_division=0)
    assert macro_f1(gold, pred) == pytest.approx(ref)
    assert accuracy(gold, pred) == pytest.approx(metrics.accuracy_score(g_s, p_s))
