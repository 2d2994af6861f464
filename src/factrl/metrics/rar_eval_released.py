"""Binary RAR's long-form hallucination rate as the authors' released evaluation computes
it (``chentong0/rl-binary-rar``, ``fact_eval``: ``run_eval.py`` with the ``factscore``
scorer) — the ``released`` convention of the ``rar`` run metrics
(``--metric-param convention=released``). The ``paper`` convention
(:mod:`factrl.metrics.rar_eval`) stays the default.

What the released evaluation does, and this module with it:

- the response is :func:`final_answer` of the model's output (``<answer>…</answer>``, else
  what follows ``</think>``, stripped);
- claims: :data:`EXTRACT_RELEASED` (``prompt_customized_extractor_v1.py``; the scorer
  imports a ``prompt_customized_extractor`` module the repository does not hold, and v1
  is the text of the paper's Figure 11), greedy, 4,096 tokens; the first code fence
  *anywhere* in the output is read (an optional ``json`` tag after it), then
  ``json.loads``; anything that is not a list of strings is no claims;
- evidence per claim: the prompt's documents as ``f"{title} {text}".strip()`` cut into
  fixed windows of 100 whitespace words, Okapi BM25 (rank_bm25's) over case-sensitive
  whitespace tokens queried with the claim split on whitespace, the top 10 in
  ``np.argsort(-scores)`` order, shown as ``Doc [i] chunk`` lines (``i`` from 0);
- judging: :data:`JUDGE_RELEASED` (``prompt_customized_verifier.py``), at most 10 tokens,
  thinking disabled, the API's default temperature (1.0); a claim is supported only when
  the reply is exactly ``supported``; everything else, an unjudged claim included, is
  not;
- one verdict per distinct claim text (the documents of the last response that made the
  claim);
- per response: supported / claims, duplicates counted; a response with no claims has no
  score (``abstain_ratio``); the rate is 1 − the mean over responses with claims.

Short-form (no released code scores it): a question abstains only when its whole answer is
"I don't know" (case, punctuation, curly quotes aside), :func:`is_sole_abstention`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from factrl.lm.base import LM, GenerationConfig
from factrl.protocol.rar import final_answer, is_sole_abstention  # noqa: F401 - read as run_eval does
from factrl.types import Message, Trajectory

__all__ = ["EXTRACT_RELEASED", "JUDGE_RELEASED", "final_answer", "is_sole_abstention", "parse_claims_released",
           "released_passages", "long_form_released", "EXTRACT_CONFIG", "JUDGE_CONFIG"]

# chentong0/rl-binary-rar, fact_eval/prompts/prompt_customized_extractor_v1.py, word for word
# (literal braces doubled for str.format).
EXTRACT_RELEASED = """Extract as many fine-grained, atomic, and verifiable factual claims as possible from the response. Each claim should be a single piece of information that could be looked up in a database, official documentation, reputable forum, or reliable source such as Wikipedia or scientific literature.

**Guidelines for atomic claims:**
- Split a sentence that joins different facts using “and,” “or,” or by listing into multiple claims.
- If a claim could be split into multiple smaller, independent statements, do so.
- Replace pronouns (e.g., "he", "she", "it", "they") with the full entity name explicitly stated in the response. If the entity name is not explicitly mentioned, leave the pronoun unchanged.
- Extract claims EXACTLY as stated, even if the information appears incorrect or false.

**Include as claims:**
- Statements about the existence, property, function, or relationship of entities, organizations, concepts, or technologies.
- Claims about names, definitions, features, purposes, or histories.
- Statements about what something does, who runs it, what it is used for, or what it affects.
- For hedged language (“may be,” “might be,” “could be”), extract the factual association, typical usage, or commonly reported function as long as the claim is traceable to community consensus, documentation, or reputable user reports.
- If a quotation is present, extract it verbatim with the source if given.
- Claims must stand alone, using names or clear descriptions, not pronouns.

