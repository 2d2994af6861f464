"""The async driver's roles and batches (verl-free): each role goes to the model
configured for it, a role with none is refused, concurrent episodes are scored in one
reward call and a frozen role model gets their rows in one generate call."""

from __future__ import annotations

import asyncio

import pytest

from factrl.envs import EnvDeps, EnvSpec, build
from factrl.envs.veri_r1 import VeriR1Env
from factrl.lm.base import GenerationConfig
from factrl.lm.scripted import ScriptedLM
from factrl.rewards import build_reward
from factrl.rollout import RolloutConfig, run_episodes
from factrl.train.verl.batch import AsyncBatcher, ScoreBatcher
from factrl.train.verl.episode import Sampled, run_token_episode
from factrl.train.verl.roles import RoleError, check_roles, env_roles, lm_side
from factrl.types import Claim, EvidenceRef, Passage

from _support import WordOverlapRetriever

PASSAGES = [
    Passage(id="nile#0", doc_id="nile", title="Nile", text="The Nile is long. It flows north.",
            sentence_ids=["nile_0", "nile_1"], sentences=["The Nile is long.", "It flows north."]),
]
CLAIMS = [Claim(id=f"c{i}", text="The Nile flows north.", label="SUPPORT", evidence=[EvidenceRef(id="nile_1")])
          for i in range(3)]
QUESTION = "<think>I need the direction.</think>\n<question>Which direction does the Nile flow?</question>"
VERIFY = "<think>The report agrees.</think>\n<verification>The final verification is \\boxed{Support}</verification>"
SEARCH = "<think>Search it.</think>\n<search>Nile flows north</search>"
REPORT = "<think>Found it.</think>\n<report>The Nile flows north.</report>"


def reply(ctx: str) -> str:
    return ctx.split("<assistant>", 1)[1]


def reasoner() -> ScriptedLM:
    def respond(ctx: str) -> str:
        assert "gathering information" not in ctx, "a search-agent context reached the policy"
        return [QUESTION, VERIFY][min(reply(ctx).count("<result>"), 1)]
    return ScriptedLM(respond)


class ShiftedLM(ScriptedLM):
    """A scripted LM with its own tokenizer (ids are code points + 1000), so a context
    tokenised by the wrong model shows."""

    def encode(self, text):
        return [ord(ch) + 1000 for ch in text]

    def decode(self, ids):
        return "".join(chr(i - 1000) for i in ids if i >= 1000)


def searcher() -> ShiftedLM:
    def respond(ctx: str) -> str:
        assert "gathering information" in ctx, "a policy context reached the search agent's model"
        return [SEARCH, REPORT][min(reply(ctx).count("<result>"), 1)]
    return ShiftedLM(respond)


def haris():
    return build(EnvSpec(name="haris"), EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))


def policy_calls(lm: ScriptedLM, roles_seen: list[str]):
    async def tokenize(messages):
        return lm.chat_prompt_ids(messages)

    async def generate(request):
        roles_seen.append(request.role)
        (gen,) = lm.generate([request.context], GenerationConfig(max_new_tokens=request.max_new_tokens,
                                                                 stop=request.stop, temperature=0))
        return Sampled(token_ids=gen.token_ids, logprobs=[-0.1] * len(gen.token_ids), finish_reason=gen.finish_reason)

    return {"tokenize_prompt": tokenize, "generate": generate, "encode": lm.encode, "decode": lm.decode}


def drive(env, claim, roles, *, policy=None, roles_seen=None, **kw):
    lm = policy or reasoner()
    return run_token_episode(env, claim, **policy_calls(lm, roles_seen if roles_seen is not None else []),
                             roles=roles, **kw)


def test_each_role_goes_to_its_own_model_as_the_batched_runner_does():
    seen: list[str] = []
    ours = asyncio.run(drive(haris(), CLAIMS[0], {"searcher": lm_side(searcher(), temperature=0)}, roles_seen=seen))
    (ref,) = run_episodes(haris, [CLAIMS[0]], reasoner(), RolloutConfig(temperature=0), lms={"searcher": searcher()})
    assert ours.error is None and ref.error is None
    assert set(seen) == {"policy"} and len(seen) == 2  # the question and the verification
    assert ours.verdict == ref.verdict and ours.reward.total == ref.reward.total == 1.0
    assert ours.prompt_ids == ref.prompt_ids and ours.completion_ids == ref.completion_ids
    (seg,), (ref_seg,) = ours.segments, ref.segments
    assert seg.role == "searcher" and seg.prompt_ids == ref_seg.prompt_ids
    assert min(seg.prompt_ids) >= 1000  # tokenised by the search agent's own model
    assert [t.token_ids for t in seg.turns] == [t.token_ids for t in ref_seg.turns]
    assert all(i >= 1000 for t in seg.turns for i in t.token_ids)


