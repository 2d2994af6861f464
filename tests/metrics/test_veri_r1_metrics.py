"""Veri-R1 §3.2 metrics on a hand-made set of six items whose numbers are worked out below."""

from __future__ import annotations

import json

import pytest

from factrl.labels import Label
from factrl.metrics import compute_metrics, score_item
from factrl.types import Claim, EvidenceRef, RewardBreakdown, Trajectory, Verdict

S, R, N, C = Label.SUPPORT, Label.REFUTE, Label.NEI, Label.CONFLICTING


def claim(i: int, label: Label, gold: list[str]) -> Claim:
    return Claim(id=f"c{i}", text=f"claim {i}", label=label,
                 evidence=[EvidenceRef(id=g) for g in gold])


def verdict(label: Label | None, ids: list[str], fmt: bool = True, errors: tuple[str, ...] = ()) -> Verdict:
    return Verdict(label=label, evidence_ids=ids, format_ok=fmt, format_errors=list(errors))


#  #  gold  G          pred  P          fmt | label veri joint IoU
#  1  S     {a1,a2}    S     {a1,a2}    ok  |  ✓     ✓    ✓    1
#  2  S     {b1}       S     {b1,x}     ok  |  ✓     ✓    ✗    1/2   (extra evidence)
#  3  R     {c1,c2}    R     {c1}       ok  |  ✓     ✗    ✗    1/2   (missed c2)
#  4  R     {d1}       S     {d1}       bad |  ✗     ✗    ✗    1
#  5  NEI   ∅          NEI   {y}        ok  |  ✓     ✓    ✓    0     (NEI relaxed)
#  6  NEI   ∅          None  ∅          bad |  ✗     ✗    ✗    1     (IoU(∅,∅)=1: an <answer>
#                                                                   whose label did not parse)
PAIRS = [
    (claim(1, S, ["a1", "a2"]), verdict(S, ["a1", "a2"])),
    (claim(2, S, ["b1"]), verdict(S, ["b1", "x"])),
    (claim(3, R, ["c1", "c2"]), verdict(R, ["c1"])),
    (claim(4, R, ["d1"]), verdict(S, ["d1"], fmt=False)),
    (claim(5, N, []), verdict(N, ["y"])),
    (claim(6, N, []), verdict(None, [], fmt=False, errors=("unknown label 'maybe'",))),
]


def test_hand_computed_metrics() -> None:
    m = compute_metrics(PAIRS)
    assert m["n"] == 6
    assert m["label_acc"] == pytest.approx(4 / 6)  # items 1, 2, 3, 5
    assert m["verification_acc"] == pytest.approx(3 / 6)  # items 1, 2, 5
    assert m["joint_acc"] == pytest.approx(2 / 6)  # items 1, 5
    # (1 + 1/2 + 1/2 + 1 + 0 + 1) / 6 = 4/6
    assert m["evidence_score"] == pytest.approx(4 / 6)
    # items 1-4 have gold evidence: (1 + 1/2 + 1/2 + 1) / 4 = 0.75
    assert m["evidence_score_with_gold"] == pytest.approx(0.75)
    # G ⊆ P on items 1, 2, 4, 5 and 6 (∅ ⊆ anything an answer cites); item 3 missed c2
    assert m["evidence_cover"] == pytest.approx(5 / 6)
    assert m["convention"] == "paper"
    assert m["format_ok_rate"] == pytest.approx(4 / 6)  # items 1, 2, 3, 5
    # F1: S = 0.8 (P 2/3, R 1), R = 2/3 (P 1, R 1/2), NEI = 2/3 (P 1, R 1/2) → 0.7111
    assert m["macro_f1"] == pytest.approx((0.8 + 2 / 3 + 2 / 3) / 3)
    # S, R and NEI tie with 2 each → SUPPORT (enum order), accuracy 2/6
    assert m["majority_baseline"] == {"label": "SUPPORT", "acc": pytest.approx(2 / 6)}
    assert m["errors"] == 0
    assert "mean_reward" not in m
    assert m["per_label"] == {
        # S: items 1, 2 → label 2/2, veri 2/2, joint 1/2, IoU (1 + 1/2)/2
        "SUPPORT": {"n": 2, "label_acc": 1.0, "verification_acc": 1.0, "joint_acc": 0.5,
                    "evidence_score": 0.75, "evidence_cover": 1.0},
        # R: items 3, 4 → label 1/2, veri 0, joint 0, IoU (1/2 + 1)/2
        "REFUTE": {"n": 2, "label_acc": 0.5, "verification_acc": 0.0, "joint_acc": 0.0,
                   "evidence_score": 0.75, "evidence_cover": 0.5},
        # NEI: items 5, 6 → label 1/2, veri 1/2, joint 1/2, IoU (0 + 1)/2
        "NOT ENOUGH INFO": {"n": 2, "label_acc": 0.5, "verification_acc": 0.5,
                            "joint_acc": 0.5, "evidence_score": 0.5, "evidence_cover": 1.0},
    }
    json.dumps(m)  # JSON-ready


