"""Per-claim evidence pools (Binary RAR's pre-cache): a few documents per prompt, searched
with an in-memory BM25 at training time.

Binary RAR retrieves evidence for each (prompt, response) pair from a small document set
cached per prompt (8 documents, 512-token chunks, BM25). :class:`EvidencePools` holds
those sets — ``claim id → documents`` — cuts each document into chunks of at most
``chunk_tokens`` whitespace tokens (at sentence boundaries where it can, so a chunk never
cuts a sentence unless that sentence alone is too long), and answers
``search(claim_id, queries, k)`` with a BM25 index built per claim on first use (kept in
a bounded LRU, so a long run does not hold every pool's index).

Pools are made from any retriever's top-N documents per claim (:func:`build_pools`) and
saved/loaded as JSONL, one claim per line::

    {"claim_id": "17", "claim": "...", "documents": [{"id": "d1", "title": "...", "text": "..."}]}
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factrl.corpus import split_sentences
from factrl.retrieval.base import Retriever
from factrl.types import Claim, Hit, Passage

__all__ = ["EvidencePools", "PoolDocument", "PoolFormatError", "UnknownClaimError", "build_pools", "chunk_document"]


class PoolFormatError(ValueError):
    """A pools JSONL line that cannot be read (the message names file and line)."""


class UnknownClaimError(KeyError):
    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0])


@dataclass(frozen=True)
class PoolDocument:
    id: str
    text: str
    title: str = ""


@dataclass
class _Pool:
    claim: str
    documents: list[PoolDocument] = field(default_factory=list)


def chunk_document(doc: PoolDocument, chunk_tokens: int = 512) -> list[Passage]:
    """Cut ``doc`` into passages of at most ``chunk_tokens`` whitespace tokens.

    Sentences are packed greedily; a sentence longer than the limit is split by tokens.
    Chunk ``j`` is ``Passage(id=f"{doc.id}#{j}", doc_id=doc.id, ...)``.
    """
    if chunk_tokens < 1:
        raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
    pieces: list[list[str]] = []
    for sent in split_sentences(doc.text) or ([doc.text] if doc.text.strip() else []):
        words = sent.split()
        pieces.extend(words[i : i + chunk_tokens] for i in range(0, len(words), chunk_tokens))
    chunks: list[list[str]] = []
    for words in pieces:
        if chunks and len(chunks[-1]) + len(words) <= chunk_tokens:
            chunks[-1].extend(words)
        else:
            chunks.append(list(words))
    return [Passage(id=f"{doc.id}#{j}", doc_id=doc.id, title=doc.title, text=" ".join(words))
            for j, words in enumerate(chunks)]


class _PoolIndex:
    """BM25 over one pool's chunks (bm25s in memory, the project's BM25 tokenizer)."""

    def __init__(self, passages: list[Passage], tokenizer: Any) -> None:
        import bm25s

        self.passages = passages
        self.tokenize = tokenizer
        texts = [f"{p.title} {p.text}" if p.title else p.text for p in passages]
        self.model = bm25s.BM25(k1=0.9, b=0.4) if passages else None
        if self.model is not None:
            self.model.index([tokenizer(t) for t in texts], show_progress=False, create_empty_token=True)
        self.vocab = self.model.vocab_dict if self.model is not None else {}

    def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
        out: list[list[Hit]] = [[] for _ in queries]
        k = min(int(k), len(self.passages))
        if k <= 0 or self.model is None:
            return out
        tokens = [[t for t in self.tokenize(q) if t in self.vocab and t != ""] for q in queries]
        todo = [i for i, t in enumerate(tokens) if t]
        if not todo:
            return out
        docs, scores = self.model.retrieve([tokens[i] for i in todo], k=k, sorted=True, show_progress=False)
        for row, qi in enumerate(todo):
            out[qi] = [Hit(passage=self.passages[d], score=s)
                       for d, s in zip(docs[row].tolist(), scores[row].tolist()) if s > 0.0]
        return out


def _pool_document(claim_id: str, n: int, doc: Mapping[str, str]) -> PoolDocument:
    """A ``{"id", "text", "title"?}`` mapping as a record; one without an id or a text is
    a :class:`PoolFormatError` naming the claim and the document's place."""
    missing = [k for k in ("id", "text") if not isinstance(doc, Mapping) or doc.get(k) in (None, "")]
    if missing:
        raise PoolFormatError(f"evidence pool of claim {claim_id!r}: document {n} has no {' and no '.join(missing)} "
                              f"(documents need an 'id' and a 'text'; 'title' is optional)")
    return PoolDocument(str(doc["id"]), str(doc["text"]), str(doc.get("title") or ""))


