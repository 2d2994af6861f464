"""ProFact's three stages on scripted model outputs through the real episode machine:
each stage's protocol and malformed cases, per-stage failures, the 12-step bound, and
context isolation (no earlier question's search results in a later question's context)."""

from __future__ import annotations

import re

import pytest

from factrl.envs import ENVS, POLICY, EnvDeps, EnvSpec, build
from factrl.envs.profact import ProFactConfig, parse_answer, parse_questions, parse_search_call, parse_verdict_turn
from factrl.labels import Label
from factrl.lm.scripted import ScriptedLM
from factrl.metrics.failures import format_failure_kinds
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, Passage

from _support import WordOverlapRetriever

PASSAGES = [
    # No word is shared across passages or with the other question: each query finds one.
    Passage(id="p_tax", doc_id="p_tax", text="Tax rate rose to 30 percent during 2019.",
            sentence_ids=["tax_0"], sentences=["Tax rate rose to 30 percent during 2019."]),
    Passage(id="p_mayor", doc_id="p_mayor", text="Mayor elected 2016.",
            sentence_ids=["mayor_0"], sentences=["Mayor elected 2016."]),
    Passage(id="p_bridge", doc_id="p_bridge", text="Bridge opened for traffic 1999.",
            sentence_ids=["bridge_0"], sentences=["Bridge opened for traffic 1999."]),
]
GOLD_QUESTIONS = [
    {"question": "What was the tax rate in 2019?", "answers": [{"answer": "30 percent", "answer_type": "Extractive"}]},
    {"question": "When was the mayor elected?", "answers": [{"answer": "In 2016", "answer_type": "Extractive"}]},
]
CLAIM = Claim(id="7", text="The mayor raised the tax rate to 30 percent.", label="Refuted", dataset="averitec",
              meta={"questions": GOLD_QUESTIONS, "speaker": "A blogger", "claim_date": "1-2-2020"})

QUESTIONS = "<questions>\n1. What was the tax rate in 2019?\n2. When was the mayor elected?\n</questions>"
VERDICT = "<justification>The rate did rise.</justification>\n<verdict>Refuted</verdict>"


def stage(context: str) -> str:
    """Which stage the scripted model is answering, from the context it is given."""
    if "Stage 3:" in context:
        return "verdict"
    if "Stage 1 (now)" in context:
        return "question"
    return "answer" if "\n<information>\n" in context else "search"


def script(questions=QUESTIONS, search=None, answer=None, verdict=VERDICT):
    """A model answering each stage with fixed text (search/answer: functions of the
    question, defaulting to a query that is the question and a canned answer)."""
    def respond(context):
        s = stage(context)
        question = (re.search(r"Question: (.*)\n", context) or [None, ""])[1]
        if s == "question":
            return questions
        if s == "search":
            return search(question) if search else f"<search>{question}</search>"
        if s == "answer":
            return answer(question) if answer else f"<answer>Answer to: {question}</answer>"
        return verdict
    return respond


def run(respond, claim=CLAIM, retriever=None, rollout=None, **params):
    retriever = retriever or WordOverlapRetriever(PASSAGES)
    lm = ScriptedLM(respond)
    (traj,) = run_episodes(lambda: build(EnvSpec(name="profact", params=params), EnvDeps(retriever=retriever)),
                           [claim], lm, rollout or RolloutConfig(temperature=0))
    return traj, retriever


def segment_text(seg) -> str:
    return "".join(m.content for m in seg.prompt) + "".join(t.text for t in seg.turns)


