"""HARIS's ``released`` convention against the authors' released code.

``fixtures/released/haris_released.json`` holds 47 reasoner outputs (the paper's Figures
7–9, both prompts' example lines and variants), reasoner turns, search-agent outputs and
turns, with the decision, question, report and query the released functions
(``haris_infer.py``, ``host_low.py`` at d5ca5da) give them, computed once outside the
project; factrl's released convention must give the same on every one. The episode tests
run the released protocol end to end on scripted models."""

import hashlib
import json
from pathlib import Path

import pytest

from factrl.envs import EnvDeps, EnvSpec, build
from factrl.envs.haris import parse_reasoner_text
from factrl.envs.haris import prompts as P
from factrl.envs.haris.released import last_block, released_outcome
from factrl.labels import Label
from factrl.lm.scripted import ScriptedLM
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, Passage

from _support import WordOverlapRetriever

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "released" / "haris_released.json").read_text())
CASES = {c["id"]: c for c in FIXTURE["reasoner"]}


def sequence(turns):
    return "".join(text for _, text in turns)


def model_text(turns):
    return "".join(text for source, text in turns if source == "model")


@pytest.mark.parametrize("case_id", sorted(CASES))
def test_reasoner_decisions_equal_the_released_codes(case_id):
    case = CASES[case_id]
    outcome, label = released_outcome(sequence(case["turns"]), case["claim"])
    assert outcome == case["released"]
    assert label == (Label(outcome) if outcome in ("SUPPORT", "REFUTE") else None)


def test_questions_reports_and_queries_equal_the_released_codes():
    for kind, tag, key in (("questions", "question", "turn"), ("searches", "search", "turn"),
                           ("searcher", "report", "turns")):
        for case in FIXTURE[kind]:
            text = case[key] if key == "turn" else sequence(case[key])
            assert last_block(text, tag) == case["released"], (kind, case["id"])


def test_released_prompts_are_the_authors_word_for_word():
    sha = {k: hashlib.sha256(v.encode()).hexdigest() for k, v in
           (("reasoner", P.REASONER_RELEASED), ("searcher", P.SEARCHER_RELEASED))}
    assert sha == FIXTURE["prompts_sha256"]
    assert "—**Support** or **Refute**—" in P.REASONER_RELEASED and "{" not in P.SEARCHER_RELEASED


def test_the_paper_convention_decides_differently_on_16_and_rewards_differently_on_23():
    """The fixture is not a set both conventions agree on: the paper's parser (first
    verification, a \\boxed label, observations excluded) reads another label from 16 of
    the 47 outputs, and with its format check (a malformed episode scores 0, right or
    wrong) rewards 23 differently."""
    def released(c):
        return c["released"] if c["released"] in ("SUPPORT", "REFUTE") else None

    def paper(c, formed=False):
        v = parse_reasoner_text(model_text(c["turns"]), 64)
        return None if v.label is None or (formed and not v.format_ok) else v.label.value

    labels = sorted(c["id"] for c in CASES.values() if paper(c) != released(c))
    rewards = sorted(c["id"] for c in CASES.values() if paper(c, formed=True) != released(c))
    assert len(CASES) == 47 and len(labels) == 16 and len(rewards) == 23, (labels, rewards)
    assert {"boxed_not_supported", "two_verifications_support_then_refute", "upper_case_tags",
            "verification_in_result_only"} <= set(labels)
    assert {"fig9_as_printed", "prompt_example_support"} <= set(rewards) - set(labels)


# -- the protocol end to end ----------------------------------------------------------------
PASSAGES = [Passage(id="nile#0", doc_id="nile", title="Nile", text="The Nile flows north."),
            Passage(id="paris#0", doc_id="paris", title="Paris", text="Paris lies north of the Loire.")]
CLAIM = Claim(id="c1", text="The Nile flows north.", label="SUPPORT")


class Recorder(ScriptedLM):
    """A scripted model playing both roles (told apart by their system prompts); records
    each row's role, temperature and token limit."""

    def __init__(self, reasoner, searcher):
        self.rows = []
        self.turns = {"reasoner": list(reasoner), "searcher": list(searcher)}

        def respond(ctx):
            role = "searcher" if "gathering information" in ctx else "reasoner"
            queue = self.turns[role]
            return queue.pop(0) if queue else ""

        super().__init__(respond)

    def generate(self, prompts, config):
        from factrl.lm.base import row_configs

        self.rows += [(c.meta.get("role"), c.temperature, c.max_new_tokens, tuple(c.stop))
                      for c in row_configs(len(prompts), config)]
        return super().generate(prompts, config)


def run(lm, claim=CLAIM, agent="haris", **params):
    deps = EnvDeps(retriever=WordOverlapRetriever(PASSAGES))
    spec = EnvSpec(name=agent, params={"convention": "released", **params})
    (traj,) = run_episodes(lambda: build(spec, deps), [claim], lm, RolloutConfig(temperature=0.7, max_new_tokens=64),
                           score=agent == "haris")
    return traj


ASK = "<think> Which way? </think> <question> Which direction does the Nile flow? </question>"
SEARCH = "<think> look </think> <search> Nile north </search>"
REPORT = "<think> ok </think> <report> The Nile flows north. </report>"
VERIFY = "<think> agreed </think> <verification> \\boxed{Supported} </verification> trailing words"


