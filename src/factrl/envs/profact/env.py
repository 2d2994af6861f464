"""``profact``: ProFact's three-stage verification agent (SPEC §3; ProFact §3.1–3.2).

1. **Question stage** — the opening (policy) context: the claim → at most
   ``max_questions`` (5) numbered verification questions in ``<questions>``.
2. **Search stage** — for each question, a FRESH context (role ``"search"``, a
   :class:`~factrl.envs.base.Switch` with new messages: context isolation, so no earlier
   question's search results are in a later question's context): one ``<search>`` tool
   call over the evidence store (top-``top_k`` = 3 units, shown as
   ``<information>``), then an evidence-grounded ``<answer>``. The search role is played
   by the policy LM unless ``run_episodes(..., lms={"search": ...})`` maps it elsewhere.
3. **Verdict stage** — back in the opening context, which receives the verification
   record (the answered question–answer pairs) as a masked observation: an optional
   ``<justification>`` and a ``<verdict>`` with an AVeriTeC label.

One turn for the questions, two per question and one for the verdict: at most
1 + 2·5 + 1 = 12 interaction steps, the paper's bound. Every stage is parsed strictly
(:mod:`factrl.protocol.profact`); its errors are recorded per stage in
``meta["stage_errors"]`` and, tagged with the stage, in the verdict's
``format_errors``. A question whose search call or answer does not parse stays in the
record without an answer (the reward gives it nothing; the submission lists it with an
empty answer). The search contexts are trajectory segments; under TRL's GRPO every one
of them played by the policy is trained too, as its own completion
(:mod:`factrl.train.rollout_adapter`), so the QA-METEOR term reaches the queries and
answers it rewards.

Scored by the ``profact`` reward (:mod:`factrl.rewards.profact`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from factrl.envs.base import ENVS, POLICY, EpisodeResult, StepResult, Switch
from factrl.envs.guards import EpisodeGuard, SearchLog
from factrl.envs.profact import prompts
from factrl.protocol.profact import (
    parse_answer,
    parse_questions,
    parse_search_call,
    parse_verdict_turn,
)
from factrl.envs.spec import EnvDeps
from factrl.protocol.tags import last_block
from factrl.envs.veri_r1 import render_information
from factrl.retrieval.base import Retriever
from factrl.types import Claim, Message, Verdict

__all__ = ["ProFactConfig", "ProFactEnv", "QAStep", "SEARCH_ROLE", "STAGES"]

SEARCH_ROLE = "search"
STAGES = ("question", "search", "verdict")
SEARCH_STOP = ("</search>", "</answer>")
VERDICT_STOP = ("</verdict>",)


@dataclass(frozen=True)
class ProFactConfig:
    """The paper's settings: ≤ 5 questions, top-3 per search (ProFact §4.1)."""

    max_questions: int = 5
    top_k: int = 3
    max_information_chars: int = 3000
    max_query_chars: int = 500
    max_answer_chars: int = 1000
    include_speaker_date: bool = True  # AVeriTeC claims carry a speaker and a date: shown with the claim

    def __post_init__(self) -> None:
        if not 1 <= self.max_questions <= 5:
            raise ValueError(f"max_questions must be between 1 and 5 (the paper's bound), got {self.max_questions}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {self.top_k}")

    @property
    def max_turns(self) -> int:
        return 2 + 2 * self.max_questions


@dataclass
class QAStep:
    """One question's search: the query, the ids shown, the answer (None when the call
    or the answer did not parse) and that question's errors."""

    question: str
    query: str | None = None
    shown: list[str] = field(default_factory=list)
    answer: str | None = None
    errors: list[str] = field(default_factory=list)
    search_s: float = 0.0

    def to_dict(self) -> dict[str, object]:
        return {"question": self.question, "query": self.query, "retrieved": list(self.shown),
                "answer": self.answer, "errors": list(self.errors)}


