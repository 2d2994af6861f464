"""Dense retriever backend (sentence-transformers + faiss), registered as ``"dense"``.

Encoded text of a passage is ``passage_prefix + title + " " + text`` (just ``text``
without a title) and of a query ``query_prefix + query``: the prefixes the encoder
declares (``"passage: "`` / ``"query: "`` for E5, see
:func:`~factrl.retrieval.encoders.declared_prefixes`) unless given, recorded in
``dense.json`` and the manifest (an index built before prefixes were recorded has none).
Vectors are L2-normalised, so inner product is cosine similarity. ``index_type``:

* ``"flat"`` (default) — exact search, ``IndexFlatIP``;
* ``"hnsw"`` — graph search (``IndexHNSWFlat``, inner product), for large corpora;
* ``"ivf"`` — inverted lists over k-means cells (``IndexIVFFlat``), for large corpora;
* ``"ivfpq"`` — the same cells with vectors product-quantised to ``pq_m`` bytes
  (``IndexIVFPQ``): a Wikipedia-sized index in a few GB.

At scale: passages are encoded in chunks straight into a memory-mapped
``embeddings.npy`` (rows of the passage store, read as they are needed), and with
``resume_key`` an interrupted encoding continues after its last finished chunk
(``encode.json`` records how far it got). IVF cells and PQ codebooks are trained on a
random sample of ``train_size`` vectors (recorded), then all vectors are added chunk by
chunk. ``device`` (``auto``: a GPU when torch sees one) says where passages are encoded;
it is not recorded (vectors agree to rounding). A loaded index reads ``faiss.index``
memory-mapped where faiss can (IVF lists, flat codes).

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

__all__ = ["INDEX_TYPES", "DenseRetriever", "passage_text", "resolve_device"]

INDEX_TYPES = ("flat", "hnsw", "ivf", "ivfpq")
_EMB_FILE = "embeddings.npy"
_FAISS_FILE = "faiss.index"
_SETTINGS_FILE = "dense.json"
_ENCODE_STATE = "encode.json"
_ADD_CHUNK = 65_536  # vectors handed to faiss per add
# Params that change results and are recorded; runtime knobs (batch size, progress,
# threads) are not, so they do not change the index fingerprint.
_RECORDED = ("model", "model_source", "dim", "normalize", "precision", "encode_path", "max_seq_length",
             "text", "query_prefix", "passage_prefix", "index_type", "metric", "hnsw_m", "hnsw_ef_construction", "hnsw_ef_search",
             "ivf_nlist", "ivf_nprobe", "pq_m", "pq_nbits", "train_size")


def passage_text(passage: Passage) -> str:
    """What the encoder sees for a passage."""
    return f"{passage.title} {passage.text}" if passage.title else passage.text


def _texts(passages: Sequence[Passage], start: int, stop: int, prefix: str) -> list[str]:
    """Encoder inputs of rows ``start..stop`` (a passage store is read without validation)."""
    if hasattr(passages, "iter_fields"):
        return [prefix + (f"{f['title']} {f['text']}" if f.get("title") else f["text"])
                for f in passages.iter_fields(start, stop)]
    return [prefix + passage_text(p) for p in passages[start:stop]]


def resolve_device(device: str) -> str:
    """``auto`` → ``cuda`` when torch sees a GPU, else ``cpu``; anything else as given."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _faiss() -> Any:
    try:
        import faiss
    except ImportError as exc:  # pragma: no cover - faiss is part of the dense extra
        raise ImportError("the dense retriever needs faiss: pip install 'factrl[dense]'") from exc
    return faiss