def test_released_episode_prompts_stops_wrappers_and_role_sampling():
    lm = Recorder([ASK, VERIFY], [SEARCH, REPORT])
    traj = run(lm)
    assert traj.error is None and traj.verdict.label is Label.SUPPORT and traj.reward.total == 1.0
    # system prompts, the bare claim / question as the user message
    assert [(m.role, m.content) for m in traj.prompt] == [("system", P.REASONER_RELEASED), ("user", CLAIM.text)]
    (seg,) = traj.segments
    assert [(m.role, m.content) for m in seg.prompt] == [("system", P.SEARCHER_RELEASED),
                                                          ("user", "Which direction does the Nile flow?")]
    # result wrappers: the search agent's without a leading space, FlashRAG contents
    # joined by blank lines; the report back to the reasoner with one
    assert seg.turns[1].text == '<result>\n"Nile"\nThe Nile flows north.\n\n"Paris"\nParis lies north of the Loire.\n</result>'
    assert traj.turns[1].text == " <result>\nThe Nile flows north.\n</result>"
    # the reasoner stops at </question> only (its last turn ran past </verification>)
    assert traj.turns[-1].text.endswith("trailing words")
    # reasoner 0.1, search agent 1.0, 2,048 tokens a turn, whatever the rollout's settings
    assert {r[:3] for r in lm.rows} == {("policy", 0.1, 2048), ("searcher", 1.0, 2048)}
    assert {r[0]: r[3] for r in lm.rows} == {"policy": ("</question>",), "searcher": ("</search>",)}
    assert traj.meta["released_outcome"] == "SUPPORT" and traj.meta["reruns"] == 0
    assert traj.meta["reports"] == ["The Nile flows north."]


def test_an_empty_report_is_replaced_by_the_questions_passages():
    traj = run(Recorder([ASK, VERIFY], [SEARCH, "<think> nothing useful </think>"]))
    assert traj.turns[1].text == ' <result>\n"Nile"\nThe Nile flows north.\n\n"Paris"\nParis lies north of the Loire.\n</result>'
    assert traj.searches == ["Nile north", "Which direction does the Nile flow?"]


def test_no_verdict_reruns_the_reasoner_then_stays_unanswered():
    # the first run ends without a verification (the prompt's example is read: re-run);
    # the re-runs answer nothing either: unanswered after 3 (the released code then
    # picks at random)
    traj = run(Recorder(["<think> unsure </think>"] * 4, []))
    assert traj.verdict.label is None and not traj.verdict.answered
    assert traj.meta["released_outcome"] == "RERUN" and traj.meta["reruns"] == 3
    assert [s.role for s in traj.segments] == ["policy"] * 3
    assert traj.reward.total == 0.0
    # a re-run that answers ends it
    traj = run(Recorder(["<think> unsure </think>", VERIFY.replace("Supported", "Refute")], []))
    assert traj.verdict.label is Label.REFUTE and traj.meta["reruns"] == 1
    # an empty verification is no answer and no re-run (haris_infer keeps "")
    traj = run(Recorder(["<verification> </verification>"], []))
    assert traj.meta["released_outcome"] == "EMPTY" and traj.meta["reruns"] == 0 and traj.verdict.label is None


def test_an_empty_question_ends_the_first_run_and_is_skipped_in_a_rerun():
    traj = run(Recorder(["<question> </question>", "<question></question>", VERIFY], []), reruns=1)
    assert traj.meta["reruns"] == 1 and traj.verdict.label is Label.SUPPORT and not traj.meta["questions"]


def test_turn_caps():
    traj = run(Recorder([ASK] * 5, [SEARCH] * 9), max_turns=3, searcher_turns=2, reruns=0)
    # 3 reasoner turns, the third's question not searched; 2 search-agent turns a question
    assert len(traj.meta["questions"]) == 2 and len(traj.searches) == 2 * 2 + 2  # + each empty report's fallback
    assert all(len([t for t in s.turns if t.source == "model"]) == 2 for s in traj.segments)


def test_searcher_alone_and_refusals():
    traj = run(Recorder([], [SEARCH, REPORT]), claim=Claim(id="q", text="Which way does the Nile flow?"),
               agent="haris_searcher")
    assert traj.meta["report"] == "The Nile flows north." and traj.verdict.format_ok
    with pytest.raises(ValueError, match="convention"):
        build(EnvSpec(name="haris", params={"convention": "authors"}), EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))
    with pytest.raises(ValueError, match="no single agent"):
        build(EnvSpec(name="haris_single", params={"convention": "released"}),
              EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))
    with pytest.raises(ValueError, match="reruns"):
        build(EnvSpec(name="haris", params={"convention": "released", "reruns": -1}),
              EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))


def test_a_trainer_refuses_a_role_sampled_at_another_temperature():
    from factrl.envs.base import check_trained_temperatures

    env = build(EnvSpec(name="haris", params={"convention": "released"}), EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))
    with pytest.raises(ValueError, match="temperature 0.1, the run at 1.0"):
        check_trained_temperatures(env, [], 1.0)
    env = build(EnvSpec(name="haris", params={"convention": "released", "reasoner_temperature": None}),
                EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))
    check_trained_temperatures(env, [], 1.0)
    with pytest.raises(ValueError, match="'searcher'"):
        check_trained_temperatures(env, ["searcher"], 0.5)
