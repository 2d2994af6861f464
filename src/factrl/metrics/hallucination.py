"""Hallucination rates of Binary RAR (001, §4.1 and App. B), long-form and short-form.

**Long-form** (FactScore-style; §4.1 "Hallucination Evaluation", App. B.1 BIOGRAPHY):
each response is split into atomic claims by an LM, each claim is judged against
evidence retrieved for it as *supported*, *contradicted* or *unsupported* (the judge
prompt's "inconclusive"); :mod:`factrl.metrics.atomic_claims` does both steps.

- per response: precision = supported / judged claims; hallucination rate =
  1 − precision = (contradicted + unsupported) / judged claims, the paper's "proportion
  of incorrect claims among all extracted atomic claims". Unsupported counts as
  incorrect, as in FactScore; ``contradiction_rate`` = contradicted / judged claims is
  the contradiction-only view (the paper's "conflict-only" variant, §6.2) beside it.
- over responses: **macro** — the mean of the per-response rates, as FactScore averages
  per-response precision. The paper's own numbers say so: Qwen3-8B on BIOGRAPHY makes
  30.0 claims per response of which 8.8 are correct (Figure 3), so the pooled (micro)
  rate would be 1 − 8.8/30.0 = 70.7, but Table 2 reports 76.2 (Binary RAR: 1 − 8.6/13.6
  = 36.8 pooled against 45.8 reported). The micro rate (pooled over every claim) is
  reported too, as ``hallucination_rate_micro``.
- a response with no claims has no precision: it is left out of the means and counted
  (``responses_without_claims``); FactScore likewise scores only responses that make
  claims. A response whose extraction failed (the LM's output did not parse) is left out
  and counted (``extraction_failures``); a claim whose judgement did not parse is left out
  of its response's rates and counted (``unjudged_claims``), or counted as unsupported
  with ``unjudged="unsupported"``. Nothing is dropped without a count.
- informativeness (Figure 3): ``mean_claims`` and ``mean_supported`` per response, over
  the responses whose extraction succeeded.

**Short-form** (§4.1, App. B.2; PopQA, GPQA): each question ends *correct*, *wrong* or
*abstained* (the model said "I don't know").

- ``hallucination_rate`` = wrong / all questions: the paper's "proportion of incorrect
  test cases", with abstentions a third category beside correct and incorrect
  (Figure 2). The paper's numbers fit this reading: after Binary RAR, PopQA has 55.2 %
  abstentions and a 26.8 % hallucination rate, i.e. 18.0 % correct, close to the 20.6 %
  accuracy of the same model forced to answer (Table 4); reading 26.8 % as wrong among the
  44.8 % attempted would make 32.8 % correct.
- ``hallucination_rate_attempted`` = wrong / (correct + wrong): wrong among the
  non-abstained answers, the conditional rate; ``abstention_rate`` = abstained / all
  apart; ``accuracy`` = correct / all; ``accuracy_attempted`` = correct / attempted.
- rates are None when their denominator is 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Literal

# Reading a short-form answer is the text protocol's (shared with the environment).
from factrl.protocol.rar import ABSTENTION_PHRASES, is_abstention, matches_gold  # noqa: F401
from factrl.protocol.rar import normalise_answer as _normalise  # noqa: F401

__all__ = [
    "Support",
    "JudgedClaim",
    "ResponseClaims",
    "ResponseHallucination",
    "LongFormHallucination",
    "long_form_hallucination",
    "ShortFormAnswer",
    "ShortFormHallucination",
    "short_form_hallucination",
    "is_abstention",
    "matches_gold",
    "ABSTENTION_PHRASES",
]


class Support(str, Enum):
    """A claim's standing against the evidence retrieved for it."""

    SUPPORTED = "supported"
    CONTRADICTED = "contradicted"
    UNSUPPORTED = "unsupported"  # the judge prompt's "inconclusive"


@dataclass(frozen=True)
class JudgedClaim:
    """One atomic claim and its judgement; ``support`` is None when the judge's output
    could not be parsed (``error`` says why, ``raw`` is what it wrote)."""

    claim: str
    support: Support | None
    error: str | None = None
    raw: str = ""


@dataclass(frozen=True)
class ResponseClaims:
    """The judged atomic claims of one response; ``extraction_error`` is set (and
    ``claims`` empty) when the claims could not be extracted."""

    claims: tuple[JudgedClaim, ...] = ()
    extraction_error: str | None = None

    @classmethod
    def of(cls, *supports: Support | str | None) -> "ResponseClaims":
        """A response from bare judgements (``"supported"``, ``Support.CONTRADICTED``,
        None for an unparsed one): for tests and hand-made examples."""
        return cls(tuple(JudgedClaim(claim=f"claim {i}", support=None if s is None else Support(s))
                         for i, s in enumerate(supports)))


@dataclass(frozen=True)
class ResponseHallucination:
    """Counts and rates of one response (rates None when no claim was judged)."""

    n_claims: int
    supported: int
    contradicted: int
    unsupported: int
    unjudged: int
    precision: float | None
    hallucination_rate: float | None
    contradiction_rate: float | None
    extraction_error: str | None = None


