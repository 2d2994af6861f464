"""Rewards: pure functions of finished episodes, registered by name in :data:`REWARDS`.

``REWARDS.get("veri_r1")(trajectory)`` scores a trajectory; the paper-level functions
(e.g. :func:`veri_r1_reward`) take the plain records they need.
"""

from factrl.rewards.base import REWARDS, TrajectoryReward
from factrl.rewards.veri_r1 import (
    VeriR1Reward,
    VeriR1RewardConfig,
    validity_weight,
    veri_r1_reward,
    veri_r1_trajectory_reward,
)

__all__ = [
    "REWARDS",
    "TrajectoryReward",
    "VeriR1Reward",
    "VeriR1RewardConfig",
    "validity_weight",
    "veri_r1_reward",
    "veri_r1_trajectory_reward",
]
