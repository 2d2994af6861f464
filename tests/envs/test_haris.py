"""HARIS agents (reasoner + search sub-agent, the search agent alone, the single agent)
on scripted model outputs through the real episode machine: every tag path, malformed
turns, budgets, masks across the nested episode, and the high-level reward."""

import pytest

from factrl.envs import EnvDeps, EnvSpec, build
from factrl.envs.haris import binary_gold, parse_boxed
from factrl.envs.haris import prompts as P
from factrl.labels import Label
from factrl.lm.scripted import ScriptedLM
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, EvidenceRef, Passage

from _support import WordOverlapRetriever

PASSAGES = [
    Passage(id="nile#0", doc_id="nile", title="Nile", text="The Nile is long. It flows north.",
            sentence_ids=["nile_0", "nile_1"], sentences=["The Nile is long.", "It flows north."]),
    Passage(id="paris#0", doc_id="paris", title="Paris", text="Paris is the capital of France.",
            sentence_ids=["paris_0"], sentences=["Paris is the capital of France."]),
]
CLAIM = Claim(id="c1", text="The Nile flows north.", label="SUPPORT", evidence=[EvidenceRef(id="nile_1")])
QUESTION = "<think>I need the direction.</think>\n<question>Which direction does the Nile flow?</question>"
SEARCH = "<think>Search it.</think>\n<search>Nile flows north</search>"
REPORT = "<think>Found it.</think>\n<report>The Nile flows north.</report>"
VERIFY = "<think>The report agrees.</think>\n<verification>The final verification is \\boxed{Support}</verification>"


def reply(ctx):
    """The model's own part of a context (the scripted chat template ends the prompt with
    '<assistant>'), so the prompts' mentions of tags do not count."""
    return ctx.split("<assistant>", 1)[1]


def scripted(reasoner, searcher=None):
    """A scripted LM playing both roles: ``reasoner``/``searcher`` are lists of turns,
    taken by how many <result> blocks its context has seen so far."""
    def respond(ctx):
        own = reply(ctx)
        turns = searcher if "gathering information" in ctx else reasoner
        i = own.count("<result>")
        return turns[i] if i < len(turns) else ""
    return ScriptedLM(respond)


def run(agent, lm, claim=CLAIM, lms=None, **params):
    deps = EnvDeps(retriever=WordOverlapRetriever(PASSAGES))
    (traj,) = run_episodes(lambda: build(EnvSpec(name=agent, params=params), deps), [claim], lm,
                           RolloutConfig(temperature=0), lms=lms)
    return traj


# -- the reasoner with its search agent ---------------------------------------------------
def test_reasoner_asks_the_search_agent_and_verifies():
    traj = run("haris", scripted([QUESTION, VERIFY], [SEARCH, REPORT]))
    assert traj.error is None
    v = traj.verdict
    assert v.label is Label.SUPPORT and v.format_ok and v.answered, v.format_errors
    assert traj.reward.total == 1.0 and traj.reward.components["label_correct"] == 1.0
    # the reasoner's context: question (1), the report as <result> (0), verification (1)
    assert [t.source for t in traj.turns] == ["model", "env", "model"]
    assert traj.turns[1].text.strip() == "<result>\nThe Nile flows north.\n</result>"
    assert set(traj.turns[1].mask) == {0} and set(traj.turns[0].mask) == set(traj.turns[2].mask) == {1}
    # the search agent's context is a segment of its role: search (1), top-k results (0), report (1)
    (seg,) = traj.segments
    assert seg.role == "searcher" and "Which direction does the Nile flow?" in seg.prompt[0].content
    assert [t.source for t in seg.turns] == ["model", "env", "model"]
    assert [set(t.mask) for t in seg.turns] == [{1}, {0}, {1}]
    assert "[[nile_1]]: It flows north." in seg.turns[1].text
    assert traj.searches == ["Nile flows north"] and "nile_1" in traj.retrieved_ids
    assert traj.meta["questions"] == ["Which direction does the Nile flow?"]
    assert traj.meta["reports"] == ["The Nile flows north."] and traj.meta["searcher_format_ok"] == [True]
    # the reasoner's own text parses to the same verdict
    env = build(EnvSpec(name="haris"), EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))
    assert env.parse_verdict(traj.model_text) == v


def test_verification_without_questions_and_a_wrong_label():
    refute = VERIFY.replace("Support", "Refute")
    traj = run("haris", scripted([refute]))
    assert traj.segments == [] and traj.verdict.label is Label.REFUTE and traj.verdict.format_ok
    assert traj.reward.total == pytest.approx(0.1)


