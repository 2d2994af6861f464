"""The verifier's pair sources: each dataset with gold evidence *text* on these machines.

- ``scifact`` (``scifact/``, claims_train + corpus): a SUPPORT/REFUTE claim with its gold
  rationale sentences of each document (``gold``; in training also each sentence of a
  multi-sentence rationale alone, ``gold_sentence``), NOT ENOUGH INFO from the gold
  abstract's best BM25 non-rationale sentence (``hard_negative``, SciFact's own
  convention) and, for NEI claims, the best sentences of the documents they cite
  (``cited``). Groups: claims sharing a cited or evidence document.
- ``climate_fever``: the five annotated sentences of each claim with their own labels
  (``annotated``); DISPUTED claims keep their sentences' labels.
- ``feverous_s``: the claim with its evidence lines (``gold``), and the best BM25 line of
  another page among the split's evidence (``hard_negative``). Groups: shared pages.
- ``averitec``: the claim with its question–answer pairs (``gold``; CONFLICTING claims
  left out) and another claim's best BM25 question–answer text (``hard_negative``).
- ``veri_r1_offline`` (``veri_r1/test_offline.parquet``, the only Veri-R1 file whose
  prompts carry evidence text): the claim with its gold pages' passages when all are
  shown (``gold``), and the first non-gold passage shown (``hard_negative``).

``scifact_negated`` (opt-in, ``factrl.verifier.negation``): SciFact's training SUPPORT
pairs with the claim negated by rule, as REFUTE pairs. ``scifact_retrieved`` (opt-in):
each training claim with the best BM25 sentences of abstracts it does not cite, as NOT
ENOUGH INFO. ``scifact_titled`` and ``scifact_retrieved_titled`` (opt-in) are the two
with each evidence text after its abstract's title (``Title: text``), held out by the
same claim groups.

FEVER's files and Veri-R1's ``train_online`` name evidence by id only (the Wikipedia dump
is not here), so they give no pairs. Hard negatives are searched within one split, so no
held-out text ever reaches training. Wikipedia sources put the page title before each
sentence (``Title: sentence``), since their sentences lean on it for the subject.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from factrl.labels import Label
from factrl.types import Claim
from factrl.verifier.pairs import PAIR_SOURCES, Pair, SplitFractions, connected_groups, split_of

__all__ = ["AveritecPairs", "ClimateFeverPairs", "FeverousSPairs", "SciFactPairs", "SciFactRetrievedPairs",
           "VeriR1OfflinePairs", "titled"]

_LABELS = (Label.SUPPORT, Label.REFUTE, Label.NEI)


def titled(title: str, text: str) -> str:
    """``"Title: text"`` (just ``text`` without a title)."""
    return f"{title}: {text}" if title else text


class _Ranker:
    """In-memory BM25 (factrl's tokenizer, Anserini's k1/b) over a list of texts."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s

        from factrl.retrieval.bm25 import BM25Tokenizer

        self._tok = BM25Tokenizer()
        self._n = len(texts)
        self._model = bm25s.BM25(k1=0.9, b=0.4, method="lucene")
        if texts:
            self._model.index([self._tok(t) for t in texts], show_progress=False, create_empty_token=True)
            self._vocab: dict[str, int] = self._model.vocab_dict
        else:
            self._vocab = {}

    def best(self, query: str, k: int, keep: Callable[[int], bool]) -> list[int]:
        """The ``k`` best rows for ``query`` that ``keep`` accepts (score > 0 only)."""
        import numpy as np

        ids = [self._vocab[t] for t in self._tok(query) if t in self._vocab and t != ""]
        if not ids or k <= 0:
            return []
        scores = self._model.get_scores_from_ids(ids)
        out: list[int] = []
        for i in np.argsort(-scores, kind="stable"):
            if scores[i] <= 0 or len(out) >= k:
                break
            if keep(int(i)):
                out.append(int(i))
        return out


def _load(name: str, source: Path, split: str) -> list[Claim]:
    from factrl.datasets import load_dataset

    return load_dataset(name, source, split).claims