@dataclass(frozen=True)
class LongFormHallucination:
    """Long-form scores over responses (see the module doc for every convention)."""

    n_responses: int
    scored_responses: int  # responses with at least one judged claim: the macro means' n
    hallucination_rate: float | None  # macro: mean over scored responses
    precision: float | None  # macro, = 1 − hallucination_rate
    contradiction_rate: float | None  # macro
    hallucination_rate_micro: float | None  # pooled over every judged claim
    responses_without_claims: int
    extraction_failures: int
    unjudged_claims: int
    mean_claims: float | None
    mean_supported: float | None
    unjudged: str = "exclude"
    mean: str = "macro"
    per_response: tuple[ResponseHallucination, ...] = field(default=(), repr=False)

    def to_dict(self, *, per_response: bool = False) -> dict[str, Any]:
        out = asdict(self)
        if per_response:
            out["per_response"] = [asdict(r) for r in self.per_response]
        else:
            del out["per_response"]
        return out


def _score_response(r: ResponseClaims, unjudged: str) -> ResponseHallucination:
    counts = {s: sum(c.support is s for c in r.claims) for s in Support}
    missing = sum(c.support is None for c in r.claims)
    if unjudged == "unsupported":
        counts[Support.UNSUPPORTED] += missing
    judged = sum(counts.values())
    sup, con = counts[Support.SUPPORTED], counts[Support.CONTRADICTED]
    return ResponseHallucination(
        n_claims=len(r.claims),
        supported=sup,
        contradicted=con,
        unsupported=counts[Support.UNSUPPORTED],
        unjudged=missing,
        precision=sup / judged if judged else None,
        hallucination_rate=1 - sup / judged if judged else None,
        contradiction_rate=con / judged if judged else None,
        extraction_error=r.extraction_error,
    )


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def long_form_hallucination(
    responses: Iterable[ResponseClaims], *, unjudged: Literal["exclude", "unsupported"] = "exclude"
) -> LongFormHallucination:
    """Binary RAR's long-form hallucination rate (macro over responses; see the module
    doc). ``unjudged``: leave claims whose judgement did not parse out of the rates
    (default) or count them as unsupported."""
    if unjudged not in ("exclude", "unsupported"):
        raise ValueError(f"unjudged must be 'exclude' or 'unsupported', got {unjudged!r}")
    per = [_score_response(r, unjudged) for r in responses]
    scored = [p for p in per if p.hallucination_rate is not None]
    extracted = [p for p in per if p.extraction_error is None]
    judged = sum(p.supported + p.contradicted + p.unsupported for p in per)
    supported = sum(p.supported for p in per)
    macro = _mean([p.hallucination_rate for p in scored])  # type: ignore[misc]
    return LongFormHallucination(
        n_responses=len(per),
        scored_responses=len(scored),
        hallucination_rate=macro,
        precision=_mean([p.precision for p in scored]),  # type: ignore[misc]
        contradiction_rate=_mean([p.contradiction_rate for p in scored]),  # type: ignore[misc]
        hallucination_rate_micro=1 - supported / judged if judged else None,
        responses_without_claims=sum(p.n_claims == 0 for p in extracted),
        extraction_failures=len(per) - len(extracted),
        unjudged_claims=sum(p.unjudged for p in per),
        mean_claims=_mean([p.n_claims for p in extracted]),
        mean_supported=_mean([p.supported for p in extracted]),
        unjudged=unjudged,
        per_response=tuple(per),
    )


# -- short-form ------------------------------------------------------------------------


@dataclass(frozen=True)
class ShortFormAnswer:
    """One short-form question's outcome: the model's answer, whether it abstained, and
    whether the answer was correct (ignored, and must not be True, when it abstained)."""

    answer: str
    abstained: bool
    correct: bool = False

    def __post_init__(self) -> None:
        if self.abstained and self.correct:
            raise ValueError(f"an abstention cannot be correct: {self.answer!r}")


@dataclass(frozen=True)
class ShortFormHallucination:
    n: int
    correct: int
    wrong: int
    abstained: int
    hallucination_rate: float | None  # wrong / n (the paper's)
    hallucination_rate_attempted: float | None  # wrong / (n − abstained)
    abstention_rate: float | None
    accuracy: float | None  # correct / n
    accuracy_attempted: float | None  # correct / (n − abstained)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def short_form_hallucination(answers: Iterable[ShortFormAnswer]) -> ShortFormHallucination:
    """Binary RAR's short-form scores (see the module doc)."""
    items = list(answers)
    n = len(items)
    abstained = sum(a.abstained for a in items)
    correct = sum(a.correct for a in items if not a.abstained)
    wrong = n - abstained - correct
    attempted = n - abstained

    def rate(k: int, d: int) -> float | None:
        return k / d if d else None

    return ShortFormHallucination(
        n=n,
        correct=correct,
        wrong=wrong,
        abstained=abstained,
        hallucination_rate=rate(wrong, n),
        hallucination_rate_attempted=rate(wrong, attempted),
        abstention_rate=rate(abstained, n),
        accuracy=rate(correct, n),
        accuracy_attempted=rate(correct, attempted),
    )



