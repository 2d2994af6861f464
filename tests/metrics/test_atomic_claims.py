"""Claim extraction and judging through the LM protocol's ``complete``, on ScriptedLM
outputs, malformed ones included: every parse failure is counted, none dropped."""

from __future__ import annotations

import pytest

from factrl.lm.base import Generation, GenerationConfig, RowFailures
from factrl.lm.scripted import ScriptedLM
from factrl.metrics.atomic_claims import (
    extract_atomic_claims,
    judge_claims,
    judge_responses,
    parse_claim_list,
    parse_judgement,
)
from factrl.metrics.hallucination import Support, long_form_hallucination
from factrl.types import Passage

# What the scripted extractor writes for each response.
EXTRACTIONS = {
    "R-plain": '["Marie Curie was born in Warsaw.", "Marie Curie won two Nobel Prizes."]',
    "R-fenced": '```json\n["Warsaw is in Poland."]\n```',
    "R-think": '<think>Let me list them.</think>\n["Curie was a physicist."]',
    "R-empty": "[]",
    "R-prose": 'Here are the facts: ["Warsaw is in Poland."]',
    "R-nonstring": '["Warsaw is in Poland.", 3]',
    "R-object": '{"claims": ["Warsaw is in Poland."]}',
    "R-truncated": '["Warsaw is in Pol',
}


def response_of(context: str) -> str:
    return context.split(">>> Begin of response <<<\n", 1)[1].split("\n<<< End of response >>>", 1)[0]


def extractor(context: str) -> str:
    assert "Facts (as a JSON list of strings):" in context
    return EXTRACTIONS[response_of(context)]


def test_extraction_parses_lists_and_counts_failures() -> None:
    lm = ScriptedLM(extractor)
    out = extract_atomic_claims(lm, list(EXTRACTIONS))
    by = dict(zip(EXTRACTIONS, out))
    assert by["R-plain"].claims == ("Marie Curie was born in Warsaw.", "Marie Curie won two Nobel Prizes.")
    assert by["R-fenced"].claims == ("Warsaw is in Poland.",)
    assert by["R-think"].claims == ("Curie was a physicist.",)
    assert by["R-empty"].claims == () and by["R-empty"].error is None
    for key in ("R-prose", "R-nonstring", "R-object", "R-truncated"):
        assert by[key].claims == () and by[key].error, key
        assert by[key].raw == EXTRACTIONS[key]
    assert "non-string" in by["R-nonstring"].error and "not a list" in by["R-object"].error
    assert lm.calls == 1  # one batched complete call


def test_extraction_prompt_carries_the_user_prompt() -> None:
    seen = []

    def respond(context: str) -> str:
        seen.append(context)
        return "[]"

    extract_atomic_claims(ScriptedLM(respond), ["a response"], ["Tell me about Curie."])
    assert ">>> Begin of prompt <<<\nTell me about Curie.\n<<< End of prompt >>>" in seen[0]
    with pytest.raises(ValueError, match="prompts"):
        extract_atomic_claims(ScriptedLM(respond), ["a", "b"], ["only one"])
    with pytest.raises(TypeError):
        extract_atomic_claims(ScriptedLM(respond), "one string")  # type: ignore[arg-type]


JUDGEMENTS = {
    "c1": "supported",
    "c2": "Contradicted.",
    "c3": "**Inconclusive**",
    "c4": '"supported"',
    "c5": "<think>The results say so.</think>Supported",
    "c6": "I think it is supported",
    "c7": "",
    "c8": "supported, because the first result says so",
}


def judge(context: str) -> str:
    assert "Your decision:" in context
    claim = context.split("\nClaim: ", 1)[1].split("\n", 1)[0]
    return JUDGEMENTS[claim]


