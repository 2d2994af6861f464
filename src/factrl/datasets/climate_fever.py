"""Climate-FEVER (Diggelmann et al., 2020): real-world climate claims, each with five
Wikipedia sentences that annotators labelled against it.

``climate-fever.jsonl`` rows: ``{"claim_id", "claim", "claim_label": "SUPPORTS" |
"REFUTES" | "NOT_ENOUGH_INFO" | "DISPUTED", "evidences": [{"evidence_id": "Article:line",
"evidence_label", "article", "evidence", "entropy", "votes"}, ...]}``.

Gold evidence: the five sentences as released, ``EvidenceRef(id="<Article>:<line>",
doc_id="<Article>", text=<sentence>)``; their labels (normalised) and votes are kept in
``meta["evidence_labels"]`` / ``meta["evidence_votes"]`` (id → value), so a stricter
evidence score can keep only the SUPPORT/REFUTE ones. DISPUTED claims (evidence both
ways) are :attr:`Label.CONFLICTING`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, id_field, label_value, list_field, require, text_field
from factrl.datasets._records import json_records, split_file
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["ClimateFeverLoader", "climate_fever_article"]


def climate_fever_article(evidence_id: str) -> str:
    """``"Captain America: The First Avenger:145"`` → ``"Captain America: The First Avenger"``."""
    article, sep, line = evidence_id.rpartition(":")
    if not sep or not article or not line.isdigit():
        raise BadRow(f"evidence id {evidence_id!r} is not 'Article:line'")
    return article


def _parse(row: dict[str, Any]) -> Claim:
    claim_id = id_field(row, "claim_id")
    text = text_field(row, "claim")
    label = label_value(require(row, "claim_label"), "field 'claim_label'")
    refs: list[EvidenceRef] = []
    labels: dict[str, str] = {}
    votes: dict[str, list[str | None]] = {}
    for n, ev in enumerate(list_field(row, "evidences")):
        if not isinstance(ev, dict):
            raise BadRow(f"evidences[{n}] must be an object")
        try:
            eid = id_field(ev, "evidence_id")
            sentence = text_field(ev, "evidence")
            ev_label = label_value(require(ev, "evidence_label"), "field 'evidence_label'")
        except BadRow as exc:
            raise BadRow(f"evidences[{n}]: {exc}") from None
        if eid in labels:
            raise BadRow(f"evidences[{n}]: evidence id {eid!r} repeats")
        refs.append(EvidenceRef(id=eid, doc_id=climate_fever_article(eid), text=sentence))
        labels[eid] = ev_label.value
        if isinstance(ev.get("votes"), list):
            votes[eid] = ev["votes"]
    if not refs:
        raise BadRow("field 'evidences' is empty")
    return Claim(id=claim_id, text=text, label=label, evidence=refs, dataset="climate_fever",
                 meta={"evidence_labels": labels, "evidence_votes": votes})


@DATASETS.register("climate_fever")
class ClimateFeverLoader:
    """``source`` is ``climate-fever.jsonl`` (the only split: ``split`` is not used to
    pick a file), or a folder holding it or ``<split>.jsonl``."""

    name = "climate_fever"
    labels = (Label.SUPPORT, Label.REFUTE, Label.NEI, Label.CONFLICTING)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        path = split_file(source, ("climate-fever.jsonl", f"{split}.jsonl"), "Climate-FEVER", split)
        return collect_claims(path, _parse, on_error, limit, rows=json_records(path))
