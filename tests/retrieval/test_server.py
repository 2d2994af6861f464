"""The retrieval server, run for real under uvicorn on a free local port."""

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from factrl.retrieval.base import RETRIEVERS
from factrl.retrieval.server import ServerLimits, create_app, document_of
from factrl.types import Hit, Passage

from _support import LogRecords, half_sent_post, read_response


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests" / "fixtures" / "mini_corpus.jsonl"
CLI = "from factrl.cli import main; main()"


@pytest.fixture(scope="module")
def bm25(passages: list[Passage], tmp_path_factory: pytest.TempPathFactory) -> Any:
    return RETRIEVERS.get("bm25").build(passages, tmp_path_factory.mktemp("srv") / "bm25")


@pytest.fixture
def url(serve: Callable[[Any], str], bm25: Any) -> str:
    limits = ServerLimits(max_batch=8, max_k=5, max_query_chars=200, timeout=10)
    return serve(create_app(bm25, limits=limits, info={"retriever": "bm25", "fingerprint": "bm25-test"}))


@pytest.fixture
def roomy_url(serve: Callable[[Any], str], bm25: Any) -> str:
    """The same limits but a 1 MiB body, room for hostile bodies that fit a default server."""
    limits = ServerLimits(max_batch=8, max_k=5, max_query_chars=200, timeout=10, max_body_bytes=1 << 20)
    return serve(create_app(bm25, limits=limits, info={"retriever": "bm25", "fingerprint": "bm25-test"}))


def body_kwargs(body: Any) -> dict[str, Any]:
    """httpx arguments sending ``body`` as is (bytes/str) or encoded as JSON."""
    if isinstance(body, (bytes, str)):
        return {"content": body, "headers": {"content-type": "application/json"}}
    return {"json": body}


def post(url: str, body: Any, **kw: Any) -> httpx.Response:
    return httpx.post(f"{url}/retrieve", **body_kwargs(body), **kw)


def test_search_r1_shape_with_scores(url: str, bm25: Any) -> None:
    r = post(url, {"queries": ["lighthouse granite", "measles doses"], "topk": 2, "return_scores": True})
    assert r.status_code == 200
    result = r.json()["result"]
    assert len(result) == 2 and all(len(row) == 2 for row in result)
    expected = bm25.search(["lighthouse granite", "measles doses"], 2)
    for row, hits in zip(result, expected):
        assert [item["document"] for item in row] == [document_of(h.passage) for h in hits]
        assert [item["score"] for item in row] == pytest.approx([h.score for h in hits])
    doc = result[0][0]["document"]
    # Search-R1's client splits contents into a quoted title line and the text.
    assert doc["contents"] == '"Harbor Lighthouse"\nThe harbor lighthouse was built in 1874 from local granite.'
    assert doc["id"] == doc["passage_id"] == "lighthouse#0" and doc["doc_id"] == "lighthouse"
    assert doc["sentence_ids"] == ["lighthouse_sentence_0"]


def test_without_scores_items_are_documents_and_topk_defaults(url: str) -> None:
    r = post(url, {"queries": ["honeybee workers glaciers"]})
    assert r.status_code == 200
    row = r.json()["result"][0]
    assert len(row) == 3  # Search-R1's default topk
    assert set(row[0]) >= {"id", "contents"} and row[0]["doc_id"] == "honeybee"


