from collections import Counter
from pathlib import Path

import pytest

from _helpers import FIXTURES, assert_bad_row, write_jsonl
from factrl.datasets import DATASETS, load_dataset
from factrl.labels import Label

GOOD = {"id": 1, "label": "SUPPORTS", "claim": "x", "evidence": [[[1, 2, "P", 0]]]}


def test_fixture_labels_ids_and_sets() -> None:
    result = load_dataset("fever", FIXTURES / "fever", "dev")
    a, b, c = result.claims
    assert a.id == "101" and a.label is Label.SUPPORT and a.dataset == "fever"
    assert a.evidence_ids == ["Soul_Food_-LRB-film-RRB-_sentence_0"]  # union of two identical sets
    assert a.evidence[0].doc_id == "Soul_Food_-LRB-film-RRB-" and a.evidence[0].text is None
    assert b.label is Label.REFUTE
    assert b.evidence_ids == ["Telemundo_sentence_0", "Telemundo_sentence_4", "Hispanic_and_Latino_Americans_sentence_0"]
    assert b.meta["evidence_sets"] == [["Telemundo_sentence_0"], ["Telemundo_sentence_4", "Hispanic_and_Latino_Americans_sentence_0"]]
    assert c.label is Label.NEI and c.evidence == [] and c.meta == {"evidence_sets": [], "verifiable": "NOT VERIFIABLE"}
    assert set(DATASETS.get("fever").labels) == {Label.SUPPORT, Label.REFUTE, Label.NEI}


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({**GOOD, "label": "MAYBE"}, "unknown label 'MAYBE'"),
        ({**GOOD, "evidence": [[[1, 2, "P"]]]}, "evidence[0][0] must be [annotation_id"),
        ({**GOOD, "evidence": [[[1, 2, "P", -1]]]}, "sentence index must be an integer >= 0"),
        ({**GOOD, "evidence": [[[1, None, None, None]]]}, "a SUPPORT claim needs at least one evidence sentence"),
        ({**GOOD, "claim": ""}, "field 'claim' is empty"),
    ],
)
def test_bad_rows(tmp_path: Path, row: dict, reason: str) -> None:
    path = write_jsonl(tmp_path / "test.jsonl", [{**GOOD, "id": 0}, row])
    assert_bad_row("fever", path, 2, reason, good=1)


def test_folder_without_the_split_names_what_it_looked_for(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="paper_train.jsonl"):
        load_dataset("fever", FIXTURES / "fever", "train")


@pytest.mark.data
def test_real_paper_dev(shared_data: Path) -> None:
    result = load_dataset("fever", shared_data / "fever" / "paper_dev.jsonl", "dev")
    assert len(result.claims) == 9999 and result.errors == []
    assert Counter(c.label for c in result.claims) == {Label.SUPPORT: 3333, Label.REFUTE: 3333, Label.NEI: 3333}
    assert all(c.evidence for c in result.claims if c.label is not Label.NEI)
    assert all(not c.evidence for c in result.claims if c.label is Label.NEI)