def test_judging_parses_words_and_counts_failures() -> None:
    out = judge_claims(ScriptedLM(judge), list(JUDGEMENTS), ["Some search result."])
    got = {j.claim: j.support for j in out}
    assert got == {"c1": Support.SUPPORTED, "c2": Support.CONTRADICTED, "c3": Support.UNSUPPORTED,
                   "c4": Support.SUPPORTED, "c5": Support.SUPPORTED, "c6": None, "c7": None, "c8": None}
    failed = [j for j in out if j.support is None]
    assert all(j.error and "supported/contradicted/inconclusive" in j.error for j in failed)
    assert [j.raw for j in failed] == [JUDGEMENTS["c6"], "", JUDGEMENTS["c8"]]
    # A budget too small for the <think> block: a counted failure that says so.
    (cut,) = judge_claims(ScriptedLM(judge), ["c5"], [], config=GenerationConfig(max_new_tokens=20, temperature=0))
    assert cut.support is None and cut.error.startswith("output cut at max_new_tokens; ")


def test_judge_prompt_shows_per_claim_evidence() -> None:
    seen: dict[str, str] = {}

    def respond(context: str) -> str:
        claim = context.split("\nClaim: ", 1)[1].split("\n", 1)[0]
        seen[claim] = context.split(">>> Begin of search results <<<\n", 1)[1].split("\n<<< End", 1)[0]
        return "supported"

    p = Passage(id="p", doc_id="d", title="Warsaw", text="Warsaw is the capital of Poland.")
    judge_claims(ScriptedLM(respond), ["a", "b"], [["first passage", "second passage"], [p]])
    assert seen == {"a": "first passage\n\nsecond passage", "b": "Warsaw\nWarsaw is the capital of Poland."}
    with pytest.raises(ValueError, match="evidence for 1"):
        judge_claims(ScriptedLM(respond), ["a", "b"], [["only one list"]])
    assert judge_claims(ScriptedLM(respond), [], []) == []
    with pytest.raises(TypeError, match="not both"):
        judge_claims(ScriptedLM(respond), ["a", "b"], ["shared passage", ["a list"]])


class HalfFailing:
    """An LM whose second row fails (as an HTTP backend after its retries)."""

    def complete(self, conversations, config):
        gens = [Generation(token_ids=[], logprobs=None, text="supported", finish_reason="eos")
                for _ in conversations]
        raise RowFailures([gens[0], None, *gens[2:]], [None, TimeoutError("read timed out"), *[None] * (len(gens) - 2)])


def test_failed_rows_become_counted_failures() -> None:
    out = judge_claims(HalfFailing(), ["a", "b", "c"], [])  # type: ignore[arg-type]
    assert [j.support for j in out] == [Support.SUPPORTED, None, Support.SUPPORTED]
    assert out[1].error == "LM failed: TimeoutError: read timed out"
    ext = extract_atomic_claims(HalfFailing(), ["x", "y"])  # type: ignore[arg-type]
    assert ext[1].error.startswith("LM failed: TimeoutError") and ext[0].error  # "supported" is no JSON list


def test_judge_responses_end_to_end_into_the_metric() -> None:
    corpus = {"Warsaw": "Marie Curie was born in Warsaw in 1867.", "Nobel": "Curie won Nobel Prizes in 1903 and 1911."}

    def respond(context: str) -> str:
        if "Facts (as a JSON list of strings):" in context:
            return {
                "Curie, born in Warsaw, won two Nobel Prizes and one Oscar.":
                    '["Marie Curie was born in Warsaw.", "Marie Curie won two Nobel Prizes.", "Marie Curie won an Oscar."]',
                "Curie was born in Paris.": '["Marie Curie was born in Paris."]',
                "Nice weather today.": "[]",
                "garbled": "facts: none",
            }[response_of(context)]
        claim = context.split("\nClaim: ", 1)[1].split("\n", 1)[0]
        results = context.split(">>> Begin of search results <<<\n", 1)[1].split("\n<<< End", 1)[0]
        if "Paris" in claim:
            return "contradicted"
        return "supported" if results and ("Warsaw" in claim or "Nobel" in claim) else "inconclusive"

    def retrieve(claim: str) -> list[str]:
        return [text for key, text in corpus.items() if key in claim]

    responses = ["Curie, born in Warsaw, won two Nobel Prizes and one Oscar.", "Curie was born in Paris.",
                 "Nice weather today.", "garbled"]
    judged = judge_responses(ScriptedLM(respond), responses, retrieve)
    assert [[c.support for c in r.claims] for r in judged] == [
        [Support.SUPPORTED, Support.SUPPORTED, Support.UNSUPPORTED], [Support.CONTRADICTED], [], []]
    assert judged[3].extraction_error is not None
    m = long_form_hallucination(judged)
    # Macro over the two responses with claims: (1/3 + 1) / 2; micro 1 - 2/4
    assert m.hallucination_rate == pytest.approx(2 / 3)
    assert m.hallucination_rate_micro == pytest.approx(0.5)
    assert (m.responses_without_claims, m.extraction_failures) == (1, 1)


