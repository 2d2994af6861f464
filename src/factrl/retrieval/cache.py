"""Query-result caches: repeated rollouts never recompute the same retrieval.

:class:`CachedRetriever` wraps any :class:`~factrl.retrieval.base.Retriever`. A result is
keyed by ``(index fingerprint, query, k)``: the fingerprint makes results of one index
never answer for another, and ``k`` is part of the key because a fused ranking's top 3
need not be the first 3 of its top 10. Only the misses of a batch (each distinct query
once) reach the backend, in one call.

Two layers: an in-memory LRU (hit/miss counters, thread-safe) and, optionally, a sqlite
file that several processes (rollout workers, a server) can share. Cached hits are shared
objects: treat them as read-only.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factrl.retrieval.base import Retriever
from factrl.types import Hit

__all__ = ["CacheStats", "CachedRetriever", "LRUCache", "SqliteCache"]

Key = tuple[str, str, int]


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    size: int = 0
    persistent_hits: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


class LRUCache:
    """A bounded mapping that forgets the least recently used entry first."""

    def __init__(self, maxsize: int = 100_000) -> None:
        if maxsize < 0:
            raise ValueError(f"maxsize must be >= 0, got {maxsize}")
        self.maxsize = maxsize
        self._data: OrderedDict[Key, list[Hit]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    def get(self, key: Key) -> list[Hit] | None:
        with self._lock:
            value = self._data.get(key)
            if value is not None:
                self._data.move_to_end(key)
            return value

    def put(self, key: Key, value: list[Hit]) -> None:
        if self.maxsize == 0:
            return
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.maxsize:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()


class SqliteCache:
    """Results stored as JSON in a sqlite file (WAL mode, so readers and one writer at a
    time across processes). A row that cannot be read back is treated as a miss."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._db = sqlite3.connect(str(self.path), timeout=30.0, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS results (fingerprint TEXT NOT NULL, query TEXT NOT NULL, k INTEGER NOT NULL, "
                "hits TEXT NOT NULL, PRIMARY KEY (fingerprint, query, k))"
            )
            self._db.commit()
        except sqlite3.DatabaseError as exc:
            raise ValueError(f"{self.path}: not a usable sqlite cache file ({exc})") from None

    def get_many(self, keys: Sequence[Key]) -> dict[Key, list[Hit]]:
        found: dict[Key, list[Hit]] = {}
        with self._lock:
            for key in keys:
                row = self._db.execute(
                    "SELECT hits FROM results WHERE fingerprint = ? AND query = ? AND k = ?", key
                ).fetchone()
                if row is None:
                    continue
                try:
                    found[key] = [Hit.from_dict(h) for h in json.loads(row[0])]
                except (ValueError, TypeError):
                    continue  # unreadable row (older format, partial write): recompute it
        return found

    def put_many(self, items: Sequence[tuple[Key, list[Hit]]]) -> None:
        rows = [(*key, json.dumps([h.to_dict() for h in hits], ensure_ascii=False)) for key, hits in items]
        if not rows:
            return
        with self._lock:
            self._db.executemany("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?)", rows)
            self._db.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM results").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _fingerprint_of(retriever: Any) -> str | None:
    fp = getattr(retriever, "fingerprint", None)
    return fp if isinstance(fp, str) and fp else None


class CachedRetriever:
    """A :class:`Retriever` that answers repeated ``(query, k)`` from its caches.

    ``fingerprint`` names the index the results come from; it defaults to the wrapped
    retriever's ``fingerprint`` attribute (an :class:`~factrl.retrieval.index.Index` has
    one). A persistent cache (``persist=``) requires a real fingerprint, since its
    entries outlive this process; an in-memory one falls back to this object's identity.
    """

    def __init__(self, retriever: Retriever, *, fingerprint: str | None = None, maxsize: int = 100_000,
                 persist: Path | str | None = None) -> None:
        self.retriever = retriever
        fp = fingerprint or _fingerprint_of(retriever)
        if fp is None and persist is not None:
            raise ValueError("a persistent cache needs the index fingerprint: pass fingerprint= "
                             "(Index.fingerprint) so results of different indexes never mix")
        self.fingerprint = fp or f"anonymous-{type(retriever).__name__}-{id(retriever):x}"
        self.memory = LRUCache(maxsize)
        self.store = SqliteCache(persist) if persist is not None else None
        self._stats = CacheStats()
        self._stats_lock = threading.Lock()

    @property
    def stats(self) -> CacheStats:
        with self._stats_lock:
            return CacheStats(self._stats.hits, self._stats.misses, len(self.memory), self._stats.persistent_hits)

    def clear(self) -> None:
        """Forget the in-memory results and reset the counters (the sqlite file stays)."""
        self.memory.clear()
        with self._stats_lock:
            self._stats = CacheStats()

    def peek(self, queries: Sequence[str], k: int) -> list[list[Hit]] | None:
        """The results if every query is in memory (counted as hits), else None (nothing
        counted): lets a server answer cached requests without queueing them."""
        got = [self.memory.get((self.fingerprint, q, int(k))) for q in queries]
        if any(g is None for g in got):
            return None
        with self._stats_lock:
            self._stats.hits += len(got)
        return [list(g) for g in got if g is not None]

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        if isinstance(queries, str):
            raise TypeError("search takes a sequence of queries, not one string")
        queries = list(queries)
        k = int(k)
        keys = [(self.fingerprint, q, k) for q in queries]
        out: list[list[Hit] | None] = [self.memory.get(key) for key in keys]
        missing = list(dict.fromkeys(key for key, got in zip(keys, out) if got is None))
        from_store: dict[Key, list[Hit]] = self.store.get_many(missing) if (self.store and missing) else {}
        for key, hits in from_store.items():
            self.memory.put(key, hits)
        todo = [key for key in missing if key not in from_store]
        computed: dict[Key, list[Hit]] = {}
        if todo:
            results = self.retriever.search([key[1] for key in todo], k)
            if len(results) != len(todo):
                raise RuntimeError(f"{type(self.retriever).__name__}.search returned {len(results)} result lists "
                                   f"for {len(todo)} queries")
            computed = dict(zip(todo, results))
            for key, hits in computed.items():
                self.memory.put(key, hits)
            if self.store is not None:
                self.store.put_many(list(computed.items()))
        with self._stats_lock:
            # A query repeated inside one batch is computed once: its repeats count as hits.
            n_misses = len(todo)
            self._stats.misses += n_misses
            self._stats.hits += len(queries) - n_misses
            self._stats.persistent_hits += len(from_store)
        final: list[list[Hit]] = []
        for key, got in zip(keys, out):
            hits = got if got is not None else (from_store.get(key) or computed.get(key) or [])
            final.append(list(hits))  # a fresh list: callers may sort or trim it
        return final
