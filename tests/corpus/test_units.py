import pytest

from factrl.corpus import Document, UnitReport, doc_id_from_sentence_id, make_units


def doc(doc_id: str, n: int) -> Document:
    return Document(
        id=doc_id,
        title=f"T{doc_id}",
        sentences=[f"S{i}." for i in range(n)],
        sentence_ids=[f"{doc_id}_sentence_{i}" for i in range(n)],
    )


def test_windows_of_three() -> None:
    units = make_units([doc("a", 7)], 3)
    assert [u.id for u in units] == ["a#0", "a#1", "a#2"]
    assert units[0].text == "S0. S1. S2."
    assert units[2].sentences == ["S6."] and units[2].sentence_ids == ["a_sentence_6"]
    assert all(u.doc_id == "a" and u.title == "Ta" for u in units)


def test_every_sentence_in_exactly_one_unit() -> None:
    docs = [doc("a", 7), doc("b", 3), doc("c", 1)]
    units = make_units(docs, 2)
    got = [sid for u in units for sid in u.sentence_ids]
    assert got == [sid for d in docs for sid in d.sentence_ids]


def test_whole_document_units_and_empty_documents_counted() -> None:
    report = UnitReport()
    units = make_units([doc("a", 5), doc("empty", 0), doc("b", 1)], 0, report=report)
    assert [u.id for u in units] == ["a#0", "b#0"]
    assert len(units[0].sentences) == 5
    assert report.documents == 3 and report.empty_documents == 1 and report.units == 2


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_bad_unit_size(bad: object) -> None:
    with pytest.raises(ValueError, match="unit_sentences"):
        make_units([doc("a", 2)], bad)  # type: ignore[arg-type]


def test_document_requires_aligned_ids() -> None:
    with pytest.raises(ValueError, match="2 sentences but 1 sentence ids"):
        Document(id="x", sentences=["a", "b"], sentence_ids=["x_sentence_0"])


@pytest.mark.parametrize(
    ("sid", "expected"),
    [("doc_id=12_sentence_3", "12"), ("Paris_sentence_0", "Paris"), ("a_sentence_b", None), ("plain", None)],
)
def test_doc_id_from_sentence_id(sid: str, expected: str | None) -> None:
    assert doc_id_from_sentence_id(sid) == expected
