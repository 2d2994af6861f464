"""Reading a chat completion: the first choice as a JSON-ready dict (what the response
cache keeps, :func:`parse_chat`) and that dict as a :class:`ChatGeneration` in factrl's
convention (:func:`chat_generation`): the stop string the server cut off appended, the
finish reason read from what the server says (or, when it says nothing, from an open tag),
characters as ids and each server token's logprob on its first character."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from factrl.lm import chat_codec
from factrl.lm.base import Generation, GenerationConfig

__all__ = ["ChatGeneration", "char_logprobs", "chat_generation", "infer_stop", "parse_chat"]


@dataclass
class ChatGeneration(Generation):
    """A :class:`Generation` with the server's own tokens and their logprobs (None when
    it gave none), and whether it came from the cache."""

    tokens: list[str] | None = None
    token_logprobs: list[float] | None = None
    cached: bool = False


def infer_stop(text: str, stops: Sequence[str]) -> str | None:
    """For a server that does not say which stop string ended a reply: the tag stop
    (``</x>``) whose opening ``<x>`` is still open at the end of ``text``, if any."""
    best: tuple[int, str] | None = None
    for stop in stops:
        if stop.startswith("</") and stop.endswith(">") and len(stop) > 3:
            opened = text.rfind("<" + stop[2:])
            if opened > text.rfind(stop) and (best is None or opened > best[0]):
                best = (opened, stop)
    return None if best is None else best[1]


def char_logprobs(text: str, tokens: Sequence[str], logprobs: Sequence[float]) -> list[float] | None:
    """One logprob per character of ``text``: each token's on its first character (a
    token with no text passes its logprob on to the next), 0.0 elsewhere; None when the
    tokens do not spell ``text``."""
    if "".join(tokens) != text or len(tokens) != len(logprobs):
        return None
    out = [0.0] * len(text)
    at, carry = 0, 0.0
    for tok, lp in zip(tokens, logprobs):
        carry += float(lp)
        if tok:
            out[at] += carry
            at, carry = at + len(tok), 0.0
    if carry and out:
        out[-1] += carry
    return out


def parse_chat(response: Any) -> dict[str, Any]:
    """The first choice of a chat completion, as a JSON-ready dict (what the cache keeps)."""
    if not getattr(response, "choices", None):
        raise ValueError("the response has no choices")
    choice = response.choices[0]
    extra = getattr(choice, "model_extra", None) or {}
    named = "stop_reason" if "stop_reason" in extra else "matched_stop" if "matched_stop" in extra else None
    matched = extra.get(named) if named else None
    out: dict[str, Any] = {
        "text": choice.message.content or "",
        "finish_reason": choice.finish_reason,
        "names_stop": named is not None,
        "matched_stop": matched if isinstance(matched, str) else None,
        "tokens": None, "logprobs": None, "top_logprobs": None,
    }
    content = getattr(getattr(choice, "logprobs", None), "content", None)
    if content is not None:
        out["tokens"] = [t.token for t in content]
        out["logprobs"] = [float(t.logprob) for t in content]
        if content and content[0].top_logprobs:
            out["top_logprobs"] = [[t.token, float(t.logprob)] for t in content[0].top_logprobs]
    usage = getattr(response, "usage", None)
    out["usage"] = [getattr(usage, "prompt_tokens", 0) or 0, getattr(usage, "completion_tokens", 0) or 0]
    return out


def chat_generation(result: dict[str, Any], cfg: GenerationConfig) -> ChatGeneration:
    content: str = result["text"]
    stops = [s for s in cfg.stop if s]
    lps = None
    if result.get("tokens") is not None and result.get("logprobs") is not None:
        lps = char_logprobs(content, result["tokens"], result["logprobs"])
    text, stop = content, None
    reason = result["finish_reason"]
    first = min(((content.find(s) + len(s), s) for s in stops if s in content), default=None)
    if first is not None:  # the server ignored a stop string (or allows fewer): cut here
        text, stop, finish = content[: first[0]], first[1], "stop"
    elif reason == "length":
        finish = "length"
    elif reason == "stop":
        stop = result.get("matched_stop") if result.get("names_stop") else infer_stop(content, stops)
        finish = "stop" if stop else "eos"
    else:
        finish = "eos"
    if finish == "stop" and stop and not text.endswith(stop):
        text += stop
    ids = chat_codec.encode(text) + ([chat_codec.EOS] if finish == "eos" else [])
    logprobs = None if lps is None else (lps[: len(text)] + [0.0] * len(ids))[: len(ids)]
    return ChatGeneration(token_ids=ids, logprobs=logprobs, text=text, finish_reason=finish, stop=stop,  # type: ignore[arg-type]
                          tokens=result.get("tokens"), token_logprobs=result.get("logprobs"),
                          cached=bool(result.get("cached")))
