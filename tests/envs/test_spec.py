"""Environments built by name: one spec, one build, clear errors."""

import pytest

from factrl.envs import EnvDeps, EnvSpec, build, deps_from_index, env_factory, parse_params
from factrl.registry import RegistryError
from factrl.types import Claim, EvidenceRef, Passage

from _support import WordOverlapRetriever

PASSAGES = [Passage(id="nile#0", doc_id="nile", title="Nile", text="It flows north. It is long.",
                    sentence_ids=["nile_sentence_0", "nile_sentence_1"], sentences=["It flows north.", "It is long."])]


def test_veri_r1_settings_are_parameters_of_one_environment():
    online = build(EnvSpec(name="veri_r1", params={"max_searches": 2}), EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))
    assert online.name == "veri_r1" and online.config.max_searches == 2
    offline = build(EnvSpec(name="veri_r1", params={"mode": "offline"}))
    assert offline.name == "veri_r1_offline" and offline.max_turns == 1
    assert build("veri_r1_offline").name == "veri_r1_offline"


def test_errors_name_the_environment_and_what_is_missing():
    with pytest.raises(ValueError, match="veri_r1.*no_such"):
        build(EnvSpec(name="veri_r1", params={"no_such": 1}), EnvDeps(retriever=WordOverlapRetriever(PASSAGES)))
    with pytest.raises(ValueError, match="needs a retriever"):
        env_factory(EnvSpec(name="veri_r1"))  # fails when the factory is made, before any episode
    with pytest.raises(ValueError, match="mode"):
        build(EnvSpec(name="veri_r1", params={"mode": "sideways"}))
    with pytest.raises(RegistryError, match="available"):
        build("no_such_agent")


def test_offline_context_comes_from_the_index_lazily():
    deps = deps_from_index(WordOverlapRetriever(PASSAGES), context_sentences=1)
    assert deps.context._provide is None  # online runs never pay for the context table
    env = build(EnvSpec(name="veri_r1", params={"mode": "offline", "shuffle_offline_evidence": False}), deps)
    claim = Claim(id="c", text="The Nile flows north.", label="SUPPORT",
                  evidence=[EvidenceRef(id="nile_sentence_1", doc_id="nile", text="It is long.")])
    prompt = env.reset(claim)[0].content
    assert "[[nile_sentence_1]]: It is long." in prompt and "[[nile_sentence_0]]: It flows north." in prompt
    assert deps.context._provide is not None


def test_parse_params_reads_json_values():
    assert parse_params(["mode=offline", "max_searches=2", "flag=true", "x=a=b"]) == {
        "mode": "offline", "max_searches": 2, "flag": True, "x": "a=b"}
    with pytest.raises(ValueError, match="key=value"):
        parse_params(["novalue"])


def test_one_default_agent_everywhere() -> None:
    import inspect

    from factrl.envs import DEFAULT_AGENT, ENVS
    from factrl.train.config import EnvSettings
    from factrl.train.verl import export

    assert DEFAULT_AGENT in ENVS
    assert EnvSettings().name == DEFAULT_AGENT
    for fn in (export.verl_rows, export.export_verl_parquet):
        assert inspect.signature(fn).parameters["env"].default == DEFAULT_AGENT
