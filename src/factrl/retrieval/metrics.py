"""Ranking metrics over document ids: nDCG@k, recall@k, and passage → document collapse.

Relevance is either a collection of relevant ids (binary, gain 1) or a mapping
``id → gain`` (graded). nDCG uses the standard ``gain / log2(rank + 1)`` discount with
ranks starting at 1, and the ideal ranking of the known relevant ids (as BEIR/pytrec_eval).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence

from factrl.types import Hit

__all__ = ["collapse_to_docs", "doc_ranking", "ndcg_at_k", "recall_at_k"]

Relevance = Collection[str] | Mapping[str, float]


def collapse_to_docs(ranked_ids: Iterable[str]) -> list[str]:
    """Keep the first occurrence of each id, in rank order (``a b a c`` → ``a b c``)."""
    seen: set[str] = set()
    out: list[str] = []
    for i in ranked_ids:
        if i not in seen:
            seen.add(i)
            out.append(i)
    return out


def doc_ranking(hits: Iterable[Hit]) -> list[str]:
    """The document ranking implied by ranked passages: each document at its best unit."""
    return collapse_to_docs(h.passage.doc_id for h in hits)


def _gains(relevant: Relevance) -> dict[str, float]:
    if isinstance(relevant, Mapping):
        gains = {str(k): float(v) for k, v in relevant.items() if float(v) > 0}
    elif isinstance(relevant, str):
        raise TypeError("relevant must be a collection of ids, not one string")
    else:
        gains = {str(k): 1.0 for k in relevant}
    if not gains:
        raise ValueError("no relevant ids: the metric is undefined (leave such queries out of the mean)")
    return gains


def _check_k(k: int) -> None:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def ndcg_at_k(ranked_doc_ids: Sequence[str], relevant: Relevance, k: int) -> float:
    """nDCG@k of one ranking. Duplicate ids count once (at their first rank)."""
    _check_k(k)
    gains = _gains(relevant)
    ranked = collapse_to_docs(ranked_doc_ids)[:k]
    dcg = sum(gains.get(d, 0.0) / math.log2(rank + 1) for rank, d in enumerate(ranked, start=1))
    ideal = sorted(gains.values(), reverse=True)[:k]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    return dcg / idcg


def recall_at_k(ranked_doc_ids: Sequence[str], relevant: Relevance, k: int) -> float:
    """Fraction of the relevant ids found in the top ``k`` (duplicates count once)."""
    _check_k(k)
    gains = _gains(relevant)
    top = set(collapse_to_docs(ranked_doc_ids)[:k])
    return sum(1 for d in gains if d in top) / len(gains)
