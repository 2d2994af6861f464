"""``rar``: Binary RAR's policy task (001, §4.1): answer a prompt in one turn.

A prompt set (:mod:`factrl.datasets.rar_prompts`) holds long-form prompts ("Tell me a
bio of ...") and short-form questions; a short-form question gets the paper's
abstention instruction (answer exactly "I don't know" when unsure). The episode's
result carries the response (a reasoning model's ``<think>`` block removed) in
``meta["response"]``, its kind, and for short-form questions whether it abstained and,
when gold answers are given, whether it was correct (string match, §4.1). Scored by the
``rar`` reward (a verifier reads evidence, prompt and response).

``show_documents=True`` (a factrl setting for generated worlds, whose invented names no
model knows: without notes every statement would be a guess) opens the prompt with the
prompt's documents under :data:`NOTES_HEADER`, at most ``max_document_chars`` of them;
the policy then writes from notes it can misread, and the reward still checks it.

``convention="released"`` reads the response as the authors' released evaluation does
(``<answer>`` block, else after ``</think>``; :func:`~factrl.protocol.rar.final_answer`)
and lets only an answer that is wholly "I don't know" abstain.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from factrl.envs.base import ENVS, EpisodeResult, StepResult
from factrl.envs.guards import EpisodeGuard
from factrl.envs.outcome import Outcome
from factrl.envs.spec import EnvDeps
from factrl.protocol.rar import is_abstention, is_sole_abstention, matches_gold, response_of
from factrl.types import Claim, Message, Verdict

__all__ = ["NOTES_HEADER", "RarEnv", "RarOutcome", "SHORT_FORM_INSTRUCTION", "notes_of", "rar_outcome",
           "response_meta", "response_of"]

NOTES_HEADER = "Notes:"
SHORT_FORM_INSTRUCTION = ("Answer the question briefly. If you are not sure of the answer, "
                          'answer exactly "I don\'t know".')


class RarEnv(EpisodeGuard):
    """One turn, no retrieval (evidence is the reward's business, not the policy's)."""

    name = "rar"
    stop: tuple[str, ...] = ()
    max_turns = 1
    default_reward = "rar"

    def __init__(self, *, short_form_instruction: str = SHORT_FORM_INSTRUCTION, convention: str = "paper",
                 show_documents: bool = False, max_document_chars: int = 1500) -> None:
        if convention not in ("paper", "released"):
            raise ValueError(f"convention must be 'paper' or 'released', got {convention!r}")
        if max_document_chars < 1:
            raise ValueError(f"max_document_chars must be >= 1, got {max_document_chars}")
        self.short_form_instruction, self.convention = short_form_instruction, convention
        self.show_documents, self.max_document_chars = bool(show_documents), int(max_document_chars)

    def reset(self, claim: Claim) -> list[Message]:
        text = self._begin(claim, "prompt").strip()
        self._text = ""
        if claim.meta.get("kind") == "short" and self.short_form_instruction:
            text = f"{text}\n\n{self.short_form_instruction}"
        if self.show_documents:
            notes = " ".join(" ".join(str(d.get("text", "")).split()) for d in claim.meta.get("documents") or [])
            if not notes:
                raise ValueError(f"prompt {claim.id!r} has no documents to show (show_documents is on)")
            text = f"{NOTES_HEADER}\n{notes[: self.max_document_chars]}\n\n{text}"
        return [Message(role="user", content=text)]

    def _step(self, model_text: str) -> StepResult:
        self._text = model_text
        return StepResult(observation=None, done=True)

    def _episode_result(self) -> EpisodeResult:
        assert self._claim is not None  # the guard's result() checked
        outcome = self.parse_outcome(self._text, self._claim)
        return EpisodeResult(verdict=outcome.verdict, meta=outcome.meta())

    def parse_outcome(self, model_text: str, claim: Claim) -> RarOutcome:
        """The verdict and the response as the reward and metrics read it (text is all it needs)."""
        return rar_outcome(claim, model_text, self.parse_verdict(model_text), convention=self.convention)

    def parse_verdict(self, model_text: str) -> Verdict:
        """No label: a response is "answered" when it says anything after its reasoning."""
        if response_of(model_text, self.convention).strip():
            return Verdict(label=None, format_ok=True, answered=True)
        return Verdict(label=None, format_ok=False, format_errors=["no answer: empty response"], answered=False)


@dataclass(frozen=True)
class RarOutcome(Outcome):
    """A Binary RAR episode's response (``<think>`` removed, or as the released evaluation
    reads it), the prompt's kind, and for short-form prompts whether it abstained and
    whether it was correct (None without gold answers)."""

    response: str = ""
    kind: str = "long"
    convention: str = "paper"
    abstained: bool | None = None
    correct: bool | None = None

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {"response": self.response, "kind": self.kind}
        if self.convention == "released":
            meta["convention"] = "released"
        if self.kind == "short":
            meta["abstained"] = self.abstained
            meta["correct"] = self.correct
        return meta


def rar_outcome(claim: Claim, model_text: str, verdict: Verdict, *, convention: str = "paper") -> RarOutcome:
    response = response_of(model_text, convention)
    kind = claim.meta.get("kind", "long")
    abstained = correct = None
    if kind == "short":
        abstained = is_sole_abstention(response) if convention == "released" else is_abstention(response)
        answers = list(claim.meta.get("answers") or [])
        correct = (not abstained and matches_gold(response, answers)) if answers else None
    return RarOutcome(verdict=verdict, response=response, kind=kind, convention=convention, abstained=abstained,
                      correct=correct)


def notes_of(context: str) -> str:
    """The notes a ``show_documents`` prompt shows, read back from its text ("" when none)."""
    head, sep, rest = context.partition(NOTES_HEADER + "\n")
    return rest.partition("\n\n")[0] if sep else ""


def response_meta(claim: Claim, model_text: str, *, convention: str = "paper") -> dict[str, Any]:
    """``response``, ``kind`` and, for short-form prompts, ``abstained`` and ``correct``
    (None without gold answers): :class:`RarOutcome`'s fields."""
    verdict = Verdict(label=None)
    return rar_outcome(claim, model_text, verdict, convention=convention).meta()


@ENVS.register("rar")
def make_rar(deps: EnvDeps | None = None, **params: Any) -> RarEnv:
    """Parameters: ``short_form_instruction`` (text added to short-form questions; "" for
    none), ``convention`` (``paper`` | ``released``), ``show_documents`` and
    ``max_document_chars`` (the prompt's documents as notes). ``deps`` is not used."""
    del deps
    return RarEnv(**params)
