"""The HARIS tag protocol as the paper's rollouts write it (Figures 7–9: ``<question>`` /
``<search>`` asked inside an open ``<think>``, a closing summary before the final tag),
forged observations refused, and every parser linear in its input."""

import pytest

from factrl.envs import EnvDeps, EnvSpec, build
from factrl.envs.haris import parse_reasoner_text
from factrl.protocol.haris import MAX_TURNS, TurnParser, split_turns
from factrl.envs.haris.single import parse_single_text
from factrl.labels import Label

from _support import WordOverlapRetriever, best_seconds, linear_budget
from envs.test_haris import PASSAGES, run, scripted

# Figure 9: the reasoning agent opens <think>, asks inside it, reads each <result>, closes
# the think and verifies.
FIG9_REASONER = [
    "<think>\nOkay, let's tackle this claim. First I should check which way the Nile flows.\n\n"
    "<question> Which direction does the Nile flow? </question>",
    "\nSo the Nile flows north. Therefore, the claim is accurate. ...</think>\n\n"
    "<verification> The final verification is  $\\boxed{\\text{Support}}$ </verification>",
]
# The search agent in the same style: searches inside its open think, reports after it.
FIG_SEARCHER = [
    "<think>\nI need the direction of the Nile. Let me search.\n<search> Nile flows north </search>",
    "\nThe result says it flows north.\n</think>\n<report>The Nile flows north.</report>",
]
# Figure 8: the single agent searches inside <think>, then writes a summary between
# </think> and <answer>.
FIG8_SINGLE = [
    "<think>\nOkay, let's tackle this claim. Let me search.\n\n<search> Nile flows north </search>",
    "\nThe search says it flows north.\n</think>\n\nThe claim states that the Nile flows north. "
    "A search for its course confirms it.\n\n<answer> The final answer is \\boxed{Support} </answer>",
]


def test_the_papers_reasoner_rollout_is_well_formed():
    traj = run("haris", scripted(FIG9_REASONER, FIG_SEARCHER))
    v = traj.verdict
    assert traj.error is None and v.label is Label.SUPPORT and v.format_ok, v.format_errors
    assert traj.reward.total == 1.0
    assert traj.meta["searcher_format_ok"] == [True], traj.meta["searcher_format_errors"]
    assert traj.meta["reports"] == ["The Nile flows north."] and traj.searches == ["Nile flows north"]
    # the joined model text parses to the same verdict
    assert parse_reasoner_text(traj.model_text, 5) == v


def test_the_papers_single_agent_rollout_is_well_formed():
    traj = run("haris_single", scripted(FIG8_SINGLE))
    v = traj.verdict
    assert v.label is Label.SUPPORT and v.format_ok, v.format_errors
    assert traj.reward.total == 1.0 and traj.searches == ["Nile flows north"]
    assert parse_single_text(traj.model_text, 5) == v


def test_the_search_agent_alone_in_the_papers_style():
    from factrl.rollout import RolloutConfig, run_episodes
    from factrl.types import Claim

    q = Claim(id="q", text="Which direction does the Nile flow?", label="SUPPORT", meta={"pseudo_answer": "North"})
    deps = EnvDeps(retriever=WordOverlapRetriever(PASSAGES))
    (traj,) = run_episodes(lambda: build("haris_searcher", deps), [q], scripted([], FIG_SEARCHER),
                           RolloutConfig(temperature=0), score=False)
    assert traj.verdict.format_ok, traj.verdict.format_errors
    env = build("haris_searcher", deps)
    assert env.parse_verdict(traj.model_text).format_ok


@pytest.mark.parametrize("turns, error", [
    # a forged observation inside the open think is still the model's own <result>
    (["<think>\nLet me look. <result>The Nile flows north.</result>\n<question>Why?</question>",
      "</think><verification>\\boxed{Support}</verification>"], "model wrote <result>"),
    (["<think>x</think><result>fake</result><verification>\\boxed{Support}</verification>"], "model wrote <result>"),
    # the final tag stays outside the reasoning
    (["<think>It is right. <verification>\\boxed{Support}</verification>"], "inside <think>"),
    # prose that was never inside or after a think
    (["Sure. <verification>\\boxed{Support}</verification>"], "text outside tags"),
    # a think opened inside a think, and a stray closing tag
    (["<think>a <think>b</think></think><verification>\\boxed{Support}</verification>"], "nested"),
    (["</think><verification>\\boxed{Support}</verification>"], "without an opening tag"),
])
def test_malformed_papers_style_turns_are_format_errors(turns, error):
    traj = run("haris", scripted(turns, FIG_SEARCHER))
    v = traj.verdict
    assert traj.error is None and not v.format_ok, v.format_errors
    assert any(error in e for e in v.format_errors), v.format_errors
    assert traj.reward.total == 0.0


def test_text_after_the_final_tag_is_an_error():
    v = parse_reasoner_text("<think>x</think><verification>\\boxed{Support}</verification> and more", 5)
    assert v.label is Label.SUPPORT and not v.format_ok
    assert "text outside tags (after the verification)" in v.format_errors


def test_a_turn_parser_carries_the_open_think():
    p = TurnParser(("question", "verification"), inner=("question",))
    a = p.parse("<think>why? <question>Q1</question>")
    assert (a.kind, a.content, a.errors, p.in_think) == ("question", "Q1", [], True)
    b = p.parse(" more thought </think> summary <verification>\\boxed{Refute}</verification>")
    assert (b.kind, b.errors, p.in_think) == ("verification", [], False)
    # a fresh parser does not know the think was open: the closing tag is an error
    assert TurnParser(("question", "verification")).parse(" more </think><verification>x</verification>").errors


HOSTILE = {
    "closing answers": "</answer>" * 11_200,
    "closing questions": "</question>" * 9_100,
    "closing searches": "</search>" * 10_000,
    "closing verifications": "</verification>" * 6_600,
    "openings": "<think>" * 14_000,
    "questions": "<question>a</question>" * 4_500,
    "blank": " \n" * 50_000,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_every_parser_is_linear_on_100_kb(name):
    text = HOSTILE[name]
    assert 90_000 <= len(text) <= 110_000
    deps = EnvDeps(retriever=WordOverlapRetriever(PASSAGES))
    searcher = build(EnvSpec(name="haris_searcher"), deps)
    parsers = {
        "split_turns": lambda t: split_turns(t, ("</question>", "</verification>", "</search>", "</answer>")),
        "reasoner": lambda t: parse_reasoner_text(t, 5),
        "single": lambda t: parse_single_text(t, 5),
        "searcher": searcher.parse_verdict,
    }
    plain = ("a" * 9 + " ") * (len(text) // 10)  # the same size: the machine's load cancels out
    for what, fn in parsers.items():
        assert best_seconds(fn, text) < linear_budget(fn, plain), (name, what)


def test_degenerate_texts_are_format_errors_not_hangs():
    v = parse_single_text("</answer>" * 11_200, 5)
    assert not v.format_ok and v.label is None
    assert any(f"more than {MAX_TURNS}" in e for e in v.format_errors)
    assert len(split_turns("</search>" * 10_000, ("</search>",))) == 10_000
    v = parse_reasoner_text("<think>" * 14_000, 5)
    assert not v.format_ok and any("more than 1024 tags in one turn" in e for e in v.format_errors)
