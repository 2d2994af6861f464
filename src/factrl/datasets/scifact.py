"""SciFact (Wadden et al., 2020): claims with rationale sentences in a 5,183-abstract corpus.

``source`` is a folder holding ``claims_<split>.jsonl`` and ``corpus.jsonl``. Claim rows are
``{"id", "claim", "evidence": {doc_id: [{"sentences": [i, ...], "label": "SUPPORT" |
"CONTRADICT"}]}, "cited_doc_ids": [...]}``; the test split has no ``evidence``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.corpus import read_corpus
from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, id_field, label_value, text_field
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["SciFactLoader", "scifact_sentence_id"]


def scifact_sentence_id(doc_id: str | int, index: int) -> str:
    """The evidence id of sentence ``index`` of abstract ``doc_id`` (as the corpus reader)."""
    return f"doc_id={doc_id}_sentence_{index}"


def _label_and_evidence(evidence: Any, corpus: dict[str, list[str]]) -> tuple[Label, list[EvidenceRef]]:
    if not isinstance(evidence, dict):
        raise BadRow(f"field 'evidence' must be an object {{doc_id: [sets]}}, got {type(evidence).__name__}")
    if not evidence:
        return Label.NEI, []
    labels: set[Label] = set()
    refs: dict[str, EvidenceRef] = {}  # insertion-ordered, so dedup keeps first order
    for doc_key, sets in evidence.items():
        doc = str(doc_key).strip()
        if doc not in corpus:
            raise BadRow(f"evidence cites document {doc} which is not in corpus.jsonl")
        sentences = corpus[doc]
        if not isinstance(sets, list) or not sets:
            raise BadRow(f"evidence for document {doc} must be a non-empty list of sets")
        for n, ev_set in enumerate(sets):
            where = f"evidence[{doc}][{n}]"
            if not isinstance(ev_set, dict) or "sentences" not in ev_set or "label" not in ev_set:
                raise BadRow(f"{where} must be an object with 'sentences' and 'label'")
            labels.add(label_value(ev_set["label"], f"{where}.label"))
            idx = ev_set["sentences"]
            if not isinstance(idx, list) or not idx:
                raise BadRow(f"{where}.sentences must be a non-empty list of sentence indices")
            for i in idx:
                if isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < len(sentences):
                    raise BadRow(f"{where}.sentences: {i!r} is not a sentence index of document {doc} ({len(sentences)} sentences)")
                sid = scifact_sentence_id(doc, i)
                refs.setdefault(sid, EvidenceRef(id=sid, doc_id=doc, text=sentences[i]))
    if labels - {Label.SUPPORT, Label.REFUTE}:
        raise BadRow(f"evidence labels must be SUPPORT or CONTRADICT, got {sorted(str(x) for x in labels)}")
    label = labels.pop() if len(labels) == 1 else Label.CONFLICTING
    return label, list(refs.values())


def _cited(row: dict[str, Any]) -> list[str]:
    cited = row.get("cited_doc_ids", [])
    if not isinstance(cited, list) or any(isinstance(c, bool) or not isinstance(c, (int, str)) for c in cited):
        raise BadRow("field 'cited_doc_ids' must be a list of document ids")
    return [str(c) for c in cited]


def _parse(row: dict[str, Any], corpus: dict[str, list[str]]) -> Claim:
    claim_id = id_field(row, "id")
    text = text_field(row, "claim")
    cited = _cited(row)
    label, evidence = (None, []) if "evidence" not in row else _label_and_evidence(row["evidence"], corpus)
    return Claim(id=claim_id, text=text, label=label, evidence=evidence, dataset="scifact", meta={"cited_doc_ids": cited})


@DATASETS.register("scifact")
class SciFactLoader:
    """Label: NEI when ``evidence`` is empty, else the evidence sets' label (CONTRADICT →
    REFUTE; CONFLICTING when a claim has both). Gold evidence: every rationale sentence,
    ``doc_id=<doc>_sentence_<i>`` with its corpus text, deduplicated, in order."""

    name = "scifact"
    labels = (Label.SUPPORT, Label.REFUTE, Label.NEI, Label.CONFLICTING)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        source = Path(source)
        claims_path, corpus_path = source / f"claims_{split}.jsonl", source / "corpus.jsonl"
        if not claims_path.is_file():
            have = sorted(p.name for p in source.glob("claims_*.jsonl")) if source.is_dir() else []
            raise FileNotFoundError(f"SciFact split {split!r}: {claims_path} not found (found: {', '.join(have) or 'nothing'})")
        if not corpus_path.is_file():
            raise FileNotFoundError(f"SciFact corpus not found: {corpus_path}")
        corpus = {doc.id: doc.sentences for doc in read_corpus(corpus_path, "scifact")}
        return collect_claims(claims_path, lambda row: _parse(row, corpus), on_error, limit)
