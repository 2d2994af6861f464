"""HARIS in the factworld recipe: the teach stage deals two-way balanced claims, the
report scores NOT ENOUGH INFO as Refute, the evaluated stages after coordinated GRPO are
(reasoner, search agent) pairs, and (slow) the whole recipe runs end to end."""

import json
import shutil

import pytest

from factrl.labels import Label
from factrl.recipes import factworld_haris
from factrl.recipes.factworld import FactworldRecipe, heldout_claims, run_recipe
from factrl.recipes.factworld_report import write_report
from factrl.runs.trajectories import read_trajectories
from factrl.train.config import load_run_config

TINY = dict(preset="haris_factworld_cpu", entities=40, claims=60, heldout_claims=12, hops="3",
            paraphrase_rate=0.0, teacher_claims=16, device="cpu")


def _model(d):
    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text("{}")
    return d


def test_stages_are_the_pairs_after_each_reasoner_stage(tmp_path):
    cfg = load_run_config("haris_factworld_cpu", {"haris.rounds": 2})
    cfg.output_dir = str(tmp_path / "grpo-none")
    run, warm = tmp_path / "grpo-none", _model(tmp_path / "warmup" / "final")
    every = (0.33, 0.67, 1.0)
    assert factworld_haris.stages(cfg, tmp_path, "none", warm, every) == {}  # nothing trained yet
    _model(run / "foundation" / "searcher" / "final")
    _model(run / "foundation" / "reasoner" / "final")
    _model(run / "round1" / "reasoner" / "final")  # round 1's searcher stage was skipped (no questions)
    found = factworld_haris.stages(cfg, tmp_path, "none", warm, every)
    assert list(found) == ["grpo@33%", "grpo@67%"]  # round 2 not reached: left out
    assert list(factworld_haris.stages(cfg, tmp_path, "none", warm, (0.67,))) == ["grpo@67%"]
    _model(run / "round2" / "reasoner" / "final")
    assert list(factworld_haris.stages(cfg, tmp_path, "none", warm, (0.33,))) == ["grpo@33%", "grpo@100%"]
    assert factworld_haris.load_pair(found["grpo@33%"]) == {
        "reasoner": str(run / "foundation" / "reasoner" / "final"), "searcher": str(run / "foundation" / "searcher" / "final")}
    assert factworld_haris.load_pair(found["grpo@67%"]) == {  # the skipped stage keeps the last search agent
        "reasoner": str(run / "round1" / "reasoner" / "final"), "searcher": str(run / "foundation" / "searcher" / "final")}
    cfg.output_dir = str(tmp_path / "grpo-flip_advantage")
    control = tmp_path / "grpo-flip_advantage"
    _model(control / "foundation" / "reasoner" / "final")
    assert list(factworld_haris.stages(cfg, tmp_path, "flip_advantage", warm, every)) == ["control-flip_advantage@33%"]
    assert factworld_haris.load_pair(control) is None  # a single model plays both agents


