"""The real run and its controls side by side: each in its own `factrl train factworld`
process with a share of the cores; a process that fails is named, not lost."""

import json

import pytest

from factrl.recipes.factworld import FactworldRecipe, run_recipe
from factrl.recipes.side_by_side import run_side_by_side, threads_each

RECIPE = FactworldRecipe(preset="veri_r1_factworld_offline_cpu", entities=40, claims=120, heldout_claims=30,
                         controls=("flip_advantage", "shuffle_rewards"), device="cpu")


def test_threads_are_split_between_the_processes():
    assert threads_each(2, cores=2) == 1
    assert threads_each(3, cores=8) == 2
    assert threads_each(4, cores=2) == 1  # never zero
    with pytest.raises(ValueError):
        threads_each(0, cores=2)


def test_each_run_gets_its_own_process_with_its_share_of_threads(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    # no control has trained, so each process evaluates nothing and records its stages
    timings = run_recipe(RECIPE, tmp_path, stages=("eval",), runs=RECIPE.controls, side_by_side=True) or {}
    lines = [json.loads(x) for x in (tmp_path / "timings.jsonl").read_text().splitlines()]
    assert len(lines) == 3  # two children and the parent, each its own record
    assert sum(1 for x in lines if "side-by-side" in x["seconds"]) == 1
    assert timings == {}  # no report stage asked for


def test_a_failed_process_is_named_after_all_have_ended(tmp_path):
    run_recipe(RECIPE, tmp_path, stages=())  # writes recipe.json
    with pytest.raises(RuntimeError, match="bogus"):
        run_side_by_side(tmp_path, ("flip_advantage", "bogus"), ("eval",))
    with pytest.raises(ValueError, match="grpo and eval"):
        run_side_by_side(tmp_path, ("none",), ("warmup",))
    with pytest.raises(FileNotFoundError):
        run_side_by_side(tmp_path / "elsewhere", ("none",), ("eval",))
