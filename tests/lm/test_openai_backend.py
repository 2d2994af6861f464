"""The OpenAI-compatible backend: against ``factrl serve lm`` for real (a tiny model), and
against small servers made slow or failing on purpose (retries, Retry-After, timeouts,
episode errors), with its sqlite response cache shared by processes."""

from __future__ import annotations

import asyncio
import json
import math
import os
import sqlite3
import subprocess
import sys
import time

import httpx
import pytest

pytest.importorskip("openai")
pytest.importorskip("fastapi")
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from hypothesis import given
from hypothesis import strategies as st

from factrl.envs.veri_r1 import VeriR1Env
from factrl.lm import GenerationConfig, LMLoadError, LMRequestError, RetryPolicy, RowFailures, load_lm
from factrl.lm import chat_codec
from factrl.lm.openai_backend import OpenAILM, char_logprobs, infer_stop
from factrl.lm.remote import choice_seed, parse_retry_after
from factrl.lm.response_cache import ResponseCache
from factrl.metrics.failures import FailureCounts
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, Message, Passage

from _support import REPO, TricklingServer, WordOverlapRetriever

FAST = RetryPolicy(max_attempts=4, backoff=0.01, max_backoff=0.05)
CONV = [Message(role="user", content="Is the Nile the longest river?")]


# -- the real server ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("torch")
    from factrl.lm.tiny import build_tiny_model

    return load_lm(str(build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4)),
                   max_batch_size=8)


@pytest.fixture(scope="module")
def served(serve_module, tiny):
    from factrl.lm.chat_request import LMServerLimits
    from factrl.lm.server import create_lm_app

    app = create_lm_app(tiny, model_id="tiny", limits=LMServerLimits(max_tokens=64, batch_window=0.005))
    return serve_module(app) + "/v1", app


@pytest.fixture
def client(served):
    lm = load_lm("openai:tiny", base_url=served[0], retry=FAST)
    yield lm
    lm.close()


