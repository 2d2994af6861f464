"""The retrieval policy π_θ(d|q) = softmax(h(q)·h(d)/τ) over a candidate set D′ (FFRR §5).

h is one sentence-transformers encoder shared by queries and documents (the dual
encoder of DPR/Tevatron with tied weights; MiniLM embedded by default), trained in
float32. Candidates are re-encoded with the current weights at every step — only the
top-20 per query, never the corpus — and the corpus is re-indexed once at the end
(``factrl index build --model DIR``). ``doc_grad=False`` keeps the document side out of
the backward pass (documents still encoded by the current weights): about a third of the
cost of a step on CPU, at the price of a query-side-only gradient.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["DualEncoderPolicy"]


class DualEncoderPolicy:
    """A trainable sentence-transformers encoder as a retrieval policy."""

    def __init__(self, model: str = "all-MiniLM-L6-v2", *, tau: float = 1.0, max_seq_length: int | None = None,
                 device: str = "cpu") -> None:
        import torch  # noqa: F401  (heavy: only when a policy is made)

        from factrl.retrieval.encoders import _load_sentence_transformer

        if tau <= 0:
            raise ValueError(f"tau must be > 0, got {tau}")
        self.model_name = model
        self.st, self.source = _load_sentence_transformer(model, device)
        if max_seq_length is not None:
            self.st.max_seq_length = int(max_seq_length)
        self.tau = float(tau)
        self.device = device
        # Dropout off: π_θ is the deterministic retriever that is evaluated and indexed;
        # gradients flow all the same.
        self.st.eval()

    def parameters(self) -> Any:
        return self.st.parameters()

    def embed(self, texts: Sequence[str], *, grad: bool = True, batch_size: int = 32) -> Any:
        """``(len(texts), dim)`` float32 tensor of the encoder's sentence embeddings (the
        model's own pipeline: pooling and, for MiniLM, L2 normalisation), with or without
        gradient."""
        import torch

        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts, not one string")
        texts = list(texts)
        if not texts:
            return torch.zeros((0, self.dim), device=self.device)
        prepare = getattr(self.st, "preprocess", None) or self.st.tokenize
        out = []
        with torch.set_grad_enabled(grad):
            for start in range(0, len(texts), batch_size):
                features = prepare(texts[start : start + batch_size])
                features = {k: (v.to(self.device) if hasattr(v, "to") else v) for k, v in features.items()}
                out.append(self.st(features)["sentence_embedding"].float())
        return torch.cat(out)

    @property
    def dim(self) -> int:
        get_dim = getattr(self.st, "get_embedding_dimension", None) or self.st.get_sentence_embedding_dimension
        return int(get_dim())

    def log_probs(self, query_emb: Any, doc_embs: Any) -> Any:
        """log π_θ(d|q) over the rows of ``doc_embs`` (one query vector, ``(n, dim)`` docs)."""
        import torch

        return torch.log_softmax(doc_embs @ query_emb / self.tau, dim=-1)

    def candidate_log_probs(self, query: str, docs: Sequence[str], *, doc_grad: bool = True) -> Any:
        """log π_θ(d|q) over the candidate texts ``docs`` for ``query``, with gradient on
        the query side (and the document side unless ``doc_grad`` is False)."""
        q = self.embed([query])[0]
        d = self.embed(docs, grad=doc_grad)
        return self.log_probs(q, d)

    def save(self, directory: str | Path) -> Path:
        """Write a normal sentence-transformers model folder (loadable by
        ``SentenceTransformer(dir)`` and by ``factrl index build --model DIR``)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self.st.save(str(directory))
        return directory
