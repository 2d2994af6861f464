"""evaluate() records each episode's label confidence and metrics.json carries calibration."""

from __future__ import annotations

import json
import math

import pytest

from factrl.envs.veri_r1 import VeriR1Env
from factrl.evaluate import evaluate, read_trajectories
from factrl.lm.scripted import ScriptedLM
from factrl.metrics.confidence import calibration, confidence_tiers
from factrl.rollout import RolloutConfig
from factrl.types import Claim, EvidenceRef, Passage

from _support import WordOverlapRetriever

PASSAGES = [
    Passage(id=f"d{i}#0", doc_id=f"d{i}", title=f"Doc {i}", text=f"Fact number {i} holds.",
            sentence_ids=[f"d{i}_sentence_0"], sentences=[f"Fact number {i} holds."])
    for i in range(10)
]
CLAIMS = [
    Claim(id=f"c{i}", text=f"Fact number {i} holds.", label="SUPPORT",
          evidence=[EvidenceRef(id=f"d{i}_sentence_0")])
    for i in range(10)
]
# Claim i is answered with this probability on the label's first token; c7..c9 wrongly.
CONF = dict(zip((f"c{i}" for i in range(10)), [0.52, 0.56, 0.58, 0.64, 0.66, 0.74, 0.76, 0.78, 0.86, 0.96]))


def claim_no(context: str) -> int:
    return int(context.rsplit("Verify the claim:\nFact number ", 1)[1].split(" ", 1)[0])


def respond(context: str) -> str:
    if "<information>" not in context:
        return "<plan>look it up</plan><search>" + context.rsplit("Verify the claim:\n", 1)[1].split("\n")[0] + "</search>"
    sid = context.rsplit("[[", 1)[1].split("]]")[0]
    label = "REFUTE" if claim_no(context) >= 7 else "SUPPORT"
    return f"<think>found</think><answer>Label: {label}\nEvidence: [[{sid}]]</answer>"


class KnownLogprobs(ScriptedLM):
    """Every token gets logprob -0.01, the label's first character log(CONF[claim])."""

    def __init__(self) -> None:
        super().__init__(respond)

    def generate(self, prompts, config):
        gens = super().generate(prompts, config)
        for ids, gen in zip(prompts, gens):
            gen.logprobs = [-0.01] * len(gen.token_ids)
            if "Label: " in gen.text:
                gen.logprobs[gen.text.index("Label: ") + 7] = math.log(CONF[f"c{claim_no(self.decode(ids))}"])
        return gens


def test_trajectories_carry_the_label_confidence_and_metrics_its_calibration(tmp_path):
    m = evaluate(CLAIMS, lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), KnownLogprobs(), tmp_path,
                 rollout=RolloutConfig(batch_size=4), progress=False)
    trajs = read_trajectories(tmp_path / "trajectories.jsonl")
    assert {t.claim_id: t.meta["confidence"] for t in trajs} == pytest.approx(CONF)
    assert m["label_acc"] == pytest.approx(0.7)
    pairs = [(CONF[f"c{i}"], i < 7) for i in range(10)]
    expected = calibration(pairs)
    assert m["calibration"]["n"] == 10
    assert m["calibration"]["ece"] == pytest.approx(expected.ece)
    assert m["calibration"]["mce"] == pytest.approx(expected.mce)
    # By hand: (0.5, 0.6] c0-c2 right, conf 0.55333: 3 x 0.44667 = 1.34; (0.6, 0.7] c3, c4
    # right, conf 0.65: 2 x 0.35 = 0.7; (0.7, 0.8] c5, c6 right, c7 wrong, conf 0.76:
    # 3 x |2/3 - 0.76| = 0.28; (0.8, 0.9] c8 wrong: 0.86; (0.9, 1] c9 wrong: 0.96.
    ece = (1.34 + 0.7 + 0.28 + 0.86 + 0.96) / 10
    assert ece == pytest.approx(0.414)
    assert m["calibration"]["ece"] == pytest.approx(ece)
    assert m["calibration"]["tiers"] == confidence_tiers(pairs)
    assert m["calibration"]["tiers"] == {"low": {"n": 8, "accuracy": 7 / 8}, "middle": {"n": 1, "accuracy": 0.0},
                                         "high": {"n": 1, "accuracy": 0.0}}
    by_label = m["calibration"]["tiers_by_predicted_label"]
    assert list(by_label) == ["SUPPORT", "REFUTE"]
    assert by_label["SUPPORT"] == {"low": {"n": 7, "accuracy": 1.0}, "middle": {"n": 0, "accuracy": None},
                                   "high": {"n": 0, "accuracy": None}}
    assert [by_label["REFUTE"][k]["n"] for k in ("low", "middle", "high")] == [1, 1, 1]
    assert json.loads((tmp_path / "metrics.json").read_text())["calibration"]["ece"] == pytest.approx(ece)


def test_no_calibration_without_confidences(tmp_path):
    class NoLogprobs(ScriptedLM):
        def generate(self, prompts, config):
            gens = super().generate(prompts, config)
            for g in gens:
                g.logprobs = None
            return gens

    m = evaluate(CLAIMS[:3], lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), NoLogprobs(respond), tmp_path,
                 progress=False)
    assert "calibration" not in m
    assert all("confidence" not in t.meta for t in read_trajectories(tmp_path / "trajectories.jsonl"))


def test_backends_without_per_id_logprobs_record_none(tmp_path):
    lm = KnownLogprobs()
    lm.logprobs_per_id = False  # as OpenAILM: a server token's logprob sits on its first character
    m = evaluate(CLAIMS[:3], lambda: VeriR1Env(WordOverlapRetriever(PASSAGES)), lm, tmp_path, progress=False)
    assert "calibration" not in m
