"""BM25 on disk: the score matrix, the vocabulary (:mod:`factrl.retrieval.bm25_vocab`,
re-exported here), and the top-k kernels that search it.

The files are bm25s's own (``data/indices/indptr.csc.index.npy``, ``vocab.index.json``,
``params.index.json``), so ``bm25s.BM25.load`` still opens an index, plus a
memory-mappable vocabulary (``vocab.hash.npy``/``vocab.row.npy``: term hash → id;
``vocab.terms.bin``/``vocab.offsets.npy``: the terms, to confirm a hash match). The
matrix is column-compressed: column ``t`` lists the passages holding term ``t`` and the
term's BM25 contribution to each.

A query's score for a passage is the sum, in query-token order, of its terms'
contributions, accumulated in float32 — bm25s's ``get_scores_from_ids``, bit for bit.
Kernels (:data:`TOPK_KERNELS`) differ only in how they get there:

* ``"reference"`` — bm25s's scorer: a dense score array per query, then the top ``k``
  (the path used before the streaming index; kept for comparison);
* ``"numpy"`` — touches only the passages on the query's posting lists;
* ``"numba"`` — the same walk compiled (needs ``numba``, the ``fast`` extra), a batch of
  queries per call with the GIL released, so threads run in parallel;
* ``"maxscore"`` — compiled too, with MaxScore pruning: terms in decreasing order of their
  largest score (``colmax.npy``), and once the terms left cannot lift a new passage into
  the top ``k`` their long lists are only consulted for the passages already met; the
  survivors are scored again exactly (``auto`` picks it when numba is installed).

All return passages with a score > 0, best first, equal scores by passage row, and at
the ``k``-th place among equal scores the lowest rows (``"reference"`` picks any of them,
as bm25s's ``argpartition`` does).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from factrl.registry import Registry
from factrl.retrieval.bm25_vocab import DictVocab, MappedVocab, load_vocab, write_vocab

__all__ = [
    "BM25S_FILES",
    "COLMAX_FILE",
    "DictVocab",
    "MappedVocab",
    "ScoreMatrix",
    "TOKEN_PATTERN",
    "TOPK_KERNELS",
    "TopKKernel",
    "check_kernel",
    "column_max",
    "load_vocab",
    "make_kernel",
    "numba_available",
    "write_vocab",
]

# Same tokens as bm25s's default ``(?u)\b\w\w+\b`` (a greedy run of word characters always
# starts and ends at word boundaries), without the boundary checks' cost. Here, below the
# retriever (bm25) and the streaming build (bm25_build), so both read it without a circle.
TOKEN_PATTERN = re.compile(r"\w\w+")
COLMAX_FILE = "colmax.npy"
BM25S_FILES = ("data.csc.index.npy", "indices.csc.index.npy", "indptr.csc.index.npy", "vocab.index.json",
               "params.index.json")

Ranked = tuple[list[int], list[float]]


# --- the matrix ----------------------------------------------------------------------


class ScoreMatrix:
    """bm25s's saved score matrix (memory-mapped unless ``mmap=False``). Rows are sorted
    within each column (bm25s's builders and factrl's both sort them)."""

    def __init__(self, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, num_docs: int,
                 colmax: np.ndarray | None = None) -> None:
        self.data, self.indices, self.indptr, self.num_docs = data, indices, indptr, int(num_docs)
        self._colmax = colmax
        self._lock = threading.Lock()

    @classmethod
    def load(cls, directory: Path, num_docs: int, *, mmap: bool = True) -> "ScoreMatrix":
        mode = "r" if mmap else None
        directory = Path(directory)
        arrays = [np.asarray(np.load(directory / f, mmap_mode=mode, allow_pickle=False)) for f in BM25S_FILES[:3]]
        colmax = None
        if (directory / COLMAX_FILE).is_file():
            colmax = np.asarray(np.load(directory / COLMAX_FILE, mmap_mode=mode, allow_pickle=False))
            if colmax.shape[0] != arrays[2].shape[0] - 1:
                colmax = None  # not this matrix's: computed again when needed
        return cls(*arrays, num_docs=num_docs, colmax=colmax)

    @property
    def colmax(self) -> np.ndarray:
        """Each column's largest score (a term's bound), computed on first use when the
        index has no ``colmax.npy``."""
        with self._lock:
            if self._colmax is None:
                self._colmax = column_max(self.data, self.indptr)
            return self._colmax

    @property
    def n_terms(self) -> int:
        return int(self.indptr.shape[0] - 1)


def column_max(data: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """The largest entry of each column (0 for an empty one), float32."""
    starts = np.asarray(indptr[:-1])
    nonempty = np.flatnonzero(np.diff(indptr) > 0)
    out = np.zeros(len(starts), dtype=np.float32)
    if nonempty.size:
        # segments between consecutive non-empty starts are exactly those columns
        out[nonempty] = np.maximum.reduceat(np.asarray(data), starts[nonempty])
    return out


# --- top-k kernels -------------------------------------------------------------------


class TopKKernel(Protocol):
    """Ranks queries (each a list of term ids, in query order) over a :class:`ScoreMatrix`."""

    name: str

    def __call__(self, queries: Sequence[Sequence[int]], k: int) -> list[Ranked]: ...


TOPK_KERNELS: Registry[Callable[[ScoreMatrix], TopKKernel]] = Registry("BM25 top-k kernel")


def numba_available() -> bool:
    try:
        import numba  # noqa: F401
    except ImportError:
        return False
    return True


def check_kernel(name: str) -> str:
    """The kernel ``name`` resolves to (``"auto"``: maxscore when numba is installed,
    else numpy); an unknown name or a missing numba raises here, before any work."""
    if name == "auto":
        return "maxscore" if numba_available() else "numpy"
    TOPK_KERNELS.get(name)
    if name in ("numba", "maxscore") and not numba_available():
        raise ImportError("the numba BM25 kernel needs numba: pip install 'factrl[fast]' (or use kernel=numpy)")
    return name


def make_kernel(name: str, matrix: ScoreMatrix) -> TopKKernel:
    """The kernel registered as ``name`` over ``matrix`` (see :func:`check_kernel`)."""
    return TOPK_KERNELS.get(check_kernel(name))(matrix)


def _select(cands: np.ndarray, scores: np.ndarray, k: int) -> Ranked:
    """Top ``k`` of (row, score) pairs with score > 0: best first, ties by row, and at the
    ``k``-th place the lowest rows among equal scores."""
    pos = scores > 0
    cands, scores = cands[pos], scores[pos]
    if cands.size > k:
        kth = np.partition(scores, cands.size - k)[cands.size - k]  # the k-th largest score
        above = scores > kth
        tied = np.flatnonzero(scores == kth)
        need = k - int(above.sum())
        tied = tied[np.argsort(cands[tied], kind="stable")[:need]]
        keep = np.flatnonzero(above)
        keep = np.concatenate([keep, tied])
        cands, scores = cands[keep], scores[keep]
    order = np.lexsort((cands, -scores))
    return cands[order].tolist(), scores[order].tolist()


class _Scratch:
    """Per-call work arrays, one per passage, kept between calls: a free list rather than
    per-thread copies, so a server's thread pool holds as many as ran at once (each
    ``acc`` is all zero again when it comes back)."""

    def __init__(self, n: int, second: Any) -> None:
        self.n, self.second = n, second
        self._free: list[tuple[np.ndarray, np.ndarray]] = []
        self._lock = threading.Lock()

    def take(self) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            if self._free:
                return self._free.pop()
        return np.zeros(self.n, dtype=np.float32), np.zeros(self.n, dtype=self.second)

    def give(self, arrays: tuple[np.ndarray, np.ndarray]) -> None:
        with self._lock:
            self._free.append(arrays)

    @property
    def held(self) -> int:
        return len(self._free)


@TOPK_KERNELS.register("reference")
class ReferenceKernel:
    """bm25s's scorer over a dense score array; selection as before the streaming index."""

    name = "reference"

    def __init__(self, matrix: ScoreMatrix) -> None:
        self.m = matrix

    def __call__(self, queries: Sequence[Sequence[int]], k: int) -> list[Ranked]:
        import bm25s

        m, out = self.m, []
        for ids in queries:
            if not ids:
                out.append(([], []))
                continue
            scores = bm25s.BM25._compute_relevance_from_scores(
                m.data, m.indptr, m.indices, m.num_docs, np.asarray(ids, dtype=np.int32), np.dtype(np.float32))
            nz = np.flatnonzero(scores > 0)
            if nz.size > k:
                nz = nz[np.argpartition(-scores[nz], k - 1)[:k]]
            top = scores[nz]
            order = np.lexsort((nz, -top))
            out.append((nz[order].tolist(), top[order].tolist()))
        return out


