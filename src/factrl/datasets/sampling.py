"""Seeded, label-aware ordering of claims (the papers evaluate on class-balanced subsets)."""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from factrl.types import Claim

__all__ = ["interleave_labels", "split_claims"]


def interleave_labels(claims: Sequence[Claim], *, seed: int = 0) -> list[Claim]:
    """Round-robin over gold labels (each label's claims shuffled with ``seed``), so every
    prefix is as balanced as the data allows. Unlabelled claims come last."""
    rng = random.Random(seed)
    by_label: dict[str, list[Claim]] = defaultdict(list)
    for c in claims:
        by_label[c.label.value if c.label else ""].append(c)
    queues = []
    for key in sorted(k for k in by_label if k):
        group = list(by_label[key])
        rng.shuffle(group)
        queues.append(group)
    out: list[Claim] = []
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out + by_label.get("", [])


def split_claims(claims: Sequence[Claim], *, test_fraction: float, seed: int = 0) -> tuple[list[Claim], list[Claim]]:
    """A seeded split stratified by label: (train, held_out)."""
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    rng = random.Random(seed)
    by_label: dict[str, list[Claim]] = defaultdict(list)
    for c in claims:
        by_label[c.label.value if c.label else ""].append(c)
    train: list[Claim] = []
    test: list[Claim] = []
    for key in sorted(by_label):
        group = list(by_label[key])
        rng.shuffle(group)
        n_test = round(len(group) * test_fraction)
        test += group[:n_test]
        train += group[n_test:]
    return train, test
