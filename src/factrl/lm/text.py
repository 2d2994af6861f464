"""The LM protocol's text-level calls, built once on its token-level ones.

LM verifiers, judges and label scorers speak chat in and text out; a backend that owns a
tokenizer gets :meth:`~TokenTextMixin.complete` and :meth:`~TokenTextMixin.score_choices`
from :class:`TokenTextMixin` (``chat_prompt_ids`` + ``encode`` + ``generate`` + ``score``).
A backend behind an HTTP API implements the two methods directly instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from factrl.lm.base import Generation, GenerationConfig
from factrl.types import Message

__all__ = ["TokenTextMixin", "choice_probs", "cut_at_stop"]


def cut_at_stop(generation: Generation) -> Generation:
    """``generation`` with ``text`` ending at its stop string (kept, as factrl's episodes
    keep ``</search>``): a token sampled across the stop can carry characters past it.
    Token ids and logprobs stay as sampled."""
    if generation.finish_reason != "stop" or not generation.stop:
        return generation
    at = generation.text.find(generation.stop)
    if at == -1:
        return generation
    end = at + len(generation.stop)
    return generation if end == len(generation.text) else replace(generation, text=generation.text[:end])


def choice_probs(logprobs: Sequence[float]) -> list[float]:
    """Softmax of :meth:`~TokenTextMixin.score_choices` scores: the distribution over the
    choices alone (e.g. over label words), summing to 1."""
    if not logprobs:
        return []
    top = max(logprobs)
    if top == -math.inf:
        raise ValueError("every choice has probability 0")
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    return [w / total for w in weights]


class TokenTextMixin:
    """``complete`` and ``score_choices`` for a backend with a tokenizer.

    The backend provides ``chat_prompt_ids(messages)``, ``encode(text)``,
    ``generate(prompt_ids, config)`` and ``score(prompt_ids, continuation_ids)``.
    """

    def complete(self, conversations: Sequence[Sequence[Message]], config: GenerationConfig) -> list[Generation]:
        """Continue each conversation's assistant turn (its chat template, then
        ``generate``): one :class:`Generation` per conversation, in order, stopping at any
        of ``config.stop`` (``text`` ends with the stop string), EOS or ``max_new_tokens``."""
        if isinstance(conversations, (str, bytes)) or (
            len(conversations) and isinstance(conversations[0], (Message, dict))
        ):
            raise TypeError("complete takes a list of conversations (each a list of messages), not one conversation")
        if not conversations:
            return []
        prompts = [self.chat_prompt_ids(list(conv)) for conv in conversations]  # type: ignore[attr-defined]
        return [cut_at_stop(g) for g in self.generate(prompts, config)]  # type: ignore[attr-defined]

    def score_choices(self, conversation: Sequence[Message], choices: Sequence[str]) -> list[float]:
        """Log-probability of each choice as the start of the assistant reply to
        ``conversation`` (summed over its tokens, so longer choices score lower;
        :func:`choice_probs` normalises over the choices)."""
        if isinstance(choices, (str, bytes)):
            raise TypeError("choices must be a list of strings, not one string")
        if not choices:
            return []
        prompt = self.chat_prompt_ids(list(conversation))  # type: ignore[attr-defined]
        continuations = [self.encode(choice) for choice in choices]  # type: ignore[attr-defined]
        return list(self.score([prompt] * len(continuations), continuations))  # type: ignore[attr-defined]
