"""The real run and its controls side by side: each in its own `factrl train factworld`
process with a share of the cores; a process that fails is named, not lost."""

import json

import pytest

from factrl.recipes.factworld import FactworldRecipe, run_recipe
from factrl.recipes.side_by_side import at_once, available_memory_gb, run_side_by_side, threads_each

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


def test_no_more_start_at_once_than_the_memory_holds(monkeypatch):
    monkeypatch.delenv("FACTRL_RUN_MEMORY_GB", raising=False)
    assert at_once(3, available_gb=23.0, per_run_gb=11.0) == 2
    assert at_once(3, available_gb=128.0, per_run_gb=11.0) == 3
    assert at_once(2, available_gb=4.0, per_run_gb=11.0) == 1  # one always starts
    assert at_once(3, available_gb=23.0) == 2  # the default: the largest CPU recipe's peak, 11 GB
    monkeypatch.setenv("FACTRL_RUN_MEMORY_GB", "5")
    assert at_once(3, available_gb=23.0) == 3
    monkeypatch.setenv("FACTRL_RUN_MEMORY_GB", "0")  # no limit
    assert at_once(3, available_gb=1.0) == 3
    monkeypatch.setenv("FACTRL_RUN_MEMORY_GB", "lots")
    with pytest.raises(ValueError, match="FACTRL_RUN_MEMORY_GB"):
        at_once(2, available_gb=23.0)
    with pytest.raises(ValueError):
        at_once(0, available_gb=23.0, per_run_gb=11.0)
    got = available_memory_gb()
    assert got is None or got > 0


def test_runs_beyond_the_memory_wait_for_one_to_end(tmp_path, capfd):
    run_recipe(RECIPE, tmp_path, stages=())  # writes recipe.json
    timings = run_side_by_side(tmp_path, RECIPE.controls, ("eval",), max_at_once=1)
    err = capfd.readouterr().err
    assert "1 of 2 runs at once" in err
    first, second = err.index("run flip_advantage: process"), err.index("run shuffle_rewards: process")
    assert first < err.index("done in", first) < second  # the second starts when the first has ended
    lines = [json.loads(x) for x in (tmp_path / "timings.jsonl").read_text().splitlines()]
    assert len(lines) == 3  # the recipe.json writer and both children, one after the other
    assert set(timings) == {"side-by-side"}
