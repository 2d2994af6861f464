import json
from pathlib import Path

import pytest

from factrl.corpus import CORPUS_FORMATS, CorpusFormatError, Document, ReadReport, read_corpus

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mini_corpus.jsonl"


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    return path


def test_registry_has_the_three_formats() -> None:
    assert {"jsonl", "contents", "scifact"} <= set(CORPUS_FORMATS.names())


def test_jsonl_reader_splits_and_numbers_sentences(tmp_path: Path) -> None:
    p = write_lines(tmp_path / "c.jsonl", [{"id": 7, "title": " T ", "text": "First one. Second one."}, "", {"id": "b", "text": "Only."}])
    docs = list(read_corpus(p, "jsonl"))
    assert docs[0] == Document(id="7", title="T", sentences=["First one.", "Second one."], sentence_ids=["7_sentence_0", "7_sentence_1"])
    assert docs[1].title == "" and docs[1].sentence_ids == ["b_sentence_0"]


def test_jsonl_rows_may_list_their_sentences_and_ids(tmp_path: Path) -> None:
    rows = [
        {"id": "Global warming", "title": "Global warming", "text": "ignored. Not split.",
         "sentences": ["Temperatures rose 1.1 °C. Since 1900 too.", "Ice melts."], "sentence_ids": ["Global warming:14", "Global warming:178"]},
        {"id": "d", "sentences": ["One. Two."]},
    ]
    a, b = read_corpus(write_lines(tmp_path / "c.jsonl", rows), "jsonl")
    assert a.sentences == ["Temperatures rose 1.1 °C. Since 1900 too.", "Ice melts."]  # one for one, not re-split
    assert a.sentence_ids == ["Global warming:14", "Global warming:178"]
    assert b.sentences == ["One. Two."] and b.sentence_ids == ["d_sentence_0"]


def test_jsonl_reader_is_lazy(tmp_path: Path) -> None:
    p = write_lines(tmp_path / "c.jsonl", [{"id": "a", "text": "Fine."}, "{not json"])
    it = read_corpus(p, "jsonl")
    assert next(it).id == "a"  # the bad second line is not read yet
    with pytest.raises(CorpusFormatError):
        next(it)


def test_fixture_corpus_reads() -> None:
    docs = list(read_corpus(FIXTURE, "jsonl"))
    assert len(docs) == 20
    assert all(d.sentences for d in docs)


def test_contents_reader_title_line(tmp_path: Path) -> None:
    p = write_lines(
        tmp_path / "c.jsonl",
        [
            {"id": "1", "contents": '"Paris"\nParis is a city. It is in France.'},
            {"id": "2", "contents": "No title line here. Two sentences."},
            {"id": "3", "contents": '"Only Title"\n'},
        ],
    )
    report = ReadReport()
    docs = list(read_corpus(p, "contents", report=report))
    assert docs[0].title == "Paris"
    assert docs[0].sentences == ["Paris is a city.", "It is in France."]
    assert docs[0].sentence_ids == ["1_sentence_0", "1_sentence_1"]
    assert docs[1].title == "" and docs[1].sentences == ["No title line here.", "Two sentences."]
    assert docs[2].title == "Only Title" and docs[2].sentences == []
    assert report.documents == 3 and report.n_skipped == 0


def test_scifact_reader_keeps_sentences_and_ids(tmp_path: Path) -> None:
    row = {"doc_id": 123, "title": "A study", "abstract": ["First finding.", " 0.24 versus", "Last."], "structured": False}
    docs = list(read_corpus(write_lines(tmp_path / "c.jsonl", [row]), "scifact"))
    assert docs[0].id == "123"
    assert docs[0].sentences == ["First finding.", "0.24 versus", "Last."]
    assert docs[0].sentence_ids == ["doc_id=123_sentence_0", "doc_id=123_sentence_1", "doc_id=123_sentence_2"]


