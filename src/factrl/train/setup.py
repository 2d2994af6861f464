"""A run config's environment factory and reward, built by name through the same seams
as every other entry point (:func:`factrl.envs.build`, :func:`factrl.rewards.build_reward`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from factrl.envs import Env, EnvDeps, EnvSpec, deps_from_index, env_factory
from factrl.rewards import Reward, RewardDeps, RewardSpec, build_reward
from factrl.train.config import GRPORunConfig, ModelSettings

__all__ = ["frozen_lm_options", "load_reward_lm", "run_deps", "run_env_factory", "run_reward"]


def frozen_lm_options(model: ModelSettings) -> dict[str, str]:
    """``load_lm`` keywords for the models a run calls but does not train (a searcher,
    a judge, the held-out evaluation's policy): ``model.device`` and ``model.dtype``
    resolved (auto: CUDA and bfloat16 when the machine has them, else CPU float32)."""
    from factrl.lm.device import resolve_device, resolve_dtype

    device = resolve_device(model.device)
    return {"device": device, "dtype": resolve_dtype(model.dtype, device)}


def run_deps(cfg: GRPORunConfig) -> EnvDeps:
    """The environment's dependencies: the index (loaded once, shared by every episode)
    searches and gives offline context sentences."""
    index = None
    if cfg.env.index:
        from factrl.retrieval.index import load_index

        index = load_index(cfg.env.index)
    return deps_from_index(index, context_sentences=cfg.env.context_sentences)


def run_env_factory(cfg: GRPORunConfig, deps: EnvDeps | None = None) -> Callable[[], Env]:
    """Fresh environments of the configured agent (fails at once on a bad name or a
    missing dependency, e.g. an online agent without ``env.index``)."""
    spec = EnvSpec(name=cfg.env.name, params=dict(cfg.env.params))
    try:
        return env_factory(spec, run_deps(cfg) if deps is None else deps)
    except ValueError as exc:
        hint = "" if cfg.env.index else " (env.index is not set; build one with `factrl index build`)"
        raise ValueError(f"{exc}{hint}") from None


def run_reward(cfg: GRPORunConfig, make_env: Callable[[], Env]) -> Reward:
    """The configured reward, or the agent's default one, with its parameters; a reward
    that calls LMs (``lm_roles``, e.g. Binary RAR's verifier) gets ``reward.verifier``
    (default: a frozen copy of the policy's starting model) in every role."""
    reward = build_reward(RewardSpec(name=cfg.reward.name or make_env().default_reward,
                                     params=dict(cfg.reward.params)))
    roles = tuple(getattr(reward, "lm_roles", ()))
    if roles:
        lm = load_reward_lm(cfg.reward.verifier or cfg.model.id, base_url=cfg.reward.verifier_base_url,
                            on=cfg.model)
        reward = reward.configure({}, RewardDeps(lms=dict.fromkeys(roles, lm)))
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
