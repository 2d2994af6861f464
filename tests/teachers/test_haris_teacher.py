"""The HARIS teacher plays both agents on a generated 3-hop world: the reasoner asks the
gold hop questions in order while the reports answer them, the search agent reports only
what its search showed, and the verification is the label on HARIS's two-way scale."""

import pytest

from factrl.labels import Label
from factrl.protocol.haris import binary_gold
from factrl.recipes.factworld import FactworldRecipe, run_recipe
from factrl.runs.trajectories import read_trajectories
from factrl.teachers import make_teacher
from factrl.teachers.haris import NOT_FOUND, HarisTeacher
from factrl.types import Claim

TINY = dict(preset="haris_factworld_cpu", entities=60, claims=120, heldout_claims=30, hops="3",
            paraphrase_rate=0.0, teacher_claims=30, device="cpu")


def _teach(tmp_path, name, **kw):
    out = tmp_path / name
    run_recipe(FactworldRecipe(**TINY, **kw), out, stages=("worlds", "teach"))
    return read_trajectories(out / "teach" / "trajectories.jsonl")


def test_the_teacher_asks_each_hop_reports_what_was_shown_and_verifies_two_way(tmp_path):
    trajs = _teach(tmp_path, "clean", teacher_noise=0.0)
    assert len(trajs) == 30 and all(t.verdict.format_ok and not t.error for t in trajs)

    def missed(t):
        gold = t.claim.meta["questions"]
        return len(t.meta["reports"]) < len(gold) or NOT_FOUND in t.meta["reports"][-1]

    # the label where every hop was answered; Refute (nothing supports it) where the search missed one
    assert all(t.verdict.label == (Label.REFUTE if missed(t) else binary_gold(t.claim.label)) for t in trajs)
    assert any(missed(t) and t.claim.label is Label.SUPPORT for t in trajs)  # the case is exercised
    assert sum(t.verdict.label == binary_gold(t.claim.label) for t in trajs) >= 20
    # two-way balanced: as many Support as Refute (REFUTE + NOT ENOUGH INFO) claims
    support = sum(t.claim.label is Label.SUPPORT for t in trajs)
    assert abs(support - (len(trajs) - support)) <= 2
    for t in trajs:
        gold = t.claim.meta["questions"]
        asked, reports = t.meta["questions"], t.meta["reports"]
        assert asked == [q["question"] for q in gold[: len(asked)]] and len(t.segments) == len(asked)
        for i, report in enumerate(reports[:-1]):  # a further question only after an answered one
            assert NOT_FOUND not in report and gold[i]["answers"][0]["answer"].lower() in report.lower()
        for segment, q in zip(t.segments, gold):
            shown = "".join(turn.text for turn in segment.turns if turn.source != "model")
            source = q["answers"][0]["source_url"]
            report = segment.turns[-1].text
            if NOT_FOUND not in report:  # an answer rests on the gold sentence it was shown
                assert source and f"[[{source}]]" in shown and q["answers"][0]["answer"] in report
        if t.claim.label is Label.NEI:  # the unstated hop is never answered
            assert NOT_FOUND in reports[-1]
    answered = [t for t in trajs if t.claim.label is not Label.NEI and len(t.meta["questions"]) == 3
                and NOT_FOUND not in t.meta["reports"][-1]]
    assert len(answered) >= len([t for t in trajs if t.claim.label is not Label.NEI]) // 2


def test_a_noisy_teacher_verifies_wrong_on_purpose(tmp_path):
    trajs = _teach(tmp_path, "noisy", teacher_noise=1.0)
    assert all(t.verdict.format_ok for t in trajs)
    assert sum(t.verdict.label != binary_gold(t.claim.label) for t in trajs) >= 5


