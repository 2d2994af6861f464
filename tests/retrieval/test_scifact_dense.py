"""Dense and hybrid retrieval on a slice of the real SciFact data (skips without it).

The slice: the first 80 train claims that cite documents, over a corpus of their cited
abstracts plus the first 400 others — small enough to encode in a minute on a CPU.
The full-corpus numbers are in docs/benchmarks.md.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from factrl.corpus import make_units, read_corpus
from factrl.retrieval.base import RETRIEVERS
from factrl.retrieval.dense import DenseRetriever
from factrl.retrieval.hybrid import DEFAULT_FUSION, HybridRetriever
from factrl.retrieval.metrics import doc_ranking, ndcg_at_k

pytestmark = [pytest.mark.data, pytest.mark.slow]


def _ndcg(results, relevant) -> float:
    return float(np.mean([ndcg_at_k(doc_ranking(h), g, 10) for h, g in zip(results, relevant)]))


def test_dense_and_hybrid_on_a_scifact_slice(shared_data: Path, minilm, tmp_path: Path) -> None:
    claims = [json.loads(line) for line in (shared_data / "scifact" / "claims_train.jsonl").open()]
    claims = [c for c in claims if c["cited_doc_ids"]][:80]
    cited = {str(d) for c in claims for d in c["cited_doc_ids"]}
    docs = list(read_corpus(shared_data / "scifact" / "corpus.jsonl", "scifact"))
    keep = [d for i, d in enumerate(docs) if d.id in cited or i < 400]
    passages = make_units(keep, 0)
    queries = [c["claim"] for c in claims]
    relevant = [{str(d) for d in c["cited_doc_ids"]} for c in claims]

    bm25 = RETRIEVERS.get("bm25").build(passages, tmp_path / "bm25")
    dense = DenseRetriever.build(passages, tmp_path / "dense", encoder=minilm, progress=False)
    hybrid = HybridRetriever(bm25, dense, DEFAULT_FUSION)
    scores = {name: _ndcg(r.search(queries, 100), relevant) for name, r in
              (("bm25", bm25), ("dense", dense), ("hybrid", hybrid))}
    # On this slice MiniLM and BM25 each score about 0.7-0.8; fusion must not lose to either by much.
    assert scores["dense"] > 0.6, scores
    assert scores["hybrid"] >= max(scores["bm25"], scores["dense"]) - 0.03, scores
