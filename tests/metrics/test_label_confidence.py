"""Label confidence read off trajectories: ScriptedLM (ids are code points) with known
logprobs, and the span of the label in the answer block."""

from __future__ import annotations

import math

import pytest

from factrl.protocol.tags import answer_label_span
from factrl.lm.scripted import ScriptedLM
from factrl.metrics.label_confidence import label_confidence, label_token_logprobs
from factrl.types import Claim, Message, Trajectory, Turn

LM = ScriptedLM(lambda _: "")


def model(text: str, logprobs: list[float] | None = None) -> Turn:
    ids = LM.encode(text)
    lps = logprobs if logprobs is not None else [-0.01 * (i + 1) for i in range(len(ids))]
    return Turn(source="model", text=text, token_ids=ids, mask=[1] * len(ids), logprobs=lps)


def env(text: str) -> Turn:
    ids = LM.encode(text)
    return Turn(source="env", text=text, token_ids=ids, mask=[0] * len(ids))


def traj(*turns: Turn, error: str | None = None) -> Trajectory:
    claim = Claim(id="c", text="x", label="SUPPORT")
    return Trajectory(claim_id="c", env="veri_r1", claim=claim, prompt=[Message(role="user", content="x")],
                      turns=list(turns), error=error)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("<answer>Label: SUPPORT\nEvidence: [[a]]</answer>", "SUPPORT"),
        ("<answer>Label: **REFUTE**\nEvidence: [[a]]</answer>", "REFUTE"),
        ("<answer>\n  label :  NOT ENOUGH INFO  \nEvidence: none</answer>", "NOT ENOUGH INFO"),
        ("<answer>Label: x</answer><answer>Label:SUPPORTS\nEvidence: [[a]]</answer>", "SUPPORTS"),
    ],
)
def test_answer_label_span(text: str, label: str) -> None:
    span = answer_label_span(text)
    assert span is not None and text[span[0] : span[1]] == label


@pytest.mark.parametrize(
    "text",
    ["no answer", "<answer>Evidence: [[a]]</answer>", "<answer>Label: MAYBE\nEvidence: [[a]]</answer>",
     "<answer>Label: **\nEvidence:</answer>"],
)
def test_no_span_without_a_known_label(text: str) -> None:
    assert answer_label_span(text) is None


def test_first_token_of_the_label_in_the_last_turn() -> None:
    answer = "<think>ok</think><answer>Label: REFUTE\nEvidence: [[d1]]</answer>"
    at = answer.index("REFUTE")
    lps = [-0.5] * len(answer)
    lps[at] = math.log(0.7)  # 'R': the label's first token
    lps[at + 1] = math.log(0.9)  # 'E'
    t = traj(model("<plan>p</plan><search>q</search>"), env("<information>[[d1]]: x</information>"),
             model(answer, lps))
    assert label_confidence(t, LM.decode) == pytest.approx(0.7)
    # "sequence": the product over R, E, F, U, T, E
    assert label_confidence(t, LM.decode, mode="sequence") == pytest.approx(0.7 * 0.9 * math.exp(-0.5 * 4))
    assert label_token_logprobs(t, LM.decode) == pytest.approx([math.log(0.7), math.log(0.9)] + [-0.5] * 4)


def test_observation_text_does_not_shift_the_offsets() -> None:
    # The env turn mentions an answer too; only model text counts, and offsets are per turn.
    first = "<plan>p</plan><search>q</search>"
    answer = "<answer>Label: NOT ENOUGH INFO\nEvidence: none</answer>"
    t = traj(model(first), env("<answer>Label: SUPPORT</answer>"), model(answer))
    at = answer.index("NOT")
    assert label_confidence(t, LM.decode) == pytest.approx(math.exp(-0.01 * (at + 1)))
    n = len("NOT ENOUGH INFO")
    expected = math.exp(sum(-0.01 * (i + 1) for i in range(at, at + n)))
    assert label_confidence(t, LM.decode, mode="sequence") == pytest.approx(expected)


def test_label_split_across_two_model_turns() -> None:
    a, b = "<plan>p</plan><answer>Label: SUP", "PORT\nEvidence: [[a]]</answer>"
    t = traj(model(a, [-1.0] * len(a)), model(b, [-2.0] * len(b)))
    assert label_confidence(t, LM.decode) == pytest.approx(math.exp(-1.0))
    assert label_confidence(t, LM.decode, mode="sequence") == pytest.approx(math.exp(-3.0 - 8.0))


def test_a_token_spanning_the_space_and_the_label() -> None:
    # A BPE-like codec: one token " SUPPORT" starting at the space after "Label:".
    vocab = {1: "<answer>Label:", 2: " SUPPORT", 3: "\nEvidence: [[a]]</answer>"}

    def decode(ids):
        return "".join(vocab[i] for i in ids)

    text = decode([1, 2, 3])
    turn = Turn(source="model", text=text, token_ids=[1, 2, 3], mask=[1, 1, 1], logprobs=[-0.1, math.log(0.6), -0.2])
    assert label_confidence(traj(turn), decode) == pytest.approx(0.6)
    assert label_confidence(traj(turn), decode, mode="sequence") == pytest.approx(0.6)


def test_prefix_decoding_handles_pieces_that_decode_differently_alone() -> None:
    # SentencePiece-like: a piece's leading "▁" is a space, except at the start of the text.
    vocab = {1: "<answer>Label:", 2: "▁REF", 3: "UTE", 4: "\nEvidence:▁none</answer>"}

    def decode(ids):
        return "".join(vocab[i] for i in ids).replace("▁", " ").removeprefix(" ")

    text = decode([1, 2, 3, 4])
    turn = Turn(source="model", text=text, token_ids=[1, 2, 3, 4], mask=[1] * 4,
                logprobs=[-0.1, math.log(0.8), math.log(0.5), -0.3])
    assert label_confidence(traj(turn), decode) == pytest.approx(0.8)
    assert label_confidence(traj(turn), decode, mode="sequence") == pytest.approx(0.4)


@pytest.mark.parametrize(
    "t",
    [
        traj(model("<plan>p</plan><search>q</search>")),  # no answer
        traj(model("<answer>Label: MAYBE\nEvidence: none</answer>")),  # unknown label
        traj(model("<answer>Label: SUPPORT\nEvidence: none</answer>"), error="env_step failed: TimeoutError: x"),
        traj(Turn(source="model", text="<answer>Label: SUPPORT</answer>", token_ids=LM.encode("<answer>Label: SUPPORT</answer>"),
                  mask=[1] * 31, logprobs=None)),  # no logprobs (an API without them)
        traj(Turn(source="model", text="<answer>Label: SUPPORT</answer>", token_ids=LM.encode("<answer>Label: REFUTE</answer>"),
                  mask=[1] * 30, logprobs=[0.0] * 30)),  # ids disagree with the text
        traj(),
    ],
)
def test_none_when_it_cannot_be_read_exactly(t: Trajectory) -> None:
    assert label_confidence(t, LM.decode) is None
    assert label_confidence(t, LM.decode, mode="sequence") is None


def test_unknown_mode() -> None:
    with pytest.raises(ValueError, match="mode"):
        label_confidence(traj(), LM.decode, mode="mean")  # type: ignore[arg-type]
