"""What every LM behind HTTP needs: a retry policy, one error type, and a background
event loop that lets synchronous callers run concurrent requests.

:class:`RetryPolicy` retries transport errors, timeouts, 408/409/429 and 5xx answers
with exponential backoff and jitter, waiting at least what a ``Retry-After`` header asks
(capped at ``max_retry_after``), and gives up after ``max_attempts``; other 4xx answers
are not retried. :class:`LMRequestError` is what a caller sees in the end.
:class:`BackgroundLoop` runs coroutines on a loop in a daemon thread, so ``generate``
works from plain code and from inside a running event loop alike.
"""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import os
import random
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["BackgroundLoop", "LMRequestError", "RetryPolicy", "choice_seed", "parse_retry_after", "retryable_status"]

T = TypeVar("T")


class LMRequestError(RuntimeError):
    """An LM request was rejected (4xx) or still failed after its retries.

    ``status`` is the last HTTP status (None for transport errors and timeouts);
    ``attempts`` how many requests were sent.
    """

    def __init__(self, message: str, *, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(message)
        self.status = status
        self.attempts = attempts


def choice_seed(seed: int, index: int) -> int:
    """The seed of choice ``index`` of a request seeded ``seed``: ``seed`` itself for the
    first, a hash of both for the others. The client gives the k-th of identical rows
    this seed and ``factrl serve lm`` its k-th choice, so ``n=3`` and three identical
    seeded rows sample alike."""
    if index == 0:
        return int(seed)
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 2


def retryable_status(status: int) -> bool:
    """Whether an HTTP status is worth another try (rate limits, conflicts, server faults)."""
    return status in (408, 409, 429) or status >= 500


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds a response asks to wait: ``retry-after-ms``, or ``Retry-After`` as seconds or
    an HTTP date; None when absent or unreadable."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    try:
        if "retry-after-ms" in lower:
            return max(0.0, float(lower["retry-after-ms"]) / 1000)
        value = lower.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - (time.time() if now is None else now))
    except (ValueError, TypeError, OverflowError):
        return None


@dataclass(frozen=True)
class RetryPolicy:
    """Retries with exponential backoff and jitter.

    Before try ``a + 1`` (``a >= 1`` failed tries so far) the wait is
    ``min(max_backoff, backoff * 2**(a-1))`` scaled by a random factor in
    ``[1 - jitter, 1]``, and never less than the server's ``Retry-After`` (itself capped
    at ``max_retry_after``).
    """

    max_attempts: int = 5
    backoff: float = 0.5
    max_backoff: float = 30.0
    jitter: float = 0.5
    max_retry_after: float = 60.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError(f"max_attempts must be >= 1, got {self.max_attempts}")
        if self.backoff < 0 or self.max_backoff < 0 or self.max_retry_after < 0:
            raise ValueError("backoff, max_backoff and max_retry_after must be >= 0")
        if not 0 <= self.jitter <= 1:
            raise ValueError(f"jitter must be in [0, 1], got {self.jitter}")

    def delay(self, failed: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait after ``failed`` failed tries (>= 1)."""
        base = min(self.max_backoff, self.backoff * 2 ** max(0, failed - 1))
        wait = base * (1 - self.jitter * (rng or random).random())
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.max_retry_after))
        return wait

    async def run(
        self,
        attempt: Callable[[], Awaitable[T]],
        classify: Callable[[BaseException], tuple[bool, float | None, int | None]],
        *,
        what: str,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        rng: random.Random | None = None,
    ) -> T:
        """``await attempt()`` until it succeeds. ``classify(exc)`` says whether a failure
        is retryable, how long the server asked to wait, and its HTTP status; a failure
        that is not, or the last one, becomes an :class:`LMRequestError` naming ``what``."""
        for tries in range(1, self.max_attempts + 1):
            try:
                return await attempt()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - classified below; nothing escapes unexplained
                retry, retry_after, status = classify(exc)
                reason = f"{type(exc).__name__}: {exc}"
                if not retry:
                    raise LMRequestError(f"{what} failed (not retried): {reason}", status=status,
                                         attempts=tries) from exc
                if tries == self.max_attempts:
                    raise LMRequestError(f"{what} failed after {tries} tries: {reason}", status=status,
                                         attempts=tries) from exc
                await sleep(self.delay(tries, retry_after, rng))
        raise AssertionError("unreachable")  # pragma: no cover


class BackgroundLoop:
    """An asyncio loop in a daemon thread; :meth:`run` blocks the caller until a
    coroutine finishes there. Started on first use, again after a fork."""

    def __init__(self, name: str = "factrl-lm-loop") -> None:
        self.name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid() or not (self._thread and self._thread.is_alive()):
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self._ensure()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._thread is not None and threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("a synchronous LM call was made from the LM's own event loop; await the async call")
        future = asyncio.run_coroutine_threadsafe(coro, self._ensure())
        try:
            return future.result()
        except BaseException:
            future.cancel()  # e.g. KeyboardInterrupt: do not leave requests running
            raise

    def close(self) -> None:
        with self._lock:
            loop, thread, self._loop, self._thread = self._loop, self._thread, None, None
        if loop is not None and thread is not None and self._pid == os.getpid():
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            if not thread.is_alive():
                loop.close()
