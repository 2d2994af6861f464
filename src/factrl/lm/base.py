"""The LM seam: batched generation that keeps token truth, and continuation scoring."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from factrl.registry import Registry
from factrl.types import Message

__all__ = ["Generation", "LM", "LM_BACKENDS", "GenerationConfig", "RowFailures", "row_configs"]


@dataclass
class Generation:
    """One continuation exactly as sampled.

    ``token_ids`` are the sampled ids (including the stop string's tokens and a sampled
    EOS, if any); ``logprobs[i]`` is the log-probability of ``token_ids[i]``, or
    ``logprobs`` is None when the backend cannot know them (an HTTP API without logprobs).
    ``finish_reason`` is ``"stop"`` (a stop string), ``"eos"`` or ``"length"``.
    Logprobs are of the sampling distribution as a GRPO trainer recomputes it: full
    vocabulary, logits divided by the temperature, no top-k (top-p < 1 breaks that match).
    """

    token_ids: list[int]
    logprobs: list[float] | None
    text: str
    finish_reason: Literal["stop", "eos", "length"]
    stop: str | None = None


class RowFailures(RuntimeError):
    """Some rows of one batched ``generate``/``complete`` call failed, the others did not.

    ``generations[i]`` is row ``i``'s result, or None when it failed and ``errors[i]``
    says why. A backend whose rows fail independently (an HTTP API, one request per row)
    raises this, so the rollout runner fails only those rows' episodes.
    """

    def __init__(self, generations: Sequence[Generation | None], errors: Sequence[BaseException | None]) -> None:
        if len(generations) != len(errors):
            raise ValueError(f"{len(generations)} generations but {len(errors)} errors")
        self.generations = list(generations)
        self.errors = list(errors)
        failed = [e for e in self.errors if e is not None]
        first = f": {type(failed[0]).__name__}: {failed[0]}" if failed else ""
        super().__init__(f"{len(failed)} of {len(self.errors)} rows failed{first}")


@dataclass
class GenerationConfig:
    """Sampling settings for one generate call, or for one row of it.

    ``generate`` takes one config for every row, or a list with one config per row: then
    each row has its own ``max_new_tokens``, ``stop`` and ``seed`` (so a row's output does
    not depend on the other rows of its batch), while ``temperature`` and ``top_p`` must
    agree across the rows. ``meta`` is per-row information a backend may use (e.g. the
    claim a scripted teacher answers, or a request id for a server's prefix cache).

    ``no_repeat_ngram`` (0 = off) is a repetition guard: a token that would make an
    n-gram of that many tokens appear twice in this call's output is never chosen (the
    prompt does not count). It is for evaluation and inference — a small model that
    loops on one evidence id until its token limit. Logprobs stay those of the unguarded
    distribution, so, as with ``top_p < 1``, a GRPO trainer's recomputation no longer
    matches what was sampled: leave it off in training rollouts.
    """

    max_new_tokens: int = 512
    temperature: float = 0.8
    top_p: float = 1.0
    stop: Sequence[str] = field(default_factory=tuple)
    seed: int | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    no_repeat_ngram: int = 0


def row_configs(n: int, config: GenerationConfig | Sequence[GenerationConfig]) -> list[GenerationConfig]:
    """One config per row: ``config`` repeated, or the given list checked for length and
    for one shared temperature/top_p (backends sample a batch with one distribution)."""
    if isinstance(config, GenerationConfig):
        _check_guard(config)
        return [config] * n
    rows = list(config)
    if len(rows) != n:
        raise ValueError(f"{n} prompts but {len(rows)} generation configs")
    if rows and any((c.temperature, c.top_p) != (rows[0].temperature, rows[0].top_p) for c in rows):
        raise ValueError("rows of one generate call must share temperature and top_p")
    for c in rows:
        _check_guard(c)
    return rows


def _check_guard(config: GenerationConfig) -> None:
    n = config.no_repeat_ngram
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"no_repeat_ngram must be an integer >= 0 (0 = off), got {n!r}")


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

    def generate(
        self, prompts: Sequence[Sequence[int]], config: GenerationConfig | Sequence[GenerationConfig]
    ) -> list[Generation]:
        """Continue every prompt (token ids); batched; each row stops at any of its
        ``stop`` strings, EOS, or its ``max_new_tokens`` (see :class:`GenerationConfig`)."""
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
LM_BACKENDS.register_lazy("openai", "factrl.lm.openai_backend")
