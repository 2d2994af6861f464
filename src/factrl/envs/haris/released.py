"""HARIS as its authors' released code runs it (``qishenghu/HARIS``: ``haris_infer.py``,
``host_low.py``, ``template.py``) — the ``released`` convention of the ``haris`` and
``haris_searcher`` environments (``params = {convention = "released"}``). The ``paper``
convention (:mod:`.reasoner`, :mod:`.searcher`) stays the default.

What the released code does, and this module with it:

- prompts: :data:`~factrl.envs.haris.prompts.REASONER_RELEASED` and
  :data:`~factrl.envs.haris.prompts.SEARCHER_RELEASED` as system messages, the bare
  claim / question as the user message;
- the reasoner stops only at ``</question>`` (it goes on past ``</verification>`` until
  EOS), at most 20 turns; a turn that stopped there asks the last
  ``<question>…</question>`` in it; an empty question ends the episode. The search agent's
  report comes back as ``" <result>\\n{report}\\n</result>"``; an empty report is replaced
  by the question's raw top-3 passages (the batch path of ``haris_infer.py``);
- the search agent stops only at ``</search>``, at most 20 turns; each stopped turn
  searches the last ``<search>…</search>`` in it (an empty query searches nothing and the
  agent goes on) and gets ``"<result>\\n{passages}\\n</result>"``, the top-3 passages'
  FlashRAG ``contents`` (``"title"\\ntext``) joined by blank lines; its report is the last
  ``<report>…</report>`` of its turns and results;
- the verdict is the last ``<verification>…</verification>`` of the rendered prompt, the
  turns and the results (so with none the prompt's own example is read), mapped by
  substring: "support" anywhere → SUPPORT, else "refute" → REFUTE. Empty content is no
  answer; content with neither word re-runs the reasoner (``high_inference``: fresh
  context, empty questions skipped, no passage fallback, the verdict read from its own
  output) up to 3 times, after which the released code picks at random — here the episode
  stays unanswered and the ``haris`` run metrics report a random-fill accuracy beside;
- reasoner temperature 0.1, search agent 1.0 (vLLM's default: ``host_low.py`` passes none),
  2,048 tokens a turn, no cap of its own on a context (40,960 here: Qwen3-4B's length).

Not reproduced: a question asked in the reasoner's 20th turn is not searched (its result
would only be read for a ``<verification>`` inside it); retrieval-server failures
(retried, then ``None`` as text) do not arise.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from factrl.envs.base import POLICY, EpisodeResult, RoleSampling, StepResult, Switch
from factrl.envs.guards import EpisodeGuard, SearchLog
from factrl.envs.haris import prompts
from factrl.labels import Label
from factrl.retrieval.base import Retriever
from factrl.types import Claim, Message, Passage, Verdict

__all__ = ["ReleasedConfig", "ReleasedHarisEnv", "ReleasedSearcherEnv", "ReleasedSearchSession", "last_block",
           "released_label", "released_outcome", "passage_contents", "REASONER_STOP", "SEARCHER_STOP"]

REASONER_STOP = ("</question>",)
SEARCHER_STOP = ("</search>",)
SEARCHER = "searcher"
Outcome = Literal["SUPPORT", "REFUTE", "EMPTY", "RERUN"]


def last_block(text: str, tag: str) -> str:
    """The content of the last ``<tag>…</tag>``: the last closing tag and the last
    opening tag before it (case-sensitive), stripped; "" when either is missing."""
    end = text.rfind(f"</{tag}>")
    if end < 0:
        return ""
    start = text.rfind(f"<{tag}>", 0, end)
    if start < 0:
        return ""
    return text[start + len(tag) + 2 : end].strip()


def released_label(content: str) -> Label | None:
    """"support" anywhere (any case) → SUPPORT, else "refute" → REFUTE, else None."""
    low = content.strip().lower()
    if "support" in low:
        return Label.SUPPORT
    if "refute" in low:
        return Label.REFUTE
    return None


def released_outcome(sequence: str, claim: str) -> tuple[Outcome, Label | None]:
    """The first run's outcome: the last verification of prompt + ``sequence`` (model
    turns and results). The prompt is the system prompt and the claim (the chat
    template's markers between them hold no tag and neither word)."""
    content = last_block(f"{prompts.REASONER_RELEASED}\n{claim}\n{sequence}", "verification")
    if not content:
        return "EMPTY", None
    label = released_label(content)
    if label is None:
        return "RERUN", None
    return ("SUPPORT" if label is Label.SUPPORT else "REFUTE"), label


def passage_contents(p: Passage) -> str:
    """A passage as FlashRAG's ``contents`` field: ``"title"`` on its own line, then the text."""
    return f'"{p.title}"\n{p.text}' if p.title else p.text


@dataclass(frozen=True)
class ReleasedConfig:
    max_turns: int = 20  # reasoner turns per run (haris_infer.py MAX_TURN)
    searcher_turns: int = 20  # search-agent turns per question (host_low.py)
    top_k: int = 3
    reruns: int = 3  # high_inference under @retry(max=3)
    report_fallback: bool = True  # an empty report → the question's raw top-k passages
    reasoner_temperature: float | None = 0.1  # None: the rollout's (training)
    searcher_temperature: float | None = 1.0
    max_turn_tokens: int | None = 2048
    max_context_tokens: int | None = 40960

    def __post_init__(self) -> None:
        if min(self.max_turns, self.searcher_turns, self.top_k) < 1 or self.reruns < 0:
            raise ValueError("max_turns, searcher_turns and top_k must be >= 1 and reruns >= 0, got "
                             f"{self.max_turns}, {self.searcher_turns}, {self.top_k}, {self.reruns}")

    def sampling(self) -> dict[str, RoleSampling]:
        return {role: RoleSampling(temp, self.max_turn_tokens, self.max_context_tokens)
                for role, temp in ((POLICY, self.reasoner_temperature), (SEARCHER, self.searcher_temperature))}


def searcher_messages(question: str) -> list[Message]:
    return [Message(role="system", content=prompts.SEARCHER_RELEASED), Message(role="user", content=question)]


def reasoner_messages(claim: str) -> list[Message]:
    return [Message(role="system", content=prompts.REASONER_RELEASED), Message(role="user", content=claim)]


@dataclass
class ReleasedSearchSession:
    """One question's search agent as ``host_low.py`` runs it: feed it the agent's turns
    with :meth:`step` (the observation, "" for none, or None once it is over)."""

    question: str
    retriever: Retriever
    config: ReleasedConfig
    sequence: str = ""  # its turns and results, where the report is read
    turns: int = 0
    log: SearchLog = field(default_factory=SearchLog)
    done: bool = False

    def step(self, text: str) -> str | None:
        if self.done:
            raise RuntimeError("step() after the search agent finished")
        self.turns += 1
        self.sequence += text
        if not text.endswith(SEARCHER_STOP[0]):  # EOS or cut: the loop breaks
            self.done = True
            return None
        query = last_block(text, "search")
        obs = f"<result>\n{self.search(query)}\n</result>" if query else ""
        self.sequence += obs
        if self.turns >= self.config.searcher_turns:
            self.done = True
            return None
        return obs

    def search(self, query: str) -> str:
        """The released search tool's text: top-k ``contents`` joined by blank lines."""
        t0 = time.perf_counter()
        hits = self.retriever.search([query], self.config.top_k)[0]
        self.log.record(query, [h.passage.id for h in hits], time.perf_counter() - t0)
        return "".join(f"{passage_contents(h.passage)}\n\n" for h in hits).strip()

    @property
    def report(self) -> str:
        return last_block(self.sequence, "report")


class ReleasedHarisEnv(EpisodeGuard):
    """The reasoner and its search agent as ``haris_infer.py`` runs them (module doc)."""

    name = "haris"
    stop = REASONER_STOP
    default_reward = "haris_high"

    def __init__(self, retriever: Retriever | None, config: ReleasedConfig | None = None) -> None:
        if retriever is None:
            raise ValueError("the haris agent needs a retriever (its search agent searches it)")
        self.retriever, self.config = retriever, config or ReleasedConfig()
        c = self.config
        runs = 1 + c.reruns
        self.max_turns = runs * c.max_turns * (1 + c.searcher_turns)
        self.segment_budget = {SEARCHER: runs * c.max_turns, **({POLICY: c.reruns} if c.reruns else {})}
        self.sampling = c.sampling()

    def reset(self, claim: Claim) -> list[Message]:
        # the released code sends the claim as it is (no strip)
        self._text = self._begin(claim)
        self._run = 0  # 0: haris_infer's batch loop; 1..: high_inference re-runs
        self._sequences = [""]  # per run: its turns and results
        self._turns = 0
        self._sessions: list[ReleasedSearchSession] = []
        self._session: ReleasedSearchSession | None = None
        self._question = ""
        self._outcome: str | None = None
        self._label: Label | None = None
        return reasoner_messages(self._text)

    def _step(self, model_text: str) -> StepResult:
        if self._session is not None:
            return self._searcher_step(model_text)
        self._turns += 1
        self._sequences[-1] += model_text
        if model_text.endswith(REASONER_STOP[0]) and self._turns < self.config.max_turns:
            question = last_block(model_text, "question")
            if question:
                self._question = question
                self._session = ReleasedSearchSession(question, self.retriever, self.config)
                self._sessions.append(self._session)
                return StepResult(observation=None, done=False,
                                  switch=Switch(role=SEARCHER, messages=searcher_messages(question), stop=SEARCHER_STOP))
            if self._run > 0:  # high_inference goes on without a result
                return StepResult(observation=None, done=False)
        return self._end_of_run()

    def _searcher_step(self, model_text: str) -> StepResult:
        session = self._session
        assert session is not None
        obs = session.step(model_text)
        if obs is not None:
            return StepResult(observation=obs, done=False)
        self._session = None
        report = session.report
        if not report and self._run == 0 and self.config.report_fallback:
            report = session.search(self._question)
        result = f" <result>\n{report}\n</result>"
        self._sequences[-1] += result
        return StepResult(observation=result, done=False, switch=Switch(role=POLICY))

    def _end_of_run(self) -> StepResult:
        seq = self._sequences[-1]
        if self._run == 0:
            outcome, label = released_outcome(seq, self._text)
        else:
            label = released_label(last_block(seq, "verification"))
            outcome = "RERUN" if label is None else label.value
        self._outcome, self._label = outcome, label
        if outcome != "RERUN" or self._run >= self.config.reruns:
            return StepResult(observation=None, done=True)
        self._run += 1
        self._sequences.append("")
        self._turns = 0
        return StepResult(observation=None, done=False,
                          switch=Switch(role=POLICY, messages=reasoner_messages(self._text), stop=REASONER_STOP))

    def _episode_result(self) -> EpisodeResult:
        label = self._label
        errors: list[str] = []
        if label is None:
            errors.append("no answer: empty <verification>" if self._outcome == "EMPTY" else
                          f"no verdict after {self._run} re-run(s) (the released code then picks at random)"
                          if self._outcome == "RERUN" else "no answer: the episode ended before its verification")
        verdict = Verdict(label=label, evidence_ids=[], format_ok=label is not None, format_errors=errors,
                          answered=label is not None)
        s = self._sessions
        return SearchLog.merged(x.log for x in s).episode_result(verdict, meta={
            "convention": "released", "released_outcome": self._outcome, "reruns": self._run,
            "questions": [x.question for x in s], "reports": [x.report or None for x in s],
            "searcher_format_ok": [bool(x.report) for x in s]})

    def parse_verdict(self, model_text: str) -> Verdict:
        """The first run's verdict from the reasoner's model text (results excluded, so a
        verification inside a report is not seen; re-runs cannot be replayed)."""
        outcome, label = released_outcome(model_text, self._text if self._claim is not None else "")
        return Verdict(label=label, format_ok=label is not None, answered=label is not None,
                       format_errors=[] if label is not None else [f"no verdict ({outcome})"])


class ReleasedSearcherEnv(EpisodeGuard):
    """The search agent alone on one question (``host_low.py``; its GRPO stage)."""

    name = "haris_searcher"
    stop = SEARCHER_STOP
    default_reward = "haris_low"

    def __init__(self, retriever: Retriever | None, config: ReleasedConfig | None = None) -> None:
        if retriever is None:
            raise ValueError("the haris_searcher agent needs a retriever")
        self.retriever, self.config = retriever, config or ReleasedConfig()
        self.max_turns = self.config.searcher_turns
        self.sampling = {POLICY: self.config.sampling()[SEARCHER]}
        self._session: ReleasedSearchSession | None = None

    def reset(self, claim: Claim) -> list[Message]:
        question = self._begin(claim, "question")
        self._session = ReleasedSearchSession(question, self.retriever, self.config)
        return searcher_messages(question)

    def _step(self, model_text: str) -> StepResult:
        assert self._session is not None
        obs = self._session.step(model_text)
        return StepResult(observation=obs, done=obs is None)

    def _episode_result(self) -> EpisodeResult:
        s = self._session
        assert s is not None
        report = s.report
        verdict = Verdict(label=None, evidence_ids=[], format_ok=bool(report), answered=bool(report),
                          format_errors=[] if report else ["no answer: no <report>"])
        return s.log.episode_result(verdict, meta={"convention": "released", "report": report or None,
                                                   "question": s.question})

    def parse_verdict(self, model_text: str) -> Verdict:
        report = last_block(model_text, "report")
        return Verdict(label=None, format_ok=bool(report), answered=bool(report),
                       format_errors=[] if report else ["no answer: no <report>"])
