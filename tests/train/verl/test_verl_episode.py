"""The verl-free core of the agent loop: one episode through an async generate call."""

import asyncio
from pathlib import Path

import pytest

from factrl.envs.veri_r1 import VeriR1Env
from factrl.lm.base import GenerationConfig
from factrl.lm.scripted import ScriptedLM
from factrl.rollout import RolloutConfig, run_episodes
from factrl.train.verl import episode as episode_mod
from factrl.train.verl.episode import Sampled, TokenBudget, agent_loop_fields, run_token_episode, shared_retriever
from factrl.types import Claim, EvidenceRef, Passage

from _support import WordOverlapRetriever

PASSAGES = [
    Passage(id="nile#0", doc_id="nile", title="Nile", text="The Nile is long. It flows north.",
            sentence_ids=["nile_sentence_0", "nile_sentence_1"], sentences=["The Nile is long.", "It flows north."]),
]
CLAIM = Claim(id="c1", text="The Nile flows north.", label="SUPPORT",
              evidence=[EvidenceRef(id="nile_sentence_1", doc_id="nile")])
GOOD = [
    "<plan>Find where the Nile flows.</plan>\n<search>Nile flows north</search>",
    "<think>The Nile flows north.</think>\n<answer>\nLabel: SUPPORT\nEvidence: [[nile_sentence_1]]\n</answer>",
]


def respond(context: str) -> str:
    return GOOD[min(context.count("</information>") - 1, len(GOOD) - 1)]


def drive(lm, env, claim=CLAIM, budget=TokenBudget(), logprobs=True):
    calls = []

    async def tokenize(messages):
        return lm.chat_prompt_ids(messages)

    async def generate(request):
        context, max_new_tokens = request.context, request.max_new_tokens
        calls.append((list(context), max_new_tokens))
        (gen,) = lm.generate([context], GenerationConfig(max_new_tokens=max_new_tokens, stop=env.stop))
        lps = [-0.25] * len(gen.token_ids) if logprobs else None
        return Sampled(token_ids=gen.token_ids, logprobs=lps, finish_reason=gen.finish_reason)

    traj = asyncio.run(
        run_token_episode(env, claim, tokenize_prompt=tokenize, generate=generate, encode=lm.encode,
                          decode=lm.decode, budget=budget)
    )
    return traj, calls


def test_same_tokens_and_masks_as_factrl_rollout():
    lm = ScriptedLM(respond)
    ours, calls = drive(lm, VeriR1Env(WordOverlapRetriever(PASSAGES)))
    (ref,) = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), [CLAIM], ScriptedLM(respond),
                          RolloutConfig(max_new_tokens=512))
    assert ours.error is None and ref.error is None
    assert ours.prompt == ref.prompt and ours.prompt_ids == ref.prompt_ids
    assert ours.completion_ids == ref.completion_ids
    assert ours.completion_mask == ref.completion_mask
    assert [t.source for t in ours.turns] == ["model", "env", "model"]
    assert ours.verdict == ref.verdict and ours.reward == ref.reward and ours.reward.total == 4.0
    assert ours.searches == ["Nile flows north"]
    # Each call continues exactly the ids so far (prompt + sampled + observation).
    assert calls[0][0] == ours.prompt_ids
    assert calls[1][0] == ours.prompt_ids + ours.turns[0].token_ids + ours.turns[1].token_ids
    assert [n for _, n in calls] == [512, 512]


def test_agent_loop_fields():
    lm = ScriptedLM(respond)
    traj, _ = drive(lm, VeriR1Env(WordOverlapRetriever(PASSAGES)))
    fields = agent_loop_fields(traj, response_length=10_000)
    model0, obs, model1 = traj.turns
    assert fields["prompt_ids"] == traj.prompt_ids
    assert fields["response_ids"] == model0.token_ids + obs.token_ids + model1.token_ids
    assert fields["response_mask"] == [1] * len(model0.token_ids) + [0] * len(obs.token_ids) + [1] * len(model1.token_ids)
    assert fields["response_logprobs"] == [-0.25] * len(model0.token_ids) + [0.0] * len(obs.token_ids) + [-0.25] * len(model1.token_ids)
    assert fields["num_turns"] == 4
    assert lm.decode([i for i, m in zip(fields["response_ids"], fields["response_mask"]) if m]) == GOOD[0] + GOOD[1]
    # Without logprobs from the server there are none to hand over.
    traj, _ = drive(ScriptedLM(respond), VeriR1Env(WordOverlapRetriever(PASSAGES)), logprobs=False)
    assert agent_loop_fields(traj, 10_000)["response_logprobs"] is None


def test_response_budget_bounds_every_turn_and_cuts_only_observations():
    lm = ScriptedLM(respond)
    first = len(lm.encode(GOOD[0]))
    budget = TokenBudget(max_turn_tokens=512, max_response_tokens=first + 20)
    traj, calls = drive(lm, VeriR1Env(WordOverlapRetriever(PASSAGES)), budget=budget)
    # The observation ran past the budget: no second model turn, nothing sampled was lost.
    assert [t.source for t in traj.turns] == ["model", "env"] and len(calls) == 1
    fields = agent_loop_fields(traj, budget.max_response_tokens)
    assert len(fields["response_ids"]) == budget.max_response_tokens
    assert fields["response_mask"] == [1] * first + [0] * 20
    assert traj.verdict.label is None and traj.reward.components["format"] == 0.0
    # A model turn is never asked for more than the room left.
    budget = TokenBudget(max_turn_tokens=40, max_response_tokens=30)
    traj, calls = drive(ScriptedLM(respond), VeriR1Env(WordOverlapRetriever(PASSAGES)), budget=budget)
    assert [n for _, n in calls] == [30] and len(traj.completion_ids) == 30
    assert traj.turns[0].finish_reason == "length"


class FailingRetriever:
    def search(self, queries, k):
        raise TimeoutError("retrieval server timed out")


def test_env_and_reset_failures_are_recorded_not_raised():
    traj, calls = drive(ScriptedLM(respond), VeriR1Env(FailingRetriever()))
    assert traj.error.startswith("env step failed: TimeoutError") and len(calls) == 1
    assert traj.verdict.format_ok is False and traj.reward.total == 0.0
    bad = Claim(id="empty", text="  ", label="SUPPORT")
    traj, calls = drive(ScriptedLM(respond), VeriR1Env(WordOverlapRetriever(PASSAGES)), claim=bad)
    assert traj.error.startswith("reset failed") and calls == [] and traj.prompt_ids == []


def test_shared_retriever_loads_an_index_once(tmp_path, monkeypatch):
    from factrl.retrieval.index import build_index

    corpus = Path(__file__).resolve().parents[2] / "fixtures" / "mini_corpus.jsonl"
    build_index(corpus, tmp_path / "idx", progress=False)
    monkeypatch.setattr(episode_mod, "_RETRIEVERS", {})
    first = shared_retriever(index=str(tmp_path / "idx"))
    assert shared_retriever(index=str(tmp_path / "idx")) is first
    assert first.search(["harbor lighthouse granite"], 1)[0][0].passage.doc_id == "lighthouse"
    with pytest.raises(ValueError, match="exactly one"):
        shared_retriever()
    with pytest.raises(ValueError, match="exactly one"):
        shared_retriever(url="http://127.0.0.1:1", index="x")
