"""What every environment repeats, written once: the episode's order of calls and the
searches it ran.

:class:`EpisodeGuard` is a base for an environment's class. Its ``reset`` calls
:meth:`~EpisodeGuard._begin` (the claim must have text); the guard's ``step`` refuses a
call before ``reset`` or after a step that ended the episode, then runs the
environment's ``_step``; its ``result`` refuses a call before ``reset``, then runs
``_episode_result``. Every environment so raises the same :class:`EpisodeStateError`
(``"<name>: step() before reset()"``, ``"<name>: step() after the episode ended"``,
``"<name>: result() before reset()"``).

:class:`SearchLog` keeps an episode's queries, the ids it showed and the seconds its
searches took, merges the logs of sub-episodes, and builds the
:class:`~factrl.envs.base.EpisodeResult` fields from them (the ids once each, in the
order first shown).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from factrl.envs.base import EpisodeResult, StepResult
from factrl.types import Claim, Verdict

__all__ = ["EpisodeGuard", "EpisodeStateError", "SearchLog", "claim_text"]


class EpisodeStateError(RuntimeError):
    """An environment called out of order: ``step()`` or ``result()`` before ``reset()``,
    or ``step()`` after the episode ended."""


def claim_text(claim: Claim, what: str = "claim") -> str:
    """``claim.text`` as given; a ValueError when it is empty or blank."""
    if not claim.text or not claim.text.strip():
        raise ValueError(f"{what} {claim.id!r} has empty text")
    return claim.text


class EpisodeGuard:
    """The reset guards of an environment (see the module docstring). A subclass
    implements ``reset`` (calling :meth:`_begin` first), ``_step`` and
    ``_episode_result``; the guard's ``step`` and ``result`` call them in order only."""

    name: str
    _claim: Claim | None = None  # the episode's claim, from _begin
    _ended: bool = False  # a step answered done=True

    def _begin(self, claim: Claim, what: str = "claim") -> str:
        """Start an episode on ``claim``: its text (checked non-empty) is returned."""
        text = claim_text(claim, what)
        self._claim, self._ended = claim, False
        return text

    def step(self, model_text: str) -> StepResult:
        if self._claim is None:
            raise EpisodeStateError(f"{self.name}: step() before reset()")
        if self._ended:
            raise EpisodeStateError(f"{self.name}: step() after the episode ended")
        out = self._step(model_text)
        if out.done:
            self._ended = True
        return out

    def result(self) -> EpisodeResult:
        if self._claim is None:
            raise EpisodeStateError(f"{self.name}: result() before reset()")
        return self._episode_result()

    def _step(self, model_text: str) -> StepResult:
        raise NotImplementedError(f"{type(self).__name__} must implement _step")

    def _episode_result(self) -> EpisodeResult:
        raise NotImplementedError(f"{type(self).__name__} must implement _episode_result")


@dataclass
class SearchLog:
    """An episode's searches: each query as the agent asked it (a refused or empty one
    too, where the environment counts it), the ids shown, and the seconds spent."""

    queries: list[str] = field(default_factory=list)
    shown: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def record(self, query: str | None, shown: Iterable[str] = (), seconds: float = 0.0) -> None:
        """One search: its query (None: none to list, e.g. a claim searched as it is),
        the ids it showed and its seconds."""
        if query is not None:
            self.queries.append(query)
        self.shown.extend(shown)
        self.seconds += seconds

    @classmethod
    def merged(cls, logs: Iterable[SearchLog]) -> SearchLog:
        """One log of several (sub-episodes' searches, in order)."""
        out = cls()
        for log in logs:
            out.record(None, log.shown, log.seconds)
            out.queries.extend(log.queries)
        return out

    @property
    def retrieved_ids(self) -> list[str]:
        """The ids shown, each once, in the order first shown."""
        return list(dict.fromkeys(self.shown))

    def episode_result(self, verdict: Verdict, *, meta: dict[str, Any] | None = None,
                       timings: dict[str, float] | None = None) -> EpisodeResult:
        """The episode's result with these searches (``timings`` adds to ``search_s``)."""
        return EpisodeResult(verdict=verdict, searches=list(self.queries), retrieved_ids=self.retrieved_ids,
                             timings={"search_s": self.seconds, **(timings or {})}, meta=dict(meta or {}))
