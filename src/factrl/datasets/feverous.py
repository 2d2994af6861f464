"""FEVEROUS (Aly et al., 2021): claims over Wikipedia sentences, table cells and lists.

The release (``feverous_<split>_challenges.jsonl``) has one object per line: ``{"id",
"claim", "label": "SUPPORTS" | "REFUTES" | "NOT ENOUGH INFO", "evidence": [{"content":
[element ids], "context": {...}}, ...], "challenge", "annotator_operations"}``. Its first
line is an empty header row (``"id": ""``), which is skipped and not counted as an error.

Element ids are FEVEROUS's own (``Page_sentence_3``, ``Page_cell_0_1_2``,
``Page_header_cell_0_0_1``, ``Page_table_caption_0``, ``Page_item_1_4``, ``Page_title``) and
are kept as evidence ids: the union of every evidence set, deduplicated in order, with
``doc_id`` the page. Each set's ids are in ``meta["evidence_sets"]``; ``challenge`` is in
meta. No text ships with the claims (it is in the FEVEROUS Wikipedia database); for the
sentence-only subset with inline text see ``feverous_s``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, id_field, list_field, optional_label, text_field
from factrl.datasets._records import split_file
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["FeverousLoader", "feverous_page"]

_ELEMENT = re.compile(r"^(?P<page>.+?)_(?:sentence_\d+|cell_\d+_\d+_\d+|header_cell_\d+_\d+_\d+|table_caption_\d+|item_\d+_\d+|section_\d+|title)$")


def feverous_page(element_id: str) -> str | None:
    """The page of a FEVEROUS element id (``"Aramais Yepiskoposyan_cell_0_1_1"`` →
    ``"Aramais Yepiskoposyan"``), or None when the id has no known element suffix."""
    m = _ELEMENT.match(element_id)
    return m.group("page") if m else None


def _parse(row: dict[str, Any]) -> Claim:
    claim_id = id_field(row, "id")
    text = text_field(row, "claim")
    label = optional_label(row)
    refs: dict[str, EvidenceRef] = {}
    sets: list[list[str]] = []
    for n, ev_set in enumerate(list_field(row, "evidence", required=False)):
        content = ev_set.get("content") if isinstance(ev_set, dict) else None
        if not isinstance(content, list) or not all(isinstance(e, str) and e.strip() for e in content):
            raise BadRow(f"evidence[{n}] must be an object with 'content': a list of element ids")
        ids = [e.strip() for e in content]
        for eid in ids:
            page = feverous_page(eid)
            if page is None:
                raise BadRow(f"evidence[{n}]: {eid!r} is not a FEVEROUS element id (Page_sentence_N, Page_cell_T_R_C, ...)")
            refs.setdefault(eid, EvidenceRef(id=eid, doc_id=page))
        sets.append(ids)
    if label in (Label.SUPPORT, Label.REFUTE) and not refs:
        raise BadRow(f"a {label} claim needs evidence")
    meta: dict[str, Any] = {"evidence_sets": sets}
    if isinstance(row.get("challenge"), str):
        meta["challenge"] = row["challenge"]
    return Claim(id=claim_id, text=text, label=label, evidence=list(refs.values()), dataset="feverous", meta=meta)


def _rows(path: Path) -> Iterator[tuple[int, Any]]:
    from factrl.corpus import iter_json_lines

    for line_no, value in iter_json_lines(path):
        if isinstance(value, dict) and value.get("id") == "" and not value.get("claim"):
            continue  # the release's header row
        yield line_no, value


@DATASETS.register("feverous")
class FeverousLoader:
    """``source`` is a ``.jsonl`` file, or a folder holding
    ``feverous_<split>_challenges.jsonl`` or ``<split>.jsonl``."""

    name = "feverous"
    labels = (Label.SUPPORT, Label.REFUTE, Label.NEI)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        path = split_file(source, (f"feverous_{split}_challenges.jsonl", f"{split}.jsonl"), "FEVEROUS", split)
        return collect_claims(path, _parse, on_error, limit, rows=_rows(path))
