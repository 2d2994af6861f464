"""Retrieval: the Retriever seam, index directories and backends (bm25, dense, hybrid),
fusion, query-result caches, per-claim evidence pools, and an HTTP server and client.

Light names are imported here; the rest load on first attribute access, so
``import factrl.retrieval`` never pulls in torch, faiss, fastapi or httpx.
"""

from __future__ import annotations

import importlib
from typing import Any

from factrl.retrieval.base import (
    RETRIEVERS,
    IndexMismatchError,
    Retriever,
    RetrieverBackend,
)

# name → module that defines it (imported lazily by __getattr__)
_LAZY = {
    "CachedRetriever": "factrl.retrieval.cache",
    "LRUCache": "factrl.retrieval.cache",
    "SqliteCache": "factrl.retrieval.cache",
    "CacheStats": "factrl.retrieval.cache",
    "rrf": "factrl.retrieval.fusion",
    "score_fusion": "factrl.retrieval.fusion",
    "EvidencePools": "factrl.retrieval.pools",
    "build_pools": "factrl.retrieval.pools",
    "RetrieverClient": "factrl.retrieval.client",
    "RetrieverClientError": "factrl.retrieval.client",
    "create_app": "factrl.retrieval.server",
    "ServerLimits": "factrl.retrieval.server",
    "TextEncoder": "factrl.retrieval.encoders",
    "DenseRetriever": "factrl.retrieval.dense",
    "HybridRetriever": "factrl.retrieval.hybrid",
    "build_index": "factrl.retrieval.index",
    "load_index": "factrl.retrieval.index",
    "Index": "factrl.retrieval.index",
}

__all__ = [
    "RETRIEVERS",
    "CacheStats",
    "CachedRetriever",
    "DenseRetriever",
    "EvidencePools",
    "HybridRetriever",
    "Index",
    "IndexMismatchError",
    "LRUCache",
    "Retriever",
    "RetrieverBackend",
    "RetrieverClient",
    "RetrieverClientError",
    "ServerLimits",
    "SqliteCache",
    "TextEncoder",
    "build_index",
    "build_pools",
    "create_app",
    "load_index",
    "rrf",
    "score_fusion",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'factrl.retrieval' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
