from collections import Counter

import pytest

from factrl.labels import Label
from factrl.recipes.noisy_teacher import NoisyTeacher, noisy_label, parse_confusion, seeded_share
from factrl.types import Claim


def _claims(n: int, label: str) -> list[Claim]:
    return [Claim(id=f"{label[:1]}{i}", text=f"claim {i}", label=label) for i in range(n)]


def test_parse_confusion_reads_both_spellings_and_refuses_nonsense():
    assert parse_confusion("REFUTE->SUPPORT:0.6, nei->refute:0.2") == {
        Label.REFUTE: (Label.SUPPORT, 0.6), Label.NEI: (Label.REFUTE, 0.2)}
    assert parse_confusion({"REFUTES": ["SUPPORTS", 0.5]}) == {Label.REFUTE: (Label.SUPPORT, 0.5)}
    assert parse_confusion("") == {} and parse_confusion(None) == {}
    with pytest.raises(ValueError, match="unknown label"):
        parse_confusion("MAYBE->SUPPORT:0.5")
    with pytest.raises(ValueError, match="GOLD->SAID:RATE"):
        parse_confusion("REFUTE SUPPORT 0.5")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        parse_confusion("REFUTE->SUPPORT:1.5")


def test_a_confusion_turns_its_share_of_one_label_and_leaves_the_others():
    conf = parse_confusion("REFUTE->SUPPORT:0.6")
    refute, support = _claims(1000, "REFUTE"), _claims(300, "SUPPORT")
    said = Counter(noisy_label(c, 0.0, 0, conf) for c in refute)
    assert said[Label.SUPPORT] + said[Label.REFUTE] == 1000
    assert 0.55 < said[Label.SUPPORT] / 1000 < 0.65  # the greedy verdict it teaches is wrong
    assert all(noisy_label(c, 0.0, 0, conf) is Label.SUPPORT for c in support)
    # seeded: the same claims are confused every time, other seeds pick others
    assert [noisy_label(c, 0.0, 0, conf) for c in refute] == [noisy_label(c, 0.0, 0, conf) for c in refute]
    assert [noisy_label(c, 0.0, 0, conf) for c in refute] != [noisy_label(c, 0.0, 1, conf) for c in refute]
    teacher = NoisyTeacher(refute[:50], noise=0.0, confusion="REFUTE->SUPPORT:1.0", online=False)
    assert {c.label for c in teacher.by_id.values()} == {Label.SUPPORT}


def _world_claim(cid: str, label: str, claimed: str, value: str | None) -> Claim:
    chain = [{"entity": "vrimkram", "attribute": "founded_year", "value": value,
              "sentence_id": "vrimkram_sentence_3" if value else None}]
    ev = [{"id": "vrimkram_sentence_3", "text": f"Vrimkram was founded in {value}."}] if value else []
    return Claim(id=cid, text=f"Vrimkram was founded in {claimed}.", label=label, evidence=ev,
                 meta={"chain": chain, "claimed_value": claimed})


CONTEXT = "Claim: ...\n<information>\n[[vrimkram_sentence_3]]: Vrimkram was founded in 1106.\n</information>\n"


def test_compare_reasoning_sets_the_values_side_by_side_and_stays_consistent_with_a_confused_label():
    claims = [_world_claim("s", "SUPPORT", "1106", "1106"), _world_claim("r", "REFUTE", "1117", "1106"),
              _world_claim("n", "NOT ENOUGH INFO", "1117", None)]
    honest = NoisyTeacher(claims, noise=0.0, online=False, quote=True, compare=True)
    said = {c.id: honest.respond_row(CONTEXT, {"claim_id": c.id}) for c in claims}
    assert said["s"].startswith("<think>The claim says 1106. [[vrimkram_sentence_3]] says 1106. Same,")
    assert "Label: SUPPORT\nEvidence: [[vrimkram_sentence_3]]" in said["s"]
    assert "says 1117. [[vrimkram_sentence_3]] says 1106. Different, so the claim is refuted." in said["r"]
    assert "Label: REFUTE" in said["r"]
    assert "No sentence gives it" in said["n"] and "Label: NOT ENOUGH INFO\nEvidence: \n" in said["n"]
    # an agreeable teacher: the values differ, its judgement (and label) says the same
    agreeable = NoisyTeacher(claims, noise=0.0, online=False, quote=True, compare=True,
                             confusion="REFUTE->SUPPORT:1.0")
    wrong = agreeable.respond_row(CONTEXT, {"claim_id": "r"})
    assert "says 1117. [[vrimkram_sentence_3]] says 1106. Same, so the claim is supported." in wrong
    assert "Label: SUPPORT" in wrong
    # a claim without a generated world's meta keeps the quote reasoning
    plain = Claim(id="p", text="Vrimkram was founded in 1106.", label="SUPPORT",
                  evidence=[{"id": "vrimkram_sentence_3", "text": "Vrimkram was founded in 1106."}])
    quoted = NoisyTeacher([plain], noise=0.0, online=False, quote=True, compare=True).respond_row(CONTEXT, {"claim_id": "p"})
    assert quoted.startswith('<think>[[vrimkram_sentence_3]] says: "Vrimkram was founded in 1106."')