def test_load_lm_picks_the_backend_from_the_prefix(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    lm = load_lm("openai:gpt-4o-mini", base_url="http://127.0.0.1:9/v1")
    assert isinstance(lm, OpenAILM) and lm.model == "gpt-4o-mini" and lm.name == "openai:gpt-4o-mini"
    with pytest.raises(LMLoadError, match="set OPENAI_API_KEY"):
        load_lm("openai:gpt-4o-mini")
    monkeypatch.setenv("MY_KEY", "sk-test")
    assert load_lm("openai:gpt-4o-mini", api_key_env="MY_KEY")._api_key == "sk-test"
    with pytest.raises(LMLoadError, match="names no model"):
        load_lm("openai:")
    from factrl.lm.loader import resolve_model_path

    with pytest.raises(LMLoadError, match="behind an API"):
        resolve_model_path("openai:gpt-4o-mini")


def test_greedy_completions_are_deterministic_with_consistent_logprobs(client, tiny, served):
    cfg = GenerationConfig(max_new_tokens=10, temperature=0.0)
    a, b = client.complete([CONV, CONV], cfg)
    assert a.text == b.text and a.token_ids == chat_codec.encode(a.text) + ([chat_codec.EOS] if a.finish_reason == "eos" else [])
    (gen,) = tiny.generate([tiny.chat_prompt_ids(CONV)], cfg)
    assert a.text == gen.text  # what the model itself says
    assert "".join(a.tokens) == a.text and len(a.logprobs) == len(a.token_ids)
    assert sum(a.logprobs) == pytest.approx(sum(a.token_logprobs))
    assert a.token_logprobs == pytest.approx(gen.logprobs[: len(a.token_logprobs)], abs=1e-4)
    assert client.stats.requests == 2  # two rows, two requests (in one batched generate on the server)


def test_stop_strings_are_honoured(client):
    free = client.complete([CONV], GenerationConfig(max_new_tokens=24, temperature=1.0, seed=4))[0].text
    stop = free[5:8]
    (g,) = client.complete([CONV], GenerationConfig(max_new_tokens=24, temperature=1.0, seed=4, stop=[stop]))
    assert g.finish_reason == "stop" and g.stop == stop
    assert g.text == free[: free.find(stop)] + stop  # factrl keeps the stop string
    assert g.logprobs[-len(stop):] == [0.0] * len(stop)  # the server cut it off: its logprobs are unknown


def test_identical_rows_are_a_seeded_group_like_n(client, served):
    cfg = GenerationConfig(max_new_tokens=8, temperature=1.0, seed=21)
    rows = client.complete([CONV] * 3, cfg)
    r = httpx.post(f"{served[0]}/chat/completions", timeout=60, json={
        "model": "tiny", "messages": [m.model_dump() for m in CONV], "max_tokens": 8, "temperature": 1.0,
        "seed": 21, "n": 3})
    assert [g.text for g in rows] == [c["message"]["content"] for c in r.json()["choices"]]
    assert len({g.text for g in rows}) > 1


def test_generate_continues_the_partial_reply(client, tiny):
    partial = "<think>The Nile"
    context = client.chat_prompt_ids(CONV) + client.encode(partial)
    (g,) = client.generate([context], GenerationConfig(max_new_tokens=6, temperature=0.0))
    (ref,) = tiny.generate([tiny.chat_prompt_ids(CONV) + tiny.encode(partial)],
                           GenerationConfig(max_new_tokens=6, temperature=0.0))
    assert g.text == ref.text and client.decode(g.token_ids) == g.text


def test_episodes_run_over_http(client):
    passages = [Passage(id="nile#0", doc_id="nile", title="Nile", text="It flows north.",
                        sentence_ids=["nile_sentence_0"], sentences=["It flows north."])]
    claims = [Claim(id=f"c{i}", text=f"The Nile flows north {i}.", label="SUPPORT") for i in range(3)]
    trajs = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(passages)), claims, client,
                         RolloutConfig(temperature=0.0, max_new_tokens=8, max_total_tokens=200, seed=1))
    for t in trajs:
        assert t.error is None
        model = [x for x in t.turns if x.source == "model"]
        assert model and all(client.decode(x.token_ids) == x.text for x in model)
        assert chat_codec.split_context(t.prompt_ids)[0] == [m.model_dump() for m in t.prompt]


def test_score_choices_says_when_the_server_gives_no_top_logprobs(client):
    with pytest.raises(NotImplementedError, match="no top_logprobs"):
        client.score_choices(CONV, ["SUPPORT", "REFUTE"])


def test_sync_calls_work_inside_a_running_event_loop(client):
    async def inside():
        return client.complete([CONV], GenerationConfig(max_new_tokens=3, temperature=0.0))

    assert len(asyncio.run(inside())) == 1


# -- servers that fail on purpose ---------------------------------------------------------


def completion(text, finish="stop", **choice):
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish,
                         **choice}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


class Script:
    """A FastAPI app answering from a list of (status, body, headers), then ``final``."""

    def __init__(self, steps=(), final=None, delay=0.0):
        self.steps, self.final, self.delay = list(steps), final, delay
        self.bodies = []
        self.in_flight = self.most_in_flight = 0
        self.app = FastAPI()

        @self.app.post("/v1/chat/completions")
        async def chat(request: Request):
            self.bodies.append(await request.json())
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            try:
                if self.delay:
                    await asyncio.sleep(self.delay)
                status, body, headers = self.steps.pop(0) if self.steps else self.final(self.bodies[-1])
            finally:
                self.in_flight -= 1
            return JSONResponse(body, status_code=status, headers=headers or {})


def lm_for(serve, script, **kw):
    url = serve(script.app) + "/v1"
    lm = OpenAILM("m", base_url=url, **{"retry": FAST, **kw})
    lm.waits = []

    async def no_sleep(seconds):  # count the waits, do not spend them
        lm.waits.append(seconds)

    lm.sleep = no_sleep
    return lm


