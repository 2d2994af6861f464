"""Ev2R evidence recall (Akhtar et al., 2024) as the 2025 AVeriTeC shared task (FEVER-8)
scores it: an LM judge in place of Hungarian METEOR.

For each claim an LM judge reads the claim, the reference (gold) evidence and the
predicted evidence, splits each side into atomic facts, checks every fact of one side
against the other side only, and answers with four counts in a JSON object:
``facts count predicted evidence``, ``support predicted evidence``, ``facts count
reference evidence``, ``support reference evidence``. Then

- Q+A recall = support reference / facts count reference (precision: the predicted side);
- Q-only recall: the same with the questions alone (keys ``... questions``);
- the **new AVeriTeC score** = the share of claims whose label is correct AND whose Q+A
  recall is strictly greater than 0.5 (:data:`EV2R_CUTOFF`, the scorer's ``recall > level``).
  The 2025 scorer reports it beside the METEOR scores (the "old" AVeriTeC score).

Evidence shown to the judge follows the 2025 scorer: the predicted (question, answer)
rows as written (an empty answer stays empty), the reference (question, answer) per gold
answer, Boolean answers with their explanation, gold questions without answers left out.

**Judge failures** are counted per kind (``judge_failures``) and score as the official
scorer scores them: recall and precision 0, so the claim does not pass the cutoff. A
failure is a judge call that raised, a reply with no JSON object, a missing or
non-numeric count, a count of 0 facts (the official code divides by it) or support above
its count. A prediction with no evidence at all is not sent to the judge: recall 0, not a
failure. The prompt is this project's own wording of the task the 2025 scorer's prompt
sets (its few-shot examples are not reproduced), so scores from a given judge track the
official ones without being identical to them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from factrl.metrics.averitec_format import AveritecGold, AveritecPrediction
from factrl.types import Message

__all__ = [
    "EV2R_CUTOFF",
    "Ev2RJudgement",
    "Ev2RClaim",
    "Ev2RScores",
    "ev2r_prompt",
    "parse_judgement",
    "judge_ev2r",
    "score_ev2r",
]

EV2R_CUTOFF = 0.5
Kind = Literal["qa", "question"]
_NOUN = {"qa": "evidence", "question": "questions"}

_INSTRUCTIONS = """You check the {noun} a fact-checking system produced for a claim against the reference {noun}
written by human fact-checkers.
1. Split the PREDICTED {noun} into atomic facts. For each one decide whether the REFERENCE {noun} supports it.
2. Split the REFERENCE {noun} into atomic facts. For each one decide whether the PREDICTED {noun} supports it.
3. Count: how many atomic facts each side has, and how many of them the other side supports.
Judge only by the two texts: no other sources, no background knowledge.

Answer with one JSON object and nothing after it, with these keys:
"facts in predicted {noun}": the numbered facts, "fact check predicted {noun}": your check of each,
"facts count predicted {noun}": an integer, "support predicted {noun}": an integer,
"facts in reference {noun}": the numbered facts, "fact check reference {noun}": your check of each,
"facts count reference {noun}": an integer, "support reference {noun}": an integer.

Claim: {claim}

Reference {noun}:
{reference}

Predicted {noun}:
{predicted}

Output:"""


def _pairs_text(pairs: Sequence[tuple[str, str]]) -> str:
    return "\n\n".join(f"Question: {q}\nAnswer: {a}" for q, a in pairs) or "(none)"


def _questions_text(questions: Sequence[str]) -> str:
    return " ".join(q for q in questions if q) or "(none)"


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(x for x in items if x))


def ev2r_prompt(gold: AveritecGold, pred: AveritecPrediction, kind: Kind) -> str:
    """The judge's prompt for one claim: Q+A evidence (``"qa"``) or questions alone."""
    if kind == "qa":
        reference, predicted = _pairs_text(gold.qa_pairs), _pairs_text(pred.qa_pairs)
    elif kind == "question":
        reference = _questions_text(_unique([q for q, _ in gold.qa_pairs]))
        predicted = _questions_text([q for q, _ in pred.qa_pairs] or list(pred.questions))
    else:
        raise ValueError(f"kind must be 'qa' or 'question', got {kind!r}")
    return _INSTRUCTIONS.format(noun=_NOUN[kind], claim=gold.claim, reference=reference, predicted=predicted)


