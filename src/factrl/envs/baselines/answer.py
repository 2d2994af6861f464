"""The plain-text answer the baselines write: ``Label:``, ``Evidence:`` and ``Reason:``
lines, no tags. Parsing is lenient (a label is read wherever its line is) and the format
check strict (every deviation is a format error); nothing a model writes raises.

Format errors start with the stable prefixes :mod:`factrl.metrics.failures` classifies:
``no answer``, ``unknown label``, ``no evidence``, ``evidence not in [[id]] format`` and
``text outside the answer``; the rest (a line given twice) count as ``other``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from factrl.protocol.tags import parse_evidence_ids
from factrl.protocol.text import clip
from factrl.labels import Label, UnknownLabelError, normalise_label
from factrl.types import Verdict

__all__ = ["AnswerLines", "answer_verdict", "clip", "line_key", "parse_answer_lines", "parse_evidence", "parse_label"]

_BRACKETED = re.compile(r"\[\[([^\[\]\n]*)\]\]")
_NO_EVIDENCE = {"", "none", "n/a", "-", "[]"}
_MAX_LABEL_CHARS = 200  # longer than any spelling: not worth normalising


@dataclass
class AnswerLines:
    """The keyed lines of one answer: the first value of each key, and the problems."""

    values: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def line_key(line: str) -> tuple[str, str] | None:
    """``"**Label:** SUPPORT"`` → ``("label", "SUPPORT")``; None when the line has no
    ``Key:`` prefix. Plain string scanning (linear in the line), markdown stars allowed."""
    core = line.strip().lstrip("*").lstrip()
    key, sep, value = core.partition(":")
    key = key.strip().rstrip("*").strip().lower()
    if not sep or not key or len(key) > 20:
        return None
    return key, value.strip().strip("*").strip()


def parse_answer_lines(text: str, keys: Sequence[str]) -> AnswerLines:
    """The ``Key: value`` lines of ``text`` for ``keys`` (lower case); a key given twice
    keeps its first value, any other non-blank line is text outside the answer."""
    out = AnswerLines()
    outside: list[str] = []
    for line in filter(None, map(str.strip, text.splitlines())):
        kv = line_key(line)
        if kv is None or kv[0] not in keys:
            outside.append(line)
        elif kv[0] in out.values:
            out.errors.append(f"'{kv[0].capitalize()}:' line given more than once")
        else:
            out.values[kv[0]] = kv[1]
    if outside:
        out.errors.append(f"text outside the answer: {clip(' '.join(outside))!r}")
    return out


def parse_label(raw: str) -> tuple[Label | None, list[str]]:
    """A label spelling (any the datasets use) or an ``unknown label`` error."""
    if len(raw) <= _MAX_LABEL_CHARS:
        try:
            return normalise_label(raw), []
        except UnknownLabelError:
            pass
    return None, [f"unknown label {clip(raw)!r}"]


def parse_evidence(raw: str) -> tuple[list[str], list[str]]:
    """``[[a]], [[b]]`` (or ``none``) → the ids, and an error for anything else written."""
    ids = parse_evidence_ids(raw)
    leftover = _BRACKETED.sub("", raw).replace(",", " ").strip()
    if leftover.lower() in _NO_EVIDENCE:
        return ids, []
    return ids, [f"evidence not in [[id]] format: {clip(raw.strip())!r}"]


def answer_verdict(text: str, *, evidence: bool) -> Verdict:
    """The verdict of one plain-text answer: ``Label:`` (required), ``Evidence:``
    (required when ``evidence``, else not allowed) and an optional ``Reason:`` line.

    No ``Label:`` line is no answer (``answered`` False). A missing ``Evidence:`` line is
    an error, and then any ``[[id]]`` written elsewhere is taken as cited (as Veri-R1's
    parser does).
    """
    keys = ("label", "evidence", "reason") if evidence else ("label", "reason")
    lines = parse_answer_lines(text, keys)
    errors = list(lines.errors)
    if "label" not in lines.values:
        errors.insert(0, "no answer: no 'Label:' line")
        return Verdict(label=None, evidence_ids=[], format_ok=False, format_errors=errors, answered=False)
    label, label_errors = parse_label(lines.values["label"])
    errors[:0] = label_errors
    ids: list[str] = []
    if evidence:
        if "evidence" in lines.values:
            ids, ev_errors = parse_evidence(lines.values["evidence"])
            errors.extend(ev_errors)
        else:
            errors.append("no evidence: no 'Evidence:' line")
            ids = parse_evidence_ids(text)
    return Verdict(label=label, evidence_ids=ids, format_ok=not errors, format_errors=errors, answered=True)


