"""Retrieval units: fixed windows of consecutive sentences (Veri-R1 groups 3)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from factrl.corpus.document import Document
from factrl.types import Passage

__all__ = ["UnitReport", "make_units"]


@dataclass
class UnitReport:
    """Counts from :func:`make_units`; documents without sentences make no unit."""

    documents: int = 0
    units: int = 0
    empty_documents: int = 0


def make_units(
    docs: Iterable[Document], unit_sentences: int = 3, *, report: UnitReport | None = None
) -> list[Passage]:
    """Cut each document into non-overlapping windows of ``unit_sentences`` sentences.

    Unit ``j`` of document ``d`` is ``Passage(id=f"{d.id}#{j}", doc_id=d.id, title=d.title,
    text=" ".join(sentences), sentences=..., sentence_ids=...)``; the last window may be
    shorter. ``unit_sentences=0`` makes one unit per whole document. A document with no
    sentences makes no unit and is counted in ``report.empty_documents``.
    """
    if isinstance(unit_sentences, bool) or not isinstance(unit_sentences, int) or unit_sentences < 0:
        raise ValueError(f"unit_sentences must be an integer >= 0, got {unit_sentences!r}")
    report = report if report is not None else UnitReport()
    units: list[Passage] = []
    for doc in docs:
        report.documents += 1
        n = len(doc.sentences)
        if n == 0:
            report.empty_documents += 1
            continue
        size = unit_sentences or n
        for j, start in enumerate(range(0, n, size)):
            sents = doc.sentences[start : start + size]
            units.append(
                Passage(
                    id=f"{doc.id}#{j}",
                    doc_id=doc.id,
                    title=doc.title,
                    text=" ".join(sents),
                    sentences=list(sents),
                    sentence_ids=list(doc.sentence_ids[start : start + size]),
                )
            )
    report.units += len(units)
    return units
