"""``factrl serve lm``: the OpenAI-compatible LM server, run for real under uvicorn on a
free 127.0.0.1 port (a tiny random SmolLM2-shaped model, or scripted LMs that block on
purpose to fill the queue)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time

import httpx
import pytest

pytest.importorskip("fastapi")
torch = pytest.importorskip("torch")

from factrl.lm import load_lm
from factrl.lm.chat_request import LMServerLimits
from factrl.lm.scripted import ScriptedLM
from factrl.lm.server import create_lm_app
from factrl.lm.tiny import build_tiny_model

from _support import REPO, LogRecords, free_port, half_sent_post, read_response

MESSAGES = [{"role": "user", "content": "Is the Nile the longest river?"}]


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4, seed=0)


@pytest.fixture(scope="module")
def tiny(tiny_dir):
    return load_lm(str(tiny_dir), max_batch_size=8)


@pytest.fixture(scope="module")
def url(serve_module, tiny):
    return serve_module(create_lm_app(tiny, model_id="tiny", limits=LMServerLimits(max_tokens=64)))


def chat(url, **body):
    r = httpx.post(f"{url}/v1/chat/completions", json={"model": "tiny", "messages": MESSAGES, **body}, timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_models_lists_the_served_id(url):
    r = httpx.get(f"{url}/v1/models")
    assert r.status_code == 200
    assert [m["id"] for m in r.json()["data"]] == ["tiny"] and r.json()["object"] == "list"


def test_response_shape_and_logprobs_match_the_model(url, tiny):
    out = chat(url, max_tokens=12, temperature=1.0, seed=3, logprobs=True)
    assert out["object"] == "chat.completion" and out["model"] == "tiny"
    (choice,) = out["choices"]
    content = choice["message"]["content"]
    assert choice["message"]["role"] == "assistant" and choice["finish_reason"] in ("stop", "length")
    entries = choice["logprobs"]["content"]
    assert "".join(e["token"] for e in entries) == content
    assert all(bytes(e["bytes"]) == e["token"].encode() for e in entries)
    prompt = tiny.chat_prompt_ids(MESSAGES)
    assert out["usage"]["prompt_tokens"] == len(prompt)
    if choice["finish_reason"] == "length":  # no stop/EOS dropped: every sampled token is listed
        assert len(entries) == out["usage"]["completion_tokens"] == 12
    # Recompute the sample (same seed → same ids) and check each token's logprob.
    from factrl.lm import GenerationConfig
    from factrl.lm.remote import choice_seed

    (gen,) = tiny.generate([prompt], [GenerationConfig(max_new_tokens=12, temperature=1.0, seed=choice_seed(3, 0))])
    assert gen.text.startswith(content)
    expected = tiny.token_logprobs(prompt, gen.token_ids, temperature=1.0)
    assert [e["logprob"] for e in entries] == pytest.approx(expected[: len(entries)], abs=1e-4)


def test_stop_strings_are_honoured(url):
    free = chat(url, max_tokens=24, temperature=1.0, seed=11)["choices"][0]["message"]["content"]
    stop = free[4:7]
    assert len(stop) == 3
    (choice,) = chat(url, max_tokens=24, temperature=1.0, seed=11, stop=[stop, "never-said"])["choices"]
    assert choice["finish_reason"] == "stop" and choice["stop_reason"] == stop
    assert choice["message"]["content"] == free[: free.find(stop)]


def test_n_choices_are_seeded_and_deterministic(url):
    three = chat(url, max_tokens=10, temperature=1.0, seed=7, n=3)
    assert [c["index"] for c in three["choices"]] == [0, 1, 2]
    texts = [c["message"]["content"] for c in three["choices"]]
    assert len(set(texts)) > 1  # distinct samples
    again = chat(url, max_tokens=10, temperature=1.0, seed=7, n=3)
    assert [c["message"]["content"] for c in again["choices"]] == texts
    assert chat(url, max_tokens=10, temperature=1.0, seed=7)["choices"][0]["message"]["content"] == texts[0]


def test_greedy_is_deterministic(url, tiny):
    a = chat(url, max_tokens=8, temperature=0)["choices"][0]["message"]["content"]
    b = chat(url, max_tokens=8, temperature=0, seed=99)["choices"][0]["message"]["content"]
    assert a == b
    from factrl.lm import GenerationConfig

    (gen,) = tiny.generate([tiny.chat_prompt_ids(MESSAGES)], GenerationConfig(max_new_tokens=8, temperature=0))
    assert a == gen.text


def test_continue_final_message_extends_the_reply(url, tiny):
    from factrl.lm import GenerationConfig

    partial = "The Nile"
    body = {"messages": MESSAGES + [{"role": "assistant", "content": partial}], "continue_final_message": True,
            "add_generation_prompt": False}
    out = chat(url, max_tokens=8, temperature=0, **body)
    prompt = tiny.chat_prompt_ids(MESSAGES) + tiny.encode(partial)
    (gen,) = tiny.generate([prompt], GenerationConfig(max_new_tokens=8, temperature=0))
    assert out["choices"][0]["message"]["content"] == gen.text


def test_a_conversation_prefills_only_what_its_last_request_added(url, tiny):
    long = [{"role": "user", "content": "Tell me about the rivers of Africa, one by one. " * 6}]
    reply = chat(url, messages=long, max_tokens=8, temperature=0)["choices"][0]["message"]["content"]
    before = httpx.get(f"{url}/health").json()["turn_cache"]
    grown = long + [{"role": "assistant", "content": reply}, {"role": "user", "content": "And the Nile?"}]
    chat(url, messages=grown, max_tokens=8, temperature=0)
    after = httpx.get(f"{url}/health").json()["turn_cache"]
    assert after["hits"] == before["hits"] + 1
    # the first prompt came from the first request's keys and values (its last token, the
    # "\n" opening the reply, may merge with the reply's text when the template re-encodes it)
    assert after["reused_tokens"] - before["reused_tokens"] >= len(tiny.chat_prompt_ids(long)) - 1


def test_concurrent_requests_share_one_generate_call(serve, tiny):
    app = create_lm_app(tiny, model_id="tiny", limits=LMServerLimits(batch_window=0.3, max_tokens=16))
    url = serve(app)

    async def burst():
        async with httpx.AsyncClient(timeout=60) as client:
            bodies = [{"messages": [{"role": "user", "content": f"claim {i}"}], "max_tokens": 4 + i,
                       "temperature": 0.0} for i in range(4)]
            return await asyncio.gather(*(client.post(f"{url}/v1/chat/completions", json=b) for b in bodies))

    responses = asyncio.run(burst())
    assert [r.status_code for r in responses] == [200] * 4
    assert app.state.batcher.calls == 1 and app.state.batcher.batch_sizes == [4]
    # each row kept its own max_tokens inside the shared call
    assert [r.json()["usage"]["completion_tokens"] <= 4 + i for i, r in enumerate(responses)] == [True] * 4


def test_rows_of_other_temperatures_go_in_other_calls(serve):
    app = create_lm_app(ScriptedLM(lambda c: "ok"), model_id="s", limits=LMServerLimits(batch_window=0.3))
    url = serve(app)

    async def burst():
        async with httpx.AsyncClient(timeout=30) as client:
            return await asyncio.gather(*(client.post(f"{url}/v1/chat/completions", json={
                "messages": MESSAGES, "temperature": t}) for t in (0.0, 1.0, 0.0)))

    assert [r.status_code for r in asyncio.run(burst())] == [200] * 3
    assert sorted(app.state.batcher.batch_sizes) == [1, 2]


class GatedLM(ScriptedLM):
    """Blocks every generate call until ``gate`` is set."""

    def __init__(self):
        super().__init__(lambda context: "fine")
        self.gate = threading.Event()
        self.entered = threading.Event()

    def generate(self, prompts, config):
        self.entered.set()
        assert self.gate.wait(30)
        return super().generate(prompts, config)


def test_a_full_queue_answers_503_and_a_slow_one_504(serve):
    lm = GatedLM()
    app = create_lm_app(lm, model_id="s", limits=LMServerLimits(max_batch=1, max_queue=2, batch_window=0,
                                                                timeout=5))
    url = serve(app)
    post = lambda client, **kw: client.post(f"{url}/v1/chat/completions", json={"messages": MESSAGES, **kw})  # noqa: E731

    async def scenario():
        async with httpx.AsyncClient(timeout=30) as client:
            first = asyncio.ensure_future(post(client))
            while not lm.entered.is_set():  # the first row is being generated (and blocks)
                await asyncio.sleep(0.01)
            queued = [asyncio.ensure_future(post(client)) for _ in range(2)]
            while app.state.batcher.pending.__len__() < 2:
                await asyncio.sleep(0.01)
            full = await post(client)  # a third waiting row is one too many
            too_many = await post(client, n=3)
            lm.gate.set()
            return full, too_many, await first, await asyncio.gather(*queued)

    full, too_many, first, queued = asyncio.run(scenario())
    assert full.status_code == 503 and "limit is 2" in full.json()["error"]["message"]
    assert full.headers["retry-after"] == "1" and too_many.status_code == 503
    assert first.status_code == 200 and [r.status_code for r in queued] == [200, 200]
    assert first.json()["choices"][0]["message"]["content"] == "fine"

    slow = GatedLM()
    url2 = serve(create_lm_app(slow, model_id="s", limits=LMServerLimits(timeout=0.3, batch_window=0)))
    r = httpx.post(f"{url2}/v1/chat/completions", json={"messages": MESSAGES}, timeout=30)
    slow.gate.set()
    assert r.status_code == 504 and "0.3s" in r.json()["error"]["message"]


def test_a_failing_model_answers_500_with_the_reason(serve):
    def boom(context):
        raise RuntimeError("out of memory")

    url = serve(create_lm_app(ScriptedLM(boom), model_id="s"))
    r = httpx.post(f"{url}/v1/chat/completions", json={"messages": MESSAGES})
    assert r.status_code == 500 and "RuntimeError: out of memory" in r.json()["error"]["message"]


DEEP = 20_000  # far past json's recursion limit, inside the strict server's body limit
BAD = [
    (b"{not json", 400, "not valid JSON"),
    (b"[" * DEEP + b"]" * DEEP, 400, "deeper than 32 levels"),
    (b'{"messages": [], "max_tokens": ' + b"9" * 5000 + b"}", 400, "number with 5000 digits"),
    (b'{"messages": [{"role": "user", "content": "a"}], "n": NaN}', 400, "NaN is not a JSON value"),
    (b'{"messages": [{"role": "user", "content": "a"}], "n": 1, "n": 2}', 400, "duplicate key 'n'"),
    ({"messages": "hello"}, 400, "'messages' must be a non-empty list"),
    ({"messages": []}, 400, "'messages' must be a non-empty list"),
    ({"messages": [{"role": "robot", "content": "a"}]}, 400, "'role' must be one of"),
    ({"messages": [{"role": "user", "content": 3}]}, 400, "'content' must be a string"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, 400, "only text content parts"),
    (b'{"messages": [{"role": "user", "content": "\\ud800"}]}', 400, "lone surrogate"),
    ({"messages": MESSAGES, "stream": True}, 400, "streaming is not supported"),
    ({"messages": MESSAGES, "tools": [{"type": "function"}]}, 400, "'tools' is not supported"),
    ({"messages": MESSAGES, "temperature": 5}, 400, "'temperature' must be >= 0 and <= 2"),
    ({"messages": MESSAGES, "temperature": "hot"}, 400, "'temperature' must be a number"),
    ({"messages": MESSAGES, "top_p": 0}, 400, "'top_p' must be > 0"),
    ({"messages": MESSAGES, "n": 100}, 400, "'n' must be between 1 and 4"),
    ({"messages": MESSAGES, "n": True}, 400, "'n' must be an integer"),
    ({"messages": MESSAGES, "max_tokens": 10**6}, 400, "'max_tokens' must be between 1 and 32"),
    ({"messages": MESSAGES, "max_tokens": 5, "max_completion_tokens": 5}, 400, "not both"),
    ({"messages": MESSAGES, "stop": ["a", "b", "c"]}, 400, "3 stop strings; the limit is 2"),
    ({"messages": MESSAGES, "stop": [""]}, 400, "stop strings must have 1 to"),
    ({"messages": MESSAGES, "stop": 7}, 400, "'stop' must be a string or a list"),
    ({"messages": MESSAGES, "top_logprobs": 3}, 400, "needs 'logprobs': true"),
    ({"messages": MESSAGES, "logprobs": "yes"}, 400, "'logprobs' must be true or false"),
    ({"messages": MESSAGES, "seed": 1.5}, 400, "'seed' must be an integer"),
    ({"messages": MESSAGES, "continue_final_message": True}, 400, "last message to be an assistant message"),
    ({"messages": MESSAGES, "model": "gpt-5"}, 404, "is not served here"),
    ({"messages": [{"role": "user", "content": "x" * 200}] * 3}, 413, "more than 500 characters"),
    ({"messages": MESSAGES * 9}, 413, "9 messages; the limit is 8"),
    (b"x" * 200_000, 413, "the limit is"),
]


@pytest.fixture(scope="module")
def strict_url(serve_module):
    limits = LMServerLimits(max_n=4, max_tokens=32, max_stop=2, max_chars=500, max_messages=8)
    return serve_module(create_lm_app(ScriptedLM(lambda c: "ok"), model_id="s", limits=limits))


@pytest.mark.parametrize("body,status,message", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_bodies_get_4xx_with_a_message(strict_url, body, status, message):
    url = strict_url
    kw = {"content": body, "headers": {"content-type": "application/json"}} if isinstance(body, bytes) else {"json": body}
    r = httpx.post(f"{url}/v1/chat/completions", **kw, timeout=30)
    assert r.status_code == status, r.text
    assert message in r.json()["error"]["message"]


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_body_not_sent_as_json_is_415(strict_url, content_type):
    # A web page open in a local browser may POST text/plain or a form cross-origin without
    # a CORS preflight; a JSON post needs one, which this server never grants.
    headers = {"content-type": content_type} if content_type else {}
    body = b'{"messages": [{"role": "user", "content": "hi"}]}'
    r = httpx.post(f"{strict_url}/v1/chat/completions", content=body, headers=headers, timeout=30)
    assert r.status_code == 415 and "Content-Type must be application/json" in r.json()["error"]["message"]
    assert r.headers["connection"] == "close"
    r = httpx.post(f"{strict_url}/v1/chat/completions", content=body, timeout=30,
                   headers={"content-type": "application/json; charset=utf-8"})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "ok"


def test_half_sent_bodies_are_timed_out_and_clients_that_leave_logged_in_one_line(serve):
    url = serve(create_lm_app(ScriptedLM(lambda c: "ok"), model_id="s", limits=LMServerLimits(body_timeout=0.5)))
    sock = half_sent_post(url, "/v1/chat/completions", declared=1000, sent=10)
    answer = read_response(sock, timeout=5.0)  # before: held for as long as the client waited
    sock.close()
    assert answer.startswith(b"HTTP/1.1 408 ") and b"did not arrive within 0.5 s" in answer
    with LogRecords() as log:
        for _ in range(5):
            half_sent_post(url, "/v1/chat/completions", declared=1000, sent=10).close()
        deadline = time.monotonic() + 10
        while len(log.records) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
    assert len(log.records) == 5 and not any(r.exc_info for r in log.records)
    assert all("disconnected after 10 of 1000 bytes" in r.getMessage() for r in log.records)
    r = httpx.post(f"{url}/v1/chat/completions", json={"messages": MESSAGES}, timeout=30)
    assert r.status_code == 200


def test_a_prompt_past_the_context_is_400(url):
    r = httpx.post(f"{url}/v1/chat/completions", timeout=60, json={
        "messages": [{"role": "user", "content": "lighthouse " * 9000}], "max_tokens": 8})
    assert r.status_code == 400 and "exceed the model's context of 8192" in r.json()["error"]["message"]


def test_serve_lm_command_serves_the_model(tiny_dir, serve, monkeypatch):
    """The command's wiring, in process: uvicorn.run is swapped for a threaded server."""
    import uvicorn
    from typer.testing import CliRunner

    from factrl.cli import _load_commands, app

    _load_commands()
    seen = {}

    def run(app_, host, port, log_level):
        seen.update(host=host, port=port, url=serve(app_))

    monkeypatch.setattr(uvicorn, "run", run)
    r = CliRunner().invoke(app, ["serve", "lm", "--model", str(tiny_dir), "--served-name", "tiny", "--max-tokens", "16",
                                 "--batch-window-ms", "5"])
    assert r.exit_code == 0, r.output
    assert seen["host"] == "127.0.0.1" and seen["port"] == 8001
    assert httpx.get(f"{seen['url']}/v1/models").json()["data"][0]["id"] == "tiny"
    out = httpx.post(f"{seen['url']}/v1/chat/completions", timeout=60,
                     json={"model": "tiny", "messages": MESSAGES, "max_tokens": 4, "temperature": 0}).json()
    assert out["choices"][0]["finish_reason"] in ("stop", "length")
    health = httpx.get(f"{seen['url']}/health").json()
    assert health["limits"]["max_tokens"] == 16 and health["limits"]["batch_window"] == 0.005
    # the generation batch follows the device (auto: the CPU here)
    assert health["runtime"] == {"device": "cpu", "dtype": "float32", "max_batch_size": 32, "turn_cache_gb": 2.0, "cpu_attention": "native"}
    assert health["limits"]["max_batch"] == 32
    bad = CliRunner().invoke(app, ["serve", "lm", "--model", "openai:gpt-4o"])
    assert bad.exit_code == 2 and "already served behind an API" in bad.output
    r = CliRunner().invoke(app, ["serve", "lm", "--model", str(tiny_dir), "--device", "cpu", "--dtype", "bf16",
                                 "--max-batch", "5"])
    assert r.exit_code == 0, r.output
    health = httpx.get(f"{seen['url']}/health").json()
    assert health["runtime"] == {"device": "cpu", "dtype": "bfloat16", "max_batch_size": 5, "turn_cache_gb": 2.0, "cpu_attention": "native"}
    assert health["limits"]["max_batch"] == 5
    out = httpx.post(f"{seen['url']}/v1/chat/completions", timeout=60,
                     json={"model": str(tiny_dir), "messages": MESSAGES, "max_tokens": 4, "temperature": 0}).json()
    assert out["choices"][0]["finish_reason"] in ("stop", "length")


@pytest.mark.slow
def test_cli_serves_a_local_model(tiny_dir):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from factrl.cli import main; main()", "serve", "lm", "--model",
                             str(tiny_dir), "--served-name", "tiny", "--port", str(port), "--max-tokens", "16"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
        assert r.json()["data"][0]["id"] == "tiny"
        out = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=60,
                         json={"model": "tiny", "messages": MESSAGES, "max_tokens": 4, "temperature": 0}).json()
        assert out["choices"][0]["finish_reason"] in ("stop", "length")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_token_pieces_spell_the_text(tiny):
    from factrl.lm.server import token_pieces

    for text in ["plain words here", "héllo wörld — ünïcode ✓ 北京 🙂🙂", "  spaces\n\nand\ttabs  "]:
        ids = tiny.encode(text)
        pieces = token_pieces(tiny, ids)
        assert len(pieces) == len(ids) and "".join(pieces) == tiny.decode(ids) == text
