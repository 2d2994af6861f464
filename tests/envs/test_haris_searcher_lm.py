"""The reasoner calling a real search agent: a tiny random model in-process (batched
with the other episodes' searcher turns) and the same model behind ``factrl serve lm``
started for real on a free port (the OpenAI-compatible client). The reasoner is
scripted, so every episode asks a question; the searcher's gibberish must come back
as a recorded segment with exact token truth and masks."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
httpx = pytest.importorskip("httpx")

from factrl.envs import EnvDeps, build
from factrl.envs.haris import prompts as P
from factrl.envs.haris.searcher import SearcherConfig, searcher_messages
from factrl.lm import load_lm
from factrl.lm.scripted import ScriptedLM
from factrl.lm.tiny import build_tiny_model
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim

from _support import REPO, WordOverlapRetriever, free_port
from envs.test_haris import PASSAGES

QUESTION = "<question>Nile direction?</question>"  # short: the turn budget is 48 tokens
VERIFY = "<verification>\\boxed{Support}</verification>"

CLAIMS = [Claim(id="c1", text="The Nile flows north.", label="SUPPORT"),
          Claim(id="c2", text="Paris is in France.", label="SUPPORT")]


def reasoner():
    def respond(ctx):
        return VERIFY if "<result>" in ctx.split("<assistant>", 1)[1] else QUESTION
    return ScriptedLM(respond)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4, seed=0)


def episodes(searcher_lm):
    deps = EnvDeps(retriever=WordOverlapRetriever(PASSAGES))
    return run_episodes(lambda: build("haris", deps), CLAIMS, reasoner(),
                        RolloutConfig(temperature=0, max_new_tokens=48, seed=1), lms={"searcher": searcher_lm})


def check_nested(trajs, searcher_lm):
    cfg = SearcherConfig()
    for t in trajs:
        assert t.error is None, t.error
        (seg,) = t.segments
        assert seg.role == "searcher"
        assert seg.prompt_ids == searcher_lm.chat_prompt_ids(searcher_messages(t.meta["questions"][0], cfg))
        assert seg.turns and seg.turns[0].source == "model"
        for turn in seg.turns:
            assert len(turn.mask) == len(turn.token_ids) and set(turn.mask) == {1 if turn.source == "model" else 0}
            if turn.source == "model":
                assert 0 < len(turn.token_ids) <= 48
        # the reasoner got the report (or, for gibberish, "no report") as a masked observation
        assert [x.source for x in t.turns] == ["model", "env", "model"] and set(t.turns[1].mask) == {0}
        report = t.meta["reports"][0]
        assert (report if report is not None else P.NO_REPORT)[:50] in t.turns[1].text
        assert t.verdict.format_ok and t.reward.total == 1.0


def test_in_process_searcher_is_batched(tiny_dir):
    lm = load_lm(str(tiny_dir), max_batch_size=8)
    calls = []
    original = lm.generate
    lm.generate = lambda prompts, config: calls.append(len(prompts)) or original(prompts, config)
    trajs = episodes(lm)
    check_nested(trajs, lm)
    assert calls and calls[0] == 2  # both episodes' first searcher turns in one call
    # token truth: the sampled ids decode to the recorded text
    turn = trajs[0].segments[0].turns[0]
    assert lm.decode(turn.token_ids).startswith(turn.text[:10])


def test_searcher_over_http_against_factrl_serve_lm(tiny_dir):
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from factrl.cli import main; main()", "serve", "lm", "--model",
                             str(tiny_dir), "--served-name", "tiny", "--port", str(port), "--max-tokens", "64"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.3)
        remote = load_lm("openai:tiny", base_url=f"http://127.0.0.1:{port}/v1")
        trajs = episodes(remote)
        check_nested(trajs, remote)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
