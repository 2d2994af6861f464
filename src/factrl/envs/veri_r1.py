"""Veri-R1's environment (SPEC §1): plan, up to k searches whose top entries come back
as ``<information>[[id]]: text</information>``, reasoning, and a final
``<answer>Label: …\\nEvidence: [[…]]</answer>``; plus the offline variant with the
evidence given in the prompt and no search."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from factrl.envs import prompts
from factrl.envs.base import ENVS, EpisodeResult, StepResult
from factrl.envs.guards import EpisodeGuard, SearchLog
from factrl.envs.spec import EnvDeps
from factrl.protocol.tags import check_protocol, last_block, parse_answer
from factrl.protocol.forcing import VERI_R1_FORCING
from factrl.retrieval.base import Retriever
from factrl.types import Claim, EvidenceRef, Hit, Message, Verdict

__all__ = ["VeriR1Config", "VeriR1Env", "render_information", "parse_verdict"]

ContextProvider = Callable[[Claim], Sequence[EvidenceRef]]


@dataclass(frozen=True)
class VeriR1Config:
    """Defaults are the paper's (Veri-R1 §2–3, App. G)."""

    mode: Literal["online", "offline"] = "online"
    max_searches: int = 3
    top_k: int = 3
    max_turns: int = 4  # 3 searches + the answer
    max_observation_chars: int = 3000  # ~768 tokens, the paper's max observation length
    max_query_chars: int = 500
    shuffle_offline_evidence: bool = True
    # "paper": the released prompts word for word; "short": the same protocol in ~110
    # tokens instead of ~440 (what the shipped embedded agent is trained and run with).
    prompt: Literal["paper", "short"] = "paper"
    # Offline: show exactly this many information lines (the gold evidence, then context
    # sentences), so that how many lines a claim gets says nothing about its label — a
    # claim without gold evidence (NOT ENOUGH INFO) otherwise shows one line fewer when
    # its gold sentence falls outside the context. Unset: gold + context as given.
    offline_lines: int | None = None

    def __post_init__(self) -> None:
        if self.offline_lines is not None and int(self.offline_lines) < 1:
            raise ValueError(f"Veri-R1 offline_lines must be at least 1 (or unset), got {self.offline_lines}")
        if self.mode not in ("online", "offline"):
            raise ValueError(f"Veri-R1 mode must be 'online' or 'offline', got {self.mode!r}")
        if self.prompt not in prompts.VERI_R1_PROMPTS:
            raise ValueError(f"Veri-R1 prompt must be one of {sorted(prompts.VERI_R1_PROMPTS)}, got {self.prompt!r}")


def render_information(hits: Sequence[Hit], max_chars: int) -> tuple[str, list[str]]:
    """One ``[[sentence_id]]: sentence`` line per sentence of each retrieved unit, so the
    model can cite sentence-level ids. Returns the block text and the ids shown."""
    lines: list[str] = []
    shown: list[str] = []
    used = 0
    for hit in hits:
        p = hit.passage
        pairs = list(zip(p.sentence_ids, p.sentences)) or [(p.id, p.text)]
        for i, (sid, sent) in enumerate(pairs):
            text = f"{p.title} — {sent}" if i == 0 and p.title else sent
            line = f"[[{sid}]]: {text}"
            if used + len(line) > max_chars and lines:
                return "\n".join(lines), shown
            lines.append(line[:max_chars])
            shown.append(sid)
            used += len(line) + 1
    return "\n".join(lines), shown


def parse_verdict(model_text: str, *, online: bool, max_searches: int) -> Verdict:
    """The verdict and format check for one episode's model text (observations excluded).

    Online, the system answers every ``</search>`` with an ``<information>`` block, and the
    model must reason in ``<think>`` first every time it gets one (the paper's prompt, and
    the authors' reward code): a search followed by any block but ``<think>`` fails."""
    allowed = ("plan", "search", "think", "answer") if online else ("think", "answer")
    blocks, errors = check_protocol(
        model_text,
        allowed=allowed,
        first="plan" if online else None,
        once=("plan",),
        final="answer",
        max_counts={"search": max_searches} if online else None,
    )
    searches = 0
    for block, following in zip(blocks, blocks[1:]):
        if block.name == "search":
            searches += 1
            if following.name != "think":
                errors.append(f"no <think> after the information of search {searches} (got <{following.name}>)")
    content = last_block(model_text, "answer")
    if content is None:
        return Verdict(label=None, evidence_ids=[], format_ok=False, format_errors=errors, answered=False)
    parsed = parse_answer(content)
    errors.extend(parsed.errors)
    return Verdict(
        label=parsed.label,
        evidence_ids=parsed.evidence_ids,
        format_ok=not errors,
        format_errors=errors,
        answered=True,
    )


