"""Environments (agents' tools and protocols), built by name.

``envs.build(EnvSpec(name="veri_r1", params={"mode": "offline"}), EnvDeps(retriever=index))``
"""

from factrl.envs.base import DEFAULT_AGENT, ENVS, POLICY, Env, EnvFactory, EpisodeResult, StepResult, Switch
from factrl.envs.guards import EpisodeGuard, EpisodeStateError, SearchLog
from factrl.envs.spec import EnvDeps, EnvSpec, build, deps_from_index, env_factory, parse_params

__all__ = [
    "DEFAULT_AGENT",
    "ENVS",
    "POLICY",
    "Env",
    "EnvFactory",
    "EpisodeResult",
    "EpisodeGuard",
    "EpisodeStateError",
    "SearchLog",
    "StepResult",
    "Switch",
    "EnvDeps",
    "EnvSpec",
    "build",
    "deps_from_index",
    "env_factory",
    "parse_params",
]
