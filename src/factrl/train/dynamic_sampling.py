"""Dynamic sampling (DAPO, Yu et al. 2025, §3.2) within TRL's fixed batch shape.

A GRPO group whose rewards are all equal has zero advantage everywhere: its rollouts cost
a generation and a backward pass and teach nothing. A warm-up that is sure of its answers
makes most groups so (the HARIS recipe ``haris_sure_slip``: half to all of an update's
groups constant). It is no cure for every stalled run: on that recipe's GRPO seed 1 it
filled 6 of the 28 constant groups' slots, mostly by format failures, and no answer moved,
while another claim order did (docs/benchmarks.md, "How often a GRPO seed moves"). DAPO samples more
prompts until the batch holds enough groups that vary; TRL's ``rollout_func`` must return
exactly the rows it was asked for, so here a constant group is *replaced*: its slot is
rolled out again on another training claim of the same gold label (so a label-balanced
update stays balanced), up to ``tries`` times a slot, and the first replacement whose
rewards vary takes the slot. A slot no try fills keeps its original group. The batch's
other groups are untouched, and the trainer only ever sees rollouts of its live policy.

What must vary is ``grpo.resample_on``: the reward total (the default), or one of its
components (comma-separated: the first the stage's reward has). DAPO's own criterion is
accuracy (a group all right or all wrong is dropped): ``resample_on =
"label_correct,useful"`` is that for HARIS (the reasoner's right label, the searcher's
useful report), so a group that varies only by a format failure counts as constant and
is replaced too. On a warm-up whose error is one-sided that overshoots: on
``haris_sure_slip``'s GRPO seed 1 (three tries) the varying groups were all of the slipped
label, and the policy swung from always Refuted to Supported on 81 of 90 held-out claims
(docs/benchmarks.md).

The decision reads the true rewards, before a broken-trainer control alters them
(a control breaks the update, not the sampling). Replacements are drawn with a seeded
generator from the training claims outside the batch, so a run is reproducible; a claim
may thus be seen more than once an epoch. What it costs: one more rollout of G episodes
per constant slot and try (the backward pass is unchanged). :class:`ResampleCounts` keeps
what happened; the trainer logs it beside TRL's ``frac_reward_zero_std`` (which it lowers).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from factrl.types import Claim, Trajectory

__all__ = ["ResampleCounts", "constant_groups", "resample_constant_groups"]


@dataclass
class ResampleCounts:
    """Counts since the last :meth:`take`: groups rolled out, groups constant at first,
    replacement groups rolled out, slots filled by one that varies, slots left constant."""

    groups: int = 0
    constant: int = 0
    tried: int = 0
    replaced: int = 0
    left: int = 0

    def add(self, other: ResampleCounts) -> None:
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(other, k))

    def take(self) -> dict[str, float]:
        """The logged figures (and reset): ``groups/constant_before`` and
        ``groups/constant_after`` as fractions of the groups, ``groups/resampled`` and
        ``groups/replaced`` as counts."""
        out = {}
        if self.groups:
            out = {"groups/constant_before": self.constant / self.groups, "groups/constant_after": self.left / self.groups,
                   "groups/resampled": float(self.tried), "groups/replaced": float(self.replaced)}
        self.__init__()  # type: ignore[misc]
        return out


def _value(t: Trajectory, on: str) -> float:
    """The reward total (``on="total"``) or, of the comma-separated component names in
    ``on``, the first the reward has; a failed reset counts 0."""
    if not t.prompt_ids or t.reward is None:
        return 0.0
    if on == "total":
        return float(t.reward.total)
    for name in on.split(","):
        if name.strip() in t.reward.components:
            return float(t.reward.components[name.strip()])
    raise ValueError(f"grpo.resample_on={on!r}: the reward has none of these components "
                     f"(it has {', '.join(sorted(t.reward.components)) or 'none'}; or use 'total')")


def _is_constant(group: Sequence[Trajectory], on: str = "total") -> bool:
    values = [_value(t, on) for t in group]
    return max(values) - min(values) <= 1e-9


def constant_groups(trajs: Sequence[Trajectory], size: int, on: str = "total") -> list[int]:
    """Indices of the runs of ``size`` consecutive trajectories whose reward totals (or
    reward component ``on``) are all equal (a failed reset counts 0, as the trainer's row
    does)."""
    if size < 1 or len(trajs) % size:
        raise ValueError(f"{len(trajs)} trajectories are not groups of {size}")
    return [g for g in range(len(trajs) // size) if _is_constant(trajs[g * size:(g + 1) * size], on)]


def resample_constant_groups(
    trajs: Sequence[Trajectory],
    starts: Sequence[Claim],
    size: int,
    pool: Sequence[Claim],
    tries: int,
    rng: random.Random,
    rollout: Callable[[list[Claim]], list[Trajectory]],
    on: str = "total",
) -> tuple[list[Trajectory], ResampleCounts]:
    """``trajs`` (``starts[i]`` the claim of ``trajs[i]``, in groups of ``size``) with each
    constant group replaced by the first of up to ``tries`` groups of another ``pool``
    claim of the same gold label whose rewards vary. ``rollout(claims)`` runs one episode
    per claim given (each replacement claim ``size`` times, consecutively), all slots of a
    try in one batch. No claim of the batch or an earlier replacement is drawn again.
    ``on``: what must vary, the reward total or a component (``label_correct``: DAPO's
    accuracy criterion)."""
    out = list(trajs)
    pending = constant_groups(out, size, on)
    counts = ResampleCounts(groups=len(out) // size, constant=len(pending))
    by_label: dict[object, list[Claim]] = {}
    for c in pool:
        by_label.setdefault(c.label, []).append(c)
    used = {c.id for c in starts}
    for _ in range(max(0, tries)):
        picks: list[tuple[int, Claim]] = []
        for g in pending:
            options = [c for c in by_label.get(starts[g * size].label, ()) if c.id not in used]
            if options:
                pick = rng.choice(options)
                used.add(pick.id)
                picks.append((g, pick))
        if not picks:
            break
        new = rollout([c for _, c in picks for _ in range(size)])
        if len(new) != len(picks) * size:
            raise RuntimeError(f"the replacement rollout returned {len(new)} trajectories for {len(picks) * size} episodes")
        counts.tried += len(picks)
        filled = set()
        for k, (g, _) in enumerate(picks):
            group = new[k * size:(k + 1) * size]
            if not _is_constant(group, on):
                out[g * size:(g + 1) * size] = group
                filled.add(g)
        counts.replaced += len(filled)
        pending = [g for g in pending if g not in filled]
        if not pending:
            break
    counts.left = len(pending)
    return out, counts
