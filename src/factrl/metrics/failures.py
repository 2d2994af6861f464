"""Why episodes failed: format failures by kind and episode errors by type.

Format errors are the strings of :mod:`factrl.protocol.tags` (``check_protocol``,
``parse_answer``) and of the baselines' plain-text parsers; they are classified by their
stable prefixes, so rewording the rest of a message does not move it to another kind.
Kinds (an episode counts once per kind):

- ``no_answer``: no ``<answer>`` block was found (baselines: no ``Label:`` line, no
  ``finish`` action, no sub-claims);
- ``text_outside_tags``: text the model wrote outside every tag block (baselines:
  outside the answer's lines, the sub-claim list, or the Thought/Action steps);
- ``forged_information``: the model wrote ``<information>`` itself (only the
  environment may; a forged block is invented evidence);
- ``unparseable_label``: the answer has no ``Label:`` line or an unknown label;
- ``bad_evidence_ids``: evidence not in ``[[id]]`` format or none given, and —
  when the ids the episode was shown are known (a trajectory's ``retrieved_ids``, empty
  when nothing was retrieved) — cited ids that were never shown;
- ``other``: every other protocol problem (nesting, unclosed tags, order, budgets, ...).

Episodes that ended in an error are counted by error type instead (``reset/ValueError``
from ``"reset failed: ValueError: ..."``) and not classified for format: their verdict
is whatever was left when they broke off.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from factrl.metrics.evidence import evidence_set
from factrl.types import Verdict

__all__ = [
    "FORMAT_FAILURE_KINDS",
    "FailureKind",
    "FailureCounts",
    "classify_format_error",
    "format_failure_kinds",
    "episode_error_type",
]

FailureKind = Literal[
    "no_answer",
    "text_outside_tags",
    "forged_information",
    "unparseable_label",
    "bad_evidence_ids",
    "other",
]
FORMAT_FAILURE_KINDS: tuple[FailureKind, ...] = get_args(FailureKind)

# (message prefix, kind), matched case-insensitively on the start of the message.
_PREFIXES: tuple[tuple[str, FailureKind], ...] = (
    ("no <answer>", "no_answer"),
    ("no answer", "no_answer"),  # the plain-text baselines (factrl.envs.baselines)
    ("text outside", "text_outside_tags"),  # "text outside tags", "... the answer", ...
    ("model wrote <information>", "forged_information"),
    ("answer has no 'label:'", "unparseable_label"),
    ("unknown label", "unparseable_label"),
    ("evidence not in [[id]] format", "bad_evidence_ids"),
    ("answer has no 'evidence:'", "bad_evidence_ids"),
    ("no evidence", "bad_evidence_ids"),
)
# "reset failed: ValueError: ..." → stage "reset", type "ValueError".
_ERROR = re.compile(r"^\s*([a-z][a-z ]*?) failed: ([A-Za-z_][\w.]*)\s*:")


def classify_format_error(message: str) -> FailureKind:
    """The kind of one format-error message (see the module docstring)."""
    low = message.strip().lower()
    for prefix, kind in _PREFIXES:
        if low.startswith(prefix):
            return kind
    return "other"


def format_failure_kinds(verdict: Verdict, shown_ids: Sequence[str] | None = None) -> set[FailureKind]:
    """The failure kinds of one episode's verdict; ``shown_ids`` are the evidence ids the
    episode was shown (None: not known), and citing any other id is a bad evidence id —
    every cited id, when nothing was shown."""
    kinds = {classify_format_error(e) for e in verdict.format_errors}
    if not verdict.answered:
        kinds.add("no_answer")
    if shown_ids is not None and verdict.answered and not evidence_set(verdict.evidence_ids) <= evidence_set(shown_ids):
        kinds.add("bad_evidence_ids")
    return kinds


def episode_error_type(error: str) -> str:
    """``"reset failed: ValueError: bad"`` → ``"reset/ValueError"``; ``"env step failed:
    TimeoutError: ..."`` → ``"env_step/TimeoutError"``; any other text → ``"other"``."""
    m = _ERROR.match(error)
    if m is None:
        return "other"
    return f"{m.group(1).strip().replace(' ', '_')}/{m.group(2)}"


@dataclass
class FailureCounts:
    """Counts over a run, JSON-ready through :meth:`to_dict`."""

    format_failures: Counter[str] = field(default_factory=Counter)
    episodes_with_format_failures: int = 0
    episode_errors: Counter[str] = field(default_factory=Counter)

    def add(self, verdict: Verdict, *, error: str | None, shown_ids: Sequence[str] | None = None) -> None:
        if error is not None:
            self.episode_errors[episode_error_type(error)] += 1
            return
        kinds = format_failure_kinds(verdict, shown_ids)
        self.format_failures.update(kinds)
        self.episodes_with_format_failures += bool(kinds)

    def to_dict(self) -> dict[str, object]:
        return {
            # Every kind present (0 included) so runs compare column by column.
            "format_failures": {k: self.format_failures[k] for k in FORMAT_FAILURE_KINDS},
            "episodes_with_format_failures": self.episodes_with_format_failures,
            "episode_errors": dict(sorted(self.episode_errors.items())),
        }

