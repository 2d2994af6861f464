"""The ProFact teacher: protocol-perfect episodes from AVeriTeC gold through the real
environment, honest answers (only what the search showed), and SFT examples for every
context of an episode (the opening one and each question's search)."""

from __future__ import annotations

import pytest

from factrl.envs import EnvDeps, EnvSpec, build
from factrl.labels import Label
from factrl.metrics.averitec_submission import gold_qa_strings, gold_questions
from factrl.registry import RegistryError
from factrl.rewards.profact import ProFactReward
from factrl.rollout import run_episodes
from factrl.train.profact_teacher import NOT_ANSWERED, ProFactTeacher
from factrl.train.sft import is_fully_correct, select_correct, sft_examples
from factrl.train.teacher import TemplateTeacher, make_teacher
from factrl.types import Claim, Passage

from _support import WordOverlapRetriever

GOLD = [
    {"question": "What was the tax rate in 2019?", "answers": [{"answer": "30 percent", "answer_type": "Extractive"}]},
    {"question": "When was the mayor elected?",
     "answers": [{"answer": "No", "answer_type": "Boolean", "boolean_explanation": "He was elected in 2016."}]},
    {"question": "What was the tax rate in 2019?", "answers": [{"answer": "repeated", "answer_type": "Extractive"}]},
    {"question": "Was a bridge built?", "answers": [{"answer": "Yes, in 1999", "answer_type": "Abstractive"}]},
]
# The evidence store: pooled gold QA units with the loader's ids (<claim>_qa_<i>).
PASSAGES = [
    Passage(id="7_qa_0", doc_id="7_qa_0", text="What was the tax rate in 2019? 30 percent",
            sentence_ids=["7_qa_0"], sentences=["What was the tax rate in 2019? 30 percent"]),
    Passage(id="7_qa_1", doc_id="7_qa_1", text="When was the mayor elected? No. He was elected in 2016.",
            sentence_ids=["7_qa_1"], sentences=["When was the mayor elected? No. He was elected in 2016."]),
]
CLAIM = Claim(id="7", text="The mayor raised the tax rate to 30 percent.", label="Refuted", dataset="averitec",
              meta={"questions": GOLD})


def episodes(claims, teacher, **params):
    spec = EnvSpec(name="profact", params=params)
    return run_episodes(lambda: build(spec, EnvDeps(retriever=WordOverlapRetriever(PASSAGES))), claims, teacher)


def test_teacher_episode_is_protocol_perfect_and_scores_on_the_gold():
    (traj,) = episodes([CLAIM], ProFactTeacher([CLAIM], max_questions=3), max_questions=3)
    assert traj.verdict.format_ok, traj.verdict.format_errors
    assert traj.verdict.label is Label.REFUTE
    # The first three distinct gold questions, one search each, with the question as query.
    assert traj.meta["questions"] == ["What was the tax rate in 2019?", "When was the mayor elected?",
                                      "Was a bridge built?"]
    assert traj.searches == traj.meta["questions"]
    answers = [qa["answer"] for qa in traj.meta["qa"]]
    # Shown gold units are answered from the gold (Boolean with its explanation); the
    # bridge question's gold unit is not in the store, so the answer says so.
    assert answers == ["30 percent", "No. He was elected in 2016.", NOT_ANSWERED]
    parts = ProFactReward()(traj).components
    # Three of the four gold questions asked verbatim (the repeat cannot be matched twice).
    assert parts["label"] == 1.0 and parts["question"] == pytest.approx(3 / 4, abs=0.01)
    assert 0.4 < parts["qa"] < 0.75  # two of four gold QA strings matched exactly
    assert is_fully_correct(traj) and select_correct([traj]) == [traj]


def test_teacher_respects_max_questions_and_cuts_long_answers():
    long = dict(CLAIM.meta, questions=[{"question": "What was the tax rate in 2019?",
                                         "answers": [{"answer": "word " * 200, "answer_type": "Extractive"}]}])
    claim = CLAIM.model_copy(update={"meta": long})
    teacher = ProFactTeacher([claim], max_questions=1, max_answer_chars=50)
    (traj,) = episodes([claim], teacher, max_questions=1)
    assert traj.verdict.format_ok and len(traj.meta["questions"]) == 1
    answer = traj.meta["qa"][0]["answer"]
    assert len(answer) <= 52 and answer.endswith("…")


