"""Helpers shared by tests (importable as ``_support``; pytest puts tests/ on the path)."""

from __future__ import annotations

import re
from pathlib import Path

from factrl.types import Hit

REPO = Path(__file__).resolve().parents[1]


class WordOverlapRetriever:
    """A tiny real retriever: ranks passages by shared lowercase words."""

    def __init__(self, passages):
        self.passages = passages
        self.queries = []

    def search(self, queries, k):
        out = []
        for q in queries:
            self.queries.append(q)
            words = set(re.findall(r"\w+", q.lower()))
            scored = [(len(words & set(re.findall(r"\w+", (p.title + " " + p.text).lower()))), p) for p in self.passages]
            scored.sort(key=lambda x: -x[0])
            out.append([Hit(passage=p, score=float(s)) for s, p in scored[:k] if s > 0])
        return out
