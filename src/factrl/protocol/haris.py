"""Strict parsing of the HARIS tag protocols. Every function accepts any text a model can
produce: problems come back as format errors, never as exceptions.

- Reasoner turns: reasoning in ``<think>``, ``<question>…</question>`` (the turn stops
  there) and at the end ``<verification>… \\boxed{Support|Refute} …</verification>``.
- Search agent turns: ``<think>``, ``<search>…</search>``, at the end ``<report>…</report>``.
- Single agent turns: ``<think>``, ``<search>…</search>``, at the end
  ``<answer>…\\boxed{…}…</answer>``.

The paper's rollouts (HARIS Figures 7–9) ask their questions and searches *inside* an
open ``<think>``: the turn stops at ``</question>``, the ``<result>`` is appended, and
the next turn goes on thinking inside the same block until ``</think>``; between
``</think>`` and the final tag they may write a short summary (Figure 8). So a
:class:`TurnParser` parses one agent's turns in order and carries an open ``<think>``
from one turn to the next. What stays a format error:

- a tag the agent may not write — above all ``<result>``, the observation, which only
  the environment inserts (inside a think or not);
- the final action inside an open ``<think>`` (the reasoning ends before the verdict);
- text outside any block, except between ``</think>`` and the action after it;
- anything after a turn's action, a second action, ``<think>`` inside ``<think>``, a
  tag inside an action, unclosed or unopened tags.

The label set is the paper's two-way one (Support / Refute). :func:`binary_gold` maps a
dataset's gold label onto it explicitly.

Every function here runs in time linear in its input: one regex pass over the tags, at
most :data:`MAX_TAGS` tags read per turn and :data:`MAX_TURNS` turns per joined text (a
degenerate output is a format error, and scoring time stays bounded).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from factrl.labels import Label
from factrl.types import Verdict

__all__ = ["MAX_TAGS", "MAX_TURNS", "TurnAction", "TurnParser", "parse_turn", "parse_turns", "parse_boxed", "binary_gold",
           "episode_verdict", "split_turns", "budgeted_verdict", "BOXED_LABELS"]

# "\boxed{Support}", "\boxed{ \text{Refute} }", "$\boxed{\text{Support}}$".
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{\s*)?([^{}]{0,40}?)\s*\}?\s*\}")
BOXED_LABELS: dict[str, Label] = {
    "support": Label.SUPPORT, "supports": Label.SUPPORT, "supported": Label.SUPPORT,
    "refute": Label.REFUTE, "refutes": Label.REFUTE, "refuted": Label.REFUTE,
}
# A whole tag: its '/' and its name.
_TAG = re.compile(r"<(/?)([A-Za-z_][A-Za-z0-9_\-]*)\s*>")
# Turns of one joined text parsed at most: an episode has a handful (the reasoner's
# budget is questions + 2); past this the text is degenerate and the rest is not read.
MAX_TURNS = 256
MAX_TAGS = 1024  # tags read per turn; past this a turn is degenerate (an error says so)
_MAX_ERRORS = 64  # format errors kept per turn (a degenerate turn could have thousands)


def binary_gold(label: Label | None) -> Label | None:
    """The paper's two-way gold label: SUPPORT stays; REFUTE and NOT ENOUGH INFO are
    "not supported" → REFUTE (HoVer's NOT_SUPPORTED merges both); CONFLICTING has no
    binary reading (None: unscoreable, the reward says so)."""
    if label is Label.SUPPORT:
        return Label.SUPPORT
    if label in (Label.REFUTE, Label.NEI):
        return Label.REFUTE
    return None


def boxed_contents(text: str) -> list[str]:
    """The contents of every ``\\boxed{…}`` / ``\\boxed{\\text{…}}`` (up to 40 characters, no
    braces), as ``_BOXED.findall`` reads them, in one left-to-right pass: each character is
    looked at a bounded number of times, so hostile text (``\\boxed{`` and a long run of
    spaces) costs linear time instead of the regex's cubic backtracking."""
    out: list[str] = []
    key, n, i = "\\boxed{", len(text), 0
    while (j := text.find(key, i)) >= 0:
        k = j + len(key)
        while k < n and text[k].isspace():
            k += 1
        if text.startswith("\\text{", k):
            k += len("\\text{")
            while k < n and text[k].isspace():
                k += 1
        start, stop = k, k
        while k < n and text[k] not in "{}" and k - start < 40:
            k += 1
            if not text[k - 1].isspace():
                stop = k
        while k < n and text[k].isspace():  # trailing spaces before the closing brace(s)
            k += 1
        if k < n and text[k] == "}":
            out.append(text[start:stop].strip())
            k += 1
            m = k
            while m < n and text[m].isspace():
                m += 1
            if m < n and text[m] == "}":
                k = m + 1
            i = k
        else:  # no match here: the next try starts just after this \\boxed{ (a nested one may match)
            i = j + 1
    return out


def parse_boxed(content: str) -> tuple[Label | None, list[str]]:
    """The label of the last ``\\boxed{…}`` in ``content`` and its errors."""
    found = boxed_contents(content)
    if not found:
        return None, ["no \\boxed{Support|Refute} in the final block"]
    raw = found[-1].strip().lower()
    label = BOXED_LABELS.get(raw)
    errors = [] if label is not None else [f"unknown label \\boxed{{{found[-1].strip()[:40]}}} (Support or Refute)"]
    if len(found) > 1:
        errors.append(f"{len(found)} \\boxed labels in the final block (the last one was read)")
    return label, errors


@dataclass
class TurnAction:
    """What one model turn does: ``kind`` is the name of its action block (``question``,
    ``search``, ``report``, ``verification``, ``answer``) or None, ``content`` that
    block's text; ``errors`` are the turn's format errors."""

    kind: str | None
    content: str = ""
    errors: list[str] = field(default_factory=list)


def _clip(s: str, n: int = 60) -> str:
    s = s.strip()
    return s if len(s) <= n else s[: n - 1] + "…"


class TurnParser:
    """One agent's turns, parsed in order (see the module docstring).

    ``actions`` are the agent's action blocks, ``inner`` those it may write inside an
    open ``<think>`` (the ones that hand over to another party and come back: a
    question, a search; not the final action). ``in_think`` says whether the last turn
    left a ``<think>`` open."""

    def __init__(self, actions: Sequence[str], *, inner: Sequence[str] = ()) -> None:
        self.actions = tuple(a.lower() for a in actions)
        self.inner = tuple(a.lower() for a in inner)
        self.in_think = False

    def parse(self, text: str) -> TurnAction:
        """The turn's action (the first one, still read when the turn has errors) and
        its errors; updates :attr:`in_think`."""
        errors: list[str] = []

        def err(msg: str) -> None:
            if len(errors) < _MAX_ERRORS and msg not in errors:
                errors.append(msg)

        acts: list[tuple[str, str]] = []
        block: str | None = None  # the open action or foreign block (its content is not parsed)
        block_is_action = False
        content_start = 0
        prose_ok = False  # just after </think>: a summary may come before the action
        pos = 0
        for n_tags, m in enumerate(_TAG.finditer(text)):
            if n_tags == MAX_TAGS:
                err(f"more than {MAX_TAGS} tags in one turn; the rest was not read")
                pos = len(text)
                break
            closing, name = bool(m.group(1)), m.group(2).lower()
            gap = text[pos : m.start()]
            pos = m.end()
            shown = f"<{'/' if closing else ''}{name}>"
            if block is not None:  # inside an action (or a foreign block): only its closing tag
                if closing and name == block:
                    if block_is_action:
                        acts.append((block, text[content_start : m.start()]))
                    block = None
                else:
                    err("model wrote <result> itself" if name == "result" else f"{shown} nested inside <{block}>")
                continue
            if acts:  # the action ends the turn: nothing may follow it
                if gap.strip():
                    err(f"text outside tags (after the action): {_clip(gap)!r}")
                err(f"{shown} after the action in one turn")
            if self.in_think:
                if name == "think":
                    if closing:
                        self.in_think, prose_ok = False, True
                    else:
                        err("<think> nested inside <think>")
                elif name == "result":
                    err("model wrote <result> itself")
                elif name in self.actions and not closing:
                    if name not in self.inner:
                        err(f"<{name}> inside <think>: close the reasoning with </think> first")
                    block, block_is_action, content_start = name, True, m.end()
                else:
                    allowed = ", ".join(f"<{a}>" for a in self.inner) or "none"
                    err(f"unexpected tag {shown} inside <think> (allowed: {allowed})")
                continue
            if gap.strip() and not prose_ok and not acts:
                err(f"text outside tags: {_clip(gap)!r}")
            if closing:
                err(f"closing tag </{name}> without an opening tag")
                continue
            prose_ok = False
            if name == "think":
                self.in_think = True
            elif name in self.actions:
                block, block_is_action, content_start = name, True, m.end()
            else:
                err("model wrote <result> itself" if name == "result" else
                    f"unexpected tag {shown} (allowed: think, {', '.join(self.actions)})")
                block, block_is_action = name, False
        tail = text[pos:]
        if block is not None:
            err(f"<{block}> is never closed")
        elif tail.strip() and not self.in_think and (acts or not prose_ok):
            err(f"text outside tags{' (after the action)' if acts else ''}: {_clip(tail)!r}")
        if not acts:
            return TurnAction(None, "", errors + [f"no action: none of {', '.join(f'<{a}>' for a in self.actions)}"])
        if len(acts) > 1:
            err(f"{len(acts)} actions in one turn (the first was taken)")
        kind, content = acts[0][0], acts[0][1].strip()
        if not content:
            err(f"empty <{kind}>")
        return TurnAction(kind, content, errors)


def parse_turn(text: str, actions: Sequence[str], *, inner: Sequence[str] = ()) -> TurnAction:
    """One turn on its own (no ``<think>`` left open before it)."""
    return TurnParser(actions, inner=inner).parse(text)


def split_turns(model_text: str, ends: Sequence[str]) -> list[str]:
    """A joined model text cut back into turns, each ending at the first of ``ends``
    (the stop strings); a trailing remainder that is not blank is the last turn."""
    ends = [e for e in ends if e]
    if not ends:
        return [model_text] if model_text.strip() else []
    pattern = re.compile("|".join(re.escape(e) for e in sorted(ends, key=len, reverse=True)))
    turns, start = [], 0
    for m in pattern.finditer(model_text):
        turns.append(model_text[start : m.end()])
        start = m.end()
    if model_text[start:].strip():
        turns.append(model_text[start:])
    return turns


def parse_turns(model_text: str, ends: Sequence[str], actions: Sequence[str], *,
                inner: Sequence[str] = ()) -> tuple[list[TurnAction], list[str]]:
    """Every turn of a joined model text (observations excluded), parsed in order by one
    :class:`TurnParser`; at most :data:`MAX_TURNS` of them, else an error says so."""
    turns = split_turns(model_text, ends)
    parser = TurnParser(actions, inner=inner)
    extra = []
    if len(turns) > MAX_TURNS:
        extra.append(f"{len(turns)} turns (more than {MAX_TURNS}); only the first {MAX_TURNS} were read")
        turns = turns[:MAX_TURNS]
    return [parser.parse(t) for t in turns], extra


def episode_verdict(turn_errors: Sequence[list[str]], final: TurnAction | None, extra: Sequence[str] = ()) -> Verdict:
    """The verdict of an episode from its turns' errors and the final action
    (``verification``/``answer``; None when the episode never gave one)."""
    errors = list(extra) + [e for errs in turn_errors for e in errs]
    if final is None:
        return Verdict(label=None, evidence_ids=[], format_ok=False,
                       format_errors=["no answer: no final verification"] + errors, answered=False)
    label, label_errors = parse_boxed(final.content)
    errors = label_errors + errors
    return Verdict(label=label, evidence_ids=[], format_ok=not errors, format_errors=errors, answered=True)


def budgeted_verdict(acts: Sequence[TurnAction], *, final_kind: str, counted_kind: str, budget: int,
                     extra: Sequence[str] = ()) -> Verdict:
    """The episode's verdict from its parsed turns: the first ``final_kind`` action
    concludes it (text after it is an error), and more ``counted_kind`` actions than
    ``budget`` is an error."""
    at = next((i for i, a in enumerate(acts) if a.kind == final_kind), None)
    errors: list[str] = list(extra)
    n = sum(a.kind == counted_kind for a in acts)
    if n > budget:
        errors.append(f"{counted_kind} over budget: {n} {counted_kind}s (at most {budget})")
    if at is not None and at != len(acts) - 1:
        errors.append(f"text outside tags (after the {final_kind})")
    return episode_verdict([a.errors for a in acts], None if at is None else acts[at], errors)