@pytest.mark.parametrize("text, label, answered, error", [
    ("The Nile flows north, so Support.", None, False, "no answer"),
    ("", None, False, "no answer"),
    ("<verification>\\boxed{Maybe}</verification>", None, True, "unknown label"),
    ("<verification>It is supported.</verification>", None, True, "no \\boxed"),
    ("<verification>$\\boxed{\\text{Refute}}$</verification>", Label.REFUTE, True, None),
    ("<verification>\\boxed{supported}</verification>", Label.SUPPORT, True, None),
    ("Sure. <verification>\\boxed{Support}</verification>", Label.SUPPORT, True, "text outside tags"),
    ("<result>made up</result><verification>\\boxed{Support}</verification>", Label.SUPPORT, True,
     "model wrote <result>"),
    ("<search>q</search><verification>\\boxed{Support}</verification>", Label.SUPPORT, True, "unexpected tag <search>"),
    ("<verification>\\boxed{Support} \\boxed{Refute}</verification>", Label.REFUTE, True, "2 \\boxed labels"),
    # the paper asks questions inside an open <think>, but verifies after it (the label is
    # still read; the format is wrong)
    ("<think>unclosed <verification>\\boxed{Support}</verification>", Label.SUPPORT, True, "inside <think>"),
])
def test_malformed_reasoner_turns_never_raise(text, label, answered, error):
    traj = run("haris", scripted([text]))
    v = traj.verdict
    assert traj.error is None and v.label == label and v.answered == answered
    if error is None:
        assert v.format_ok and traj.reward.total == (1.0 if label is Label.SUPPORT else 0.1)
    else:
        assert not v.format_ok and any(error in e for e in v.format_errors), v.format_errors
        assert traj.reward.total == 0.0  # malformed: 0, even with the right label


def test_an_empty_question_and_the_question_budget():
    q = "<question>Where is Paris?</question>"
    traj = run("haris", scripted([q, q, q, q, VERIFY], [REPORT]), max_questions=2)
    # two questions answered, the third told the budget is spent, the fourth ends the episode
    assert len(traj.segments) == 2 and traj.verdict.label is None
    assert P.QUESTION_BUDGET_SPENT in traj.transcript
    traj = run("haris", scripted([q, q, q, VERIFY], [REPORT]), max_questions=2)
    v = traj.verdict
    assert v.label is Label.SUPPORT and not v.format_ok and any("question over budget" in e for e in v.format_errors)
    traj = run("haris", scripted(["<question> </question>", VERIFY], [REPORT]))
    assert any("empty <question>" in e for e in traj.verdict.format_errors)


@pytest.mark.parametrize("searcher, expect_report, seg_error", [
    (["I do not know."], None, "no answer: no <report>"),
    ([""], None, "no answer: no <report>"),
    (["<report>  </report>"], "", "empty <report>"),
    (["<result>fake</result><report>x</report>"], "x", "model wrote <result>"),
    ([SEARCH, SEARCH, SEARCH], None, "search over budget"),
    ([SEARCH, SEARCH, REPORT], "The Nile flows north.", "search over budget"),
    (["<search></search>", REPORT], "The Nile flows north.", "empty <search>"),
])
def test_search_agent_failures_come_back_to_the_reasoner(searcher, expect_report, seg_error):
    traj = run("haris", scripted([QUESTION, VERIFY], searcher), max_searches=1)
    assert traj.error is None
    assert traj.meta["reports"] == [expect_report]
    assert traj.meta["searcher_format_ok"] == [False]
    assert any(seg_error in e for e in traj.meta["searcher_format_errors"][0])
    shown = traj.turns[1].text
    assert (P.NO_REPORT in shown) == (expect_report is None)
    # the reasoner's own verdict is unaffected by its searcher's format
    assert traj.verdict.label is Label.SUPPORT and traj.verdict.format_ok
    assert len(traj.searches) <= 1


def test_search_agent_over_its_budget_is_told_once():
    traj = run("haris", scripted([QUESTION, VERIFY], [SEARCH, SEARCH, REPORT]), max_searches=1)
    (seg,) = traj.segments
    assert P.SEARCH_BUDGET_SPENT in seg.turns[3].text and seg.turns[3].mask[0] == 0
    assert traj.meta["reports"] == ["The Nile flows north."]


