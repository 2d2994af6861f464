"""Claim decomposition into verification questions by an LM (FFRR §4.2, App. A Table 5).

The prompt is the paper's in-context form (two demonstrations, as its §6.1.2 settles on);
the model continues after "Question:" and every ``Question: ...`` line it writes is one
question. A claim whose output holds no question keeps the claim itself as its only
question and is counted (``fallbacks``), never silently dropped. Questions are written
to a JSONL cache (``{"id", "questions", "fallback"}``) and read back, so a resumed run or
a second trainer asks the LM nothing twice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factrl.types import Claim, Message

__all__ = ["DEMOS", "QuestionSet", "decompose_claims", "parse_questions", "question_prompt"]

DEMOS = (
    ("Emerson Moser, who was Crayola's top crayon molder for almost 40 years, was colorblind.",
     ["Is there any official record or documentation indicating that Emerson Moser worked as a crayon molder at Crayola?",
      "Are there any official records or documentation confirming Emerson Moser's length of employment at Crayola?",
      "Are there credible sources or publications that mention Emerson Moser as Crayola's top crayon molder?",
      "Are there any credible sources or records indicating that Emerson Moser was colorblind?",
      "Was Emerson Moser's colorblindness only confusing for certain colors?"]),
    ("Bernie Sanders said 85 million Americans have no health insurance.",
     ["How many Americans did Bernie Sanders claim had no health insurance?",
      'How did Bernie Sanders define "no health insurance"?',
      "How many Americans were uninsured or under-insured according to the Commonwealth Fund survey?"]),
)
_LEAD = ("To verify the claim, a fact-checker will go through a step-by-step process to ask and answer a series "
         "of questions relevant to its factuality. Here are the specific questions raised:")
_QUESTION = re.compile(r"^\s*(?:\d+[.)]\s*)?Question\s*\d*\s*:\s*(.+?)\s*$", re.IGNORECASE | re.MULTILINE)


def question_prompt(claim: str) -> str:
    """The few-shot decomposition prompt for ``claim``, ending where the first question starts."""
    parts = []
    for demo, questions in DEMOS:
        parts.append(f"Claim: {demo}\n{_LEAD}\n" + "\n".join(f"Question: {q}" for q in questions))
    parts.append(f"Claim: {claim}\n{_LEAD}\nQuestion:")
    return "\n\n".join(parts)


def parse_questions(text: str, *, max_questions: int = 5) -> list[str]:
    """The questions in a continuation of :func:`question_prompt` (which already wrote
    the first ``Question:``): its first line, then every ``Question: ...`` line, until the
    model starts a new ``Claim:``; duplicates and fragments under 3 words dropped."""
    text = text.split("\nClaim:")[0]
    first, _, rest = text.partition("\n")
    head = _QUESTION.match(first)  # a chat model may repeat the "Question:" it was given
    found = [head.group(1) if head else first.strip()] + [m.group(1) for m in _QUESTION.finditer(rest)]
    out: list[str] = []
    for q in found:
        q = " ".join(q.split())
        if len(q.split()) >= 3 and q.lower() not in {o.lower() for o in out}:
            out.append(q)
    return out[:max_questions]


@dataclass
class QuestionSet:
    """Questions per claim id, and how many claims fell back to the claim itself."""

    questions: dict[str, list[str]] = field(default_factory=dict)
    fallbacks: int = 0


def decompose_claims(claims: Sequence[Claim], lm: Any, *, cache: Path | None = None, max_questions: int = 5,
                     max_new_tokens: int = 160, batch_size: int = 8) -> QuestionSet:
    """Questions for every claim (greedy decoding), read from / appended to ``cache``."""
    from factrl.lm.base import GenerationConfig

    out = QuestionSet()
    if cache is not None and cache.is_file():
        for line in cache.read_text(encoding="utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                out.questions[str(row["id"])] = list(row["questions"])
                out.fallbacks += bool(row.get("fallback"))
    todo = [c for c in claims if c.id not in out.questions]
    config = GenerationConfig(max_new_tokens=max_new_tokens, temperature=0.0, stop=("\nClaim:", "\n\n"))
    for start in range(0, len(todo), batch_size):
        chunk = todo[start : start + batch_size]
        gens = lm.complete([[Message(role="user", content=question_prompt(c.text))] for c in chunk], config)
        rows = []
        for claim, gen in zip(chunk, gens):
            qs = parse_questions(gen.text, max_questions=max_questions)
            fallback = not qs
            out.questions[claim.id] = qs or [claim.text]
            out.fallbacks += fallback
            rows.append({"id": claim.id, "questions": out.questions[claim.id], "fallback": fallback})
        if cache is not None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            with cache.open("a", encoding="utf-8") as fh:
                fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    return out
