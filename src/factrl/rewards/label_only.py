"""A reward for agents whose verdict has a label and no evidence (``direct``):

    R = format_weight · R_format + R_label

- R_format ∈ {0, 1}: ``verdict.format_ok``.
- R_label = ``label_correct`` (2, as in Veri-R1) if the predicted label equals gold, else 0.

An episode that ended in an error scores 0; an unlabelled claim gets an empty breakdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from factrl.labels import normalise_label
from factrl.rewards.base import REWARDS, RewardDeps
from factrl.types import RewardBreakdown, Trajectory

__all__ = ["LabelOnlyReward"]


@dataclass(frozen=True)
class LabelOnlyReward:
    label_correct: float = 2.0
    format_weight: float = 1.0
    name: str = "label_only"
    components: ClassVar[tuple[str, ...]] = ("label", "format")
    diagnostics: ClassVar[tuple[str, ...]] = ("label_correct",)
    lm_roles: ClassVar[tuple[str, ...]] = ()  # no LM

    def __call__(self, traj: Trajectory) -> RewardBreakdown:
        if traj.claim.label is None:
            raise ValueError(f"claim {traj.claim_id!r} has no gold label; cannot compute a reward")
        v = traj.verdict
        ok = traj.error is None
        correct = ok and v.label is not None and v.label == normalise_label(traj.claim.label)
        r_label = self.label_correct if correct else 0.0
        r_format = 1.0 if ok and v.format_ok else 0.0
        total = r_label + self.format_weight * r_format
        return RewardBreakdown(components={"label": r_label, "format": r_format, "label_correct": float(correct),
                                           "total": total}, total=total)

    def score(self, trajectories: Sequence[Trajectory]) -> list[RewardBreakdown]:
        return [self(t) if t.claim.label is not None else RewardBreakdown() for t in trajectories]

    def configure(self, params: Mapping[str, Any], deps: RewardDeps | None = None) -> LabelOnlyReward:
        """Override ``label_correct`` / ``format_weight``."""
        del deps  # rule-based: calls nothing
        return replace(self, **dict(params))


REWARDS.register("label_only")(LabelOnlyReward())
