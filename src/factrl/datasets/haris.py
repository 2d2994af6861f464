"""The HARIS authors' test sets (Hu et al., 2025): HoVer, EX-FEVER and CheckWhy claims with
their gold evidence inline, one JSON array per set (``samples/haris_*_sample.json``).

Each row is recognised as one of three variants, by its ``source`` field or, failing
that, by the fields it has:

``hover``     ``{"id", "claim", "label": "supported" | "unsupported", "num_hops",
              "evidence": <gold paragraphs joined by newlines>, "source": "hover"}``
``ex_fever``  ``{"id", "claim", "label", "num_hops", "explanation", "source": "ex-fever"}``
              — HARIS uses the human explanation as the evidence
``checkwhy``  the CheckWhy layout (``checkwhy-id``, ``evidences``, ...; see
              :mod:`factrl.datasets.checkwhy`)

Gold evidence: each paragraph (``hover``) or the explanation (``ex_fever``) is one unit.
Texts carry no ids, so they are numbered per file and variant: the ``k``-th distinct
paragraph is ``hover_paragraph_<k>``, the ``k``-th explanation
``ex_fever_explanation_<k>``, CheckWhy evidence ``checkwhy_evidence_<k>`` (``doc_id`` the id
itself); a paragraph several claims share gets one id. ``meta["variant"]`` names the
variant; ``num_hops`` is in ``meta["num_hops"]``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, TextIds, id_field, int_field, label_value, require, text_field
from factrl.datasets._records import json_records, split_file
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.datasets.checkwhy import checkwhy_ids, parse_checkwhy
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["HarisLoader", "haris_variant"]

_SOURCES = {"hover": "hover", "ex-fever": "ex_fever", "ex_fever": "ex_fever", "exfever": "ex_fever"}


def haris_variant(row: dict[str, Any]) -> str:
    """``hover``, ``ex_fever`` or ``checkwhy``; raises BadRow when the row fits none."""
    source = row.get("source")
    if isinstance(source, str):
        key = source.strip().lower()
        if key.startswith("checkwhy"):
            return "checkwhy"
        if key in _SOURCES:
            return _SOURCES[key]
    if "evidences" in row or "checkwhy-id" in row:
        return "checkwhy"
    if "explanation" in row:
        return "ex_fever"
    if "evidence" in row:
        return "hover"
    raise BadRow("not a HARIS row: no 'evidence' (hover), 'explanation' (ex_fever) or 'evidences' (checkwhy)")


def _units(variant: str, row: dict[str, Any]) -> list[str]:
    if variant == "hover":
        return [p.strip() for p in text_field(row, "evidence").split("\n") if p.strip()]
    return [text_field(row, "explanation")]


def _parser(ids: TextIds, checkwhy: TextIds) -> Callable[[dict[str, Any]], Claim]:
    def parse(row: dict[str, Any]) -> Claim:
        variant = haris_variant(row)
        if variant == "checkwhy":
            claim = parse_checkwhy(row, checkwhy, dataset="haris")
            claim.meta["variant"] = variant
            return claim
        claim_id = id_field(row, "id")
        text = text_field(row, "claim")
        label = label_value(require(row, "label"), "field 'label'")
        meta: dict[str, Any] = {"variant": variant}
        if row.get("num_hops") is not None:
            meta["num_hops"] = int_field(row, "num_hops", minimum=1)
        units = _units(variant, row)
        kind = "paragraph" if variant == "hover" else "explanation"
        refs: dict[str, EvidenceRef] = {}
        for unit in units:
            eid = ids.get(f"{variant}_{kind}", unit)
            refs.setdefault(eid, EvidenceRef(id=eid, doc_id=eid, text=unit))
        return Claim(id=claim_id, text=text, label=label, evidence=list(refs.values()), dataset="haris", meta=meta)

    return parse


@DATASETS.register("haris")
class HarisLoader:
    """``source`` is one of the authors' JSON files (array, or JSON lines), or a folder
    holding ``<split>.json`` (e.g. ``hover_2hops.json``: pass ``split="hover_2hops"``)."""

    name = "haris"
    labels = (Label.SUPPORT, Label.REFUTE)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        path = split_file(source, (f"{split}.json", f"{split}.jsonl"), "HARIS", split)
        ids = TextIds(lambda group, n: f"{group}_{n}")
        return collect_claims(path, _parser(ids, checkwhy_ids()), on_error, limit, rows=json_records(path))