def _make_index(emb: np.ndarray, settings: dict[str, Any], say: Any = None) -> Any:
    """A faiss index over ``emb`` (possibly a memory map): IVF types train on a seeded
    random sample of ``train_size`` rows, then every type gets the rows chunk by chunk."""
    faiss = _faiss()
    n, dim = emb.shape
    kind = settings["index_type"]
    if kind == "flat":
        index = faiss.IndexFlatIP(dim)
    elif kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, settings["hnsw_m"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = settings["hnsw_ef_construction"]
        index.hnsw.efSearch = settings["hnsw_ef_search"]
    else:
        quantizer = faiss.IndexFlatIP(dim)
        if kind == "ivf":
            index = faiss.IndexIVFFlat(quantizer, dim, settings["ivf_nlist"], faiss.METRIC_INNER_PRODUCT)
        else:
            index = faiss.IndexIVFPQ(quantizer, dim, settings["ivf_nlist"], settings["pq_m"], settings["pq_nbits"],
                                     faiss.METRIC_INNER_PRODUCT)
        size = settings["train_size"]
        rows = np.arange(n) if size >= n else np.sort(np.random.default_rng(0).choice(n, size=size, replace=False))
        index.train(np.ascontiguousarray(emb[rows], dtype=np.float32))
        index.nprobe = settings["ivf_nprobe"]
    for start in range(0, n, _ADD_CHUNK):
        index.add(np.ascontiguousarray(emb[start : start + _ADD_CHUNK], dtype=np.float32))
        if say is not None and n > _ADD_CHUNK:
            say(f"dense: {kind} index holds {min(start + _ADD_CHUNK, n)}/{n} vectors")
    return index


def _read_index(path: Path) -> Any:
    """``faiss.index``, memory-mapped where faiss supports it for the index type."""
    faiss = _faiss()
    try:
        return faiss.read_index(str(path), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
    except RuntimeError:
        return faiss.read_index(str(path))


def _encode_to_file(encoder: TextEncoder, passages: Sequence[Passage], directory: Path, prefix: str, *,
                    chunk: int, resume_key: str | None, progress: bool, say: Any) -> np.ndarray:
    """Encode every passage into ``embeddings.npy`` chunk by chunk; returns it memory-mapped.
    With ``resume_key``, rows an earlier run with the same key finished are kept."""
    import time

    n, dim = len(passages), encoder.dim
    path, state_path = directory / _EMB_FILE, directory / _ENCODE_STATE
    key = None if resume_key is None else {"key": resume_key, "model": encoder.info(), "prefix": prefix, "n": n}
    done = 0
    if key is not None and path.is_file():
        try:
            state = json.loads(state_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            state = {}
        if state.get("for") == key:
            done = int(state.get("done", 0))
    if done:
        emb = np.lib.format.open_memmap(path, mode="r+")
        if emb.shape != (n, dim):
            emb, done = None, 0
    if not done:
        emb = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
    else:
        say(f"dense: resuming the encoding after {done}/{n} passages")
    t0 = time.perf_counter()
    first = done
    for start in range(done, n, chunk):
        stop = min(start + chunk, n)
        emb[start:stop] = encoder.encode(_texts(passages, start, stop, prefix), progress=False)
        emb.flush()
        if key is not None:
            tmp = state_path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"for": key, "done": stop}), encoding="utf-8")
            tmp.replace(state_path)
        if progress:
            rate = (stop - first) / max(time.perf_counter() - t0, 1e-9)
            say(f"dense: encoded {stop}/{n} passages, {rate:,.1f}/s, ETA {(n - stop) / max(rate, 1e-9) / 60:,.1f} min")
    state_path.unlink(missing_ok=True)
    return emb


def _check_settings(index_type: str, hnsw_m: int, ef_construction: int, ef_search: int, nprobe: int,
                    pq_nbits: int = 8) -> None:
    if index_type not in INDEX_TYPES:
        raise ValueError(f"unknown dense index_type {index_type!r}; choose from {', '.join(INDEX_TYPES)}")
    for name, value in (("hnsw_m", hnsw_m), ("hnsw_ef_construction", ef_construction),
                        ("hnsw_ef_search", ef_search), ("ivf_nprobe", nprobe), ("pq_nbits", pq_nbits)):
        if int(value) < 1:
            raise ValueError(f"{name} must be >= 1, got {value}")