BAD_ROWS = [
    ("{oops", "bad JSON"),
    ("[1, 2]", "expected a JSON object"),
    ({"title": "x", "text": "y"}, "missing field 'id'"),
    ({"id": "", "text": "y"}, "field 'id' is empty"),
    ({"id": 1.5, "text": "y"}, "field 'id' must be a string or integer"),
    ({"id": "a", "text": ""}, "field 'text' is empty"),
    ({"id": "a", "text": ["list"]}, "field 'text' must be a string"),
    ({"id": "a", "title": 3, "text": "ok"}, "field 'title' must be a string"),
    ({"id": "a", "sentences": []}, "'sentences' must be a non-empty list"),
    ({"id": "a", "sentences": ["ok", " "]}, "'sentences' item 1 must be a non-empty string"),
    ({"id": "a", "sentences": ["x", "y"], "sentence_ids": ["p"]}, "'sentence_ids' must be a list of 2 ids"),
    ({"id": "a", "sentences": ["x", "y"], "sentence_ids": ["p", "p"]}, "'sentence_ids' repeats an id"),
    ({"id": "a", "sentences": ["x"], "sentence_ids": [3]}, "'sentence_ids' item 0 must be a non-empty string"),
    ({"id": "a", "text": "x", "sentence_ids": ["p"]}, "needs a 'sentences' list"),
]


@pytest.mark.parametrize(("row", "reason"), BAD_ROWS)
def test_bad_rows_raise_with_file_line_reason(tmp_path: Path, row: object, reason: str) -> None:
    p = write_lines(tmp_path / "c.jsonl", [{"id": "ok", "text": "Fine."}, "", row])
    with pytest.raises(CorpusFormatError) as info:
        list(read_corpus(p, "jsonl"))
    err = info.value
    assert err.line == 3 and err.file == str(p)
    assert reason in str(err) and f"{p}:3" in str(err)


def test_bad_rows_skipped_and_counted(tmp_path: Path) -> None:
    rows = [{"id": "ok", "text": "Fine."}] + [r for r, _ in BAD_ROWS] + [{"id": "ok2", "text": "Also fine."}]
    p = write_lines(tmp_path / "c.jsonl", rows)
    report = ReadReport()
    docs = list(read_corpus(p, "jsonl", on_error="skip", report=report))
    assert [d.id for d in docs] == ["ok", "ok2"]
    assert report.n_skipped == len(BAD_ROWS)
    assert report.rows == len(rows)
    assert [e.line for e in report.skipped] == list(range(2, 2 + len(BAD_ROWS)))


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"doc_id": 1, "title": "t", "abstract": "not a list"}, "must be a list"),
        ({"doc_id": 1, "title": "t", "abstract": []}, "'abstract' is empty"),
        ({"doc_id": 1, "title": "t", "abstract": ["ok", 5]}, "item 1 must be a string"),
        ({"doc_id": 1, "title": "t"}, "missing field 'abstract'"),
        ({"title": "t", "abstract": ["x"]}, "missing field 'doc_id'"),
    ],
)
def test_scifact_bad_rows(tmp_path: Path, row: dict, reason: str) -> None:
    p = write_lines(tmp_path / "c.jsonl", [row])
    with pytest.raises(CorpusFormatError, match=reason):
        list(read_corpus(p, "scifact"))


def test_not_utf8_is_a_row_error(tmp_path: Path) -> None:
    p = tmp_path / "c.jsonl"
    p.write_bytes(b'{"id": "a", "text": "ok."}\n{"id": "b", "text": "\xff\xfe"}\n')
    with pytest.raises(CorpusFormatError, match="not UTF-8"):
        list(read_corpus(p, "jsonl"))


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        list(read_corpus(tmp_path / "nope.jsonl", "jsonl"))
    with pytest.raises(KeyError, match="unknown corpus format 'xml'"):
        read_corpus(FIXTURE, "xml")
    with pytest.raises(ValueError, match="on_error"):
        list(read_corpus(FIXTURE, "jsonl", on_error="ignore"))  # type: ignore[arg-type]


@pytest.mark.data
def test_real_scifact_corpus(shared_data: Path) -> None:
    path = shared_data / "scifact" / "corpus.jsonl"
    report = ReadReport()
    n = sum(1 for _ in read_corpus(path, "scifact", report=report))
    assert n == 5183 and report.n_skipped == 0
