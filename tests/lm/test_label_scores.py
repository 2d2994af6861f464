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
    """The probabilities are the label words' next-token probabilities — each word's
    case variants summed (" true", " True", " TRUE") — renormalised."""
    scorer = LabelScorer(lm, ["true", "false"])
    text = scorer.prompt_text(*ITEMS[0])
    assert text.startswith("The following evidence is given: The Nile flows north")
    assert text.endswith('Among true, false, the claim "The Nile flows north." is classified as:')
    ids = [list(dict.fromkeys(lm.encode(" " + v)[0] for v in (w, w.capitalize(), w.upper()))) for w in ("true", "false")]
    assert all(len(i) > 1 for i in ids)  # the tiny model's tokenizer has distinct variants
    lps = lm.next_token_logprobs([lm.encode(text)], ids[0] + ids[1])[0]
    mass = [sum(math.exp(x) for x in lps[: len(ids[0])]), sum(math.exp(x) for x in lps[len(ids[0]):])]
    want = [m / sum(mass) for m in mass]
    assert scorer.probs([ITEMS[0]])[0] == pytest.approx(want, abs=1e-9)


def test_chat_form_through_score_choices_matches_its_softmax(lm):
    from factrl.lm.text import choice_probs
    from factrl.types import Message

    scorer = LabelScorer(lm, ["true", "false"], form="chat")
    got = scorer.probs([ITEMS[1]])[0]
    conv = [Message(role="user", content=scorer.prompt_text(*ITEMS[1]))]
    # every case variant's exact continuation score, summed per label
    lps = lm.score_choices(conv, ["true", "True", "TRUE", "false", "False", "FALSE"])
    mass = [math.log(sum(math.exp(x) for x in lps[:3])), math.log(sum(math.exp(x) for x in lps[3:]))]
    assert got == pytest.approx(choice_probs(mass))
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


def _chat_reply(top):
    content = [{"token": top[0][0], "logprob": top[0][1],
                "top_logprobs": [{"token": t, "logprob": lp, "top_logprobs": []} for t, lp in top]}]
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": top[0][0]}, "finish_reason": "length",
                         "logprobs": {"content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def test_label_words_count_in_any_case_and_their_variants_add_up(serve):
    """A server's top tokens "True", " true" and "TRUE" are all the label "true"."""
    from fastapi import FastAPI

    from factrl.lm.openai_backend import OpenAILM

    app = FastAPI()
    top = [("True", math.log(0.4)), (" true", math.log(0.1)), ("TRUE", math.log(0.05)), (" False", math.log(0.3)),
           ("half", math.log(0.15))]

    @app.post("/v1/chat/completions")
    async def chat():
        return _chat_reply(top)

    lm = OpenAILM("m", base_url=serve(app) + "/v1")
    assert lm.score_choices([], ["true", "false", "Half", "none"])[:3] == pytest.approx(
        [math.log(0.55), math.log(0.3), math.log(0.15)])
    rows = LabelScorer(lm, ["true", "false", "half"]).probs(ITEMS[:1])
    assert rows[0] == pytest.approx([0.55, 0.3, 0.15])


def test_completion_form_through_the_completions_endpoint(serve):
    """FFRR's scorer is a completion model (text-davinci-003; gpt-3.5-turbo-instruct),
    which chat completions does not serve: the raw prompt goes to /v1/completions and the
    label words are read off the first position's top tokens."""
    from fastapi import FastAPI, Request

    from factrl.lm.openai_backend import OpenAILM

    app = FastAPI()
    seen = []

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()
        seen.append(body)
        p_true = 0.6 if "Nile" in body["prompt"] else 0.1
        top = {" true": math.log(p_true), " True": math.log(0.1), " false": math.log(0.8 - p_true), " half": math.log(0.1)}
        return {"id": "x", "object": "text_completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "text": " true", "finish_reason": "length",
                             "logprobs": {"tokens": [" true"], "token_logprobs": [math.log(p_true)],
                                          "top_logprobs": [top], "text_offset": [0]}}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    @app.post("/v1/chat/completions")
    async def chat():  # a completion-only model refuses chat
        from fastapi.responses import JSONResponse

        return JSONResponse({"error": {"message": "This is not a chat model"}}, status_code=404)

    lm = OpenAILM("gpt-3.5-turbo-instruct", base_url=serve(app) + "/v1")
    scorer = LabelScorer(lm, ["true", "half", "false"], form="completion", batch_size=16)
    assert scorer.form == "completion"
    rows = scorer.probs(ITEMS[:2])
    assert len(seen) == 2 and {b["prompt"] for b in seen} == {scorer.prompt_text(*i) for i in ITEMS[:2]}
    assert all(b["max_tokens"] == 1 and b["logprobs"] == 5 and b["temperature"] == 0 and "messages" not in b
               for b in seen)
    assert rows[0] == pytest.approx([0.7 / 1.0, 0.1, 0.2])
    assert rows[1] == pytest.approx([0.2 / 1.0, 0.1, 0.7])
    assert lm.stats.requests == 2


# -- label continuations after a token context (forced answering, label probes) -----------


class ContinuationLM:
    """A token-level LM over characters whose encode appends EOS (0), scoring each
    continuation from a table keyed by its text; records every score call."""

    eos_token_id = 0

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.calls: list[tuple[list[list[int]], list[list[int]]]] = []

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text] + [0]

    def score(self, prompts, continuations):
        self.calls.append((list(prompts), list(continuations)))
        return [self.table["".join(map(chr, c))] for c in continuations]