def test_a_claim_without_hop_questions_asks_the_claim_itself():
    claim = Claim(id="c1", text="  Velkor  flows into the Ostrel Sea. ", label=Label.SUPPORT,
                  evidence=[{"id": "velkor_1"}])
    teacher = make_teacher("haris", [claim], {"max_questions": 2})
    assert isinstance(teacher, HarisTeacher) and teacher.max_questions == 2
    assert teacher.hops(claim) == [("Velkor flows into the Ostrel Sea.", "", "")]
    first = teacher.respond_row("<user>prompt</user><assistant>", {"claim_id": "c1", "role": "policy", "context": 0})
    assert first.endswith("<question>Velkor flows into the Ostrel Sea.</question>")
    call = teacher.respond_row("ctx", {"claim_id": "c1", "role": "searcher", "context": 1, "context_turn": 0})
    assert call.endswith("<search>Velkor flows into the Ostrel Sea.</search>")
    shown = call + "\n<result>\n[[velkor_0]]: Velkor — Velkor is a river.\n[[velkor_1]]: Velkor flows into the Ostrel Sea.\n</result>\n"
    report = teacher.respond_row(shown, {"claim_id": "c1", "role": "searcher", "context": 1, "context_turn": 1})
    assert report.endswith("<report>Velkor flows into the Ostrel Sea.</report>")
    missed = call + "\n<result>\n[[korvath_0]]: Korvath — Korvath is a city.\n</result>\n"
    assert NOT_FOUND in teacher.respond_row(missed, {"claim_id": "c1", "role": "searcher", "context": 1,
                                                     "context_turn": 1})
    final = teacher.respond_row(first + "\n<result>\nVelkor flows into the Ostrel Sea.\n</result>\n",
                                {"claim_id": "c1", "role": "policy", "context": 0, "context_turn": 1})
    assert final.endswith("\\boxed{Support} </verification>")


def _missed_hop_verification(missed_hop):
    claim = Claim(id="c1", text="The river of Korvath is the Velkor.", label=Label.SUPPORT,
                  meta={"claimed_value": "Velkor", "questions": [
                      {"question": "Which river flows through Korvath?",
                       "answers": [{"answer": "Velkor", "source_url": "korvath_2"}]}]})
    teacher = make_teacher("haris", [claim], {"max_questions": 3, "missed_hop": missed_hop})
    return teacher.respond_row(f"prompt\n<result>\n{NOT_FOUND}\n</result>\n",
                               {"claim_id": "c1", "role": "policy", "context": 0, "context_turn": 1})


def test_a_support_label_after_a_missed_hop_is_verified_refute_unless_told_to_keep_it():
    final = _missed_hop_verification("refute")
    assert final.endswith("\\boxed{Refute} </verification>")
    assert 'did not find the answer to "Which river flows through Korvath?"' in final
    assert _missed_hop_verification("label").endswith("\\boxed{Support} </verification>")
    with pytest.raises(ValueError, match="missed_hop must be one of"):
        _missed_hop_verification("guess")


def test_the_recipe_checks_the_setting_before_it_writes_anything(tmp_path):
    with pytest.raises(ValueError, match="teacher_missed_hop must be"):
        run_recipe(FactworldRecipe(**TINY, teacher_missed_hop="gold"), tmp_path / "r", stages=("worlds",))
    assert not (tmp_path / "r" / "recipe.json").exists()


def test_read_labels_keep_the_comparison_right_under_a_wrong_verdict():
    claim = Claim(id="c1", text="The river of Korvath is the Ostrel.", label=Label.SUPPORT,  # the taught (wrong) label
                  meta={"claimed_value": "Ostrel", "questions": [
                      {"question": "Which river flows through Korvath?",
                       "answers": [{"answer": "Velkor", "source_url": "korvath_2"}]}]})
    row = {"claim_id": "c1", "role": "policy", "context": 0, "context_turn": 1}
    context = "prompt\n<result>\nVelkor. The river Velkor flows through Korvath.\n</result>\n"
    slipped = make_teacher("haris", [claim], {"read_labels": {"c1": Label.REFUTE}}).respond_row(context, row)
    assert "The claim says Ostrel. The search agent found Velkor. Different, so the claim is supported." in slipped
    assert slipped.endswith("\\boxed{Support} </verification>")
    consistent = make_teacher("haris", [claim], {}).respond_row(context, row)
    assert "Same, so the claim is supported." in consistent


