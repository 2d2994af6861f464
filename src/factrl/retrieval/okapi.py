"""Okapi BM25 exactly as ``rank_bm25`` 0.2.2 computes it (``BM25Okapi``), for the code
paths that reproduce released code built on it (Binary RAR's reward and evaluation).

factrl's own BM25 is bm25s with stemming (:mod:`factrl.retrieval.bm25`); the two rank
differently (other k1/b, idf floor, tokenisation), so a reproduction uses this one:
idf = ln(N − n + 0.5) − ln(n + 0.5), negative idfs replaced by ε × the mean idf, and
per query token (repeats counted) idf × f(k1 + 1) / (f + k1(1 − b + b·|d|/avgdl)), summed
in query order — the same floating-point operations, so scores and therefore ties come
out bit for bit as the reference's. Callers tokenise (the released code: lower-cased
whitespace tokens for the reward, case-sensitive ones for the evaluation).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["OkapiBM25", "top_indices"]


class OkapiBM25:
    def __init__(self, corpus: Sequence[Sequence[str]], *, k1: float = 1.5, b: float = 0.75,
                 epsilon: float = 0.25) -> None:
        if not corpus:
            raise ValueError("an Okapi BM25 index needs at least one document")
        self.k1, self.b, self.epsilon = k1, b, epsilon
        self.doc_freqs: list[dict[str, int]] = []
        self.doc_len: list[int] = []
        df: dict[str, int] = {}
        total = 0
        for doc in corpus:
            self.doc_len.append(len(doc))
            total += len(doc)
            freqs: dict[str, int] = {}
            for word in doc:
                freqs[word] = freqs.get(word, 0) + 1
            self.doc_freqs.append(freqs)
            for word in freqs:
                df[word] = df.get(word, 0) + 1
        self.corpus_size = len(corpus)
        self.avgdl = total / self.corpus_size
        self.idf: dict[str, float] = {}
        idf_sum = 0.0
        negative = []
        for word, freq in df.items():
            idf = math.log(self.corpus_size - freq + 0.5) - math.log(freq + 0.5)
            self.idf[word] = idf
            idf_sum += idf
            if idf < 0:
                negative.append(word)
        self.average_idf = idf_sum / len(self.idf) if self.idf else 0.0
        eps = self.epsilon * self.average_idf
        for word in negative:
            self.idf[word] = eps

    def get_scores(self, query: Sequence[str]) -> np.ndarray:
        """One score per document, in corpus order (every document empty: all 0)."""
        score = np.zeros(self.corpus_size)
        if not self.avgdl:
            return score
        doc_len = np.array(self.doc_len)
        for q in query:
            q_freq = np.array([(doc.get(q) or 0) for doc in self.doc_freqs])
            score += (self.idf.get(q) or 0) * (q_freq * (self.k1 + 1) /
                                               (q_freq + self.k1 * (1 - self.b + self.b * doc_len / self.avgdl)))
        return score


def top_indices(scores: np.ndarray, k: int, *, order: str = "reversed") -> list[int]:
    """The ``k`` best indices as the released code ranks them: ``"reversed"`` is
    ``np.argsort(scores)[::-1]`` (the reward's), ``"negated"``
    ``np.argsort(-scores)`` (the evaluation's) — numpy's own order of ties included. Scores of 0 are
    kept: the released code always takes ``k``."""
    if order == "reversed":
        return [int(i) for i in np.argsort(scores)[::-1][:k]]
    if order == "negated":
        return [int(i) for i in np.argsort(-scores)[:k]]
    raise ValueError(f"order must be 'reversed' or 'negated', got {order!r}")