def test_nei_relaxation_and_conflicting_strictness() -> None:
    # NEI with gold evidence {a} answered NEI with unrelated {z}: veri and joint still ✓
    s = score_item(N, ["a"], verdict(N, ["z"]))
    assert (s.label_correct, s.verified, s.joint, s.evidence_iou) == (True, True, True, 0.0)
    # CONFLICTING is not relaxed: right label, evidence missed → veri ✗, joint ✗
    s = score_item(C, ["a"], verdict(C, ["z"]))
    assert (s.label_correct, s.verified, s.joint) == (True, False, False)
    # verification allows extra evidence, joint does not
    s = score_item(S, ["a"], verdict(S, ["a", "z"]))
    assert (s.verified, s.joint) == (True, False)
    # a wrong label fails everything even with perfect evidence
    s = score_item(S, ["a"], verdict(R, ["a"]))
    assert (s.verified, s.joint, s.evidence_iou) == (False, False, 1.0)


def traj(i: int, c: Claim, v: Verdict, *, error: str | None = None,
         reward: float | None = None) -> Trajectory:
    rb = RewardBreakdown() if reward is None else RewardBreakdown(
        components={"total": reward}, total=reward)
    return Trajectory(claim_id=c.id, env="veri_r1", claim=c, prompt=[], verdict=v, error=error,
                      reward=rb)


def test_trajectories_errors_count_as_wrong_and_rewards_are_averaged() -> None:
    trajs = [
        traj(1, claim(1, S, ["a"]), verdict(S, ["a"]), reward=4.0),
        # a perfect verdict, but the episode errored → counted wrong, not dropped
        traj(2, claim(2, S, ["b"]), verdict(S, ["b"]), error="timeout", reward=0.0),
        traj(3, claim(3, R, ["c"]), verdict(R, ["c"])),  # not scored
    ]
    trajs = [Trajectory.from_json(t.to_json()) for t in trajs]  # survive a JSONL round trip
    m = compute_metrics(trajs)
    assert m["n"] == 3 and m["errors"] == 1
    assert m["label_acc"] == pytest.approx(2 / 3)
    assert m["joint_acc"] == pytest.approx(2 / 3)
    assert m["format_ok_rate"] == pytest.approx(2 / 3)
    # errored item: empty evidence vs {b} → IoU 0; mean (1 + 0 + 1)/3
    assert m["evidence_score"] == pytest.approx(2 / 3)
    # items 1 and 2 carry rewards: (4 + 0) / 2
    assert m["mean_reward"] == 2.0


def test_mixed_pairs_and_trajectories() -> None:
    c1, c2 = claim(1, S, ["a"]), claim(2, R, ["b"])
    m = compute_metrics([(c1, verdict(S, ["a"])), traj(2, c2, verdict(S, []))])
    assert (m["n"], m["label_acc"], m["verification_acc"]) == (2, 0.5, 0.5)


def test_empty_input() -> None:
    m = compute_metrics([])
    assert m["n"] == 0 and m["errors"] == 0 and m["per_label"] == {}
    for key in ("label_acc", "verification_acc", "joint_acc", "evidence_score",
                "evidence_score_with_gold", "format_ok_rate", "macro_f1"):
        assert m[key] is None, key
    assert m["majority_baseline"] == {"label": None, "acc": None}


def test_all_nei_has_no_gold_evidence_score() -> None:
    m = compute_metrics([(claim(1, N, []), verdict(N, []))])
    assert m["evidence_score"] == 1.0 and m["evidence_score_with_gold"] is None


def test_bad_items_name_the_problem() -> None:
    with pytest.raises(TypeError, match="item 1"):
        compute_metrics([PAIRS[0], "oops"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"\(Claim, Verdict\)"):
        compute_metrics([(verdict(S, []), claim(1, S, []))])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="'c7' has no gold label"):
        compute_metrics([(Claim(id="c7", text="t"), verdict(S, []))])


def test_evidence_conventions_are_named_and_both_reported() -> None:
    m = compute_metrics(PAIRS)
    assert m["evidence_convention"] == "paper: IoU(empty, empty) = 1"
    # Authors' way: IoU = 0 whenever G = ∅ (items 5, 6): (1 + 1/2 + 1/2 + 1 + 0 + 0) / 6
    assert m["evidence_score_authors"] == pytest.approx(3 / 6)
    json.dumps(m)


def test_unanswered_and_errored_items_get_no_evidence_credit() -> None:
    nei = claim(1, N, [])
    silent = Verdict(label=None, format_ok=False, format_errors=["no <answer>"], answered=False)
    s = score_item(N, [], silent)
    assert (s.evidence_iou, s.evidence_iou_authors) == (0.0, 0.0)
    # An answered NEI with no evidence keeps IoU(∅, ∅) = 1 (paper), 0 (authors)
    s = score_item(N, [], Verdict(label=N, format_ok=True, answered=True))
    assert (s.evidence_iou, s.evidence_iou_authors) == (1.0, 0.0)
    # A crashed episode is scored as unanswered, whatever its verdict said
    m = compute_metrics([traj(1, nei, verdict(N, []), error="reset failed: ValueError: x"), (nei, silent)])
    assert m["evidence_score"] == 0.0 and m["errors"] == 1


def test_records_written_before_answered_existed_infer_it() -> None:
    legacy = json.dumps({"label": None, "evidence_ids": [], "format_ok": False, "format_errors": ["no <answer>"]})
    assert not Verdict.model_validate_json(legacy).answered
    legacy = json.dumps({"label": None, "evidence_ids": [], "format_ok": False,
                         "format_errors": ["unknown label 'maybe'"]})
    assert Verdict.model_validate_json(legacy).answered
    assert Verdict(label=N).answered and not Verdict().answered
