"""One builder for a run's components: ``RunSpec -> Components(make_env, reward, lms)``.

Every entry point that runs an agent — ``factrl eval``/``verify``/``train teach|filter``,
the training setup (:mod:`factrl.train.setup`) and its held-out evaluation, the recipes
and the benchmarks — says what it runs as a :class:`RunSpec`: the agent (a registered
environment and its parameters), the reward, the index, a model per role, how models load
and the rollout settings. :func:`build_components` turns it into fresh environments, the
configured reward and the loaded LMs, in one order everywhere:

1. the agent under its one registry name (an alias such as ``veri_r1_offline`` becomes
   ``veri_r1`` with ``mode=offline``), with the shipped agent's own parameters as
   defaults when the policy is ``factrl-agent``;
2. the index (loaded once, shared by every episode) and the environment factory, built
   once at once so a bad name, parameter or missing dependency fails before any model
   loads;
3. the reward (the agent's default unless named);
4. the LMs the pieces declare: the policy (unless the agent runs none, ``lm_free``, or a
   trainer loads it itself), the roles the environment declares
   (:func:`~factrl.envs.base.env_lm_roles`) that have a model of their own, and every role
   the reward declares (``lm_roles``), which default to ``reward_model``, else the
   policy's model: the same instance when the builder loaded the policy, else a frozen
   copy. A model named twice loads once.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from factrl.envs import DEFAULT_AGENT, POLICY, Env, EnvDeps, EnvSpec, deps_from_index, env_factory
from factrl.envs.base import canonical_agent, env_lm_roles, is_lm_free
from factrl.registry import RegistryError
from factrl.rewards import Reward, RewardDeps, RewardSpec, build_reward
from factrl.rewards.base import reward_lm_roles
from factrl.rollout import RolloutConfig

__all__ = ["DEFAULT_CONTEXT_SENTENCES", "ComponentError", "Components", "ModelLoading", "RunSpec",
           "build_components", "build_reward_of", "context_sentences", "load_model", "mode_alias", "resolve_agent"]

DEFAULT_CONTEXT_SENTENCES = 16

Loader = Callable[[str, str], Any]  # (model, role) -> LM


class ComponentError(ValueError):
    """A run's components cannot be built; ``part`` says which: ``"agent"``, ``"reward"``
    or a model role (``"policy"``, ``"verifier"``, ``"searcher"``, ...), so an entry
    point can point at the option that set it."""

    def __init__(self, part: str, message: str) -> None:
        super().__init__(message)
        self.part = part


@dataclass(frozen=True)
class ModelLoading:
    """How models load: local ones on ``device``/``dtype`` (None: auto) with at most
    ``max_batch_size`` rows per forward pass; ``openai:NAME`` ones from ``base_url``, with
    an optional response ``cache`` file and a ``timeout`` per response."""

    device: str | None = None
    dtype: str | None = None
    max_batch_size: int | None = None
    base_url: str | None = None
    cache: str | None = None
    timeout: float | None = None

    def options(self, model: str) -> dict[str, Any]:
        """``load_lm`` keywords for ``model``: the remote ones for an ``openai:`` model,
        the local ones for any other."""
        from factrl.lm.loader import remote_backend

        if remote_backend(model) is not None:
            pairs = (("base_url", self.base_url), ("cache", self.cache), ("timeout", self.timeout))
        else:
            pairs = (("device", self.device), ("dtype", self.dtype), ("max_batch_size", self.max_batch_size))
        return {k: v for k, v in pairs if v is not None}


@dataclass(frozen=True)
class RunSpec:
    """What a run runs. ``reward`` with ``reward_params`` names the reward (None: the
    agent's default). ``models`` maps a role to its model (``"policy"`` plays the
    opening context; a role without one uses the policy's model). ``reward_model`` is the
    model of every LM role the reward declares without a model of its own (Binary RAR's
    verifier; default: the policy's); ``judge_model`` the one the agent's run metrics judge
    with (default: the reward's, else the policy). ``context_sentences`` None: the shipped agent's own,
    else 16. ``load_policy`` False: a trainer loads (and trains) the policy itself."""

    agent: EnvSpec = field(default_factory=lambda: EnvSpec(name=DEFAULT_AGENT))
    reward: str | None = None  # a REWARDS name; None: the agent's default reward
    reward_params: Mapping[str, Any] = field(default_factory=dict)
    index: str | None = None
    context_sentences: int | None = None
    models: Mapping[str, str] = field(default_factory=dict)
    reward_model: str | None = None
    judge_model: str | None = None  # the LM the agent's run metrics judge with
    loading: ModelLoading = field(default_factory=ModelLoading)
    load_policy: bool = True
    rollout: RolloutConfig = field(default_factory=RolloutConfig)

    @property
    def policy_model(self) -> str | None:
        return self.models.get(POLICY)


@dataclass
class Components:
    """What :func:`build_components` built. ``spec`` is the resolved one (the agent under
    its registry name with the parameters that actually run, the context size used): a
    run records ``spec.agent``. ``lms`` maps roles to loaded LMs (``"policy"`` when the
    builder loaded it); ``env_roles`` and ``reward_roles`` say which roles each part asked for."""

    spec: RunSpec
    make_env: Callable[[], Env]
    reward: Reward
    lms: dict[str, Any]
    index: Any = None
    env_roles: tuple[str, ...] = ()
    reward_roles: tuple[str, ...] = ()
    reward_lm: Any = None

    @property
    def policy(self) -> Any:
        return self.lms.get(POLICY)

    def role_lms(self) -> dict[str, Any]:
        """The LMs of the environment's roles besides the policy (``evaluate``'s ``lms``):
        only those loaded for a model of their own; the others play with the policy's."""
        return {r: lm for r, lm in self.lms.items() if r != POLICY and r not in self.reward_roles}

    @property
    def judge(self) -> Any:
        """The LM that judges for the agent's run metrics: the reward's LM, else the policy."""
        return self.reward_lm if self.reward_lm is not None else self.policy


def resolve_agent(agent: EnvSpec | str, model: str | None = None) -> EnvSpec:
    """``agent`` under its one registry name, with the parameters the shipped agent was
    trained with as defaults when ``model`` names it (explicit parameters win)."""
    spec = EnvSpec(name=agent) if isinstance(agent, str) else agent
    name, params = canonical_agent(spec.name, spec.params)
    if model is not None:
        from factrl.lm.agent import AgentAssetError, agent_params

        try:
            params = {**agent_params(model, name), **params}
        except AgentAssetError as exc:
            raise ComponentError(POLICY, str(exc)) from None
    return EnvSpec(name=name, params=params)


_MODE_WARNED: set[str] = set()


def mode_alias(params: Mapping[str, Any], mode: str | None, *, where: str) -> dict[str, Any]:
    """``params`` with the deprecated ``mode=`` shorthand of ``where`` (a Python entry point
    such as the verl exporter) folded in as the agent's ``mode`` parameter; an explicit
    ``mode`` in ``params`` wins. Warns once per process and entry point (a
    ``FutureWarning``: verl's reward calls it for every sample)."""
    out = dict(params)
    if mode is None:
        return out
    if where not in _MODE_WARNED:
        _MODE_WARNED.add(where)
        import warnings

        warnings.warn(f"{where}: mode= is deprecated; pass the agent's parameter mode={mode!r} instead",
                      FutureWarning, stacklevel=3)
    out.setdefault("mode", mode)
    return out


def context_sentences(value: int | None, model: str | None, agent: str) -> int:
    """``value`` when given; else the shipped agent's own offline context size when ``model``
    names it and ``agent`` is its environment; else 16."""
    if value is not None:
        return value
    if model is not None:
        from factrl.lm.agent import AgentAssetError, agent_context_sentences

        try:
            own = agent_context_sentences(model, agent)
        except AgentAssetError as exc:
            raise ComponentError(POLICY, str(exc)) from None
        if own:
            return own
    return DEFAULT_CONTEXT_SENTENCES


def load_model(model: str, loading: ModelLoading | None = None) -> Any:
    """One model by name: the trained cross-encoder for ``factrl-verifier`` (or a verifier
    folder), else an LM through :func:`factrl.lm.loader.load_lm` with ``loading``'s options."""
    from factrl.verifier.asset import is_verifier_name

    if is_verifier_name(model):
        from factrl.verifier.asset import load_verifier

        return load_verifier(model)
    from factrl.lm.loader import load_lm

    return load_lm(model, **(loading or ModelLoading()).options(model))


class _Models:
    """Loads each model once (a model named for several roles is one instance)."""

    def __init__(self, spec: RunSpec, loader: Loader | None) -> None:
        self.loader = loader or (lambda model, _role: load_model(model, spec.loading))
        self.loaded: dict[str, Any] = {}

    def __call__(self, model: str, role: str) -> Any:
        from factrl.lm.agent import AgentAssetError
        from factrl.lm.loader import LMLoadError
        from factrl.verifier.asset import VerifierAssetError

        if model not in self.loaded:
            try:
                self.loaded[model] = self.loader(model, role)
            except (LMLoadError, VerifierAssetError, AgentAssetError) as exc:
                raise ComponentError(role, str(exc)) from None
        return self.loaded[model]


def build_reward_of(spec: RunSpec, default_reward: str, *, index: Any = None, loader: Loader | None = None,
                    _models: _Models | None = None) -> tuple[Reward, dict[str, Any]]:
    """``(reward, {role: LM})``: ``spec``'s reward (``default_reward`` when it names none)
    with the LMs of the roles it declares (``lm_roles``) loaded and given to it."""
    load = _models or _Models(spec, loader)
    try:
        reward = build_reward(RewardSpec(name=spec.reward or default_reward, params=dict(spec.reward_params)))
    except (ValueError, RegistryError) as exc:
        raise ComponentError("reward", str(exc)) from None
    roles = reward_lm_roles(reward)
    lms: dict[str, Any] = {}
    for role in roles:
        model = spec.models.get(role) or spec.reward_model or spec.policy_model
        if model is None:
            raise ComponentError(role, f"reward {reward.name!r} calls an LM as {role!r} and no model is given")
        lms[role] = load(model, role)
    if roles:
        reward = reward.configure({}, RewardDeps(retriever=index, lms=lms))
    return reward, lms


def build_components(spec: RunSpec, *, index: Any = None, deps: EnvDeps | None = None,
                     loader: Loader | None = None) -> Components:
    """The environment factory, reward and LMs of ``spec`` (see the module docstring).
    ``index``: an index already loaded (else ``spec.index`` is loaded); ``deps``: the
    environments' dependencies outright (tests, recipes with their own world);
    ``loader(model, role)`` loads one model (default: :func:`load_model` with
    ``spec.loading``). Problems are :class:`ComponentError`."""
    policy_model = spec.policy_model
    agent = resolve_agent(spec.agent, policy_model)
    n_context = context_sentences(spec.context_sentences, policy_model, agent.name)
    if index is None and spec.index and deps is None:
        from factrl.retrieval.index import load_index

        index = load_index(spec.index)
    env_deps = deps if deps is not None else deps_from_index(index, context_sentences=n_context)
    try:
        make_env = env_factory(agent, env_deps)
    except (ValueError, RegistryError) as exc:
        hint = "" if index is not None or deps is not None else " (no index was given)"
        raise ComponentError("agent", f"{exc}{hint}") from None
    env = make_env()
    load = _Models(spec, loader)
    lms: dict[str, Any] = {}
    if spec.load_policy:
        if is_lm_free(agent.name):  # e.g. retrieve_verify: the verifier decides, no policy LM loads
            from factrl.lm.scripted import null_lm

            lms[POLICY] = null_lm()
        elif policy_model is None:
            raise ComponentError(POLICY, "no model is given for the policy")
        else:
            lms[POLICY] = load(policy_model, POLICY)
    for role, model in spec.models.items():  # roles with a model of their own
        if role != POLICY:
            lms[role] = load(model, role)
    reward, reward_lms = build_reward_of(spec, env.default_reward, index=index, _models=load)
    lms.update(reward_lms)
    # the agent's run metrics judge with judge_model, else the reward's LM, else the policy
    reward_lm = load(spec.judge_model, "judge") if spec.judge_model else next(iter(reward_lms.values()), None)
    resolved = replace(spec, agent=agent, context_sentences=n_context)
    return Components(spec=resolved, make_env=make_env, reward=reward, lms=lms, index=index,
                      env_roles=env_lm_roles(env), reward_roles=tuple(reward_lms), reward_lm=reward_lm)
