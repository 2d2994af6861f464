"""The :class:`Document` record: a titled list of sentences with stable sentence ids."""

from __future__ import annotations

from pydantic import Field, model_validator

from factrl.types import Record

__all__ = ["Document", "sentence_id", "doc_id_from_sentence_id"]


class Document(Record):
    """One corpus document, already split into sentences.

    ``sentence_ids[i]`` is the stable evidence id of ``sentences[i]`` (e.g.
    ``Paris_sentence_0`` or ``doc_id=123_sentence_4``); gold evidence refers to these ids.
    """

    id: str
    title: str = ""
    sentences: list[str] = Field(default_factory=list)
    sentence_ids: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _aligned(self) -> "Document":
        if len(self.sentences) != len(self.sentence_ids):
            raise ValueError(
                f"document {self.id!r}: {len(self.sentences)} sentences but "
                f"{len(self.sentence_ids)} sentence ids"
            )
        return self


def sentence_id(prefix: str, index: int) -> str:
    """The id of sentence ``index`` (0-based) of a document whose id prefix is ``prefix``."""
    return f"{prefix}_sentence_{index}"


def doc_id_from_sentence_id(sid: str) -> str | None:
    """Recover the document id from an evidence id: ``"doc_id=12_sentence_3"`` → ``"12"``,
    ``"Paris_sentence_0"`` → ``"Paris"``; ``None`` when ``sid`` has no ``_sentence_<n>``
    suffix."""
    prefix, sep, index = sid.rpartition("_sentence_")
    if not sep or not prefix or not index.isdigit():
        return None
    return prefix.removeprefix("doc_id=")
