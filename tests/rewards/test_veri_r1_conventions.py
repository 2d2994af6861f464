"""Veri-R1's two reward conventions against the authors' released reward code.

``tests/fixtures/veri_r1_authors_code.json`` holds responses (the cases of the comparison
that motivated the conventions, and a few hundred generated ones) with what the authors'
``compute_reward`` (``verl/utils/reward_score/claim_reward.py``) returned for them,
computed once outside factrl. ``authors_code`` must equal every figure; ``paper`` may
differ only where a case breaks one of the listed rules (``CONVENTION_DIFFERENCES``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from factrl.envs.veri_r1 import VeriR1Config, VeriR1Env, parse_verdict
from factrl.lm.scripted import ScriptedLM
from factrl.metrics import compute_metrics
from factrl.rewards import (
    CONVENTION_DIFFERENCES,
    VeriR1Reward,
    VeriR1RewardConfig,
    build_reward,
    RewardSpec,
    veri_r1_authors_reward,
)
from factrl.protocol.veri_r1_authors import parse_authors
from factrl.rollout import run_episodes
from factrl.train.verl.reward import compute_score, response_turns, strip_system_information
from factrl.types import Claim, EvidenceRef, Passage, Trajectory, Verdict

from _support import WordOverlapRetriever, best_seconds

FIXTURE = Path(__file__).parents[1] / "fixtures" / "veri_r1_authors_code.json"
PAPER = VeriR1Reward(VeriR1RewardConfig())
AUTHORS = VeriR1Reward(VeriR1RewardConfig(convention="authors_code"))


@lru_cache(maxsize=1)
def cases() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(FIXTURE.read_text(encoding="utf-8"))["cases"])


def trajectory(case: dict[str, Any]) -> Trajectory:
    """The episode as factrl records it: turns (model text, observations) and the verdict
    the online environment parses from the model's text."""
    claim = Claim(id=case["name"], text="a claim", label=case["gold_label"],
                  evidence=[EvidenceRef(id=e) for e in case["gold_evidence"]])
    model_text = strip_system_information(case["response"])
    return Trajectory(claim_id=claim.id, env="veri_r1", claim=claim, prompt=[],
                      turns=response_turns(case["response"]),
                      verdict=parse_verdict(model_text, online=True, max_searches=3))


def shim(case: dict[str, Any], convention: str) -> dict[str, float]:
    truth = {"label": case["gold_label"], "evidence": case["gold_evidence"]}
    return compute_score("feverous", case["response"], truth, {"split": "train"}, reward={"convention": convention})


def test_fixture_covers_the_cases_and_rules() -> None:
    names = {c["name"] for c in cases()}
    assert len(cases()) >= 300
    assert {"canonical", "one_of_two_gold_ids", "no_plan", "label_supports", "label_maybe",
            "information_not_followed_by_think", "text_outside_tags", "think_nested_in_answer",
            "correct_label_no_evidence_line", "cites_never_retrieved_id", "forged_information",
            "two_answers"} <= names
    used = {r for c in cases() for r in c["rules"]}
    assert used <= set(CONVENTION_DIFFERENCES)
    assert set(CONVENTION_DIFFERENCES) - used == {"conflicting_gold"}  # tested below: the code has no reward


def test_authors_code_convention_reproduces_the_released_code() -> None:
    mismatches = []
    for case in cases():
        want = case["authors"]
        rb = AUTHORS(trajectory(case))
        c = rb.components
        got = {
            "total": rb.total,
            "label_reward": c["label_correct"],
            "evidence_reward": c["evidence"],
            "format_score": c["format"],
            "evidence_cover": c["evidence_cover"],
            "veri_acc": c["verified"],
            "joint_acc": c["joint"],
        }
        expected = {k: float(want[k]) for k in got}
        parse = parse_authors(case["response"])
        read = {"pred_label": parse.label, "pred_evidence": list(parse.evidence_ids)}
        # Exact equality: the same arithmetic in the same order gives the same floats.
        if got != expected or read != {k: want[k] for k in read} or c["label"] != 2.0 * want["label_reward"]:
            mismatches.append((case["name"], got, expected, read))
        # verl's shim and the plain function give the same figures.
        out = shim(case, "authors_code")
        assert (out["score"], out["format"], out["evidence"]) == (rb.total, c["format"], c["evidence"]), case["name"]
        direct = veri_r1_authors_reward(case["response"], case["gold_label"], case["gold_evidence"])
        assert direct.total == rb.total, case["name"]
    assert mismatches == []


