"""Veri-R1 evaluation metrics (paper §3.2) over finished episodes.

Per item, with P the predicted and G the gold evidence-id sets:

- label correct: predicted label == gold (an unparsed ``None`` label is wrong);
- verification: label correct AND G ⊆ P (extra evidence allowed);
- joint: label correct AND P == G;
- for NEI gold, verification and joint need only the correct label (the paper relaxes
  evidence for NEI); CONFLICTING gold needs its evidence like SUPPORT/REFUTE;
- evidence score: IoU(P, G), with IoU(∅, ∅) = 1 (the paper's convention, reported as
  ``evidence_score`` with ``evidence_convention`` naming it). The Veri-R1 authors' code
  scores IoU = 0 whenever G = ∅; ``evidence_score_authors`` is computed that way, for
  comparisons with the paper's tables. The two differ only on items without gold
  evidence (typically NEI);
- evidence cover: G ⊆ P, for every gold label (the training diagnostic of §4.2).

The judgements follow a reward convention (``convention``, see
:mod:`factrl.rewards.veri_r1`): ``"paper"`` (the default) judges each episode's parsed
verdict; ``"authors_code"`` re-reads each episode's response text (its turns) as the
Veri-R1 authors' released reward code does — label, evidence ids and format its way, IoU 0
whenever G = ∅, and an episode without an answer covering an empty gold set — so
metrics and reward agree. The format-failure counts are always factrl's protocol kinds.

Episodes that ended in an error count as wrong (no label, no evidence, bad format), never
dropped: dropping them would flatter a system that crashes on hard claims. An episode
without an ``<answer>`` block, or one that errored, has evidence IoU 0 under both
conventions: it did not answer "no evidence", it did not answer at all.

Format failures by kind and episode errors by type are counted too
(:mod:`factrl.metrics.failures`). Trajectories that record the probability of their
label (``meta["confidence"]``, :mod:`factrl.metrics.label_confidence`) add calibration
(:mod:`factrl.metrics.confidence`, Veri-R1 §4.3).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from factrl.labels import Label
from factrl.metrics.classification import (
    accuracy,
    macro_f1,
    macro_precision,
    macro_recall,
    majority_baseline,
    ordered_labels,
    scores_by_group,
)
from factrl.metrics.confidence import calibration, confidence_tiers
from factrl.metrics.evidence import covers, evidence_set, exact, iou
from factrl.metrics.failures import FailureCounts
from factrl.types import Claim, Trajectory, Verdict

__all__ = [
    "ItemScore",
    "score_item",
    "score_authors_item",
    "compute_metrics",
    "MetricItem",
    "EVIDENCE_CONVENTION",
    "EVIDENCE_CONVENTIONS",
]

# The convention of ``evidence_score``, written into every metrics dict.
EVIDENCE_CONVENTION = "paper: IoU(empty, empty) = 1"
EVIDENCE_CONVENTIONS = {
    "paper": EVIDENCE_CONVENTION,
    "authors_code": "authors_code: IoU = 0 whenever gold evidence is empty",
}

# What compute_metrics accepts per item.
MetricItem = Trajectory | tuple[Claim, Verdict]


@dataclass(frozen=True)
class ItemScore:
    """The §3.2 judgements for one item."""

    gold_label: Label
    pred_label: Label | None
    label_correct: bool
    verified: bool
    joint: bool
    evidence_iou: float
    # IoU as the Veri-R1 authors' code computes it: 0 whenever gold evidence is empty.
    evidence_iou_authors: float
    has_gold_evidence: bool
    format_ok: bool
    error: bool = False
    reward: float | None = None
    # G ⊆ P (paper convention: only for an episode that answered).
    evidence_cover: bool = False


def score_item(
    gold_label: Label,
    gold_evidence: Sequence[str],
    verdict: Verdict,
    *,
    error: bool = False,
    reward: float | None = None,
) -> ItemScore:
    """Judge one verdict; with ``error`` set the verdict is ignored and scored as empty.
    An unanswered verdict (no ``<answer>`` block) or an errored one gets evidence IoU 0."""
    if error:
        verdict = Verdict(answered=False)
    pred = verdict.evidence_ids
    correct = verdict.label is not None and verdict.label == gold_label
    nei = gold_label is Label.NEI
    has_gold = bool(evidence_set(gold_evidence))
    overlap = iou(pred, gold_evidence) if verdict.answered else 0.0
    cover = verdict.answered and covers(pred, gold_evidence)
    return ItemScore(
        gold_label=gold_label,
        pred_label=verdict.label,
        label_correct=correct,
        verified=correct and (nei or covers(pred, gold_evidence)),
        joint=correct and (nei or exact(pred, gold_evidence)),
        evidence_iou=overlap,
        evidence_iou_authors=overlap if has_gold else 0.0,
        has_gold_evidence=has_gold,
        format_ok=verdict.format_ok,
        error=error,
        reward=reward,
        evidence_cover=cover,
    )


def score_authors_item(
    gold_label: Label,
    gold_evidence: Sequence[str],
    response: str,
    *,
    error: bool = False,
    reward: float | None = None,
) -> ItemScore:
    """Judge one response text as the Veri-R1 authors' reward code does (the
    ``authors_code`` convention); with ``error`` set the text is ignored (no answer).
    The predicted label is None unless the code read one of the three canonical spellings
    (``SUPPORTS`` is never correct there)."""
    from factrl.protocol.veri_r1_authors import authors_judge

    j = authors_judge("" if error else response, gold_label, gold_evidence)
    read = j.parse.label
    pred = Label(read) if read in (Label.SUPPORT.value, Label.REFUTE.value, Label.NEI.value) else None
    return ItemScore(
        gold_label=gold_label,
        pred_label=pred,
        label_correct=j.label_correct,
        verified=j.verified,
        joint=j.joint,
        evidence_iou=j.evidence,
        evidence_iou_authors=j.evidence,
        has_gold_evidence=bool(evidence_set(gold_evidence)),
        format_ok=j.format_ok,
        error=error,
        reward=reward,
        evidence_cover=j.cover,
    )


@dataclass(frozen=True)
class _Item:
    """One input item, unpacked: what scoring and failure counting need."""

    claim: Claim
    verdict: Verdict
    error: str | None
    reward: float | None
    shown_ids: Sequence[str] | None  # None: not known (a bare verdict)
    confidence: float | None = None
    traj: Trajectory | None = None


def _unpack(i: int, item: Any) -> _Item:
    if isinstance(item, Trajectory):
        r = item.reward
        # A default RewardBreakdown (no components, total 0) means "not scored".
        reward = r.total if (r.components or r.total) else None
        conf = item.meta.get("confidence")
        out = _Item(item.claim, item.verdict, item.error, reward, item.retrieved_ids,
                    None if conf is None else float(conf), item)
    elif isinstance(item, (tuple, list)) and len(item) == 2:
        claim, verdict = item
        if not isinstance(claim, Claim) or not isinstance(verdict, Verdict):
            raise TypeError(
                f"item {i}: expected (Claim, Verdict), got "
                f"({type(claim).__name__}, {type(verdict).__name__})"
            )
        out = _Item(claim, verdict, None, None, None)
    else:
        raise TypeError(
            f"item {i}: expected a Trajectory or a (Claim, Verdict) pair, got {type(item).__name__}"
        )
    if out.claim.label is None:
        raise ValueError(f"item {i}: claim {out.claim.id!r} has no gold label")
    return out


def _score(i: int, it: _Item, convention: str) -> ItemScore:
    assert it.claim.label is not None  # checked in _unpack
    error = it.error is not None
    if convention == "paper":
        return score_item(it.claim.label, it.claim.evidence_ids, it.verdict, error=error, reward=it.reward)
    from factrl.protocol.veri_r1_authors import trajectory_response

    if it.traj is None:
        raise TypeError(
            f"item {i}: convention 'authors_code' judges the response text; a (Claim, Verdict) "
            f"pair has none (pass the Trajectory)"
        )
    return score_authors_item(it.claim.label, it.claim.evidence_ids, trajectory_response(it.traj),
                              error=error, reward=it.reward)


def _mean(xs: Sequence[float | bool]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _rates(scores: Sequence[ItemScore]) -> dict[str, Any]:
    return {
        "n": len(scores),
        "label_acc": _mean([s.label_correct for s in scores]),
        "verification_acc": _mean([s.verified for s in scores]),
        "joint_acc": _mean([s.joint for s in scores]),
        "evidence_score": _mean([s.evidence_iou for s in scores]),
        "evidence_cover": _mean([s.evidence_cover for s in scores]),
    }


def _hops_key(h: Any) -> str:
    if h is None:
        return "unknown"
    if isinstance(h, float) and h.is_integer():
        h = int(h)
    return str(h).strip()


def _per_hops(gold: Sequence[Label], pred: Sequence[Label | None], hops: Sequence[Any]) -> dict[str, Any]:
    by_group = scores_by_group(gold, pred, [_hops_key(h) for h in hops])

    def order(key: str) -> tuple[int, float, str]:
        try:
            return (0, float(key), key)
        except ValueError:
            return (1, 0.0, key)

    return {str(k): v for k, v in sorted(by_group.items(), key=lambda kv: order(str(kv[0])))}


def _calibration(items: Sequence[_Item], scores: Sequence[ItemScore]) -> dict[str, Any] | None:
    """Calibration of the items that carry a confidence (None when none does): bins,
    ECE, MCE, Veri-R1's tiers overall and by predicted label."""
    rated = [(it.confidence, s) for it, s in zip(items, scores) if it.confidence is not None]
    if not rated:
        return None
    pairs = [(c, s.label_correct) for c, s in rated]
    out = calibration(pairs).to_dict()
    out["tiers"] = confidence_tiers(pairs)
    out["tiers_by_predicted_label"] = {
        lab.value: confidence_tiers([(c, s.label_correct) for c, s in rated if s.pred_label is lab])
        for lab in ordered_labels([s.pred_label for _, s in rated])
    }
    return out


