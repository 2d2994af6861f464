"""The environment seam: text in, text out. Environments never tokenise and never score:
the episode machine (:mod:`factrl.episode`) owns token ids and masks, and a reward
(:mod:`factrl.rewards`) scores the finished trajectory, so one environment runs under
plain evaluation, TRL's rollout hook and verl's agent loop alike.

An environment may move the conversation to another context: a :class:`Switch` in its
:class:`StepResult` asks for the next generation as a given role, either on fresh chat
messages (a reset context, or a sub-agent's episode inside a turn) or back on that
role's latest context. Such an environment declares ``segment_budget`` — role → the most
fresh contexts of that role one episode opens — so a trainer can size its batches
(:func:`factrl.train.rollout_adapter.contexts_per_trajectory`); one that opens none
needs no such attribute.

An environment may also declare ``sampling`` — role → :class:`RoleSampling` — to run a
role at its own temperature or token limits instead of the rollout's (HARIS's released
code samples its reasoner at 0.1 and its search agent at 1.0, 2,048 tokens a turn); one
that declares none runs every role with the rollout's settings.

Optional hooks an environment may declare (one that declares none does without):
``answer_forcing`` (a :class:`~factrl.protocol.forcing.AnswerForcing`: how ``verify`` and
the demo draw a verdict from an episode that ended without one; Veri-R1 declares its
``<answer>\nLabel:`` opening), and ``lm_roles`` (the roles besides the policy it needs an
LM for; by default the roles of its ``segment_budget``), which the run builder
(:mod:`factrl.components`) reads to know which models to load.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from factrl.registry import Registry
from factrl.types import Claim, Message, Verdict

__all__ = ["DEFAULT_AGENT", "Env", "StepResult", "Switch", "EpisodeResult", "ENVS", "EnvFactory", "POLICY", "RoleSampling",
           "role_sampling", "check_trained_temperatures", "is_lm_free", "env_lm_roles", "ENV_ALIAS_PARAMS",
           "canonical_agent"]

POLICY = "policy"  # the role whose opening context a trainer optimises


@dataclass(frozen=True)
class Switch:
    """Generate next as ``role``: on fresh ``messages`` (a new context with its own
    prompt), or, with ``messages=None``, back on that role's latest context. ``stop``
    replaces the environment's stop strings in the new context."""

    role: str = POLICY
    messages: list[Message] | None = None
    stop: tuple[str, ...] | None = None


@dataclass(frozen=True)
class RoleSampling:
    """How one role generates, where it departs from the rollout's settings: ``None``
    keeps the rollout's ``temperature``, per-turn ``max_new_tokens`` or per-context
    ``max_context_tokens`` (model and observation tokens after the context's prompt)."""

    temperature: float | None = None
    max_new_tokens: int | None = None
    max_context_tokens: int | None = None

    def __post_init__(self) -> None:
        if self.temperature is not None and self.temperature < 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        for name in ("max_new_tokens", "max_context_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")


def role_sampling(env: object, role: str) -> RoleSampling:
    """The sampling ``env`` declares for ``role`` (the rollout's settings when none)."""
    return (getattr(env, "sampling", None) or {}).get(role) or RoleSampling()


def check_trained_temperatures(env: object, roles: Collection[str], temperature: float) -> None:
    """A trainer recomputes the policy's logprobs at the run's temperature: an environment
    that samples a trained role (the opening context's, or one of ``roles``) at another
    would train on logprobs of a distribution it did not sample from, so it is refused."""
    for role in (POLICY, *sorted(roles)):
        own = role_sampling(env, role).temperature
        if own is not None and own != temperature:
            raise ValueError(f"the environment samples the trained role {role!r} at temperature {own}, the run at "
                             f"{temperature}: set the environment's temperature for that role to None or "
                             f"{temperature}")


@dataclass
class StepResult:
    """What the environment answers to one model turn.

    ``observation`` is text appended to the context the next generation continues
    (after a ``switch``, the context switched to); its tokens are masked out of the loss.
    ``done`` ends the episode.
    """

    observation: str | None
    done: bool
    switch: Switch | None = None


