"""AVeriTeC gold and prediction files, read into the strings the official scorer compares.

**Gold** is AVeriTeC's ``dev.json``: claims with ``label``, ``justification`` and
``questions: [{question, answers: [{answer, answer_type, boolean_explanation?}]}]``,
identified by position (``claim_id`` when present).

**Predictions** come in either of two formats, told apart per row:

- the shared task's submission format (a row with ``evidence``): ``{claim_id, claim,
  pred_label, evidence: [{question, answer}]}``. Each evidence row is one predicted
  question and one Q+A string ``question + " " + answer``. **Empty-answer convention:** a
  row whose answer is empty, whitespace, null or missing is scored as the official
  ``eval.py`` scores a question with no answers, ``question + " No answer could be
  found."`` (the row maps to ``{question, answers: []}`` in ``eval.py``'s format).
- ``eval.py``'s own format (any other row): ``{label, questions: [{question, answers}],
  string_evidence?, justification?}``, read exactly as ``eval.py`` reads it — the same
  strings as gold (one per answer; Boolean answers add ``". " + boolean_explanation``; a
  question without answers gives ``" No answer could be found."``; an answer that is an
  empty string stays ``question + " "``), then ``string_evidence`` appended. Without
  ``questions``, the Q-only items are those strings (``eval.py``'s fallback).

``pred_label`` is the label (``label`` when absent). A ``justification`` string, in either
format, is the predicted justification; without one it is the first 10 Q+A strings
joined by spaces, as ``eval.py`` does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factrl.labels import Label, UnknownLabelError, normalise_label

__all__ = [
    "NO_ANSWER",
    "AveritecGold",
    "AveritecPrediction",
    "gold_comparison_strings",
    "comparison_strings",
    "qa_pairs",
    "prediction_from_record",
    "load_gold",
    "load_predictions",
]

NO_ANSWER = " No answer could be found."


@dataclass(frozen=True)
class AveritecGold:
    """A gold claim: its label, questions, Q+A comparison strings and justification."""

    claim_id: str
    label: Label
    questions: tuple[str, ...]
    qa_strings: tuple[str, ...]
    justification: str | None = None
    # (question, answer) per gold answer, for an LM judge (Ev2R); unanswered questions left out
    qa_pairs: tuple[tuple[str, str], ...] = ()
    claim: str = ""


@dataclass(frozen=True)
class AveritecPrediction:
    """A prediction row: the raw label as written, its normalised form (None when the
    spelling is unknown), the Q-only items, the Q+A strings (all of them; the scorer keeps
    the first 10) and the predicted justification, if the row has one."""

    claim_id: str | None
    raw_label: Any
    label: Label | None
    questions: tuple[str, ...] = ()
    qa_strings: tuple[str, ...] = ()
    justification: str | None = None
    # (question, answer) as written, "" for no answer, for an LM judge (Ev2R)
    qa_pairs: tuple[tuple[str, str], ...] = ()


def _answers(q: Mapping[str, Any]) -> list[Any]:
    answers = q.get("answers")
    if answers is None:
        return []
    return answers if isinstance(answers, list) else [answers]


def _answer_text(a: Mapping[str, Any]) -> str:
    text = str(a["answer"])
    if a.get("answer_type") == "Boolean" and "boolean_explanation" in a:
        text += ". " + str(a["boolean_explanation"])
    return text


def gold_comparison_strings(record: Mapping[str, Any]) -> list[str]:
    """The official scorer's Q+A strings of the ``questions`` of an AVeriTeC record."""
    out: list[str] = []
    for q in record.get("questions") or []:
        answers = _answers(q)
        out += [f"{q['question']} {_answer_text(a)}" for a in answers]
        if not answers:
            out.append(q["question"] + NO_ANSWER)
    return out


def qa_pairs(record: Mapping[str, Any], *, unanswered: bool) -> list[tuple[str, str]]:
    """``(question, answer)`` per answer of the record's ``questions`` (Boolean answers with
    their explanation); a question without answers gives ``(question, "")`` when
    ``unanswered``, else nothing (the 2025 scorer's reference evidence)."""
    out: list[tuple[str, str]] = []
    for q in record.get("questions") or []:
        answers = _answers(q)
        out += [(str(q["question"]), _answer_text(a)) for a in answers]
        if not answers and unanswered:
            out.append((str(q["question"]), ""))
    return out