def _scifact(folder: Path) -> tuple[list[Claim], list[str], dict[str, Any], list[tuple[str, int]], _Ranker]:
    """SciFact's training claims, their groups (claims sharing a cited or evidence
    document), the corpus by id, its (document, sentence) rows and a BM25 over them; read
    once a process while the files are unchanged (``scifact`` and ``scifact_retrieved``
    share it; callers only read it)."""
    stamps = tuple((p.stat().st_mtime_ns, p.stat().st_size) if p.exists() else None
                   for p in (folder / "corpus.jsonl", folder / "claims_train.jsonl"))
    return _scifact_read(str(folder.resolve()), stamps)


@functools.lru_cache(maxsize=2)
def _scifact_read(folder_name: str, stamps: tuple[Any, ...]) -> tuple[list[Claim], list[str], dict[str, Any],
                                                                    list[tuple[str, int]], _Ranker]:
    from factrl.corpus import read_corpus

    folder = Path(folder_name)

    claims = _load("scifact", folder, "train")
    docs = {d.id: d for d in read_corpus(folder / "corpus.jsonl", "scifact")}
    rows = [(doc_id, i) for doc_id, d in docs.items() for i in range(len(d.sentences))]
    ranker = _Ranker([docs[d].sentences[i] for d, i in rows])
    keys = [[*(f"doc:{d}" for d in c.meta.get("cited_doc_ids", [])),
             *(f"doc:{e.doc_id}" for e in c.evidence)] or [f"claim:{c.id}"] for c in claims]
    return claims, connected_groups(keys), docs, rows, ranker


def _sentence(docs: dict[str, Any], doc_id: str, i: int, titles: bool) -> str:
    """Sentence ``i`` of abstract ``doc_id``, after its title when ``titles``."""
    d = docs[doc_id]
    return titled(str(d.title or ""), d.sentences[i]) if titles else d.sentences[i]


@dataclass(frozen=True)
class SciFactPairs:
    """``titles``: every evidence text after its abstract's title (``Title: text``), the
    way ``retrieve_verify --with-title`` reads; the split is SciFact's either way, so the
    titled and untitled sources hold out the same claims."""

    name: str = "scifact"
    path: str = "scifact"
    negatives: int = 1  # non-rationale sentences of the gold abstract per SUPPORT/REFUTE claim
    cited: int = 2  # sentences of the cited abstracts per NEI claim
    titles: bool = False

    def pairs(self, data_dir: Path, fractions: SplitFractions) -> list[Pair]:
        claims, groups, docs, rows, ranker = _scifact(Path(data_dir) / self.path)
        out: list[Pair] = []
        for claim, group in zip(claims, groups):
            split = split_of("scifact", group, fractions)

            def pair(evidence: str, label: Label, kind: str) -> Pair:
                return Pair(self.name, claim.id, claim.text, evidence, label, kind, group, split)

            def row(r: int) -> str:
                return _sentence(docs, rows[r][0], rows[r][1], self.titles)

            if claim.label in (Label.SUPPORT, Label.REFUTE):
                by_doc: dict[str, list[str]] = {}
                for ref in claim.evidence:
                    by_doc.setdefault(str(ref.doc_id), []).append(str(ref.text))
                for doc_id, sentences in by_doc.items():
                    title = str(docs[doc_id].title or "") if self.titles and doc_id in docs else ""
                    out.append(pair(titled(title, " ".join(sentences)), claim.label, "gold"))
                    if len(sentences) > 1 and split == "train":
                        out += [pair(titled(title, s), claim.label, "gold_sentence") for s in sentences]
                gold_ids = {e.id for e in claim.evidence}
                gold_docs = set(by_doc)
                hits = ranker.best(claim.text, self.negatives, lambda r: rows[r][0] in gold_docs
                                   and docs[rows[r][0]].sentence_ids[rows[r][1]] not in gold_ids)
                out += [pair(row(r), Label.NEI, "hard_negative") for r in hits]
            elif claim.label == Label.NEI:
                cited = {str(d) for d in claim.meta.get("cited_doc_ids", [])} & set(docs)
                hits = ranker.best(claim.text, self.cited, lambda r: rows[r][0] in cited)
                out += [pair(row(r), Label.NEI, "cited") for r in hits]
        return out


