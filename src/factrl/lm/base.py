"""The LM seam: batched generation that keeps token truth, and continuation scoring."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from factrl.registry import Registry
from factrl.types import Message

__all__ = ["Generation", "LM", "LM_BACKENDS", "GenerationConfig"]


@dataclass
class Generation:
    """One continuation exactly as sampled.

    ``token_ids`` are the sampled ids (including the stop string's tokens and a sampled
    EOS, if any); ``logprobs[i]`` is the log-probability of ``token_ids[i]``.
    ``finish_reason`` is ``"stop"`` (a stop string), ``"eos"`` or ``"length"``.
    Logprobs are of the sampling distribution as a GRPO trainer recomputes it: full
    vocabulary, logits divided by the temperature, no top-k (top-p < 1 breaks that match).
    """

    token_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: Literal["stop", "eos", "length"]
    stop: str | None = None


@dataclass
class GenerationConfig:
    max_new_tokens: int = 512
    temperature: float = 0.8
    top_p: float = 1.0
    stop: Sequence[str] = field(default_factory=tuple)
    seed: int | None = None


@runtime_checkable
class LM(Protocol):
    """A language model backend.

    Environments never tokenise: the rollout runner asks the LM to turn chat messages
    into prompt ids and observation text into ids, and keeps sampled ids as they are.
    """

    name: str
    eos_token_id: int

    def chat_prompt_ids(self, messages: Sequence[Message]) -> list[int]:
        """Token ids of the chat template applied to ``messages`` plus the assistant header."""
        ...

    def encode(self, text: str) -> list[int]:
        """Ids for environment text inserted mid-episode (no special tokens added)."""
        ...

    def decode(self, ids: Sequence[int]) -> str: ...

    def generate(self, prompts: Sequence[Sequence[int]], config: GenerationConfig) -> list[Generation]:
        """Continue every prompt (token ids); batched; stops at any of ``config.stop``,
        EOS, or ``max_new_tokens``."""
        ...

    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> list[float]:
        """Sum of log-probabilities of each continuation given its prompt."""
        ...

    # Text level, for LM verifiers/judges/label scorers; an HTTP backend can serve these
    # alone. Backends with a tokenizer get them from factrl.lm.text.TokenTextMixin.

    def complete(self, conversations: Sequence[Sequence[Message]], config: GenerationConfig) -> list[Generation]:
        """Chat in, text out: one generation per conversation, continuing its assistant
        turn under the chat template; stops as :meth:`generate`."""
        ...

    def score_choices(self, conversation: Sequence[Message], choices: Sequence[str]) -> list[float]:
        """Log-probability of each choice text as the start of the assistant reply."""
        ...


LM_BACKENDS: Registry[type] = Registry("LM backend")
LM_BACKENDS.register_lazy("hf", "factrl.lm.hf")
LM_BACKENDS.register_lazy("scripted", "factrl.lm.scripted")
