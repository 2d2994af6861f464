"""The run builder (factrl.components): one RunSpec -> environments, reward and the LMs the
pieces declare; aliases resolve to one registry name; models named twice load once."""

from __future__ import annotations

import pytest

from factrl.components import ComponentError, ModelLoading, RunSpec, build_components, resolve_agent
from factrl.envs import DEFAULT_AGENT, ENVS, POLICY, EnvDeps, EnvSpec, build
from factrl.envs.base import canonical_agent, env_lm_roles
from factrl.registry import Registry, RegistryError
from factrl.rewards import REWARDS, build_reward
from factrl.rewards.base import reward_lm_roles

from _support import WordOverlapRetriever


class Loads:
    """A loader that records (model, role) and gives each model one distinct object."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def __call__(self, model: str, role: str) -> object:
        self.calls.append((model, role))
        return type("FakeLM", (), {"name": model})()


def _deps() -> EnvDeps:
    return EnvDeps(retriever=WordOverlapRetriever([]))


def test_an_alias_resolves_to_its_environment_and_is_recorded_under_its_name():
    assert ENVS.canonical("veri_r1_offline") == "veri_r1"
    assert "veri_r1_offline" not in ENVS.names() and "veri_r1" in ENVS.names()
    assert canonical_agent("veri_r1_offline") == ("veri_r1", {"mode": "offline"})
    assert canonical_agent("veri_r1_offline", {"mode": "online", "top_k": 2}) == ("veri_r1", {"mode": "online", "top_k": 2})
    assert canonical_agent("haris", {"x": 1}) == ("haris", {"x": 1})
    run = build_components(RunSpec(agent=EnvSpec(name="veri_r1_offline"), load_policy=False), deps=_deps())
    assert run.spec.agent == EnvSpec(name="veri_r1", params={"mode": "offline"})
    assert run.make_env().max_turns == 1  # offline: one model turn


def test_registry_aliases_resolve_but_are_not_listed():
    reg: Registry[object] = Registry("thing")
    reg.register("a")(1)
    reg.register_lazy("b", "factrl.labels", alias_of="a")
    reg.register("b")(1)
    assert reg.names() == ["a"] and reg.get("b") == 1 and reg.canonical("b") == "a" and reg.aliases() == {"b": "a"}
    with pytest.raises(ValueError, match="alias of itself"):
        reg.register_lazy("c", "x", alias_of="c")


def test_every_registered_reward_declares_its_lm_roles():
    from factrl.rewards.base import reward_lm_roles

    for name in REWARDS.names():  # plug-ins registered by other tests may predate lm_roles: read as ()
        roles = reward_lm_roles(build_reward(name))
        assert isinstance(roles, tuple) and all(isinstance(r, str) for r in roles), name
    assert build_reward("rar").lm_roles == ("verifier",) and build_reward("haris_low").lm_roles == ("judge",)
    assert build_reward("veri_r1").lm_roles == ()
    with pytest.raises(TypeError, match="lm_roles must be a tuple"):
        reward_lm_roles(type("R", (), {"name": "r", "lm_roles": "verifier"})())
    assert reward_lm_roles(object()) == ()  # a plugin reward written before the field


def test_environments_declare_their_roles():
    assert env_lm_roles(build("veri_r1", _deps())) == ()
    assert env_lm_roles(build("haris", _deps())) == ("searcher",)  # from its segment_budget
    assert env_lm_roles(type("E", (), {"lm_roles": ("policy", "critic", "critic")})()) == ("critic",)


def test_the_reward_roles_play_with_the_policy_instance_unless_given_a_model():
    loads = Loads()
    run = build_components(RunSpec(agent=EnvSpec(name="rar"), models={POLICY: "p"}), loader=loads)
    assert loads.calls == [("p", POLICY)]  # one model, one load
    assert run.reward_roles == ("verifier",) and run.lms["verifier"] is run.policy is run.judge
    assert run.reward.verifier is run.policy and run.role_lms() == {}
    loads = Loads()
    run = build_components(RunSpec(agent=EnvSpec(name="rar"), models={POLICY: "p"}, reward_model="v",
                                   judge_model="v"), loader=loads)
    assert loads.calls == [("p", POLICY), ("v", "verifier")]
    assert run.reward.verifier is run.lms["verifier"] is run.judge is not run.policy


def test_a_trainer_loads_its_own_policy_and_the_reward_gets_a_frozen_copy():
    loads = Loads()
    run = build_components(RunSpec(agent=EnvSpec(name="rar"), models={POLICY: "p"}, load_policy=False), loader=loads)
    assert loads.calls == [("p", "verifier")] and run.policy is None and run.reward.verifier.name == "p"


def test_sub_agent_roles_get_their_own_model_and_lm_free_agents_load_none():
    loads = Loads()
    run = build_components(RunSpec(agent=EnvSpec(name="haris"), models={POLICY: "r", "searcher": "s"}),
                           deps=_deps(), loader=loads)
    assert run.env_roles == ("searcher",) and set(run.role_lms()) == {"searcher"}
    assert run.role_lms()["searcher"].name == "s" and loads.calls == [("r", POLICY), ("s", "searcher")]
    loads = Loads()
    run = build_components(RunSpec(agent=EnvSpec(name="retrieve_verify"), models={POLICY: "never"}),
                           deps=_deps(), loader=loads)
    assert loads.calls == [] and run.policy is not None  # the no-op LM


def test_problems_name_the_part_at_fault():
    with pytest.raises(ComponentError, match="no-such-agent") as exc:
        build_components(RunSpec(agent=EnvSpec(name="no-such-agent"), load_policy=False))
    assert exc.value.part == "agent"
    with pytest.raises(ComponentError) as exc:
        build_components(RunSpec(agent=EnvSpec(name="veri_r1"), load_policy=False))  # online, no index
    assert exc.value.part == "agent" and "no index was given" in str(exc.value)
    with pytest.raises(ComponentError) as exc:
        build_components(RunSpec(reward="no-such-reward", load_policy=False), deps=_deps())
    assert exc.value.part == "reward"
    with pytest.raises(ComponentError) as exc:
        build_components(RunSpec(agent=EnvSpec(name="rar"), load_policy=False))
    assert exc.value.part == "verifier" and "no model is given" in str(exc.value)
    with pytest.raises(ComponentError) as exc:
        build_components(RunSpec(), deps=_deps())  # no model for the policy
    assert exc.value.part == POLICY


def test_model_loading_gives_each_kind_of_model_its_own_options():
    loading = ModelLoading(device="cpu", dtype="float32", max_batch_size=8, base_url="http://x/v1", timeout=5.0)
    assert loading.options("smollm2") == {"device": "cpu", "dtype": "float32", "max_batch_size": 8}
    assert loading.options("openai:m") == {"base_url": "http://x/v1", "timeout": 5.0}


def test_the_default_agent_is_one_name():
    assert resolve_agent(EnvSpec(name=DEFAULT_AGENT)).name == DEFAULT_AGENT
    assert RunSpec().agent.name == DEFAULT_AGENT
    with pytest.raises(RegistryError):
        ENVS.get("veri_r1_online")


def test_mode_alias_folds_in_once_and_an_explicit_mode_wins(monkeypatch):
    import warnings

    from factrl import components
    from factrl.components import mode_alias

    monkeypatch.setattr(components, "_MODE_WARNED", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert mode_alias({"max_searches": 2}, "offline", where="x") == {"max_searches": 2, "mode": "offline"}
        assert mode_alias({"mode": "online"}, "offline", where="x") == {"mode": "online"}
        assert mode_alias({}, None, where="y") == {}
        mode_alias({}, "online", where="y")
    assert [str(w.message).split(":")[0] for w in caught if issubclass(w.category, FutureWarning)] == ["x", "y"]
