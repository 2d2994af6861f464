"""Trajectories as the JSON records the report's browser renders.

Everything here is plain data: the page's script puts every string into the DOM as text
(``textContent``), never as markup, so model output cannot inject anything. Token ids
and logprobs are left out (they are for trainers, and would dominate the page's size).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from factrl.types import Message, Trajectory, Turn

__all__ = ["split_blocks", "trajectory_item"]

_TAG = re.compile(r"<(/?)([A-Za-z_][A-Za-z0-9_\-]*)\s*>")


def split_blocks(text: str) -> list[tuple[str, str]]:
    """``text`` as ``(tag, content)`` pieces in order: each ``<tag>…</tag>`` block, and
    the text between blocks as ``("", text)`` (whitespace-only gaps dropped). Lenient and
    linear: a tag left open runs to the end of the text, stray closing tags stay text."""
    out: list[tuple[str, str]] = []
    open_name: str | None = None
    content_at = pos = 0
    for m in _TAG.finditer(text):
        closing, name = m.group(1) == "/", m.group(2).lower()
        if open_name is None and not closing:
            gap = text[pos : m.start()]
            if gap.strip():
                out.append(("", gap.strip("\n")))
            open_name, content_at = name, m.end()
        elif open_name is not None and closing and name == open_name:
            out.append((open_name, text[content_at : m.start()].strip("\n")))
            open_name, pos = None, m.end()
    if open_name is not None:
        out.append((open_name, text[content_at:].strip("\n")))
    else:
        rest = text[pos:]
        if rest.strip():
            out.append(("", rest.strip("\n")))
    return out


def _context(role: str, prompt: Sequence[Message], turns: Sequence[Turn]) -> dict[str, Any]:
    blocks = []
    for turn in turns:
        src = "m" if turn.source == "model" else "e"
        for tag, content in split_blocks(turn.text):
            blocks.append([src, tag, content])
        if turn.source == "model" and turn.finish_reason == "length":
            blocks.append(["e", "note", "(generation cut at the token limit)"])
    return {"role": role, "prompt": [[m.role, m.content] for m in prompt], "blocks": blocks}


def trajectory_item(t: Trajectory) -> dict[str, Any]:
    """The record of one trajectory; keys are short because a page may hold thousands."""
    v, claim = t.verdict, t.claim
    pred = None if t.error is not None else v.label
    r = t.reward
    contexts = [_context("agent", t.prompt, t.turns)]
    contexts += [_context(s.role, s.prompt, s.turns) for s in t.segments]
    conf = t.meta.get("confidence")
    return {
        "id": t.claim_id,
        "claim": claim.text,
        "gold": claim.label.value if claim.label is not None else None,
        "ev": [[e.id, e.text or ""] for e in claim.evidence],
        "pred": pred.value if pred is not None else None,
        "cited": list(v.evidence_ids),
        "ok": pred is not None and pred == claim.label,
        "fmt_ok": v.format_ok and t.error is None,
        "fmt": list(v.format_errors),
        "err": t.error,
        "reward": {"total": r.total, "parts": r.components} if (r.components or r.total) else None,
        "conf": float(conf) if isinstance(conf, (int, float)) else None,
        "hops": claim.meta.get("num_hops"),
        "searches": list(t.searches),
        "shown": list(t.retrieved_ids),
        "secs": t.timings.get("total_s"),
        "ctx": contexts,
    }
