"""HARIS rewards (§3.2.2, §3.3.3).

- ``haris_high`` (the reasoning agent, and the single agent):
  R = 1 if the verdict is correct, 0.1 if wrong but well formed, 0 if malformed
  (an episode that ended in an error is malformed). Gold labels are read on the paper's
  two-way scale (:func:`~factrl.protocol.haris.binary_gold`: NOT ENOUGH INFO counts
  as Refute); a gold label with no binary reading (CONFLICTING) is refused with an error.
- ``haris_low`` (the search agent): an LM judge reads the question, the pseudo-gold
  answer (``claim.meta["pseudo_answer"]``) and the agent's report and says whether the
  report is sufficient and useful to derive the answer (Table 13's signature).
  R = 1 if useful, 0.1 if not but the episode is well formed, 0 if malformed. A judge
  reply that is neither yes nor no is a *judge failure*: counted in the
  ``judge_failed`` diagnostic (1 for that episode), never read as "not useful"; its
  reward is the well-formed floor 0.1 (or 0 if malformed) so the group keeps a value.

The judge is any LM (``RewardDeps.lms["judge"]``): an in-process model or
``openai:NAME`` over HTTP; it is called once per batch through ``LM.complete``. Or, with
the parameter ``verifier="factrl-verifier"`` (or a judge that is a cross-encoder), the
trained verifier reads "question + pseudo-gold answer" as a statement against the
report (windows of three sentences): useful when it is SUPPORTED past the verifier's
threshold (:func:`factrl.verifier.judge.judge_statements`); it never fails to answer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from factrl.protocol.haris import binary_gold
from factrl.rewards.base import REWARDS, RewardDeps
from factrl.types import Message, RewardBreakdown, Trajectory

__all__ = ["HarisHighReward", "HarisLowReward", "high_reward", "judge_messages", "parse_judge", "verifier_useful",
           "JUDGE_PROMPT"]

JUDGE_PROMPT = """Decide whether the gathered information is sufficient and useful to derive the correct answer to the question.

Question: {question}
Correct answer: {answer}
Gathered information: {report}

