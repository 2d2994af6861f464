"""Every registered environment with its default reward and the label-only reward scores
the same episodes identically through ``evaluate`` and verl's text shim
(:func:`factrl.train.verl.reward.compute_score`), or the shim refuses clearly: it gets the
environment's typed outcome from the text (:mod:`factrl.envs.outcome`), never a
verdict-only trajectory scored differently."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from factrl.envs import ENVS, EnvDeps, build
from factrl.envs.outcome import OutcomeError
from factrl.evaluate import evaluate
from factrl.labels import Label
from factrl.lm.base import Generation, GenerationConfig
from factrl.lm.scripted import ScriptedLM
from factrl.rewards import RewardDeps, RewardSpec, build_reward
from factrl.train.verl.reward import MODEL_TEXT_KEY, compute_score
from factrl.types import Claim, EvidenceRef, Hit, Message, Passage

DOC = {"id": "nile", "title": "Nile", "text": "The Nile flows north."}
CLAIMS = [
    Claim(id="long", text="The Nile flows north.", label=Label.SUPPORT,
          evidence=[EvidenceRef(id="nile_0", text="The Nile flows north.")],
          meta={"kind": "long", "documents": [DOC], "pseudo_answer": "North.",
                "questions": [{"question": "Where does the Nile flow?", "answers": [{"answer": "North."}]}]}),
    Claim(id="short", text="Which way does the Nile flow?", label=Label.REFUTE,
          evidence=[EvidenceRef(id="nile_0", text="The Nile flows north.")],
          meta={"kind": "short", "answers": ["north"], "documents": [DOC], "pseudo_answer": "North.",
                "questions": [{"question": "Where does the Nile flow?", "answers": [{"answer": "North."}]}]}),
]
# Texts a model may write: several protocols' answers at once, a HARIS report, junk.
TEXTS = {
    "answers": "<plan>Check the flow.</plan><think>It flows north.</think>"
               "<answer>Label: SUPPORT\nEvidence: [[nile_0]]</answer>",
    "report": "<think>x</think><report>The Nile flows north. \\boxed{Support}</report>",
    "abstains": "<think>unsure</think>I don't know.",
}
# (environment, reward) pairs the shim must refuse: the reward reads outcome fields the
# environment cannot recover from text (ProFact's questions and answers come from its
# search stage).
REFUSED = {("profact", "profact")}
# Environments that decide without an LM (the verifier's retrieve_verify): no text
# carries their verdict, so the shim refuses them whatever the reward.
LM_FREE = {"retrieve_verify"}


class OneHitRetriever:
    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        p = Passage(id="nile", doc_id="nile", title="Nile", text="The Nile flows north.",
                    sentences=["The Nile flows north."], sentence_ids=["nile_0"])
        return [[Hit(passage=p, score=1.0)] for _ in queries]


class FixedLM:
    """A verifier or judge that always says the same (a text-level LM)."""

    name = "fixed"

    def __init__(self, text: str) -> None:
        self.text = text

    def complete(self, conversations: list[list[Message]], config: GenerationConfig) -> list[Generation]:
        return [Generation([], None, self.text, "eos") for _ in conversations]

    def score_choices(self, conversation: list[Message], choices: list[str]) -> list[float]:
        return [0.0] * len(choices)


def _deps() -> RewardDeps:
    lm = FixedLM('{"REASONING": "ok", "SCORE": "1"} yes')
    return RewardDeps(retriever=OneHitRetriever(), lms={"verifier": lm, "judge": lm})


def _pairs() -> list[tuple[str, str]]:
    # factrl's own environments (a plugin test may have registered a toy one)
    # (aliases too: verl files written with veri_r1_offline still run through the shim)
    envs = [n for n in [*ENVS.names(), *ENVS.aliases()] if getattr(ENVS.get(n), "__module__", "").startswith("factrl.")]
    deps = EnvDeps(retriever=OneHitRetriever())
    return sorted({(n, r) for n in envs for r in (build(n, deps).default_reward, "label_only")})


@pytest.mark.parametrize(("env_name", "reward_name"), _pairs())
@pytest.mark.parametrize("text", sorted(TEXTS))
def test_evaluate_and_verl_shim_score_alike(env_name: str, reward_name: str, text: str, tmp_path: Path) -> None:
    deps = EnvDeps(retriever=OneHitRetriever())
    reward = build_reward(RewardSpec(name=reward_name), _deps())
    lm = ScriptedLM(lambda context: TEXTS[text])
    evaluate(CLAIMS, lambda: build(env_name, deps), lm, tmp_path, reward=reward, progress=False,
             lms={"searcher": lm})
    trajs = [json.loads(line) for line in (tmp_path / "trajectories.jsonl").read_text().splitlines()]
    assert len(trajs) == len(CLAIMS)
    for t in trajs:
        assert t["error"] is None, t["error"]
        model_text = "".join(turn["text"] for turn in t["turns"] if turn["source"] == "model")
        extra = {"claim": json.dumps(t["claim"]), MODEL_TEXT_KEY: model_text}
        truth = {"label": t["claim"]["label"], "evidence": [e["id"] for e in t["claim"]["evidence"]]}
        call = lambda: compute_score("test", model_text, truth, extra, env=env_name,  # noqa: E731
                                     reward=reward_name, reward_deps=_deps())
        if env_name in LM_FREE:
            with pytest.raises(OutcomeError, match=f"environment {env_name!r} decides without a language model"):
                call()
            continue
        if (env_name, reward_name) in REFUSED:
            with pytest.raises(OutcomeError, match=f"reward {reward_name!r} reads .* environment {env_name!r}"):
                call()
            continue
        assert call()["score"] == pytest.approx(t["reward"]["total"]), (env_name, reward_name, t["claim_id"])
