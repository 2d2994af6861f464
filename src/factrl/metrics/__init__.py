"""Metrics: evidence-set comparisons, label classification scores, and the Veri-R1
evaluation summary (:func:`compute_metrics`)."""

from factrl.metrics.classification import (
    PRF,
    ConfusionMatrix,
    MajorityBaseline,
    accuracy,
    confusion_matrix,
    macro_f1,
    majority_baseline,
    per_class_prf,
)
from factrl.metrics.evidence import covers, evidence_set, exact, hit_rate, iou
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
]
