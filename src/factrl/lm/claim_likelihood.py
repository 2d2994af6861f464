"""How well a document explains a claim: the LM's mean per-token log-likelihood of the
claim written after the document (query likelihood, as in zero-shot LM re-rankers).

    Passage: DOC
    A claim based on this passage: CLAIM

FFRR's own reward is the LM's gold-label probability (:mod:`factrl.lm.label_scores`).
A small LM's label probabilities can carry no information about which document is
relevant (docs/benchmarks.md, "FFRR reward signal"), while the likelihood of the claim
given a document does; this scorer is that alternative reward, behind the same row
interface (``probs(items)`` → one row per item, here one value), so the score cache,
precomputation and REPLUG read it unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from factrl.lm.label_scores import LabelScoreError, ScoreItem

__all__ = ["LIKELIHOOD_TEMPLATE", "ClaimLikelihoodScorer"]

LIKELIHOOD_TEMPLATE = "Passage: {evidence}\nA claim based on this passage:"


class ClaimLikelihoodScorer:
    """``probs(items)`` → ``[[mean log p(claim token | document, claim so far)]]`` per item.

    Needs a backend with ``encode`` and ``score`` (the transformers backend). Documents
    are cut to ``max_doc_chars`` each; several documents are joined in order. The claim
    is scored with a leading space, so its first token is scored too."""

    def __init__(self, lm: Any, *, template: str = LIKELIHOOD_TEMPLATE, max_doc_chars: int | None = 600,
                 batch_size: int = 8) -> None:
        if "{evidence}" not in template:
            raise LabelScoreError("the likelihood template must contain {evidence}")
        if not (hasattr(lm, "encode") and hasattr(lm, "score")):
            raise LabelScoreError(f"{getattr(lm, 'name', lm)!r} cannot score continuations; "
                                  "the claim-likelihood reward needs a local (transformers) LM")
        if batch_size < 1:
            raise LabelScoreError(f"batch_size must be >= 1, got {batch_size}")
        self.lm = lm
        self.template = template
        self.max_doc_chars = max_doc_chars
        self.batch_size = int(batch_size)

    def prompt_text(self, documents: Sequence[str]) -> str:
        if isinstance(documents, str):
            raise TypeError("documents must be a list of texts, not one string")
        docs = [" ".join(str(d).split()) for d in documents]
        if self.max_doc_chars is not None:
            docs = [d[: self.max_doc_chars] for d in docs]
        return self.template.format(evidence=" ".join(d for d in docs if d) or "(none)")

    def probs(self, items: Sequence[ScoreItem | tuple[str, Sequence[str]]]) -> list[list[float]]:
        rows = [it if isinstance(it, ScoreItem) else ScoreItem(it[0], it[1]) for it in items]
        out: list[list[float]] = []
        for start in range(0, len(rows), self.batch_size):
            part = rows[start : start + self.batch_size]
            prompts, conts = [], []
            for r in part:
                claim = " ".join(str(r.claim).split())
                if not claim:
                    raise LabelScoreError("cannot score an empty claim")
                prompts.append(self.lm.encode(self.prompt_text(r.documents)))
                conts.append(self.lm.encode(" " + claim))
            for c, total in zip(conts, self.lm.score(prompts, conts)):
                out.append([float(total) / max(1, len(c))])
        return out