def _pq_m(dim: int, pq_m: int | None) -> int:
    """Sub-quantisers of a PQ code: given, or dim/8 rounded down to a divisor of dim."""
    m = int(pq_m) if pq_m else max(1, dim // 8)
    if not pq_m:
        while dim % m:
            m -= 1
    if m < 1 or dim % m:
        raise ValueError(f"pq_m must divide the vector dimension {dim}, got {pq_m}")
    return m


@RETRIEVERS.register("dense")
class DenseRetriever:
    """Nearest passages by embedding inner product. Thread-safe ``search``."""

    name = "dense"

    def __init__(self, encoder: TextEncoder, index: Any, passages: Sequence[Passage], settings: dict[str, Any],
                 *, query_batch_size: int = 64) -> None:
        self.encoder = encoder
        self._index = index
        self._passages = passages
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
        pq_m: int | None = None,
        pq_nbits: int = 8,
        train_size: int | None = None,
        progress: bool = True,
        embeddings: np.ndarray | None = None,
        encoder: TextEncoder | None = None,
        query_prefix: str | None = None,
        passage_prefix: str | None = None,
        device: str = "auto",
        chunk: int = 16_384,
        resume_key: str | None = None,
        say: Any = None,
    ) -> DenseRetriever:
        """Encode ``passages`` and index them under ``directory``.

        ``embeddings`` (already made by ``encoder``, rows aligned with ``passages``, with
        the passage prefix) skips encoding; ``encoder`` reuses a loaded model instead of
        loading ``model`` again. ``query_prefix``/``passage_prefix`` default to the
        encoder's declared ones ("" for none). Runtime knobs (not recorded): ``device``,
        ``chunk`` (passages encoded per step), ``resume_key``, ``say``, ``progress``.
        """
        import sys

        _check_settings(index_type, hnsw_m, hnsw_ef_construction, hnsw_ef_search, ivf_nprobe, pq_nbits)
        if not len(passages):
            raise ValueError("cannot build a dense index over zero passages")
        if int(chunk) < 1:
            raise ValueError(f"chunk must be >= 1, got {chunk}")
        say = say or (lambda msg: print(f"[factrl dense] {msg}", file=sys.stderr, flush=True))
        if encoder is None:
            encoder = get_encoder(model, precision=precision, path=encode_path, batch_size=batch_size,
                                  max_seq_length=max_seq_length, device=resolve_device(device))
        declared = getattr(encoder, "prefixes", None)
        q_prefix = query_prefix if query_prefix is not None else getattr(declared, "query", "")
        p_prefix = passage_prefix if passage_prefix is not None else getattr(declared, "passage", "")
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        n = len(passages)
        if embeddings is None:
            emb = _encode_to_file(encoder, passages, directory, p_prefix, chunk=int(chunk), resume_key=resume_key,
                                  progress=progress, say=say)
        else:
            emb = np.ascontiguousarray(embeddings, dtype=np.float32)
        if emb.shape != (n, encoder.dim):
            raise ValueError(f"embeddings have shape {emb.shape}, expected {(n, encoder.dim)}")
        # IVF: ~4·sqrt(n) cells, but at least 39 training points per cell (faiss's minimum).
        nlist = int(ivf_nlist) if ivf_nlist else max(1, min(int(4 * math.sqrt(n)), n // 39))
        ivf = index_type in ("ivf", "ivfpq")
        # Training sample: 64 points per cell (k-means needs >= 39), at least 100k when there are.
        train = min(n, int(train_size) if train_size else max(64 * nlist, 100_000))
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
            "ivf_nlist": nlist if ivf else None,
            "ivf_nprobe": int(ivf_nprobe) if ivf else None,
            "pq_m": _pq_m(encoder.dim, pq_m) if index_type == "ivfpq" else None,
            "pq_nbits": int(pq_nbits) if index_type == "ivfpq" else None,
            "train_size": train if ivf else None,
        }
        index = _make_index(emb, settings, say if progress else None)
        if embeddings is not None:
            np.save(directory / _EMB_FILE, emb, allow_pickle=False)
        _faiss().write_index(index, str(directory / _FAISS_FILE))
        (directory / _SETTINGS_FILE).write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
        return cls(encoder, index, passages, settings)

    @classmethod
    def load(cls, passages: Sequence[Passage], directory: Path, params: dict[str, Any],
             *, encoder: TextEncoder | None = None, device: str = "cpu") -> DenseRetriever:
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
        index = _read_index(directory / _FAISS_FILE)
        if index.ntotal != len(passages):
            raise IndexMismatchError(
                f"dense index {directory} has {index.ntotal} vectors but passages.jsonl has {len(passages)}"
            )
        if encoder is None:
            encoder = get_encoder(saved["model"], precision=saved["precision"], path=saved["encode_path"],
                                  max_seq_length=saved["max_seq_length"], device=resolve_device(device))
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
