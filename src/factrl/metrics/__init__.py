"""Metrics: evidence-set comparisons, label classification scores, the Veri-R1
evaluation summary (:func:`compute_metrics`), confidence calibration and the label
confidence read off a trajectory (:func:`label_confidence`), Binary RAR's long- and
short-form hallucination rates with LM claim extraction and judging, METEOR with offline
WordNet and ``nltk.word_tokenize`` with an offline Punkt model
(``factrl.metrics.meteor.meteor``), the AVeriTeC scorer and its 2025 Ev2R judge; nltk and
scipy are imported only when a score is computed."""

from factrl.metrics.atomic_claims import ExtractedClaims, extract_atomic_claims, judge_claims, judge_responses
from factrl.metrics.averitec import AveritecScores, best_matching_meteor, score_averitec
from factrl.metrics.classification import (
    PRF,
    ConfusionMatrix,
    MajorityBaseline,
    accuracy,
    confusion_matrix,
    macro_f1,
    macro_precision,
    macro_recall,
    majority_baseline,
    per_class_prf,
)
from factrl.metrics.confidence import (
    Calibration,
    calibration,
    confidence_tiers,
    expected_calibration_error,
)
from factrl.metrics.evidence import covers, evidence_set, exact, hit_rate, iou
from factrl.metrics.hallucination import (
    JudgedClaim,
    LongFormHallucination,
    ResponseClaims,
    ShortFormAnswer,
    ShortFormHallucination,
    Support,
    is_abstention,
    long_form_hallucination,
    matches_gold,
    short_form_hallucination,
)
from factrl.metrics.label_confidence import label_confidence, label_token_logprobs
from factrl.metrics.meteor import WordNetMissingError, ensure_wordnet
from factrl.metrics.punkt import ensure_punkt
from factrl.metrics.veri_r1 import ItemScore, compute_metrics, score_item

__all__ = [
    "PRF",
    "ConfusionMatrix",
    "MajorityBaseline",
    "accuracy",
    "confusion_matrix",
    "macro_f1",
    "majority_baseline",
    "per_class_prf",
    "covers",
    "evidence_set",
    "exact",
    "hit_rate",
    "iou",
    "ItemScore",
    "compute_metrics",
    "score_item",
    "ensure_wordnet",
    "ensure_punkt",
    "WordNetMissingError",
    "best_matching_meteor",
    "score_averitec",
    "AveritecScores",
    "Calibration",
    "calibration",
    "confidence_tiers",
    "expected_calibration_error",
    "label_confidence",
    "label_token_logprobs",
    "Support",
    "JudgedClaim",
    "ResponseClaims",
    "LongFormHallucination",
    "long_form_hallucination",
    "ShortFormAnswer",
    "ShortFormHallucination",
    "short_form_hallucination",
    "is_abstention",
    "matches_gold",
    "ExtractedClaims",
    "extract_atomic_claims",
    "judge_claims",
    "judge_responses",
    "macro_precision",
    "macro_recall",
]