Reply with one word: yes or no."""

_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def high_reward(traj: Trajectory, correct: float = 1.0, wrong: float = 0.1) -> RewardBreakdown:
    """Eq. (1) for one episode."""
    gold = binary_gold(traj.claim.label)
    if gold is None:
        raise ValueError(f"claim {traj.claim_id!r}: gold label {traj.claim.label} has no Support/Refute reading")
    v = traj.verdict
    well_formed = traj.error is None and v.format_ok and v.label is not None
    is_correct = well_formed and v.label == gold
    total = correct if is_correct else (wrong if well_formed else 0.0)
    return RewardBreakdown(components={"label_correct": float(is_correct), "format": float(well_formed),
                                       "total": total}, total=total)


@dataclass(frozen=True)
class HarisHighReward:
    correct: float = 1.0
    wrong: float = 0.1
    name: str = "haris_high"
    components: ClassVar[tuple[str, ...]] = ("format",)
    diagnostics: ClassVar[tuple[str, ...]] = ("label_correct",)
    lm_roles: ClassVar[tuple[str, ...]] = ()  # no LM

    def __call__(self, traj: Trajectory) -> RewardBreakdown:
        return high_reward(traj, self.correct, self.wrong)

    def score(self, trajectories: Sequence[Trajectory]) -> list[RewardBreakdown]:
        return [self(t) if t.claim.label is not None else RewardBreakdown() for t in trajectories]

    def configure(self, params: Mapping[str, Any], deps: RewardDeps | None = None) -> HarisHighReward:
        del deps  # rule-based
        return replace(self, **dict(params))


def judge_messages(question: str, answer: str, report: str) -> list[Message]:
    return [Message(role="user", content=JUDGE_PROMPT.format(question=question.strip(), answer=answer.strip(),
                                                             report=report.strip()))]


def parse_judge(text: str) -> bool | None:
    """True (yes), False (no), or None when the reply says neither or both."""
    found = {m.lower() for m in _YES_NO.findall(text[:400])}
    if len(found) != 1:
        return None
    return found == {"yes"}


def _judge_texts(judge: Any, convs: list[list[Message]], max_tokens: int) -> list[str | None]:
    """The judge's replies; a row whose request failed (an HTTP judge down after its
    retries) is None, i.e. a judge failure, like an unparseable reply."""
    from factrl.lm.base import GenerationConfig, RowFailures

    try:
        gens = judge.complete(convs, GenerationConfig(max_new_tokens=max_tokens, temperature=0.0))
    except RowFailures as exc:
        gens = exc.generations
    except Exception:
        return [None] * len(convs)
    if len(gens) != len(convs):
        return [None] * len(convs)
    return [None if g is None else g.text for g in gens]


@dataclass(frozen=True)
class HarisLowReward:
    useful: float = 1.0
    not_useful: float = 0.1
    max_judge_tokens: int = 16
    judge: Any = field(default=None, compare=False, repr=False)
    name: str = "haris_low"
    components: ClassVar[tuple[str, ...]] = ("format", "useful")
    # The outcome field it reads (factrl.envs.outcome): a text-only scorer must supply it.
    reads_meta: ClassVar[tuple[str, ...]] = ("report",)
    diagnostics: ClassVar[tuple[str, ...]] = ("judge_failed",)
    lm_roles: ClassVar[tuple[str, ...]] = ("judge",)  # the LM (or cross-encoder) that judges usefulness

    def score(self, trajectories: Sequence[Trajectory]) -> list[RewardBreakdown]:
        trajs = list(trajectories)
        formed = [t.error is None and t.verdict.format_ok and bool(t.meta.get("report")) for t in trajs]
        ask = [i for i, ok in enumerate(formed) if ok]
        verdicts: dict[int, bool | None] = {}
        if ask:
            if self.judge is None:
                raise ValueError("haris_low needs a judge LM: RewardDeps(lms={'judge': lm})")
            for t in (trajs[i] for i in ask):
                if not str(t.claim.meta.get("pseudo_answer") or "").strip():
                    raise ValueError(f"question {t.claim_id!r} has no meta['pseudo_answer'] for the judge")
            if self.judge == EXACT_JUDGE:
                verdicts.update(zip(ask, exact_useful([str(trajs[i].claim.meta["pseudo_answer"]) for i in ask],
                                                      [str(trajs[i].meta["report"]) for i in ask])))
            elif _is_pair_verifier(self.judge):
                verdicts.update(zip(ask, verifier_useful(
                    self.judge, [trajs[i].claim.text for i in ask],
                    [str(trajs[i].claim.meta["pseudo_answer"]) for i in ask], [str(trajs[i].meta["report"]) for i in ask])))
            else:
                convs = [judge_messages(trajs[i].claim.text, str(trajs[i].claim.meta["pseudo_answer"]),
                                        str(trajs[i].meta["report"])) for i in ask]
                for i, text in zip(ask, _judge_texts(self.judge, convs, self.max_judge_tokens)):
                    verdicts[i] = None if text is None else parse_judge(text)
        out = []
        for i, ok in enumerate(formed):
            said = verdicts.get(i)
            failed = ok and said is None
            total = self.useful if said else (self.not_useful if ok else 0.0)
            out.append(RewardBreakdown(components={"format": float(ok), "useful": float(bool(said)),
                                                   "judge_failed": float(failed), "total": total}, total=total))
        return out

    def __call__(self, traj: Trajectory) -> RewardBreakdown:
        return self.score([traj])[0]

    def configure(self, params: Mapping[str, Any], deps: RewardDeps | None = None) -> HarisLowReward:
        """Override ``useful`` / ``not_useful`` / ``max_judge_tokens``; the judge is
        ``deps.lms["judge"]``, or ``verifier`` (a name, e.g. ``"factrl-verifier"``: the
        trained cross-encoder judges instead of an LM), or ``"exact"`` (:func:`exact_useful`)."""
        params = dict(params)
        judge = (deps.lms.get("judge") if deps is not None else None) or self.judge
        name = params.pop("verifier", None)
        if name is not None:
            from factrl.verifier.asset import load_verifier

            judge = load_verifier(str(name))
        return replace(self, judge=judge, **params)


EXACT_JUDGE = "exact"  # haris.judge_model / a judge: useful when the report states the pseudo-gold answer


def exact_useful(answers: Sequence[str], reports: Sequence[str]) -> list[bool]:
    """The rule judge for data whose pseudo-gold answers are exact (a generated world's
    hop answers): the report states the answer, compared by words without case."""
    def words(text: str) -> str:
        return " " + " ".join(re.findall(r"\w+", text.lower())) + " "

    return [bool(words(a).strip()) and words(a) in words(r) for a, r in zip(answers, reports)]


def _is_pair_verifier(judge: Any) -> bool:
    from factrl.verifier.scoring import PairVerifier

    return isinstance(judge, PairVerifier)


def verifier_useful(verifier: Any, questions: Sequence[str], answers: Sequence[str],
                    reports: Sequence[str]) -> list[bool]:
    """The cross-encoder's low-level judgement: is "question answer" SUPPORTED by a
    window of three sentences of the report?"""
    from factrl.labels import Label
    from factrl.verifier.judge import judge_statements, response_sentences

    windows = []
    for report in reports:
        sentences = response_sentences(report, max_sentences=24)
        windows.append([" ".join(sentences[i : i + 3]) for i in range(0, len(sentences), 3)])
    statements = [f"{q.strip()} {a.strip()}" for q, a in zip(questions, answers)]
    return [j.label == Label.SUPPORT for j in judge_statements(verifier, statements, windows)]


REWARDS.register("haris_high")(HarisHighReward())
REWARDS.register("haris_low")(HarisLowReward())
