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

**Strings compared** (:mod:`factrl.metrics.averitec_format`, as the official scorer builds
them): Q-only compares the predicted questions (first 10) with the gold
``questions[].question``; Q+A compares the predicted ``question + " " + answer`` strings
(first 10; an empty or missing answer gives ``question + " No answer could be found."``,
the official rendering of a question without answers) with one gold string per gold
answer (Boolean answers add ``". " + boolean_explanation``; a gold question without
answers gives ``question + " No answer could be found."``). No other text normalisation
(METEOR itself lower-cases). Tokens are ``nltk.word_tokenize``'s
(:mod:`factrl.metrics.punkt`).

**Per claim and overall.** Q-only and Q+A are averaged over claims. Label accuracy
compares the predicted label with the gold one (spellings normalised by
:func:`factrl.labels.normalise_label`; an unknown spelling is wrong). The AVeriTeC score at
cutoff λ is the share of claims whose label is correct AND whose Q+A score is strictly
greater than λ (the official ``score > level``; the paper: "exceeds the cutoff"). λ = 0.25
is the shared task's main score; 0.2 and 0.3 are reported beside it (``eval.py`` reports
0.1, 0.2, 0.25, 0.3, 0.4, 0.5: :data:`OFFICIAL_CUTOFFS`). Label F1 per label and macro-F1
are over the four AVeriTeC labels, as the 2023 scorer's ``f1_score(labels=verdicts)``.
The justification score is METEOR of the predicted justification (else the first 10 Q+A
strings joined by spaces) against the gold justification; at cutoff λ it counts only
where the Q+A score exceeds λ (``eval.py``'s "Justification scores @ λ").

Predictions are paired with gold claims by ``claim_id`` (by position when they carry
none).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from factrl.labels import Label
from factrl.metrics.averitec_format import (
    NO_ANSWER,
    AveritecGold,
    AveritecPrediction,
    comparison_strings,
    gold_comparison_strings,
    load_gold,
    load_predictions,
    prediction_from_record,
)
from factrl.metrics.classification import macro_f1, per_class_prf

__all__ = [
    "MAX_QUESTIONS",
    "CUTOFFS",
    "OFFICIAL_CUTOFFS",
    "MAIN_CUTOFF",
    "NO_ANSWER",
    "VERDICTS",
    "AveritecGold",
    "AveritecPrediction",
    "ClaimScore",
    "AveritecScores",
    "best_matching_meteor",
    "matching_score",
    "gold_comparison_strings",
    "comparison_strings",
    "prediction_from_record",
    "convention",
    "predicted_justification",
    "load_gold",
    "load_predictions",
    "pair_predictions",
    "score_claim",
    "score_averitec",
]

MAX_QUESTIONS = 10
CUTOFFS = (0.2, 0.25, 0.3)
OFFICIAL_CUTOFFS = (0.1, 0.2, 0.25, 0.3, 0.4, 0.5)  # the levels eval.py prints
MAIN_CUTOFF = 0.25
# The official label spellings, in eval.py's order.
VERDICTS = {Label.SUPPORT: "Supported", Label.REFUTE: "Refuted", Label.NEI: "Not Enough Evidence",
            Label.CONFLICTING: "Conflicting Evidence/Cherrypicking"}


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
class ClaimScore:
    claim_id: str
    q_only: float
    qa: float
    label_correct: bool
    gold_label: str
    pred_label: str | None
    justification: float | None = None  # None when gold has no justification


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
    label_f1: dict[str, float] = field(default_factory=dict)
    justification: float | None = None
    justification_at: dict[float, float | None] = field(default_factory=dict)

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
            "label_f1": dict(self.label_f1),
            "justification_meteor": self.justification,
            "justification_meteor_at": {str(k): v for k, v in sorted(self.justification_at.items())},
            "convention": convention(),
            "unknown_labels": self.unknown_labels,
            "missing": self.missing,
        }
        if per_claim:
            out["per_claim"] = [asdict(c) for c in self.per_claim]
        return out


