import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from factrl.retrieval.cache import CachedRetriever, LRUCache
from factrl.types import Hit, Passage


class CountingRetriever:
    """Answers query q with k hits whose texts spell (q, rank); records every call."""

    def __init__(self, fingerprint: str | None = "ix-1") -> None:
        self.calls: list[tuple[list[str], int]] = []
        if fingerprint is not None:
            self.fingerprint = fingerprint

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.calls.append((list(queries), k))
        return [[Hit(passage=Passage(id=f"{q}#{r}", doc_id=q, text=f"{q} {r}"), score=float(k - r)) for r in range(k)]
                for q in queries]


def test_hits_misses_and_only_misses_reach_the_backend() -> None:
    backend = CountingRetriever()
    cached = CachedRetriever(backend)
    first = cached.search(["a", "b"], 2)
    assert backend.calls == [(["a", "b"], 2)]
    again = cached.search(["b", "c", "a"], 2)
    assert backend.calls[-1] == (["c"], 2)  # only the miss
    assert again[0] == first[1] and again[2] == first[0]
    assert [h.passage.id for h in again[1]] == ["c#0", "c#1"]
    s = cached.stats
    assert (s.hits, s.misses, s.size) == (2, 3, 3)
    assert s.hit_rate == pytest.approx(2 / 5)


def test_repeats_inside_one_batch_are_computed_once() -> None:
    backend = CountingRetriever()
    cached = CachedRetriever(backend)
    out = cached.search(["x", "x", "y", "x"], 1)
    assert backend.calls == [(["x", "y"], 1)]
    assert out[0] == out[1] == out[3] and out[2][0].passage.id == "y#0"
    assert (cached.stats.hits, cached.stats.misses) == (2, 2)


def test_key_includes_k_and_fingerprint() -> None:
    backend = CountingRetriever()
    cached = CachedRetriever(backend)
    cached.search(["q"], 3)
    cached.search(["q"], 5)
    assert [c[1] for c in backend.calls] == [3, 5]  # a different k is a different result
    assert len(cached.search(["q"], 3)[0]) == 3 and len(backend.calls) == 2
    other = CachedRetriever(CountingRetriever("ix-2"))
    assert other.fingerprint == "ix-2" and cached.fingerprint == "ix-1"


def test_returned_lists_are_fresh() -> None:
    cached = CachedRetriever(CountingRetriever())
    cached.search(["q"], 3)[0].clear()
    assert len(cached.search(["q"], 3)[0]) == 3


def test_lru_evicts_least_recently_used() -> None:
    lru = LRUCache(maxsize=2)
    lru.put(("f", "a", 1), [])
    lru.put(("f", "b", 1), [])
    assert lru.get(("f", "a", 1)) == []  # a is now the most recent
    lru.put(("f", "c", 1), [])
    assert lru.get(("f", "b", 1)) is None and lru.get(("f", "a", 1)) == [] and len(lru) == 2
    zero = LRUCache(maxsize=0)
    zero.put(("f", "a", 1), [])
    assert len(zero) == 0


def test_persistent_layer_is_shared_across_instances(tmp_path: Path) -> None:
    db = tmp_path / "cache.sqlite"
    first = CachedRetriever(CountingRetriever(), persist=db)
    hits = first.search(["alpha", "beta"], 2)
    second_backend = CountingRetriever()
    second = CachedRetriever(second_backend, persist=db)  # e.g. another rollout worker
    again = second.search(["beta", "alpha", "gamma"], 2)
    assert second_backend.calls == [(["gamma"], 2)]
    assert again[0] == hits[1] and again[1] == hits[0]
    assert second.stats.persistent_hits == 2
    # Another index's fingerprint never sees these rows.
    third_backend = CountingRetriever("ix-other")
    CachedRetriever(third_backend, persist=db).search(["alpha"], 2)
    assert third_backend.calls == [(["alpha"], 2)]


def test_persistent_cache_needs_a_fingerprint(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fingerprint"):
        CachedRetriever(CountingRetriever(fingerprint=None), persist=tmp_path / "c.sqlite")
    anon = CachedRetriever(CountingRetriever(fingerprint=None))
    assert anon.fingerprint.startswith("anonymous-")


def test_unreadable_persistent_row_is_recomputed(tmp_path: Path) -> None:
    db = tmp_path / "cache.sqlite"
    CachedRetriever(CountingRetriever(), persist=db).search(["q"], 1)
    with sqlite3.connect(db) as con:
        con.execute("UPDATE results SET hits = 'not json'")
    backend = CountingRetriever()
    out = CachedRetriever(backend, persist=db).search(["q"], 1)
    assert backend.calls == [(["q"], 1)] and out[0][0].passage.id == "q#0"


def test_not_a_sqlite_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ValueError, match="bad.sqlite"):
        CachedRetriever(CountingRetriever(), persist=bad)


def test_concurrent_use_from_threads() -> None:
    backend = CountingRetriever()
    cached = CachedRetriever(backend, maxsize=1000)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(50):
                out = cached.search([f"q{(i + j) % 20}"], 2)
                assert out[0][0].passage.doc_id == f"q{(i + j) % 20}"
        except BaseException as exc:  # noqa: BLE001 - surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    s = cached.stats
    assert s.hits + s.misses == 400 and s.size == 20


def test_peek_answers_only_when_everything_is_cached() -> None:
    backend = CountingRetriever()
    cached = CachedRetriever(backend)
    assert cached.peek(["a"], 2) is None and cached.stats.hits == 0 and cached.stats.misses == 0
    cached.search(["a", "b"], 2)
    assert cached.peek(["a", "c"], 2) is None
    got = cached.peek(["b", "a"], 2)
    assert got is not None and [r[0].passage.doc_id for r in got] == ["b", "a"]
    assert cached.stats.hits == 2 and len(backend.calls) == 1
    assert cached.peek(["a"], 3) is None  # another k