def test_claim_first_writes_the_claimed_value_in_the_first_thought_only():
    claim = Claim(id="c1", text="The river of Korvath is the Velkor.", label=Label.SUPPORT,
                  meta={"claimed_value": "Velkor", "questions": [
                      {"question": "Which river flows through Korvath?",
                       "answers": [{"answer": "Velkor", "source_url": "korvath_2"}]},
                      {"question": "Into which sea does Velkor flow?",
                       "answers": [{"answer": "Ostrel Sea", "source_url": "velkor_1"}]}]})
    row = {"claim_id": "c1", "role": "policy", "context": 0}
    plain = make_teacher("haris", [claim], {"max_questions": 3}).respond_row("prompt", row)
    assert plain.startswith("<think>I need to find a bridging fact.</think>")
    first = make_teacher("haris", [claim], {"max_questions": 3, "claim_first": True})
    opening = first.respond_row("prompt", row)
    assert opening.startswith("<think>The claim says Velkor. I need to find a bridging fact.</think>")
    second = first.respond_row("prompt\n<result>\nVelkor. The river Velkor flows through Korvath.\n</result>\n", row)
    assert second.startswith("<think>Next I need to find a bridging fact.</think>")
    assert second.endswith("<question>Into which sea does Velkor flow?</question>")


def test_claim_first_is_refused_for_a_teacher_other_than_haris(tmp_path):
    with pytest.raises(ValueError, match="teacher_claim_first is a setting of HARIS"):
        run_recipe(FactworldRecipe(**(TINY | {"preset": "veri_r1_factworld_cpu", "hops": "1"}),
                                   teacher_claim_first=True), tmp_path / "r", stages=("worlds", "teach"))


def _compared(claim_id, claimed, found, word, box, attribute="population"):
    """A teacher episode whose verification compares ``claimed`` with ``found``."""
    from factrl.types import Trajectory, Turn

    def turn(source, text):
        return Turn(source=source, text=text, token_ids=[1], mask=[int(source == "model")])

    claim = Claim(id=claim_id, text=f"The population of the city is {claimed}.", label=Label.SUPPORT,
                  meta={"claimed_value": claimed, "chain": [{"attribute": attribute}]})
    final = (f"<think>The claim says {claimed}. The search agent found {found}. {word}, so the claim is "
             f"{'supported' if box == 'Support' else 'refuted'}.</think>\n"
             f"<verification> The final verification is \\boxed{{{box}}} </verification>")
    return Trajectory(claim_id=claim_id, env="haris", claim=claim, prompt=[],
                      turns=[turn("model", "<think>I need to find a bridging fact.</think>\n<question>q?</question>"),
                             turn("env", f"\n<result>\n{found}. The city is home to {found} people.\n</result>\n"),
                             turn("model", final)],
                      segments=[{"role": "searcher"}])


def test_comparison_copies_read_each_context_with_the_other_word():
    from factrl.teachers.haris import comparison_copies

    trajs = [_compared("s1", "959,000", "959,000", "Same", "Refute"),
             _compared("s2", "546,000", "546,000", "Same", "Support"),
             _compared("r1", "1,200", "3,400", "Different", "Refute"),
             _compared("x1", "Ostrel", "Ostrel", "Same", "Refute", attribute="sea")]  # no other sea to swap in
    copies, skipped = comparison_copies(trajs, seed=0)
    assert skipped == 1 and [c.claim_id for c in copies] == ["s1", "s2", "r1"]
    by_id = {c.claim_id: c for c in copies}
    same = by_id["r1"]  # a Different episode: its report now found the claimed value
    assert "found 1,200. Same, so the claim is" in same.turns[-1].text and "1,200 people" in same.turns[-2].text
    for c in (by_id["s1"], by_id["s2"]):  # a Same episode: another population found, read Different, refuted
        claimed = c.claim.meta["claimed_value"]
        assert f"The claim says {claimed}. The search agent found " in c.turns[-1].text
        assert "Different, so the claim is refuted." in c.turns[-1].text
        assert c.turns[-1].text.endswith("\\boxed{Refute} </verification>") and claimed not in c.turns[-2].text
    for c in copies:  # only the verification trains; the search agent's contexts are not copied
        assert [t.source for t in c.turns] == ["env", "env", "model"] and c.segments == []
        assert all(m == 0 for t in c.turns[:-1] for m in t.mask)
    assert [t.turns[-1].text for t in trajs][0].count("959,000") == 2  # the originals are untouched
    assert comparison_copies(trajs, seed=0)[0] == copies  # seeded


def test_comparison_copies_are_refused_for_a_teacher_other_than_haris(tmp_path):
    with pytest.raises(ValueError, match="teacher_comparison_copies copies HARIS"):
        run_recipe(FactworldRecipe(**(TINY | {"preset": "veri_r1_factworld_cpu", "hops": "1"}),
                                   teacher_comparison_copies=True), tmp_path / "r", stages=("worlds", "teach"))
