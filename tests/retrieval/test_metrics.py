import math

import pytest

from factrl.retrieval.metrics import collapse_to_docs, doc_ranking, ndcg_at_k, recall_at_k
from factrl.types import Hit, Passage


def test_collapse_keeps_first_occurrence() -> None:
    assert collapse_to_docs(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]


def test_doc_ranking_from_passage_hits() -> None:
    hits = [Hit(passage=Passage(id=f"{d}#{j}", doc_id=d, text="x"), score=s) for d, j, s in [("7", 1, 9.0), ("3", 0, 8.0), ("7", 0, 7.0), ("5", 2, 1.0)]]
    assert doc_ranking(hits) == ["7", "3", "5"]


def test_ndcg_worked_example() -> None:
    # Relevant {b, d}; ranking a b c d: DCG = 1/log2(3) + 1/log2(5) = 0.63093 + 0.43068
    # IDCG = 1 + 1/log2(3) = 1.63093  ->  nDCG = 1.06161 / 1.63093 = 0.65092
    assert ndcg_at_k(["a", "b", "c", "d"], {"b", "d"}, 10) == pytest.approx(0.650921, abs=1e-6)
    # With k=2 only b counts: 0.63093 / 1.63093
    assert ndcg_at_k(["a", "b", "c", "d"], {"b", "d"}, 2) == pytest.approx(0.386853, abs=1e-6)


def test_ndcg_perfect_and_zero() -> None:
    assert ndcg_at_k(["x", "y", "z"], ["x", "y"], 10) == pytest.approx(1.0)
    assert ndcg_at_k(["z", "w"], ["x"], 10) == 0.0
    assert ndcg_at_k([], ["x"], 10) == 0.0


def test_ndcg_duplicates_count_once() -> None:
    # Passage rankings collapse to documents: a second 'b' must not add gain.
    assert ndcg_at_k(["b", "b", "d"], {"b", "d"}, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["a", "a", "b"], {"b"}, 2) == pytest.approx(1 / math.log2(3))


def test_ndcg_graded() -> None:
    # gains a=3, b=1; ranking b a: DCG = 1 + 3/log2(3); IDCG = 3 + 1/log2(3)
    expected = (1 + 3 / math.log2(3)) / (3 + 1 / math.log2(3))
    assert ndcg_at_k(["b", "a"], {"a": 3, "b": 1}, 10) == pytest.approx(expected)


def test_recall_worked_example() -> None:
    assert recall_at_k(["a", "b", "c", "d"], {"b", "d", "e"}, 2) == pytest.approx(1 / 3)
    assert recall_at_k(["a", "b", "c", "d"], {"b", "d", "e"}, 4) == pytest.approx(2 / 3)
    assert recall_at_k(["b", "b", "b"], {"b", "d"}, 2) == pytest.approx(0.5)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="no relevant ids"):
        ndcg_at_k(["a"], [], 10)
    with pytest.raises(ValueError, match="k must be"):
        recall_at_k(["a"], ["a"], 0)
    with pytest.raises(TypeError):
        recall_at_k(["a"], "a", 1)
