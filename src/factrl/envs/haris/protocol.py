"""Strict parsing of the HARIS tag protocols. Every function accepts any text a model can
produce: problems come back as format errors, never as exceptions.

- Reasoner turns: ``<think>`` blocks, then ``<question>…</question>`` (the turn stops
  there) or ``<verification>… \\boxed{Support|Refute} …</verification>`` (the end).
- Search agent turns: ``<think>`` blocks, then ``<search>…</search>`` or
  ``<report>…</report>`` (the end).
- Single agent turns: ``<think>``, then ``<search>…</search>`` or ``<answer>…\\boxed{…}…</answer>``.

The label set is the paper's two-way one (Support / Refute). :func:`binary_gold` maps a
dataset's gold label onto it explicitly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from factrl.envs.tags import TagBlock, scan_blocks
from factrl.labels import Label
from factrl.types import Verdict

__all__ = ["TurnAction", "parse_turn", "parse_boxed", "binary_gold", "episode_verdict", "BOXED_LABELS"]

# "\boxed{Support}", "\boxed{ \text{Refute} }", "$\boxed{\text{Support}}$".
_BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{\s*)?([^{}]{0,40}?)\s*\}?\s*\}")
BOXED_LABELS: dict[str, Label] = {
    "support": Label.SUPPORT, "supports": Label.SUPPORT, "supported": Label.SUPPORT,
    "refute": Label.REFUTE, "refutes": Label.REFUTE, "refuted": Label.REFUTE,
}


def binary_gold(label: Label | None) -> Label | None:
    """The paper's two-way gold label: SUPPORT stays; REFUTE and NOT ENOUGH INFO are
    "not supported" → REFUTE (HoVer's NOT_SUPPORTED merges both); CONFLICTING has no
    binary reading (None: unscoreable, the reward says so)."""
    if label is Label.SUPPORT:
        return Label.SUPPORT
    if label in (Label.REFUTE, Label.NEI):
        return Label.REFUTE
    return None


def parse_boxed(content: str) -> tuple[Label | None, list[str]]:
    """The label of the last ``\\boxed{…}`` in ``content`` and its errors."""
    found = _BOXED.findall(content)
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


def parse_turn(text: str, actions: Sequence[str]) -> TurnAction:
    """One turn: any ``<think>`` blocks, then exactly one of ``actions`` as its last block.
    Text outside blocks, unknown or self-written ``<result>`` tags, a second action, or
    an action before a ``<think>`` ends are format errors; the action is still read
    (the first one) so the episode can go on."""
    blocks, errors = scan_blocks(text)
    errors = list(errors)
    acts: list[TagBlock] = []
    for b in blocks:
        if b.name == "think":
            if acts:
                errors.append("<think> after the action in one turn")
        elif b.name in actions:
            acts.append(b)
        elif b.name == "result":
            errors.append("model wrote <result> itself")
        else:
            errors.append(f"unexpected tag <{b.name}> (allowed: think, {', '.join(actions)})")
    if not acts:
        return TurnAction(None, "", errors + [f"no action: none of {', '.join(f'<{a}>' for a in actions)}"])
    if len(acts) > 1:
        errors.append(f"{len(acts)} actions in one turn (the first was taken)")
    act = acts[0]
    content = act.content.strip()
    if not content:
        errors.append(f"empty <{act.name}>")
    return TurnAction(act.name, content, errors)


def episode_verdict(turn_errors: Sequence[list[str]], final: TurnAction | None, extra: Sequence[str] = ()) -> Verdict:
    """The verdict of an episode from its turns' errors and the final action
    (``verification``/``answer``; None when the episode never gave one)."""
    errors = [e for errs in turn_errors for e in errs] + list(extra)
    if final is None:
        return Verdict(label=None, evidence_ids=[], format_ok=False,
                       format_errors=["no answer: no final verification"] + errors, answered=False)
    label, label_errors = parse_boxed(final.content)
    errors = label_errors + errors
    return Verdict(label=label, evidence_ids=[], format_ok=not errors, format_errors=errors, answered=True)


def split_turns(model_text: str, ends: Sequence[str]) -> list[str]:
    """A joined model text cut back into turns, each ending at the first of ``ends``
    (the stop strings); a trailing remainder that is not blank is the last turn."""
    turns, rest = [], model_text
    while (cut := min((i + len(t) for t in ends if (i := rest.find(t)) != -1), default=-1)) != -1:
        turns.append(rest[:cut])
        rest = rest[cut:]
    if rest.strip():
        turns.append(rest)
    return turns


def budgeted_verdict(acts: Sequence[TurnAction], *, final_kind: str, counted_kind: str, budget: int) -> Verdict:
    """The episode's verdict from its parsed turns: the first ``final_kind`` action
    concludes it (text after it is an error), and more ``counted_kind`` actions than
    ``budget`` is an error."""
    final = next((a for a in acts if a.kind == final_kind), None)
    errors: list[str] = []
    n = sum(a.kind == counted_kind for a in acts)
    if n > budget:
        errors.append(f"{counted_kind} over budget: {n} {counted_kind}s (at most {budget})")
    if final is not None and list(acts).index(final) != len(acts) - 1:
        errors.append(f"text outside tags (after the {final_kind})")
    return episode_verdict([a.errors for a in acts], final, errors)
