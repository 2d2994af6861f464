"""The factworld recipe with ProFact's preset: the teach stage writes the gold-question
teacher's episodes on the generated world (answers only from sentences it was shown;
noisy verdicts where asked), and the report adds question METEOR with a paired test."""

import json
import shutil

import pytest

from factrl.labels import Label
from factrl.recipes.factworld import FactworldRecipe, run_recipe
from factrl.recipes.factworld_report import write_report
from factrl.runs.trajectories import read_trajectories

TINY = dict(preset="profact_factworld_cpu", entities=40, claims=120, heldout_claims=30, paraphrase_rate=0.0,
            teacher_claims=24, device="cpu")


def _teach(tmp_path, name, **kw):
    out = tmp_path / name
    run_recipe(FactworldRecipe(**TINY, **kw), out, stages=("worlds", "teach"))
    return out, read_trajectories(out / "teach" / "trajectories.jsonl")


def test_the_profact_teacher_plays_the_generated_world(tmp_path):
    out, trajs = _teach(tmp_path, "clean", teacher_noise=0.0)
    assert len(trajs) == 24 and all(t.verdict.format_ok and not t.error for t in trajs)
    assert all(t.verdict.label == t.claim.label for t in trajs)
    by_label = {lab: [t for t in trajs if t.claim.label == lab] for lab in Label}
    for t in by_label[Label.NEI]:  # the world never states it: nothing shown answers it
        assert [qa["answer"] for qa in t.meta["qa"]] == ["The evidence does not answer this question."]
    for t in by_label[Label.SUPPORT] + by_label[Label.REFUTE]:
        (qa,) = t.meta["qa"]
        gold = t.claim.meta["questions"][0]["answers"][0]
        if gold["source_url"] in qa["retrieved"]:
            assert qa["answer"] == gold["answer"]
    answered = [t for t in by_label[Label.SUPPORT] + by_label[Label.REFUTE]
                if "does not answer" not in t.meta["qa"][0]["answer"]]
    assert len(answered) >= len(by_label[Label.SUPPORT] + by_label[Label.REFUTE]) // 2
    metrics = json.loads((out / "teach" / "metrics.json").read_text())
    assert metrics["averitec"]["q_only_meteor"] > 0.95 and metrics["averitec"]["label_acc"] == 1.0


def test_the_report_adds_question_meteor_with_a_paired_test(tmp_path):
    clean, _ = _teach(tmp_path, "clean", teacher_noise=0.0)
    noisy, trajs = _teach(tmp_path, "noisy", teacher_noise=1.0)
    assert sum(t.verdict.label != t.claim.label for t in trajs) >= 8  # two in three labels drawn wrong
    out = tmp_path / "report"
    shutil.copytree(clean / "teach", out / "eval" / "warmup")
    shutil.copytree(noisy / "teach", out / "eval" / "grpo-100pct")
    recipe = FactworldRecipe(**TINY)
    result = write_report(recipe, {}, out, {"warmup": None, "grpo@100%": None})
    warm, grpo = result["stages"]
    assert warm["accuracy"] == 1.0 and grpo["accuracy"] < 0.7 and grpo["mcnemar_p"] < 0.05
    # the same questions in both: METEOR equal, the paired test finds nothing
    assert grpo["question_meteor"] == pytest.approx(warm["question_meteor"])
    assert grpo["meteor_diff_vs_warmup"] == pytest.approx(0.0) and grpo["meteor_p"] == 1.0
    assert "question METEOR" in (out / "report.md").read_text()


def test_compare_reasoning_justifies_the_verdict_and_verdict_errors_slip_only_the_conclusion(tmp_path):
    _, honest = _teach(tmp_path, "compare", teacher_noise=0.0, teacher_reasoning="compare")
    for t in honest:
        final = t.turns[-1].text
        claimed = t.claim.meta["claimed_value"]
        assert final.startswith(f"<justification>The claim says {claimed}.") and t.verdict.label == (
            t.claim.label if "does not answer" not in t.meta["qa"][-1]["answer"] else Label.NEI)
        if t.claim.label is Label.REFUTE and t.verdict.label is Label.REFUTE:
            assert "Different, so the claim is refuted.</justification>\n<verdict>Refuted</verdict>" in final
    assert any("Same, so the claim is supported." in t.turns[-1].text for t in honest)
    _, slips = _teach(tmp_path, "slips", teacher_noise=0.0, teacher_reasoning="compare",
                      teacher_confusion="REFUTE->SUPPORT:1.0", teacher_errors="verdict")
    refuted = [t for t in slips if t.claim.label is Label.REFUTE and t.verdict.label is not Label.NEI]
    assert refuted and all("Different, so the claim is supported." in t.turns[-1].text
                           and t.verdict.label is Label.SUPPORT for t in refuted)
    with pytest.raises(ValueError, match="needs a teacher whose reasoning reads the evidence"):
        _teach(tmp_path, "bare", teacher_noise=0.0, teacher_errors="verdict")


