"""ProFact's process reward on worked examples computed by hand: identical texts of m
tokens score METEOR 1 − 0.5/m³ (one chunk), texts without a shared word score 0, and
M divides the best one-to-one matching's sum by the number of gold items."""

from __future__ import annotations

import pytest

pytest.importorskip("nltk")
pytest.importorskip("scipy")

from factrl.labels import Label  # noqa: E402
from factrl.metrics.meteor import meteor  # noqa: E402
from factrl.rewards import REWARDS, RewardSpec, build_reward  # noqa: E402
from factrl.rewards.profact import ProFactReward, profact_reward  # noqa: E402
from factrl.types import Claim, Trajectory, Verdict  # noqa: E402

G1, G2, G3 = "who signed treaty", "when did rainfall increase", "where factory closed"
OTHER = "zebra migration patterns"
A1, A2 = "king john", "after 1990"


def one_chunk(m: int) -> float:
    """METEOR of a text with itself, m tokens: F = 1, one chunk → penalty 0.5·(1/m)³."""
    return 1 - 0.5 / m**3


# METEOR prepares its offline WordNet on first use (factrl.metrics.meteor.ensure_wordnet).


def test_the_worked_examples_rest_on_exact_meteor_values():
    texts = [G1, G2, G3, OTHER]
    for a in texts:
        for b in texts:
            if a != b:
                assert meteor(a, b) == 0.0, (a, b)  # no shared word, stem or synonym
    assert meteor(G1, G1) == pytest.approx(one_chunk(3))
    assert meteor(G2, G2) == pytest.approx(one_chunk(4))


def gold_claim(label="Refuted"):
    questions = [{"question": G1, "answers": [{"answer": A1, "answer_type": "Extractive"}]},
                 {"question": G2, "answers": [{"answer": A2, "answer_type": "Abstractive"}]}]
    return Claim(id="3", text="A claim.", label=label, dataset="averitec", meta={"questions": questions})


def traj(questions, answers, label, claim=None, error=None):
    qa = [{"question": q, "answer": a} for q, a in zip(questions, answers)]
    return Trajectory(claim_id="3", env="profact", claim=claim or gold_claim(), prompt=[], error=error,
                      verdict=Verdict(label=label, answered=label is not None),
                      meta={"questions": list(questions), "qa": qa})


def test_more_predicted_than_gold_extra_items_cost_nothing():
    # Q̂ = [OTHER, G2, G1] vs Q = [G1, G2]: the best matching pairs G1-G1 and G2-G2;
    # OTHER is left over. M = (s(3) + s(4)) / 2.
    t = traj([OTHER, G2, G1], [None, A2, A1], Label.REFUTE)
    c = ProFactReward()(t).components
    assert c["question"] == pytest.approx((one_chunk(3) + one_chunk(4)) / 2)
    # QÂ = ["G2 A2", "G1 A1"] (OTHER unanswered: no item) vs QA = ["G1 A1", "G2 A2"]:
    # 5 and 6 tokens, matched exactly. M = (s(5) + s(6)) / 2.
    assert c["qa"] == pytest.approx((one_chunk(5) + one_chunk(6)) / 2)
    assert c["label"] == 1.0
    assert ProFactReward()(t).total == pytest.approx(c["question"] + c["qa"] + 1.0)


def test_fewer_predicted_than_gold_unmatched_gold_counts_zero():
    # Q̂ = [G1] vs Q = [G1, G2]: M = s(3) / 2; QÂ = ["G1 A1"]: M = s(5) / 2; wrong label.
    rb = ProFactReward()(traj([G1], [A1], Label.SUPPORT))
    assert rb.components["question"] == pytest.approx(one_chunk(3) / 2)
    assert rb.components["qa"] == pytest.approx(one_chunk(5) / 2)
    assert rb.components["label"] == 0.0 and rb.components["label_correct"] == 0.0
    assert rb.total == pytest.approx(one_chunk(3) / 2 + one_chunk(5) / 2)


def test_matching_is_one_to_one():
    # Asking G1 three times earns one match: M = s(3) / 2, not 3·s(3) / 2 or s(3).
    rb = ProFactReward()(traj([G1, G1, G1], [None, None, None], Label.REFUTE))
    assert rb.components["question"] == pytest.approx(one_chunk(3) / 2)
    assert rb.components["qa"] == 0.0  # nothing answered


def test_plain_function_matches_the_hand_values():
    parts = profact_reward([G3, G1], [f"{G1} {A1}"], "Refuted", [G1, G2], [f"{G1} {A1}", f"{G2} {A2}"], "REFUTE")
    assert parts == pytest.approx({"question": one_chunk(3) / 2, "qa": one_chunk(5) / 2, "label": 1.0,
                                   "total": one_chunk(3) / 2 + one_chunk(5) / 2 + 1.0})


def test_invalid_or_empty_output_scores_zero():
    rb = ProFactReward()(traj([], [], None))
    assert rb.components == {"question": 0.0, "qa": 0.0, "label": 0.0, "total": 0.0, "label_correct": 0.0}
    # An episode that ended in an error scores 0 even where its record looks right.
    rb = ProFactReward()(traj([G1, G2], [A1, A2], Label.REFUTE, error="env step failed: TimeoutError: x"))
    assert rb.total == 0.0 and rb.components["question"] == 0.0


def test_without_process_rewards_only_the_verdict_counts():
    t = traj([G1, G2], [A1, A2], Label.REFUTE)
    ablation = build_reward(RewardSpec(name="profact", params={"process": False}))
    rb = ablation(t)
    assert rb.total == 1.0
    # The METEOR parts are still reported (logged beside the total).
    assert rb.components["question"] == pytest.approx((one_chunk(3) + one_chunk(4)) / 2)
    assert ablation.score([traj([G1], [A1], Label.SUPPORT)])[0].total == 0.0
    assert REWARDS.get("profact").process is True


def test_reward_refuses_claims_it_cannot_score():
    with pytest.raises(ValueError, match="no gold questions"):
        ProFactReward()(traj([G1], [A1], Label.REFUTE, claim=Claim(id="3", text="x", label="SUPPORT")))
    with pytest.raises(ValueError, match="process must be true or false"):
        build_reward(RewardSpec(name="profact", params={"process": "no"}))
    with pytest.raises(ValueError, match="profact"):
        build_reward(RewardSpec(name="profact", params={"weight": 2}))
    # Unlabelled claims get an empty breakdown from the batch scorer (nothing to compare).
    unlabelled = gold_claim().model_copy(update={"label": None})
    assert ProFactReward().score([traj([G1], [A1], None, claim=unlabelled)])[0].total == 0.0
