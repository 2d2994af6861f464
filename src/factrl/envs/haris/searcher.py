"""The HARIS search agent (§3.3.2): ``<search>`` → ``<result>`` (top-k) loops, ending
with ``<report>…</report>``.

:class:`SearchSession` is the protocol of one question, shared by the standalone
``haris_searcher`` environment (the searcher's own GRPO stage: the question is the
episode's "claim", its pseudo-gold answer in ``claim.meta``) and by the reasoner, which
runs one session per ``<question>`` as a sub-agent context (:mod:`.reasoner`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from factrl.envs.base import ENVS, Env, EpisodeResult, StepResult
from factrl.envs.guards import EpisodeGuard, SearchLog
from factrl.envs.haris import prompts
from factrl.envs.outcome import Outcome
from factrl.envs.spec import EnvDeps
from factrl.envs.veri_r1 import render_information
from factrl.protocol.haris import TurnAction, TurnParser, parse_turns
from factrl.retrieval.base import Retriever
from factrl.types import Claim, Message, Verdict

__all__ = ["ReportOutcome", "SearcherConfig", "SearchSession", "HarisSearcherEnv", "searcher_messages", "SEARCHER_STOP"]

SEARCHER_STOP = ("</search>", "</report>")
_ACTIONS = ("search", "report")
_INNER = ("search",)  # searches inside an open <think>, as the paper's rollouts


@dataclass(frozen=True)
class SearcherConfig:
    max_searches: int = 3  # per question (the paper states no number; Search-o1 baseline: 10)
    top_k: int = 3  # HARIS: top-3 passages per search
    max_information_chars: int = 3000
    max_query_chars: int = 500
    max_report_chars: int = 3000  # the report as the reasoner sees it, clipped

    def __post_init__(self) -> None:
        if self.max_searches < 0 or self.top_k < 1:
            raise ValueError(f"max_searches must be >= 0 and top_k >= 1, got {self.max_searches}, {self.top_k}")

    @property
    def max_turns(self) -> int:
        """Model turns of one session: each search, the report, and one more turn after
        a search past the budget (answered by "no searches left")."""
        return self.max_searches + 2


def searcher_messages(question: str, config: SearcherConfig) -> list[Message]:
    content = prompts.SEARCHER.format(question=question.strip(), max_searches=config.max_searches, top_k=config.top_k)
    return [Message(role="user", content=content)]


def result_block(text: str) -> str:
    return f"\n<result>\n{text}\n</result>\n"


@dataclass
class SearchSession:
    """One question's search-agent episode: feed it the agent's turns with :meth:`step`;
    ``done`` once it reported (or failed to); ``report`` is None when it never did."""

    question: str
    retriever: Retriever
    config: SearcherConfig
    turns: list[TurnAction] = field(default_factory=list)
    log: SearchLog = field(default_factory=SearchLog)
    report: str | None = None
    done: bool = False
    budget_errors: list[str] = field(default_factory=list)
    parser: TurnParser = field(default_factory=lambda: TurnParser(_ACTIONS, inner=_INNER), repr=False)

    def step(self, text: str) -> str | None:
        """The observation for the agent's next turn, or None when the session is over."""
        if self.done:
            raise RuntimeError("step() after the search agent reported")
        act = self.parser.parse(text)
        self.turns.append(act)
        if act.kind == "report":
            self.report, self.done = act.content, True
            return None
        if act.kind is None:
            self.done = True  # no action (EOS or a cut turn): no report
            return None
        if len(self.log.queries) >= self.config.max_searches:
            if self.budget_errors:  # told once already: the session ends without a report
                self.done = True
                return None
            self.budget_errors.append(f"search over budget: more than {self.config.max_searches} searches")
            return result_block(prompts.SEARCH_BUDGET_SPENT)
        query = act.content[: self.config.max_query_chars]
        t0 = time.perf_counter()
        hits = self.retriever.search([query], self.config.top_k)[0] if query else []
        info, ids = render_information(hits, self.config.max_information_chars)
        self.log.record(query, ids, time.perf_counter() - t0)
        return result_block(info or prompts.NOTHING_FOUND)

    @property
    def format_errors(self) -> list[str]:
        errors = [e for t in self.turns for e in t.errors] + list(self.budget_errors)
        if self.report is None:
            errors.insert(0, "no answer: no <report>")
        return errors

    @property
    def format_ok(self) -> bool:
        return self.report is not None and not self.format_errors

    def shown_report(self) -> str:
        if self.report is None:
            return prompts.NO_REPORT
        return self.report[: self.config.max_report_chars]


