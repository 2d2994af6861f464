"""One writer per run directory.

Two runs appending to one ``trajectories.jsonl`` would both evaluate every claim and
interleave their lines. A run therefore holds an exclusive ``flock`` on ``run.lock`` in
its directory for as long as it runs; a second run fails at once, naming the holder
(pid, host, start time, which the holder writes into the file).

``flock`` rather than "the file exists": the kernel drops the lock when its holder dies,
so a lock file left behind by a killed run never blocks the next one. The file is kept
(and emptied) on release, because unlinking a lock file lets a third process lock a
fresh inode while a second still holds the old one. The lock is re-entrant within one
thread, so a command can take it early (before loading a model, to fail at once) and the
library call inside it takes it again. ``flock`` is advisory and may not
work across hosts on some network filesystems; the holder's host is recorded so the
message says where to look.
"""

from __future__ import annotations

import fcntl
import functools
import inspect
import json
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

__all__ = ["LOCK_FILE", "LockHolder", "RunLockedError", "run_lock", "locks_run_dir"]

LOCK_FILE = "run.lock"

# Directories this process holds: resolved path → (owning thread id, holder).
_HELD: dict[Path, tuple[int, "LockHolder"]] = {}
_HELD_GUARD = threading.Lock()

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True)
class LockHolder:
    """Who holds a run directory, as written into its lock file."""

    pid: int
    host: str
    started: str  # UTC, ISO 8601

    @classmethod
    def me(cls) -> "LockHolder":
        return cls(os.getpid(), socket.gethostname(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, started {self.started}"


class RunLockedError(RuntimeError):
    """Another process is writing to this run directory."""

    def __init__(self, run_dir: Path, holder: LockHolder | None) -> None:
        who = holder.describe() if holder else "details unreadable"
        super().__init__(
            f"{run_dir} is in use by another run ({who}); wait for it to finish, "
            "or use another --out directory"
        )
        self.run_dir = run_dir
        self.holder = holder


def _read_holder(fd: int) -> LockHolder | None:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        data = json.loads(os.read(fd, 4096) or b"null")
        return LockHolder(int(data["pid"]), str(data["host"]), str(data["started"]))
    except (ValueError, KeyError, TypeError, OSError):
        return None  # the holder may be between taking the lock and writing its name


@contextmanager
def run_lock(run_dir: Path) -> Iterator[LockHolder]:
    """Hold ``run_dir``'s lock for the ``with`` block; raise :class:`RunLockedError` at
    once (no waiting) when another process holds it."""
    run_dir.mkdir(parents=True, exist_ok=True)
    key = run_dir.resolve()
    with _HELD_GUARD:
        held = _HELD.get(key)
    if held is not None:
        owner, me = held
        if owner != threading.get_ident():  # another thread of this process
            raise RunLockedError(run_dir, me)
        yield me  # re-entered: the outer block releases
        return
    with _locked_file(run_dir) as me:
        with _HELD_GUARD:
            _HELD[key] = (threading.get_ident(), me)
        try:
            yield me
        finally:
            with _HELD_GUARD:
                del _HELD[key]


@contextmanager
def _locked_file(run_dir: Path) -> Iterator[LockHolder]:
    fd = os.open(run_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLockedError(run_dir, _read_holder(fd)) from None
        me = LockHolder.me()
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(asdict(me)) + "\n").encode(), 0)
        try:
            yield me
        finally:
            os.ftruncate(fd, 0)  # emptied, not removed: see the module docstring
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def locks_run_dir(param: str) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Decorate a function so it runs holding the lock of the directory passed as its
    argument ``param``."""

    def deco(fn: Callable[P, T]) -> Callable[P, T]:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            run_dir: Any = sig.bind(*args, **kwargs).arguments[param]
            with run_lock(Path(run_dir)):
                return fn(*args, **kwargs)

        return wrapper

    return deco
