"""Named factworld recipes (``factrl train factworld --from NAME``): each bundled file
makes a valid recipe, ``--from`` gives the same recorded settings as the flags it stands
for, flags override it, a run's recipe.json repeats it, and bad files fail by name."""

import json

import pytest
from typer.testing import CliRunner

from factrl.recipes.factworld import FactworldRecipe, recipe_json, run_recipe
from factrl.recipes.named import list_named, read_recipe_source

pytest.importorskip("torch")

# The flags the CPU run of the offline verdict-error recipe used (docs/benchmarks.md)
OFFLINE_FLAGS = (
    "--preset veri_r1_factworld_offline_cpu --recipe entities=100 --recipe claims=900 --recipe heldout_seed=505 "
    "--recipe heldout_claims=150 --recipe paraphrase_rate=0.0 --recipe teacher_claims=240 --recipe teacher_noise=0.0 "
    "--recipe teacher_reasoning=compare --recipe teacher_confusion=REFUTE->SUPPORT:0.7 --recipe teacher_errors=verdict "
    "--recipe sft_learning_rate=1e-3 --recipe sft_epochs=2.0 --recipe sft_max_minutes=null "
    "--recipe sft_tokens_per_batch=1024 --recipe sft_lora_layers=10 --recipe checkpoints=[0.5,1.0] "
    "--set env.context_sentences=3 --set env.params.offline_lines=3 --set rollout.temperature=0.8 "
    "--set rollout.max_new_tokens=96 --set rollout.max_total_tokens=96 --set model.lora_layers=10 "
    "--set grpo.max_steps=12 --set grpo.max_minutes=null --set grpo.prompts_per_generation=3 "
    "--set grpo.prompts_per_update=3 --set grpo.num_generations=4 --set grpo.micro_batch_size=6 "
    "--set rollout.batch_size=12 --set grpo.learning_rate=2e-4"
).split()


def _cli(args):
    from factrl.cli import _load_commands, app

    _load_commands()
    return CliRunner().invoke(app, args)


def _recorded(args, out):
    # --stage report: records the settings, runs nothing else (no report yet: nothing to say)
    result = _cli(["train", "factworld", "--out", str(out), "--device", "cpu", "--stage", "report", *args])
    assert (out / "recipe.json").is_file(), result.output
    return json.loads((out / "recipe.json").read_text())


def test_every_named_recipe_makes_a_valid_recipe_on_its_preset():
    from factrl.train.config import load_run_config

    assert {"veri_r1_verdict_offline", "veri_r1_verdict_online", "haris_verdict", "profact_compare"} <= set(list_named())
    for name in list_named():
        fields, overrides = read_recipe_source(name)
        recipe = FactworldRecipe(grpo_overrides=overrides, **fields)
        assert recipe.sft_max_minutes is None
        if recipe.preset != "binary_rar_factworld_cpu":  # the claim recipes plant a verdict error
            assert recipe.teacher_errors == "verdict"
        cfg = load_run_config(recipe.preset, overrides)  # every override is a key of the preset
        assert cfg.model.lora_layers == 10


def test_haris_compare_is_the_measured_comparison_run(tmp_path):
    # docs/benchmarks.md's runs/hy: these settings, recorded in a run's recipe.json
    rec = _recorded(["--from", "haris_compare", "--dtype", "bfloat16"], tmp_path / "hc")
    assert rec["preset"] == "haris_factworld_cpu" and rec["hops"] == "3"
    assert (rec["teacher_claim_first"], rec["teacher_comparison_copies"], rec["sft_comparison_weight"]) == (True, True, 4.0)
    assert (rec["teacher_confusion"], rec["teacher_claims"], rec["claims"], rec["entities"]) == ("SUPPORT->REFUTE:0.7", 400, 750, 60)
    assert rec["grpo_overrides"] == {"model.lora_layers": 10, "haris.rounds": 0, "haris.reasoner_steps_per_stage": 10}


def test_haris_final_verification_is_the_measured_last_turn_run(tmp_path):
    # docs/benchmarks.md's runs/hl: haris_compare's third seed with only the final
    # verification trained, the same record as the flags that run was started with
    named = _recorded(["--from", "haris_final_verification", "--dtype", "bfloat16"], tmp_path / "hf")
    flags = _recorded(["--from", "haris_compare", "--dtype", "bfloat16", "--recipe", "train_seed=105",
                       "--recipe", "teacher_seed=2", "--recipe", "sft_seed=2",
                       "--set", "haris.reasoner_trained_turns=last"], tmp_path / "hl")
    assert named == flags
    assert named["grpo_overrides"]["haris.reasoner_trained_turns"] == "last"