# -- the whole protocol ------------------------------------------------------------------
def test_profact_runs_three_stages_on_a_well_formed_episode():
    traj, retriever = run(script())
    assert traj.error is None, traj.error
    assert "registered" or ENVS.get("profact")
    # Question stage: the opening context, with the claim, speaker and date.
    assert "Claim: The mayor raised the tax rate to 30 percent." in traj.prompt[0].content
    assert "Speaker: A blogger" in traj.prompt[0].content and "Date: 1-2-2020" in traj.prompt[0].content
    assert traj.meta["questions"] == ["What was the tax rate in 2019?", "When was the mayor elected?"]
    # Search stage: one search per question, each in its own segment (role "search").
    assert retriever.queries == traj.meta["questions"] == traj.searches
    assert [s.role for s in traj.segments] == ["search", "search"]
    for seg in traj.segments:
        assert [t.source for t in seg.turns] == ["model", "env", "model"]
        assert [set(t.mask) for t in seg.turns] == [{1}, {0}, {1}]
        assert seg.turns[1].text.startswith("\n<information>\n[[")
    qa = traj.meta["qa"]
    assert [s["answer"] for s in qa] == ["Answer to: What was the tax rate in 2019?",
                                         "Answer to: When was the mayor elected?"]
    assert qa[0]["retrieved"][0] == "tax_0" and qa[1]["retrieved"][0] == "mayor_0"
    # Verdict stage: back in the opening context, after the record (a masked observation).
    assert [t.source for t in traj.turns] == ["model", "env", "model"]
    record = traj.turns[1].text
    assert "Q1: What was the tax rate in 2019?\nA1: Answer to: What was the tax rate in 2019?" in record
    assert traj.turns[1].mask == [0] * len(traj.turns[1].token_ids)
    assert traj.turns[2].text == VERDICT
    v = traj.verdict
    assert v.label is Label.REFUTE and v.answered and v.format_ok, v.format_errors
    assert traj.meta["justification"] == "The rate did rise."
    assert traj.meta["stage_ok"] == {"question": True, "search": True, "verdict": True}
    # Scored by the profact reward: label correct, METEOR parts in (0, 1].
    c = traj.reward.components
    assert c["label"] == 1.0 and 0 < c["question"] <= 1 and 0 < c["qa"] <= 1
    assert traj.reward.total == pytest.approx(c["question"] + c["qa"] + 1.0)


def test_context_isolation_no_earlier_results_in_a_later_search_context():
    traj, _ = run(script())
    first, second = (segment_text(s) for s in traj.segments)
    assert "Tax rate rose" in first and "Tax rate rose" not in second and "tax_0" not in second
    assert "Mayor elected" in second and "Mayor elected" not in first
    # Nor the earlier question, its answer or the question stage's list.
    assert "What was the tax rate" not in second and "Answer to:" not in traj.segments[1].prompt[0].content
    assert "<questions>" not in second
    # The search contexts are fresh prompts (their own prompt ids), not continuations.
    assert all(seg.prompt_ids and seg.prompt_ids != traj.prompt_ids for seg in traj.segments)
    # The opening context never sees retrieved text, only the record of answers.
    opening = traj.prompt[0].content + "".join(t.text for t in traj.turns)
    assert "<information>" not in opening and "tax_0" not in opening


def test_five_questions_make_twelve_steps_and_a_sixth_is_a_format_error():
    qs = "<questions>\n" + "\n".join(f"{i}. Question {i} about the tax rate?" for i in range(1, 7)) + "\n</questions>"
    lm_calls = []
    respond = script(questions=qs)
    traj, retriever = run(lambda ctx: lm_calls.append(stage(ctx)) or respond(ctx))
    assert len(traj.meta["questions"]) == 5 and len(retriever.queries) == 5
    assert len(lm_calls) == 12 == 1 + 2 * 5 + 1
    assert ProFactConfig().max_turns == 12
    assert traj.verdict.label is Label.REFUTE
    assert traj.meta["stage_errors"]["question"] == ["too many questions: 6 (at most 5; the first 5 were searched)"]
    assert not traj.verdict.format_ok and traj.meta["stage_ok"]["search"]


