"""Parsing of the tag protocol the agents speak (``<plan>``, ``<search>``, ``<think>``,
``<answer>`` ...). Every function accepts any string a model can produce: problems come
back as a list of format errors, never as an exception."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from factrl.labels import Label, UnknownLabelError, normalise_label

__all__ = [
    "TagBlock",
    "ParsedAnswer",
    "scan_blocks",
    "last_block",
    "parse_answer",
    "parse_evidence_ids",
    "check_protocol",
]

_TAG = re.compile(r"<(/?)([A-Za-z_][A-Za-z0-9_\-]*)\s*>")
_EVIDENCE_ID = re.compile(r"\[\[\s*([^\[\]\n]+?)\s*\]\]")
_LABEL_LINE = re.compile(r"^\s*\**\s*label\s*\**\s*:\s*\**\s*(.*?)\s*\**\s*$", re.IGNORECASE | re.MULTILINE)
_EVIDENCE_LINE = re.compile(r"^\s*\**\s*evidence\s*\**\s*:(.*)$", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
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
    pos = 0
    open_name: str | None = None
    open_start = open_content_start = 0
    for m in _TAG.finditer(text):
        closing, name = m.group(1) == "/", m.group(2).lower()
        if open_name is None:
            stray = text[pos : m.start()].strip()
            if stray:
                errors.append(f"text outside tags: {_clip(stray)!r}")
            if closing:
                errors.append(f"closing tag </{name}> without an opening tag")
                pos = m.end()
                continue
            open_name, open_start, open_content_start = name, m.start(), m.end()
        elif closing and name == open_name:
            blocks.append(TagBlock(name, text[open_content_start : m.start()], open_start, m.end()))
            open_name, pos = None, m.end()
        elif closing:
            errors.append(f"</{name}> closes <{open_name}>")
        else:
            errors.append(f"<{name}> nested inside <{open_name}>")
    if open_name is not None:
        errors.append(f"<{open_name}> is never closed")
    else:
        stray = text[pos:].strip()
        if stray:
            errors.append(f"text outside tags: {_clip(stray)!r}")
    return blocks, errors


def last_block(text: str, name: str) -> str | None:
    """Content of the last ``<name>…</name>`` in ``text`` (lenient: ignores other problems)."""
    found = re.findall(rf"<{name}\s*>(.*?)</{name}\s*>", text, flags=re.DOTALL | re.IGNORECASE)
    return found[-1] if found else None


def parse_evidence_ids(text: str) -> list[str]:
    """Evidence ids written as ``[[id]]``, in order, without duplicates."""
    seen: dict[str, None] = {}
    for m in _EVIDENCE_ID.finditer(text):
        seen.setdefault(m.group(1).strip(), None)
    return list(seen)


@dataclass
class ParsedAnswer:
    label: Label | None
    evidence_ids: list[str]
    errors: list[str] = field(default_factory=list)


def parse_answer(content: str) -> ParsedAnswer:
    """Parse the inside of ``<answer>``: ``Label: X`` and ``Evidence: [[a]], [[b]]``."""
    errors: list[str] = []
    label: Label | None = None
    m = _LABEL_LINE.search(content)
    if m is None:
        errors.append("answer has no 'Label:' line")
    else:
        raw = m.group(1).strip().strip("*").strip()
        try:
            label = normalise_label(raw)
        except UnknownLabelError:
            errors.append(f"unknown label {_clip(raw)!r}")
    ev = _EVIDENCE_LINE.search(content)
    if ev is None:
        errors.append("answer has no 'Evidence:' line")
        ids = parse_evidence_ids(content)
    else:
        rest = content[ev.start(1) :]
        ids = parse_evidence_ids(rest)
        leftover = _EVIDENCE_ID.sub("", ev.group(1)).replace(",", " ").strip()
        if leftover and leftover.lower() not in {"none", "[]", "n/a", "-"}:
            errors.append(f"evidence not in [[id]] format: {_clip(leftover)!r}")
    # Only the Label and Evidence lines may appear inside the answer.
    extra = content
    for pattern in (_LABEL_LINE, _EVIDENCE_LINE):
        extra = pattern.sub("", extra, count=1)
    if extra.strip():
        errors.append(f"extra text in answer: {_clip(extra.strip())!r}")
    return ParsedAnswer(label, ids, errors)


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
        if re.search(rf"</?{tag}\s*>", model_text, flags=re.IGNORECASE):
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
