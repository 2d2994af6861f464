"""The trained verifier as Binary RAR's reward and long-form judge and as HARIS's
low-level judge (a keyword stand-in with the cross-encoder's interface)."""

from __future__ import annotations

import json

import pytest

from _support import KeywordVerifier
from factrl.envs import build
from factrl.lm.scripted import ScriptedLM
from factrl.rewards import RewardDeps, RewardSpec, build_reward
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, Trajectory, Verdict

NILE = [{"id": "nile", "title": "Nile", "text": "The Nile flows north into the Mediterranean Sea."},
        {"id": "myth", "title": "Myths", "text": "The Nile does not flow south."}]


def rar_episodes(responses, reward):
    claims = [Claim(id=f"p{i}", text="Tell me about the Nile.", meta={"kind": "long", "documents": NILE})
              for i in range(len(responses))]
    it = iter(responses)
    return run_episodes(lambda: build("rar"), claims, ScriptedLM(lambda ctx: next(it)),
                        RolloutConfig(temperature=0, batch_size=8), reward=reward)


def test_rar_reward_with_a_cross_encoder_scores_contradictions_per_sentence():
    v = KeywordVerifier()
    reward = build_reward(RewardSpec(name="rar", params={"k": 2}), RewardDeps(lms={"verifier": v}))
    trajs = rar_episodes(["The Nile flows north. Mediterranean water is salty.", "Cairo is big."], reward)
    # the second document says "not": every sentence read against it is a contradiction
    assert [t.reward.total for t in trajs] == [0.0, 0.0]
    assert all(t.reward.components["verifier_failed"] == 0.0 for t in trajs)
    # each response sentence was read against each of the k chunks, titles first
    assert ("The Nile flows north.", "Myths: The Nile does not flow south.") in v.calls
    assert len([c for c in v.calls if c[0] == "Cairo is big."]) == 2


def test_rar_refute_threshold_parameter_and_rating_variant():
    v = KeywordVerifier()
    strict = build_reward(RewardSpec(name="rar", params={"k": 2, "refute_threshold": 0.95}),
                          RewardDeps(lms={"verifier": v}))
    assert [t.reward.total for t in rar_episodes(["The Nile flows north."], strict)] == [1.0]
    rating = build_reward(RewardSpec(name="rar_rating", params={"k": 2}), RewardDeps(lms={"verifier": v}))
    (t,) = rar_episodes(["The Nile flows north."], rating)
    assert t.reward.total == pytest.approx(0.1)  # round(10 * (1 - 0.9)) / 10
    with pytest.raises(ValueError, match="refute_threshold"):
        build_reward(RewardSpec(name="rar", params={"refute_threshold": 2.0}))


def test_rar_long_form_judge_with_the_verifier(tmp_path):
    from factrl.metrics.rar_eval import write_rar_metrics

    v = KeywordVerifier()
    reward = build_reward(RewardSpec(name="rar", params={"k": 2}), RewardDeps(lms={"verifier": v}))
    trajs = rar_episodes(["The Nile flows north. Pyramids stand in Giza."], reward)
    policy = ScriptedLM(lambda ctx: "unused")
    summary = write_rar_metrics(tmp_path, trajs, lms={"policy": policy, "judge": v}, reward=reward,
                                params={"extract": "sentences"})
    assert summary["judge"] == "verifier (cross-encoder)"
    lf = summary["long_form"]
    assert lf["unjudged_claims"] == 0 and lf["scored_responses"] == 1
    # the Nile sentence meets the "not" document; nothing is retrieved for the Giza one
    assert lf["contradiction_rate"] == pytest.approx(0.5) and lf["hallucination_rate"] == pytest.approx(1.0)
    detail = json.loads((tmp_path / "hallucination_per_prompt.jsonl").read_text().splitlines()[0])
    assert [c["support"] for c in detail["claims"]] == ["contradicted", "unsupported"]



def test_the_released_convention_refuses_a_cross_encoder(tmp_path):
    """The released convention reads an LM's answer to the released prompt: with the
    cross-encoder as verifier or judge it is a clear error, not a crash inside."""
    from factrl.metrics.rar_eval import write_rar_metrics

    v = KeywordVerifier()
    released = build_reward(RewardSpec(name="rar", params={"k": 2, "convention": "released"}),
                            RewardDeps(lms={"verifier": v}))
    claim = Claim(id="p0", text="Tell me about the Nile.", meta={"kind": "long", "documents": NILE})
    traj = Trajectory(claim_id="p0", env="rar", claim=claim, prompt=[], verdict=Verdict(format_ok=True, answered=True))
    with pytest.raises(ValueError, match="convention = 'paper'"):
        released.score([traj])
    paper = build_reward(RewardSpec(name="rar", params={"k": 2}), RewardDeps(lms={"verifier": v}))
    trajs = rar_episodes(["The Nile flows north."], paper)
    with pytest.raises(ValueError, match="convention=paper"):
        write_rar_metrics(tmp_path, trajs, lms={"policy": ScriptedLM(lambda ctx: "unused"), "judge": v},
                          reward=paper, params={"convention": "released"})

def test_haris_low_judged_by_the_verifier():
    q = Claim(id="q1", text="Which direction does the Nile flow?", label="SUPPORT", meta={"pseudo_answer": "north"})

    def traj(report):
        return Trajectory(claim_id="q1", env="haris_searcher", claim=q, prompt=[],
                          verdict=Verdict(format_ok=True, answered=True), meta={"report": report})

    v = KeywordVerifier()
    reward = build_reward(RewardSpec(name="haris_low"), RewardDeps(lms={"judge": v}))
    rbs = reward.score([traj("The Nile river flows north to the sea."), traj("Rain fell in Paris.")])
    assert [rb.total for rb in rbs] == [1.0, pytest.approx(0.1)]
    assert [rb.components["judge_failed"] for rb in rbs] == [0.0, 0.0]
    assert v.calls[0] == ("Which direction does the Nile flow? north", "The Nile river flows north to the sea.")


def test_haris_low_verifier_parameter_loads_by_name(monkeypatch):
    import factrl.verifier.asset as asset

    v = KeywordVerifier()
    monkeypatch.setattr(asset, "load_verifier", lambda name, **kw: v if name == "factrl-verifier" else None)
    reward = build_reward(RewardSpec(name="haris_low", params={"verifier": "factrl-verifier"}))
    assert reward.judge is v
