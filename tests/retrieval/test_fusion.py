import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factrl.retrieval.fusion import minmax, rrf, score_fusion, zscore

A = [("a", 9.0), ("b", 7.0), ("c", 1.0)]
B = [("c", 0.9), ("a", 0.8), ("d", 0.1)]


def test_rrf_by_hand() -> None:
    fused = dict(rrf([A, B], k=60))
    # a: ranks 1 and 2; b: rank 2 in A only; c: ranks 3 and 1; d: rank 3 in B only.
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["d"] == pytest.approx(1 / 63)
    assert [d for d, _ in rrf([A, B], k=60)] == ["a", "c", "b", "d"]


def test_rrf_depth_weights_and_k() -> None:
    # depth 1: only each run's top item counts.
    assert rrf([A, B], k=0, depth=1) == [("a", 1.0), ("c", 1.0)]
    fused = dict(rrf([A, B], k=1, weights=[2.0, 0.0]))
    assert fused["a"] == pytest.approx(2 / 2) and fused["b"] == pytest.approx(2 / 3) and fused["d"] == 0.0
    with pytest.raises(ValueError, match="2 runs"):
        rrf([A, B], weights=[1.0])
    with pytest.raises(ValueError, match="depth"):
        rrf([A, B], depth=0)


def test_rrf_ties_keep_first_seen_order_and_duplicates_count_once() -> None:
    # x and y tie (each rank 1 in one run): x was seen first.
    assert [d for d, _ in rrf([[("x", 1)], [("y", 1)]])] == ["x", "y"]
    assert [d for d, _ in rrf([[("y", 1)], [("x", 1)]])] == ["y", "x"]
    fused = dict(rrf([[("x", 3), ("x", 2), ("z", 1)]], k=0))
    assert fused == {"x": 1.0, "z": 0.5}


def test_minmax_and_zscore_by_hand() -> None:
    assert minmax([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert minmax([5.0, 5.0]) == [1.0, 1.0]
    z = zscore([1.0, 2.0, 3.0])
    sd = math.sqrt(2 / 3)
    assert z == pytest.approx([-1 / sd, 0.0, 1 / sd])
    assert zscore([4.0, 4.0]) == [0.0, 0.0]
    assert minmax([]) == [] and zscore([]) == []


def test_score_fusion_minmax_by_hand() -> None:
    fused = dict(score_fusion([A, B], norm="minmax", weights=[1.0, 1.0]))
    # A normalised: a 1, b 0.75, c 0; B normalised: c 1, a 0.875, d 0. Missing → 0 (the run's floor).
    assert fused["a"] == pytest.approx(1 + 0.875)
    assert fused["b"] == pytest.approx(0.75 + 0)
    assert fused["c"] == pytest.approx(0 + 1)
    assert fused["d"] == pytest.approx(0 + 0)
    order = [d for d, _ in score_fusion([A, B], norm="minmax", weights=[0.0, 1.0])]
    assert order[:2] == ["c", "a"]


def test_score_fusion_zscore_missing_gets_run_floor() -> None:
    fused = dict(score_fusion([A, B], norm="zscore"))
    za = dict(zip("abc", zscore([9.0, 7.0, 1.0])))
    zb = dict(zip("cad", zscore([0.9, 0.8, 0.1])))
    assert fused["b"] == pytest.approx(za["b"] + min(zb.values()))
    assert fused["d"] == pytest.approx(min(za.values()) + zb["d"])
    with pytest.raises(ValueError, match="normalisation"):
        score_fusion([A], norm="softmax")


@given(st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=8), min_size=1, max_size=4))
def test_rrf_is_a_ranking_of_the_union(runs_ids: list[list[str]]) -> None:
    runs = [[(d, 0.0) for d in ids] for ids in runs_ids]
    fused = rrf(runs)
    ids = [d for d, _ in fused]
    assert len(ids) == len(set(ids)) == len({d for r in runs_ids for d in r})
    scores = [s for _, s in fused]
    assert scores == sorted(scores, reverse=True)
