from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factrl.metrics.evidence import covers, evidence_set, exact, hit_rate, iou


def test_iou_worked_examples() -> None:
    assert iou(["a", "b"], ["a", "b"]) == 1.0
    # P = {a, x}, G = {a, b}: |P∩G| = 1, |P∪G| = 3 → 1/3
    assert iou(["a", "x"], ["a", "b"]) == pytest.approx(1 / 3)
    assert iou(["x"], ["a"]) == 0.0
    assert iou([], ["a"]) == 0.0
    assert iou(["x"], []) == 0.0
    assert iou([], []) == 1.0  # IoU(∅, ∅) = 1 by definition


def test_hit_rate_worked_examples() -> None:
    # G = {a, b, c}, P = {a, b, x}: 2 of 3 gold found
    assert hit_rate(["a", "b", "x"], ["a", "b", "c"]) == pytest.approx(2 / 3)
    assert hit_rate(["x"], ["a"]) == 0.0
    assert hit_rate(["x"], []) == 1.0  # nothing required
    assert hit_rate([], []) == 1.0


def test_covers_and_exact() -> None:
    assert covers(["a", "b", "x"], ["a", "b"]) and not exact(["a", "b", "x"], ["a", "b"])
    assert not covers(["a"], ["a", "b"])
    assert covers([], []) and exact([], [])
    assert covers(["x"], []) and not exact(["x"], [])
    assert exact(["b", "a", "a"], ["a", "b"])  # order and duplicates do not matter


def test_evidence_set_normalises_and_rejects_strings() -> None:
    assert evidence_set([" a ", "a", "", "  "]) == frozenset({"a"})
    with pytest.raises(TypeError, match="single string"):
        evidence_set("abc")
    with pytest.raises(TypeError, match="int"):
        evidence_set([1])  # type: ignore[list-item]


ids = st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=6)


@given(p=ids, g=ids)
def test_relations_between_the_measures(p: list[str], g: list[str]) -> None:
    assert 0.0 <= iou(p, g) <= hit_rate(p, g) <= 1.0  # |G| <= |P∪G|
    assert covers(p, g) == (hit_rate(p, g) == 1.0)
    assert exact(p, g) == (iou(p, g) == 1.0)
    assert iou(p, g) == iou(g, p)
