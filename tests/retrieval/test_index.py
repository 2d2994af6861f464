import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from factrl.retrieval.base import RETRIEVERS, IndexMismatchError
from factrl.retrieval.index import FORMAT_VERSION, Index, build_index, corpus_sha256, load_index
from factrl.types import Hit, Passage

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mini_corpus.jsonl"


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Index:
    return build_index(FIXTURE, tmp_path_factory.mktemp("ix") / "index", unit_sentences=2, progress=False)


def test_build_writes_manifest_and_passages(built: Index) -> None:
    d = built.directory
    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["retriever"] == "bm25"
    assert manifest["params"]["k1"] == 0.9 and manifest["params"]["stemmer"] == "english"
    corpus = manifest["corpus"]
    assert corpus["sha256"] == corpus_sha256(FIXTURE)
    assert corpus["format"] == "jsonl" and corpus["unit_sentences"] == 2
    assert corpus["n_documents"] == 20 and corpus["skipped_rows"] == 0
    lines = (d / "passages.jsonl").read_text().splitlines()
    assert corpus["n_passages"] == len(lines) == len(built.passages) == 40  # 20 docs x 4 sentences / 2
    assert {"factrl_version", "created"} <= set(manifest)
    assert (d / "bm25" / "vocab.index.json").is_file()


def test_search_and_lookup(built: Index) -> None:
    hits = built.search(["When was the harbor lighthouse built?", "measles vaccine doses"], k=3)
    assert hits[0][0].passage_id == "lighthouse#0" and hits[0][0].doc_id == "lighthouse"
    assert hits[1][0].doc_id == "vaccine"
    p = built.passage("lighthouse#0")
    assert p.sentence_ids == ["lighthouse_sentence_0", "lighthouse_sentence_1"]
    assert built.sentence_text("lighthouse_sentence_1") == "Its lamp was converted to electricity in 1931."
    assert built.sentence_text("lighthouse_sentence_99") is None
    with pytest.raises(KeyError, match="no passage 'nope#0'"):
        built.passage("nope#0")


def test_load_round_trip_and_fingerprint(built: Index, tmp_path: Path) -> None:
    again = load_index(built.directory, expect={"retriever": "bm25", "unit_sentences": 2, "corpus_sha256": corpus_sha256(FIXTURE), "k1": 0.9})
    assert again.passages == built.passages
    q = ["coral bleaching", "violin strings"]
    assert again.search(q, 5) == built.search(q, 5)
    assert again.fingerprint == built.fingerprint
    # Same corpus and settings built elsewhere later: same fingerprint; other settings: different.
    rebuilt = build_index(FIXTURE, tmp_path / "same", unit_sentences=2, progress=False)
    other = build_index(FIXTURE, tmp_path / "other", unit_sentences=3, progress=False)
    tuned = build_index(FIXTURE, tmp_path / "tuned", unit_sentences=2, progress=False, k1=1.2)
    assert rebuilt.fingerprint == built.fingerprint
    assert len({built.fingerprint, other.fingerprint, tuned.fingerprint}) == 3


def test_expect_mismatches_are_explained(built: Index) -> None:
    with pytest.raises(IndexMismatchError, match="unit_sentences: expected 3, index has 2"):
        load_index(built.directory, expect={"unit_sentences": 3})
    with pytest.raises(IndexMismatchError, match="retriever: expected 'dense'"):
        load_index(built.directory, expect={"retriever": "dense"})
    with pytest.raises(IndexMismatchError, match="records no 'model'"):
        load_index(built.directory, expect={"model": "all-MiniLM-L6-v2"})
    with pytest.raises(IndexMismatchError, match="corpus_sha256"):
        load_index(built.directory, expect={"corpus_sha256": "0" * 64})