def test_wrong_label_or_broken_stage_is_not_fully_correct():
    (traj,) = episodes([CLAIM], ProFactTeacher([CLAIM]))
    wrong = traj.model_copy(update={"verdict": traj.verdict.model_copy(update={"label": Label.SUPPORT})})
    broken = traj.model_copy(update={"verdict": traj.verdict.model_copy(update={"format_ok": False})})
    assert not is_fully_correct(wrong) and not is_fully_correct(broken)


class _Chars:
    """A character-level student tokenizer (the LM protocol's tokenising half)."""

    eos_token_id = 0

    def chat_prompt_ids(self, messages):
        return [ord(c) for m in messages for c in f"<{m.role}>{m.content}"]

    def encode(self, text):
        return [ord(c) for c in text]


def test_sft_examples_cover_every_context_with_model_turns_only_labelled():
    (traj,) = episodes([CLAIM], ProFactTeacher([CLAIM], max_questions=2), max_questions=2)
    examples = sft_examples([traj], _Chars())
    assert len(examples) == 1 + len(traj.segments) == 3
    decode = lambda ids: "".join(chr(i) for i in ids if i > 0)  # noqa: E731
    learned = [decode(x for x in e["labels"] if x != -100) for e in examples]
    assert learned[0].startswith("<questions>") and learned[0].endswith("<verdict>Refuted</verdict>")
    assert "Stage 3" not in learned[0]  # the verdict stage's record is an observation
    for text in learned[1:]:
        assert text.startswith("<search>") and "<answer>" in text and "<information>" not in text
    # A context over the length bound is dropped, the others kept.
    longest = max(len(e["input_ids"]) for e in examples)
    assert len(sft_examples([traj], _Chars(), max_length=longest - 1)) < 3


def test_make_teacher_picks_the_agents_protocol():
    assert isinstance(make_teacher("profact", [CLAIM], {"max_questions": 2}), ProFactTeacher)
    assert make_teacher("profact", [CLAIM], {"max_questions": 2}).max_questions == 2
    assert isinstance(make_teacher("veri_r1", [CLAIM]), TemplateTeacher)
    assert make_teacher("veri_r1", [CLAIM]).online and not make_teacher("veri_r1_offline", [CLAIM]).online
    with pytest.raises(RegistryError, match="teacher"):
        make_teacher("decompose", [CLAIM])


def test_gold_strings_the_reward_uses_match_the_teacher_items():
    teacher = ProFactTeacher([CLAIM], max_questions=5)
    qs = [q for q, _, _ in teacher.gold(CLAIM)]
    assert qs == list(dict.fromkeys(gold_questions(CLAIM)))
    assert f"{qs[1]} No. He was elected in 2016." in gold_qa_strings(CLAIM)


def test_the_teacher_knows_its_question_from_the_episode_not_from_the_retrieved_text():
    """Retrieved text holding a "Question: ..." line (a pooled QA store does) must not be
    mistaken for the question the search context is about."""
    text = "What was the tax rate in 2019? 30 percent\nQuestion: Was a bridge built?\nmore"
    tricky = [Passage(id="7_qa_0", doc_id="7_qa_0", text=text, sentence_ids=["7_qa_0"], sentences=[text])]
    spec = EnvSpec(name="profact", params={"max_questions": 2})
    (traj,) = run_episodes(lambda: build(spec, EnvDeps(retriever=WordOverlapRetriever(tricky))), [CLAIM],
                           ProFactTeacher([CLAIM], max_questions=2))
    assert traj.verdict.format_ok, traj.verdict.format_errors
    assert traj.searches == ["What was the tax rate in 2019?", "When was the mayor elected?"]
    assert [qa["answer"] for qa in traj.meta["qa"]][0] == "30 percent"


