"""The AVeriTeC scorer (Schlichtkrull et al., 2023; the 2024 shared task), as the official
scorer computes it, and the matching score ProFact's process reward reuses.

**Hungarian METEOR.** For predicted strings P and gold strings G, the pairwise METEOR
matrix ``S[i][j] = meteor(P[i], G[j])`` (hypothesis P[i], reference G[j]; see
:mod:`factrl.metrics.meteor`) is matched one-to-one with maximum total weight
(``scipy.optimize.linear_sum_assignment(S, maximize=True)``), and the matched sum is
divided by |G|, the number of *gold* strings — the official scorer's normalisation. An
unmatched gold string therefore counts 0 (too few predictions lower the score), while
extra predictions cost nothing; the scorer bounds them by keeping only the first 10
predicted items (:data:`MAX_QUESTIONS`). Empty P or empty G scores 0 (the official code
would divide by zero on empty G). :func:`best_matching_meteor` is this score.

**Strings compared** (as the official scorer builds them):

- Q-only: predicted ``question`` texts (first 10) against the gold ``questions[].question``.
- Q+A: predicted ``question + " " + answer`` (first 10) against one gold string per gold
  answer, ``question + " " + answer``; a Boolean answer appends ``". " +
  boolean_explanation``; a gold question without answers gives ``question + " No answer
  could be found."``. No other text normalisation (METEOR itself lower-cases).

**Per claim and overall.** Q-only and Q+A are averaged over claims. Label accuracy
compares the predicted label with the gold one (spellings normalised by
:func:`factrl.labels.normalise_label`; an unknown spelling is wrong). The AVeriTeC score at
cutoff λ is the share of claims whose label is correct AND whose Q+A score is strictly
greater than λ (the official ``score > level``; the paper: "exceeds the cutoff"). λ = 0.25
is the shared task's main score; 0.2 and 0.3 are reported beside it. Label macro-F1 is
over the four AVeriTeC labels, as the 2023 scorer's ``f1_score(labels=verdicts)``.

Predictions are the shared task's submission format: a JSON list of ``{claim_id, claim,
pred_label, evidence: [{question, answer, ...}]}``; gold is AVeriTeC's ``dev.json``, whose
claims are identified by their position (``claim_id`` when present). Predictions are
paired with gold claims by ``claim_id`` (by position when they carry none).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from factrl.labels import Label, UnknownLabelError, normalise_label
from factrl.metrics.classification import macro_f1

__all__ = [
    "MAX_QUESTIONS",
    "CUTOFFS",
    "MAIN_CUTOFF",
    "AveritecGold",
    "AveritecPrediction",
    "ClaimScore",
    "AveritecScores",
    "best_matching_meteor",
    "matching_score",
    "gold_comparison_strings",
    "load_gold",
    "load_predictions",
    "score_claim",
    "score_averitec",
]

MAX_QUESTIONS = 10
CUTOFFS = (0.2, 0.25, 0.3)
MAIN_CUTOFF = 0.25
NO_ANSWER = " No answer could be found."


def matching_score(scores: Sequence[Sequence[float]], n_gold: int) -> float:
    """Maximum-weight one-to-one matching of a (pred × gold) score matrix, summed and
    divided by ``n_gold``; 0 when either side is empty."""
    if n_gold == 0 or not scores or not scores[0]:
        return 0.0
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    mat = np.asarray(scores, dtype=float)
    rows, cols = linear_sum_assignment(mat, maximize=True)
    return float(mat[rows, cols].sum()) / n_gold


def best_matching_meteor(
    pred_items: Sequence[str],
    gold_items: Sequence[str],
    *,
    max_pred: int | None = None,
    metric: Callable[[str, str], float] | None = None,
) -> float:
    """Mean METEOR over the best one-to-one matching of predicted and gold strings,
    divided by the number of gold strings (the official AVeriTeC normalisation).

    ``max_pred`` keeps only the first predictions (the scorer uses 10); ``metric`` is the
    pairwise score (hypothesis, reference), default :func:`factrl.metrics.meteor.meteor`.
    Empty ``pred_items`` or ``gold_items`` give 0.
    """
    if isinstance(pred_items, str) or isinstance(gold_items, str):
        raise TypeError("pred_items and gold_items are sequences of strings, not a string")
    preds = list(pred_items)[:max_pred] if max_pred is not None else list(pred_items)
    golds = list(gold_items)
    if not preds or not golds:
        return 0.0
    if metric is None:
        from factrl.metrics.meteor import meteor as metric
    return matching_score([[metric(p, g) for g in golds] for p in preds], len(golds))


# ---- records ---------------------------------------------------------------------------


@dataclass(frozen=True)
class AveritecGold:
    """A gold claim: its label, questions, and Q+A comparison strings."""

    claim_id: str
    label: Label
    questions: tuple[str, ...]
    qa_strings: tuple[str, ...]


@dataclass(frozen=True)
class AveritecPrediction:
    """A submission row: the raw label as written, its normalised form (None when the
    spelling is unknown), and the (question, answer) evidence in order."""

    claim_id: str | None
    raw_label: str | None
    label: Label | None
    evidence: tuple[tuple[str, str], ...]

    @property
    def questions(self) -> list[str]:
        return [q for q, _ in self.evidence]

    @property
    def qa_strings(self) -> list[str]:
        return [f"{q} {a}" for q, a in self.evidence]


@dataclass(frozen=True)
class ClaimScore:
    claim_id: str
    q_only: float
    qa: float
    label_correct: bool
    gold_label: str
    pred_label: str | None


@dataclass(frozen=True)
class AveritecScores:
    """Corpus-level scores; ``averitec`` maps each cutoff to its AVeriTeC score."""

    n: int
    q_only: float | None
    qa: float | None
    label_acc: float | None
    label_macro_f1: float | None
    averitec: dict[float, float | None]
    unknown_labels: int = 0
    missing: int = 0
    per_claim: list[ClaimScore] = field(default_factory=list)

    @property
    def averitec_score(self) -> float | None:
        """The shared task's main score (cutoff 0.25)."""
        return self.averitec.get(MAIN_CUTOFF)

    def to_dict(self, *, per_claim: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "n": self.n,
            "q_only_meteor": self.q_only,
            "qa_meteor": self.qa,
            "label_acc": self.label_acc,
            "label_macro_f1": self.label_macro_f1,
            "averitec_score": self.averitec_score,
            "averitec_score_at": {str(k): v for k, v in sorted(self.averitec.items())},
            "main_cutoff": MAIN_CUTOFF,
            "convention": (
                "Hungarian METEOR (nltk) summed over the matching / number of gold strings; "
                f"first {MAX_QUESTIONS} predicted items; AVeriTeC score: label correct and "
                "Q+A score > cutoff"
            ),
            "unknown_labels": self.unknown_labels,
            "missing": self.missing,
        }
        if per_claim:
            out["per_claim"] = [asdict(c) for c in self.per_claim]
        return out