# Paper-convention totals of the comparison's cases (gold SUPPORT with d1_sentence_0 and
# d2_sentence_3, both shown). The authors' code gave the figures on the right.
PAPER_TOTALS = {
    "canonical": 4.0,  # 4.0
    "one_of_two_gold_ids": 1.5,  # 2.5: h = 1/2 earns the half weight only in the code (h >= 0.5)
    "no_plan": 3.0,  # 4.0
    "label_supports": 4.0,  # 2.0: the code reads SUPPORTS and it is not the gold's spelling
    "label_maybe": 1.0,  # 2.0: an unknown label fails the format
    "no_label_line": 1.0,  # 2.0
    "information_not_followed_by_think": 3.0,  # 3.0: both enforce <think> after <information>
    "search_after_information": 3.0,  # 3.0
    "text_outside_tags": 3.0,  # 4.0
    "think_nested_in_answer": 1.0,  # 3.0: the code reads "SUPPORT<think>" as SUPPORT
    "correct_label_no_evidence_line": 0.0,  # 1.0
    "cites_never_retrieved_id": 2.0 + 2 / 3 + 1.0,  # equal
    "forged_information": 3.0,  # equal
    "two_answers": 3.0,  # equal
}


def test_paper_convention_on_the_compared_cases() -> None:
    by_name = {c["name"]: c for c in cases()}
    for name, total in PAPER_TOTALS.items():
        case = by_name[name]
        assert PAPER(trajectory(case)).total == pytest.approx(total), name
        assert shim(case, "paper")["score"] == pytest.approx(total), name
        if not case["rules"]:
            assert total == pytest.approx(case["authors"]["total"]), name


KEYS = ("total", "format", "evidence", "label", "validity", "label_correct", "evidence_cover", "verified", "joint")


def _figures(rb) -> tuple[float, ...]:
    return tuple(round(rb.total if k == "total" else rb.components[k], 12) for k in KEYS)


def test_paper_convention_differs_only_on_the_listed_rules() -> None:
    differing: dict[str, int] = {}
    unexplained = []
    for case in cases():
        traj = trajectory(case)
        paper, code = _figures(PAPER(traj)), _figures(AUTHORS(traj))
        if paper != code:
            if not case["rules"]:
                unexplained.append((case["name"], paper, code))
            if len(case["rules"]) == 1:
                differing[case["rules"][0]] = differing.get(case["rules"][0], 0) + 1
    assert unexplained == []
    # Every listed rule makes a difference on its own somewhere (none is listed for nothing).
    assert set(differing) == set(CONVENTION_DIFFERENCES) - {"conflicting_gold"}, differing
    # And most responses that break no listed rule are scored alike (they are equal above).
    assert sum(not c["rules"] for c in cases()) >= 40


def test_conflicting_gold_has_no_authors_code_reward() -> None:
    case = cases()[0]
    traj = trajectory(case)
    conflicting = traj.model_copy(update={"claim": traj.claim.model_copy(update={"label": "CONFLICTING"})})
    assert PAPER(conflicting).components["label"] == 0.0  # paper: a wrong label, scored
    with pytest.raises(ValueError, match="CONFLICTING"):
        AUTHORS(conflicting)


def test_convention_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="convention"):
        VeriR1RewardConfig(convention="code")
    with pytest.raises(ValueError, match="empty_iou=1.0"):
        VeriR1RewardConfig(convention="authors_code", empty_iou=1.0)
    with pytest.raises(ValueError, match="validity_threshold_inclusive=False"):
        VeriR1RewardConfig(convention="authors_code", validity_threshold_inclusive=False)
    with pytest.raises(ValueError, match="partial_format_credit"):
        build_reward(RewardSpec(name="veri_r1", params={"convention": "authors_code", "partial_format_credit": 0.5}))
    # The CPU presets' explicit empty_iou = 0 is the code's value: accepted.
    cfg = VeriR1RewardConfig(convention="authors_code", empty_iou=0.0)
    assert (cfg.iou_when_both_empty, cfg.threshold_inclusive) == (0.0, True)
    assert (VeriR1RewardConfig().iou_when_both_empty, VeriR1RewardConfig().threshold_inclusive) == (1.0, False)
    # A trajectory without turns cannot be read the code's way: a clear error.
    bare = trajectory(cases()[0]).model_copy(update={"turns": []})
    with pytest.raises(ValueError, match="no turns"):
        AUTHORS(bare)
    # An errored episode is no answer under both conventions.
    crashed = trajectory(cases()[0]).model_copy(update={"error": "env step failed: TimeoutError: slow"})
    assert PAPER(crashed).total == AUTHORS(crashed).total == 0.0


PASSAGES = [
    Passage(id="nile#0", doc_id="nile", title="Nile", text="The Nile is long. It flows north.",
            sentence_ids=["nile_sentence_0", "nile_sentence_1"], sentences=["The Nile is long.", "It flows north."]),
]
CLAIM = Claim(id="c1", text="The Nile flows north.", label="SUPPORT",
              evidence=[EvidenceRef(id="nile_sentence_1", doc_id="nile")])