@TOPK_KERNELS.register("numpy")
class NumpyKernel:
    """Accumulates only the posting lists' passages (a column holds a passage once, so
    ``acc[rows] += scores`` adds exactly as bm25s's ``np.add.at`` does)."""

    name = "numpy"

    def __init__(self, matrix: ScoreMatrix) -> None:
        self.m = matrix
        self._scratch = _Scratch(matrix.num_docs, bool)

    def __call__(self, queries: Sequence[Sequence[int]], k: int) -> list[Ranked]:
        buffers = self._scratch.take()
        out = self._rank(queries, k, *buffers)
        self._scratch.give(buffers)  # only when whole: an interrupted call's arrays are dropped
        return out

    def _rank(self, queries: Sequence[Sequence[int]], k: int, acc: np.ndarray, seen: np.ndarray) -> list[Ranked]:
        m = self.m
        out: list[Ranked] = []
        for ids in queries:
            parts = []
            for t in ids:
                start, end = int(m.indptr[t]), int(m.indptr[t + 1])
                rows = m.indices[start:end]
                acc[rows] += m.data[start:end]
                new = rows[~seen[rows]]
                seen[new] = True
                parts.append(new)
            if not parts:
                out.append(([], []))
                continue
            cands = np.concatenate(parts).astype(np.int64, copy=False)
            scores = acc[cands]
            acc[cands] = 0.0
            seen[cands] = False
            out.append(_select(cands, scores, k))
        return out


