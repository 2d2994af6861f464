"""The scoring stage: rewards built by name with parameters and dependencies, scored in
batches; a reward may call an LM through the text-level LM protocol (as an LM verifier
or judge does)."""

import pytest

from factrl.lm.scripted import ScriptedLM
from factrl.registry import RegistryError
from factrl.rewards import REWARDS, RewardDeps, RewardSpec, build_reward, score_trajectories
from factrl.types import Claim, RewardBreakdown, Trajectory, Verdict


def traj(i, label="SUPPORT"):
    claim = Claim(id=f"c{i}", text=f"claim {i}", label=label)
    return Trajectory(claim_id=claim.id, env="toy", claim=claim, prompt=[],
                      verdict=Verdict(label=label, answered=True, format_ok=True))


class JudgeReward:
    """Asks a judge LM, once per batch of trajectories, whether each verdict holds."""

    name = "judge_test"
    components = ("judge",)
    diagnostics = ()
    lm_roles = ("judge",)  # the Reward protocol: the LMs it asks for

    def __init__(self, judge=None):
        self.judge = judge

    def score(self, trajectories):
        from factrl.lm.base import GenerationConfig
        from factrl.types import Message

        convs = [[Message(role="user", content=f"Is '{t.claim.text}' true?")] for t in trajectories]
        gens = self.judge.complete(convs, GenerationConfig(max_new_tokens=8, temperature=0.0))
        return [RewardBreakdown(components={"judge": float(g.text.startswith("yes"))},
                                total=float(g.text.startswith("yes"))) for g in gens]

    def configure(self, params, deps=None):
        return JudgeReward(judge=(deps.lms["judge"] if deps else None), **params)


if "judge_test" not in REWARDS:
    REWARDS.register("judge_test")(JudgeReward())


def test_a_reward_calls_its_lm_in_one_batch():
    judge = ScriptedLM(lambda ctx: "yes" if "claim 1" in ctx or "claim 3" in ctx else "no")
    reward = build_reward("judge_test", RewardDeps(lms={"judge": judge}))
    trajs = score_trajectories(reward, [traj(i) for i in range(4)])
    assert [t.reward.total for t in trajs] == [0.0, 1.0, 0.0, 1.0]
    assert judge.calls == 1


def test_parameters_reach_the_reward_and_bad_ones_are_named():
    base = build_reward("veri_r1")
    assert base is REWARDS.get("veri_r1")
    ablation = build_reward(RewardSpec(name="veri_r1", params={"use_validity": False}))
    assert ablation.config.use_validity is False and base.config.use_validity is True
    with pytest.raises(ValueError, match="veri_r1"):
        build_reward(RewardSpec(name="veri_r1", params={"no_such_setting": 1}))
    with pytest.raises(RegistryError, match="available"):
        build_reward("nope")


def test_unlabelled_claims_get_an_empty_breakdown():
    (t,) = score_trajectories(build_reward("veri_r1"), [traj(0, label=None)])
    assert t.reward == RewardBreakdown()


def test_a_reward_returning_the_wrong_count_is_an_error():
    class Short:
        name, components, diagnostics = "short", (), ()

        def score(self, trajectories):
            return []

    with pytest.raises(RuntimeError, match="0 scores for 2"):
        score_trajectories(Short(), [traj(0), traj(1)])
