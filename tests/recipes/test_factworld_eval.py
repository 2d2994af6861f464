"""A factworld recipe can pick the GRPO checkpoint it reports on a validation world: a third
seed, never trained on and not the held-out world, evaluated with its own index; the pick is
the best validation accuracy (the earliest on a tie), and the report names it with its
held-out figures."""

import json
import shutil

import pytest

from factrl.recipes.factworld import FactworldRecipe, run_recipe
from factrl.recipes.factworld_eval import eval_dir, pick, world_claims, worlds_of
from factrl.recipes.factworld_report import write_report
from factrl.recipes.settings import changed_settings

TINY = dict(preset="veri_r1_factworld_offline_cpu", entities=40, claims=120, heldout_claims=30,
            paraphrase_rate=0.0, teacher_claims=36, teacher_noise=0.0, device="cpu")
STAGES = {"warmup": None, "grpo@50%": None, "grpo@100%": None}


def test_a_validation_world_is_written_only_when_asked_and_never_on_a_used_seed():
    assert [w[0] for w in worlds_of(FactworldRecipe(**TINY))] == ["world", "heldout"]
    made = worlds_of(FactworldRecipe(**TINY, val_claims=24))
    assert made[-1] == ("validation", 303, 60)
    with pytest.raises(ValueError, match="val_seed 202 must differ"):
        worlds_of(FactworldRecipe(**TINY, val_claims=24, val_seed=202))


def test_the_validation_world_has_its_own_claims_and_index(tmp_path):
    r = FactworldRecipe(**TINY, val_claims=24)
    run_recipe(r, tmp_path, stages=("worlds",))
    assert (tmp_path / "validation" / "index" / "manifest.json").is_file()
    val, held = world_claims(r, tmp_path, "validation"), world_claims(r, tmp_path, "heldout")
    assert len(val) == 24 and len(held) == 30
    assert all(c.id.startswith("fw303-") for c in val) and all(c.id.startswith("fw202-") for c in held)
    assert {str(c.label) for c in val} == {"SUPPORT", "REFUTE", "NOT ENOUGH INFO"}
    assert eval_dir(r, tmp_path, "grpo@50%", "validation") == tmp_path / "eval" / "validation-24" / "grpo-50pct"


def test_a_resumed_run_asking_more_validation_claims_writes_a_larger_validation_world(tmp_path):
    run_recipe(FactworldRecipe(**TINY, val_claims=24), tmp_path, stages=("worlds",))
    held = (tmp_path / "heldout" / "manifest.json").read_text()
    r = FactworldRecipe(**TINY, val_claims=45)  # the world written for 24 holds 60 claims: too few
    run_recipe(r, tmp_path, stages=("worlds",))
    assert len(world_claims(r, tmp_path, "validation")) == 45
    assert json.loads((tmp_path / "validation" / "manifest.json").read_text())["config"]["claims"] == 90
    assert json.loads((tmp_path / "validation" / "index" / "manifest.json").read_text())
    assert (tmp_path / "heldout" / "manifest.json").read_text() == held  # the others are left as they were


def test_a_stage_is_evaluated_on_the_validation_world_with_its_index(tmp_path, fake_evaluation):
    from factrl.recipes.factworld_eval import evaluate_stage

    r = FactworldRecipe(**TINY, val_claims=24)
    run_recipe(r, tmp_path, stages=("worlds",))
    evaluate_stage(r, tmp_path, "grpo@50%", tmp_path / "model", "validation")
    seen = fake_evaluation[-1]
    assert len(seen["claims"]) == 24 and all(c.id.startswith("fw303-") for c in seen["claims"])
    assert seen["out_dir"] == tmp_path / "eval" / "validation-24" / "grpo-50pct"
    assert (seen["run_info"]["world_seed"], seen["run_info"]["world"]) == (303, "validation")
    with pytest.raises(ValueError, match="world must be one of"):
        evaluate_stage(r, tmp_path, "warmup", tmp_path / "model", "world")


def _teach(tmp_path, name, **kw):
    out = tmp_path / name
    run_recipe(FactworldRecipe(**TINY, **kw), out, stages=("worlds", "teach"))
    return out / "teach"