DEEP = 100_000  # far past json's recursion limit, well inside a default server's body limit
HOSTILE = [  # each of these once made json.loads raise (a 500 that also dropped the connection)
    (b'{"queries": ["q"], "topk": ' + b"1" * 5000 + b"}", 400, "number with 5000 digits; the limit is 32"),
    (b'{"queries": ["q"], "topk": -' + b"9" * 5000 + b"}", 400, "number with 5000 digits"),
    (b'{"queries": [' + b"7" * 5000 + b"]}", 400, "number with 5000 digits"),
    (b"[" * DEEP + b"]" * DEEP, 400, "deeper than 32 levels"),
    (b'{"a": ' * DEEP + b"1" + b"}" * DEEP, 400, "deeper than 32 levels"),
    (b'{"queries": ["q", ' + b"[" * DEEP + b"]" * DEEP + b"]}", 400, "deeper than 32 levels"),
    (b'{"queries": ' + b"[" * DEEP, 400, "deeper than 32 levels"),  # never closed: json recurses all the same
]
ODD = [  # decoded before, but must stay 4xx with a message
    (b'{"queries": ["q"], "topk": NaN}', 400, "NaN is not a JSON value"),
    (b'{"queries": ["q"], "topk": Infinity}', 400, "Infinity is not a JSON value"),
    (b'{"queries": ["q"], "topk": -Infinity}', 400, "-Infinity is not a JSON value"),
    (b'{"queries": ["q"], "topk": 1e999}', 400, "'topk' must be an integer, got inf"),
    (b'{"queries": ["q"], "topk": -1e999}', 400, "'topk' must be an integer, got -inf"),
    (b'{"queries": ["q"], "topk": 2.5}', 400, "'topk' must be an integer, got 2.5"),
    (b'{"queries": ["q"], "topk": ' + b"1" * 5000 + b'.0}', 400, "'topk' must be an integer, got inf"),
    (b'{"queries": ["q"], "topk": [[[[1]]]]}', 400, "'topk' must be an integer, got [[[[1]]]]"),
    (b'{"queries": ["q"], "topk": 2, "topk": 3}', 400, "duplicate key 'topk'"),
    (b'{"queries": [{"a": 1, "a": 2}]}', 400, "duplicate key 'a'"),
    (b'{"queries": ["\xff\xfe lighthouse"]}', 400, "not valid JSON"),
    (b"", 400, "not valid JSON"),
    (b'"lighthouse granite"', 400, "must be a JSON object"),
    (b"3", 400, "must be a JSON object"),
    (b"null", 400, "must be a JSON object"),
]


@pytest.mark.parametrize("body,status,message", [
    (b"{not json", 400, "not valid JSON"),
    ([1, 2], 400, "must be a JSON object"),
    ({"queries": "one string"}, 400, "not one string"),
    ({"queries": [1, 2]}, 400, "list of strings"),
    ({"topk": 3}, 400, "list of strings"),
    ({"queries": []}, 400, "is empty"),
    ({"queries": ["q"] * 9}, 413, "9 queries in one request; the limit is 8"),
    ({"queries": ["q"], "topk": 6}, 400, "between 1 and 5, got 6"),
    ({"queries": ["q"], "topk": 0}, 400, "between 1 and 5"),
    ({"queries": ["q"], "topk": "3"}, 400, "must be an integer"),
    ({"queries": ["q"], "topk": True}, 400, "must be an integer"),
    ({"queries": ["q"], "return_scores": "yes"}, 400, "true or false"),
    ({"queries": ["ok", "x" * 201]}, 413, "query 1 has 201 characters; the limit is 200"),
    (b'{"queries": ["ok", "bad \\ud800 surrogate"]}', 400, "query 1 is not valid Unicode"),
    *HOSTILE,
    *ODD,
])
def test_bad_requests_get_4xx_with_a_message(roomy_url: str, body: Any, status: int, message: str) -> None:
    with httpx.Client(timeout=30) as client:  # one keep-alive connection: it must survive the bad request
        r = client.post(f"{roomy_url}/retrieve", **body_kwargs(body))
        assert r.status_code == status, r.text
        assert message in r.json()["detail"]
        ok = client.post(f"{roomy_url}/retrieve", json={"queries": ["lighthouse granite"], "topk": 1})
        assert ok.status_code == 200 and ok.json()["result"][0][0]["id"] == "lighthouse#0"


def test_server_stays_healthy_through_hostile_bodies(roomy_url: str) -> None:
    with httpx.Client(timeout=30) as client:
        for body, status, message in HOSTILE + ODD:
            r = client.post(f"{roomy_url}/retrieve", **body_kwargs(body))
            assert r.status_code == status and message in r.json()["detail"], (body[:40], r.text)
        # Brackets inside strings are text, not nesting: a query full of them is searched as usual.
        r = client.post(f"{roomy_url}/retrieve", json={"queries": ["[{" * 100, "lighthouse"], "topk": 1})
        assert r.status_code == 200 and r.json()["result"][1][0]["id"] == "lighthouse#0"
        assert client.get(f"{roomy_url}/health").json()["status"] == "ok"


