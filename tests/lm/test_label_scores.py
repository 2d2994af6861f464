"""The LM label scorer: distributions over the label set, batching, both prompt forms."""

import math

import pytest

from factrl.lm.label_scores import LabelScoreError, LabelScorer, ScoreItem
from factrl.lm.tiny import build_tiny_model

ITEMS = [
    ("The Nile flows north.", ["The Nile flows north into the Mediterranean Sea."]),
    ("Aspirin cures all cancers.", ["Aspirin is a painkiller.", "No drug cures every cancer; trials show none."]),
    ("Water boils at 50 C at sea level.", []),
    ("A longer claim about vitamin D and bone density in older adults over several years.",
     ["Vitamin D supplements were given for three years to 2,000 adults aged over 65. " * 3]),
]


@pytest.fixture(scope="module")
def lm(tmp_path_factory):
    from factrl.lm.loader import load_lm

    return load_lm(str(build_tiny_model(tmp_path_factory.mktemp("tiny"), layers=2, hidden=64, heads=4, seed=1)))


def test_probabilities_sum_to_one_over_the_label_set(lm):
    scorer = LabelScorer(lm, ["true", "half", "false"])
    assert scorer.form == "completion"
    for row in scorer.probs(ITEMS):
        assert len(row) == 3 and math.fsum(row) == pytest.approx(1.0, abs=1e-9)
        assert all(0.0 < p < 1.0 for p in row)


def test_batched_equals_unbatched(lm):
    batched = LabelScorer(lm, ["supported", "refuted", "unverifiable"], batch_size=8).probs(ITEMS)
    single = LabelScorer(lm, ["supported", "refuted", "unverifiable"], batch_size=1)
    for item, row in zip(ITEMS, batched):
        assert single.probs([item])[0] == pytest.approx(row, abs=1e-5)


def test_completion_form_reads_the_next_token_distribution(lm):
    """The probabilities are the label words' next-token probabilities, renormalised."""
    scorer = LabelScorer(lm, ["true", "false"])
    text = scorer.prompt_text(*ITEMS[0])
    assert text.startswith("The following evidence is given: The Nile flows north")
    assert text.endswith('Among true, false, the claim "The Nile flows north." is classified as:')
    ids = [lm.encode(" true")[0], lm.encode(" false")[0]]
    lps = lm.next_token_logprobs([lm.encode(text)], ids)[0]
    want = [math.exp(x) / (math.exp(lps[0]) + math.exp(lps[1])) for x in lps]
    assert scorer.probs([ITEMS[0]])[0] == pytest.approx(want, abs=1e-9)


def test_chat_form_through_score_choices_matches_its_softmax(lm):
    from factrl.lm.text import choice_probs
    from factrl.types import Message

    scorer = LabelScorer(lm, ["true", "false"], form="chat")
    got = scorer.probs([ITEMS[1]])[0]
    conv = [Message(role="user", content=scorer.prompt_text(*ITEMS[1]))]
    assert got == pytest.approx(choice_probs(lm.score_choices(conv, ["true", "false"])))
    assert math.fsum(got) == pytest.approx(1.0)


class BatchOnly:
    """A text-level backend (as an HTTP API): ``score_choices_batch`` only, one log-prob row
    per conversation, the second label outside the server's top list (-inf)."""

    name = "fake-remote"

    def __init__(self):
        self.calls = []

    def score_choices_batch(self, conversations, choices):
        self.calls.append(len(conversations))
        return [[math.log(0.5), -math.inf, math.log(0.25)] for _ in conversations]


def test_chat_backends_score_all_rows_in_one_batched_call():
    lm = BatchOnly()
    scorer = LabelScorer(lm, ["true", "false", "half"], batch_size=16)
    assert scorer.form == "chat"
    rows = scorer.probs(ITEMS)
    assert lm.calls == [len(ITEMS)]
    assert rows[0] == pytest.approx([2 / 3, 0.0, 1 / 3])


def test_bad_inputs_give_clear_errors(lm):
    scorer = LabelScorer(lm, ["true", "false"])
    with pytest.raises(LabelScoreError, match="empty claim"):
        scorer.probs([("   ", ["doc"])])
    with pytest.raises(TypeError, match="list of texts"):
        scorer.prompt_text("claim", "one string")
    with pytest.raises(LabelScoreError, match="distinct"):
        LabelScorer(lm, ["true", "True"])
    with pytest.raises(LabelScoreError, match="at least two"):
        LabelScorer(lm, ["true"])

    class NoFinite(BatchOnly):
        def score_choices_batch(self, conversations, choices):
            return [[-math.inf] * len(choices) for _ in conversations]

    with pytest.raises(LabelScoreError, match="no label a finite score"):
        LabelScorer(NoFinite(), ["a", "b"]).probs([ScoreItem("claim", ["doc"])])


def test_label_words_sharing_a_first_token_are_refused_in_completion_form(lm):
    first = lm.encode(" mostly-true")[0]
    assert first == lm.encode(" mostly-false")[0]
    with pytest.raises(LabelScoreError, match="share their first token"):
        LabelScorer(lm, ["mostly-true", "mostly-false"], form="completion")
