"""Label scoring from a server's top next-token logprobs, for both OpenAI endpoints.

* chat completions: the label word starts the assistant's reply (``top_logprobs`` of the
  first position of ``choices[0].logprobs.content``);
* (legacy) completions: the label word is the next token after the raw prompt text — the
  form of FFRR's paper, whose scorer (text-davinci-003; today gpt-3.5-turbo-instruct) is a
  completion model that chat completions does not serve. ``logprobs: N`` asks for the
  top ``N`` tokens (OpenAI allows at most 5 there; vLLM up to its ``max_logprobs``).

:func:`top_choice_scores` turns one position's top tokens into choice scores: a token
counts for a choice when one starts with the other, compared without leading spaces and
without case ("True", " true" and "TRUE" all count for "true"), and a choice scores the
log of the summed probability of every token that counts for it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["completion_body", "parse_completion", "top_choice_scores"]


def top_choice_scores(top: Sequence[tuple[str, float]], choices: Sequence[str]) -> list[float]:
    """log Σ p(token) over the top tokens that count for each choice (see the module
    docstring); -inf for a choice no top token counts for."""
    tops = [(tok.lstrip().casefold(), float(lp)) for tok, lp in top]
    scores = []
    for choice in choices:
        c = choice.lstrip().casefold()
        mass = [lp for t, lp in tops if t and c and (c.startswith(t) or t.startswith(c))]
        scores.append(math.log(sum(math.exp(lp) for lp in mass)) if mass else -math.inf)
    return scores


def completion_body(model: str, prompt: str, top: int) -> dict[str, Any]:
    """One greedy token after ``prompt`` with its ``top`` alternatives (the request key
    ``_endpoint`` routes it to the completions endpoint; it is not sent)."""
    return {"model": model, "prompt": prompt, "max_tokens": 1, "temperature": 0.0, "logprobs": int(top),
            "n": 1, "_endpoint": "completions"}


def parse_completion(response: Any) -> dict[str, Any]:
    """The first choice of a (legacy) completion as a JSON-ready dict: its text and the
    first position's top tokens as ``[[token, logprob], ...]`` (None when not given)."""
    if not getattr(response, "choices", None):
        raise ValueError("the response has no choices")
    choice = response.choices[0]
    logprobs = getattr(choice, "logprobs", None)
    first = (getattr(logprobs, "top_logprobs", None) or [None])[0] if logprobs is not None else None
    usage = getattr(response, "usage", None)
    return {
        "text": getattr(choice, "text", "") or "",
        "finish_reason": getattr(choice, "finish_reason", None),
        "top_logprobs": [[str(t), float(lp)] for t, lp in first.items()] if isinstance(first, dict) else None,
        "usage": [getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0],
    }
