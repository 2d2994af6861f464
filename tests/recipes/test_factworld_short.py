"""Binary RAR's recipe asks the held-out world's short-form questions of every stage it
evaluates (``short_questions``), and the report gives right / wrong / abstained answers,
the abstentions on unanswerable questions and the short-form hallucination rate, with
exact McNemar tests against the warm-up."""

import json

import pytest

from factrl.recipes.factworld import FactworldRecipe, run_recipe
from factrl.recipes.factworld_eval import evaluate_stage
from factrl.recipes.factworld_report import write_report
from factrl.recipes.factworld_short import short_claims

TINY = dict(preset="binary_rar_factworld_cpu", entities=40, claims=60, heldout_claims=20, teacher_claims=24,
            device="cpu")


def test_each_evaluated_stage_is_also_asked_the_short_questions(tmp_path, fake_evaluation):
    from factrl.recipes import factworld

    r = FactworldRecipe(**TINY, short_questions=5)
    run_recipe(r, tmp_path, stages=("worlds",))
    factworld._evaluate(r, tmp_path, "warmup", tmp_path / "model")
    long_form, short = fake_evaluation[-2:]
    assert len(long_form["claims"]) == 20 and long_form["out_dir"] == tmp_path / "eval" / "warmup"
    assert short["out_dir"] == tmp_path / "eval" / "short-5" / "warmup"
    asked = short["claims"]
    assert len(asked) == 10 and all(c.meta["kind"] == "short" and c.id.startswith("fw202-short-") for c in asked)
    assert [c.meta["answerable"] for c in asked] == [True, False] * 5  # alternating: a partial run stays balanced
    assert short["reward"].name == "rar_factworld" and short["run_info"]["world_seed"] == 202
    # no short questions unless asked, and none for another agent's recipe
    calls = len(fake_evaluation)
    factworld._evaluate(FactworldRecipe(**TINY), tmp_path, "warmup", tmp_path / "model")
    veri_r1 = FactworldRecipe(**{**TINY, "preset": "veri_r1_factworld_cpu"}, short_questions=5)
    factworld._evaluate(veri_r1, tmp_path, "warmup", tmp_path / "model")
    assert len(fake_evaluation) == calls  # the held-out evaluations were done; nothing else was asked


def test_a_world_written_before_the_short_questions_is_written_again(tmp_path):
    r = FactworldRecipe(**TINY)
    run_recipe(r, tmp_path, stages=("worlds",))
    before = (tmp_path / "heldout" / "corpus.jsonl").read_bytes()
    import shutil

    shutil.rmtree(tmp_path / "heldout" / "rar_short")
    with pytest.raises(FileNotFoundError, match="rar_short is missing"):
        short_claims(tmp_path / "heldout", 3)
    run_recipe(FactworldRecipe(**TINY, short_questions=3), tmp_path, stages=("worlds",))  # a resumable setting
    assert len(short_claims(tmp_path / "heldout", 3)) == 6
    assert (tmp_path / "heldout" / "corpus.jsonl").read_bytes() == before


def _answer_with(policy):
    """A scripted policy over the short questions: ``policy(question, gold answers)``."""
    from factrl.lm.scripted import ScriptedLM

    class Scripted(ScriptedLM):
        def runtime_info(self):
            return {"backend": "scripted"}

    def respond(context):
        question = context.split("\n\n")[-2].strip()
        return policy(question, ANSWERS.get(question))
    return Scripted(respond)


ANSWERS: dict = {}


def test_the_report_counts_right_wrong_and_abstained_answers_against_the_warm_up(tmp_path, monkeypatch):
    import factrl.lm.loader

    r = FactworldRecipe(**TINY, short_questions=8)
    run_recipe(r, tmp_path, stages=("worlds",))
    asked = short_claims(tmp_path / "heldout", 8)
    ANSWERS.clear()
    ANSWERS.update({c.text: c.meta["answers"] for c in asked})
    policies = {
        "warmup": lambda q, gold: "I don't know.",  # abstains on everything
        "grpo@100%": lambda q, gold: gold[0] if gold else "Zorbatown.",  # right, and guesses when it cannot know
    }
    for name, policy in policies.items():
        monkeypatch.setattr(factrl.lm.loader, "load_lm", lambda *a, _p=policy, **k: _answer_with(_p))
        evaluate_stage(r, tmp_path, name, tmp_path / "model", "short")
    (tmp_path / "eval" / "warmup").mkdir(parents=True)  # the long-form evaluations are not this test's
    result = write_report(r, {}, tmp_path, {"warmup": None, "grpo@100%": None})
    warm, grpo = result["short_form"]
    assert (warm["answerable"], warm["right"], warm["wrong"], warm["abstained"]) == (8, 0, 0, 8)
    assert warm["unanswerable_abstained"] == 8 and warm["hallucination_rate"] == 0.0
    assert (grpo["right"], grpo["wrong"], grpo["abstained"], grpo["accuracy"]) == (8, 0, 0, 1.0)
    assert grpo["right_vs_warmup"] == {"gained": 8, "lost": 0, "p": pytest.approx(2 / 2 ** 8)}
    assert grpo["unanswerable_abstained"] == 0 and grpo["abstained_unanswerable_vs_warmup"]["lost"] == 8
    assert grpo["hallucination_rate"] == 0.5  # every unanswerable question answered with a guess
    text = (tmp_path / "report.md").read_text()
    assert "Short-form questions of the held-out world" in text and "| grpo@100% | 8 / 0 / 0 of 8 |" in text
    json.dumps(result)
