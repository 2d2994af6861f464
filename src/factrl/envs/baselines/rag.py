"""``rag``: single-shot retrieval-augmented verification. The claim is the query; its
top-k retrieved units go into one prompt as ``[[sentence_id]]: text`` lines (Veri-R1's
:func:`~factrl.envs.veri_r1.render_information`); the model answers once:

    Label: SUPPORT | REFUTE | NOT ENOUGH INFO
    Evidence: [[id]], [[id]], ...         ("none" when nothing is relevant)
    Reason: one short sentence            (optional)

Scored by ``veri_r1`` (label, evidence IoU, format). ``decompose`` runs this same turn
once per sub-claim.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from factrl.envs.base import ENVS, EpisodeResult, StepResult
from factrl.envs.baselines.answer import answer_verdict
from factrl.envs.baselines.prompts import rag as prompts
from factrl.envs.guards import EpisodeGuard, SearchLog
from factrl.envs.spec import EnvDeps
from factrl.envs.veri_r1 import render_information
from factrl.retrieval.base import Retriever
from factrl.types import Claim, Hit, Message, Verdict

__all__ = ["RagConfig", "RagEnv", "Retrieval", "parse_rag", "rag_messages"]


@dataclass(frozen=True)
class RagConfig:
    top_k: int = 5  # retrieved units per query
    max_information_chars: int = 5000  # the rendered units, cut at a whole line
    max_query_chars: int = 500

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {self.top_k}")


@dataclass
class Retrieval:
    """One query's rendered units: the ``[[id]]: text`` block and the ids it shows."""

    query: str
    information: str
    shown: list[str]
    seconds: float


def retrieve(retriever: Retriever, query: str, config: RagConfig) -> Retrieval:
    """Search ``query`` (clipped to ``max_query_chars``) and render its top-k units."""
    q = query.strip()[: config.max_query_chars]
    t0 = time.perf_counter()
    hits: list[Hit] = retriever.search([q], config.top_k)[0] if q else []
    info, shown = render_information(hits, config.max_information_chars)
    return Retrieval(query=q, information=info, shown=shown, seconds=time.perf_counter() - t0)


def rag_messages(text: str, retrieval: Retrieval, *, what: str = "claim") -> list[Message]:
    """The answer turn's prompt for a claim (or, ``what="sub-claim"``, a sub-claim)."""
    content = prompts.TEMPLATE.format(
        what=what, What=what.capitalize(), claim=text.strip(),
        information=retrieval.information or prompts.NOTHING_FOUND,
    )
    return [Message(role="user", content=content)]


def parse_rag(model_text: str) -> Verdict:
    """The verdict of one answer turn (``Label:`` and ``Evidence:`` required)."""
    return answer_verdict(model_text, evidence=True)


class RagEnv(EpisodeGuard):
    """One turn; the retrieval happens in :meth:`reset`. No stop strings (the turn's
    token budget bounds it)."""

    name = "rag"
    stop: tuple[str, ...] = ()
    max_turns = 1
    default_reward = "veri_r1"

    def __init__(self, retriever: Retriever | None, config: RagConfig | None = None) -> None:
        if retriever is None:
            raise ValueError("the rag agent needs a retriever")
        self.retriever, self.config = retriever, config or RagConfig()

    def reset(self, claim: Claim) -> list[Message]:
        text = self._begin(claim)
        retrieval = retrieve(self.retriever, text, self.config)
        self._log = SearchLog()
        self._log.record(retrieval.query or None, retrieval.shown, retrieval.seconds)
        self._text = ""
        return rag_messages(text, retrieval)

    def _step(self, model_text: str) -> StepResult:
        self._text = model_text
        return StepResult(observation=None, done=True)

    def _episode_result(self) -> EpisodeResult:
        return self._log.episode_result(self.parse_verdict(self._text))

    def parse_verdict(self, model_text: str) -> Verdict:
        return parse_rag(model_text)


@ENVS.register("rag")
def make_rag(deps: EnvDeps | None = None, **params: object) -> RagEnv:
    """``params`` are :class:`RagConfig` fields (``top_k``, ...); searches ``deps.retriever``."""
    deps = deps or EnvDeps()
    return RagEnv(deps.retriever, RagConfig(**params))  # type: ignore[arg-type]
