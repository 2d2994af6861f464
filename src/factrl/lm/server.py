"""``factrl serve lm``: any factrl LM behind an OpenAI-compatible HTTP API (FastAPI).

``POST /v1/chat/completions`` (body: :mod:`factrl.lm.chat_request`) answers OpenAI's
``chat.completion`` shape: ``choices[i].message.content`` without the stop string,
``finish_reason`` ``"stop"`` (a stop string or EOS) or ``"length"``, vLLM's
``stop_reason`` naming the stop string that ended it (null otherwise), and with
``logprobs: true`` ``logprobs.content`` as ``[{token, logprob, bytes, top_logprobs}]``
— the sampled tokens that spell ``content`` (a token holding the start of the stop
string is cut at it; tokens of the stop string itself and EOS are left out; a token
ending inside a multi-byte character has text "" and the next token carries the
character) — plus ``usage``. ``GET /v1/models`` lists the served id; ``GET /health``
reports the limits, the queue, how many generate calls ran and, for a local model, its
device, dtype and rows per forward pass.

Batching: requests that arrive within ``batch_window`` of each other (and any that
queue up while the model is busy) are generated together in one ``lm.generate`` call
with one :class:`~factrl.lm.base.GenerationConfig` per row (``n`` choices are ``n``
rows); rows of one call share temperature and top_p, so the queue is grouped by them.
Choice ``i`` of a request seeded ``s`` samples with :func:`~factrl.lm.remote.choice_seed`
``(s, i)``. A full queue answers 503 (with Retry-After), a request not done within
``timeout`` 504, bad input 4xx with a message (JSON decoding hardened as in
:mod:`factrl.serving`), a body not sent as ``application/json`` 415 (so no web page in a
local browser can post to it without a CORS preflight), a body that does not arrive
within ``body_timeout`` 408. Binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from collections.abc import Sequence
from contextlib import asynccontextmanager, nullcontext
from dataclasses import asdict, dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from factrl.lm.base import LM, Generation, GenerationConfig
from factrl.lm.chat_request import ChatRequest, LMServerLimits, parse_chat_request
from factrl.lm.remote import choice_seed
from factrl.lm.text import cut_at_stop
from factrl.serving import BadRequest, BatchWorker, read_body
from factrl.types import Message

__all__ = ["LMServerLimits", "create_lm_app", "prompt_ids", "token_pieces"]


class QueueFull(Exception):
    pass


@dataclass
class _Row:
    prompt: list[int]
    config: GenerationConfig
    future: asyncio.Future


class _Batcher(BatchWorker):
    """Collects rows from concurrent requests into batched ``generate`` calls, one call
    at a time, in a worker thread."""

    def __init__(self, lm: LM, limits: LMServerLimits) -> None:
        super().__init__()
        self.lm, self.limits = lm, limits
        self.pending: deque[_Row] = deque()
        self.batch_sizes: list[int] = []

    def submit(self, prompt: list[int], configs: Sequence[GenerationConfig]) -> list[asyncio.Future]:
        waiting = sum(not r.future.done() for r in self.pending)
        if waiting + len(configs) > self.limits.max_queue:
            raise QueueFull(f"server busy: {waiting} rows queued, the limit is {self.limits.max_queue}")
        loop = asyncio.get_running_loop()
        rows = [_Row(prompt, c, loop.create_future()) for c in configs]
        self.pending.extend(rows)
        self._wake_up()
        return [r.future for r in rows]

    def _take(self) -> list[_Row]:
        """Up to ``max_batch`` live rows sharing the first live row's temperature/top_p."""
        taken: list[_Row] = []
        kept: deque[_Row] = deque()
        key = None
        while self.pending:
            row = self.pending.popleft()
            if row.future.done():  # its request timed out or went away
                continue
            this = (row.config.temperature, row.config.top_p)
            if key is None:
                key = this
            if this == key and len(taken) < self.limits.max_batch:
                taken.append(row)
            else:
                kept.append(row)
        self.pending = kept
        return taken

    async def _serve_pending(self) -> None:
        if self.limits.batch_window:
            await asyncio.sleep(self.limits.batch_window)  # let concurrent requests join
        while self.pending:
            rows = self._take()
            if not rows:
                break
            self.batch_sizes.append(len(rows))
            try:
                gens = await self._call(self.lm.generate, [r.prompt for r in rows], [r.config for r in rows])
            except Exception as exc:  # noqa: BLE001 - every waiting request learns why
                self._fail([r.future for r in rows], exc)
                continue
            for r, g in zip(rows, gens):
                if not r.future.done():
                    r.future.set_result(g)


