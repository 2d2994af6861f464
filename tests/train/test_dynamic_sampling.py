"""Dynamic sampling: constant GRPO groups replaced by groups of other claims of their label."""

import json
import random

import pytest

from factrl.train.dynamic_sampling import ResampleCounts, constant_groups, resample_constant_groups
from factrl.envs.base import EpisodeResult, StepResult
from factrl.types import Claim, Message, RewardBreakdown, Trajectory, Verdict


def _claim(i, label):
    return Claim(id=f"c{i}", text=f"claim {i}", label=label)


def _traj(claim, total, reset_ok=True):
    return Trajectory(claim_id=claim.id, env="t", claim=claim, prompt=[Message(role="user", content="x")],
                      prompt_ids=[1] if reset_ok else [], reward=RewardBreakdown(total=total))


POOL = [_claim(i, "SUPPORT" if i % 2 else "REFUTE") for i in range(20)]


def _batch(claims, totals):
    starts = [c for c in claims for _ in range(2)]
    return [_traj(c, t) for c, t in zip(starts, totals)], starts


def test_constant_groups_reads_totals_and_counts_a_failed_reset_as_zero():
    a, b = POOL[1], POOL[2]
    trajs = [_traj(a, 1.0), _traj(a, 1.0), _traj(b, 0.0), _traj(b, 0.5, reset_ok=False)]
    assert constant_groups(trajs, 2) == [0, 1]
    with pytest.raises(ValueError, match="groups of 3"):
        constant_groups(trajs, 3)


def _scored(claim, total, **components):
    return Trajectory(claim_id=claim.id, env="t", claim=claim, prompt=[Message(role="user", content="x")],
                      prompt_ids=[1], reward=RewardBreakdown(total=total, components=components))


def test_resample_on_a_component_counts_format_only_variation_as_constant():
    a, b = POOL[1], POOL[2]
    # group 0: totals vary by format alone (both wrong); group 1: one right, one wrong
    trajs = [_scored(a, 0.1, label_correct=0.0, format=1.0), _scored(a, 0.0, label_correct=0.0, format=0.0),
             _scored(b, 1.0, label_correct=1.0, format=1.0), _scored(b, 0.1, label_correct=0.0, format=1.0)]
    assert constant_groups(trajs, 2) == []
    assert constant_groups(trajs, 2, "label_correct") == [0]
    # the first named component the reward has (HARIS's searcher says "useful", not "label_correct")
    searcher = [_scored(a, 1.0, useful=1.0), _scored(a, 0.0, useful=0.0)]
    assert constant_groups(searcher, 2, "label_correct,useful") == []
    with pytest.raises(ValueError, match="none of these components.*useful"):
        constant_groups(searcher, 2, "label_correct")
    # a replacement must vary in the component too
    out, counts = resample_constant_groups(
        trajs, [a, a, b, b], 2, POOL, 1, random.Random(0),
        lambda claims: [_scored(c, float(k % 2), label_correct=float(k % 2)) for k, c in enumerate(claims)],
        "label_correct")
    assert counts.replaced == 1 and out[0].claim_id != a.id and out[2:] == trajs[2:]


def test_a_constant_group_takes_the_first_varying_replacement_of_its_label():
    trajs, starts = _batch([POOL[1], POOL[2]], [0.0, 0.0, 0.0, 1.0])  # group 0 (SUPPORT) constant
    calls = []

    def rollout(claims):
        calls.append([c.id for c in claims])
        n = len(calls)  # the first try is constant again, the second varies
        return [_traj(c, 0.0 if n == 1 else float(k % 2)) for k, c in enumerate(claims)]

    out, counts = resample_constant_groups(trajs, starts, 2, POOL, 3, random.Random(0), rollout)
    assert len(calls) == 2 and all(len(set(ids)) == 1 and len(ids) == 2 for ids in calls)
    drawn = [ids[0] for ids in calls]
    assert len(set(drawn)) == 2 and not {"c1", "c2"} & set(drawn)  # neither the batch's claims nor a repeat
    assert all(next(c for c in POOL if c.id == i).label.value == "SUPPORT" for i in drawn)
    assert [t.claim_id for t in out[:2]] == [drawn[1]] * 2 and [t.reward.total for t in out[:2]] == [0.0, 1.0]
    assert out[2:] == trajs[2:]  # the varying group is untouched
    assert (counts.groups, counts.constant, counts.tried, counts.replaced, counts.left) == (2, 1, 2, 1, 0)


def test_slots_no_try_fills_keep_their_group_and_are_counted():
    trajs, starts = _batch([POOL[1], POOL[2]], [1.0, 1.0, 0.0, 0.0])
    out, counts = resample_constant_groups(trajs, starts, 2, POOL, 2, random.Random(0),
                                           lambda claims: [_traj(c, 1.0) for c in claims])
    assert out == trajs
    assert (counts.constant, counts.tried, counts.replaced, counts.left) == (2, 4, 0, 2)
    logged = counts.take()
    assert logged == {"groups/constant_before": 1.0, "groups/constant_after": 1.0, "groups/resampled": 4.0,
                      "groups/replaced": 0.0}
    assert counts.take() == {}  # reset by take