@dataclass(frozen=True)
class SciFactRetrievedPairs:
    """Opt-in NOT ENOUGH INFO pairs worded like the claim: for each *training* SciFact
    claim, the best BM25 sentences of abstracts it neither cites nor takes evidence from
    (``retrieved``), the way an agent's search finds on-topic sentences that decide
    nothing. Validation and held-out claims give none."""

    name: str = "scifact_retrieved"
    path: str = "scifact"
    per_claim: int = 2
    titles: bool = False  # as SciFactPairs.titles

    def pairs(self, data_dir: Path, fractions: SplitFractions) -> list[Pair]:
        claims, groups, docs, rows, ranker = _scifact(Path(data_dir) / self.path)
        out: list[Pair] = []
        for claim, group in zip(claims, groups):
            if split_of("scifact", group, fractions) != "train" or claim.label not in _LABELS:
                continue
            own = {str(d) for d in claim.meta.get("cited_doc_ids", [])} | {str(e.doc_id) for e in claim.evidence}
            for r in ranker.best(claim.text, self.per_claim, lambda r: str(rows[r][0]) not in own):
                out.append(Pair(self.name, claim.id, claim.text, _sentence(docs, rows[r][0], rows[r][1], self.titles),
                                Label.NEI, "retrieved", group, "train"))
        return out


@dataclass(frozen=True)
class ClimateFeverPairs:
    name: str = "climate_fever"
    path: str = "climate_fever/climate-fever.jsonl"

    def pairs(self, data_dir: Path, fractions: SplitFractions) -> list[Pair]:
        out: list[Pair] = []
        for claim in _load("climate_fever", Path(data_dir) / self.path, "dev"):
            split = split_of(self.name, claim.id, fractions)
            labels = claim.meta.get("evidence_labels", {})
            for ref in claim.evidence:
                label = Label(labels[ref.id])
                if label in _LABELS:
                    out.append(Pair(self.name, claim.id, claim.text, titled(str(ref.doc_id), str(ref.text)), label,
                                    "annotated", claim.id, split))
        return out


def _joined_lines(refs: Sequence[Any]) -> str:
    """Evidence lines with each page's title once, before its first line."""
    parts, last = [], None
    for ref in refs:
        parts.append(titled(str(ref.doc_id), str(ref.text)) if ref.doc_id != last else str(ref.text))
        last = ref.doc_id
    return " ".join(parts)


@dataclass(frozen=True)
class FeverousSPairs:
    name: str = "feverous_s"
    path: str = "feverous_s/dev.json"
    negatives: int = 1

    def pairs(self, data_dir: Path, fractions: SplitFractions) -> list[Pair]:
        claims = _load("feverous_s", Path(data_dir) / self.path, "dev")
        groups = connected_groups([[f"page:{e.doc_id}" for e in c.evidence] for c in claims])
        splits = [split_of(self.name, g, fractions) for g in groups]
        lines: dict[str, tuple[str, str, str]] = {}  # evidence id -> (page, text, split)
        for claim, split in zip(claims, splits):
            for ref in claim.evidence:
                lines.setdefault(ref.id, (str(ref.doc_id), str(ref.text), split))
        pool = list(lines.values())
        ranker = _Ranker([titled(p, t) for p, t, _ in pool])
        out: list[Pair] = []
        for claim, group, split in zip(claims, groups, splits):
            if claim.label not in _LABELS:
                continue
            out.append(Pair(self.name, claim.id, claim.text, _joined_lines(claim.evidence), claim.label, "gold",
                            group, split))
            pages = {e.doc_id for e in claim.evidence}
            for r in ranker.best(claim.text, self.negatives, lambda r: pool[r][2] == split and pool[r][0] not in pages):
                out.append(Pair(self.name, claim.id, claim.text, titled(pool[r][0], pool[r][1]), Label.NEI,
                                "hard_negative", group, split))
        return out


