"""Binary RAR's verifier (001, §3.3, App. D, Figures 9 and 10): one LM pass over
(retrieved evidence, prompt, response) that answers JSON ``{"REASONING": ..., "SCORE": ...}``.

- binary (:data:`BINARY_PROMPT`, Figure 9): SCORE 1 = no contradiction (a response with
  information the evidence does not have, but does not contradict, is fine), 0 = a clear
  contradiction;
- rating (:data:`RATING_PROMPT`, Figure 10): SCORE 0–10, the verifier's confidence that
  the response has no factual error (the paper's "Rating RAR" comparison, §6.2).

The parser (:func:`parse_verifier_output`) reads what models really write: a leading
``<think>…</think>``, a code fence, text before or after the object, single quotes,
keys in any case, the score as a number or a string (``"1"``, ``1.0``). Anything it
cannot read to a score in range is a parse failure with a reason, never a 0: the
reward counts it (:mod:`factrl.rewards.rar`).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from factrl.protocol.text import code_fences, strip_think
from factrl.lm.base import LM, Generation, GenerationConfig, RowFailures
from factrl.types import Message, Passage

__all__ = [
    "BINARY_PROMPT",
    "RATING_PROMPT",
    "VerifierOutput",
    "parse_verifier_output",
    "render_evidence",
    "verifier_prompt",
    "verify",
    "strip_think",
]

_INSTRUCTIONS = """You are a professional fact-checker tasked with evaluating a language model's response for accuracy. Your job is to systematically compare the response against the provided web search results to identify any factual errors or contradictions. A response deserves a full score if every claim it makes is factually correct, even if it doesn't include every available detail. Omitting information is not a factual error. If a response contains anything that contradicts the world knowledge shown in the search results, it should be considered an error and get a low score.

EVALUATION PROCESS:
1. Read the search results thoroughly to understand the factual baseline
2. Examine each factual claim in the language model's response
3. Cross-reference each claim against the search results
4. Classify each discrepancy according to the guidelines below

CONSIDER CORRECT (No Factual Error):
- Paraphrasing: Same facts expressed in different words
- Reasonable inferences: Logical conclusions drawn from search results
- Partial information: Incomplete but accurate subsets of available information
- Contextual additions: Background information that doesn't contradict search results
- Minor formatting differences: Different ways of presenting same data

CONSIDER INCORRECT (Factual Error):
- Direct contradictions: Response states opposite of what search results show
- Numerical errors: Wrong dates, statistics, quantities, percentages
- Categorical errors: Wrong classifications, locations, names, titles
- Causal errors: Incorrect cause-and-effect relationships
- Timeline errors: Events placed in wrong chronological order
- Attribution errors: Wrong sources, authors, or speakers cited
"""

_INPUTS = """
>>> Begin of search results <<<
{passages}
<<< End of search results >>>

>>> Begin of the prompt <<<
{prompt}
<<< End of the prompt >>>

>>> Begin of the response <<<
{response}
<<< End of the response >>>
"""

# Figure 9 (binary). Literal braces are doubled for str.format.
BINARY_PROMPT = _INSTRUCTIONS + """
SCORING RULES:
Your evaluation will result in a binary score: 0 or 1.
- SCORE 1 (No Contradiction): Assign this score if:
  1. The response is fully supported by the document.
  2. The response contains information that is NOT in the document, but DOES NOT contradict it.
- SCORE 0 (Contradiction): Assign this score ONLY if you find a clear, factual contradiction between the response and the supporting document. A contradiction occurs when the response states the opposite of what the document says (e.g., wrong dates, names, events, or outcomes).

OUTPUT FORMAT:
You must respond ONLY in a valid JSON format with exactly these two fields:
- "REASONING": A brief explanation for your score.
  - For SCORE 0, specify the contradiction (e.g., "The response states the event was in 2022, but the document says it was in 2023.").
  - For SCORE 1, simply state "No contradiction found."
