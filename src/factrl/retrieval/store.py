"""The passage store of an index directory: ``passages.jsonl`` read through memory maps.

Files::

    passages.jsonl           one Passage per line, in index order (unchanged format)
    passages.offsets.npy     uint64 byte offset of each line, plus the file size (n + 1)
    lookup/passage.*.npy     passage id  → row   (a :class:`HashIndex`)
    lookup/sentence.*.npy    sentence id → row of the passage holding it
    lookup/document.*.npy    doc id      → row of its first passage (a document's
                             passages are consecutive rows)

:class:`PassageStore` is a ``Sequence[Passage]`` that parses a line only when asked for
it, so a retriever materialises only its hits and loading a multi-million-passage index
costs the offsets array, not the passages. Every process that opens the same index
shares the pages through the operating system's page cache. An index written before the
offsets and lookups existed still loads: its offsets are found by one scan of the file,
and id lookups fall back to dictionaries built on first use.

:class:`PassageWriter` writes the store one passage at a time (the streaming build).
"""

from __future__ import annotations

import array
import json
import mmap
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, overload

import numpy as np
from pydantic import ValidationError
from factrl.retrieval.base import IndexMismatchError
from factrl.retrieval.hashindex import HashIndex, HashIndexWriter
from factrl.types import Passage

__all__ = ["OFFSETS", "PASSAGES", "PassageStore", "PassageWriter", "line_offsets"]

PASSAGES = "passages.jsonl"
OFFSETS = "passages.offsets.npy"
LOOKUP = "lookup"
_SCAN_CHUNK = 1 << 26  # 64 MiB per step when scanning a file for line starts


def line_offsets(path: Path) -> np.ndarray:
    """Byte offsets of the non-blank lines of ``path`` plus its size (``n + 1`` values),
    found in 64 MiB steps (the memory of one step, whatever the file's size)."""
    size = path.stat().st_size
    starts: list[np.ndarray] = [np.zeros(1, dtype=np.uint64)]
    with path.open("rb") as fh:
        pos = 0
        while pos < size:
            block = np.frombuffer(fh.read(_SCAN_CHUNK), dtype=np.uint8)
            nl = np.flatnonzero(block == 10).astype(np.uint64) + np.uint64(pos + 1)
            starts.append(nl)
            pos += block.size
    bounds = np.concatenate(starts)
    if bounds[-1] != size:  # no newline at the end: the last line ends at the file's end
        bounds = np.append(bounds, np.uint64(size))
    # Drop blank lines (old readers skipped them): a line of only whitespace.
    lengths = np.diff(bounds)
    keep = np.ones(len(lengths), dtype=bool)
    short = np.flatnonzero(lengths <= 8)
    if short.size:
        with path.open("rb") as fh:
            for i in short.tolist():
                fh.seek(int(bounds[i]))
                keep[i] = bool(fh.read(int(lengths[i])).strip())
    # A line's span runs to the next kept line's start: blank lines after it become
    # trailing whitespace, which the JSON parser ignores.
    starts_kept = bounds[:-1][keep]
    return np.append(starts_kept, np.uint64(size)).astype(np.uint64)


