"""ProFact's presets: the paper's settings (8 trajectories per claim, KL 0.001, dense kNN
over the evidence store, the process reward) and the "w/o process rewards" switch."""

from __future__ import annotations

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
