"""The factworld report of a labelled agent gives right answers per gold label (McNemar
per label against the warm-up) and the predicted-label counts: a gain on one label paid
for by another — a moved label prior — shows there, where overall accuracy hides it."""

import shutil

from factrl.recipes.factworld import FactworldRecipe, run_recipe
from factrl.recipes.factworld_report import write_report
from factrl.runs.trajectories import read_trajectories

TINY = dict(preset="veri_r1_factworld_offline_cpu", entities=40, claims=120, heldout_claims=30,
            paraphrase_rate=0.0, teacher_claims=36, teacher_noise=0.0, device="cpu")


def _teach(tmp_path, name, **kw):
    out = tmp_path / name
    run_recipe(FactworldRecipe(**TINY, **kw), out, stages=("worlds", "teach"))
    return out


def test_the_report_breaks_accuracy_down_by_gold_label_with_predicted_counts(tmp_path):
    clean = _teach(tmp_path, "clean")
    # the same claims, every REFUTE claim answered SUPPORT: REFUTE right drops to 0, the rest holds
    confused = _teach(tmp_path, "confused", teacher_confusion="REFUTE->SUPPORT:1.0")
    trajs = read_trajectories(clean / "teach" / "trajectories.jsonl")
    n = {lab: sum(str(t.claim.label) == lab for t in trajs) for lab in ("SUPPORT", "REFUTE", "NOT ENOUGH INFO")}
    assert all(n.values()) and all(t.verdict.label == t.claim.label for t in trajs)
    out = tmp_path / "report"
    shutil.copytree(clean / "teach", out / "eval" / "warmup")
    shutil.copytree(confused / "teach", out / "eval" / "grpo-100pct")
    result = write_report(FactworldRecipe(**TINY), {}, out, {"warmup": None, "grpo@100%": None})
    warm, grpo = result["stages"]
    assert warm["per_label"]["REFUTE"] == {"n": n["REFUTE"], "right": n["REFUTE"]}
    assert warm["predicted"] == {lab: k for lab, k in n.items()}
    refute = grpo["per_label"]["REFUTE"]
    assert (refute["right"], refute["fixed"], refute["broken"]) == (0, 0, n["REFUTE"])
    assert refute["mcnemar_p"] < 0.05 or n["REFUTE"] < 6
    for lab in ("SUPPORT", "NOT ENOUGH INFO"):  # untouched labels: nothing fixed, nothing broken
        cell = grpo["per_label"][lab]
        assert (cell["right"], cell["fixed"], cell["broken"], cell["mcnemar_p"]) == (n[lab], 0, 0, 1.0)
    assert grpo["predicted"] == {"SUPPORT": n["SUPPORT"] + n["REFUTE"], "NOT ENOUGH INFO": n["NOT ENOUGH INFO"]}
    text = (out / "report.md").read_text()
    assert "REFUTE right (fixed / broken, p)" in text and "predicted SUPPORT / REFUTE / NOT ENOUGH INFO" in text
    assert f"| grpo@100% | {n['SUPPORT']} of {n['SUPPORT']} (0 / 0, 1) | 0 of {n['REFUTE']} (0 / {n['REFUTE']}," in text
    assert warm["collapsed_to"] is None and grpo["collapsed_to"] is None  # two labels of three: no collapse
    assert "collapsed policy" not in text


def test_a_stage_that_gives_one_answer_to_every_claim_is_flagged_as_collapsed(tmp_path):
    clean = _teach(tmp_path, "clean")
    one = _teach(tmp_path, "one", teacher_confusion="SUPPORT->NOT ENOUGH INFO:1.0,REFUTE->NOT ENOUGH INFO:1.0")
    out = tmp_path / "report"
    shutil.copytree(clean / "teach", out / "eval" / "warmup")
    shutil.copytree(one / "teach", out / "eval" / "grpo-100pct")
    result = write_report(FactworldRecipe(**TINY), {}, out, {"warmup": None, "grpo@100%": None})
    warm, grpo = result["stages"]
    n = sum(grpo["predicted"].values())
    assert grpo["predicted"] == {"NOT ENOUGH INFO": n}
    assert grpo["collapsed_to"] == "NOT ENOUGH INFO" and warm["collapsed_to"] is None
    # right on every NOT ENOUGH INFO claim: fixes nothing the warm-up missed, yet the note must say why
    text = (out / "report.md").read_text()
    assert f"**grpo@100% answers NOT ENOUGH INFO to {n} of {n} claims**: a collapsed policy" in text
    assert "warmup answers" not in text


def test_a_control_that_trained_nothing_is_called_vacuous_not_a_null(tmp_path):
    import json

    clean = _teach(tmp_path, "clean")
    out = tmp_path / "report"
    shutil.copytree(clean / "teach", out / "eval" / "warmup")
    for control, norms in (("invert_mask", [0.0, 0.0, 0.0]), ("flip_advantage", [0.0, 0.03, 0.05])):
        (out / f"grpo-{control}").mkdir(parents=True)
        rows = [{"step": i + 1, "grad_norm": g, "reward": 0.1} for i, g in enumerate(norms)]
        (out / f"grpo-{control}" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    recipe = FactworldRecipe(**TINY, controls=("flip_advantage", "invert_mask"))
    result = write_report(recipe, {}, out, {"warmup": None})
    assert result["vacuous_controls"] == {"invert_mask": 3}  # flip_advantage moved the weights once: not vacuous
    text = (out / "report.md").read_text()
    assert "**control invert_mask trained nothing**: grad norm 0 at all 3 updates" in text
    assert "control flip_advantage trained nothing" not in text
