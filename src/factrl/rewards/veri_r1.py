"""Veri-R1 reward (paper §2.3): label reward gated by evidence validity, plus evidence IoU
and a format bonus.

    R = R_label · w_validity + R_evidence + R_format

- R_format ∈ {0, 1}: ``verdict.format_ok`` (the protocol checker decides it upstream).
- R_evidence = |P ∩ G| / |P ∪ G| over the sets of predicted (P) and gold (G) evidence
  ids, with IoU(∅, ∅) = 1: an NEI claim answered with no evidence is an exact match.
- R_label = 2 if the predicted label equals gold, else 0; an unparsed (None) label is wrong.
- h = |P ∩ G| / |G| (h = 1 when G is empty).
- w_validity = 1 if gold is NEI or h = 1; 0.5 if h > 0.5 (strictly); else 0. CONFLICTING
  gold is treated like SUPPORT/REFUTE: its label reward needs the evidence.

The formula is applied literally even when the output broke the format: only R_format
drops to 0, the label and evidence are scored from whatever was parsed. The one exception
is an episode with no ``<answer>`` block at all (``verdict.answered`` False, or an
episode that ended in an error): it cited nothing, so P = ∅ and R_evidence = 0 even when
G = ∅ — otherwise a model that never answers would earn IoU(∅, ∅) = 1 on every NEI claim.
h and w_validity follow from P = ∅ as the formula gives them.

Where the Veri-R1 authors' released reward code differs from the paper, the paper wins
by default and :class:`VeriR1RewardConfig` has a flag for the code's behaviour: their
code grants the half weight at h >= 0.5 (``validity_threshold_inclusive=True``) and
scores an empty gold set 0 (``empty_iou=0.0``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from factrl.labels import Label, normalise_label
from factrl.metrics.evidence import evidence_set
from factrl.rewards.base import REWARDS, RewardDeps
from factrl.types import RewardBreakdown, Trajectory, Verdict

__all__ = [
    "VeriR1RewardConfig",
    "VeriR1Reward",
    "veri_r1_reward",
    "veri_r1_trajectory_reward",
    "validity_weight",
]


@dataclass(frozen=True)
class VeriR1RewardConfig:
    """Weights of the Veri-R1 reward; defaults are the paper's (§2.3)."""

    label_correct: float = 2.0
    label_wrong: float = 0.0
    # Multiplies R_evidence in the total; 0.0 is the "w/o evidence reward" ablation (§4.1).
    evidence_weight: float = 1.0
    format_weight: float = 1.0
    # False is the "w/o validity weight" ablation (§4.2): w_validity is always 1.
    use_validity: bool = True
    validity_half: float = 0.5
    validity_threshold: float = 0.5
    # The paper's rule is h > threshold; the authors' code uses h >= threshold.
    validity_threshold_inclusive: bool = False
    # IoU when both P and G are empty.
    empty_iou: float = 1.0
    # Not in the paper (R_format is binary there): credit for a broken protocol whose
    # <answer> still parsed to a label. A dense signal for models too small to ever emit
    # the full protocol at first; 0.0 is the paper's reward. CPU presets say when they use it.
    partial_format_credit: float = 0.0


DEFAULT_CONFIG = VeriR1RewardConfig()


def validity_weight(
    gold_label: Label, hit_rate: float, *, config: VeriR1RewardConfig = DEFAULT_CONFIG
) -> float:
    """w_validity for a gold label and hit rate (see the module docstring)."""
    if not config.use_validity or gold_label is Label.NEI or hit_rate >= 1.0:
        return 1.0
    t = config.validity_threshold
    above = hit_rate >= t if config.validity_threshold_inclusive else hit_rate > t
    return config.validity_half if above else 0.0


