"""Binary RAR's reward with an exact verifier: the factworld fact table instead of an LM.

r(x, y) = 1 when no sentence of the response is contradicted by the world
(:meth:`factrl.datasets.factworld.FactWorld.check` on each sentence), else 0 — the
binary RAR rule (001, §3.3: a contradiction scores 0; omissions and statements the
evidence does not settle do not). Sentences the verifier cannot read, or about facts the
world leaves unstated, are "unknown" and never cost reward.

Parameters: ``world`` (a directory ``factrl data factworld`` wrote, or its
``world.json``; required), and ``k``/``chunk_tokens`` for the evidence the run's
hallucination metrics judge against (the prompt's documents, as in ``rar``).

Diagnostics per episode: ``checked_sentences`` (sentences read as a world fact),
``supported_sentences``, ``supported_facts`` (supported sentences other than the
entity's type: "X is a person." is true and says nothing asked for),
``contradicted_sentences``, ``empty_response``, ``episode_error``. An empty response or a failed episode scores 0 with no check.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from factrl.rewards.base import REWARDS, RewardDeps
from factrl.types import Passage, RewardBreakdown, Trajectory

__all__ = ["FactWorldRarReward"]


@dataclass(frozen=True)
class FactWorldRarReward:
    world: str | None = None
    k: int = 8
    chunk_tokens: int = 512
    name: str = "rar_factworld"
    checker: Any = field(default=None, repr=False, compare=False)  # a FactWorld, loaded by configure
    evidence_source: Any = field(default=None, repr=False, compare=False)  # a RarReward for its evidence()
    components: ClassVar[tuple[str, ...]] = ("no_contradiction",)
    diagnostics: ClassVar[tuple[str, ...]] = ("checked_sentences", "supported_sentences", "supported_facts",
                                              "contradicted_sentences", "empty_response", "episode_error")
    lm_roles: ClassVar[tuple[str, ...]] = ()  # exact: no LM to load

    def _checker(self) -> Any:
        if self.checker is None:
            raise RuntimeError(f"reward {self.name!r} needs the world: pass world=DIR (training: reward.params.world; "
                               "eval: --reward-param world=DIR)")
        return self.checker

    def score_response(self, response: str) -> dict[str, float]:
        """The reward's parts for one response (no reasoning trace)."""
        judged = self._checker().check_text(response)
        read = [j for j in judged if j.entity is not None]
        supported = sum(j.verdict == "supported" for j in judged)
        facts = sum(j.verdict == "supported" and j.attribute != "type" for j in judged)
        contradicted = sum(j.verdict == "contradicted" for j in judged)
        value = 0.0 if contradicted else 1.0
        return {"no_contradiction": value, "checked_sentences": float(len(read)),
                "supported_sentences": float(supported), "supported_facts": float(facts),
                "contradicted_sentences": float(contradicted),
                "empty_response": 0.0, "episode_error": 0.0, "total": value}

    def __call__(self, traj: Trajectory) -> RewardBreakdown:
        from factrl.rewards.rar_verifier import strip_think

        zero = {"no_contradiction": 0.0, "checked_sentences": 0.0, "supported_sentences": 0.0, "supported_facts": 0.0,
                "contradicted_sentences": 0.0, "empty_response": 0.0, "episode_error": 0.0, "total": 0.0}
        if traj.error is not None:
            return RewardBreakdown(components={**zero, "episode_error": 1.0}, total=0.0)
        response = strip_think(traj.model_text)
        if not response:
            self._checker()  # a missing world is an error even before the first real response
            return RewardBreakdown(components={**zero, "empty_response": 1.0}, total=0.0)
        parts = self.score_response(response)
        return RewardBreakdown(components=parts, total=parts["total"])

    def score(self, trajectories: Sequence[Trajectory]) -> list[RewardBreakdown]:
        return [self(t) for t in trajectories]

    def evidence(self, traj: Trajectory, query: str, k: int | None = None) -> list[Passage]:
        """The prompt's documents for ``query``, as the ``rar`` reward retrieves them
        (what the run's LM-judged hallucination metrics read)."""
        return self.evidence_source.evidence(traj, query, k)

    def with_evidence(self, *, k: int, chunk_tokens: int) -> FactWorldRarReward:
        """This reward with evidence of the top ``k`` chunks of ``chunk_tokens`` words (the
        hallucination evaluation's own setting, :meth:`RarReward.with_evidence`)."""
        return replace(self, evidence_source=self.evidence_source.with_evidence(k=k, chunk_tokens=chunk_tokens))

    def configure(self, params: Mapping[str, Any], deps: RewardDeps | None = None) -> FactWorldRarReward:
        """``world`` (required), ``k``, ``chunk_tokens``; ``deps.retriever`` is the
        evidence fallback for prompts without documents."""
        from factrl.datasets.factworld import FactWorld
        from factrl.rewards.rar import RarReward

        unknown = set(params) - {"world", "k", "chunk_tokens"}
        if unknown:
            raise TypeError(f"unknown parameter(s) {sorted(unknown)}")
        new = replace(self, **dict(params))
        world = new.world
        checker = self.checker if world == self.world else None
        if world is not None and checker is None:
            try:
                checker = FactWorld.load(str(world))
            except (FileNotFoundError, ValueError) as exc:
                raise ValueError(f"reward {self.name!r}: {exc}") from None
        retriever = deps.retriever if deps is not None else None
        source = RarReward(k=new.k, chunk_tokens=new.chunk_tokens, retriever=retriever)
        return replace(new, checker=checker, evidence_source=source)


REWARDS.register("rar_factworld")(FactWorldRarReward().configure({}))