def test_searcher_turns_go_to_the_searcher_lm_batched_across_episodes():
    reasoner = scripted([QUESTION, VERIFY])
    searcher = scripted([], [SEARCH, REPORT])
    deps = EnvDeps(retriever=WordOverlapRetriever(PASSAGES))
    claims = [CLAIM, Claim(id="c2", text="Paris is in France.", label="SUPPORT")]
    trajs = run_episodes(lambda: build("haris", deps), claims, reasoner, RolloutConfig(temperature=0),
                         lms={"searcher": searcher})
    assert all(t.verdict.format_ok and len(t.segments) == 1 for t in trajs)
    # two searcher rounds (search, report), each one call for both episodes
    assert searcher.calls == 2 and reasoner.calls == 2


def test_empty_claim_is_a_recorded_error():
    traj = run("haris", scripted([VERIFY]), claim=Claim(id="e", text="  ", label="SUPPORT"))
    assert traj.error and "empty text" in traj.error and traj.reward.total == 0.0


def test_unknown_parameter_is_refused():
    with pytest.raises(ValueError, match="haris"):
        build(EnvSpec(name="haris", params={"max_hops": 3}), EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))
    with pytest.raises(ValueError, match="needs a retriever"):
        build("haris")


# -- labels -----------------------------------------------------------------------------
def test_binary_gold_maps_dataset_labels_explicitly():
    assert binary_gold(Label.SUPPORT) is Label.SUPPORT
    assert binary_gold(Label.REFUTE) is Label.REFUTE
    assert binary_gold(Label.NEI) is Label.REFUTE
    assert binary_gold(Label.CONFLICTING) is None
    assert parse_boxed("\\boxed{ Refutes }")[0] is Label.REFUTE
    traj = run("haris", scripted([VERIFY.replace("Support", "Refute")]),
               claim=Claim(id="n", text="The Nile is short.", label="NOT ENOUGH INFO"))
    assert traj.reward.total == 1.0
    with pytest.raises(ValueError, match="no Support/Refute"):
        run("haris", scripted([VERIFY]), claim=Claim(id="x", text="Mixed.", label="CONFLICTING"))


# -- the search agent alone ---------------------------------------------------------------
def test_search_agent_alone():
    q = Claim(id="c1#q", text="Which direction does the Nile flow?", label="SUPPORT",
              meta={"pseudo_answer": "North"})
    deps = EnvDeps(retriever=WordOverlapRetriever(PASSAGES))
    (traj,) = run_episodes(lambda: build("haris_searcher", deps), [q], scripted([], [SEARCH, REPORT]),
                           RolloutConfig(temperature=0), score=False)
    assert traj.verdict.format_ok and traj.meta["report"] == "The Nile flows north."
    assert [t.source for t in traj.turns] == ["model", "env", "model"] and traj.turns[1].mask[0] == 0
    assert "nile_1" in traj.retrieved_ids and traj.segments == []
    (bad,) = run_episodes(lambda: build("haris_searcher", deps), [q], scripted([], ["no tags"]),
                          RolloutConfig(temperature=0), score=False)
    assert not bad.verdict.format_ok and bad.meta["report"] is None


# -- the single agent ----------------------------------------------------------------------
ANSWER = "<think>It agrees.</think>\n<answer>The final answer is \\boxed{Support}</answer>"


def test_single_agent_searches_and_answers():
    traj = run("haris_single", scripted([SEARCH, ANSWER]))
    v = traj.verdict
    assert v.label is Label.SUPPORT and v.format_ok, v.format_errors
    assert traj.reward.total == 1.0 and traj.searches == ["Nile flows north"]
    assert [t.source for t in traj.turns] == ["model", "env", "model"] and traj.turns[1].mask[0] == 0
    assert "[[nile_1]]" in traj.turns[1].text
    env = build("haris_single", EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))
    assert env.parse_verdict(traj.model_text) == v


@pytest.mark.parametrize("turns, label, error", [
    (["no tags at all"], None, "no answer"),
    ([SEARCH, SEARCH, ANSWER], Label.SUPPORT, "search over budget"),
    (["<answer>\\boxed{Unsure}</answer>"], None, "unknown label"),
    (["<question>Who?</question>"], None, "unexpected tag <question>"),
])
def test_single_agent_malformed(turns, label, error):
    traj = run("haris_single", scripted(turns), max_searches=1)
    v = traj.verdict
    assert v.label == label and not v.format_ok and any(error in e for e in v.format_errors), v.format_errors
    assert traj.reward.total == 0.0