def test_max_questions_bounds_the_paper_limit():
    with pytest.raises(ValueError, match="between 1 and 5"):
        build(EnvSpec(name="profact", params={"max_questions": 6}), EnvDeps(retriever=WordOverlapRetriever([])))
    with pytest.raises(ValueError, match="needs a retriever"):
        build(EnvSpec(name="profact"), EnvDeps())
    with pytest.raises(ValueError, match="profact"):
        build(EnvSpec(name="profact", params={"nonsense": 1}), EnvDeps(retriever=WordOverlapRetriever([])))


# -- malformed stages ----------------------------------------------------------------------
def test_question_stage_without_questions_goes_straight_to_the_verdict():
    traj, retriever = run(script(questions="I think the claim is false."))
    assert retriever.queries == [] and traj.segments == []
    assert traj.meta["questions"] == [] and traj.meta["qa"] == []
    errs = traj.meta["stage_errors"]["question"]
    assert errs[0] == "no answer: no <questions> block" and any(e.startswith("text outside tags") for e in errs)
    assert "(no question was answered)" in traj.turns[1].text
    assert traj.verdict.label is Label.REFUTE  # the verdict stage still ran
    assert traj.reward.components["question"] == 0.0 and traj.reward.components["qa"] == 0.0
    assert traj.reward.total == 1.0


def test_bad_search_call_and_bad_answer_are_recorded_per_question():
    def search(q):
        return "I would search for it." if "tax" in q else f"<search>{q}</search>"

    def answer(q):
        return "<answer>  </answer>"

    traj, retriever = run(script(search=search, answer=answer))
    assert retriever.queries == ["When was the mayor elected?"]
    qa = traj.meta["qa"]
    assert qa[0]["query"] is None and qa[0]["answer"] is None
    assert qa[0]["errors"][0] == "no search: no <search> tool call"
    assert qa[1]["query"] and qa[1]["answer"] is None and qa[1]["errors"] == ["no answer: the <answer> block is empty"]
    search_errs = traj.meta["stage_errors"]["search"]
    assert search_errs[0] == "no search: no <search> tool call (question 1)"
    assert "no answer: the <answer> block is empty (question 2)" in search_errs
    assert traj.meta["stage_ok"] == {"question": True, "search": False, "verdict": True}
    # A bad search call ends that question's context after one turn.
    assert [len(s.turns) for s in traj.segments] == [1, 3]
    assert traj.reward.components["qa"] == 0.0  # no answered pair
    assert "(search stage)" in traj.verdict.format_errors[0]


def test_answer_without_search_is_not_accepted():
    traj, retriever = run(script(search=lambda q: "<answer>Surely yes.</answer>"))
    assert retriever.queries == []
    assert all(s["answer"] is None for s in traj.meta["qa"])
    assert traj.meta["qa"][0]["errors"][-1].startswith("answer before any search")


@pytest.mark.parametrize("verdict, label, answered, kinds", [
    ("<verdict>Supported</verdict>", Label.SUPPORT, True, set()),
    ("<verdict>Conflicting Evidence/Cherrypicking</verdict>", Label.CONFLICTING, True, set()),
    ("<verdict>not enough evidence</verdict>", Label.NEI, True, set()),
    ("<verdict>Mostly true</verdict>", None, True, {"unparseable_label"}),
    ("<verdict></verdict>", None, True, {"unparseable_label"}),
    ("The claim is refuted.", None, False, {"no_answer", "text_outside_tags"}),
    # (generation stops at </verdict>, so any stray text comes before it)
    ("Because of the tax data: <verdict>Refuted</verdict>", Label.REFUTE, True, {"text_outside_tags"}),
    ("<verdict>Refuted", None, False, {"no_answer", "other"}),  # never closed
    ("<justification>a</justification><justification>b</justification><verdict>Refuted</verdict>", Label.REFUTE,
     True, {"other"}),
])
def test_verdict_stage_malformed(verdict, label, answered, kinds):
    traj, _ = run(script(verdict=verdict))
    v = traj.verdict
    assert traj.error is None and v.label == label and v.answered == answered
    assert format_failure_kinds(v, traj.retrieved_ids) == kinds, v.format_errors
    assert traj.meta["stage_ok"]["verdict"] == (not kinds)
    assert traj.meta["stage_ok"]["question"] and traj.meta["stage_ok"]["search"]
    assert traj.reward.components["label"] == float(label is Label.REFUTE)


