"""Confidence bins, ECE and Veri-R1's tiers on hand-computed examples."""

from __future__ import annotations

import pytest

from factrl.labels import Label
from factrl.metrics.confidence import (
    calibration,
    confidence_pairs,
    confidence_tiers,
    expected_calibration_error,
)
from factrl.types import Claim, Trajectory, Verdict

PAIRS = [(0.95, True), (0.92, False), (0.85, True), (0.62, True), (0.55, False), (0.3, False)]


def test_bins_and_ece_by_hand() -> None:
    cal = calibration(PAIRS)
    assert cal.n == 6 and len(cal.bins) == 10
    by_upper = {round(b.upper, 1): b for b in cal.bins if b.n}
    # (0.9, 1]: 0.95 ✓, 0.92 ✗ → acc 1/2, conf 0.935, gap 0.435
    assert by_upper[1.0].n == 2 and by_upper[1.0].accuracy == 0.5
    assert by_upper[1.0].confidence == pytest.approx(0.935)
    # (0.8, 0.9]: 0.85 ✓ gap 0.15; (0.6, 0.7]: 0.62 ✓ gap 0.38; (0.5, 0.6]: 0.55 ✗ gap 0.55
    assert (by_upper[0.9].accuracy, by_upper[0.7].accuracy, by_upper[0.6].accuracy) == (1.0, 1.0, 0.0)
    # 0.3 is an edge: it falls in (0.2, 0.3] although 0.3 * 10 > 3 in floating point.
    assert by_upper[0.3].n == 1 and by_upper[0.3].lower == pytest.approx(0.2)
    assert sorted(by_upper) == [0.3, 0.6, 0.7, 0.9, 1.0]
    assert [b.accuracy for b in cal.bins if not b.n] == [None] * 5
    # ECE = (2·0.435 + 0.15 + 0.38 + 0.55 + 0.3) / 6 = 2.25 / 6 = 0.375; MCE = 0.55
    assert cal.ece == pytest.approx(0.375)
    assert cal.mce == pytest.approx(0.55)
    assert expected_calibration_error(PAIRS) == pytest.approx(0.375)


def test_two_bins_and_edges() -> None:
    # Bins [0, 0.5] and (0.5, 1]: 0 and 0.5 go low, 1 goes high.
    cal = calibration([(0.0, False), (0.5, True), (1.0, True), (0.75, False)], n_bins=2)
    low, high = cal.bins
    assert (low.n, low.accuracy, low.confidence) == (2, 0.5, 0.25)
    assert (high.n, high.accuracy, high.confidence) == (2, 0.5, 0.875)
    # ECE = (2·|0.5 − 0.25| + 2·|0.5 − 0.875|) / 4 = (0.5 + 0.75) / 4
    assert cal.ece == pytest.approx(0.3125)


def test_perfectly_calibrated_and_empty() -> None:
    # One bin: 4 items at 0.75, 3 right → accuracy equals confidence.
    assert expected_calibration_error([(0.75, True)] * 3 + [(0.75, False)], n_bins=1) == 0.0
    cal = calibration([])
    assert cal.n == 0 and cal.ece is None and cal.mce is None
    assert cal.to_dict()["bins"][0] == {"lower": 0.0, "upper": 0.1, "n": 0, "accuracy": None, "confidence": None}


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_confidence_must_be_a_probability(bad: float) -> None:
    with pytest.raises(ValueError, match="not a probability"):
        calibration([(0.5, True), (bad, True)])
    with pytest.raises(ValueError):
        calibration([(0.5, True)], n_bins=0)


def test_veri_r1_tiers() -> None:
    tiers = confidence_tiers(PAIRS)
    # low < 0.85: 0.62 ✓, 0.55 ✗, 0.3 ✗; high > 0.95: none (0.95 is not above it)
    assert tiers["low"] == {"n": 3, "accuracy": pytest.approx(1 / 3)}
    assert tiers["middle"] == {"n": 3, "accuracy": pytest.approx(2 / 3)}
    assert tiers["high"] == {"n": 0, "accuracy": None}


def test_pairs_from_trajectories() -> None:
    def traj(i: int, pred: Label | None, meta: dict) -> Trajectory:
        claim = Claim(id=f"c{i}", text="t", label=Label.SUPPORT)
        return Trajectory(claim_id=claim.id, env="veri_r1", claim=claim, prompt=[],
                          verdict=Verdict(label=pred), meta=meta)

    trajs = [traj(0, Label.SUPPORT, {"confidence": 0.9}), traj(1, Label.REFUTE, {"confidence": 0.6}),
             traj(2, None, {})]
    assert confidence_pairs(trajs) == [(0.9, True), (0.6, False)]