# ---- loading ---------------------------------------------------------------------------


def gold_comparison_strings(record: dict[str, Any]) -> list[str]:
    """The official scorer's Q+A strings of a gold AVeriTeC record (see module doc)."""
    out: list[str] = []
    for q in record.get("questions") or []:
        answers = q.get("answers") or []
        if not isinstance(answers, list):
            answers = [answers]
        for a in answers:
            text = f"{q['question']} {a['answer']}"
            if a.get("answer_type") == "Boolean" and "boolean_explanation" in a:
                text += ". " + a["boolean_explanation"]
            out.append(text)
        if not answers:
            out.append(q["question"] + NO_ANSWER)
    return out


def _read_json_list(path: Path, what: str) -> list[Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of {what}, got {type(data).__name__}")
    return data


def load_gold(path: Path) -> list[AveritecGold]:
    """Gold claims of an AVeriTeC file (``dev.json``); ids are positions unless given."""
    out = []
    for i, rec in enumerate(_read_json_list(path, "claims")):
        try:
            out.append(
                AveritecGold(
                    claim_id=str(rec.get("claim_id", i)),
                    label=normalise_label(rec["label"]),
                    questions=tuple(q["question"] for q in rec.get("questions") or []),
                    qa_strings=tuple(gold_comparison_strings(rec)),
                )
            )
        except (KeyError, TypeError, UnknownLabelError) as exc:
            raise ValueError(f"{path}: claim {i}: not an AVeriTeC record ({exc!r})") from None
    return out


def _label(raw: Any) -> Label | None:
    try:
        return normalise_label(raw) if raw is not None else None
    except UnknownLabelError:
        return None


def load_predictions(path: Path) -> list[AveritecPrediction]:
    """Rows of a shared-task submission file (``pred_label``; ``label`` also accepted)."""
    out = []
    for i, rec in enumerate(_read_json_list(path, "predictions")):
        try:
            raw = rec.get("pred_label", rec.get("label"))
            evidence = tuple(
                (str(e.get("question") or ""), str(e.get("answer") or "")) for e in rec.get("evidence") or []
            )
            cid = rec.get("claim_id")
            out.append(AveritecPrediction(None if cid is None else str(cid), raw, _label(raw), evidence))
        except (AttributeError, TypeError) as exc:
            raise ValueError(f"{path}: prediction {i}: not a submission row ({exc!r})") from None
    return out


# ---- scoring ---------------------------------------------------------------------------


def score_claim(pred: AveritecPrediction, gold: AveritecGold) -> ClaimScore:
    """Q-only and Q+A Hungarian METEOR and label correctness of one claim."""
    return ClaimScore(
        claim_id=gold.claim_id,
        q_only=best_matching_meteor(pred.questions, gold.questions, max_pred=MAX_QUESTIONS),
        qa=best_matching_meteor(pred.qa_strings, gold.qa_strings, max_pred=MAX_QUESTIONS),
        label_correct=pred.label is not None and pred.label == gold.label,
        gold_label=gold.label.value,
        pred_label=pred.label.value if pred.label is not None else None,
    )


def _pair(
    preds: Sequence[AveritecPrediction], golds: Sequence[AveritecGold], allow_missing: bool
) -> tuple[list[tuple[AveritecPrediction, AveritecGold]], int]:
    if all(p.claim_id is None for p in preds):
        if len(preds) != len(golds) and not allow_missing:
            raise ValueError(f"{len(preds)} predictions without claim_id for {len(golds)} gold claims")
        by_id = {g.claim_id: p for g, p in zip(golds, preds)}
    else:
        by_id = {}
        gold_ids = {g.claim_id for g in golds}
        for p in preds:
            if p.claim_id is None:
                raise ValueError("some predictions have a claim_id and some do not")
            if p.claim_id not in gold_ids:
                raise ValueError(f"prediction for claim_id {p.claim_id!r}, which gold does not have")
            if p.claim_id in by_id:
                raise ValueError(f"two predictions for claim_id {p.claim_id!r}")
            by_id[p.claim_id] = p
    missing = [g.claim_id for g in golds if g.claim_id not in by_id]
    if missing and not allow_missing:
        raise ValueError(
            f"{len(missing)} gold claims have no prediction (first: {missing[:5]}); "
            "allow_missing scores them as wrong with no evidence"
        )
    empty = AveritecPrediction(None, None, None, ())
    return [(by_id.get(g.claim_id, empty), g) for g in golds], len(missing)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def score_averitec(
    preds: Sequence[AveritecPrediction],
    golds: Sequence[AveritecGold],
    *,
    cutoffs: Sequence[float] = CUTOFFS,
    allow_missing: bool = False,
) -> AveritecScores:
    """Every AVeriTeC score of ``preds`` against ``golds`` (see module doc). A gold claim
    without a prediction is an error unless ``allow_missing`` (then: wrong, no evidence)."""
    pairs, missing = _pair(preds, golds, allow_missing)
    per_claim = [score_claim(p, g) for p, g in pairs]
    gold_labels = [g.label for _, g in pairs]
    pred_labels = [p.label for p, _ in pairs]
    return AveritecScores(
        n=len(per_claim),
        q_only=_mean([c.q_only for c in per_claim]),
        qa=_mean([c.qa for c in per_claim]),
        label_acc=_mean([float(c.label_correct) for c in per_claim]),
        label_macro_f1=macro_f1(gold_labels, pred_labels, labels=list(Label)) if per_claim else None,
        averitec={
            float(lam): _mean([float(c.label_correct and c.qa > lam) for c in per_claim]) for lam in cutoffs
        },
        unknown_labels=sum(1 for p, _ in pairs if p.raw_label is not None and p.label is None),
        missing=missing,
        per_claim=per_claim,
    )
