"""Held-out evaluation of a retriever trained by FFRR/REPLUG (or the frozen one).

Retrieval: nDCG@k and recall@k of the claim as the query, over documents (relevance:
SciFact's ``cited_doc_ids``, else the gold evidence's documents), for the dense side and
for hybrid fusion with the index's BM25. Labels: the LM's argmax label given the top-K
documents (level ``d``) or the top-1 documents of the K questions whose top-1 document
has the highest retrieval probability (levels ``q``, ``d+q``, §4.3), as macro P/R/F1.
Each query's own nDCG@k / recall@k is kept under ``per_query`` (side → metric → claim id),
so two encoders can be compared by a paired test on the same queries.

``pool_depth = 0`` encodes the queries with the trained encoder and searches an index's
own document vectors: ``eval.index`` (re-built with the trained encoder) or, after
query-side training (``ffrr.doc_side = "index"``), the frozen index trained against.
``pool_depth > 0`` re-ranks each claim's top ``pool_depth`` passages of the frozen index
with the encoder instead of searching a re-encoded corpus (re-encoding 5,183 SciFact
abstracts takes minutes per encoder on a small CPU); BM25 keeps its own full ranking in
the fusion. Every encoder is scored on the same pools, so the comparison is like for
like.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from factrl.retrieval.dense import passage_text
from factrl.retrieval.metrics import doc_ranking, ndcg_at_k, recall_at_k
from factrl.types import Claim, Hit, Passage

__all__ = ["PoolReranker", "evaluate_retriever", "evaluation_claims", "relevant_docs"]


def relevant_docs(claim: Claim) -> list[str]:
    cited = claim.meta.get("cited_doc_ids")
    if cited:
        return [str(c) for c in cited]
    return list(dict.fromkeys(e.doc_id for e in claim.evidence if e.doc_id))


class PoolReranker:
    """Dense scores of an encoder over a frozen index's candidate pools (passage vectors
    cached by id, so shared candidates are encoded once)."""

    def __init__(self, encoder: Any, index: Any, depth: int) -> None:
        self.encoder, self.index, self.depth = encoder, index, int(depth)
        self._vec: dict[str, np.ndarray] = {}
        backend = index.backend
        params = getattr(backend, "dense", backend).params() if backend.name in ("dense", "hybrid") else {}
        # the index's prefixes (E5's "query: " / "passage: "), as training used them
        self.query_prefix = str(params.get("query_prefix") or "")
        self.passage_prefix = str(params.get("passage_prefix") or "")

    def _queries(self, queries: Sequence[str]) -> np.ndarray:
        return self.encoder.encode([self.query_prefix + q for q in queries])

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if self.depth <= 0:  # the index's own document vectors, the encoder's queries
            backend = self.index.backend
            return getattr(backend, "dense", backend).search_vectors(self._queries(queries), k)
        pools = self.index.search(list(queries), self.depth)
        new = list({h.passage.id: h.passage for hits in pools for h in hits if h.passage.id not in self._vec}.values())
        if new:
            for p, v in zip(new, self.encoder.encode([self.passage_prefix + passage_text(p) for p in new])):
                self._vec[p.id] = v
        qv = self._queries(queries)
        out = []
        for q, hits in zip(qv, pools):
            scored = sorted(((float(self._vec[h.passage.id] @ q), h.passage) for h in hits), key=lambda t: -t[0])
            out.append([Hit(passage=p, score=s) for s, p in scored[:k]])
        return out


def evaluation_claims(cfg: Any) -> tuple[str, list[Claim]]:
    """``(name, claims)`` evaluated after training: the dataset's own ``eval.split``
    (labelled, non-empty claims; the paper's test split) when set, else the held-out part
    of the training split recorded in the run directory."""
    from factrl.datasets.prepare import prepare_splits

    split = cfg.eval.split
    if not split:
        return "held_out", prepare_splits(cfg.data, Path(cfg.output_dir))[1]
    from factrl.datasets.base import DATASETS

    d = cfg.data
    if Path(d.data_dir).is_file():
        raise ValueError(f"eval.split {split!r} needs data.data_dir to be a folder with one file per split, "
                         f"not the file {d.data_dir}")
    if split == d.split:
        raise ValueError(f"eval.split {split!r} is the training split (data.split); evaluate another split, "
                         "or leave eval.split unset to evaluate the held-out part")
    loaded = DATASETS.get(d.dataset)().load(Path(d.data_dir), split, on_error="skip" if d.skip_bad_rows else "raise")
    claims = [c for c in loaded.claims if c.label is not None and c.text.strip()]
    if not claims:
        raise ValueError(f"{d.dataset!r} split {split!r} at {d.data_dir} has no labelled claims to evaluate")
    return split, claims


def _ranking_metrics(rankings: Sequence[list[str]], claims: Sequence[Claim], ks: Sequence[int],
                     per_query: dict[str, dict[str, float]] | None = None) -> dict[str, float]:
    """Mean nDCG@k / recall@k over the claims with relevant documents; with ``per_query``,
    each claim's own figures are stored there too (``{"ndcg@10": {claim id: value}}``), so
    two encoders can be compared by a paired test on the same queries."""
    rows = [(r, relevant_docs(c), c.id) for r, c in zip(rankings, claims)]
    rows = [t for t in rows if t[1]]
    out: dict[str, float] = {"n_queries": float(len(rows))}
    for k in ks:
        for name, fn in ((f"ndcg@{k}", ndcg_at_k), (f"recall@{k}", recall_at_k)):
            each = {cid: fn(r, rel, k) for r, rel, cid in rows}
            out[name] = sum(each.values()) / max(1, len(rows))
            if per_query is not None:
                per_query[name] = each
    return out


def _question_docs(reranker: PoolReranker, questions: list[str], k: int, tau: float) -> list[Passage]:
    """Top-1 passages of the ``k`` questions whose top-1 has the highest π_θ probability."""
    best = []
    for hits in reranker.search(questions, max(reranker.depth, 1)):
        if hits:
            scores = np.array([h.score for h in hits]) / tau
            prob = float(np.exp(scores[0] - scores.max()) / np.exp(scores - scores.max()).sum())
            best.append((prob, hits[0].passage))
    best.sort(key=lambda t: -t[0])
    return list({p.id: p for _, p in best[:k]}.values())


def evaluate_retriever(model_dir: str | Path, cfg: Any, claims: Sequence[Claim], *, scorer: Any = None,
                      index: Any = None, questions: dict[str, list[str]] | None = None,
                      labels: bool = True) -> dict[str, Any]:
    """Retrieval and label metrics of the encoder in ``model_dir`` on ``claims``
    (``labels=False``: retrieval only, no LM). An agent's held-out evaluation is
    :func:`factrl.train.learning.evaluate_held_out`; this one scores a retriever."""
    from factrl.metrics.classification import accuracy, macro_f1, macro_precision, macro_recall
    from factrl.retrieval.encoders import TextEncoder
    from factrl.retrieval.index import load_index
    from factrl.train.ffrr.trainer import gold_index, load_scorer

    f, e = cfg.ffrr, cfg.eval
    if index is None:
        if e.pool_depth <= 0 and e.index is None and f.doc_side == "encode" and f.method != "frozen":
            raise ValueError("eval.pool_depth = 0 searches a whole index: build one with the trained encoder "
                             f"(factrl index build --model {model_dir} ...) and pass it as eval.index, "
                             "or re-rank the frozen index's pools (eval.pool_depth > 0)")
        index = load_index(e.index or cfg.retriever.index)
    encoder = TextEncoder(str(model_dir), precision="fp32", max_seq_length=cfg.retriever.max_seq_length,
                          device=cfg.runtime()[0])
    reranker = PoolReranker(encoder, index, e.pool_depth)
    texts = [c.text for c in claims]
    k_max = max([*e.ks, f.top_k])
    dense = reranker.search(texts, max(k_max, 100))
    per_query: dict[str, dict[str, dict[str, float]]] = {"dense": {}}
    result: dict[str, Any] = {"model": str(model_dir), "n_claims": len(claims), "pool_depth": e.pool_depth,
                              "dense": _ranking_metrics([doc_ranking(h) for h in dense], claims, e.ks,
                                                        per_query["dense"])}
    backend = index.backend
    if backend.name == "hybrid":
        sparse = backend.bm25.search(texts, backend.settings["depth"])
        fused = [backend.fuse(a, b, max(k_max, 100)) for a, b in zip(sparse, dense)]
        per_query["hybrid"] = {}
        result["hybrid"] = _ranking_metrics([doc_ranking(h) for h in fused], claims, e.ks, per_query["hybrid"])
    result["per_query"] = per_query
    if any(isinstance(v, float) and math.isnan(v) for v in result["dense"].values()):
        raise ValueError("retrieval metrics came out NaN")
    if not labels:
        return result
    scorer = scorer or load_scorer(cfg)
    scored = [(c, g, hits) for c, hits in zip(claims, dense) if (g := gold_index(c, cfg)) is not None]
    if e.label_limit is not None and len(scored) > e.label_limit > 0:
        # evenly spaced, not the first N: a stratified split lists the claims label by label
        step = len(scored) / e.label_limit
        scored = [scored[int(i * step)] for i in range(e.label_limit)]
    if f.level == "d" or not questions:
        docs = [[h.passage for h in hits[: f.top_k]] for _, _, hits in scored]
    else:
        docs = [_question_docs(reranker, questions.get(c.id) or [c.text], f.top_k, f.tau) for c, _, _ in scored]
    pred = scorer.predict([(c.text, [passage_text(p) for p in d]) for (c, _, _), d in zip(scored, docs)])
    gold = [g for _, g, _ in scored]
    labels = list(range(len(cfg.scorer.label_words)))
    result["labels"] = {
        "n": len(gold), "label_words": list(cfg.scorer.label_words.values()),
        "macro_f1": macro_f1(gold, pred, labels), "macro_precision": macro_precision(gold, pred, labels),
        "macro_recall": macro_recall(gold, pred, labels), "accuracy": accuracy(gold, pred),
        "predicted": {w: pred.count(i) for i, w in enumerate(cfg.scorer.label_words.values())},
    }
    return result
