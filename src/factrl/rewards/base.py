"""The reward seam: a reward is a pure function of a finished :class:`Trajectory`.

Rewards are registered by name in :data:`REWARDS` so a config or CLI flag picks one, e.g.
``REWARDS.get("veri_r1")(traj).total``. Each paper's module also exposes its reward as a
plain function over the records it needs (verdict, gold label, gold evidence, ...), so
adapters for TRL (``(completions, **columns) -> list[float]``) or verl
(``compute_score``) stay a few lines.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from factrl.registry import Registry
from factrl.types import RewardBreakdown, Trajectory

__all__ = ["TrajectoryReward", "REWARDS"]


@runtime_checkable
class TrajectoryReward(Protocol):
    """Scores one episode; must not mutate it."""

    def __call__(self, traj: Trajectory) -> RewardBreakdown: ...


REWARDS: Registry[TrajectoryReward] = Registry("reward")
