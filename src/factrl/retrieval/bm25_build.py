"""Streaming BM25 build: bm25s's score matrix without the corpus in Python objects.

Pass 1 reads passages in chunks, tokenises them (the retriever's tokenizer, each distinct
word stemmed once) and writes each chunk's ``(passage, term, tf)`` counts to a part file
in ``<bm25 dir>/.build/``; only the vocabulary and a bounded word cache stay in memory.
Pass 2 knows every document length and document frequency: it computes bm25s's IDF and
term-frequency components with bm25s's own functions (vectorised, same float64
arithmetic, rounded to float32 as bm25s stores them) and places each chunk's scores into
memory-mapped output arrays by a counting sort, column by column in passage order — the
arrays bm25s writes for the same corpus, up to the numbering of terms.

Pass 1 can resume: a part file is complete once ``state.json`` lists it, and the
vocabulary is rebuilt from the terms each part added.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from factrl.retrieval.bm25_arrays import COLMAX_FILE, TOKEN_PATTERN, column_max, write_vocab
from factrl.types import Passage

__all__ = ["BuildStats", "build_matrix", "iter_indexed_texts"]

_WORD_CACHE_MAX = 2_000_000  # distinct words remembered with their term id (then forgotten)
_PART = "part-{:06d}.npz"
_STATE = "state.json"
WORK_DIR = ".build"


@dataclass
class BuildStats:
    n_docs: int
    n_terms: int
    nnz: int
    avg_doc_len: float
    resumed_parts: int
    seconds_tokenise: float
    seconds_assemble: float


def iter_indexed_texts(passages: Sequence[Passage], title_weight: int, start: int, stop: int) -> Iterator[str]:
    """The text BM25 indexes for rows ``start..stop``: the title ``title_weight`` times,
    then the passage text. A passage store is read through its fast dict path."""
    rows = passages.iter_fields(start, stop) if hasattr(passages, "iter_fields") else (
        {"title": p.title, "text": p.text} for p in passages[start:stop])
    for fields in rows:
        title = fields.get("title") or ""
        yield ((title + " ") * title_weight if title else "") + fields["text"]


class _TermIds:
    """Word → term id (or -1 for a stopword); the words a chunk brings are stemmed together."""

    def __init__(self, tokenizer: Any, terms: list[str]) -> None:
        self._normalise_many = tokenizer.normalise_many
        self.terms = terms
        self.vocab = {t: i for i, t in enumerate(terms)}
        self._words: dict[str, int] = {}

    def _learn(self, words: list[str]) -> None:
        if len(self._words) + len(words) > _WORD_CACHE_MAX:
            self._words.clear()
        new = words
        vocab, terms, known = self.vocab, self.terms, self._words
        for word, term in zip(new, self._normalise_many(new)):
            if term is None:
                known[word] = -1
                continue
            tid = vocab.get(term)
            if tid is None:
                tid = vocab[term] = len(terms)
                terms.append(term)
            known[word] = tid

    def chunk(self, texts: Sequence[str], findall: Callable[[str], list[str]]) -> tuple[np.ndarray, np.ndarray]:
        """Flat term ids (stopwords as -1) and the number of words of each text."""
        split = [findall(text.lower()) for text in texts]
        known = self._words
        # in order of first appearance, so term ids do not depend on hash seeds
        unknown = list(dict.fromkeys(w for words in split for w in words if w not in known))
        if unknown:
            self._learn(unknown)
        get = self._words.__getitem__
        counts = np.fromiter((len(words) for words in split), dtype=np.int64, count=len(split))
        flat = np.fromiter((get(w) for words in split for w in words), dtype=np.int64, count=int(counts.sum()))
        return flat, counts


def _count_chunk(flat: np.ndarray, words: np.ndarray, n_terms: int) -> dict[str, np.ndarray]:
    """Per-passage token counts (stopwords dropped) and (passage, term, tf) triples, sorted
    by passage then term."""
    n = len(words)
    doc = np.repeat(np.arange(n, dtype=np.int64), words)
    keep = flat >= 0
    flat, doc = flat[keep], doc[keep]
    lengths = np.bincount(doc, minlength=n).astype(np.int32)
    key, tf = np.unique(doc * max(n_terms, 1) + flat, return_counts=True)
    return {"lengths": lengths, "docs": (key // max(n_terms, 1)).astype(np.int32),
            "terms": (key % max(n_terms, 1)).astype(np.int32), "tfs": tf.astype(np.int32)}


def _state_ok(work: Path, key: str | None, chunk: int) -> int:
    """How many parts of an earlier run with the same inputs can be kept (0: start over)."""
    try:
        state = json.loads((work / _STATE).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return 0
    if key is None or state.get("key") != key or state.get("chunk") != chunk:
        return 0
    parts = int(state.get("parts", 0))
    return parts if all((work / _PART.format(i)).is_file() for i in range(parts)) else 0


def _tokenise(passages: Sequence[Passage], work: Path, settings: dict[str, Any], tokenizer: Any, *, chunk: int,
              key: str | None, say: Callable[[str], None]) -> tuple[list[str], int]:
    n = len(passages)
    kept = _state_ok(work, key, chunk)
    if not kept and work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    terms: list[str] = []
    for i in range(kept):
        with np.load(work / _PART.format(i), allow_pickle=False) as part:
            raw = part["new_terms"].tobytes().decode("utf-8")
        terms.extend(raw.split("\n") if raw else [])
    if kept:
        say(f"bm25: resuming after {kept} finished chunks ({min(kept * chunk, n)} of {n} passages)")
    ids = _TermIds(tokenizer, terms)
    t0, last = time.perf_counter(), 0.0
    starts = list(range(kept * chunk, n, chunk))
    for j, start in enumerate(starts):
        stop = min(start + chunk, n)
        before = len(ids.terms)
        flat, words = ids.chunk(list(iter_indexed_texts(passages, settings["title_weight"], start, stop)),
                                TOKEN_PATTERN.findall)
        arrays = _count_chunk(flat, words, len(ids.terms))
        new_terms = np.frombuffer("\n".join(ids.terms[before:]).encode("utf-8"), dtype=np.uint8)
        part_no = kept + j
        tmp = work / (_PART.format(part_no) + ".tmp.npz")
        np.savez(tmp, new_terms=new_terms, **arrays)
        tmp.replace(work / _PART.format(part_no))
        (work / _STATE).write_text(json.dumps({"key": key, "chunk": chunk, "parts": part_no + 1}), encoding="utf-8")
        now = time.perf_counter()
        if now - last > 10 or j == len(starts) - 1:
            last = now
            done = stop - kept * chunk
            rate = done / max(now - t0, 1e-9)
            eta = (n - stop) / rate if rate > 0 else 0.0
            say(f"bm25 tokenise: {stop}/{n} passages, {len(ids.terms)} terms, {rate:,.0f} passages/s, "
                f"ETA {_fmt_seconds(eta)}")
    return ids.terms, kept


def _fmt_seconds(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def _assemble(work: Path, directory: Path, n_parts: int, n_docs: int, n_terms: int, settings: dict[str, Any],
              say: Callable[[str], None]) -> tuple[int, float]:
    import bm25s
    from bm25s.scoring import _select_idf_scorer, _select_tfc_scorer

    model = bm25s.BM25(k1=settings["k1"], b=settings["b"], method=settings["method"])
    parts = [work / _PART.format(i) for i in range(n_parts)]
    lengths = np.zeros(n_docs, dtype=np.int64)
    df = np.zeros(n_terms, dtype=np.int64)
    row = 0
    for p in parts:
        with np.load(p, allow_pickle=False) as part:
            ln = part["lengths"]
            lengths[row : row + len(ln)] = ln
            row += len(ln)
            df += np.bincount(part["terms"], minlength=n_terms)
    if row != n_docs:
        raise RuntimeError(f"bm25 build: the parts hold {row} passages, expected {n_docs}")
    # bm25s: np.array([len(doc) for doc in corpus]).mean() over int64 lengths (an exact sum)
    avg_doc_len = lengths.mean()
    idf_fn, tfc_fn = _select_idf_scorer(model.idf_method), _select_tfc_scorer(model.method)
    uniq, inverse = np.unique(df, return_inverse=True)
    # bm25s calls its idf function on Python ints per term and stores the result as float32
    idf = np.asarray([idf_fn(int(d), N=n_docs) if d else 0.0 for d in uniq.tolist()], dtype=np.float64)
    idf = idf.astype(np.float32)[inverse]
    indptr = np.zeros(n_terms + 1, dtype=np.int64)
    np.cumsum(df, out=indptr[1:])
    nnz = int(indptr[-1])
    open_memmap = np.lib.format.open_memmap
    data = open_memmap(directory / "data.csc.index.npy", mode="w+", dtype=np.float32, shape=(nnz,))
    indices = open_memmap(directory / "indices.csc.index.npy", mode="w+", dtype=np.int32, shape=(nnz,))
    ptr = indptr[:-1].copy()
    row = 0
    for i, p in enumerate(parts):
        with np.load(p, allow_pickle=False) as part:
            docs, terms, tfs, ln = part["docs"], part["terms"], part["tfs"], part["lengths"]
        tfc = tfc_fn(tf_array=tfs.astype(np.float32), l_d=ln[docs].astype(np.int64), l_avg=avg_doc_len,
                     k1=model.k1, b=model.b, delta=model.delta)
        scores = (idf[terms] * tfc).astype(np.float32)
        order = np.argsort(terms, kind="stable")  # by term, passages ascending within a term
        ts = terms[order]
        m = len(ts)
        if m:
            starts = np.flatnonzero(np.r_[True, ts[1:] != ts[:-1]])
            run = np.diff(np.r_[starts, m])
            run_terms = ts[starts]
            dest = np.repeat(ptr[run_terms], run) + (np.arange(m) - np.repeat(starts, run))
            data[dest] = scores[order]
            indices[dest] = docs[order].astype(np.int64) + row
            ptr[run_terms] += run
        row += len(ln)
        if (i + 1) % 10 == 0 or i == len(parts) - 1:
            say(f"bm25 assemble: {i + 1}/{len(parts)} chunks")
    data.flush()
    indices.flush()
    np.save(directory / COLMAX_FILE, column_max(data, indptr), allow_pickle=False)  # MaxScore's term bounds
    del data, indices
    np.save(directory / "indptr.csc.index.npy", indptr, allow_pickle=False)
    params = {"k1": model.k1, "b": model.b, "delta": model.delta, "method": model.method,
              "idf_method": model.idf_method, "dtype": model.dtype, "int_dtype": model.int_dtype,
              "num_docs": n_docs, "version": bm25s.__version__, "backend": model.backend}
    (directory / "params.index.json").write_text(json.dumps(params, indent=4), encoding="utf-8")
    return nnz, float(avg_doc_len)


def build_matrix(passages: Sequence[Passage], directory: Path, settings: dict[str, Any], tokenizer: Any, *,
                 chunk: int = 50_000, resume_key: str | None = None,
                 say: Callable[[str], None] = lambda _msg: None) -> BuildStats:
    """Write bm25s's files for ``passages`` into ``directory`` (see the module doc).

    ``resume_key`` names the inputs (passages and settings); a later call with the same
    key keeps the chunks an interrupted call finished. Without it nothing is resumed.
    """
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    work = directory / WORK_DIR
    t0 = time.perf_counter()
    terms, kept = _tokenise(passages, work, settings, tokenizer, chunk=chunk, key=resume_key, say=say)
    t1 = time.perf_counter()
    n_parts = math.ceil(len(passages) / chunk)
    nnz, avg = _assemble(work, directory, n_parts, len(passages), len(terms), settings, say)
    write_vocab(directory, terms)
    shutil.rmtree(work, ignore_errors=True)
    return BuildStats(n_docs=len(passages), n_terms=len(terms), nnz=nnz, avg_doc_len=avg, resumed_parts=kept,
                      seconds_tokenise=t1 - t0, seconds_assemble=time.perf_counter() - t1)
