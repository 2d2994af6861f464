"""Worked examples of the Veri-R1 reward (paper §2.3):

    R = R_label · w_validity + R_evidence + R_format
    R_label = 2 | 0,  R_evidence = |P∩G| / |P∪G|,  h = |P∩G| / |G|,
    w_validity = 1 if gold NEI or h = 1; 0.5 if h > 0.5; else 0.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from factrl.labels import Label
from factrl.rewards import (
    REWARDS,
    TrajectoryReward,
    VeriR1Reward,
    VeriR1RewardConfig,
    validity_weight,
    veri_r1_reward,
    veri_r1_trajectory_reward,
)
from factrl.types import Claim, EvidenceRef, RewardBreakdown, Trajectory, Verdict

S, R, N, C = Label.SUPPORT, Label.REFUTE, Label.NEI, Label.CONFLICTING


def v(label: Label | None, ids: list[str], fmt: bool = True) -> Verdict:
    return Verdict(label=label, evidence_ids=ids, format_ok=fmt)


def parts(rb: RewardBreakdown) -> tuple[float, float, float, float, float, float]:
    c = rb.components
    return c["label"], c["validity"], c["evidence"], c["hit_rate"], c["format"], rb.total


def test_perfect_support() -> None:
    # P = G = {a, b}: IoU 2/2 = 1, h = 1 → w = 1; R = 2·1 + 1 + 1 = 4
    rb = veri_r1_reward(v(S, ["a", "b"]), S, ["a", "b"])
    assert parts(rb) == (2.0, 1.0, 1.0, 1.0, 1.0, 4.0)
    assert rb.components["total"] == rb.total


def test_components_are_exactly_the_documented_ones() -> None:
    rb = veri_r1_reward(v(S, ["a"]), S, ["a"])
    assert set(rb.components) == {"format", "evidence", "label", "validity", "hit_rate", "total"}


def test_nei_without_gold_evidence_and_extra_prediction_keeps_full_validity() -> None:
    # G = ∅, P = {x}: IoU = 0 / 1 = 0; h = 1 by definition (G empty); gold NEI → w = 1
    # R = 2·1 + 0 + 1 = 3
    rb = veri_r1_reward(v(N, ["x"]), N, [])
    assert parts(rb) == (2.0, 1.0, 0.0, 1.0, 1.0, 3.0)


def test_nei_relaxation_even_when_gold_evidence_is_missed() -> None:
    # G = {a}, P = {b, c}: IoU = 0/3 = 0, h = 0/1 = 0, but gold NEI → w = 1 anyway
    # R = 2·1 + 0 + 1 = 3
    rb = veri_r1_reward(v(N, ["b", "c"]), N, ["a"])
    assert parts(rb) == (2.0, 1.0, 0.0, 0.0, 1.0, 3.0)


def test_half_validity_band_two_of_three() -> None:
    # G = {a, b, c}, P = {a, b}: h = 2/3 > 0.5 → w = 0.5; IoU = 2/3
    # R = 2·0.5 + 2/3 + 1 = 2.6667
    rb = veri_r1_reward(v(R, ["a", "b"]), R, ["a", "b", "c"])
    lab, w, ev, h, fmt, total = parts(rb)
    assert (lab, w, fmt) == (2.0, 0.5, 1.0)
    assert ev == pytest.approx(2 / 3) and h == pytest.approx(2 / 3)
    assert total == pytest.approx(1 + 2 / 3 + 1)


def test_hit_rate_exactly_half_gets_no_label_reward() -> None:
    # G = {a, b}, P = {a}: h = 1/2, and the rule is h > 0.5 (strict) → w = 0
    # IoU = 1/2; R = 2·0 + 0.5 + 1 = 1.5
    rb = veri_r1_reward(v(S, ["a"]), S, ["a", "b"])
    assert parts(rb) == (2.0, 0.0, 0.5, 0.5, 1.0, 1.5)


def test_inclusive_threshold_reproduces_authors_code() -> None:
    # Same case with h >= 0.5: w = 0.5 → R = 2·0.5 + 0.5 + 1 = 2.5
    cfg = VeriR1RewardConfig(validity_threshold_inclusive=True)
    assert veri_r1_reward(v(S, ["a"]), S, ["a", "b"], config=cfg).total == 2.5


def test_extra_evidence_lowers_iou_but_not_hit_rate() -> None:
    # G = {a}, P = {a, x, y}: IoU = 1/3, h = 1/1 = 1 → w = 1
    # R = 2·1 + 1/3 + 1 = 3.3333
    rb = veri_r1_reward(v(S, ["a", "x", "y"]), S, ["a"])
    lab, w, ev, h, fmt, total = parts(rb)
    assert (lab, w, h, fmt) == (2.0, 1.0, 1.0, 1.0)
    assert ev == pytest.approx(1 / 3)
    assert total == pytest.approx(3 + 1 / 3)


def test_wrong_label_keeps_evidence_and_format() -> None:
    # gold S, predicted R; P = G = {a}: R_label = 0, w = 1 (recorded), IoU = 1
    # R = 0·1 + 1 + 1 = 2
    rb = veri_r1_reward(v(R, ["a"]), S, ["a"])
    assert parts(rb) == (0.0, 1.0, 1.0, 1.0, 1.0, 2.0)


def test_unparsed_label_is_wrong() -> None:
    # label None, P = G = {a}, format broken: R = 0 + 1 + 0 = 1
    rb = veri_r1_reward(v(None, ["a"], fmt=False), S, ["a"])
    assert parts(rb) == (0.0, 1.0, 1.0, 1.0, 0.0, 1.0)


def test_format_failure_only_drops_format_reward() -> None:
    # correct label, P = G = {a}, format broken: R = 2·1 + 1 + 0 = 3
    rb = veri_r1_reward(v(S, ["a"], fmt=False), S, ["a"])
    assert parts(rb) == (2.0, 1.0, 1.0, 1.0, 0.0, 3.0)


def test_empty_prediction_and_empty_gold_is_exact_match() -> None:
    # G = P = ∅: IoU(∅, ∅) = 1 by our definition; h = 1; NEI → w = 1. R = 2 + 1 + 1 = 4
    rb = veri_r1_reward(v(N, []), N, [])
    assert parts(rb) == (2.0, 1.0, 1.0, 1.0, 1.0, 4.0)
    # The authors' code scores an empty gold set 0: R = 2 + 0 + 1 = 3
    assert veri_r1_reward(v(N, []), N, [], config=VeriR1RewardConfig(empty_iou=0.0)).total == 3.0


def test_duplicates_in_prediction_count_once() -> None:
    # P = [a, a, b] is the set {a, b} = G: IoU 1, h 1 → R = 4
    assert veri_r1_reward(v(S, ["a", "a", "b"]), S, ["a", "b"]).total == 4.0
    # P = [a, a] is {a}: h = 1/2 (not 2/2) → w = 0; IoU = 1/2 → R = 0 + 0.5 + 1 = 1.5
    assert parts(veri_r1_reward(v(S, ["a", "a"]), S, ["a", "b"])) == (2.0, 0.0, 0.5, 0.5, 1.0, 1.5)


def test_ids_compared_after_whitespace_and_unicode_normalisation() -> None:
    composed = "Café_sentence_1"
    decomposed = unicodedata.normalize("NFD", composed)
    assert composed != decomposed
    assert veri_r1_reward(v(S, [f" {decomposed} "]), S, [composed]).total == 4.0


def test_conflicting_gold_needs_evidence_like_support() -> None:
    # gold CONFLICTING, G = {a, b}, P = ∅: h = 0 → w = 0; IoU = 0 → R = 0 + 0 + 1 = 1
    assert parts(veri_r1_reward(v(C, []), C, ["a", "b"])) == (2.0, 0.0, 0.0, 0.0, 1.0, 1.0)


def test_support_without_gold_evidence_has_full_validity() -> None:
    # G = ∅ → h = 1 → w = 1; P = {x}: IoU = 0 → R = 2 + 0 + 1 = 3
    assert parts(veri_r1_reward(v(S, ["x"]), S, [])) == (2.0, 1.0, 0.0, 1.0, 1.0, 3.0)


def test_ablation_flags() -> None:
    # no validity weight: G = {a, b}, P = {a} → w forced to 1: R = 2 + 0.5 + 1 = 3.5
    no_w = VeriR1RewardConfig(use_validity=False)
    assert veri_r1_reward(v(S, ["a"]), S, ["a", "b"], config=no_w).total == 3.5
    # no evidence reward: G = {a}, P = {a, x, y} → R = 2 + 0·(1/3) + 1 = 3
    no_e = VeriR1RewardConfig(evidence_weight=0.0)
    rb = veri_r1_reward(v(S, ["a", "x", "y"]), S, ["a"], config=no_e)
    assert rb.total == 3.0
    assert rb.components["evidence"] == pytest.approx(1 / 3)  # still recorded


def test_gold_label_spellings_are_normalised() -> None:
    assert veri_r1_reward(v(S, ["a"]), "SUPPORTS", ["a"]).total == 4.0
    assert veri_r1_reward(v(N, []), "NOT_ENOUGH_INFO", []).total == 4.0


def test_bad_inputs_raise_clear_errors() -> None:
    with pytest.raises(TypeError, match="single string"):
        veri_r1_reward(v(S, ["a"]), S, "a")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gold label"):
        veri_r1_reward(v(S, ["a"]), None, ["a"])  # type: ignore[arg-type]


def test_validity_weight_bands() -> None:
    assert validity_weight(S, 1.0) == 1.0
    assert validity_weight(R, 0.75) == 0.5
    assert validity_weight(R, 0.5) == 0.0
    assert validity_weight(C, 0.0) == 0.0
    assert validity_weight(N, 0.0) == 1.0


def _traj(label: Label, gold: list[str], verdict: Verdict, error: str | None = None) -> Trajectory:
    claim = Claim(id="c1", text="t", label=label, evidence=[EvidenceRef(id=g) for g in gold])
    return Trajectory(claim_id="c1", env="veri_r1", claim=claim, prompt=[], verdict=verdict,
                      error=error)


def test_registry_scores_trajectories() -> None:
    traj = _traj(S, ["a", "b"], v(S, ["a"]))
    for name in ("veri_r1", "veri_r1_no_validity", "veri_r1_no_evidence"):
        assert isinstance(REWARDS.get(name), TrajectoryReward)
    # h = 1/2 → w = 0: R = 0 + 0.5 + 1
    assert REWARDS.get("veri_r1")(traj).total == 1.5
    # w = 1: R = 2 + 0.5 + 1
    assert REWARDS.get("veri_r1_no_validity")(traj).total == 3.5
    # w = 0 and no evidence term: R = 0 + 0 + 1
    assert REWARDS.get("veri_r1_no_evidence")(traj).total == 1.0
    assert VeriR1Reward()(traj) == veri_r1_trajectory_reward(traj)


def test_errored_trajectory_scores_as_empty_verdict() -> None:
    # The verdict would earn 4, but the episode errored: empty verdict vs G = {a}
    # → label 0, IoU 0, format 0 → R = 0
    traj = _traj(S, ["a"], v(S, ["a"]), error="context overflow")
    assert veri_r1_trajectory_reward(traj).total == 0.0


def test_trajectory_without_gold_label_is_rejected() -> None:
    traj = Trajectory(claim_id="c9", env="veri_r1", claim=Claim(id="c9", text="t"), prompt=[])
    with pytest.raises(ValueError, match="c9"):
        veri_r1_trajectory_reward(traj)


ids = st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=5)
labels = st.sampled_from([S, R, N, C])


@given(pred=ids, gold=ids, gold_label=labels, pred_label=st.none() | labels, fmt=st.booleans())
def test_total_is_the_paper_sum_and_bounded(pred, gold, gold_label, pred_label, fmt) -> None:
    rb = veri_r1_reward(v(pred_label, pred, fmt), gold_label, gold)
    lab, w, ev, h, f, total = parts(rb)
    assert total == pytest.approx(lab * w + ev + f)
    assert 0.0 <= ev <= 1.0 and 0.0 <= h <= 1.0 and w in (0.0, 0.5, 1.0)
    assert 0.0 <= total <= 4.0
    assert (total == 4.0) == (pred_label == gold_label and set(pred) == set(gold) and fmt)


def test_partial_format_credit_is_off_by_default_and_needs_a_parsed_label():
    from factrl.rewards.veri_r1 import VeriR1RewardConfig, veri_r1_reward
    from factrl.types import Verdict

    broken = Verdict(label="SUPPORT", evidence_ids=[], format_ok=False, format_errors=["text outside tags"])
    assert veri_r1_reward(broken, "REFUTE", ["a"]).components["format"] == 0.0
    cfg = VeriR1RewardConfig(partial_format_credit=0.5)
    # format 0.5 (label parsed, protocol broken) + evidence 0 + label 0 (wrong)
    assert veri_r1_reward(broken, "REFUTE", ["a"], config=cfg).total == 0.5
    unparsed = Verdict(label=None, format_ok=False)
    assert veri_r1_reward(unparsed, "REFUTE", ["a"], config=cfg).components["format"] == 0.0


def test_no_answer_block_never_earns_the_empty_set_match() -> None:
    # NEI gold, G = ∅, and the model never wrote <answer>: P = ∅ is silence, not "no
    # evidence". IoU 0 (not IoU(∅, ∅) = 1), h = 1 (G empty), w = 1, label 0, format 0 → R = 0
    from factrl.envs.veri_r1 import parse_verdict

    silent = parse_verdict("<plan>think about it</plan>", online=True, max_searches=3)
    assert not silent.answered
    assert parts(veri_r1_reward(silent, N, [])) == (0.0, 1.0, 0.0, 1.0, 0.0, 0.0)
    # With gold evidence the hit rate is 0/1 → w = 0 (the formula with P = ∅)
    assert parts(veri_r1_reward(silent, S, ["a"])) == (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    # The authors' convention changes nothing here
    assert veri_r1_reward(silent, N, [], config=VeriR1RewardConfig(empty_iou=0.0)).total == 0.0


def test_answered_nei_without_evidence_keeps_the_paper_convention() -> None:
    from factrl.envs.veri_r1 import parse_verdict

    ans = parse_verdict("<plan>p</plan><answer>Label: NEI\nEvidence: none</answer>", online=True, max_searches=3)
    assert ans.answered and ans.format_ok and ans.evidence_ids == []
    # IoU(∅, ∅) = 1: R = 2 + 1 + 1
    assert parts(veri_r1_reward(ans, N, [])) == (2.0, 1.0, 1.0, 1.0, 1.0, 4.0)


def test_errored_nei_trajectory_earns_nothing() -> None:
    # A crashed episode on an NEI claim (G = ∅) used to score IoU(∅, ∅) = 1 → R = 1.
    traj = _traj(N, [], v(N, []), error="env step failed: TimeoutError: slow")
    rb = veri_r1_trajectory_reward(traj)
    assert rb.components["evidence"] == 0.0 and rb.total == 0.0