def test_validation_picks_the_best_stage_and_the_report_names_it_with_its_held_out_figures(tmp_path):
    clean = _teach(tmp_path, "clean")
    confused = _teach(tmp_path, "confused", teacher_confusion="REFUTE->SUPPORT:1.0")
    r = FactworldRecipe(**TINY, val_claims=30)
    out = tmp_path / "run"
    # validation: the warm-up and the last checkpoint confused, the half-way one clean
    for name, src in (("warmup", confused), ("grpo@50%", clean), ("grpo@100%", confused)):
        shutil.copytree(src, eval_dir(r, out, name, "validation"))
    assert pick(FactworldRecipe(**TINY), out, STAGES) is None  # no validation world asked for
    # held out: the half-way checkpoint clean as well
    for name, src in (("warmup", confused), ("grpo@50%", clean)):
        shutil.copytree(src, eval_dir(r, out, name))
    chosen = pick(r, out, STAGES)
    assert chosen["picked"] == "grpo@50%" and chosen["world_seed"] == 303 and chosen["claims"] == 30
    v = chosen["validation"]
    assert v["grpo@50%"]["accuracy"] == 1.0 and v["warmup"]["accuracy"] < 1.0
    assert v["warmup"]["right"] == v["grpo@100%"]["right"]
    result = write_report(r, {}, out, STAGES)
    assert result["selection"]["picked"] == "grpo@50%"
    text = (out / "report.md").read_text()
    assert "Checkpoint picked on the validation world (seed 303, 30 claims" in text
    assert "| grpo@50% (picked) | 1.000 |" in text
    held = next(row for row in result["stages"] if row["stage"] == "grpo@50%")
    assert f"**Picked: grpo@50%**, held-out 1.000, {held['fixed_vs_warmup']} fixed / 0 broken vs warm-up" in text


def test_a_tie_goes_to_the_earliest_stage_and_a_missing_evaluation_picks_nothing(tmp_path):
    clean = _teach(tmp_path, "clean")
    r = FactworldRecipe(**TINY, val_claims=30)
    out = tmp_path / "run"
    for name in ("warmup", "grpo@50%"):
        shutil.copytree(clean, eval_dir(r, out, name, "validation"))
    assert pick(r, out, STAGES) is None  # grpo@100% not evaluated on validation yet
    shutil.copytree(clean, eval_dir(r, out, "grpo@100%", "validation"))
    assert pick(r, out, STAGES)["picked"] == "warmup"  # GRPO no better than the warm-up: stop before it
    assert pick(r, out, {"warmup": None, "control-flip_advantage@100%": None}) is None  # nothing to choose


def test_the_validation_count_may_change_on_resume_but_not_its_seed():
    recorded = json.loads(json.dumps({k: v for k, v in vars(FactworldRecipe(**TINY)).items()
                                      if k not in ("val_claims", "val_seed")}, default=list))
    defaults = json.loads(json.dumps(vars(FactworldRecipe()), default=list))
    now = json.loads(json.dumps(vars(FactworldRecipe(**TINY, val_claims=90)), default=list))
    assert changed_settings(recorded, now, defaults) == []  # a run from before the setting, resumed with it
    now["val_seed"] = 404
    assert changed_settings(recorded, now, defaults) == ["val_seed"]


def test_the_eval_stage_evaluates_the_warm_up_and_the_real_runs_checkpoints_on_validation(tmp_path, fake_evaluation):
    r = FactworldRecipe(**TINY, val_claims=12, controls=("flip_advantage",), checkpoints=(0.5, 1.0),
                        grpo_overrides={"grpo.max_steps": 4})
    for run in ("none", "flip_advantage"):  # finished GRPO runs: full models at each checkpoint
        for d in ("checkpoint-2", "final"):
            (tmp_path / f"grpo-{run}" / d).mkdir(parents=True)
            (tmp_path / f"grpo-{run}" / d / "config.json").write_text("{}")
        (tmp_path / f"grpo-{run}" / "metrics.jsonl").write_text('{"step": 4}\n')
    (tmp_path / "warmup" / "final").mkdir(parents=True)
    (tmp_path / "warmup" / "final" / "config.json").write_text("{}")
    run_recipe(r, tmp_path, stages=("worlds", "eval"))
    done = [(c["run_info"]["world"], c["run_info"]["stage"]) for c in fake_evaluation]
    assert sorted(w for w in done if w[0] == "validation") == [
        ("validation", "grpo@100%"), ("validation", "grpo@50%"), ("validation", "warmup")]
    assert ("heldout", "control-flip_advantage@100%") in done  # controls: held out only
    fake_evaluation.clear()
    run_recipe(r, tmp_path, stages=("eval",))
    assert fake_evaluation == []  # all done: a resumed run evaluates nothing again