class PassageWriter:
    """Write passages to ``directory`` one at a time; :meth:`close` writes the offsets and
    the id lookups. Rows are numbered in the order passages are added."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self._fh = (self.directory / PASSAGES).open("wb")
        self._offsets = array.array("Q", [0])  # compact: 8 bytes a passage
        self._pos = 0
        self._passages, self._sentences, self._documents = HashIndexWriter(), HashIndexWriter(), HashIndexWriter()
        self._last_doc: str | None = None

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def add(self, passage: Passage) -> None:
        row = len(self)
        line = passage.model_dump_json().encode("utf-8") + b"\n"
        self._fh.write(line)
        self._pos += len(line)
        self._offsets.append(self._pos)
        self._passages.add(passage.id, row)
        self._sentences.add_many(passage.sentence_ids, row)
        if passage.doc_id != self._last_doc:  # a run of a document's passages starts here
            self._documents.add(passage.doc_id, row)
            self._last_doc = passage.doc_id

    def close(self) -> int:
        """Finish the files; returns the number of passages written."""
        self._fh.close()
        np.save(self.directory / OFFSETS, np.frombuffer(self._offsets, dtype=np.uint64), allow_pickle=False)
        lookup = self.directory / LOOKUP
        self._passages.save(lookup, "passage")
        self._sentences.save(lookup, "sentence")
        self._documents.save(lookup, "document")
        return len(self)

    def abort(self) -> None:
        self._fh.close()


class PassageStore(Sequence[Passage]):
    """The passages of an index directory, parsed on access (see the module doc)."""

    def __init__(self, directory: Path, *, expect: int | None = None) -> None:
        self.directory = Path(directory)
        path = self.directory / PASSAGES
        if not path.is_file():
            raise IndexMismatchError(f"index {self.directory} is incomplete: {PASSAGES} is missing")
        offsets_path = self.directory / OFFSETS
        size = path.stat().st_size
        if offsets_path.is_file():
            offsets = np.asarray(np.load(offsets_path, mmap_mode="r", allow_pickle=False))
            if offsets.ndim != 1 or offsets.size == 0 or int(offsets[-1]) != size:
                raise IndexMismatchError(f"index {self.directory}: {OFFSETS} does not match {PASSAGES} "
                                         f"({int(offsets[-1]) if offsets.size else 0} bytes indexed, file has {size})")
        else:
            offsets = line_offsets(path)
        self._offsets = offsets
        self._n = int(offsets.size - 1)
        if expect is not None and self._n != expect:
            raise IndexMismatchError(f"index {self.directory}: {PASSAGES} has {self._n} passages, manifest says {expect}")
        self._file = path.open("rb")
        self._mm = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        if size and hasattr(self._mm, "madvise") and hasattr(mmap, "MADV_RANDOM"):
            self._mm.madvise(mmap.MADV_RANDOM)  # hits are scattered: no read-ahead
        self._lookups: dict[str, HashIndex | None] = {}
        self._dicts: dict[str, dict[str, int]] = {}

    # --- sequence --------------------------------------------------------------------

    def __len__(self) -> int:
        return self._n

    def raw(self, row: int) -> bytes:
        """Line ``row`` as stored (JSON bytes)."""
        start, end = self._offsets[row : row + 2].tolist()
        return self._mm[start:end]

    def _parse(self, row: int) -> Passage:
        try:  # pydantic's JSON parse is faster than json.loads alone (~7 µs a passage)
            return Passage.model_validate_json(self.raw(row))
        except ValidationError as exc:
            raise IndexMismatchError(f"{self.directory / PASSAGES}: passage {row} is not a passage record "
                                     f"({exc.errors()[0]['msg']})") from None

    @overload
    def __getitem__(self, row: int) -> Passage: ...

    @overload
    def __getitem__(self, row: slice) -> list[Passage]: ...

    def __getitem__(self, row: int | slice) -> Passage | list[Passage]:
        if isinstance(row, slice):
            return [self._parse(i) for i in range(*row.indices(self._n))]
        i = int(row)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError(f"passage row {row} out of range (0..{self._n - 1})")
        return self._parse(i)

    def __iter__(self) -> Iterator[Passage]:
        for i in range(self._n):
            yield self._parse(i)

    def iter_fields(self, start: int = 0, stop: int | None = None) -> Iterator[dict[str, Any]]:
        """Rows ``start..stop`` as plain dicts (json.loads, no validation): the builders'
        fast path over millions of passages."""
        loads = json.loads
        for i in range(start, self._n if stop is None else min(stop, self._n)):
            yield loads(self.raw(i))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(other) == self._n and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"PassageStore({str(self.directory)!r}, passages={self._n})"

    def close(self) -> None:
        if isinstance(self._mm, mmap.mmap):
            self._mm.close()
        self._file.close()

    # --- lookups ---------------------------------------------------------------------

    def _lookup(self, name: str) -> HashIndex | None:
        if name not in self._lookups:
            lookup_dir = self.directory / LOOKUP
            self._lookups[name] = HashIndex.load(lookup_dir, name) if HashIndex.exists(lookup_dir, name) else None
        return self._lookups[name]

    def _fallback(self, name: str) -> dict[str, int]:
        """An index without lookup files: one pass over the passages builds a dict."""
        if name not in self._dicts:
            table: dict[str, int] = {}
            for row, fields in enumerate(self.iter_fields()):
                if name == "passage":
                    table[fields["id"]] = row
                elif name == "sentence":
                    for sid in fields.get("sentence_ids", []):
                        table[sid] = row
                else:
                    table.setdefault(fields["doc_id"], row)
            self._dicts[name] = table
        return self._dicts[name]

    def _candidate_rows(self, name: str, key: str) -> list[int]:
        lookup = self._lookup(name)
        if lookup is not None:
            return lookup.rows(key)
        row = self._fallback(name).get(key)
        return [] if row is None else [row]

    def get(self, passage_id: str) -> Passage | None:
        """The passage with id ``passage_id``, or None."""
        for row in self._candidate_rows("passage", passage_id):
            p = self._parse(row)
            if p.id == passage_id:
                return p
        return None

    def sentence_text(self, sentence_id: str) -> str | None:
        """The text of evidence sentence ``sentence_id``, or None."""
        for row in self._candidate_rows("sentence", sentence_id):
            p = self._parse(row)
            for sid, text in zip(p.sentence_ids, p.sentences):
                if sid == sentence_id:
                    return text
        return None

    def document(self, doc_id: str) -> list[Passage]:
        """The passages of document ``doc_id`` in order (empty when there is none)."""
        out: list[Passage] = []
        for row in self._candidate_rows("document", doc_id):
            while row < self._n:
                p = self._parse(row)
                if p.doc_id != doc_id:
                    break
                out.append(p)
                row += 1
        return out


def store_bytes(directory: Path) -> int:
    """Bytes on disk of a store's files (passages, offsets, lookups)."""
    directory = Path(directory)
    total = 0
    for path in [directory / PASSAGES, directory / OFFSETS, *sorted((directory / LOOKUP).glob("*.npy"))]:
        if path.is_file():
            total += os.path.getsize(path)
    return total
