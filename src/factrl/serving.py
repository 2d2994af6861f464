"""Helpers shared by factrl's HTTP servers (retrieval, LM): hardened JSON decoding and
bounded body reading, so every server answers hostile input with 4xx and a message.

A body ``json.loads`` would choke on (5000-digit numbers, deep nesting, NaN, duplicate
keys, invalid encodings) is a :class:`BadRequest` (400), never a 500; a body over the
limit, declared or streamed, is a 413; a body that does not arrive in full within the
body timeout (a client that declared 1,000 bytes and sent 10) is a 408, and the
connection is closed. A body that is not ``Content-Type: application/json`` is a 415: a
web page open in a local browser may POST ``text/plain`` (or a form) to any address
without a CORS preflight, but not JSON, so the servers do not act on such requests. A
client that disconnects mid-body is logged in one line. FastAPI/starlette are needed
only by :func:`read_body`'s caller; this module imports nothing heavy.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import numpy as np

__all__ = ["BadRequest", "BatchWorker", "BODY_TIMEOUT", "MAX_INT_DIGITS", "MAX_JSON_DEPTH", "decode_json", "read_body", "short_repr"]

# Seconds a request's body may take to arrive in full, by default (then 408).
BODY_TIMEOUT = 10.0
# The server's own log (uvicorn's), so --log-level governs these lines too.
log = logging.getLogger("uvicorn.error")


class BadRequest(Exception):
    """A 4xx answer; ``close``: the body was not read to its end, so the connection cannot
    carry another request and is closed after the answer (its ``headers`` say so)."""

    def __init__(self, status: int, message: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close

    @property
    def headers(self) -> dict[str, str] | None:
        return {"Connection": "close"} if self.close else None


# Request bodies nest a few levels; anything much deeper is hostile and would exhaust
# json's recursion (RecursionError, a 500) long before the body-size limit.
MAX_JSON_DEPTH = 32
# No field takes a number this long (topk, max_tokens, seed), and int() of more than
# 4300 digits raises ValueError (CPython's conversion limit), so such numbers stop here.
MAX_INT_DIGITS = 32
# A JSON string (escapes skipped), or an unterminated one running to the end: it always
# matches without backtracking, so stripping strings stays linear in the body size.
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.?[^"\\]*)*(?:"|\Z)', re.DOTALL)
# Outside strings: an opening bracket steps one level in (+1), a closing one out (-1 as int8).
_BRACKET_STEP = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKET = bytes(sorted(set(range(256)) - set(b"[]{}")))


def short_repr(value: Any, limit: int = 60) -> str:
    """``repr`` for error messages, cut short: a bad value may be as large as the body."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _nesting_exceeds(text: str, limit: int) -> bool:
    """Whether ``text`` opens arrays/objects more than ``limit`` deep, checked without recursion.

    Counts every bracket outside strings, so unclosed ones count too: json.loads recurses on
    each ``[``/``{`` it reads, whether or not a matching close ever follows.
    """
    if text.count("[") + text.count("{") <= limit:  # the usual case: nothing to scan
        return False
    outside = _JSON_STRING.sub("", text).encode("utf-8", "surrogatepass")
    steps = np.frombuffer(outside.translate(_BRACKET_STEP, _NOT_BRACKET), dtype=np.int8)
    return steps.size > 0 and int(np.cumsum(steps, dtype=np.int64).max()) > limit


def _parse_int(digits: str) -> int:
    if len(digits.lstrip("-")) > MAX_INT_DIGITS:
        raise BadRequest(400, f"number with {len(digits.lstrip('-'))} digits; the limit is {MAX_INT_DIGITS}")
    return int(digits)


def _reject_constant(name: str) -> Any:
    # Python's json accepts NaN/Infinity, which are not JSON; they are never valid here.
    raise BadRequest(400, f"body is not valid JSON: {name} is not a JSON value")


def _object_without_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # Duplicate keys are ambiguous (which "topk" was meant?): refuse rather than guess.
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise BadRequest(400, f"duplicate key {short_repr(key)} in a JSON object")
            seen.add(key)
    return obj


