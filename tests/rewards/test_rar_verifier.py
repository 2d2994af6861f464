"""Binary RAR's verifier: the parser on hostile outputs (fixed cases and fuzzing), the
prompts (Figures 9 and 10), and one batched pass with row failures."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from factrl.lm.base import Generation, RowFailures
from factrl.lm.scripted import ScriptedLM
from factrl.rewards.rar_verifier import (BINARY_PROMPT, MAX_LITERAL_CHARS, MAX_OBJECTS, RATING_PROMPT,
                                         parse_verifier_output, strip_think, verifier_prompt, verify)
from factrl.types import Passage


@pytest.mark.parametrize("text, score", [
    ('{"REASONING": "No contradiction found.", "SCORE": 1}', 1),
    ('{"REASONING": "2022 vs 2023", "SCORE": 0}', 0),
    ('{"REASONING": "ok", "SCORE": "1"}', 1),  # the prompt's own example quotes the score
    ('{"REASONING": "ok", "SCORE": 1.0}', 1),
    ("{'REASONING': 'single quotes', 'SCORE': 0}", 0),
    ('```json\n{"REASONING": "fenced", "SCORE": 1}\n```', 1),
    ('```\n{"REASONING": "fenced", "SCORE": 0}\n```\nHope this helps!', 0),
    ('Sure! Here is my evaluation: {"REASONING": "x", "SCORE": 1} Let me know.', 1),
    ('<think>The SCORE: 0 maybe? {"SCORE": 0}</think>\n{"REASONING": "after thought", "SCORE": 1}', 1),
    ('{"reasoning": "lower-case keys", "score": 0}', 0),
    ('{"REASONING": "trailing comma", "SCORE": 1,}', 1),  # read as a Python literal
    ('{REASONING: no quotes at all, SCORE: 0}', 0),  # neither JSON nor Python: the field regex
    ('REASONING: "plain", SCORE: 1', 1),
    ('{"REASONING": "echoes the template {\\"SCORE\\": \\"<your-score>\\"}", "SCORE": 1}', 1),
    ('{"REASONING": "[...]", "SCORE": "<your-score>"}\n{"REASONING": "real", "SCORE": 0}', 0),
    ('{"REASONING": "nested {braces} inside", "SCORE": 1}', 1),
])
def test_parser_reads_what_models_write(text, score):
    out = parse_verifier_output(text)
    assert out.ok and out.score == score and out.error is None, out


@pytest.mark.parametrize("text, why", [
    ("", "empty output"),
    ("   \n ", "empty output"),
    ("<think>I was cut off before answering", "empty output after the reasoning trace"),
    ("The response looks fine to me.", "no JSON object with a SCORE"),
    ('{"REASONING": "no score"}', "no JSON object with a SCORE"),
    ('{"REASONING": "x", "SCORE": 2}', "outside 0..1"),
    ('{"REASONING": "x", "SCORE": -1}', "outside 0..1"),
    ('{"REASONING": "x", "SCORE": 0.5}', "not an integer"),
    ('{"REASONING": "x", "SCORE": "yes"}', "not a number"),
    ('{"REASONING": "x", "SCORE": true}', "not a number"),
    ('{"REASONING": "x", "SCORE": null}', "not a number"),
    ('{"REASONING": "x", "SCORE": NaN}', "not a number"),
    ('{"SCORE": 1} and then {"SCORE": 0}', "different scores"),
    ('SCORE: 1 ... actually SCORE: 0', "disagree"),
    ('[1, 0]', "no JSON object with a SCORE"),
    ('{"REASONING": "x", "SCORE": [1]}', "not a number"),
])
def test_parser_failures_say_why_and_never_score(text, why):
    out = parse_verifier_output(text)
    assert out.score is None and not out.ok
    assert why in out.error, out.error
    assert out.raw == text


def test_rating_scale_accepts_0_to_10_and_refuses_11():
    assert parse_verifier_output('{"REASONING": "r", "SCORE": "7"}', scale=10).score == 7
    assert parse_verifier_output('{"SCORE": 10}', scale=10).score == 10
    assert "outside 0..10" in parse_verifier_output('{"SCORE": 11}', scale=10).error
    # a binary parse of a rating answer is a failure, not a clipped 1
    assert parse_verifier_output('{"SCORE": 7}').score is None


def test_strip_think_drops_closed_and_unclosed_traces():
    assert strip_think("<think>a</think>answer") == "answer"
    assert strip_think("answer<think>cut off") == "answer"
    assert strip_think("<THINK>x</THINK> y <think>z</think>") == "y"


def test_degenerate_outputs_are_counted_failures_read_in_bounded_time():
    one = json.dumps({"REASONING": "r", "SCORE": 1})
    # a loop of answers is not an answer, and each object costs a parse
    many = parse_verifier_output(one * (MAX_OBJECTS + 1))
    assert many.score is None and many.error.startswith(f"more than {MAX_OBJECTS} JSON objects")
    assert parse_verifier_output(one * 16).score == 1  # 16 objects that agree are read
    # a Python literal longer than MAX_LITERAL_CHARS is not compiled; its SCORE field still reads
    long = "{'REASONING': '" + "x" * MAX_LITERAL_CHARS + "', 'SCORE': 0}"
    assert parse_verifier_output(long).score == 0
    assert parse_verifier_output("{" * 100_000).error.startswith("no JSON object with a SCORE")
    assert parse_verifier_output("SCORE:" + " " * 100_000 + "x").error.startswith("no JSON object")
    assert parse_verifier_output("```" + "a" * 100_000).score is None
    assert parse_verifier_output("<think>" * 20_000 + '{"SCORE": 1}').error.startswith("empty output")


# -- fuzzing ----------------------------------------------------------------------------

junk = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)
braces = st.text(alphabet='{}[]"\':,SCOREscore0123456789 \n`<>/think', max_size=80)


@settings(max_examples=400, deadline=None)
@given(st.one_of(junk, braces), st.sampled_from([1, 10]))
def test_fuzz_parser_never_raises_and_scores_only_in_range(text, scale):
    out = parse_verifier_output(text, scale=scale)
    assert (out.score is None) == (out.error is not None)
    if out.score is not None:
        assert isinstance(out.score, int) and 0 <= out.score <= scale
    assert out.raw == text


@settings(max_examples=300, deadline=None)
@given(
    score=st.integers(0, 1),
    reasoning=st.text(max_size=40),
    # an unclosed <think> in the junk is a reasoning trace cut at the budget: nothing after
    # it is an answer (strip_think), so such junk is not a wrapped answer
    before=junk.filter(lambda s: "{" not in s and "score" not in s.lower() and "<think" not in s.lower()),
    after=junk.filter(lambda s: "{" not in s and "score" not in s.lower() and "<think" not in s.lower()),
    style=st.sampled_from(["json", "fence", "single", "string_score", "think"]),
)
def test_fuzz_a_wrapped_answer_is_always_recovered(score, reasoning, before, after, style):
    obj = {"REASONING": reasoning, "SCORE": str(score) if style == "string_score" else score}
    body = json.dumps(obj)
    if style == "fence":
        body = f"```json\n{body}\n```"
    elif style == "single":
        body = repr(obj)  # a Python dict literal: single quotes
    elif style == "think":
        body = f"<think>{{\"SCORE\": {1 - score}}}</think>{body}"
    out = parse_verifier_output(f"{before}{body}{after}")
    assert out.score == score, (out, before, body, after)
    assert out.reasoning == reasoning


# -- prompts and the batched pass -------------------------------------------------------

def test_prompts_hold_the_papers_rules_and_the_three_inputs():
    text = verifier_prompt("Who?", "Ada Lovelace.", [Passage(id="a#0", doc_id="a", title="Ada", text="Ada wrote."),
                                                     "plain passage"])
    assert "SCORE 0 (Contradiction): Assign this score ONLY if you find a clear, factual contradiction" in text
    assert "DOES NOT contradict it" in text
    assert "[1] Ada: Ada wrote." in text and "[2] plain passage" in text
    assert ">>> Begin of the prompt <<<\nWho?\n<<< End of the prompt >>>" in text
    assert ">>> Begin of the response <<<\nAda Lovelace.\n<<< End of the response >>>" in text
    assert text.endswith('{"REASONING": "[...]", "SCORE": "<your-score>"}')
    rating = verifier_prompt("Who?", "Ada.", [], rating=True)
    assert "8-10: Very confident there is no factual error" in rating and "(no search results)" in rating
    assert "{passages}" in BINARY_PROMPT and "{passages}" in RATING_PROMPT


class _FlakyLM(ScriptedLM):
    """Row 1 fails at the backend (an HTTP error); the others answer."""

    def complete(self, conversations, config):
        gens = super().complete(conversations, config)
        raise RowFailures([g if i != 1 else None for i, g in enumerate(gens)],
                          [None if i != 1 else TimeoutError("server timed out") for i in range(len(gens))])


def test_verify_batches_rows_and_turns_backend_failures_into_counted_parse_failures():
    def answer(ctx):
        return '{"REASONING": "r", "SCORE": 0}' if "Mars" in ctx else '{"REASONING": "r", "SCORE": 1}'

    lm = _FlakyLM(answer)
    outs = verify(lm, ["p", "p", "p"], ["Earth is round.", "x", "Mars is a star."], [["e"], ["e"], ["e"]])
    assert [o.score for o in outs] == [1, None, 0]
    assert "LM failed: TimeoutError: server timed out" in outs[1].error
    assert lm.calls == 1  # one batched call


def test_verify_names_an_output_cut_at_the_budget():
    lm = ScriptedLM(lambda ctx: '{"REASONING": "' + "very long " * 50 + '", "SCORE": 1}')
    from factrl.lm.base import GenerationConfig

    (out,) = verify(lm, ["p"], ["r"], [[]], config=GenerationConfig(max_new_tokens=20, temperature=0.0))
    assert out.score is None and out.error.startswith("output cut at max_new_tokens")


def test_verify_checks_lengths_and_types():
    lm = ScriptedLM(lambda ctx: "")
    with pytest.raises(ValueError, match="2 prompts, 1 responses"):
        verify(lm, ["a", "b"], ["r"], [[], []])
    with pytest.raises(TypeError):
        verify(lm, "a", "r", [[]])
    assert verify(lm, [], [], []) == []


def test_choice_mode_picks_the_more_probable_answer_and_counts_backend_failures():
    from factrl.rewards.rar_verifier import CHOICES, verify_by_choice

    class Scorer(ScriptedLM):
        def score_choices(self, conversation, choices):
            assert choices == [CHOICES[1], CHOICES[0]]
            text = conversation[0].content
            if "boom" in text:
                raise TimeoutError("server down")
            return [-1.0, -5.0] if "Earth is round" in text else [-9.0, -2.0]

    outs = verify_by_choice(Scorer(lambda c: ""), ["p"] * 3, ["Earth is round.", "Mars is a star.", "boom"],
                            [["e"]] * 3)
    assert [o.score for o in outs] == [1, 0, None]
    assert outs[0].raw == CHOICES[1] and "LM failed: TimeoutError" in outs[2].error
    assert [o.margin for o in outs] == [4.0, -7.0, None]
    # A calibration margin: answer 1 must be ahead by at least that much.
    strict = verify_by_choice(Scorer(lambda c: ""), ["p"] * 2, ["Earth is round.", "Mars is a star."], [["e"]] * 2,
                              margin=4.5)
    assert [o.score for o in strict] == [0, 0]
    lenient = verify_by_choice(Scorer(lambda c: ""), ["p"], ["Mars is a star."], [["e"]], margin=-7.0)
    assert [o.score for o in lenient] == [1]
    with pytest.raises(ValueError, match="finite"):
        verify_by_choice(Scorer(lambda c: ""), ["p"], ["x"], [["e"]], margin=float("nan"))
    from factrl.rewards import build_reward
    with pytest.raises(ValueError, match="mode"):
        build_reward("rar_rating").configure({"mode": "choice"})
    with pytest.raises(ValueError, match="margin applies to mode='choice'"):
        build_reward("rar").configure({"margin": 1.0})
    assert build_reward("rar").configure({"mode": "choice", "margin": 2.5}).margin == 2.5
