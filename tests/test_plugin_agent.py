"""A second agent registered from this test file only — its own environment and reward —
runs through ``factrl eval``, a GRPO step and verl's reward shim without any change to
the package: the seams are generic."""

import json

import pytest
from typer.testing import CliRunner

from factrl.envs.base import ENVS, EpisodeResult, StepResult
from factrl.rewards.base import REWARDS
from factrl.types import Message, RewardBreakdown, Verdict

from _support import REPO

torch = pytest.importorskip("torch")


class ParityEnv:
    """Answer SUPPORT if the model's reply has an even number of characters, else REFUTE."""

    name = "parity_test"
    stop = ("\n",)
    max_turns = 1
    default_reward = "parity_test"

    def __init__(self, deps=None, *, prefix="Say something about"):
        self.prefix = prefix
        self.text = ""

    def reset(self, claim):
        return [Message(role="user", content=f"{self.prefix}: {claim.text}")]

    def step(self, text):
        self.text = text
        return StepResult(observation=None, done=True)

    def result(self):
        return EpisodeResult(verdict=self.parse_verdict(self.text), meta={"chars": len(self.text)})

    def parse_verdict(self, text):
        return Verdict(label="SUPPORT" if len(text) % 2 == 0 else "REFUTE", answered=True, format_ok=True)


class ParityReward:
    """1 when the parity verdict matches the gold label, plus a length diagnostic."""

    name = "parity_test"
    components = ("match",)
    diagnostics = ("long",)

    def __init__(self, bonus=0.0):
        self.bonus = bonus

    def score(self, trajectories):
        out = []
        for t in trajectories:
            match = float(t.verdict.label == t.claim.label)
            out.append(RewardBreakdown(components={"match": match, "long": float(len(t.model_text) > 5)},
                                       total=match + self.bonus))
        return out

    def configure(self, params, deps=None):
        return ParityReward(**params)


if "parity_test" not in ENVS:
    ENVS.register("parity_test")(ParityEnv)
    REWARDS.register("parity_test")(ParityReward())

CLAIMS = REPO / "tests" / "fixtures" / "tiny_claims.jsonl"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from factrl.lm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4)


def test_eval_runs_the_plugged_agent_with_its_reward(tiny_model, tmp_path):
    from factrl.cli import _load_commands, app

    _load_commands()
    out = tmp_path / "run"
    r = CliRunner().invoke(app, ["eval", "--agent", "parity_test", "--param", "prefix=Talk about",
                                 "--reward-param", "bonus=0.5", "--dataset", "jsonl", "--data-dir", str(CLAIMS),
                                 "--model", str(tiny_model), "--max-new-tokens", "6", "--out", str(out)])
    assert r.exit_code == 0, r.output
    trajs = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    assert trajs and all(t["env"] == "parity_test" for t in trajs)
    assert all(t["prompt"][0]["content"].startswith("Talk about: ") for t in trajs)
    for t in trajs:
        assert set(t["reward"]["components"]) == {"match", "long"}
        assert t["reward"]["total"] == t["reward"]["components"]["match"] + 0.5
    run = json.loads((out / "run.json").read_text())
    assert run["agent"] == {"name": "parity_test", "params": {"prefix": "Talk about"}}
    assert run["reward"]["name"] == "parity_test"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n"] == len(trajs) and metrics["mean_reward"] >= 0.5


def test_a_grpo_step_trains_on_the_plugged_reward(tiny_model, tmp_path):
    pytest.importorskip("trl")
    from factrl.train.callbacks import read_metrics
    from factrl.train.config import load_run_config
    from factrl.train.grpo import train_grpo

    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml", {
        "model.id": str(tiny_model), "output_dir": str(tmp_path), "data.data_dir": str(CLAIMS),
        "env.name": "parity_test", "grpo.max_steps": 1, "grpo.gradient_checkpointing": False,
    })
    train_grpo(cfg)
    rows = [r for r in read_metrics(tmp_path / "metrics.jsonl") if "loss" in r]
    assert len(rows) == 1
    assert {"rewards/reward_total/mean", "rewards/reward_match/mean", "rewards/long/mean"} <= set(rows[0])


def test_the_verl_shim_scores_with_the_plugged_env_and_reward():
    from factrl.train.verl.reward import compute_score

    even = compute_score("toy", "ab", {"label": "SUPPORT", "evidence": []}, {}, env="parity_test")
    odd = compute_score("toy", "abc", {"label": "SUPPORT", "evidence": []}, {}, env="parity_test",
                        reward_params={"bonus": 1.0})
    assert even == {"score": 1.0, "match": 1.0}
    assert odd == {"score": 1.0, "match": 0.0}
