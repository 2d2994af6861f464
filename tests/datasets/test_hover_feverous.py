"""HoVer, FEVEROUS and FEVEROUS-S loaders."""

from collections import Counter
from pathlib import Path

import pytest

from _helpers import FIXTURES, assert_bad_row, write_json, write_jsonl
from factrl.datasets import DATASETS, load_dataset
from factrl.datasets.feverous import feverous_page
from factrl.datasets.feverous_s import clean_wiki_markup
from factrl.labels import Label

HOVER_OK = {"uid": "u0", "claim": "x", "supporting_facts": [["T", 1]], "label": "SUPPORTED", "num_hops": 2}


def test_hover_fixture() -> None:
    a, b = load_dataset("hover", FIXTURES / "hover", "dev").claims
    assert a.id == "h1" and a.label is Label.SUPPORT and a.meta == {"num_hops": 2, "hpqa_id": "5ae1d656554299234fd04322"}
    assert a.evidence_ids == ["Greater Swiss Mountain Dog_sentence_0", "Harrier (dog)_sentence_0"]
    assert a.evidence[1].doc_id == "Harrier (dog)" and a.evidence[1].text is None
    assert b.label is Label.REFUTE and b.meta["num_hops"] == 3
    assert DATASETS.get("hover").labels == (Label.SUPPORT, Label.REFUTE)


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({**HOVER_OK, "supporting_facts": [["T", -1]]}, "supporting_facts[0] must be [title, sentence index >= 0]"),
        ({**HOVER_OK, "num_hops": 0}, "'num_hops' must be an integer >= 1"),
        ({**HOVER_OK, "label": "SORT_OF"}, "unknown label 'SORT_OF'"),
        ({**HOVER_OK, "supporting_facts": []}, "needs supporting_facts"),
    ],
)
def test_hover_bad_rows_name_the_line_of_the_array_element(tmp_path: Path, row: dict, reason: str) -> None:
    path = write_json(tmp_path / "hover.json", [HOVER_OK, {**row, "uid": "u1"}, {**HOVER_OK, "uid": "u2"}])
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if '"u1"' in text) - 1  # the element's '{'
    assert_bad_row("hover", path, line, reason, good=2)


def test_hover_broken_json_array_is_reported_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "hover.json"
    path.write_text('[\n{"uid": "a", "claim": "x", "supporting_facts": [["T", 0]], "label": "SUPPORTED"},\n{"uid": oops}\n]')
    assert_bad_row("hover", path, 3, "bad JSON", good=1)


def test_feverous_fixture_skips_the_header_row() -> None:
    result = load_dataset("feverous", FIXTURES / "feverous", "dev")
    assert result.errors == [] and [c.id for c in result.claims] == ["24435", "50241"]
    a, b = result.claims
    assert a.label is Label.REFUTE and a.evidence_ids == ["Michael Folivi_cell_1_2_0", "Michael Folivi_sentence_0"]
    assert a.evidence[0].doc_id == "Michael Folivi" and a.meta["challenge"] == "Numerical Reasoning"
    assert a.meta["evidence_sets"] == [["Michael Folivi_cell_1_2_0", "Michael Folivi_sentence_0"], ["Michael Folivi_sentence_0"]]
    assert b.label is Label.NEI and b.evidence_ids == ["Akameros_sentence_0", "Akameros_sentence_1"]


def test_feverous_element_pages() -> None:
    assert feverous_page("Aramais Yepiskoposyan_header_cell_0_0_1") == "Aramais Yepiskoposyan"
    assert feverous_page("List of x_table_caption_0") == "List of x"
    assert feverous_page("A_b_sentence_12") == "A_b" and feverous_page("nothing") is None


def test_feverous_bad_evidence(tmp_path: Path) -> None:
    row = {"id": 1, "claim": "x", "label": "SUPPORTS", "evidence": [{"content": ["Nope"]}]}
    path = write_jsonl(tmp_path / "f.jsonl", [{**row, "id": 0, "evidence": [{"content": ["P_sentence_0"]}]}, row])
    assert_bad_row("feverous", path, 2, "'Nope' is not a FEVEROUS element id", good=1)


def test_clean_wiki_markup() -> None:
    assert clean_wiki_markup("a [[Plantation_house|plantation house]] near [[Pittsview]]") == "a plantation house near Pittsview"
    assert clean_wiki_markup("state]] of [[Illinois|Illinois]], the '''third'''  city") == "state of Illinois, the third city"
    assert clean_wiki_markup("[[United_States]]") == "United States"


def test_feverous_s_fixture_ids_are_stable_and_shared() -> None:
    a, b, c = load_dataset("feverous_s", FIXTURES / "feverous_s", "dev").claims
    assert a.id == "3385" and a.label is Label.SUPPORT and a.meta == {"challenge": "Search terms not in claim"}
    assert a.evidence_ids == ["Glenn–Thompson Plantation_sentence_0", "Glenn–Thompson Plantation_sentence_1"]
    assert a.evidence[0].text == "The Glenn–Thompson Plantation is a historic plantation house near Pittsview in Russell County, Alabama."
    assert a.evidence[0].doc_id == "Glenn–Thompson Plantation"
    assert b.label is Label.REFUTE and b.evidence_ids == ["Rex Jory_sentence_0", "Chicago_sentence_0"]
    assert b.evidence[0].text == "He is an associate editor of The Advertiser and a columnist."
    assert b.evidence[1].text == "state of Illinois, the third most populous city in the United States."
    assert c.evidence_ids == ["Glenn–Thompson Plantation_sentence_1"]  # same sentence, same id
    assert c.evidence[0].text == a.evidence[1].text
    # ids do not depend on how many claims are read
    assert load_dataset("feverous_s", FIXTURES / "feverous_s", "dev", limit=1).claims[0] == a


def test_feverous_s_bad_rows(tmp_path: Path) -> None:
    good = {"id": 1, "claim": "x", "label": "supports", "evidence": "P\tA sentence."}
    path = write_json(tmp_path / "dev.json", [good, {**good, "id": 2, "evidence": "no tab here"}])
    assert_bad_row("feverous_s", path, 8, "evidence line 1 is not 'title<TAB>sentence'", good=1)


@pytest.mark.data
def test_real_feverous_s(shared_data: Path) -> None:
    result = load_dataset("feverous_s", shared_data / "feverous_s" / "dev.json", "dev")
    assert len(result.claims) == 2962 and result.errors == []
    assert Counter(c.label for c in result.claims) == {Label.SUPPORT: 1411, Label.REFUTE: 1551}
    texts = [e.text for c in result.claims for e in c.evidence]
    assert all(t and "[[" not in t and "]]" not in t for t in texts)
    by_id: dict[str, str] = {}
    for c in result.claims:
        for e in c.evidence:
            assert by_id.setdefault(e.id, e.text) == e.text  # one id, one text


@pytest.mark.data
def test_real_hover_sample(shared_data: Path) -> None:
    result = load_dataset("hover", shared_data / "samples" / "hover_dev_sample.json", "dev")
    assert len(result.claims) == 15 and {c.label for c in result.claims} == {Label.SUPPORT}
    assert all(c.meta["num_hops"] == 2 and c.evidence for c in result.claims)
