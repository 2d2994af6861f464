"""RetrieverClient against a real server (uvicorn in a thread) and against a dead port."""

import asyncio
import socket
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from factrl.retrieval.base import RETRIEVERS, Retriever
from factrl.retrieval.client import RetrieverClient, RetrieverClientError
from factrl.retrieval.server import ServerLimits, create_app
from factrl.types import Hit, Passage

QUERIES = ["lighthouse granite", "honeybee workers", "measles doses", "volcano"]


@pytest.fixture(scope="module")
def bm25(passages: list[Passage], tmp_path_factory: pytest.TempPathFactory) -> Any:
    return RETRIEVERS.get("bm25").build(passages, tmp_path_factory.mktemp("cli") / "bm25")


def dead_url() -> str:
    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_sync_search_equals_in_process(serve: Callable[[Any], str], bm25: Any) -> None:
    client = RetrieverClient(serve(create_app(bm25)))
    assert isinstance(client, Retriever)
    got = client.search(QUERIES, 3)
    want = bm25.search(QUERIES, 3)
    assert [[h.passage for h in r] for r in got] == [[h.passage for h in r] for r in want]
    assert [h.score for r in got for h in r] == pytest.approx([h.score for r in want for h in r])
    assert client.search([], 3) == []
    with pytest.raises(TypeError):
        client.search("one string", 3)
    client.close()


def test_async_search_and_chunking(serve: Callable[[Any], str], bm25: Any) -> None:
    url = serve(create_app(bm25, limits=ServerLimits(max_batch=2)))
    client = RetrieverClient(url, max_batch=2)  # 4 queries → 2 requests, sent concurrently
    got = asyncio.run(client.asearch(QUERIES, 2))
    assert [[h.passage.id for h in r] for r in got] == [[h.passage.id for h in r] for r in bm25.search(QUERIES, 2)]
    with RetrieverClient(url, max_batch=2) as sync_client:
        assert [[h.passage.id for h in r] for r in sync_client.search(QUERIES, 2)] == \
            [[h.passage.id for h in r] for r in got]


def test_4xx_is_not_retried_and_says_why(serve: Callable[[Any], str], bm25: Any) -> None:
    client = RetrieverClient(serve(create_app(bm25, limits=ServerLimits(max_k=5))), retries=3, backoff=5.0)
    t0 = time.monotonic()
    with pytest.raises(RetrieverClientError, match="HTTP 400: 'topk' must be between 1 and 5"):
        client.search(["q"], 50)
    assert time.monotonic() - t0 < 4  # no backoff sleeps happened
    with pytest.raises(RetrieverClientError, match="HTTP 400"):
        asyncio.run(client.asearch(["q"], 50))


def test_connect_errors_are_retried_then_reported() -> None:
    url = dead_url()
    client = RetrieverClient(url, retries=2, backoff=0.05, timeout=2)
    t0 = time.monotonic()
    with pytest.raises(RetrieverClientError, match=r"failed after 3 tries: ConnectError"):
        client.search(["q"], 1)
    assert time.monotonic() - t0 >= 0.05 + 0.1  # backoff 0.05 then 0.1
    with pytest.raises(RetrieverClientError, match="failed after 3 tries"):
        asyncio.run(client.asearch(["q"], 1))


class FlakyRetriever:
    """Fails its first ``n`` calls (the server answers 500), then works."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.calls = 0

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.calls += 1
        if self.calls <= self.n:
            raise RuntimeError("transient")
        return [[Hit(passage=Passage(id="p", doc_id="d", text=q), score=1.0)] for q in queries]


def test_5xx_is_retried(serve: Callable[[Any], str]) -> None:
    flaky = FlakyRetriever(2)
    client = RetrieverClient(serve(create_app(flaky, cache_size=0)), retries=2, backoff=0.01)
    assert client.search(["hello"], 1)[0][0].passage.text == "hello"
    assert flaky.calls == 3
    flaky2 = FlakyRetriever(5)
    client2 = RetrieverClient(serve(create_app(flaky2, cache_size=0)), retries=1, backoff=0.01)
    with pytest.raises(RetrieverClientError, match="failed after 2 tries: HTTP 500: search failed: RuntimeError: transient"):
        asyncio.run(client2.asearch(["x"], 1))


class SlowRetriever:
    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        time.sleep(1.5)
        return [[] for _ in queries]


def test_client_timeout(serve: Callable[[Any], str]) -> None:
    client = RetrieverClient(serve(create_app(SlowRetriever(), cache_size=0)), timeout=0.3, retries=0)
    t0 = time.monotonic()
    with pytest.raises(RetrieverClientError, match="did not answer within 0.3s"):
        client.search(["q"], 1)
    assert time.monotonic() - t0 < 1.4
    with pytest.raises(RetrieverClientError, match="did not answer within 0.3s"):
        asyncio.run(client.asearch(["q"], 1))


def test_reads_a_plain_search_r1_document() -> None:
    from factrl.retrieval.client import _hits_from

    payload = {"result": [[{"document": {"id": "42", "contents": '"Some Title"\nbody text\nmore'}, "score": 0.5}]]}
    hit = _hits_from(payload, 1, "http://x")[0][0]
    assert (hit.passage.id, hit.passage.doc_id, hit.passage.title, hit.passage.text) == \
        ("42", "42", "Some Title", "body text\nmore")
    with pytest.raises(RetrieverClientError, match="unexpected /retrieve response"):
        _hits_from({"result": []}, 1, "http://x")


def test_bad_settings() -> None:
    with pytest.raises(ValueError):
        RetrieverClient("http://127.0.0.1:1", retries=-1)
