"""Set comparisons between predicted and gold evidence ids (Veri-R1 §2.3, §3.2).

Every function treats its inputs as *sets* of ids: duplicates in a prediction count once,
order does not matter. Ids are compared after :func:`evidence_set` normalisation
(surrounding whitespace stripped, Unicode NFC), because Wikipedia titles with accents reach
us in both composed and decomposed forms and would otherwise never match.

Empty sets, decided once here so rewards and metrics agree:

- ``iou(∅, ∅) = 1``: a claim without gold evidence (typically NEI) answered with no
  evidence is an exact match. (The Veri-R1 authors' released reward code scores it 0; the
  reward config can reproduce that, see :class:`factrl.rewards.VeriR1RewardConfig`.)
  Only an episode that answered gets here: one with no ``<answer>`` block (or one that
  crashed) scores evidence 0 in the reward and metrics, never IoU(∅, ∅).
- ``hit_rate(P, ∅) = 1``: nothing was required, so nothing was missed.
- ``covers(P, ∅)`` is True, ``exact(∅, ∅)`` is True.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable

__all__ = ["evidence_set", "iou", "hit_rate", "covers", "exact"]


def evidence_set(ids: Iterable[str]) -> frozenset[str]:
    """The normalised set of evidence ids; empty strings are dropped.

    A bare ``str`` is rejected: iterating it would silently compare characters.
    """
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"evidence ids must be a sequence of ids, not a single string: {ids!r}")
    out = set()
    for i in ids:
        if not isinstance(i, str):
            raise TypeError(f"evidence id must be a string, got {type(i).__name__}: {i!r}")
        key = unicodedata.normalize("NFC", i.strip())
        if key:
            out.add(key)
    return frozenset(out)


def iou(pred: Iterable[str], gold: Iterable[str]) -> float:
    """|P ∩ G| / |P ∪ G|, with IoU(∅, ∅) = 1."""
    p, g = evidence_set(pred), evidence_set(gold)
    union = p | g
    if not union:
        return 1.0
    return len(p & g) / len(union)


def hit_rate(pred: Iterable[str], gold: Iterable[str]) -> float:
    """|P ∩ G| / |G| (the share of gold evidence found), with h = 1 when G is empty."""
    p, g = evidence_set(pred), evidence_set(gold)
    if not g:
        return 1.0
    return len(p & g) / len(g)


def covers(pred: Iterable[str], gold: Iterable[str]) -> bool:
    """True when every gold id was predicted (G ⊆ P); extra predictions are allowed."""
    return evidence_set(gold) <= evidence_set(pred)


def exact(pred: Iterable[str], gold: Iterable[str]) -> bool:
    """True when the predicted set equals the gold set (P == G)."""
    return evidence_set(pred) == evidence_set(gold)