def test_a_role_without_a_model_is_refused_clearly():
    assert env_roles(haris()) == {"searcher"}
    assert env_roles(VeriR1Env(WordOverlapRetriever(PASSAGES))) == set()
    assert env_roles(build(EnvSpec(name="profact"), EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))) == {"search"}
    released = build(EnvSpec(name="haris", params={"convention": "released"}),
                     EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))
    assert env_roles(released) == {"searcher"}
    check_roles(haris(), ["searcher"])
    with pytest.raises(RoleError, match=r"haris environment asks for the role 'searcher', which has no model"):
        check_roles(haris(), [])
    # mid-episode too: the policy never plays a role it was not given
    seen: list[str] = []
    with pytest.raises(RoleError, match="'searcher', which has no model.*roles with a model: policy"):
        asyncio.run(drive(haris(), CLAIMS[0], {}, roles_seen=seen))
    assert seen == ["policy"]


class CountingReward:
    """A reward that records the size of every batch it scores."""

    def __init__(self, name: str) -> None:
        self.inner = build_reward(name)
        self.name, self.components = self.inner.name, self.inner.components
        self.batches: list[int] = []

    def score(self, trajectories):
        self.batches.append(len(trajectories))
        return self.inner.score(trajectories)


def test_concurrent_episodes_are_scored_in_one_reward_call():
    one_by_one = [asyncio.run(drive(haris(), c, {"searcher": lm_side(searcher(), temperature=0)})) for c in CLAIMS]
    reward = CountingReward("haris_high")

    async def main():
        scorer = ScoreBatcher(reward, max_batch=len(CLAIMS), window=5.0)
        side = lm_side(searcher(), temperature=0)
        return await asyncio.gather(*(drive(haris(), c, {"searcher": side}, scorer=scorer) for c in CLAIMS))

    batched = asyncio.run(main())
    assert reward.batches == [len(CLAIMS)]
    assert [t.reward for t in batched] == [t.reward for t in one_by_one]
    assert [t.claim_id for t in batched] == [c.id for c in CLAIMS]


def test_a_frozen_role_model_gets_the_rows_of_concurrent_episodes_in_one_call():
    lm = searcher()

    async def main():
        side = lm_side(lm, temperature=0, max_batch=len(CLAIMS), window=5.0)
        return await asyncio.gather(*(drive(haris(), c, {"searcher": side}) for c in CLAIMS))

    trajs = asyncio.run(main())
    assert all(t.error is None and t.verdict.label is not None for t in trajs)
    # two search-agent turns per episode (search, report): two calls of three rows each
    assert lm.calls == 2


def test_a_failed_row_of_a_role_model_fails_that_episode_only():
    class Flaky(ShiftedLM):
        def generate(self, prompts, config):
            raise ConnectionError("the judge server is down")

    traj = asyncio.run(drive(haris(), CLAIMS[0], {"searcher": lm_side(Flaky(lambda c: ""), temperature=0)}))
    assert traj.error == "generate failed (searcher): ConnectionError: the judge server is down"
    assert traj.reward is not None and traj.reward.total == 0.0


def test_async_batcher_orders_results_and_fails_items_alone():
    calls: list[list[int]] = []

    def square(items):
        calls.append(list(items))
        if 13 in items:
            raise ValueError("unlucky batch")
        return [ValueError(f"odd {x}") if x == 3 else x * x for x in items]

    async def main(values, **kw):
        b = AsyncBatcher(square, **kw)
        return await asyncio.gather(*(b.submit(v) for v in values), return_exceptions=True), b

    out, b = asyncio.run(main([1, 2, 3, 4, 5], max_batch=2, window=5.0))
    assert out[:2] == [1, 4] and str(out[2]) == "odd 3" and out[3:] == [16, 25]
    # batches of at most two, one running at a time; the last one waits for the window
    # unless the running batch's end picks it up
    assert b.batches[:2] == [2, 2] and sum(b.batches) == 5 and max(b.batches) <= 2
    out, _ = asyncio.run(main([12, 13], max_batch=8, window=0.01))
    assert [str(e) for e in out] == ["unlucky batch", "unlucky batch"]
    with pytest.raises(ValueError, match="max_batch >= 1"):
        AsyncBatcher(square, max_batch=0)
