"""Confidence intervals and paired tests for comparing two runs on the same items.

- :func:`wilson_interval`: a 95 % interval for an accuracy (k right of n);
- :func:`mcnemar_exact`: two systems' right/wrong on the same items (the discordant pairs);
  :func:`mcnemar_by_id` counts those pairs from two item id → right mappings;
- :func:`paired_permutation_test`: two systems' per-item scores (e.g. per-query nDCG@10),
  a two-sided sign-flip test of the mean difference;
- :func:`rank_sum_lower`: two groups of values (not paired), a one-sided rank-sum test
  that the first sits lower than the second;
- :func:`holm_adjust`: p-values of several tests read together, adjusted (Holm's
  step-down) so that a flag at 0.05 holds for the family, not for each test alone.
Pure Python, deterministic (a seeded generator), so every figure in the docs reproduces.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

__all__ = ["holm_adjust", "mcnemar_by_id", "mcnemar_exact", "paired_by_id", "paired_permutation_test",
           "rank_sum_lower", "wilson_interval"]


def wilson_interval(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of the proportion k / n (NaN, NaN for n = 0)."""
    if n == 0:
        return (math.nan, math.nan)
    if not 0 <= k <= n:
        raise ValueError(f"need 0 <= k <= n, got k={k}, n={n}")
    p = k / n
    d = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / d
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p: b items only the first system got right, c only the second."""
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be >= 0, got {b}, {c}")
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n)


def mcnemar_by_id(a: Mapping[str, bool], b: Mapping[str, bool]) -> tuple[int, int, float]:
    """On the items both mappings (item id → right) hold: how many only ``a`` got right, how
    many only ``b``, and the exact McNemar p of the two."""
    ids = set(a) & set(b)
    only_a = sum(1 for i in ids if a[i] and not b[i])
    only_b = sum(1 for i in ids if b[i] and not a[i])
    return only_a, only_b, mcnemar_exact(only_a, only_b)


def paired_permutation_test(a: Sequence[float], b: Sequence[float], *, rounds: int = 10000,
                            seed: int = 0) -> dict[str, float]:
    """Two-sided paired sign-flip test of mean(a − b) = 0 over the same items.

    Exact (all 2^m sign patterns of the m non-zero differences) when m ≤ 16, else
    ``rounds`` random patterns; p counts patterns at least as extreme as the observed
    one, the observed one included. Returns ``mean_diff``, ``p``, ``n`` (items),
    ``wins`` / ``losses`` (items where a is above / below b)."""
    if len(a) != len(b):
        raise ValueError(f"{len(a)} scores against {len(b)}: a paired test needs the same items")
    if not a:
        raise ValueError("no items to compare")
    diffs = [float(x) - float(y) for x, y in zip(a, b)]
    if not all(math.isfinite(d) for d in diffs):
        raise ValueError("scores must be finite")
    observed = abs(math.fsum(diffs))
    nonzero = [d for d in diffs if d != 0.0]
    m = len(nonzero)
    tol = 1e-12 * max(1.0, observed)
    if m == 0:
        p = 1.0
    elif m <= 16:
        hits = sum(1 for mask in range(2**m)
                   if abs(math.fsum(d if mask >> i & 1 else -d for i, d in enumerate(nonzero))) >= observed - tol)
        p = hits / 2**m
    else:
        rng = random.Random(seed)
        hits = sum(1 for _ in range(rounds)
                   if abs(math.fsum(d if rng.random() < 0.5 else -d for d in nonzero)) >= observed - tol)
        p = (hits + 1) / (rounds + 1)
    return {"mean_diff": math.fsum(diffs) / len(diffs), "p": p, "n": float(len(diffs)),
            "wins": float(sum(d > 0 for d in diffs)), "losses": float(sum(d < 0 for d in diffs))}


def paired_by_id(a: Mapping[str, float], b: Mapping[str, float], **kw: int) -> dict[str, float]:
    """:func:`paired_permutation_test` on the items both mappings (item id → score) hold."""
    ids = sorted(set(a) & set(b))
    return paired_permutation_test([a[i] for i in ids], [b[i] for i in ids], **kw)


def rank_sum_lower(a: Sequence[float], b: Sequence[float], *, rounds: int = 10000, seed: int = 0) -> float:
    """One-sided p that the values in ``a`` sit lower than those in ``b``: the Wilcoxon
    rank-sum (Mann–Whitney) statistic, the sum of ``a``'s mid-ranks in the pooled values,
    against its distribution over every way to split the pooled values into groups of
    ``len(a)`` and ``len(b)`` — exact when there are at most 20,000 such splits, else
    ``rounds`` random ones (p then counts the observed split too). p counts the splits
    whose sum is at most the observed one."""
    if not a or not b:
        raise ValueError("a rank-sum test needs values in both groups")
    pooled = [float(x) for x in (*a, *b)]
    if not all(math.isfinite(x) for x in pooled):
        raise ValueError("values must be finite")
    order = sorted(range(len(pooled)), key=pooled.__getitem__)
    ranks = [0.0] * len(pooled)
    i = 0
    while i < len(order):  # mid-ranks for ties
        j = i
        while j + 1 < len(order) and pooled[order[j + 1]] == pooled[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    k, observed = len(a), sum(ranks[:len(a)])
    tol = 1e-9
    if math.comb(len(pooled), k) <= 20000:
        from itertools import combinations

        sums = [sum(c) for c in combinations(ranks, k)]
        return sum(x <= observed + tol for x in sums) / len(sums)
    rng = random.Random(seed)
    hits = sum(sum(rng.sample(ranks, k)) <= observed + tol for _ in range(rounds))
    return (hits + 1) / (rounds + 1)


def holm_adjust(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``ps`` (in their order): the i-th smallest p times the
    number of tests not yet passed (m - i), made non-decreasing in that order and capped at
    1. Rejecting where the adjusted p < alpha keeps the chance of any false flag among the
    m tests at most alpha, whatever their dependence."""
    if not all(0.0 <= p <= 1.0 for p in ps):
        raise ValueError(f"p-values must lie in [0, 1], got {list(ps)}")
    m = len(ps)
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(sorted(range(m), key=lambda j: ps[j])):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        out[i] = running
    return out