def test_body_size_bounded(url: str) -> None:
    limit = ServerLimits(max_batch=8, max_k=5, max_query_chars=200).body_limit
    r = post(url, b" " * (limit + 1))
    assert r.status_code == 413 and "limit" in r.json()["detail"]

    def chunks():  # no Content-Length: the streamed size is checked too
        for _ in range(limit // 1000 + 2):
            yield b" " * 1000

    r = httpx.post(f"{url}/retrieve", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize(("content_type", "status"), [
    ("text/plain", 415),  # what a web page may POST cross-origin without a preflight
    ("application/x-www-form-urlencoded", 415),
    ("multipart/form-data; boundary=x", 415),
    (None, 415),
    ("application/json; charset=utf-8", 200),
    ("Application/JSON", 200),
])
def test_only_json_bodies_are_taken(url: str, content_type: str | None, status: int) -> None:
    headers = {"content-type": content_type} if content_type else {}
    r = httpx.post(f"{url}/retrieve", content=b'{"queries": ["glacier"], "topk": 1}', headers=headers)
    assert r.status_code == status, r.text
    if status == 415:
        assert "Content-Type must be application/json" in r.json()["detail"]


def test_a_half_sent_body_is_answered_408_and_the_connection_closed(serve: Callable[[Any], str], bm25: Any) -> None:
    url = serve(create_app(bm25, limits=ServerLimits(body_timeout=0.5)))
    sock = half_sent_post(url, "/retrieve", declared=1000, sent=10)
    t0 = time.monotonic()
    answer = read_response(sock, timeout=5.0)  # before: nothing came for as long as the client waited
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408 ") and b"did not arrive within 0.5 s (10 of 1000 bytes came)" in answer
    assert time.monotonic() - t0 < 4.0  # the server closed it: read_response did not wait out its timeout
    assert post(url, {"queries": ["glacier"], "topk": 1}).status_code == 200


def test_clients_that_leave_mid_body_are_one_log_line_each(serve: Callable[[Any], str], bm25: Any) -> None:
    url = serve(create_app(bm25))
    with LogRecords() as log:
        for _ in range(20):
            half_sent_post(url, "/retrieve", declared=1000, sent=10).close()
        deadline = time.monotonic() + 10
        while len(log.records) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)  # anything more (a traceback) would come now
    messages = [r.getMessage() for r in log.records]
    assert not [r for r in log.records if r.exc_info], messages[:1]  # before: an ASGI traceback each
    assert len(messages) == 20 and all("disconnected after 10 of 1000 bytes of its request body to /retrieve" in m
                                       for m in messages), messages[:2]
    assert post(url, {"queries": ["glacier"], "topk": 1}).status_code == 200


def test_wrong_method_and_path(url: str) -> None:
    assert httpx.get(f"{url}/retrieve").status_code == 405
    assert httpx.post(f"{url}/nope", json={}).status_code == 404


def test_health_reports_index_limits_and_cache(url: str) -> None:
    first = post(url, {"queries": ["glacier"], "topk": 2}).json()
    assert httpx.get(f"{url}/health").json()["backend_calls"] == 1
    assert post(url, {"queries": ["glacier"], "topk": 2}).json() == first
    h = httpx.get(f"{url}/health").json()
    assert h["backend_calls"] == 1  # the repeat was answered from the cache, not queued
    assert h["status"] == "ok" and h["index"]["fingerprint"] == "bm25-test"
    assert h["limits"]["max_batch"] == 8 and h["limits"]["max_k"] == 5
    assert h["cache"]["hits"] >= 1 and h["cache"]["misses"] >= 1


def test_many_concurrent_async_clients(url: str, bm25: Any) -> None:
    queries = ["lighthouse", "honeybee workers", "sourdough starter", "glacier melting", "measles", "volcano lava"]

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as client:
            reqs = [client.post(f"{url}/retrieve", json={"queries": [queries[i % 6], queries[(i + 1) % 6]],
                                                         "topk": 1 + i % 5, "return_scores": True})
                    for i in range(80)]
            return await asyncio.gather(*reqs)

    responses = asyncio.run(run())
    assert all(r.status_code == 200 for r in responses)
    for i, r in enumerate(responses):
        k = 1 + i % 5
        expected = bm25.search([queries[i % 6], queries[(i + 1) % 6]], k)
        got = [[item["document"]["id"] for item in row] for row in r.json()["result"]]
        assert got == [[h.passage.id for h in hits] for hits in expected]


class RecordingRetriever:
    """Sleeps a little per call (as a model would) and records each call's batch."""

    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        self.batches.append(list(queries))
        time.sleep(0.2)
        return [[Hit(passage=Passage(id=q, doc_id=q, text=q), score=1.0)] for q in queries]


def test_concurrent_requests_are_merged_into_batches(serve: Callable[[Any], str]) -> None:
    backend = RecordingRetriever()
    url = serve(create_app(backend, cache_size=0))

    async def run() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=30) as client:
            return await asyncio.gather(*(client.post(f"{url}/retrieve", json={"queries": [f"q{i}"], "topk": 1})
                                          for i in range(20)))

    responses = asyncio.run(run())
    assert [r.json()["result"][0][0]["id"] for r in responses] == [f"q{i}" for i in range(20)]
    assert sorted(q for b in backend.batches for q in b) == sorted(f"q{i}" for i in range(20))
    assert len(backend.batches) < 20 and max(len(b) for b in backend.batches) > 1


