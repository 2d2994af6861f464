"""Atomic-claim extraction and per-claim judging with an LM, for the long-form
hallucination rate (:func:`factrl.metrics.hallucination.long_form_hallucination`).

Binary RAR (001, App. B.1, Figures 11 and 12) extracts claims with one LM call per
response and verifies each claim against evidence retrieved for it with one call per
claim. The prompts below are the paper's, with the output formats it asks for:

- extraction (:data:`EXTRACT_PROMPT`, Figure 11): a JSON list of strings. The output must
  be exactly that list, optionally inside a ```` ``` ```` / ```` ```json ```` fence and after a
  reasoning model's ``<think>…</think>``; anything else is a parse failure
  (:attr:`ExtractedClaims.error`), never an empty list.
- judging (:data:`JUDGE_PROMPT`, Figure 12): one word, ``supported``, ``contradicted`` or
  ``inconclusive`` (→ :attr:`Support.UNSUPPORTED`); case, surrounding quotes, stars and a
  final period are tolerated, anything else is a parse failure
  (:attr:`JudgedClaim.error`, ``support`` None).

Both use only the LM protocol's text-level ``complete`` (any backend: HF, an
OpenAI-compatible server, a scripted LM in tests), greedy by default, with room for a
reasoning model's ``<think>`` block (2,048 new tokens to extract, 512 to judge; an output
cut at the budget that does not parse says so in its error). Rows an LM failed
to answer (:class:`~factrl.lm.base.RowFailures`) become parse failures with the error,
so they are counted like any other.

Two stand-ins for models too small to follow those formats (not the paper's method; a
run records which it used):

- :func:`sentence_claims`: every sentence of a response is one claim (no LM);
- :func:`judge_claims_by_choice`: Figure 12's prompt with the three answer words scored
  as continuations (``LM.score_choices``); the most probable word is the judgement, so
  nothing fails to parse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from factrl.corpus.sentences import split_sentences
from factrl.protocol.text import FENCE_OPEN
from factrl.lm.base import LM, Generation, GenerationConfig, RowFailures
from factrl.metrics.hallucination import JudgedClaim, ResponseClaims, Support
from factrl.types import Message, Passage

__all__ = [
    "EXTRACT_PROMPT",
    "JUDGE_PROMPT",
    "JUDGE_WORDS",
    "ExtractedClaims",
    "extract_atomic_claims",
    "judge_claims",
    "judge_claims_by_choice",
    "judge_responses",
    "parse_claim_list",
    "parse_judgement",
    "sentence_claims",
]

EXTRACT_PROMPT = """Extract as many fine-grained, atomic, and verifiable factual claims as possible from the response. Each claim should be a single piece of information that could be looked up in a database, official documentation, reputable forum, or reliable source such as Wikipedia or scientific literature.

Guidelines for atomic claims:
- Split a sentence that joins different facts using "and," "or," or by listing into multiple claims.
- If a claim could be split into multiple smaller, independent statements, do so.
- Replace pronouns (e.g., "he", "she", "it", "they") with the full entity name explicitly stated in the response. If the entity name is not explicitly mentioned, leave the pronoun unchanged.
- Extract claims EXACTLY as stated, even if the information appears incorrect or false.

Include as claims:
- Statements about the existence, property, function, or relationship of entities, organizations, concepts, or technologies.
- Claims about names, definitions, features, purposes, or histories.
- Statements about what something does, who runs it, what it is used for, or what it affects.
- For hedged language ("may be," "might be," "could be"), extract the factual association, typical usage, or commonly reported function as long as the claim is traceable to community consensus, documentation, or reputable user reports.
- If a quotation is present, extract it verbatim with the source if given.
- Claims must stand alone, using names or clear descriptions, not pronouns.

Do not include as claims:
- Personal opinions, suggestions, advice, instructions, or experiences.
- Pure speculation or possibilities that are not reported in any documentation or user discussions.
- Claims from code blocks or pure math derivations.

Extract claims only from the response section, not from the prompt or question. If the response does not contain any verifiable factual claims, output an empty list.

Output a JSON list of strings. Each string should be a single atomic factual claim from the response, clearly stated and verifiable.

>>> Begin of prompt <<<
{prompt}
<<< End of prompt >>>

>>> Begin of response <<<
{response}
<<< End of response >>>

Facts (as a JSON list of strings):"""

JUDGE_PROMPT = """You need to judge whether a claim is supported or contradicted by Google search results, or whether there is no enough information to make the judgement. When doing the task, take into consideration whether the link of the search result is of a trustworthy source.

Below are the definitions of the three categories:

Supported: A claim is supported by the search results if everything in the claim is supported and nothing is contradicted by the search results. There can be some search results that are not fully related to the claim.

Contradicted: A claim is contradicted by the search results if something in the claim is contradicted by some search results. There should be no search result that supports the same part.

