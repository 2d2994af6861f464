"""Binary RAR's reward on scripted verifier answers: 1/0 from the verifier, the evidence
it was shown, parse failures counted (never silently 0), the rating variant."""

import json

import pytest

from factrl.envs import build
from factrl.lm.scripted import ScriptedLM
from factrl.retrieval.pools import EvidencePools
from factrl.rewards import REWARDS, RewardDeps, build_reward, score_trajectories
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, Hit, Passage

NILE = [{"id": "nile", "title": "Nile", "text": "The Nile flows north into the Mediterranean Sea."},
        {"id": "paris", "title": "Paris", "text": "Paris is the capital of France."}]


def prompt(pid="p1", text="Tell me about the Nile.", documents=NILE, **meta):
    return Claim(id=pid, text=text, meta={"kind": "long", "documents": documents, **meta})


def episodes(responses, claims=None, reward=None):
    """One ``rar`` episode per response (scripted policy), scored by ``reward``."""
    claims = claims or [prompt()] * len(responses)
    it = iter(responses)
    return run_episodes(lambda: build("rar"), claims, ScriptedLM(lambda ctx: next(it)),
                        RolloutConfig(temperature=0, batch_size=8), reward=reward, score=reward is not None)


class Verifier(ScriptedLM):
    """Answers by a rule on the verifier prompt; records every prompt it saw."""

    def __init__(self, rule):
        self.seen = []

        def respond(ctx):
            self.seen.append(ctx)
            return rule(ctx.split(">>> Begin of the response <<<")[1].split("<<< End of the response >>>")[0])

        super().__init__(respond)


def rar(rule, **params):
    v = Verifier(rule)
    return build_reward("rar" if not params.pop("rating", False) else "rar_rating", RewardDeps(lms={"verifier": v})
                        ).configure(params), v


def binary(score):
    return json.dumps({"REASONING": "r", "SCORE": score})


def test_verifier_answers_become_the_binary_reward():
    reward, v = rar(lambda resp: binary(0) if "south" in resp else binary(1))
    trajs = episodes(["The Nile flows south.", "The Nile is in Africa.", "The Nile flows north."], reward=reward)
    assert [t.reward.total for t in trajs] == [0.0, 1.0, 1.0]
    assert trajs[0].reward.components == {"no_contradiction": 0.0, "verifier_failed": 0.0, "empty_response": 0.0,
                                          "episode_error": 0.0, "nonstop": 0.0, "total": 0.0}
    assert reward.components == ("no_contradiction",)
    # one pass per response, with the paper's prompt, the prompt and the response
    assert len(v.seen) == 3
    assert "Tell me about the Nile." in v.seen[0] and "The Nile flows south." in v.seen[0]


def test_evidence_is_the_top_k_bm25_chunks_of_the_prompts_documents():
    reward, v = rar(lambda resp: binary(1), k=1)
    episodes(["The Nile flows into the Mediterranean."], reward=reward)
    shown = v.seen[0].split(">>> Begin of search results <<<")[1].split("<<< End of search results >>>")[0]
    assert "[1] Nile: The Nile flows north into the Mediterranean Sea." in shown
    assert "Paris" not in shown and "[2]" not in shown  # k=1
    # chunking: 512 tokens by default; a small chunk size cuts documents (ids doc#j)
    small, _ = rar(lambda resp: binary(1), chunk_tokens=4)
    traj = episodes(["x"], reward=None)[0]
    hits = small.evidence(traj, "Nile north sea", k=8)
    # the Nile document in two chunks of <= 4 tokens; Paris shares no word with the query
    assert [p.id for p in hits] in (["nile#0", "nile#1"], ["nile#1", "nile#0"])
    assert all(len(p.text.split()) <= 4 for p in hits)


def test_a_pools_file_or_a_retriever_gives_evidence_and_none_is_an_error(tmp_path):
    pools = EvidencePools()
    pools.add("p1", [{"id": "x", "text": "Pooled text about the Nile."}])
    pools.save_jsonl(tmp_path / "pools.jsonl")
    reward, v = rar(lambda resp: binary(1), pools=str(tmp_path / "pools.jsonl"))
    episodes(["Nile."], claims=[prompt(documents=[])], reward=reward)
    assert "Pooled text about the Nile." in v.seen[0]

    class OneHit:
        def search(self, queries, k):
            return [[Hit(Passage(id="r#0", doc_id="r", text="Retrieved passage."), 1.0)] for _ in queries]

    v2 = Verifier(lambda resp: binary(1))
    reward2 = build_reward("rar", RewardDeps(retriever=OneHit(), lms={"verifier": v2}))
    episodes(["Nile."], claims=[prompt(documents=[])], reward=reward2)
    assert "Retrieved passage." in v2.seen[0]

    reward3, _ = rar(lambda resp: binary(1))
    trajs = episodes(["Nile."], claims=[prompt(pid="bare", documents=[])], reward=None)
    with pytest.raises(ValueError, match="prompt 'bare' has no documents to verify against"):
        score_trajectories(reward3, trajs)