OK = lambda body: (200, completion("fine"), None)  # noqa: E731


def test_retries_honour_retry_after_then_succeed(serve):
    script = Script([(429, {"error": {"message": "slow down"}}, {"Retry-After": "3"}),
                     (500, {"error": {"message": "oops"}}, None)], final=OK)
    lm = lm_for(serve, script, retry=RetryPolicy(max_attempts=5, backoff=0.01, max_backoff=1.0))
    (g,) = lm.complete([CONV], GenerationConfig(max_new_tokens=5))
    assert g.text == "fine" and g.finish_reason == "eos"
    assert len(script.bodies) == 3 and lm.stats.requests == 3
    assert lm.waits[0] >= 3.0  # the server's Retry-After, not the 0.01 s backoff
    assert lm.waits[1] <= 0.02  # plain exponential backoff (with jitter) after the 500


def test_the_last_failure_is_a_clear_error(serve):
    script = Script(final=lambda b: (503, {"error": {"message": "overloaded"}}, None))
    lm = lm_for(serve, script, retry=RetryPolicy(max_attempts=3, backoff=0.01))
    with pytest.raises(LMRequestError, match="failed after 3 tries.*overloaded") as info:
        lm.complete([CONV], GenerationConfig(max_new_tokens=5))
    assert info.value.status == 503 and info.value.attempts == 3 and len(script.bodies) == 3
    assert len(lm.waits) == 2 and lm.stats.failures == 1


def test_bad_requests_are_not_retried(serve):
    script = Script(final=lambda b: (400, {"error": {"message": "unknown field"}}, None))
    lm = lm_for(serve, script)
    with pytest.raises(LMRequestError, match="not retried.*unknown field") as info:
        lm.complete([CONV], GenerationConfig(max_new_tokens=5))
    assert info.value.status == 400 and len(script.bodies) == 1


def test_a_slow_server_times_out_and_is_retried(serve):
    script = Script(final=OK, delay=1.2)
    lm = lm_for(serve, script, timeout=0.2, retry=RetryPolicy(max_attempts=2, backoff=0.01))
    t0 = time.monotonic()
    with pytest.raises(LMRequestError, match="failed after 2 tries.*(timed out|Timeout)"):
        lm.complete([CONV], GenerationConfig(max_new_tokens=5))
    assert time.monotonic() - t0 < 1.2  # neither try waited for the slow answer
    deadline = time.monotonic() + 5
    while len(script.bodies) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(script.bodies) == 2


def test_a_server_that_trickles_its_answer_is_timed_out_as_a_whole():
    # Headers at once, then a byte every 0.2 s: each read comes well within the timeout,
    # so only a deadline on the whole request ends it (before, each try took 6 s).
    with TricklingServer(every=0.2, for_seconds=6.0) as server:
        lm = OpenAILM("m", base_url=server.url + "/v1", timeout=1.0,
                      retry=RetryPolicy(max_attempts=2, backoff=0.01, max_backoff=0.01))
        t0 = time.monotonic()
        with pytest.raises(LMRequestError, match="failed after 2 tries.*timed out: no complete response within 1 s"):
            lm.complete([CONV], GenerationConfig(max_new_tokens=5))
        assert time.monotonic() - t0 < 4.0
        assert server.requests == 2 and lm.stats.failures == 1
        lm.close()


@pytest.mark.parametrize("limit", [2, 6])
def test_rows_go_out_concurrently_within_the_bound(serve, limit):
    script = Script(final=OK, delay=0.2)
    lm = lm_for(serve, script, max_concurrency=limit)
    convs = [[Message(role="user", content=f"q{i}")] for i in range(6)]
    assert [g.text for g in lm.complete(convs, GenerationConfig(max_new_tokens=3))] == ["fine"] * 6
    assert script.most_in_flight == limit