class VeriR1Env(EpisodeGuard):
    """One episode at a time; create one per rollout (they are cheap). Scored by the
    ``veri_r1`` reward unless a run names another."""

    stop = ("</search>", "</answer>")
    default_reward = "veri_r1"
    answer_forcing = VERI_R1_FORCING  # verify and the demo force "<answer>\nLabel:" on an unanswered episode

    def __init__(
        self,
        retriever: Retriever | None = None,
        config: VeriR1Config | None = None,
        *,
        context: ContextProvider | None = None,
    ) -> None:
        self.config = config or VeriR1Config()
        if self.config.mode == "online" and retriever is None:
            raise ValueError("the online Veri-R1 environment needs a retriever")
        self.retriever = retriever
        self.context = context
        self.name = "veri_r1" if self.config.mode == "online" else "veri_r1_offline"
        self.max_turns = self.config.max_turns if self.config.mode == "online" else 1

    # -- protocol -------------------------------------------------------------------
    def reset(self, claim: Claim) -> list[Message]:
        self._begin(claim)
        self._model_text: list[str] = []
        self._log = SearchLog()
        if self.config.mode == "online":
            content = prompts.VERI_R1_PROMPTS[self.config.prompt]["online"].format(
                claim=claim.text.strip(), max_searches=_number_word(self.config.max_searches)
            )
        else:
            evidence = self._offline_evidence(claim)
            self._log.record(None, [e.id for e in evidence])
            content = prompts.VERI_R1_PROMPTS[self.config.prompt]["offline"].format(
                claim=claim.text.strip(),
                evidence="\n".join(f"[[{e.id}]]: {e.text or ''}" for e in evidence),
            )
        return [Message(role="user", content=content)]

    def _step(self, model_text: str) -> StepResult:
        self._model_text.append(model_text)
        turns = len(self._model_text)
        if self.config.mode == "offline" or "</answer>" in model_text.lower():
            return StepResult(observation=None, done=True)
        query = _trailing_search(model_text)
        if query is None or turns >= self.config.max_turns:
            # No search to serve (EOS, length cut, or free text) or out of turns.
            return StepResult(observation=None, done=True)
        searches = self._log.queries
        if len(searches) >= self.config.max_searches:
            self._log.record(query)  # counted, not served
            return StepResult(observation=prompts.OVER_BUDGET, done=False)
        t0 = time.perf_counter()
        hits = self._search(query)
        seconds = time.perf_counter() - t0
        info, shown = render_information(hits, self.config.max_observation_chars)
        self._log.record(query, shown, seconds)
        obs = f"\n\n<information>\n{info}\n</information>\n\n"
        if len(searches) == self.config.max_searches:
            obs += prompts.BUDGET_SPENT.lstrip("\n")
        return StepResult(observation=obs, done=False)

    def _episode_result(self) -> EpisodeResult:
        return self._log.episode_result(self.parse_verdict("".join(self._model_text)))

    def parse_verdict(self, model_text: str) -> Verdict:
        return parse_verdict(model_text, online=self.config.mode == "online", max_searches=self.config.max_searches)

    # -- helpers --------------------------------------------------------------------
    def _search(self, query: str) -> list[Hit]:
        q = query.strip()[: self.config.max_query_chars]
        if not q:
            return []
        assert self.retriever is not None
        return self.retriever.search([q], self.config.top_k)[0]

    def _offline_evidence(self, claim: Claim) -> list[EvidenceRef]:
        refs = list(claim.evidence)
        if self.context is not None:
            known = {r.id for r in refs}
            refs += [r for r in self.context(claim) if r.id not in known]
        if self.config.offline_lines is not None:
            refs = refs[: max(int(self.config.offline_lines), len(claim.evidence))]  # the gold always stays
        missing = [r.id for r in refs if not r.text]
        if missing:
            raise ValueError(
                f"offline Veri-R1 needs evidence text; claim {claim.id!r} lacks it for {missing[:3]}"
            )
        if self.config.shuffle_offline_evidence:
            random.Random(claim.id).shuffle(refs)
        return refs


def _trailing_search(model_text: str) -> str | None:
    """The query of a turn that ended with ``</search>`` (generation stops there)."""
    if not model_text.rstrip().lower().endswith("</search>"):
        return None
    return last_block(model_text, "search")


def _number_word(n: int) -> str:
    return {1: "one", 2: "two", 3: "three", 4: "four", 5: "five"}.get(n, str(n))


@ENVS.register("veri_r1")
def make_veri_r1(deps: EnvDeps | None = None, **params: object) -> VeriR1Env:
    """``params`` are :class:`VeriR1Config` fields (``mode="offline"`` for the offline
    setting); online search uses ``deps.retriever``, offline context ``deps.context``."""
    deps = deps or EnvDeps()
    return VeriR1Env(deps.retriever, VeriR1Config(**params), context=deps.context)  # type: ignore[arg-type]


def row_params(extra_info: Mapping[str, Any]) -> dict[str, Any]:
    """The setting of a verl row: ``extra_info.mode`` (factrl's older exports), else the
    Veri-R1 authors' split names (``test_off`` / ``train_online``)."""
    mode = extra_info.get("mode")
    if mode is None:
        mode = "offline" if "off" in str(extra_info.get("split") or "").lower() else "online"
    return {"mode": mode}


make_veri_r1.row_params = row_params  # type: ignore[attr-defined]


@ENVS.register("veri_r1_offline")
def make_veri_r1_offline(deps: EnvDeps | None = None, **params: object) -> VeriR1Env:
    """``veri_r1`` with ``mode="offline"`` (a name for configs and verl's agent-loop files)."""
    return make_veri_r1(deps, **{"mode": "offline", **params})
