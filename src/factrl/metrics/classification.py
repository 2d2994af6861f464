"""Label metrics: accuracy, per-class precision/recall/F1, macro precision/recall/F1
(FFRR, HARIS report these), scores per hop count, confusion matrix and the majority-class
baseline.

Labels may be any hashable value (:class:`~factrl.labels.Label`, or the graded strings of
news datasets); a prediction of ``None`` means the answer could not be parsed. Definitions
follow scikit-learn's (``precision_recall_fscore_support``, ``f1_score(average="macro")``,
``zero_division=0``):

- precision_c = TP / (TP + FP), recall_c = TP / (TP + FN), F1_c = 2PR / (P + R); any ratio
  whose denominator is 0 is 0.
- Macro-F1 is the unweighted mean of F1_c over the classes present in gold ∪ predicted
  (scikit-learn's default label set); macro precision and macro recall likewise average
  precision_c and recall_c. Macro-F1 is the mean of per-class F1s, not the F1 of the
  macro precision and recall (FFRR writes F1 = 2RP/(R+P); scikit-learn and we average).
  A class the model invents but gold never has adds an F1 of 0 and so lowers the score;
  a class neither side uses does not count.
- ``None`` (unparsed) is *not* a class: it never adds a false positive and is not
  averaged over, but it is a false negative for its gold class, so it lowers recall.
  (scikit-learn would instead treat ``None`` as one more label; passing
  ``labels=`` without it there gives our numbers.)

Every function returns ``None`` instead of a rate for empty input.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

__all__ = [
    "PRF",
    "ConfusionMatrix",
    "MajorityBaseline",
    "accuracy",
    "per_class_prf",
    "macro_f1",
    "macro_precision",
    "macro_recall",
    "scores_by_group",
    "confusion_matrix",
    "majority_baseline",
    "ordered_labels",
]

T = TypeVar("T", bound=Hashable)


@dataclass(frozen=True)
class PRF:
    precision: float
    recall: float
    f1: float
    support: int  # number of gold items of this class


@dataclass(frozen=True)
class MajorityBaseline(Generic[T]):
    """Accuracy of always predicting the most frequent gold label."""

    label: T | None
    acc: float | None


@dataclass(frozen=True)
class ConfusionMatrix(Generic[T]):
    """``counts[i][j]`` = items with gold ``labels[i]`` predicted as ``labels[j]``;
    ``unparsed[i]`` = items with gold ``labels[i]`` whose prediction was ``None``."""

    labels: tuple[T, ...]
    counts: tuple[tuple[int, ...], ...]
    unparsed: tuple[int, ...]

    def count(self, gold: T, pred: T | None) -> int:
        i = self.labels.index(gold)
        if pred is None:
            return self.unparsed[i]
        return self.counts[i][self.labels.index(pred)]

    def to_dict(self) -> dict[str, dict[str, int]]:
        """``{gold: {pred: n, ..., "UNPARSED": n}}`` with labels as strings (JSON-ready)."""
        out: dict[str, dict[str, int]] = {}
        for i, g in enumerate(self.labels):
            row = {_name(p): self.counts[i][j] for j, p in enumerate(self.labels)}
            row["UNPARSED"] = self.unparsed[i]
            out[_name(g)] = row
        return out


def _name(label: Any) -> str:
    return label.value if isinstance(label, Enum) else str(label)


def ordered_labels(labels: Iterable[T | None]) -> list[T]:
    """The distinct non-None labels in a stable order: enum definition order when they are
    all members of one Enum, else sorted by their string form."""
    distinct = {x for x in labels if x is not None}
    if not distinct:
        return []
    enums = {type(x) for x in distinct}
    if len(enums) == 1 and issubclass(next(iter(enums)), Enum):
        return [m for m in next(iter(enums)) if m in distinct]  # type: ignore[misc]
    return sorted(distinct, key=_name)


def _check(gold: Sequence[T], pred: Sequence[T | None]) -> None:
    if len(gold) != len(pred):
        raise ValueError(f"gold and pred differ in length: {len(gold)} vs {len(pred)}")
    for i, g in enumerate(gold):
        if g is None:
            raise ValueError(f"gold label at position {i} is None; every item needs a gold label")


def accuracy(gold: Sequence[T], pred: Sequence[T | None]) -> float | None:
    """Share of items whose prediction equals the gold label (``None`` is always wrong)."""
    _check(gold, pred)
    if not gold:
        return None
    return sum(1 for g, p in zip(gold, pred) if p is not None and p == g) / len(gold)


def per_class_prf(
    gold: Sequence[T], pred: Sequence[T | None], labels: Sequence[T] | None = None
) -> dict[T, PRF]:
    """Precision, recall, F1 and support per class, for ``labels`` (default: gold ∪ predicted)."""
    _check(gold, pred)
    if labels is None:
        labels = ordered_labels([*gold, *pred])
    tp: Counter[T] = Counter()
    fp: Counter[T] = Counter()
    fn: Counter[T] = Counter()
    for g, p in zip(gold, pred):
        if p is not None and p == g:
            tp[g] += 1
            continue
        fn[g] += 1
        if p is not None:
            fp[p] += 1
    out: dict[T, PRF] = {}
    for c in labels:
        prec = _div(tp[c], tp[c] + fp[c])
        rec = _div(tp[c], tp[c] + fn[c])
        f1 = _div(2 * prec * rec, prec + rec)
        out[c] = PRF(precision=prec, recall=rec, f1=f1, support=tp[c] + fn[c])
    return out


def macro_f1(
    gold: Sequence[T], pred: Sequence[T | None], labels: Sequence[T] | None = None
) -> float | None:
    """Unweighted mean F1 over ``labels`` (default: classes in gold ∪ predicted)."""
    prf = per_class_prf(gold, pred, labels)
    if not gold or not prf:
        return None
    return sum(x.f1 for x in prf.values()) / len(prf)


def macro_precision(
    gold: Sequence[T], pred: Sequence[T | None], labels: Sequence[T] | None = None
) -> float | None:
    """Unweighted mean precision over ``labels`` (default: classes in gold ∪ predicted)."""
    prf = per_class_prf(gold, pred, labels)
    if not gold or not prf:
        return None
    return sum(x.precision for x in prf.values()) / len(prf)


def macro_recall(
    gold: Sequence[T], pred: Sequence[T | None], labels: Sequence[T] | None = None
) -> float | None:
    """Unweighted mean recall over ``labels`` (default: classes in gold ∪ predicted)."""
    prf = per_class_prf(gold, pred, labels)
    if not gold or not prf:
        return None
    return sum(x.recall for x in prf.values()) / len(prf)


def scores_by_group(
    gold: Sequence[T], pred: Sequence[T | None], groups: Sequence[Hashable]
) -> dict[Hashable, dict[str, Any]]:
    """``{group: {n, accuracy, macro_precision, macro_recall, macro_f1}}`` over the items
    of each group (e.g. hop count), each group's macro averages taken over the classes in
    that group's gold ∪ predicted, as a separate evaluation of that subset would."""
    _check(gold, pred)
    if len(groups) != len(gold):
        raise ValueError(f"groups and gold differ in length: {len(groups)} vs {len(gold)}")
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    out: dict[Hashable, dict[str, Any]] = {}
    for key, idx in members.items():
        g_sub, p_sub = [gold[i] for i in idx], [pred[i] for i in idx]
        out[key] = {
            "n": len(idx),
            "accuracy": accuracy(g_sub, p_sub),
            "macro_precision": macro_precision(g_sub, p_sub),
            "macro_recall": macro_recall(g_sub, p_sub),
            "macro_f1": macro_f1(g_sub, p_sub),
        }
    return out