def test_planted_question_and_unstated_verdict_errors_each_hit_their_seeded_share(tmp_path):
    """``teacher_question_noise``: a seeded share of the teacher's claims is asked as the
    claim restated, still answered from the gold sentence when shown; with an NEI
    confusion over a right reading, the unstated claims read "No answer gives it" and
    conclude Refuted."""
    from factrl.teachers.profact import restated

    _, trajs = _teach(tmp_path, "planted", teacher_noise=0.0, teacher_reasoning="compare",
                      teacher_confusion="NEI->REFUTE:1.0", teacher_errors="verdict", teacher_question_noise=0.5)
    asked = [t.meta["questions"] == [restated(t.claim.text)] for t in trajs]
    assert 6 <= sum(asked) <= 18  # about half of 24
    for t, r in zip(trajs, asked):
        if not r:
            assert t.meta["questions"] == [t.claim.meta["questions"][0]["question"]]
        gold = t.claim.meta["questions"][0]["answers"][0]
        if gold["source_url"] and gold["source_url"] in t.meta["qa"][0]["retrieved"]:
            assert t.meta["qa"][0]["answer"] == gold["answer"]
    unstated = [t for t in trajs if t.claim.label is Label.NEI]
    assert unstated and all("No answer gives it, so the claim is refuted." in t.turns[-1].text
                            and t.verdict.label is Label.REFUTE for t in unstated)
    # the same seed draws the same claims
    _, again = _teach(tmp_path, "again", teacher_noise=0.0, teacher_reasoning="compare",
                      teacher_confusion="NEI->REFUTE:1.0", teacher_errors="verdict", teacher_question_noise=0.5)
    assert [t.meta["questions"] for t in again] == [t.meta["questions"] for t in trajs]


def test_the_subject_form_plants_the_subject_question_and_a_slip_after_same(tmp_path):
    """``teacher_question_form=subject``: the seeded share is asked about the claim's
    subject alone; ``SUPPORT->REFUTE`` over a right reading reads "Same" and concludes
    Refuted."""
    from factrl.teachers.profact import about_subject

    _, trajs = _teach(tmp_path, "subject", teacher_noise=0.0, teacher_reasoning="compare",
                      teacher_confusion="SUPPORT->REFUTE:1.0", teacher_errors="verdict",
                      teacher_question_noise=0.5, teacher_question_form="subject")
    asked = [t.meta["questions"] == [about_subject(t.claim)] for t in trajs]
    assert 6 <= sum(asked) <= 18
    supported = [t for t in trajs if t.claim.label is Label.SUPPORT
                 and t.meta["qa"][0]["answer"] != "The evidence does not answer this question."]
    assert supported and all("Same, so the claim is refuted." in t.turns[-1].text
                             and t.verdict.label is Label.REFUTE for t in supported)
    with pytest.raises(ValueError, match="teacher_question_form must be one of restated, subject"):
        FactworldRecipe(**TINY, teacher_question_noise=0.5, teacher_question_form="vague")
    with pytest.raises(ValueError, match="teacher_question_form is the form of the planted questions"):
        FactworldRecipe(**TINY, teacher_question_form="subject")


def test_question_noise_is_profacts_and_a_share(tmp_path):
    with pytest.raises(ValueError, match="teacher_question_noise must be a share"):
        FactworldRecipe(**TINY, teacher_question_noise=1.5)
    other = dict(TINY, preset="veri_r1_factworld_cpu")
    with pytest.raises(ValueError, match="teacher_question_noise is ProFact's"):
        run_recipe(FactworldRecipe(**other, teacher_question_noise=0.5), tmp_path / "v", stages=("worlds",))
    assert not (tmp_path / "v" / "world").exists()
