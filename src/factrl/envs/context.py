"""Context for the offline setting: besides the gold evidence, the other sentences of
the documents a claim cites (Veri-R1's offline rollout gives evidence plus context)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from factrl.types import Claim, EvidenceRef, Passage

__all__ = ["document_context", "index_context"]


def document_context(
    passages: Sequence[Passage], *, max_sentences: int | None = 16
) -> Callable[[Claim], list[EvidenceRef]]:
    """Return a provider giving the sentences of the documents that hold a claim's gold
    evidence or are listed in ``claim.meta["cited_doc_ids"]``, in document order, at most
    ``max_sentences`` of them (the environment always adds the gold evidence itself), so
    a claim citing many long documents does not blow up the prompt."""
    by_doc: dict[str, list[EvidenceRef]] = defaultdict(list)
    for p in passages:
        for sid, sent in zip(p.sentence_ids, p.sentences):
            by_doc[p.doc_id].append(EvidenceRef(id=sid, doc_id=p.doc_id, text=sent))

    def provide(claim: Claim) -> list[EvidenceRef]:
        out: list[EvidenceRef] = []
        for d in _cited_documents(claim):
            out.extend(by_doc.get(d, []))
        return out if max_sentences is None else out[:max_sentences]

    return provide


def _cited_documents(claim: Claim) -> list[str]:
    docs = [e.doc_id for e in claim.evidence if e.doc_id]
    docs += [str(d) for d in claim.meta.get("cited_doc_ids", [])]
    return list(dict.fromkeys(docs))


def index_context(index: Any, *, max_sentences: int | None = 16) -> Callable[[Claim], list[EvidenceRef]]:
    """:func:`document_context` for a loaded index. A memory-mapped passage store looks
    each cited document up (a Wikipedia-sized index is never walked); a plain list of
    passages is grouped once, as :func:`document_context` does. Same sentences, same order."""
    store = getattr(index, "passages", None)
    if not callable(getattr(store, "document", None)):
        return document_context(store if store is not None else [], max_sentences=max_sentences)

    def provide(claim: Claim) -> list[EvidenceRef]:
        out: list[EvidenceRef] = []
        for d in _cited_documents(claim):
            if max_sentences is not None and len(out) >= max_sentences:
                break
            for p in store.document(d):
                out.extend(EvidenceRef(id=sid, doc_id=p.doc_id, text=sent) for sid, sent in zip(p.sentence_ids, p.sentences))
        return out if max_sentences is None else out[:max_sentences]

    return provide
