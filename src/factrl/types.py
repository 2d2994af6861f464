"""Typed records that cross module boundaries, each round-tripping to JSON.

Every record is a pydantic model: ``rec.model_dump(mode="json")`` gives a plain dict and
``Type.model_validate(d)`` (or :func:`from_json`) reads it back unchanged.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from factrl.labels import Label, normalise_label

__all__ = [
    "Label",
    "normalise_label",
    "Record",
    "Claim",
    "Passage",
    "Hit",
    "EvidenceRef",
    "Verdict",
    "Message",
    "Turn",
    "RewardBreakdown",
    "Segment",
    "Trajectory",
    "to_json",
    "from_json",
]


def _label_or_none(v: Any) -> Any:
    return None if v is None else normalise_label(v)


# A label field accepts any known spelling ("SUPPORTS", "Refuted", ...) and stores the
# canonical Label; unknown spellings fail validation with the list of known ones.
LabelField = Annotated[Label | None, BeforeValidator(_label_or_none)]


class Record(BaseModel):
    """Base for every record: strict about unknown fields, JSON round trip built in."""

    model_config = ConfigDict(extra="forbid", frozen=False)

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str):  # noqa: ANN206 - returns cls
        return cls.model_validate_json(text)


R = TypeVar("R", bound=Record)


def to_json(rec: Record) -> str:
    return rec.model_dump_json()


def from_json(cls: type[R], text: str | bytes | dict[str, Any]) -> R:
    if isinstance(text, dict):
        return cls.model_validate(text)
    return cls.model_validate_json(text)


class EvidenceRef(Record):
    """A pointer to one evidence unit (usually a sentence), e.g. ``doc_id=123_sentence_4``."""

    id: str
    doc_id: str | None = None
    text: str | None = None


class Claim(Record):
    """A claim to verify, with its gold label and gold evidence when known."""

    id: str
    text: str
    label: LabelField = None
    evidence: list[EvidenceRef] = Field(default_factory=list)
    dataset: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @property
    def evidence_ids(self) -> list[str]:
        return [e.id for e in self.evidence]


class Passage(Record):
    """One retrieval unit. ``sentence_ids`` are the stable evidence ids it is made of, in
    order, aligned with ``sentences``; ``id`` names the unit itself."""

    id: str
    doc_id: str
    title: str = ""
    text: str
    sentence_ids: list[str] = Field(default_factory=list)
    sentences: list[str] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Hit:
    """A passage returned by a retriever, with its score (higher is better).

    A slotted dataclass rather than a validated record: retrievers build thousands per
    batch and validation would dominate search time. ``to_dict``/``from_dict`` give the
    JSON round trip.
    """

    passage: Passage
    score: float

    @property
    def passage_id(self) -> str:
        return self.passage.id

    @property
    def doc_id(self) -> str:
        return self.passage.doc_id

    def to_dict(self) -> dict[str, Any]:
        return {"passage": self.passage.model_dump(mode="json"), "score": self.score}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Hit":
        try:
            return cls(passage=Passage.model_validate(data["passage"]), score=float(data["score"]))
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a hit record: {exc}") from None


# Format errors that only the parse of an ``<answer>`` block's content produces
# (factrl.protocol.tags.parse_answer): their presence means an answer block was found.
ANSWER_CONTENT_ERRORS = (
    "answer has no 'Label:' line",
    "unknown label ",
    "answer has no 'Evidence:' line",
    "evidence not in [[id]] format",
    "extra text in answer",
)


class Verdict(Record):
    """What an agent concluded: a label (None when it could not be parsed) and evidence ids.

    ``answered`` is True when an ``<answer>`` block was found. An unanswered verdict's
    empty evidence is "no answer", not "cited nothing", and never earns IoU(∅, ∅) = 1.
    """

    label: LabelField = None
    evidence_ids: list[str] = Field(default_factory=list)
    format_ok: bool = False
    format_errors: list[str] = Field(default_factory=list)
    answered: bool = False
    # Read from the model's label probabilities after the episode ended without an
    # <answer> (factrl.forced); never format_ok.
    forced: bool = False

    @model_validator(mode="before")
    @classmethod
    def _infer_answered(cls, data: Any) -> Any:
        # Records written before ``answered`` existed, and verdicts built by hand without
        # it, get it from what only an answer block yields: a label, evidence ids, or a
        # complaint about the answer's content. ``Verdict()`` stays unanswered.
        if isinstance(data, dict) and "answered" not in data:
            errors = data.get("format_errors") or []
            answered = (
                data.get("label") is not None
                or bool(data.get("evidence_ids"))
                or any(isinstance(e, str) and e.startswith(ANSWER_CONTENT_ERRORS) for e in errors)
            )
            data = {**data, "answered": answered}
        return data


class Message(Record):
    role: Literal["system", "user", "assistant", "tool"]
    content: str


class Turn(Record):
    """One segment of an episode's token stream.

    ``source="model"`` segments hold exactly the sampled token ids and their logprobs
    (``mask`` all 1); ``source="env"`` segments hold observation tokens the environment
    inserted (``mask`` all 0, no logprobs).
    """

    source: Literal["model", "env"]
    text: str
    token_ids: list[int]
    mask: list[int]
    logprobs: list[float] | None = None
    finish_reason: str | None = None
    seconds: float = 0.0


class RewardBreakdown(Record):
    """Named reward components and their total (what the trainer optimises)."""

    components: dict[str, float] = Field(default_factory=dict)
    total: float = 0.0


class Segment(Record):
    """One further context of an episode, with its own prompt and token stream: a
    sub-agent's episode run inside a turn (HARIS's search agent), or a context the
    environment reset (ProFact's per-question search). ``role`` names who generated its
    model turns; each turn keeps its own mask (1 = sampled, 0 = inserted)."""

    role: str
    prompt: list[Message] = Field(default_factory=list)
    prompt_ids: list[int] = Field(default_factory=list)
    turns: list[Turn] = Field(default_factory=list)


class Trajectory(Record):
    """A whole episode: prompt, every turn, the verdict, its reward and timings.

    ``prompt``/``prompt_ids``/``turns`` are the episode's opening context (the policy's;
    what a trainer optimises); ``segments`` holds every further context in the order it
    was opened (empty for single-context agents such as Veri-R1).
    """

    claim_id: str
    env: str
    claim: Claim
    prompt: list[Message]
    prompt_ids: list[int] = Field(default_factory=list)
    turns: list[Turn] = Field(default_factory=list)
    verdict: Verdict = Field(default_factory=Verdict)
    reward: RewardBreakdown = Field(default_factory=RewardBreakdown)
    searches: list[str] = Field(default_factory=list)
    retrieved_ids: list[str] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict)
    group_index: int = 0
    error: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    segments: list[Segment] = Field(default_factory=list)

    @property
    def completion_ids(self) -> list[int]:
        return [t for turn in self.turns for t in turn.token_ids]

    @property
    def completion_mask(self) -> list[int]:
        return [m for turn in self.turns for m in turn.mask]

    @property
    def model_text(self) -> str:
        return "".join(t.text for t in self.turns if t.source == "model")

    @property
    def transcript(self) -> str:
        return "".join(t.text for t in self.turns)


def dump_jsonl_line(rec: Record) -> str:
    return json.dumps(rec.model_dump(mode="json"), ensure_ascii=False) + "\n"
