"""``factrl train factworld``: every stage runs where --device/--dtype say, and a resumed
recipe may move to another device."""

import json

import pytest

pytest.importorskip("torch")

from factrl.recipes.factworld import FactworldRecipe, _grpo_config, run_recipe  # noqa: E402


def test_the_grpo_stage_trains_on_the_recipes_device_and_dtype(tmp_path):
    cfg = _grpo_config(FactworldRecipe(device="cpu", dtype="bf16"), tmp_path, "none")
    assert (cfg.model.device, cfg.model.dtype) == ("cpu", "bf16")
    # a --set of the preset still wins
    cfg = _grpo_config(FactworldRecipe(device="cpu", grpo_overrides={"model.dtype": "float32"}), tmp_path, "none")
    assert cfg.model.dtype == "float32"


def test_a_resumed_recipe_may_change_device_and_grpo_time_budget_not_other_settings(tmp_path):
    run_recipe(FactworldRecipe(device="cpu", grpo_overrides={"grpo.max_minutes": 2.5}), tmp_path, stages=())
    assert json.loads((tmp_path / "recipe.json").read_text())["device"] == "cpu"
    longer = {"grpo.max_minutes": 4.2}
    run_recipe(FactworldRecipe(device="auto", dtype="bfloat16", grpo_overrides=longer), tmp_path, stages=())
    assert json.loads((tmp_path / "recipe.json").read_text())["grpo_overrides"] == longer
    with pytest.raises(ValueError, match="teacher_noise"):
        run_recipe(FactworldRecipe(teacher_noise=0.1, grpo_overrides=longer), tmp_path, stages=())
    with pytest.raises(ValueError, match="grpo_overrides"):  # what GRPO trains may not change
        run_recipe(FactworldRecipe(grpo_overrides={**longer, "grpo.learning_rate": 1e-3}), tmp_path, stages=())
    with pytest.raises(ValueError, match="grpo_overrides"):  # nor the steps its checkpoints are shares of
        run_recipe(FactworldRecipe(grpo_overrides={**longer, "grpo.max_steps": 7}), tmp_path, stages=())