def test_budget_running_out_mid_search_is_no_answer():
    # A 100-token context budget: the first search context is full after the search call
    # and its results, so the episode ends there and the verdict stage is never reached.
    traj, _ = run(script(), rollout=RolloutConfig(temperature=0, max_total_tokens=100))
    assert traj.error is None and not traj.verdict.answered
    assert traj.meta["stage_errors"]["search"] == [
        "no answer: the episode ended in the search stage (question 1 of 2; a budget ran out)"]
    assert traj.meta["qa"][1] == {"question": "When was the mayor elected?", "query": None, "retrieved": [],
                                  "answer": None, "errors": []}
    assert "no_answer" in format_failure_kinds(traj.verdict)


def test_empty_claim_and_failing_retriever_are_recorded_errors():
    traj, _ = run(script(), claim=CLAIM.model_copy(update={"text": "  "}))
    assert traj.error and traj.error.startswith("reset failed: ValueError")
    assert traj.reward.total == 0.0

    class Broken:
        def search(self, queries, k):
            raise TimeoutError("store down")

    traj, _ = run(script(), retriever=Broken())
    assert traj.error == "env step failed: TimeoutError: store down"
    assert traj.reward.total == 0.0 and traj.reward.components["question"] == 0.0


# -- the parsers on junk ------------------------------------------------------------------
@pytest.mark.parametrize("text", ["", "<questions>", "</questions>", "<questions><questions>1. a</questions>",
                                  "<questions>\n1. a\n3. b\nnot numbered\n1. a\n</questions>", "<" * 5000,
                                  "<search></search><search>a</search>", "<answer>x</answer><search>y</search>",
                                  "<verdict>" + "Refuted " * 100 + "</verdict>", "\x00\ud7ff<verdict>"])
def test_stage_parsers_never_raise(text):
    for parsed in (parse_questions(text, 5), parse_search_call(text), parse_answer(text), parse_verdict_turn(text)):
        assert isinstance(parsed.errors, list)


def test_question_parser_strictness():
    p = parse_questions("<questions>\n1. a?\n3. b?\nnot numbered\n4. a?\n</questions>", 5)
    assert p.questions == ["a?", "b?"]
    assert p.errors == ["questions not numbered 1, 2, ...: '3. b?'", "question repeated: 'a?' (asked once)",
                        "text outside the numbered questions: 'not numbered'"]
    assert parse_questions("<questions>\n\n</questions>", 5).errors == [
        "no answer: the <questions> block has no numbered question"]


def test_parse_verdict_from_text_alone():
    env = build(EnvSpec(name="profact"), EnvDeps(retriever=WordOverlapRetriever([])))
    assert env.parse_verdict(QUESTIONS + "<answer>x</answer>" + VERDICT).label is Label.REFUTE
    assert not env.parse_verdict("nothing").answered
    assert env.stop == ("</questions>",) and env.default_reward == "profact" and POLICY == "policy"


def test_budget_running_out_in_the_opening_context_is_no_verdict():
    # 20 tokens per context: the question list is cut (never closed), the record follows,
    # and no room is left for the verdict.
    traj, retriever = run(script(), rollout=RolloutConfig(temperature=0, max_total_tokens=20))
    assert traj.error is None and retriever.queries == [] and not traj.verdict.answered
    errs = traj.meta["stage_errors"]
    assert errs["question"][0] == "no answer: no <questions> block"
    assert errs["verdict"] == ["no answer: the episode ended before the verdict (a budget ran out)"]
    assert traj.reward.total == 0.0
