"""BM25 retriever backend (bm25s's scoring + PyStemmer), registered as ``"bm25"``.

Indexed text of a passage is ``title`` (repeated ``title_weight`` times) + " " + unit text.
Queries and passages share one tokenizer: lowercase, ``\\w\\w+`` tokens (bm25s's default
pattern), English stopwords removed, then Snowball stemming.

The index is bm25s's own files — plain ``.npy`` arrays (no pickle), the vocabulary as
JSON — written by a streaming build (:mod:`factrl.retrieval.bm25_build`: the corpus is
never held in Python objects) plus a memory-mappable vocabulary; it loads memory-mapped
(:mod:`factrl.retrieval.bm25_arrays`), so loading costs seconds whatever the corpus size
and processes that load the same index share its pages. Search runs one of the top-k
kernels of :mod:`~factrl.retrieval.bm25_arrays` (``kernel``: ``auto`` = numba when
installed, else numpy); all give bm25s's scores bit for bit.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from factrl.retrieval.base import RETRIEVERS, IndexMismatchError
from factrl.retrieval.bm25_arrays import (BM25S_FILES, TOKEN_PATTERN, ScoreMatrix, check_kernel, load_vocab, make_kernel,
                                          run_threads)
from factrl.types import Hit, Passage

__all__ = ["BM25Retriever", "BM25Tokenizer", "STOPWORD_SETS", "TOKEN_PATTERN"]

_TOKEN = TOKEN_PATTERN  # bm25s's default tokens (factrl.retrieval.bm25_arrays)
_TOKENIZER_FILE = "tokenizer.json"
# bm25s's "bm25l" and "bm25+" give every passage a non-zero score, which would defeat
# dropping passages that share no term with the query; they are left out.
_METHODS = ("lucene", "robertson", "atire")


STOPWORD_SETS = ("en", "en_plus", "none")
# Bound on cached stems: a long-running server sees an open-ended query vocabulary.
_STEM_CACHE_MAX = 500_000


def _stopword_list(name: str) -> frozenset[str]:
    from bm25s import stopwords as sw

    table = {"en": sw.STOPWORDS_EN, "en_plus": sw.STOPWORDS_EN_PLUS, "none": ()}
    if name not in table:
        raise ValueError(f"unknown stopwords {name!r}; choose from {', '.join(STOPWORD_SETS)}")
    return frozenset(table[name])


class BM25Tokenizer:
    """Lowercase → ``\\w\\w+`` tokens → drop stopwords → stem (stems cached per word)."""

    def __init__(self, stopwords: str = "en", stemmer: str = "english") -> None:
        self.stopwords = stopwords
        self.stemmer = stemmer
        self._stop = _stopword_list(stopwords)
        self._stem: Callable[[str], str] | None = None
        if stemmer != "none":
            import Stemmer

            if stemmer not in Stemmer.algorithms():
                raise ValueError(f"unknown stemmer {stemmer!r}; PyStemmer has: {', '.join(Stemmer.algorithms())}, or 'none'")
            self._stemmer = Stemmer.Stemmer(stemmer)
            self._stem = self._stemmer.stemWord
        self._cache: dict[str, str] = {}
        # PyStemmer's stemmer objects are not thread-safe; a server may search from threads.
        self._lock = threading.Lock()

    def normalise(self, word: str) -> str | None:
        """The token a lowercase word becomes: None for a stopword, else its stem."""
        if word in self._stop:
            return None
        if self._stem is None:
            return word
        with self._lock:
            return self._stem(word)

    def normalise_many(self, words: Sequence[str]) -> list[str | None]:
        """:meth:`normalise` of each word, stemmed in one call."""
        stop = self._stop
        keep = [w for w in words if w not in stop]
        if self._stem is None:
            stems = iter(keep)
        else:
            with self._lock:
                stems = iter(self._stemmer.stemWords(keep))
        return [None if w in stop else next(stems) for w in words]

    def __call__(self, text: str) -> list[str]:
        out: list[str] = []
        cache, stop, stem = self._cache, self._stop, self._stem
        for word in _TOKEN.findall(text.lower()):
            if word in stop:
                continue
            token = cache.get(word)
            if token is None:
                if stem is None:
                    token = word
                else:
                    with self._lock:
                        token = stem(word)
                if len(cache) >= _STEM_CACHE_MAX:
                    cache.clear()
                cache[word] = token
            out.append(token)
        return out


@RETRIEVERS.register("bm25")
class BM25Retriever:
    """Sparse lexical retrieval over an index directory's passages.

    Runtime knobs (not recorded: they do not change results): ``n_threads`` — a batch's
    queries are ranked by that many threads (0 or 1: one after another); ``kernel`` —
    ``auto``, ``numba``, ``numpy`` or ``reference`` (bm25s's dense scorer, the path before
    the streaming index).
    """

    name = "bm25"

    def __init__(self, matrix: ScoreMatrix, vocab: Any, passages: Sequence[Passage], settings: dict[str, Any], *,
                 n_threads: int = 0, kernel: str = "auto") -> None:
        self._matrix = matrix
        self._passages = passages
        self._settings = dict(settings)
        self._tokenize = BM25Tokenizer(settings["stopwords"], settings["stemmer"])
        self._vocab = vocab
        self._kernel = make_kernel(kernel, matrix)
        self._pool: Any = None
        self._pool_lock = threading.Lock()
        self.n_threads = n_threads

    @property
    def kernel(self) -> str:
        return self._kernel.name

    @kernel.setter
    def kernel(self, name: str) -> None:
        self._kernel = make_kernel(name, self._matrix)

    # --- building and loading -------------------------------------------------------

    @staticmethod
    def _validate(
        k1: float = 0.9,
        b: float = 0.4,
        method: str = "lucene",
        stemmer: str = "english",
        stopwords: str = "en",
        title_weight: int = 1,
    ) -> dict[str, Any]:
        # Defaults k1=0.9, b=0.4 are Anserini's, the BM25 baseline of BEIR.
        if method not in _METHODS:
            raise ValueError(f"unknown BM25 method {method!r}; choose from {', '.join(_METHODS)}")
        if float(k1) < 0 or not 0.0 <= float(b) <= 1.0:
            raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1={k1}, b={b}")
        if isinstance(title_weight, bool) or int(title_weight) != title_weight or title_weight < 0:
            raise ValueError(f"title_weight must be an integer >= 0, got {title_weight!r}")
        return {
            "k1": float(k1),
            "b": float(b),
            "method": method,
            "stemmer": stemmer,
            "stopwords": stopwords,
            "title_weight": int(title_weight),
        }

    @classmethod
    def _make_settings(cls, params: dict[str, Any]) -> dict[str, Any]:
        allowed = ("k1", "b", "method", "stemmer", "stopwords", "title_weight")
        unknown = sorted(set(params) - set(allowed))
        if unknown:
            raise ValueError(f"bm25 does not take parameter(s) {', '.join(unknown)}; it takes: {', '.join(allowed)}")
        return cls._validate(**params)

    @staticmethod
    def indexed_text(passage: Passage, title_weight: int) -> str:
        title = (passage.title + " ") * title_weight if passage.title else ""
        return title + passage.text

    @classmethod
    def build(cls, passages: Sequence[Passage], directory: Path, **params: Any) -> "BM25Retriever":
        """Index ``passages`` (a list or an index's passage store) into ``directory``.

        Runtime knobs besides the recorded settings: ``n_threads``, ``kernel``,
        ``chunk`` (passages tokenised per step), ``resume_key`` (see
        :func:`~factrl.retrieval.bm25_build.build_matrix`) and ``say`` (a progress callback).
        """
        from factrl.retrieval.bm25_build import build_matrix

        n_threads = int(params.pop("n_threads", 0))
        kernel = str(params.pop("kernel", "auto"))
        chunk = int(params.pop("chunk", 50_000))
        resume_key = params.pop("resume_key", None)
        say = params.pop("say", None) or (lambda _msg: None)
        settings = cls._make_settings(params)
        check_kernel(kernel)
        if not len(passages):
            raise ValueError("cannot build a BM25 index over zero passages")
        tokenize = BM25Tokenizer(settings["stopwords"], settings["stemmer"])
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        key = None if resume_key is None else f"{resume_key}|{json.dumps(settings, sort_keys=True)}"
        build_matrix(passages, directory, settings, tokenize, chunk=chunk, resume_key=key, say=say)
        (directory / _TOKENIZER_FILE).write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        return cls._open(directory, passages, settings, n_threads=n_threads, kernel=kernel)

    @classmethod
    def _open(cls, directory: Path, passages: Sequence[Passage], settings: dict[str, Any], *, mmap: bool = True,
              n_threads: int = 0, kernel: str = "auto") -> "BM25Retriever":
        saved = json.loads((directory / "params.index.json").read_text(encoding="utf-8"))
        num_docs = saved.get("num_docs")
        if num_docs != len(passages):
            raise IndexMismatchError(
                f"BM25 index {directory} has {num_docs} documents but passages.jsonl has {len(passages)}"
            )
        matrix = ScoreMatrix.load(directory, num_docs, mmap=mmap)
        return cls(matrix, load_vocab(directory), passages, settings, n_threads=n_threads, kernel=kernel)

    @classmethod
    def load(cls, passages: Sequence[Passage], directory: Path, params: dict[str, Any], *, mmap: bool = True,
             n_threads: int = 0, kernel: str = "auto") -> "BM25Retriever":
        directory = Path(directory)
        missing = [f for f in (*BM25S_FILES, _TOKENIZER_FILE) if not (directory / f).is_file()]
        if missing:
            raise IndexMismatchError(f"BM25 index {directory} is incomplete: missing {', '.join(missing)}")
        saved = json.loads((directory / _TOKENIZER_FILE).read_text(encoding="utf-8"))
        settings = cls._make_settings({k: v for k, v in params.items() if k != "bm25s_version"})
        if saved != settings:
            raise IndexMismatchError(f"BM25 index {directory}: tokenizer.json {saved} disagrees with the manifest {settings}")
        return cls._open(directory, passages, settings, mmap=mmap, n_threads=n_threads, kernel=kernel)

    def params(self) -> dict[str, Any]:
        import bm25s

        return {**self._settings, "bm25s_version": bm25s.__version__}

    # --- searching ------------------------------------------------------------------

    def tokenize(self, text: str) -> list[str]:
        """The query tokens that can match (in the vocabulary), in order."""
        get = self._vocab.get
        return [t for t in self._tokenize(text) if t != "" and get(t) is not None]

    def _term_ids(self, text: str) -> list[int]:
        get = self._vocab.get
        ids = (get(t) for t in self._tokenize(text) if t != "")
        return [i for i in ids if i is not None]

    def _executor(self) -> Any:
        with self._pool_lock:
            if self._pool is None or self._pool._max_workers != self.n_threads:
                from concurrent.futures import ThreadPoolExecutor

                if self._pool is not None:
                    self._pool.shutdown(wait=False)
                self._pool = ThreadPoolExecutor(self.n_threads, thread_name_prefix="bm25")
            return self._pool

    def rank(self, queries: Sequence[str], k: int) -> list[tuple[list[int], list[float]]]:
        """Top-``k`` passage row indices and scores per query, best first — :meth:`search`
        without building :class:`Hit` records.

        ``k`` is clamped to the number of passages. Passages sharing no term with the query
        (score 0) are left out, so an empty or stopword-only query gets no result. Equal
        scores are ordered by passage position (and at the ``k``-th place the lowest
        positions are kept), so results are deterministic.
        """
        if isinstance(queries, str):
            raise TypeError("search takes a sequence of queries, not one string")
        k = min(int(k), len(self._passages))
        if k <= 0:
            return [([], []) for _ in queries]
        token_ids = [self._term_ids(q) for q in queries]
        pool = self._executor() if self.n_threads > 1 and len(token_ids) > 1 else None
        return run_threads(self._kernel, token_ids, k, pool, self.n_threads)

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` hits per query, best first; see :meth:`rank` for the rules."""
        passages = self._passages
        return [
            [Hit(passages[d], s) for d, s in zip(docs, scores)]
            for docs, scores in self.rank(queries, k)
        ]
