"""Climate-FEVER and AVeriTeC loaders (the two 4-label datasets)."""

import json
from collections import Counter
from pathlib import Path

import pytest

from _helpers import FIXTURES, assert_bad_row, write_json, write_jsonl
from factrl.datasets import DATASETS, load_dataset
from factrl.datasets.sampling import interleave_labels, split_claims
from factrl.labels import Label

FOUR = {Label.SUPPORT, Label.REFUTE, Label.NEI, Label.CONFLICTING}


def test_climate_fever_fixture() -> None:
    a, b, c = load_dataset("climate_fever", FIXTURES / "climate_fever", "test").claims
    assert a.id == "0" and a.label is Label.SUPPORT and a.dataset == "climate_fever"
    assert a.evidence_ids[:2] == ["Global warming:14", "Global warming:178"] and len(a.evidence) == 5
    assert a.evidence[0].doc_id == "Global warming" and a.evidence[0].text.startswith("Environmental impacts")
    assert a.evidence[4].doc_id == "Captain America: The First Avenger"  # colon inside the title
    assert a.meta["evidence_labels"]["Global warming:14"] == "SUPPORT"
    assert a.meta["evidence_labels"]["Polar bear:1328"] == "NOT ENOUGH INFO"
    assert a.meta["evidence_votes"]["Global warming:14"] == ["SUPPORTS", None]
    assert b.label is Label.CONFLICTING and c.label is Label.NEI  # DISPUTED, NOT_ENOUGH_INFO
    assert set(DATASETS.get("climate_fever").labels) == FOUR


def _cf_row(**kw: object) -> dict:
    row = json.loads((FIXTURES / "climate_fever" / "climate-fever.jsonl").read_text().splitlines()[0])
    return {**row, "claim_id": "x", **kw}


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        (_cf_row(claim_label="MAYBE"), "unknown label 'MAYBE'"),
        (_cf_row(evidences=[{"evidence_id": "NoLine", "evidence_label": "SUPPORTS", "evidence": "t"}]), "'NoLine' is not 'Article:line'"),
        (_cf_row(evidences=[{"evidence_id": "A:1", "evidence_label": "SUPPORTS", "evidence": ""}]), "evidences[0]: field 'evidence' is empty"),
        (_cf_row(evidences=[]), "field 'evidences' is empty"),
    ],
)
def test_climate_fever_bad_rows(tmp_path: Path, row: dict, reason: str) -> None:
    path = write_jsonl(tmp_path / "climate-fever.jsonl", [_cf_row(claim_id="ok"), row])
    assert_bad_row("climate_fever", path, 2, reason, good=1)


def test_averitec_fixture() -> None:
    result = load_dataset("averitec", FIXTURES / "averitec", "dev")
    a, b, c, d = result.claims
    assert [x.id for x in result.claims] == ["0", "1", "2", "3"]  # position in the file
    assert [x.label for x in result.claims] == [Label.REFUTE, Label.CONFLICTING, Label.SUPPORT, Label.NEI]
    assert a.evidence_ids == ["0_qa_0", "0_qa_1"] and a.evidence[0].doc_id == "0_qa_0"
    assert a.evidence[0].text == "Where was the claim first published It was first published on Scoopertino"
    assert b.evidence[0].text == "Did reports confirm chemical attacks in Syria? No. The report blamed the regime for attacks. Yes"
    assert b.meta["questions"][0]["answers"][0] == {
        "answer": "No", "answer_type": "Boolean", "source_url": "https://example.org/No",
        "boolean_explanation": "The report blamed the regime for attacks.",
    }
    assert a.meta["justification"] == "Published on a satire site." and a.meta["claim_date"] == "31-10-2020"
    assert "speaker" not in a.meta and b.meta["speaker"] == "A politician"
    assert d.evidence[0].text == "Was such a law passed? No answer could be found."
    assert set(DATASETS.get("averitec").labels) == FOUR


def test_averitec_bad_rows_and_own_ids(tmp_path: Path) -> None:
    good = {"claim": "c", "label": "Supported", "questions": [{"question": "q?", "answers": [{"answer": "a"}]}]}
    path = write_json(tmp_path / "dev.json", [good, {**good, "questions": [{"question": "q?", "answers": []}]}])
    assert_bad_row("averitec", path, 16, "questions[0].answers is empty", good=1)
    own = write_json(tmp_path / "own.json", [{**good, "claim_id": 17}])
    assert load_dataset("averitec", own, "dev").claims[0].evidence_ids == ["17_qa_0"]


def test_balanced_sampling_over_four_labels() -> None:
    claims = load_dataset("averitec", FIXTURES / "averitec", "dev").claims * 3
    claims = [c.model_copy(update={"id": f"{c.id}-{i}"}) for i, c in enumerate(claims)]
    order = interleave_labels(claims, seed=1)
    assert {c.label for c in order[:4]} == FOUR  # every prefix of 4 holds each label once
    assert interleave_labels(claims, seed=1) == order
    train, test = split_claims(claims, test_fraction=1 / 3, seed=0)
    assert Counter(c.label for c in test) == {label: 1 for label in FOUR}


@pytest.mark.data
def test_real_climate_fever(shared_data: Path) -> None:
    result = load_dataset("climate_fever", shared_data / "climate_fever" / "climate-fever.jsonl", "test")
    assert len(result.claims) == 1535 and result.errors == []
    assert Counter(c.label for c in result.claims) == {Label.SUPPORT: 654, Label.NEI: 474, Label.REFUTE: 253, Label.CONFLICTING: 154}
    assert all(len(c.evidence) == 5 for c in result.claims)


@pytest.mark.data
def test_real_averitec_dev(shared_data: Path) -> None:
    result = load_dataset("averitec", shared_data / "averitec" / "dev.json", "dev")
    assert len(result.claims) == 500 and result.errors == []
    assert Counter(c.label for c in result.claims) == {Label.REFUTE: 305, Label.SUPPORT: 122, Label.CONFLICTING: 38, Label.NEI: 35}
    assert sum(len(c.evidence) for c in result.claims) == 1287  # one evidence unit per question