@dataclass(frozen=True)
class Ev2RJudgement:
    """One judge reply, parsed: precision and recall, or ``error`` (a judge failure)."""

    precision: float
    recall: float
    error: str | None = None
    counts: dict[str, int] = field(default_factory=dict)
    reply: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None


def _failure(error: str, reply: str | None) -> Ev2RJudgement:
    return Ev2RJudgement(0.0, 0.0, error=error, reply=reply)


def _json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text`` (a fenced block or prose around it is fine)."""
    decoder = json.JSONDecoder()
    for m in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text[m.start():])
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict):
            return obj
    return None


def _count(obj: dict[str, Any], key: str) -> int:
    v = obj.get(key)
    if isinstance(v, str) and v.strip().isdigit():
        v = int(v.strip())
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 0:
        raise ValueError(f"{key!r} is not a count: {v!r}")
    return int(v)


def parse_judgement(reply: str | None, kind: Kind = "qa") -> Ev2RJudgement:
    """Precision and recall from a judge reply; a judge failure (recall 0) when the reply
    cannot be read (see module doc)."""
    if reply is None:
        return _failure("judge call failed", None)
    obj = _json_object(reply)
    if obj is None:
        return _failure("no JSON object in the reply", reply)
    noun = _NOUN[kind]
    keys = {
        "pred_facts": f"facts count predicted {noun}", "pred_support": f"support predicted {noun}",
        "ref_facts": f"facts count reference {noun}", "ref_support": f"support reference {noun}",
    }  # fmt: skip
    try:
        counts = {name: _count(obj, key) for name, key in keys.items()}
    except ValueError as exc:
        return _failure(str(exc), reply)
    for side in ("pred", "ref"):
        facts, support = counts[f"{side}_facts"], counts[f"{side}_support"]
        if facts == 0:
            return _failure(f"{keys[side + '_facts']!r} is 0", reply)
        if support > facts:
            return _failure(f"{keys[side + '_support']!r} {support} exceeds its count {facts}", reply)
    return Ev2RJudgement(
        precision=counts["pred_support"] / counts["pred_facts"],
        recall=counts["ref_support"] / counts["ref_facts"],
        counts=counts,
        reply=reply,
    )


def _replies(judge: Any, prompts: Sequence[str], max_tokens: int, batch_size: int) -> list[str | None]:
    """The judge's replies, greedy; a row whose call failed is None (a judge failure)."""
    from factrl.lm.base import GenerationConfig, RowFailures

    config = GenerationConfig(max_new_tokens=max_tokens, temperature=0.0)
    out: list[str | None] = []
    for start in range(0, len(prompts), batch_size):
        convs = [[Message(role="user", content=p)] for p in prompts[start : start + batch_size]]
        try:
            gens: Sequence[Any] = judge.complete(convs, config)
        except RowFailures as exc:
            gens = exc.generations
        except Exception:  # a judge that is down: every row of the batch failed, counted
            gens = [None] * len(convs)
        if len(gens) != len(convs):
            gens = [None] * len(convs)
        out += [None if g is None else g.text for g in gens]
    return out


@dataclass(frozen=True)
class Ev2RClaim:
    claim_id: str
    label_correct: bool
    qa: Ev2RJudgement
    question: Ev2RJudgement

    def to_dict(self) -> dict[str, Any]:
        def j(x: Ev2RJudgement) -> dict[str, Any]:
            return {"precision": x.precision, "recall": x.recall, "error": x.error, "counts": x.counts}

        return {"claim_id": self.claim_id, "label_correct": self.label_correct, "qa": j(self.qa),
                "question": j(self.question)}


