"""The retriever seam: every retriever answers batched queries with scored passages.

An *index directory* holds ``manifest.json`` (which retriever, its parameters, the
corpus checksum and chunking), ``passages.jsonl`` (the retrieval units, in index order)
and one sub-folder per backend's own files. ``factrl.retrieval.index`` builds and loads
it; backends register here by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from factrl.registry import Registry
from factrl.types import Hit, Passage

__all__ = ["Retriever", "RetrieverBackend", "RETRIEVERS", "IndexMismatchError", "query_list"]


@runtime_checkable
class Retriever(Protocol):
    """Anything that answers ``search(queries, k)`` with hits, best first."""

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]: ...


class RetrieverBackend(Protocol):
    """A retriever kind that can be built over passages, saved and loaded.

    ``build``/``load`` receive the passages in index order; backends keep only what
    they need and write their own files under ``directory`` (a folder named after the
    backend inside the index directory).
    """

    name: str

    @classmethod
    def build(cls, passages: Sequence[Passage], directory: Path, **params: Any) -> "RetrieverBackend": ...

    @classmethod
    def load(cls, passages: Sequence[Passage], directory: Path, params: dict[str, Any]) -> "RetrieverBackend": ...

    def params(self) -> dict[str, Any]:
        """What the manifest records (model id, tokenizer settings, ...)."""
        ...

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]: ...


def query_list(queries: Sequence[str], k: int) -> list[str]:
    """The queries as a list — empty when there is nothing to search (``k <= 0``); a bare
    string is refused, since iterating it would search its characters."""
    if isinstance(queries, str):
        raise TypeError("search takes a sequence of queries, not one string")
    qs = list(queries)
    return qs if int(k) > 0 else []


class IndexMismatchError(ValueError):
    """An index directory does not match what the caller expects (corpus, model, chunking)."""


RETRIEVERS: Registry[type] = Registry("retriever")
RETRIEVERS.register_lazy("bm25", "factrl.retrieval.bm25")
RETRIEVERS.register_lazy("dense", "factrl.retrieval.dense")
RETRIEVERS.register_lazy("hybrid", "factrl.retrieval.hybrid")
