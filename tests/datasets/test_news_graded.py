from collections import Counter
from pathlib import Path

import pytest

from _helpers import FIXTURES, assert_bad_row, write_jsonl
from factrl.datasets import DATASETS, load_dataset
from factrl.datasets.sampling import by_grade, interleave_labels, split_claims
from factrl.labels import Grade, Label


def test_grades_map_to_labels_and_stay_in_meta() -> None:
    claims = load_dataset("news_graded", FIXTURES / "news_graded", "test").claims
    assert [(c.meta["grade"], c.label) for c in claims] == [
        ("half-true", Label.CONFLICTING), ("pants-fire", Label.REFUTE), ("true", Label.SUPPORT),
        ("barely-true", Label.REFUTE), ("mostly-true", Label.SUPPORT), ("false", Label.REFUTE), ("half-true", Label.CONFLICTING),
    ]
    a, b = claims[0], claims[1]
    assert a.meta["grade_raw"] == "half-true" and claims[5].meta["grade_raw"] == "FALSE"
    assert a.meta["explain"] == "Counts include the underinsured." and a.meta["speaker"] == "Bernie Sanders"
    assert a.evidence_ids == ["liar-1_doc_r1", "liar-1_doc_r2"] and a.evidence[0].doc_id == "liar-1_doc_r1"
    assert a.evidence[0].text == "Uninsured rate. About 28 million Americans had no health insurance in 2017."
    assert b.evidence_ids == ["liar-2_doc_0"]  # no document id: its position
    assert claims[3].evidence == []
    rawfc = claims[6]  # CofCED-style names
    assert rawfc.id == "rawfc-7" and rawfc.evidence_ids == ["rawfc-7_doc_0"] and rawfc.evidence[0].text.startswith("Emerson Moser said")
    loader = DATASETS.get("news_graded")
    assert set(loader.labels) == {Label.SUPPORT, Label.REFUTE, Label.CONFLICTING} and len(loader.grades) == 6


def test_balanced_sampling_by_label_or_by_grade() -> None:
    claims = load_dataset("news_graded", FIXTURES / "news_graded", "test").claims
    by_label = interleave_labels(claims, seed=3)
    assert {c.label for c in by_label[:3]} == {Label.SUPPORT, Label.REFUTE, Label.CONFLICTING}
    graded = interleave_labels(claims, seed=3, key=by_grade)
    assert {c.meta["grade"] for c in graded[:6]} == {g.value for g in Grade}
    train, test = split_claims(claims, test_fraction=0.5, seed=0, key=by_grade)
    assert Counter(c.meta["grade"] for c in test) == {"half-true": 1}  # only the grade with 2 claims gives one up
    assert len(train) + len(test) == len(claims)


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"id": "x", "claim": "c", "label": "sort of"}, "unknown grade 'sort of'"),
        ({"id": "x", "claim": "c", "label": "true", "documents": [{"title": "t"}]}, "documents[0] needs a non-empty 'text'"),
        ({"id": "x", "claim": "c", "label": "true", "documents": "text"}, "'documents' must be a list"),
        ({"id": "x", "claim": "c", "label": "true", "documents": [{"id": 1, "text": "a"}, {"id": 1, "text": "b"}]}, "document id 'x_doc_1' repeats"),
        ({"claim": "c", "label": "true"}, "missing field 'id'"),
    ],
)
def test_bad_rows(tmp_path: Path, row: dict, reason: str) -> None:
    path = write_jsonl(tmp_path / "test.jsonl", [{"id": "ok", "claim": "c", "label": "half"}, row])
    assert_bad_row("news_graded", path, 2, reason, good=1)
