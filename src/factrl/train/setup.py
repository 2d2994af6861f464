"""A run config's environment factory and reward, built by the run builder every entry
point uses (:func:`factrl.components.build_components`): :func:`run_spec` says what a
training config runs as a :class:`~factrl.components.RunSpec` (the policy is the
trainer's, so the builder loads only the models the reward declares)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from factrl.components import ComponentError, Components, RunSpec, build_components, build_reward_of
from factrl.envs import POLICY, Env, EnvDeps, EnvSpec, deps_from_index
from factrl.rewards import Reward
from factrl.rollout import RolloutConfig
from factrl.train.config import GRPORunConfig, ModelSettings

__all__ = ["frozen_lm_options", "load_reward_lm", "run_components", "run_deps", "run_env_factory", "run_reward",
           "run_spec"]


def frozen_lm_options(model: ModelSettings) -> dict[str, str]:
    """``load_lm`` keywords for the models a run calls but does not train (a searcher,
    a judge, the held-out evaluation's policy): ``model.device`` and ``model.dtype``
    resolved (auto: CUDA and bfloat16 when the machine has them, else CPU float32)."""
    from factrl.lm.device import resolve_device, resolve_dtype

    device = resolve_device(model.device)
    return {"device": device, "dtype": resolve_dtype(model.dtype, device)}


def run_spec(cfg: GRPORunConfig, *, model: str | None = None, load_policy: bool = False) -> RunSpec:
    """What ``cfg`` runs: its agent, reward, index and rollout settings; the policy is
    ``model`` (default ``model.id``), loaded by the builder only with ``load_policy`` (a
    held-out evaluation; a trainer loads its own); the reward's LM roles play with
    ``reward.verifier``, else the policy's starting model (``model.id``: before and after
    training alike), loaded frozen."""
    return RunSpec(agent=EnvSpec(name=cfg.env.name, params=dict(cfg.env.params)), reward=cfg.reward.name,
                   reward_params=dict(cfg.reward.params), index=cfg.env.index,
                   context_sentences=cfg.env.context_sentences, models={POLICY: model or cfg.model.id},
                   reward_model=cfg.reward.verifier or cfg.model.id, load_policy=load_policy,
                   rollout=RolloutConfig(temperature=cfg.rollout.temperature, max_new_tokens=cfg.rollout.max_new_tokens,
                                         max_total_tokens=cfg.rollout.max_total_tokens,
                                         batch_size=cfg.rollout.batch_size))


def run_deps(cfg: GRPORunConfig) -> EnvDeps:
    """The environment's dependencies: the index (loaded once, shared by every episode)
    searches and gives offline context sentences."""
    index = None
    if cfg.env.index:
        from factrl.retrieval.index import load_index

        index = load_index(cfg.env.index)
    return deps_from_index(index, context_sentences=cfg.env.context_sentences)


def _loader(cfg: GRPORunConfig, spec: RunSpec) -> Callable[[str, str], Any]:
    """How a training run loads a model for a role, never to train it: the policy (a
    held-out evaluation's) and sub-agents on the run's ``model`` settings, a reward's
    model through :func:`load_reward_lm`."""

    def load(model: str, role: str) -> Any:
        if role in spec.models and spec.models[role] == model:
            from factrl.lm.loader import load_lm, remote_backend

            local = spec.loading.options(model) if remote_backend(model) is None else {}
            return load_lm(model, **frozen_lm_options(cfg.model), **local)
        return load_reward_lm(model, base_url=cfg.reward.verifier_base_url, on=cfg.model)

    return load


def run_components(cfg: GRPORunConfig, deps: EnvDeps | None = None, *, spec: RunSpec | None = None) -> Components:
    """:func:`~factrl.components.build_components` of ``spec`` (default :func:`run_spec`)
    on ``deps`` (default: :func:`run_deps`), models loading as :func:`_loader` says. A bad
    agent (e.g. an online one without ``env.index``) or reward is a ValueError naming it."""
    spec = spec or run_spec(cfg)
    try:
        return build_components(spec, deps=run_deps(cfg) if deps is None else deps, loader=_loader(cfg, spec))
    except ComponentError as exc:
        hint = "" if cfg.env.index or exc.part != "agent" else " (env.index is not set; build one with `factrl index build`)"
        raise ValueError(f"{exc}{hint}") from None


def run_env_factory(cfg: GRPORunConfig, deps: EnvDeps | None = None) -> Callable[[], Env]:
    """Fresh environments of the configured agent (fails at once on a bad name or a
    missing dependency, e.g. an online agent without ``env.index``); no model loads."""
    from factrl.components import resolve_agent
    from factrl.envs import env_factory

    try:
        return env_factory(resolve_agent(run_spec(cfg).agent), run_deps(cfg) if deps is None else deps)
    except ValueError as exc:
        hint = "" if cfg.env.index else " (env.index is not set; build one with `factrl index build`)"
        raise ValueError(f"{exc}{hint}") from None


def run_reward(cfg: GRPORunConfig, make_env: Callable[[], Env]) -> Reward:
    """The configured reward, or the agent's default one, with its parameters; a reward
    that calls LMs (``lm_roles``, e.g. Binary RAR's verifier) gets ``reward.verifier``
    (default: a frozen copy of the policy's starting model) in every role."""
    spec = run_spec(cfg)
    try:
        reward, _ = build_reward_of(spec, make_env().default_reward, loader=_loader(cfg, spec))
    except ComponentError as exc:
        raise ValueError(str(exc)) from None
    return reward


def load_reward_lm(model: str, *, base_url: str | None = None, on: ModelSettings | None = None) -> Any:
    """A reward's LM: over HTTP for ``openai:NAME`` (with ``base_url``), the trained
    cross-encoder for ``factrl-verifier`` (or a verifier folder), else loaded here where
    ``on`` (the run's ``model`` settings) says, auto by default (on the GPU when there is
    one), and never trained."""
    from factrl.lm.loader import load_lm, remote_backend
    from factrl.verifier.asset import is_verifier_name

    if is_verifier_name(model):  # the trained cross-encoder (factrl-verifier): CPU, no LM
        if base_url:
            raise ValueError(f"reward.verifier_base_url is for an openai:NAME verifier, not {model!r}")
        from factrl.verifier.asset import load_verifier

        return load_verifier(model)
    if remote_backend(model) is not None:
        return load_lm(model, **({"base_url": base_url} if base_url else {}))
    if base_url:
        raise ValueError(f"reward.verifier_base_url is for an openai:NAME verifier, not {model!r}")
    return load_lm(model, **frozen_lm_options(on or ModelSettings()))