class SlowRetriever:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        time.sleep(self.seconds)
        return [[] for _ in queries]


class BrokenRetriever:
    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        raise RuntimeError("disk on fire")


def test_timeout_answers_504(serve: Callable[[Any], str]) -> None:
    url = serve(create_app(SlowRetriever(2.0), limits=ServerLimits(timeout=0.3), cache_size=0))
    t0 = time.monotonic()
    r = post(url, {"queries": ["q"], "topk": 1})
    assert r.status_code == 504 and "did not finish within 0.3s" in r.json()["detail"]
    assert time.monotonic() - t0 < 1.9


def test_backend_failure_is_a_5xx_with_reason(serve: Callable[[Any], str]) -> None:
    url = serve(create_app(BrokenRetriever(), cache_size=0))
    r = post(url, {"queries": ["q"], "topk": 1})
    assert r.status_code == 500 and "disk on fire" in r.json()["detail"]


def test_limits_validated() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        ServerLimits(max_batch=0)
    with pytest.raises(ValueError, match="default_k"):
        ServerLimits(max_k=2, default_k=3)


def test_cli_serves_an_index_in_a_subprocess(tmp_path: Path) -> None:
    from factrl.retrieval.index import build_index

    build_index(FIXTURE, tmp_path / "ix", unit_sentences=2, progress=False)
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", "retriever", "--index", str(tmp_path / "ix"), "--port", str(port),
         "--max-k", "4"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(f"{base}/health", timeout=2).json()
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    out = proc.stdout.read().decode() if proc.stdout else ""
                    pytest.fail(f"server did not start: {out}")
                time.sleep(0.2)
        assert health["index"]["retriever"] == "bm25" and health["index"]["n_passages"] == 40
        assert health["index"]["fingerprint"].startswith("bm25-")
        r = httpx.post(f"{base}/retrieve", json={"queries": ["lighthouse granite"], "topk": 2, "return_scores": True})
        assert r.status_code == 200 and r.json()["result"][0][0]["document"]["doc_id"] == "lighthouse"
        assert httpx.post(f"{base}/retrieve", json={"queries": ["x"], "topk": 5}).status_code == 400
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_cli_rejects_a_missing_index(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", CLI, "serve", "retriever", "--index", str(tmp_path / "none")],
                         check=False, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "index directory not found" in out.stderr
    assert "Traceback" not in out.stderr


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=12,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.fixed_dictionaries({}, optional={
    "queries": json_values | st.lists(st.text(max_size=40), max_size=10),
    "topk": json_values, "return_scores": json_values}) | json_values)
def test_no_input_gets_a_5xx(url: str, body: Any) -> None:
    r = post(url, body)
    assert r.status_code < 500, (body, r.text)
    if r.status_code != 200:
        assert r.json()["detail"]


# JSON-ish fragments, hostile ones included: raw bodies httpx's json= would never produce
# (bare and escaped lone surrogates, a non-UTF-8 byte, a 5000-digit number, deep brackets).
json_tokens = st.sampled_from([b"[", b"]", b"{", b"}", b",", b":", b'"', b"\\", b'"q"', b'"queries"', b'"topk"', b"1",
                               b"-", b"e999", b"1" * 5000, b"NaN", b"Infinity", b"true", b"null", b" ", b"\xff",
                               b"\xed\xa0\x80", b'"\\ud800"', b"[" * 50])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tokens=st.lists(json_tokens, max_size=30))
def test_no_raw_body_gets_a_5xx(url: str, tokens: list[bytes]) -> None:
    r = post(url, b"".join(tokens))
    assert r.status_code < 500, (tokens, r.text)
    if r.status_code != 200:
        assert r.json()["detail"]
