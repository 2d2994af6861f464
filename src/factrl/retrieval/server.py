"""HTTP retrieval server (FastAPI) speaking Search-R1's ``/retrieve`` protocol.

``POST /retrieve`` with ``{"queries": [...], "topk": k, "return_scores": bool}`` answers
``{"result": [...]}`` with one list per query, best first — exactly the shape of
Search-R1's retrieval server: with ``return_scores`` each item is
``{"document": {...}, "score": s}``, without it each item is the document itself. A
document has Search-R1's ``id`` and ``contents`` (``"\\"title\\"\\ntext"``, which its
client splits back into title and text) plus factrl's fields: ``passage_id``,
``doc_id``, ``title``, ``text``, ``sentence_ids`` and ``sentences``.

``GET /health`` summarises the index. The server binds 127.0.0.1 unless told otherwise,
takes only ``Content-Type: application/json`` bodies (415 otherwise: no cross-origin form
or text post from a browser), bounds the body size and the time it takes to arrive (408),
the batch size, ``topk`` and query length (and, while decoding, JSON
nesting depth and number length), and answers bad input with 4xx and a message: a body
json.loads would choke on (5000-digit numbers, deep nesting, NaN, duplicate keys) is a
400, never a 500. Searches run in a worker thread, one batch at a time: requests that
arrive while a batch is being searched are merged into the next backend call
(micro-batching), so concurrent clients share query-encoding batches. A request waits at
most ``timeout`` seconds for its result (504 after that).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from typing import Any

# This module is the HTTP backend: it is imported only to serve, so fastapi loads here.
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from factrl.retrieval.base import Retriever
from factrl.retrieval.cache import CachedRetriever
from factrl.serving import BODY_TIMEOUT, BadRequest, BatchWorker, decode_json, read_body, short_repr
from factrl.types import Hit, Passage

__all__ = ["ServerLimits", "create_app", "document_of", "index_info"]


@dataclass(frozen=True)
class ServerLimits:
    max_batch: int = 256
    max_k: int = 100
    max_query_chars: int = 2000
    timeout: float = 30.0
    default_k: int = 3  # Search-R1's default topk
    max_body_bytes: int = 0  # 0: derived from max_batch × max_query_chars
    body_timeout: float = BODY_TIMEOUT  # seconds a request's body may take to arrive (then 408)

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_k", "max_query_chars", "default_k"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.timeout <= 0 or self.body_timeout <= 0:
            raise ValueError(f"timeout and body_timeout must be > 0, got {self.timeout} and {self.body_timeout}")
        if self.default_k > self.max_k:
            raise ValueError(f"default_k ({self.default_k}) exceeds max_k ({self.max_k})")

    @property
    def body_limit(self) -> int:
        # Worst case JSON escaping makes a character 6 bytes ("\uXXXX"); plus slack.
        return self.max_body_bytes or self.max_batch * (self.max_query_chars * 6 + 16) + 4096


def document_of(passage: Passage) -> dict[str, Any]:
    return {
        "id": passage.id,
        "contents": f'"{passage.title}"\n{passage.text}',
        "passage_id": passage.id,
        "doc_id": passage.doc_id,
        "title": passage.title,
        "text": passage.text,
        "sentence_ids": list(passage.sentence_ids),
        "sentences": list(passage.sentences),
    }


def index_info(index: Any) -> dict[str, Any]:
    """What ``/health`` reports about a loaded :class:`~factrl.retrieval.index.Index`."""
    m = index.manifest
    return {
        "retriever": m.retriever,
        "fingerprint": index.fingerprint,
        "n_passages": m.corpus.n_passages,
        "n_documents": m.corpus.n_documents,
        "unit_sentences": m.corpus.unit_sentences,
        "corpus_sha256": m.corpus.sha256,
        "corpus_format": m.corpus.format,
        "params": m.params,
        "factrl_version": m.factrl_version,
        "created": m.created,
    }


def parse_request(body: bytes, limits: ServerLimits) -> tuple[list[str], int, bool]:
    """Validate a ``/retrieve`` body; raise :class:`BadRequest` saying what is wrong."""
    data = decode_json(body)
    if not isinstance(data, dict):
        raise BadRequest(400, 'body must be a JSON object like {"queries": ["..."], "topk": 3}')
    queries = data.get("queries")
    if isinstance(queries, str):
        raise BadRequest(400, "'queries' must be a list of strings, not one string")
    if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
        raise BadRequest(400, "'queries' must be a list of strings")
    if not queries:
        raise BadRequest(400, "'queries' is empty")
    if len(queries) > limits.max_batch:
        raise BadRequest(413, f"{len(queries)} queries in one request; the limit is {limits.max_batch}")
    for i, q in enumerate(queries):
        if len(q) > limits.max_query_chars:
            raise BadRequest(413, f"query {i} has {len(q)} characters; the limit is {limits.max_query_chars}")
        try:  # JSON may carry lone surrogates ("\ud800"); no tokenizer or encoder accepts them
            q.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRequest(400, f"query {i} is not valid Unicode (it contains a lone surrogate)") from None
    topk = data.get("topk")
    if topk is None:
        topk = limits.default_k
    if isinstance(topk, bool) or not isinstance(topk, int):
        raise BadRequest(400, f"'topk' must be an integer, got {short_repr(topk)}")
    if not 1 <= topk <= limits.max_k:
        raise BadRequest(400, f"'topk' must be between 1 and {limits.max_k}, got {topk}")
    return_scores = data.get("return_scores", False)
    if not isinstance(return_scores, bool):
        raise BadRequest(400, f"'return_scores' must be true or false, got {short_repr(return_scores)}")
    return queries, topk, return_scores


def format_result(results: Sequence[Sequence[Hit]], return_scores: bool) -> dict[str, Any]:
    if return_scores:
        return {"result": [[{"document": document_of(h.passage), "score": float(h.score)} for h in hits]
                           for hits in results]}
    return {"result": [[document_of(h.passage) for h in hits] for hits in results]}


class _Batcher(BatchWorker):
    """Merges concurrent requests into backend calls, one at a time, in a worker thread."""

    def __init__(self, retriever: Retriever, max_batch: int) -> None:
        super().__init__()
        self.retriever = retriever
        self.max_batch = max_batch
        self._pending: deque[tuple[list[str], int, asyncio.Future]] = deque()

    def submit(self, queries: list[str], k: int) -> asyncio.Future:
        fut = asyncio.get_running_loop().create_future()
        self._pending.append((queries, k, fut))
        self._wake_up()
        return fut

    def _take(self) -> list[tuple[list[str], int, asyncio.Future]]:
        taken, n = [], 0
        while self._pending and (not taken or n + len(self._pending[0][0]) <= self.max_batch):
            item = self._pending.popleft()
            if item[2].done():  # its client already timed out
                continue
            taken.append(item)
            n += len(item[0])
        return taken

    async def _serve_pending(self) -> None:
        while self._pending:
            by_k: dict[int, list[tuple[list[str], int, asyncio.Future]]] = {}
            for item in self._take():
                by_k.setdefault(item[1], []).append(item)
            for k, items in by_k.items():
                queries = [q for item in items for q in item[0]]
                try:
                    results = await self._call(self.retriever.search, queries, k)
                except Exception as exc:  # noqa: BLE001 - any backend failure: every waiting request learns why
                    self._fail([fut for _, _, fut in items], exc)
                    continue
                start = 0
                for qs, _, fut in items:
                    if not fut.done():
                        fut.set_result(results[start : start + len(qs)])
                    start += len(qs)


def create_app(retriever: Retriever, *, limits: ServerLimits | None = None, info: dict[str, Any] | None = None,
               cache_size: int = 100_000, fingerprint: str | None = None) -> FastAPI:
    """A FastAPI app serving ``retriever``; ``cache_size=0`` turns the result cache off."""
    limits = limits or ServerLimits()
    info = dict(info or {})
    cached = CachedRetriever(retriever, fingerprint=fingerprint or info.get("fingerprint"), maxsize=cache_size) \
        if cache_size > 0 else None
    batcher = _Batcher(cached or retriever, limits.max_batch)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):  # type: ignore[no-untyped-def]
        batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="factrl retriever", lifespan=lifespan)
    app.state.batcher = batcher
    app.state.cache = cached

    def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        return JSONResponse({"detail": message}, status_code=status, headers=headers)

    @app.post("/retrieve")
    async def retrieve(request: Request) -> JSONResponse:
        try:
            body = await read_body(request, limits.body_limit, timeout=limits.body_timeout)
            queries, k, return_scores = parse_request(body, limits)
        except BadRequest as exc:
            return error(exc.status, exc.message, exc.headers)
        if cached is not None:
            # Fully cached requests skip the queue: they never wait behind a slow batch.
            hits = cached.peek(queries, k)
            if hits is not None:
                return JSONResponse(format_result(hits, return_scores))
        fut = batcher.submit(queries, k)
        try:
            results = await asyncio.wait_for(asyncio.shield(fut), timeout=limits.timeout)
        except asyncio.TimeoutError:
            fut.cancel()
            return error(504, f"search did not finish within {limits.timeout:g}s")
        except Exception as exc:  # noqa: BLE001 - a backend fault (input was validated): 500 with the reason
            return error(500, f"search failed: {type(exc).__name__}: {exc}")
        return JSONResponse(format_result(results, return_scores))

    @app.get("/health")
    async def health() -> JSONResponse:
        stats = cached.stats if cached is not None else None
        return JSONResponse({
            "status": "ok",
            "index": info,
            "limits": {**asdict(limits), "max_body_bytes": limits.body_limit},
            "cache": None if stats is None else {"hits": stats.hits, "misses": stats.misses, "size": stats.size},
            "backend_calls": batcher.calls,
        })

    return app
