"""Typed outcomes: an environment's own record of what a whole model text concluded."""

from __future__ import annotations

import pytest

from factrl.envs import EnvDeps, build
from factrl.envs.outcome import Outcome, missing_fields, outcome_of
from factrl.envs.rar import RarOutcome
from factrl.labels import Label
from factrl.types import Claim, Verdict

SHORT = Claim(id="q", text="Which way does the Nile flow?", meta={"kind": "short", "answers": ["north"]})


class VerdictOnly:
    def parse_verdict(self, model_text: str) -> Verdict:
        return Verdict(label=Label.SUPPORT if "yes" in model_text else None)


class Wrong(VerdictOnly):
    def parse_outcome(self, model_text: str, claim: Claim) -> dict:
        return {"verdict": None}


def test_without_parse_outcome_the_outcome_is_the_verdict_alone() -> None:
    out = outcome_of(VerdictOnly(), "yes", SHORT)
    assert type(out) is Outcome and out.verdict.label is Label.SUPPORT and out.meta() == {}


def test_parse_outcome_must_return_an_outcome() -> None:
    with pytest.raises(TypeError, match="Wrong.parse_outcome returned dict, not an Outcome"):
        outcome_of(Wrong(), "yes", SHORT)


def test_rar_outcome_is_what_the_episode_records() -> None:
    env = build("rar", EnvDeps.offline_only())
    env.reset(SHORT)
    text = "<think>hm</think>It flows north."
    env.step(text)
    out = outcome_of(env, text, SHORT)
    assert isinstance(out, RarOutcome)
    assert out.meta() == env.result().meta == {"response": "It flows north.", "kind": "short", "abstained": False,
                                               "correct": True}


def test_search_agent_outcome_carries_its_report() -> None:
    from _support import WordOverlapRetriever

    env = build("haris_searcher", EnvDeps(retriever=WordOverlapRetriever([])))
    out = outcome_of(env, "<think>x</think><report>It flows north.</report>", SHORT)
    assert out.meta() == {"report": "It flows north.", "question": SHORT.text} and out.verdict.answered
    assert outcome_of(env, "no report at all", SHORT).meta()["report"] is None


def test_missing_fields_are_the_ones_a_reward_reads() -> None:
    class Reads:
        reads_meta = ("report", "qa")

    assert missing_fields(Reads(), {"report": "r"}) == ["qa"]
    assert missing_fields(object(), {}) == []


def test_an_environment_without_an_lm_has_no_text_outcome() -> None:
    from factrl.envs.outcome import OutcomeError

    class Decides(VerdictOnly):
        name = "decides"
        lm_free = True

    with pytest.raises(OutcomeError, match="'decides' decides without a language model"):
        outcome_of(Decides(), "yes", SHORT)