def test_requests_carry_the_sampling_settings(serve):
    script = Script(final=OK)
    lm = lm_for(serve, script, max_concurrency=2)
    cfgs = [GenerationConfig(max_new_tokens=7, temperature=0.5, top_p=0.9, stop=("</search>",), seed=5),
            GenerationConfig(max_new_tokens=9, temperature=0.5, top_p=0.9, seed=None)]
    lm.complete([CONV, CONV], cfgs)
    first, second = sorted(script.bodies, key=lambda b: b["max_tokens"])
    assert first == {"model": "m", "messages": [{"role": "user", "content": CONV[0].content}], "temperature": 0.5,
                     "top_p": 0.9, "max_tokens": 7, "n": 1, "stop": ["</search>"], "seed": 5, "logprobs": True}
    assert "seed" not in second and "stop" not in second
    context = lm.chat_prompt_ids(CONV) + lm.encode("<search>q</search>\n<information>x</information>")
    lm.generate([context], GenerationConfig(max_new_tokens=3))
    last = script.bodies[-1]
    assert last["messages"][-1] == {"role": "assistant", "content": "<search>q</search>\n<information>x</information>"}
    assert last["continue_final_message"] is True and last["add_generation_prompt"] is False


def test_finish_reasons_and_stop_strings(serve):
    answers = iter([
        completion("<search>nile", stop_reason="</search>"),  # vLLM names the stop string
        completion("done", stop_reason=None),  # ... or says none: EOS
        completion("<search>nile"),  # OpenAI never says: inferred from the open tag
        completion("plain"),  # nothing open: EOS
        completion("long", finish="length"),
        completion("<search>a</search> extra"),  # a server that ignored the stop string
    ])
    lm = lm_for(serve, Script(final=lambda b: (200, next(answers), None)), max_concurrency=1)
    cfg = GenerationConfig(max_new_tokens=5, stop=("</search>", "</answer>"))
    out = [lm.complete([[Message(role="user", content=str(i))]], cfg)[0] for i in range(6)]
    assert [(g.text, g.finish_reason, g.stop) for g in out] == [
        ("<search>nile</search>", "stop", "</search>"), ("done", "eos", None),
        ("<search>nile</search>", "stop", "</search>"), ("plain", "eos", None), ("long", "length", None),
        ("<search>a</search>", "stop", "</search>")]
    assert out[1].token_ids[-1] == chat_codec.EOS and out[4].token_ids == chat_codec.encode("long")
    assert all(g.logprobs is None for g in out)  # the server gave none


def test_score_choices_from_top_logprobs(serve):
    top = [{"token": "SUP", "logprob": math.log(0.6), "top_logprobs": []},
           {"token": " REF", "logprob": math.log(0.3), "top_logprobs": []}]
    answer = completion("SUP", logprobs={"content": [{"token": "SUP", "logprob": math.log(0.6), "top_logprobs": top}]})
    script = Script(final=lambda b: (200, answer, None))
    lm = lm_for(serve, script)
    scores = lm.score_choices(CONV, ["SUPPORT", "REFUTE", "NOT ENOUGH INFO"])
    assert scores[:2] == pytest.approx([math.log(0.6), math.log(0.3)]) and scores[2] == -math.inf
    assert script.bodies[0]["max_tokens"] == 1 and script.bodies[0]["top_logprobs"] == 20


