"""HoVer (Jiang et al., 2020): many-hop claims over the 2017 Wikipedia abstracts.

The release (``hover_<split>_release_v1.1.json``) is one JSON array of ``{"uid", "claim",
"supporting_facts": [[title, sent_idx], ...], "label": "SUPPORTED" | "NOT_SUPPORTED",
"num_hops", "hpqa_id"}``; the test split has no label or supporting facts.

Gold evidence: ``<title>_sentence_<sent_idx>`` per supporting fact (deduplicated, in
order), ``doc_id`` the title, no text (HoVer ships ids only; the text is in its Wikipedia
dump). ``num_hops`` (2–4) goes to ``meta["num_hops"]``, ``hpqa_id`` to ``meta`` as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.corpus import sentence_id
from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, id_field, int_field, list_field, optional_label, text_field
from factrl.datasets._records import json_records, split_file
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["HoverLoader"]


def _facts(raw: list[Any]) -> list[EvidenceRef]:
    refs: dict[str, EvidenceRef] = {}
    for n, fact in enumerate(raw):
        if (not isinstance(fact, list) or len(fact) != 2 or not isinstance(fact[0], str) or not fact[0].strip()
                or isinstance(fact[1], bool) or not isinstance(fact[1], int) or fact[1] < 0):
            raise BadRow(f"supporting_facts[{n}] must be [title, sentence index >= 0], got {fact!r}")
        title = fact[0].strip()
        sid = sentence_id(title, fact[1])
        refs.setdefault(sid, EvidenceRef(id=sid, doc_id=title))
    return list(refs.values())


def _parse(row: dict[str, Any]) -> Claim:
    claim_id = id_field(row, "uid")
    text = text_field(row, "claim")
    label = optional_label(row)
    evidence = _facts(list_field(row, "supporting_facts", required=False))
    if label is not None and not evidence:
        raise BadRow("a labelled claim needs supporting_facts")
    meta: dict[str, Any] = {}
    if row.get("num_hops") is not None:
        meta["num_hops"] = int_field(row, "num_hops", minimum=1)
    if row.get("hpqa_id") is not None:
        meta["hpqa_id"] = str(row["hpqa_id"])
    return Claim(id=claim_id, text=text, label=label, evidence=evidence, dataset="hover", meta=meta)


@DATASETS.register("hover")
class HoverLoader:
    """``source`` is the release's JSON file (an array; JSON lines also read), or a folder
    holding ``hover_<split>_release_v1.1.json`` or ``<split>.json``."""

    name = "hover"
    labels = (Label.SUPPORT, Label.REFUTE)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        path = split_file(source, (f"hover_{split}_release_v1.1.json", f"{split}.json", f"{split}.jsonl"), "HoVer", split)
        return collect_claims(path, _parse, on_error, limit, rows=json_records(path))