def prompt_ids(lm: LM, request: ChatRequest) -> list[int]:
    """The chat template over the messages; with ``continue_final_message`` the last
    (assistant) message is left open and continued."""
    # OpenAI's "developer" role is its newer name for "system".
    messages = [Message(role="system" if m["role"] == "developer" else m["role"], content=m["content"])  # type: ignore[arg-type]
                for m in request.messages]
    if request.continue_final_message:
        *before, last = messages
        return list(lm.chat_prompt_ids(before)) + list(lm.encode(last.content))
    return list(lm.chat_prompt_ids(messages))


def token_pieces(lm: LM, ids: Sequence[int]) -> list[str]:
    """Each token's share of ``lm.decode(ids)``; a token ending inside a multi-byte
    character gets "" and the next one the character.

    Incremental detokenisation (as vLLM does it): each new piece is the decoded text of a
    short window of recent tokens minus that window's settled prefix, so the cost stays
    linear in the length. Should the pieces not spell the whole decode (a tokenizer whose
    decoding depends on more context), every prefix is decoded instead.
    """
    ids = list(ids)
    pieces: list[str] = []
    prefix_at = read_at = 0
    for i in range(len(ids)):
        settled = lm.decode(ids[prefix_at:read_at])
        window = lm.decode(ids[prefix_at : i + 1])
        if len(window) > len(settled) and window.startswith(settled) and not window.endswith("\ufffd"):
            pieces.append(window[len(settled):])
            prefix_at, read_at = read_at, i + 1
        else:
            pieces.append("")
    if "".join(pieces) == lm.decode(ids):
        return pieces
    pieces, before = [], ""
    for i in range(len(ids)):
        now = lm.decode(ids[: i + 1])
        if now.endswith("\ufffd") and i + 1 < len(ids) or not now.startswith(before):
            pieces.append("")
            continue
        pieces.append(now[len(before):])
        before = now
    return pieces


def _choice(lm: LM, index: int, gen: Generation, want_logprobs: bool) -> dict[str, Any]:
    gen = cut_at_stop(gen)
    stop = gen.stop if gen.finish_reason == "stop" else None
    content = gen.text[: -len(stop)] if stop and gen.text.endswith(stop) else gen.text
    out: dict[str, Any] = {
        "index": index,
        "message": {"role": "assistant", "content": content},
        "finish_reason": "length" if gen.finish_reason == "length" else "stop",
        "stop_reason": stop,
        "logprobs": None,
    }
    if want_logprobs:
        eos = set(getattr(lm, "eos_token_ids", ())) | {lm.eos_token_id}
        ids = list(gen.token_ids)
        if gen.finish_reason == "eos" and ids and ids[-1] in eos:
            ids = ids[:-1]
        entries, at = [], 0
        for piece, lp in zip(token_pieces(lm, ids), gen.logprobs or [0.0] * len(ids)):
            if at >= len(content):
                break  # the stop string's tokens
            piece = piece[: len(content) - at]
            at += len(piece)
            entries.append({"token": piece, "logprob": float(lp), "bytes": list(piece.encode("utf-8")),
                            "top_logprobs": []})
        out["logprobs"] = {"content": entries}
    return out