def confusion_matrix(
    gold: Sequence[T], pred: Sequence[T | None], labels: Sequence[T] | None = None
) -> ConfusionMatrix[T]:
    """Counts of (gold, predicted) pairs; unparsed predictions get their own column."""
    _check(gold, pred)
    labs = tuple(ordered_labels([*gold, *pred]) if labels is None else labels)
    index = {c: i for i, c in enumerate(labs)}
    counts = [[0] * len(labs) for _ in labs]
    unparsed = [0] * len(labs)
    for n, (g, p) in enumerate(zip(gold, pred)):
        if g not in index or (p is not None and p not in index):
            raise ValueError(f"item {n}: label {g if g not in index else p!r} not in {labs!r}")
        if p is None:
            unparsed[index[g]] += 1
        else:
            counts[index[g]][index[p]] += 1
    return ConfusionMatrix(
        labels=labs, counts=tuple(tuple(r) for r in counts), unparsed=tuple(unparsed)
    )


def majority_baseline(gold_labels: Sequence[T]) -> MajorityBaseline[T]:
    """The most frequent gold label and the accuracy of always predicting it.

    Ties go to the first label in :func:`ordered_labels` order, so the result is
    deterministic. Empty input gives ``MajorityBaseline(None, None)``.
    """
    if not gold_labels:
        return MajorityBaseline(label=None, acc=None)
    _check(gold_labels, gold_labels)
    freq = Counter(gold_labels)
    top = max(freq.values())
    label = next(c for c in ordered_labels(gold_labels) if freq[c] == top)
    return MajorityBaseline(label=label, acc=top / len(gold_labels))


def _div(num: float, den: float) -> float:
    return num / den if den else 0.0