class EvidencePools:
    """Claim id → a small document set, searchable per claim."""

    def __init__(self, *, chunk_tokens: int = 512, max_indexes: int = 4096) -> None:
        if chunk_tokens < 1:
            raise ValueError(f"chunk_tokens must be >= 1, got {chunk_tokens}")
        self.chunk_tokens = chunk_tokens
        self.max_indexes = max(1, int(max_indexes))
        self._pools: dict[str, _Pool] = {}
        self._indexes: OrderedDict[str, _PoolIndex] = OrderedDict()
        self._lock = threading.Lock()
        self._tokenizer: Any = None
        self.skipped: list[str] = []  # bad lines skipped by load_jsonl(on_error="skip")

    def __len__(self) -> int:
        return len(self._pools)

    def __contains__(self, claim_id: object) -> bool:
        return claim_id in self._pools

    def claim_ids(self) -> list[str]:
        return list(self._pools)

    def add(self, claim_id: str, documents: Iterable[PoolDocument | Mapping[str, str]], *, claim: str = "") -> None:
        """Set the pool of ``claim_id`` (documents as records or ``{"id", "text", "title"?}``)."""
        docs = [d if isinstance(d, PoolDocument) else _pool_document(claim_id, n, d) for n, d in enumerate(documents)]
        with self._lock:
            self._pools[str(claim_id)] = _Pool(claim, docs)
            self._indexes.pop(str(claim_id), None)

    def documents(self, claim_id: str) -> list[PoolDocument]:
        return list(self._pool(claim_id).documents)

    def _pool(self, claim_id: str) -> _Pool:
        try:
            return self._pools[str(claim_id)]
        except KeyError:
            raise UnknownClaimError(f"no evidence pool for claim {claim_id!r} ({len(self._pools)} pools loaded)") from None

    def _index(self, claim_id: str) -> _PoolIndex:
        claim_id = str(claim_id)
        with self._lock:
            index = self._indexes.get(claim_id)
            if index is not None:
                self._indexes.move_to_end(claim_id)
                return index
            pool = self._pool(claim_id)
            if self._tokenizer is None:
                from factrl.retrieval.bm25 import BM25Tokenizer

                self._tokenizer = BM25Tokenizer()
            passages = [c for d in pool.documents for c in chunk_document(d, self.chunk_tokens)]
            index = _PoolIndex(passages, self._tokenizer)
            self._indexes[claim_id] = index
            while len(self._indexes) > self.max_indexes:
                self._indexes.popitem(last=False)
            return index

    def chunks(self, claim_id: str) -> list[Passage]:
        """The passages a claim's searches run over."""
        return list(self._index(claim_id).passages)

    def search(self, claim_id: str, queries: Sequence[str], k: int) -> list[list[Hit]]:
        """Top-``k`` chunks of ``claim_id``'s pool per query, best first."""
        if isinstance(queries, str):
            raise TypeError("search takes a sequence of queries, not one string")
        return self._index(claim_id).search(list(queries), k)

    def retriever(self, claim_id: str) -> Retriever:
        """A :class:`Retriever` bound to one claim's pool."""
        self._pool(claim_id)  # fail now, not at the first search
        pools = self

        class _Bound:
            def search(self, queries: Sequence[str], k: int) -> list[list[Hit]]:
                return pools.search(claim_id, queries, k)

        return _Bound()

    # --- JSONL ------------------------------------------------------------------------

    def save_jsonl(self, path: Path | str) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with tmp.open("w", encoding="utf-8") as fh:
            for cid, pool in self._pools.items():
                row = {"claim_id": cid, "claim": pool.claim,
                       "documents": [{"id": d.id, "title": d.title, "text": d.text} for d in pool.documents]}
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        tmp.replace(path)

    @classmethod
    def load_jsonl(cls, path: Path | str, *, chunk_tokens: int = 512, on_error: str = "raise") -> EvidencePools:
        """Read pools saved by :meth:`save_jsonl`; ``on_error="skip"`` skips bad lines and
        counts them in ``pools.skipped`` instead of raising :class:`PoolFormatError`."""
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        path = Path(path)
        pools = cls(chunk_tokens=chunk_tokens)
        with path.open(encoding="utf-8-sig") as fh:
            for line_no, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    cid, claim, docs = _parse_line(line)
                except PoolFormatError as exc:
                    msg = f"{path}:{line_no}: {exc}"
                    if on_error == "raise":
                        raise PoolFormatError(msg) from None
                    pools.skipped.append(msg)
                    continue
                pools.add(cid, docs, claim=claim)
        return pools


