"""Small text helpers the agents' parsers share: clipping quoted model text in error
messages, and reading a numbered list ("1. ...", one item per line)."""

from __future__ import annotations

import re

__all__ = ["clip", "numbered_items"]

_ITEM = re.compile(r"(\d{1,3})[.)]\s+(\S.*)")


def clip(s: str, n: int = 60) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def numbered_items(text: str, noun: str) -> tuple[list[str], list[str], list[str]]:
    """The items of a numbered list in ``text`` (in order), the non-blank lines that are
    not items, and at most one numbering error (``"<noun> not numbered 1, 2, ...: …"``,
    at the first item out of sequence)."""
    items: list[str] = []
    outside: list[str] = []
    errors: list[str] = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        m = _ITEM.fullmatch(s)
        if m is None:
            outside.append(s)
            continue
        if int(m.group(1)) != len(items) + 1 and not errors:
            errors.append(f"{noun} not numbered 1, 2, ...: {clip(s)!r}")
        items.append(m.group(2).strip())
    return items, outside, errors
