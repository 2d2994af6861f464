"""A verdict for every claim: the forced answer of an episode that ended without one.

A small model sometimes stops without a readable answer: it runs out of tokens or
turns, mixes the tags, or writes an answer block with no label in it. A practitioner
still wants a verdict, marked as such. Forcing is a hook an environment declares
(``answer_forcing``, a :class:`~factrl.protocol.forcing.AnswerForcing`: Veri-R1 declares
its ``<answer>\nLabel:`` opening); an environment that declares none is never forced.
:func:`force_answers` appends the opening to the episode's own context (prompt, model
turns and observations, token for token), takes the label the model finds most probable
(summed log-probability of each label's tokens, through :mod:`factrl.lm.label_scores`;
an episode where no label gets a finite score is not forced), then lets the model write the evidence
line greedily, which the hook cleans up (cited ids the episode never showed are dropped).

A forced verdict says ``forced=True`` and keeps ``format_ok=False`` with the episode's
format errors, so it never passes for a protocol-following answer; ``verify`` and the
demo print it as forced, and evaluation runs leave it off unless asked (a run records
whether it was on). Needs a token-level backend (``score`` and ``generate``); other
backends get no forced verdict.
"""

from __future__ import annotations

from collections.abc import Sequence

from factrl.labels import Label
from factrl.lm.base import GenerationConfig
from factrl.lm.label_scores import label_continuations, label_logprobs, pick_labels
from factrl.protocol.forcing import FORCED_ERROR, VERI_R1_FORCING, AnswerForcing
from factrl.types import Trajectory, Verdict

__all__ = ["ANSWER_OPENING", "FORCED_ERROR", "FORCED_NOTE", "answer_forcing", "can_force", "force_answers",
           "with_forced"]

# Veri-R1's opening and labels, for code that scores labels after it (probes, drills).
ANSWER_OPENING = VERI_R1_FORCING.opening
FORCED_NOTE = "(forced: no labelled <answer> in the episode; read from the model's label probabilities)"
LABELS: tuple[Label, ...] = VERI_R1_FORCING.labels


def answer_forcing(env: object) -> AnswerForcing | None:
    """The forcing ``env`` declares (its ``answer_forcing``), None when it declares none."""
    forcing = getattr(env, "answer_forcing", None)
    if forcing is not None and not isinstance(forcing, AnswerForcing):
        raise TypeError(f"{getattr(env, 'name', env)!r}.answer_forcing must be an AnswerForcing, got "
                        f"{type(forcing).__name__}")
    return forcing


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


def force_answers(trajectories: Sequence[Trajectory], lm: object,
                  forcing: AnswerForcing | None) -> list[Verdict | None]:
    """One verdict per trajectory: a forced one for an episode that ended without a label
    (and did not fail), ``None`` for the others (they keep their own verdict), and for
    every episode when ``forcing`` is None (the environment declares none) or ``lm`` is
    not a token-level backend."""
    out: list[Verdict | None] = [None] * len(trajectories)
    if forcing is None or not can_force(lm):
        return out
    todo = []
    for i, t in enumerate(trajectories):
        if t.error is None and t.verdict.label is None:
            ctx = _context_ids(t)
            if ctx is not None:
                todo.append((i, ctx + lm.encode(forcing.opening)))  # type: ignore[attr-defined]
    if not todo:
        return out
    labels = forcing.labels
    prefix, suffix = forcing.choice_affixes()
    choices = label_continuations(lm, [label.value for label in labels], prefix=prefix, suffix=suffix)
    rows = label_logprobs(lm, [ctx for _, ctx in todo], choices)
    kept, picked = [], []
    for (i, ctx), best in zip(todo, pick_labels(rows)):
        if best is None:  # no label has a finite score: the model read nothing, no verdict
            continue
        kept.append((i, ctx))
        picked.append((labels[best], ctx + choices[best] + lm.encode(forcing.then)))  # type: ignore[attr-defined]
    if not picked:
        return out
    gens = lm.generate([ctx for _, ctx in picked],  # type: ignore[attr-defined]
                       GenerationConfig(max_new_tokens=forcing.evidence_tokens, temperature=0.0, stop=forcing.stop))
    for (i, _), (label, _), gen in zip(kept, picked, gens):
        t = trajectories[i]
        out[i] = forcing.verdict(label, gen.text, shown=t.retrieved_ids, format_errors=list(t.verdict.format_errors))
    return out


def with_forced(trajectories: Sequence[Trajectory], lm: object, forcing: AnswerForcing | None) -> list[Trajectory]:
    """The trajectories, each episode without a label carrying its forced verdict (none
    when ``forcing``, the environment's :func:`answer_forcing`, is None)."""
    return [t if v is None else t.model_copy(update={"verdict": v})
            for t, v in zip(trajectories, force_answers(trajectories, lm, forcing))]
