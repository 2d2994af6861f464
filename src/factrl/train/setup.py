"""A run config's environment factory and reward, built by name through the same seams
as every other entry point (:func:`factrl.envs.build`, :func:`factrl.rewards.build_reward`)."""

from __future__ import annotations

from collections.abc import Callable

from factrl.envs import Env, EnvDeps, EnvSpec, deps_from_index, env_factory
from factrl.rewards import Reward, RewardSpec, build_reward
from factrl.train.config import GRPORunConfig

__all__ = ["run_deps", "run_env_factory", "run_reward"]


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
    """The configured reward, or the agent's default one, with its parameters."""
    return build_reward(RewardSpec(name=cfg.reward.name or make_env().default_reward, params=dict(cfg.reward.params)))
