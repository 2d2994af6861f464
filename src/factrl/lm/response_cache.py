"""An on-disk cache of LM responses: re-running an evaluation costs no request.

One sqlite file; keys are the sha256 of a request's canonical JSON (model, messages,
sampling settings with the seed, and the row's index among identical requests), values
the parsed response as JSON. WAL journaling and a busy timeout make it safe for several
processes writing the same file at once; a write is one ``INSERT OR REPLACE`` in its own
transaction, so a crash never leaves half an entry. An unreadable entry is a miss.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["ResponseCache", "request_key"]


def request_key(payload: Mapping[str, Any]) -> str:
    """sha256 of ``payload`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ResponseCache:
    """``get(key)``/``put(key, value)`` over one sqlite file, shared by threads and processes."""

    def __init__(self, path: str | Path, *, busy_timeout: float = 60.0) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # autocommit (isolation_level=None): every statement is its own transaction.
        self._conn = sqlite3.connect(str(self.path), timeout=busy_timeout, isolation_level=None,
                                     check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        self._wal(busy_timeout)
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
        )
        self.hits = self.misses = 0

    def _wal(self, busy_timeout: float) -> None:
        """Switch the file to WAL mode. Processes opening a new file at once can get
        "database is locked" from this pragma without sqlite's busy handler waiting (it
        needs an exclusive lock), so it is retried with backoff within ``busy_timeout``."""
        deadline, pause = time.monotonic() + busy_timeout, 0.01
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) and "busy" not in str(err) or time.monotonic() + pause > deadline:
                    raise
                time.sleep(pause)
                pause = min(pause * 2, 0.5)

    def __repr__(self) -> str:
        return f"ResponseCache({str(self.path)!r})"

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._conn.execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        value = None
        if row is not None:
            try:
                value = json.loads(row[0])
            except ValueError:
                value = None
        if not isinstance(value, dict):
            self.misses += 1
            return None
        self.hits += 1
        return value

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        text = json.dumps(dict(value), separators=(",", ":"))
        with self._lock:
            self._conn.execute("INSERT OR REPLACE INTO responses (key, value, created) VALUES (?, ?, ?)",
                               (key, text, time.time()))

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
