"""AVeriTeC (Schlichtkrull et al., 2023): real-world claims with question–answer evidence.

``<split>.json`` is one JSON array of ``{"claim", "label", "justification", "claim_date",
"speaker", "questions": [{"question", "answers": [{"answer", "answer_type",
"source_url", "boolean_explanation"?, ...}]}], ...}``. Rows carry no id: a claim's id is
its 0-based position in the file (``claim_id`` or ``id`` when a row has one), as in the
AVeriTeC baseline.

Gold evidence: one ``EvidenceRef`` per question, ``id="<claim_id>_qa_<i>"`` (``doc_id``
the same), text ``"<question> <answer>"`` where several answers are joined by a space and
a Boolean answer is followed by its explanation (``"No. <explanation>"``). The questions
and answers are also kept structured in ``meta["questions"]`` ([{question, answers:
[{answer, answer_type, source_url, boolean_explanation}]}]), with ``justification``,
``claim_date``, ``speaker`` and the other scalar fields. No knowledge store ships here.

Labels: Supported, Refuted, Not Enough Evidence, Conflicting Evidence/Cherrypicking →
SUPPORT, REFUTE, NOT ENOUGH INFO, CONFLICTING.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, label_value, list_field, require, text_field
from factrl.datasets._records import json_records, split_file
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["AveritecLoader", "answer_text", "qa_evidence_id"]

_META = ("justification", "claim_date", "speaker", "original_claim_url", "fact_checking_article",
         "reporting_source", "location_ISO_code", "claim_types", "fact_checking_strategies",
         "claimed_value")  # the last: generated worlds' (factrl.datasets.factworld), not AVeriTeC's
_ANSWER_KEYS = ("answer", "answer_type", "source_url", "boolean_explanation")


def qa_evidence_id(claim_id: str, index: int) -> str:
    return f"{claim_id}_qa_{index}"


def answer_text(answer: dict[str, Any]) -> str:
    """One gold answer as text: a Boolean answer is followed by its explanation."""
    text = answer["answer"].strip()
    explanation = answer.get("boolean_explanation")
    if answer.get("answer_type") == "Boolean" and isinstance(explanation, str) and explanation.strip():
        text = f"{text.rstrip('.')}. {explanation.strip()}"
    return text


def _question(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise BadRow(f"{where} must be an object with 'question' and 'answers'")
    try:
        question = text_field(raw, "question")
        answers = list_field(raw, "answers")
    except BadRow as exc:
        raise BadRow(f"{where}: {exc}") from None
    kept = []
    for m, ans in enumerate(answers):
        if not isinstance(ans, dict) or not isinstance(ans.get("answer"), str) or not ans["answer"].strip():
            raise BadRow(f"{where}.answers[{m}] must be an object with a non-empty 'answer'")
        kept.append({k: ans[k] for k in _ANSWER_KEYS if ans.get(k) is not None})
    if not kept:
        raise BadRow(f"{where}.answers is empty")
    return {"question": question, "answers": kept}


def _parse(row: dict[str, Any]) -> Claim:
    claim_id = str(row["_claim_id"])
    text = text_field(row, "claim")
    label = None if row.get("label") is None else label_value(require(row, "label"), "field 'label'")
    questions = [_question(q, f"questions[{i}]") for i, q in enumerate(list_field(row, "questions", required=False))]
    evidence = [
        EvidenceRef(id=qa_evidence_id(claim_id, i), doc_id=qa_evidence_id(claim_id, i),
                    text=" ".join([q["question"], *(answer_text(a) for a in q["answers"])]))
        for i, q in enumerate(questions)
    ]
    meta = {k: row[k] for k in _META if row.get(k) is not None}
    meta["questions"] = questions
    return Claim(id=claim_id, text=text, label=label, evidence=evidence, dataset="averitec", meta=meta)


def _numbered(path: Path) -> Iterator[tuple[int, Any]]:
    """Rows with their claim id attached (the row's own id, else its position)."""
    for position, (line, value) in enumerate(json_records(path)):
        if isinstance(value, dict):
            own = value.get("claim_id", value.get("id"))
            value = {**value, "_claim_id": own if isinstance(own, (str, int)) and not isinstance(own, bool) and str(own).strip() else position}
        yield line, value


@DATASETS.register("averitec")
class AveritecLoader:
    """``source`` is a JSON file (array, or JSON lines), or a folder holding
    ``<split>.json``."""

    name = "averitec"
    labels = (Label.SUPPORT, Label.REFUTE, Label.NEI, Label.CONFLICTING)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        path = split_file(source, (f"{split}.json", f"{split}.jsonl"), "AVeriTeC", split)
        return collect_claims(path, _parse, on_error, limit, rows=_numbered(path))
