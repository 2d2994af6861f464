"""FEVEROUS-S: the sentence-only FEVEROUS subset as ProgramFC (Pan et al., 2023) uses it.

``dev.json`` is one JSON array of ``{"id", "claim", "label": "supports" | "refutes",
"challenge", "evidence"}`` where ``evidence`` is the gold text inline: one sentence per
line, ``"<page title>\\t<sentence in wiki markup>"``.

The markup is cleaned into ``EvidenceRef.text`` (:func:`clean_wiki_markup`: links
``[[Target|anchor]]`` → ``anchor``, ``[[Target]]`` → ``Target``, bold/italic quotes and
stray brackets dropped). The file carries no sentence indices, so ids are assigned: the
``k``-th distinct sentence of a page, in file order, is ``<page>_sentence_<k>`` with
``doc_id`` the page. The same sentence cited by several claims gets one id, and ids
depend only on the file (not on ``limit``), so a corpus pooled from the same file
(``factrl corpus pool``) holds every id. They are *not* FEVEROUS's own sentence indices.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from factrl.corpus import sentence_id
from factrl.corpus.errors import OnError
from factrl.datasets._fields import BadRow, TextIds, id_field, label_value, require, text_field
from factrl.datasets._records import json_records, split_file
from factrl.datasets.base import DATASETS, LoadResult, collect_claims
from factrl.labels import Label
from factrl.types import Claim, EvidenceRef

__all__ = ["FeverousSLoader", "clean_wiki_markup"]

_LINK = re.compile(r"\[\[([^\[\]|]*)\|([^\[\]]*)\]\]")
_BARE_LINK = re.compile(r"\[\[([^\[\]|]*)\]\]")
_EMPHASIS = re.compile(r"'{2,}")
_SPACES = re.compile(r"\s+")


def clean_wiki_markup(text: str) -> str:
    """``"a [[Plantation_house|plantation house]] near [[Pittsview]]"`` → ``"a plantation
    house near Pittsview"``; a link cut in half (``"state]] of"``) loses its brackets."""
    text = _LINK.sub(r"\2", text)
    text = _BARE_LINK.sub(lambda m: m.group(1).replace("_", " "), text)
    text = text.replace("[[", "").replace("]]", "")
    text = _EMPHASIS.sub("", text)
    return _SPACES.sub(" ", text).strip()


def _lines(raw: Any) -> list[tuple[str, str]]:
    if not isinstance(raw, str) or not raw.strip():
        raise BadRow("field 'evidence' must be a non-empty string of 'title\\tsentence' lines")
    out = []
    for n, line in enumerate(raw.split("\n")):
        if not line.strip():
            continue
        page, tab, sentence = line.partition("\t")
        text = clean_wiki_markup(sentence)
        if not tab or not page.strip() or not text:
            raise BadRow(f"evidence line {n + 1} is not 'title<TAB>sentence': {line[:60]!r}")
        out.append((page.strip(), text))
    return out


def _parser(ids: TextIds) -> Callable[[dict[str, Any]], Claim]:
    def parse(row: dict[str, Any]) -> Claim:
        claim_id = id_field(row, "id")
        text = text_field(row, "claim")
        label = label_value(require(row, "label"), "field 'label'")
        lines = _lines(require(row, "evidence"))
        refs: dict[str, EvidenceRef] = {}
        for page, sentence in lines:  # ids only once the whole row is known to be good
            sid = ids.get(page, sentence)
            refs.setdefault(sid, EvidenceRef(id=sid, doc_id=page, text=sentence))
        meta = {"challenge": row["challenge"]} if isinstance(row.get("challenge"), str) else {}
        return Claim(id=claim_id, text=text, label=label, evidence=list(refs.values()), dataset="feverous_s", meta=meta)

    return parse


@DATASETS.register("feverous_s")
class FeverousSLoader:
    """``source`` is the JSON file (array, or JSON lines), or a folder holding
    ``<split>.json``."""

    name = "feverous_s"
    labels = (Label.SUPPORT, Label.REFUTE)

    def load(self, source: Path, split: str, *, on_error: OnError = "raise", limit: int | None = None) -> LoadResult:
        path = split_file(source, (f"{split}.json", f"{split}.jsonl"), "FEVEROUS-S", split)
        return collect_claims(path, _parser(TextIds(sentence_id)), on_error, limit, rows=json_records(path))