@TOPK_KERNELS.register("numba")
class NumbaKernel:
    """The posting-list walk and a k-heap, compiled; one call per batch, GIL released."""

    name = "numba"

    def __init__(self, matrix: ScoreMatrix) -> None:
        from factrl.retrieval._bm25_numba import topk_batch

        self.m = matrix
        self._run = topk_batch
        self._scratch = _Scratch(matrix.num_docs, np.int64)

    def __call__(self, queries: Sequence[Sequence[int]], k: int) -> list[Ranked]:
        m = self.m
        lengths = np.fromiter((len(q) for q in queries), dtype=np.int64, count=len(queries))
        offsets = np.zeros(len(queries) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        terms = np.fromiter((t for q in queries for t in q), dtype=np.int64, count=int(offsets[-1]))
        docs = np.zeros((len(queries), k), dtype=np.int64)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        counts = np.zeros(len(queries), dtype=np.int64)
        acc, touched = self._scratch.take()
        self._run(m.data, m.indices, m.indptr, terms, offsets, k, acc, touched, docs, scores, counts)
        self._scratch.give((acc, touched))
        return [(docs[i, :n].tolist(), scores[i, :n].tolist()) for i, n in enumerate(counts.tolist())]


@TOPK_KERNELS.register("maxscore")
class MaxScoreKernel:
    """The numba walk with MaxScore pruning (see ``_bm25_numba.maxscore_batch``): the long
    lists of common, low-scoring terms are mostly skipped; results are the same."""

    name = "maxscore"

    def __init__(self, matrix: ScoreMatrix) -> None:
        from factrl.retrieval._bm25_numba import maxscore_batch

        self.m = matrix
        self._run = maxscore_batch
        self._scratch = _Scratch(matrix.num_docs, np.int64)
        self.work = 0  # postings and lookups of the last call (for benchmarks)

    def __call__(self, queries: Sequence[Sequence[int]], k: int) -> list[Ranked]:
        m = self.m
        offsets = np.zeros(len(queries) + 1, dtype=np.int64)
        np.cumsum(np.fromiter((len(q) for q in queries), dtype=np.int64, count=len(queries)), out=offsets[1:])
        terms = np.fromiter((t for q in queries for t in q), dtype=np.int64, count=int(offsets[-1]))
        docs = np.zeros((len(queries), k), dtype=np.int64)
        scores = np.zeros((len(queries), k), dtype=np.float32)
        counts = np.zeros(len(queries), dtype=np.int64)
        work = np.zeros(len(queries), dtype=np.int64)
        acc, touched = self._scratch.take()
        self._run(m.data, m.indices, m.indptr, m.colmax, terms, offsets, k, acc, touched, docs, scores, counts, work)
        self._scratch.give((acc, touched))
        self.work = int(work.sum())
        return [(docs[i, :n].tolist(), scores[i, :n].tolist()) for i, n in enumerate(counts.tolist())]


def run_threads(kernel: TopKKernel, queries: list[list[int]], k: int, pool: Any, n_threads: int) -> list[Ranked]:
    """``kernel`` over ``queries`` split into ``n_threads`` contiguous parts run at once on
    ``pool`` (a long-lived executor, so each worker keeps its scratch buffers; the numba
    kernel releases the GIL)."""
    if n_threads <= 1 or len(queries) < 2 or pool is None:
        return kernel(queries, k)
    n = min(n_threads, len(queries))
    bounds = [round(i * len(queries) / n) for i in range(n + 1)]
    parts = [queries[bounds[i] : bounds[i + 1]] for i in range(n)]
    results = list(pool.map(lambda part: kernel(part, k), parts))
    return [r for part in results for r in part]


def kernel_names() -> list[str]:
    return ["auto", *TOPK_KERNELS.names()]


def describe(kernel: Any) -> str:
    return getattr(kernel, "name", type(kernel).__name__)