def test_no_tries_or_no_claim_left_of_the_label_rolls_nothing_out():
    trajs, starts = _batch([POOL[1]], [0.0, 0.0])

    def never(claims):
        raise AssertionError("no rollout expected")

    assert resample_constant_groups(trajs, starts, 2, POOL, 0, random.Random(0), never)[0] == trajs
    only = [POOL[1], POOL[2]]  # no other SUPPORT claim
    out, counts = resample_constant_groups(trajs, starts, 2, only, 3, random.Random(0), never)
    assert out == trajs and counts.left == 1 and counts.tried == 0


def test_the_draws_are_seeded():
    trajs, starts = _batch([POOL[1], POOL[2]], [0.0, 0.0, 1.0, 1.0])

    def draws(seed):
        seen = []
        resample_constant_groups(trajs, starts, 2, POOL, 2, random.Random(seed),
                                 lambda claims: seen.extend(c.id for c in claims) or [_traj(c, 0.0) for c in claims])
        return seen

    assert draws(5) == draws(5) and len(draws(5)) == 8


def test_counts_add_up():
    a = ResampleCounts(groups=4, constant=2, tried=2, replaced=1, left=1)
    a.add(ResampleCounts(groups=4, constant=1, tried=1, replaced=1, left=0))
    assert a.take() == {"groups/constant_before": 3 / 8, "groups/constant_after": 1 / 8, "groups/resampled": 3.0,
                        "groups/replaced": 2.0}


# -- in the trainer: a tiny model whose reward is constant on some claims ----------------
torch = pytest.importorskip("torch")
pytest.importorskip("trl")

FLAT = frozenset({"t1", "t3", "t2", "t4", "t5"})  # claims whose reward never varies


class TalkEnv:
    """One turn; the episode ends after the model's text."""

    name = "talk_test"
    stop = ("</answer>",)
    max_turns = 1
    default_reward = "flat_on_some_test"

    def __init__(self, deps=None):
        pass

    def reset(self, claim):
        return [Message(role="user", content=f"Talk about: {claim.text}")]

    def step(self, text):
        return StepResult(observation=None, done=True)

    def result(self):
        return EpisodeResult(verdict=Verdict())

    def parse_verdict(self, text):
        return Verdict()


def test_the_trainer_replaces_constant_groups_and_logs_it(tmp_path):
    from factrl.lm.tiny import build_tiny_model
    from factrl.rewards.base import REWARDS
    from factrl.train.callbacks import read_metrics
    from factrl.train.config import load_run_config
    from factrl.train.grpo import train_grpo

    from factrl.envs.base import ENVS

    from _support import REPO, VowelReward

    if "flat_on_some_test" not in REWARDS:
        REWARDS.register("flat_on_some_test")(VowelReward("flat_on_some_test", flat=FLAT))
        ENVS.register("talk_test")(TalkEnv)
    model = build_tiny_model(tmp_path / "tiny", layers=2, hidden=64, heads=4)
    common = {"model.id": str(model), "data.data_dir": str(REPO / "tests" / "fixtures" / "tiny_claims.jsonl"),
              "env.name": "talk_test", "reward.name": "flat_on_some_test", "grpo.max_steps": 4, "grpo.save_steps": 10}

    def run(name, tries):
        cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml",
                              {**common, "output_dir": str(tmp_path / name), "grpo.resample_constant": tries})
        train_grpo(cfg)
        return [r for r in read_metrics(tmp_path / name / "metrics.jsonl") if "loss" in r]

    on, off = run("on", 3), run("off", 0)
    assert all("groups/constant_before" not in r for r in off)
    before = sum(r["groups/constant_before"] for r in on)
    assert before > 0  # some batches held a flat claim's group
    assert sum(r["groups/replaced"] for r in on) >= 1
    # TRL measures the batch it trains on: no more constant groups than before replacement
    assert all(r["frac_reward_zero_std"] == pytest.approx(r["groups/constant_after"]) for r in on)
    assert sum(r["groups/constant_after"] for r in on) < before
    assert json.loads((tmp_path / "on" / "config.json").read_text())["grpo"]["resample_constant"] == 3


def test_config_refuses_a_bad_resample_constant():
    from factrl.train.config import load_run_config

    from _support import REPO

    with pytest.raises(ValueError, match="resample_constant"):
        load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml", {"grpo.resample_constant": -1})
    with pytest.raises(ValueError, match="resample_on"):
        load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml", {"grpo.resample_on": " "})
    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml", {"grpo.resample_on": "label_correct,useful"})
    assert cfg.grpo.resample_on == "label_correct,useful"
