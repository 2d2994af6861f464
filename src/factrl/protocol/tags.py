"""Parsing of the tag protocol the agents speak (``<plan>``, ``<search>``, ``<think>``,
``<answer>`` ...). Every function accepts any string a model can produce: problems come
back as a list of format errors, never as an exception."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from factrl.labels import Label, UnknownLabelError, normalise_label

__all__ = [
    "TagBlock",
    "ParsedAnswer",
    "scan_blocks",
    "last_block",
    "last_block_span",
    "answer_label_span",
    "parse_answer",
    "parse_evidence_ids",
    "check_protocol",
]

# Every function here runs in time linear in its input: a small model can emit 100 kB of
# blank lines, '[[' or '<answer>', and that must not stall reward scoring. So each pattern
# has no quantifier next to another it could overlap (a failed try gives back at most one
# run, once), no pattern is re-tried from every line or tag it could start at, and the
# rest is plain string scanning.

# A whole tag, its '/' and its name (groups, for re.split).
_TAG = re.compile(r"(<(/?)([A-Za-z_][A-Za-z0-9_\-]*)\s*>)")
# ``[[`` + anything without brackets + ``]]``; what the inside may hold is checked in Python.
_BRACKETED = re.compile(r"\[\[([^\[\]]*)\]\]")
_SPACE = re.compile(r"\s*")
_STARS = re.compile(r"\**")
# A keyword and what may follow it up to the colon: ``\s*(?:\*+\s*)?`` accepts what
# ``\s*\**\s*`` does without two runs of spaces side by side when there is no star.
_LABEL_KEY = re.compile(r"label\s*(?:\*+\s*)?:", re.IGNORECASE)
_EVIDENCE_KEY = re.compile(r"evidence\s*(?:\*+\s*)?:", re.IGNORECASE)
_MAX_LABEL_CHARS = 200  # longer than any spelling: not worth normalising


# Tags checked per text at most (see scan_blocks).
MAX_TAGS = 8192


@dataclass(frozen=True, slots=True)
class TagBlock:
    """A well-formed ``<name>content</name>`` block at ``[start, end)`` of the text."""

    name: str
    content: str
    start: int
    end: int


def scan_blocks(text: str) -> tuple[list[TagBlock], list[str]]:
    """Split ``text`` into top-level tag blocks.

    Returns the blocks and the problems found: text outside any block, unclosed or
    unopened tags, and nesting (the protocol has no nested tags).
    """
    blocks: list[TagBlock] = []
    errors: list[str] = []
    # [text before the 1st tag, 1st tag, its '/', its name, text before the 2nd tag, ...]:
    # one C-level pass, no match object per tag (texts can hold tens of thousands).
    parts = _TAG.split(text)
    n_tags = (len(parts) - 1) // 4
    if n_tags > MAX_TAGS:
        # No episode of any protocol needs this many: a degenerate output is a format
        # error, and checking only the first MAX_TAGS keeps scoring time bounded.
        errors.append(f"{n_tags} tags (more than {MAX_TAGS}); only the first {MAX_TAGS} were checked")
        parts = parts[: 4 * MAX_TAGS + 1]
    open_name: str | None = None
    open_start = content_start = end = 0
    for i in range(1, len(parts), 4):
        gap, closing, name = parts[i - 1], parts[i + 1], parts[i + 2].lower()
        start = end + len(gap)
        end = start + len(parts[i])
        if open_name is None:
            if gap and not gap.isspace():
                errors.append(f"text outside tags: {_clip(gap.strip())!r}")
            if closing:
                errors.append(f"closing tag </{name}> without an opening tag")
            else:
                open_name, open_start, content_start = name, start, end
        elif closing and name == open_name:
            blocks.append(TagBlock(name, text[content_start:start], open_start, end))
            open_name = None
        elif closing:
            errors.append(f"</{name}> closes <{open_name}>")
        else:
            errors.append(f"<{name}> nested inside <{open_name}>")
    if open_name is not None:
        errors.append(f"<{open_name}> is never closed")
    elif parts[-1].strip():
        errors.append(f"text outside tags: {_clip(parts[-1].strip())!r}")
    return blocks, errors


def last_block(text: str, name: str) -> str | None:
    """Content of the last ``<name>…</name>`` in ``text`` (lenient: ignores other problems).

    Pairs each opening with the first closing after it, left to right, and skips openings
    inside a block and closings outside one: the blocks a lazy ``<name>(.*?)</name>``
    finds, in one pass instead of a re-scan to the end from every unclosed opening.
    """
    span = last_block_span(text, name)
    return None if span is None else text[span[0] : span[1]]


def last_block_span(text: str, name: str) -> tuple[int, int] | None:
    """``[start, end)`` of the content :func:`last_block` returns, or None."""
    tag = re.compile(rf"<(/?){re.escape(name)}\s*>", re.IGNORECASE)
    found: tuple[int, int] | None = None
    content_start: int | None = None
    for m in tag.finditer(text):
        if content_start is None:
            if not m.group(1):
                content_start = m.end()
        elif m.group(1):
            found, content_start = (content_start, m.start()), None
    return found


def answer_label_span(model_text: str) -> tuple[int, int] | None:
    """``[start, end)`` in ``model_text`` of the label :func:`parse_answer` reads from the
    last ``<answer>`` block (e.g. ``SUPPORT`` of ``Label: **SUPPORT**``, without the
    spaces and stars around it); None when there is no answer block, no ``Label:`` line or
    the label is unknown."""
    block = last_block_span(model_text, "answer")
    if block is None:
        return None
    content = model_text[block[0] : block[1]]
    line = _label_line(content)
    if line is None:
        return None
    # parse_answer's raw label is value.strip().strip("*").strip(): locate it in value.
    value = line.value
    start = len(value) - len(value.lstrip())
    start += len(value[start:]) - len(value[start:].lstrip("*"))
    start += len(value[start:]) - len(value[start:].lstrip())
    raw = value.strip().strip("*").strip()
    if not raw or _label(raw) is None:
        return None
    begin = block[0] + line.value_start + start
    return begin, begin + len(raw)


def parse_evidence_ids(text: str) -> list[str]:
    """Evidence ids written as ``[[id]]``, in order, without duplicates."""
    seen: dict[str, None] = {}
    for inside in _BRACKETED.findall(text):
        evidence_id = inside.strip()
        # On one line (blank lines around it are fine); ``[[ ]]`` names nothing.
        if evidence_id and "\n" not in evidence_id:
            seen.setdefault(evidence_id, None)
    return list(seen)


def _evidence_id(inside: str) -> str | None:
    """The id written between ``[[`` and ``]]``, or None when it is malformed: it must
    fit on one line, though blank lines may surround it. ``[[ ]]`` (blank, not only
    newlines) is well formed and empty."""
    core = inside.strip()
    if core:
        return None if "\n" in core else core
    return "" if inside.strip("\n") else None


def _drop_evidence_ids(line: str) -> str:
    """``line`` without its well-formed ``[[id]]`` references."""
    return _BRACKETED.sub(lambda m: "" if _evidence_id(m.group(1)) is not None else m.group(0), line)


@dataclass
class ParsedAnswer:
    label: Label | None
    evidence_ids: list[str]
    errors: list[str] = field(default_factory=list)


def parse_answer(content: str) -> ParsedAnswer:
    """Parse the inside of ``<answer>``: ``Label: X`` and ``Evidence: [[a]], [[b]]``."""
    errors: list[str] = []
    label: Label | None = None
    label_line = _label_line(content)
    if label_line is None:
        errors.append("answer has no 'Label:' line")
    else:
        raw = label_line.value.strip().strip("*").strip()
        label = _label(raw)
        if label is None:
            errors.append(f"unknown label {_clip(raw)!r}")
    ev = _evidence_line(content)
    if ev is None:
        errors.append("answer has no 'Evidence:' line")
        ids = parse_evidence_ids(content)
    else:
        ids = parse_evidence_ids(content[ev.value_start :])
        leftover = _drop_evidence_ids(ev.value).replace(",", " ").strip()
        if leftover and leftover.lower() not in {"none", "[]", "n/a", "-"}:
            errors.append(f"evidence not in [[id]] format: {_clip(leftover)!r}")
    # Only the Label and Evidence lines may appear inside the answer.
    extra = content
    if label_line is not None:
        extra = extra[: label_line.start] + extra[label_line.end :]
    ev = _evidence_line(extra)
    if ev is not None:
        extra = extra[: ev.start] + extra[ev.end :]
    if extra.strip():
        errors.append(f"extra text in answer: {_clip(extra.strip())!r}")
    return ParsedAnswer(label, ids, errors)


def _label(raw: str) -> Label | None:
    if len(raw) > _MAX_LABEL_CHARS:  # normalising 100 kB of junk costs more than the parse
        return None
    try:
        return normalise_label(raw)
    except UnknownLabelError:
        return None


# The answer's two lines. They were the MULTILINE patterns
#   ^\s*\**\s*label\s*\**\s*:\s*\**\s*(.*?)\s*\**\s*$   and   ^\s*\**\s*evidence\s*\**\s*:(.*)$
# whose ``\s`` spans newlines (a value may sit on the line after ``Label:``), so every line
# start re-scanned all the blank lines after it and adjacent ``\s*`` runs backtracked
# against each other: quadratic, or worse. The helpers below find the same first match
# (start, end and group) with each run of spaces or stars scanned a bounded number of times.


class _Line(NamedTuple):
    """The first match of one of those patterns: ``text[start:end]``, and its group."""

    start: int
    end: int
    value_start: int
    value: str


def _skip(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """End of the run of ``pattern`` (spaces or stars) that starts at ``pos``."""
    match = pattern.match(text, pos)
    assert match is not None  # both patterns match the empty string
    return match.end()


def _keyword_line(text: str, keyword: re.Pattern[str]) -> tuple[int, int] | None:
    """Start of the first line that reads (spaces) (stars) (spaces) ``keyword`` (spaces)
    (stars) (spaces) ``:``, and the index just after the colon. The spaces before the
    keyword may include newlines, as in the original patterns: the line is the first one
    among them."""
    scanned = 0
    for m in keyword.finditer(text):
        # Slices between matches are disjoint, so all of them together stay linear.
        gap_start, scanned = scanned, m.end()
        lead = gap_start + len(text[gap_start : m.start()].rstrip().rstrip("*").rstrip())
        if lead == 0:
            return 0, m.end()  # only spaces and stars before it: the text's first line
        newline = text.find("\n", lead, m.start())
        if newline >= 0:
            return newline + 1, m.end()
    return None


def _line_end(text: str, pos: int) -> int:
    newline = text.find("\n", pos)
    return len(text) if newline < 0 else newline


def _label_line(text: str) -> _Line | None:
    """The first ``Label:`` line, or None."""
    found = _keyword_line(text, _LABEL_KEY)
    if found is None:
        return None
    start, colon = found
    value_start = _skip(_SPACE, text, _skip(_STARS, text, _skip(_SPACE, text, colon)))
    # The value runs to the end of its line, less trailing spaces, stars and spaces.
    value = text[value_start : _line_end(text, value_start)].rstrip().rstrip("*").rstrip()
    return _Line(start, _label_line_end(text, value_start + len(value)), value_start, value)


def _label_line_end(text: str, pos: int) -> int:
    """End of the label line whose value ends at ``pos``: the spaces, stars and spaces
    after it, cut back to the line end where the original pattern's backtracking stopped
    (so blank and star-only lines after the value belong to the line)."""
    spaces_end = _skip(_SPACE, text, pos)
    stars_end = _skip(_STARS, text, spaces_end)
    end = _skip(_SPACE, text, stars_end)
    if end == len(text):
        return end
    newline = text.rfind("\n", stars_end, end)
    return newline if newline >= 0 else text.rfind("\n", pos, spaces_end)


def _evidence_line(text: str) -> _Line | None:
    """The first ``Evidence:`` line (its value is all that follows the colon), or None."""
    found = _keyword_line(text, _EVIDENCE_KEY)
    if found is None:
        return None
    start, colon = found
    end = _line_end(text, colon)
    return _Line(start, end, colon, text[colon:end])


def check_protocol(
    model_text: str,
    *,
    allowed: Sequence[str],
    first: str | None,
    once: Sequence[str] = (),
    final: str = "answer",
    max_counts: dict[str, int] | None = None,
    forbidden: Sequence[str] = ("information",),
) -> tuple[list[TagBlock], list[str]]:
    """Check the model's own text (observations excluded) against a tag protocol.

    ``allowed`` tags only; ``forbidden`` tags (written by the system, never the model)
    fail; ``first`` must open the text; tags in ``once`` appear at most once; ``final``
    appears exactly once and closes the text; ``max_counts`` bounds repeats.
    """
    blocks, errors = scan_blocks(model_text)
    names = [b.name for b in blocks]
    for tag in forbidden:
        # Linear: a literal, then one run of spaces before '>'.
        if re.search(rf"</?{re.escape(tag)}\s*>", model_text, flags=re.IGNORECASE):
            errors.append(f"model wrote <{tag}> itself")
    allowed_set = {a.lower() for a in allowed} | {f.lower() for f in forbidden}
    for name in dict.fromkeys(names):
        if name not in allowed_set:
            errors.append(f"undeclared tag <{name}>")
    if first is not None and (not names or names[0] != first):
        errors.append(f"does not start with <{first}>")
    for tag in once:
        if names.count(tag) > 1:
            errors.append(f"<{tag}> appears {names.count(tag)} times (once allowed)")
    n_final = names.count(final)
    if n_final == 0:
        errors.append(f"no <{final}>")
    elif n_final > 1:
        errors.append(f"<{final}> appears {n_final} times")
    elif names[-1] != final:
        errors.append(f"<{final}> is not the last block")
    for tag, limit in (max_counts or {}).items():
        if names.count(tag) > limit:
            errors.append(f"<{tag}> used {names.count(tag)} times (limit {limit})")
    return blocks, errors


def _clip(s: str, n: int = 60) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"
