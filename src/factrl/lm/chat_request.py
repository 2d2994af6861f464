"""The ``POST /v1/chat/completions`` body that ``factrl serve lm`` accepts, validated.

:func:`parse_chat_request` turns an untrusted body into a :class:`ChatRequest` or raises
:class:`~factrl.serving.BadRequest` (400/404/413) saying what is wrong. Accepted fields:
``model``, ``messages`` (role ``system``/``developer``/``user``/``assistant``/``tool``,
content a string or a list of text parts), ``stop`` (a string or a list),
``temperature``, ``top_p``, ``max_tokens`` (or ``max_completion_tokens``), ``logprobs``,
``top_logprobs`` (accepted; lists come back empty), ``n``, ``seed``, and vLLM's
``continue_final_message``/``add_generation_prompt``. ``stream: true``, tools and other
output formats are refused; other fields are ignored, as OpenAI-compatible servers do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from factrl.serving import BODY_TIMEOUT, BadRequest, decode_json, short_repr

__all__ = ["ChatRequest", "LMServerLimits", "parse_chat_request"]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_REFUSED = ("tools", "tool_choice", "functions", "function_call", "response_format")


@dataclass(frozen=True)
class LMServerLimits:
    """Bounds on one request and on the server's queue; batching settings."""

    max_messages: int = 256
    max_chars: int = 200_000  # all message contents together
    max_tokens: int = 2048  # the largest max_tokens a request may ask for
    default_max_tokens: int = 256  # when a request gives none (at most max_tokens)
    max_n: int = 16
    max_stop: int = 8
    max_stop_chars: int = 256
    max_batch: int = 32  # rows (choices) in one generate call
    max_queue: int = 256  # rows waiting for a generate call; more: 503
    batch_window: float = 0.01  # seconds a batch waits for concurrent requests to join
    timeout: float = 120.0  # seconds a request waits for its generation (then 504)
    max_body_bytes: int = 0  # 0: derived from max_chars
    body_timeout: float = BODY_TIMEOUT  # seconds a request's body may take to arrive (then 408)

    def __post_init__(self) -> None:
        for name in ("max_messages", "max_chars", "max_tokens", "default_max_tokens", "max_n", "max_stop",
                     "max_stop_chars", "max_batch", "max_queue"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.timeout <= 0 or self.body_timeout <= 0 or self.batch_window < 0:
            raise ValueError("timeout and body_timeout must be > 0 and batch_window >= 0")

    @property
    def body_limit(self) -> int:
        # Worst-case JSON escaping makes a character 6 bytes ("\uXXXX"); plus room for the rest.
        return self.max_body_bytes or self.max_chars * 6 + 64 * 1024 + self.max_messages * 64


@dataclass(frozen=True)
class ChatRequest:
    messages: list[dict[str, str]]
    stop: tuple[str, ...]
    temperature: float
    top_p: float
    max_tokens: int
    logprobs: bool
    top_logprobs: int
    n: int
    seed: int | None
    continue_final_message: bool


def _number(data: dict[str, Any], key: str, default: float, low: float, high: float, *, open_low: bool = False) -> float:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadRequest(400, f"'{key}' must be a number, got {short_repr(value)}")
    if not (low < value if open_low else low <= value) or value > high:
        raise BadRequest(400, f"'{key}' must be {'>' if open_low else '>='} {low:g} and <= {high:g}, got {value}")
    return float(value)


def _integer(data: dict[str, Any], key: str, default: int | None, low: int, high: int) -> int | None:
    value = data.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(400, f"'{key}' must be an integer, got {short_repr(value)}")
    if not low <= value <= high:
        raise BadRequest(400, f"'{key}' must be between {low} and {high}, got {value}")
    return value


def _flag(data: dict[str, Any], key: str, default: bool) -> bool:
    value = data.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise BadRequest(400, f"'{key}' must be true or false, got {short_repr(value)}")
    return value


def _text(value: str, what: str) -> str:
    try:  # JSON may carry lone surrogates ("\ud800"); no tokenizer accepts them
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest(400, f"{what} is not valid Unicode (it contains a lone surrogate)") from None
    return value


def _content(value: Any, i: int) -> str:
    if isinstance(value, str):
        return _text(value, f"message {i}")
    if isinstance(value, list):  # [{"type": "text", "text": "..."}]: text parts only
        parts = []
        for part in value:
            if not (isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)):
                raise BadRequest(400, f"message {i}: only text content parts are supported, got {short_repr(part)}")
            parts.append(_text(part["text"], f"message {i}"))
        return "".join(parts)
    raise BadRequest(400, f"message {i}: 'content' must be a string or a list of text parts, got {short_repr(value)}")