def test_label_continuations_are_the_whole_word_without_eos():
    from factrl.lm.label_scores import label_continuations

    lm = ContinuationLM({})
    assert label_continuations(lm, ["SUPPORT", "REFUTE"]) == [[ord(c) for c in " SUPPORT\n"], [ord(c) for c in " REFUTE\n"]]
    assert label_continuations(lm, ["a", "b"], prefix="", suffix="") == [[97], [98]]


def test_label_logprobs_score_every_label_after_every_context_in_one_call():
    from factrl.lm.label_scores import label_continuations, label_logprobs

    lm = ContinuationLM({" SUPPORT\n": -3.0, " REFUTE\n": -0.5, " NOT ENOUGH INFO\n": -2.0})
    choices = label_continuations(lm, ["SUPPORT", "REFUTE", "NOT ENOUGH INFO"])
    rows = label_logprobs(lm, [[1, 2], [3]], choices)
    assert rows == [[-3.0, -0.5, -2.0], [-3.0, -0.5, -2.0]]
    ((prompts, conts),) = lm.calls
    assert prompts == [[1, 2]] * 3 + [[3]] * 3 and conts == choices * 2
    assert label_logprobs(lm, [], choices) == [] and len(lm.calls) == 1


def test_pick_labels_and_the_label_bias():
    from factrl.lm.label_scores import label_bias, pick_labels

    rows = [[-1.0, -2.0, -3.0], [-2.0, -1.5, -3.0], [-1.0, -1.0, -5.0]]
    assert pick_labels(rows) == [0, 1, 0]  # the first on a tie
    bias = label_bias(rows)
    assert bias == pytest.approx([-4 / 3, -1.5, -11 / 3])
    # calibrated: row 0 → [0.33, -0.5, 0.67] picks label 2
    assert pick_labels(rows, bias) == [2, 2, 1]
    assert pick_labels([[math.nan, -math.inf], [math.nan, -1.0]]) == [None, 1]
    assert label_bias([[math.nan, -1.0], [-2.0, -3.0]]) == [-2.0, -2.0]
    with pytest.raises(ValueError, match="bias has 2 entries for 3 labels"):
        pick_labels(rows, [0.0, 0.0])


def test_label_continuation_errors_are_clear():
    from factrl.lm.label_scores import label_continuations, label_logprobs

    lm = ContinuationLM({})
    with pytest.raises(LabelScoreError, match="do not all encode differently"):
        label_continuations(lm, ["yes", "yes"])
    with pytest.raises(LabelScoreError, match="at least two"):
        label_continuations(lm, ["yes"])
    with pytest.raises(TypeError, match="not one string"):
        label_continuations(lm, "yes")
    with pytest.raises(TypeError, match="encode them first"):
        label_logprobs(lm, ["a text"], [[1]])

    class TextOnly:
        name = "chat-api"

        def complete(self, conversations, config): ...

    with pytest.raises(LabelScoreError, match="chat-api has no token-level"):
        label_continuations(TextOnly(), ["a", "b"])

    class Short(ContinuationLM):
        def score(self, prompts, continuations):
            return [0.0]

    with pytest.raises(LabelScoreError, match="returned 1 scores for 4 label rows"):
        label_logprobs(Short({}), [[1], [2]], [[5], [6]])


def test_label_logprobs_on_a_transformers_model_are_summed_token_logprobs(lm):
    from factrl.lm.label_scores import label_continuations, label_logprobs

    words = ["SUPPORT", "REFUTE", "NOT ENOUGH INFO"]
    choices = label_continuations(lm, words)
    assert all(lm.eos_token_id not in c for c in choices) and all(len(c) > 1 for c in choices)
    contexts = [lm.encode("The claim is odd.\n<answer>\nLabel:"), lm.encode("Short.\n<answer>\nLabel:")]
    rows = label_logprobs(lm, contexts, choices)
    for ctx, row in zip(contexts, rows):
        want = [sum(x) for x in lm.batch_token_logprobs([ctx] * 3, choices)]
        assert row == pytest.approx(want, abs=1e-4)


def test_forced_answers_pick_the_label_that_pick_labels_picks(lm):
    """Forced answering reads its label the way this module does (one implementation)."""
    from factrl.forced import ANSWER_OPENING, LABELS, force_answers
    from factrl.lm.label_scores import label_continuations, label_logprobs, pick_labels
    from factrl.protocol.forcing import VERI_R1_FORCING
    from factrl.types import Claim, Message, Trajectory, Verdict

    trajs, contexts = [], []
    for i, text in enumerate(["Verify: the Nile flows north.", "Verify: water boils at 50 C.", "Verify: x."]):
        ids = lm.encode(text)
        trajs.append(Trajectory(claim_id=str(i), env="veri_r1", claim=Claim(id=str(i), text=text),
                                prompt=[Message(role="user", content=text)], prompt_ids=ids, turns=[],
                                verdict=Verdict(format_errors=["no <answer>"])))
        contexts.append(ids + lm.encode(ANSWER_OPENING))
    rows = label_logprobs(lm, contexts, label_continuations(lm, [lab.value for lab in LABELS]))
    picked = [LABELS[k] for k in pick_labels(rows)]
    assert [v.label for v in force_answers(trajs, lm, VERI_R1_FORCING)] == picked
