"""ProFact's process-aware reward (ProFact §3.3; SPEC §3):

    R = M(Q̂, Q) + M(QÂ, QA) + 1[ŷ = y]

M is the mean METEOR over the best one-to-one (maximum-weight, Hungarian) matching
between predicted and gold items — :func:`factrl.metrics.averitec.best_matching_meteor`,
the AVeriTeC scorer's own, which divides the matched sum by the number of gold items: an
unmatched gold item counts 0, an extra prediction costs nothing. Q̂ are the episode's
verification questions (``meta["questions"]``), Q the gold questions; QÂ are
``"question answer"`` strings of the questions the search stage answered, QA the gold
strings as the official scorer builds them (one per gold answer; Boolean answers with
their explanation). Gold comes from the AVeriTeC claim (``meta["questions"]``).

Invalid or empty output scores 0: a question stage that gave no question scores
M(Q̂, Q) = 0, a question whose search call or answer did not parse adds no QA item, a
verdict without a readable AVeriTeC label is wrong, and an episode that ended in an error
scores 0 in every component.

``process=False`` is the paper's "w/o process rewards" ablation: R = 1[ŷ = y]. The
METEOR components are still computed and reported (they do not enter the total), so the
ablation's curves show the same columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from factrl.labels import normalise_label
from factrl.metrics.averitec import best_matching_meteor
from factrl.metrics.averitec_submission import gold_qa_strings, gold_questions, has_averitec_gold
from factrl.rewards.base import REWARDS, RewardDeps
from factrl.types import RewardBreakdown, Trajectory

__all__ = ["ProFactReward", "profact_reward", "predicted_items"]


def predicted_items(traj: Trajectory) -> tuple[list[str], list[str]]:
    """The episode's questions and its answered ``"question answer"`` strings."""
    questions = [q for q in traj.meta.get("questions") or [] if isinstance(q, str) and q.strip()]
    qa = [f"{s['question']} {s['answer']}" for s in traj.meta.get("qa") or []
          if isinstance(s, dict) and s.get("question") and s.get("answer")]
    return questions, qa


def profact_reward(
    pred_questions: Sequence[str], pred_qa: Sequence[str], pred_label: Any,
    gold_q: Sequence[str], gold_qa: Sequence[str], gold_label: Any, *, process: bool = True,
) -> dict[str, float]:
    """The reward's parts from plain records: ``question``, ``qa``, ``label`` and ``total``."""
    m_q = best_matching_meteor(list(pred_questions), list(gold_q))
    m_qa = best_matching_meteor(list(pred_qa), list(gold_qa))
    correct = pred_label is not None and normalise_label(pred_label) == normalise_label(gold_label)
    label = 1.0 if correct else 0.0
    return {"question": m_q, "qa": m_qa, "label": label, "total": label + (m_q + m_qa if process else 0.0)}


@dataclass(frozen=True)
class ProFactReward:
    process: bool = True  # False: the "w/o process rewards" ablation (verdict only)
    name: str = "profact"
    components: ClassVar[tuple[str, ...]] = ("question", "qa", "label")
    # The outcome fields it reads (factrl.envs.outcome): a text-only scorer must supply them.
    reads_meta: ClassVar[tuple[str, ...]] = ("questions", "qa")
    diagnostics: ClassVar[tuple[str, ...]] = ("label_correct",)
    lm_roles: ClassVar[tuple[str, ...]] = ()  # no LM

    def __call__(self, traj: Trajectory) -> RewardBreakdown:
        claim = traj.claim
        if claim.label is None:
            raise ValueError(f"claim {traj.claim_id!r} has no gold label; cannot compute a reward")
        if not has_averitec_gold(claim):
            raise ValueError(f"claim {traj.claim_id!r} has no gold questions (meta['questions'], as the averitec "
                             "loader gives); the profact reward needs AVeriTeC-style gold")
        if traj.error is not None:
            parts = {"question": 0.0, "qa": 0.0, "label": 0.0, "total": 0.0}
        else:
            questions, qa = predicted_items(traj)
            parts = profact_reward(questions, qa, traj.verdict.label, gold_questions(claim), gold_qa_strings(claim),
                                   claim.label, process=self.process)
        parts["label_correct"] = parts["label"]
        return RewardBreakdown(components=parts, total=parts["total"])

    def score(self, trajectories: Sequence[Trajectory]) -> list[RewardBreakdown]:
        return [self(t) if t.claim.label is not None else RewardBreakdown() for t in trajectories]

    def configure(self, params: Mapping[str, Any], deps: RewardDeps | None = None) -> ProFactReward:
        """``process`` (bool)."""
        del deps  # METEOR and the label: calls nothing
        params = dict(params)
        if "process" in params and not isinstance(params["process"], bool):
            raise ValueError(f"process must be true or false, got {params['process']!r}")
        return replace(self, **params)


REWARDS.register("profact")(ProFactReward())
