"""The released-convention presets: they select the released convention everywhere it
applies, build, train at a temperature their trained roles accept, and list in their
header how the paper's convention differs."""

from importlib.resources import files

import pytest

from factrl.envs import EnvDeps, EnvSpec, build
from factrl.train.config import load_run_config

from _support import WordOverlapRetriever


def header(name):
    text = files("factrl.presets").joinpath(f"{name}.toml").read_text()
    return "\n".join(line for line in text.splitlines() if line.startswith("#"))


def test_haris_released_preset():
    cfg = load_run_config("haris_released")
    assert cfg.env.params["convention"] == "released" and cfg.haris.searcher_params["convention"] == "released"
    assert (cfg.rollout.max_new_tokens, cfg.rollout.max_total_tokens) == (2048, 40960)
    from factrl.envs.base import check_trained_temperatures

    deps = EnvDeps(retriever=WordOverlapRetriever([]))
    for spec in (EnvSpec(name="haris", params=cfg.env.params), EnvSpec(name="haris_searcher", params=cfg.haris.searcher_params)):
        env = build(spec, deps)
        check_trained_temperatures(env, ["searcher"] if spec.name == "haris" else [], cfg.rollout.temperature)
    assert build(EnvSpec(name="haris", params=cfg.env.params), deps).segment_budget == {"searcher": 20}
    text = header("haris_released")
    for difference in ("prompts:", "verdict:", "no verdict:", "limits:", "stops:", "results:", "temperatures:"):
        assert difference in text
    assert "released" in cfg.preset.notes and "re-runs" in cfg.preset.notes


def test_binary_rar_released_preset():
    cfg = load_run_config("binary_rar_released")
    assert cfg.reward.params["convention"] == cfg.env.params["convention"] == "released"
    assert cfg.env.metric_params == {"convention": "released"}
    assert (cfg.reward.params["k"], cfg.reward.params["chunk_tokens"]) == (8, 512)
    assert (cfg.grpo.num_generations, cfg.grpo.prompts_per_generation, cfg.grpo.learning_rate) == (16, 16, 1e-5)
    assert (cfg.model.lora, cfg.model.lora_r, cfg.rollout.max_new_tokens) == (True, 32, 4096)
    from factrl.rewards import RewardSpec, build_reward

    reward = build_reward(RewardSpec(name=cfg.reward.name, params=cfg.reward.params))
    assert reward.convention == "released" and reward.chunk_tokenizer == "Qwen/Qwen3-8B"
    text = header("binary_rar_released")
    for difference in ("reward parsing:", "verifier call:", "evidence:", "verifier prompt:", "training prompts:",
                       "evaluation:", "Departures"):
        assert difference in text
    with pytest.raises(ValueError):
        load_run_config("binary_rar_released", {"env.metric_params": {"convention": "authors"}})
