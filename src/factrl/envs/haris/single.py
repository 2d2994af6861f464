"""``haris_single``: the paper's single-agent comparison (HARIS Table 12, "single agent"):
one model thinks, searches (``<search>`` → top-k ``<result>``, the search agent's tool)
and answers ``<answer>… \\boxed{Support|Refute} …</answer>``. Scored by ``haris_high``
(1 / 0.1 / 0), as the reasoner."""

from __future__ import annotations

from dataclasses import dataclass

from factrl.envs.base import ENVS, EpisodeResult, StepResult
from factrl.envs.guards import EpisodeGuard
from factrl.envs.haris import prompts
from factrl.protocol.haris import TurnAction, TurnParser, budgeted_verdict, parse_turns
from factrl.envs.haris.searcher import SearcherConfig, SearchSession, result_block
from factrl.envs.spec import EnvDeps
from factrl.retrieval.base import Retriever
from factrl.types import Claim, Message, Verdict

__all__ = ["SingleConfig", "HarisSingleEnv", "parse_single_text"]

_ACTIONS = ("search", "answer")
_INNER = ("search",)  # searches inside an open <think>, as the paper's Figure 8
_STOP = ("</search>", "</answer>")


@dataclass(frozen=True)
class SingleConfig:
    max_searches: int = 5  # one agent does all the searching the reasoner delegates
    top_k: int = 3
    max_information_chars: int = 3000


def parse_single_text(model_text: str, max_searches: int) -> Verdict:
    """The verdict of the model's turns joined (results excluded)."""
    acts, extra = parse_turns(model_text, _STOP, _ACTIONS, inner=_INNER)
    return _verdict(acts, max_searches, extra)


def _verdict(acts: list[TurnAction], max_searches: int, extra: list[str] | None = None) -> Verdict:
    return budgeted_verdict(acts, final_kind="answer", counted_kind="search", budget=max_searches,
                            extra=extra or ())


class HarisSingleEnv(EpisodeGuard):
    name = "haris_single"
    stop = _STOP
    default_reward = "haris_high"

    def __init__(self, retriever: Retriever | None, config: SingleConfig | None = None) -> None:
        if retriever is None:
            raise ValueError("the haris_single agent needs a retriever")
        self.retriever, self.config = retriever, config or SingleConfig()
        self.max_turns = self.config.max_searches + 2

    def reset(self, claim: Claim) -> list[Message]:
        self._begin(claim)
        self._acts: list[TurnAction] = []
        self._parser = TurnParser(_ACTIONS, inner=_INNER)
        cfg = SearcherConfig(max_searches=self.config.max_searches, top_k=self.config.top_k,
                             max_information_chars=self.config.max_information_chars)
        # the search tool is the search agent's: same retrieval, same <result> rendering
        self._tool = SearchSession(claim.text, self.retriever, cfg)
        content = prompts.SINGLE.format(claim=claim.text.strip(), max_searches=self.config.max_searches,
                                        top_k=self.config.top_k)
        return [Message(role="user", content=content)]

    def _step(self, model_text: str) -> StepResult:
        act = self._parser.parse(model_text)
        self._acts.append(act)
        if act.kind != "search":
            return StepResult(observation=None, done=True)
        n = sum(a.kind == "search" for a in self._acts)
        if n > self.config.max_searches:
            if n > self.config.max_searches + 1:
                return StepResult(observation=None, done=True)
            return StepResult(observation=result_block("No searches left: give the final <answer> now."), done=False)
        # the tool session renders results exactly as the search agent's
        obs = self._tool.step(f"<search>{act.content}</search>")
        return StepResult(observation=obs, done=False)

    def _episode_result(self) -> EpisodeResult:
        return self._tool.log.episode_result(_verdict(self._acts, self.config.max_searches))

    def parse_verdict(self, model_text: str) -> Verdict:
        return parse_single_text(model_text, self.config.max_searches)


@ENVS.register("haris_single")
def make_haris_single(deps: EnvDeps | None = None, *, convention: str = "paper", **params: object) -> HarisSingleEnv:
    """``params`` are :class:`SingleConfig` fields (``max_searches``, ``top_k``, ...). Only
    the paper's convention: the authors' released code has no single agent."""
    if convention != "paper":
        raise ValueError(f"haris_single has only the paper's convention (the released code has no single agent), "
                         f"got {convention!r}")
    deps = deps or EnvDeps()
    return HarisSingleEnv(deps.retriever, SingleConfig(**params))  # type: ignore[arg-type]
