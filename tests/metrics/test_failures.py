"""Format failures by kind and episode errors by type, from the messages the tag parser
really produces."""

from __future__ import annotations

import pytest

from factrl.protocol.tags import check_protocol, parse_answer
from factrl.envs.veri_r1 import parse_verdict
from factrl.labels import Label
from factrl.metrics import compute_metrics
from factrl.metrics.failures import (
    FORMAT_FAILURE_KINDS,
    classify_format_error,
    episode_error_type,
    format_failure_kinds,
)
from factrl.types import Claim, EvidenceRef, Trajectory, Verdict

ONLINE = dict(allowed=("plan", "search", "think", "answer"), first="plan", once=("plan",), final="answer",
              max_counts={"search": 3})


def protocol_errors(text: str) -> list[str]:
    return check_protocol(text, **ONLINE)[1]


def test_no_answer() -> None:
    (msg,) = protocol_errors("<plan>p</plan><search>q</search>")
    assert classify_format_error(msg) == "no_answer"


def test_text_outside_tags() -> None:
    errors = protocol_errors("<plan>p</plan> so I think <answer>Label: SUPPORT\nEvidence: [[a]]</answer>")
    assert [classify_format_error(e) for e in errors] == ["text_outside_tags"]


def test_forged_information() -> None:
    errors = protocol_errors("<plan>p</plan><information>[[a]]: made up</information>"
                             "<answer>Label: SUPPORT\nEvidence: [[a]]</answer>")
    assert [classify_format_error(e) for e in errors] == ["forged_information"]


@pytest.mark.parametrize("answer", ["Evidence: [[a]]", "Label: PROBABLY\nEvidence: [[a]]"])
def test_unparseable_label(answer: str) -> None:
    (msg,) = parse_answer(answer).errors
    assert classify_format_error(msg) == "unparseable_label"


@pytest.mark.parametrize("answer", ["Label: SUPPORT\nEvidence: sentence 3", "Label: SUPPORT"])
def test_bad_evidence_ids(answer: str) -> None:
    (msg,) = parse_answer(answer).errors
    assert classify_format_error(msg) == "bad_evidence_ids"


def test_cited_ids_never_shown_are_bad_evidence_ids() -> None:
    v = parse_verdict("<plan>p</plan><answer>Label: SUPPORT\nEvidence: [[a]], [[zz]]</answer>",
                      online=True, max_searches=3)
    assert v.format_ok
    assert format_failure_kinds(v, shown_ids=["a", "b"]) == {"bad_evidence_ids"}
    assert format_failure_kinds(v, shown_ids=["a", "zz"]) == set()
    assert format_failure_kinds(v) == set()  # shown ids unknown: no judgement
    # nothing shown (no search, or no hits): every cited id was invented
    assert format_failure_kinds(v, shown_ids=[]) == {"bad_evidence_ids"}
    nothing = parse_verdict("<plan>p</plan><answer>Label: NOT ENOUGH INFO\nEvidence: none</answer>",
                            online=True, max_searches=3)
    assert format_failure_kinds(nothing, shown_ids=[]) == set()


def test_metrics_count_ids_cited_when_nothing_was_retrieved() -> None:
    c = Claim(id="c", text="t", label=Label.SUPPORT, evidence=[EvidenceRef(id="a")])
    v = parse_verdict("<plan>p</plan><answer>Label: SUPPORT\nEvidence: [[a]]</answer>", online=True, max_searches=3)
    traj = Trajectory(claim_id="c", env="veri_r1", claim=c, prompt=[], verdict=v, retrieved_ids=[])
    assert compute_metrics([traj])["format_failures"]["bad_evidence_ids"] == 1
    # a bare (claim, verdict) pair says nothing of what was shown: not judged
    assert compute_metrics([(c, v)])["format_failures"]["bad_evidence_ids"] == 0


@pytest.mark.parametrize("text", [
    "<plan>p</plan><plan>q</plan><answer>Label: SUPPORT\nEvidence: [[a]]</answer>",  # twice
    "<think>t</think><answer>Label: SUPPORT\nEvidence: [[a]]</answer>",  # wrong start
    "<plan>p<think>t</think></plan><answer>Label: SUPPORT\nEvidence: [[a]]</answer>",  # nesting
    "<plan>p</plan><answer>Label: SUPPORT\nEvidence: [[a]]</answer><think>t</think>",  # not last
])
def test_other_protocol_problems(text: str) -> None:
    kinds = {classify_format_error(e) for e in protocol_errors(text)}
    assert kinds == {"other"}


def test_unanswered_verdict_is_no_answer_even_without_messages() -> None:
    assert format_failure_kinds(Verdict()) == {"no_answer"}


@pytest.mark.parametrize("error, kind", [
    ("reset failed: ValueError: claim 'x' has empty text", "reset/ValueError"),
    ("env step failed: TimeoutError: retrieval server timed out", "env_step/TimeoutError"),
    ("result failed: KeyError: 'label'", "result/KeyError"),
    ("context overflow", "other"),
])
def test_episode_error_types(error: str, kind: str) -> None:
    assert episode_error_type(error) == kind


def test_metrics_count_failures_and_errors() -> None:
    c = Claim(id="c", text="t", label=Label.SUPPORT, evidence=[EvidenceRef(id="a")])

    def traj(text: str, error: str | None = None, shown: tuple[str, ...] = ("a",)) -> Trajectory:
        v = parse_verdict(text, online=True, max_searches=3)
        return Trajectory(claim_id="c", env="veri_r1", claim=c, prompt=[], verdict=v, error=error,
                          retrieved_ids=list(shown))

    good = "<plan>p</plan><answer>Label: SUPPORT\nEvidence: [[a]]</answer>"
    m = compute_metrics([
        traj(good),
        traj("<plan>p</plan>"),  # no answer
        traj("<plan>p</plan> hmm <answer>Label: MAYBE\nEvidence: [[q]]</answer>"),  # 3 kinds
        traj("<plan>p</plan>", error="env step failed: TimeoutError: slow"),
        traj("", error="reset failed: ValueError: empty"),
    ])
    assert set(m["format_failures"]) == set(FORMAT_FAILURE_KINDS)
    assert m["format_failures"] == {"no_answer": 1, "text_outside_tags": 1, "forged_information": 0,
                                    "unparseable_label": 1, "bad_evidence_ids": 1, "other": 0}
    assert m["episodes_with_format_failures"] == 2
    assert m["episode_errors"] == {"env_step/TimeoutError": 1, "reset/ValueError": 1}