def comparison_strings(record: Mapping[str, Any]) -> list[str]:
    """:func:`gold_comparison_strings` followed by the record's ``string_evidence`` — the
    official ``extract_full_comparison_strings``."""
    return gold_comparison_strings(record) + [str(s) for s in record.get("string_evidence") or []]


def _evidence_strings(rows: Any) -> tuple[list[str], list[str], list[tuple[str, str]]]:
    if not isinstance(rows, list):
        raise TypeError(f"evidence must be a list, got {type(rows).__name__}")
    questions, qa, pairs = [], [], []
    for row in rows:
        if not isinstance(row, Mapping):
            raise TypeError(f"an evidence row must be an object, got {type(row).__name__}")
        question = row.get("question")
        question = "" if question is None else str(question)
        answer = row.get("answer")
        questions.append(question)
        if answer is None or not str(answer).strip():
            qa.append(question + NO_ANSWER)  # eval.py's question with no answers
            pairs.append((question, ""))
        else:
            qa.append(f"{question} {answer}")
            pairs.append((question, str(answer)))
    return questions, qa, pairs


def prediction_from_record(rec: Mapping[str, Any]) -> AveritecPrediction:
    """One prediction row, in either format (module doc). Raises KeyError/TypeError on a
    row neither format accepts."""
    if not isinstance(rec, Mapping):
        raise TypeError(f"a prediction must be an object, got {type(rec).__name__}")
    raw = rec.get("pred_label", rec.get("label"))
    if "evidence" in rec:
        questions, qa, pairs = _evidence_strings(rec["evidence"] if rec["evidence"] is not None else [])
        qa += [str(s) for s in rec.get("string_evidence") or []]
    else:
        qa = comparison_strings(rec)
        questions = [str(q["question"]) for q in rec["questions"]] if "questions" in rec else list(qa)
        pairs = qa_pairs(rec, unanswered=True)
    justification = rec.get("justification")
    cid = rec.get("claim_id")
    return AveritecPrediction(
        claim_id=None if cid is None else str(cid),
        raw_label=raw,
        label=_label(raw),
        questions=tuple(questions),
        qa_strings=tuple(qa),
        justification=justification if isinstance(justification, str) else None,
        qa_pairs=tuple(pairs),
    )


def _label(raw: Any) -> Label | None:
    try:
        return normalise_label(raw) if raw is not None else None
    except UnknownLabelError:
        return None


def _read_json_list(path: Path, what: str) -> list[Any]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of {what}, got {type(data).__name__}")
    return data


def load_gold(path: Path) -> list[AveritecGold]:
    """Gold claims of an AVeriTeC file (``dev.json``); ids are positions unless given."""
    out = []
    for i, rec in enumerate(_read_json_list(path, "claims")):
        try:
            just = rec.get("justification")
            out.append(
                AveritecGold(
                    claim_id=str(rec.get("claim_id", i)),
                    label=normalise_label(rec["label"]),
                    questions=tuple(q["question"] for q in rec.get("questions") or []),
                    qa_strings=tuple(comparison_strings(rec)),
                    justification=just if isinstance(just, str) else None,
                    qa_pairs=tuple(qa_pairs(rec, unanswered=False)),
                    claim=str(rec.get("claim") or ""),
                )
            )
        except (AttributeError, KeyError, TypeError, UnknownLabelError) as exc:
            raise ValueError(f"{path}: claim {i}: not an AVeriTeC record ({exc!r})") from None
    return out


def load_predictions(path: Path) -> list[AveritecPrediction]:
    """Rows of a prediction file, in either format (module doc)."""
    out = []
    for i, rec in enumerate(_read_json_list(path, "predictions")):
        try:
            out.append(prediction_from_record(rec))
        except (AttributeError, KeyError, TypeError) as exc:
            raise ValueError(f"{path}: prediction {i}: not a submission row ({exc!r})") from None
    return out