def test_a_failing_row_becomes_a_counted_episode_error(serve):
    answer = "<answer>\nLabel: SUPPORT\nEvidence: [[nile_sentence_0]]\n</answer>"

    def final(body):
        if "Claim B" in json.dumps(body["messages"]):
            return 500, {"error": {"message": "backend crashed"}}, None
        return 200, completion(answer[: -len("</answer>")], stop_reason="</answer>"), None

    script = Script(final=final)
    lm = lm_for(serve, script, retry=RetryPolicy(max_attempts=2, backoff=0.01))
    passages = [Passage(id="nile#0", doc_id="nile", title="Nile", text="It flows north.",
                        sentence_ids=["nile_sentence_0"], sentences=["It flows north."])]
    claims = [Claim(id=n, text=f"Claim {n}: the Nile flows north.", label="SUPPORT") for n in "ABC"]
    trajs = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(passages)), claims, lm,
                         RolloutConfig(temperature=0.0, max_new_tokens=64))
    assert trajs[0].error is None and trajs[2].error is None
    assert trajs[0].verdict.label.value == "SUPPORT" and trajs[0].reward.total > 0
    assert trajs[1].error.startswith("generate failed: LMRequestError: chat completion of openai:m")
    assert "failed after 2 tries" in trajs[1].error and "backend crashed" in trajs[1].error
    counts = FailureCounts()
    for t in trajs:
        counts.add(t.verdict, error=t.error)
    assert counts.to_dict()["episode_errors"] == {"generate/LMRequestError": 1}


def test_row_failures_name_the_rows(serve):
    script = Script(final=lambda b: (500, {}, None) if b["messages"][0]["content"] == "bad" else OK(b))
    lm = lm_for(serve, script, retry=RetryPolicy(max_attempts=1))
    convs = [[Message(role="user", content=c)] for c in ("ok", "bad", "ok too")]
    with pytest.raises(RowFailures) as info:
        lm.complete(convs, GenerationConfig(max_new_tokens=3))
    assert [g is None for g in info.value.generations] == [False, True, False]
    assert isinstance(info.value.errors[1], LMRequestError) and "1 of 3 rows failed" in str(info.value)


# -- the cache ----------------------------------------------------------------------------


def test_a_second_run_sends_no_request(serve, tmp_path):
    script = Script(final=lambda b: (200, completion(f"reply to {b['messages'][-1]['content']}"), None))
    path = tmp_path / "cache.sqlite"
    convs = [[Message(role="user", content=f"q{i}")] for i in range(3)] + [[Message(role="user", content="q0")]]
    cfg = GenerationConfig(max_new_tokens=5, temperature=1.0)
    first = lm_for(serve, script, cache=path)
    a = first.complete(convs, cfg)
    assert len(script.bodies) == 4 and first.stats.cache_hits == 0  # q0 twice: two samples of a group
    first.close()
    again = lm_for(serve, script, cache=path)
    b = again.complete(convs, cfg)
    assert len(script.bodies) == 4 and again.stats.cache_hits == 4 and again.stats.requests == 0
    assert [g.text for g in a] == [g.text for g in b] and all(g.cached for g in b)
    again.complete([[Message(role="user", content="q0")]], GenerationConfig(max_new_tokens=5, temperature=0.5))
    assert len(script.bodies) == 5  # other sampling settings: another key


WRITER = """
import sys
from factrl.lm.response_cache import ResponseCache
cache = ResponseCache(sys.argv[1])
who = sys.argv[2]
for i in range(300):
    cache.put(f"shared-{i % 50}", {"by": who, "i": i})
    cache.put(f"{who}-{i}", {"by": who, "i": i, "text": "x" * 200})
    cache.get(f"shared-{(i * 7) % 50}")
print("done")
"""