**Do not include as claims:**
- Personal opinions, suggestions, advice, instructions, or experiences.
- Pure speculation or possibilities that are not reported in any documentation or user discussions.
- Claims from code blocks or pure math derivations.

Extract claims only from the response section, not from the prompt or question. If the response does not contain any verifiable factual claims, output an empty list.

Output a JSON list of strings. Each string should be a single atomic factual claim from the response, clearly stated and verifiable.

>>> Begin of prompt <<<
{prompt}
<<< End of prompt <<<

>>> Begin of response <<<
{response}
<<< End of response <<<

Facts (as a JSON list of strings):"""

# chentong0/rl-binary-rar, fact_eval/prompts/prompt_customized_verifier.py, word for word.
JUDGE_RELEASED = """You need to judge whether a claim is supported or contradicted by Google search results, or whether there is no enough information to make the judgement. When doing the task, take into consideration whether the link of the search result is of a trustworthy source.

Below are the definitions of the three categories:

Supported: A claim is supported by the search results if everything in the claim is supported and nothing is contradicted by the search results. There can be some search results that are not fully related to the claim.
Contradicted: A claim is contradicted by the search results if something in the claim is contradicted by some search results. There should be no search result that supports the same part.
Inconclusive: A claim is inconclusive based on the search results if:
- a part of a claim cannot be verified by the search results,
- a part of a claim is supported and contradicted by different pieces of evidence,
- the entity/person mentioned in the claim has no clear referent (e.g., "the approach", "Emily", "a book").

>>> Begin of search results <<<
{passages}
<<< End of search results <<<

Claim: {claim}
Task: Given the search results above, is the claim supported, contradicted, or inconclusive? Your answer should be either "supported", "contradicted", or "inconclusive" without explanation and comments.