@dataclass(frozen=True)
class Ev2RScores:
    """Means over claims (failures count 0) and the new AVeriTeC score at each cutoff."""

    n: int
    q_recall: float | None
    qa_recall: float | None
    qa_precision: float | None
    averitec: dict[float, float | None]
    judge: str
    judge_failures: dict[str, int]
    per_claim: list[Ev2RClaim] = field(default_factory=list)

    @property
    def averitec_score(self) -> float | None:
        """The new AVeriTeC score (Ev2R Q+A recall > 0.5)."""
        return self.averitec.get(EV2R_CUTOFF)

    def to_dict(self, *, per_claim: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n, "judge": self.judge,
            "q_only_recall": self.q_recall, "qa_recall": self.qa_recall, "qa_precision": self.qa_precision,
            "averitec_score": self.averitec_score,
            "averitec_score_at": {str(k): v for k, v in sorted(self.averitec.items())},
            "main_cutoff": EV2R_CUTOFF, "judge_failures": dict(self.judge_failures),
            "convention": ("Ev2R (2025 AVeriTeC scorer): an LM judge counts atomic facts of predicted and "
                           "reference evidence and the facts the other side supports; recall = supported "
                           "reference facts / reference facts; new AVeriTeC score: label correct and Q+A "
                           f"recall > {EV2R_CUTOFF}; a judge failure scores recall 0 and is counted"),
        }  # fmt: skip
        if per_claim:
            out["per_claim"] = [c.to_dict() for c in self.per_claim]
        return out


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def judge_ev2r(
    judge: Any,
    pairs: Sequence[tuple[AveritecPrediction, AveritecGold]],
    *,
    max_tokens: int = 2048,
    batch_size: int = 16,
) -> list[Ev2RClaim]:
    """Judge every (prediction, gold) pair twice (Q+A evidence, questions alone)."""
    if batch_size < 1 or max_tokens < 1:
        raise ValueError("batch_size and max_tokens must be positive")
    jobs: list[tuple[int, Kind]] = []
    prompts: list[str] = []
    for i, (pred, gold) in enumerate(pairs):
        for kind in ("qa", "question"):
            if pred.qa_pairs or pred.questions:  # no evidence at all: recall 0 without a call
                jobs.append((i, kind))
                prompts.append(ev2r_prompt(gold, pred, kind))
    replies = _replies(judge, prompts, max_tokens, batch_size) if prompts else []
    got = {job: parse_judgement(reply, job[1]) for job, reply in zip(jobs, replies)}
    empty = Ev2RJudgement(0.0, 0.0)
    return [
        Ev2RClaim(gold.claim_id, pred.label is not None and pred.label == gold.label,
                  got.get((i, "qa"), empty), got.get((i, "question"), empty))
        for i, (pred, gold) in enumerate(pairs)
    ]


def score_ev2r(
    judge: Any,
    pairs: Sequence[tuple[AveritecPrediction, AveritecGold]],
    *,
    cutoffs: Sequence[float] = (EV2R_CUTOFF,),
    max_tokens: int = 2048,
    batch_size: int = 16,
) -> Ev2RScores:
    """Ev2R recalls and the new AVeriTeC score of ``pairs`` under ``judge`` (an LM)."""
    per = judge_ev2r(judge, pairs, max_tokens=max_tokens, batch_size=batch_size)
    return Ev2RScores(
        n=len(per),
        q_recall=_mean([c.question.recall for c in per]),
        qa_recall=_mean([c.qa.recall for c in per]),
        qa_precision=_mean([c.qa.precision for c in per]),
        averitec={float(lam): _mean([float(c.label_correct and c.qa.recall > lam) for c in per])
                  for lam in cutoffs},
        judge=str(getattr(judge, "name", type(judge).__name__)),
        judge_failures={"qa": sum(c.qa.failed for c in per), "question": sum(c.question.failed for c in per)},
        per_claim=per,
    )
