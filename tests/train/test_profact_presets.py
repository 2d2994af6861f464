"""ProFact's presets: the paper's settings (8 trajectories per claim, KL 0.001, dense kNN
over the evidence store, the process reward) and the "w/o process rewards" switch."""

from __future__ import annotations

import pytest

from factrl.envs import EnvDeps
from factrl.train.config import load_run_config, trl_batch_args
from factrl.train.setup import run_env_factory, run_reward

from _support import WordOverlapRetriever


def test_paper_preset_holds_the_stated_settings():
    cfg = load_run_config("profact")
    assert (cfg.grpo.num_generations, cfg.grpo.beta) == (8, 0.001)
    assert (cfg.grpo.prompts_per_update, cfg.grpo.micro_batch_size) == (32, 4)
    assert cfg.env.name == "profact" and cfg.env.params == {"max_questions": 5, "top_k": 3}
    assert "dense" in cfg.env.index and cfg.data.dataset == "averitec"
    assert cfg.reward.name == "profact" and cfg.reward.params == {"process": True}
    assert not cfg.preset.scaled_down and "knowledge store" in cfg.preset.notes
    assert trl_batch_args(cfg.grpo)["gradient_accumulation_steps"] == 32 * 8 // 4


def test_cpu_preset_is_scaled_down_and_keeps_group_and_kl():
    cfg = load_run_config("profact_cpu")
    assert cfg.preset.scaled_down and cfg.model.id == "smollm2"
    assert (cfg.grpo.num_generations, cfg.grpo.beta) == (8, 0.001)
    assert cfg.data.split == "dev" and 0 < cfg.data.held_out_fraction < 1
    assert cfg.grpo.max_minutes and cfg.grpo.max_minutes <= 20


def test_process_reward_switch_builds_the_ablation():
    deps = EnvDeps(retriever=WordOverlapRetriever([]))
    for name in ("profact", "profact_cpu"):
        cfg = load_run_config(name)
        make_env = run_env_factory(cfg, deps)
        env = make_env()
        assert env.name == "profact" and env.max_turns == 2 + 2 * cfg.env.params["max_questions"]
        assert run_reward(cfg, make_env).process is True
        ablation = load_run_config(name, {"reward.params.process": False})
        assert run_reward(ablation, make_env).process is False


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    from factrl.lm.tiny import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=1, hidden=32, heads=2)


def test_a_grpo_step_runs_profact_with_the_process_reward(tiny_model, tmp_path, monkeypatch):
    """`factrl train grpo --agent profact` wiring: one GRPO update of a tiny model on the
    AVeriTeC fixture, BM25 over its pooled answers; the reward's parts are logged, and
    each trajectory reaches TRL as 1 + max_questions completions (its search contexts
    trained too), as many as TRL's prompts."""
    pytest.importorskip("trl")
    pytest.importorskip("nltk")
    from factrl.datasets import load_dataset
    from factrl.datasets.pool import pool_evidence, write_pooled_corpus
    from factrl.retrieval.index import build_index
    from factrl.train.callbacks import read_metrics
    from factrl.train.grpo import train_grpo

    from _support import REPO

    data = REPO / "tests" / "fixtures" / "datasets" / "averitec"
    docs, _ = pool_evidence(load_dataset("averitec", data, "dev").claims)
    write_pooled_corpus(docs, tmp_path / "corpus.jsonl")
    build_index(tmp_path / "corpus.jsonl", tmp_path / "index", progress=False)
    from factrl.train import rollout_adapter

    handed = []  # (prompts TRL passed, rows returned, the trajectories)
    real_call = rollout_adapter.EnvRollout.__call__

    def spy(self, prompts, trainer):
        out = real_call(self, prompts, trainer)
        handed.append((len(prompts), len(out["completion_ids"]), out))
        return out

    monkeypatch.setattr(rollout_adapter.EnvRollout, "__call__", spy)
    cfg = load_run_config("profact_cpu", {
        "model.id": str(tiny_model), "output_dir": str(tmp_path / "run"), "data.data_dir": str(data),
        "data.held_out_fraction": 0.25, "env.index": str(tmp_path / "index"), "rollout.max_new_tokens": 8,
        "rollout.max_total_tokens": 64, "grpo.num_generations": 2, "grpo.micro_batch_size": 4,
        "grpo.max_steps": 1, "grpo.max_minutes": None, "reward.params.process": False,
    })
    train_grpo(cfg)
    rows = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if "loss" in r]
    assert len(rows) == 1
    # profact_cpu: 3 questions → 4 rows per trajectory; 2 prompts x 2 trajectories x 4
    assert [(n, m) for n, m, _ in handed] == [(16, 16)]
    assert {"rewards/reward_total/mean", "rewards/reward_question/mean", "rewards/reward_qa/mean",
            "rewards/reward_label/mean", "rewards/label_correct/mean"} <= set(rows[0])