def compute_metrics(items: Iterable[MetricItem], *, convention: str = "paper") -> dict[str, Any]:
    """All Veri-R1 metrics over ``items`` (Trajectory records or (Claim, Verdict) pairs).

    ``convention`` is the reward's (``"paper"`` or ``"authors_code"``, see the module
    docstring; ``authors_code`` needs Trajectory records with their turns), written into
    the dict as ``convention``.

    Returns a JSON-ready dict with the keys ``n``, ``label_acc``, ``verification_acc``,
    ``joint_acc``, ``evidence_score``, ``evidence_cover``, ``evidence_score_with_gold``
    (mean IoU over items with gold evidence), ``format_ok_rate``, ``macro_f1`` (over the
    labels in gold ∪ predicted), ``majority_baseline`` ``{label, acc}``, ``errors``,
    ``per_label`` ``{gold label: {n, label_acc, verification_acc, joint_acc,
    evidence_score, evidence_cover}}``, and ``mean_reward`` only when some item carries a
    reward. Rates are ``None`` when there is nothing to average (e.g. empty input).

    Beside Veri-R1's, the classification scores FFRR and HARIS report: ``accuracy`` (the
    same value as ``label_acc``), ``macro_precision``, ``macro_recall``, and — only when
    some claim carries ``meta["num_hops"]`` — ``per_hops`` ``{hops: {n, accuracy,
    macro_precision, macro_recall, macro_f1}}`` keyed by the hop count as a string
    (``"unknown"`` for claims without one), in numeric order.

    Also ``evidence_convention`` (:data:`EVIDENCE_CONVENTIONS`, the convention of
    ``evidence_score``), ``evidence_score_authors`` (IoU = 0 whenever gold is empty, as
    the Veri-R1 authors' code computes it), ``format_failures`` ``{kind: episodes}``,
    ``episodes_with_format_failures`` and ``episode_errors`` ``{stage/ExceptionType:
    episodes}`` (see :mod:`factrl.metrics.failures`).

    When some trajectory records ``meta["confidence"]`` (the probability of its label,
    filled by :func:`factrl.evaluate.evaluate`): ``calibration`` ``{n, ece, mce, bins,
    tiers, tiers_by_predicted_label}`` over those items (:func:`factrl.metrics.confidence.
    calibration` with 10 bins; tiers low < 0.85 < middle < 0.95 < high, Veri-R1 §4.3).
    """
    if convention not in EVIDENCE_CONVENTIONS:
        raise ValueError(f"convention must be one of {list(EVIDENCE_CONVENTIONS)}, got {convention!r}")
    unpacked = [_unpack(i, it) for i, it in enumerate(items)]
    scores = [_score(i, it, convention) for i, it in enumerate(unpacked)]
    failures = FailureCounts()
    for it in unpacked:
        failures.add(it.verdict, error=it.error, shown_ids=it.shown_ids)
    gold = [s.gold_label for s in scores]
    pred = [s.pred_label for s in scores]
    base = majority_baseline(gold)
    out = _rates(scores)
    out.update(
        convention=convention,
        evidence_convention=EVIDENCE_CONVENTIONS[convention],
        evidence_score_authors=_mean([s.evidence_iou_authors for s in scores]),
        evidence_score_with_gold=_mean([s.evidence_iou for s in scores if s.has_gold_evidence]),
        format_ok_rate=_mean([s.format_ok for s in scores]),
        macro_f1=macro_f1(gold, pred),
        macro_precision=macro_precision(gold, pred),
        macro_recall=macro_recall(gold, pred),
        accuracy=accuracy(gold, pred) if gold else None,
        majority_baseline={
            "label": base.label.value if base.label is not None else None,
            "acc": base.acc,
        },
        errors=sum(s.error for s in scores),
        per_label={
            lab.value: _rates([s for s in scores if s.gold_label is lab])
            for lab in ordered_labels(gold)
        },
    )
    hops = [it.claim.meta.get("num_hops") for it in unpacked]
    if any(h is not None for h in hops):
        out["per_hops"] = _per_hops(gold, pred, hops)
    out.update(failures.to_dict())
    calib = _calibration(unpacked, scores)
    if calib is not None:
        out["calibration"] = calib
    rewards = [s.reward for s in scores if s.reward is not None]
    if rewards:
        out["mean_reward"] = sum(rewards) / len(rewards)
    return out
