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


def test_openai_compatible_server_scores_every_row_concurrently(serve):
    """Chat form through an OpenAI-compatible server's first-position top_logprobs: one
    request per row, all sent in one batch, rows back in order and summing to 1."""
    from fastapi import FastAPI, Request

    from factrl.lm.openai_backend import OpenAILM

    app = FastAPI()
    seen = []

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        seen.append(body)
        text = body["messages"][-1]["content"]
        p_true = 0.7 if "Nile" in text else 0.2
        top = [{"token": "true", "logprob": math.log(p_true), "top_logprobs": []},
               {"token": " false", "logprob": math.log(0.9 - p_true), "top_logprobs": []}]
        content = [{"token": "true", "logprob": math.log(p_true), "top_logprobs": top}]
        return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "true"}, "finish_reason": "length",
                             "logprobs": {"content": content}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    lm = OpenAILM("m", base_url=serve(app) + "/v1")
    scorer = LabelScorer(lm, ["true", "false", "half"], batch_size=16)
    assert scorer.form == "chat"
    rows = scorer.probs(ITEMS)
    assert len(seen) == len(ITEMS) and all(b["max_tokens"] == 1 and b["top_logprobs"] == 20 for b in seen)
    assert rows[0] == pytest.approx([0.7 / 0.9, 0.2 / 0.9, 0.0])  # "half" outside the top list
    assert rows[1] == pytest.approx([0.2 / 0.9, 0.7 / 0.9, 0.0])
    assert all(math.fsum(r) == pytest.approx(1.0) for r in rows)
    assert lm.score_choices_batch([], ["true"]) == []
