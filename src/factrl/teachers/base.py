"""The teachers' registry: agent name -> the rule-based teacher of that agent's protocol.

A teacher is a scripted LM (:class:`~factrl.lm.scripted.ScriptedLM`) that plays an
environment from the gold label and evidence, writing protocol-perfect trajectories for a
warm-up SFT. Its factory takes ``(claims, agent params)``; it may declare
``env_defaults``, the agent parameters ``factrl train teach`` uses unless told otherwise
(the Veri-R1 template teacher writes offline episodes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from factrl.envs.base import canonical_agent
from factrl.lm.scripted import ScriptedLM
from factrl.registry import Registry
from factrl.types import Claim

__all__ = ["TEACHERS", "make_teacher", "teacher_env_defaults"]

TEACHERS: Registry[Any] = Registry("teacher")
TEACHERS.register_lazy("veri_r1", "factrl.teachers.template")
TEACHERS.register_lazy("profact", "factrl.teachers.profact")
TEACHERS.register_lazy("rar", "factrl.teachers.rar")
TEACHERS.register_lazy("haris", "factrl.teachers.haris")


def make_teacher(agent: str, claims: Sequence[Claim], params: dict[str, Any] | None = None) -> ScriptedLM:
    """The rule-based teacher of ``agent``'s protocol (``factrl train teach --agent``; an
    alias such as ``veri_r1_offline`` is its environment with the parameters it fixes);
    an agent without one is a :class:`~factrl.registry.RegistryError` naming those that have."""
    name, values = canonical_agent(agent, params)
    return TEACHERS.get(name)(claims, values)


def teacher_env_defaults(agent: str) -> dict[str, Any]:
    """The agent parameters ``agent``'s teacher writes episodes with unless told
    otherwise (``{}`` for none, or an agent without a teacher)."""
    name, _ = canonical_agent(agent)
    if name not in TEACHERS:
        return {}
    return dict(getattr(TEACHERS.get(name), "env_defaults", {}) or {})
