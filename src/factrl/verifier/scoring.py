"""Batched scoring of (claim, evidence) pairs: the :class:`PairVerifier` protocol and the
cross-encoder that implements it.

``predict(claims, evidence)`` gives calibrated probabilities, one row per pair, columns
in :data:`~factrl.verifier.pairs.VERIFIER_LABELS` order. Pairs are tokenised once, sorted
by length and cut into batches under a token budget, so short pairs are not padded to the
longest of the call; results come back in input order. ``precision``: ``"fp32"``;
``"bf16"`` (the weights cast to bfloat16: about twice as fast where the CPU multiplies
bf16 natively — AVX512-BF16 or AMX — with the same labels on 99.6 % or more of pairs);
``"int8"`` (dynamic quantisation of the linear layers: loses agreement, opt-in only); or
``"auto"`` (bf16 where it is native, else fp32: the default). Figures: docs/benchmarks.md.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

from factrl.verifier.pairs import VERIFIER_LABELS

__all__ = ["CrossEncoderVerifier", "PairVerifier", "Thresholds", "softmax"]


@dataclass(frozen=True)
class Thresholds:
    """Decision thresholds on calibrated probabilities, chosen on the validation split:
    a pair *contradicts* when P(REFUTE) ≥ ``refute`` and *supports* when P(SUPPORT) ≥
    ``support``."""

    support: float = 0.5
    refute: float = 0.5

    def __post_init__(self) -> None:
        for name in ("support", "refute"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise ValueError(f"threshold {name} must be in [0, 1], got {v!r}")


@runtime_checkable
class PairVerifier(Protocol):
    """Reads a claim (or a response sentence) against evidence; what rewards, judges and
    the ``retrieve_verify`` agent call."""

    name: str
    thresholds: Thresholds

    def predict(self, claims: Sequence[str], evidence: Sequence[str]) -> np.ndarray: ...


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = np.asarray(logits, dtype=np.float64) / float(temperature)
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def _check_texts(claims: Sequence[str], evidence: Sequence[str]) -> None:
    if isinstance(claims, str) or isinstance(evidence, str):
        raise TypeError("claims and evidence must be sequences of strings, not one string")
    if len(claims) != len(evidence):
        raise ValueError(f"{len(claims)} claims but {len(evidence)} evidence texts")
    for i, (c, e) in enumerate(zip(claims, evidence)):
        if not isinstance(c, str) or not isinstance(e, str):
            raise TypeError(f"pair {i}: claim and evidence must be strings, got {type(c).__name__}, {type(e).__name__}")


class CrossEncoderVerifier:
    """A loaded cross-encoder (:func:`~factrl.verifier.model.load_cross_encoder`) with its
    calibration. Thread-safe (one lock around the model). ``bf16`` and ``int8`` convert
    the model given (bf16 in place): pass ``precision="fp32"`` for a model still training."""

    def __init__(self, model: Any, tokenizer: Any, *, max_length: int, temperature: float = 1.0,
                 thresholds: Thresholds | None = None, name: str = "verifier", precision: str = "auto",
                 batch_tokens: int = 4096, agent_thresholds: Thresholds | None = None) -> None:
        from factrl.retrieval.encoders import resolve_precision

        if not temperature > 0:
            raise ValueError(f"temperature must be > 0, got {temperature!r}")
        precision = resolve_precision(precision, cpu=True)  # the verifier runs on the CPU
        if precision == "bf16":
            import torch

            model = model.to(torch.bfloat16)
        elif precision == "int8":
            import warnings

            import torch

            with warnings.catch_warnings():  # eager dynamic quantisation is deprecated upstream but works
                warnings.simplefilter("ignore")
                model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = int(max_length)
        self.temperature = float(temperature)
        self.thresholds = thresholds or Thresholds()
        # retrieve_verify's, where chosen: its verdict reads the best of many sentences, so
        # it needs surer probabilities than one pair (None: the pair thresholds)
        self.agent_thresholds = agent_thresholds
        self.name = name
        self.precision = precision
        self.batch_tokens = int(batch_tokens)
        self.labels = VERIFIER_LABELS
        self._lock = threading.Lock()

    def logits(self, claims: Sequence[str], evidence: Sequence[str]) -> np.ndarray:
        """Uncalibrated logits, ``(n, 3)`` float32, in input order."""
        import torch

        _check_texts(claims, evidence)
        n = len(claims)
        out = np.zeros((n, len(self.labels)), dtype=np.float32)
        if not n:
            return out
        enc = self.tokenizer(list(claims), list(evidence), truncation="longest_first", max_length=self.max_length)
        ids, types = enc["input_ids"], enc.get("token_type_ids")
        order = sorted(range(n), key=lambda i: -len(ids[i]))
        pad = int(self.tokenizer.pad_token_id or 0)
        start = 0
        with self._lock, torch.inference_mode():
            while start < n:
                longest = len(ids[order[start]])
                size = max(1, self.batch_tokens // max(longest, 1))
                batch = order[start : start + size]
                x = torch.full((len(batch), longest), pad, dtype=torch.long)
                t = torch.zeros_like(x)
                m = torch.zeros_like(x)
                for row, i in enumerate(batch):
                    x[row, : len(ids[i])] = torch.tensor(ids[i])
                    m[row, : len(ids[i])] = 1
                    if types is not None:
                        t[row, : len(ids[i])] = torch.tensor(types[i])
                logits = self.model(input_ids=x, attention_mask=m, token_type_ids=t)
                out[batch] = logits.float().numpy()
                start += size
        return out

    def predict(self, claims: Sequence[str], evidence: Sequence[str]) -> np.ndarray:
        """Calibrated probabilities ``(n, 3)`` (SUPPORT, REFUTE, NOT ENOUGH INFO)."""
        return softmax(self.logits(claims, evidence), self.temperature)

    def info(self) -> dict[str, Any]:
        agent = self.agent_thresholds
        return {"name": self.name, "temperature": self.temperature, "precision": self.precision,
                "max_length": self.max_length, "thresholds": {"support": self.thresholds.support,
                                                              "refute": self.thresholds.refute},
                "agent_thresholds": {"support": agent.support, "refute": agent.refute} if agent else None}
