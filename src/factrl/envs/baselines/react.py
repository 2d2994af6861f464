"""``react``: ReAct-style steps (Yao et al., 2023). Each model turn is one step::

    Thought: reasoning (may run over several lines)
    Action: search[query]                      or
    Action: finish[LABEL | [[id]], [[id]]]     ("none" after '|' when nothing is cited)

Generation stops at the end of an Action line (stop string ``"]\\n"``; a turn may also
end at EOS). After a search the environment inserts ``Observation:`` and the top-k units
as ``[[id]]: text`` lines (masked out of the loss); after a turn without a valid action,
an ``Observation:`` saying so. At most ``max_steps`` searches (default 3, top-k 3 units
each, as Veri-R1): the episode ends at ``finish`` or after ``max_steps + 1`` turns, so
the turn after the last search must finish (its observation says so); an episode that
never finishes has no answer. Scored by ``veri_r1``.

The format check runs on the model's own text (observations excluded), turns joined by
newlines: every Action is preceded by its Thought; one Action per step; nothing before
the first Thought or after ``finish``; no Observation written by the model.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from factrl.envs.base import ENVS, EpisodeResult, StepResult
from factrl.envs.baselines.answer import clip, line_key, parse_evidence, parse_label
from factrl.envs.baselines.prompts import react as prompts
from factrl.envs.baselines.rag import RagConfig, retrieve
from factrl.envs.guards import EpisodeGuard, SearchLog
from factrl.envs.spec import EnvDeps
from factrl.retrieval.base import Retriever
from factrl.types import Claim, Message, Verdict

__all__ = ["ReactConfig", "ReactEnv", "Action", "parse_action", "parse_react"]


@dataclass(frozen=True)
class ReactConfig:
    max_steps: int = 3  # searches
    top_k: int = 3
    max_information_chars: int = 3000
    max_query_chars: int = 500

    def __post_init__(self) -> None:
        if self.max_steps < 0:
            raise ValueError(f"max_steps must be at least 0, got {self.max_steps}")


@dataclass(frozen=True)
class Action:
    kind: Literal["search", "finish"]
    argument: str


def parse_action(value: str) -> Action | None:
    """``search[q]`` / ``finish[...]`` (the text after ``Action:``), or None."""
    name, bracket, rest = value.strip().partition("[")
    kind = name.strip().lower()
    if not bracket or kind not in ("search", "finish") or not rest.endswith("]"):
        return None
    argument = rest[:-1].strip()
    if kind == "search" and not argument:
        return None
    return Action(kind, argument)  # type: ignore[arg-type]


def turn_action(turn_text: str) -> Action | None:
    """The action of one model turn: its first ``Action:`` line, if valid."""
    for line in turn_text.splitlines():
        if ":" not in line:  # cheap on 100 kB of blank lines
            continue
        kv = line_key(line)
        if kv is not None and kv[0] == "action":
            return parse_action(kv[1])
    return None


def parse_react(model_text: str, *, max_steps: int) -> Verdict:
    """The verdict and format check of an episode's model text (see the module docstring)."""
    errors: list[str] = []
    outside: list[str] = []
    after: list[str] = []
    finish: Action | None = None
    thinking = False  # a Thought is open and waits for its Action
    in_observation = False
    searches = 0
    # Blank lines are dropped in C first: 100 kB of newlines is one split, not a loop.
    for s in filter(None, map(str.strip, model_text.splitlines())):
        if finish is not None:
            after.append(s)
            continue
        kv = line_key(s)
        key = kv[0] if kv is not None else None
        if key == "thought":
            if thinking:
                errors.append("thought without an action")
            thinking, in_observation = True, False
        elif key == "action":
            assert kv is not None
            if not thinking:
                errors.append(f"action without a thought: {clip(s)!r}")
            thinking = in_observation = False
            action = parse_action(kv[1])
            if action is None:
                errors.append(f"invalid action: {clip(kv[1])!r}")
            elif action.kind == "search":
                searches += 1
                if searches == max_steps + 1:
                    errors.append(f"search over budget: more than {max_steps} searches")
            else:
                finish = action
        elif key == "observation":
            errors.append("model wrote an Observation itself")
            thinking, in_observation = False, True
        elif not thinking and not in_observation:
            outside.append(s)
    if thinking:
        errors.append("thought without an action")
    if outside:
        errors.append(f"text outside Thought/Action lines: {clip(' '.join(outside))!r}")
    if after:
        errors.append(f"text outside Thought/Action lines (after finish): {clip(' '.join(after))!r}")
    if finish is None:
        errors.insert(0, "no answer: no Action: finish[...]")
        return Verdict(label=None, evidence_ids=[], format_ok=False, format_errors=errors, answered=False)
    raw_label, sep, raw_evidence = finish.argument.partition("|")
    label, label_errors = parse_label(raw_label.strip())
    errors[:0] = label_errors
    ids: list[str] = []
    if sep:
        ids, ev_errors = parse_evidence(raw_evidence)
        errors.extend(ev_errors)
    else:
        errors.append("no evidence: finish has no '| [[id]], ...' part")
    return Verdict(label=label, evidence_ids=ids, format_ok=not errors, format_errors=errors, answered=True)


class ReactEnv(EpisodeGuard):
    """Thought/Action turns; the environment answers searches with observations."""

    name = "react"
    stop = ("]\n",)  # the end of an Action line
    default_reward = "veri_r1"

    def __init__(self, retriever: Retriever | None, config: ReactConfig | None = None) -> None:
        if retriever is None:
            raise ValueError("the react agent needs a retriever")
        self.retriever, self.config = retriever, config or ReactConfig()
        self.max_turns = self.config.max_steps + 1
        self._rag = RagConfig(top_k=self.config.top_k, max_information_chars=self.config.max_information_chars,
                              max_query_chars=self.config.max_query_chars)

    def reset(self, claim: Claim) -> list[Message]:
        self._begin(claim)
        self._model_text: list[str] = []
        self._log = SearchLog()
        content = prompts.TEMPLATE.format(claim=claim.text.strip(), max_steps=self.config.max_steps)
        return [Message(role="user", content=content)]

    def _step(self, model_text: str) -> StepResult:
        self._model_text.append(model_text)
        action = turn_action(model_text)
        if (action is not None and action.kind == "finish") or len(self._model_text) >= self.max_turns:
            return StepResult(observation=None, done=True)
        lead = "" if model_text.endswith("\n") else "\n"
        if action is None:
            return StepResult(observation=lead + prompts.INVALID_ACTION, done=False)
        t0 = time.perf_counter()
        r = retrieve(self.retriever, action.argument, self._rag)
        self._log.record(r.query, r.shown, time.perf_counter() - t0)
        obs = prompts.OBSERVATION.format(information=r.information) if r.shown else prompts.NOTHING_FOUND
        if len(self._log.queries) == self.config.max_steps:
            obs += prompts.BUDGET_SPENT
        return StepResult(observation=lead + obs, done=False)

    def _episode_result(self) -> EpisodeResult:
        return self._log.episode_result(self.parse_verdict("\n".join(self._model_text)))

    def parse_verdict(self, model_text: str) -> Verdict:
        """From the episode's model turns joined by newlines (observations excluded)."""
        return parse_react(model_text, max_steps=self.config.max_steps)


@ENVS.register("react")
def make_react(deps: EnvDeps | None = None, **params: object) -> ReactEnv:
    """``params`` are :class:`ReactConfig` fields (``max_steps``, ``top_k``, ...)."""
    deps = deps or EnvDeps()
    return ReactEnv(deps.retriever, ReactConfig(**params))  # type: ignore[arg-type]
