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

Conventions (``VeriR1RewardConfig.convention``). Both enforce the rule the paper's prompt
("conduct reasoning inside <think> first every time you get new information") and the
authors' code share: every ``<information>`` is followed by ``<think>``.

- ``"paper"`` (the default): the paper's text wherever it and the authors' released code
  (``compute_reward`` of ``verl/utils/reward_score/claim_reward.py``) differ, with factrl's
  protocol checker (:func:`factrl.envs.veri_r1.parse_verdict`) for the format;
- ``"authors_code"``: exactly the released code's totals and components, for reproducing
  the paper's training runs (:mod:`factrl.protocol.veri_r1_authors`). It reads the whole
  response text (a trajectory's turns, observations included), not the parsed verdict.

Where they differ (:data:`CONVENTION_DIFFERENCES`, keys in brackets; paper first):

- [validity_threshold] w = 0.5 needs h > 0.5, so one of two gold ids earns 0 | h >= 0.5;
- [empty_gold_iou] IoU(∅, ∅) = 1 | R_evidence = 0 whenever G = ∅ (``empty_iou`` sets the
  paper convention's value; the CPU presets use 0 as the code does);
- [plan] an online response opens with one ``<plan>`` | not checked;
- [text_outside_tags] text outside the tag blocks fails the format | allowed;
- [tag_spelling] tags are read case-insensitively with spaces before ``>``, and an
  undeclared tag fails the format | exact lower-case tags, others ignored;
- [search_budget] more than ``max_searches`` searches fails the format | not checked;
- [label_reading] the rest of the ``Label:`` line is the label, in any known spelling
  (``SUPPORTS`` = SUPPORT, any case, ``**Label:**``) | the first of SUPPORTS, REFUTES, NOT
  ENOUGH INFO, SUPPORT, REFUTE right after an exact ``Label:``; only the gold's exact
  spelling is correct (``SUPPORTS`` is wrong, ``Support`` unread, ``SUPPORT.`` or
  ``SUPPORT<think>`` read as SUPPORT);
- [answer_content] an unknown label, a missing Label or Evidence line, evidence not
  written as ``[[id]]`` and extra text in the answer fail the format | not checked;
- [evidence_reading] ids come from the Evidence line (the whole answer when there is
  none), ``[[ ]]`` names nothing | every ``[[…]]`` in the answer, ``[[ ]]`` an empty id;
- [conflicting_gold] CONFLICTING gold needs evidence like SUPPORT/REFUTE | undefined (a
  ValueError);
- [unanswered_cover] (diagnostic only) an episode without an answer covers nothing |
  ``evidence_cover`` = G ⊆ ∅, so 1 when G = ∅.

``partial_format_credit`` is a factrl addition for small models; only the paper
convention takes it. Weights (``label_correct``, ``evidence_weight``, ``use_validity``,
...) apply under both; their defaults are the paper's and the code's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Literal

from factrl.labels import Label, normalise_label
from factrl.metrics.evidence import evidence_set
from factrl.protocol.veri_r1_authors import trajectory_response
from factrl.rewards.base import REWARDS, RewardDeps
from factrl.types import RewardBreakdown, Trajectory, Verdict

__all__ = [
    "CONVENTIONS",
    "CONVENTION_DIFFERENCES",
    "Convention",
    "VeriR1RewardConfig",
    "VeriR1Reward",
    "trajectory_response",
    "veri_r1_authors_reward",
    "veri_r1_reward",
    "veri_r1_trajectory_reward",
    "validity_weight",
]

Convention = Literal["paper", "authors_code"]
CONVENTIONS: tuple[Convention, ...] = ("paper", "authors_code")

# Where the paper convention departs from the authors' code: key -> (paper, code). The
# module docstring and the presets' headers list the same; the parity test
# (tests/rewards/test_veri_r1_conventions.py) checks that the two conventions differ on
# no response that breaks none of these.
CONVENTION_DIFFERENCES: dict[str, tuple[str, str]] = {
    "validity_threshold": ("w = 0.5 needs h > 0.5", "w = 0.5 at h >= 0.5"),
    "empty_gold_iou": ("IoU(empty, empty) = empty_iou (1 by default)", "R_evidence = 0 whenever gold is empty"),
    "plan": ("an online response opens with one <plan>", "not checked"),
    "text_outside_tags": ("text outside tag blocks fails the format", "allowed"),
    "tag_spelling": ("tags read case-insensitively, spaces before '>'; undeclared tags fail",
                     "exact lower-case tags; other tags ignored"),
    "search_budget": ("more than max_searches searches fails the format", "not checked"),
    "label_reading": ("the rest of the Label line, any known spelling",
                      "SUPPORTS|REFUTES|NOT ENOUGH INFO|SUPPORT|REFUTE right after 'Label:'; gold's exact spelling only"),
    "answer_content": ("unknown label, no Label/Evidence line, ids not as [[id]], extra text: format fails",
                       "not checked"),
    "evidence_reading": ("ids from the Evidence line; [[ ]] names nothing", "every [[...]] in the answer; [[ ]] is an id"),
    "conflicting_gold": ("CONFLICTING gold needs evidence like SUPPORT/REFUTE", "undefined (ValueError)"),
    "unanswered_cover": ("no answer covers nothing (diagnostic)", "evidence_cover = gold is empty (diagnostic)"),
}


@dataclass(frozen=True)
class VeriR1RewardConfig:
    """Weights and rules of the Veri-R1 reward; defaults are the paper's (§2.3)."""

    # "paper" or "authors_code" (see the module docstring).
    convention: Convention = "paper"
    label_correct: float = 2.0
    label_wrong: float = 0.0
    # Multiplies R_evidence in the total; 0.0 is the "w/o evidence reward" ablation (§4.1).
    evidence_weight: float = 1.0
    format_weight: float = 1.0
    # False is the "w/o validity weight" ablation (§4.2): w_validity is always 1.
    use_validity: bool = True
    validity_half: float = 0.5
    validity_threshold: float = 0.5
    # h > threshold (False) or h >= threshold (True); None: the convention's rule (the
    # paper's text is h > 0.5, the authors' code h >= 0.5).
    validity_threshold_inclusive: bool | None = None
    # IoU when both P and G are empty; None: the convention's (paper 1, authors' code 0).
    empty_iou: float | None = None
    # Not in the paper (R_format is binary there): credit for a broken protocol whose
    # <answer> still parsed to a label. A dense signal for models too small to ever emit
    # the full protocol at first; 0.0 is the paper's reward. CPU presets say when they use it.
    partial_format_credit: float = 0.0

    def __post_init__(self) -> None:
        if self.convention not in CONVENTIONS:
            raise ValueError(f"Veri-R1 reward convention must be one of {list(CONVENTIONS)}, got {self.convention!r}")
        if self.convention == "authors_code":
            clashes = [
                f"{name}={value!r}"
                for name, value, ok in (
                    ("validity_threshold_inclusive", self.validity_threshold_inclusive,
                     self.validity_threshold_inclusive in (None, True)),
                    ("empty_iou", self.empty_iou, self.empty_iou in (None, 0.0)),
                    ("partial_format_credit", self.partial_format_credit, self.partial_format_credit == 0.0),
                )
                if not ok
            ]
            if clashes:
                raise ValueError(
                    f"convention='authors_code' reproduces the released reward code, which fixes "
                    f"{', '.join(clashes)} otherwise; drop them or use convention='paper'"
                )

    @property
    def threshold_inclusive(self) -> bool:
        """Whether h = threshold earns the half weight (the setting, else the convention's)."""
        if self.validity_threshold_inclusive is not None:
            return self.validity_threshold_inclusive
        return self.convention == "authors_code"

    @property
    def iou_when_both_empty(self) -> float:
        """R_evidence when P and G are both empty (the setting, else the convention's)."""
        if self.empty_iou is not None:
            return self.empty_iou
        return 0.0 if self.convention == "authors_code" else 1.0


DEFAULT_CONFIG = VeriR1RewardConfig()
AUTHORS_CODE_CONFIG = VeriR1RewardConfig(convention="authors_code")


def validity_weight(
    gold_label: Label, hit_rate: float, *, config: VeriR1RewardConfig = DEFAULT_CONFIG
) -> float:
    """w_validity for a gold label and hit rate (see the module docstring)."""
    if not config.use_validity or gold_label is Label.NEI or hit_rate >= 1.0:
        return 1.0
    t = config.validity_threshold
    above = hit_rate >= t if config.threshold_inclusive else hit_rate > t
    return config.validity_half if above else 0.0


def veri_r1_reward(
    verdict: Verdict,
    gold_label: Label | str,
    gold_evidence: Sequence[str],
    *,
    config: VeriR1RewardConfig = DEFAULT_CONFIG,
) -> RewardBreakdown:
    """Score one verdict against its gold label and gold evidence ids (the paper
    convention; ``authors_code`` reads the response text: :func:`veri_r1_authors_reward`).

    Components (unweighted, as the paper names them): ``format``, ``evidence`` (IoU),
    ``label`` (R_label before the validity weight), ``validity``, ``hit_rate``, and
    ``total`` (= ``RewardBreakdown.total``).
    """
    if gold_label is None:
        raise ValueError("veri_r1_reward needs a gold label; got None")
    if config.convention != "paper":
        raise ValueError(
            f"veri_r1_reward scores a parsed verdict (the paper convention); convention "
            f"{config.convention!r} reads the response text: use veri_r1_authors_reward"
        )
    gold = normalise_label(gold_label)
    p, g = evidence_set(verdict.evidence_ids), evidence_set(gold_evidence)
    if not verdict.answered:
        p = frozenset()  # no answer block: nothing was cited
    hits = len(p & g)
    union = len(p | g)
    if not verdict.answered:
        r_evidence = 0.0  # IoU(∅, ∅) = 1 rewards a correct "no evidence", not silence
    else:
        r_evidence = hits / union if union else config.iou_when_both_empty
    h = hits / len(g) if g else 1.0
    w = validity_weight(gold, h, config=config)
    correct = verdict.label is not None and verdict.label == gold
    r_label = config.label_correct if correct else config.label_wrong
    if verdict.format_ok:
        r_format = 1.0
    else:
        r_format = config.partial_format_credit if verdict.label is not None else 0.0
    return _breakdown(r_label, w, r_evidence, h, r_format, config)


def _breakdown(r_label: float, w: float, r_evidence: float, h: float, r_format: float,
               config: VeriR1RewardConfig) -> RewardBreakdown:
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


def veri_r1_authors_reward(
    response: str,
    gold_label: Label | str,
    gold_evidence: Sequence[str],
    *,
    config: VeriR1RewardConfig = AUTHORS_CODE_CONFIG,
) -> RewardBreakdown:
    """Score one response text as the authors' released code does (the ``authors_code``
    convention; :mod:`factrl.protocol.veri_r1_authors`). ``response`` is the model's text
    with the observations the system inserted, as verl decodes it. Same components as
    :func:`veri_r1_reward`, plus the diagnostics ``label_correct``, ``evidence_cover``,
    ``verified`` and ``joint`` (0 or 1, outside the total)."""
    if config.convention != "authors_code":
        raise ValueError(f"veri_r1_authors_reward needs convention='authors_code', got {config.convention!r}")
    if gold_label is None:
        raise ValueError("veri_r1_authors_reward needs a gold label; got None")
    from factrl.protocol.veri_r1_authors import authors_judge

    gold = normalise_label(gold_label)
    j = authors_judge(response, gold, gold_evidence)
    w = validity_weight(gold, j.hit_rate, config=config)
    r_label = config.label_correct if j.label_correct else config.label_wrong
    rb = _breakdown(r_label, w, j.evidence, j.hit_rate, 1.0 if j.format_ok else 0.0, config)
    rb.components.update(label_correct=float(j.label_correct), evidence_cover=float(j.cover),
                         verified=float(j.verified), joint=float(j.joint))
    return rb


def veri_r1_trajectory_reward(
    traj: Trajectory, *, config: VeriR1RewardConfig = DEFAULT_CONFIG
) -> RewardBreakdown:
    """:func:`veri_r1_reward` on a trajectory: gold from ``traj.claim``.

    An episode that ended in an error (``traj.error`` set) is scored as an empty,
    badly formatted verdict, matching how the metrics count it as wrong. Besides the
    reward's own components, the breakdown carries the per-rollout judgements the
    paper plots during training (§4.2): ``label_correct``, ``evidence_cover`` (every
    gold id cited), ``verified`` (§3.2 verification) and ``joint``, each 0 or 1, judged
    under the same convention as the reward; they do not enter the total.
    """
    from factrl.metrics.veri_r1 import score_item

    if traj.claim.label is None:
        raise ValueError(f"claim {traj.claim_id!r} has no gold label; cannot compute a reward")
    if config.convention == "authors_code":
        return veri_r1_authors_reward(trajectory_response(traj), traj.claim.label, traj.claim.evidence_ids,
                                      config=config)
    verdict = Verdict(answered=False) if traj.error else traj.verdict
    rb = veri_r1_reward(verdict, traj.claim.label, traj.claim.evidence_ids, config=config)
    item = score_item(traj.claim.label, traj.claim.evidence_ids, verdict, error=traj.error is not None)
    rb.components.update(
        label_correct=float(item.label_correct), evidence_cover=float(item.evidence_cover),
        verified=float(item.verified), joint=float(item.joint),
    )
    return rb


@dataclass(frozen=True)
class VeriR1Reward:
    """The Veri-R1 reward as a scoring stage, bound to one config. Unlabelled claims
    (e.g. a claim typed into ``factrl verify``) get an empty breakdown."""

    config: VeriR1RewardConfig = DEFAULT_CONFIG
    name: str = "veri_r1"
    components: ClassVar[tuple[str, ...]] = ("label", "evidence", "format", "validity", "hit_rate")
    diagnostics: ClassVar[tuple[str, ...]] = ("label_correct", "evidence_cover", "verified", "joint")
    lm_roles: ClassVar[tuple[str, ...]] = ()  # no LM

    @property
    def convention(self) -> Convention:
        """The convention of the reward, which its metrics follow too."""
        return self.config.convention

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
