"""EX-FEVER (Ma et al., 2023): 2- and 3-hop claims with human-written explanations.

Veri-R1 (§3.1, App.) uses EX-FEVER's gold labels and evidence pages, not the
explanations, sampling its evaluation set evenly per label from the dev set; HARIS uses
the human explanations as the evidence text (see ``haris``). The release is CSV with a
header line. Assumed columns (as in the authors' repository, ``data/mini_test.csv``):

    claim            the claim
    explanation      the annotators' explanation (HARIS uses it as the evidence text)
    label            SUPPORT | REFUTE | NOT ENOUGH INFO
    golden entity    Python-literal list of the gold Wikipedia pages, e.g.
                     "['Giacomo_Casanova', 'Cardinal_(Catholicism)']"
    mention          Python-literal list of the bridging mentions
    result entity, discard number    retrieval bookkeeping (kept in meta when non-empty)

The release has no id column: a claim's id is the ``id`` column when there is one, else
the unnamed first column a pandas export adds, else the row's 0-based position among the
data rows. Gold evidence is document level, as Veri-R1 scores it: one ``EvidenceRef`` per
gold page with id and ``doc_id`` the page title with underscores as spaces
(``"Cardinal (Catholicism)"``) and no text. ``meta["num_hops"]`` is the number of gold
pages; ``meta["explanation"]`` and ``meta["mentions"]`` keep the rest.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from factrl.corpus.errors import OnError, RowError
from factrl.datasets._fields import BadRow, label_value, text_field
from factrl.datasets._records import csv_records, split_file
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["ExFeverLoader", "exfever_title"]

_ID_COLUMNS = ("id", "", "Unnamed: 0")


def exfever_title(page: str) -> str:
    """``"Cardinal_(Catholicism)"`` → ``"Cardinal (Catholicism)"``."""
    return page.replace("_", " ").strip()


def _literal_list(row: dict[str, Any], name: str, *, required: bool) -> list[str]:
    raw = row.get(name)
    if raw is None or not str(raw).strip():
        if required:
            raise BadRow(f"column {name!r} is empty")
        return []
    try:
        value = ast.literal_eval(str(raw).strip())
    except (ValueError, SyntaxError):
        raise BadRow(f"column {name!r} is not a list literal: {str(raw)[:60]!r}") from None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise BadRow(f"column {name!r} must be a list of non-empty strings, got {str(raw)[:60]!r}")
    return value


def _parse(row: dict[str, Any]) -> Claim:
    text = text_field(row, "claim")
    raw_label = row.get("label")
    if not isinstance(raw_label, str) or not raw_label.strip():
        raise BadRow("column 'label' is empty")
    label = label_value(raw_label.strip(), "column 'label'")
    pages = list(dict.fromkeys(exfever_title(p) for p in _literal_list(row, "golden entity", required=True)))
    meta: dict[str, Any] = {"num_hops": len(pages)}
    if (row.get("explanation") or "").strip():
        meta["explanation"] = row["explanation"].strip()
    meta["mentions"] = _literal_list(row, "mention", required=False)
    for column in ("result entity", "discard number"):
        if (row.get(column) or "").strip():
            meta[column.replace(" ", "_")] = row[column].strip()
    evidence = [EvidenceRef(id=p, doc_id=p) for p in pages]
    return Claim(id=row["_claim_id"], text=text, label=label, evidence=evidence, dataset="exfever", meta=meta)


def _numbered(path: Path) -> Iterator[tuple[int, Any]]:
    for position, (line, row) in enumerate(csv_records(path)):
        if not isinstance(row, RowError):
            own = next((row[c].strip() for c in _ID_COLUMNS if (row.get(c) or "").strip()), None)
            row = {**row, "_claim_id": own if own is not None else str(position)}
        yield line, row


@DATASETS.register("exfever")
class ExFeverLoader:
    """``source`` is a CSV file, or a folder holding ``<split>.csv``."""

    name = "exfever"
    labels = (Label.SUPPORT, Label.REFUTE, Label.NEI)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        path = split_file(source, (f"{split}.csv",), "EX-FEVER", split)
        return collect_claims(path, _parse, on_error, limit, rows=_numbered(path))
