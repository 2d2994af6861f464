"""A verdict for every claim: the forced answer of an episode that ended without one.

A small model sometimes stops without a readable ``<answer>``: it runs out of tokens or
turns, mixes the tags, or writes an answer block with no label in it. A practitioner still wants a verdict, marked as such.
:func:`force_answers` appends ``<answer>`` and ``Label:`` to the episode's own context
(prompt, model turns and observations, token for token), takes the label the model finds
most probable (summed log-probability of each label's tokens), then lets the model write
the evidence line greedily. Cited ids the episode never showed are dropped.

A forced verdict says ``forced=True`` and keeps ``format_ok=False`` with the episode's
format errors, so it never passes for a protocol-following answer; ``verify`` and the
demo print it as forced, and evaluation runs leave it off unless asked (a run records
whether it was on). Needs a token-level backend (``score`` and ``generate``); other
backends get no forced verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from factrl.protocol.tags import parse_answer
from factrl.labels import Label
from factrl.lm.base import GenerationConfig
from factrl.types import Trajectory, Verdict

__all__ = ["ANSWER_OPENING", "FORCED_ERROR", "FORCED_NOTE", "can_force", "force_answers", "with_forced"]

ANSWER_OPENING = "\n<answer>\nLabel:"
FORCED_ERROR = "forced: the episode ended without a labelled <answer>; the label was read from the model's label probabilities"
FORCED_NOTE = "(forced: no labelled <answer> in the episode; read from the model's label probabilities)"
LABELS = (Label.SUPPORT, Label.REFUTE, Label.NEI)


def can_force(lm: object) -> bool:
    """Whether ``lm`` offers the token-level calls a forced answer needs."""
    return all(callable(getattr(lm, name, None)) for name in ("score", "generate", "encode", "decode"))


def _context_ids(traj: Trajectory) -> list[int] | None:
    """The episode's token stream, or None where a turn kept no tokens (a text-level backend)."""
    if not traj.prompt_ids:
        return None
    ids = list(traj.prompt_ids)
    for turn in traj.turns:
        if turn.text and not turn.token_ids:
            return None
        ids += list(turn.token_ids)
    return ids


def force_answers(trajectories: Sequence[Trajectory], lm: object, *, evidence_tokens: int = 64) -> list[Verdict | None]:
    """One verdict per trajectory: a forced one for an episode that ended without a label
    (and did not fail), ``None`` for the others (they keep their own verdict) and for every
    episode when ``lm`` is not a token-level backend."""
    out: list[Verdict | None] = [None] * len(trajectories)
    if not can_force(lm):
        return out
    todo = []
    for i, t in enumerate(trajectories):
        if t.error is None and t.verdict.label is None:
            ctx = _context_ids(t)
            if ctx is not None:
                todo.append((i, ctx + lm.encode(ANSWER_OPENING)))  # type: ignore[attr-defined]
    if not todo:
        return out
    eos = getattr(lm, "eos_token_id", None)
    choices = [[x for x in lm.encode(f" {label.value}\n") if x != eos] for label in LABELS]  # type: ignore[attr-defined]
    scores = lm.score([ctx for _, ctx in todo for _ in LABELS],  # type: ignore[attr-defined]
                      [c for _ in todo for c in choices])
    picked = []
    for n, (_, ctx) in enumerate(todo):
        row = scores[n * len(LABELS):(n + 1) * len(LABELS)]
        best = max(range(len(LABELS)), key=lambda k: row[k])
        picked.append((LABELS[best], ctx + choices[best] + lm.encode("Evidence:")))  # type: ignore[attr-defined]
    gens = lm.generate([ctx for _, ctx in picked],  # type: ignore[attr-defined]
                       GenerationConfig(max_new_tokens=evidence_tokens, temperature=0.0, stop=("</answer>", "\n\n")))
    for (i, _), (label, _), gen in zip(todo, picked, gens):
        t = trajectories[i]
        cited = parse_answer(f"Label: {label.value}\nEvidence:{gen.text}").evidence_ids
        shown = set(t.retrieved_ids)
        evidence = [] if label is Label.NEI else [e for e in cited if e in shown]
        out[i] = Verdict(label=label, evidence_ids=evidence, format_ok=False,
                         format_errors=[*t.verdict.format_errors, FORCED_ERROR], answered=True, forced=True)
    return out


def with_forced(trajectories: Sequence[Trajectory], lm: object) -> list[Trajectory]:
    """The trajectories, each episode without a label carrying its forced verdict."""
    return [t if v is None else t.model_copy(update={"verdict": v})
            for t, v in zip(trajectories, force_answers(trajectories, lm))]