Inconclusive: A claim is inconclusive based on the search results if:
- a part of a claim cannot be verified by the search results,
- a part of a claim is supported and contradicted by different pieces of evidence,
- the entity/person mentioned in the claim has no clear referent (e.g., "the approach", "Emily", "a book").

>>> Begin of search results <<<
{passages}
<<< End of search results >>>

Claim: {claim}

Task: Given the search results above, is the claim supported, contradicted, or inconclusive? Your answer should be either "supported", "contradicted", or "inconclusive" without explanation and comments.

Your decision:"""

_THINK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_VERDICTS = {
    "supported": Support.SUPPORTED,
    "contradicted": Support.CONTRADICTED,
    "inconclusive": Support.UNSUPPORTED,
    "unsupported": Support.UNSUPPORTED,
}
_CLIP = 80
# The three answers Figure 12 asks for, in the order judge_claims_by_choice scores them.
JUDGE_WORDS = ("supported", "contradicted", "inconclusive")


@dataclass(frozen=True)
class ExtractedClaims:
    """The claims of one response, or ``error`` (and no claims) when the LM's output
    ``raw`` did not parse."""

    claims: tuple[str, ...]
    error: str | None = None
    raw: str = ""


def _clip(s: str) -> str:
    return s if len(s) <= _CLIP else s[: _CLIP - 1] + "…"


def _strip_wrappers(text: str) -> str:
    """``text`` without a leading ``<think>…</think>`` and an enclosing code fence."""
    text = _THINK.sub("", text, count=1).strip()
    # A fence that opens the text and closes it. (The pattern this replaces, with a lazy
    # body between two runs of spaces, backtracked quadratically on a long language name.)
    opening = FENCE_OPEN.match(text)
    if opening is None or not text.endswith("```") or opening.end() > len(text) - 3:
        return text
    return text[opening.end() : len(text) - 3].strip()


def parse_claim_list(text: str) -> tuple[tuple[str, ...] | None, str | None]:
    """``(claims, None)`` for a JSON list of strings (blank ones dropped), else
    ``(None, why)``."""
    body = _strip_wrappers(text)
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"not a JSON list ({exc.msg}): {_clip(body)!r}"
    except RecursionError:  # '[[[[…' deeper than json's recursion allows
        return None, f"not a JSON list (nested too deep): {_clip(body)!r}"
    if not isinstance(value, list):
        return None, f"JSON {type(value).__name__}, not a list: {_clip(body)!r}"
    bad = [x for x in value if not isinstance(x, str)]
    if bad:
        return None, f"list holds a non-string: {_clip(json.dumps(bad[0]))}"
    return tuple(s.strip() for s in value if s.strip()), None


def parse_judgement(text: str) -> tuple[Support | None, str | None]:
    """``(support, None)`` for one of the three words, else ``(None, why)``."""
    body = _strip_wrappers(text)
    word = body.strip().strip("*\"'`").strip().rstrip(".").strip("*\"'`").strip().lower()
    if word in _VERDICTS:
        return _VERDICTS[word], None
    return None, f"not one of supported/contradicted/inconclusive: {_clip(body)!r}"


def _complete(lm: LM, prompts: Sequence[str], config: GenerationConfig) -> list[Generation | BaseException]:
    """One user message per prompt; a row the LM failed is its exception."""
    if not prompts:
        return []
    conversations = [[Message(role="user", content=p)] for p in prompts]
    try:
        return list(lm.complete(conversations, config))
    except RowFailures as exc:
        return [g if g is not None else (e or RuntimeError("no generation"))
                for g, e in zip(exc.generations, exc.errors)]


def _failed(out: Generation | BaseException) -> str | None:
    return f"LM failed: {type(out).__name__}: {out}" if isinstance(out, BaseException) else None


def _why(gen: Generation, why: str | None) -> str | None:
    """A parse failure's reason, naming a cut-off output (raise ``max_new_tokens``)."""
    if why is not None and gen.finish_reason == "length":
        return f"output cut at max_new_tokens; {why}"
    return why


def extract_atomic_claims(
    lm: LM,
    responses: Sequence[str],
    prompts: Sequence[str] | None = None,
    *,
    config: GenerationConfig | None = None,
) -> list[ExtractedClaims]:
    """The atomic claims of each response (Figure 11's prompt, with the user prompt each
    response answered when given); one :class:`ExtractedClaims` per response, in order."""
    if isinstance(responses, str):
        raise TypeError("responses must be a list of strings, not one string")
    if prompts is not None and len(prompts) != len(responses):
        raise ValueError(f"{len(responses)} responses but {len(prompts)} prompts")
    config = config or GenerationConfig(max_new_tokens=2048, temperature=0.0)
    texts = [EXTRACT_PROMPT.format(prompt=prompts[i] if prompts is not None else "", response=r)
             for i, r in enumerate(responses)]
    out = []
    for gen in _complete(lm, texts, config):
        if (why := _failed(gen)) is not None:
            out.append(ExtractedClaims((), why))
            continue
        assert isinstance(gen, Generation)
        claims, why = parse_claim_list(gen.text)
        out.append(ExtractedClaims(claims or (), _why(gen, why), gen.text))
    return out