@dataclass
class EpisodeResult:
    """What an episode concluded. No reward: scoring is a separate stage."""

    verdict: Verdict
    searches: list[str] = field(default_factory=list)
    retrieved_ids: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Env(Protocol):
    name: str
    stop: tuple[str, ...]  # generation stops after any of these strings
    max_turns: int  # model turns, all contexts together
    default_reward: str  # the REWARDS name that scores this agent unless told otherwise

    def reset(self, claim: Claim) -> list[Message]: ...

    def step(self, model_text: str) -> StepResult: ...

    def result(self) -> EpisodeResult: ...

    def parse_verdict(self, model_text: str) -> Verdict:
        """The verdict a whole model text gives (what ``result`` reports after an
        episode); lets a scorer that only has text (verl's reward shim) judge it."""
        ...


EnvFactory = Callable[[], Env]

# The agent a command, a training config or an exporter runs when none is named.
DEFAULT_AGENT = "veri_r1"

# Entries are factories ``(deps: EnvDeps, **params) -> Env``; build them with
# :func:`factrl.envs.build`.
ENVS: Registry[Callable[..., Env]] = Registry("environment")
ENVS.register_lazy("veri_r1", "factrl.envs.veri_r1")
# An old name of ``veri_r1`` with mode=offline (configs and verl files written with it
# still run); runs record it as ``veri_r1`` with its parameters (canonical_agent).
ENVS.register_lazy("veri_r1_offline", "factrl.envs.veri_r1", alias_of="veri_r1")
# Baselines (factrl.envs.baselines): direct prompting, single-shot RAG,
# decompose-then-verify, ReAct.
ENVS.register_lazy("direct", "factrl.envs.baselines.direct")
ENVS.register_lazy("rag", "factrl.envs.baselines.rag")
ENVS.register_lazy("decompose", "factrl.envs.baselines.decompose")
ENVS.register_lazy("react", "factrl.envs.baselines.react")
# HARIS (factrl.envs.haris): reasoning agent with a search sub-agent, the search agent
# alone (its GRPO stage), and the single-agent comparison.
ENVS.register_lazy("haris", "factrl.envs.haris.reasoner")
ENVS.register_lazy("haris_searcher", "factrl.envs.haris.searcher")
ENVS.register_lazy("haris_single", "factrl.envs.haris.single")
# ProFact (SPEC §3): questions → isolated search contexts → verdict.
ENVS.register_lazy("profact", "factrl.envs.profact.env")
# Binary RAR (001): answer a prompt in one turn, scored by a contradiction verifier.
ENVS.register_lazy("rar", "factrl.envs.rar")
# Retrieve, then read each retrieved sentence with the trained verifier (no LM).
ENVS.register_lazy("retrieve_verify", "factrl.envs.retrieve_verify")


# The parameters an alias of :data:`ENVS` fixes (alias → parameters).
ENV_ALIAS_PARAMS: dict[str, dict[str, Any]] = {"veri_r1_offline": {"mode": "offline"}}


def canonical_agent(name: str, params: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """``(name, params)`` under the environment's one registry name: an alias becomes the
    environment it stands for, with the parameters it fixes (the caller's win)."""
    canonical = ENVS.canonical(name)
    if canonical == name:
        return name, dict(params or {})
    return canonical, {**ENV_ALIAS_PARAMS.get(name, {}), **(params or {})}


def env_lm_roles(env: object) -> tuple[str, ...]:
    """The roles besides the policy that ``env`` needs an LM for: its ``lm_roles`` when it
    declares them, else the roles it opens contexts for (its ``segment_budget``)."""
    declared = getattr(env, "lm_roles", None)
    roles = declared if declared is not None else tuple((getattr(env, "segment_budget", None) or {}).keys())
    return tuple(r for r in dict.fromkeys(roles) if r != POLICY)


def is_lm_free(name: str) -> bool:
    """Whether the agent ``name`` decides without a language model (its factory says
    ``lm_free``): entry points then run it with a no-op LM instead of loading one."""
    try:
        return bool(getattr(ENVS.get(name), "lm_free", False))
    except KeyError:
        return False
