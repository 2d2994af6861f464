"""Forking a factworld recipe run (``factrl train factworld --fork-from RUN``): the stages
up to the warm-up are copied (real copies, not the SFT's resume point; the starting
points' evaluations only when nothing they read changed), only what comes after the warm-up may change, and the CLI starts from the
source's settings."""

import json
import os

import pytest
from typer.testing import CliRunner

from factrl.recipes.factworld import FactworldRecipe, recipe_json
from factrl.recipes.fork import fork_differences, fork_run

DEFAULTS = recipe_json(FactworldRecipe())


def _source(tmp_path, **settings):
    src = tmp_path / "src"
    (src / "warmup" / "final").mkdir(parents=True)
    (src / "warmup" / "final" / "config.json").write_text("{}")
    (src / "warmup" / "checkpoint").mkdir()
    (src / "warmup" / "checkpoint" / "state.pt").write_text("resume point")
    for world in ("world", "heldout", "validation"):
        (src / world / "index").mkdir(parents=True)
        (src / world / "manifest.json").write_text(json.dumps({"world": world}))
        (src / world / "index" / "manifest.json").write_text("{}")
    (src / "teach").mkdir()
    (src / "teach" / "trajectories.jsonl").write_text('{"claim_id": "c1"}\n')
    (src / "eval" / "warmup").mkdir(parents=True)
    (src / "eval" / "warmup" / "metrics.json").write_text("{}")
    (src / "grpo-none").mkdir()
    recipe = recipe_json(FactworldRecipe(**settings))
    (src / "recipe.json").write_text(json.dumps(recipe))
    return src, recipe


def test_fork_copies_the_stages_before_grpo_and_records_its_source(tmp_path):
    src, recipe = _source(tmp_path, val_claims=60)
    now = {**recipe, "grpo_overrides": {"grpo.seed": 1}, "checkpoints": [0.25, 1.0]}
    copied = fork_run(src, tmp_path / "fork", now, DEFAULTS)
    fork = tmp_path / "fork"
    assert copied == ["world", "heldout", "validation", "teach", "warmup", "eval/warmup"]
    assert (fork / "warmup" / "final" / "config.json").is_file()
    assert not (fork / "warmup" / "checkpoint").exists()  # the SFT's resume point stays behind
    assert not (fork / "grpo-none").exists()
    assert (fork / "teach" / "trajectories.jsonl").read_text() == '{"claim_id": "c1"}\n'
    # real copies: a resumed fork appending to its files leaves the source as it was
    a, b = fork / "teach" / "trajectories.jsonl", src / "teach" / "trajectories.jsonl"
    assert os.stat(a).st_ino != os.stat(b).st_ino
    with a.open("a") as fh:
        fh.write('{"claim_id": "c2"}\n')
    assert b.read_text() == '{"claim_id": "c1"}\n'
    record = json.loads((fork / "forked_from.json").read_text())
    assert record["run"] == str(src.resolve()) and record["copied"] == copied
    assert record["source_recipe"] == recipe


def test_the_starting_points_evaluations_are_copied_only_when_nothing_they_read_changed(tmp_path):
    src, recipe = _source(tmp_path, val_claims=60, short_questions=4)
    for folder in ("eval/base", "eval/validation-60/warmup", "eval/short-4/warmup"):
        (src / folder).mkdir(parents=True)
        (src / folder / "metrics.json").write_text("{}")
    (src / "eval" / "warmup" / "run.lock").write_text("")
    (src / "eval" / "grpo-100pct").mkdir()  # a later stage's: never copied
    (src / "eval" / "grpo-100pct" / "metrics.json").write_text("{}")
    (src / "eval" / "validation-60" / "base").mkdir()  # unfinished: evaluated again
    # grpo.* overrides alone (and the checkpoints): the evaluations are the source's
    copied = fork_run(src, tmp_path / "a", {**recipe, "grpo_overrides": {"grpo.seed": 1}, "checkpoints": [1.0]},
                      DEFAULTS)
    assert copied[-4:] == ["eval/base", "eval/warmup", "eval/validation-60/warmup", "eval/short-4/warmup"]
    a = tmp_path / "a" / "eval"
    assert (a / "warmup" / "metrics.json").is_file() and not (a / "warmup" / "run.lock").exists()
    assert not (a / "grpo-100pct").exists() and not (a / "validation-60" / "base").exists()
    # another validation count: that evaluation is not copied, the held-out ones are
    copied = fork_run(src, tmp_path / "b", {**recipe, "val_claims": 90}, DEFAULTS)
    assert "eval/warmup" in copied and not any("validation" in c for c in copied if c.startswith("eval"))
    # a rollout, reward or HARIS override, another device, dtype or batch: evaluated again
    for i, change in enumerate([{"grpo_overrides": {"rollout.temperature": 0.9}},
                                {"grpo_overrides": {"haris.rounds": 2}}, {"dtype": "float32"},
                                {"device": "cuda"}, {"eval_batch": 3}]):
        copied = fork_run(src, tmp_path / f"c{i}", {**recipe, **change}, DEFAULTS)
        assert not [c for c in copied if c.startswith("eval")] and not (tmp_path / f"c{i}" / "eval").exists(), change


