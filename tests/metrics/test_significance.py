"""Wilson intervals, exact McNemar and the paired sign-flip test."""

import math

import pytest

from factrl.metrics.significance import (
    mcnemar_by_id,
    mcnemar_exact,
    paired_by_id,
    paired_permutation_test,
    wilson_interval,
)


def test_wilson_interval_brackets_the_proportion():
    lo, hi = wilson_interval(30, 61)
    assert lo < 30 / 61 < hi and 0 <= lo and hi <= 1
    assert wilson_interval(0, 10)[0] == 0.0 and wilson_interval(10, 10)[1] == 1.0
    assert all(math.isnan(x) for x in wilson_interval(0, 0))
    assert wilson_interval(50, 100) == pytest.approx((0.4038, 0.5962), abs=1e-4)  # textbook value
    with pytest.raises(ValueError):
        wilson_interval(5, 3)


def test_mcnemar_exact_values():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(12, 0) == pytest.approx(2 / 2**12)  # the 0.000488 of the docs
    assert mcnemar_exact(3, 5) == mcnemar_exact(5, 3) == pytest.approx(0.7265625)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def test_paired_permutation_test_exact_and_sampled():
    # one item better by 1, nothing else differs: 2 sign patterns, both as extreme
    r = paired_permutation_test([1.0, 0.5, 0.5], [0.0, 0.5, 0.5])
    assert r["p"] == 1.0 and r["wins"] == 1 and r["losses"] == 0 and r["mean_diff"] == pytest.approx(1 / 3)
    # five items all better: only the all-plus and all-minus patterns reach it, p = 2/32
    r = paired_permutation_test([1.0] * 5, [0.0] * 5)
    assert r["p"] == pytest.approx(2 / 32)
    # identical systems: p = 1; a large consistent gain: tiny p (sampled path, m > 16)
    assert paired_permutation_test([0.3] * 40, [0.3] * 40)["p"] == 1.0
    big = paired_permutation_test([0.6 + 0.01 * (i % 3) for i in range(40)], [0.5] * 40)
    assert big["p"] < 0.001 and big["n"] == 40
    noisy = paired_permutation_test([0.5 + (0.1 if i % 2 else -0.1) for i in range(40)], [0.5] * 40)
    assert noisy["p"] > 0.5  # gains and losses cancel
    with pytest.raises(ValueError, match="same items"):
        paired_permutation_test([1.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="no items"):
        paired_permutation_test([], [])


def test_paired_by_id_pairs_the_shared_items_only():
    a = {"q1": 1.0, "q2": 1.0, "q3": 1.0, "only_a": 0.0}
    b = {"q3": 0.0, "q2": 0.0, "q1": 0.0, "only_b": 1.0}
    r = paired_by_id(a, b)
    assert r["n"] == 3 and r["wins"] == 3 and r["mean_diff"] == 1.0 and r["p"] == pytest.approx(2 / 8)


def test_mcnemar_by_id_counts_the_discordant_shared_items_only():
    a = {"both": True, "a1": True, "a2": True, "a3": True, "b1": False, "neither": False, "only_in_a": True}
    b = {"both": True, "a1": False, "a2": False, "a3": False, "b1": True, "neither": False, "only_in_b": True}
    only_a, only_b, p = mcnemar_by_id(a, b)
    assert (only_a, only_b) == (3, 1)
    assert p == pytest.approx(mcnemar_exact(3, 1)) and p == pytest.approx(0.625)
    assert mcnemar_by_id(b, a)[:2] == (1, 3)
    assert mcnemar_by_id({}, b) == (0, 0, 1.0)


def test_rank_sum_lower_is_exact_on_small_groups_and_seeded_on_large_ones():
    from factrl.metrics.significance import rank_sum_lower

    assert rank_sum_lower([1, 2, 3], [4, 5, 6]) == pytest.approx(1 / 20)  # the lowest of C(6, 3) splits
    assert rank_sum_lower([4, 5, 6], [1, 2, 3]) == 1.0
    # ties take mid-ranks; the same p as scipy.stats.mannwhitneyu(..., alternative="less", method="exact")
    assert rank_sum_lower([0.5, 0.6, 0.62, 0.9], [0.55, 0.95, 0.97, 0.99, 0.7]) == pytest.approx(2 / 21)
    assert rank_sum_lower([1, 1], [1, 1]) == 1.0
    big = rank_sum_lower(list(range(30)), list(range(30, 70)))
    assert big == pytest.approx(1 / 10001) and big == rank_sum_lower(list(range(30)), list(range(30, 70)))
    with pytest.raises(ValueError, match="both groups"):
        rank_sum_lower([], [1.0])
    with pytest.raises(ValueError, match="finite"):
        rank_sum_lower([float("nan")], [1.0])


def test_holm_adjust_steps_down_and_keeps_the_order_of_its_input():
    from factrl.metrics.significance import holm_adjust

    assert holm_adjust([]) == []
    assert holm_adjust([0.03]) == [0.03]
    # sorted 0.01, 0.02, 0.04 -> 3 * 0.01, 2 * 0.02, 1 * 0.04, made non-decreasing
    assert holm_adjust([0.04, 0.01, 0.02]) == pytest.approx([0.04, 0.03, 0.04])
    assert holm_adjust([0.5, 0.6]) == [1.0, 1.0]  # capped at 1
    with pytest.raises(ValueError, match="p-values"):
        holm_adjust([1.2])
