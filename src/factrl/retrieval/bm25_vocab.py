"""BM25's vocabulary on disk: term → id. bm25s's own ``vocab.index.json`` (read whole
into a dict, :class:`DictVocab`; the only form in indexes written before the mapped one)
and a memory-mappable form (:class:`MappedVocab`): ``vocab.hash.npy``/``vocab.row.npy``
(term hash → id, :mod:`factrl.retrieval.hashindex`) with ``vocab.terms.bin``/
``vocab.offsets.npy`` (the terms, to confirm a hash match), so opening a large index does
not parse its whole vocabulary."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from factrl.retrieval.hashindex import HashIndex, HashIndexWriter, key_hashes

__all__ = ["DictVocab", "MappedVocab", "load_vocab", "write_vocab"]

_VOCAB_TERMS, _VOCAB_OFFSETS, _VOCAB_LOOKUP = "vocab.terms.bin", "vocab.offsets.npy", "vocab"
_VOCAB_CACHE_MAX = 200_000  # query terms remembered by a mapped vocabulary


class DictVocab:
    """term → id from ``vocab.index.json`` (indexes written before the mapped vocabulary)."""

    def __init__(self, table: dict[str, int]) -> None:
        self._table = table

    def __len__(self) -> int:
        return len(self._table)

    def get(self, term: str) -> int | None:
        return self._table.get(term)


class MappedVocab:
    """term → id through a memory-mapped hash lookup, confirmed against the stored term;
    recent answers are cached (bounded)."""

    def __init__(self, lookup: HashIndex, terms: np.ndarray, offsets: np.ndarray) -> None:
        self._lookup, self._terms, self._offsets = lookup, terms, offsets
        self._cache: OrderedDict[str, int | None] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return int(self._offsets.shape[0] - 1)

    def term(self, term_id: int) -> str:
        start, end = int(self._offsets[term_id]), int(self._offsets[term_id + 1])
        return self._terms[start:end].tobytes().decode("utf-8")

    def get(self, term: str) -> int | None:
        with self._lock:
            if term in self._cache:
                self._cache.move_to_end(term)
                return self._cache[term]
        found = None
        for row in self._lookup.rows(term):
            if row < len(self) and self.term(row) == term:
                found = row
                break
        with self._lock:
            self._cache[term] = found
            if len(self._cache) > _VOCAB_CACHE_MAX:
                self._cache.popitem(last=False)
        return found


def write_vocab(directory: Path, terms: Sequence[str]) -> None:
    """Write the vocabulary (``terms[i]`` has id ``i``): bm25s's ``vocab.index.json`` (with
    its empty token last) and the mapped form."""
    directory = Path(directory)
    table = {t: i for i, t in enumerate(terms)}
    table.setdefault("", len(terms))  # bm25s's create_empty_token
    (directory / "vocab.index.json").write_text(json.dumps(table, ensure_ascii=False), encoding="utf-8")
    del table
    encoded = [t.encode("utf-8") for t in terms]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    if encoded:
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
    with (directory / _VOCAB_TERMS).open("wb") as fh:
        fh.write(b"".join(encoded))
    np.save(directory / _VOCAB_OFFSETS, offsets, allow_pickle=False)
    writer = HashIndexWriter()
    writer.extend(key_hashes(terms), np.arange(len(terms), dtype=np.int64))
    writer.save(directory, _VOCAB_LOOKUP)


def load_vocab(directory: Path) -> DictVocab | MappedVocab:
    directory = Path(directory)
    if HashIndex.exists(directory, _VOCAB_LOOKUP) and (directory / _VOCAB_TERMS).is_file() \
            and (directory / _VOCAB_OFFSETS).is_file():
        terms = np.asarray(np.memmap(directory / _VOCAB_TERMS, dtype=np.uint8, mode="r")) \
            if (directory / _VOCAB_TERMS).stat().st_size else np.zeros(0, dtype=np.uint8)
        offsets = np.asarray(np.load(directory / _VOCAB_OFFSETS, mmap_mode="r", allow_pickle=False))
        return MappedVocab(HashIndex.load(directory, _VOCAB_LOOKUP), terms, offsets)
    with (directory / "vocab.index.json").open("r", encoding="utf-8") as fh:
        return DictVocab(json.load(fh))
