"""Confidence against accuracy (Veri-R1 §4.3) and expected calibration error.

Each item is a ``(confidence, correct)`` pair: the probability the model gave the label
token it answered with (Veri-R1 calls it the label's "logit"; we take a probability in
[0, 1], e.g. ``Trajectory.meta["confidence"]``) and whether that label was right.

- **Bins**: ``n_bins`` equal-width bins over [0, 1]; bin b holds confidences in
  (b/B, (b+1)/B], the first bin also holds 0 (Guo et al., 2017: I_m = ((m−1)/M, m/M]).
  A confidence on an edge goes to the lower bin, decided against the edges b/B as floats,
  so 0.3 lands in (0.2, 0.3] although 0.3·10 > 3 in floating point.
- Per bin: n, accuracy (mean of correct) and mean confidence; ``None`` for an empty bin.
- **ECE** = Σ_b (n_b / n) · |accuracy_b − confidence_b| (Guo et al., 2017); **MCE** is the
  largest |accuracy_b − confidence_b| over non-empty bins. ``None`` for no items.
- **Veri-R1's tiers** (§4.3): low confidence < 0.85, high > 0.95, and the rest in
  between; accuracy per tier (:func:`confidence_tiers`).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

__all__ = [
    "ConfidenceBin",
    "Calibration",
    "calibration",
    "expected_calibration_error",
    "confidence_tiers",
    "confidence_pairs",
]


@dataclass(frozen=True)
class ConfidenceBin:
    lower: float  # exclusive, except 0 in the first bin
    upper: float  # inclusive
    n: int
    accuracy: float | None
    confidence: float | None  # mean confidence of the bin's items


@dataclass(frozen=True)
class Calibration:
    n: int
    bins: tuple[ConfidenceBin, ...]
    ece: float | None
    mce: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "ece": self.ece, "mce": self.mce, "bins": [asdict(b) for b in self.bins]}


def _checked(pairs: Iterable[tuple[float, bool]]) -> list[tuple[float, bool]]:
    out = []
    for i, (conf, correct) in enumerate(pairs):
        c = float(conf)
        if not math.isfinite(c) or not 0.0 <= c <= 1.0:
            raise ValueError(f"item {i}: confidence {conf!r} is not a probability in [0, 1]")
        out.append((c, bool(correct)))
    return out


def calibration(pairs: Iterable[tuple[float, bool]], n_bins: int = 10) -> Calibration:
    """Accuracy by equal-width confidence bin, ECE and MCE over ``(confidence, correct)``."""
    if n_bins < 1:
        raise ValueError(f"n_bins must be at least 1, got {n_bins}")
    items = _checked(pairs)
    uppers = [(b + 1) / n_bins for b in range(n_bins)]
    members: list[list[tuple[float, bool]]] = [[] for _ in range(n_bins)]
    for c, ok in items:
        members[min(bisect_left(uppers, c), n_bins - 1)].append((c, ok))
    bins = []
    for b, m in enumerate(members):
        acc = sum(ok for _, ok in m) / len(m) if m else None
        conf = sum(c for c, _ in m) / len(m) if m else None
        bins.append(ConfidenceBin(lower=b / n_bins, upper=uppers[b], n=len(m), accuracy=acc, confidence=conf))
    gaps = [
        (x.n, abs(x.accuracy - x.confidence))
        for x in bins
        if x.accuracy is not None and x.confidence is not None
    ]
    n = len(items)
    ece = sum(k * gap for k, gap in gaps) / n if n else None
    mce = max(gap for _, gap in gaps) if gaps else None
    return Calibration(n=n, bins=tuple(bins), ece=ece, mce=mce)


def expected_calibration_error(pairs: Iterable[tuple[float, bool]], n_bins: int = 10) -> float | None:
    """ECE with ``n_bins`` equal-width bins (see module doc); ``None`` for no items."""
    return calibration(pairs, n_bins).ece


def confidence_tiers(
    pairs: Iterable[tuple[float, bool]], low: float = 0.85, high: float = 0.95
) -> dict[str, dict[str, Any]]:
    """Veri-R1 §4.3's tiers: ``{"low": {n, accuracy}, "middle": ..., "high": ...}`` with
    low = confidence < ``low``, high = confidence > ``high``, middle the rest."""
    if not low <= high:
        raise ValueError(f"low ({low}) must not exceed high ({high})")
    tiers: dict[str, list[bool]] = {"low": [], "middle": [], "high": []}
    for c, ok in _checked(pairs):
        tiers["low" if c < low else "high" if c > high else "middle"].append(ok)
    return {k: {"n": len(v), "accuracy": sum(v) / len(v) if v else None} for k, v in tiers.items()}


def confidence_pairs(trajectories: Iterable[Any], key: str = "confidence") -> list[tuple[float, bool]]:
    """``(meta[key], label correct)`` of every trajectory that records a confidence; an
    episode without one (no label, or an error) is left out."""
    out = []
    for t in trajectories:
        conf = t.meta.get(key)
        if conf is None:
            continue
        out.append((float(conf), t.verdict.label is not None and t.verdict.label == t.claim.label))
    return out
