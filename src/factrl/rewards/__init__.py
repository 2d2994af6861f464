"""Rewards: a scoring stage after the rollout, registered by name in :data:`REWARDS`.

``build_reward("veri_r1").score(trajectories)`` scores a batch;
``score_trajectories(reward, trajs)`` stores the breakdowns on the trajectories; every
registered reward is also callable on one trajectory. The paper-level functions (e.g.
:func:`veri_r1_reward`) take the plain records they need.
"""

from factrl.rewards.base import (
    REWARDS,
    Reward,
    RewardDeps,
    RewardSpec,
    TrajectoryReward,
    build_reward,
    score_trajectories,
)
from factrl.rewards.veri_r1 import (
    CONVENTION_DIFFERENCES,
    CONVENTIONS,
    VeriR1Reward,
    VeriR1RewardConfig,
    validity_weight,
    veri_r1_authors_reward,
    veri_r1_reward,
    veri_r1_trajectory_reward,
)

__all__ = [
    "REWARDS",
    "Reward",
    "RewardDeps",
    "RewardSpec",
    "TrajectoryReward",
    "build_reward",
    "score_trajectories",
    "CONVENTION_DIFFERENCES",
    "CONVENTIONS",
    "VeriR1Reward",
    "VeriR1RewardConfig",
    "validity_weight",
    "veri_r1_authors_reward",
    "veri_r1_reward",
    "veri_r1_trajectory_reward",
]
