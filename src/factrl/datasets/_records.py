"""Rows of a dataset file with the line each starts on, whatever the file's layout.

Benchmarks ship claims as JSON lines (FEVER, Climate-FEVER), as one JSON array (HoVer,
FEVEROUS-S, AVeriTeC, the HARIS sets) or as CSV (EX-FEVER). :func:`json_records` reads
either JSON layout element by element, so an error in an array names the line its
element starts on, just as for JSON lines.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from factrl.corpus.errors import BOM, RowError, iter_json_lines

__all__ = ["csv_records", "json_records", "split_file"]

_WS = " \t\r\n"


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in _WS:
        pos += 1
    return pos


def _array_records(path: Path, text: str, start: int) -> Iterator[tuple[int, Any | RowError]]:
    decoder = json.JSONDecoder()
    pos, line, counted = start + 1, 1, 0  # ``line`` is the line of offset ``counted``

    def line_at(offset: int) -> int:
        nonlocal line, counted
        line += text.count("\n", counted, offset)
        counted = offset
        return line

    pos = _skip_ws(text, pos)
    if pos < len(text) and text[pos] == "]":
        return
    while True:
        pos = _skip_ws(text, pos)
        here = line_at(pos)
        try:
            value, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            # An array cannot be re-synchronised after a syntax error: report and stop.
            at = line_at(min(exc.pos, len(text)))
            yield at, RowError(str(path), at, f"bad JSON: {exc.msg}")
            return
        yield here, value
        pos = _skip_ws(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        if pos < len(text) and text[pos] == "]":
            return
        at = line_at(min(pos, len(text)))
        yield at, RowError(str(path), at, "bad JSON: expected ',' or ']' after an array element")
        return


def json_records(path: Path) -> Iterator[tuple[int, Any | RowError]]:
    """``(line, value)`` for each element of a top-level JSON array, or for each line of a
    JSON-lines file; unreadable input yields a :class:`RowError` in place of the value."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    with path.open("rb") as fh:
        head = fh.read(4096).removeprefix(BOM).lstrip()
    if not head.startswith(b"["):
        yield from iter_json_lines(path)
        return
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        yield 1, RowError(str(path), 1, f"not UTF-8 ({exc.reason} at byte {exc.start})")
        return
    yield from _array_records(path, text, _skip_ws(text, 0))


def csv_records(path: Path) -> Iterator[tuple[int, dict[str, str] | RowError]]:
    """``(line, row)`` for each data row of a CSV file with a header line; ``line`` is the
    line the record starts on (a quoted field may span lines)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    with path.open(newline="", encoding="utf-8-sig") as fh:
        reader = csv.DictReader(fh)
        try:
            reader.fieldnames  # noqa: B018 - reads the header
            start = reader.line_num + 1
            for row in reader:
                if None in row:  # more cells than header columns
                    yield start, RowError(str(path), start, f"{len(row) - 1 + len(row[None])} cells for {len(row) - 1} columns")
                else:
                    yield start, row
                start = reader.line_num + 1
        except (csv.Error, UnicodeDecodeError) as exc:
            yield reader.line_num, RowError(str(path), reader.line_num, f"unreadable CSV: {exc}")


def split_file(source: Path, names: Sequence[str], what: str, split: str) -> Path:
    """``source`` itself when it is a file, else the first of ``<source>/<name>`` that
    exists; a FileNotFoundError naming what was looked for and what is there otherwise."""
    source = Path(source)
    if source.is_file():
        return source
    for name in names:
        if (source / name).is_file():
            return source / name
    have = sorted(p.name for p in source.iterdir() if p.is_file()) if source.is_dir() else []
    raise FileNotFoundError(
        f"{what} split {split!r}: none of {', '.join(names)} in {source} (found: {', '.join(have) or 'nothing'})"
    )
