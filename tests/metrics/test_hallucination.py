"""Binary RAR's hallucination rates on hand-computed examples."""

from __future__ import annotations

import pytest

from factrl.metrics.hallucination import (
    JudgedClaim,
    ResponseClaims,
    ShortFormAnswer,
    Support,
    is_abstention,
    long_form_hallucination,
    matches_gold,
    short_form_hallucination,
)

S, C, U = "supported", "contradicted", "unsupported"
RESPONSES = [
    ResponseClaims.of(S, S, C, U),  # precision 1/2, hallucination 1/2, contradiction 1/4
    ResponseClaims.of(S, S, S, S, S, S),  # precision 1, hallucination 0
    ResponseClaims.of(),  # no claims: no precision, counted apart
    ResponseClaims(extraction_error="not a JSON list"),  # extraction failed: counted apart
    ResponseClaims.of(S, U, None),  # one judgement unparsed
]


def test_long_form_by_hand() -> None:
    r = long_form_hallucination(RESPONSES)
    assert (r.n_responses, r.scored_responses) == (5, 3)
    # Macro over the three scored responses: (1/2 + 0 + 1/2) / 3
    assert r.hallucination_rate == pytest.approx(1 / 3)
    assert r.precision == pytest.approx(2 / 3)
    assert r.contradiction_rate == pytest.approx((1 / 4 + 0 + 0) / 3)
    # Micro: 12 judged claims, 9 supported
    assert r.hallucination_rate_micro == pytest.approx(1 - 9 / 12)
    assert (r.responses_without_claims, r.extraction_failures, r.unjudged_claims) == (1, 1, 1)
    # Informativeness over the four extracted responses: (4 + 6 + 0 + 3) / 4 claims, (2 + 6 + 0 + 1) / 4 supported
    assert (r.mean_claims, r.mean_supported) == (3.25, 2.25)
    first, *_, last = r.per_response
    assert (first.supported, first.contradicted, first.unsupported, first.precision) == (2, 1, 1, 0.5)
    assert (last.n_claims, last.unjudged, last.hallucination_rate) == (3, 1, 0.5)
    assert r.per_response[2].precision is None and r.per_response[3].extraction_error == "not a JSON list"


def test_unjudged_claims_counted_as_unsupported() -> None:
    r = long_form_hallucination(RESPONSES, unjudged="unsupported")
    # The last response becomes S U U: hallucination 2/3
    assert r.per_response[-1].hallucination_rate == pytest.approx(2 / 3)
    assert r.hallucination_rate == pytest.approx((1 / 2 + 0 + 2 / 3) / 3)
    assert r.hallucination_rate_micro == pytest.approx(1 - 9 / 13)
    assert r.unjudged_claims == 1 and r.to_dict()["unjudged"] == "unsupported"
    with pytest.raises(ValueError, match="unjudged"):
        long_form_hallucination(RESPONSES, unjudged="drop")  # type: ignore[arg-type]


def test_macro_is_not_the_pooled_rate() -> None:
    # As in the paper (Table 2 vs Figure 3): a long response with many wrong claims
    # weighs as much as a short one in the macro mean, more in the pooled rate.
    r = long_form_hallucination([ResponseClaims.of(S, *[U] * 9), ResponseClaims.of(S, S)])
    assert r.hallucination_rate == pytest.approx((0.9 + 0.0) / 2)
    assert r.hallucination_rate_micro == pytest.approx(1 - 3 / 12)
    assert r.mean == "macro"


def test_long_form_empty_and_to_dict() -> None:
    r = long_form_hallucination([])
    assert r.hallucination_rate is None and r.hallucination_rate_micro is None and r.mean_claims is None
    d = long_form_hallucination(RESPONSES).to_dict()
    assert "per_response" not in d and d["hallucination_rate"] == pytest.approx(1 / 3)
    d = long_form_hallucination(RESPONSES).to_dict(per_response=True)
    assert len(d["per_response"]) == 5 and d["per_response"][0]["contradicted"] == 1


def test_judged_claim_records() -> None:
    claim = JudgedClaim("Paris is in France.", Support("supported"))
    assert claim.support is Support.SUPPORTED and claim.error is None
    with pytest.raises(ValueError):
        Support("inconclusive")  # the judge's word is parsed into UNSUPPORTED, not a member


def test_short_form_by_hand() -> None:
    answers = (
        [ShortFormAnswer("Paris", abstained=False, correct=True)] * 3
        + [ShortFormAnswer("Lyon", abstained=False, correct=False)] * 2
        + [ShortFormAnswer("I don't know", abstained=True)] * 5
    )
    r = short_form_hallucination(answers)
    assert (r.n, r.correct, r.wrong, r.abstained) == (10, 3, 2, 5)
    assert r.hallucination_rate == pytest.approx(0.2)  # wrong / all (the paper's)
    assert r.hallucination_rate_attempted == pytest.approx(0.4)  # wrong / attempted
    assert r.abstention_rate == pytest.approx(0.5)
    assert r.accuracy == pytest.approx(0.3) and r.accuracy_attempted == pytest.approx(0.6)
    assert r.to_dict()["wrong"] == 2


def test_short_form_paper_shaped_numbers() -> None:
    # Qwen3-8B + Binary RAR on PopQA (Table 2, §5.2): 55.2 % abstained, 26.8 % incorrect.
    answers = ([ShortFormAnswer("x", True)] * 552 + [ShortFormAnswer("y", False, False)] * 268
               + [ShortFormAnswer("z", False, True)] * 180)
    r = short_form_hallucination(answers)
    assert (r.hallucination_rate, r.abstention_rate, r.accuracy) == (0.268, 0.552, 0.18)
    assert r.hallucination_rate_attempted == pytest.approx(268 / 448)


def test_short_form_edges() -> None:
    r = short_form_hallucination([ShortFormAnswer("I don't know", True)])
    assert r.hallucination_rate == 0.0 and r.hallucination_rate_attempted is None and r.accuracy_attempted is None
    assert short_form_hallucination([]).hallucination_rate is None
    with pytest.raises(ValueError, match="abstention cannot be correct"):
        ShortFormAnswer("I don't know", abstained=True, correct=True)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [("I don't know", True), ("I DON’T KNOW.", True), ("Hmm, I don't know, sorry", True),
     ("I do not know", False), ("Paris", False), ("I don't knowledge", False)],
)
def test_is_abstention(answer: str, expected: bool) -> None:
    assert is_abstention(answer) is expected


def test_matches_gold() -> None:
    assert matches_gold("It is the Eiffel Tower.", ["eiffel tower", "Tour Eiffel"])
    assert matches_gold("Born in 1879", ["1879"])
    assert not matches_gold("Born in 18790", ["1879"])
    assert not matches_gold("anything", ["", "the"])
