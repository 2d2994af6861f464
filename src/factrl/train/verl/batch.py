"""Batching across the concurrent episodes of one event loop.

verl runs every sample of a rollout batch as its own coroutine (one agent-loop ``run``
each) in a worker's event loop. Work that is cheap per batch and dear per item — a reward
model or an LM judge scoring trajectories, a frozen sub-agent's LM generating turns — is
gathered here from those coroutines and done together: :class:`AsyncBatcher` holds the
items submitted within ``window`` seconds (or until ``max_batch``), runs the batch
function once in a worker thread, and hands each coroutine its own result. One batch of
a batcher runs at a time (a local model is not driven from two threads at once); items
arriving meanwhile form the next batch.

:func:`loop_shared` keeps one batcher per key and event loop, since verl builds a new
agent-loop object for every sample.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

from factrl.rewards.base import Reward, score_by_default
from factrl.types import Trajectory

__all__ = ["AsyncBatcher", "ScoreBatcher", "loop_shared"]

X = TypeVar("X")
Y = TypeVar("Y")


class AsyncBatcher(Generic[X, Y]):
    """``await batcher.submit(item)`` → ``fn([... item ...])``'s result for that item.

    ``fn`` takes a list of items and returns one result per item, in order; a result that
    is an exception fails only its item, and an exception ``fn`` raises fails every item
    of the batch. ``batches`` records each batch's size.
    """

    def __init__(self, fn: Callable[[list[X]], Sequence[Y | BaseException]], *, max_batch: int = 64,
                 window: float = 0.01) -> None:
        if max_batch < 1 or window < 0:
            raise ValueError(f"need max_batch >= 1 and window >= 0, got {max_batch}, {window}")
        self.fn, self.max_batch, self.window = fn, int(max_batch), float(window)
        self.batches: list[int] = []
        self._pending: list[tuple[X, asyncio.Future[Y]]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._running = False
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, item: X) -> Y:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Y] = loop.create_future()
        self._pending.append((item, future))
        if len(self._pending) >= self.max_batch:
            self._flush()
        elif self._timer is None and not self._running:
            self._timer = loop.call_later(self.window, self._flush)
        return await future

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._running or not self._pending:
            return  # the batch running now starts the next one when it ends
        batch, self._pending = self._pending[: self.max_batch], self._pending[self.max_batch:]
        self._running = True
        task = asyncio.get_running_loop().create_task(self._run(batch))
        self._tasks.add(task)  # the loop keeps only weak references to tasks
        task.add_done_callback(self._tasks.discard)

    async def _run(self, batch: list[tuple[X, asyncio.Future[Y]]]) -> None:
        try:
            self.batches.append(len(batch))
            try:
                results = list(await asyncio.to_thread(self.fn, [item for item, _ in batch]))
                if len(results) != len(batch):
                    raise RuntimeError(f"the batch function returned {len(results)} results for {len(batch)} items")
            except Exception as exc:
                results = [exc] * len(batch)
            for (_, future), result in zip(batch, results):
                if future.done():  # its coroutine was cancelled
                    continue
                if isinstance(result, BaseException):
                    future.set_exception(result)
                else:
                    future.set_result(result)
        finally:
            self._running = False
            if self._pending:
                self._flush()


class ScoreBatcher:
    """Scores the trajectories of concurrent episodes together: with ``reward``, or each
    with its environment's default reward (``default``), one reward call per batch and
    reward (:func:`~factrl.rewards.base.score_by_default`)."""

    def __init__(self, reward: Reward | None = None, *, max_batch: int = 64, window: float = 0.01) -> None:
        self.reward = reward
        self.batcher: AsyncBatcher[tuple[Trajectory, str | None], Trajectory] = AsyncBatcher(
            self._score, max_batch=max_batch, window=window)

    async def score(self, traj: Trajectory, default: str | None) -> Trajectory:
        """``traj``, scored (in place) with the others of its batch."""
        return await self.batcher.submit((traj, default))

    def _score(self, items: list[tuple[Trajectory, str | None]]) -> list[Trajectory]:
        trajs = [t for t, _ in items]
        score_by_default(trajs, [d for _, d in items], self.reward)
        return trajs


_SHARED: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Hashable, Any]] = weakref.WeakKeyDictionary()


def loop_shared(key: Hashable, make: Callable[[], X]) -> X:
    """One object per ``key`` and running event loop, made by ``make`` on first use."""
    table = _SHARED.setdefault(asyncio.get_running_loop(), {})
    if key not in table:
        table[key] = make()
    return table[key]