def convention() -> str:
    """How the scores are computed, as recorded beside them (names the tokenizer in use)."""
    from factrl.metrics.punkt import tokenizer_name

    return (
        f"Hungarian METEOR (nltk single_meteor_score; tokens: {tokenizer_name()}) summed over the "
        f"matching / number of gold strings; first {MAX_QUESTIONS} predicted items; an evidence row "
        f"with an empty or missing answer is 'QUESTION{NO_ANSWER}', as eval.py renders a question "
        "without answers; AVeriTeC score: label correct and Q+A score > cutoff"
    )


# ---- scoring ---------------------------------------------------------------------------


def predicted_justification(pred: AveritecPrediction) -> str:
    """The prediction's justification, else its first 10 Q+A strings joined (eval.py)."""
    if pred.justification is not None:
        return pred.justification
    return " ".join(pred.qa_strings[:MAX_QUESTIONS])


def score_claim(pred: AveritecPrediction, gold: AveritecGold, *, justification: bool = True) -> ClaimScore:
    """Q-only and Q+A Hungarian METEOR, label correctness and (when gold has one and
    ``justification``) the justification METEOR of one claim."""
    from factrl.metrics import meteor as mt

    just = None
    if justification and gold.justification is not None:
        just = mt.meteor(predicted_justification(pred), gold.justification)
    return ClaimScore(
        claim_id=gold.claim_id,
        q_only=best_matching_meteor(pred.questions, gold.questions, max_pred=MAX_QUESTIONS),
        qa=best_matching_meteor(pred.qa_strings, gold.qa_strings, max_pred=MAX_QUESTIONS),
        label_correct=pred.label is not None and pred.label == gold.label,
        gold_label=gold.label.value,
        pred_label=pred.label.value if pred.label is not None else None,
        justification=just,
    )


def pair_predictions(
    preds: Sequence[AveritecPrediction], golds: Sequence[AveritecGold], allow_missing: bool = False
) -> tuple[list[tuple[AveritecPrediction, AveritecGold]], int]:
    """``([(prediction, gold)] in gold order, number missing)``: by ``claim_id``, or by
    position when no prediction has one; a gold claim without a prediction is an error
    unless ``allow_missing`` (then it gets an empty, wrong prediction)."""
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
    empty = AveritecPrediction(None, None, None)
    return [(by_id.get(g.claim_id, empty), g) for g in golds], len(missing)


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def score_averitec(
    preds: Sequence[AveritecPrediction],
    golds: Sequence[AveritecGold],
    *,
    cutoffs: Sequence[float] = CUTOFFS,
    allow_missing: bool = False,
    justification: bool = True,
) -> AveritecScores:
    """Every AVeriTeC score of ``preds`` against ``golds`` (see module doc). A gold claim
    without a prediction is an error unless ``allow_missing`` (then: wrong, no evidence).
    ``justification=False`` skips the justification METEOR (one long pair per claim)."""
    pairs, missing = pair_predictions(preds, golds, allow_missing)
    per_claim = [score_claim(p, g, justification=justification) for p, g in pairs]
    gold_labels = [g.label for _, g in pairs]
    pred_labels = [p.label for p, _ in pairs]
    just = [c.justification for c in per_claim if c.justification is not None]
    just_ok = bool(per_claim) and len(just) == len(per_claim)
    prf = per_class_prf(gold_labels, pred_labels, labels=list(VERDICTS)) if per_claim else {}
    return AveritecScores(
        n=len(per_claim),
        q_only=_mean([c.q_only for c in per_claim]),
        qa=_mean([c.qa for c in per_claim]),
        label_acc=_mean([float(c.label_correct) for c in per_claim]),
        label_macro_f1=macro_f1(gold_labels, pred_labels, labels=list(VERDICTS)) if per_claim else None,
        averitec={
            float(lam): _mean([float(c.label_correct and c.qa > lam) for c in per_claim]) for lam in cutoffs
        },
        unknown_labels=sum(1 for p, _ in pairs if p.raw_label is not None and p.label is None),
        missing=missing,
        per_claim=per_claim,
        label_f1={VERDICTS[label]: x.f1 for label, x in prf.items()},
        justification=_mean(just) if just_ok else None,
        justification_at={
            float(lam): _mean([(c.justification or 0.0) if c.qa > lam else 0.0 for c in per_claim])
            for lam in cutoffs
        } if just_ok else {},
    )
