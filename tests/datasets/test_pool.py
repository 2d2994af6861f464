"""Pooling gold evidence into a closed corpus whose sentence ids are the gold ids."""

from pathlib import Path

import pytest

from _helpers import FIXTURES
from factrl.corpus import read_corpus
from factrl.datasets import load_dataset
from factrl.datasets.pool import PoolError, pool_evidence, write_pooled_corpus
from factrl.types import Claim, EvidenceRef

POOLABLE = [
    ("climate_fever", "climate_fever", "test"),
    ("averitec", "averitec", "dev"),
    ("feverous_s", "feverous_s", "dev"),
    ("haris", "haris", "hover_2hops"),
    ("haris", "haris", "ex_fever_2hops"),
    ("checkwhy", "checkwhy", "dev"),
    ("news_graded", "news_graded", "test"),
]


def test_climate_fever_pools_by_article_in_line_order(tmp_path: Path) -> None:
    claims = load_dataset("climate_fever", FIXTURES / "climate_fever", "test").claims
    docs, report = pool_evidence(claims)
    gw = next(d for d in docs if d.id == "Global warming")
    assert gw.title == "Global warming" and gw.sentence_ids == ["Global warming:3", "Global warming:14", "Global warming:178"]
    assert report.claims == 3 and report.references == 15 and report.units == 13 and report.repeated == 2
    assert report.documents == len({e.doc_id for c in claims for e in c.evidence})


def test_single_unit_documents_have_no_title() -> None:
    docs, _ = pool_evidence(load_dataset("averitec", FIXTURES / "averitec", "dev").claims)
    assert docs[0].id == "0_qa_0" and docs[0].title == "" and docs[0].sentence_ids == ["0_qa_0"]


@pytest.mark.parametrize(("name", "folder", "split"), POOLABLE)
def test_written_corpus_reads_back_with_the_gold_ids(tmp_path: Path, name: str, folder: str, split: str) -> None:
    claims = load_dataset(name, FIXTURES / folder, split).claims
    docs, _ = pool_evidence(claims)
    write_pooled_corpus(docs, tmp_path / "corpus.jsonl")
    read = list(read_corpus(tmp_path / "corpus.jsonl", "jsonl"))
    assert read == docs
    text_of = {sid: s for d in read for sid, s in zip(d.sentence_ids, d.sentences)}
    for claim in claims:
        for ref in claim.evidence:
            assert text_of[ref.id] == ref.text  # every gold id is in the corpus with its text
    doc_of = {sid: d.id for d in read for sid in d.sentence_ids}
    assert all(doc_of[e.id] == e.doc_id for c in claims for e in c.evidence)


def _claim(cid: str, *refs: EvidenceRef) -> Claim:
    return Claim(id=cid, text="t", evidence=list(refs))


def test_conflicts_raise_or_are_counted() -> None:
    a = _claim("a", EvidenceRef(id="P:1", doc_id="P", text="one"))
    b = _claim("b", EvidenceRef(id="P:1", doc_id="P", text="another"))
    with pytest.raises(PoolError, match="evidence id 'P:1' has another text in claim 'b' than in claim 'a'"):
        pool_evidence([a, b])
    docs, report = pool_evidence([a, b], on_conflict="count")
    assert docs[0].sentences == ["one"] and len(report.conflicts) == 1
    c = _claim("c", EvidenceRef(id="P:1", doc_id="Q", text="one"))
    with pytest.raises(PoolError, match="another document"):
        pool_evidence([a, c])


def test_ids_without_text_cannot_be_pooled() -> None:
    claims = load_dataset("fever", FIXTURES / "fever", "dev").claims
    with pytest.raises(PoolError, match="no evidence text to pool"):
        pool_evidence(claims)
    docs, report = pool_evidence([*claims, _claim("x", EvidenceRef(id="d_sentence_0", doc_id="d", text="Some text."))])
    assert [d.id for d in docs] == ["d"] and report.missing_text == 4


@pytest.mark.data
@pytest.mark.parametrize(("name", "rel"), [("climate_fever", "climate_fever/climate-fever.jsonl"), ("averitec", "averitec/dev.json"), ("feverous_s", "feverous_s/dev.json")])
def test_real_files_pool_without_conflicts(shared_data: Path, name: str, rel: str) -> None:
    claims = load_dataset(name, shared_data / rel, "dev").claims
    docs, report = pool_evidence(claims)
    assert report.conflicts == [] and report.missing_text == 0
    assert report.units == len({e.id for c in claims for e in c.evidence})
    if name == "climate_fever":
        assert report.units == 5240  # distinct "Article:line" ids in the release
