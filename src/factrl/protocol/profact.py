"""Strict parsers of ProFact's three stages. Each takes any string a model can write and
returns what it could read plus a list of format errors; none raises.

Question stage (one turn)::

    <questions>
    1. first verification question
    2. second verification question
    </questions>

Search stage (two turns per question, in the question's own context)::

    <search>query</search>          → the environment appends <information>…</information>
    <answer>evidence-grounded answer</answer>

Verdict stage (one turn, back in the opening context)::

    <justification>optional short reasoning</justification>
    <verdict>Supported | Refuted | Not Enough Evidence | Conflicting Evidence/Cherrypicking</verdict>

"Strict" means every deviation is a recorded format error: text outside the tags, a
block of another stage, an unnumbered line, a repeated question, too many questions, an
empty query or answer. What can still be read is kept (the questions that are numbered,
the first query), so one stray word does not throw away a stage; what cannot (no block,
an empty block, an unknown label) is that stage's failure. Errors keep the stable
prefixes :mod:`factrl.metrics.failures` classifies (``no answer``, ``text outside``,
``unknown label``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from factrl.protocol.tags import scan_blocks
from factrl.protocol.text import clip, numbered_items
from factrl.labels import Label, UnknownLabelError, normalise_label

__all__ = [
    "AVERITEC_LABELS",
    "QuestionParse",
    "SearchCall",
    "AnswerParse",
    "VerdictParse",
    "parse_questions",
    "parse_search_call",
    "parse_answer",
    "parse_verdict_turn",
]

# The AVeriTeC label set, as the verdict stage must write it (any known spelling of these
# four is accepted; a label outside the set is an unknown label).
AVERITEC_LABELS: dict[Label, str] = {
    Label.SUPPORT: "Supported",
    Label.REFUTE: "Refuted",
    Label.NEI: "Not Enough Evidence",
    Label.CONFLICTING: "Conflicting Evidence/Cherrypicking",
}
_MAX_LABEL_CHARS = 200


def _blocks(text: str, allowed: tuple[str, ...]) -> tuple[dict[str, list[str]], list[str]]:
    """The contents of each allowed top-level block, and the structural errors (text
    outside tags, nesting, unclosed tags, blocks of other stages)."""
    blocks, errors = scan_blocks(text)
    found: dict[str, list[str]] = {name: [] for name in allowed}
    for b in blocks:
        if b.name in found:
            found[b.name].append(b.content)
        else:
            errors.append(f"unexpected <{b.name}> block")
    for name, contents in found.items():
        if len(contents) > 1:
            errors.append(f"<{name}> given {len(contents)} times (the first was used)")
    return found, errors


@dataclass
class QuestionParse:
    questions: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def parse_questions(text: str, max_questions: int) -> QuestionParse:
    """The verification questions of the question stage (at most ``max_questions``)."""
    found, errors = _blocks(text, ("questions",))
    out = QuestionParse(errors=errors)
    if not found["questions"]:
        out.errors.insert(0, "no answer: no <questions> block")
        return out
    items, outside, numbering = numbered_items(found["questions"][0], "questions")
    out.errors.extend(numbering)
    for q in items:
        if q in out.questions:
            out.errors.append(f"question repeated: {clip(q)!r} (asked once)")
            continue
        out.questions.append(q)
    if outside:
        out.errors.append(f"text outside the numbered questions: {clip(' '.join(outside))!r}")
    if not out.questions:
        out.errors.insert(0, "no answer: the <questions> block has no numbered question")
    if len(out.questions) > max_questions:
        out.errors.append(f"too many questions: {len(out.questions)} (at most {max_questions}; "
                          f"the first {max_questions} were searched)")
        out.questions = out.questions[:max_questions]
    return out


@dataclass
class SearchCall:
    query: str | None = None
    errors: list[str] = field(default_factory=list)


def parse_search_call(text: str) -> SearchCall:
    """The search stage's first turn: one ``<search>query</search>`` tool call. An answer
    written before any search is not accepted (answers must rest on retrieved evidence)."""
    found, errors = _blocks(text, ("search", "answer"))
    out = SearchCall(errors=errors)
    if found["answer"]:
        out.errors.append("answer before any search (not accepted: answers must rest on retrieved evidence)")
    if not found["search"]:
        out.errors.insert(0, "no search: no <search> tool call")
        return out
    query = " ".join(found["search"][0].split())
    if not query:
        out.errors.insert(0, "no search: the <search> query is empty")
        return out
    out.query = query
    return out


@dataclass
class AnswerParse:
    answer: str | None = None
    errors: list[str] = field(default_factory=list)


def parse_answer(text: str, max_chars: int = 1000) -> AnswerParse:
    """The search stage's second turn: one non-empty ``<answer>…</answer>``."""
    found, errors = _blocks(text, ("answer", "search"))
    out = AnswerParse(errors=errors)
    if found["search"]:
        out.errors.append("second search for one question (one search per question)")
    if not found["answer"]:
        out.errors.insert(0, "no answer: no <answer> block")
        return out
    answer = " ".join(found["answer"][0].split())
    if not answer:
        out.errors.insert(0, "no answer: the <answer> block is empty")
        return out
    if len(answer) > max_chars:
        out.errors.append(f"answer longer than {max_chars} characters (cut)")
        answer = answer[:max_chars]
    out.answer = answer
    return out


@dataclass
class VerdictParse:
    label: Label | None = None
    justification: str | None = None
    answered: bool = False  # a <verdict> block was found
    errors: list[str] = field(default_factory=list)


def parse_verdict_turn(text: str) -> VerdictParse:
    """The verdict stage: an optional ``<justification>`` and one ``<verdict>`` with an
    AVeriTeC label."""
    found, errors = _blocks(text, ("justification", "verdict"))
    out = VerdictParse(errors=errors)
    if found["justification"]:
        out.justification = " ".join(found["justification"][0].split()) or None
    if not found["verdict"]:
        out.errors.insert(0, "no answer: no <verdict> block")
        return out
    out.answered = True
    raw = " ".join(found["verdict"][0].split())
    try:
        label = normalise_label(raw) if len(raw) <= _MAX_LABEL_CHARS else None
    except UnknownLabelError:
        label = None
    if label is None or label not in AVERITEC_LABELS:
        out.errors.insert(0, f"unknown label {clip(raw)!r} (AVeriTeC labels: {', '.join(AVERITEC_LABELS.values())})")
        return out
    out.label = label
    return out