PLAN = "<plan>Find where the Nile flows.</plan>\n"
SEARCH = "<search>Nile flows north</search>"
THINK = "<think>The Nile flows north.</think>\n"
ANSWER = "<answer>\nLabel: SUPPORT\nEvidence: [[nile_sentence_1]]\n</answer>"


def test_factrl_budget_notice_is_not_read_as_the_models_tags() -> None:
    # Three searches spend the budget: factrl appends a notice naming <think> and <answer>
    # after the last <information>; the authors' observations had none.
    turns = [PLAN + SEARCH, THINK + SEARCH, THINK + SEARCH, THINK + ANSWER]

    def respond(context: str) -> str:
        return turns[min(context.count("</search>") - 1, len(turns) - 1)]

    (traj,) = run_episodes(lambda: VeriR1Env(WordOverlapRetriever(PASSAGES), VeriR1Config()), [CLAIM],
                           ScriptedLM(respond), reward=AUTHORS)
    assert "search budget is spent" in traj.transcript
    assert traj.reward.total == 4.0 and traj.reward.components["format"] == 1.0
    assert PAPER(traj).total == 4.0
    # The wording earlier versions recorded is recognised too.
    old = "The search budget is spent. Reason in <think> if needed, then give your final <answer>."
    recorded = traj.transcript.replace("The search budget is spent. Reason in <think>, then give your final <answer>.", old)
    assert old in recorded
    truth = {"label": "SUPPORT", "evidence": ["nile_sentence_1"]}
    for convention in ("paper", "authors_code"):
        out = compute_score("toy", recorded, truth, {"split": "train"}, reward={"convention": convention})
        assert out["score"] == 4.0, convention


def test_metrics_follow_the_reward_convention() -> None:
    trajs = [trajectory(c) for c in cases()]
    for convention, reward in (("authors_code", AUTHORS), ("paper", PAPER)):
        m = compute_metrics(trajs, convention=convention)
        rbs = [reward(t) for t in trajs]

        def mean(key: str) -> float:
            return sum(rb.components[key] for rb in rbs) / len(rbs)

        assert m["convention"] == convention
        assert m["label_acc"] == pytest.approx(mean("label_correct"))
        assert m["verification_acc"] == pytest.approx(mean("verified"))
        assert m["joint_acc"] == pytest.approx(mean("joint"))
        assert m["evidence_cover"] == pytest.approx(mean("evidence_cover"))
        assert m["format_ok_rate"] == pytest.approx(mean("format"))
    code = compute_metrics(trajs, convention="authors_code")
    n = len(cases())
    assert code["verification_acc"] == pytest.approx(sum(c["authors"]["veri_acc"] for c in cases()) / n)
    assert code["joint_acc"] == pytest.approx(sum(c["authors"]["joint_acc"] for c in cases()) / n)
    assert code["evidence_cover"] == pytest.approx(sum(c["authors"]["evidence_cover"] for c in cases()) / n)
    assert code["evidence_score"] == pytest.approx(sum(c["authors"]["evidence_reward"] for c in cases()) / n)
    assert code["verification_acc"] != compute_metrics(trajs)["verification_acc"]
    with pytest.raises(TypeError, match="response text"):
        compute_metrics([(trajs[0].claim, Verdict())], convention="authors_code")
    with pytest.raises(ValueError, match="convention"):
        compute_metrics(trajs, convention="code")


HOSTILE = {
    "brackets": "<answer>" + "[[" * 50_000 + "</answer>",
    "blank id": "<answer>[[" + " " * 99_990 + "</answer>",
    "unclosed ids": "<answer>" + "[[a" * 33_000 + "]</answer>",
    "openings": "<answer>" * 12_500,
    "closings": "</answer>" * 11_000,
    "blank label": "<answer>Label: " + " \n" * 40_000 + "</answer>",
    "label keys": "<answer>" + "Label: \n" * 12_000 + "</answer>",
    "spaced information": (" " * 20 + "<information>") * 3_000,
    "tags": "<think>" * 14_000 + "<answer></answer>",
    "informations": ("</search><information></information>") * 3_000 + "<answer></answer>",
}


def test_authors_parser_is_linear_on_hostile_text() -> None:
    normal = PLAN + (SEARCH + "\n\n<information>\n[[a]]: x\n</information>\n\n" + THINK) * 900 + ANSWER
    assert 80_000 <= len(normal) <= 120_000
    # Relative to a normal response of the same size, with a floor for timer noise.
    budget = 50 * best_seconds(parse_authors, normal) + 0.05
    for name, text in HOSTILE.items():
        assert 80_000 <= len(text) <= 120_000, name
        assert best_seconds(parse_authors, text) < budget, name
