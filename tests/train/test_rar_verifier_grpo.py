"""GRPO with Binary RAR's reward from the trained verifier (``reward.verifier =
"factrl-verifier"``): the reward's verifier is the cross-encoder, not an LM."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from _support import REPO, KeywordVerifier  # noqa: E402
from factrl.train.callbacks import read_metrics  # noqa: E402
from factrl.train.config import load_run_config  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "rar_prompts.jsonl"


def test_load_reward_lm_gives_the_cross_encoder_for_its_name(monkeypatch):
    import factrl.verifier.asset as asset
    from factrl.train.setup import load_reward_lm

    v = KeywordVerifier()
    monkeypatch.setattr(asset, "is_verifier_name", lambda name: name == "factrl-verifier")
    monkeypatch.setattr(asset, "load_verifier", lambda name, **kw: v)
    assert load_reward_lm("factrl-verifier") is v
    with pytest.raises(ValueError, match="verifier_base_url"):
        load_reward_lm("factrl-verifier", base_url="http://x")


def test_the_preset_names_the_verifier_and_its_judge():
    cfg = load_run_config("binary_rar_verifier_cpu")
    assert cfg.reward.verifier == "factrl-verifier" and cfg.grpo.beta > 0 and cfg.preset.scaled_down
    assert cfg.env.metric_params == {"extract": "sentences", "judge": "verifier"}
    assert "mode" not in cfg.reward.params and "margin" not in cfg.reward.params


def test_grpo_steps_with_the_verifier_reward(tmp_path, monkeypatch):
    import factrl.verifier.asset as asset
    from factrl.lm.tiny import build_tiny_model
    from factrl.train.grpo import train_grpo

    v = KeywordVerifier()
    monkeypatch.setattr(asset, "is_verifier_name", lambda name: name == "factrl-verifier")
    monkeypatch.setattr(asset, "load_verifier", lambda name, **kw: v)
    model = build_tiny_model(tmp_path / "tiny", layers=1, hidden=32, heads=2)
    cfg = load_run_config(REPO / "tests" / "fixtures" / "tiny_grpo.toml", {
        "model.id": str(model), "output_dir": str(tmp_path / "run"),
        "data.dataset": "rar_prompts", "data.data_dir": str(FIXTURE), "data.held_out_fraction": 0.2,
        "env.name": "rar", "reward.name": "rar", "reward.verifier": "factrl-verifier", "rollout.batch_size": 8,
        "grpo.num_generations": 4, "grpo.max_steps": 1,
        "reward.params": {"min_documents": 1, "nonstop_penalty": False},
    })
    train_grpo(cfg)
    rows = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "loss" in r]
    assert rows and v.calls  # the cross-encoder scored the rollouts
    assert all("verifier_failed" not in r or r["verifier_failed"] == 0 for r in rows)