@pytest.mark.parametrize(
    ("text", "ok"),
    [("[]", True), ('  ["a", " ", "b"]  ', True), ("```\n[\"a\"]\n```", True), ("null", False), ("", False)],
)
def test_parse_claim_list(text: str, ok: bool) -> None:
    claims, why = parse_claim_list(text)
    assert (claims is not None, why is None) == (ok, ok)
    if text.strip().startswith('["a", " "'):
        assert claims == ("a", "b")  # blank claims are not claims


def test_hostile_claim_lists_are_counted_failures() -> None:
    # json recurses once per '[': past its limit that was a RecursionError out of the metric
    claims, why = parse_claim_list("[" * 5_000)
    assert claims is None and why is not None and why.startswith("not a JSON list (nested too deep)")
    assert parse_claim_list("```" + "a" * 50_000)[0] is None  # a fence that never closes
    assert parse_claim_list('```json\n["a"]\n```') == (("a",), None)
    assert parse_claim_list('<think>x</think>```json ["a"] ```') == (("a",), None)
    assert parse_judgement("```" + " " * 50_000 + "supported```") == (Support.SUPPORTED, None)


def test_parse_judgement_unsupported_synonym() -> None:
    assert parse_judgement("Unsupported") == (Support.UNSUPPORTED, None)
    assert parse_judgement("supported.\n")[0] is Support.SUPPORTED


def test_sentence_claims_split_responses_without_an_lm():
    from factrl.metrics.atomic_claims import sentence_claims

    got = sentence_claims(["Dr. Smith found X. It rose 2.5 times!", "", "One claim"])
    assert [e.claims for e in got] == [("Dr. Smith found X.", "It rose 2.5 times!"), (), ("One claim",)]
    assert all(e.error is None for e in got)
    with pytest.raises(TypeError):
        sentence_claims("one string")


def test_judging_by_choice_takes_the_most_probable_word_and_counts_failures():
    from factrl.metrics.atomic_claims import JUDGE_WORDS, judge_claims_by_choice
    from factrl.metrics.hallucination import Support

    seen = []

    class Scorer:
        def score_choices(self, conversation, choices):
            seen.append((conversation[-1].content, list(choices)))
            claim = conversation[-1].content.split("Claim: ")[1].split("\n")[0]
            if claim == "bad":
                raise RuntimeError("no logprobs")
            best = {"a": "supported", "b": "contradicted", "c": "inconclusive"}[claim]
            return [0.0 if w == best else -1.0 for w in choices]

    got = judge_claims_by_choice(Scorer(), ["a", "b", "c", "bad"], [["ev one"], ["ev two"], ["ev three"], ["ev four"]])
    assert [g.support for g in got] == [Support.SUPPORTED, Support.CONTRADICTED, Support.UNSUPPORTED, None]
    assert got[3].error == "LM failed: RuntimeError: no logprobs"
    assert "logprob(supported) = 0.000" in got[0].raw
    assert seen[1][1] == list(JUDGE_WORDS) and "ev two" in seen[1][0] and "ev one" not in seen[1][0]
