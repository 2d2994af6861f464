"""The reset guards every registered environment shares (``factrl.envs.guards``): one
clear error for ``step()`` or ``result()`` before ``reset()`` and for ``step()`` after the
episode ended, and search bookkeeping that merges sub-episodes' searches."""

from __future__ import annotations

import pytest

from _support import KeywordVerifier, WordOverlapRetriever
from factrl.envs import ENVS, EnvDeps, EnvSpec, EpisodeGuard, EpisodeStateError, SearchLog, build
from factrl.types import Claim, EvidenceRef, Passage, Verdict

PASSAGES = [
    Passage(id="bee#0", doc_id="bee", title="Honeybees", text="A colony has one queen. Drones do not collect food.",
            sentences=["A colony has one queen.", "Drones do not collect food."],
            sentence_ids=["bee_sentence_0", "bee_sentence_1"]),
]
CLAIM = Claim(id="c1", text="A honeybee colony has one queen.",
              evidence=[EvidenceRef(id="bee_sentence_0", text="A colony has one queen.")])
# Every registered environment, and the authors' released reading of HARIS where it has one.
def _package_envs() -> list[str]:
    """The package's environments (other test modules register plug-in agents of their own)."""
    return [n for n in ENVS.names() if getattr(ENVS.get(n), "__module__", "").startswith("factrl.")]


SPECS = [EnvSpec(name=n) for n in _package_envs()] + [
    EnvSpec(name="haris", params={"convention": "released"}),
    EnvSpec(name="haris_searcher", params={"convention": "released"}),
]


def make(spec: EnvSpec):
    return build(spec, EnvDeps(retriever=WordOverlapRetriever(PASSAGES), lms={"verifier": KeywordVerifier()}))


def ids(spec: EnvSpec) -> str:
    return spec.name + "".join(f"-{v}" for v in spec.params.values())


def test_the_specs_cover_every_registered_environment() -> None:
    assert {s.name for s in SPECS} == set(_package_envs())
    assert len(SPECS) >= 13


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_calls_out_of_order_raise_the_same_clear_error(spec: EnvSpec) -> None:
    env = make(spec)
    assert isinstance(env, EpisodeGuard)
    with pytest.raises(EpisodeStateError, match=rf"^{env.name}: step\(\) before reset\(\)$"):
        env.step("Label: SUPPORT")
    with pytest.raises(EpisodeStateError, match=rf"^{env.name}: result\(\) before reset\(\)$"):
        env.result()
    for _ in range(2):  # a second episode on the same environment starts afresh
        env.reset(CLAIM)
        for turn in range(100):  # text with no action ends every protocol within its turn budget
            if env.step("nothing to do here.").done:
                break
        else:
            pytest.fail(f"{env.name} never ended")
        assert turn + 1 <= env.max_turns
        with pytest.raises(EpisodeStateError, match=rf"^{env.name}: step\(\) after the episode ended$"):
            env.step("Label: SUPPORT")
        assert isinstance(env.result().verdict, Verdict)  # the result stays readable after the end


@pytest.mark.parametrize("spec", SPECS, ids=ids)
def test_an_empty_claim_is_refused_before_the_episode_starts(spec: EnvSpec) -> None:
    env = make(spec)
    with pytest.raises(ValueError, match="has empty text"):
        env.reset(Claim(id="e", text="  "))
    with pytest.raises(EpisodeStateError, match="before reset"):
        env.step("x")


def test_an_episode_state_error_is_a_runtime_error() -> None:
    assert issubclass(EpisodeStateError, RuntimeError)  # code catching RuntimeError still does


def test_search_log_records_merges_and_builds_the_result() -> None:
    a, b = SearchLog(), SearchLog()
    a.record("q1", ["x", "y"], 0.5)
    a.record("", [], 0.0)  # an empty query still counts where the agent asked it
    b.record(None, ["y", "z"], 0.25)  # a search with no query of its own (a claim searched as it is)
    b.record("q2", ["x"], 0.25)
    merged = SearchLog.merged([a, b])
    assert merged.queries == ["q1", "", "q2"] and merged.retrieved_ids == ["x", "y", "z"]
    result = merged.episode_result(Verdict(), meta={"k": 1}, timings={"verify_s": 2.0})
    assert result.searches == ["q1", "", "q2"] and result.retrieved_ids == ["x", "y", "z"]
    assert result.timings == {"search_s": 1.0, "verify_s": 2.0} and result.meta == {"k": 1}
