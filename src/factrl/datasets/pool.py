"""Closed retrieval corpora from the gold evidence of a dataset's claims.

Where a dataset ships its gold evidence as text (FEVEROUS-S, Climate-FEVER, AVeriTeC's
answers, the HARIS sets, CheckWhy, graded news documents) but not the collection it came
from, pooling the evidence of every claim of a split gives a closed corpus in which each
claim must find its evidence among everyone else's.

Layout, chosen so that the evidence ids an index cites *are* the gold ids: every
``EvidenceRef`` becomes one sentence of the document named by its ``doc_id`` (its own id
when it has none), written as a ``jsonl`` corpus row that lists its ``sentences`` and
``sentence_ids`` (the reader keeps them one for one, never re-splitting or renumbering)::

    {"id": "Global warming", "title": "Global warming", "text": "<sentences joined>",
     "sentences": ["...", "..."], "sentence_ids": ["Global warming:14", "Global warming:178"]}

A document's sentences are ordered by the number their ids end in when all have one
(``:14``, ``_sentence_3``), else in the order first met. Its title is the ``doc_id``
(a page or article) unless the document is a single unit named by its own id
(AVeriTeC's ``<claim>_qa_<i>``), whose title stays empty. An id met again with the same
text is pooled once; with another text (or in another document) it is a conflict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from factrl.corpus import Document
from factrl.types import Claim

__all__ = ["PoolError", "PoolReport", "pool_evidence", "write_pooled_corpus"]

_TRAILING_NUMBER = re.compile(r"(\d+)$")


class PoolError(ValueError):
    """The evidence cannot be pooled: no text at all, or one id with two texts."""


@dataclass
class PoolReport:
    """What pooling saw: claims, evidence references, the units and documents written,
    references that repeated a pooled unit, references without text, and conflicts (one
    id with two texts or two documents; the first is kept)."""

    claims: int = 0
    references: int = 0
    units: int = 0
    documents: int = 0
    repeated: int = 0
    missing_text: int = 0
    conflicts: list[str] = field(default_factory=list)


def _order(ids: list[str]) -> list[str]:
    """By the number the ids end in when every id has one (stable on ties), else as met."""
    numbers = [m.group(1) for i in ids if (m := _TRAILING_NUMBER.search(i))]
    if len(numbers) != len(ids):
        return ids
    return [i for _, i in sorted(zip(map(int, numbers), ids), key=lambda pair: pair[0])]


def pool_evidence(
    claims: Iterable[Claim], *, on_conflict: Literal["raise", "count"] = "raise"
) -> tuple[list[Document], PoolReport]:
    """The documents of the pooled corpus (see the module docstring), in the order their
    first unit was met, and a report. Raises :class:`PoolError` on a conflicting id
    (unless ``on_conflict="count"``) and when no reference has any text."""
    if on_conflict not in ("raise", "count"):
        raise ValueError(f"on_conflict must be 'raise' or 'count', got {on_conflict!r}")
    report = PoolReport()
    text_of: dict[str, tuple[str, str, str]] = {}  # unit id -> (text, doc id, first claim)
    docs: dict[str, list[str]] = {}  # doc id -> unit ids, in the order met
    for claim in claims:
        report.claims += 1
        for ref in claim.evidence:
            report.references += 1
            text = (ref.text or "").strip()
            if not text:
                report.missing_text += 1
                continue
            doc_id = ref.doc_id or ref.id
            seen = text_of.get(ref.id)
            if seen is None:
                text_of[ref.id] = (text, doc_id, claim.id)
                docs.setdefault(doc_id, []).append(ref.id)
                continue
            if seen[:2] == (text, doc_id):
                report.repeated += 1
                continue
            what = "text" if seen[0] != text else "document"
            message = (f"evidence id {ref.id!r} has another {what} in claim {claim.id!r} than in claim {seen[2]!r}: "
                       f"{(seen[0] if what == 'text' else seen[1])[:80]!r} vs {(text if what == 'text' else doc_id)[:80]!r}")
            if on_conflict == "raise":
                raise PoolError(message)
            report.conflicts.append(message)
    if not text_of:
        raise PoolError(
            f"no evidence text to pool ({report.references} evidence references in {report.claims} claims, none with text): "
            "this dataset ships gold ids only, whose text is in a collection not provided here"
        )
    out: list[Document] = []
    for doc_id, unit_ids in docs.items():
        ordered = _order(unit_ids)
        title = "" if ordered == [doc_id] else doc_id
        out.append(Document(id=doc_id, title=title, sentences=[text_of[i][0] for i in ordered], sentence_ids=ordered))
    report.units, report.documents = len(text_of), len(out)
    return out, report


def write_pooled_corpus(documents: Iterable[Document], path: Path | str) -> int:
    """Write ``documents`` as factrl ``jsonl`` corpus rows listing their sentences and
    sentence ids; returns the number of rows written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        for doc in documents:
            row = {"id": doc.id, "title": doc.title, "text": " ".join(doc.sentences),
                   "sentences": doc.sentences, "sentence_ids": doc.sentence_ids}
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    tmp.replace(path)
    return n
