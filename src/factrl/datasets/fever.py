"""FEVER (Thorne et al., 2018): claims against the 2017 Wikipedia dump, as JSON lines.

Rows: ``{"id", "verifiable", "label", "claim", "evidence": [[[annotation_id, evidence_id,
page, sentence_idx], ...], ...]}`` (the paper and shared-task dev/test layout). Each inner
list is one *evidence set* (all of its sentences together verify the claim); NOT ENOUGH
INFO claims have ``[[[annotation_id, null, null, null]]]``.

Gold evidence is the union of all sets, deduplicated in order, as
``<page>_sentence_<idx>`` with the page id as released (``Soul_Food_-LRB-film-RRB-``), so
a corpus built from FEVER's ``wiki-pages`` dump with ``id = page`` gives the same ids. The
sets themselves are kept in ``meta["evidence_sets"]`` (lists of those ids) for the FEVER
score, which needs one complete set. The dump is not shipped: evidence has no text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.corpus import sentence_id
from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, id_field, list_field, optional_label, text_field
from factrl.datasets._records import split_file
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["FeverLoader"]


def _evidence_sets(raw: list[Any]) -> list[list[tuple[str, int]]]:
    sets: list[list[tuple[str, int]]] = []
    for n, ev_set in enumerate(raw):
        if not isinstance(ev_set, list):
            raise BadRow(f"evidence[{n}] must be a list of [annotation_id, evidence_id, page, sentence_idx]")
        sentences: list[tuple[str, int]] = []
        for m, item in enumerate(ev_set):
            where = f"evidence[{n}][{m}]"
            if not isinstance(item, list) or len(item) != 4:
                raise BadRow(f"{where} must be [annotation_id, evidence_id, page, sentence_idx]")
            page, idx = item[2], item[3]
            if page is None and idx is None:  # NOT ENOUGH INFO: an annotation without evidence
                continue
            if not isinstance(page, str) or not page.strip():
                raise BadRow(f"{where}: page must be a non-empty string, got {page!r}")
            if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0:
                raise BadRow(f"{where}: sentence index must be an integer >= 0, got {idx!r}")
            sentences.append((page.strip(), idx))
        if sentences:
            sets.append(sentences)
    return sets


def _parse(row: dict[str, Any]) -> Claim:
    claim_id = id_field(row, "id")
    text = text_field(row, "claim")
    label = optional_label(row)
    sets = _evidence_sets(list_field(row, "evidence", required=False))
    if label in (Label.SUPPORT, Label.REFUTE) and not sets:
        raise BadRow(f"a {label} claim needs at least one evidence sentence")
    refs: dict[str, EvidenceRef] = {}
    for ev_set in sets:
        for page, idx in ev_set:
            sid = sentence_id(page, idx)
            refs.setdefault(sid, EvidenceRef(id=sid, doc_id=page))
    meta: dict[str, Any] = {"evidence_sets": [[sentence_id(p, i) for p, i in s] for s in sets]}
    if isinstance(row.get("verifiable"), str):
        meta["verifiable"] = row["verifiable"]
    return Claim(id=claim_id, text=text, label=label, evidence=list(refs.values()), dataset="fever", meta=meta)


@DATASETS.register("fever")
class FeverLoader:
    """``source`` is a ``.jsonl`` file, or a folder holding ``<split>.jsonl``,
    ``paper_<split>.jsonl`` or ``shared_task_<split>.jsonl``."""

    name = "fever"
    labels = (Label.SUPPORT, Label.REFUTE, Label.NEI)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        names = (f"{split}.jsonl", f"paper_{split}.jsonl", f"shared_task_{split}.jsonl")
        return collect_claims(split_file(source, names, "FEVER", split), _parse, on_error, limit)
