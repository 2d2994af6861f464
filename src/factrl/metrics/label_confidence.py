"""The probability the model gave its verdict's label, read off the trajectory (Veri-R1 §4.3).

Veri-R1 §4.3 takes "the output logit corresponding to each predicted label" — a
probability, given its tiers low < 0.85 and high > 0.95 — and compares it with accuracy.
A trajectory's model turns keep every sampled token id with its logprob, so no second
forward pass is needed:

1. **The label** is found in the model's own text (observations excluded): the value after
   ``Label:`` in the last ``<answer>`` block, as the verdict parser reads it
   (:func:`factrl.protocol.tags.answer_label_span`).
2. **Tokens to characters.** Within the model turn holding it, token ``i`` covers the
   characters ``[len(decode(ids[:i])), len(decode(ids[:i+1])))``, decoded with the LM's
   own ``decode``. Prefixes, not single tokens, are decoded: a SentencePiece piece loses
   its leading space when decoded alone and a byte-level piece may be half a character.
   A prefix whose text disagrees with the turn's recorded text covers nothing.
3. **The label's first token** is the one whose characters include the label's first
   character. With BPE vocabularies it usually starts with the space after ``Label:``
   (``" SUPPORT"``, or ``" NOT"`` of NOT ENOUGH INFO): that token is where the model chose
   its label.

``mode="first"`` (the default, as the paper): exp(logprob) of that first token.
``mode="sequence"``: exp of the summed logprobs of every token overlapping the label's
characters, the probability of the whole label string as tokenised (the same as
``"first"`` for a one-token label).

Which distribution: the logprobs recorded at sampling time, i.e. under logits /
temperature over the full vocabulary (:class:`factrl.lm.base.Generation`); greedy runs
(temperature 0) record temperature-1 logprobs, the model's own distribution, which is what
the paper reads. A run sampled at temperature 0.8 reports the sharpened distribution.

None when the episode ended in an error, there is no ``<answer>`` block or no known
label in it, the turn holding the label has no logprobs, or no decoded prefix agrees
with the turn's text around the label (token truth was lost: nothing exact can be said).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal

from factrl.protocol.tags import answer_label_span
from factrl.types import Trajectory, Turn

__all__ = ["label_confidence", "label_token_logprobs"]

Decode = Callable[[Sequence[int]], str]


def _covering_tokens(turn: Turn, decode: Decode, start: int, end: int) -> tuple[int, int] | None:
    """Indices ``(first, last)`` of the tokens of ``turn`` whose characters include
    ``turn.text[start]`` and ``turn.text[end - 1]``; None when no prefix decodes to them."""
    ids, text = turn.token_ids, turn.text

    def before(k: int) -> bool:
        """ids[:k] decode to a stretch of the text that ends before ``start``."""
        prefix = decode(ids[:k])
        return len(prefix) <= start and text.startswith(prefix)

    # Bisect to such a prefix (k = 0 is one), as late as possible, then scan on: a few
    # decodes instead of one per token. Decoding more ids only appends text, so the tokens
    # of such a prefix all lie before ``start`` and the label's first token comes after;
    # every prefix the scan accepts is still checked against the text.
    lo, hi = 0, len(ids) + 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if before(mid) else (lo, mid)
    first: int | None = None
    for k in range(lo + 1, len(ids) + 1):
        prefix = decode(ids[:k])
        if first is None and len(prefix) > start and prefix[: start + 1] == text[: start + 1]:
            first = k - 1
        if first is not None and len(prefix) >= end and prefix[:end] == text[:end]:
            return first, k - 1
    return None


def label_token_logprobs(traj: Trajectory, decode: Decode) -> list[float] | None:
    """Logprobs of the tokens that spell the label (the first is the label's first
    token; see the module doc), or None where :func:`label_confidence` is None."""
    if traj.error is not None:
        return None
    model_turns = [t for t in traj.turns if t.source == "model"]
    span = answer_label_span("".join(t.text for t in model_turns))
    if span is None:
        return None
    start, end = span
    out: list[float] = []
    offset = 0
    for turn in model_turns:
        lo, hi = max(start, offset), min(end, offset + len(turn.text))
        if lo < hi:  # this turn holds (part of) the label
            if turn.logprobs is None or len(turn.logprobs) != len(turn.token_ids):
                return None
            tokens = _covering_tokens(turn, decode, lo - offset, hi - offset)
            if tokens is None:
                return None
            out.extend(turn.logprobs[tokens[0] : tokens[1] + 1])
        offset += len(turn.text)
    return out or None


def label_confidence(
    traj: Trajectory, decode: Decode, *, mode: Literal["first", "sequence"] = "first"
) -> float | None:
    """Probability the model gave its answer's label: of the label's first token
    (``mode="first"``, Veri-R1 §4.3) or of all its tokens (``"sequence"``); None when it
    cannot be read exactly (see the module doc). ``decode`` is the LM's own."""
    if mode not in ("first", "sequence"):
        raise ValueError(f"mode must be 'first' or 'sequence', got {mode!r}")
    lps = label_token_logprobs(traj, decode)
    if lps is None:
        return None
    # A log-softmax is <= 0; min() only guards against a backend's rounding.
    return min(1.0, math.exp(lps[0] if mode == "first" else math.fsum(lps)))
