"""HARIS search-agent training data (§3.3.1, App. A.4): questions sampled from the
reasoner's rollouts, each paired with a pseudo-gold answer that an LM writes from the
claim's gold evidence (Table 13's ``PseudoGroundTruthQA``); answers "None" are dropped.

The foundation stage takes each rollout's first question (the untrained reasoner's
later turns are unreliable); later rounds sample one of all its questions. One
question per claim.

Where the data states each hop's question and answer (a generated world's
``claim.meta["questions"]``), ``answer_model = "gold"`` takes the pseudo-gold answer of a
question that is one of the claim's hop questions from the data instead of an LM; any
other question is dropped (counted in ``not_a_gold_hop``), as is a hop the data marks
unanswerable (``dropped_none``).
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from factrl.protocol.haris import binary_gold
from factrl.labels import Label
from factrl.types import Claim, Message, Trajectory

__all__ = ["GOLD_ANSWERS", "SynthesisStats", "gold_hop_answer", "pick_questions", "pseudo_gold_messages",
           "write_pseudo_answers", "PSEUDO_GOLD_PROMPT"]

GOLD_ANSWERS = "gold"  # haris.answer_model: the data's own hop answers, no LM

PSEUDO_GOLD_PROMPT = """A fact-checking agent asked a question while verifying a claim. Answer the question from the evidence.

Claim: {claim}
Veracity of the claim: {veracity}
Evidence:
{evidence}
Question: {question}

Reply with the answer only, in a few words. If no answer is applicable, reply None."""

_NONE = re.compile(r"^\W*(none|n/a|no answer)\W*$", re.IGNORECASE)


@dataclass
class SynthesisStats:
    rollouts: int = 0
    with_question: int = 0
    fallback: int = 0  # claims whose rollout asked nothing: the claim itself was asked
    dropped_none: int = 0  # pseudo-gold answer "None" (the paper filters ~10%)
    dropped_no_evidence: int = 0
    answer_failed: int = 0  # the answer LM's request failed
    not_a_gold_hop: int = 0  # answer_model "gold": the question is none of the claim's hop questions
    kept: int = 0
    meta: dict[str, Any] = field(default_factory=dict)


def pick_questions(trajs: Sequence[Trajectory], *, first_only: bool, fallback: bool, seed: int,
                   stats: SynthesisStats) -> list[tuple[Claim, str]]:
    """(claim, question) pairs, at most one per claim, in claim order."""
    rng = random.Random(seed)
    out: dict[str, tuple[Claim, str]] = {}
    for t in trajs:
        stats.rollouts += 1
        questions = [q for q in t.meta.get("questions", []) if q.strip()]
        if t.claim_id in out:
            continue
        if questions:
            stats.with_question += 1
            out[t.claim_id] = (t.claim, questions[0] if first_only else rng.choice(questions))
        elif fallback:
            stats.fallback += 1
            out[t.claim_id] = (t.claim, f"Is it true that {t.claim.text.strip().rstrip('.')}?")
    return list(out.values())


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", str(text).lower()))


def gold_hop_answer(claim: Claim, question: str) -> str | None:
    """The data's answer to ``question`` when it is one of the claim's hop questions
    (compared without case and punctuation): the answer text, "" for a hop the data marks
    unanswerable, None when the question is none of them."""
    asked = _norm(question)
    for q in claim.meta.get("questions") or []:
        if isinstance(q, dict) and asked and _norm(q.get("question", "")) == asked:
            answers = [a for a in q.get("answers") or [] if isinstance(a, dict)]
            sourced = [str(a.get("answer", "")).strip() for a in answers if a.get("source_url")]
            return " ".join(a for a in sourced if a)
    return None


def _gold_answers(pairs: Sequence[tuple[Claim, str]], stats: SynthesisStats) -> list[Claim]:
    out: list[Claim] = []
    for claim, q in pairs:
        answer = gold_hop_answer(claim, q)
        if answer is None:
            stats.not_a_gold_hop += 1
        elif not answer:
            stats.dropped_none += 1
        else:
            out.append(_question_claim(claim, q, answer))
    stats.kept = len(out)
    return out


def _question_claim(claim: Claim, q: str, answer: str) -> Claim:
    return Claim(id=f"{claim.id}#q", text=q, label=claim.label, evidence=claim.evidence, dataset=claim.dataset,
                 meta={"pseudo_answer": answer, "claim_id": claim.id, "claim": claim.text})


def pseudo_gold_messages(claim: Claim, question: str) -> list[Message] | None:
    evidence = [e.text.strip() for e in claim.evidence if e.text and e.text.strip()]
    if not evidence:
        return None
    veracity = "true" if binary_gold(claim.label) is Label.SUPPORT else "false"
    content = PSEUDO_GOLD_PROMPT.format(claim=claim.text.strip(), veracity=veracity,
                                        evidence="\n".join(f"- {e}" for e in evidence), question=question.strip())
    return [Message(role="user", content=content)]


def write_pseudo_answers(pairs: Sequence[tuple[Claim, str]], lm: Any, stats: SynthesisStats,
                         max_tokens: int = 64) -> list[Claim]:
    """The search agent's training questions: ``Claim(id=<claim>#q, text=question,
    meta={"pseudo_answer", "claim_id", "claim"})``, carrying the claim's label and evidence;
    ``lm`` the answer LM, or :data:`GOLD_ANSWERS` for the data's own hop answers."""
    from factrl.lm.base import GenerationConfig, RowFailures

    if lm == GOLD_ANSWERS:
        return _gold_answers(pairs, stats)
    keep: list[tuple[Claim, str, list[Message]]] = []
    for claim, q in pairs:
        msgs = pseudo_gold_messages(claim, q)
        if msgs is None:
            stats.dropped_no_evidence += 1
        else:
            keep.append((claim, q, msgs))
    if not keep:
        return []
    cfg = GenerationConfig(max_new_tokens=max_tokens, temperature=0.0, stop=("\n",))
    try:
        gens: list[Any] = list(lm.complete([m for _, _, m in keep], cfg))
    except RowFailures as exc:
        gens = exc.generations
    out: list[Claim] = []
    for (claim, q, _), g in zip(keep, gens):
        if g is None:
            stats.answer_failed += 1
            continue
        answer = g.text.strip()
        if not answer or _NONE.match(answer):
            stats.dropped_none += 1
            continue
        out.append(_question_claim(claim, q, answer))
    stats.kept = len(out)
    return out
