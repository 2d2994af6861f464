"""How Binary RAR's responses are read (001, §4.1): the response a verifier and the
metrics see, and the string matches of short-form answers (abstention, gold answers).

``convention="paper"`` drops a reasoning model's ``<think>`` blocks; ``"released"``
reads the response as the authors' released evaluation does (``run_eval.extract_final_answer``:
the ``<answer>`` block, else after ``</think>``) and lets only an answer that is wholly
"I don't know" abstain."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from factrl.protocol.text import strip_think

__all__ = [
    "ABSTENTION_PHRASES",
    "CONVENTIONS",
    "final_answer",
    "is_abstention",
    "is_sole_abstention",
    "matches_gold",
    "normalise_answer",
    "response_of",
]

CONVENTIONS = ("paper", "released")
# The paper instructs the model to write exactly this when unsure (§4.1).
ABSTENTION_PHRASES = ("I don't know",)
_PUNCT = re.compile(r"[^\w\s]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalise_answer(text: str) -> str:
    """Lower case, NFKC, curly quotes straightened, punctuation and articles dropped,
    spaces collapsed (SQuAD-style)."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'").lower()
    text = _PUNCT.sub(" ", text.replace("'", ""))
    return " ".join(_ARTICLES.sub(" ", text).split())


def is_abstention(answer: str, phrases: Sequence[str] = ABSTENTION_PHRASES) -> bool:
    """True when ``answer`` contains one of ``phrases`` (string matching, §4.1; case,
    punctuation and curly quotes ignored: "I DON'T KNOW." matches)."""
    norm = f" {normalise_answer(answer)} "
    return any(f" {normalise_answer(p)} " in norm for p in phrases if normalise_answer(p))


def is_sole_abstention(answer: str) -> bool:
    """The whole answer is "I don't know" (case, punctuation, curly quotes aside)."""
    return any(normalise_answer(answer) == normalise_answer(p) for p in ABSTENTION_PHRASES)


def matches_gold(answer: str, gold_answers: Sequence[str]) -> bool:
    """True when a gold answer (any alias) appears in ``answer`` as whole words after
    normalisation: PopQA's usual string match. (The paper judged PopQA with an LM and
    GPQA by the option letter; pass such judgements to
    :class:`~factrl.metrics.hallucination.ShortFormAnswer` instead.)"""
    norm = f" {normalise_answer(answer)} "
    return any(f" {g} " in norm for g in map(normalise_answer, gold_answers) if g)


def _between(text: str, opening: str, closing: str) -> str | None:
    """``re.search(opening + "(.*?)" + closing, DOTALL)``'s group in linear time (None
    when it does not match): the first ``closing`` after the first ``opening``."""
    start = text.find(opening)
    if start < 0:
        return None
    end = text.find(closing, start + len(opening))
    return None if end < 0 else text[start + len(opening) : end]


def final_answer(prediction: str) -> str:
    """``run_eval.extract_final_answer``: the ``<answer>`` block, else the text after
    ``</think>`` (both stripped), else the text without ``<|assistant|>`` tags, else
    the text as it is."""
    if (block := _between(prediction, "<answer>", "</answer>")) is not None:
        return block.strip()
    if (at := prediction.find("</think>")) >= 0:
        return prediction[at + len("</think>"):].strip()
    cleaned = prediction.replace("<|assistant|>", "")
    return cleaned.strip() if cleaned != prediction else prediction


def response_of(model_text: str, convention: str = "paper") -> str:
    """The response a verifier and the metrics read: the model text without a reasoning
    trace (``released``: as the released evaluation extracts it)."""
    if convention == "released":
        return final_answer(model_text)
    return strip_think(model_text)
