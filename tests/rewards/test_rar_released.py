"""Binary RAR's ``released`` reward against the authors' released code.

``fixtures/released/rar_released.json`` holds 62 verifier outputs with the reward the
released parser (``binary_rar_tinker/train.py`` at d97ea69) gives each, the top-8 chunks
its ``BM25Retriever`` (rank_bm25 0.2.2, chunks cut with SmolLM2's tokenizer) returns for
six responses at two chunk sizes, and the sha256 of whole verifier prompts of five
episodes — computed once outside the project. factrl's released convention must give
the same on every one."""

import hashlib
import json
import math
from pathlib import Path

import pytest

from factrl.envs import build
from factrl.lm.scripted import ScriptedLM
from factrl.rewards import RewardDeps, build_reward, score_trajectories
from factrl.rewards.rar_released import (NO_THINKING, ReleasedEvidence, load_chunk_codec, parse_released_score,
                                         released_chunks, render_documents)
from factrl.rewards.rar_verifier import parse_verifier_output
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim

FIXTURE = json.loads((Path(__file__).parents[1] / "fixtures" / "released" / "rar_released.json").read_text())
OUTPUTS = {c["id"]: c for c in FIXTURE["verifier_outputs"]}
# A non-finite SCORE (JSON NaN / Infinity) is the released reward as it is; factrl
# scores it 0 and counts it (a NaN reward would poison the group's advantages).
NON_FINITE = {"nan", "infinity"}


def sha(text):
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("case_id", sorted(OUTPUTS))
def test_verifier_outputs_score_as_the_released_code_scores_them(case_id):
    case = OUTPUTS[case_id]
    reward, why = parse_released_score(case["output"])
    if case_id in NON_FINITE:
        assert not math.isfinite(float(case["released"])) and reward == 0.0 and "not finite" in why
        return
    assert reward == case["released"]
    assert why is None or reward == 0.0  # whatever raised is 0, with the reason kept


def test_the_paper_parser_decides_differently_on_31_of_the_60_finite_ones():
    """Prose before the JSON, single quotes, ``SCORE: 1``, a leading reasoning trace: the
    paper's parser reads a score where the released one gives 0; an empty output is
    "unparsed" there (the group mean), 0 here."""
    def paper(c):
        out = parse_verifier_output(c["output"])
        return float(out.score) if out.score is not None else "unparsed"

    differ = sorted(k for k, c in OUTPUTS.items() if k not in NON_FINITE and paper(c) != c["released"])
    read_only_by_paper = sorted(k for k, c in OUTPUTS.items() if c["released"] == 0.0 and paper(c) not in (0.0, "unparsed"))
    assert len(OUTPUTS) == 62 and len(differ) == 31, differ
    assert len(read_only_by_paper) == 13 and {"prose_before", "single_quotes", "field_only_1",
                                               "think_then_json"} <= set(read_only_by_paper)
    assert paper(OUTPUTS["empty"]) == "unparsed" and OUTPUTS["empty"]["released"] == 0.0


@pytest.fixture(scope="module")
def codec():
    return load_chunk_codec("smollm2", None)


def test_evidence_equals_the_released_retrievers(codec):
    docs = FIXTURE["documents"]
    for case in FIXTURE["evidence"]:
        chunks = released_chunks(docs, codec, case["chunk_tokens"])
        assert len(chunks) == case["n_chunks"]
        top = ReleasedEvidence(chunks).top(case["query"], 8)
        assert top == case["top8"], case["id"]
        assert sha(render_documents(top)) == case["documents_text_sha256"]
    # a title only on its document's first chunk; zero-score chunks still fill the 8
    small = released_chunks(docs, codec, 32)
    assert small[0].startswith("Nile\n\n") and not small[1].startswith("Nile")
    assert len(ReleasedEvidence(small).top("quantum chromodynamics", 8)) == 8


def test_the_verifier_prompt_is_the_released_one():
    from factrl.rewards import rar_released as R

    assert sha(R.VERIFIER_RELEASED.format(documents="DOCUMENTS", instruction="INSTRUCTION", response="RESPONSE")) \
        == FIXTURE["verifier_prompt_sha256"]
    assert R.VERIFIER_RELEASED.count("\n## ") == 5 and "## CONSIDER CORRECT (No Factual Error): \n" in R.VERIFIER_RELEASED


