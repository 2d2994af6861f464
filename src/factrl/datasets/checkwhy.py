"""CheckWhy (Si et al., 2024): causal claims with evidence and an argument structure, in
the layout of the HARIS authors' CheckWhy test set (``samples/haris_checkwhy_sample.json``).

One JSON array of ``{"checkwhy-id", "claim", "label", "cause", "effect", "evidences":
[{"evidence_id", "useful", "leaf", "content"}], "argument_structure", "used_evidence_ids",
"leaf_evidence_ids", "human_exp", "split", ...}``. ``evidences`` mixes the claim's own
evidence (``useful`` = 1, listed in ``used_evidence_ids``) with distractors taken from
other claims.

Gold evidence: the used evidences (``used_evidence_ids``; without it, those with
``useful`` = 1). Their texts are numbered per file, not per claim — the ``k``-th distinct
evidence text is ``checkwhy_evidence_<k>`` (``doc_id`` the same) — so a text that is one
claim's evidence and another's distractor has one id. ``meta["local_ids"]`` maps the
claim's own numbers (``Evidence8`` in ``argument_structure``) to those ids;
``meta["distractors"]`` holds the unused evidences as ``{"id", "text"}``; ``cause``,
``effect``, ``argument_structure`` and ``human_exp`` are kept too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, TextIds, id_field, int_field, label_value, list_field, require, text_field
from factrl.datasets._records import json_records, split_file
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["CheckWhyLoader", "checkwhy_ids", "parse_checkwhy"]

_KEEP = ("cause", "effect", "argument_structure", "human_exp", "split", "source")


def checkwhy_ids() -> TextIds:
    return TextIds(lambda group, n: f"{group}_evidence_{n}")


def _evidences(row: dict[str, Any]) -> list[tuple[int, str, bool]]:
    out = []
    for n, ev in enumerate(list_field(row, "evidences")):
        if not isinstance(ev, dict):
            raise BadRow(f"evidences[{n}] must be an object")
        try:
            local = int_field(ev, "evidence_id")
            content = text_field(ev, "content")
        except BadRow as exc:
            raise BadRow(f"evidences[{n}]: {exc}") from None
        out.append((local, content, ev.get("useful") in (1, True, "1")))
    locals_ = [x[0] for x in out]
    if len(set(locals_)) != len(locals_):
        raise BadRow("field 'evidences' repeats an evidence_id")
    return out


def parse_checkwhy(row: dict[str, Any], ids: TextIds, *, dataset: str = "checkwhy") -> Claim:
    """One CheckWhy row → a claim (ids from ``ids``, shared across the file)."""
    claim_id = id_field(row, "checkwhy-id" if "checkwhy-id" in row else "id")
    text = text_field(row, "claim")
    label = label_value(require(row, "label"), "field 'label'")
    evidences = _evidences(row)
    if row.get("used_evidence_ids") is not None:
        raw_used = list_field(row, "used_evidence_ids")
        if any(isinstance(u, bool) or not isinstance(u, int) for u in raw_used):
            raise BadRow("field 'used_evidence_ids' must be a list of integers")
        used = set(raw_used)
        unknown = used - {local for local, _, _ in evidences}
        if unknown:
            raise BadRow(f"used_evidence_ids {sorted(unknown)} are not evidence_ids of this claim")
    else:
        used = {local for local, _, useful in evidences if useful}
    if label is Label.SUPPORT and not used:
        raise BadRow("a supported claim needs used evidence")
    local_ids = {}
    gold: list[EvidenceRef] = []
    distractors = []
    for local, content, _ in evidences:  # ids only once the whole row is known to be good
        eid = ids.get("checkwhy", content)
        local_ids[str(local)] = eid
        if local in used:
            gold.append(EvidenceRef(id=eid, doc_id=eid, text=content))
        else:
            distractors.append({"id": eid, "text": content})
    meta: dict[str, Any] = {k: row[k] for k in _KEEP if row.get(k) is not None}
    meta.update(local_ids=local_ids, distractors=distractors)
    if row.get("num_hops") is not None:
        meta["num_hops"] = int_field(row, "num_hops", minimum=1)
    return Claim(id=claim_id, text=text, label=label, evidence=gold, dataset=dataset, meta=meta)


@DATASETS.register("checkwhy")
class CheckWhyLoader:
    """``source`` is a JSON file (array, or JSON lines), or a folder holding
    ``<split>.json``."""

    name = "checkwhy"
    labels = (Label.SUPPORT, Label.REFUTE, Label.NEI)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        path = split_file(source, (f"{split}.json", f"{split}.jsonl"), "CheckWhy", split)
        ids = checkwhy_ids()
        return collect_claims(path, lambda row: parse_checkwhy(row, ids), on_error, limit, rows=json_records(path))