Your decision:"""

EXTRACT_CONFIG = GenerationConfig(max_new_tokens=4096, temperature=0.0)
JUDGE_CONFIG = GenerationConfig(max_new_tokens=10, temperature=1.0)


def fenced(text: str) -> str | None:
    """The released extractor's ``re.search(r"```(?:json)?\\s*([\\s\\S]*?)\\s*```", text,
    re.I)`` group in linear time (the regex is quadratic on hostile input): after the
    first fence, an optional ``json`` tag (any case) and blanks, up to the next fence,
    trailing blanks dropped; None when there is no second fence."""
    at = text.find("```")
    if at < 0:
        return None
    start = at + 3
    if text[start : start + 4].lower() == "json":
        start += 4
    while start < len(text) and text[start].isspace():
        start += 1
    # no fence after the first one's end: none after any later one either
    end = text.find("```", start)
    return None if end < 0 else text[start:end].rstrip()


def parse_claims_released(text: str) -> tuple[list[str], str | None]:
    """The claims the released extractor reads from ``text``, and why it read none when
    it did not parse (a list that is not of strings, or no JSON)."""
    if (block := fenced(text)) is not None:
        text = block.strip()
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return [], f"not JSON: {exc}"[:120]
    if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
        return [], f"JSON {type(value).__name__}, not a list of strings"
    return list(value), None


def _chunks(documents: Sequence[Mapping[str, Any]], words: int) -> list[list[str]]:
    out = []
    for doc in documents:
        tokens = f"{doc.get('title', '') or ''} {doc.get('text', '') or ''}".strip().split()
        out.extend(tokens[i : i + words] for i in range(0, len(tokens), words))
    return out


def released_passages(documents: Sequence[Mapping[str, Any]], claim: str, *, k: int = 10,
                      chunk_words: int = 100) -> list[str]:
    """The top ``k`` chunks the released search gives ``claim`` (module doc)."""
    from factrl.retrieval.okapi import OkapiBM25, top_indices

    chunks = _chunks(documents, chunk_words)
    if not chunks:
        return []
    index = OkapiBM25(chunks)
    return [" ".join(chunks[i]) for i in top_indices(index.get_scores(claim.split()), k, order="negated")]


def judge_prompt(claim: str, passages: Sequence[str]) -> str:
    return JUDGE_RELEASED.format(claim=claim, passages="\n".join(f"Doc [{i}] {p}" for i, p in enumerate(passages)))


def _replies(lm: LM, prompts: Sequence[str], config: GenerationConfig, thinking: bool) -> list[str | None]:
    from factrl.lm.rows import complete_rows

    gens = complete_rows(lm, [[Message(role="user", content=p)] for p in prompts], config, thinking=thinking)
    return [None if isinstance(g, BaseException) else g.text for g in gens]


def long_form_released(
    trajectories: Sequence[Trajectory], lm: LM, documents: Callable[[Trajectory], Sequence[Mapping[str, Any]]], *,
    judge: LM | None = None, k: int = 10, chunk_words: int = 100, extract_config: GenerationConfig | None = None,
    judge_config: GenerationConfig | None = None, thinking: bool = False,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(summary, per_response)`` for finished long-form episodes: ``lm`` extracts (and,
    unless ``judge`` is given, judges); ``documents(trajectory)`` are the prompt's
    documents. ``thinking=False`` opens each reply after an empty reasoning block (the
    released calls disable Qwen3's thinking)."""
    trajs = list(trajectories)
    ok = [t for t in trajs if t.error is None]
    responses = {t.claim_id: str(t.meta.get("response", final_answer(t.model_text))) for t in ok}
    raw = _replies(lm, [EXTRACT_RELEASED.format(prompt=t.claim.text, response=responses[t.claim_id]) for t in ok],
                   extract_config or EXTRACT_CONFIG, thinking) if ok else []
    claims: dict[str, list[str]] = {}
    errors: dict[str, str | None] = {}
    for t, text in zip(ok, raw):
        claims[t.claim_id], errors[t.claim_id] = (([], "extraction call failed") if text is None
                                                   else parse_claims_released(text))
    owner: dict[str, Trajectory] = {}
    for t in ok:
        for c in claims[t.claim_id]:
            owner[c] = t  # the last response that made the claim gives its documents
    distinct = list(owner)
    replies = _replies(judge or lm, [judge_prompt(c, released_passages(documents(owner[c]), c, k=k,
                                                                       chunk_words=chunk_words)) for c in distinct],
                       judge_config or JUDGE_CONFIG, thinking) if distinct else []
    verdict = dict(zip(distinct, replies))
    supported = {c: r == "supported" for c, r in verdict.items()}
    per = []
    for t in trajs:
        cl = claims.get(t.claim_id, [])
        good = sum(supported.get(c, False) for c in cl)
        per.append({"id": t.claim_id, "claims": [{"claim": c, "reply": verdict.get(c), "supported": supported.get(c, False)}
                                                 for c in cl],
                    "extraction_error": f"episode failed: {t.error}" if t.error else errors.get(t.claim_id),
                    "factuality_score": good / len(cl) if cl else None, "num_correct_claims": good,
                    "num_claims": len(cl)})
    scored = [p["factuality_score"] for p in per if p["factuality_score"] is not None]
    score = sum(scored) / len(scored) if scored else None
    kinds = Counter("unjudged" if r is None else r if r in ("supported", "contradicted", "inconclusive") else "other"
                    for r in verdict.values())
    summary = {
        "convention": "released",
        "n_responses": len(per),
        "scored_responses": len(scored),
        "hallucination_rate": None if score is None else 1 - score,
        "factuality_score": score,
        "abstain_ratio": sum(p["factuality_score"] is None for p in per) / len(per) if per else None,
        "num_claims": sum(p["num_claims"] for p in per) / len(per) if per else None,
        "num_correct_claims": sum(p["num_correct_claims"] for p in per) / len(per) if per else None,
        "distinct_claims": len(distinct),
        "extraction_unparsed": sum(p["extraction_error"] is not None for p in per),
        "judge_replies": dict(sorted(kinds.items())),
    }
    return summary, per