def create_lm_app(lm: LM, *, model_id: str, limits: LMServerLimits | None = None,
                  aliases: Sequence[str] = ()) -> FastAPI:
    """A FastAPI app serving ``lm`` as ``model_id`` (requests may also name an alias)."""
    limits = limits or LMServerLimits()
    batcher = _Batcher(lm, limits)
    served = {model_id, *aliases}
    created = int(time.time())
    context = getattr(getattr(getattr(lm, "model", None), "config", None), "max_position_embeddings", None)

    @asynccontextmanager
    async def lifespan(_app: FastAPI):  # type: ignore[no-untyped-def]
        # a conversation's next request prefills only its new tokens (HFLM's turn cache)
        reuse = getattr(lm, "reuse_turns", None)
        with reuse() if callable(reuse) else nullcontext():
            batcher.start()
            yield
            await batcher.stop()

    app = FastAPI(title="factrl LM server", lifespan=lifespan)
    app.state.batcher = batcher

    def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
        kind = "invalid_request_error" if status < 500 else "server_error"
        return JSONResponse({"error": {"message": message, "type": kind, "code": status}, "detail": message},
                            status_code=status, headers=headers)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> JSONResponse:
        try:
            body = await read_body(request, limits.body_limit, timeout=limits.body_timeout)
            req = parse_chat_request(body, limits, served)
            try:
                prompt = prompt_ids(lm, req)
            except ValueError as exc:  # e.g. a tokenizer without a chat template
                raise BadRequest(400, f"cannot build the prompt: {exc}") from None
            if context and len(prompt) + req.max_tokens > context:
                raise BadRequest(400, f"{len(prompt)} prompt tokens + max_tokens {req.max_tokens} exceed the "
                                      f"model's context of {context}")
        except BadRequest as exc:
            return error(exc.status, exc.message, exc.headers)
        configs = [GenerationConfig(max_new_tokens=req.max_tokens, temperature=req.temperature, top_p=req.top_p,
                                    stop=req.stop, seed=None if req.seed is None else choice_seed(req.seed, i))
                   for i in range(req.n)]
        try:
            futures = batcher.submit(prompt, configs)
        except QueueFull as exc:
            return error(503, str(exc), {"Retry-After": "1"})
        try:
            gens = await asyncio.wait_for(asyncio.shield(asyncio.gather(*futures)), timeout=limits.timeout)
        except asyncio.TimeoutError:
            for f in futures:
                f.cancel()
            return error(504, f"generation did not finish within {limits.timeout:g}s")
        except Exception as exc:  # noqa: BLE001 - a model fault (input was validated): 500 with the reason
            return error(500, f"generation failed: {type(exc).__name__}: {exc}")
        import anyio.to_thread

        choices = await anyio.to_thread.run_sync(
            lambda: [_choice(lm, i, g, req.logprobs) for i, g in enumerate(gens)])
        completion = sum(len(g.token_ids) for g in gens)
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model_id,
            "choices": choices,
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": completion,
                      "total_tokens": len(prompt) + completion},
        })

    @app.get("/v1/models")
    async def models() -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": model_id, "object": "model", "created": created, "owned_by": "factrl"}]})

    @app.get("/health")
    async def health() -> JSONResponse:
        return JSONResponse({
            "status": "ok", "model": model_id, "context": context,
            "limits": {**asdict(limits), "max_body_bytes": limits.body_limit},
            "queued": sum(not r.future.done() for r in batcher.pending),
            "backend_calls": batcher.calls,
            # where the model runs (device, dtype, rows per forward pass), for a local one
            **({"runtime": lm.runtime_info()} if callable(getattr(lm, "runtime_info", None)) else {}),
            # prompt tokens taken from earlier requests' keys and values instead of prefilled
            **({"turn_cache": asdict(turns.stats)} if (turns := getattr(lm, "turn_cache", None)) is not None else {}),
        })

    return app