def test_parse_failures_are_counted_and_add_no_advantage_in_their_group():
    answers = {"a": binary(1), "b": binary(0), "c": "I think it is fine", "d": '{"SCORE": 7}'}
    reward, _ = rar(lambda resp: answers[resp.strip().split()[0]])
    trajs = episodes(["a x", "b x", "c x", "d x"], reward=reward)
    totals = [t.reward.total for t in trajs]
    assert totals == [1.0, 0.0, 0.5, 0.5]  # failed rows get the group's parsed mean
    assert [t.reward.components["verifier_failed"] for t in trajs] == [0.0, 0.0, 1.0, 1.0]
    # other policies
    for policy, fill in (("zero", 0.0), ("one", 1.0)):
        r, _ = rar(lambda resp: answers[resp.strip().split()[0]], on_parse_failure=policy)
        assert [t.reward.total for t in episodes(["a x", "c x"], reward=r)] == [1.0, fill]
    # a prompt whose every verification failed: a constant, flagged
    r, _ = rar(lambda resp: "nonsense")
    trajs = episodes(["a", "b"], reward=r)
    assert [t.reward.total for t in trajs] == [0.0, 0.0]
    assert all(t.reward.components["verifier_failed"] == 1.0 for t in trajs)
    with pytest.raises(ValueError, match="on_parse_failure"):
        build_reward("rar").configure({"on_parse_failure": "guess"})
    with pytest.raises(ValueError, match="unknown parameter"):
        from factrl.rewards import RewardSpec
        build_reward(RewardSpec(name="rar", params={"topk": 3}))


def test_group_mean_is_taken_per_prompt():
    claims = [prompt("p1"), prompt("p1"), prompt("p2"), prompt("p2")]
    rule = {"x": binary(0), "y": binary(1), "z": "??"}
    reward, _ = rar(lambda resp: rule[resp.strip()])
    trajs = episodes(["x", "z", "y", "z"], claims=claims, reward=reward)
    assert [t.reward.total for t in trajs] == [0.0, 0.0, 1.0, 1.0]


def test_empty_responses_and_failed_episodes_score_0_without_a_verifier_call():
    reward, v = rar(lambda resp: binary(1))
    trajs = episodes(["<think>only thinking</think>", "fine"], reward=reward)
    assert [t.reward.total for t in trajs] == [0.0, 1.0]
    assert trajs[0].reward.components["empty_response"] == 1.0 and len(v.seen) == 1
    assert not trajs[0].verdict.answered and trajs[0].verdict.format_errors == ["no answer: empty response"]
    failed = episodes(["x"], claims=[Claim(id="e", text="   ")], reward=None)
    assert failed[0].error is not None
    score_trajectories(reward, failed)
    assert failed[0].reward.total == 0.0 and failed[0].reward.components["episode_error"] == 1.0


def test_the_verifier_reads_the_response_without_its_reasoning_trace():
    reward, v = rar(lambda resp: binary(1))
    episodes(["<think>The Nile flows south, or not?</think>The Nile flows north."], reward=reward)
    response = v.seen[0].split(">>> Begin of the response <<<")[1]
    assert "flows north" in response and "south" not in response


def test_rating_variant_scales_0_to_10_into_0_to_1():
    reward, v = rar(lambda resp: json.dumps({"REASONING": "r", "SCORE": int(resp.strip())}), rating=True)
    trajs = episodes(["0", "7", "10"], reward=reward)
    assert [t.reward.total for t in trajs] == [0.0, 0.7, 1.0]
    assert reward.components == ("rating",) and reward.name == "rar_rating"
    assert "CONFIDENCE SCORING GUIDE" in v.seen[0]


def test_without_a_verifier_the_reward_says_how_to_give_one():
    trajs = episodes(["x"], reward=None)
    with pytest.raises(RuntimeError, match="needs a verifier LM"):
        score_trajectories(REWARDS.get("rar"), trajs)


