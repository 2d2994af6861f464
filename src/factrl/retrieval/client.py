"""HTTP client for a retrieval server speaking Search-R1's ``/retrieve`` protocol.

:class:`RetrieverClient` satisfies :class:`~factrl.retrieval.base.Retriever`, so an
environment uses a remote index exactly as an in-process one: ``search(queries, k)``
(sync) or ``await asearch(queries, k)``. Every request has a timeout; connection errors
and 5xx answers are retried with exponential backoff; 4xx answers (bad input) are not
retried and raise with the server's message. Large batches are split into requests of
at most ``max_batch`` queries.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from factrl.types import Hit, Passage

__all__ = ["RetrieverClient", "RetrieverClientError"]


class RetrieverClientError(RuntimeError):
    """The server could not be reached, or answered with an error, after all tries."""


def _hits_from(payload: Any, n_queries: int, url: str) -> list[list[Hit]]:
    try:
        rows = payload["result"]
        if len(rows) != n_queries:
            raise ValueError(f"{len(rows)} result lists for {n_queries} queries")
        out = []
        for row in rows:
            hits = []
            for item in row:
                doc = item["document"]
                title, text = doc.get("title"), doc.get("text")
                if title is None or text is None:  # a plain Search-R1 server: split "\"title\"\ntext"
                    head, _, body = str(doc.get("contents", "")).partition("\n")
                    title, text = head.strip().strip('"'), body
                passage = Passage(
                    id=str(doc.get("passage_id") or doc["id"]),
                    doc_id=str(doc.get("doc_id") or doc["id"]),
                    title=title,
                    text=text,
                    sentence_ids=list(doc.get("sentence_ids") or []),
                    sentences=list(doc.get("sentences") or []),
                )
                hits.append(Hit(passage=passage, score=float(item["score"])))
            out.append(hits)
        return out
    except (KeyError, TypeError, ValueError) as exc:
        raise RetrieverClientError(f"{url}: unexpected /retrieve response ({type(exc).__name__}: {exc})") from None


def _detail(response: Any) -> str:
    try:
        return str(response.json().get("detail", response.text))
    except (ValueError, AttributeError):  # not JSON, or JSON that is not an object
        return response.text[:500]


class RetrieverClient:
    """Talks to ``factrl serve retriever`` (or any Search-R1-compatible server) at ``url``."""

    def __init__(self, url: str, *, timeout: float = 30.0, retries: int = 3, backoff: float = 0.5,
                 max_batch: int = 256) -> None:
        if retries < 0 or backoff < 0 or timeout <= 0 or max_batch < 1:
            raise ValueError("need timeout > 0, retries >= 0, backoff >= 0, max_batch >= 1")
        self.url = url.rstrip("/")
        self.timeout = float(timeout)
        self.retries = int(retries)
        self.backoff = float(backoff)
        self.max_batch = int(max_batch)
        self._client: Any = None  # a shared httpx.Client for the sync path

    def __repr__(self) -> str:
        return f"RetrieverClient({self.url!r})"

    def _body(self, queries: Sequence[str], k: int) -> dict[str, Any]:
        return {"queries": list(queries), "topk": int(k), "return_scores": True}

    def _delay(self, attempt: int) -> float:
        return self.backoff * (2**attempt)

    def _check(self, queries: Sequence[str], k: int) -> list[str]:
        if isinstance(queries, str):
            raise TypeError("search takes a sequence of queries, not one string")
        return list(queries)

    def _outcome(self, response: Any, n: int) -> tuple[list[list[Hit]] | None, str | None]:
        """(hits, None) on success; (None, reason) for a retryable failure; raises on 4xx."""
        if response.status_code >= 500:
            return None, f"HTTP {response.status_code}: {_detail(response)}"
        if response.status_code >= 400:
            raise RetrieverClientError(f"{self.url}/retrieve rejected the request: HTTP {response.status_code}: "
                                       f"{_detail(response)}")
        try:
            payload = response.json()
        except ValueError:
            raise RetrieverClientError(f"{self.url}/retrieve answered with non-JSON: {response.text[:200]!r}") from None
        return _hits_from(payload, n, self.url), None

    # --- sync ----------------------------------------------------------------------

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        import httpx

        queries = self._check(queries, k)
        if self._client is None:
            self._client = httpx.Client(timeout=self.timeout)
        out: list[list[Hit]] = []
        for start in range(0, len(queries), self.max_batch):
            chunk = queries[start : start + self.max_batch]
            out.extend(self._post_sync(chunk, k))
        return out

    def _post_sync(self, queries: list[str], k: int) -> list[list[Hit]]:
        import httpx

        last = "no attempt made"
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self._delay(attempt - 1))
            try:
                response = self._client.post(f"{self.url}/retrieve", json=self._body(queries, k))
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            except httpx.TimeoutException as exc:
                raise RetrieverClientError(f"{self.url}/retrieve did not answer within {self.timeout:g}s ({exc})") from None
            hits, last_err = self._outcome(response, len(queries))
            if hits is not None:
                return hits
            last = last_err or last
        raise RetrieverClientError(f"{self.url}/retrieve failed after {self.retries + 1} tries: {last}")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> RetrieverClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- async ---------------------------------------------------------------------

    async def asearch(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Like :meth:`search`, without blocking the event loop; chunks go out concurrently."""
        import httpx

        queries = self._check(queries, k)
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            chunks = [queries[i : i + self.max_batch] for i in range(0, len(queries), self.max_batch)]
            parts = await asyncio.gather(*(self._post_async(client, c, k) for c in chunks))
        return [hits for part in parts for hits in part]

    async def _post_async(self, client: Any, queries: list[str], k: int) -> list[list[Hit]]:
        import httpx

        last = "no attempt made"
        for attempt in range(self.retries + 1):
            if attempt:
                await asyncio.sleep(self._delay(attempt - 1))
            try:
                response = await client.post(f"{self.url}/retrieve", json=self._body(queries, k))
            except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
                last = f"{type(exc).__name__}: {exc}"
                continue
            except httpx.TimeoutException as exc:
                raise RetrieverClientError(f"{self.url}/retrieve did not answer within {self.timeout:g}s ({exc})") from None
            hits, last_err = self._outcome(response, len(queries))
            if hits is not None:
                return hits
            last = last_err or last
        raise RetrieverClientError(f"{self.url}/retrieve failed after {self.retries + 1} tries: {last}")

    def health(self) -> dict[str, Any]:
        """The server's ``/health`` answer (one try)."""
        import httpx

        try:
            response = httpx.get(f"{self.url}/health", timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise RetrieverClientError(f"{self.url}/health: {type(exc).__name__}: {exc}") from None
        if response.status_code != 200:
            raise RetrieverClientError(f"{self.url}/health: HTTP {response.status_code}: {_detail(response)}")
        return response.json()