@dataclass(frozen=True)
class AveritecPairs:
    name: str = "averitec"
    path: str = "averitec/dev.json"
    negatives: int = 1

    def pairs(self, data_dir: Path, fractions: SplitFractions) -> list[Pair]:
        claims = [c for c in _load("averitec", Path(data_dir) / self.path, "dev") if c.evidence]
        splits = [split_of(self.name, c.id, fractions) for c in claims]
        texts = [" ".join(str(e.text) for e in c.evidence) for c in claims]
        ranker = _Ranker(texts)
        out: list[Pair] = []
        for i, (claim, split) in enumerate(zip(claims, splits)):
            if claim.label not in _LABELS:
                continue
            out.append(Pair(self.name, claim.id, claim.text, texts[i], claim.label, "gold", claim.id, split))
            for r in ranker.best(claim.text, self.negatives, lambda r: r != i and splits[r] == split):
                out.append(Pair(self.name, claim.id, claim.text, texts[r], Label.NEI, "hard_negative", claim.id, split))
        return out


def _offline_passages(row: dict[str, Any]) -> list[tuple[str, str]]:
    """``[(title, text)]`` of the ``[[Title]]: text`` blocks of an offline Veri-R1 prompt."""
    import re

    messages = row.get("prompt") or []
    content = str(messages[-1].get("content", "")) if len(messages) else ""
    if "<information>" not in content:
        return []
    info = content.rsplit("<information>", 1)[1].split("</information>", 1)[0]
    return [(m.group(1).strip(), m.group(2).strip())
            for m in re.finditer(r"\[\[(.+?)\]\]: (.*?)(?=\n\n\[\[|\s*$)", info, re.DOTALL)]


@dataclass(frozen=True)
class VeriR1OfflinePairs:
    name: str = "veri_r1_offline"
    path: str = "veri_r1/test_offline.parquet"

    def pairs(self, data_dir: Path, fractions: SplitFractions) -> list[Pair]:
        import pyarrow.parquet as pq

        from factrl.datasets.veri_r1_parquet import claim_from_row

        table = pq.read_table(Path(data_dir) / self.path)
        rows = table.to_pylist()
        claims = [claim_from_row(r, where=f"{self.path} row {i}") for i, r in enumerate(rows)]
        groups = connected_groups([[f"page:{e.id}" for e in c.evidence] or [f"claim:{c.id}"] for c in claims])
        out: list[Pair] = []
        seen: set[str] = set()
        for row, claim, group in zip(rows, claims, groups):
            if claim.id in seen or claim.label not in _LABELS:
                continue
            seen.add(claim.id)
            split = split_of(self.name, group, fractions)
            shown = _offline_passages(row)
            gold = {e.id for e in claim.evidence}
            titles = {t for t, _ in shown}
            if gold and gold <= titles:
                text = " ".join(titled(t, x) for t, x in shown if t in gold)
                out.append(Pair(self.name, claim.id, claim.text, text, claim.label, "gold", group, split))
            other = next(((t, x) for t, x in shown if t not in gold), None)
            if other is not None:
                out.append(Pair(self.name, claim.id, claim.text, titled(*other), Label.NEI, "hard_negative",
                                group, split))
        return out


PAIR_SOURCES.register("scifact")(SciFactPairs())
PAIR_SOURCES.register("scifact_retrieved")(SciFactRetrievedPairs())
PAIR_SOURCES.register("scifact_titled")(SciFactPairs(name="scifact_titled", titles=True))
PAIR_SOURCES.register("scifact_retrieved_titled")(SciFactRetrievedPairs(name="scifact_retrieved_titled", titles=True))
PAIR_SOURCES.register("climate_fever")(ClimateFeverPairs())
PAIR_SOURCES.register("feverous_s")(FeverousSPairs())
PAIR_SOURCES.register("averitec")(AveritecPairs())
PAIR_SOURCES.register("veri_r1_offline")(VeriR1OfflinePairs())
