"""Offline context from a loaded index: looked up per cited document, never a walk."""

from pathlib import Path

import pytest

from factrl.envs.context import document_context, index_context
from factrl.retrieval.index import build_index, load_index
from factrl.types import Claim, EvidenceRef

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mini_corpus.jsonl"


def test_index_context_equals_document_context_without_walking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_index(FIXTURE, tmp_path / "ix", unit_sentences=1, progress=False)
    ix = load_index(tmp_path / "ix")
    everything = list(ix.passages)
    claims = [
        Claim(id="a", text="x", evidence=[EvidenceRef(id="lighthouse_sentence_1", doc_id="lighthouse")],
              meta={"cited_doc_ids": ["vaccine", "nope"]}),
        Claim(id="b", text="y", meta={"cited_doc_ids": ["glacier"]}),
        Claim(id="c", text="z"),
    ]
    monkeypatch.setattr(type(ix.passages), "__iter__", lambda self: (_ for _ in ()).throw(AssertionError("walked")))
    for cap in (None, 3, 16):
        want = document_context(everything, max_sentences=cap)
        got = index_context(ix, max_sentences=cap)
        for c in claims:
            assert got(c) == want(c)
    assert [e.id for e in index_context(ix, max_sentences=None)(claims[0])][:2] == ["lighthouse_sentence_0",
                                                                                  "lighthouse_sentence_1"]