def test_the_veri_r1_teacher_takes_the_setting_from_the_environment_spec():
    """Online or offline comes from the agent's parameters, not from reading the prompt:
    a claim whose words also open the instructions is still searched online."""
    from factrl.envs.veri_r1 import VeriR1Config, VeriR1Env
    from factrl.types import EvidenceRef

    claim = Claim(id="k", text="high-level strategy", label="SUPPORT",
                  evidence=[EvidenceRef(id="nile_sentence_1", text="It flows north.")])
    passages = [Passage(id="nile#0", doc_id="nile", text="high-level strategy", sentence_ids=["nile_sentence_1"],
                        sentences=["high-level strategy"])]
    teacher = make_teacher("veri_r1", [claim], {"mode": "online"})
    assert teacher.online
    (traj,) = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(passages), VeriR1Config(mode="online")), [claim],
                           teacher)
    assert traj.searches == ["high-level strategy"] and traj.verdict.format_ok, traj.verdict.format_errors
    assert not make_teacher("veri_r1", [claim], {"mode": "offline"}).online
    assert not make_teacher("veri_r1_offline", [claim], {}).online
    assert make_teacher("veri_r1", [claim], {}).online  # the environment's own default


def _skakbruv():
    """A one-hop REFUTE claim of a generated world, the sentence stating its gold answer
    and a look-alike's sentence that does not."""
    q = {"question": "How long is Skakbruv?",
         "answers": [{"answer": "879 kilometres", "answer_type": "Extractive", "source_url": "skakbruv_sentence_1"}]}
    claim = Claim(id="fw-1", text="Skakbruv is 568 kilometres long.", label="Refuted", dataset="factworld",
                  meta={"questions": [q], "num_hops": 1})
    stated = Passage(id="skakbruv", doc_id="skakbruv", text="How long is Skakbruv? Skakbruv is 879 kilometres long.",
                     sentence_ids=["skakbruv_sentence_1"], sentences=["Skakbruv is 879 kilometres long."])
    other = Passage(id="skekbruv", doc_id="skekbruv", text="How long is Skekbruv? Skekbruv is a river.",
                    sentence_ids=["skekbruv_sentence_0"], sentences=["How long is Skekbruv? Skekbruv is a river."])
    return claim, stated, other


def _one_search_episode(claim, shown, teacher):
    spec = EnvSpec(name="profact", params={"max_questions": 1, "top_k": 1})
    return run_episodes(lambda: build(spec, EnvDeps(retriever=WordOverlapRetriever([shown]))), [claim], teacher)


def test_an_answers_source_sentence_counts_as_its_gold_unit_in_a_searched_corpus():
    """In a generated world the store is the corpus itself: an answer's ``source_url``
    names the sentence that states it, and the teacher answers once that sentence is shown
    (and only then)."""
    claim, stated, other = _skakbruv()
    for shown, answer in ((stated, "879 kilometres"), (other, NOT_ANSWERED)):
        (traj,) = _one_search_episode(claim, shown, ProFactTeacher([claim], max_questions=1))
        assert traj.verdict.format_ok and traj.verdict.label == Label.REFUTE
        assert [qa["answer"] for qa in traj.meta["qa"]] == [answer]


def test_a_restated_claim_is_asked_in_place_of_the_gold_question_and_answered_from_its_gold():
    """``restate``: the question stage's planted error. The claim comes back as a yes-or-no
    question, far from the gold one in METEOR, and is still answered from the first gold
    question's answer once its sentence was shown (and only then)."""
    from factrl.teachers.profact import restated

    assert restated("The length of Skakbruv is 879 kilometres.") == "Is it true that the length of Skakbruv is 879 kilometres?"
    assert restated("Skakbruv is 568 kilometres long.") == "Is it true that Skakbruv is 568 kilometres long?"
    claim, stated, other = _skakbruv()
    for shown, answer in ((stated, "879 kilometres"), (other, NOT_ANSWERED)):
        (traj,) = _one_search_episode(claim, shown, ProFactTeacher([claim], max_questions=1, restate={"fw-1"}))
        assert traj.meta["questions"] == [restated(claim.text)] and traj.searches == traj.meta["questions"]
        assert [qa["answer"] for qa in traj.meta["qa"]] == [answer]
        parts = ProFactReward()(traj).components
        assert parts["label"] == 1.0 and parts["question"] < 0.6  # the reward sees the worse question
    (plain,) = _one_search_episode(claim, stated, ProFactTeacher([claim], max_questions=1))
    assert plain.meta["questions"] == ["How long is Skakbruv?"]
    assert ProFactReward()(plain).components["question"] > 0.95


