"""An LM behind any OpenAI-compatible chat-completions API: OpenAI, vLLM, SGLang or
``factrl serve lm``. ``load_lm("openai:MODEL", base_url=URL)`` builds one. Label scoring
also reaches the (legacy) completions endpoint, for completion models such as
gpt-3.5-turbo-instruct (:meth:`OpenAILM.score_text_choices_batch`,
:mod:`factrl.lm.openai_completions`).

Text level: :meth:`OpenAILM.complete` sends one chat completion per conversation (``n``
is always 1: a GRPO group is its rows), all of them concurrently, at most
``max_concurrency`` in flight. Each row's ``stop``, ``temperature``, ``top_p``,
``max_new_tokens`` (as ``max_tokens``, server tokens) and ``seed`` go with it;
identical requests in one call are told apart by their index among them (which also
derives a distinct seed for the second and later), so a group samples distinct replies.

Token level, for the rollout runner: ids are characters (:mod:`factrl.lm.chat_codec`).
:meth:`OpenAILM.generate` decodes each context back into its chat messages and the
assistant's partial reply (model turns and observations so far) and sends the partial
reply as a final assistant message to continue, with vLLM's
``continue_final_message: true, add_generation_prompt: false`` (honoured by vLLM and
``factrl serve lm``; a server that ignores them starts a new reply after it). The
returned text is re-encoded character by character, so the episode's budgets count
characters. Tokens' logprobs, when the server returns them, sit on the first character
of each token (the rest 0.0: sums are kept); a stop string the server cut off is
appended to the text (factrl's convention) with logprob 0.0; no logprobs → None.

Finish reasons: ``length`` → "length"; ``stop`` → "stop" when the server names the
stop string (vLLM's ``stop_reason``, SGLang's ``matched_stop``, factrl's server), else
"eos" — or, from a server that never names it (OpenAI's own), "stop" when a tag stop
such as ``</search>`` closes an open ``<search>`` in the text; anything else → "eos".

Failures: see :class:`~factrl.lm.remote.RetryPolicy`. ``timeout`` bounds each try as a
whole (headers and the entire body), not only each wait between reads, so a server that
trickles its answer is timed out and retried like a silent one. A row still failing after its
retries fails alone: ``generate``/``complete`` raise :class:`~factrl.lm.base.RowFailures`
(the rollout runner then fails just those episodes), or the :class:`LMRequestError`
itself when every row failed. With ``cache`` (a path), responses are kept in sqlite
(:mod:`factrl.lm.response_cache`) and a hit sends no request.

Reading a response into a :class:`~factrl.lm.openai_chat.ChatGeneration` is
:mod:`factrl.lm.openai_chat`'s; this module builds requests, sends them and retries.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from factrl.lm import chat_codec
from factrl.lm.base import LM_BACKENDS, Generation, GenerationConfig, RowFailures, row_configs
from factrl.lm.loader import LMLoadError
from factrl.lm.openai_chat import ChatGeneration, char_logprobs, chat_generation, infer_stop, parse_chat
from factrl.lm.openai_completions import completion_body, parse_completion, top_choice_scores
from factrl.lm.remote import (BackgroundLoop, LMRequestError, RetryPolicy, choice_seed, parse_retry_after,
                              retryable_status)
from factrl.lm.response_cache import ResponseCache, request_key
from factrl.types import Message

# ChatGeneration, char_logprobs and infer_stop live in factrl.lm.openai_chat; re-exported here.
__all__ = ["ChatGeneration", "LMRequestError", "OpenAILM", "RequestStats", "char_logprobs", "infer_stop"]


@dataclass
class RequestStats:
    requests: int = 0  # HTTP requests sent, retries included
    cache_hits: int = 0
    failures: int = 0  # rows that failed after their retries
    waits: list[float] = field(default_factory=list)  # backoff delays slept, in order
    prompt_tokens: int = 0
    completion_tokens: int = 0


class RequestDeadlineError(TimeoutError):
    """A request whose whole response did not arrive within the timeout (retried)."""


def _classify(exc: BaseException) -> tuple[bool, float | None, int | None]:
    import openai

    if isinstance(exc, RequestDeadlineError):
        return True, None, None
    if isinstance(exc, openai.APIStatusError):
        return retryable_status(exc.status_code), parse_retry_after(exc.response.headers), exc.status_code
    if isinstance(exc, openai.APIConnectionError):  # transport errors and timeouts
        return True, None, None
    return False, None, None


@LM_BACKENDS.register("openai")
class OpenAILM:
    """A chat model behind an OpenAI-compatible API (see the module docstring)."""

    eos_token_id = chat_codec.EOS
    # Ids are characters and a server token's logprob sits on its first one, so an id's
    # logprob is not its own: label confidence (factrl.metrics.label_confidence) is not
    # read from these trajectories.
    logprobs_per_id = False

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        name: str | None = None,
        timeout: float = 60.0,
        max_concurrency: int = 16,
        retry: RetryPolicy | None = None,
        cache: str | Path | ResponseCache | None = None,
        logprobs: bool = True,
        top_logprobs: int = 20,
        completion_logprobs: int = 5,
        extra_body: dict[str, Any] | None = None,
    ) -> None:
        if not model:
            raise LMLoadError("an OpenAI-compatible model needs a name: openai:MODEL")
        if timeout <= 0 or max_concurrency < 1 or not 0 <= top_logprobs <= 20 or completion_logprobs < 0:
            raise ValueError("need timeout > 0, max_concurrency >= 1, 0 <= top_logprobs <= 20 and "
                             "completion_logprobs >= 0")
        self.model = model
        self.name = name or f"openai:{model}"
        self.base_url = base_url
        key = api_key or os.environ.get(api_key_env)
        if not key and base_url is None:
            raise LMLoadError(f"no API key for {self.name}: set {api_key_env}, or pass base_url for a local server")
        self._api_key = key or "unused"  # local servers ignore it; the client wants one
        self.timeout = float(timeout)
        self.max_concurrency = int(max_concurrency)
        self.retry = retry or RetryPolicy()
        self.cache = cache if isinstance(cache, ResponseCache) or cache is None else ResponseCache(cache)
        self.logprobs = logprobs
        self.top_logprobs = top_logprobs
        self.completion_logprobs = completion_logprobs  # the completions endpoint's top-N (OpenAI: at most 5)
        self.extra_body = dict(extra_body or {})
        self.stats = RequestStats()
        self.sleep = asyncio.sleep  # tests swap in a recorder
        self._loop = BackgroundLoop(f"factrl-{self.name}")
        self._client: Any = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None

    @classmethod
    def load(cls, source: str, *, device: str = "cpu", dtype: str = "float32", name: str | None = None,
             **kw: Any) -> OpenAILM:
        """``load_lm("openai:MODEL", base_url=..., api_key_env=...)``; device/dtype do not apply."""
        return cls(source, name=name, **kw)

    def __repr__(self) -> str:
        return f"OpenAILM({self.model!r}, base_url={self.base_url!r})"

    # -- the character codec ------------------------------------------------------------

    def chat_prompt_ids(self, messages: Sequence[Message | dict[str, str]]) -> list[int]:
        return chat_codec.chat_prompt_ids(messages)

    def encode(self, text: str) -> list[int]:
        return chat_codec.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return chat_codec.decode(ids)

    def score(self, prompts: Sequence[Sequence[int]], continuations: Sequence[Sequence[int]]) -> list[float]:
        raise NotImplementedError(f"{self.name}: a chat-completions API cannot score given continuations; "
                                  "use score_choices (first-token logprobs) or a local backend")

    # -- generation ---------------------------------------------------------------------

    def generate(self, prompts: Sequence[Sequence[int]],
                 config: GenerationConfig | Sequence[GenerationConfig]) -> list[Generation]:
        """Continue each context (built by :meth:`chat_prompt_ids`, extended by turns)."""
        if isinstance(prompts, (str, bytes)):
            raise TypeError("prompts must be a list of id lists, got a string")
        rows, continuing = [], []
        for prompt in prompts:
            messages, partial = chat_codec.split_context(prompt)
            rows.append(messages + [{"role": "assistant", "content": partial}] if partial else messages)
            continuing.append(bool(partial))  # an empty reply so far: ask for a new one
        return self._generate_rows(rows, row_configs(len(rows), config), continuing)

    def complete(self, conversations: Sequence[Sequence[Message]],
                 config: GenerationConfig | Sequence[GenerationConfig]) -> list[Generation]:
        """One reply per conversation (a new assistant message), stopping as :meth:`generate`."""
        if isinstance(conversations, (str, bytes)) or (
            len(conversations) and isinstance(conversations[0], (Message, dict))
        ):
            raise TypeError("complete takes a list of conversations (each a list of messages), not one conversation")
        rows = [chat_codec.as_chat(conv) for conv in conversations]
        return self._generate_rows(rows, row_configs(len(rows), config), [False] * len(rows))

    def score_choices(self, conversation: Sequence[Message], choices: Sequence[str]) -> list[float]:
        """An approximation from one position's ``top_logprobs``: each choice scores the
        log of the summed probability of the top tokens it starts with (or that start
        with it), compared without case or leading spaces (:func:`top_choice_scores`); a
        choice outside the top ``top_logprobs`` scores -inf, and choices that share a
        first token score the same. NotImplementedError when the server gives no top
        logprobs."""
        if isinstance(choices, (str, bytes)):
            raise TypeError("choices must be a list of strings, not one string")
        return self.score_choices_batch([conversation], choices)[0]

    def score_choices_batch(self, conversations: Sequence[Sequence[Message]],
                            choices: Sequence[str]) -> list[list[float]]:
        """:meth:`score_choices` for many conversations at once: one request each, sent
        concurrently (at most ``max_concurrency`` in flight); a request that still fails
        after its retries raises (the first such error)."""
        if isinstance(choices, (str, bytes)):
            raise TypeError("choices must be a list of strings, not one string")
        if not choices or not conversations:
            return [[] for _ in conversations]
        if not self.logprobs or not self.top_logprobs:
            raise NotImplementedError(f"{self.name}: score_choices needs logprobs=True and top_logprobs > 0")
        bodies = []
        for conversation in conversations:
            body = self._body(chat_codec.as_chat(conversation),
                              GenerationConfig(max_new_tokens=1, temperature=0.0, seed=0), False, 0)
            body["top_logprobs"] = self.top_logprobs
            bodies.append(body)
        return self._choice_scores(bodies, choices, "the server returned no top_logprobs")

    def score_text_choices_batch(self, prompts: Sequence[str], choices: Sequence[str]) -> list[list[float]]:
        """:meth:`score_choices_batch` on the completions endpoint: each choice as the
        next token after the raw ``prompts`` text (no chat template), from the first
        position's top ``completion_logprobs`` tokens. For completion models (FFRR's
        scorer); a chat-only model refuses the endpoint (the server's error is raised)."""
        if isinstance(prompts, (str, bytes)) or isinstance(choices, (str, bytes)):
            raise TypeError("prompts and choices must be lists of strings")
        if not choices or not prompts:
            return [[] for _ in prompts]
        if not self.completion_logprobs:
            raise NotImplementedError(f"{self.name}: score_text_choices_batch needs completion_logprobs > 0")
        bodies = [completion_body(self.model, str(p), self.completion_logprobs) for p in prompts]
        return self._choice_scores(bodies, choices, "the completions endpoint returned no logprobs")

    def _choice_scores(self, bodies: list[dict[str, Any]], choices: Sequence[str], missing: str) -> list[list[float]]:
        out = []
        for result in self._loop.run(self._gather(bodies)):
            if isinstance(result, BaseException):
                raise result
            if not result.get("top_logprobs"):
                raise NotImplementedError(f"{self.name}: {missing}, so choices cannot be scored")
            out.append(top_choice_scores(result["top_logprobs"], choices))
        return out

    # -- internals ----------------------------------------------------------------------

    def _body(self, messages: list[dict[str, str]], cfg: GenerationConfig, continuing: bool,
              index: int) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": cfg.temperature,
                                "top_p": cfg.top_p, "max_tokens": cfg.max_new_tokens, "n": 1}
        stops = [s for s in cfg.stop if s]
        if stops:
            body["stop"] = stops
        if cfg.seed is not None:
            body["seed"] = choice_seed(int(cfg.seed), index)
        if self.logprobs:
            body["logprobs"] = True
        extra = dict(self.extra_body)
        if continuing:
            extra.update(continue_final_message=True, add_generation_prompt=False)
        if extra:
            body["extra_body"] = extra
        return body

    def _generate_rows(self, rows: list[list[dict[str, str]]], cfgs: list[GenerationConfig],
                       continuing: list[bool]) -> list[Generation]:
        seen: dict[str, int] = {}
        bodies: list[dict[str, Any] | None] = []
        for messages, cfg, cont in zip(rows, cfgs, continuing):
            if cfg.max_new_tokens < 0:
                raise ValueError(f"max_new_tokens must be >= 0, got {cfg.max_new_tokens}")
            if cfg.no_repeat_ngram:
                raise ValueError("no_repeat_ngram is a local-model option: an OpenAI-compatible API has no n-gram guard")
            if cfg.max_new_tokens == 0:
                bodies.append(None)
                continue
            same = request_key(self._body(messages, cfg, cont, 0))
            index = seen[same] = seen.get(same, -1) + 1  # its index among identical requests
            bodies.append(self._body(messages, cfg, cont, index) | {"_index": index})
        todo = [b for b in bodies if b is not None]
        results = iter(self._loop.run(self._gather(todo)) if todo else [])
        gens: list[Generation | None] = []
        errors: list[BaseException | None] = []
        for body, cfg in zip(bodies, cfgs):
            result = next(results) if body is not None else None
            if isinstance(result, BaseException):
                gens.append(None)
                errors.append(result)
            else:
                gens.append(ChatGeneration([], [], "", "length") if result is None else chat_generation(result, cfg))
                errors.append(None)
        failed = [e for e in errors if e is not None]
        if failed and len(failed) == len(errors):
            raise failed[0]
        if failed:
            raise RowFailures(gens, errors)
        return [g for g in gens if g is not None]

    async def _gather(self, bodies: list[dict[str, Any]]) -> list[dict[str, Any] | BaseException]:
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:  # first call, or a new loop after a fork
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(base_url=self.base_url, api_key=self._api_key, timeout=self.timeout,
                                       max_retries=0)  # retries are ours: Retry-After, jitter, one error type
            self._semaphore = asyncio.Semaphore(self.max_concurrency)
            self._client_loop = loop
        return list(await asyncio.gather(*(self._one(b) for b in bodies), return_exceptions=True))

    async def _one(self, body: dict[str, Any]) -> dict[str, Any]:
        key = request_key(body)  # includes "_index": identical requests of one call differ
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            self.stats.cache_hits += 1
            return hit | {"cached": True}
        send = {k: v for k, v in body.items() if k not in ("_index", "_endpoint")}
        legacy = body.get("_endpoint") == "completions"
        assert self._semaphore is not None

        async def attempt() -> dict[str, Any]:
            self.stats.requests += 1
            # The client's timeout bounds each wait between reads only: a server that sends
            # its headers and then a byte a second would hold the request forever.
            create = (self._client.completions.create(**send) if legacy
                      else self._client.chat.completions.create(**send))
            try:
                response = await asyncio.wait_for(create, self.timeout)
            except asyncio.TimeoutError:
                raise RequestDeadlineError(f"timed out: no complete response within {self.timeout:g} s") from None
            return parse_completion(response) if legacy else parse_chat(response)

        async def wait(seconds: float) -> None:
            self.stats.waits.append(seconds)
            await self.sleep(seconds)

        async with self._semaphore:
            try:
                result = await self.retry.run(attempt, _classify, sleep=wait,
                                              what=f"{'completion' if legacy else 'chat completion'} of "
                                                   f"{self.name} at {self.base_url or 'OpenAI'}")
            except LMRequestError:
                self.stats.failures += 1
                raise
        self.stats.prompt_tokens += result["usage"][0]
        self.stats.completion_tokens += result["usage"][1]
        if self.cache is not None:
            self.cache.put(key, result)
        return result

    def close(self) -> None:
        """Close the HTTP client, the loop thread and the cache."""
        if self._client is not None:
            try:
                self._loop.run(self._client.close())
            except RuntimeError:
                pass
            self._client = None
        self._loop.close()
        if self.cache is not None:
            self.cache.close()