class Verifier(ScriptedLM):
    """Answers every verifier prompt with ``answer``; records the prompts (the text
    after the chat template) and their configs."""

    def __init__(self, answer='{"REASONING": "No contradiction found.", "SCORE": 1}'):
        self.seen, self.configs = [], []
        super().__init__(lambda ctx: answer)

    def generate(self, prompts, config):
        self.seen += [self.decode(p) for p in prompts]
        self.configs.append(config)
        return super().generate(prompts, config)


PROMPT = Claim(id="nile", text="Tell me about the Nile.", meta={"kind": "long", "documents": FIXTURE["documents"]})


def released_reward(verifier, **params):
    return build_reward("rar", RewardDeps(lms={"verifier": verifier})).configure(
        {"convention": "released", "chunk_tokenizer": "smollm2", **params})


def test_episodes_end_to_end_as_released():
    """The fixture's episodes: cut responses score 0 unverified; the others reach the
    verifier with the released prompt (response after </think>, unstripped; top-8 of
    512-token chunks queried with it) after an empty reasoning block."""
    episodes = {e["id"]: e for e in FIXTURE["episodes"]}
    texts = iter([e["text"] for e in episodes.values()])
    finish = {e["text"]: e["finish_reason"] for e in episodes.values()}

    class Policy(ScriptedLM):
        def generate(self, prompts, config):
            gens = super().generate(prompts, config)
            for g in gens:
                g.finish_reason = finish[g.text]
            return gens

    trajs = run_episodes(lambda: build("rar"), [PROMPT] * len(episodes), Policy(lambda ctx: next(texts)),
                         RolloutConfig(temperature=0, batch_size=8), score=False)
    v = Verifier()
    reward = released_reward(v)
    scored = score_trajectories(reward, trajs)
    assert [t.reward.total for t in scored] == [0.0 if e["finish_reason"] == "length" else 1.0 for e in episodes.values()]
    called = [e for e in episodes.values() if e["verifier_called"]]
    assert len(v.seen) == len(called)
    for e, seen in zip(called, v.seen):
        assert seen.endswith("<assistant>" + NO_THINKING)  # thinking disabled
        user = seen.split("<user>", 1)[1].rsplit("</user>", 1)[0]
        assert sha(user) == e["verifier_prompt_sha256"], e["id"]
    cut = next(t for t in scored if t.turns[-1].finish_reason == "length")
    assert cut.reward.components["nonstop"] == 1.0 and cut.reward.components["verifier_failed"] == 0.0
    # 512 new tokens at tinker's default temperature 1.0
    (cfg,) = v.configs
    assert (cfg.max_new_tokens, cfg.temperature) == (512, 1.0)
    # the empty response is verified too (the paper's convention scores it 0 unasked)
    empty = next(t for t in scored if t.model_text == "")
    assert empty.reward.total == 1.0 and empty.reward.components["empty_response"] == 1.0


def test_unparseable_verifier_output_scores_0_and_is_counted():
    reward = released_reward(Verifier("Here is my verdict: {\"SCORE\": 1}"))
    (t,) = run_episodes(lambda: build("rar"), [PROMPT], ScriptedLM(lambda ctx: "The Nile flows north."),
                        RolloutConfig(temperature=0), reward=reward)
    assert t.reward.total == 0.0 and t.reward.components["verifier_failed"] == 1.0


def test_released_settings_are_checked():
    with pytest.raises(ValueError, match="convention"):
        build_reward("rar").configure({"convention": "authors"})
    with pytest.raises(ValueError, match="binary reward"):
        build_reward("rar_rating").configure({"convention": "released"})
    with pytest.raises(ValueError, match="released convention only"):
        build_reward("rar").configure({"chunk_tokenizer": "smollm2"})
    # a verifier without a tokenizer of its own needs chunk_tokenizer, said clearly
    reward = build_reward("rar", RewardDeps(lms={"verifier": Verifier()})).configure({"convention": "released"})
    (t,) = run_episodes(lambda: build("rar"), [PROMPT], ScriptedLM(lambda ctx: "x"), RolloutConfig(temperature=0),
                        score=False)
    with pytest.raises(ValueError, match="chunk_tokenizer"):
        score_trajectories(reward, [t])
    # training keeps every prompt with a document (the released code skips only empty ones)
    one_doc = Claim(id="one", text="q", meta={"documents": FIXTURE["documents"][:1]})
    none = Claim(id="none", text="q", meta={"documents": []})
    assert [c.id for c in released_reward(Verifier()).training_claims([one_doc, none])] == ["one"]
    assert build_reward("rar").training_claims([one_doc, PROMPT]) == [PROMPT]