class ProFactEnv(EpisodeGuard):
    name = "profact"
    stop: tuple[str, ...] = ("</questions>",)
    default_reward = "profact"

    def __init__(self, retriever: Retriever | None, config: ProFactConfig | None = None) -> None:
        if retriever is None:
            raise ValueError("the profact agent needs a retriever (the evidence store)")
        self.retriever, self.config = retriever, config or ProFactConfig()
        self.max_turns = self.config.max_turns
        self.segment_budget = {SEARCH_ROLE: self.config.max_questions}  # one search context per question

    # -- episode -----------------------------------------------------------------------
    def reset(self, claim: Claim) -> list[Message]:
        self._begin(claim)
        self._stage = "question"
        self._questions: list[str] = []
        self._steps: list[QAStep] = []
        self._awaiting_answer = False
        self._errors: dict[str, list[str]] = {s: [] for s in STAGES}
        self._verdict_text: str | None = None
        content = prompts.QUESTION.format(max_questions=self.config.max_questions, claim=claim.text.strip(),
                                          context=self._context_line(claim) if self.config.include_speaker_date else "")
        return [Message(role="user", content=content)]

    def _step(self, model_text: str) -> StepResult:
        if self._stage == "question":
            parsed = parse_questions(model_text, self.config.max_questions)
            self._questions = parsed.questions
            self._errors["question"] = parsed.errors
            self._stage = "search"
            return self._next_question()
        if self._stage == "search":
            return self._search_turn(model_text)
        # the verdict stage (the guard refuses a step after it)
        self._verdict_text = model_text
        self._stage = "done"
        return StepResult(observation=None, done=True)

    def _search_turn(self, model_text: str) -> StepResult:
        qa = self._steps[-1]
        if not self._awaiting_answer:
            call = parse_search_call(model_text)
            qa.errors.extend(call.errors)
            if call.query is None:
                return self._next_question()
            qa.query = call.query[: self.config.max_query_chars]
            t0 = time.perf_counter()
            hits = self.retriever.search([qa.query], self.config.top_k)[0]
            info, qa.shown = render_information(hits[: self.config.top_k], self.config.max_information_chars)
            qa.search_s = time.perf_counter() - t0
            self._awaiting_answer = True
            # Same context: the answer turn continues after the results.
            return StepResult(observation=prompts.INFORMATION.format(information=info or prompts.NOTHING_FOUND),
                              done=False)
        parsed = parse_answer(model_text, self.config.max_answer_chars)
        qa.errors.extend(parsed.errors)
        qa.answer = parsed.answer
        self._awaiting_answer = False
        return self._next_question()

    def _next_question(self) -> StepResult:
        """A fresh search context for the next question, or the verdict stage."""
        i = len(self._steps)
        if i < len(self._questions):
            qa = QAStep(question=self._questions[i])
            self._steps.append(qa)
            content = prompts.SEARCH.format(claim=self._claim.text.strip(), question=qa.question)  # type: ignore[union-attr]
            return StepResult(observation=None, done=False,
                              switch=Switch(role=SEARCH_ROLE, messages=[Message(role="user", content=content)],
                                            stop=SEARCH_STOP))
        self._stage = "verdict"
        return StepResult(observation=prompts.VERDICT.format(record=self.record_text()), done=False,
                          switch=Switch(role=POLICY, messages=None, stop=VERDICT_STOP))

    def record_text(self) -> str:
        """The verification record the verdict stage sees: answered pairs only."""
        lines = [f"Q{i}: {s.question}\nA{i}: {s.answer}" for i, s in
                 enumerate((s for s in self._steps if s.answer is not None), 1)]
        return "\n".join(lines) or prompts.NO_RECORD

    # -- result ------------------------------------------------------------------------
    def _episode_result(self) -> EpisodeResult:
        errors = {s: list(e) for s, e in self._errors.items()}
        errors["search"] = [f"{e} (question {i})" for i, s in enumerate(self._steps, 1) for e in s.errors]
        unfinished = self._unfinished()
        if unfinished:
            errors[self._stage].append(unfinished)
        verdict = self._verdict(errors)
        qa = [s.to_dict() for s in self._steps]
        # Questions the episode never reached (budget) stay listed, unanswered.
        qa += [QAStep(question=q).to_dict() for q in self._questions[len(self._steps):]]
        tagged = [f"{e} ({stage} stage)" for stage in STAGES for e in errors[stage]]
        verdict = verdict.model_copy(update={"format_errors": tagged, "format_ok": not tagged})
        log = SearchLog()
        for step in self._steps:
            log.record(step.query or None, step.shown, step.search_s)
        return log.episode_result(verdict, meta={
            "questions": list(self._questions),
            "qa": qa,
            "justification": self._justification,
            "stage_errors": errors,
            "stage_ok": {s: not errors[s] for s in STAGES},
        })

    def _unfinished(self) -> str | None:
        if self._stage == "done":
            return None
        if self._stage == "search":
            return (f"no answer: the episode ended in the search stage (question {len(self._steps)} of "
                    f"{len(self._questions)}; a budget ran out)")
        if self._stage == "verdict":
            return "no answer: the episode ended before the verdict (a budget ran out)"
        return "no answer: the episode ended in the question stage"

    def _verdict(self, errors: dict[str, list[str]]) -> Verdict:
        self._justification = None
        if self._verdict_text is None:
            return Verdict(label=None, answered=False)
        parsed = parse_verdict_turn(self._verdict_text)
        self._justification = parsed.justification
        errors["verdict"] = parsed.errors + errors["verdict"]
        return Verdict(label=parsed.label, answered=parsed.answered)

    def parse_verdict(self, model_text: str) -> Verdict:
        """The label of the last ``<verdict>`` block of an episode's model text (for
        scorers that only see text); the stages' errors need the episode (``result``)."""
        block = last_block(model_text, "verdict")
        parsed = parse_verdict_turn("" if block is None else f"<verdict>{block}</verdict>")
        return Verdict(label=parsed.label, answered=parsed.answered, format_errors=parsed.errors,
                       format_ok=not parsed.errors)

    @staticmethod
    def _context_line(claim: Claim) -> str:
        bits = [f"{k}: {claim.meta[key]}" for k, key in (("Speaker", "speaker"), ("Date", "claim_date"))
                if isinstance(claim.meta.get(key), str) and claim.meta[key].strip()]
        return ("\n" + "\n".join(bits)) if bits else ""


@ENVS.register("profact")
def make_profact(deps: EnvDeps | None = None, **params: object) -> ProFactEnv:
    """``params`` are :class:`ProFactConfig` fields (``max_questions``, ``top_k``, ...);
    searches ``deps.retriever`` (the evidence store)."""
    deps = deps or EnvDeps()
    return ProFactEnv(deps.retriever, ProFactConfig(**params))  # type: ignore[arg-type]