def _render(passages: Sequence[str | Passage]) -> str:
    parts = []
    for p in passages:
        if isinstance(p, Passage):
            parts.append(f"{p.title}\n{p.text}" if p.title else p.text)
        else:
            parts.append(str(p))
    return "\n\n".join(parts)


def _judge_prompts(claims: Sequence[str], evidence: Sequence[str | Passage] | Sequence[Sequence[str | Passage]]) -> list[str]:
    """Figure 12's prompt for each claim; ``evidence`` is one list of passages shown for
    every claim, or one list per claim."""
    if isinstance(claims, str):
        raise TypeError("claims must be a list of strings, not one string")
    lists = [not isinstance(e, (str, Passage)) for e in evidence]
    if any(lists) and not all(lists):
        raise TypeError("evidence must be passages (shown for every claim) or one list of "
                        "passages per claim, not both")
    per_claim = bool(lists) and all(lists)
    if per_claim and len(evidence) != len(claims):
        raise ValueError(f"{len(claims)} claims but evidence for {len(evidence)}")
    shown = [evidence[i] if per_claim else evidence for i in range(len(claims))]
    return [JUDGE_PROMPT.format(passages=_render(ev), claim=c)  # type: ignore[arg-type]
            for c, ev in zip(claims, shown)]


def judge_claims(
    lm: LM,
    claims: Sequence[str],
    evidence: Sequence[str | Passage] | Sequence[Sequence[str | Passage]],
    *,
    config: GenerationConfig | None = None,
) -> list[JudgedClaim]:
    """Judge each claim against evidence (Figure 12's prompt): ``evidence`` is one list of
    passages shown for every claim, or one list per claim (the paper retrieves per claim).
    One :class:`JudgedClaim` per claim, in order."""
    texts = _judge_prompts(claims, evidence)
    # Room for a reasoning model's <think> block before the one word.
    config = config or GenerationConfig(max_new_tokens=512, temperature=0.0)
    out = []
    for claim, gen in zip(claims, _complete(lm, texts, config)):
        if (why := _failed(gen)) is not None:
            out.append(JudgedClaim(claim, None, why))
            continue
        assert isinstance(gen, Generation)
        support, why = parse_judgement(gen.text)
        out.append(JudgedClaim(claim, support, _why(gen, why), gen.text))
    return out


def judge_claims_by_choice(
    lm: LM,
    claims: Sequence[str],
    evidence: Sequence[str | Passage] | Sequence[Sequence[str | Passage]],
) -> list[JudgedClaim]:
    """:func:`judge_claims` by scoring instead of generating: the words of
    :data:`JUDGE_WORDS` are scored as the start of the reply to Figure 12's prompt and
    the most probable one is the judgement (``raw`` keeps the three log-probabilities).
    A claim whose scoring raised is a failure naming the error."""
    texts = _judge_prompts(claims, evidence)
    out = []
    for claim, text in zip(claims, texts):
        try:
            scores = lm.score_choices([Message(role="user", content=text)], list(JUDGE_WORDS))
        except Exception as exc:  # noqa: BLE001 - a backend failure is this claim's, counted
            out.append(JudgedClaim(claim, None, f"LM failed: {type(exc).__name__}: {exc}"))
            continue
        best = max(range(len(JUDGE_WORDS)), key=lambda i: scores[i])
        raw = ", ".join(f"logprob({w}) = {v:.3f}" for w, v in zip(JUDGE_WORDS, scores))
        out.append(JudgedClaim(claim, _VERDICTS[JUDGE_WORDS[best]], None, raw))
    return out


def sentence_claims(responses: Sequence[str]) -> list[ExtractedClaims]:
    """The LM-free stand-in for :func:`extract_atomic_claims`: each sentence of a
    response (:func:`~factrl.corpus.sentences.split_sentences`) is one claim; an empty
    response has none."""
    if isinstance(responses, str):
        raise TypeError("responses must be a list of strings, not one string")
    return [ExtractedClaims(tuple(split_sentences(r)), None, r) for r in responses]


def judge_responses(
    lm: LM,
    responses: Sequence[str],
    retrieve: Callable[[str], Sequence[str | Passage]],
    prompts: Sequence[str] | None = None,
    *,
    judge: LM | None = None,
) -> list[ResponseClaims]:
    """Extract each response's claims, retrieve evidence per claim with ``retrieve``
    (e.g. the top 10 passages of a retriever), judge them (with ``judge``, default
    ``lm``): the input of :func:`~factrl.metrics.hallucination.long_form_hallucination`."""
    extracted = extract_atomic_claims(lm, responses, prompts)
    flat = [c for e in extracted for c in e.claims]
    judged = iter(judge_claims(judge or lm, flat, [list(retrieve(c)) for c in flat]) if flat else [])
    return [ResponseClaims(tuple(next(judged) for _ in e.claims), e.error) for e in extracted]
