"""Seeded, label-aware ordering of claims (the papers evaluate on class-balanced subsets)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Sequence

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


def interleave_labels(claims: Sequence[Claim], *, seed: int = 0, key: ClaimKey = by_label) -> list[Claim]:
    """Round-robin over gold labels (each label's claims shuffled with ``seed``), so every
    prefix is as balanced as the data allows. Unlabelled claims come last. ``key`` picks
    another stratum, e.g. :func:`by_grade`."""
    rng = random.Random(seed)
    groups: dict[str, list[Claim]] = defaultdict(list)
    for c in claims:
        groups[key(c)].append(c)
    queues = []
    for k in sorted(k for k in groups if k):
        group = list(groups[k])
        rng.shuffle(group)
        queues.append(group)
    out: list[Claim] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
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