def test_choice_mode_scores_the_two_answers_instead_of_generating():
    class Scorer(Verifier):
        def score_choices(self, conversation, choices):
            self.seen.append(conversation[0].content)
            return [-1.0, -3.0] if "north" in conversation[0].content.split("Begin of the response")[1] else [-4.0, -2.0]

    v = Scorer(lambda resp: pytest.fail("choice mode must not generate"))
    reward = build_reward("rar", RewardDeps(lms={"verifier": v})).configure({"mode": "choice"})
    trajs = episodes(["The Nile flows north.", "The Nile flows south."], reward=reward)
    assert [t.reward.total for t in trajs] == [1.0, 0.0] and len(v.seen) == 2
    assert all(t.reward.components["verifier_failed"] == 0.0 for t in trajs)


def test_a_response_that_never_stops_is_penalised_without_a_verifier_call():
    """App. A.5: the non-stop sequence penalty — a response cut at the token budget (no
    EOS) scores 0, whatever the verifier would say."""
    reward, v = rar(lambda resp: binary(1))
    claims = [prompt()] * 2
    it = iter(["The Nile flows north.", "The Nile flows north and on and on"])
    trajs = run_episodes(lambda: build("rar"), claims, ScriptedLM(lambda ctx: next(it)),
                         RolloutConfig(temperature=0, batch_size=8, max_new_tokens=25), reward=reward)
    assert [t.turns[-1].finish_reason for t in trajs] == ["eos", "length"]
    assert [t.reward.total for t in trajs] == [1.0, 0.0]
    assert trajs[1].reward.components["nonstop"] == 1.0 and trajs[0].reward.components["nonstop"] == 0.0
    assert len(v.seen) == 1  # only the finished response was verified
    assert "nonstop" in reward.diagnostics
    off, v = rar(lambda resp: binary(1), nonstop_penalty=False)
    (t,) = score_trajectories(off, [trajs[1]])
    assert t.reward.total == 1.0 and len(v.seen) == 1


def test_training_keeps_prompts_with_at_least_three_documents(tmp_path):
    """App. C: instances with fewer than three documents are discarded."""
    three = NILE + [{"id": "nile2", "title": "Nile", "text": "The Nile is long."}]
    claims = [prompt("p3", documents=three), prompt("p2", documents=NILE), prompt("p0", documents=[]),
              prompt("px", documents=None)]
    reward, _ = rar(lambda resp: binary(1))
    assert reward.min_documents == 3
    assert [c.id for c in reward.training_claims(claims)] == ["p3"]
    assert [c.id for c in reward.configure({"min_documents": 2}).training_claims(claims)] == ["p3", "p2"]
    # a pools file counts its own documents; a retriever (a whole datastore) keeps every prompt
    pools = EvidencePools()
    pools.add("px", three)
    pools.save_jsonl(tmp_path / "pools.jsonl")
    with_pools = reward.configure({"pools": str(tmp_path / "pools.jsonl")})
    assert [c.id for c in with_pools.training_claims(claims)] == ["p3", "px"]

    class Store:
        def search(self, queries, k):
            return [[] for _ in queries]

    from_store = reward.configure({}, RewardDeps(retriever=Store()))
    assert [c.id for c in from_store.training_claims(claims)] == ["p3", "p0", "px"]
    with pytest.raises(ValueError, match="no training prompt has at least 3 documents"):
        reward.training_claims(claims[1:])


def test_evaluation_evidence_has_its_own_k_and_chunking():
    """The hallucination evaluation retrieves the top-10 chunks of 100 words per claim
    (App. B.1), not the reward's 8 chunks of 512 tokens."""
    long_doc = [{"id": "big", "title": "Nile", "text": " ".join(f"Nile fact number {i} is here." for i in range(300))}]
    reward, _ = rar(lambda resp: binary(1))
    traj = episodes(["x"], claims=[prompt(documents=long_doc)])[0]
    train_side = reward.evidence(traj, "Nile fact number")
    assert len(train_side) == 4 and max(len(p.text.split()) for p in train_side) > 100  # 1,800 words in 512-word chunks
    evaluation = reward.with_evidence(k=10, chunk_tokens=100)
    shown = evaluation.evidence(traj, "Nile fact number")
    assert len(shown) == 10 and all(len(p.text.split()) <= 100 for p in shown)
    assert (reward.k, reward.chunk_tokens) == (8, 512)  # the reward itself is unchanged