def decode_json(body: bytes) -> Any:
    """``json.loads`` for untrusted bodies: every failure is a :class:`BadRequest` (400)."""
    try:  # the encoding detection json.loads does for bytes, done first so depth is checked on text
        text = body.decode(json.detect_encoding(body), "surrogatepass")
    except UnicodeDecodeError as exc:
        raise BadRequest(400, f"body is not valid JSON: {exc}") from None
    if _nesting_exceeds(text, MAX_JSON_DEPTH):
        raise BadRequest(400, f"body nests arrays/objects deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text, parse_int=_parse_int, parse_constant=_reject_constant,
                          object_pairs_hook=_object_without_duplicates)
    except json.JSONDecodeError as exc:
        raise BadRequest(400, f"body is not valid JSON: {exc}") from None
    except (RecursionError, ValueError) as exc:  # a backstop: the checks above should come first
        raise BadRequest(400, f"body could not be decoded: {type(exc).__name__}") from None


async def read_body(request: Any, limit: int, *, timeout: float = BODY_TIMEOUT) -> bytes:
    """The body of a starlette ``Request``, at most ``limit`` bytes (413 past it, whether
    declared by Content-Length or streamed without one; 400 for a bad Content-Length),
    within ``timeout`` seconds (408), sent as ``application/json`` (415 otherwise). A
    client that goes away mid-body is logged in one line (and answered 400, unheard)."""
    media = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise BadRequest(415, f"Content-Type must be application/json, got {short_repr(media) if media else 'none'}",
                         close=True)
    declared = request.headers.get("content-length")
    if declared is not None:
        # isdigit() alone admits "²" and unbounded lengths, which int() rejects (a 500)
        if not (declared.isascii() and declared.isdigit()):
            raise BadRequest(400, "invalid Content-Length header", close=True)
        if len(declared) > 18 or int(declared) > limit:
            raise BadRequest(413, f"body of {declared[:18]} bytes; the limit is {limit}", close=True)
    from starlette.requests import ClientDisconnect

    chunks: list[bytes] = []
    size = 0

    async def read() -> None:
        nonlocal size
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise BadRequest(413, f"body larger than the limit of {limit} bytes", close=True)
            chunks.append(chunk)

    try:
        await asyncio.wait_for(read(), timeout)
    except asyncio.TimeoutError:
        of = f" of {declared}" if declared is not None else ""
        raise BadRequest(408, f"the body did not arrive within {timeout:g} s ({size}{of} bytes came)",
                         close=True) from None
    except ClientDisconnect:
        client = getattr(request, "client", None)
        who = f"{client.host}:{client.port}" if client else "a client"
        of = f" of {declared}" if declared is not None else ""
        log.warning("%s disconnected after %d%s bytes of its request body to %s", who, size, of, request.url.path)
        raise BadRequest(400, "the client disconnected before its body arrived", close=True) from None
    return b"".join(chunks)


class BatchWorker:
    """The skeleton of a server's batcher: requests queue work and wake one task that
    serves batches, one backend call at a time, each in a worker thread (the event loop
    stays free for new requests). A subclass queues work in its ``submit``, then calls
    :meth:`_wake_up`, and serves everything queued in :meth:`_serve_pending`."""

    def __init__(self) -> None:
        self.calls = 0  # backend calls made
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass

    def _wake_up(self) -> None:
        assert self._wake is not None, "the batcher was not started"
        self._wake.set()

    async def _serve_pending(self) -> None:
        raise NotImplementedError

    async def _call(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in a worker thread, counted as one backend call."""
        import anyio.to_thread

        self.calls += 1
        return await anyio.to_thread.run_sync(fn, *args)

    @staticmethod
    def _fail(futures: Any, exc: BaseException) -> None:
        """Every request still waiting learns why the backend call failed."""
        for fut in futures:
            if not fut.done():
                fut.set_exception(exc)

    async def _run(self) -> None:
        assert self._wake is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._serve_pending()
