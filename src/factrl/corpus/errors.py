"""Row-level errors shared by every line-oriented reader (corpus formats, datasets).

A reader either raises a :class:`RowFormatError` naming the file, line and reason, or, when
the caller asked to skip bad rows, records a :class:`RowError` and goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["BOM", "OnError", "RowError", "RowFormatError", "iter_json_lines"]

# A UTF-8 byte order mark: some editors and Windows tools begin a file with it. It is not
# part of the data; readers drop it (text reads use the "utf-8-sig" codec).
BOM = b"\xef\xbb\xbf"

OnError = Literal["raise", "skip"]


@dataclass(frozen=True)
class RowError:
    """One malformed row: where it is and what is wrong with it."""

    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


class RowFormatError(ValueError):
    """A row of an input file is malformed; the message names file, line and reason."""

    def __init__(self, file: str | Path, line: int, reason: str) -> None:
        self.file = str(file)
        self.line = line
        self.reason = reason
        super().__init__(f"{self.file}:{line}: {reason}")

    @property
    def row_error(self) -> RowError:
        return RowError(self.file, self.line, self.reason)


def check_on_error(on_error: str) -> None:
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")


def iter_json_lines(path: Path, *, on_position: Callable[[int], None] | None = None) -> Iterator[tuple[int, Any | RowError]]:
    """Yield ``(line_number, value)`` for each non-blank line of a JSON-lines file.

    A line that is not UTF-8 or not JSON yields a :class:`RowError` in place of the value,
    so the caller decides whether to raise or skip. Reading is lazy (one line at a time).
    ``.bz2`` and ``.gz`` files are decompressed as they are read. ``on_position``, when
    given, hears how many stored bytes have been read, every 1024 lines and at the end.
    """
    from factrl.corpus.files import open_binary

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    stream, raw_file = open_binary(path)
    with stream, raw_file:
        for line_no, raw in enumerate(stream, start=1):
            if on_position is not None and line_no % 1024 == 0:
                on_position(raw_file.tell())
            if line_no == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield line_no, RowError(str(path), line_no, f"not UTF-8 ({exc.reason} at byte {exc.start})")
                continue
            try:
                yield line_no, json.loads(text)
            except json.JSONDecodeError as exc:
                yield line_no, RowError(str(path), line_no, f"bad JSON: {exc.msg} (column {exc.colno})")
        if on_position is not None:
            on_position(raw_file.tell())
