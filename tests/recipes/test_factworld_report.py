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
    run_recipe(FactworldRecipe(**{**TINY, **kw}), out, stages=("worlds", "teach"))
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


def test_real_vs_controls_pairs_each_control_with_the_last_real_checkpoint_and_the_pick():
    from factrl.recipes.factworld_report import real_vs_controls

    ids = [str(i) for i in range(10)]
    correct = {"warmup": dict.fromkeys(ids, False),
               "grpo@50%": {i: int(i) < 8 for i in ids},   # 8 right
               "grpo@100%": {i: int(i) < 6 for i in ids},  # 6 right
               "control-shuffle_rewards@100%": {i: int(i) in (0, 9) for i in ids}}
    pairs = real_vs_controls(correct, picked="grpo@50%")
    assert [(p["control"], p["real"]) for p in pairs] == [("control-shuffle_rewards@100%", "grpo@100%"),
                                                           ("control-shuffle_rewards@100%", "grpo@50%")]
    last, pick = pairs
    assert (last["real_only_right"], last["control_only_right"], last["n"]) == (5, 1, 10)
    assert (pick["real_only_right"], pick["control_only_right"]) == (7, 1)
    assert last["real_accuracy"] == 0.6 and last["control_accuracy"] == 0.2
    assert 0.2 < last["mcnemar_p"] < 0.25 and pick["mcnemar_p"] < last["mcnemar_p"]  # exact: 2 * P(X <= 1 | 6)
    # the pick is the last checkpoint, or the warm-up: only the same-budget comparison
    assert len(real_vs_controls(correct, picked="grpo@100%")) == 1
    assert len(real_vs_controls(correct, picked="warmup")) == 1
    assert real_vs_controls({"warmup": correct["warmup"], "control-x@100%": correct["warmup"]}) == []


def test_a_control_that_beats_the_warm_up_is_named_and_the_real_run_is_tested_against_it(tmp_path):
    clean = _teach(tmp_path, "clean")
    confused = _teach(tmp_path, "confused", teacher_confusion="REFUTE->SUPPORT:1.0")
    n_refute = sum(str(t.claim.label) == "REFUTE" for t in read_trajectories(clean / "teach" / "trajectories.jsonl"))
    assert n_refute >= 6  # enough discordant claims for p < 0.05
    out = tmp_path / "report"
    # warm-up wrong on every REFUTE claim; the real run and the shuffled-reward control fix them
    # all; the sign-flipped control stays where the warm-up was
    shutil.copytree(confused / "teach", out / "eval" / "warmup")
    shutil.copytree(clean / "teach", out / "eval" / "grpo-100pct")
    shutil.copytree(clean / "teach", out / "eval" / "control-shuffle_rewards-100pct")
    shutil.copytree(confused / "teach", out / "eval" / "control-flip_advantage-100pct")
    online = _teach(tmp_path, "online", preset="veri_r1_factworld_cpu")  # the same claims, searched
    shutil.copytree(online / "teach", out / "eval" / "control-invert_mask-100pct")
    recipe = FactworldRecipe(**TINY, controls=("flip_advantage", "shuffle_rewards", "invert_mask"))
    stages = {"warmup": None, "grpo@100%": None, "control-flip_advantage@100%": None,
              "control-shuffle_rewards@100%": None, "control-invert_mask@100%": None}
    result = write_report(recipe, {}, out, stages)
    pairs = {p["control"]: p for p in result["real_vs_controls"]}
    flip, shuffle = pairs["control-flip_advantage@100%"], pairs["control-shuffle_rewards@100%"]
    assert (flip["real_only_right"], flip["control_only_right"]) == (n_refute, 0) and flip["mcnemar_p"] < 0.05
    assert (shuffle["real_only_right"], shuffle["control_only_right"], shuffle["mcnemar_p"]) == (0, 0, 1.0)
    text = (out / "report.md").read_text()
    assert "The real run against each broken-trainer control" in text
    assert "| control-flip_advantage@100% | grpo@100% |" in text
    assert f"**control-shuffle_rewards@100% beats the warm-up** ({n_refute} / 0," in text
    assert "control-flip_advantage@100% beats the warm-up" not in text
    # Veri-R1's observations are retrieved sentences: the model's quotes of them are copies of
    # what it was shown, not its own output echoed back, so the inverted mask has no echo to train
    echo = result["invert_mask_echo"]["control-invert_mask@100%"]
    assert echo["observation_tokens"] > 1000 and echo["echoed"] == 0
    assert "observation tokens in its held-out episodes" not in text


def test_an_inverted_mask_control_whose_observations_echo_the_model_gets_one_line_each():
    from factrl.recipes.factworld_report import _echo_lines

    echo = {"control-invert_mask@100%": {"echoed": 35, "observation_tokens": 1000, "share": 0.035, "n": 8},
            "control-invert_mask@50%": {"echoed": 0, "observation_tokens": 900, "share": 0.0, "n": 8}}
    lines = _echo_lines(echo)
    assert lines[0] == "" and len(lines) == 2
    assert lines[1].startswith("- control-invert_mask@100%: 35 of the 1000 observation tokens") and "(3.5%)" in lines[1]
    assert _echo_lines({"control-invert_mask@50%": echo["control-invert_mask@50%"]}) == []
    assert _echo_lines({}) == []