def test_the_same_fork_again_resumes_and_another_run_is_refused(tmp_path):
    src, recipe = _source(tmp_path)
    fork = tmp_path / "fork"
    assert fork_run(src, fork, recipe, DEFAULTS)
    (fork / "recipe.json").write_text(json.dumps(recipe))  # as the recipe records it
    (fork / "warmup" / "final" / "config.json").write_text('{"trained": "here"}')
    assert fork_run(src, fork, recipe, DEFAULTS) == []  # nothing copied over what the fork has
    assert (fork / "warmup" / "final" / "config.json").read_text() == '{"trained": "here"}'
    other, _ = _source(tmp_path / "other")
    with pytest.raises(ValueError, match="needs a new --out"):
        fork_run(other, fork, recipe, DEFAULTS)


def test_fork_leaves_a_validation_world_of_another_size_to_be_made_anew(tmp_path):
    src, recipe = _source(tmp_path, val_claims=60)
    copied = fork_run(src, tmp_path / "fork", {**recipe, "val_claims": 90}, DEFAULTS)
    assert "validation" not in copied and not (tmp_path / "fork" / "validation").exists()


def test_fork_may_change_only_what_comes_after_the_warm_up(tmp_path):
    _, recipe = _source(tmp_path)
    after = {**recipe, "grpo_overrides": {"grpo.learning_rate": 1e-4, "rollout.temperature": 0.9,
                                          "reward.name": "rar", "reward.verifier": "factrl-verifier",
                                          "haris.reasoner_trained_turns": "last", "haris.rounds": 2},
             "checkpoints": [1.0], "controls": ["flip_advantage"], "dtype": "bfloat16", "val_claims": 30}
    assert fork_differences(recipe, after, DEFAULTS) == []
    assert fork_differences(recipe, {**recipe, "entities": 50, "sft_seed": 1}, DEFAULTS) == ["entities", "sft_seed"]
    # the environment and the model are the warm-up's and the teacher's too
    assert fork_differences(recipe, {**recipe, "grpo_overrides": {"env.params.top_k": 5}}, DEFAULTS) == ["grpo_overrides"]
    assert fork_differences(recipe, {**recipe, "grpo_overrides": {"model.lora_layers": 4}}, DEFAULTS) == ["grpo_overrides"]


def test_fork_refuses_what_it_cannot_fork_before_copying_anything(tmp_path):
    src, recipe = _source(tmp_path)
    with pytest.raises(ValueError, match="it changes teacher_noise"):
        fork_run(src, tmp_path / "a", {**recipe, "teacher_noise": 0.3}, DEFAULTS)
    assert not (tmp_path / "a").exists()
    with pytest.raises(ValueError, match="needs a new --out"):
        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "recipe.json").write_text("{}")
        fork_run(src, tmp_path / "b", recipe, DEFAULTS)
    with pytest.raises(ValueError, match="the run directory itself"):
        fork_run(src, src, recipe, DEFAULTS)
    (src / "warmup" / "final" / "config.json").unlink()
    with pytest.raises(ValueError, match="no finished warm-up"):
        fork_run(src, tmp_path / "c", recipe, DEFAULTS)
    with pytest.raises(FileNotFoundError, match="not a factworld recipe run"):
        fork_run(tmp_path / "nowhere", tmp_path / "d", recipe, DEFAULTS)


def _cli(args):
    from factrl.cli import _load_commands, app

    _load_commands()
    return CliRunner().invoke(app, args)


def test_cli_forks_with_the_source_settings_and_refuses_a_changed_world(tmp_path):
    pytest.importorskip("torch")
    src, recipe = _source(tmp_path, val_claims=60, device="cpu")
    bad = _cli(["train", "factworld", "--fork-from", str(src), "--out", str(tmp_path / "bad"),
                "--recipe", "entities=50", "--stage", "report"])
    assert bad.exit_code == 1 and "it changes entities" in bad.output
    assert not (tmp_path / "bad" / "recipe.json").exists()
    # a setting the recipe refuses is refused before the fork copies anything
    early = _cli(["train", "factworld", "--fork-from", str(src), "--out", str(tmp_path / "early"),
                  "--recipe", "teacher_reasoning=guess", "--stage", "report"])
    assert early.exit_code == 1 and "teacher_reasoning" in early.output
    assert not (tmp_path / "early").exists()
    fork = tmp_path / "fork"
    ok = _cli(["train", "factworld", "--fork-from", str(src), "--out", str(fork), "--set", "grpo.seed=1",
               "--stage", "worlds"])  # the copied worlds are there: the stage finds them done
    assert ok.exit_code == 0, ok.output
    recorded = json.loads((fork / "recipe.json").read_text())
    assert recorded == {**recipe, "grpo_overrides": {"grpo.seed": 1}}
    assert json.loads((fork / "world" / "manifest.json").read_text()) == {"world": "world"}
    assert "copied world, heldout, validation, teach, warmup" in ok.output
    again = _cli(["train", "factworld", "--fork-from", str(src), "--out", str(fork), "--set", "grpo.seed=1",
                  "--stage", "worlds"])  # the same command resumes the fork
    assert again.exit_code == 0 and "resuming the fork" in again.output, again.output