- "SCORE": An integer, either 0 or 1.
""" + _INPUTS + """
Respond in JSON format. {{"REASONING": "[...]", "SCORE": "<your-score>"}}"""

# Figure 10 (rating, 0-10).
RATING_PROMPT = _INSTRUCTIONS + """
CONFIDENCE SCORING GUIDE:
- 0-2: Very confident there is a factual error (multiple clear contradictions)
- 3-4: Moderately confident there is a factual error (one clear contradiction)
- 5: Uncertain (ambiguous evidence or unclear from search results)
- 6-7: Moderately confident there is no factual error (mostly accurate with minor concerns)
- 8-10: Very confident there is no factual error (all stated facts are accurate, regardless of completeness)

OUTPUT FORMAT REQUIREMENTS:
Respond **ONLY** in valid JSON format with exactly these two fields:
- "REASONING": A concise explanation of your assessment (1-2 sentences max, e.g., "the response states ... but the search results show ... so there is a factual error" or "no factual error found")
- "SCORE": An integer from 0-10 representing your confidence level
""" + _INPUTS + """
Respond in JSON format. {{ "REASONING": "[...]", "SCORE": "<your-score>" }}"""

# A last resort for objects that are not JSON nor Python (unquoted keys, trailing junk):
# the SCORE key, a separator, then a number, quoted or not. The spaces around an opening
# quote are two runs only when there is a quote between them (``\s*["']?\s*`` let them
# split one long run every way: quadratic).
_SCORE_FIELD = re.compile(r"""["']?\bSCORE\b["']?\s*[:=]\s*(?:["']\s*)?(-?\d+(?:\.\d+)?)""", re.IGNORECASE)
_REASON_FIELD = re.compile(r"""["']?\bREASONING\b["']?\s*[:=]\s*["']((?:[^"'\\]|\\.)*)["']""", re.IGNORECASE)
_CLIP = 80


def _clip(s: str) -> str:
    s = " ".join(s.split())
    return s if len(s) <= _CLIP else s[: _CLIP - 1] + "…"


@dataclass(frozen=True)
class VerifierOutput:
    """One verification: ``score`` (0/1 binary, 0–10 rating) or None when the output did
    not parse (``error`` says why); ``raw`` is what the verifier wrote."""

    score: int | None
    reasoning: str = ""
    error: str | None = None
    raw: str = ""
    margin: float | None = None  # choice mode: logprob(SCORE 1 answer) - logprob(SCORE 0 answer)

    @property
    def ok(self) -> bool:
        return self.score is not None


# Inside an object, the run up to its next brace: plain text and whole quoted strings
# (escapes skipped). Each alternative starts with a different character, so a match never
# backtracks; what stops it is a brace, the end, or a string that never closes.
_SKIP_TO_BRACE = {
    True: re.compile(r"""(?:[^{}"']+|"[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*')*""", re.DOTALL),
    False: re.compile(r"[^{}]*"),
}
# No verifier's answer nests deeper; past it a run of '{' is not worth a step per brace.
_MAX_DEPTH = 64
# Objects read from one output at most: a real answer has one (two with an echoed template).
MAX_OBJECTS = 32
# The longest object read as a Python literal (JSON is read at any length).
MAX_LITERAL_CHARS = 8_000


def _objects(text: str, quotes: bool = True, limit: int | None = None) -> list[str]:
    """Candidate ``{...}`` substrings, outermost first, balanced by brace depth; inside an
    object, braces within quoted strings (either quote) do not count (``quotes=False``:
    quotes are ordinary characters). At most ``limit``; an object left open (or nested
    deeper than ``_MAX_DEPTH``) ends the list."""
    skip = _SKIP_TO_BRACE[quotes]
    out: list[str] = []
    unclosed = False
    pos = 0
    while (limit is None or len(out) < limit) and (start := text.find("{", pos)) != -1:
        depth, i = 1, start + 1
        while 0 < depth <= _MAX_DEPTH:
            i = skip.match(text, i).end()  # type: ignore[union-attr]  # it matches the empty string
            ch = text[i : i + 1]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            else:  # the end of the text, or an unterminated string
                break
            i += 1
        if depth:
            unclosed = True
            break
        out.append(text[start:i])
        pos = i
    if quotes and unclosed and not out:  # an unterminated string swallowed the rest: retry ignoring quotes
        return _objects(text, quotes=False, limit=limit)
    return out


def _load(obj: str) -> Any:
    try:
        return json.loads(obj)
    except (json.JSONDecodeError, RecursionError):
        pass
    if len(obj) > MAX_LITERAL_CHARS:  # compiling it costs ~3 µs a character; no answer is this long
        return None
    try:  # single quotes, True/False, trailing commas: a Python literal
        return ast.literal_eval(obj)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _score_value(value: Any, top: int) -> tuple[int | None, str | None]:
    if isinstance(value, bool) or value is None:
        return None, f"SCORE is {value!r}, not a number"
    if isinstance(value, str):
        s = value.strip().strip("<>").strip()
        try:
            value = float(s)
        except ValueError:
            return None, f"SCORE {_clip(value)!r} is not a number"
    if not isinstance(value, (int, float)) or not math.isfinite(value):
        return None, f"SCORE {value!r} is not a number"
    if value != int(value):
        return None, f"SCORE {value!r} is not an integer"
    score = int(value)
    if not 0 <= score <= top:
        return None, f"SCORE {score} is outside 0..{top}"
    return score, None


def parse_verifier_output(text: str, *, scale: int = 1) -> VerifierOutput:
    """Read a verifier's answer; ``scale`` is the top score (1 binary, 10 rating).

    The first JSON (or Python-literal) object with a ``SCORE`` key (any case) wins; failing
    that, a ``SCORE: n`` field anywhere after the reasoning trace. A score out of
    ``0..scale``, a non-integer, several objects that disagree or no score at all is a
    parse failure."""
    if not isinstance(text, str):
        raise TypeError(f"verifier output must be text, not {type(text).__name__}")
    raw = text
    body = strip_think(text)
    candidates: list[str] = []
    for fence in code_fences(body):
        if "{" in fence:
            candidates += _objects(fence, limit=MAX_OBJECTS + 1 - len(candidates))
        if len(candidates) > MAX_OBJECTS:
            break
    candidates += _objects(body, limit=max(0, MAX_OBJECTS + 1 - len(candidates)))
    if len(candidates) > MAX_OBJECTS:  # a loop, not an answer; and each object costs a parse
        return VerifierOutput(None, "", f"more than {MAX_OBJECTS} JSON objects: {_clip(body)!r}", raw)
    found: list[tuple[int | None, str, str | None]] = []
    for obj in candidates:
        value = _load(obj)
        if not isinstance(value, dict):
            continue
        keys = {str(k).strip().upper(): v for k, v in value.items()}
        if "SCORE" not in keys:
            continue
        score, why = _score_value(keys["SCORE"], scale)
        reasoning = keys.get("REASONING", "")
        found.append((score, reasoning if isinstance(reasoning, str) else str(reasoning), why))
    if not found:
        fields = _SCORE_FIELD.findall(body)
        if fields:
            scores = {_score_value(f, scale) for f in set(fields)}
            if len(scores) > 1:
                return VerifierOutput(None, "", f"SCORE fields disagree: {_clip(body)!r}", raw)
            score, why = scores.pop()
            reason = _REASON_FIELD.search(body)
            return VerifierOutput(score, reason.group(1) if reason else "", why, raw)
        if not body:
            return VerifierOutput(None, "", "empty output" + (" after the reasoning trace" if raw.strip() else ""), raw)
        return VerifierOutput(None, "", f"no JSON object with a SCORE: {_clip(body)!r}", raw)
    # An echoed template ({"SCORE": "<your-score>"}) beside the real answer is ignored;
    # two readable answers that disagree are not.
    valid = [f for f in found if f[0] is not None]
    distinct = {s for s, _, _ in valid}
    if len(distinct) > 1:
        return VerifierOutput(None, "", f"objects give different scores {sorted(distinct)}", raw)
    score, reasoning, why = (valid or found)[0]
    return VerifierOutput(score, reasoning, why, raw)


def render_evidence(passages: Sequence[str | Passage]) -> str:
    """Numbered passages, each with its title when it has one."""
    out = []
    for i, p in enumerate(passages, 1):
        if isinstance(p, Passage):
            out.append(f"[{i}] {p.title}: {p.text}" if p.title else f"[{i}] {p.text}")
        else:
            out.append(f"[{i}] {p}")
    return "\n\n".join(out) if out else "(no search results)"


def verifier_prompt(prompt: str, response: str, evidence: Sequence[str | Passage], *, rating: bool = False) -> str:
    template = RATING_PROMPT if rating else BINARY_PROMPT
    return template.format(passages=render_evidence(evidence), prompt=prompt, response=response)


def verify(
    lm: LM,
    prompts: Sequence[str],
    responses: Sequence[str],
    evidence: Sequence[Sequence[str | Passage]],
    *,
    rating: bool = False,
    config: GenerationConfig | None = None,
) -> list[VerifierOutput]:
    """One verifier pass per (prompt, response, evidence) row, batched in one
    ``complete`` call; rows the LM failed (:class:`RowFailures`) are parse failures
    naming the error. Greedy, with room for a reasoning model's ``<think>`` block."""
    if isinstance(prompts, str) or isinstance(responses, str):
        raise TypeError("prompts and responses must be lists of strings")
    if not len(prompts) == len(responses) == len(evidence):
        raise ValueError(f"{len(prompts)} prompts, {len(responses)} responses, {len(evidence)} evidence lists")
    if not prompts:
        return []
    config = config or GenerationConfig(max_new_tokens=1024, temperature=0.0)
    convs = [[Message(role="user", content=verifier_prompt(p, r, ev, rating=rating))]
             for p, r, ev in zip(prompts, responses, evidence)]
    try:
        gens: list[Generation | BaseException] = list(lm.complete(convs, config))
    except RowFailures as exc:
        gens = [g if g is not None else (e or RuntimeError("no generation")) for g, e in zip(exc.generations, exc.errors)]
    out = []
    scale = 10 if rating else 1
    for gen in gens:
        if isinstance(gen, BaseException):
            out.append(VerifierOutput(None, "", f"LM failed: {type(gen).__name__}: {gen}"))
            continue
        parsed = parse_verifier_output(gen.text, scale=scale)
        if parsed.error is not None and gen.finish_reason == "length":
            parsed = VerifierOutput(None, "", f"output cut at max_new_tokens; {parsed.error}", gen.text)
        out.append(parsed)
    return out


# Constrained binary verification: the two answers the prompt asks for, scored as
# continuations instead of sampled. Never fails to parse; for small verifiers that do not
# follow the JSON format (the embedded SmolLM2-135M almost never does, docs/benchmarks.md).
CHOICES = {
    1: '{"REASONING": "No contradiction found.", "SCORE": 1}',
    0: '{"REASONING": "The response contradicts the search results.", "SCORE": 0}',
}


def verify_by_choice(
    lm: LM,
    prompts: Sequence[str],
    responses: Sequence[str],
    evidence: Sequence[Sequence[str | Passage]],
    *,
    margin: float = 0.0,
) -> list[VerifierOutput]:
    """Binary verification by scoring: the two answers in :data:`CHOICES` are scored as
    continuations of Figure 9's prompt (``score_choices``, one scoring call per row) and
    SCORE is 1 when logprob(answer 1) − logprob(answer 0) ≥ ``margin`` (0: the more
    probable answer). A small verifier that prefers "no contradiction" everywhere can be
    calibrated with a positive ``margin`` chosen on labelled pairs
    (``benchmarks/rar_verifier_agreement.py --choice`` reports the margins).
    A row whose scoring raised is a failure naming the error."""
    if not len(prompts) == len(responses) == len(evidence):
        raise ValueError(f"{len(prompts)} prompts, {len(responses)} responses, {len(evidence)} evidence lists")
    if not math.isfinite(margin):
        raise ValueError(f"margin must be a finite number, got {margin!r}")
    out = []
    choices = [CHOICES[1], CHOICES[0]]
    for p, r, ev in zip(prompts, responses, evidence):
        conv = [Message(role="user", content=verifier_prompt(p, r, ev))]
        try:
            lp_one, lp_zero = lm.score_choices(conv, choices)
        except Exception as exc:  # noqa: BLE001 - a backend failure is this row's, counted
            out.append(VerifierOutput(None, "", f"LM failed: {type(exc).__name__}: {exc}"))
            continue
        score = 1 if lp_one - lp_zero >= margin else 0
        out.append(VerifierOutput(score, f"logprob(1) = {lp_one:.3f}, logprob(0) = {lp_zero:.3f}", None,
                                  CHOICES[score], margin=lp_one - lp_zero))
    return out