def test_from_records_the_same_settings_as_the_flags_and_flags_override_it(tmp_path):
    flags = _recorded(OFFLINE_FLAGS, tmp_path / "flags")
    named = _recorded(["--from", "veri_r1_verdict_offline"], tmp_path / "named")
    assert named == flags
    assert named["grpo_overrides"]["grpo.max_minutes"] is None
    # options after --from win; a run's recipe.json repeats the run
    over = _recorded(["--from", "veri_r1_verdict_offline", "--recipe", "heldout_seed=606", "--set",
                      "grpo.max_steps=6", "--control", "flip_advantage"], tmp_path / "over")
    assert (over["heldout_seed"], over["grpo_overrides"]["grpo.max_steps"], over["controls"]) == (606, 6, ["flip_advantage"])
    again = _recorded(["--from", str(tmp_path / "over" / "recipe.json")], tmp_path / "again")
    assert again == over
    # and resuming the flags' run from its name is the same run (no "other settings")
    run_recipe(FactworldRecipe(grpo_overrides=read_recipe_source("veri_r1_verdict_offline")[1],
                               **read_recipe_source("veri_r1_verdict_offline")[0], device="cpu"),
               tmp_path / "flags", stages=())


def test_bad_recipe_sources_fail_by_name(tmp_path):
    with pytest.raises(ValueError, match="no recipe file or named recipe 'nope'; named recipes: binary_rar_verifier, haris_compare, haris_final_verification, haris_sure_slip, haris_verdict"):
        read_recipe_source("nope")
    bad = tmp_path / "bad.toml"
    _refused(bad, '[recipe]\nteacher_nois = 0.1\n', "unknown recipe setting.*teacher_nois")
    _refused(bad, '[recipes]\nteacher_noise = 0.1\n', r"unknown table.*recipes")
    _refused(bad, '[recipe\n', "not valid TOML")
    rec = tmp_path / "recipe.json"
    rec.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        read_recipe_source(rec)
    result = _cli(["train", "factworld", "--out", str(tmp_path / "x"), "--from", "nope"])
    assert result.exit_code == 1 and "named recipe 'nope'" in result.output
    assert recipe_json(FactworldRecipe())["preset"] == "veri_r1_factworld_cpu"  # the default without --from


def test_a_recipe_can_start_from_another_and_say_only_what_it_changes(tmp_path):
    # the bundled variants name their base: the same settings as the base plus their own
    base_fields, base_set = read_recipe_source("veri_r1_verdict_online")
    fields, overrides = read_recipe_source("veri_r1_verdict_online_g8")
    assert fields == base_fields
    assert overrides == {**base_set, "grpo.max_steps": 25, "grpo.num_generations": 8, "rollout.batch_size": 24}
    # a file may start from a bundled name or from a file beside it; later entries win
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "mine.toml").write_text(
        'from = "veri_r1_verdict_online"\n[recipe]\nteacher_claims = 100\n[set]\n"grpo.max_minutes" = 30\n')
    (tmp_path / "sub" / "mine2.toml").write_text(
        'from = "mine.toml"\n[recipe]\nentities = 50\n[set]\n"grpo.max_steps" = "null"\n')
    fields, overrides = read_recipe_source(tmp_path / "sub" / "mine2.toml")
    assert (fields["teacher_claims"], fields["entities"], fields["claims"]) == (100, 50, base_fields["claims"])
    assert (overrides["grpo.max_minutes"], overrides["grpo.max_steps"]) == (30, None)
    assert overrides["grpo.num_generations"] == base_set["grpo.num_generations"]


def test_a_from_chain_that_loops_or_names_nothing_fails_by_name(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    a.write_text('from = "b.toml"\n')
    b.write_text('from = "a.toml"\n[recipe]\nentities = 50\n')
    with pytest.raises(ValueError, match=r"'from' loops: .*a\.toml -> .*b\.toml -> .*a\.toml"):
        read_recipe_source(a)
    _refused(a, 'from = "missing_recipe"\n', "'from' = 'missing_recipe' is neither a bundled recipe nor a file beside it")
    _refused(a, 'from = 3\n', "'from' names a recipe")
    _refused(a, 'from = "veri_r1_verdict_online"\n[recipe]\nteacher_nois = 0.1\n', "unknown recipe setting.*teacher_nois")


def _refused(path, text, match):
    path.write_text(text)
    with pytest.raises(ValueError, match=match):
        read_recipe_source(path)


def test_a_refused_world_seed_names_the_recipe_setting_and_a_seed_it_accepts(tmp_path):
    result = _cli(["train", "factworld", "--out", str(tmp_path / "r"), "--device", "cpu", "--stage", "worlds",
                   "--from", "haris_final_verification", "--recipe", "train_seed=106"])
    assert result.exit_code == 1
    assert "the training world (recipe setting train_seed = 106): the world gives only 207 of 250" in result.output
    assert "accept is 107 (--recipe train_seed=107)" in result.output