def test_the_subject_question_names_only_the_subject_and_is_answered_from_the_gold():
    """``question_form="subject"``: the planted question asks about the claim's subject
    alone (no attribute, no claimed value), is searched as asked, and is answered from the
    gold answer once its sentence was shown (and only then); a claim without a chain, or
    an unknown form, is refused by name."""
    from factrl.teachers.profact import about_subject

    claim, stated, other = _skakbruv()
    claim = claim.model_copy(update={"meta": claim.meta | {"chain": [{"entity": "skakbruv", "name": "Skakbruv"}]}})
    assert about_subject(claim) == "What is known about Skakbruv?"
    for shown, answer in ((stated, "879 kilometres"), (other, NOT_ANSWERED)):
        teacher = ProFactTeacher([claim], max_questions=1, restate={"fw-1"}, question_form="subject")
        (traj,) = _one_search_episode(claim, shown, teacher)
        assert traj.meta["questions"] == ["What is known about Skakbruv?"] and traj.searches == traj.meta["questions"]
        assert [qa["answer"] for qa in traj.meta["qa"]] == [answer]
        assert ProFactReward()(traj).components["question"] < 0.6
    bare, _, _ = _skakbruv()
    with pytest.raises(ValueError, match="fw-1: the subject question needs a claim whose meta names its chain"):
        about_subject(bare)
    with pytest.raises(ValueError, match="fw-1: the subject question needs a claim whose meta names its chain"):
        ProFactTeacher([bare], restate={"fw-1"}, question_form="subject")
    with pytest.raises(ValueError, match="question_form must be one of restated, subject"):
        ProFactTeacher([claim], restate={"fw-1"}, question_form="vague")


def test_a_verdict_slip_on_an_unstated_claim_keeps_the_reading_nothing_answers_it():
    """With ``read_labels`` (the gold) beside a wrong label, an unstated claim's record
    still reads "No answer gives it" and only the conclusion slips; a stated claim whose
    answer was not shown still concludes Not Enough Evidence, slip or not."""
    unstated = Claim(id="n", text="Kuldath lies in Vrethuk.", label="Refuted", dataset="factworld",
                     meta={"claimed_value": "Vrethuk", "questions": [
                         {"question": "In which country is Kuldath?",
                          "answers": [{"answer": "No answer could be found.", "answer_type": "Unanswerable",
                                       "source_url": ""}]}]})
    missed = Claim(id="s", text="Skakbruv is 879 kilometres long.", label="Refuted", dataset="factworld",
                   meta={"claimed_value": "879", "questions": [
                       {"question": "How long is Skakbruv?",
                        "answers": [{"answer": "879 kilometres", "answer_type": "Extractive",
                                     "source_url": "skakbruv_sentence_1"}]}]})
    teacher = ProFactTeacher([unstated, missed], max_questions=1, reasoning="compare",
                             read_labels={"n": Label.NEI, "s": Label.SUPPORT})
    trajs = episodes([unstated, missed], teacher, max_questions=1)  # the store holds neither's sentence
    final = {t.claim_id: t.turns[-1].text for t in trajs}
    assert final["n"] == ("<justification>The claim says Vrethuk. No answer gives it, so the claim is refuted."
                          "</justification>\n<verdict>Refuted</verdict>")
    assert "No answer gives it, so there is not enough evidence." in final["s"]
    honest = ProFactTeacher([unstated.model_copy(update={"label": Label.NEI})], max_questions=1, reasoning="compare")
    (t,) = episodes([unstated.model_copy(update={"label": Label.NEI})], honest, max_questions=1)
    assert t.verdict.label is Label.NEI
