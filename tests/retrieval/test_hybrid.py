from pathlib import Path

import pytest

from factrl.retrieval.base import RETRIEVERS, IndexMismatchError
from factrl.retrieval.fusion import rrf, score_fusion
from factrl.retrieval.hybrid import HybridRetriever
from factrl.retrieval.index import Index, build_index, load_index

FIXTURE = Path(__file__).parents[1] / "fixtures" / "mini_corpus.jsonl"
QUERIES = ["When was the harbor lighthouse built?", "ice in the Alps shrinking", "how effective are two measles doses"]


@pytest.fixture(scope="module")
def hybrid_index(tmp_path_factory: pytest.TempPathFactory, minilm) -> Index:
    return build_index(FIXTURE, tmp_path_factory.mktemp("hy") / "ix", retriever="hybrid", unit_sentences=2,
                       progress=False, encoder=minilm, bm25_k1=1.2)


def test_layout_and_params(hybrid_index: Index) -> None:
    d = hybrid_index.directory / "hybrid"
    assert (d / "bm25" / "vocab.index.json").is_file() and (d / "dense" / "faiss.index").is_file()
    p = hybrid_index.manifest.params
    assert p["fusion"] == "score" and p["norm"] == "zscore" and p["weights"] == [1.0, 1.0] and p["depth"] == 100
    assert p["bm25"]["k1"] == 1.2  # the bm25_ prefix reached BM25
    assert p["dense"]["model"] == p["model"] == "all-MiniLM-L6-v2"
    assert RETRIEVERS.get("hybrid") is HybridRetriever


def _runs(backend: HybridRetriever, depth: int) -> list[tuple[list, list]]:
    sparse = backend.bm25.search(QUERIES, depth)
    dense = backend.dense.search(QUERIES, depth)
    return [([(h.passage.id, h.score) for h in a], [(h.passage.id, h.score) for h in b]) for a, b in zip(sparse, dense)]


def test_default_search_is_zscore_fusion_of_the_two_sides(hybrid_index: Index) -> None:
    fused = hybrid_index.search(QUERIES, k=4)
    for hits, (a, b) in zip(fused, _runs(hybrid_index.backend, 100)):
        expected = score_fusion([a, b], norm="zscore", weights=[1.0, 1.0], depth=100)[:4]
        assert [(h.passage.id, pytest.approx(h.score)) for h in hits] == [(i, pytest.approx(s)) for i, s in expected]
    assert fused[0][0].passage.doc_id == "lighthouse"
    assert fused[1][0].passage.doc_id == "glacier"  # a paraphrase: the dense side carries it


def test_rrf_option(hybrid_index: Index) -> None:
    backend: HybridRetriever = hybrid_index.backend
    rrf_hybrid = HybridRetriever(backend.bm25, backend.dense, {"fusion": "rrf", "rrf_k": 60.0})
    for hits, (a, b) in zip(rrf_hybrid.search(QUERIES, k=4), _runs(backend, 100)):
        expected = rrf([a, b], k=60)[:4]
        assert [(h.passage.id, pytest.approx(h.score)) for h in hits] == [(i, pytest.approx(s)) for i, s in expected]


def test_load_round_trip(hybrid_index: Index) -> None:
    again = load_index(hybrid_index.directory, expect={"retriever": "hybrid", "model": "all-MiniLM-L6-v2"})
    assert [[h.passage.id for h in r] for r in again.search(QUERIES, 5)] == \
        [[h.passage.id for h in r] for r in hybrid_index.search(QUERIES, 5)]
    assert again.fingerprint == hybrid_index.fingerprint


def test_load_with_incomplete_manifest(hybrid_index: Index) -> None:
    params = {k: v for k, v in hybrid_index.manifest.params.items() if k != "dense"}
    with pytest.raises(IndexMismatchError, match="no params for dense"):
        HybridRetriever.load(hybrid_index.passages, hybrid_index.directory / "hybrid", params)


def test_score_fusion_option_and_depth(hybrid_index: Index) -> None:
    backend: HybridRetriever = hybrid_index.backend
    zs = HybridRetriever(backend.bm25, backend.dense, {"fusion": "score", "norm": "zscore", "weights": [0.5, 1.0], "depth": 5})
    hits = zs.search(QUERIES[:1], k=3)[0]
    a = [(h.passage.id, h.score) for h in backend.bm25.search(QUERIES[:1], 5)[0]]
    b = [(h.passage.id, h.score) for h in backend.dense.search(QUERIES[:1], 5)[0]]
    expected = score_fusion([a, b], norm="zscore", weights=[0.5, 1.0], depth=5)[:3]
    assert [h.passage.id for h in hits] == [i for i, _ in expected]
    # k above depth: each side is asked for k, so k results still come back.
    small = HybridRetriever(backend.bm25, backend.dense, {"depth": 2})
    assert len(small.search(["lighthouse granite"], k=6)[0]) == 6


def test_bad_fusion_settings(hybrid_index: Index) -> None:
    backend: HybridRetriever = hybrid_index.backend
    for bad, msg in [({"fusion": "max"}, "unknown fusion"), ({"depth": 0}, "depth"), ({"weights": [1.0]}, "weights"),
                     ({"norm": "l2"}, "unknown norm")]:
        with pytest.raises(ValueError, match=msg):
            HybridRetriever(backend.bm25, backend.dense, bad)


def test_parameter_routing() -> None:
    from factrl.retrieval.hybrid import _split_params

    own, bm25, dense = _split_params({"fusion": "rrf", "bm25_b": 0.5, "k1": 1.1, "dense_batch_size": 8,
                                      "model": "m", "index_type": "hnsw"})
    assert own == {"fusion": "rrf"}
    assert bm25 == {"b": 0.5, "k1": 1.1}
    assert dense == {"batch_size": 8, "model": "m", "index_type": "hnsw"}
