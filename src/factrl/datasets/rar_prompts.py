"""Binary RAR's prompt sets (001, §4, App. D): prompts to answer, not claims to verify.

One JSON object per line::

    {"id": "p1", "prompt": "Tell me about the Nile.", "kind": "long",
     "documents": [{"id": "d1", "title": "Nile", "text": "..."}]}
    {"id": "q1", "prompt": "Which river is the longest?", "kind": "short",
     "answers": ["Nile", "the Nile River"], "documents": [...]}

- ``kind``: ``long`` (long-form generation, scored by atomic claims) or ``short``
  (a question with abstention allowed, scored against ``answers``); default ``long``.
- ``answers``: gold answers (aliases) of a short-form question; optional (a short-form
  question without them still gets its abstention counted, not its correctness).
- ``documents``: the prompt's pre-cached evidence documents (the paper caches up to 10
  web pages per prompt); the reward and the evaluation search them with BM25 in 512-token
  chunks (:class:`factrl.retrieval.pools.EvidencePools`). Optional: evidence can also
  come from a pools file or a retriever.

Each row becomes a :class:`~factrl.types.Claim` with ``text`` = the prompt, no label, and
``meta`` = ``{"kind", "answers", "documents"}`` (plus any other keys of the row).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, id_field, text_field
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.types import Claim

__all__ = ["RarPromptsLoader", "KINDS"]

KINDS = ("long", "short")
_KNOWN = {"id", "prompt", "kind", "answers", "documents"}


def _documents(row: dict[str, Any]) -> list[dict[str, str]]:
    docs = row.get("documents") or []
    if not isinstance(docs, list):
        raise BadRow("field 'documents' must be a list of {id, text, title?} objects")
    out = []
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or d.get("id") is None or not isinstance(d.get("text"), str):
            raise BadRow(f"document {i} needs 'id' and a string 'text'")
        title = d.get("title") or ""
        if not isinstance(title, str):
            raise BadRow(f"document {i}: 'title' must be a string")
        out.append({"id": str(d["id"]), "title": title, "text": d["text"]})
    return out


def _answers(row: dict[str, Any]) -> list[str]:
    answers = row.get("answers")
    if answers is None:
        return []
    if isinstance(answers, str):
        answers = [answers]
    if not isinstance(answers, list) or not all(isinstance(a, str) and a.strip() for a in answers):
        raise BadRow("field 'answers' must be a list of non-empty strings")
    return [a.strip() for a in answers]


def _parse(row: dict[str, Any]) -> Claim:
    pid = id_field(row, "id")
    prompt = text_field(row, "prompt")
    kind = row.get("kind", "long")
    if kind not in KINDS:
        raise BadRow(f"field 'kind' must be one of {', '.join(KINDS)}, got {kind!r}")
    answers = _answers(row)
    if answers and kind != "short":
        raise BadRow("'answers' are for short-form prompts (kind 'short')")
    extra = {k: v for k, v in row.items() if k not in _KNOWN}
    meta = {**extra, "kind": kind, "answers": answers, "documents": _documents(row)}
    return Claim(id=pid, text=prompt, label=None, dataset="rar_prompts", meta=meta)


@DATASETS.register("rar_prompts")
class RarPromptsLoader:
    """``source`` is a ``.jsonl`` file, or a folder holding ``<split>.jsonl``."""

    name = "rar_prompts"
    labels = ()
    labelled = False  # prompts have no gold label: training keeps them all

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        source = Path(source)
        path = source / f"{split}.jsonl" if source.is_dir() else source
        if not path.is_file():
            raise FileNotFoundError(f"prompt set not found: {path}")
        return collect_claims(path, _parse, on_error, limit)
