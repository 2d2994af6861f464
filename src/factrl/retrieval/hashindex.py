"""A string → row lookup that lives on disk and is memory-mapped: sorted 64-bit key hashes
beside the rows they point to.

A Wikipedia-scale index has millions of passage ids, sentence ids and vocabulary terms;
a Python dict of them costs hundreds of megabytes in every process that loads the
index. Here a lookup is a binary search in a memory-mapped array (pages shared by every
process through the page cache). Hashes may collide, so a lookup returns every row whose
key hash matches and the caller confirms the key against the row's own record.

Files: ``<name>.hash.npy`` (uint64, sorted) and ``<name>.row.npy`` (int64, aligned).
"""

from __future__ import annotations

import array
import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

__all__ = ["HashIndex", "HashIndexWriter", "key_hash", "key_hashes"]


def key_hash(key: str) -> int:
    """A stable 64-bit hash of ``key`` (the same in every process and on every machine,
    unlike ``hash()``)."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


def key_hashes(keys: Iterable[str]) -> np.ndarray:
    """:func:`key_hash` of each key, as a uint64 array."""
    blake = hashlib.blake2b
    out = array.array("Q", (int.from_bytes(blake(k.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")
                            for k in keys))
    return np.frombuffer(out, dtype=np.uint64) if len(out) else np.zeros(0, dtype=np.uint64)


class HashIndexWriter:
    """Collects ``(key, row)`` pairs in compact arrays; :meth:`save` sorts and writes them."""

    def __init__(self) -> None:
        self._hashes = array.array("Q")
        self._rows = array.array("q")

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, key: str, row: int) -> None:
        self._hashes.append(key_hash(key))
        self._rows.append(row)

    def add_many(self, keys: Iterable[str], row: int) -> None:
        for key in keys:
            self.add(key, row)

    def extend(self, hashes: np.ndarray, rows: np.ndarray) -> None:
        """Add already-hashed keys (:func:`key_hashes`) with their rows."""
        self._hashes.frombytes(np.ascontiguousarray(hashes, dtype=np.uint64).tobytes())
        self._rows.frombytes(np.ascontiguousarray(rows, dtype=np.int64).tobytes())

    def save(self, directory: Path, name: str) -> None:
        hashes = np.frombuffer(self._hashes, dtype=np.uint64) if len(self._hashes) else np.zeros(0, np.uint64)
        rows = np.frombuffer(self._rows, dtype=np.int64) if len(self._rows) else np.zeros(0, np.int64)
        order = np.argsort(hashes, kind="stable")  # stable: equal keys keep their row order
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / f"{name}.hash.npy", hashes[order], allow_pickle=False)
        np.save(directory / f"{name}.row.npy", rows[order], allow_pickle=False)


class HashIndex:
    """A saved :class:`HashIndexWriter`, memory-mapped."""

    def __init__(self, hashes: np.ndarray, rows: np.ndarray) -> None:
        if hashes.shape != rows.shape:
            raise ValueError(f"hash index: {hashes.shape[0]} hashes but {rows.shape[0]} rows")
        self._hashes, self._rows = hashes, rows

    @classmethod
    def files(cls, name: str) -> tuple[str, str]:
        return f"{name}.hash.npy", f"{name}.row.npy"

    @classmethod
    def exists(cls, directory: Path, name: str) -> bool:
        return all((Path(directory) / f).is_file() for f in cls.files(name))

    @classmethod
    def load(cls, directory: Path, name: str) -> "HashIndex":
        h, r = (np.load(Path(directory) / f, mmap_mode="r", allow_pickle=False) for f in cls.files(name))
        return cls(np.asarray(h), np.asarray(r))

    def __len__(self) -> int:
        return int(self._rows.shape[0])

    def rows(self, key: str) -> list[int]:
        """Rows whose key hash equals ``key``'s, in insertion order (usually one or none)."""
        h = np.uint64(key_hash(key))
        lo = int(np.searchsorted(self._hashes, h, side="left"))
        hi = lo
        n = len(self)
        while hi < n and self._hashes[hi] == h:
            hi += 1
        return [int(r) for r in self._rows[lo:hi]]
