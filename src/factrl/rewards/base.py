"""The reward seam: scoring is its own stage, after the rollout.

A :class:`Reward` scores a batch of finished trajectories (batched, because a reward may
call a retriever or an LM — an LM verifier, a judge) and declares the components it
reports, so a trainer logs them as columns without knowing the reward. Rewards are
registered by name in :data:`REWARDS`; :func:`build_reward` applies parameters and
dependencies, :func:`score_trajectories` writes the breakdowns onto the trajectories.
Evaluation, the TRL adapter and the verl shim all score through these.

Each paper's module also exposes its reward as a plain function over the records it
needs (verdict, gold label, gold evidence, ...).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from pydantic import Field

from factrl.registry import Registry
from factrl.types import Record, RewardBreakdown, Trajectory

__all__ = [
    "Reward",
    "TrajectoryReward",
    "REWARDS",
    "RewardSpec",
    "RewardDeps",
    "build_reward",
    "score_trajectories",
    "score_by_default",
    "reward_lm_roles",
]


@runtime_checkable
class Reward(Protocol):
    """Scores finished episodes; must not mutate them.

    ``components`` names the parts of the reward in ``RewardBreakdown.components`` (a
    trainer logs each beside the total as ``reward_<name>``); ``diagnostics`` names
    further per-episode judgements the breakdown carries that do not enter the total
    (e.g. "label correct", logged under their own names for training curves).
    ``lm_roles`` names the LMs the reward calls (``RewardDeps.lms`` keys, e.g. Binary
    RAR's ``"verifier"``, HARIS's ``"judge"``; empty for a rule-based reward), so the run
    builder (:mod:`factrl.components`) knows which models to load before scoring.
    ``configure`` returns a copy with parameters and dependencies applied. A reward that
    reads ``Trajectory.meta`` fields an environment records (its outcome,
    :mod:`factrl.envs.outcome`) lists them in an optional ``reads_meta``, so a scorer that
    only has text refuses it when the environment cannot recover them.
    """

    name: str
    components: tuple[str, ...]
    diagnostics: tuple[str, ...]
    lm_roles: tuple[str, ...]

    def score(self, trajectories: Sequence[Trajectory]) -> list[RewardBreakdown]: ...

    def configure(self, params: Mapping[str, Any], deps: RewardDeps | None = None) -> Reward: ...


@runtime_checkable
class TrajectoryReward(Protocol):
    """Scores one episode (every registered reward is also callable on one trajectory)."""

    def __call__(self, traj: Trajectory) -> RewardBreakdown: ...


class RewardSpec(Record):
    """A registered reward's name and parameters (JSON-ready, recorded with runs)."""

    name: str
    params: dict[str, Any] = Field(default_factory=dict)


@dataclass
class RewardDeps:
    """What a reward may call: a retriever, LMs by role (``"verifier"``, ``"judge"``)."""

    retriever: Any = None
    lms: Mapping[str, Any] = field(default_factory=dict)


REWARDS: Registry[Reward] = Registry("reward")
REWARDS.register_lazy("veri_r1", "factrl.rewards.veri_r1")
REWARDS.register_lazy("veri_r1_no_validity", "factrl.rewards.veri_r1")
REWARDS.register_lazy("veri_r1_no_evidence", "factrl.rewards.veri_r1")
REWARDS.register_lazy("label_only", "factrl.rewards.label_only")
REWARDS.register_lazy("haris_high", "factrl.rewards.haris")
REWARDS.register_lazy("haris_low", "factrl.rewards.haris")
REWARDS.register_lazy("profact", "factrl.rewards.profact")
# Binary RAR (001): a contradiction verifier's 0/1, and the 0-10 rating variant.
REWARDS.register_lazy("rar", "factrl.rewards.rar")
REWARDS.register_lazy("rar_rating", "factrl.rewards.rar")
# Binary RAR on a generated world: the exact factworld verifier instead of an LM.
REWARDS.register_lazy("rar_factworld", "factrl.rewards.rar_factworld")


def reward_lm_roles(reward: object) -> tuple[str, ...]:
    """The LM roles ``reward`` declares (``()`` for a plugin reward written before
    ``lm_roles`` joined the protocol); a declaration that is not a tuple of names is refused."""
    roles = getattr(reward, "lm_roles", ())
    if not isinstance(roles, tuple) or not all(isinstance(r, str) and r for r in roles):
        raise TypeError(f"reward {getattr(reward, 'name', reward)!r}: lm_roles must be a tuple of role names, "
                        f"got {roles!r}")
    return roles


def build_reward(spec: RewardSpec | str, deps: RewardDeps | None = None) -> Reward:
    """The registered reward ``spec.name`` with ``spec.params`` and ``deps`` applied."""
    if isinstance(spec, str):
        spec = RewardSpec(name=spec)
    base = REWARDS.get(spec.name)
    if not spec.params and deps is None:
        return base
    try:
        return base.configure(spec.params, deps)
    except TypeError as exc:  # an unknown parameter: say which reward refused it
        raise ValueError(f"reward {spec.name!r}: {exc}") from None


def score_trajectories(reward: Reward, trajectories: Sequence[Trajectory]) -> list[Trajectory]:
    """Score ``trajectories`` in one batch and store each breakdown in ``traj.reward``."""
    trajs = list(trajectories)
    if not trajs:
        return trajs
    breakdowns = reward.score(trajs)
    if len(breakdowns) != len(trajs):
        raise RuntimeError(f"reward {reward.name!r} returned {len(breakdowns)} scores for {len(trajs)} trajectories")
    for traj, rb in zip(trajs, breakdowns):
        traj.reward = rb
    return trajs


def score_by_default(
    trajectories: Sequence[Trajectory], default_names: Sequence[str | None], reward: Reward | None = None
) -> None:
    """Score with ``reward``, or each trajectory with its environment's default reward
    (``default_names``, aligned; None leaves one unscored), one batch per reward."""
    if reward is not None:
        score_trajectories(reward, trajectories)
        return
    by_name: dict[str, list[Trajectory]] = {}
    for traj, name in zip(trajectories, default_names):
        if name:
            by_name.setdefault(name, []).append(traj)
    for name, group in by_name.items():
        score_trajectories(build_reward(name), group)
