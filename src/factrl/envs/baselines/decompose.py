"""``decompose``: decompose-then-verify with context isolation (ProFact-style resets).

Turn 1 (the opening context) writes the sub-claims, a numbered list and nothing else::

    1. first sub-claim
    2. second sub-claim

at most ``max_subclaims`` (default 4; more is a format error, and only the first
``max_subclaims`` are verified). Then each sub-claim is searched (top-k, as ``rag``) and
verified by one ``rag`` answer turn in its OWN fresh context (a
``Switch(role="policy", messages=...)``): no sub-claim sees the claim's decomposition or
another sub-claim's search results. The trajectory's opening context holds the
decomposition and each sub-claim's context is one segment.

Aggregation (AND): any sub-claim REFUTE → REFUTE; every sub-claim SUPPORT → SUPPORT;
otherwise NOT ENOUGH INFO (a sub-claim whose answer did not parse, or that was never
verified, counts as not supported). The evidence is the union of the ids the sub-verdicts
cite, in order. No sub-claim at all is no answer; so is an episode none of whose
sub-verdicts has a ``Label:`` line. Scored by ``veri_r1``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import compress, repeat
from operator import contains
from dataclasses import dataclass

from factrl.envs.base import ENVS, POLICY, EpisodeResult, StepResult, Switch
from factrl.envs.baselines.answer import clip, line_key
from factrl.envs.baselines.prompts import decompose as prompts
from factrl.envs.baselines.rag import RagConfig, parse_rag, rag_messages, retrieve
from factrl.envs.guards import EpisodeGuard, SearchLog
from factrl.envs.spec import EnvDeps
from factrl.protocol.text import numbered_items
from factrl.labels import Label
from factrl.retrieval.base import Retriever
from factrl.types import Claim, Message, Verdict

__all__ = ["DecomposeConfig", "DecomposeEnv", "parse_subclaims", "aggregate_labels", "decompose_verdict"]

# "1. text" or "1) text": a number, '.' or ')', spaces, then the sub-claim.


@dataclass(frozen=True)
class DecomposeConfig:
    max_subclaims: int = 4
    top_k: int = 5  # retrieved units per sub-claim
    max_information_chars: int = 5000
    max_query_chars: int = 500

    def __post_init__(self) -> None:
        if self.max_subclaims < 1:
            raise ValueError(f"max_subclaims must be at least 1, got {self.max_subclaims}")

    @property
    def rag(self) -> RagConfig:
        return RagConfig(top_k=self.top_k, max_information_chars=self.max_information_chars,
                         max_query_chars=self.max_query_chars)


def parse_subclaims(text: str, max_subclaims: int) -> tuple[list[str], list[str]]:
    """The sub-claims of turn 1 (at most ``max_subclaims``) and its format errors."""
    items, outside, errors = numbered_items(text, "sub-claims")
    if not items:
        errors.insert(0, "no answer: no sub-claims (a numbered list '1. ...')")
    if outside:
        errors.append(f"text outside the sub-claim list: {clip(' '.join(outside))!r}")
    if len(items) > max_subclaims:
        errors.append(f"too many sub-claims: {len(items)} (at most {max_subclaims}; the first {max_subclaims} "
                      "were verified)")
        items = items[:max_subclaims]
    return items, errors


def aggregate_labels(labels: Sequence[Label | None]) -> Label:
    """AND over sub-verdicts: any REFUTE → REFUTE; all SUPPORT → SUPPORT; else NEI."""
    if any(label is Label.REFUTE for label in labels):
        return Label.REFUTE
    if labels and all(label is Label.SUPPORT for label in labels):
        return Label.SUPPORT
    return Label.NEI


def decompose_verdict(split_text: str, answers: Sequence[str], max_subclaims: int) -> tuple[Verdict, list[Verdict]]:
    """The episode's verdict from turn 1's text and the sub-claims' answer turns (in
    order), and the sub-verdicts. A sub-verdict's format errors carry ``(sub-claim i)``
    at the end, so their prefixes still classify them."""
    subclaims, errors = parse_subclaims(split_text, max_subclaims)
    if not subclaims:
        return Verdict(label=None, evidence_ids=[], format_ok=False, format_errors=errors, answered=False), []
    subs = [parse_rag(a) for a in answers[: len(subclaims)]]
    for i, sub in enumerate(subs, 1):
        errors.extend(f"{e} (sub-claim {i})" for e in sub.format_errors)
    if len(answers) > len(subclaims):
        errors.append(f"text outside the sub-claim answers: {len(answers) - len(subclaims)} extra answer(s)")
    missing = len(subclaims) - len(subs)
    if missing:
        errors.append(f"sub-claims not verified: {missing} of {len(subclaims)}")
    if not any(s.answered for s in subs):
        return Verdict(label=None, evidence_ids=[], format_ok=False, format_errors=errors, answered=False), subs
    labels = [s.label for s in subs] + [None] * missing
    ids = list(dict.fromkeys(i for s in subs for i in s.evidence_ids))
    verdict = Verdict(label=aggregate_labels(labels), evidence_ids=ids, format_ok=not errors, format_errors=errors,
                      answered=True)
    return verdict, subs


def split_model_text(model_text: str) -> tuple[str, list[str]]:
    """An episode's model turns joined by newlines → turn 1 and the answer turns: each
    ``Label:`` line opens the next answer (for scorers that only see text)."""
    if ":" not in model_text:  # no key line at all: no split into lines
        return model_text, []
    lines = model_text.splitlines()
    # A key line has a colon: the lines with one are found in C (compress over a map), so
    # 100 kB of blank lines costs no Python step per line.
    with_colon = compress(range(len(lines)), map(contains, lines, repeat(":")))
    starts = [i for i in with_colon if (kv := line_key(lines[i])) is not None and kv[0] == "label"]
    if not starts:
        return model_text, []
    bounds = starts + [len(lines)]
    return "\n".join(lines[: starts[0]]), ["\n".join(lines[a:b]) for a, b in zip(bounds, bounds[1:])]


class DecomposeEnv(EpisodeGuard):
    """Turn 1 decomposes; each later turn answers one sub-claim in a fresh context."""

    name = "decompose"
    stop: tuple[str, ...] = ()
    default_reward = "veri_r1"

    def __init__(self, retriever: Retriever | None, config: DecomposeConfig | None = None) -> None:
        if retriever is None:
            raise ValueError("the decompose agent needs a retriever")
        self.retriever, self.config = retriever, config or DecomposeConfig()
        self.max_turns = 1 + self.config.max_subclaims

    def reset(self, claim: Claim) -> list[Message]:
        text = self._begin(claim)
        self._split: str | None = None
        self._subclaims: list[str] = []
        self._answers: list[str] = []
        self._log = SearchLog()
        content = prompts.TEMPLATE.format(claim=text.strip(), max_subclaims=self.config.max_subclaims)
        return [Message(role="user", content=content)]

    def _step(self, model_text: str) -> StepResult:
        if self._split is None:
            self._split = model_text
            self._subclaims, _ = parse_subclaims(model_text, self.config.max_subclaims)
        else:
            self._answers.append(model_text)
        i = len(self._answers)
        if i >= len(self._subclaims):
            return StepResult(observation=None, done=True)
        retrieval = retrieve(self.retriever, self._subclaims[i], self.config.rag)
        self._log.record(retrieval.query or None, retrieval.shown, retrieval.seconds)
        # A fresh context: the sub-claim and its own search results only.
        messages = rag_messages(self._subclaims[i], retrieval, what="sub-claim")
        return StepResult(observation=None, done=False, switch=Switch(role=POLICY, messages=messages))

    def _episode_result(self) -> EpisodeResult:
        verdict, subs = decompose_verdict(self._split or "", self._answers, self.config.max_subclaims)
        return self._log.episode_result(verdict, meta={
            "subclaims": list(self._subclaims), "sub_labels": [s.label.value if s.label else None for s in subs]})

    def parse_verdict(self, model_text: str) -> Verdict:
        """From the episode's model turns joined by newlines (see :func:`split_model_text`)."""
        split, answers = split_model_text(model_text)
        return decompose_verdict(split, answers, self.config.max_subclaims)[0]


@ENVS.register("decompose")
def make_decompose(deps: EnvDeps | None = None, **params: object) -> DecomposeEnv:
    """``params`` are :class:`DecomposeConfig` fields (``max_subclaims``, ``top_k``, ...)."""
    deps = deps or EnvDeps()
    return DecomposeEnv(deps.retriever, DecomposeConfig(**params))  # type: ignore[arg-type]
