"""Where a corpus lives on disk: one file, or a folder of files (the Wikipedia dumps come as
``wiki-pages/wiki-001.jsonl`` … or ``AA/wiki_00.bz2`` …), plain or compressed.

A folder's files are read in sorted order of their relative paths; ``.bz2`` and ``.gz``
files are decompressed while reading. :func:`corpus_sha256` names a corpus's content
(for a single file, the SHA-256 of its bytes, as before folders were read).
"""

from __future__ import annotations

import bz2
import gzip
import hashlib
from pathlib import Path
from typing import IO

__all__ = ["COMPRESSED", "CORPUS_SUFFIXES", "corpus_bytes", "corpus_files", "corpus_sha256", "open_binary"]

COMPRESSED = (".bz2", ".gz")
# What a folder's corpus files may end with; FEVER's and HotpotQA's dumps, and factrl's.
CORPUS_SUFFIXES = (".jsonl", ".json", ".bz2", ".gz")


def corpus_files(path: Path | str) -> list[Path]:
    """``[path]`` for a file; for a folder, its corpus files (:data:`CORPUS_SUFFIXES`, any
    depth, hidden ones skipped) sorted by relative path."""
    path = Path(path)
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise FileNotFoundError(f"corpus not found: {path}")
    files = sorted(
        (p for p in path.rglob("*") if p.is_file() and p.name.endswith(CORPUS_SUFFIXES)
         and not any(part.startswith(".") for part in p.relative_to(path).parts)),
        key=lambda p: p.relative_to(path).as_posix(),
    )
    if not files:
        raise FileNotFoundError(f"corpus folder {path} holds no corpus files ({', '.join(CORPUS_SUFFIXES)})")
    return files


def corpus_bytes(path: Path | str) -> int:
    """Size on disk of the corpus's files (compressed files count as stored)."""
    return sum(p.stat().st_size for p in corpus_files(path))


def _file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def corpus_sha256(path: Path | str) -> str:
    """SHA-256 of a corpus file's bytes; for a folder, of its files' relative paths and
    SHA-256s, one ``path<TAB>sha`` line each, in reading order."""
    path = Path(path)
    if path.is_file():
        return _file_sha256(path)
    h = hashlib.sha256()
    for f in corpus_files(path):
        h.update(f"{f.relative_to(path).as_posix()}\t{_file_sha256(f)}\n".encode())
    return h.hexdigest()


def open_binary(path: Path) -> tuple[IO[bytes], IO[bytes]]:
    """``(stream, raw)``: a file's decompressed bytes and the file on disk underneath
    (``raw.tell()`` is how far the reading got, in stored bytes)."""
    raw = Path(path).open("rb")
    if path.name.endswith(".bz2"):
        return bz2.BZ2File(raw), raw
    if path.name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw), raw
    return raw, raw
