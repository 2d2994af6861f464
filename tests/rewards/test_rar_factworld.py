"""Binary RAR's reward with the exact factworld verifier: a response scores 0 when any of
its sentences is contradicted by the (hand-written) world, else 1; no LM is called."""

import pytest

from factrl.envs import build
from factrl.lm.scripted import ScriptedLM
from factrl.rewards import REWARDS, RewardDeps, RewardSpec, build_reward
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim

from _factworld import write_hand_world

DOC = [{"id": "dara_velkun", "title": "Dara Velkun",
        "text": "Dara Velkun is a person. Dara Velkun was born in Korvath. Dara Velkun was born in 1901."}]


@pytest.fixture(scope="module")
def world_dir(tmp_path_factory):
    return write_hand_world(tmp_path_factory.mktemp("hand"))


def episodes(responses, reward):
    it = iter(responses)
    claims = [Claim(id=f"p{i}", text="Write a short biography of Dara Velkun.",
                    meta={"kind": "long", "documents": DOC}) for i in range(len(responses))]
    return run_episodes(lambda: build("rar"), claims, ScriptedLM(lambda ctx: next(it)),
                        RolloutConfig(temperature=0, batch_size=8), reward=reward, score=True)


def test_a_contradicted_sentence_costs_the_reward(world_dir) -> None:
    reward = build_reward(RewardSpec(name="rar_factworld", params={"world": str(world_dir)}))
    trajs = episodes([
        "Dara Velkun was born in Korvath. By profession, Dara Velkun was a painter.",   # all supported
        "Dara Velkun was born in Korvath. Dara Velkun was born in 1950.",               # one contradicted
        "Dara Velkun was a kind person who loved rivers.",                               # nothing checkable
        "Dara Velkun worked for Zorbatek.",                                              # unstated: not a contradiction
        "<think>Dara Velkun was born in Karvath?</think>Dara Velkun was born in Korvath.",  # the trace is not judged
        "The founder of Zorbatek was born in Karvath.",                                  # multi-hop, contradicted
        "",
        "Dara Velkun is a person.",                                                      # true, and says nothing asked
    ], reward)
    assert [t.reward.total for t in trajs] == [1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0]
    c = [t.reward.components for t in trajs]
    assert c[0] == {"no_contradiction": 1.0, "checked_sentences": 2.0, "supported_sentences": 2.0,
                    "supported_facts": 2.0, "contradicted_sentences": 0.0, "empty_response": 0.0,
                    "episode_error": 0.0, "total": 1.0}
    assert (c[7]["supported_sentences"], c[7]["supported_facts"]) == (1.0, 0.0)  # the type is no fact asked for
    assert (c[1]["supported_sentences"], c[1]["contradicted_sentences"]) == (1.0, 1.0)
    assert c[2]["checked_sentences"] == 0.0 and c[3]["checked_sentences"] == 1.0
    assert c[6]["empty_response"] == 1.0
    assert reward.components == ("no_contradiction",) and reward.lm_roles == ()
    assert set(reward.diagnostics) <= set(c[0])


def test_episode_errors_score_zero(world_dir) -> None:
    reward = build_reward(RewardSpec(name="rar_factworld", params={"world": str(world_dir)}))
    traj = episodes(["Dara Velkun was born in Korvath."], reward)[0]
    traj.error = "boom"
    assert reward(traj).components["episode_error"] == 1.0 and reward(traj).total == 0.0


def test_the_world_is_required_and_checked(world_dir, tmp_path) -> None:
    bare = REWARDS.get("rar_factworld")
    with pytest.raises(RuntimeError, match="needs the world: pass world=DIR"):
        episodes(["Dara Velkun was born in Korvath."], bare)
    with pytest.raises(ValueError, match="no factworld fact table"):
        build_reward(RewardSpec(name="rar_factworld", params={"world": str(tmp_path / "nowhere")}))
    with pytest.raises(ValueError, match="unknown parameter"):
        build_reward(RewardSpec(name="rar_factworld", params={"world": str(world_dir), "margin": 1}))


def test_evidence_for_the_hallucination_metrics_is_the_prompts_documents(world_dir) -> None:
    reward = build_reward(RewardSpec(name="rar_factworld", params={"world": str(world_dir), "k": 1}),
                          RewardDeps())
    traj = episodes(["Dara Velkun was born in Korvath."], reward)[0]
    (passage,) = reward.evidence(traj, "Where was Dara Velkun born?")
    assert passage.doc_id == "dara_velkun" and "Korvath" in passage.text


def test_the_hallucination_evaluation_reads_its_own_evidence_setting(world_dir, tmp_path) -> None:
    """``factrl eval --agent rar --reward rar_factworld`` judges atomic claims against the
    evaluation's evidence (top-10 chunks of 100 words by default), as with ``rar``."""
    from factrl.metrics.rar_eval import write_rar_metrics

    reward = build_reward(RewardSpec(name="rar_factworld", params={"world": str(world_dir)}), RewardDeps())
    traj = episodes(["Dara Velkun was born in Korvath."], reward)[0]
    small = reward.with_evidence(k=1, chunk_tokens=5)
    (passage,) = small.evidence(traj, "Where was Dara Velkun born?")
    assert len(passage.text.split()) <= 5 and reward.evidence_source.chunk_tokens == 512
    judge = ScriptedLM(lambda ctx: "supported")
    summary = write_rar_metrics(tmp_path, [traj], lms={"policy": judge}, reward=reward,
                                params={"extract": "sentences", "judge": "generate"})
    assert summary["evidence"] == {"k": 10, "chunk_words": 100} and summary["long_form"]["n_responses"] == 1
