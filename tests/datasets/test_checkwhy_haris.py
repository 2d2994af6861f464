"""CheckWhy and the HARIS test-set layouts."""

from pathlib import Path

import pytest

from _helpers import FIXTURES, assert_bad_row, write_json
from factrl.datasets import DATASETS, load_dataset
from factrl.labels import Label


def test_checkwhy_gold_distractors_and_shared_ids() -> None:
    a, b = load_dataset("checkwhy", FIXTURES / "checkwhy", "dev").claims
    assert a.id == "3974-0" and a.label is Label.SUPPORT and a.dataset == "checkwhy"
    assert a.evidence_ids == ["checkwhy_evidence_1", "checkwhy_evidence_2", "checkwhy_evidence_3"]  # used 2, 7, 8
    assert a.evidence[1].text.startswith("Simple character designs") and a.evidence[1].doc_id == "checkwhy_evidence_2"
    assert a.meta["local_ids"] == {"1": "checkwhy_evidence_0", "2": "checkwhy_evidence_1", "7": "checkwhy_evidence_2", "8": "checkwhy_evidence_3"}
    assert a.meta["distractors"] == [{"id": "checkwhy_evidence_0", "text": a.meta["distractors"][0]["text"]}]
    assert a.meta["argument_structure"][0] == "one_to_one_linking(Evidence8, Evidence2)" and a.meta["cause"]
    # claim b's gold "grease" text was claim a's distractor: one text, one id
    assert b.evidence_ids == ["checkwhy_evidence_0", "checkwhy_evidence_4"]
    assert b.meta["distractors"][0]["id"] == "checkwhy_evidence_3"
    assert DATASETS.get("checkwhy").labels == (Label.SUPPORT, Label.REFUTE, Label.NEI)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"used_evidence_ids": [9]}, "used_evidence_ids [9] are not evidence_ids"),
        ({"evidences": [{"evidence_id": 1, "content": ""}]}, "evidences[0]: field 'content' is empty"),
        ({"label": "why not"}, "unknown label 'why not'"),
        ({"used_evidence_ids": [], "label": "supported"}, "a supported claim needs used evidence"),
    ],
)
def test_checkwhy_bad_rows(tmp_path: Path, change: dict, reason: str) -> None:
    good = {"checkwhy-id": "1", "claim": "c", "label": "supported", "evidences": [{"evidence_id": 1, "useful": 1, "content": "e"}], "used_evidence_ids": [1]}
    path = write_json(tmp_path / "dev.json", [{**good, **change}, {**good, "checkwhy-id": "2"}])
    assert_bad_row("checkwhy", path, 2, reason, good=1)


def test_haris_hover_variant() -> None:
    a, b, c = load_dataset("haris", FIXTURES / "haris", "hover_2hops").claims
    assert a.id == "f9cf" and a.label is Label.REFUTE and b.label is Label.SUPPORT and a.dataset == "haris"
    assert a.meta == {"variant": "hover", "num_hops": 2} and c.meta["num_hops"] == 3
    assert a.evidence_ids == ["hover_paragraph_0", "hover_paragraph_1"] and a.evidence[0].text.startswith("Innovative Life")
    assert b.evidence_ids == ["hover_paragraph_2", "hover_paragraph_3"]
    assert c.evidence_ids == ["hover_paragraph_1", "hover_paragraph_0"]  # the same paragraphs, the same ids


def test_haris_ex_fever_and_checkwhy_variants() -> None:
    a, b = load_dataset("haris", FIXTURES / "haris", "ex_fever_2hops").claims
    assert a.id == "5502" and a.meta == {"variant": "ex_fever", "num_hops": 2}
    assert a.evidence_ids == ["ex_fever_explanation_0"] and a.evidence[0].text.startswith("LeBron James has been selected")
    assert b.label is Label.REFUTE and b.evidence_ids == ["ex_fever_explanation_1"]
    (cw,) = load_dataset("haris", FIXTURES / "haris", "checkwhy").claims
    assert cw.meta["variant"] == "checkwhy" and cw.dataset == "haris" and len(cw.evidence) == 3


def test_haris_variant_from_fields_and_unrecognised_rows(tmp_path: Path) -> None:
    path = write_json(tmp_path / "x.json", [{"id": 1, "claim": "c", "label": "supported", "explanation": "e"},
                                           {"id": 2, "claim": "c", "label": "supported"}])
    assert_bad_row("haris", path, 8, "not a HARIS row", good=1)
    assert load_dataset("haris", path, "x", on_error="skip").claims[0].meta["variant"] == "ex_fever"


@pytest.mark.data
@pytest.mark.parametrize(("sample", "variant"), [("haris_hover_2hops_sample.json", "hover"), ("haris_ex_fever_2hops_sample.json", "ex_fever"), ("haris_checkwhy_sample.json", "checkwhy")])
def test_real_haris_samples(shared_data: Path, sample: str, variant: str) -> None:
    result = load_dataset("haris", shared_data / "samples" / sample, "test")
    assert len(result.claims) == 5 and result.errors == []
    assert {c.meta["variant"] for c in result.claims} == {variant}
    assert all(c.evidence and all(e.text for e in c.evidence) for c in result.claims)
    assert {c.label for c in result.claims} <= {Label.SUPPORT, Label.REFUTE}
    if variant != "checkwhy":
        assert all(c.meta["num_hops"] == 2 for c in result.claims)


@pytest.mark.data
def test_real_checkwhy_sample(shared_data: Path) -> None:
    claims = load_dataset("checkwhy", shared_data / "samples" / "haris_checkwhy_sample.json", "test").claims
    assert [len(c.evidence) for c in claims] == [3, 4, 4, 3, 3]  # used_evidence_ids
