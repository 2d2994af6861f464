import json
from pathlib import Path

import pytest

from factrl.datasets import DATASETS, DatasetFormatError, load_dataset
from factrl.labels import Label

CORPUS = [
    {"doc_id": 11, "title": "Aspirin trial", "abstract": ["Aspirin was tested.", "It lowered risk.", "Side effects were rare."], "structured": False},
    {"doc_id": 22, "title": "Statin cohort", "abstract": ["Statins were studied.", "No effect on risk was seen."], "structured": False},
]


def make_dir(tmp_path: Path, claims: list[object], split: str = "train") -> Path:
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in CORPUS))
    (tmp_path / f"claims_{split}.jsonl").write_text("".join((c if isinstance(c, str) else json.dumps(c)) + "\n" for c in claims))
    return tmp_path


def test_labels_evidence_and_meta(tmp_path: Path) -> None:
    claims = [
        {"id": 1, "claim": "Aspirin lowers risk.", "evidence": {"11": [{"sentences": [1, 2], "label": "SUPPORT"}, {"sentences": [1], "label": "SUPPORT"}]}, "cited_doc_ids": [11]},
        {"id": 2, "claim": "Statins lower risk.", "evidence": {"22": [{"sentences": [1], "label": "CONTRADICT"}]}, "cited_doc_ids": [22, 11]},
        {"id": 3, "claim": "Nothing is known.", "evidence": {}, "cited_doc_ids": [11]},
        {"id": 4, "claim": "Mixed.", "evidence": {"11": [{"sentences": [1], "label": "SUPPORT"}], "22": [{"sentences": [1], "label": "CONTRADICT"}]}, "cited_doc_ids": [11, 22]},
    ]
    result = load_dataset("scifact", make_dir(tmp_path, claims), "train")
    assert result.errors == []
    c1, c2, c3, c4 = result.claims
    assert c1.id == "1" and c1.label is Label.SUPPORT and c1.dataset == "scifact"
    assert c1.evidence_ids == ["doc_id=11_sentence_1", "doc_id=11_sentence_2"]  # deduplicated, in order
    assert c1.evidence[0].doc_id == "11" and c1.evidence[0].text == "It lowered risk."
    assert c2.label is Label.REFUTE and c2.meta["cited_doc_ids"] == ["22", "11"]
    assert c3.label is Label.NEI and c3.evidence == []
    assert c4.label is Label.CONFLICTING and c4.evidence_ids == ["doc_id=11_sentence_1", "doc_id=22_sentence_1"]


def test_test_split_without_evidence_has_no_label(tmp_path: Path) -> None:
    result = load_dataset("scifact", make_dir(tmp_path, [{"id": 9, "claim": "Unlabelled."}], "test"), "test")
    assert result.claims[0].label is None and result.claims[0].meta == {"cited_doc_ids": []}


BAD = [
    ("{broken", "bad JSON"),
    ({"claim": "x", "evidence": {}}, "missing field 'id'"),
    ({"id": 5, "claim": "  ", "evidence": {}}, "field 'claim' is empty"),
    ({"id": 5, "claim": "x", "evidence": []}, "'evidence' must be an object"),
    ({"id": 5, "claim": "x", "evidence": {"99": [{"sentences": [0], "label": "SUPPORT"}]}}, "document 99 which is not in corpus"),
    ({"id": 5, "claim": "x", "evidence": {"11": [{"sentences": [3], "label": "SUPPORT"}]}}, "3 is not a sentence index of document 11"),
    ({"id": 5, "claim": "x", "evidence": {"11": [{"sentences": [0], "label": "MAYBE"}]}}, "unknown label 'MAYBE'"),
    ({"id": 5, "claim": "x", "evidence": {"11": [{"label": "SUPPORT"}]}}, "must be an object with 'sentences' and 'label'"),
    ({"id": 5, "claim": "x", "evidence": {"11": [{"sentences": [0], "label": "NEI"}]}}, "must be SUPPORT or CONTRADICT"),
    ({"id": 5, "claim": "x", "cited_doc_ids": "11"}, "cited_doc_ids"),
]


@pytest.mark.parametrize(("row", "reason"), BAD)
def test_bad_rows_name_file_line_reason(tmp_path: Path, row: object, reason: str) -> None:
    d = make_dir(tmp_path, [{"id": 1, "claim": "ok", "evidence": {}}, row])
    with pytest.raises(DatasetFormatError) as info:
        load_dataset("scifact", d, "train")
    assert info.value.line == 2 and reason in str(info.value)
    assert str(d / "claims_train.jsonl") + ":2" in str(info.value)


def test_skip_collects_errors_and_limit_stops(tmp_path: Path) -> None:
    rows = [{"id": 1, "claim": "ok", "evidence": {}}] + [r for r, _ in BAD] + [{"id": 2, "claim": "ok too"}, {"id": 3, "claim": "three"}, {"id": 1, "claim": "dup"}]
    d = make_dir(tmp_path, rows)
    result = load_dataset("scifact", d, "train", on_error="skip")
    assert [c.id for c in result.claims] == ["1", "2", "3"]
    assert len(result.errors) == len(BAD) + 1 and "duplicate claim id '1'" in result.errors[-1].reason
    assert [c.id for c in load_dataset("scifact", d, "train", on_error="skip", limit=2).claims] == ["1", "2"]


def test_missing_split_names_what_exists(tmp_path: Path) -> None:
    d = make_dir(tmp_path, [])
    with pytest.raises(FileNotFoundError, match="found: claims_train.jsonl"):
        DATASETS.get("scifact")().load(d, "dev")


@pytest.mark.data
def test_real_scifact_train(shared_data: Path) -> None:
    result = load_dataset("scifact", shared_data / "scifact", "train")
    assert len(result.claims) == 809 and result.errors == []
    counts = {label: sum(c.label is label for c in result.claims) for label in Label}
    assert (counts[Label.SUPPORT], counts[Label.REFUTE], counts[Label.NEI]) == (332, 173, 304)
    assert all(e.text for c in result.claims for e in c.evidence)
