"""Small text helpers the agents' parsers share: clipping quoted model text in error
messages, reading a numbered list ("1. ...", one item per line), removing a reasoning
model's ``<think>`` trace and finding code fences.

Each runs in time linear in its input (a small model can emit 100 kB of ``<think>`` or
of one letter after a fence): no pattern has a quantifier next to another it could
overlap, and no lazy ``.*?`` is re-tried from every place it could start."""

from __future__ import annotations

import re

__all__ = ["clip", "numbered_items", "strip_think", "code_fences", "FENCE_OPEN"]

_ITEM = re.compile(r"(\d{1,3})[.)]\s+(\S.*)")
_THINK_OPEN = re.compile("<think>", re.IGNORECASE)
_THINK_CLOSE = re.compile("</think>", re.IGNORECASE)
# A fence's opening: the backticks, a language name, the spaces after it (both greedy; they
# hold no backtick, so giving them back never lets a fence close elsewhere).
FENCE_OPEN = re.compile(r"```[A-Za-z]*\s*")


def clip(s: str, n: int = 60) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def numbered_items(text: str, noun: str) -> tuple[list[str], list[str], list[str]]:
    """The items of a numbered list in ``text`` (in order), the non-blank lines that are
    not items, and at most one numbering error (``"<noun> not numbered 1, 2, ...: …"``,
    at the first item out of sequence)."""
    items: list[str] = []
    outside: list[str] = []
    errors: list[str] = []
    # Blank lines are dropped in C first: 100 kB of newlines is one split, not a loop.
    for line in filter(None, map(str.strip, text.splitlines())):
        m = _ITEM.fullmatch(line)
        if m is None:
            outside.append(line)
            continue
        if int(m.group(1)) != len(items) + 1 and not errors:
            errors.append(f"{noun} not numbered 1, 2, ...: {clip(line)!r}")
        items.append(m.group(2).strip())
    return items, outside, errors


def strip_think(text: str) -> str:
    """``text`` without ``<think>…</think>`` blocks (a reasoning model's, e.g. Qwen3), and
    without an unclosed ``<think>`` tail (a trace cut at the token budget); stripped.

    What ``re.sub(r"<think>.*?</think>", "")`` then ``re.sub(r"<think>.*\\Z", "")``
    (both case-insensitive) give, in one pass: an opening without a closing after it
    ends the scan instead of being re-tried from every later opening."""
    kept: list[str] = []
    pos = 0
    while (opening := _THINK_OPEN.search(text, pos)) is not None:
        closing = _THINK_CLOSE.search(text, opening.end())
        if closing is None:  # nor has any later opening
            break
        kept.append(text[pos : opening.start()])
        pos = closing.end()
    kept.append(text[pos:])
    out = "".join(kept)
    # What is left of an unclosed trace (the pieces around a removed block may also join
    # into a new '<think>', as the two substitutions would find).
    tail = _THINK_OPEN.search(out)
    return (out if tail is None else out[: tail.start()]).strip()


def code_fences(text: str) -> list[str]:
    """The contents of the code fences in ``text`` (`` ```json … ``` ``), in order: what
    ``re.findall(r"```[A-Za-z]*\\s*(.*?)```", text, re.DOTALL)`` finds, in one pass."""
    out: list[str] = []
    pos = 0
    while (opening := FENCE_OPEN.search(text, pos)) is not None:
        close = text.find("```", opening.end())
        if close == -1:  # no later opening can close either
            break
        out.append(text[opening.end() : close])
        pos = close + 3
    return out
