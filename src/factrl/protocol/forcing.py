"""Forced answering, as an environment declares it: how a verdict is drawn from an
episode that ended without one.

An environment whose answers have a fixed opening (Veri-R1's ``<answer>\\nLabel:``) may
declare an :class:`AnswerForcing` as its ``answer_forcing`` attribute. :mod:`factrl.forced`
then appends :attr:`AnswerForcing.opening` to the episode's own tokens, takes the label
the model finds most probable after it, lets the model write :attr:`AnswerForcing.then`
greedily, and cleans that continuation up into a verdict (:meth:`AnswerForcing.verdict`:
cited ids the episode never showed are dropped). An environment that declares none is
never forced: its episodes keep the verdict they ended with.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from factrl.labels import Label
from factrl.protocol.tags import parse_answer
from factrl.types import Verdict

__all__ = ["AnswerForcing", "FORCED_ERROR", "VERI_R1_FORCING"]

FORCED_ERROR = "forced: the episode ended without a labelled <answer>; the label was read from the model's label probabilities"


@dataclass(frozen=True)
class AnswerForcing:
    """``opening`` is appended to the episode's context; each of ``labels`` is scored as
    ``choice.format(label=...)`` after it; then ``then`` is appended and the model writes
    at most ``evidence_tokens`` tokens greedily, up to any of ``stop``."""

    opening: str
    labels: tuple[Label, ...] = (Label.SUPPORT, Label.REFUTE, Label.NEI)
    choice: str = " {label}\n"
    then: str = "Evidence:"
    stop: tuple[str, ...] = ("</answer>", "\n\n")
    evidence_tokens: int = 64

    def __post_init__(self) -> None:
        if not self.opening or len(self.labels) < 2:
            raise ValueError("an answer forcing needs an opening and at least two labels")
        if self.choice.count("{label}") != 1:
            raise ValueError(f"an answer forcing's choice must contain {{label}} once, got {self.choice!r}")

    def choice_text(self, label: Label) -> str:
        return self.choice.format(label=label.value)

    def choice_affixes(self) -> tuple[str, str]:
        """``choice`` around its ``{label}``: the prefix and suffix each label is scored
        with (:func:`factrl.lm.label_scores.label_continuations`)."""
        prefix, _, suffix = self.choice.partition("{label}")
        return prefix, suffix

    def verdict(self, label: Label, continuation: str, *, shown: Collection[str],
                format_errors: list[str]) -> Verdict:
        """The response clean-up: the forced label with the evidence ids the continuation
        cites among those the episode showed (none for NOT ENOUGH INFO). The verdict keeps
        ``format_ok=False`` and the episode's format errors, so it never passes for a
        protocol-following answer."""
        cited = parse_answer(f"Label: {label.value}\n{self.then}{continuation}").evidence_ids
        evidence = [] if label is Label.NEI else [e for e in cited if e in set(shown)]
        return Verdict(label=label, evidence_ids=evidence, format_ok=False,
                       format_errors=[*format_errors, FORCED_ERROR], answered=True, forced=True)


# Veri-R1's answer block: "<answer>\nLabel: SUPPORT\nEvidence: [[id]]\n</answer>".
VERI_R1_FORCING = AnswerForcing(opening="\n<answer>\nLabel:")
