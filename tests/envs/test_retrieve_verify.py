"""``retrieve_verify``: retrieval, the verifier's reading of each sentence, the verdict."""

from __future__ import annotations

import pytest

from _support import KeywordVerifier, WordOverlapRetriever
from factrl.envs import EnvDeps, EnvSpec, build, env_factory
from factrl.envs.base import is_lm_free
from factrl.labels import Label
from factrl.lm.scripted import null_lm
from factrl.rollout import RolloutConfig, run_episodes
from factrl.types import Claim, Passage

PASSAGES = [
    Passage(id="bee#0", doc_id="bee", title="Honeybees", text="A colony has one queen. Drones do not collect food.",
            sentences=["A colony has one queen.", "Drones do not collect food."],
            sentence_ids=["bee_sentence_0", "bee_sentence_1"]),
    Passage(id="bread#0", doc_id="bread", title="Bread", text="Sourdough uses wild yeast for bread.",
            sentences=["Sourdough uses wild yeast for bread."], sentence_ids=["bread_sentence_0"]),
]


def deps(verifier=None):
    return EnvDeps(retriever=WordOverlapRetriever(PASSAGES), lms={"verifier": verifier or KeywordVerifier()})


def run(claims, verifier=None, **params):
    make_env = env_factory(EnvSpec(name="retrieve_verify", params=params), deps(verifier))
    return run_episodes(make_env, claims, null_lm(), RolloutConfig(temperature=0, max_new_tokens=4, batch_size=4),
                        score=False)


def test_it_is_an_lm_free_agent():
    assert is_lm_free("retrieve_verify") and not is_lm_free("rag") and not is_lm_free("no-such-agent")


def test_each_retrieved_sentence_is_read_and_the_verdict_cites_the_deciding_ones():
    v = KeywordVerifier()
    (sup, ref, nei) = run([Claim(id="s", text="Sourdough bread uses wild yeast"),
                           Claim(id="r", text="Drones collect food for the colony"),
                           Claim(id="n", text="Chess openings are studied")], verifier=v)
    assert sup.verdict.label == Label.SUPPORT and sup.verdict.evidence_ids == ["bread_sentence_0"]
    assert sup.verdict.format_ok and sup.error is None and sup.meta["confidence"] == pytest.approx(0.8)
    assert ref.verdict.label == Label.REFUTE and ref.verdict.evidence_ids == ["bee_sentence_1"]
    assert nei.verdict.label == Label.NEI and nei.verdict.evidence_ids == []
    # sentences of the retrieved units, not the units, were scored; the prompt shows them
    assert ("Drones collect food for the colony", "Drones do not collect food.") in v.calls
    assert "[[bee_sentence_1]] S=0.05 R=0.90" in ref.prompt[0].content
    assert ref.searches == ["Drones collect food for the colony"] and ref.retrieved_ids[0] == "bee#0"
    assert {"search_s", "verify_s"} <= set(ref.timings)


def test_unit_granularity_titles_and_thresholds():
    v = KeywordVerifier()
    (t,) = run([Claim(id="s", text="Sourdough bread uses wild yeast")], verifier=v, granularity="unit",
               with_title=True, support_threshold=0.9)
    assert v.calls[0][1].startswith("Bread: Sourdough")
    assert t.verdict.label == Label.NEI  # 0.8 < the 0.9 support threshold


def test_the_verifier_s_agent_thresholds_decide_where_it_has_them_and_parameters_override_them():
    from factrl.verifier.scoring import Thresholds

    claim = [Claim(id="s", text="Sourdough bread uses wild yeast")]  # P(SUPPORT) 0.8 on its best sentence
    v = KeywordVerifier(support=0.5)
    assert run(claim, verifier=v)[0].verdict.label == Label.SUPPORT  # no agent thresholds: the pair ones
    v.agent_thresholds = Thresholds(support=0.85, refute=0.95)
    (t,) = run(claim, verifier=v)
    assert t.verdict.label == Label.NEI  # 0.8 < the agent's 0.85
    assert t.meta["thresholds"] == {"support": 0.85, "refute": 0.95}  # recorded with the verdict
    assert run(claim, verifier=v, support_threshold=0.7)[0].verdict.label == Label.SUPPORT


def test_bad_parameters_and_claims_fail_clearly():
    with pytest.raises(ValueError, match="granularity"):
        build(EnvSpec(name="retrieve_verify", params={"granularity": "page"}), deps())
    with pytest.raises(ValueError, match="retriever"):
        build(EnvSpec(name="retrieve_verify"), EnvDeps(lms={"verifier": KeywordVerifier()}))
    (t,) = run([Claim(id="e", text="   ")])
    assert t.error is not None and "empty text" in t.error