def test_refuses_missing_or_unknown(tmp_path: Path, built: Index) -> None:
    with pytest.raises(IndexMismatchError, match="not found"):
        load_index(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(IndexMismatchError, match="manifest.json is missing"):
        load_index(tmp_path / "empty")
    copy = tmp_path / "copy"
    build_index(FIXTURE, copy, progress=False)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(IndexMismatchError, match="unknown index format_version 99"):
        load_index(copy)
    (copy / "manifest.json").write_text(json.dumps(manifest))
    (copy / "passages.jsonl").unlink()
    with pytest.raises(IndexMismatchError, match="passages.jsonl is missing"):
        load_index(copy)


def test_refuses_to_overwrite_unless_asked(tmp_path: Path) -> None:
    out = tmp_path / "ix"
    build_index(FIXTURE, out, progress=False)
    with pytest.raises(FileExistsError, match="overwrite"):
        build_index(FIXTURE, out, progress=False)
    ix = build_index(FIXTURE, out, progress=False, overwrite=True, unit_sentences=0)
    assert len(ix) == 20


def test_bad_rows_skip_and_count(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(FIXTURE.read_text() + '{"id": "bad"}\nnot json\n')
    with pytest.raises(ValueError, match=r"c.jsonl:21: missing field 'text'"):
        build_index(corpus, tmp_path / "a", progress=False)
    ix = build_index(corpus, tmp_path / "b", on_error="skip", progress=False)
    assert ix.manifest.corpus.skipped_rows == 2 and ix.manifest.corpus.n_documents == 20


def test_progress_goes_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_index(FIXTURE, tmp_path / "ix")
    out, err = capsys.readouterr()
    assert out == "" and "20 documents" in err


class EchoBackend:
    """A stand-in backend proving index.py is generic: it returns passages in order."""

    name = "echo-test"

    def __init__(self, passages: Sequence[Passage], tag: str) -> None:
        self._passages, self.tag = list(passages), tag

    @classmethod
    def build(cls, passages: Sequence[Passage], directory: Path, **params: Any) -> "EchoBackend":
        directory.mkdir(parents=True)
        (directory / "tag.txt").write_text(params["tag"])
        return cls(passages, params["tag"])

    @classmethod
    def load(cls, passages: Sequence[Passage], directory: Path, params: dict[str, Any]) -> "EchoBackend":
        return cls(passages, (directory / "tag.txt").read_text())

    def params(self) -> dict[str, Any]:
        return {"tag": self.tag}

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        return [[Hit(passage=p, score=1.0) for p in self._passages[:k]] for _ in queries]


def test_any_registered_backend_plugs_in(tmp_path: Path) -> None:
    if "echo-test" not in RETRIEVERS:
        RETRIEVERS.register("echo-test")(EchoBackend)
    ix = build_index(FIXTURE, tmp_path / "ix", retriever="echo-test", unit_sentences=0, progress=False, tag="hello")
    assert (tmp_path / "ix" / "echo-test" / "tag.txt").read_text() == "hello"
    loaded = load_index(tmp_path / "ix", expect={"tag": "hello"})
    assert isinstance(loaded.backend, EchoBackend)
    assert [h.passage_id for h in loaded.search(["x"], 2)[0]] == [p.id for p in ix.passages[:2]]


class QuietBackend(EchoBackend):
    """Takes the ``progress`` runtime knob; records what it was given."""

    name = "quiet-test"
    seen: list = []

    @classmethod
    def build(cls, passages: Sequence[Passage], directory: Path, *, progress: bool = True,
              **params: Any) -> "QuietBackend":
        cls.seen.append(progress)
        directory.mkdir(parents=True)
        (directory / "tag.txt").write_text(params["tag"])
        return cls(passages, params["tag"])


def test_progress_reaches_backends_that_take_it_and_is_not_recorded(tmp_path: Path) -> None:
    if "quiet-test" not in RETRIEVERS:
        RETRIEVERS.register("quiet-test")(QuietBackend)
    QuietBackend.seen.clear()
    build_index(FIXTURE, tmp_path / "a", retriever="quiet-test", unit_sentences=0, progress=False, tag="t")
    build_index(FIXTURE, tmp_path / "b", retriever="quiet-test", unit_sentences=0, tag="t")
    assert QuietBackend.seen == [False, True]
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["params"] == {"tag": "t"}