def _parse_line(line: str) -> tuple[str, str, list[PoolDocument]]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise PoolFormatError(f"not JSON ({exc.msg})") from None
    if not isinstance(row, dict) or "claim_id" not in row:
        raise PoolFormatError("expected an object with 'claim_id' and 'documents'")
    docs = row.get("documents")
    if not isinstance(docs, list):
        raise PoolFormatError("'documents' must be a list")
    out = []
    for i, d in enumerate(docs):
        if not isinstance(d, dict) or not isinstance(d.get("text"), str) or d.get("id") is None:
            raise PoolFormatError(f"document {i} needs 'id' and a string 'text'")
        out.append(PoolDocument(str(d["id"]), d["text"], str(d.get("title") or "")))
    return str(row["claim_id"]), str(row.get("claim") or ""), out


def build_pools(retriever: Retriever, claims: Sequence[Claim] | Mapping[str, str], *, top_n: int = 8,
                depth: int | None = None, chunk_tokens: int = 512, batch_size: int = 256) -> EvidencePools:
    """Pool each claim's top ``top_n`` *documents* found by ``retriever`` for the claim text.

    Hits are collapsed to documents (a document's units are joined in index order), so a
    pool holds whole documents, re-chunked by the pool. ``depth`` (default ``4 × top_n``)
    is how many units are asked for to find ``top_n`` distinct documents.
    """
    if top_n < 1:
        raise ValueError(f"top_n must be >= 1, got {top_n}")
    items = list(claims.items()) if isinstance(claims, Mapping) else [(c.id, c.text) for c in claims]
    depth = depth or 4 * top_n
    pools = EvidencePools(chunk_tokens=chunk_tokens)
    for start in range(0, len(items), batch_size):
        batch = items[start : start + batch_size]
        results = retriever.search([text for _, text in batch], depth)
        for (cid, text), hits in zip(batch, results):
            units: dict[str, list[Passage]] = {}
            for h in hits:
                if h.passage.doc_id not in units and len(units) >= top_n:
                    continue
                units.setdefault(h.passage.doc_id, []).append(h.passage)
            docs = []
            for doc_id, parts in units.items():
                parts = sorted({p.id: p for p in parts}.values(), key=lambda p: _unit_order(p.id))
                docs.append(PoolDocument(doc_id, " ".join(p.text for p in parts), parts[0].title))
            pools.add(cid, docs, claim=text)
    return pools


def _unit_order(passage_id: str) -> tuple[int, str]:
    # Unit ids are "<doc>#<j>": order by j numerically when it is a number.
    tail = passage_id.rsplit("#", 1)[-1]
    return (int(tail), "") if tail.isdigit() else (0, passage_id)