def _messages(data: dict[str, Any], limits: LMServerLimits) -> list[dict[str, str]]:
    raw = data.get("messages")
    if not isinstance(raw, list) or not raw:
        raise BadRequest(400, "'messages' must be a non-empty list of {\"role\": ..., \"content\": ...} objects")
    if len(raw) > limits.max_messages:
        raise BadRequest(413, f"{len(raw)} messages; the limit is {limits.max_messages}")
    out, total = [], 0
    for i, m in enumerate(raw):
        if not isinstance(m, dict):
            raise BadRequest(400, f"message {i} must be an object, got {short_repr(m)}")
        role = m.get("role")
        if role not in ROLES:
            raise BadRequest(400, f"message {i}: 'role' must be one of {', '.join(sorted(ROLES))}, got {short_repr(role)}")
        content = _content(m.get("content"), i)
        total += len(content)
        if total > limits.max_chars:
            raise BadRequest(413, f"messages hold more than {limits.max_chars} characters")
        out.append({"role": role, "content": content})
    return out


def _stops(data: dict[str, Any], limits: LMServerLimits) -> tuple[str, ...]:
    stop = data.get("stop")
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise BadRequest(400, "'stop' must be a string or a list of strings")
    if len(stops) > limits.max_stop:
        raise BadRequest(400, f"{len(stops)} stop strings; the limit is {limits.max_stop}")
    for s in stops:
        if not s or len(s) > limits.max_stop_chars:
            raise BadRequest(400, f"stop strings must have 1 to {limits.max_stop_chars} characters")
        _text(s, "a stop string")
    return tuple(stops)


def parse_chat_request(body: bytes, limits: LMServerLimits, served: set[str]) -> ChatRequest:
    """Validate a chat-completions body; ``served`` holds the model ids this server answers to."""
    data = decode_json(body)
    if not isinstance(data, dict):
        raise BadRequest(400, 'body must be a JSON object like {"model": "...", "messages": [...]}')
    model = data.get("model")
    if model is not None and not isinstance(model, str):
        raise BadRequest(400, f"'model' must be a string, got {short_repr(model)}")
    if model is not None and model not in served:
        raise BadRequest(404, f"model {short_repr(model)} is not served here; GET /v1/models lists {sorted(served)}")
    if data.get("stream"):
        raise BadRequest(400, "streaming is not supported; send stream: false")
    for key in _REFUSED:
        if data.get(key) not in (None, [], "none", {"type": "text"}):
            raise BadRequest(400, f"'{key}' is not supported by this server")
    messages = _messages(data, limits)
    if "max_tokens" in data and "max_completion_tokens" in data:
        raise BadRequest(400, "give 'max_tokens' or 'max_completion_tokens', not both")
    key = "max_completion_tokens" if "max_completion_tokens" in data else "max_tokens"
    max_tokens = _integer(data, key, min(limits.default_max_tokens, limits.max_tokens), 1, limits.max_tokens)
    logprobs = _flag(data, "logprobs", False)
    top = _integer(data, "top_logprobs", 0, 0, 20)
    if top and not logprobs:
        raise BadRequest(400, "'top_logprobs' needs 'logprobs': true")
    cont = _flag(data, "continue_final_message", False)
    if cont and messages[-1]["role"] != "assistant":
        raise BadRequest(400, "continue_final_message needs the last message to be an assistant message")
    if cont and _flag(data, "add_generation_prompt", False):
        raise BadRequest(400, "continue_final_message and add_generation_prompt cannot both be true")
    return ChatRequest(
        messages=messages,
        stop=_stops(data, limits),
        temperature=_number(data, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(data, "top_p", 1.0, 0.0, 1.0, open_low=True),
        max_tokens=int(max_tokens or 1),
        logprobs=logprobs,
        top_logprobs=int(top or 0),
        n=int(_integer(data, "n", 1, 1, limits.max_n) or 1),
        seed=_integer(data, "seed", None, -(2**63), 2**64 - 1),
        continue_final_message=cont,
    )
