"""The environment seam: text in, text out. Environments never tokenise; the rollout
runner owns token ids and masks, so one environment runs under plain evaluation, TRL's
rollout hook and verl's agent loop alike."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from factrl.registry import Registry
from factrl.types import Claim, Message, RewardBreakdown, Verdict

__all__ = ["Env", "StepResult", "EpisodeResult", "ENVS", "EnvFactory"]


@dataclass
class StepResult:
    """What the environment answers to one model turn.

    ``observation`` is text the system appends to the context (tokens masked out of the
    loss); ``done`` ends the episode.
    """

    observation: str | None
    done: bool


@dataclass
class EpisodeResult:
    verdict: Verdict
    reward: RewardBreakdown
    searches: list[str] = field(default_factory=list)
    retrieved_ids: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Env(Protocol):
    name: str
    stop: tuple[str, ...]  # generation stops after any of these strings
    max_turns: int

    def reset(self, claim: Claim) -> list[Message]: ...

    def step(self, model_text: str) -> StepResult: ...

    def result(self) -> EpisodeResult: ...


EnvFactory = Callable[[], Env]

ENVS: Registry[Callable[..., Env]] = Registry("environment")
ENVS.register_lazy("veri_r1", "factrl.envs.veri_r1")
ENVS.register_lazy("veri_r1_offline", "factrl.envs.veri_r1")
