"""Seeded, label-aware ordering of claims (the papers evaluate on class-balanced subsets)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from factrl.types import Claim

__all__ = ["by_grade", "by_label", "interleave_labels", "split_claims"]

ClaimKey = Callable[[Claim], str]


def by_label(claim: Claim) -> str:
    """The gold label's value ("" when unlabelled): the default stratum."""
    return claim.label.value if claim.label else ""


def by_grade(claim: Claim) -> str:
    """The graded rating of a news claim (``meta["grade"]``, see ``news_graded``), falling
    back to the label for claims without one: balances all six LIAR-RAW grades rather than
    the three labels they map to."""
    grade = claim.meta.get("grade")
    return grade if isinstance(grade, str) and grade else by_label(claim)


def interleave_labels(claims: Sequence[Claim], *, seed: int = 0, key: ClaimKey = by_label,
                      weights: Mapping[str, int] | None = None) -> list[Claim]:
    """Round-robin over gold labels (each label's claims shuffled with ``seed``), so every
    prefix is as balanced as the data allows. Unlabelled claims come last. ``key`` picks
    another stratum, e.g. :func:`by_grade`. ``weights`` (stratum → claims per round,
    default 1 each) skews the mix: ``{"NOT ENOUGH INFO": 2}`` deals two NOT ENOUGH INFO
    claims per SUPPORT and REFUTE one while every label still has claims."""
    weights = dict(weights or {})
    bad = {k: w for k, w in weights.items() if not isinstance(w, int) or isinstance(w, bool) or w < 1}
    if bad:
        raise ValueError(f"label weights must be whole numbers >= 1, got {bad}")
    rng = random.Random(seed)
    groups: dict[str, list[Claim]] = defaultdict(list)
    for c in claims:
        groups[key(c)].append(c)
    queues = []
    for k in sorted(k for k in groups if k):
        group = list(groups[k])
        rng.shuffle(group)
        queues.append((group, weights.get(k, 1)))
    out: list[Claim] = []
    while any(q for q, _ in queues):
        for q, w in queues:
            out += q[:w]
            del q[:w]
    return out + groups.get("", [])


def split_claims(
    claims: Sequence[Claim], *, test_fraction: float, seed: int = 0, key: ClaimKey = by_label
) -> tuple[list[Claim], list[Claim]]:
    """A seeded split stratified by label (or by ``key``): (train, held_out).
    ``test_fraction = 0`` holds nothing out (every claim trains)."""
    if not 0.0 <= test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in [0, 1), got {test_fraction}")
    rng = random.Random(seed)
    groups: dict[str, list[Claim]] = defaultdict(list)
    for c in claims:
        groups[key(c)].append(c)
    train: list[Claim] = []
    test: list[Claim] = []
    for k in sorted(groups):
        group = list(groups[k])
        rng.shuffle(group)
        n_test = round(len(group) * test_fraction)
        test += group[:n_test]
        train += group[n_test:]
    return train, test
