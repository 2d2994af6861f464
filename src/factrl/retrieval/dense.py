"""Dense retriever backend (sentence-transformers + faiss), registered as ``"dense"``.

Encoded text of a passage is ``passage_prefix + title + " " + text`` (just ``text``
without a title) and of a query ``query_prefix + query``: the prefixes the encoder
declares (``"passage: "`` / ``"query: "`` for E5, see
:func:`~factrl.retrieval.encoders.declared_prefixes`) unless given, recorded in
``dense.json`` and the manifest (an index built before prefixes were recorded has none).
Vectors are L2-normalised, so inner product is cosine similarity. ``index_type``:

* ``"flat"`` (default) — exact search, ``IndexFlatIP``;
* ``"hnsw"`` — graph search (``IndexHNSWFlat``, inner product), for large corpora;
* ``"ivf"`` — inverted lists over k-means cells (``IndexIVFFlat``), for large corpora.

Files in the backend folder: ``embeddings.npy`` (float32, read with
``allow_pickle=False``), ``faiss.index`` (faiss's own format) and ``dense.json`` (the
settings, checked against the manifest on load). The embeddings are kept so another
index type can be built later without re-encoding the corpus.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from factrl.retrieval.base import RETRIEVERS, IndexMismatchError, query_list
from factrl.retrieval.encoders import DEFAULT_MODEL, TextEncoder, get_encoder
from factrl.types import Hit, Passage

__all__ = ["INDEX_TYPES", "DenseRetriever", "passage_text"]

INDEX_TYPES = ("flat", "hnsw", "ivf")
_EMB_FILE = "embeddings.npy"
_FAISS_FILE = "faiss.index"
_SETTINGS_FILE = "dense.json"
# Params that change results and are recorded; runtime knobs (batch size, progress,
# threads) are not, so they do not change the index fingerprint.
_RECORDED = ("model", "model_source", "dim", "normalize", "precision", "encode_path", "max_seq_length",
             "text", "query_prefix", "passage_prefix", "index_type", "metric", "hnsw_m", "hnsw_ef_construction", "hnsw_ef_search",
             "ivf_nlist", "ivf_nprobe")


def passage_text(passage: Passage) -> str:
    """What the encoder sees for a passage."""
    return f"{passage.title} {passage.text}" if passage.title else passage.text


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - faiss is part of the dense extra
        raise ImportError("the dense retriever needs faiss: pip install 'factrl[dense]'") from exc
    return faiss


def _make_index(emb: np.ndarray, settings: dict[str, Any]) -> Any:
    faiss = _faiss()
    dim = emb.shape[1]
    kind = settings["index_type"]
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, settings["hnsw_m"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = settings["hnsw_ef_construction"]
        index.hnsw.efSearch = settings["hnsw_ef_search"]
    else:
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFFlat(quantizer, dim, settings["ivf_nlist"], faiss.METRIC_INNER_PRODUCT)
        index.train(emb)
        index.nprobe = settings["ivf_nprobe"]
    index.add(emb)
    return index


def _check_settings(index_type: str, hnsw_m: int, ef_construction: int, ef_search: int, nprobe: int) -> None:
    if index_type not in INDEX_TYPES:
        raise ValueError(f"unknown dense index_type {index_type!r}; choose from {', '.join(INDEX_TYPES)}")
    for name, value in (("hnsw_m", hnsw_m), ("hnsw_ef_construction", ef_construction),
                        ("hnsw_ef_search", ef_search), ("ivf_nprobe", nprobe)):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


@RETRIEVERS.register("dense")
class DenseRetriever:
    """Nearest passages by embedding inner product. Thread-safe ``search``."""

    name = "dense"

    def __init__(self, encoder: TextEncoder, index: Any, passages: Sequence[Passage], settings: dict[str, Any],
                 *, query_batch_size: int = 64) -> None:
        self.encoder = encoder
        self._index = index
        self._passages = list(passages)
        self._settings = dict(settings)
        self.query_batch_size = int(query_batch_size)
        self._lock = threading.Lock()

    # --- building and loading -------------------------------------------------------

    @classmethod
    def build(
        cls,
        passages: Sequence[Passage],
        directory: Path,
        *,
        model: str = DEFAULT_MODEL,
        precision: str = "auto",
        encode_path: str = "fast",
        index_type: str = "flat",
        max_seq_length: int | None = None,
        batch_size: int = 32,
        hnsw_m: int = 32,
        hnsw_ef_construction: int = 200,
        hnsw_ef_search: int = 128,
        ivf_nlist: int | None = None,
        ivf_nprobe: int = 16,
        progress: bool = True,
        embeddings: np.ndarray | None = None,
        encoder: TextEncoder | None = None,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
    ) -> DenseRetriever:
        """Encode ``passages`` and index them under ``directory``.

        ``embeddings`` (already made by ``encoder``, rows aligned with ``passages``, with
        the passage prefix) skips encoding; ``encoder`` reuses a loaded model instead of
        loading ``model`` again. ``query_prefix``/``passage_prefix`` default to the
        encoder's declared ones ("" for none).
        """
        _check_settings(index_type, hnsw_m, hnsw_ef_construction, hnsw_ef_search, ivf_nprobe)
        if not passages:
            raise ValueError("cannot build a dense index over zero passages")
        if encoder is None:
            encoder = get_encoder(model, precision=precision, path=encode_path, batch_size=batch_size,
                                  max_seq_length=max_seq_length)
        declared = getattr(encoder, "prefixes", None)
        q_prefix = query_prefix if query_prefix is not None else getattr(declared, "query", "")
        p_prefix = passage_prefix if passage_prefix is not None else getattr(declared, "passage", "")
        if embeddings is None:
            embeddings = encoder.encode([p_prefix + passage_text(p) for p in passages], progress=progress,
                                        desc="passages")
        emb = np.ascontiguousarray(embeddings, dtype=np.float32)
        if emb.shape != (len(passages), encoder.dim):
            raise ValueError(f"embeddings have shape {emb.shape}, expected {(len(passages), encoder.dim)}")
        n = len(passages)
        # IVF: ~4·sqrt(n) cells, but at least 39 training points per cell (faiss's minimum).
        nlist = int(ivf_nlist) if ivf_nlist else max(1, min(int(4 * math.sqrt(n)), n // 39))
        settings = {
            **encoder.info(),
            "text": "title + ' ' + text",
            "query_prefix": q_prefix,
            "passage_prefix": p_prefix,
            "index_type": index_type,
            "metric": "inner_product",
            "hnsw_m": int(hnsw_m) if index_type == "hnsw" else None,
            "hnsw_ef_construction": int(hnsw_ef_construction) if index_type == "hnsw" else None,
            "hnsw_ef_search": int(hnsw_ef_search) if index_type == "hnsw" else None,
            "ivf_nlist": nlist if index_type == "ivf" else None,
            "ivf_nprobe": int(ivf_nprobe) if index_type == "ivf" else None,
        }
        index = _make_index(emb, settings)
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        np.save(directory / _EMB_FILE, emb, allow_pickle=False)
        _faiss().write_index(index, str(directory / _FAISS_FILE))
        (directory / _SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        return cls(encoder, index, passages, settings)

    @classmethod
    def load(cls, passages: Sequence[Passage], directory: Path, params: dict[str, Any],
             *, encoder: TextEncoder | None = None) -> DenseRetriever:
        directory = Path(directory)
        missing = [f for f in (_EMB_FILE, _FAISS_FILE, _SETTINGS_FILE) if not (directory / f).is_file()]
        if missing:
            raise IndexMismatchError(f"dense index {directory} is incomplete: missing {', '.join(missing)}")
        saved = json.loads((directory / _SETTINGS_FILE).read_text(encoding="utf-8"))
        # An index built before prefixes were recorded encoded with none.
        for key in ("query_prefix", "passage_prefix"):
            saved.setdefault(key, "")
        params = {"query_prefix": "", "passage_prefix": "", **params}
        wanted = {k: params.get(k) for k in _RECORDED}
        if {k: saved.get(k) for k in _RECORDED} != wanted:
            diff = [k for k in _RECORDED if saved.get(k) != wanted[k]]
            raise IndexMismatchError(f"dense index {directory}: {_SETTINGS_FILE} disagrees with the manifest on {', '.join(diff)}")
        index = _faiss().read_index(str(directory / _FAISS_FILE))
        if index.ntotal != len(passages):
            raise IndexMismatchError(
                f"dense index {directory} has {index.ntotal} vectors but passages.jsonl has {len(passages)}"
            )
        if encoder is None:
            encoder = get_encoder(saved["model"], precision=saved["precision"], path=saved["encode_path"],
                                  max_seq_length=saved["max_seq_length"])
        if encoder.dim != index.d:
            raise IndexMismatchError(f"dense index {directory}: model {saved['model']!r} makes {encoder.dim}-d vectors, "
                                     f"the index holds {index.d}-d")
        return cls(encoder, index, passages, saved)

    def params(self) -> dict[str, Any]:
        return {k: self._settings.get(k) for k in _RECORDED}

    # --- searching ------------------------------------------------------------------

    @property
    def query_prefix(self) -> str:
        return str(self._settings.get("query_prefix") or "")

    def encode_queries(self, queries: Sequence[str]) -> np.ndarray:
        """Query vectors, each query with the index's query prefix."""
        prefix = self.query_prefix
        queries = [prefix + q for q in queries]
        out = [self.encoder.encode(list(queries[i : i + self.query_batch_size]))
               for i in range(0, len(queries), self.query_batch_size)]
        return np.concatenate(out) if out else np.zeros((0, self.encoder.dim), dtype=np.float32)

    def search_vectors(self, vectors: np.ndarray, k: int) -> list[list[Hit]]:
        """Top-``k`` passages for already-encoded queries."""
        k = min(int(k), len(self._passages))
        if k <= 0 or len(vectors) == 0:
            return [[] for _ in range(len(vectors))]
        with self._lock:
            scores, ids = self._index.search(np.ascontiguousarray(vectors, dtype=np.float32), k)
        passages = self._passages
        # ids of -1 mean "fewer than k found" (approximate indexes); model_construct skips
        # re-validating passages that are already records.
        return [
            [Hit(passage=passages[i], score=float(s)) for i, s in zip(row_ids.tolist(), row_s.tolist()) if i >= 0]
            for row_ids, row_s in zip(ids, scores)
        ]

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` passages per query, best first; ``k`` is clamped to the corpus size."""
        if not query_list(queries, k):
            return [[] for _ in queries]
        queries = list(queries)
        return self.search_vectors(self.encode_queries(queries), k)
