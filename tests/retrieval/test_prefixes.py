"""Encoders declare their query/passage prefixes (E5: "query: " / "passage: "; BGE v1.5:
an instruction before queries), the dense index applies and records them, and an index
built before prefixes were recorded still loads (with none)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from factrl.retrieval.dense import DenseRetriever, passage_text
from factrl.retrieval.encoders import Prefixes, TextEncoder, declared_prefixes
from factrl.types import Passage

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mini_corpus.jsonl"


@pytest.mark.parametrize("model, query, passage", [
    ("intfloat/multilingual-e5-small", "query: ", "passage: "),  # HARIS A.2
    ("intfloat/e5-small-v2", "query: ", "passage: "),
    ("/models/copies/multilingual-e5-small/", "query: ", "passage: "),  # a local copy keeps its name
    ("BAAI/bge-small-en-v1.5", "Represent this sentence for searching relevant passages: ", ""),
    ("BAAI/bge-m3", "", ""),
    ("all-MiniLM-L6-v2", "", ""),
    ("intfloat/e5-mistral-7b-instruct", "", ""),  # instructions of its own, not these prefixes
])
def test_family_conventions(model, query, passage):
    assert declared_prefixes(model) == Prefixes(query, passage)


def test_a_models_own_prompts_come_first():
    assert declared_prefixes("intfloat/e5-small-v2", {"query": "Q: ", "document": "D: "}) == Prefixes("Q: ", "D: ")
    assert declared_prefixes("x", {"query": "Query: "}) == Prefixes("Query: ", "")
    assert declared_prefixes("e5-small", {}) == Prefixes("query: ", "passage: ")


@pytest.fixture(scope="module")
def e5_named(minilm) -> TextEncoder:
    """The embedded MiniLM declaring E5's prefixes, as a model named e5 does (a copy of
    the shared encoder: loading a second model costs the suite half a minute)."""
    enc = copy.copy(minilm)
    enc.prefixes = declared_prefixes("intfloat/multilingual-e5-small")
    return enc


def test_an_encoder_declares_its_models_prefixes(minilm):
    assert minilm.prefixes == Prefixes()  # all-MiniLM-L6-v2 was trained without any


def test_the_index_applies_and_records_the_declared_prefixes(e5_named, passages: list[Passage], tmp_path: Path):
    assert e5_named.prefixes == Prefixes("query: ", "passage: ")
    built = DenseRetriever.build(passages, tmp_path / "d", encoder=e5_named, progress=False)
    assert built.params()["query_prefix"] == "query: " and built.params()["passage_prefix"] == "passage: "
    emb = np.load(tmp_path / "d" / "embeddings.npy")
    want = e5_named.encode(["passage: " + passage_text(p) for p in passages])
    assert np.allclose(emb, want, atol=1e-5)
    assert not np.allclose(emb, e5_named.encode([passage_text(p) for p in passages]), atol=1e-3)
    q = "When did the harbor light switch to electricity?"
    assert np.allclose(built.encode_queries([q]), e5_named.encode(["query: " + q]), atol=1e-5)
    loaded = DenseRetriever.load(passages, tmp_path / "d", built.params(), encoder=e5_named)
    assert loaded.query_prefix == "query: "


def test_explicit_prefixes_override_and_the_manifest_records_them(e5_named, tmp_path: Path):
    from factrl.retrieval.index import build_index, load_index, read_manifest

    build_index(FIXTURE, tmp_path / "ix", retriever="dense", unit_sentences=2, progress=False, encoder=e5_named)
    params = read_manifest(tmp_path / "ix").params
    assert (params["query_prefix"], params["passage_prefix"]) == ("query: ", "passage: ")
    build_index(FIXTURE, tmp_path / "none", retriever="dense", unit_sentences=2, progress=False, encoder=e5_named,
                query_prefix="", passage_prefix="")
    assert read_manifest(tmp_path / "none").params["query_prefix"] == ""
    build_index(FIXTURE, tmp_path / "hy", retriever="hybrid", unit_sentences=2, progress=False, encoder=e5_named)
    assert read_manifest(tmp_path / "hy").params["dense"]["query_prefix"] == "query: "
    assert load_index(tmp_path / "hy").backend.dense.query_prefix == "query: "


def test_an_index_from_before_prefixes_loads_with_none(minilm, passages: list[Passage], tmp_path: Path):
    built = DenseRetriever.build(passages, tmp_path / "old", encoder=minilm, progress=False)
    old = {k: v for k, v in built.params().items() if not k.endswith("_prefix")}
    settings = json.loads((tmp_path / "old" / "dense.json").read_text())
    for key in ("query_prefix", "passage_prefix"):
        del settings[key]
    (tmp_path / "old" / "dense.json").write_text(json.dumps(settings))
    loaded = DenseRetriever.load(passages, tmp_path / "old", old, encoder=minilm)
    assert loaded.query_prefix == "" and loaded.search(["lighthouse electricity"], 1)[0][0].passage.doc_id == "lighthouse"