def test_a_one_stage_run_has_its_budget_curve_inside_the_reasoner_stage(tmp_path):
    from factrl.recipes.factworld_config import grpo_config

    cfg = load_run_config("haris_factworld_cpu", {"haris.rounds": 0})
    cfg.output_dir = str(tmp_path / "grpo-none")
    run, warm = tmp_path / "grpo-none", _model(tmp_path / "warmup" / "final")
    stage = run / "foundation" / "reasoner"
    _model(run / "foundation" / "searcher" / "final")
    _model(stage / "final")
    (stage / "metrics.jsonl").write_text("".join(json.dumps({"step": k, "loss": 0.0}) + "\n" for k in range(1, 11)))
    for m in (2, 5, 8):
        _model(stage / f"checkpoint-{m}")  # a full model: used as it is (an adapter is merged into the warm-up)
    found = factworld_haris.stages(cfg, tmp_path, "none", warm, (0.25, 0.5, 1.0))
    # 25 % of 10 updates is step 2 (rounded), 50 % step 5; the finished stage is 100 %
    assert list(found) == ["grpo@20%", "grpo@50%", "grpo@100%"]
    assert factworld_haris.load_pair(found["grpo@50%"]) == {
        "reasoner": str(stage / "checkpoint-5"), "searcher": str(run / "foundation" / "searcher" / "final")}
    # a share whose checkpoint was not saved is left out, not failed on
    assert list(factworld_haris.stages(cfg, tmp_path, "none", warm, (0.3, 0.8, 1.0))) == ["grpo@80%", "grpo@100%"]
    assert list(factworld_haris.stages(cfg, tmp_path, "none", warm, (1.0,))) == ["grpo@100%"]
    # a control is its last stage only
    cfg.output_dir = str(tmp_path / "grpo-invert_mask")
    _model(tmp_path / "grpo-invert_mask" / "foundation" / "reasoner" / "final")
    assert list(factworld_haris.stages(cfg, tmp_path, "invert_mask", warm, (0.5, 1.0))) == ["control-invert_mask@100%"]
    # GRPO saves at those shares of the reasoner stage's updates (and as often as the preset's shares ask)
    r = FactworldRecipe(**TINY, checkpoints=(0.5, 1.0), grpo_overrides={"haris.rounds": 0,
                                                                        "haris.reasoner_steps_per_stage": 10})
    assert grpo_config(r, tmp_path, "none").grpo.save_steps == 1  # gcd of the preset's 2, 4 and the stage's 5, 10
    r = FactworldRecipe(**TINY, checkpoints=(1.0,), grpo_overrides={"haris.rounds": 0,
                                                                    "haris.reasoner_steps_per_stage": 10})
    assert grpo_config(r, tmp_path, "none").grpo.save_steps == 2
    r = FactworldRecipe(**TINY, checkpoints=(1.0,), grpo_overrides={"haris.rounds": 2})
    assert grpo_config(r, tmp_path, "none").grpo.save_steps == 4  # stages are its checkpoints: unchanged


def test_teach_and_held_out_claims_are_two_way_balanced_and_the_report_scores_nei_as_refute(tmp_path):
    out = tmp_path / "run"
    r = FactworldRecipe(**TINY, teacher_noise=0.0)
    run_recipe(r, out, stages=("worlds", "teach"))
    held = heldout_claims(r, out)
    assert len(held) == 12 and sum(c.label is Label.SUPPORT for c in held) == 6
    shutil.copytree(out / "teach", out / "eval" / "warmup")
    result = write_report(r, {}, out, {"warmup": None})
    (warm,) = result["stages"]
    # The clean teacher answers Refute to NOT ENOUGH INFO claims: right. It is wrong only
    # where the search missed a hop of a SUPPORT claim (nothing then supports it).
    missed = sum(t.claim.label is Label.SUPPORT and "did not find the answer" in t.model_text
                 for t in read_trajectories(out / "teach" / "trajectories.jsonl"))
    assert warm["accuracy"] == pytest.approx(1.0 - missed / warm["n"])
    for label in ("REFUTE", "NOT ENOUGH INFO"):
        assert warm["per_label"][label]["right"] == warm["per_label"][label]["n"] > 0
    assert warm["per_label"]["SUPPORT"]["right"] == warm["per_label"]["SUPPORT"]["n"] - missed
    assert warm["predicted"].get("NOT ENOUGH INFO", 0) == 0
    assert "scored as Refute" in (out / "report.md").read_text()


@pytest.mark.slow
def test_the_haris_recipe_runs_end_to_end_with_a_control(tmp_path):
    """Wiring, not learning: a few SFT steps, one update per stage (~10 minutes alone)."""
    r = FactworldRecipe(**{**TINY, "heldout_claims": 6}, teacher_noise=0.0, sft_learning_rate=1e-3, sft_max_minutes=None,
                        sft_tokens_per_batch=4096, sft_lora_layers=2, dtype="float32", controls=("flip_advantage",),
                        grpo_overrides={"haris.steps_per_stage": 1, "grpo.num_generations": 2,
                                        "grpo.prompts_per_generation": 2, "grpo.prompts_per_update": 2,
                                        "grpo.micro_batch_size": 4, "rollout.batch_size": 4, "model.lora_layers": 2,
                                        "grpo.label_mix": {}})
    report = run_recipe(r, tmp_path / "run")
    names = [row["stage"] for row in report["stages"]]
    assert names == ["warmup", "grpo@50%", "grpo@100%", "control-flip_advantage@100%"]
    assert all(row["n"] == 6 for row in report["stages"])
    info = json.loads((tmp_path / "run" / "eval" / "grpo-100pct" / "run.json").read_text())
    assert info["reasoner"].endswith("round1/reasoner/final") and "searcher" in info