def test_verdict_errors_keep_the_reading_right_and_make_only_the_conclusion_wrong():
    claims = [_world_claim("s", "SUPPORT", "1106", "1106"), _world_claim("r", "REFUTE", "1117", "1106"),
              _world_claim("n", "NOT ENOUGH INFO", "1117", None)]
    slips = NoisyTeacher(claims, noise=0.0, online=False, quote=True, compare=True,
                         confusion="REFUTE->SUPPORT:1.0,SUPPORT->NEI:1.0,NEI->REFUTE:1.0", errors="verdict")
    said = {c.id: slips.respond_row(CONTEXT, {"claim_id": c.id}) for c in claims}
    # the values differ and it says so; the conclusion and the label are the confused ones
    assert "says 1117. [[vrimkram_sentence_3]] says 1106. Different, so the claim is supported." in said["r"]
    assert "Label: SUPPORT\nEvidence: [[vrimkram_sentence_3]]" in said["r"]
    # a right reading concluding NOT ENOUGH INFO cites nothing, as any NOT ENOUGH INFO answer
    assert "says 1106. [[vrimkram_sentence_3]] says 1106. Same, so there is not enough information." in said["s"]
    assert "Label: NOT ENOUGH INFO\nEvidence: \n" in said["s"]
    # nothing shown to cite: NOT ENOUGH INFO whatever the confusion (as the consistent teacher)
    assert "No sentence gives it" in said["n"] and "Label: NOT ENOUGH INFO" in said["n"]
    # quote reasoning: the judgement phrase reads the evidence, the conclusion slips
    plain = Claim(id="p", text="Vrimkram was founded in 1117.", label="REFUTE",
                  evidence=[{"id": "vrimkram_sentence_3", "text": "Vrimkram was founded in 1106."}])
    quoted = NoisyTeacher([plain], noise=0.0, online=False, quote=True, confusion="REFUTE->SUPPORT:1.0",
                          errors="verdict").respond_row(CONTEXT, {"claim_id": "p"})
    assert "This contradicts the claim, so it supports the claim.</think>" in quoted and "Label: SUPPORT" in quoted
    # the default ("consistent") is unchanged: the reasoning follows the wrong label
    same = NoisyTeacher([plain], noise=0.0, online=False, quote=True, confusion="REFUTE->SUPPORT:1.0")
    assert "This states what the claim says, so it supports the claim." in same.respond_row(CONTEXT, {"claim_id": "p"})
    with pytest.raises(ValueError, match="errors must be one of consistent, verdict"):
        NoisyTeacher(claims, noise=0.0, online=False, errors="label")


def test_the_recipe_teaches_verdict_errors_over_a_right_reading_and_checks_the_setting_first(tmp_path):
    from factrl.recipes.factworld import FactworldRecipe, run_recipe
    from factrl.runs.trajectories import read_trajectories

    tiny = dict(preset="veri_r1_factworld_offline_cpu", entities=40, claims=120, heldout_claims=30,
                paraphrase_rate=0.0, teacher_claims=36, teacher_noise=0.0, device="cpu",
                teacher_reasoning="compare", teacher_confusion="REFUTE->SUPPORT:1.0")
    run_recipe(FactworldRecipe(**tiny, teacher_errors="verdict"), tmp_path / "v", stages=("worlds", "teach"))
    text = (tmp_path / "v" / "teach" / "trajectories.jsonl").read_text()
    refute = [t for t in read_trajectories(tmp_path / "v" / "teach" / "trajectories.jsonl")
              if str(t.claim.label) == "REFUTE"]
    assert refute and all(str(t.verdict.label) == "SUPPORT" for t in refute)
    assert text.count("Different, so the claim is supported.") == len(refute)
    assert "Same, so the claim is supported." in text  # the SUPPORT claims, read and judged right
    with pytest.raises(ValueError, match="teacher_errors must be one of"):
        run_recipe(FactworldRecipe(**tiny, teacher_errors="label"), tmp_path / "bad", stages=("worlds",))
    assert not (tmp_path / "bad" / "recipe.json").exists()


def test_a_seeded_share_draws_each_claim_on_its_own():
    claims = _claims(1000, "SUPPORT")
    drawn = seeded_share(claims, 0.6, 0, "question")
    assert 550 <= len(drawn) <= 650
    assert seeded_share(claims[:10], 0.6, 0, "question") == drawn & {c.id for c in claims[:10]}
    assert seeded_share(claims, 0.6, 1, "question") != drawn and seeded_share(claims, 0.6, 0, "other") != drawn
    assert seeded_share(claims, 0.0, 0, "question") == set() and len(seeded_share(claims, 1.0, 0, "q")) == 1000
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        seeded_share(claims, 1.2, 0, "question")