@dataclass(frozen=True)
class ReportOutcome(Outcome):
    """A search agent's episode: its report (None when it never wrote one) and the
    question it searched for."""

    report: str | None = None
    question: str = ""

    def meta(self) -> dict[str, Any]:
        return {"report": self.report, "question": self.question}


class HarisSearcherEnv(EpisodeGuard):
    """The search agent alone on one question (its GRPO stage; scored by ``haris_low``).

    The claim's text is the question; ``claim.meta["pseudo_answer"]`` the pseudo-gold
    answer the judge compares the report with."""

    name = "haris_searcher"
    stop = SEARCHER_STOP
    default_reward = "haris_low"

    def __init__(self, retriever: Retriever | None, config: SearcherConfig | None = None) -> None:
        if retriever is None:
            raise ValueError("the haris_searcher agent needs a retriever")
        self.retriever, self.config = retriever, config or SearcherConfig()
        self.max_turns = self.config.max_turns
        self._session: SearchSession | None = None

    def reset(self, claim: Claim) -> list[Message]:
        text = self._begin(claim, "question")
        self._session = SearchSession(text.strip(), self.retriever, self.config)
        return searcher_messages(text, self.config)

    def _step(self, model_text: str) -> StepResult:
        assert self._session is not None
        obs = self._session.step(model_text)
        return StepResult(observation=obs, done=obs is None)

    def _episode_result(self) -> EpisodeResult:
        s = self._session
        assert s is not None
        verdict = Verdict(label=None, evidence_ids=[], format_ok=s.format_ok, format_errors=s.format_errors,
                          answered=s.report is not None)
        outcome = ReportOutcome(verdict=verdict, report=s.report, question=s.question)
        return s.log.episode_result(verdict, meta=outcome.meta())

    def parse_outcome(self, model_text: str, claim: Claim) -> ReportOutcome:
        """The verdict and the report the text's turns end in (what the judge reads)."""
        acts, _ = parse_turns(model_text, SEARCHER_STOP, _ACTIONS, inner=_INNER)
        report = next((a.content for a in acts if a.kind == "report"), None)
        return ReportOutcome(verdict=self.parse_verdict(model_text), report=report, question=claim.text.strip())

    def parse_verdict(self, model_text: str) -> Verdict:
        """Whether the text's turns end in a report (searches cannot be replayed from text,
        so their budget is not checked here)."""
        acts, extra = parse_turns(model_text, SEARCHER_STOP, _ACTIONS, inner=_INNER)
        at = next((i for i, a in enumerate(acts) if a.kind == "report"), None)
        errors = extra + [e for a in acts for e in a.errors]
        if at is not None and at != len(acts) - 1:
            errors.append("text outside tags (after the report)")
        if at is None:
            errors.insert(0, "no answer: no <report>")
        return Verdict(label=None, format_ok=not errors, format_errors=errors, answered=at is not None)


# Whose reading of HARIS an environment follows: the paper's or the authors' released code.
CONVENTIONS = ("paper", "released")


def check_convention(convention: object) -> str:
    if convention not in CONVENTIONS:
        raise ValueError(f"convention must be one of {', '.join(CONVENTIONS)}, got {convention!r}")
    return str(convention)


@ENVS.register("haris_searcher")
def make_haris_searcher(deps: EnvDeps | None = None, *, convention: str = "paper", **params: object) -> Env:
    """``convention="paper"`` (default): ``params`` are :class:`SearcherConfig` fields
    (``max_searches``, ``top_k``, ...); ``"released"``: ``host_low.py``'s search agent,
    ``params`` are :class:`~factrl.envs.haris.released.ReleasedConfig` fields."""
    deps = deps or EnvDeps()
    if check_convention(convention) == "released":
        from factrl.envs.haris.released import ReleasedConfig, ReleasedSearcherEnv

        return ReleasedSearcherEnv(deps.retriever, ReleasedConfig(**params))  # type: ignore[arg-type]
    return HarisSearcherEnv(deps.retriever, SearcherConfig(**params))  # type: ignore[arg-type]
