"""factrl's generic claim format, one JSON object per line (see ``docs/formats.md``)::

    {"id": "c1", "claim": "text", "label": "SUPPORTS", "evidence": ["Doc_sentence_0"],
     "evidence_text": {"Doc_sentence_0": "..."}, "dataset": "mine", "meta": {...}}

Only ``id`` and ``claim`` are required. ``label`` takes any known spelling (or null).
Other top-level keys are kept in ``Claim.meta``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.corpus import doc_id_from_sentence_id
from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, id_field, label_value, text_field
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["JsonlLoader", "parse_row"]

_KNOWN = {"id", "claim", "label", "evidence", "evidence_text", "dataset", "meta"}


def _evidence(row: dict[str, Any]) -> list[EvidenceRef]:
    ids = row.get("evidence")
    ids = [] if ids is None else ids
    if not isinstance(ids, list) or not all(isinstance(i, str) and i.strip() for i in ids):
        raise BadRow("field 'evidence' must be a list of non-empty evidence id strings")
    texts = row.get("evidence_text")
    texts = {} if texts is None else texts
    if not isinstance(texts, dict) or not all(isinstance(v, str) for v in texts.values()):
        raise BadRow("field 'evidence_text' must be an object {evidence id: text}")
    stray = [k for k in texts if k not in ids]
    if stray:
        raise BadRow(f"field 'evidence_text' has ids not listed in 'evidence': {', '.join(stray[:5])}")
    refs: dict[str, EvidenceRef] = {}
    for i in ids:
        refs.setdefault(i, EvidenceRef(id=i, doc_id=doc_id_from_sentence_id(i), text=texts.get(i)))
    return list(refs.values())


def parse_row(row: dict[str, Any]) -> Claim:
    """One row of the format as a Claim; raises ``BadRow`` naming the bad field."""
    claim_id = id_field(row, "id")
    text = text_field(row, "claim")
    label = None if row.get("label") is None else label_value(row["label"])
    dataset = row.get("dataset", "jsonl")
    if not isinstance(dataset, str):
        raise BadRow("field 'dataset' must be a string")
    meta = row.get("meta", {})
    if not isinstance(meta, dict):
        raise BadRow("field 'meta' must be an object")
    extra = {k: v for k, v in row.items() if k not in _KNOWN}
    return Claim(id=claim_id, text=text, label=label, evidence=_evidence(row), dataset=dataset, meta={**extra, **meta})


@DATASETS.register("jsonl")
class JsonlLoader:
    """``source`` is a ``.jsonl`` file, or a folder holding ``<split>.jsonl``."""

    name = "jsonl"
    labels = tuple(Label)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        source = Path(source)
        path = source / f"{split}.jsonl" if source.is_dir() else source
        if not path.is_file():
            raise FileNotFoundError(f"claims file not found: {path}")
        return collect_claims(path, parse_row, on_error, limit)
