"""``news_graded``: news claims with graded truth ratings and their raw documents (the
RAWFC and LIAR-RAW setting of FFRR, Zhang & Gao 2024), one claim per JSON line or one JSON
array (see ``docs/formats.md``)::

    {"id": "liar-1", "claim": "...", "label": "half-true", "explain": "...",
     "documents": [{"id": "r1", "title": "...", "text": "...", "url": "..."}]}

The grade (``label``) takes any spelling :func:`factrl.labels.normalise_grade` knows —
PolitiFact's true / mostly-true / half-true / barely-true / false / pants-fire (LIAR-RAW)
or Snopes' true / half / false (RAWFC) — and becomes a :class:`Label` through
:data:`factrl.labels.GRADE_LABELS` (true, mostly-true → SUPPORT; half-true → CONFLICTING;
barely-true, false, pants-fire → REFUTE). ``meta["grade"]`` keeps the canonical grade and
``meta["grade_raw"]`` the spelling in the file, so graded metrics (FFRR reports 6-way and
3-way macro F1) stay possible.

Each document is an ``EvidenceRef`` (the claim's raw reports, not annotated rationales):
``id = "<claim_id>_doc_<document id or position>"``, ``doc_id`` the same, ``text`` its
text (``title`` prepended when present). The released CofCED-style names are accepted
too: ``event_id`` for ``id``, ``reports`` for ``documents``, ``report_id``/``content``/
``link`` inside a document. Other top-level keys go to ``Claim.meta``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, id_field, require, text_field
from factrl.datasets._records import json_records, split_file
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import GRADE_LABELS, Grade, Label, UnknownLabelError, normalise_grade
from factrl.types import Claim, EvidenceRef

__all__ = ["NewsGradedLoader", "news_document_id"]

_KNOWN = {"id", "event_id", "claim", "label", "documents", "reports"}


def news_document_id(claim_id: str, document: str | int) -> str:
    return f"{claim_id}_doc_{document}"


def _documents(row: dict[str, Any], claim_id: str) -> list[EvidenceRef]:
    key = "documents" if "documents" in row else "reports"
    raw = row.get(key)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BadRow(f"field {key!r} must be a list of documents")
    refs: dict[str, EvidenceRef] = {}
    for j, doc in enumerate(raw):
        where = f"{key}[{j}]"
        if not isinstance(doc, dict):
            raise BadRow(f"{where} must be an object with 'text'")
        body = doc.get("text", doc.get("content"))
        if not isinstance(body, str) or not body.strip():
            raise BadRow(f"{where} needs a non-empty 'text' (or 'content')")
        own = doc.get("id", doc.get("report_id"))
        if own is not None and (isinstance(own, bool) or not isinstance(own, (str, int)) or not str(own).strip()):
            raise BadRow(f"{where}: 'id' must be a non-empty string or integer")
        did = news_document_id(claim_id, str(own).strip() if own is not None else j)
        if did in refs:
            raise BadRow(f"{where}: document id {did!r} repeats")
        title = doc.get("title")
        text = f"{title.strip()}. {body.strip()}" if isinstance(title, str) and title.strip() else body.strip()
        refs[did] = EvidenceRef(id=did, doc_id=did, text=text)
    return list(refs.values())


def _parse(row: dict[str, Any]) -> Claim:
    claim_id = id_field(row, "event_id" if "event_id" in row and "id" not in row else "id")
    text = text_field(row, "claim")
    raw = require(row, "label")
    try:
        grade = normalise_grade(raw)
    except UnknownLabelError:
        raise BadRow(f"field 'label': unknown grade {raw!r} (true, mostly-true, half-true/half, barely-true, false, pants-fire)") from None
    meta = {k: v for k, v in row.items() if k not in _KNOWN}
    meta.update(grade=grade.value, grade_raw=raw)
    return Claim(id=claim_id, text=text, label=GRADE_LABELS[grade], evidence=_documents(row, claim_id),
                 dataset="news_graded", meta=meta)


@DATASETS.register("news_graded")
class NewsGradedLoader:
    """``source`` is a ``.jsonl``/``.json`` file, or a folder holding ``<split>.jsonl`` or
    ``<split>.json``."""

    name = "news_graded"
    labels = (Label.SUPPORT, Label.REFUTE, Label.CONFLICTING)
    grades = tuple(Grade)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        path = split_file(source, (f"{split}.jsonl", f"{split}.json"), "news_graded", split)
        return collect_claims(path, _parse, on_error, limit, rows=json_records(path))