def veri_r1_reward(
    verdict: Verdict,
    gold_label: Label | str,
    gold_evidence: Sequence[str],
    *,
    config: VeriR1RewardConfig = DEFAULT_CONFIG,
) -> RewardBreakdown:
    """Score one verdict against its gold label and gold evidence ids.

    Components (unweighted, as the paper names them): ``format``, ``evidence`` (IoU),
    ``label`` (R_label before the validity weight), ``validity``, ``hit_rate``, and
    ``total`` (= ``RewardBreakdown.total``).
    """
    if gold_label is None:
        raise ValueError("veri_r1_reward needs a gold label; got None")
    gold = normalise_label(gold_label)
    p, g = evidence_set(verdict.evidence_ids), evidence_set(gold_evidence)
    if not verdict.answered:
        p = frozenset()  # no answer block: nothing was cited
    hits = len(p & g)
    union = len(p | g)
    if not verdict.answered:
        r_evidence = 0.0  # IoU(∅, ∅) = 1 rewards a correct "no evidence", not silence
    else:
        r_evidence = hits / union if union else config.empty_iou
    h = hits / len(g) if g else 1.0
    w = validity_weight(gold, h, config=config)
    correct = verdict.label is not None and verdict.label == gold
    r_label = config.label_correct if correct else config.label_wrong
    if verdict.format_ok:
        r_format = 1.0
    else:
        r_format = config.partial_format_credit if verdict.label is not None else 0.0
    total = r_label * w + config.evidence_weight * r_evidence + config.format_weight * r_format
    return RewardBreakdown(
        components={
            "format": r_format,
            "evidence": r_evidence,
            "label": r_label,
            "validity": w,
            "hit_rate": h,
            "total": total,
        },
        total=total,
    )


def veri_r1_trajectory_reward(
    traj: Trajectory, *, config: VeriR1RewardConfig = DEFAULT_CONFIG
) -> RewardBreakdown:
    """:func:`veri_r1_reward` on a trajectory: gold from ``traj.claim``.

    An episode that ended in an error (``traj.error`` set) is scored as an empty,
    badly formatted verdict, matching how the metrics count it as wrong. Besides the
    reward's own components, the breakdown carries the per-rollout judgements the
    paper plots during training (§4.2): ``label_correct``, ``evidence_cover`` (every
    gold id cited) and ``verified`` (§3.2 verification), each 0 or 1; they do not
    enter the total.
    """
    from factrl.metrics.veri_r1 import score_item

    if traj.claim.label is None:
        raise ValueError(f"claim {traj.claim_id!r} has no gold label; cannot compute a reward")
    verdict = Verdict(answered=False) if traj.error else traj.verdict
    rb = veri_r1_reward(verdict, traj.claim.label, traj.claim.evidence_ids, config=config)
    item = score_item(traj.claim.label, traj.claim.evidence_ids, verdict, error=traj.error is not None)
    cover = traj.error is None and verdict.answered and evidence_set(traj.claim.evidence_ids) <= evidence_set(verdict.evidence_ids)
    rb.components.update(
        label_correct=float(item.label_correct), evidence_cover=float(cover), verified=float(item.verified)
    )
    return rb


@dataclass(frozen=True)
class VeriR1Reward:
    """The Veri-R1 reward as a scoring stage, bound to one config. Unlabelled claims
    (e.g. a claim typed into ``factrl verify``) get an empty breakdown."""

    config: VeriR1RewardConfig = DEFAULT_CONFIG
    name: str = "veri_r1"
    components: ClassVar[tuple[str, ...]] = ("label", "evidence", "format", "validity", "hit_rate")
    diagnostics: ClassVar[tuple[str, ...]] = ("label_correct", "evidence_cover", "verified")

    def __call__(self, traj: Trajectory) -> RewardBreakdown:
        return veri_r1_trajectory_reward(traj, config=self.config)

    def score(self, trajectories: Sequence[Trajectory]) -> list[RewardBreakdown]:
        return [self(t) if t.claim.label is not None else RewardBreakdown() for t in trajectories]

    def configure(self, params: Mapping[str, Any], deps: RewardDeps | None = None) -> VeriR1Reward:
        """Override :class:`VeriR1RewardConfig` fields (``{"use_validity": False}``)."""
        del deps  # a rule-based reward calls nothing
        return replace(self, config=replace(self.config, **dict(params)))


REWARDS.register("veri_r1")(VeriR1Reward())
REWARDS.register("veri_r1_no_validity")(VeriR1Reward(VeriR1RewardConfig(use_validity=False), name="veri_r1_no_validity"))
REWARDS.register("veri_r1_no_evidence")(VeriR1Reward(VeriR1RewardConfig(evidence_weight=0.0), name="veri_r1_no_evidence"))