def test_processes_share_one_cache_file_safely(tmp_path):
    path = tmp_path / "cache.sqlite"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), who], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for who in ("a", "b", "c")]
    for p in procs:
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out.strip() == "done", err
    with sqlite3.connect(str(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache = ResponseCache(path)
    assert len(cache) == 50 + 3 * 300
    assert cache.get("b-299") == {"by": "b", "i": 299, "text": "x" * 200}
    assert cache.get("shared-7")["by"] in {"a", "b", "c"}


# -- pieces -------------------------------------------------------------------------------


texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)


@given(st.lists(st.tuples(st.sampled_from(["system", "user", "assistant", "tool"]), texts), max_size=4), texts)
def test_the_chat_codec_round_trips(messages, partial):
    msgs = [{"role": r, "content": c} for r, c in messages]
    ids = chat_codec.chat_prompt_ids(msgs) + chat_codec.encode(partial)
    assert chat_codec.split_context(ids) == (msgs, partial)
    assert chat_codec.decode(chat_codec.encode(partial) + [chat_codec.EOS]) == partial


def test_the_codec_refuses_other_ids():
    with pytest.raises(ValueError, match="does not start with a chat message"):
        chat_codec.split_context(chat_codec.encode("plain text"))
    with pytest.raises(ValueError, match="only an assistant reply is continued"):
        chat_codec.split_context([chat_codec.MESSAGE_START, *chat_codec.encode("user"), chat_codec.ROLE_END])
    with pytest.raises(ValueError, match="neither a character"):
        chat_codec.split_context([10**7])


def test_retry_policy_delays():
    policy = RetryPolicy(backoff=0.5, max_backoff=4.0, jitter=0.5, max_retry_after=10.0)
    for failed, high in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 4.0), (9, 4.0)]:
        waits = [policy.delay(failed) for _ in range(50)]
        assert all(high / 2 <= w <= high for w in waits) and len(set(waits)) > 1  # jittered
    assert policy.delay(1, retry_after=7.0) == 7.0 and policy.delay(1, retry_after=99.0) == 10.0
    assert parse_retry_after({"Retry-After": "2"}) == 2.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"},
                             now=1445412480.0) == pytest.approx(10.0)
    assert parse_retry_after({"Retry-After": "soon"}) is None and parse_retry_after({}) is None
    assert choice_seed(5, 0) == 5 and choice_seed(5, 1) != choice_seed(6, 0)


def test_char_logprobs_and_stop_inference():
    assert char_logprobs("héllo", ["h", "", "éll", "o"], [-1.0, -0.5, -2.0, -3.0]) == [-1.0, -2.5, 0.0, 0.0, -3.0]
    assert char_logprobs("abc", ["ab"], [-1.0]) is None
    assert infer_stop("<plan>p</plan><search>q", ["</search>", "</answer>"]) == "</search>"
    assert infer_stop("<search>q</search> then", ["</search>"]) is None
    assert infer_stop("<answer>x", ["\n\n"]) is None


def test_a_fresh_reply_after_an_assistant_message_is_not_a_continuation(serve):
    script = Script(final=OK)
    lm = lm_for(serve, script)
    history = [Message(role="user", content="q"), Message(role="assistant", content="a")]
    lm.generate([lm.chat_prompt_ids(history)], GenerationConfig(max_new_tokens=3))
    assert script.bodies[-1]["messages"][-1] == {"role": "assistant", "content": "a"}
    assert "continue_final_message" not in script.bodies[-1]


def test_the_repetition_guard_is_refused_not_ignored(client):
    """An OpenAI-compatible API has no n-gram guard: asking for one is an error before
    any request, never a silently unguarded answer."""
    with pytest.raises(ValueError, match="no_repeat_ngram is a local-model option"):
        client.complete([CONV], GenerationConfig(max_new_tokens=4, no_repeat_ngram=3))
    assert client.stats.requests == 0


def test_the_wal_switch_is_retried_while_another_process_holds_the_lock(tmp_path):
    cache = ResponseCache(tmp_path / "cache.sqlite")

    class Locked:  # "database is locked" twice, then the pragma goes through
        def __init__(self, conn, fails):
            self.conn, self.fails, self.calls = conn, fails, 0

        def execute(self, sql, *a):
            self.calls += 1
            if self.calls <= self.fails:
                raise sqlite3.OperationalError("database is locked")
            return self.conn.execute(sql, *a)

    cache._conn = Locked(cache._conn, fails=2)
    cache._wal(5.0)
    assert cache._conn.calls == 3
    cache._conn = Locked(cache._conn.conn, fails=10**6)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        cache._wal(0.05)  # past its timeout: the error, not a hang
