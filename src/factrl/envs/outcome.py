"""Typed outcomes: what an environment concludes from a whole model text.

An environment's :class:`~factrl.envs.base.EpisodeResult` carries its verdict and the
fields its rewards and metrics read (``Trajectory.meta``). An environment that can
recover those fields from the model's text alone declares ``parse_outcome(model_text,
claim) -> Outcome`` with its own record (e.g. :class:`factrl.envs.rar.RarOutcome`), and
uses the same record for its episode's result, so a scorer that only has text (verl's
reward shim, :mod:`factrl.train.verl.reward`) sees what evaluation sees. Without it, the
outcome is the verdict alone (``parse_verdict``); a reward that reads more (its
``reads_meta``) then refuses to score text-only, rather than scoring something else.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from factrl.types import Claim, Verdict

__all__ = ["Outcome", "OutcomeError", "missing_fields", "outcome_of"]


class OutcomeError(ValueError):
    """A reward reads outcome fields that an environment cannot recover from text."""


@dataclass(frozen=True)
class Outcome:
    """The verdict, and nothing else an environment records (subclasses add fields)."""

    verdict: Verdict

    def meta(self) -> dict[str, Any]:
        """The fields recorded in ``Trajectory.meta`` (JSON values)."""
        return {}


def outcome_of(env: Any, model_text: str, claim: Claim) -> Outcome:
    """``env.parse_outcome(model_text, claim)`` when the environment declares one, else
    the verdict alone. An environment that runs no LM (``lm_free``) has no text to read:
    :class:`OutcomeError`."""
    if getattr(env, "lm_free", False):  # e.g. retrieve_verify: the verdict is decided at reset
        raise OutcomeError(f"environment {getattr(env, 'name', type(env).__name__)!r} decides without a language "
                           "model: no response text carries its verdict")
    parse = getattr(env, "parse_outcome", None)
    if callable(parse):
        outcome = parse(model_text, claim)
        if not isinstance(outcome, Outcome):
            raise TypeError(f"{type(env).__name__}.parse_outcome returned {type(outcome).__name__}, not an Outcome")
        return outcome
    return Outcome(verdict=env.parse_verdict(model_text))


def missing_fields(reward: Any, meta: Mapping[str, Any]) -> list[str]:
    """The outcome fields ``reward`` reads (its ``reads_meta``) that ``meta`` lacks."""
    return [k for k in getattr(reward, "reads_meta", ()) if k not in meta]
