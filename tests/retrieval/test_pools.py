import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from factrl.retrieval.base import Retriever
from factrl.retrieval.pools import (
    EvidencePools,
    PoolDocument,
    PoolFormatError,
    UnknownClaimError,
    build_pools,
    chunk_document,
)
from factrl.types import Claim, Hit, Passage


def test_chunk_document_packs_sentences_under_the_limit() -> None:
    doc = PoolDocument("d", "One two three. Four five. Six seven eight nine.", title="T")
    chunks = chunk_document(doc, chunk_tokens=5)
    # 3 + 2 words fit in 5; the 4-word sentence starts a new chunk.
    assert [c.text for c in chunks] == ["One two three. Four five.", "Six seven eight nine."]
    assert [c.id for c in chunks] == ["d#0", "d#1"] and all(c.doc_id == "d" and c.title == "T" for c in chunks)
    # A sentence longer than the limit is split by tokens.
    long = chunk_document(PoolDocument("x", "a b c d e f g"), chunk_tokens=3)
    assert [c.text for c in long] == ["a b c", "d e f", "g"]
    assert chunk_document(PoolDocument("e", "   "), chunk_tokens=3) == []
    with pytest.raises(ValueError):
        chunk_document(doc, chunk_tokens=0)


@pytest.fixture
def pools() -> EvidencePools:
    p = EvidencePools(chunk_tokens=512)
    p.add("c1", [
        {"id": "glacier", "title": "Glaciers", "text": "Alpine glaciers have retreated since 1850. Meltwater feeds rivers."},
        {"id": "bees", "text": "A honeybee colony has one queen and thousands of workers."},
    ], claim="Glaciers are retreating.")
    p.add("c2", [PoolDocument("bread", "Sourdough is leavened by wild yeast.")])
    return p


def test_search_is_per_claim(pools: EvidencePools) -> None:
    hits = pools.search("c1", ["retreated glaciers", "queen workers", "sourdough yeast"], k=2)
    assert hits[0][0].passage.doc_id == "glacier"
    assert hits[1][0].passage.doc_id == "bees"
    assert hits[2] == []  # the bread document is in another claim's pool
    assert pools.search("c2", ["sourdough yeast"], k=5)[0][0].passage.id == "bread#0"
    assert len(pools.search("c1", ["glaciers"], k=10)[0]) == 1  # k larger than the pool
    with pytest.raises(UnknownClaimError, match="no evidence pool for claim 'c9'"):
        pools.search("c9", ["x"], k=1)
    with pytest.raises(TypeError):
        pools.search("c1", "one string", k=1)


def test_bound_retriever_and_replacing_a_pool(pools: EvidencePools) -> None:
    r = pools.retriever("c2")
    assert isinstance(r, Retriever)
    assert r.search(["yeast"], 1)[0][0].passage.doc_id == "bread"
    pools.add("c2", [PoolDocument("rye", "Rye bread uses sour yeast starter.")])
    assert r.search(["yeast"], 1)[0][0].passage.doc_id == "rye"  # the index was rebuilt
    with pytest.raises(UnknownClaimError):
        pools.retriever("nope")


def test_jsonl_round_trip(pools: EvidencePools, tmp_path: Path) -> None:
    path = tmp_path / "pools.jsonl"
    pools.save_jsonl(path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert rows[0]["claim_id"] == "c1" and rows[0]["claim"] == "Glaciers are retreating."
    assert rows[0]["documents"][0] == {"id": "glacier", "title": "Glaciers",
                                       "text": "Alpine glaciers have retreated since 1850. Meltwater feeds rivers."}
    back = EvidencePools.load_jsonl(path)
    assert back.claim_ids() == ["c1", "c2"] and back.documents("c1") == pools.documents("c1")
    assert back.search("c1", ["queen"], 1) == pools.search("c1", ["queen"], 1)


def test_bad_lines_name_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    good = json.dumps({"claim_id": "a", "documents": [{"id": "d", "text": "t"}]})
    path.write_text("\n".join([good, "{not json", json.dumps({"claim_id": "b", "documents": [{"id": "d"}]}),
                               json.dumps({"documents": []})]) + "\n")
    with pytest.raises(PoolFormatError, match=r"bad\.jsonl:2: not JSON"):
        EvidencePools.load_jsonl(path)
    skipped = EvidencePools.load_jsonl(path, on_error="skip")
    assert skipped.claim_ids() == ["a"] and len(skipped.skipped) == 3
    assert "bad.jsonl:3: document 0 needs 'id' and a string 'text'" in skipped.skipped[1]
    assert "bad.jsonl:4:" in skipped.skipped[2]


class FixedRetriever:
    """Returns fixed units for every query: doc A's units 1 and 0, doc B, doc C."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.asked.append(k)
        units = [Passage(id="A#1", doc_id="A", title="TA", text="second"), Passage(id="B#0", doc_id="B", text="bee"),
                 Passage(id="A#0", doc_id="A", title="TA", text="first"), Passage(id="C#0", doc_id="C", text="sea")]
        return [[Hit(passage=p, score=1.0 / (i + 1)) for i, p in enumerate(units[:k])] for _ in queries]


def test_build_pools_from_a_retrievers_top_documents() -> None:
    backend = FixedRetriever()
    pools = build_pools(backend, [Claim(id="c1", text="q1"), Claim(id="c2", text="q2")], top_n=2)
    assert backend.asked == [8]  # 4 × top_n units asked for, once for the whole batch
    docs = pools.documents("c1")
    # Top 2 distinct documents; a document's units joined in unit order.
    assert docs == [PoolDocument("A", "first second", "TA"), PoolDocument("B", "bee", "")]
    assert pools.documents("c2") == docs
    from_mapping = build_pools(FixedRetriever(), {"x": "query"}, top_n=3)
    assert [d.id for d in from_mapping.documents("x")] == ["A", "B", "C"]
    with pytest.raises(ValueError):
        build_pools(backend, {"x": "q"}, top_n=0)


def test_a_document_without_an_id_is_a_clear_error() -> None:
    pools = EvidencePools()
    with pytest.raises(PoolFormatError, match=r"claim 'c1': document 1 has no id"):
        pools.add("c1", [{"id": "d0", "text": "Fine."}, {"title": "Only a title", "text": "No id."}])
    with pytest.raises(PoolFormatError, match="no text"):
        pools.add("c1", [{"id": "d0", "title": "t"}])
